//! actix-web extractors for the verified delivery.

use std::future::{Ready, ready};

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpMessage as _, HttpRequest};
use bytes::Bytes;
use serde::de::DeserializeOwned;
use webhooks_core::event::Event;
use webhooks_core::{Delivery, ExtractError, Receiver, Verified};

use crate::ExtractRejection;

/// A verified webhook whose body is JSON of type `T`.
///
/// The [`Webhooks`](crate::Webhooks) middleware must wrap the route. JSON that
/// does not fit `T` is a `422` naming the failing field (the claim is then
/// released, so a fixed handler can process the sender's retry); without the
/// middleware, a `500` saying so.
///
/// ```
/// use actix_web::HttpResponse;
/// use actix_webhooks::{VerifiedWebhook, WebhookMeta};
///
/// #[derive(serde::Deserialize)]
/// struct Event { r#type: String }
///
/// async fn handler(WebhookMeta(meta): WebhookMeta, VerifiedWebhook(event): VerifiedWebhook<Event>) -> HttpResponse {
///     println!("received {:?}: {}", meta.id, event.r#type);
///     HttpResponse::NoContent().finish()
/// }
/// ```
#[derive(Debug, Clone)]
pub struct VerifiedWebhook<T>(pub T);

/// A verified webhook as your event enum `E`, dispatched on its event type
/// (GitHub's `X-GitHub-Event`, Shopify's topic, or the body's `"type"` for
/// Stripe and Standard Webhooks): [`Event::Known`] for a type `E` lists,
/// [`Event::Unknown`] for one it does not, which your handler acknowledges
/// with a 2xx instead of a `422` the sender would retry for days. A known
/// type whose data does not fit is a `422` naming the field. The enum shapes
/// are in [`core::event`](crate::core::event).
///
/// ```
/// use actix_web::HttpResponse;
/// use actix_webhooks::{Event, WebhookEvent};
///
/// #[derive(serde::Deserialize)]
/// #[serde(tag = "type", content = "data")]
/// enum GitHubEvent {
///     #[serde(rename = "issues")]
///     Issues { action: String },
///     #[serde(rename = "push")]
///     Push { r#ref: String },
/// }
///
/// async fn on_github(WebhookEvent(event): WebhookEvent<GitHubEvent>) -> HttpResponse {
///     match event {
///         Event::Known(GitHubEvent::Issues { action }) => println!("issue {action}"),
///         Event::Known(GitHubEvent::Push { r#ref }) => println!("push to {}", r#ref),
///         Event::Unknown { event_type } => println!("ignored {event_type}"),
///     }
///     HttpResponse::NoContent().finish()
/// }
/// ```
#[derive(Debug, Clone)]
pub struct WebhookEvent<E>(pub Event<E>);

/// A verified webhook's metadata and its exact raw body.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RawWebhook {
    /// What the verifier established.
    pub meta: Verified,
    /// The exact bytes that were verified.
    pub body: Bytes,
}

/// A verified webhook's metadata (scheme, id, timestamp, event type, matched key).
#[derive(Debug, Clone)]
pub struct WebhookMeta(pub Verified);

/// Reads the delivery the middleware left in the request.
fn with_delivery<T>(
    req: &HttpRequest,
    f: impl FnOnce(&Delivery) -> Result<T, ExtractError>,
) -> Ready<Result<T, ExtractRejection>> {
    let extensions = req.extensions();
    let result = match extensions.get::<Delivery>() {
        Some(delivery) => f(delivery),
        None => Err(ExtractError::MissingLayer),
    };
    ready(
        result.map_err(|error| ExtractRejection::new(error, extensions.get::<Receiver>().cloned())),
    )
}

impl<T: DeserializeOwned> FromRequest for VerifiedWebhook<T> {
    type Error = ExtractRejection;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        with_delivery(req, |delivery| delivery.json().map(VerifiedWebhook))
    }
}

impl<E: DeserializeOwned> FromRequest for WebhookEvent<E> {
    type Error = ExtractRejection;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        with_delivery(req, |delivery| delivery.event().map(WebhookEvent))
    }
}

impl FromRequest for RawWebhook {
    type Error = ExtractRejection;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        with_delivery(req, |delivery| {
            Ok(Self {
                meta: delivery.verified.clone(),
                body: delivery.body.clone(),
            })
        })
    }
}

impl FromRequest for WebhookMeta {
    type Error = ExtractRejection;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        with_delivery(req, |delivery| Ok(Self(delivery.verified.clone())))
    }
}
