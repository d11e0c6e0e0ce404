//! # tower-webhooks
//!
//! A tower [`Layer`](tower_layer::Layer) and axum extractors that receive webhooks
//! safely: the body is buffered up to a limit, the signature verified on the
//! exact raw bytes, replays and concurrent retries deduplicated, and the
//! handler given a typed, verified event.
//!
//! ```
//! use axum::{Router, http::StatusCode, routing::{get, post}};
//! use tower_webhooks::{VerifiedWebhook, WebhookLayer};
//! use tower_webhooks::core::scheme::StandardWebhooks;
//!
//! #[derive(serde::Deserialize)]
//! struct EmailEvent {
//!     r#type: String,
//! }
//!
//! async fn on_email(VerifiedWebhook(event): VerifiedWebhook<EmailEvent>) -> StatusCode {
//!     println!("got {}", event.r#type);
//!     StatusCode::NO_CONTENT
//! }
//!
//! # fn main() -> Result<(), tower_webhooks::core::ConfigError> {
//! let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
//! let webhooks = WebhookLayer::new(StandardWebhooks::new(secret)?); // in-process dedup by default
//! let app: Router = Router::new()
//!     .route("/health", get(|| async { "ok" }))
//!     // On the route's `post(..)`: other routes, 404 and 405 stay untouched.
//!     .route("/webhooks/email", post(on_email).route_layer(webhooks));
//! # Ok(()) }
//! ```
//!
//! Place the layer with `route_layer` on each webhook route's `post(..)`,
//! not `Router::layer` (every route and the fallback would demand webhook
//! headers) nor `Router::route_layer` (a `GET` to the webhook path would
//! answer `400` instead of `405`). [`testing::signed_request`] builds signed
//! requests for handler tests; [`WebhookEvent`] dispatches on the event type.
//!
//! All decisions (statuses, `Retry-After`, the duplicate marker, when a claim
//! is completed or released) are made by [`Receiver`]; this crate
//! only reads the body and translates requests and responses. Configure the
//! pipeline with [`Receiver::builder`](crate::Receiver::builder) and
//! pass it to [`WebhookLayer::from_receiver`].

#![cfg_attr(docsrs, feature(doc_cfg))]
// Library code never unwraps: an invariant it relies on is an `expect` that says why.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

#[cfg(feature = "console")]
mod console;
mod extract;
#[cfg(feature = "inbox-admin")]
mod inbox_admin;
mod inbox_route;
mod layer;
mod refusal;
pub mod testing;

#[cfg(feature = "console")]
pub use console::Console;
pub use extract::{ExtractRejection, RawWebhook, VerifiedWebhook, WebhookEvent, WebhookMeta};
#[cfg(feature = "inbox-admin")]
pub use inbox_admin::InboxAdmin;
pub use inbox_route::InboxRoute;
pub use layer::{ResponseFuture, Webhook, WebhookLayer};
pub use refusal::WebhookRefusal;
pub use webhooks_core::event::Event;
pub use webhooks_core::{
    self as core, ConfigError, Delivery, Receiver, Refusal, Rejection, Verified,
};
