//! Fuzzes `GenericHmac::verify` in three configurations (hex with a prefix and
//! a signed timestamp; base64 with a content prefix and a timestamp; hex over
//! the body alone) over arbitrary headers and bodies: it never panics,
//! refuses with a 400/401, and accepts only a request carrying a MAC made
//! with the secret over what the configuration signs.
//!
//! ```text
//! cd core/fuzz && cargo +nightly fuzz run generic_hmac -- -max_total_time=600
//! ```

#![no_main]

mod common;

use std::sync::LazyLock;
use std::time::Duration;

use arbitrary::Arbitrary;
use common::{OTHER, SECRET, TOLERANCE, Timestamp, b64, hex, hmac256, insert};
use libfuzzer_sys::fuzz_target;
use webhooks_core::Verifier;
use webhooks_core::scheme::{GenericHmac, SignatureEncoding};

/// One configuration and what it signs.
struct Config {
    verifier: GenericHmac,
    signature: &'static str,
    prefix: &'static str,
    base64: bool,
    content_prefix: &'static str,
    /// The timestamp header and the separator after it.
    timestamp: Option<(&'static str, &'static str)>,
}

impl Config {
    fn new(
        signature: &'static str,
        prefix: &'static str,
        base64: bool,
        content_prefix: &'static str,
        timestamp: Option<(&'static str, &'static str)>,
    ) -> Self {
        let mut builder = GenericHmac::builder("fuzz", signature)
            .secret(SECRET)
            .prefix(prefix)
            .encoding(if base64 {
                SignatureEncoding::Base64
            } else {
                SignatureEncoding::Hex
            })
            .content_prefix(content_prefix)
            .id_header("x-fuzz-id")
            .event_type_header("x-fuzz-event");
        if let Some((header, separator)) = timestamp {
            builder = builder
                .signed_timestamp(header, separator)
                .tolerance(Duration::from_secs(TOLERANCE));
        }
        Self {
            verifier: builder.build().unwrap(),
            signature,
            prefix,
            base64,
            content_prefix,
            timestamp,
        }
    }

    /// The MAC under `key` with the timestamp text `ts`.
    fn mac(&self, key: &str, ts: &[u8], body: &[u8]) -> [u8; 32] {
        match self.timestamp {
            Some((_, sep)) => hmac256(key, &[self.content_prefix.as_bytes(), ts, sep.as_bytes(), body]),
            None => hmac256(key, &[self.content_prefix.as_bytes(), body]),
        }
    }

    fn encode(&self, mac: &[u8]) -> String {
        if self.base64 { b64(mac) } else { hex(mac) }
    }
}

static CONFIGS: LazyLock<[Config; 3]> = LazyLock::new(|| {
    [
        Config::new("x-acme-signature", "sha256=", false, "", Some(("x-acme-timestamp", "."))),
        Config::new("x-sig", "", true, "v1:", Some(("x-ts", ":"))),
        Config::new("x-body-sig", "", false, "", None),
    ]
});

#[derive(Arbitrary, Debug)]
enum Signature {
    /// The prefix and the genuine MAC, maybe in uppercase hex, maybe padded.
    Valid { upper: bool, spaces: u8 },
    /// The genuine MAC without the prefix.
    NoPrefix,
    /// The genuine MAC in the other encoding.
    OtherEncoding,
    /// A MAC made with another secret.
    Other,
    /// The genuine MAC with one bit flipped.
    Flipped(u8),
    /// Anything.
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    config: u8,
    timestamp: Option<Timestamp>,
    signature: Option<Signature>,
    id: Option<Vec<u8>>,
    extra: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    skew: i16,
}

fuzz_target!(|input: Input| {
    let config = &CONFIGS[usize::from(input.config % 3)];
    let ts = input
        .timestamp
        .as_ref()
        .map_or_else(|| common::NOW.to_string().into_bytes(), Timestamp::text);
    let trimmed = ts.trim_ascii();
    let genuine = config.mac(SECRET, trimmed, &input.body);

    let mut h = http::HeaderMap::new();
    if let (Some((header, _)), Some(_)) = (config.timestamp, &input.timestamp) {
        insert(&mut h, header, &ts);
    }
    if let Some(sig) = &input.signature {
        let prefix = config.prefix;
        let value = match sig {
            Signature::Valid { upper, spaces } => {
                let mut text = config.encode(&genuine);
                if *upper && !config.base64 {
                    text = text.to_uppercase();
                }
                let pad = " ".repeat(usize::from(spaces % 3));
                format!("{pad}{prefix}{text}{pad}").into_bytes()
            }
            Signature::NoPrefix => config.encode(&genuine).into_bytes(),
            Signature::OtherEncoding => {
                let text = if config.base64 { hex(&genuine) } else { b64(&genuine) };
                format!("{prefix}{text}").into_bytes()
            }
            Signature::Other => {
                format!("{prefix}{}", config.encode(&config.mac(OTHER, trimmed, &input.body)))
                    .into_bytes()
            }
            Signature::Flipped(bit) => {
                let mut sig = genuine;
                sig[usize::from(bit / 8) % 32] ^= 1 << (bit % 8);
                format!("{prefix}{}", config.encode(&sig)).into_bytes()
            }
            Signature::Raw(raw) => raw.clone(),
        };
        insert(&mut h, config.signature, &value);
    }
    if let Some(id) = &input.id {
        insert(&mut h, "x-fuzz-id", id);
    }
    for (name, value) in &input.extra {
        insert(&mut h, name, value);
    }

    match config.verifier.verify(&h, &input.body, common::clock(input.skew)) {
        Ok(verified) => {
            let sent = h.get(config.signature).expect("accepted without a signature");
            let forms = match config.timestamp {
                Some((header, _)) => {
                    let t = verified.timestamp.expect("a signed timestamp is reported");
                    let now = common::NOW.wrapping_add_signed(i64::from(input.skew));
                    assert!(t.abs_diff(now) <= TOLERANCE, "stale timestamp accepted");
                    let sent_ts = h.get(header).expect("accepted without a timestamp");
                    common::signed_forms(sent_ts.as_bytes(), Some(t))
                }
                None => vec![Vec::new()],
            };
            let carried = forms.iter().any(|form| {
                let text = config.encode(&config.mac(SECRET, form, &input.body));
                let sent = sent.as_bytes();
                let sent = if config.base64 { sent.to_vec() } else { sent.to_ascii_lowercase() };
                sent.windows(text.len()).any(|w| w == text.as_bytes())
            });
            assert!(carried, "accepted without the secret's MAC in its encoding: {h:?}");
        }
        Err(err) => common::check_refusal(&err, &[&genuine], &[]),
    }
});
