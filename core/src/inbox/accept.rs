//! The pipeline's accept step in inbox mode: verified → stored → answered.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, StatusCode};

use super::{Accepted, Inbox, NewEvent};
use crate::dedup::ClaimToken;
use crate::{Rejection, Verified};

/// How the receiver stores deliveries in its inbox.
#[derive(Clone)]
pub(crate) struct InboxAccept {
    pub(crate) inbox: Arc<dyn Inbox>,
    pub(crate) status: StatusCode,
    pub(crate) keep_headers: Vec<HeaderName>,
}

impl InboxAccept {
    pub(crate) fn new(inbox: Arc<dyn Inbox>) -> Self {
        Self {
            inbox,
            status: StatusCode::ACCEPTED,
            keep_headers: Vec::new(),
        }
    }

    /// Stores the delivery under `key` (a random one when the delivery has no
    /// id: it cannot be deduplicated) and says what to answer: the configured
    /// status once stored, a duplicate when already stored, 503 when the
    /// store cannot answer (nothing was acknowledged).
    pub(crate) async fn store(
        &self,
        namespace: &str,
        id: Option<String>,
        verified: Verified,
        headers: &HeaderMap,
        body: Bytes,
        retry_after: Duration,
    ) -> Rejection {
        let id = id.unwrap_or_else(|| format!("~{}", ClaimToken::random().to_hex()));
        let key = crate::receiver::store_key(namespace, verified.dedup_key(namespace, &id));
        let kept = self
            .keep_headers
            .iter()
            .flat_map(|name| {
                headers.get_all(name).iter().filter_map(move |value| {
                    value
                        .to_str()
                        .ok()
                        .map(|v| (name.as_str().to_owned(), v.to_owned()))
                })
            })
            .collect();
        let event = NewEvent {
            key,
            scheme: verified.scheme.to_owned(),
            delivery_id: verified.id,
            event_type: verified.event_type,
            matched_key: verified.matched_key.to_string(),
            headers: kept,
            body,
            signed_at: verified.timestamp,
        };
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
