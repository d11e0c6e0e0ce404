//! Cost of verifying one delivery of a 1 KiB JSON body with each of
//! webhooks-core's schemes, each next to the raw cryptography over the same
//! signed content, measured in the same run:
//!
//! | group | `webhooks_core` | `raw` (the floor) |
//! |---|---|---|
//! | `standard_v1` | `StandardWebhooks::verify`, one `whsec_` secret | HMAC-SHA256 of `{id}.{ts}.{body}` |
//! | `standard_v1a` | `StandardWebhooks::verify`, one `whpk_` public key | `VerifyingKey::verify_strict` over `{id}.{ts}.{body}`, already concatenated |
//! | `stripe` | `Stripe::verify` (also reads the body's `"id"` and `"type"`) | HMAC-SHA256 of `{t}.{body}` |
//! | `github` | `GitHub::verify` | HMAC-SHA256 of the body |
//! | `slack` | `Slack::verify` | HMAC-SHA256 of `v0:{ts}:{body}` |
//! | `shopify` | `Shopify::verify` | HMAC-SHA256 of the body |
//! | `generic_hmac` | `GenericHmac` configured like GitHub (`x-hub-signature-256`, `sha256=` hex, delivery and event headers) | HMAC-SHA256 of the body |
//! | `twilio` | `Twilio::verify_head` (URL rebuilt from a base and the path and query; a 1 KiB form body decoded and sorted) | HMAC-SHA1 of the URL and the already-sorted, already-decoded parameters |
//! | `square` | `Square::verify_head` (exact URL; reads `"event_id"`, `"type"`) | HMAC-SHA256 of `{url}{body}` |
//! | `mandrill` | `Mandrill::verify_head` (a 1 KiB `mandrill_events` form body, decoded) | HMAC-SHA1 of the URL, `mandrill_events` and the decoded value |
//! | `hubspot` | `HubSpot::verify_head` (URL rebuilt) | HMAC-SHA256 of `POST{url}{body}{ts}` |
//! | `linear` | `Linear::verify` (reads `"webhookTimestamp"` from the body) | HMAC-SHA256 of the body |
//! | `zoom` | `Zoom::verify` (reads `"event"`) | HMAC-SHA256 of `v0:{ts}:{body}` |
//! | `paddle` | `Paddle::verify` (reads `"event_id"`, `"event_type"`) | HMAC-SHA256 of `{ts}:{body}` |
//! | `intercom` | `Intercom::verify` (reads `"id"`, `"topic"`) | HMAC-SHA1 of the body |
//! | `typeform` | `Typeform::verify` (reads `"event_id"`, `"event_type"`) | HMAC-SHA256 of the body |
//! | `generic_hmac_sha512_url` | `GenericHmac`, SHA-512 base64 over `{timestamp}.{url}.{body}` | HMAC-SHA512 of the same |
//! | `gitlab` | `GitLab::verify` (SHA-256 of the presented token, compared with the configured digest) | `==` on the token bytes |
//! | `discord` | `Discord::verify` (ed25519 over `{ts}{body}`, reads `"id"`, `"type"`) | `VerifyingKey::verify_strict` over the same, already concatenated |
//! | `v1a_flood_1mib` | the worst unsigned request: a 1 MiB body, 32 well-formed `v1a,` entries none of which match, 2 trusted public keys; `v1_flood` is the same with 32 `v1,` entries and 2 secrets | one `verify_strict` over the 1 MiB content |
//! | `sendgrid` | `SendGrid::verify`, one public key (also hashes the body for the id, reads the events' types) | ECDSA P-256 `verify_prehash` of SHA-256(`{ts}{body}`), key and signature already parsed |
//! | `mailgun` | `Mailgun::verify` of a 1 KiB JSON event (finds the `signature` object in the body, reads `event-data.event`) | `raw`: HMAC-SHA256 of `{timestamp}{token}`; `raw_with_parse`: the same after a borrowed serde_json parse of the `signature` object and a hex decode into a fixed array, which any verifier must do |
//! | `postmark` | `Postmark::verify` (Basic credentials as one SHA-256 digest, the id from the body's `RecordType`, `MessageID` and `DeliveredAt`) | `raw`: base64-decode the header into a stack buffer, constant-time compare with `user:password`; `raw_with_parse`: the same plus a borrowed serde_json parse of the three id fields (Postmark signs nothing, so the id is read from the body) |
//! | `sns` | `Sns::verify_request` on a cached certificate, `SignatureVersion` 2, the 1 KiB body as `Message` (parses the JSON, builds the canonical string) | RSA-2048 PKCS#1 v1.5 verify of SHA-256 of the canonical string, built beforehand |
//!
//! The provider rows (from `twilio` on) are built in `src/providers.rs`,
//! shared with the `instructions` binary's `provider` workload.
//! The provider rows use a 1 KiB body shaped as that provider sends it (its
//! id and type fields where it puts them, a padded `data` object), since
//! where those fields sit decides how much of the body is read.
//! The raw HMAC (hmac 0.13 + sha2 0.11) is pre-keyed, as the library's
//! verifiers are: the keyed state is built once, and each iteration clones
//! it, feeds the pieces with `update`, finalizes and compares with the
//! already-decoded expected tag, as `raw_hmac` in `verify.rs` does;
//! the raw ed25519 check (ed25519-dalek 3) gets the already-parsed key and
//! signature. Neither reads a header.
//!
//! Peers: `stripe` also measures `async_stripe_webhook`, async-stripe's
//! `stripe_webhook::Webhook::construct_event_with_timestamp` (signature check
//! plus its parse of the whole event; the event type is one whose object this
//! build leaves untyped). The body is therefore a Stripe-shaped event, used
//! by every scheme. No GitHub peer: the well-known crate (octocrab) brings an
//! HTTP client stack, and the small validator crates check only SHA-1.
//!
//! Every contender accepts its delivery before it is timed. Timestamps are
//! fixed and `now` is passed in, so the clock is not read.
//!
//! ```text
//! cd core/bench && cargo bench --bench schemes -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Medians land in `target/criterion/<group>/<name>/new/estimates.json`.

use std::hint::black_box;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use http::HeaderMap;
use webhooks_core::Verifier;
use webhooks_core::scheme::standard::Signer;
use webhooks_core::scheme::{GenericHmac, GitHub, Shopify, Slack, StandardWebhooks, Stripe};

#[path = "../src/providers.rs"]
mod providers;
use providers::{DELIVERY, SECRET, TS, body, keyed, raw_hmac, unhex, value};

const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const STANDARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// base64 of a 32-byte ed25519 seed.
const ED25519_SECRET: &str = "whsk_BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=";
const STRIPE_SECRET: &str = "whsec_test_5Tq1rS0bXbKcYxLr3dWnPzQe";

/// One group: the raw floor, then ours, then any peers.
fn group<V: Verifier>(
    c: &mut Criterion,
    name: &str,
    raw: &dyn Fn() -> bool,
    ours: &V,
    headers: &HeaderMap,
    body: &[u8],
    peers: &[(&str, &dyn Fn() -> bool)],
) {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(TS);
    assert!(raw(), "{name}: raw accepts");
    ours.verify(headers, body, now)
        .unwrap_or_else(|e| panic!("{name}: ours accepts: {e}"));
    for (peer, verify) in peers {
        assert!(verify(), "{name}: {peer} accepts");
    }
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("raw", |b| b.iter(|| assert!(raw())));
    group.bench_function("webhooks_core", |b| {
        b.iter(|| {
            ours.verify(black_box(headers), black_box(body), now)
                .unwrap()
        })
    });
    for (peer, verify) in peers {
        group.bench_function(*peer, |b| b.iter(|| assert!(verify())));
    }
    group.finish();
}

fn bench(c: &mut Criterion) {
    let body = body();
    let ts_text = TS.to_string();

    // Standard Webhooks v1 (HMAC).
    let ours = StandardWebhooks::new(STANDARD_SECRET).expect("v1 verifier");
    let headers = ours.sign_headers(ID, TS, &body).expect("v1 headers");
    let key = B64
        .decode(STANDARD_SECRET.trim_start_matches("whsec_"))
        .unwrap();
    let tag = B64
        .decode(value(&headers, "webhook-signature").trim_start_matches("v1,"))
        .unwrap();
    let key = keyed(&key);
    let raw = || {
        raw_hmac(
            &key,
            &[ID.as_bytes(), b".", ts_text.as_bytes(), b".", &body],
            &tag,
        )
    };
    group(c, "standard_v1", &raw, &ours, &headers, &body, &[]);

    // Standard Webhooks v1a (ed25519).
    let signer = Signer::ed25519(ED25519_SECRET).expect("ed25519 signer");
    let public_key = signer.public_key().expect("a public key");
    let ours = StandardWebhooks::builder()
        .public_key(&public_key)
        .build()
        .expect("v1a verifier");
    let headers = signer.headers(ID, TS, &body).expect("v1a headers");
    let pk: [u8; 32] = B64
        .decode(public_key.trim_start_matches("whpk_"))
        .unwrap()
        .try_into()
        .unwrap();
    let pk = ed25519_dalek::VerifyingKey::from_bytes(&pk).unwrap();
    let sig: [u8; 64] = B64
        .decode(value(&headers, "webhook-signature").trim_start_matches("v1a,"))
        .unwrap()
        .try_into()
        .unwrap();
    let sig = ed25519_dalek::Signature::from_bytes(&sig);
    let content = [ID.as_bytes(), b".", ts_text.as_bytes(), b".", &body].concat();
    let raw = || {
        black_box(&pk)
            .verify_strict(black_box(&content), black_box(&sig))
            .is_ok()
    };
    group(c, "standard_v1a", &raw, &ours, &headers, &body, &[]);

    // Stripe, and async-stripe's webhook crate.
    let ours = Stripe::new(STRIPE_SECRET).expect("stripe verifier");
    let headers = ours.sign_headers(TS, &body).expect("stripe headers");
    let signature = value(&headers, "stripe-signature");
    let tag = unhex(signature.rsplit_once("v1=").unwrap().1);
    let stripe_key = keyed(STRIPE_SECRET.as_bytes());
    let raw = || raw_hmac(&stripe_key, &[ts_text.as_bytes(), b".", &body], &tag);
    let body_text = std::str::from_utf8(&body).unwrap();
    let now_secs = i64::try_from(TS).unwrap();
    let async_stripe = || {
        stripe_webhook::Webhook::construct_event_with_timestamp(
            black_box(body_text),
            black_box(signature),
            STRIPE_SECRET,
            now_secs,
        )
        .is_ok()
    };
    group(
        c,
        "stripe",
        &raw,
        &ours,
        &headers,
        &body,
        &[("async_stripe_webhook", &async_stripe)],
    );

    // GitHub.
    let ours = GitHub::new(SECRET).expect("github verifier");
    let headers = ours
        .sign_headers(DELIVERY, "invoiceitem", &body)
        .expect("github headers");
    let tag = unhex(value(&headers, "x-hub-signature-256").trim_start_matches("sha256="));
    let secret_key = keyed(SECRET);
    let raw = || raw_hmac(&secret_key, &[&body], &tag);
    group(c, "github", &raw, &ours, &headers, &body, &[]);

    // GenericHmac configured like GitHub, on GitHub's headers.
    let generic = GenericHmac::builder("github-like", "x-hub-signature-256")
        .secret(SECRET)
        .prefix("sha256=")
        .id_header("x-github-delivery")
        .event_type_header("x-github-event")
        .build()
        .expect("generic verifier");
    group(c, "generic_hmac", &raw, &generic, &headers, &body, &[]);

    // Slack.
    let ours = Slack::new(SECRET).expect("slack verifier");
    let headers = ours.sign_headers(TS, &body).expect("slack headers");
    let tag = unhex(value(&headers, "x-slack-signature").trim_start_matches("v0="));
    let raw = || {
        raw_hmac(
            &secret_key,
            &[b"v0:", ts_text.as_bytes(), b":", &body],
            &tag,
        )
    };
    group(c, "slack", &raw, &ours, &headers, &body, &[]);

    // Shopify.
    let ours = Shopify::new(SECRET).expect("shopify verifier");
    let headers = ours
        .sign_headers(DELIVERY, "orders/create", &body)
        .expect("shopify headers");
    let tag = B64
        .decode(value(&headers, "x-shopify-hmac-sha256"))
        .unwrap();
    let raw = || raw_hmac(&secret_key, &[&body], &tag);
    group(c, "shopify", &raw, &ours, &headers, &body, &[]);

    v1a_flood(c);
}

/// The worst request an attacker without a key can send a v1a receiver: the
/// largest body (1 MiB, the default limit) with 32 structurally valid `v1a`
/// signatures (real signatures, by a key nobody trusts, of other content),
/// verified against 2 trusted public keys. Rejected, so the time is what one
/// forged request costs. Next to it: the same flood of `v1` entries against
/// 2 HMAC secrets, and one honest ed25519 check of the same content.
fn v1a_flood(c: &mut Criterion) {
    const MIB: usize = 1024 * 1024;
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(TS);
    let body = vec![b'x'; MIB];
    let ts_text = TS.to_string();
    let trusted = [
        Signer::ed25519(ED25519_SECRET).expect("ed25519 signer"),
        Signer::ed25519("whsk_CAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAg=")
            .expect("ed25519 signer"),
    ];
    let attacker = Signer::ed25519("whsk_CQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQk=")
        .expect("ed25519 signer");
    let ours = trusted
        .iter()
        .fold(StandardWebhooks::builder(), |b, s| {
            b.public_key(s.public_key().expect("a public key"))
        })
        .build()
        .expect("v1a verifier");
    let flood = (0..32)
        .map(|i| attacker.sign(&format!("other_{i}"), TS, b"{}"))
        .collect::<Vec<_>>()
        .join(" ");
    let mut headers = trusted[0].headers(ID, TS, &body).expect("v1a headers");
    headers.insert("webhook-signature", flood.parse().unwrap());

    let hmac = StandardWebhooks::builder()
        .secret(STANDARD_SECRET)
        .secret("whsec_dGhlIG9sZCBzZWNyZXQsIDMyIGJ5dGVzIGxvbmchISE=")
        .build()
        .expect("v1 verifier");
    let v1_flood = (0..32)
        .map(|i| format!("v1,{}", B64.encode([i as u8; 32])))
        .collect::<Vec<_>>()
        .join(" ");
    let mut v1_headers = headers.clone();
    v1_headers.insert("webhook-signature", v1_flood.parse().unwrap());

    let content = [ID.as_bytes(), b".", ts_text.as_bytes(), b".", &body].concat();
    let honest = trusted[0].sign(ID, TS, &body);
    let sig: [u8; 64] = B64
        .decode(honest.trim_start_matches("v1a,"))
        .unwrap()
        .try_into()
        .unwrap();
    let sig = ed25519_dalek::Signature::from_bytes(&sig);
    let pk: [u8; 32] = B64
        .decode(trusted[0].public_key().unwrap().trim_start_matches("whpk_"))
        .unwrap()
        .try_into()
        .unwrap();
    let pk = ed25519_dalek::VerifyingKey::from_bytes(&pk).unwrap();
    assert!(pk.verify_strict(&content, &sig).is_ok());
    assert!(
        ours.verify(&headers, &body, now).is_err(),
        "the flood is refused"
    );
    assert!(
        hmac.verify(&v1_headers, &body, now).is_err(),
        "the v1 flood is refused"
    );

    let mut group = c.benchmark_group("v1a_flood_1mib");
    group.throughput(Throughput::Bytes(MIB as u64));
    group.sample_size(10);
    group.bench_function("raw_one_check", |b| {
        b.iter(|| {
            black_box(&pk)
                .verify_strict(black_box(&content), &sig)
                .is_ok()
        })
    });
    group.bench_function("webhooks_core", |b| {
        b.iter(|| {
            ours.verify(black_box(&headers), black_box(&body), now)
                .is_err()
        })
    });
    group.bench_function("v1_flood", |b| {
        b.iter(|| {
            hmac.verify(black_box(&v1_headers), black_box(&body), now)
                .is_err()
        })
    });
    group.finish();
}

/// The provider rows of [`providers`] (issue 13): each group runs the raw
/// primitive, ours and any other contender side by side.
fn bench_providers(c: &mut Criterion) {
    for case in providers::all() {
        case.check();
        let mut group = c.benchmark_group(case.name);
        group.throughput(Throughput::Bytes(providers::LEN as u64));
        group.bench_function("raw", |b| b.iter(|| assert!((case.raw)())));
        group.bench_function("webhooks_core", |b| b.iter(|| assert!((case.ours)())));
        for (name, f) in &case.others {
            group.bench_function(*name, |b| b.iter(|| assert!(f())));
        }
        group.finish();
    }
}

criterion_group!(benches, bench, bench_providers);
criterion_main!(benches);
