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
//! | `mailgun` | `Mailgun::verify` of a 1 KiB JSON event (finds the `signature` object in the body) | `raw`: HMAC-SHA256 of `{timestamp}{token}`; `raw_with_parse`: the same after a borrowed serde_json parse of the `signature` object, which any verifier must do |
//! | `postmark` | `Postmark::verify` (Basic credentials as SHA-256 digests, id from the body) | base64-decode the header, constant-time compare with `user:password` |
//! | `sns` | `Sns::verify_request` on a cached certificate, `SignatureVersion` 2, the 1 KiB body as `Message` (parses the JSON, builds the canonical string) | RSA-2048 PKCS#1 v1.5 verify of SHA-256 of the canonical string, built beforehand |
//!
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
use hmac::{KeyInit as _, Mac as _};
use http::HeaderMap;
use webhooks_core::scheme::standard::Signer;
use webhooks_core::scheme::{
    Discord, GenericHmac, GitHub, GitLab, HmacAlgorithm, HubSpot, Intercom, Linear, Mandrill,
    Paddle, Shopify, SignatureEncoding, Slack, Square, StandardWebhooks, Stripe, TimestampUnit,
    Twilio, Typeform, Zoom,
};
use webhooks_core::{PublicUrl, RequestHead, Verifier};

const LEN: usize = 1024;
const TS: u64 = 1_700_000_000;
const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const STANDARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// base64 of a 32-byte ed25519 seed.
const ED25519_SECRET: &str = "whsk_BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=";
const STRIPE_SECRET: &str = "whsec_test_5Tq1rS0bXbKcYxLr3dWnPzQe";
const SECRET: &[u8] = b"It's a Secret to Everybody";
const DELIVERY: &str = "72d3162e-cc78-11e3-81ab-4c9367dc0958";

/// A Stripe-shaped event of exactly 1 KiB, padded in `data.object.description`
/// (ASCII; its type's object is left untyped by async-stripe without features).
fn body() -> Vec<u8> {
    let head = concat!(
        r#"{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","api_version":null,"#,
        r#""created":1700000000,"data":{"object":{"id":"ii_1NG8Du2eZvKYlo2C","#,
        r#""object":"invoiceitem","amount":1000,"currency":"usd","#,
        r#""customer":"cus_NffrFeUfNV2Hib","description":""#,
    );
    let tail = concat!(
        r#""}},"livemode":false,"pending_webhooks":1,"#,
        r#""request":{"id":null,"idempotency_key":null},"type":"invoiceitem.created"}"#,
    );
    let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ";
    let mut body = head.as_bytes().to_vec();
    let mut i = 0usize;
    while body.len() < LEN - tail.len() {
        body.push(alphabet[i % alphabet.len()]);
        i = i.wrapping_mul(31).wrapping_add(7) % 1_000_003;
    }
    body.extend_from_slice(tail.as_bytes());
    assert_eq!(body.len(), LEN);
    body
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn value<'h>(headers: &'h HeaderMap, name: &str) -> &'h str {
    headers[name].to_str().expect("ASCII header")
}

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The keyed HMAC-SHA256 state for `key`, built once (as the verifiers do).
fn keyed(key: &[u8]) -> HmacSha256 {
    HmacSha256::new_from_slice(key).unwrap()
}

/// [`SECRET`]'s pre-keyed HMAC-SHA256 state, for the provider rows.
static SECRET_KEYED: std::sync::LazyLock<HmacSha256> = std::sync::LazyLock::new(|| keyed(SECRET));

/// HMAC-SHA256 of `parts` from a clone of the pre-keyed state, compared with `expected`.
fn raw_hmac(keyed: &HmacSha256, parts: &[&[u8]], expected: &[u8]) -> bool {
    let mut mac = black_box(keyed).clone();
    for part in parts {
        mac.update(black_box(part));
    }
    let tag = mac.finalize().into_bytes();
    tag.as_slice() == black_box(expected)
}

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

/// [`group`] through `verify_head`, for the schemes that sign the URL.
fn group_head<V: Verifier>(
    c: &mut Criterion,
    name: &str,
    raw: &dyn Fn() -> bool,
    ours: &V,
    path_and_query: &str,
    headers: &HeaderMap,
    body: &[u8],
) {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(TS);
    let head = || RequestHead::from_path_and_query(black_box(path_and_query), black_box(headers));
    assert!(raw(), "{name}: raw accepts");
    ours.verify_head(head(), body, now)
        .unwrap_or_else(|e| panic!("{name}: ours accepts: {e}"));
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("raw", |b| b.iter(|| assert!(raw())));
    group.bench_function("webhooks_core", |b| {
        b.iter(|| ours.verify_head(head(), black_box(body), now).unwrap())
    });
    group.finish();
}

/// HMAC-SHA1 of `parts`, as [`raw_hmac`].
fn raw_hmac_sha1(key: &[u8], parts: &[&[u8]], expected: &[u8]) -> bool {
    let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(black_box(key)).unwrap();
    for part in parts {
        mac.update(black_box(part));
    }
    mac.finalize().into_bytes().as_slice() == black_box(expected)
}

/// A 1 KiB JSON body shaped as a provider sends it: `first` fields, a
/// padded `data` object, then `last` fields (where the provider puts them).
fn shaped(first: &str, last: &str) -> Vec<u8> {
    let head = format!(
        r#"{{{first}{}"data":{{"object":"x","description":""#,
        if first.is_empty() { "" } else { "," }
    );
    let tail = format!(r#""}}{}{last}}}"#, if last.is_empty() { "" } else { "," });
    let pad = LEN - head.len() - tail.len();
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789 ";
    let padding: String = (0..pad)
        .map(|i| char::from(alphabet[(i * 7) % alphabet.len()]))
        .collect();
    let body = format!("{head}{padding}{tail}");
    assert_eq!(body.len(), LEN);
    body.into_bytes()
}

/// A 1 KiB form body of `n` Twilio-like fields, and its sorted decoded pairs.
fn form_body() -> (Vec<u8>, Vec<(String, String)>) {
    let mut body = String::new();
    let mut pairs = Vec::new();
    let mut i = 0;
    while body.len() < LEN - 40 {
        let (name, value) = (format!("Field{i:02}"), format!("value+{i}%2Bx"));
        if !body.is_empty() {
            body.push('&');
        }
        body.push_str(&format!("{name}={value}"));
        pairs.push((name, format!("value {i}+x")));
        i += 1;
    }
    let pad = LEN - body.len() - "&Body=".len();
    body.push_str("&Body=");
    body.push_str(&"a".repeat(pad));
    pairs.push(("Body".to_owned(), "a".repeat(pad)));
    pairs.sort();
    assert_eq!(body.len(), LEN);
    (body.into_bytes(), pairs)
}

fn bench_providers(c: &mut Criterion) {
    let body = body();
    let ts_text = TS.to_string();
    let base = "https://hooks.example.com";

    // Twilio: URL + sorted form parameters, HMAC-SHA1.
    let (form, pairs) = form_body();
    let twilio = Twilio::builder()
        .auth_token(SECRET)
        .public_url(PublicUrl::base(base).unwrap())
        .build()
        .unwrap();
    let url = format!("{base}/twilio/sms?account=AC1");
    let headers = twilio.sign_headers(&url, &form).unwrap();
    let tag = B64.decode(value(&headers, "x-twilio-signature")).unwrap();
    let signed: Vec<u8> = pairs
        .iter()
        .flat_map(|(n, v)| [n.as_bytes(), v.as_bytes()].concat())
        .collect();
    let raw = || raw_hmac_sha1(SECRET, &[url.as_bytes(), &signed], &tag);
    group_head(
        c,
        "twilio",
        &raw,
        &twilio,
        "/twilio/sms?account=AC1",
        &headers,
        &form,
    );

    // Square: notification URL + body.
    let square_url = format!("{base}/square");
    let square = Square::builder()
        .signature_key(SECRET)
        .public_url(PublicUrl::exact(&square_url).unwrap())
        .build()
        .unwrap();
    let headers = square.sign_headers(&square_url, &body).unwrap();
    let tag = B64
        .decode(value(&headers, "x-square-hmacsha256-signature"))
        .unwrap();
    let raw = || raw_hmac(&SECRET_KEYED, &[square_url.as_bytes(), &body], &tag);
    group_head(c, "square", &raw, &square, "/square", &headers, &body);

    // Mandrill: URL + mandrill_events, HMAC-SHA1.
    let events = String::from_utf8(body.clone()).unwrap();
    let encoded: String = events
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let mandrill_body = format!("mandrill_events={encoded}").into_bytes();
    let mandrill_url = format!("{base}/mandrill");
    let mandrill = Mandrill::builder()
        .webhook_key(SECRET)
        .public_url(PublicUrl::base(base).unwrap())
        .build()
        .unwrap();
    let headers = mandrill
        .sign_headers(&mandrill_url, &mandrill_body)
        .unwrap();
    let tag = B64.decode(value(&headers, "x-mandrill-signature")).unwrap();
    let raw = || {
        raw_hmac_sha1(
            SECRET,
            &[
                mandrill_url.as_bytes(),
                b"mandrill_events",
                events.as_bytes(),
            ],
            &tag,
        )
    };
    group_head(
        c,
        "mandrill",
        &raw,
        &mandrill,
        "/mandrill",
        &headers,
        &mandrill_body,
    );

    // HubSpot v3: POST + URL + body + timestamp (ms).
    let hubspot = HubSpot::builder()
        .client_secret(SECRET)
        .public_url(PublicUrl::base(base).unwrap())
        .build()
        .unwrap();
    let hubspot_url = format!("{base}/hubspot");
    let ms = TS * 1000;
    let ms_text = ms.to_string();
    let headers = hubspot.sign_headers(&hubspot_url, ms, &body).unwrap();
    let tag = B64
        .decode(value(&headers, "x-hubspot-signature-v3"))
        .unwrap();
    let raw = || {
        raw_hmac(
            &SECRET_KEYED,
            &[b"POST", hubspot_url.as_bytes(), &body, ms_text.as_bytes()],
            &tag,
        )
    };
    group_head(c, "hubspot", &raw, &hubspot, "/hubspot", &headers, &body);

    // Linear: body, timestamp inside.
    let linear_body = shaped(
        r#""action":"create","type":"Issue""#,
        &format!(
            r#""organizationId":"org_1","webhookTimestamp":{},"webhookId":"wh_1""#,
            TS * 1000
        ),
    );
    let linear = Linear::new(SECRET).unwrap();
    let headers = linear.sign_headers(&linear_body).unwrap();
    let tag = unhex(value(&headers, "linear-signature"));
    let raw = || raw_hmac(&SECRET_KEYED, &[&linear_body], &tag);
    group(c, "linear", &raw, &linear, &headers, &linear_body, &[]);

    // Zoom: v0:{ts}:{body}.
    let zoom = Zoom::new(SECRET).unwrap();
    let zoom_body = shaped(
        r#""event":"meeting.started""#,
        r#""event_ts":1700000000000"#,
    );
    let headers = zoom.sign_headers(TS, &zoom_body).unwrap();
    let tag = unhex(value(&headers, "x-zm-signature").trim_start_matches("v0="));
    let raw = || {
        raw_hmac(
            &SECRET_KEYED,
            &[b"v0:", ts_text.as_bytes(), b":", &zoom_body],
            &tag,
        )
    };
    group(c, "zoom", &raw, &zoom, &headers, &zoom_body, &[]);

    // Paddle: {ts}:{body}.
    let paddle = Paddle::builder().secret(SECRET).build().unwrap();
    let headers = paddle.sign_headers(TS, &body).unwrap();
    let tag = unhex(
        value(&headers, "paddle-signature")
            .rsplit_once("h1=")
            .unwrap()
            .1,
    );
    let raw = || raw_hmac(&SECRET_KEYED, &[ts_text.as_bytes(), b":", &body], &tag);
    group(c, "paddle", &raw, &paddle, &headers, &body, &[]);

    // Intercom: body, HMAC-SHA1.
    let intercom = Intercom::new(SECRET).unwrap();
    // Intercom puts the id and topic after the data.
    let intercom_body = shaped(
        r#""type":"notification_event","app_id":"abc123""#,
        r#""links":{},"id":"notif_1","topic":"conversation.user.created","delivery_attempts":1"#,
    );
    let headers = intercom.sign_headers(&intercom_body).unwrap();
    let tag = unhex(value(&headers, "x-hub-signature").trim_start_matches("sha1="));
    let raw = || raw_hmac_sha1(SECRET, &[&intercom_body], &tag);
    group(
        c,
        "intercom",
        &raw,
        &intercom,
        &headers,
        &intercom_body,
        &[],
    );

    // Typeform: body, base64.
    let typeform = Typeform::new(SECRET).unwrap();
    let headers = typeform.sign_headers(&body).unwrap();
    let tag = B64
        .decode(value(&headers, "typeform-signature").trim_start_matches("sha256="))
        .unwrap();
    let raw = || raw_hmac(&SECRET_KEYED, &[&body], &tag);
    group(c, "typeform", &raw, &typeform, &headers, &body, &[]);

    // GenericHmac: SHA-512, base64, a template with the URL.
    let generic = GenericHmac::builder("acme", "x-acme-signature")
        .secret(SECRET)
        .algorithm(HmacAlgorithm::Sha512)
        .encoding(SignatureEncoding::Base64)
        .timestamp_header("x-acme-timestamp", TimestampUnit::Seconds)
        .signed_content("{timestamp}.{url}.{body}")
        .unwrap()
        .public_url(PublicUrl::base(base).unwrap())
        .build()
        .unwrap();
    let acme_url = format!("{base}/acme");
    let headers = generic.sign_headers_for(&acme_url, TS, &body).unwrap();
    let tag = B64.decode(value(&headers, "x-acme-signature")).unwrap();
    let raw = || {
        let mut mac = hmac::Hmac::<sha2::Sha512>::new_from_slice(black_box(SECRET)).unwrap();
        for part in [ts_text.as_bytes(), b".", acme_url.as_bytes(), b".", &body] {
            mac.update(black_box(part));
        }
        mac.finalize().into_bytes().as_slice() == black_box(&tag[..])
    };
    group_head(
        c,
        "generic_hmac_sha512_url",
        &raw,
        &generic,
        "/acme",
        &headers,
        &body,
    );

    // GitLab: a token.
    let token = "glpat-like-webhook-token-0123456789";
    let gitlab = GitLab::new(token).unwrap();
    let headers = gitlab.sign_headers("Push Hook", DELIVERY).unwrap();
    let raw =
        || black_box(value(&headers, "x-gitlab-token")).as_bytes() == black_box(token.as_bytes());
    group(c, "gitlab", &raw, &gitlab, &headers, &body, &[]);

    // Discord: ed25519 over {ts}{body}.
    let seed = [7u8; 32];
    let discord = Discord::new(&Discord::public_key_hex(&seed)).unwrap();
    let discord_body = shaped(
        r#""application_id":"787053080478613550","id":"787053080478613556","type":2"#,
        r#""token":"ThisIsATokenFromDiscordThatIsVeryLong","version":1"#,
    );
    let body = discord_body;
    let headers = Discord::sign_headers(&seed, TS, &body).unwrap();
    let pk: [u8; 32] = unhex(&Discord::public_key_hex(&seed)).try_into().unwrap();
    let pk = ed25519_dalek::VerifyingKey::from_bytes(&pk).unwrap();
    let sig: [u8; 64] = unhex(value(&headers, "x-signature-ed25519"))
        .try_into()
        .unwrap();
    let sig = ed25519_dalek::Signature::from_bytes(&sig);
    let content = [ts_text.as_bytes(), &body].concat();
    let raw = || {
        black_box(&pk)
            .verify_strict(black_box(&content), black_box(&sig))
            .is_ok()
    };
    group(c, "discord", &raw, &discord, &headers, &body, &[]);
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
        .secret("whsec_dGhlIG9sZCBzZWNyZXQ=")
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

/// The email senders (issue 13): SendGrid, Mailgun, Postmark, Amazon SNS.
fn bench_email(c: &mut Criterion) {
    use p256::ecdsa::signature::hazmat::PrehashVerifier as _;
    use sha2::Digest as _;
    use webhooks_core::RequestVerifier as _;
    use webhooks_core::scheme::sns::{self, SignatureVersion, SnsMessage};
    use webhooks_core::scheme::{Mailgun, Postmark, SendGrid, sendgrid};

    let body = body();
    let ts_text = TS.to_string();

    // SendGrid: ECDSA P-256 over `{ts}{body}`.
    let signer = sendgrid::Signer::from_bytes(&[0x5e; 32]).expect("sendgrid signer");
    let ours = SendGrid::new(signer.public_key()).expect("sendgrid verifier");
    let headers = signer.sign_headers(TS, &body).expect("sendgrid headers");
    let key = <p256::ecdsa::VerifyingKey as p256::pkcs8::DecodePublicKey>::from_public_key_der(
        &B64.decode(signer.public_key()).unwrap(),
    )
    .unwrap();
    let sig = p256::ecdsa::Signature::from_der(
        &B64.decode(value(&headers, "x-twilio-email-event-webhook-signature"))
            .unwrap(),
    )
    .unwrap();
    let raw = || {
        let mut hash = sha2::Sha256::new();
        hash.update(black_box(ts_text.as_bytes()));
        hash.update(black_box(&body));
        black_box(&key)
            .verify_prehash(&hash.finalize(), black_box(&sig))
            .is_ok()
    };
    group(c, "sendgrid", &raw, &ours, &headers, &body, &[]);

    // Mailgun: HMAC of `{timestamp}{token}` carried in a 1 KiB JSON body.
    const TOKEN: &str = "5egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6";
    let ours = Mailgun::new(SECRET).expect("mailgun verifier");
    let event: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let mg_body = ours.sign_body(TS, TOKEN, &event);
    let mg_body = &mg_body[..];
    let tag = unhex(&ours.sign(TS, TOKEN));
    let raw = || raw_hmac(&SECRET_KEYED, &[ts_text.as_bytes(), TOKEN.as_bytes()], &tag);
    #[derive(serde::Deserialize)]
    struct Sig<'a> {
        #[serde(borrow)]
        timestamp: &'a str,
        #[serde(borrow)]
        token: &'a str,
        #[serde(borrow)]
        signature: &'a str,
    }
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        signature: Sig<'a>,
    }
    let raw_with_parse = || {
        let parsed: Envelope<'_> = serde_json::from_slice(black_box(mg_body)).unwrap();
        let expected = unhex(parsed.signature.signature);
        raw_hmac(
            &SECRET_KEYED,
            &[
                parsed.signature.timestamp.as_bytes(),
                parsed.signature.token.as_bytes(),
            ],
            &expected,
        )
    };
    group(
        c,
        "mailgun",
        &raw,
        &ours,
        &HeaderMap::new(),
        mg_body,
        &[("raw_with_parse", &raw_with_parse)],
    );

    // Postmark: Basic credentials.
    let ours = Postmark::new("postmark", "a-long-random-webhook-password").expect("postmark");
    let headers = ours.sign_headers().expect("postmark headers");
    let expected = b"postmark:a-long-random-webhook-password";
    let raw = || {
        let value = value(black_box(&headers), "authorization");
        let decoded = B64.decode(value.trim_start_matches("Basic ")).unwrap();
        decoded.len() == expected.len()
            && bool::from(subtle::ConstantTimeEq::ct_eq(&decoded[..], &expected[..]))
    };
    group(c, "postmark", &raw, &ours, &headers, &body, &[]);

    // Amazon SNS: RSA over the canonical string, certificate cached.
    const CERT_URL: &str =
        "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-bench.pem";
    const TOPIC: &str = "arn:aws:sns:us-east-1:123456789012:bench";
    struct Cert;
    #[async_trait::async_trait]
    impl sns::CertificateFetcher for Cert {
        async fn fetch(&self, _url: &str) -> Result<Vec<u8>, sns::FetchError> {
            Ok(include_bytes!("../../tests/data/sns/test-cert.pem").to_vec())
        }
    }
    let key_der = include_bytes!("../../tests/data/sns/test-key.der");
    let signer = sns::Signer::from_pkcs8_der(key_der, CERT_URL).expect("sns signer");
    let message = SnsMessage::notification(
        "b8c2f4b1-7d2c-5a1e-9c3b-1f2e3d4c5b6a",
        TOPIC,
        String::from_utf8(body.clone()).unwrap(),
        "2023-11-14T22:13:20.000Z",
    );
    let sns_body = signer
        .sign(message.clone(), SignatureVersion::V2)
        .expect("signed");
    let ours = sns::Sns::builder(Cert).topic_arn(TOPIC).build().expect("sns");
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let empty = HeaderMap::new();
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(TS);
    let verify_ours = || {
        rt.block_on(ours.verify_request(
            webhooks_core::RequestHead::new("/sns", black_box(&empty)),
            black_box(&sns_body),
            now,
        ))
        .is_ok()
    };
    assert!(verify_ours(), "sns: ours accepts (and caches the certificate)");
    let canonical = format!(
        "Message\n{}\nMessageId\n{}\nTimestamp\n{}\nTopicArn\n{}\nType\nNotification\n",
        message.message, message.message_id, message.timestamp, message.topic_arn
    );
    let signed: SnsMessage = serde_json::from_slice(&sns_body).unwrap();
    let signature = B64.decode(&signed.signature).unwrap();
    let private = <rsa::PrivateKey as rsa::pkcs8::DecodePrivateKey>::from_pkcs8_der(key_der).unwrap();
    let public = private.to_public_key();
    let raw = || {
        let digest = sha2::Sha256::digest(black_box(canonical.as_bytes()));
        black_box(&public)
            .verify(
                rsa::Pkcs1v15Sign::new::<sha2::Sha256>(),
                &digest,
                black_box(&signature),
            )
            .is_ok()
    };
    assert!(raw(), "sns: raw accepts");
    let mut g = c.benchmark_group("sns");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("raw", |b| b.iter(|| assert!(raw())));
    g.bench_function("webhooks_core", |b| b.iter(|| assert!(verify_ours())));
    g.finish();
}

criterion_group!(benches, bench, bench_email, bench_providers);
criterion_main!(benches);
