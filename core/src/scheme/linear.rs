//! [Linear](https://linear.app/developers/webhooks#securing-webhooks) webhooks:
//! `Linear-Signature: <hex HMAC-SHA256 of the body>`, and the body's
//! `"webhookTimestamp"` (Unix milliseconds) within a minute of the
//! receiver's clock.
//!
//! [`Verified::id`] is the `Linear-Delivery` header, [`Verified::event_type`]
//! the `Linear-Event` header (`Issue`, `Comment`…).
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use webhooks_core::{Verifier, VerifyError, scheme::Linear};
//!
//! let linear = Linear::new("lin_wh_secret")?;
//! let body = br#"{"action":"create","type":"Issue","webhookTimestamp":1700000000000}"#;
//! let mut headers = linear.sign_headers(body)?;
//! headers.insert("linear-delivery", "234d1a4e-b617-4388-90fe-adc3633d6b72".parse()?);
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_030);
//! let verified = linear.verify(&headers, body, now)?;
//! assert_eq!(verified.timestamp, Some(1_700_000_000));
//!
//! let later = now + Duration::from_secs(60);
//! assert_eq!(linear.verify(&headers, body, later), Err(VerifyError::TimestampTooOld));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::{Duration, SystemTime};

use hmac::Mac as _;
use http::{HeaderMap, HeaderName};

use super::provider::body_fields;
use super::{
    SecretList, Secrets, encode_hex, header, optional_header, parse_timestamp, prefixed_hex,
    signed_headers,
};
use crate::{ConfigError, Identity, MatchedKey, Verified, Verifier, VerifyError};

const SIGNATURE: &str = "linear-signature";
const DELIVERY: &str = "linear-delivery";
const EVENT: &str = "linear-event";
static SIGNATURE_NAME: HeaderName = HeaderName::from_static(SIGNATURE);
static DELIVERY_NAME: HeaderName = HeaderName::from_static(DELIVERY);
static EVENT_NAME: HeaderName = HeaderName::from_static(EVENT);
/// The body field carrying the timestamp, in errors.
const TIMESTAMP_FIELD: &str = "webhookTimestamp";
const SCHEME: &str = "linear";

/// Linear's replay window: 60 seconds either side, as its SDK checks.
pub const LINEAR_TOLERANCE: Duration = Duration::from_secs(60);

/// Verifies [Linear](https://linear.app/developers/webhooks) deliveries.
///
/// The signature is checked first (`400` when missing or not 64 hex
/// digits, `401` when no secret matches); then the body's
/// `webhookTimestamp` must be present (`400`) and within
/// [`LINEAR_TOLERANCE`] (`401`), compared in milliseconds as the SDK does
/// (60,000 ms either side accepted, 60,001 ms refused).
#[derive(Clone)]
pub struct Linear {
    secrets: Secrets,
    tolerance: Duration,
}

debug_fields!(Linear: secrets, tolerance);

impl Linear {
    /// A verifier with the webhook's signing secret.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Empty`] when the secret is empty.
    pub fn new(secret: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        Self::builder().secret(secret).build()
    }

    /// A builder for several secrets (rotation) and the tolerance.
    pub fn builder() -> LinearBuilder {
        LinearBuilder::default()
    }

    /// The `Linear-Signature` value Linear would send, signed with the first secret.
    #[must_use]
    pub fn sign(&self, body: &[u8]) -> String {
        encode_hex(&self.secrets.sign(|m| m.update(body)))
    }

    /// The headers Linear would send (the signature; add `Linear-Delivery`
    /// and `Linear-Event` yourself). The timestamp is in the body.
    ///
    /// # Errors
    ///
    /// Never in practice; the signature is always a valid header value.
    pub fn sign_headers(&self, body: &[u8]) -> Result<HeaderMap, ConfigError> {
        signed_headers([(SIGNATURE, &self.sign(body), "signature")])
    }
}

impl Verifier for Linear {
    fn scheme(&self) -> &'static str {
        SCHEME
    }

    fn check_headers(&self, headers: &HeaderMap, _now: SystemTime) -> Result<(), VerifyError> {
        signature(headers).map(|_| ())
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let signature = signature(headers)?;
        let index = (self.secrets)
            .first_match(&signature, |m| m.update(body))
            .ok_or(VerifyError::NoMatchingSignature)?;
        let [millis] = body_fields(body, [TIMESTAMP_FIELD]);
        let millis = millis.ok_or(VerifyError::MissingHeader(TIMESTAMP_FIELD))?;
        let millis = parse_timestamp(TIMESTAMP_FIELD, &millis)?;
        check_millis(millis, now, self.tolerance)?;
        let timestamp = millis / 1000;
        Ok(Verified {
            scheme: SCHEME,
            id: optional_header(headers, &DELIVERY_NAME, DELIVERY)?.map(str::to_owned),
            timestamp: Some(timestamp),
            event_type: optional_header(headers, &EVENT_NAME, EVENT)?.map(str::to_owned),
            matched_key: MatchedKey::Secret(index),
            scope: None,
            identity: Identity::Content,
        })
    }
}

/// `Linear-Signature`, present and 64 hex digits.
fn signature(headers: &HeaderMap) -> Result<[u8; 32], VerifyError> {
    prefixed_hex::<32>(
        header(headers, &SIGNATURE_NAME, SIGNATURE)?,
        "",
        SIGNATURE,
        "",
        "not 64 hex digits",
    )
}

/// The two-sided window in milliseconds, as the SDK compares
/// (linear/linear `packages/sdk/src/webhooks/client.ts`, `verify`:
/// `Math.abs(new Date().getTime() - timestamp) > 1000 * 60` is refused):
/// exactly 60,000 ms away is accepted, 60,001 ms refused.
fn check_millis(millis: u64, now: SystemTime, tolerance: Duration) -> Result<(), VerifyError> {
    let now = match now.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => i128::try_from(d.as_millis()).unwrap_or(i128::MAX),
        Err(e) => -i128::try_from(e.duration().as_millis()).unwrap_or(i128::MAX),
    };
    let ts = i128::from(millis);
    let tol = i128::try_from(tolerance.as_millis()).unwrap_or(i128::MAX);
    if ts < now.saturating_sub(tol) {
        Err(VerifyError::TimestampTooOld)
    } else if ts > now.saturating_add(tol) {
        Err(VerifyError::TimestampTooNew)
    } else {
        Ok(())
    }
}

/// Builds a [`Linear`] verifier.
#[derive(Default)]
#[must_use]
pub struct LinearBuilder {
    secrets: SecretList,
    tolerance: Option<Duration>,
}

debug_fields!(LinearBuilder: secrets, tolerance);

impl LinearBuilder {
    /// Adds a signing secret, used as the bytes given.
    pub fn secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.secrets.push(secret.as_ref());
        self
    }

    secrets_method!("Adds several signing secrets, in order.", AsRef<[u8]>);

    /// The replay window either side of the receiver's clock (default 60 s).
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
    pub fn build(self) -> Result<Linear, ConfigError> {
        Ok(Linear {
            secrets: self.secrets.finish()?,
            tolerance: self.tolerance.unwrap_or(LINEAR_TOLERANCE),
        })
    }
}
