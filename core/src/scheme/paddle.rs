//! [Paddle Billing](https://developer.paddle.com/webhooks/signature-verification)
//! webhooks: `Paddle-Signature: ts=<unix>;h1=<hex HMAC-SHA256 of {ts}:{body}>`,
//! keyed with the notification destination's secret key (`pdl_ntf_…`, used
//! as the bytes given). The header may carry several `h1` during a rotation.
//!
//! [`Verified::id`] is the body's `"event_id"`, [`Verified::event_type`] its
//! `"event_type"`.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use webhooks_core::{Verifier, VerifyError, scheme::Paddle};
//!
//! let paddle = Paddle::new("pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_secret")?;
//! let body = br#"{"event_id":"evt_01h","event_type":"transaction.completed","data":{}}"#;
//! let headers = paddle.sign_headers(1_700_000_000, body)?;
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_002);
//! let verified = paddle.verify(&headers, body, now)?;
//! assert_eq!(verified.id.as_deref(), Some("evt_01h"));
//!
//! // Paddle's SDKs allow 5 seconds by default.
//! let late = now + Duration::from_secs(10);
//! assert_eq!(paddle.verify(&headers, body, late), Err(VerifyError::TimestampTooOld));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::{Duration, SystemTime};

use hmac::Mac as _;
use http::{HeaderMap, HeaderName};

use super::credential::{self, OtherCredential};
use super::provider::body_fields;
use super::{
    HmacSha256, SecretList, Secrets, check_timestamp, decimal, decode_hex, encode_hex, header,
    parse_timestamp, signed_headers,
};
use crate::{ConfigError, Identity, MatchedKey, Verified, Verifier, VerifyError};

const SIGNATURE: &str = "paddle-signature";
static SIGNATURE_NAME: HeaderName = HeaderName::from_static(SIGNATURE);
const SCHEME: &str = "paddle";
/// The most `h1` values read from one header.
const MAX_H1: usize = 8;

/// Paddle's default replay window: 5 seconds, as its SDKs check.
pub const PADDLE_TOLERANCE: Duration = Duration::from_secs(5);

/// Verifies [Paddle Billing](https://developer.paddle.com/webhooks/signature-verification)
/// deliveries.
///
/// The header must have one `ts` and at least one `h1` (`400` otherwise);
/// `h1` values that are not 64 hex digits are skipped, as Paddle's SDKs do;
/// the timestamp must be within the tolerance (default
/// [`PADDLE_TOLERANCE`], `401` otherwise); one `h1` must match one secret
/// (`401` otherwise).
#[derive(Clone)]
pub struct Paddle {
    secrets: Secrets,
    tolerance: Duration,
}

debug_fields!(Paddle: secrets, tolerance);

fn feed(mac: &mut HmacSha256, timestamp: &[u8], body: &[u8]) {
    mac.update(timestamp);
    mac.update(b":");
    mac.update(body);
}

impl Paddle {
    /// A verifier with the destination's secret key.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Empty`] when the key is empty.
    pub fn new(secret_key: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        Self::builder().secret(secret_key).build()
    }

    /// A builder for several secret keys (rotation) and the tolerance.
    pub fn builder() -> PaddleBuilder {
        PaddleBuilder::default()
    }

    /// The `Paddle-Signature` value Paddle would send, signed with the first key.
    #[must_use]
    pub fn sign(&self, timestamp: u64, body: &[u8]) -> String {
        let mut buf = [0u8; 20];
        let ts = decimal(timestamp, &mut buf);
        let mac = self.secrets.sign(|m| feed(m, ts, body));
        format!("ts={timestamp};h1={}", encode_hex(&mac))
    }

    /// The headers Paddle would send.
    ///
    /// # Errors
    ///
    /// Never in practice; the signature is always a valid header value.
    pub fn sign_headers(&self, timestamp: u64, body: &[u8]) -> Result<HeaderMap, ConfigError> {
        signed_headers([(SIGNATURE, &self.sign(timestamp, body), "signature")])
    }
}

impl Verifier for Paddle {
    fn scheme(&self) -> &'static str {
        SCHEME
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let value = header(headers, &SIGNATURE_NAME, SIGNATURE)?;
        let mut ts = None;
        let mut h1 = [[0u8; 32]; MAX_H1];
        let (mut n_h1, mut seen_h1) = (0, false);
        for item in value.split(';') {
            let (key, val) = item.split_once('=').ok_or(VerifyError::malformed(
                SIGNATURE,
                "expected key=value pairs",
            ))?;
            match key.trim() {
                "ts" if ts.is_some() => {
                    return Err(VerifyError::malformed(SIGNATURE, "more than one ts"));
                }
                "ts" => ts = Some(val.trim()),
                "h1" => {
                    seen_h1 = true;
                    if let Some(sig) = decode_hex::<32>(val.trim()).filter(|_| n_h1 < MAX_H1) {
                        h1[n_h1] = sig;
                        n_h1 += 1;
                    }
                }
                _ => {}
            }
        }
        let raw = ts.ok_or(VerifyError::malformed(SIGNATURE, "no ts"))?;
        if !seen_h1 {
            return Err(VerifyError::malformed(SIGNATURE, "no h1 signature"));
        }
        let timestamp = parse_timestamp(SIGNATURE, raw)?;
        check_timestamp(timestamp, now, self.tolerance)?;
        let index = (self.secrets)
            .first_match_any(&h1[..n_h1], |m| feed(m, raw.as_bytes(), body))
            .ok_or(VerifyError::NoMatchingSignature)?;
        let [id, event_type] = body_fields(body, ["event_id", "event_type"]);
        Ok(Verified {
            scheme: SCHEME,
            id,
            timestamp: Some(timestamp),
            event_type,
            matched_key: MatchedKey::Secret(index),
            scope: None,
            identity: Identity::SignedId,
        })
    }
}

/// Builds a [`Paddle`] verifier.
#[derive(Default)]
#[must_use]
pub struct PaddleBuilder {
    secrets: SecretList,
    tolerance: Option<Duration>,
}

debug_fields!(PaddleBuilder: secrets, tolerance);

/// Paddle's API keys (live, sandbox).
const API_KEYS: &[OtherCredential] = &[OtherCredential::prefixed(
    &["pdl_live_apikey_", "pdl_sdbx_apikey_"],
    "this is a Paddle API key, not a webhook secret: use the secret key of the \
     notification destination (Developer tools > Notifications)",
)];

impl PaddleBuilder {
    /// Adds a secret key, used as the bytes given.
    ///
    /// A Paddle [API key](https://developer.paddle.com/api-reference/about/authentication)
    /// (`pdl_live_apikey_…`, `pdl_sdbx_apikey_…`) is refused: Paddle signs
    /// with the notification destination's secret key.
    pub fn secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        let secret = secret.as_ref();
        match credential::refuse(secret, API_KEYS) {
            Ok(()) => self.secrets.push(secret),
            Err(e) => self.secrets.fail(e),
        }
        self
    }

    secrets_method!("Adds several secret keys, in order.", AsRef<[u8]>);

    /// The replay window either side of the receiver's clock (default 5 s,
    /// as Paddle's SDKs; widen it if your clock drifts).
    pub fn tolerance(mut self, tolerance: Duration) -> Self {
        self.tolerance = Some(tolerance);
        self
    }

    /// The verifier.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] met while adding secrets, or
    /// [`ConfigError::NoKeys`] when none was added.
    pub fn build(self) -> Result<Paddle, ConfigError> {
        Ok(Paddle {
            secrets: self.secrets.finish()?,
            tolerance: self.tolerance.unwrap_or(PADDLE_TOLERANCE),
        })
    }
}
