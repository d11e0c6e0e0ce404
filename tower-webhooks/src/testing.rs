//! Signed test requests for your axum handlers: `POST` a delivery signed as
//! the provider would sign it (now, with a fresh id) and send it through your
//! router with `oneshot`.
//!
//! ```
//! use axum::{Router, http::StatusCode, routing::post};
//! use tower::ServiceExt as _; // for `oneshot`
//! use tower_webhooks::{VerifiedWebhook, WebhookLayer, testing::signed_request};
//! use tower_webhooks::core::scheme::StandardWebhooks;
//!
//! #[derive(serde::Deserialize)]
//! struct EmailEvent {
//!     r#type: String,
//! }
//!
//! async fn on_email(VerifiedWebhook(event): VerifiedWebhook<EmailEvent>) -> StatusCode {
//!     assert_eq!(event.r#type, "email.sent");
//!     StatusCode::NO_CONTENT
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let verifier = StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
//! let app: Router = Router::new().route(
//!     "/webhooks/email",
//!     post(on_email).route_layer(WebhookLayer::new(verifier.clone())),
//! );
//!
//! let request = signed_request(&verifier, "/webhooks/email", r#"{"type":"email.sent"}"#)?;
//! let response = app.oneshot(request).await?;
//! assert_eq!(response.status(), StatusCode::NO_CONTENT);
//! # Ok(()) }
//! ```

use axum_core::body::Body;
use http::{Method, Request, header};
use webhooks_core::ConfigError;
pub use webhooks_core::testing::{SignTest, TEST_ORIGIN, TEST_URL, TestDelivery};

/// A `POST` to `uri` carrying `delivery`, signed by `scheme` as its provider
/// would sign it (now, with a fresh delivery id, unless the
/// [`TestDelivery`] says otherwise), with its
/// [`content_type`](TestDelivery::content_type) (`application/json` by default).
///
/// URL-signing schemes (Twilio, Square, Mandrill, HubSpot, a `GenericHmac`
/// signing `{url}`) sign [`TEST_ORIGIN`] followed by `uri` (so build them
/// with `PublicUrl::base(TEST_ORIGIN)` in tests), or the delivery's own
/// [`url`](TestDelivery::url) when set: the URL your `PublicUrl` rebuilds
/// for a request to `uri`. Mailgun's body is the delivery's event data
/// wrapped with its signature ([`TestDelivery::signed_body`]).
///
/// # Errors
///
/// [`ConfigError`] when the scheme cannot sign, or `uri` is not a valid URI.
pub fn signed_request(
    scheme: &impl SignTest,
    uri: &str,
    delivery: impl Into<TestDelivery>,
) -> Result<Request<Body>, ConfigError> {
    let delivery = delivery.into().url_or_test_origin(uri);
    let headers = delivery.signed_headers(scheme)?;
    let body = delivery.signed_body(scheme)?;
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header(header::CONTENT_TYPE, delivery.content_type_or_json())
        .body(Body::from(body))
        .map_err(|_| ConfigError::Setting("test request URI is not a valid URI"))?;
    request.headers_mut().extend(headers);
    Ok(request)
}
