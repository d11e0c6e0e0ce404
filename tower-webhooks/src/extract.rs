//! axum extractors for the verified delivery.

use axum_core::extract::FromRequestParts;
use axum_core::response::{IntoResponse, Response};
use bytes::Bytes;
use http::request::Parts;
use serde::de::DeserializeOwned;
use webhooks_core::event::Event;
use webhooks_core::{Delivery, ExtractError, Receiver, Rejection, Verified};

/// A verified webhook whose body is JSON of type `T`.
///
/// The [`WebhookLayer`](crate::WebhookLayer) must wrap the route. JSON that
/// does not fit `T` is a `422` naming the failing field (the claim is then
/// released, so a fixed handler can process the sender's retry); without the
/// layer, a `500` saying so.
///
/// ```
/// use axum::http::StatusCode;
/// use tower_webhooks::{VerifiedWebhook, WebhookMeta};
///
/// #[derive(serde::Deserialize)]
/// struct Event { r#type: String }
///
/// async fn handler(WebhookMeta(meta): WebhookMeta, VerifiedWebhook(event): VerifiedWebhook<Event>) -> StatusCode {
///     tracing::info!(id = ?meta.id, kind = %event.r#type, "received");
///     StatusCode::NO_CONTENT
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
/// use axum::http::StatusCode;
/// use tower_webhooks::{Event, WebhookEvent};
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
/// async fn on_github(WebhookEvent(event): WebhookEvent<GitHubEvent>) -> StatusCode {
///     match event {
///         Event::Known(GitHubEvent::Issues { action }) => tracing::info!(%action, "issue"),
///         Event::Known(GitHubEvent::Push { r#ref }) => tracing::info!(%r#ref, "push"),
///         Event::Unknown { event_type } => tracing::debug!(%event_type, "ignored"),
///     }
///     StatusCode::NO_CONTENT
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

/// Why an extractor of this crate failed: `500` when the layer is missing,
/// `422` when the JSON does not fit.
///
/// Its response is [`Rejection::Extract`] rendered by the layer's
/// [`Receiver`] (so an `on_reject` hook shapes it like every other
/// rejection); without the layer, [`ExtractError::to_response`].
#[derive(Debug, Clone)]
pub struct ExtractRejection {
    error: ExtractError,
    receiver: Option<Receiver>,
}

impl ExtractRejection {
    fn new(error: ExtractError, parts: &Parts) -> Self {
        Self {
            error,
            receiver: parts.extensions.get::<Receiver>().cloned(),
        }
    }

    /// What failed.
    #[must_use]
    pub fn error(&self) -> &ExtractError {
        &self.error
    }

    /// What failed.
    #[must_use]
    pub fn into_error(self) -> ExtractError {
        self.error
    }
}

impl From<ExtractError> for ExtractRejection {
    fn from(error: ExtractError) -> Self {
        Self {
            error,
            receiver: None,
        }
    }
}

impl IntoResponse for ExtractRejection {
    fn into_response(self) -> Response {
        let rejection = Rejection::Extract(self.error);
        let response = match &self.receiver {
            Some(receiver) => receiver.rejection_response(&rejection),
            None => rejection.to_response(),
        };
        response.map(axum_core::body::Body::from)
    }
}

fn delivery(parts: &Parts) -> Result<&Delivery, ExtractRejection> {
    parts
        .extensions
        .get::<Delivery>()
        .ok_or_else(|| ExtractRejection::new(ExtractError::MissingLayer, parts))
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for VerifiedWebhook<T> {
    type Rejection = ExtractRejection;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        delivery(parts)?
            .json()
            .map(VerifiedWebhook)
            .map_err(|error| ExtractRejection::new(error, parts))
    }
}

impl<S: Send + Sync, E: DeserializeOwned> FromRequestParts<S> for WebhookEvent<E> {
    type Rejection = ExtractRejection;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        delivery(parts)?
            .event()
            .map(WebhookEvent)
            .map_err(|error| ExtractRejection::new(error, parts))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for RawWebhook {
    type Rejection = ExtractRejection;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let delivery = delivery(parts)?;
        Ok(Self {
            meta: delivery.verified.clone(),
            body: delivery.body.clone(),
        })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for WebhookMeta {
    type Rejection = ExtractRejection;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(delivery(parts)?.verified.clone()))
    }
}
