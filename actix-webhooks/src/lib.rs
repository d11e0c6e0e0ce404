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
//! use actix_webhooks::core::scheme::StandardWebhooks;
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
//! # fn main() -> Result<(), actix_webhooks::core::ConfigError> {
//! let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
//! let webhooks = Webhooks::new(StandardWebhooks::new(secret)?); // in-process dedup by default
//! let app = App::new()
//!     .route("/health", web::get().to(|| async { "ok" }))
//!     // On the route, not the resource: `GET` stays 405, other routes untouched.
//!     .service(web::resource("/webhooks/email").route(web::post().to(on_email).wrap(webhooks)));
//! # drop(app);
//! # Ok(()) }
//! ```
//!
//! Wrap the route (`web::post().to(h).wrap(..)`, actix-web ≥ 4.1), not the
//! resource: `Resource::wrap` also answers the resource's `405` with a `400`.
//! [`testing::signed_request`] builds signed `TestRequest`s for handler
//! tests; [`WebhookEvent`] dispatches on the event type.
//!
//! All decisions (statuses, `Retry-After`, the duplicate marker, when a claim
//! is completed or released, catching a handler's panic) are made by
//! [`Receiver`]; this crate only reads the body and translates
//! requests and responses, so it answers exactly as `tower-webhooks` does.
//! Configure the pipeline with
//! [`Receiver::builder`](crate::Receiver::builder) and pass it to
//! [`Webhooks::from_receiver`].
//!
//! The handler still sees the exact body: `web::Bytes`, `String` and
//! `web::Json` extractors work behind the middleware, and `web::Bytes` and
//! `String` accept bodies up to the receiver's body limit (not actix's
//! 256 KiB default).

#![cfg_attr(docsrs, feature(doc_cfg))]
// Library code never unwraps: an invariant it relies on is an `expect` that says why.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

#[cfg(feature = "console")]
mod console;
mod error;
mod extract;
#[cfg(feature = "inbox-admin")]
mod inbox_admin;
mod inbox_route;
mod middleware;
pub mod testing;

#[cfg(feature = "console")]
pub use console::{Console, console};
pub use error::{ExtractRejection, WebhookRefusal, WebhookRejection};
pub use extract::{RawWebhook, VerifiedWebhook, WebhookEvent, WebhookMeta};
#[cfg(feature = "inbox-admin")]
pub use inbox_admin::InboxAdmin;
#[cfg(feature = "inbox-admin")]
#[allow(
    deprecated,
    reason = "re-exported for the applications that still call it"
)]
pub use inbox_admin::inbox_admin;
pub use inbox_route::inbox_route;
pub use middleware::{Webhooks, WebhooksMiddleware};
pub use webhooks_core::event::Event;
pub use webhooks_core::{
    self as core, ConfigError, Delivery, Receiver, Refusal, Rejection, Verified,
};

#[cfg(test)]
mod tests;
