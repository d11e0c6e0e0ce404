//! The events an email provider sends.
//!
//! Every event is a JSON object with a `type`, an event `id`, the time it
//! happened (`occurred_at`, Unix milliseconds, by the provider's clock) and
//! `data` naming the email and its recipient:
//!
//! ```
//! use examples::event::{EmailEvent, EventKind};
//!
//! let body = r#"{"type":"email.bounced","id":"evt_1","occurred_at":1700000000123,
//!   "data":{"email_id":"em_1","recipient":"ada@example.com","smtp_status":"550 5.1.1"}}"#;
//! let event: EmailEvent = serde_json::from_str(body)?;
//! assert_eq!(event.kind(), EventKind::Bounced);
//! assert_eq!(event.email_id(), Some("em_1"));
//!
//! // A type this code does not know yet is acknowledged, not an outage:
//! let new: EmailEvent = serde_json::from_str(r#"{"type":"email.scheduled","id":"evt_2","data":{}}"#)?;
//! assert_eq!(new, EmailEvent::Unknown);
//! # Ok::<(), serde_json::Error>(())
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

/// One event about one email.
///
/// Unknown `type`s deserialize to [`EmailEvent::Unknown`] (whatever their
/// other fields), so a provider adding an event type never turns into a
/// stream of `422`s and retries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum EmailEvent {
    /// The provider accepted the email for delivery.
    #[serde(rename = "email.sent")]
    Sent(Event),
    /// The receiving server accepted the email.
    #[serde(rename = "email.delivered")]
    Delivered(Event),
    /// Delivery was delayed; the provider keeps trying.
    #[serde(rename = "email.deferred")]
    Deferred(Event),
    /// The receiving server refused the email for good.
    #[serde(rename = "email.bounced")]
    Bounced(Event<BounceData>),
    /// The recipient marked the email as spam.
    #[serde(rename = "email.complained")]
    Complained(Event),
    /// The recipient unsubscribed through the email.
    #[serde(rename = "email.unsubscribed")]
    Unsubscribed(Event),
    /// The recipient opened the email.
    #[serde(rename = "email.opened")]
    Opened(Event),
    /// The recipient clicked a link in the email.
    #[serde(rename = "email.clicked")]
    Clicked(Event),
    /// An event type this code does not know.
    #[serde(other)]
    Unknown,
}

/// The envelope every known event shares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event<D = EmailData> {
    /// The provider's event id (`evt_…`), the same on every retry.
    pub id: String,
    /// When the event happened, in Unix milliseconds by the provider's clock.
    pub occurred_at: u64,
    /// What the event is about.
    pub data: D,
}

/// The email an event is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmailData {
    /// The provider's id of the email.
    pub email_id: String,
    /// The address the email was sent to.
    pub recipient: String,
}

/// The email a bounce is about, and why it bounced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BounceData {
    /// The provider's id of the email.
    pub email_id: String,
    /// The address the email was sent to.
    pub recipient: String,
    /// The receiving server's SMTP reply (`550 5.1.1`).
    pub smtp_status: String,
}

/// The type of an [`EmailEvent`], without its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// `email.sent`
    Sent,
    /// `email.delivered`
    Delivered,
    /// `email.deferred`
    Deferred,
    /// `email.bounced`
    Bounced,
    /// `email.complained`
    Complained,
    /// `email.unsubscribed`
    Unsubscribed,
    /// `email.opened`
    Opened,
    /// `email.clicked`
    Clicked,
    /// Any other type.
    Unknown,
}

impl EventKind {
    /// Every known kind.
    pub const KNOWN: [Self; 8] = [
        Self::Sent,
        Self::Delivered,
        Self::Deferred,
        Self::Bounced,
        Self::Complained,
        Self::Unsubscribed,
        Self::Opened,
        Self::Clicked,
    ];

    /// The wire name (`email.sent`); `unknown` for [`EventKind::Unknown`].
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sent => "email.sent",
            Self::Delivered => "email.delivered",
            Self::Deferred => "email.deferred",
            Self::Bounced => "email.bounced",
            Self::Complained => "email.complained",
            Self::Unsubscribed => "email.unsubscribed",
            Self::Opened => "email.opened",
            Self::Clicked => "email.clicked",
            Self::Unknown => "unknown",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The SMTP status the simulator puts in bounces.
pub const DEFAULT_SMTP_STATUS: &str = "550 5.1.1";

impl EmailEvent {
    /// A known event of `kind` (bounces get [`DEFAULT_SMTP_STATUS`]);
    /// [`EmailEvent::Unknown`] for [`EventKind::Unknown`].
    #[must_use]
    pub fn new(
        kind: EventKind,
        id: impl Into<String>,
        occurred_at: u64,
        email_id: impl Into<String>,
        recipient: impl Into<String>,
    ) -> Self {
        let (id, email_id, recipient) = (id.into(), email_id.into(), recipient.into());
        let event = |data| Event {
            id: id.clone(),
            occurred_at,
            data,
        };
        let data = EmailData {
            email_id: email_id.clone(),
            recipient: recipient.clone(),
        };
        match kind {
            EventKind::Sent => Self::Sent(event(data)),
            EventKind::Delivered => Self::Delivered(event(data)),
            EventKind::Deferred => Self::Deferred(event(data)),
            EventKind::Bounced => Self::Bounced(Event {
                id,
                occurred_at,
                data: BounceData {
                    email_id,
                    recipient,
                    smtp_status: DEFAULT_SMTP_STATUS.to_owned(),
                },
            }),
            EventKind::Complained => Self::Complained(event(data)),
            EventKind::Unsubscribed => Self::Unsubscribed(event(data)),
            EventKind::Opened => Self::Opened(event(data)),
            EventKind::Clicked => Self::Clicked(event(data)),
            EventKind::Unknown => Self::Unknown,
        }
    }

    /// The event's type.
    #[must_use]
    pub fn kind(&self) -> EventKind {
        match self {
            Self::Sent(_) => EventKind::Sent,
            Self::Delivered(_) => EventKind::Delivered,
            Self::Deferred(_) => EventKind::Deferred,
            Self::Bounced(_) => EventKind::Bounced,
            Self::Complained(_) => EventKind::Complained,
            Self::Unsubscribed(_) => EventKind::Unsubscribed,
            Self::Opened(_) => EventKind::Opened,
            Self::Clicked(_) => EventKind::Clicked,
            Self::Unknown => EventKind::Unknown,
        }
    }

    /// The event id, email id, recipient and timestamp of a known event.
    #[must_use]
    pub fn envelope(&self) -> Option<Envelope<'_>> {
        let (id, occurred_at, email_id, recipient) = match self {
            Self::Sent(e)
            | Self::Delivered(e)
            | Self::Deferred(e)
            | Self::Complained(e)
            | Self::Unsubscribed(e)
            | Self::Opened(e)
            | Self::Clicked(e) => (&e.id, e.occurred_at, &e.data.email_id, &e.data.recipient),
            Self::Bounced(e) => (&e.id, e.occurred_at, &e.data.email_id, &e.data.recipient),
            Self::Unknown => return None,
        };
        Some(Envelope {
            id,
            occurred_at,
            email_id,
            recipient,
        })
    }

    /// The email id of a known event.
    #[must_use]
    pub fn email_id(&self) -> Option<&str> {
        self.envelope().map(|e| e.email_id)
    }
}

/// The fields every known event has, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope<'a> {
    /// The event id.
    pub id: &'a str,
    /// When the event happened (Unix milliseconds).
    pub occurred_at: u64,
    /// The email's id.
    pub email_id: &'a str,
    /// The recipient's address.
    pub recipient: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_kind_round_trips() {
        for kind in EventKind::KNOWN {
            let event = EmailEvent::new(kind, "evt_1", 7, "em_1", "a@example.com");
            let json = serde_json::to_value(&event).unwrap();
            assert_eq!(json["type"], kind.as_str());
            assert_eq!(json["data"]["email_id"], "em_1");
            let back: EmailEvent = serde_json::from_value(json).unwrap();
            assert_eq!(back, event);
            assert_eq!(back.kind(), kind);
        }
    }

    #[test]
    fn bounces_carry_the_smtp_status() {
        let event = EmailEvent::new(EventKind::Bounced, "evt_1", 7, "em_1", "a@example.com");
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["data"]["smtp_status"], DEFAULT_SMTP_STATUS);
    }

    #[test]
    fn unknown_types_with_any_shape_are_unknown() {
        for body in [
            r#"{"type":"email.scheduled"}"#,
            r#"{"type":"domain.verified","id":"evt_9","data":{"domain":"example.com"}}"#,
            r#"{"type":"email.suppressed","data":[1,2,3],"occurred_at":"yesterday"}"#,
        ] {
            let event: EmailEvent = serde_json::from_str(body).unwrap();
            assert_eq!(event, EmailEvent::Unknown, "{body}");
            assert_eq!(event.envelope(), None);
        }
    }

    #[test]
    fn a_known_type_with_missing_data_is_an_error() {
        let body =
            r#"{"type":"email.delivered","id":"evt_1","occurred_at":1,"data":{"email_id":"em_1"}}"#;
        assert!(serde_json::from_str::<EmailEvent>(body).is_err());
    }
}
