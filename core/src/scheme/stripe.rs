//! [Stripe](https://docs.stripe.com/webhooks#verify-manually) webhook signatures.
//!
//! Stripe sends `Stripe-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>` (more
//! than one `v1` while you roll the endpoint secret). The MAC is over
//! `{t}.{body}`, keyed with the endpoint secret **as given**: the `whsec_…`
//! string's bytes, not a base64 decoding of it.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use webhooks_core::{Verifier, VerifyError, scheme::Stripe};
//!
//! let stripe = Stripe::new("whsec_test_secret")?;
//! let body = br#"{"id":"evt_1","type":"invoice.paid"}"#;
//! let headers = stripe.sign_headers(1_700_000_000, body)?;
//!
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_060);
//! let verified = stripe.verify(&headers, body, now)?;
//! // The event id and type come from the (now authenticated) body.
//! assert_eq!(verified.id.as_deref(), Some("evt_1"));
//! assert_eq!(verified.event_type.as_deref(), Some("invoice.paid"));
//!
//! // Ten minutes later the same request is a replay.
//! let later = now + Duration::from_secs(600);
//! assert_eq!(stripe.verify(&headers, body, later), Err(VerifyError::TimestampTooOld));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use hmac::Mac as _;
use http::{HeaderMap, HeaderName};

use super::{
    DEFAULT_TOLERANCE, HmacSha256, SecretList, Secrets, check_timestamp, decimal, decode_hex,
    encode_hex, header, parse_timestamp, signed_headers,
};
use crate::{ConfigError, Identity, MatchedKey, Verified, Verifier, VerifyError};

const SIGNATURE: &str = "stripe-signature";
/// The same name, parsed once (see [`header`]).
static SIGNATURE_NAME: HeaderName = HeaderName::from_static(SIGNATURE);
const SCHEME: &str = "stripe";
/// `v1` entries looked at per request; the rest are ignored, so a huge header
/// cannot make one request cost thousands of MACs.
const MAX_SIGNATURES: usize = 16;

/// Verifies [Stripe](https://docs.stripe.com/webhooks#verify-manually) deliveries.
///
/// * header `Stripe-Signature: t=…,v1=…[,v1=…]`; `v0` and unknown keys are
///   ignored, a `v1` that is not 64 hex digits never matches, a second `t`
///   makes the header malformed (`400`);
/// * signed content `{t}.{body}`, HMAC-SHA256 keyed with the secret's bytes
///   exactly as given (`whsec_…` is not decoded);
/// * a two-sided timestamp tolerance, 300 s by default;
/// * [`Verified::id`] and [`Verified::event_type`] are the body's top-level
///   `"id"` and `"type"` strings (read after the signature matched; `None`
///   when absent or when the body is not a JSON object).
///
/// ```
/// use webhooks_core::scheme::Stripe;
///
/// // Rolling the endpoint secret: Stripe signs with both for a while.
/// let stripe = Stripe::builder()
///     .secret("whsec_new")
///     .secret("whsec_old")
///     .build()?;
/// assert_eq!(format!("{stripe:?}"), "Stripe { secrets: 2, tolerance: 300s }");
/// # Ok::<(), webhooks_core::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Stripe {
    secrets: Secrets,
    tolerance: Duration,
}

debug_fields!(Stripe: secrets, tolerance);

impl Stripe {
    /// A verifier with one endpoint secret and the default tolerance.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the secret is empty or contains whitespace.
    pub fn new(secret: impl AsRef<str>) -> Result<Self, ConfigError> {
        Self::builder().secret(secret).build()
    }

    /// A builder for several secrets and a custom tolerance.
    pub fn builder() -> StripeBuilder {
        StripeBuilder::default()
    }

    /// The replay window.
    #[must_use]
    pub fn tolerance(&self) -> Duration {
        self.tolerance
    }

    /// The `Stripe-Signature` value Stripe would send, signed with the first secret.
    #[must_use]
    pub fn sign(&self, timestamp: u64, body: &[u8]) -> String {
        let mut buf = [0u8; 20];
        let t = decimal(timestamp, &mut buf);
        let mac = self.secrets.sign(|mac| feed(mac, t, body));
        format!("t={timestamp},v1={}", encode_hex(&mac))
    }

    /// The headers Stripe would send, signed with the first secret.
    ///
    /// # Errors
    ///
    /// Never in practice; the `Result` matches the other schemes' helpers.
    pub fn sign_headers(&self, timestamp: u64, body: &[u8]) -> Result<HeaderMap, ConfigError> {
        signed_headers([(SIGNATURE, &self.sign(timestamp, body), "signature")])
    }
}

/// Writes `{timestamp}.{body}` into the MAC, without concatenating.
fn feed(mac: &mut HmacSha256, timestamp: &[u8], body: &[u8]) {
    mac.update(timestamp);
    mac.update(b".");
    mac.update(body);
}

/// What the `Stripe-Signature` header says.
struct ParsedHeader {
    timestamp: u64,
    v1: [[u8; 32]; MAX_SIGNATURES],
    n_v1: usize,
}

fn parse_header(value: &str) -> Result<ParsedHeader, VerifyError> {
    let mut timestamp = None;
    let mut v1 = [[0u8; 32]; MAX_SIGNATURES];
    let mut n_v1 = 0;
    for item in value.split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let Some((key, val)) = item.split_once('=') else {
            return Err(VerifyError::malformed(SIGNATURE, "entry without '='"));
        };
        match key {
            "t" => {
                if timestamp.is_some() {
                    return Err(VerifyError::malformed(SIGNATURE, "duplicate t"));
                }
                timestamp = Some(parse_timestamp(SIGNATURE, val)?);
            }
            "v1" => {
                // An unreadable signature can never match; like Stripe's own
                // libraries, ignore it and look at the others.
                if n_v1 < MAX_SIGNATURES
                    && let Some(sig) = decode_hex::<32>(val)
                {
                    v1[n_v1] = sig;
                    n_v1 += 1;
                }
            }
            // `v0` (test-mode legacy) and future schemes.
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(VerifyError::malformed(SIGNATURE, "no timestamp"))?;
    Ok(ParsedHeader {
        timestamp,
        v1,
        n_v1,
    })
}

/// The top-level fields of a Stripe event the receiver uses.
#[derive(serde::Deserialize)]
struct EventEnvelope<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
}

/// The event's `"id"` and `"type"`; the other fields are skipped, not built.
fn event_fields(body: &[u8]) -> (Option<String>, Option<String>) {
    match serde_json::from_slice::<EventEnvelope<'_>>(body) {
        Ok(event) => (
            event.id.filter(|s| !s.is_empty()).map(Cow::into_owned),
            event.kind.filter(|s| !s.is_empty()).map(Cow::into_owned),
        ),
        Err(_) => (None, None),
    }
}

impl Verifier for Stripe {
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
        let parsed = parse_header(value)?;
        check_timestamp(parsed.timestamp, now, self.tolerance)?;
        let candidates = &parsed.v1[..parsed.n_v1];
        if candidates.is_empty() {
            return Err(VerifyError::NoMatchingSignature);
        }
        // Signed as the parsed number's digits.
        let mut buf = [0u8; 20];
        let t = decimal(parsed.timestamp, &mut buf);
        let index = (self.secrets)
            .first_match_any(candidates, |mac| feed(mac, t, body))
            .ok_or(VerifyError::NoMatchingSignature)?;
        let (id, event_type) = event_fields(body);
        Ok(Verified {
            scheme: SCHEME,
            id,
            timestamp: Some(parsed.timestamp),
            event_type,
            matched_key: MatchedKey::Secret(index),
            scope: None,
            identity: Identity::SignedId,
        })
    }
}

/// Builds a [`Stripe`] verifier.
///
/// Errors in any secret are kept and reported by [`build`](Self::build).
#[derive(Default)]
#[must_use]
pub struct StripeBuilder {
    secrets: SecretList,
    tolerance: Option<Duration>,
}

debug_fields!(StripeBuilder: secrets, tolerance, ..);

impl StripeBuilder {
    /// Adds an endpoint secret (`whsec_…`), used as the string's bytes.
    ///
    /// A secret with whitespace in it is refused (as Stripe's libraries do):
    /// it is almost always a stray newline from an environment file.
    pub fn secret(mut self, secret: impl AsRef<str>) -> Self {
        let secret = secret.as_ref();
        if secret.chars().any(char::is_whitespace) {
            self.secrets.fail(ConfigError::Invalid {
                what: "secret",
                reason: "contains whitespace",
            });
        } else {
            self.secrets.push(secret.as_bytes());
        }
        self
    }

    secrets_method!("Adds several endpoint secrets, in order.", AsRef<str>);

    tolerance_method!();

    /// The verifier.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] met while adding secrets, or
    /// [`ConfigError::NoKeys`] when none was added.
    pub fn build(self) -> Result<Stripe, ConfigError> {
        Ok(Stripe {
            secrets: self.secrets.finish()?,
            tolerance: self.tolerance.unwrap_or(DEFAULT_TOLERANCE),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_parsing() {
        let sig = "a".repeat(64);
        let p = parse_header(&format!("t=5,v1={sig},v0={sig},v1=zz,x=1,v1={sig}")).unwrap();
        assert_eq!((p.timestamp, p.n_v1), (5, 2));
        for bad in [
            "",
            "t",
            "t=",
            "v1=aa",
            "t=1,t=1",
            "t=1,v1",
            "t=-1,v1=aa",
            "t=1.5",
        ] {
            assert!(
                matches!(parse_header(bad), Err(VerifyError::MalformedHeader { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn event_fields_are_read_cheaply_and_leniently() {
        assert_eq!(
            event_fields(br#"{"object":"event","id":"evt_\u0031","type":"a.b","data":{"id":"x"}}"#),
            (Some("evt_1".into()), Some("a.b".into()))
        );
        assert_eq!(event_fields(br#"{"data":{"id":"x"}}"#), (None, None));
        assert_eq!(event_fields(br#"{"id":7}"#), (None, None));
        assert_eq!(event_fields(b"not json"), (None, None));
        assert_eq!(event_fields(b"[1]"), (None, None));
    }
}
