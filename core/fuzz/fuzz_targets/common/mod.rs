//! What the header-parser fuzz targets share: fixed secrets and clock, a
//! naive HMAC of their own, arbitrary timestamps and extra headers, and the
//! two properties every target checks:
//!
//! * a verifier never accepts a request unless the request carries a MAC made
//!   with the right secret over its body (the fuzzer cannot guess a 256-bit
//!   MAC, so an acceptance without one is a bypass);
//! * a refusal is a client error (`400`/`401`; `503` only where a target says so),
//!   and its text never contains a secret or a genuine signature.

#![allow(dead_code, reason = "each target uses a different part")]

use std::time::{Duration, SystemTime};

use arbitrary::Arbitrary;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{KeyInit as _, Mac as _};
use http::{HeaderMap, HeaderName, HeaderValue};
use webhooks_core::VerifyError;

/// The receiver's secret.
pub const SECRET: &str = "whsec_fuzzing_secret_0123456789";
/// Another sender's secret: its signatures must never verify.
pub const OTHER: &str = "whsec_someone_else_9876543210";
/// The reference time (Unix seconds).
pub const NOW: u64 = 1_700_000_000;
/// The tolerance the targets configure.
pub const TOLERANCE: u64 = 300;

/// HMAC-SHA256 of the concatenated `parts` keyed with `key`.
pub fn hmac256(key: &str, parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key.as_bytes()).unwrap();
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// HMAC-SHA1 of `body` keyed with `key`.
pub fn hmac1(key: &str, body: &[u8]) -> [u8; 20] {
    let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(body);
    mac.finalize().into_bytes().into()
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Standard padded base64.
pub fn b64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

/// Whether `text` holds `mac` as hex (either case) or as base64.
pub fn carries(text: &[u8], mac: &[u8]) -> bool {
    let lower = text.to_ascii_lowercase();
    contains(&lower, hex(mac).as_bytes()) || contains(text, b64(mac).as_bytes())
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Whether any value of any header carries `mac`.
pub fn headers_carry(h: &HeaderMap, mac: &[u8]) -> bool {
    h.values().any(|v| carries(v.as_bytes(), mac))
}

/// A timestamp header's text.
#[derive(Arbitrary, Debug)]
pub enum Timestamp {
    /// `NOW + offset`: fresh or not depending on the offset.
    Near(i16),
    /// `NOW + offset` with leading zeros and surrounding spaces.
    Padded { offset: i16, zeros: u8, spaces: u8 },
    /// Anything.
    Raw(Vec<u8>),
}

impl Timestamp {
    pub fn text(&self) -> Vec<u8> {
        let near = |offset: i16| NOW.wrapping_add_signed(i64::from(offset)).to_string();
        match self {
            Self::Near(offset) => near(*offset).into_bytes(),
            Self::Padded {
                offset,
                zeros,
                spaces,
            } => {
                let pad = " ".repeat(usize::from(spaces % 3));
                let zeros = "0".repeat(usize::from(zeros % 4));
                format!("{pad}{zeros}{}{pad}", near(*offset)).into_bytes()
            }
            Self::Raw(raw) => raw.clone(),
        }
    }
}

/// The forms a timestamp may be signed in: as sent (trimmed), and as the
/// number it parses to.
pub fn signed_forms(sent: &[u8], parsed: Option<u64>) -> Vec<Vec<u8>> {
    let mut forms = vec![sent.trim_ascii().to_vec()];
    if let Some(t) = parsed {
        forms.push(t.to_string().into_bytes());
    }
    forms
}

/// Adds `name: value` when both are valid in HTTP.
pub fn insert(h: &mut HeaderMap, name: &str, value: &[u8]) {
    if let (Ok(name), Ok(value)) = (
        HeaderName::from_bytes(name.as_bytes()),
        HeaderValue::from_bytes(value),
    ) {
        h.append(name, value);
    }
}

/// The receiver's clock: `NOW + skew`.
pub fn clock(skew: i16) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(NOW.wrapping_add_signed(i64::from(skew)))
}

/// A refusal must be a client error whose text gives nothing away.
pub fn check_refusal(err: &VerifyError, genuine: &[&[u8]], allowed: &[u16]) {
    let status = err.status().as_u16();
    assert!(
        status == 400 || status == 401 || allowed.contains(&status),
        "{err:?} answers {status}"
    );
    for text in [err.to_string(), format!("{err:?}")] {
        assert!(!text.contains(SECRET) && !text.contains(OTHER), "{text}");
        for mac in genuine {
            assert!(!carries(text.as_bytes(), mac), "{text}");
        }
    }
}
