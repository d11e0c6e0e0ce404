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
pub(crate) fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ExtractError> {
    {
        let mut de = serde_json::Deserializer::from_slice(body);
        let value = serde_path_to_error::deserialize(&mut de).map_err(json_error)?;
        de.end().map_err(|e| ExtractError::Json {
            path: ".".into(),
            message: scrub(&e.to_string()),
        })?;
        Ok(value)
    }
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
    use super::scrub;

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
