//! Signature schemes: one file each, all implementing [`Verifier`](crate::Verifier).
//!
//! | scheme | type |
//! |---|---|
//! | [Standard Webhooks](https://www.standardwebhooks.com/) v1 (HMAC) and v1a (ed25519), Svix | [`StandardWebhooks`] |
//!
//! Shared rules: signatures are computed over the exact raw body bytes and
//! compared as decoded bytes in constant time; several secrets may be active at
//! once for rotation; secrets never appear in `Debug` output.

use std::fmt;
use std::time::{Duration, SystemTime};

use hmac::{Hmac, KeyInit};
use http::HeaderMap;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::{ConfigError, VerifyError};

pub mod standard;

pub use standard::{StandardWebhooks, StandardWebhooksBuilder};

/// HMAC-SHA256, the MAC every HMAC scheme here uses.
pub(crate) type HmacSha256 = Hmac<Sha256>;

/// The default replay window: five minutes either side of the receiver's clock.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

/// A symmetric secret, pre-keyed for HMAC-SHA256.
///
/// The key schedule (the inner and outer pads) is computed once when the
/// verifier is built; each request clones the keyed state. `Debug` prints only
/// the secret's length.
#[derive(Clone)]
pub(crate) struct HmacKey {
    mac: HmacSha256,
    len: usize,
}

impl HmacKey {
    pub(crate) fn new(secret: &[u8], what: &'static str) -> Result<Self, ConfigError> {
        if secret.is_empty() {
            return Err(ConfigError::Empty(what));
        }
        let mac = HmacSha256::new_from_slice(secret).map_err(|_| ConfigError::Invalid {
            what,
            reason: "unusable HMAC key",
        })?;
        Ok(Self {
            mac,
            len: secret.len(),
        })
    }

    /// A fresh keyed MAC state.
    pub(crate) fn mac(&self) -> HmacSha256 {
        self.mac.clone()
    }
}

impl fmt::Debug for HmacKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HmacKey([redacted; {} bytes])", self.len)
    }
}

/// Compares two byte strings in constant time (for equal lengths).
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// The value of the first of `names` present in `headers`, as visible ASCII.
///
/// Returns the name that was found with the value, so errors can name it.
pub(crate) fn header<'h>(
    headers: &'h HeaderMap,
    names: &[&'static str],
) -> Result<(&'static str, &'h str), VerifyError> {
    for &name in names {
        if let Some(value) = headers.get(name) {
            let value = value
                .to_str()
                .map_err(|_| VerifyError::malformed(name, "not visible ASCII"))?;
            return Ok((name, value));
        }
    }
    Err(VerifyError::MissingHeader(names[0]))
}

/// Parses integer Unix seconds: ASCII digits only, no sign, no overflow.
pub(crate) fn parse_timestamp(header: &'static str, value: &str) -> Result<u64, VerifyError> {
    let value = value.trim();
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VerifyError::malformed(header, "not integer Unix seconds"));
    }
    value
        .parse::<u64>()
        .map_err(|_| VerifyError::malformed(header, "timestamp out of range"))
}

/// Checks a signed timestamp against `now`, two-sided: exactly `tolerance`
/// away is accepted, one second more is not.
pub(crate) fn check_timestamp(
    timestamp: u64,
    now: SystemTime,
    tolerance: Duration,
) -> Result<(), VerifyError> {
    let now = i128::from(unix_seconds(now));
    let ts = i128::from(timestamp);
    let tol = i128::from(tolerance.as_secs());
    if ts < now - tol {
        Err(VerifyError::TimestampTooOld)
    } else if ts > now + tol {
        Err(VerifyError::TimestampTooNew)
    } else {
        Ok(())
    }
}

/// Seconds since the Unix epoch; a clock before 1970 counts as negative.
pub(crate) fn unix_seconds(t: SystemTime) -> i64 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerance_is_inclusive_and_two_sided() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let tol = Duration::from_secs(300);
        assert_eq!(check_timestamp(1_000_000 - 300, now, tol), Ok(()));
        assert_eq!(check_timestamp(1_000_000 + 300, now, tol), Ok(()));
        assert_eq!(
            check_timestamp(1_000_000 - 301, now, tol),
            Err(VerifyError::TimestampTooOld)
        );
        assert_eq!(
            check_timestamp(1_000_000 + 301, now, tol),
            Err(VerifyError::TimestampTooNew)
        );
        assert_eq!(
            check_timestamp(u64::MAX, now, tol),
            Err(VerifyError::TimestampTooNew)
        );
    }

    #[test]
    fn timestamps_must_be_plain_digits() {
        for bad in [
            "",
            "-1",
            "+5",
            "1.5",
            "abc",
            "1e9",
            "99999999999999999999999",
        ] {
            assert!(
                matches!(
                    parse_timestamp("t", bad),
                    Err(VerifyError::MalformedHeader { .. })
                ),
                "{bad:?}"
            );
        }
        assert_eq!(parse_timestamp("t", "1614265330"), Ok(1_614_265_330));
    }

    #[test]
    fn hmac_key_debug_is_redacted() {
        let key = HmacKey::new(b"super-secret-value", "secret").unwrap();
        let shown = format!("{key:?}");
        assert!(!shown.contains("super"), "{shown}");
        assert!(HmacKey::new(b"", "secret").is_err());
    }
}
