//! # tower-webhooks
//!
//! A tower [`Layer`](tower_layer::Layer) and axum extractors that receive webhooks
//! safely: the body is buffered up to a limit, the signature verified on the
//! exact raw bytes, replays and concurrent retries deduplicated, and the
//! handler given a typed, verified event.
//!
//! ```
//! use axum::{Router, http::StatusCode, routing::post};
//! use tower_webhooks::{VerifiedWebhook, WebhookLayer};
//! use webhooks_core::scheme::StandardWebhooks;
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
//! # fn main() -> Result<(), webhooks_core::ConfigError> {
//! let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
//! let app: Router = Router::new()
//!     .route("/webhooks/email", post(on_email))
//!     .layer(WebhookLayer::new(StandardWebhooks::new(secret)?)); // in-process dedup by default
//! # Ok(()) }
//! ```
//!
//! All decisions (statuses, `Retry-After`, the duplicate marker, when a claim
//! is completed or released) are made by [`webhooks_core::Receiver`]; this crate
//! only reads the body and translates requests and responses. Configure the
//! pipeline with [`Receiver::builder`](webhooks_core::Receiver::builder) and
//! pass it to [`WebhookLayer::from_receiver`].

mod extract;
#[cfg(feature = "inbox-admin")]
mod inbox_admin;
mod layer;

pub use extract::{ExtractRejection, RawWebhook, VerifiedWebhook, WebhookMeta};
#[cfg(feature = "inbox-admin")]
pub use inbox_admin::InboxAdmin;
pub use layer::{ResponseFuture, Webhook, WebhookLayer};
pub use webhooks_core::{self as core, Delivery, Receiver, Rejection, Verified};
