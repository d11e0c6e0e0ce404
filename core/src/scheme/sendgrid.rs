//! [SendGrid](https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features)
//! signed Event Webhook: ECDSA P-256 with SHA-256 over `{timestamp}{body}`,
//! verified with the public key shown in the SendGrid dashboard (base64 of
//! the DER `SubjectPublicKeyInfo`).
//!
//! * `X-Twilio-Email-Event-Webhook-Signature`: base64 of the DER signature;
//! * `X-Twilio-Email-Event-Webhook-Timestamp`: Unix seconds, signed.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use webhooks_core::{Verifier, VerifyError, scheme::SendGrid};
//!
//! // The public key, signature and payload of SendGrid's own Node.js library tests
//! // (sendgrid/sendgrid-nodejs, packages/eventwebhook/src/eventwebhook.spec.js).
//! let sendgrid = SendGrid::builder()
//!     .public_key("MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA==")
//!     .build()?;
//! let mut headers = http::HeaderMap::new();
//! headers.insert(
//!     "x-twilio-email-event-webhook-signature",
//!     "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0=".parse()?,
//! );
//! headers.insert("x-twilio-email-event-webhook-timestamp", "1588788367".parse()?);
//! let body = br#"{"category":"example_payload","event":"test_event","message_id":"message_id"}"#;
//!
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1588788367);
//! assert!(sendgrid.verify(&headers, body, now).is_ok());
//! assert_eq!(sendgrid.verify(&headers, b"payload", now), Err(VerifyError::NoMatchingSignature));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Cow;
use std::fmt;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use http::{HeaderMap, HeaderName};
use p256::ecdsa::signature::hazmat::{PrehashSigner as _, PrehashVerifier as _};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePublicKey as _, EncodePublicKey as _};
use sha2::{Digest as _, Sha256};

use super::{
    DEFAULT_TOLERANCE, check_timestamp, encode_base64, encode_hex, header, parse_timestamp,
    signed_headers,
};
use crate::{ConfigError, Identity, MatchedKey, Verified, Verifier, VerifyError};

const SIGNATURE: &str = "x-twilio-email-event-webhook-signature";
const TIMESTAMP: &str = "x-twilio-email-event-webhook-timestamp";
/// The same names, parsed once (see [`header`]).
static SIGNATURE_NAME: HeaderName = HeaderName::from_static(SIGNATURE);
static TIMESTAMP_NAME: HeaderName = HeaderName::from_static(TIMESTAMP);
const SCHEME: &str = "sendgrid";
/// A DER ECDSA P-256 signature is at most 72 bytes: 96 base64 characters.
const MAX_SIGNATURE_LEN: usize = 96;

/// Verifies [SendGrid](https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features)
/// Event Webhook deliveries.
///
/// * headers `X-Twilio-Email-Event-Webhook-Signature` (base64 DER ECDSA
///   signature) and `X-Twilio-Email-Event-Webhook-Timestamp`; either missing,
///   or not decodable, is a `400`;
/// * the signature is checked over `{timestamp}{body}` with each configured
///   public key (several during a rotation; [`MatchedKey::PublicKey`] says
///   which one matched);
/// * a two-sided timestamp tolerance, 300 s by default;
/// * [`Verified::id`] is `sha256:` and the hex SHA-256 of the body: a batch of
///   events carries no id of its own, and a retried batch is the same bytes.
///   Each event's own `sg_event_id` is in the body, for per-event dedup;
/// * [`Verified::event_type`] is the events' `event` when every event in the
///   batch has the same one (`delivered`, `open`…), `None` otherwise.
#[derive(Clone)]
pub struct SendGrid {
    keys: Vec<VerifyingKey>,
    tolerance: Duration,
}

impl fmt::Debug for SendGrid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendGrid")
            .field("public_keys", &self.keys.len())
            .field("tolerance", &self.tolerance)
            .finish()
    }
}

impl SendGrid {
    /// A verifier with one verification key (the dashboard's base64, or PEM)
    /// and the default tolerance.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the key is not a P-256 public key.
    pub fn new(public_key: impl AsRef<str>) -> Result<Self, ConfigError> {
        Self::builder().public_key(public_key).build()
    }

    /// A builder for several keys and a custom tolerance.
    pub fn builder() -> SendGridBuilder {
        SendGridBuilder::default()
    }

    /// The replay window.
    #[must_use]
    pub fn tolerance(&self) -> Duration {
        self.tolerance
    }
}

/// SHA-256 of `{timestamp}{body}`, without concatenating.
fn signed_digest(timestamp: &str, body: &[u8]) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(timestamp.as_bytes());
    hash.update(body);
    hash.finalize().into()
}

/// The `event` of one element of the batch.
#[derive(serde::Deserialize)]
struct EventOnly<'a> {
    #[serde(borrow, default)]
    event: Option<Cow<'a, str>>,
}

/// The batch's common event type, if it has one.
fn common_event(body: &[u8]) -> Option<String> {
    let events: Vec<EventOnly<'_>> = serde_json::from_slice(body).ok()?;
    let mut kinds = events.into_iter().map(|e| e.event);
    let first = kinds.next()??;
    if first.is_empty() {
        return None;
    }
    kinds
        .all(|k| k.as_deref() == Some(&*first))
        .then(|| first.into_owned())
}

impl Verifier for SendGrid {
    fn scheme(&self) -> &'static str {
        SCHEME
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let signature = header(headers, &SIGNATURE_NAME, SIGNATURE)?.trim();
        let timestamp_text = header(headers, &TIMESTAMP_NAME, TIMESTAMP)?.trim();
        let timestamp = parse_timestamp(TIMESTAMP, timestamp_text)?;
        if signature.len() > MAX_SIGNATURE_LEN {
            return Err(VerifyError::malformed(SIGNATURE, "too long"));
        }
        let der = B64
            .decode(signature)
            .map_err(|_| VerifyError::malformed(SIGNATURE, "not base64"))?;
        let signature = Signature::from_der(&der)
            .map_err(|_| VerifyError::malformed(SIGNATURE, "not a DER ECDSA P-256 signature"))?;
        check_timestamp(timestamp, now, self.tolerance)?;
        let digest = signed_digest(timestamp_text, body);
        let index = self
            .keys
            .iter()
            .position(|key| key.verify_prehash(&digest, &signature).is_ok())
            .ok_or(VerifyError::NoMatchingSignature)?;
        let id = format!("sha256:{}", encode_hex(&Sha256::digest(body)));
        Ok(Verified {
            scheme: SCHEME,
            id: Some(id),
            timestamp: Some(timestamp),
            event_type: common_event(body),
            matched_key: MatchedKey::PublicKey(index),
            scope: None,
            identity: Identity::SignedId,
        })
    }
}

/// Decodes a verification key: the dashboard's base64 of the DER
/// `SubjectPublicKeyInfo`, with or without PEM armour.
fn decode_public_key(key: &str) -> Result<VerifyingKey, ConfigError> {
    let invalid = |reason| ConfigError::Invalid {
        what: "public key",
        reason,
    };
    let body: String = key
        .lines()
        .filter(|line| !line.trim_start().starts_with("-----"))
        .flat_map(|line| line.chars().filter(|c| !c.is_whitespace()))
        .collect();
    if body.is_empty() {
        return Err(ConfigError::Empty("public key"));
    }
    let der = B64.decode(body).map_err(|_| invalid("not base64"))?;
    VerifyingKey::from_public_key_der(&der).map_err(|_| invalid("not a P-256 public key"))
}

/// Builds a [`SendGrid`] verifier.
///
/// Errors in any key are kept and reported by [`build`](Self::build).
#[derive(Default)]
#[must_use]
pub struct SendGridBuilder {
    keys: Vec<VerifyingKey>,
    error: Option<ConfigError>,
    tolerance: Option<Duration>,
}

impl fmt::Debug for SendGridBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendGridBuilder")
            .field("public_keys", &self.keys.len())
            .field("tolerance", &self.tolerance)
            .finish_non_exhaustive()
    }
}

impl SendGridBuilder {
    /// Adds a verification key: the base64 the dashboard shows (DER
    /// `SubjectPublicKeyInfo`), or the same in a PEM `PUBLIC KEY` block.
    pub fn public_key(mut self, key: impl AsRef<str>) -> Self {
        match decode_public_key(key.as_ref()) {
            Ok(key) => self.keys.push(key),
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
        self
    }

    /// Adds several verification keys, in order.
    pub fn public_keys<I>(self, keys: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        keys.into_iter().fold(self, Self::public_key)
    }

    tolerance_method!();

    /// The verifier.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] met while adding keys, or
    /// [`ConfigError::NoKeys`] when none was added.
    pub fn build(self) -> Result<SendGrid, ConfigError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.keys.is_empty() {
            return Err(ConfigError::NoKeys);
        }
        Ok(SendGrid {
            keys: self.keys,
            tolerance: self.tolerance.unwrap_or(DEFAULT_TOLERANCE),
        })
    }
}

/// Signs deliveries as SendGrid does, for tests and simulators: an ECDSA
/// P-256 private key whose [`public_key`](Self::public_key) you configure in
/// the [`SendGrid`] verifier under test.
///
/// `Debug` never shows the private key.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use webhooks_core::{MatchedKey, Verifier, scheme::{SendGrid, sendgrid::Signer}};
///
/// let signer = Signer::from_bytes(&[7; 32])?;
/// let sendgrid = SendGrid::new(signer.public_key())?;
/// let body = br#"[{"event":"delivered","sg_event_id":"ev1"}]"#;
/// let headers = signer.sign_headers(1_700_000_000, body)?;
/// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
/// let verified = sendgrid.verify(&headers, body, now)?;
/// assert_eq!(verified.matched_key, MatchedKey::PublicKey(0));
/// assert_eq!(verified.event_type.as_deref(), Some("delivered"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Signer {
    key: SigningKey,
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Signer([redacted])")
    }
}

impl Signer {
    /// A signer from the 32-byte big-endian private scalar.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when the bytes are not a valid P-256 scalar.
    pub fn from_bytes(secret: &[u8; 32]) -> Result<Self, ConfigError> {
        let key = SigningKey::from_slice(secret).map_err(|_| ConfigError::Invalid {
            what: "private key",
            reason: "not a P-256 scalar",
        })?;
        Ok(Self { key })
    }

    /// The public key as SendGrid's dashboard shows it: base64 of the DER
    /// `SubjectPublicKeyInfo`.
    #[must_use]
    pub fn public_key(&self) -> String {
        let der = self
            .key
            .verifying_key()
            .to_public_key_der()
            .map(|doc| doc.as_bytes().to_vec())
            .unwrap_or_default();
        encode_base64(&der)
    }

    /// The `X-Twilio-Email-Event-Webhook-Signature` value for `timestamp` and
    /// `body`: base64 of a DER signature (deterministic, RFC 6979).
    #[must_use]
    pub fn sign(&self, timestamp: u64, body: &[u8]) -> String {
        let digest = signed_digest(&timestamp.to_string(), body);
        // Signing a 32-byte prehash with a valid key cannot fail.
        let signature: Signature = self
            .key
            .sign_prehash(&digest)
            .unwrap_or_else(|_| unreachable!("P-256 signs a 32-byte prehash"));
        encode_base64(signature.to_der().as_bytes())
    }

    /// The headers SendGrid would send for `body` at `timestamp`.
    ///
    /// # Errors
    ///
    /// Never in practice; the `Result` matches the other schemes' helpers.
    pub fn sign_headers(&self, timestamp: u64, body: &[u8]) -> Result<HeaderMap, ConfigError> {
        signed_headers([
            (SIGNATURE, &self.sign(timestamp, body), "signature"),
            (TIMESTAMP, &timestamp.to_string(), "timestamp"),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_event_only_when_all_agree() {
        assert_eq!(
            common_event(br#"[{"event":"open"},{"event":"open","x":1}]"#),
            Some("open".into())
        );
        assert_eq!(
            common_event(br#"[{"event":"open"},{"event":"click"}]"#),
            None
        );
        assert_eq!(common_event(br#"[{"event":"open"},{}]"#), None);
        assert_eq!(common_event(br#"[]"#), None);
        assert_eq!(common_event(br#"{"event":"open"}"#), None);
        assert_eq!(common_event(b"nope"), None);
    }

    #[test]
    fn keys_decode_with_or_without_pem() {
        let signer = Signer::from_bytes(&[3; 32]).unwrap();
        let b64 = signer.public_key();
        assert!(decode_public_key(&b64).is_ok());
        let pem = format!("-----BEGIN PUBLIC KEY-----\n{b64}\n-----END PUBLIC KEY-----\n");
        assert!(decode_public_key(&pem).is_ok());
        assert_eq!(
            decode_public_key("  ").unwrap_err(),
            ConfigError::Empty("public key")
        );
        assert!(decode_public_key("not base64!").is_err());
        assert!(decode_public_key("AAAA").is_err());
    }
}
