//! The pipeline's accept step in inbox mode: verified → stored → answered.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, StatusCode};

use super::{Accepted, Inbox, NewEvent};
use crate::{Rejection, Verified};
use sha2::{Digest as _, Sha256};

/// How the receiver stores deliveries in its inbox.
#[derive(Clone)]
pub(crate) struct InboxAccept {
    pub(crate) inbox: Arc<dyn Inbox>,
    pub(crate) status: StatusCode,
    pub(crate) keep_headers: Vec<HeaderName>,
}

/// The builder's inbox settings, kept until `build` so that they apply
/// whatever the order of the calls.
#[derive(Default)]
pub(crate) struct InboxSettings {
    pub(crate) status: Option<StatusCode>,
    pub(crate) keep_headers: Option<Vec<HeaderName>>,
}

impl InboxSettings {
    pub(crate) fn is_empty(&self) -> bool {
        self.status.is_none() && self.keep_headers.is_none()
    }

    pub(crate) fn apply(&mut self, inbox: &mut InboxAccept) {
        if let Some(status) = self.status.take() {
            inbox.status = status;
        }
        if let Some(names) = self.keep_headers.take() {
            inbox.keep_headers = names;
        }
    }
}

impl InboxAccept {
    pub(crate) fn new(inbox: Arc<dyn Inbox>) -> Self {
        Self {
            inbox,
            status: StatusCode::ACCEPTED,
            keep_headers: Vec::new(),
        }
    }

    /// Stores the delivery and says what to answer: the configured status
    /// once stored, a duplicate when already stored, 503 when the store
    /// cannot answer (nothing was acknowledged).
    ///
    /// The key is the dedup key of `id`, or, for a delivery without one, of
    /// the body's SHA-256 (as [`Identity::Content`](crate::Identity::Content)
    /// keys it): a sender's retry of the same body is a duplicate. The
    /// event type is the scheme's, or the body's top-level `"type"` (what
    /// [`Delivery::event`](crate::Delivery::event) dispatches on).
    ///
    /// The headers are read before this returns: the future borrows none
    /// of them.
    pub(crate) fn store<'a>(
        &'a self,
        namespace: &'a str,
        id: Option<String>,
        verified: Verified,
        headers: &dyn crate::HeaderLookup,
        body: Bytes,
        retry_after: Duration,
    ) -> impl Future<Output = Rejection> + Send + 'a {
        let event = self.event(namespace, id, verified, headers, body);
        self.accept(namespace, event, retry_after)
    }

    /// The event to store for a delivery (see [`store`](Self::store)).
    fn event(
        &self,
        namespace: &str,
        id: Option<String>,
        mut verified: Verified,
        headers: &dyn crate::HeaderLookup,
        body: Bytes,
    ) -> NewEvent {
        let id = id.unwrap_or_else(|| {
            format!(
                "sha256:{}",
                crate::scheme::encode_hex(&Sha256::digest(&body))
            )
        });
        let event_type = match verified.event_type.take() {
            Some(event_type) => Some(event_type),
            // A JSON object's `type` only (an array's first string is no type).
            None if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') => {
                crate::event::body_type(&body).ok().flatten()
            }
            None => None,
        };
        let key_namespace = crate::key::key_namespace(namespace, &verified);
        let key = crate::key::store_key(key_namespace, verified.dedup_key(key_namespace, &id));
        // Read in place: the values that are text, in the order received.
        let mut kept = Vec::new();
        for name in &self.keep_headers {
            headers.for_each_value(name, &mut |value| {
                if let Some(value) = crate::headers::header_str(value) {
                    kept.push((name.as_str().to_owned(), value.to_owned()));
                }
            });
        }
        NewEvent {
            key,
            scheme: verified.scheme.to_owned(),
            delivery_id: verified.id,
            event_type,
            matched_key: verified.matched_key.to_string(),
            headers: kept,
            body,
            signed_at: verified.timestamp,
        }
    }

    /// Stores `event` and says what to answer (see [`store`](Self::store)).
    async fn accept(&self, namespace: &str, event: NewEvent, retry_after: Duration) -> Rejection {
        match self.inbox.accept(&event).await {
            Ok(Accepted::Stored) => {
                super::signals::accepted(namespace, "stored");
                Rejection::Stored {
                    status: self.status,
                }
            }
            Ok(Accepted::Duplicate) => {
                super::signals::accepted(namespace, "duplicate");
                Rejection::Duplicate
            }
            Err(error @ super::InboxError::Permanent(_)) => {
                super::signals::accepted(namespace, "refused");
                tracing::error!(error = %error, "inbox refused the delivery at accept; answering 400");
                Rejection::IdRefused
            }
            Err(error) => {
                super::signals::accepted(namespace, "unavailable");
                tracing::error!(error = %error, "inbox unavailable at accept; answering 503");
                Rejection::StoreUnavailable { retry_after }
            }
        }
    }
}
