//! [Mailgun](https://documentation.mailgun.com/docs/mailgun/user-manual/events/webhooks#securing-webhooks)
//! webhook signatures: HMAC-SHA256 of `{timestamp}{token}`, keyed with the
//! HTTP webhook signing key, carried **in the body**:
//!
//! ```json
//! {"signature": {"timestamp": "1529006854", "token": "a8ce0e…", "signature": "d2271d…"},
//!  "event-data": {"event": "opened", "id": "DACSsAdVSeGpLid7TN03WA", …}}
//! ```
//!
//! (legacy webhooks send the same three fields as `application/x-www-form-urlencoded`
//! form fields; both are read).
//!
//! Mailgun's signature covers the timestamp and the token, **not the event
//! data**, and the signing key is account-wide. What stops a captured
//! signature from being sent again with other event data, to the same route
//! or to another route of the account, is the token: it is unique per
//! request, so [`Verified::id`] is the token with
//! [`Identity::ReplayToken`], and the receive pipeline claims it under
//! [`REPLAY_NAMESPACE`](crate::receiver::REPLAY_NAMESPACE), the same for
//! every route, whatever the route's namespace or custom dedup key, never
//! failing open. **Use one shared store for every route of a Mailgun
//! account** (and keep deduplication on): a route with a store of its own
//! cannot see the tokens the others have seen. The timestamp window bounds
//! how long a token must be remembered; the default retention of a week is
//! far longer.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use webhooks_core::{Verifier, VerifyError, scheme::Mailgun};
//!
//! let mailgun = Mailgun::new("key-3ax6xnjp29jd6fds4gc373sgvjxteol0")?;
//! let body = mailgun.sign_body(
//!     1_700_000_000,
//!     "5egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6",
//!     &serde_json::json!({"event": "delivered", "id": "CPgfbmQMTCKtHW6uIWtuVe"}),
//! );
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_030);
//! let verified = mailgun.verify(&http::HeaderMap::new(), &body, now)?;
//! assert_eq!(verified.id.as_deref(), Some("5egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6"));
//! assert_eq!(verified.event_type.as_deref(), Some("delivered"));
//!
//! let later = now + Duration::from_secs(600);
//! assert_eq!(mailgun.verify(&http::HeaderMap::new(), &body, later), Err(VerifyError::TimestampTooOld));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use hmac::Mac as _;
use http::{HeaderMap, HeaderName};

use super::{
    DEFAULT_TOLERANCE, HmacSha256, SecretList, Secrets, check_timestamp, decode_hex, encode_hex,
    optional_header,
};
use crate::{ConfigError, Identity, MatchedKey, Verified, Verifier, VerifyError};

const SCHEME: &str = "mailgun";
const CONTENT_TYPE: &str = "content-type";
/// The same name, parsed once.
static CONTENT_TYPE_NAME: HeaderName = HeaderName::from_static(CONTENT_TYPE);
/// The longest token accepted (Mailgun's are 50 characters): it becomes the
/// delivery id, which reaches the dedup store and the logs.
const MAX_TOKEN_LEN: usize = 256;

/// Verifies [Mailgun](https://documentation.mailgun.com/docs/mailgun/user-manual/events/webhooks#securing-webhooks)
/// webhooks.
///
/// * the body's `signature` object (`timestamp`, `token`, `signature`), or
///   the form fields of the same names; any of them missing is a `400`
///   naming it (`signature.token`), unreadable is a `400`;
/// * `signature` is 64 hex digits of HMAC-SHA256 over `{timestamp}{token}`
///   (as sent), keyed with the signing key;
/// * a two-sided timestamp tolerance, 300 s by default;
/// * [`Verified::id`] is the token (the replay guard, [`Identity::ReplayToken`]:
///   keep deduplication on, one store shared by every route of the account),
///   [`Verified::event_type`] is `event-data.event` (or the form's `event`).
///   **Neither the event type nor the rest of the event data is signed**;
///   they are trustworthy only because the token is fresh and unique.
#[derive(Clone)]
pub struct Mailgun {
    secrets: Secrets,
    tolerance: Duration,
}

debug_fields!(Mailgun: secrets, tolerance);

impl Mailgun {
    /// A verifier with one signing key and the default tolerance.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the key is empty.
    pub fn new(signing_key: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        Self::builder().secret(signing_key).build()
    }

    /// A builder for several signing keys and a custom tolerance.
    pub fn builder() -> MailgunBuilder {
        MailgunBuilder::default()
    }

    /// The replay window.
    #[must_use]
    pub fn tolerance(&self) -> Duration {
        self.tolerance
    }

    /// The hex `signature` Mailgun would send for `timestamp` and `token`,
    /// with the first key.
    #[must_use]
    pub fn sign(&self, timestamp: u64, token: &str) -> String {
        let timestamp = timestamp.to_string();
        encode_hex(&self.secrets.sign(|mac| feed(mac, &timestamp, token)))
    }

    /// The JSON body Mailgun would send: the `signature` object for
    /// `timestamp` and `token`, signed with the first key, and `event_data`.
    #[must_use]
    pub fn sign_body(
        &self,
        timestamp: u64,
        token: &str,
        event_data: &serde_json::Value,
    ) -> Vec<u8> {
        serde_json::json!({
            "signature": {
                "timestamp": timestamp.to_string(),
                "token": token,
                "signature": self.sign(timestamp, token),
            },
            "event-data": event_data,
        })
        .to_string()
        .into_bytes()
    }
}

fn feed(mac: &mut HmacSha256, timestamp: &str, token: &str) {
    mac.update(timestamp.as_bytes());
    mac.update(token.as_bytes());
}

/// A string, or a number written as one (a timestamp sent unquoted).
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Text<'a> {
    Str(#[serde(borrow)] Cow<'a, str>),
    Int(u64),
}

impl<'a> Text<'a> {
    fn into_text(self) -> Cow<'a, str> {
        match self {
            Self::Str(s) => s,
            Self::Int(n) => Cow::Owned(n.to_string()),
        }
    }
}

#[derive(serde::Deserialize)]
struct SignatureBlock<'a> {
    #[serde(borrow, default)]
    timestamp: Option<Text<'a>>,
    #[serde(borrow, default)]
    token: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    signature: Option<Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct EventData<'a> {
    #[serde(borrow, default)]
    event: Option<Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct JsonBody<'a> {
    #[serde(borrow, default)]
    signature: Option<SignatureBlock<'a>>,
    #[serde(borrow, default, rename = "event-data")]
    event_data: Option<EventData<'a>>,
}

/// The signed fields of one request, whichever the body's encoding.
struct Fields<'a> {
    timestamp: Option<Cow<'a, str>>,
    token: Option<Cow<'a, str>>,
    signature: Option<Cow<'a, str>>,
    event: Option<Cow<'a, str>>,
}

fn json_fields(body: &[u8]) -> Result<Fields<'_>, VerifyError> {
    let parsed: JsonBody<'_> = serde_json::from_slice(body)
        .map_err(|_| VerifyError::malformed_field("body", "not a Mailgun JSON event"))?;
    let block = parsed
        .signature
        .ok_or(VerifyError::MissingField("signature"))?;
    Ok(Fields {
        timestamp: block.timestamp.map(Text::into_text),
        token: block.token,
        signature: block.signature,
        event: parsed.event_data.and_then(|e| e.event),
    })
}

/// The fields of an `application/x-www-form-urlencoded` body; the first of
/// each name counts.
fn form_fields(body: &[u8]) -> Result<Fields<'_>, VerifyError> {
    let mut fields = Fields {
        timestamp: None,
        token: None,
        signature: None,
        event: None,
    };
    for pair in body.split(|&b| b == b'&') {
        let (name, value) = match pair.iter().position(|&b| b == b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &b""[..]),
        };
        let slot = match name {
            b"timestamp" => &mut fields.timestamp,
            b"token" => &mut fields.token,
            b"signature" => &mut fields.signature,
            b"event" => &mut fields.event,
            _ => continue,
        };
        if slot.is_none() {
            *slot = Some(Cow::Owned(
                percent_decode(value)
                    .ok_or(VerifyError::malformed_field("body", "bad form encoding"))?,
            ));
        }
    }
    Ok(fields)
}

/// Decodes one form value (`+` is a space, `%XX` a byte); `None` when it is
/// not UTF-8 or an escape is cut short.
fn percent_decode(value: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    while i < value.len() {
        match value[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = value.get(i + 1..i + 3)?;
                out.push(decode_hex::<1>(std::str::from_utf8(hex).ok()?)?[0]);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

impl Verifier for Mailgun {
    fn scheme(&self) -> &'static str {
        SCHEME
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let content_type = optional_header(headers, &CONTENT_TYPE_NAME, CONTENT_TYPE)?;
        if content_type.is_some_and(|c| c.to_ascii_lowercase().starts_with("multipart/")) {
            return Err(VerifyError::malformed_field(
                "body",
                "multipart forms are not read: use JSON webhooks",
            ));
        }
        let first = body.iter().find(|b| !b.is_ascii_whitespace());
        let fields = if matches!(first, Some(b'{' | b'[')) {
            json_fields(body)?
        } else {
            form_fields(body)?
        };
        let timestamp_text = fields
            .timestamp
            .ok_or(VerifyError::MissingField("signature.timestamp"))?;
        let token = fields
            .token
            .ok_or(VerifyError::MissingField("signature.token"))?;
        let signature = fields
            .signature
            .ok_or(VerifyError::MissingField("signature.signature"))?;
        if timestamp_text.is_empty() || !timestamp_text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(VerifyError::malformed_field(
                "signature.timestamp",
                "not integer Unix seconds",
            ));
        }
        let timestamp: u64 = timestamp_text.parse().map_err(|_| {
            VerifyError::malformed_field("signature.timestamp", "timestamp out of range")
        })?;
        if token.is_empty() || token.len() > MAX_TOKEN_LEN {
            return Err(VerifyError::malformed_field(
                "signature.token",
                "empty or too long",
            ));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(VerifyError::malformed_field(
                "signature.token",
                "not visible ASCII",
            ));
        }
        let signature = decode_hex::<32>(signature.trim()).ok_or(VerifyError::malformed_field(
            "signature.signature",
            "not 64 hex digits",
        ))?;
        check_timestamp(timestamp, now, self.tolerance)?;
        let index = (self.secrets)
            .first_match(&signature, |mac| feed(mac, &timestamp_text, &token))
            .ok_or(VerifyError::NoMatchingSignature)?;
        Ok(Verified {
            scheme: SCHEME,
            id: Some(token.into_owned()),
            timestamp: Some(timestamp),
            event_type: fields.event.filter(|e| !e.is_empty()).map(Cow::into_owned),
            matched_key: MatchedKey::Secret(index),
            scope: None,
            identity: Identity::ReplayToken,
        })
    }
}

/// Builds a [`Mailgun`] verifier.
///
/// Errors in any key are kept and reported by [`build`](Self::build).
#[derive(Default)]
#[must_use]
pub struct MailgunBuilder {
    secrets: SecretList,
    tolerance: Option<Duration>,
}

debug_fields!(MailgunBuilder: secrets, tolerance, ..);

impl MailgunBuilder {
    /// Adds an HTTP webhook signing key, used as the bytes given.
    pub fn secret(mut self, signing_key: impl AsRef<[u8]>) -> Self {
        self.secrets.push(signing_key.as_ref());
        self
    }

    secrets_method!("Adds several signing keys, in order.", AsRef<[u8]>);

    tolerance_method!();

    /// The verifier.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] met while adding keys, or
    /// [`ConfigError::NoKeys`] when none was added.
    pub fn build(self) -> Result<Mailgun, ConfigError> {
        Ok(Mailgun {
            secrets: self.secrets.finish()?,
            tolerance: self.tolerance.unwrap_or(DEFAULT_TOLERANCE),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_values_are_percent_decoded() {
        assert_eq!(percent_decode(b"a+b%2Fc").as_deref(), Some("a b/c"));
        assert_eq!(percent_decode(b"%zz"), None);
        assert_eq!(percent_decode(b"%4"), None);
        assert_eq!(percent_decode(b"%ff"), None);
        let f =
            form_fields(b"token=t%31&timestamp=5&timestamp=6&signature=s&x&event=opened").unwrap();
        assert_eq!(f.token.as_deref(), Some("t1"));
        assert_eq!(f.timestamp.as_deref(), Some("5"));
        assert_eq!(f.event.as_deref(), Some("opened"));
    }
}
