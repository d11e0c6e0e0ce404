//! Fuzzes `GitHub::verify` (`X-Hub-Signature-256: sha256=…`, and the legacy
//! `X-Hub-Signature: sha1=…` when allowed) over arbitrary headers and bodies:
//! it never panics, refuses with a 400/401, and accepts only a request
//! carrying a MAC made with the secret over the body (SHA-1 only when allowed
//! and the SHA-256 header is absent).
//!
//! ```text
//! cd core/fuzz && cargo +nightly fuzz run github -- -max_total_time=600
//! ```

#![no_main]

mod common;

use std::sync::LazyLock;

use arbitrary::Arbitrary;
use common::{OTHER, SECRET, hex, hmac1, hmac256, insert};
use libfuzzer_sys::fuzz_target;
use webhooks_core::Verifier;
use webhooks_core::scheme::GitHub;

static SHA256_ONLY: LazyLock<GitHub> = LazyLock::new(|| GitHub::new(SECRET).unwrap());
static WITH_SHA1: LazyLock<GitHub> =
    LazyLock::new(|| GitHub::builder().secret(SECRET).allow_sha1().build().unwrap());

#[derive(Arbitrary, Debug)]
enum Signature {
    /// `{prefix}` and the genuine MAC in hex.
    Valid { upper: bool, spaces: u8 },
    /// A MAC made with another secret.
    Other,
    /// The genuine MAC with one bit flipped.
    Flipped(u8),
    /// The genuine MAC under the other algorithm's prefix.
    WrongPrefix,
    /// Anything.
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    allow_sha1: bool,
    sha256: Option<Signature>,
    sha1: Option<Signature>,
    delivery: Option<Vec<u8>>,
    event: Option<Vec<u8>>,
    extra: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

fn value(signature: &Signature, prefix: &str, other_prefix: &str, mac: &[u8], other: &[u8]) -> Vec<u8> {
    match signature {
        Signature::Valid { upper, spaces } => {
            let digits = if *upper { hex(mac).to_uppercase() } else { hex(mac) };
            let pad = " ".repeat(usize::from(spaces % 3));
            format!("{pad}{prefix}{digits}{pad}").into_bytes()
        }
        Signature::Other => format!("{prefix}{}", hex(other)).into_bytes(),
        Signature::Flipped(bit) => {
            let mut sig = mac.to_vec();
            let len = sig.len();
            sig[usize::from(bit / 8) % len] ^= 1 << (bit % 8);
            format!("{prefix}{}", hex(&sig)).into_bytes()
        }
        Signature::WrongPrefix => format!("{other_prefix}{}", hex(mac)).into_bytes(),
        Signature::Raw(raw) => raw.clone(),
    }
}

fuzz_target!(|input: Input| {
    let mac256 = hmac256(SECRET, &[&input.body]);
    let mac1 = hmac1(SECRET, &input.body);
    let mut h = http::HeaderMap::new();
    if let Some(sig) = &input.sha256 {
        let other = hmac256(OTHER, &[&input.body]);
        insert(&mut h, "x-hub-signature-256", &value(sig, "sha256=", "sha1=", &mac256, &other));
    }
    if let Some(sig) = &input.sha1 {
        let other = hmac1(OTHER, &input.body);
        insert(&mut h, "x-hub-signature", &value(sig, "sha1=", "sha256=", &mac1, &other));
    }
    if let Some(id) = &input.delivery {
        insert(&mut h, "x-github-delivery", id);
    }
    if let Some(event) = &input.event {
        insert(&mut h, "x-github-event", event);
    }
    for (name, value) in &input.extra {
        insert(&mut h, name, value);
    }

    let verifier = if input.allow_sha1 { &*WITH_SHA1 } else { &*SHA256_ONLY };
    if let Err(early) = verifier.check_headers(&h, common::clock(0)) {
        let late = verifier.verify(&h, &input.body, common::clock(0));
        assert_eq!(late.err(), Some(early), "refused before the body only");
    }
    match verifier.verify(&h, &input.body, common::clock(0)) {
        Ok(_) => {
            let by_sha256 = h
                .get("x-hub-signature-256")
                .is_some_and(|v| common::carries(v.as_bytes(), &mac256));
            let by_sha1 = input.allow_sha1
                && !h.contains_key("x-hub-signature-256")
                && h.get("x-hub-signature").is_some_and(|v| common::carries(v.as_bytes(), &mac1));
            assert!(by_sha256 || by_sha1, "accepted without the secret's MAC: {h:?}");
        }
        Err(err) => common::check_refusal(&err, &[&mac256, &mac1], &[]),
    }
});
