//! Fuzzes `StandardWebhooks::verify` over arbitrary headers and bodies.
//!
//! ```text
//! cd core/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run verify -- -max_total_time=600
//! ```
//!
//! Besides "never panics", every outcome is checked against a naive model of
//! the spec written here (own header lookup, own HMAC, own base64 decoding, own
//! ed25519 check): the verifier accepts exactly when the model does. So that
//! the fuzzer reaches the success path, it can ask for the genuine `v1`/`v1a`
//! signature of whatever id, timestamp text and body it chose, whole or with
//! one bit flipped, among arbitrary other entries.

#![no_main]

use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

use arbitrary::Arbitrary;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{KeyInit as _, Mac as _};
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;
use webhooks_core::scheme::StandardWebhooks;
use webhooks_core::scheme::standard::Signer;
use webhooks_core::{MatchedKey, Verifier, VerifyError};

const SECRET: &[u8] = b"fuzzing secret, 32 bytes long!!!";
const SEED: [u8; 32] = [0x42; 32];
const NOW: u64 = 1_700_000_000;
const TOLERANCE: u64 = 300;
const MAX_ENTRIES: usize = 32;

static SIGNER: LazyLock<Signer> =
    LazyLock::new(|| Signer::ed25519(format!("whsk_{}", B64.encode(SEED))).unwrap());
static PUBLIC_KEY: LazyLock<ed25519_dalek::VerifyingKey> =
    LazyLock::new(|| ed25519_dalek::SigningKey::from_bytes(&SEED).verifying_key());
static VERIFIER: LazyLock<StandardWebhooks> = LazyLock::new(|| {
    StandardWebhooks::builder()
        .raw_secret(SECRET)
        .public_key(SIGNER.public_key().unwrap())
        .tolerance(Duration::from_secs(TOLERANCE))
        .build()
        .unwrap()
});

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Prefix {
    Webhook,
    Svix,
}

impl Prefix {
    fn name(self, field: &str) -> String {
        match self {
            Self::Webhook => format!("webhook-{field}"),
            Self::Svix => format!("svix-{field}"),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Timestamp {
    /// `NOW + offset`, in digits: fresh or not depending on the offset.
    Near(i16),
    /// `NOW + offset` with leading zeros and surrounding spaces.
    Padded { offset: i16, zeros: u8, spaces: u8 },
    /// Anything.
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
enum Entry {
    /// Arbitrary text (split further if it holds spaces).
    Raw(String),
    /// `v1,` and the base64 of arbitrary bytes.
    V1(Vec<u8>),
    /// `v1a,` and the base64 of arbitrary bytes.
    V1a(Vec<u8>),
    /// The genuine `v1` signature of this request.
    Valid,
    /// The genuine `v1a` signature of this request.
    ValidV1a,
    /// A genuine signature with one bit of its bytes flipped.
    Flipped { v1a: bool, bit: u16 },
    /// A genuine signature under another version label.
    Relabelled(String),
}

#[derive(Arbitrary, Debug)]
struct Input {
    prefix: Prefix,
    id: Option<Vec<u8>>,
    timestamp: Option<Timestamp>,
    entries: Option<Vec<Entry>>,
    /// Extra raw fields, added after the three above (names in any case).
    extra: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    /// The receiver's clock, relative to `NOW`.
    skew: i16,
}

fn timestamp_text(ts: &Timestamp) -> Vec<u8> {
    let near = |offset: i16| NOW.wrapping_add_signed(i64::from(offset)).to_string();
    match ts {
        Timestamp::Near(offset) => near(*offset).into_bytes(),
        Timestamp::Padded {
            offset,
            zeros,
            spaces,
        } => {
            let pad = " ".repeat(usize::from(spaces % 3));
            let zeros = "0".repeat(usize::from(zeros % 4));
            format!("{pad}{zeros}{}{pad}", near(*offset)).into_bytes()
        }
        Timestamp::Raw(raw) => raw.clone(),
    }
}

/// `{id}.{timestamp}.{body}` as the model sees it.
fn content(id: &[u8], ts: &[u8], body: &[u8]) -> Vec<u8> {
    [id, b".", ts, b".", body].concat()
}

fn hmac(content: &[u8]) -> [u8; 32] {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(SECRET).unwrap();
    mac.update(content);
    mac.finalize().into_bytes().into()
}

fn ed25519(content: &[u8]) -> [u8; 64] {
    use ed25519_dalek::Signer as _;
    ed25519_dalek::SigningKey::from_bytes(&SEED)
        .sign(content)
        .to_bytes()
}

fn entry_text(entry: &Entry, signed: &[u8]) -> String {
    match entry {
        Entry::Raw(s) => s.clone(),
        Entry::V1(b) => format!("v1,{}", B64.encode(b)),
        Entry::V1a(b) => format!("v1a,{}", B64.encode(b)),
        Entry::Valid => format!("v1,{}", B64.encode(hmac(signed))),
        Entry::ValidV1a => format!("v1a,{}", B64.encode(ed25519(signed))),
        Entry::Flipped { v1a: false, bit } => {
            let mut sig = hmac(signed);
            sig[usize::from(bit / 8) % 32] ^= 1 << (bit % 8);
            format!("v1,{}", B64.encode(sig))
        }
        Entry::Flipped { v1a: true, bit } => {
            let mut sig = ed25519(signed);
            sig[usize::from(bit / 8) % 64] ^= 1 << (bit % 8);
            format!("v1a,{}", B64.encode(sig))
        }
        Entry::Relabelled(version) => format!("{version},{}", B64.encode(hmac(signed))),
    }
}

fn first<'h>(h: &'h HeaderMap, field: &str) -> Option<&'h HeaderValue> {
    h.get(format!("webhook-{field}"))
        .or_else(|| h.get(format!("svix-{field}")))
}

/// `MAX_V1A_CHECKS` in `standard.rs` over the one trusted key of this target.
const V1A_CHECKS: usize = 8;

/// What the spec says, with the verifier's documented `v1a` work bound:
/// `Some(matched by v1, matched by v1a)` if authentic and fresh.
fn model(h: &HeaderMap, body: &[u8], now: u64) -> Option<(bool, bool)> {
    let id = first(h, "id")?.to_str().ok()?;
    let ts_raw = first(h, "timestamp")?.to_str().ok()?;
    let signatures = first(h, "signature")?.to_str().ok()?;
    if id.is_empty() {
        return None;
    }
    let ts_text = ts_raw.trim_matches(|c: char| c.is_ascii_whitespace());
    if ts_text.is_empty() || !ts_text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let ts: u64 = ts_text.parse().ok()?;
    if ts.abs_diff(now) > TOLERANCE {
        return None;
    }
    let signed = content(id.as_bytes(), ts_text.as_bytes(), body);
    let expected = hmac(&signed);
    let (mut v1, mut v1a) = (false, false);
    // The verifier's documented work bound: with one trusted key, only the
    // first `V1A_CHECKS` distinct `v1a` signatures that can be canonical
    // (64 bytes, the top 3 bits of `s` clear) are checked.
    let mut v1a_seen: Vec<Vec<u8>> = Vec::new();
    for entry in signatures
        .split(' ')
        .filter(|e| !e.is_empty())
        .take(MAX_ENTRIES)
    {
        let Some((version, sig)) = entry.split_once(',') else {
            continue;
        };
        let Ok(bytes) = B64.decode(sig) else { continue };
        match version {
            "v1" => v1 |= bytes == expected,
            "v1a" => {
                let checked = bytes.len() == 64
                    && bytes[63] & 0xe0 == 0
                    && v1a_seen.len() < V1A_CHECKS
                    && !v1a_seen.contains(&bytes);
                if checked {
                    v1a_seen.push(bytes.clone());
                    if let Ok(sig) = ed25519_dalek::Signature::from_slice(&bytes) {
                        v1a |= PUBLIC_KEY.verify_strict(&signed, &sig).is_ok();
                    }
                }
            }
            _ => {}
        }
    }
    (v1 || v1a).then_some((v1, v1a))
}

fn insert(h: &mut HeaderMap, name: &str, value: &[u8]) {
    if let (Ok(name), Ok(value)) = (
        HeaderName::from_bytes(name.as_bytes()),
        HeaderValue::from_bytes(value),
    ) {
        h.append(name, value);
    }
}

fuzz_target!(|input: Input| {
    let id = input.id.unwrap_or_else(|| b"msg_fuzz".to_vec());
    let ts = input
        .timestamp
        .as_ref()
        .map_or_else(|| NOW.to_string().into_bytes(), timestamp_text);
    // The genuine signatures sign the trimmed timestamp text, as sent.
    let ts_signed = std::str::from_utf8(&ts)
        .map(|t| t.trim().as_bytes())
        .unwrap_or(&ts);
    let signed = content(&id, ts_signed, &input.body);

    let mut h = HeaderMap::new();
    insert(&mut h, &input.prefix.name("id"), &id);
    insert(&mut h, &input.prefix.name("timestamp"), &ts);
    if let Some(entries) = &input.entries {
        let value: Vec<String> = entries.iter().map(|e| entry_text(e, &signed)).collect();
        insert(
            &mut h,
            &input.prefix.name("signature"),
            value.join(" ").as_bytes(),
        );
    }
    for (name, value) in &input.extra {
        insert(&mut h, name, value);
    }

    let now = NOW.wrapping_add_signed(i64::from(input.skew));
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(now);
    let result = VERIFIER.verify(&h, &input.body, at);
    // The checks made before the body is read refuse only what verify
    // refuses, with the same error (issue 25, item 3).
    if let Err(early) = VERIFIER.check_headers(&h, at) {
        assert_eq!(result.as_ref().err(), Some(&early), "refused before the body only");
    }
    let expected = model(&h, &input.body, now);

    match (&result, expected) {
        (Ok(verified), Some((v1, v1a))) => {
            // HMAC secrets are tried before public keys.
            let want = if v1 {
                MatchedKey::Secret(0)
            } else {
                MatchedKey::PublicKey(0)
            };
            assert!(v1 || v1a);
            assert_eq!(verified.matched_key, want, "{h:?}");
            assert_eq!(
                verified.id.as_deref(),
                first(&h, "id").and_then(|v| v.to_str().ok())
            );
            assert!(verified.timestamp.unwrap().abs_diff(now) <= TOLERANCE);
        }
        (Err(err), None) => {
            let status = err.status().as_u16();
            assert!(status == 400 || status == 401, "{err:?}");
            let reason = err.to_string();
            assert!(!reason.contains(&B64.encode(hmac(&signed))), "{reason}");
            if matches!(err, VerifyError::MissingHeader(_)) {
                assert_eq!(status, 400);
            }
        }
        (Ok(verified), None) => panic!("accepted what the model refuses: {verified:?} {h:?}"),
        (Err(err), Some(_)) => panic!("refused what the model accepts: {err:?} {h:?}"),
    }
});
