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

use super::credential::{self, OtherCredential};
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
    /// [`ConfigError`] when the secret is empty, contains whitespace, is a
    /// Stripe API key or does not start with `whsec_` (see
    /// [`StripeBuilder::secret`]).
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

    /// `Stripe-Signature` well-formed, its `t` within the tolerance, a
    /// `v1` entry present: checked before the body is read.
    fn check_headers(&self, headers: &HeaderMap, now: SystemTime) -> Result<(), VerifyError> {
        let parsed = parse_header(header(headers, &SIGNATURE_NAME, SIGNATURE)?)?;
        check_timestamp(parsed.timestamp, now, self.tolerance)?;
        if parsed.n_v1 == 0 {
            return Err(VerifyError::NoMatchingSignature);
        }
        Ok(())
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
    /// Refused, so that a receiver that would answer `401` to every delivery
    /// does not start:
    /// * a secret with whitespace in it (as Stripe's libraries do): it is
    ///   almost always a stray newline from an environment file;
    /// * an API key (`sk_…`, `rk_…`) or a publishable key (`pk_…`): Stripe
    ///   signs webhooks with the endpoint's own secret, not with an API key;
    /// * anything else that does not start with `whsec_`, the prefix of every
    ///   endpoint secret (the Dashboard's and `stripe listen`'s).
    ///
    /// ```
    /// use webhooks_core::{ConfigError, scheme::Stripe};
    ///
    /// let err = Stripe::new("sk_live_123").unwrap_err();
    /// assert!(err.to_string().contains("whsec_"), "{err}");
    /// assert!(matches!(Stripe::new("my-secret"), Err(ConfigError::Invalid { .. })));
    /// ```
    pub fn secret(mut self, secret: impl AsRef<str>) -> Self {
        let secret = secret.as_ref();
        match check_endpoint_secret(secret) {
            Ok(()) => self.secrets.push(secret.as_bytes()),
            Err(e) => self.secrets.fail(e),
        }
        self
    }

    /// Adds a secret of any format, used as the string's bytes (whitespace
    /// is still refused): for senders that reuse Stripe's scheme with their
    /// own secrets, and for Stripe's SDK test vectors. For Stripe itself use
    /// [`secret`](Self::secret), which refuses what is not an endpoint secret.
    pub fn secret_without_format_check(mut self, secret: impl AsRef<str>) -> Self {
        let secret = secret.as_ref();
        match refuse_whitespace(secret) {
            Ok(()) => self.secrets.push(secret.as_bytes()),
            Err(e) => self.secrets.fail(e),
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

/// Stripe's other credentials ([API keys](https://docs.stripe.com/keys):
/// secret `sk_`, restricted `rk_`, publishable `pk_`), each with its live or
/// test prefix.
const API_KEYS: &[OtherCredential] = &[
    OtherCredential::prefixed(
        &["sk_", "rk_"],
        "this is a Stripe API key (sk_... or rk_...), not a webhook secret: \
         use the endpoint's signing secret (whsec_...) from the Dashboard's \
         webhook endpoint page or from `stripe listen`",
    ),
    OtherCredential::prefixed(
        &["pk_"],
        "this is a Stripe publishable key (pk_...), not a webhook secret: \
         use the endpoint's signing secret (whsec_...) from the Dashboard's \
         webhook endpoint page or from `stripe listen`",
    ),
];

/// The endpoint secret's prefix.
const ENDPOINT_SECRET_PREFIX: &str = "whsec_";

fn refuse_whitespace(secret: &str) -> Result<(), ConfigError> {
    if secret.chars().any(char::is_whitespace) {
        return Err(ConfigError::Invalid {
            what: "secret",
            reason: "contains whitespace",
        });
    }
    Ok(())
}

/// Whether `secret` can be an endpoint secret (see [`StripeBuilder::secret`]).
fn check_endpoint_secret(secret: &str) -> Result<(), ConfigError> {
    if secret.is_empty() {
        return Err(ConfigError::Empty("secret"));
    }
    refuse_whitespace(secret)?;
    credential::refuse(secret.as_bytes(), API_KEYS)?;
    if !secret.starts_with(ENDPOINT_SECRET_PREFIX) {
        return Err(ConfigError::Invalid {
            what: "secret",
            reason: "a Stripe endpoint secret starts with whsec_: use the signing \
                     secret from the Dashboard's webhook endpoint page or from \
                     `stripe listen`",
        });
    }
    Ok(())
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

    #[test]
    fn only_endpoint_secrets_are_accepted() {
        for ok in [
            "whsec_test_secret",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        ] {
            assert!(Stripe::new(ok).is_ok(), "{ok}");
        }
        for (bad, names) in [
            ("sk_live_51H8abc", "API key"),
            ("sk_test_51H8abc", "API key"),
            ("rk_live_51H8abc", "API key"),
            ("pk_live_51H8abc", "publishable key"),
            ("webhook_secret", "starts with whsec_"),
            ("WHSEC_upper", "starts with whsec_"),
        ] {
            let err = Stripe::new(bad).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, ConfigError::Invalid { .. }), "{bad}");
            assert!(
                text.contains(names) && text.contains("whsec_"),
                "{bad}: {text}"
            );
            // The message never repeats the value.
            assert!(!text.contains(bad), "{text}");
        }
        assert_eq!(Stripe::new("").unwrap_err(), ConfigError::Empty("secret"));
        assert!(Stripe::new("whsec_x\n").is_err());
        // The escape hatch for other senders and for test vectors.
        assert!(
            Stripe::builder()
                .secret_without_format_check("webhook_secret")
                .build()
                .is_ok()
        );
        assert!(
            Stripe::builder()
                .secret_without_format_check("a b")
                .build()
                .is_err()
        );
    }
}
