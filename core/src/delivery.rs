//! The verified delivery handed to handlers.

use std::fmt;

use bytes::Bytes;
use serde::de::DeserializeOwned;

use crate::{ExtractError, Verified};

/// A verified, first-time (or taken-over) delivery: what the signature
/// established, and the exact body bytes that were verified.
///
/// The framework adapters put it in the request extensions, where the
/// `VerifiedWebhook<T>` extractors find it. `Debug` shows the body's length,
/// never its content.
#[derive(Clone)]
#[non_exhaustive]
pub struct Delivery {
    /// What the verifier established (scheme, id, timestamp, event type, key).
    pub verified: Verified,
    /// The dedup key this delivery was claimed under, if deduplicated.
    pub dedup_key: Option<String>,
    /// The exact raw body that was verified.
    pub body: Bytes,
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("verified", &self.verified)
            .field("dedup_key", &self.dedup_key)
            .field("body_len", &self.body.len())
            .finish()
    }
}

impl Delivery {
    /// A delivery from its parts.
    #[must_use]
    pub fn new(verified: Verified, dedup_key: Option<String>, body: Bytes) -> Self {
        Self {
            verified,
            dedup_key,
            body,
        }
    }

    /// Deserializes the body as JSON.
    ///
    /// # Errors
    ///
    /// [`ExtractError::Json`] with the path of the failing field; the message
    /// names what was expected but never repeats the body's values.
    ///
    /// ```
    /// use webhooks_core::{Delivery, ExtractError, MatchedKey, Verified};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Event { data: Data }
    /// #[derive(serde::Deserialize)]
    /// struct Data { count: u32 }
    ///
    /// let verified = Verified::new("test", MatchedKey::Secret(0));
    /// let delivery = Delivery::new(verified, None, r#"{"data":{"count":"secret-ish"}}"#.into());
    /// let Err(ExtractError::Json { path, message }) = delivery.json::<Event>() else { panic!() };
    /// assert_eq!(path, "data.count");
    /// assert!(!message.contains("secret-ish"));
    /// ```
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, ExtractError> {
        let parsed = parse_json(&self.body);
        warn_if_unfit(self.verified.scheme, &parsed);
        parsed
    }
}

/// Logs a body that does not fit the handler's type at WARN: a deployment
/// that cannot read a new event type must be loud, as the sender retries it
/// for days. The path and serde's scrubbed message only, never the body's
/// values.
pub(crate) fn warn_if_unfit<T>(scheme: &str, parsed: &Result<T, ExtractError>) {
    if let Err(ExtractError::Json { path, message }) = parsed {
        tracing::warn!(
            scheme,
            path = %path,
            error = %message,
            "webhook body does not fit the handler's type; answering 422"
        );
    }
}

/// `body` as JSON `T`; see [`Delivery::json`].
///
/// Parsed by `serde_json` alone first: tracking the path of every field
/// (`serde_path_to_error`) costs as much again as the parse, and only a body
/// that does not fit needs it. That body is parsed a second time, with the
/// path, for the error (the same deserializer over the same bytes fails at
/// the same place with the same message).
pub(crate) fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ExtractError> {
    match serde_json::from_slice(body) {
        Ok(value) => Ok(value),
        Err(_) => parse_json_with_path(body),
    }
}

/// `body` as JSON `T`, an error naming the path of the failing field.
#[cold]
fn parse_json_with_path<T: DeserializeOwned>(body: &[u8]) -> Result<T, ExtractError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de).map_err(json_error)?;
    de.end().map_err(|e| ExtractError::Json {
        path: ".".into(),
        message: scrub(&e.to_string()),
    })?;
    Ok(value)
}

pub(crate) fn json_error(e: serde_path_to_error::Error<serde_json::Error>) -> ExtractError {
    ExtractError::Json {
        path: e.path().to_string(),
        message: scrub(&e.inner().to_string()),
    }
}

/// Drops the sender's values from serde's message: `invalid type: string
/// "abc", expected u32` becomes `invalid type, expected u32`.
pub(crate) fn scrub(message: &str) -> String {
    match message.find(", expected") {
        Some(i) => {
            let kind = message[..i]
                .split([':', '`'])
                .next()
                .unwrap_or("")
                .trim_end();
            format!("{kind}{}", &message[i..])
        }
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::{parse_json, parse_json_with_path, scrub};
    use crate::ExtractError;

    #[derive(Debug, PartialEq, Deserialize)]
    struct Event {
        r#type: String,
        data: Data,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Data {
        id: String,
        lines: Vec<Line>,
        #[serde(default)]
        kind: Option<Kind>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Line {
        amount: u64,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Kind {
        Card,
        Bank,
    }

    const VALID: &str = r#"{"type":"invoice.paid","data":{"id":"in_1","lines":[{"amount":1},{"amount":2}],"kind":"card"}}"#;

    /// The path and the message of a body that does not fit `Event`.
    fn failure(body: &str) -> (String, String) {
        match parse_json::<Event>(body.as_bytes()) {
            Err(ExtractError::Json { path, message }) => (path, message),
            other => panic!("{body}: {other:?}"),
        }
    }

    #[test]
    fn a_body_that_fits_parses_without_the_path() {
        let event: Event = parse_json(VALID.as_bytes()).unwrap();
        assert_eq!(event.data.lines[1], Line { amount: 2 });
        assert_eq!(event.data.kind, Some(Kind::Card));
        assert_eq!(
            format!("{:?}", parse_json_with_path::<Event>(VALID.as_bytes())),
            format!("{:?}", Ok::<_, ExtractError>(event)),
        );
    }

    #[test]
    fn a_body_that_does_not_fit_names_the_field_without_its_value() {
        let (path, message) = failure(
            r#"{"type":"t","data":{"id":"x","lines":[{"amount":1},{"amount":"hunter2"}]}}"#,
        );
        assert_eq!(path, "data.lines[1].amount");
        assert!(
            message.starts_with("invalid type, expected u64"),
            "{message}"
        );
        assert!(!message.contains("hunter2"));
        assert_eq!(
            failure(r#"{"type":"t","data":{"lines":[]}}"#),
            (
                "data".into(),
                "missing field `id` at line 1 column 31".into()
            )
        );
        let (path, message) =
            failure(r#"{"type":"t","data":{"id":"x","lines":[],"kind":"hunter2"}}"#);
        assert_eq!(path, "data.kind");
        assert!(
            message.starts_with("unknown variant, expected"),
            "{message}"
        );
        assert!(!message.contains("hunter2"));
        assert_eq!(failure(&format!("{VALID} trailing")).0, ".");
        assert_eq!(failure(r#"{"type":"t","data":{"id":"#).0, "data.id");
        assert_eq!(failure("").0, ".");
    }

    proptest::proptest! {
        /// Parsing without the path first answers exactly what parsing
        /// with it answers: the same value, or the same path and message,
        /// for the valid body with one byte replaced or the body cut short.
        #[test]
        fn parse_json_answers_as_the_path_tracking_parse(
            at in 0usize..VALID.len(),
            with in proptest::sample::select(
                b"{}[]\":,0123456789.-+eE truefalsnu\\xa\x00\xff".to_vec()
            ),
            cut in proptest::prelude::any::<bool>(),
        ) {
            let mut body = VALID.as_bytes().to_vec();
            if cut {
                body.truncate(at);
            } else {
                body[at] = with;
            }
            proptest::prop_assert_eq!(
                format!("{:?}", parse_json::<Event>(&body)),
                format!("{:?}", parse_json_with_path::<Event>(&body))
            );
        }
    }

    #[test]
    fn scrub_removes_values() {
        assert_eq!(
            scrub("invalid type: string \"hunter2\", expected u32 at line 1 column 9"),
            "invalid type, expected u32 at line 1 column 9"
        );
        assert_eq!(
            scrub("unknown variant `hunter2`, expected `a` or `b`"),
            "unknown variant, expected `a` or `b`"
        );
        assert_eq!(scrub("missing field `id`"), "missing field `id`");
    }
}
