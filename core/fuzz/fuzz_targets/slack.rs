//! Fuzzes `Slack::verify` (`X-Slack-Signature: v0=…` over
//! `v0:{X-Slack-Request-Timestamp}:{body}`) over arbitrary headers and
//! bodies: it never panics, refuses with a 400/401, and accepts only a fresh
//! request carrying a MAC made with the signing secret.
//!
//! ```text
//! cd core/fuzz && cargo +nightly fuzz run slack -- -max_total_time=600
//! ```

#![no_main]

mod common;

use std::sync::LazyLock;
use std::time::Duration;

use arbitrary::Arbitrary;
use common::{OTHER, SECRET, TOLERANCE, Timestamp, hex, hmac256, insert};
use libfuzzer_sys::fuzz_target;
use webhooks_core::Verifier;
use webhooks_core::scheme::Slack;

static VERIFIER: LazyLock<Slack> = LazyLock::new(|| {
    Slack::builder()
        .secret(SECRET)
        .tolerance(Duration::from_secs(TOLERANCE))
        .build()
        .unwrap()
});

#[derive(Arbitrary, Debug)]
enum Signature {
    /// `v0=` and the genuine MAC over the timestamp header's trimmed text.
    Valid { upper: bool },
    /// The genuine MAC over the timestamp's canonical digits.
    Canonical,
    /// A MAC made with another secret.
    Other,
    /// The genuine MAC with one bit flipped.
    Flipped(u8),
    /// The genuine MAC under another version.
    Relabelled(String),
    /// Anything.
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    timestamp: Option<Timestamp>,
    signature: Option<Signature>,
    extra: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    skew: i16,
}

fuzz_target!(|input: Input| {
    let ts = input
        .timestamp
        .as_ref()
        .map_or_else(|| common::NOW.to_string().into_bytes(), Timestamp::text);
    let trimmed = ts.trim_ascii();
    let mac = |key: &str, t: &[u8]| hmac256(key, &[b"v0:", t, b":", &input.body]);
    let genuine = mac(SECRET, trimmed);

    let mut h = http::HeaderMap::new();
    if input.timestamp.is_some() {
        insert(&mut h, "x-slack-request-timestamp", &ts);
    }
    if let Some(sig) = &input.signature {
        let value = match sig {
            Signature::Valid { upper: false } => format!("v0={}", hex(&genuine)).into_bytes(),
            Signature::Valid { upper: true } => {
                format!("v0={}", hex(&genuine).to_uppercase()).into_bytes()
            }
            Signature::Canonical => {
                let canonical = std::str::from_utf8(trimmed)
                    .ok()
                    .and_then(|t| t.parse::<u64>().ok())
                    .map_or_else(|| trimmed.to_vec(), |t| t.to_string().into_bytes());
                format!("v0={}", hex(&mac(SECRET, &canonical))).into_bytes()
            }
            Signature::Other => format!("v0={}", hex(&mac(OTHER, trimmed))).into_bytes(),
            Signature::Flipped(bit) => {
                let mut sig = genuine;
                sig[usize::from(bit / 8) % 32] ^= 1 << (bit % 8);
                format!("v0={}", hex(&sig)).into_bytes()
            }
            Signature::Relabelled(version) => format!("{version}={}", hex(&genuine)).into_bytes(),
            Signature::Raw(raw) => raw.clone(),
        };
        insert(&mut h, "x-slack-signature", &value);
    }
    for (name, value) in &input.extra {
        insert(&mut h, name, value);
    }

    match VERIFIER.verify(&h, &input.body, common::clock(input.skew)) {
        Ok(verified) => {
            let t = verified.timestamp.expect("Slack reports the signed timestamp");
            let sent_ts = h.get("x-slack-request-timestamp").expect("accepted without a timestamp");
            let sent_sig = h.get("x-slack-signature").expect("accepted without a signature");
            let carried = common::signed_forms(sent_ts.as_bytes(), Some(t))
                .iter()
                .any(|form| common::carries(sent_sig.as_bytes(), &mac(SECRET, form)));
            assert!(carried, "accepted without the secret's MAC: {h:?}");
            let now = common::NOW.wrapping_add_signed(i64::from(input.skew));
            assert!(t.abs_diff(now) <= TOLERANCE, "stale timestamp accepted");
        }
        Err(err) => common::check_refusal(&err, &[&genuine], &[]),
    }
});
