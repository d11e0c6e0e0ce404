//! What a [`Worker`](super::Worker)'s handler gets: the [`Job`], its event
//! decoded as a [`JobEvent`], and the [`HandlerError`] it may fail with.

use std::fmt;
use std::time::SystemTime;

use bytes::Bytes;
use serde::de::DeserializeOwned;

use crate::ExtractError;
use crate::event::Event;
use crate::inbox::EventMeta;

/// What the handler gets: the typed event (see [`JobEvent`]: the body as
/// JSON, like the `VerifiedWebhook<T>` extractors, or an [`Event<E>`]
/// dispatched on its type, like `WebhookEvent<E>`), the attempt number, the
/// first receipt time and the metadata.
///
/// `Debug` shows the body's length, never its content.
#[non_exhaustive]
pub struct Job<T> {
    /// The event.
    pub event: T,
    /// This attempt's number, from 1.
    pub attempt: u32,
    /// When the inbox first stored the delivery.
    pub received_at: SystemTime,
    /// Scheme, delivery id, event type, matched key, kept headers, signed timestamp.
    pub meta: EventMeta,
    /// The exact verified body.
    pub body: Bytes,
}

impl<T> fmt::Debug for Job<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("attempt", &self.attempt)
            .field("received_at", &self.received_at)
            .field("meta", &self.meta)
            .field("body_len", &self.body.len())
            .finish_non_exhaustive()
    }
}

/// What a [`Worker`](super::Worker)'s [`Job`]s carry, decoded from the stored event.
///
/// - Any `T: DeserializeOwned`: the body as JSON. A body that does not fit
///   is a failed attempt (retried, then dead-lettered).
/// - [`Event<E>`]: dispatched on the event type exactly as the request
///   path's `WebhookEvent<E>` ([`Delivery::event`](crate::Delivery::event)),
///   with the type recorded at accept (the scheme's header, or the body's
///   `"type"`). A type `E` does not list is **completed at once**, without
///   running the handler and never retried (counted as
///   `webhooks_inbox_attempts_total{outcome="unknown_type"}`), so the
///   handler only ever sees [`Event::Known`]. A known type whose data does
///   not fit its variant is a failed attempt whose error names the field,
///   never its value.
///
/// ```
/// # #[cfg(feature = "sqlite")]
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use webhooks_core::event::Event;
/// use webhooks_core::inbox::{Inbox, Job, NewEvent, SqliteInbox, Worker};
///
/// #[derive(serde::Deserialize)]
/// #[serde(tag = "type", content = "data")]
/// enum Email {
///     #[serde(rename = "email.sent")]
///     Sent { email_id: String },
/// }
///
/// let inbox = SqliteInbox::connect("sqlite::memory:").await?;
/// inbox.migrate().await?;
/// let inbox: Arc<dyn Inbox> = Arc::new(inbox);
/// let sent = r#"{"type":"email.sent","data":{"email_id":"em_1"}}"#;
/// let new = r#"{"type":"email.clicked","data":{}}"#;
/// inbox.accept(&NewEvent::new("webhooks:test:1", "test", sent).with_event_type("email.sent")).await?;
/// inbox.accept(&NewEvent::new("webhooks:test:2", "test", new).with_event_type("email.clicked")).await?;
///
/// let worker = Worker::builder(Arc::clone(&inbox)).handler(|job: Job<Event<Email>>| async move {
///     let Event::Known(Email::Sent { email_id }) = job.event else { unreachable!() };
///     assert_eq!(email_id, "em_1");
///     Ok::<(), std::io::Error>(())
/// });
/// let report = worker.run_until_idle().await;
/// assert_eq!((report.completed, report.unknown_type), (1, 1));
/// # Ok(()) }
/// # #[cfg(not(feature = "sqlite"))] fn main() {}
/// ```
pub trait JobEvent: Sized + Send + 'static {
    /// Decodes the stored body, whose event type was recorded as `event_type`.
    ///
    /// # Errors
    ///
    /// [`ExtractError::Json`] naming the failing field: a failed attempt.
    fn decode(event_type: Option<&str>, body: &[u8]) -> Result<Self, ExtractError>;

    /// The event type, when it is one the handler does not know: the worker
    /// then completes the event without running the handler.
    fn unknown_type(&self) -> Option<&str> {
        None
    }
}

impl<T: DeserializeOwned + Send + 'static> JobEvent for T {
    fn decode(_: Option<&str>, body: &[u8]) -> Result<Self, ExtractError> {
        crate::delivery::parse_json(body)
    }
}

impl<E: DeserializeOwned + Send + 'static> JobEvent for Event<E> {
    fn decode(event_type: Option<&str>, body: &[u8]) -> Result<Self, ExtractError> {
        crate::event::dispatch(event_type, body)
    }

    fn unknown_type(&self) -> Option<&str> {
        match self {
            Event::Known(_) => None,
            Event::Unknown { event_type } => Some(event_type),
        }
    }
}

/// A handler's failure, as stored with the event: its `Display` text.
///
/// Keep secrets and the body out of your error messages: they are stored
/// and shown in the dead-letter admin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerError(pub String);

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HandlerError {}
