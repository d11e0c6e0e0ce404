//! Fuzzes `Shopify::verify` (`X-Shopify-Hmac-Sha256: <base64 MAC of the
//! body>`) over arbitrary headers and bodies: it never panics, refuses with a
//! 400/401, and accepts only a request carrying a MAC made with the client
//! secret.
//!
//! ```text
//! cd core/fuzz && cargo +nightly fuzz run shopify -- -max_total_time=600
//! ```

#![no_main]

mod common;

use std::sync::LazyLock;

use arbitrary::Arbitrary;
use common::{OTHER, SECRET, b64, hex, hmac256, insert};
use libfuzzer_sys::fuzz_target;
use webhooks_core::Verifier;
use webhooks_core::scheme::Shopify;

static VERIFIER: LazyLock<Shopify> = LazyLock::new(|| Shopify::new(SECRET).unwrap());

#[derive(Arbitrary, Debug)]
enum Signature {
    /// The genuine MAC in base64, maybe padded with spaces or unpadded.
    Valid { spaces: u8, unpadded: bool },
    /// The genuine MAC in hex (not Shopify's encoding).
    Hex,
    /// A MAC made with another secret.
    Other,
    /// The genuine MAC with one bit flipped.
    Flipped(u8),
    /// Anything.
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    signature: Option<Signature>,
    webhook_id: Option<Vec<u8>>,
    topic: Option<Vec<u8>>,
    extra: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let genuine = hmac256(SECRET, &[&input.body]);
    let mut h = http::HeaderMap::new();
    if let Some(sig) = &input.signature {
        let value = match sig {
            Signature::Valid { spaces, unpadded } => {
                let pad = " ".repeat(usize::from(spaces % 3));
                let mut text = b64(&genuine);
                if *unpadded {
                    text = text.trim_end_matches('=').to_owned();
                }
                format!("{pad}{text}{pad}").into_bytes()
            }
            Signature::Hex => hex(&genuine).into_bytes(),
            Signature::Other => b64(&hmac256(OTHER, &[&input.body])).into_bytes(),
            Signature::Flipped(bit) => {
                let mut sig = genuine;
                sig[usize::from(bit / 8) % 32] ^= 1 << (bit % 8);
                b64(&sig).into_bytes()
            }
            Signature::Raw(raw) => raw.clone(),
        };
        insert(&mut h, "x-shopify-hmac-sha256", &value);
    }
    if let Some(id) = &input.webhook_id {
        insert(&mut h, "x-shopify-webhook-id", id);
    }
    if let Some(topic) = &input.topic {
        insert(&mut h, "x-shopify-topic", topic);
    }
    for (name, value) in &input.extra {
        insert(&mut h, name, value);
    }

    match VERIFIER.verify(&h, &input.body, common::clock(0)) {
        Ok(_) => {
            let sent = h.get("x-shopify-hmac-sha256").expect("accepted without a signature");
            // Shopify's encoding is base64: a hex MAC must not pass.
            let base64 = b64(&genuine);
            let base64 = base64.trim_end_matches('=');
            assert!(
                sent.as_bytes().windows(base64.len()).any(|w| w == base64.as_bytes()),
                "accepted without the secret's MAC in base64: {h:?}"
            );
        }
        Err(err) => common::check_refusal(&err, &[&genuine], &[]),
    }
});
