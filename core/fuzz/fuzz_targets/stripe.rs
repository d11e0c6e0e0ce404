//! Fuzzes `Stripe::verify` (`Stripe-Signature: t=…,v1=…`) over arbitrary
//! headers and bodies: it never panics, refuses with a 400/401, and accepts
//! only a request carrying a MAC made with the endpoint secret over
//! `{t}.{body}`.
//!
//! ```text
//! cd core/fuzz && cargo +nightly fuzz run stripe -- -max_total_time=600
//! ```

#![no_main]

mod common;

use std::sync::LazyLock;
use std::time::Duration;

use arbitrary::Arbitrary;
use common::{OTHER, SECRET, TOLERANCE, Timestamp, hex, hmac256, insert};
use libfuzzer_sys::fuzz_target;
use webhooks_core::Verifier;
use webhooks_core::scheme::Stripe;

static VERIFIER: LazyLock<Stripe> = LazyLock::new(|| {
    Stripe::builder()
        .secret(SECRET)
        .tolerance(Duration::from_secs(TOLERANCE))
        .build()
        .unwrap()
});

#[derive(Arbitrary, Debug)]
enum Item {
    /// `t=` and a timestamp.
    T(Timestamp),
    /// The genuine `v1` for the first `t` (as its text, trimmed).
    Valid,
    /// The genuine `v1` in uppercase hex.
    ValidUpper,
    /// A `v1` made with another secret.
    Other,
    /// The genuine `v1` with one bit flipped.
    Flipped(u8),
    /// `v0=` with the genuine MAC (Stripe's legacy test scheme: ignored).
    V0,
    /// `v1=` and arbitrary text.
    V1(String),
    /// Anything.
    Raw(String),
}

#[derive(Arbitrary, Debug)]
struct Input {
    items: Option<Vec<Item>>,
    /// Separators between items (`,` if none left).
    separators: Vec<char>,
    extra: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    skew: i16,
}

fuzz_target!(|input: Input| {
    let first_t = input.items.iter().flatten().find_map(|i| match i {
        Item::T(t) => Some(t.text()),
        _ => None,
    });
    let t_text = first_t.unwrap_or_else(|| common::NOW.to_string().into_bytes());
    let t_signed = t_text.trim_ascii();
    let mac = |key: &str| hmac256(key, &[t_signed, b".", &input.body]);

    let mut h = http::HeaderMap::new();
    if let Some(items) = &input.items {
        let mut value = Vec::new();
        let mut separators = input.separators.iter();
        for (n, item) in items.iter().enumerate() {
            if n > 0 {
                let sep = separators.next().copied().unwrap_or(',');
                value.extend_from_slice(sep.to_string().as_bytes());
            }
            let text = match item {
                Item::T(t) => [b"t=".as_slice(), &t.text()].concat(),
                Item::Valid => format!("v1={}", hex(&mac(SECRET))).into_bytes(),
                Item::ValidUpper => format!("v1={}", hex(&mac(SECRET)).to_uppercase()).into_bytes(),
                Item::Other => format!("v1={}", hex(&mac(OTHER))).into_bytes(),
                Item::Flipped(bit) => {
                    let mut sig = mac(SECRET);
                    sig[usize::from(bit / 8) % 32] ^= 1 << (bit % 8);
                    format!("v1={}", hex(&sig)).into_bytes()
                }
                Item::V0 => format!("v0={}", hex(&mac(SECRET))).into_bytes(),
                Item::V1(s) => format!("v1={s}").into_bytes(),
                Item::Raw(s) => s.clone().into_bytes(),
            };
            value.extend_from_slice(&text);
        }
        insert(&mut h, "stripe-signature", &value);
    }
    for (name, value) in &input.extra {
        insert(&mut h, name, value);
    }

    let now = common::clock(input.skew);
    if let Err(early) = VERIFIER.check_headers(&h, now) {
        let late = VERIFIER.verify(&h, &input.body, now);
        assert_eq!(late.err(), Some(early), "refused before the body only");
    }
    match VERIFIER.verify(&h, &input.body, now) {
        Ok(verified) => {
            let t = verified.timestamp.expect("Stripe reports the signed timestamp");
            let sent = h.get("stripe-signature").expect("accepted without a header");
            let genuine = common::signed_forms(t_signed, Some(t))
                .iter()
                .any(|form| common::carries(sent.as_bytes(), &hmac256(SECRET, &[form, b".", &input.body])));
            assert!(genuine, "accepted without the secret's MAC: {h:?}");
            let now_secs = common::NOW.wrapping_add_signed(i64::from(input.skew));
            assert!(t.abs_diff(now_secs) <= TOLERANCE, "stale timestamp accepted");
        }
        Err(err) => common::check_refusal(&err, &[&mac(SECRET)], &[]),
    }
});
