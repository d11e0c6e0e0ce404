//! Typed events dispatched on the delivery's event type, with an
//! acknowledged fallback for types your code does not know yet.
//!
//! Providers name the event type in one of two places:
//!
//! * a header: GitHub's `X-GitHub-Event`, Shopify's `X-Shopify-Topic` (and
//!   any [`GenericHmac`](crate::scheme::GenericHmac) with an event type
//!   header), reported in [`Verified::event_type`](crate::Verified::event_type);
//!   the body does not repeat it;
//! * the body's top-level `"type"`: Stripe, Standard Webhooks (Svix, Resend…).
//!
//! [`Delivery::event`] reads both the same way: describe your events as a
//! serde enum tagged with `"type"`, and you get [`Event::Known`] for a type
//! the enum lists, or [`Event::Unknown`] for one it does not. Answer the
//! unknown one with a 2xx: a `422` would make the sender retry it for days.
//!
//! | where the type is | enum attributes | what is deserialized |
//! |---|---|---|
//! | header (GitHub, Shopify) | `#[serde(tag = "type", content = "data")]` | `{"type": <header>, "data": <body>}` |
//! | body, data beside it (Stripe: `{"type", "data": {"object"}, …}`; Standard Webhooks: `{"type", "timestamp", "data"}`) | `#[serde(tag = "type", content = "data")]` or `#[serde(tag = "type")]` | the body |
//! | body, fields beside it | `#[serde(tag = "type")]` | the body |
//!
//! A known type whose data does not fit its variant is still a `422` naming
//! the field, so a real schema mismatch is seen (and the claim released for
//! the fixed deployment). A unit variant (no fields) is built from the type
//! alone, whatever data came with it.
//!
//! You do not need a `#[serde(other)] Unknown` variant here. Deserialized
//! directly (`VerifiedWebhook<T>`, `serde_json::from_slice`), that advice
//! works only for internally tagged enums (`tag = "type"` alone): on an
//! adjacently tagged enum (`tag = "type", content = "data"`) the unit
//! variant cannot take the `data`, and every new event type becomes a `422`
//! that the sender retries for days.
//!
//! ```
//! use webhooks_core::{Delivery, MatchedKey, Verified, event::Event};
//!
//! #[derive(serde::Deserialize)]
//! #[serde(tag = "type", content = "data")]
//! enum GitHubEvent {
//!     #[serde(rename = "issues")]
//!     Issues { action: String },
//!     #[serde(rename = "ping")]
//!     Ping { zen: String },
//! }
//!
//! // As the GitHub verifier reports a delivery: the type from X-GitHub-Event.
//! let verified = Verified::new("github", MatchedKey::Secret(0)).with_event_type("issues");
//! let delivery = Delivery::new(verified, None, r#"{"action":"opened"}"#.into());
//! let Event::Known(GitHubEvent::Issues { action }) = delivery.event()? else { panic!() };
//! assert_eq!(action, "opened");
//!
//! // A type added by GitHub after this code was written: acknowledged.
//! let verified = Verified::new("github", MatchedKey::Secret(0)).with_event_type("star");
//! let delivery = Delivery::new(verified, None, r#"{"action":"created"}"#.into());
//! let event = delivery.event::<GitHubEvent>()?;
//! assert!(matches!(&event, Event::Unknown { event_type } if event_type == "star"));
//! # Ok::<(), webhooks_core::ExtractError>(())
//! ```

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer, Visitor};

use crate::delivery::json_error;
use crate::{Delivery, ExtractError};

/// The tag every event enum is dispatched on.
const TAG: &str = "type";

/// A delivery's event: one your enum `E` knows, or one it does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<E> {
    /// The event type is one of `E`'s variants, and the data fits it.
    Known(E),
    /// The event type is none of `E`'s variants: acknowledge it (2xx).
    Unknown {
        /// The type the sender gave.
        event_type: String,
    },
}

impl<E> Event<E> {
    /// The known event, if it is one.
    pub fn known(self) -> Option<E> {
        match self {
            Self::Known(event) => Some(event),
            Self::Unknown { .. } => None,
        }
    }
}

impl Delivery {
    /// The event, dispatched on its type: [`Verified::event_type`](crate::Verified::event_type)
    /// when the scheme reports one from a header, else the body's
    /// top-level `"type"`. See the [module docs](crate::event) for the enum
    /// shapes.
    ///
    /// # Errors
    ///
    /// [`ExtractError::Json`] (a `422`) when the body is not JSON, has no
    /// event type anywhere, or a known type's data does not fit its variant.
    pub fn event<E: DeserializeOwned>(&self) -> Result<Event<E>, ExtractError> {
        let event = self.dispatch();
        crate::delivery::warn_if_unfit(self.verified.scheme, &event);
        event
    }

    /// [`event`](Self::event), without the log.
    fn dispatch<E: DeserializeOwned>(&self) -> Result<Event<E>, ExtractError> {
        dispatch(self.verified.event_type.as_deref(), &self.body)
    }
}

/// The event of a delivery whose scheme reported `event_type` (from a
/// header), or none: what [`Delivery::event`] returns, and what an inbox
/// [`Worker`](crate::inbox::Worker) of [`Event<E>`] decodes from a stored
/// event (whose type was recorded at accept).
pub(crate) fn dispatch<E: DeserializeOwned>(
    event_type: Option<&str>,
    body: &[u8],
) -> Result<Event<E>, ExtractError> {
    let body_type = body_type(body)?;
    let event_type = match (event_type, &body_type) {
        (Some(header), _) => header,
        (None, Some(body)) => body.as_str(),
        (None, None) => {
            return Err(ExtractError::Json {
                path: TAG.into(),
                message: "no event type in the headers or the body".into(),
            });
        }
    };
    let from_type_alone = match probe::<E>(event_type) {
        Probed::Unknown => {
            return Ok(Event::Unknown {
                event_type: event_type.to_owned(),
            });
        }
        Probed::Known => None,
        Probed::FromTypeAlone(event) => Some(event),
    };
    let result = if body_type.as_deref() == Some(event_type) {
        // The body carries its own type: deserialize it as it is.
        crate::delivery::parse_json(body)
    } else {
        wrapped(body, event_type)
    };
    match (result, from_type_alone) {
        (Ok(event), _) => Ok(Event::Known(event)),
        // A unit variant of an adjacently tagged enum cannot take the
        // `data` the sender sent; it wants the type alone.
        (Err(ExtractError::Json { path, .. }), Some(event)) if path == "data" => {
            Ok(Event::Known(event))
        }
        (Err(e), _) => Err(e),
    }
}

/// `E` from `{"type": <event_type>, "data": <body>}`, the tag first so
/// that serde reads the data in place (and the error path runs through
/// it) rather than buffering it.
fn wrapped<E: DeserializeOwned>(body: &[u8], event_type: &str) -> Result<E, ExtractError> {
    let tag = serde_json::to_string(event_type).map_err(|e| json_error_plain(&e))?;
    let mut document = Vec::with_capacity(body.len() + tag.len() + 20);
    document.extend_from_slice(b"{\"type\":");
    document.extend_from_slice(tag.as_bytes());
    document.extend_from_slice(b",\"data\":");
    document.extend_from_slice(body);
    document.push(b'}');
    let mut de = serde_json::Deserializer::from_slice(&document);
    let value = serde_path_to_error::deserialize(&mut de).map_err(json_error)?;
    de.end().map_err(|e| json_error_plain(&e))?;
    Ok(value)
}

/// The body's top-level `"type"`, if it is a string; the rest is skipped
/// without being kept.
pub(crate) fn body_type(body: &[u8]) -> Result<Option<String>, ExtractError> {
    #[derive(Deserialize)]
    struct Tagged {
        #[serde(rename = "type")]
        kind: Option<serde_json::Value>,
    }
    let tagged: Tagged = serde_json::from_slice(body).map_err(|e| json_error_plain(&e))?;
    Ok(match tagged.kind {
        Some(serde_json::Value::String(kind)) => Some(kind),
        _ => None,
    })
}

/// A JSON error at the root, without the sender's values.
fn json_error_plain(e: &serde_json::Error) -> ExtractError {
    ExtractError::Json {
        path: ".".into(),
        message: crate::delivery::scrub(&e.to_string()),
    }
}

/// What a probe with the type alone says about `E`.
enum Probed<E> {
    /// No variant of `E` has this type.
    Unknown,
    /// A variant has it and needs data.
    Known,
    /// A variant has it and is built from the type alone (a unit variant).
    FromTypeAlone(E),
}

/// Whether `E` has a variant for `event_type`: `E` is deserialized from a
/// probe holding only the tag, and serde's derive reports an unknown tag
/// through [`de::Error::unknown_variant`], which the probe's error records.
/// Internally, adjacently and externally tagged enums all go through it; any
/// other failure (a missing `data`, a missing field) means the tag was known.
fn probe<E: DeserializeOwned>(event_type: &str) -> Probed<E> {
    match E::deserialize(Probe(event_type)) {
        Ok(event) => Probed::FromTypeAlone(event),
        Err(ProbeError {
            unknown_variant: true,
        }) => Probed::Unknown,
        Err(_) => Probed::Known,
    }
}

/// A deserializer that is the map `{"type": event_type}` (or, asked for an
/// externally tagged enum, the variant `event_type`).
struct Probe<'a>(&'a str);

#[derive(Debug)]
struct ProbeError {
    unknown_variant: bool,
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.unknown_variant {
            "unknown event type"
        } else {
            "known event type"
        })
    }
}

impl std::error::Error for ProbeError {}

impl de::Error for ProbeError {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Self {
            unknown_variant: false,
        }
    }

    fn unknown_variant(_: &str, _: &'static [&'static str]) -> Self {
        Self {
            unknown_variant: true,
        }
    }
}

impl<'de> Deserializer<'de> for Probe<'_> {
    type Error = ProbeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        let tag = std::iter::once((TAG, self.0.to_owned()));
        visitor.visit_map(de::value::MapDeserializer::new(tag))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, ProbeError> {
        if variants.contains(&self.0) {
            Err(de::Error::custom("known"))
        } else {
            Err(de::Error::unknown_variant(self.0, variants))
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MatchedKey, Verified};

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(tag = "type")]
    enum Internal {
        #[serde(rename = "email.sent")]
        Sent { email_id: String },
        #[serde(rename = "email.opened")]
        Opened,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(tag = "type", content = "data")]
    enum Adjacent {
        #[serde(rename = "email.sent")]
        Sent { email_id: String },
        #[serde(rename = "email.opened")]
        Opened,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    enum External {
        #[serde(rename = "email.sent")]
        Sent,
    }

    #[test]
    fn probe_tells_known_from_unknown_for_every_tagging() {
        fn is_known<E: DeserializeOwned>(event_type: &str) -> bool {
            !matches!(probe::<E>(event_type), Probed::Unknown)
        }
        assert!(is_known::<Internal>("email.sent"));
        assert!(is_known::<Internal>("email.opened"));
        assert!(!is_known::<Internal>("email.new"));
        assert!(is_known::<Adjacent>("email.sent"));
        assert!(is_known::<Adjacent>("email.opened"));
        assert!(!is_known::<Adjacent>("email.new"));
        assert!(is_known::<External>("email.sent"));
        assert!(!is_known::<External>("email.new"));
        assert!(matches!(
            probe::<Adjacent>("email.opened"),
            Probed::FromTypeAlone(Adjacent::Opened)
        ));
    }

    #[test]
    fn unit_variants_ignore_the_data() {
        for d in [
            delivery(None, r#"{"type":"email.opened","data":{"at":1}}"#),
            delivery(Some("email.opened"), r#"{"at":1}"#),
        ] {
            assert_eq!(
                d.event::<Adjacent>().unwrap(),
                Event::Known(Adjacent::Opened)
            );
        }
        let d = delivery(None, r#"{"type":"email.opened","at":1}"#);
        assert_eq!(
            d.event::<Internal>().unwrap(),
            Event::Known(Internal::Opened)
        );
    }

    fn delivery(header: Option<&str>, body: &'static str) -> Delivery {
        let mut verified = Verified::new("test", MatchedKey::Secret(0));
        if let Some(kind) = header {
            verified = verified.with_event_type(kind);
        }
        Delivery::new(verified, None, body.into())
    }

    #[test]
    fn body_typed_events() {
        let body = r#"{"type":"email.sent","data":{"email_id":"em_1"},"email_id":"em_1"}"#;
        let d = delivery(None, body);
        assert_eq!(
            d.event::<Internal>().unwrap(),
            Event::Known(Internal::Sent {
                email_id: "em_1".into()
            })
        );
        assert_eq!(
            d.event::<Adjacent>().unwrap(),
            Event::Known(Adjacent::Sent {
                email_id: "em_1".into()
            })
        );
        let new = delivery(None, r#"{"type":"email.new","data":{"x":1}}"#);
        for event in [
            new.event::<Internal>().map(|_| ()).err(),
            new.event::<Adjacent>().map(|_| ()).err(),
        ] {
            assert_eq!(event, None);
        }
        assert_eq!(
            new.event::<Adjacent>().unwrap(),
            Event::Unknown {
                event_type: "email.new".into()
            }
        );
    }

    #[test]
    fn header_typed_events_wrap_the_body_as_data() {
        let d = delivery(Some("email.sent"), r#"{"email_id":"em_1"}"#);
        assert_eq!(
            d.event::<Adjacent>().unwrap(),
            Event::Known(Adjacent::Sent {
                email_id: "em_1".into()
            })
        );
        let d = delivery(Some("email.new"), r#"{"email_id":"em_1"}"#);
        assert_eq!(
            d.event::<Adjacent>().unwrap(),
            Event::Unknown {
                event_type: "email.new".into()
            }
        );
    }

    #[test]
    fn known_types_with_bad_data_are_422_naming_the_field() {
        let d = delivery(Some("email.sent"), r#"{"email_id":123456789}"#);
        let Err(ExtractError::Json { path, message }) = d.event::<Adjacent>() else {
            panic!()
        };
        assert_eq!(path, "data.email_id");
        assert!(!message.contains("123456789"), "{message}");
        let d = delivery(None, r#"{"type":"email.sent","email_id":42}"#);
        assert!(d.event::<Internal>().is_err());
    }

    #[test]
    fn no_type_anywhere_or_not_json_is_422() {
        for body in [r#"{"data":{}}"#, r#"{"type":7}"#, "not json"] {
            let err = delivery(None, body).event::<Internal>().unwrap_err();
            assert_eq!(err.status(), 422, "{body}");
        }
    }
}
