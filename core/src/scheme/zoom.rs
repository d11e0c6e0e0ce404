//! [Zoom](https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events)
//! webhooks: `x-zm-signature: v0=<hex HMAC-SHA256 of v0:{ts}:{body}>` with
//! `x-zm-request-timestamp`, keyed with the app's secret token; and the
//! `endpoint.url_validation` challenge Zoom sends when the endpoint is
//! saved and every 72 hours.
//!
//! [`Verified::event_type`] is the body's `"event"`. Zoom sends no delivery
//! id: inside the replay window a retry can only be told apart by content
//! (see [`ReceiverBuilder::dedup_key`](crate::ReceiverBuilder::dedup_key)).
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use webhooks_core::{Verifier, scheme::Zoom};
//!
//! let zoom = Zoom::new("secret-token")?;
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
//!
//! // The challenge: a receiver answers it itself once it verified (in both
//! // modes, never stored); outside one, the response verifies first.
//! let body = br#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#;
//! let headers = zoom.sign_headers(1_700_000_000, body)?;
//! let verified = zoom.verify(&headers, body, now)?;
//! assert_eq!(verified.event_type.as_deref(), Some("endpoint.url_validation"));
//! let answer = zoom.url_validation_response(&headers, body, now)?.expect("a challenge");
//! assert!(answer.starts_with(r#"{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":""#));
//! // A forged challenge gets no answer.
//! assert!(zoom.url_validation_response(&http::HeaderMap::new(), body, now).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use hmac::Mac as _;
use http::{HeaderMap, HeaderName};

use super::provider::body_fields;
use super::{
    DEFAULT_TOLERANCE, HmacSha256, SecretList, Secrets, check_timestamp, encode_hex, header,
    parse_timestamp, prefixed_hex, signed_headers,
};
use crate::{ConfigError, Identity, MatchedKey, Verified, Verifier, VerifyError};

const SIGNATURE: &str = "x-zm-signature";
const TIMESTAMP: &str = "x-zm-request-timestamp";
static SIGNATURE_NAME: HeaderName = HeaderName::from_static(SIGNATURE);
static TIMESTAMP_NAME: HeaderName = HeaderName::from_static(TIMESTAMP);
const SCHEME: &str = "zoom";

/// Verifies [Zoom](https://developers.zoom.us/docs/api/webhooks/) deliveries
/// and answers its URL validation challenge.
///
/// * `x-zm-signature: v0=<64 hex digits>` over `v0:{x-zm-request-timestamp}:{body}`;
/// * the timestamp (Unix seconds) within the tolerance (default 300 s);
/// * several secret tokens may be configured for rotation; the challenge is
///   answered with the first.
#[derive(Clone)]
pub struct Zoom {
    secrets: Secrets,
    tolerance: Duration,
}

debug_fields!(Zoom: secrets, tolerance);

fn feed(mac: &mut HmacSha256, timestamp: &[u8], body: &[u8]) {
    mac.update(b"v0:");
    mac.update(timestamp);
    mac.update(b":");
    mac.update(body);
}

/// The challenge body's fields.
#[derive(serde::Deserialize)]
struct Challenge<'a> {
    #[serde(borrow)]
    event: Cow<'a, str>,
    #[serde(borrow)]
    payload: ChallengePayload<'a>,
}

#[derive(serde::Deserialize)]
struct ChallengePayload<'a> {
    #[serde(borrow, rename = "plainToken")]
    plain_token: Cow<'a, str>,
}

/// The answer to a challenge, fields in Zoom's documented order.
#[derive(serde::Serialize)]
struct ChallengeAnswer<'a> {
    #[serde(rename = "plainToken")]
    plain_token: &'a str,
    #[serde(rename = "encryptedToken")]
    encrypted_token: String,
}

impl Zoom {
    /// A verifier with the app's secret token.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Empty`] when the token is empty.
    pub fn new(secret_token: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        Self::builder().secret(secret_token).build()
    }

    /// A builder for several secret tokens (rotation) and the tolerance.
    pub fn builder() -> ZoomBuilder {
        ZoomBuilder::default()
    }

    /// The `x-zm-signature` value Zoom would send, signed with the first token.
    #[must_use]
    pub fn sign(&self, timestamp: u64, body: &[u8]) -> String {
        let ts = timestamp.to_string();
        let mac = self.secrets.sign(|m| feed(m, ts.as_bytes(), body));
        format!("v0={}", encode_hex(&mac))
    }

    /// The headers Zoom would send: the signature and the timestamp.
    ///
    /// # Errors
    ///
    /// Never in practice; both are always valid header values.
    pub fn sign_headers(&self, timestamp: u64, body: &[u8]) -> Result<HeaderMap, ConfigError> {
        signed_headers([
            (SIGNATURE, &self.sign(timestamp, body), "signature"),
            (TIMESTAMP, &timestamp.to_string(), "timestamp"),
        ])
    }

    /// The JSON answer to an `endpoint.url_validation` event —
    /// `{"plainToken":…,"encryptedToken":<hex HMAC-SHA256 of plainToken>}` —
    /// to send with `200`, once the request verified; `Ok(None)` when it is
    /// not such an event.
    ///
    /// A receive pipeline answers the challenge itself (see
    /// [`Handshake`](crate::Handshake)); this is for code outside one.
    ///
    /// # Errors
    ///
    /// The [`VerifyError`] of [`verify`](Verifier::verify): an unverified
    /// body never gets an answer (the answer is the secret's HMAC of a
    /// token the sender chose).
    pub fn url_validation_response(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Option<String>, VerifyError> {
        self.verify(headers, body, now)?;
        Ok(self.challenge_answer(body))
    }

    /// The answer to a challenge body, for a request already verified.
    fn challenge_answer(&self, body: &[u8]) -> Option<String> {
        let challenge: Challenge<'_> = serde_json::from_slice(body).ok()?;
        if challenge.event != "endpoint.url_validation" {
            return None;
        }
        let token = challenge.payload.plain_token;
        let encrypted = encode_hex(&self.secrets.sign(|m| m.update(token.as_bytes())));
        let answer = ChallengeAnswer {
            plain_token: &token,
            encrypted_token: encrypted,
        };
        serde_json::to_string(&answer).ok()
    }
}

impl Verifier for Zoom {
    fn scheme(&self) -> &'static str {
        SCHEME
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let signature = prefixed_hex::<32>(
            header(headers, &SIGNATURE_NAME, SIGNATURE)?,
            "v0=",
            SIGNATURE,
            "expected v0=<hex>",
            "not 64 hex digits",
        )?;
        let raw = header(headers, &TIMESTAMP_NAME, TIMESTAMP)?.trim();
        let timestamp = parse_timestamp(TIMESTAMP, raw)?;
        check_timestamp(timestamp, now, self.tolerance)?;
        let index = (self.secrets)
            .first_match(&signature, |m| feed(m, raw.as_bytes(), body))
            .ok_or(VerifyError::NoMatchingSignature)?;
        let [event_type] = body_fields(body, ["event"]);
        Ok(Verified {
            scheme: SCHEME,
            id: None,
            timestamp: Some(timestamp),
            event_type,
            matched_key: MatchedKey::Secret(index),
            scope: None,
            identity: Identity::Content,
        })
    }

    fn handshake(&self, verified: &Verified, body: &[u8]) -> Option<crate::Handshake> {
        if verified.event_type.as_deref() != Some("endpoint.url_validation") {
            return None;
        }
        self.challenge_answer(body).map(crate::Handshake::json)
    }
}

/// Builds a [`Zoom`] verifier.
#[derive(Default)]
#[must_use]
pub struct ZoomBuilder {
    secrets: SecretList,
    tolerance: Option<Duration>,
}

debug_fields!(ZoomBuilder: secrets, tolerance);

impl ZoomBuilder {
    /// Adds a secret token, used as the bytes given.
    pub fn secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.secrets.push(secret.as_ref());
        self
    }

    secrets_method!("Adds several secret tokens, in order.", AsRef<[u8]>);

    tolerance_method!();

    /// The verifier.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] met while adding secrets, or
    /// [`ConfigError::NoKeys`] when none was added.
    pub fn build(self) -> Result<Zoom, ConfigError> {
        Ok(Zoom {
            secrets: self.secrets.finish()?,
            tolerance: self.tolerance.unwrap_or(DEFAULT_TOLERANCE),
        })
    }
}
