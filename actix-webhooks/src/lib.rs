//! # actix-webhooks
//!
//! An actix-web middleware and extractors that receive webhooks safely: the
//! body is buffered up to a limit, the signature verified on the exact raw
//! bytes, replays and concurrent retries deduplicated, and the handler given a
//! typed, verified event.
//!
//! ```
//! use actix_web::{App, HttpResponse, web};
//! use actix_webhooks::{VerifiedWebhook, Webhooks};
//! use webhooks_core::scheme::StandardWebhooks;
//!
//! #[derive(serde::Deserialize)]
//! struct EmailEvent {
//!     r#type: String,
//! }
//!
//! async fn on_email(VerifiedWebhook(event): VerifiedWebhook<EmailEvent>) -> HttpResponse {
//!     println!("got {}", event.r#type);
//!     HttpResponse::NoContent().finish()
//! }
//!
//! # fn main() -> Result<(), webhooks_core::ConfigError> {
//! let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
//! let app = App::new().service(
//!     web::resource("/webhooks/email")
//!         .wrap(Webhooks::new(StandardWebhooks::new(secret)?)) // in-process dedup by default
//!         .route(web::post().to(on_email)),
//! );
//! # drop(app);
//! # Ok(()) }
//! ```
//!
//! All decisions (statuses, `Retry-After`, the duplicate marker, when a claim
//! is completed or released, catching a handler's panic) are made by
//! [`webhooks_core::Receiver`]; this crate only reads the body and translates
//! requests and responses, so it answers exactly as `tower-webhooks` does.
//! Configure the pipeline with
//! [`Receiver::builder`](webhooks_core::Receiver::builder) and pass it to
//! [`Webhooks::from_receiver`].
//!
//! The handler still sees the exact body: `web::Bytes`, `String` and
//! `web::Json` extractors work behind the middleware, and `web::Bytes` and
//! `String` accept bodies up to the receiver's body limit (not actix's
//! 256 KiB default).

mod error;
mod extract;
mod middleware;

pub use error::{ExtractRejection, WebhookRejection};
pub use extract::{RawWebhook, VerifiedWebhook, WebhookMeta};
pub use middleware::{Webhooks, WebhooksMiddleware};
pub use webhooks_core::{self as core, Delivery, Receiver, Rejection, Verified};

#[cfg(test)]
mod tests;
