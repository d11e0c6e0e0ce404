//! Signed test requests for your actix-web handlers: a `TestRequest` that
//! `POST`s a delivery signed as the provider would sign it (now, with a fresh
//! id), with the signature headers already in actix's header types.
//!
//! ```
//! use actix_web::{App, HttpResponse, test, web};
//! use actix_webhooks::{VerifiedWebhook, Webhooks, testing::signed_request};
//! use actix_webhooks::core::scheme::StandardWebhooks;
//!
//! #[derive(serde::Deserialize)]
//! struct EmailEvent {
//!     r#type: String,
//! }
//!
//! async fn on_email(VerifiedWebhook(event): VerifiedWebhook<EmailEvent>) -> HttpResponse {
//!     assert_eq!(event.r#type, "email.sent");
//!     HttpResponse::NoContent().finish()
//! }
//!
//! # #[actix_web::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let verifier = StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
//! let app = test::init_service(App::new().service(web::resource("/webhooks/email").route(
//!     web::post().to(on_email).wrap(Webhooks::new(verifier.clone())),
//! )))
//! .await;
//!
//! let request = signed_request(&verifier, "/webhooks/email", r#"{"type":"email.sent"}"#)?;
//! let response = test::call_service(&app, request.to_request()).await;
//! assert_eq!(response.status(), 204);
//! # Ok(()) }
//! ```

use actix_web::http::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use actix_web::test::TestRequest;
use webhooks_core::ConfigError;
pub use webhooks_core::testing::{SignTest, TEST_ORIGIN, TEST_URL, TestDelivery};

/// A `POST` [`TestRequest`] to `uri` carrying `delivery`, signed by `scheme`
/// as its provider would sign it (now, with a fresh delivery id, unless the
/// [`TestDelivery`] says otherwise), with its
/// [`content_type`](TestDelivery::content_type) (`application/json` by default).
/// Add to it as to any `TestRequest`, then `.to_request()`.
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
/// [`ConfigError`] when the scheme cannot sign.
pub fn signed_request(
    scheme: &impl SignTest,
    uri: &str,
    delivery: impl Into<TestDelivery>,
) -> Result<TestRequest, ConfigError> {
    let delivery = delivery.into().url_or_test_origin(uri);
    let headers = delivery.signed_headers(scheme)?;
    let body = delivery.signed_body(scheme)?;
    let mut request = TestRequest::post()
        .uri(uri)
        .insert_header((CONTENT_TYPE, delivery.content_type_or_json()))
        .set_payload(body);
    for (name, value) in &headers {
        // http 1.x names and values are valid in actix's http 0.2 types: the same grammar.
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_str().as_bytes()),
            HeaderValue::from_bytes(value.as_bytes()),
        ) {
            request = request.append_header((name, value));
        }
    }
    Ok(request)
}
