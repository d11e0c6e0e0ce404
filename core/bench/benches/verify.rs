//! Cost of verifying one Standard Webhooks delivery, by body size (256 B, 1 KiB,
//! 16 KiB, 1 MiB), measured in the same run for:
//!
//! * `raw_hmac`: HMAC-SHA256 alone (hmac 0.13 + sha2 0.11), pre-keyed as the
//!   library is: the keyed state is built once, and each iteration clones it,
//!   `update`s the id, `.`, timestamp, `.` and body pieces, `finalize`s, and
//!   compares with the already-decoded expected tag: the floor;
//! * `webhooks_core`: `StandardWebhooks::verify` from headers to `Verified`;
//! * `standardwebhooks`: the reference crate's `Webhook::verify`;
//! * `svix`: the `svix` crate's `webhooks::Webhook::verify`.
//!
//! All four get the same secret, id, timestamp, body and `webhook-*` headers.
//! The peers read the system clock, so each size's headers are signed with the
//! current time just before that size is measured.
//!
//! ```text
//! cd core/bench && cargo bench --bench verify -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Medians land in `target/criterion/verify_<size>/<name>/new/estimates.json`.

use std::hint::black_box;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use hmac::{KeyInit as _, Mac as _};
use http::{HeaderMap, HeaderValue};
use webhooks_core::Verifier as _;
use webhooks_core::scheme::StandardWebhooks;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const SIZES: [(usize, &str); 4] = [
    (256, "256B"),
    (1024, "1KiB"),
    (16 * 1024, "16KiB"),
    (1024 * 1024, "1MiB"),
];

/// A JSON body of exactly `len` bytes (ASCII, so the peers, which require
/// UTF-8, accept it too).
fn body(len: usize) -> Vec<u8> {
    let mut body = b"{\"data\":\"".to_vec();
    let tail = b"\"}";
    let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut i = 0usize;
    while body.len() < len - tail.len() {
        body.push(alphabet[i % alphabet.len()]);
        i = i.wrapping_mul(31).wrapping_add(7) % 1_000_003;
    }
    body.extend_from_slice(tail);
    assert_eq!(body.len(), len);
    body
}

fn bench(c: &mut Criterion) {
    let key = B64
        .decode(SECRET.trim_start_matches("whsec_"))
        .expect("base64 secret");
    let ours = StandardWebhooks::new(SECRET).expect("our verifier");
    let reference = standardwebhooks::Webhook::new(SECRET).expect("standardwebhooks");
    let svix = svix::webhooks::Webhook::new(SECRET).expect("svix");

    for (len, name) in SIZES {
        let body = body(len);
        let now = SystemTime::now();
        let ts = now.duration_since(UNIX_EPOCH).unwrap().as_secs();
        let ts_text = ts.to_string();
        let signature = ours.sign(ID, ts, &body).expect("sign");
        let expected = B64
            .decode(signature.trim_start_matches("v1,"))
            .expect("our signature is base64");

        let mut headers = HeaderMap::new();
        headers.insert("webhook-id", HeaderValue::from_static(ID));
        headers.insert("webhook-timestamp", HeaderValue::from(ts));
        headers.insert(
            "webhook-signature",
            HeaderValue::from_str(&signature).unwrap(),
        );

        let keyed = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
        let raw = || {
            let mut mac = black_box(&keyed).clone();
            mac.update(ID.as_bytes());
            mac.update(b".");
            mac.update(ts_text.as_bytes());
            mac.update(b".");
            mac.update(black_box(&body));
            let tag = mac.finalize().into_bytes();
            tag.as_slice() == black_box(expected.as_slice())
        };
        // Every contender accepts this delivery before it is timed.
        assert!(raw());
        ours.verify(&headers, &body, now).expect("ours verifies");
        reference
            .verify(&body, &headers)
            .expect("standardwebhooks verifies");
        svix.verify(&body, &headers).expect("svix verifies");

        let mut group = c.benchmark_group(format!("verify_{name}"));
        group.throughput(Throughput::Bytes(len as u64));
        if len >= 1024 * 1024 {
            group.sampling_mode(SamplingMode::Flat).sample_size(20);
        }
        group.bench_function("raw_hmac", |b| b.iter(|| assert!(raw())));
        group.bench_function("webhooks_core", |b| {
            b.iter(|| {
                ours.verify(black_box(&headers), black_box(&body), now)
                    .unwrap()
            })
        });
        group.bench_function("standardwebhooks", |b| {
            b.iter(|| {
                reference
                    .verify(black_box(&body), black_box(&headers))
                    .unwrap()
            })
        });
        group.bench_function("svix", |b| {
            b.iter(|| svix.verify(black_box(&body), black_box(&headers)).unwrap())
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
