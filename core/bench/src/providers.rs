//! The provider rows (issue 13), shared by `benches/schemes.rs` (criterion)
//! and `src/bin/instructions.rs` (callgrind): for each provider, one
//! delivery of a 1 KiB body shaped as that provider sends it, the library's
//! check of it (`ours`) and the raw primitive over the same signed content
//! (`raw`), each a closure that returns whether it accepted.
//!
//! The raw HMACs are pre-keyed, as the library's verifiers are: the keyed
//! state (hmac 0.13 with sha1 0.11 / sha2 0.11) is built once, and each call
//! clones it, feeds the signed pieces, finalizes and compares with the
//! already-decoded expected tag. For URL-signing schemes the raw side gets
//! the URL and the already-sorted, already-decoded parameters; the raw
//! ed25519 / ECDSA / RSA checks get the already-parsed key and signature.
//! None reads a header or the body's fields, except where a row says so.
//!
//! Included with `#[path]` (the bench crate has no library).

#![allow(dead_code)]

use std::hint::black_box;
use std::rc::Rc;
use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::KeyInit as _;
use http::HeaderMap;
use webhooks_core::scheme::{
    Discord, GenericHmac, GitLab, HmacAlgorithm, HubSpot, Intercom, Linear, Mandrill, Paddle,
    SignatureEncoding, Square, StandardWebhooks, TimestampUnit, Twilio, Typeform, Zoom,
};
use webhooks_core::{PublicUrl, RequestHead, Verifier};

pub const LEN: usize = 1024;
pub const TS: u64 = 1_700_000_000;
pub const SECRET: &[u8] = b"It's a Secret to Everybody";
pub const DELIVERY: &str = "72d3162e-cc78-11e3-81ab-4c9367dc0958";

/// A contender: returns whether it accepted the delivery.
pub type Check = Rc<dyn Fn() -> bool>;

/// One provider row: its name, the raw primitive, ours, and any other
/// contenders (a second floor, say), all over the same delivery.
pub struct Case {
    pub name: &'static str,
    /// What `raw` computes, for the README table.
    pub primitive: &'static str,
    pub raw: Check,
    pub ours: Check,
    pub others: Vec<(&'static str, Check)>,
}

impl Case {
    fn new(name: &'static str, primitive: &'static str, raw: Check, ours: Check) -> Self {
        Self {
            name,
            primitive,
            raw,
            ours,
            others: Vec::new(),
        }
    }

    /// Panics unless every contender accepts its delivery.
    pub fn check(&self) {
        assert!((self.raw)(), "{}: raw accepts", self.name);
        assert!((self.ours)(), "{}: ours accepts", self.name);
        for (other, f) in &self.others {
            assert!(f(), "{}: {other} accepts", self.name);
        }
    }

    /// The contender called `which` (`raw`, `webhooks_core` or another's name).
    pub fn contender(&self, which: &str) -> Option<&Check> {
        match which {
            "raw" => Some(&self.raw),
            "webhooks_core" | "ours" => Some(&self.ours),
            other => self
                .others
                .iter()
                .find(|(n, _)| *n == other)
                .map(|(_, f)| f),
        }
    }
}

pub fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(TS)
}

/// A Stripe-shaped event of exactly 1 KiB, padded in `data.object.description`.
pub fn body() -> Vec<u8> {
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

pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

pub fn value<'h>(headers: &'h HeaderMap, name: &str) -> &'h str {
    headers[name].to_str().expect("ASCII header")
}

pub type HmacSha256 = hmac::Hmac<sha2::Sha256>;
pub type HmacSha1 = hmac::Hmac<sha1::Sha1>;

/// The keyed HMAC-SHA256 state for `key`, built once (as the verifiers do).
pub fn keyed(key: &[u8]) -> HmacSha256 {
    HmacSha256::new_from_slice(key).unwrap()
}

/// [`SECRET`]'s pre-keyed HMAC-SHA256 state.
pub static SECRET_KEYED: LazyLock<HmacSha256> = LazyLock::new(|| keyed(SECRET));
/// [`SECRET`]'s pre-keyed HMAC-SHA1 state (Twilio, Mandrill, Intercom).
pub static SECRET_KEYED_SHA1: LazyLock<HmacSha1> =
    LazyLock::new(|| HmacSha1::new_from_slice(SECRET).unwrap());

/// HMAC of `parts` from a clone of a pre-keyed state, compared with `expected`.
pub fn raw_mac<M: hmac::Mac + Clone>(keyed: &M, parts: &[&[u8]], expected: &[u8]) -> bool {
    let mut mac = black_box(keyed).clone();
    for part in parts {
        mac.update(black_box(part));
    }
    mac.finalize().into_bytes().as_slice() == black_box(expected)
}

/// HMAC-SHA256 of `parts` from a clone of `keyed`.
pub fn raw_hmac(keyed: &HmacSha256, parts: &[&[u8]], expected: &[u8]) -> bool {
    raw_mac(keyed, parts, expected)
}

/// HMAC-SHA1 of `parts` from a clone of [`SECRET_KEYED_SHA1`].
pub fn raw_hmac_sha1(parts: &[&[u8]], expected: &[u8]) -> bool {
    raw_mac(&*SECRET_KEYED_SHA1, parts, expected)
}

/// A 1 KiB JSON body shaped as a provider sends it: `first` fields, a
/// padded `data` object, then `last` fields (where the provider puts them).
pub fn shaped(first: &str, last: &str) -> Vec<u8> {
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

/// A 1 KiB form body of Twilio-like fields, and its sorted decoded pairs.
pub fn form_body() -> (Vec<u8>, Vec<(String, String)>) {
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

/// Adds `raw_with_parse` to `case`: its raw primitive after a serde_json
/// pass over the whole body (`IgnoredAny`: the least any verifier that reads
/// a field of the body must do when the field comes last or is absent).
fn with_parse(mut case: Case, body: Vec<u8>) -> Case {
    let raw = Rc::clone(&case.raw);
    case.others.push((
        "raw_with_parse",
        Rc::new(move || {
            serde_json::from_slice::<serde::de::IgnoredAny>(black_box(&body)).is_ok() && raw()
        }),
    ));
    case
}

/// `ours` through `Verifier::verify`.
fn through_verify<V: Verifier + 'static>(ours: V, headers: HeaderMap, body: Vec<u8>) -> Check {
    let now = now();
    Rc::new(move || {
        ours.verify(black_box(&headers), black_box(&body), now)
            .is_ok()
    })
}

/// `ours` through `Verifier::verify_head`, for the schemes that sign the URL.
fn through_head<V: Verifier + 'static>(
    ours: V,
    path_and_query: &'static str,
    headers: HeaderMap,
    body: Vec<u8>,
) -> Check {
    let now = now();
    Rc::new(move || {
        let head = RequestHead::from_path_and_query(black_box(path_and_query), black_box(&headers));
        ours.verify_head(head, black_box(&body), now).is_ok()
    })
}

/// The general providers.
pub fn general() -> Vec<Case> {
    let body = body();
    let ts_text = TS.to_string();
    let base = "https://hooks.example.com";
    let mut cases = Vec::new();

    // Standard Webhooks v1: `{id}.{ts}.{body}`, base64 tag in a header (the
    // README's verification goal is this row's ratio).
    let standard = StandardWebhooks::from_raw_secret(SECRET).unwrap();
    let headers = standard.sign_headers(DELIVERY, TS, &body).unwrap();
    let tag = B64
        .decode(value(&headers, "webhook-signature").trim_start_matches("v1,"))
        .unwrap();
    let b = body.clone();
    let standard_ts = ts_text.clone();
    cases.push(Case::new(
        "standard_webhooks",
        "HMAC-SHA256 of id + `.` + timestamp + `.` + body",
        Rc::new(move || {
            raw_hmac(
                &SECRET_KEYED,
                &[DELIVERY.as_bytes(), b".", standard_ts.as_bytes(), b".", &b],
                &tag,
            )
        }),
        through_head(standard, "/hook", headers, body.clone()),
    ));

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
    cases.push(Case::new(
        "twilio",
        "HMAC-SHA1 of URL + sorted decoded params",
        Rc::new(move || raw_hmac_sha1(&[url.as_bytes(), &signed], &tag)),
        through_head(twilio, "/twilio/sms?account=AC1", headers, form),
    ));

    // Square: notification URL + body; the body as Square's docs show it
    // (merchant, type, event id and time first, then the data).
    let square_body = shaped(
        r#""merchant_id":"6SSW7HV8K2ST5","type":"payment.updated","event_id":"13b867cf-db3d-4b1c-90b6-2f32a9d78124","created_at":"2023-11-14T22:13:20.000Z""#,
        "",
    );
    let square_url = format!("{base}/square");
    let square = Square::builder()
        .signature_key(SECRET)
        .public_url(PublicUrl::exact(&square_url).unwrap())
        .build()
        .unwrap();
    let headers = square.sign_headers(&square_url, &square_body).unwrap();
    let tag = B64
        .decode(value(&headers, "x-square-hmacsha256-signature"))
        .unwrap();
    let b = square_body.clone();
    cases.push(with_parse(
        Case::new(
            "square",
            "HMAC-SHA256 of URL + body",
            Rc::new(move || raw_hmac(&SECRET_KEYED, &[square_url.as_bytes(), &b], &tag)),
            through_head(square, "/square", headers, square_body.clone()),
        ),
        square_body.clone(),
    ));

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
    cases.push(Case::new(
        "mandrill",
        "HMAC-SHA1 of URL + `mandrill_events` + decoded value",
        Rc::new(move || {
            raw_hmac_sha1(
                &[
                    mandrill_url.as_bytes(),
                    b"mandrill_events",
                    events.as_bytes(),
                ],
                &tag,
            )
        }),
        through_head(mandrill, "/mandrill", headers, mandrill_body),
    ));

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
    let b = body.clone();
    cases.push(Case::new(
        "hubspot",
        "HMAC-SHA256 of `POST` + URL + body + timestamp",
        Rc::new(move || {
            raw_hmac(
                &SECRET_KEYED,
                &[b"POST", hubspot_url.as_bytes(), &b, ms_text.as_bytes()],
                &tag,
            )
        }),
        through_head(hubspot, "/hubspot", headers, body.clone()),
    ));

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
    let b = linear_body.clone();
    cases.push(with_parse(
        Case::new(
            "linear",
            "HMAC-SHA256 of body",
            Rc::new(move || raw_hmac(&SECRET_KEYED, &[&b], &tag)),
            through_verify(linear, headers, linear_body.clone()),
        ),
        linear_body,
    ));

    // Zoom: v0:{ts}:{body}.
    let zoom = Zoom::new(SECRET).unwrap();
    let zoom_body = shaped(
        r#""event":"meeting.started""#,
        r#""event_ts":1700000000000"#,
    );
    let headers = zoom.sign_headers(TS, &zoom_body).unwrap();
    let tag = unhex(value(&headers, "x-zm-signature").trim_start_matches("v0="));
    let (b, ts) = (zoom_body.clone(), ts_text.clone());
    cases.push(with_parse(
        Case::new(
            "zoom",
            "HMAC-SHA256 of `v0:{ts}:{body}`",
            Rc::new(move || raw_hmac(&SECRET_KEYED, &[b"v0:", ts.as_bytes(), b":", &b], &tag)),
            through_verify(zoom, headers, zoom_body.clone()),
        ),
        zoom_body,
    ));

    // Paddle: {ts}:{body}; the body as Paddle's docs show it (event id,
    // type, time and notification id first, then the data).
    let paddle_body = shaped(
        r#""event_id":"evt_01hv8x2acma2gz4xs2w6eadhb0","event_type":"transaction.billed","occurred_at":"2023-11-14T22:13:20.000000Z","notification_id":"ntf_01hv8x2axwfkv7tkd4cyr0sx4h""#,
        "",
    );
    let paddle = Paddle::builder().secret(SECRET).build().unwrap();
    let headers = paddle.sign_headers(TS, &paddle_body).unwrap();
    let tag = unhex(
        value(&headers, "paddle-signature")
            .rsplit_once("h1=")
            .unwrap()
            .1,
    );
    let (b, ts) = (paddle_body.clone(), ts_text.clone());
    cases.push(with_parse(
        Case::new(
            "paddle",
            "HMAC-SHA256 of `{ts}:{body}`",
            Rc::new(move || raw_hmac(&SECRET_KEYED, &[ts.as_bytes(), b":", &b], &tag)),
            through_verify(paddle, headers, paddle_body.clone()),
        ),
        paddle_body.clone(),
    ));

    // Intercom: body, HMAC-SHA1; the id and topic come after the data.
    let intercom = Intercom::new(SECRET).unwrap();
    let intercom_body = shaped(
        r#""type":"notification_event","app_id":"abc123""#,
        r#""links":{},"id":"notif_1","topic":"conversation.user.created","delivery_attempts":1"#,
    );
    let headers = intercom.sign_headers(&intercom_body).unwrap();
    let tag = unhex(value(&headers, "x-hub-signature").trim_start_matches("sha1="));
    let b = intercom_body.clone();
    cases.push(with_parse(
        Case::new(
            "intercom",
            "HMAC-SHA1 of body",
            Rc::new(move || raw_hmac_sha1(&[&b], &tag)),
            through_verify(intercom, headers, intercom_body.clone()),
        ),
        intercom_body,
    ));

    // Typeform: body, base64; the body as Typeform's docs show it (event id
    // and type first, then the form response).
    let typeform_body = shaped(
        r#""event_id":"01ARZ3NDEKTSV4RRFFQ69G5FAV","event_type":"form_response""#,
        "",
    );
    let typeform = Typeform::new(SECRET).unwrap();
    let headers = typeform.sign_headers(&typeform_body).unwrap();
    let tag = B64
        .decode(value(&headers, "typeform-signature").trim_start_matches("sha256="))
        .unwrap();
    let b = typeform_body.clone();
    cases.push(with_parse(
        Case::new(
            "typeform",
            "HMAC-SHA256 of body",
            Rc::new(move || raw_hmac(&SECRET_KEYED, &[&b], &tag)),
            through_verify(typeform, headers, typeform_body.clone()),
        ),
        typeform_body.clone(),
    ));

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
    let sha512_keyed = hmac::Hmac::<sha2::Sha512>::new_from_slice(SECRET).unwrap();
    let (b, ts) = (body.clone(), ts_text.clone());
    cases.push(Case::new(
        "generic_hmac_sha512_url",
        "HMAC-SHA512 of `{ts}.{url}.{body}`",
        Rc::new(move || {
            raw_mac(
                &sha512_keyed,
                &[ts.as_bytes(), b".", acme_url.as_bytes(), b".", &b],
                &tag,
            )
        }),
        through_head(generic, "/acme", headers, body.clone()),
    ));

    // GitLab: a token.
    let token = "glpat-like-webhook-token-0123456789";
    let gitlab = GitLab::new(token).unwrap();
    let headers = gitlab.sign_headers("Push Hook", DELIVERY).unwrap();
    let h = headers.clone();
    cases.push(Case::new(
        "gitlab",
        "`==` on the token header's bytes",
        Rc::new(move || {
            black_box(value(&h, "x-gitlab-token")).as_bytes() == black_box(token.as_bytes())
        }),
        through_verify(gitlab, headers, body.clone()),
    ));

    // Discord: ed25519 over {ts}{body}.
    let seed = [7u8; 32];
    let discord = Discord::new(&Discord::public_key_hex(&seed)).unwrap();
    let discord_body = shaped(
        r#""application_id":"787053080478613550","id":"787053080478613556","type":2"#,
        r#""token":"ThisIsATokenFromDiscordThatIsVeryLong","version":1"#,
    );
    let headers = Discord::sign_headers(&seed, TS, &discord_body).unwrap();
    let pk: [u8; 32] = unhex(&Discord::public_key_hex(&seed)).try_into().unwrap();
    let pk = ed25519_dalek::VerifyingKey::from_bytes(&pk).unwrap();
    let sig: [u8; 64] = unhex(value(&headers, "x-signature-ed25519"))
        .try_into()
        .unwrap();
    let sig = ed25519_dalek::Signature::from_bytes(&sig);
    let content = [ts_text.as_bytes(), &discord_body].concat();
    cases.push(Case::new(
        "discord",
        "ed25519 `verify_strict` of `{ts}{body}`",
        Rc::new(move || {
            black_box(&pk)
                .verify_strict(black_box(&content), black_box(&sig))
                .is_ok()
        }),
        through_verify(discord, headers, discord_body),
    ));
    cases
}

/// The email senders: SendGrid, Mailgun, Postmark, Amazon SNS.
pub fn email() -> Vec<Case> {
    use p256::ecdsa::signature::hazmat::PrehashVerifier as _;
    use sha2::Digest as _;
    use webhooks_core::RequestVerifier as _;
    use webhooks_core::scheme::sns::{self, SignatureVersion, SnsMessage};
    use webhooks_core::scheme::{Mailgun, Postmark, SendGrid, sendgrid};

    let body = body();
    let ts_text = TS.to_string();
    let mut cases = Vec::new();

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
    let (b, ts) = (body.clone(), ts_text.clone());
    cases.push(Case::new(
        "sendgrid",
        "ECDSA P-256 `verify_prehash` of SHA-256(`{ts}{body}`)",
        Rc::new(move || {
            let mut hash = sha2::Sha256::new();
            hash.update(black_box(ts.as_bytes()));
            hash.update(black_box(&b));
            black_box(&key)
                .verify_prehash(&hash.finalize(), black_box(&sig))
                .is_ok()
        }),
        through_verify(ours, headers, body.clone()),
    ));

    // Mailgun: HMAC of `{timestamp}{token}` carried in a 1 KiB JSON body.
    const TOKEN: &str = "5egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6";
    let ours = Mailgun::new(SECRET).expect("mailgun verifier");
    let event: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let mg_body = ours.sign_body(TS, TOKEN, &event);
    let tag = unhex(&ours.sign(TS, TOKEN));
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
    let ts = ts_text.clone();
    let mut case = Case::new(
        "mailgun",
        "HMAC-SHA256 of `{timestamp}{token}`",
        Rc::new(move || raw_hmac(&SECRET_KEYED, &[ts.as_bytes(), TOKEN.as_bytes()], &tag)),
        through_verify(ours, HeaderMap::new(), mg_body.clone()),
    );
    case.others.push((
        "raw_with_parse",
        Rc::new(move || {
            let parsed: Envelope<'_> = serde_json::from_slice(black_box(&mg_body)).unwrap();
            let mut expected = [0u8; 32];
            for (i, byte) in expected.iter_mut().enumerate() {
                let hex = parsed.signature.signature.get(2 * i..2 * i + 2).unwrap();
                *byte = u8::from_str_radix(hex, 16).unwrap();
            }
            raw_hmac(
                &SECRET_KEYED,
                &[
                    parsed.signature.timestamp.as_bytes(),
                    parsed.signature.token.as_bytes(),
                ],
                &expected,
            )
        }),
    ));
    cases.push(case);

    // Postmark: Basic credentials; the id is read from the body.
    let ours = Postmark::new("postmark", "a-long-random-webhook-password").expect("postmark");
    let headers = ours.sign_headers().expect("postmark headers");
    let pm_body = shaped(
        r#""RecordType":"Delivery","ServerID":23,"MessageStream":"outbound","MessageID":"883953f4-6105-42a2-a16a-77a8eac79483","Recipient":"john@example.com","Tag":"welcome-email""#,
        r#""DeliveredAt":"2023-11-14T22:13:20Z","Details":"Test delivery webhook details""#,
    );
    const EXPECTED: &[u8] = b"postmark:a-long-random-webhook-password";
    let raw_compare = |headers: &HeaderMap| {
        let value = value(black_box(headers), "authorization");
        let mut decoded = [0u8; 96];
        let Ok(n) = B64.decode_slice(value.trim_start_matches("Basic "), &mut decoded) else {
            return false;
        };
        n == EXPECTED.len()
            && bool::from(subtle::ConstantTimeEq::ct_eq(
                &decoded[..n],
                black_box(EXPECTED),
            ))
    };
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct PostmarkEvent<'a> {
        #[serde(borrow)]
        record_type: &'a str,
        #[serde(borrow, rename = "MessageID")]
        message_id: &'a str,
        #[serde(borrow)]
        delivered_at: &'a str,
    }
    let h = headers.clone();
    let mut case = Case::new(
        "postmark",
        "base64-decode the Basic credentials, constant-time compare",
        Rc::new(move || raw_compare(&h)),
        through_verify(ours, headers.clone(), pm_body.clone()),
    );
    case.others.push((
        "raw_with_parse",
        Rc::new(move || {
            let event: PostmarkEvent<'_> = serde_json::from_slice(black_box(&pm_body)).unwrap();
            raw_compare(&headers)
                && !event.record_type.is_empty()
                && !event.message_id.is_empty()
                && !event.delivered_at.is_empty()
        }),
    ));
    cases.push(case);

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
    let ours = sns::Sns::builder(Cert)
        .topic_arn(TOPIC)
        .build()
        .expect("sns");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let empty = HeaderMap::new();
    let now = now();
    let canonical = format!(
        "Message\n{}\nMessageId\n{}\nTimestamp\n{}\nTopicArn\n{}\nType\nNotification\n",
        message.message, message.message_id, message.timestamp, message.topic_arn
    );
    let signed: SnsMessage = serde_json::from_slice(&sns_body).unwrap();
    let signature = B64.decode(&signed.signature).unwrap();
    let private =
        <rsa::PrivateKey as rsa::pkcs8::DecodePrivateKey>::from_pkcs8_der(key_der).unwrap();
    let public = private.to_public_key();
    cases.push(Case::new(
        "sns",
        "RSA-2048 PKCS#1 v1.5 verify of SHA-256(canonical string)",
        Rc::new(move || {
            let digest = sha2::Sha256::digest(black_box(canonical.as_bytes()));
            black_box(&public)
                .verify(
                    rsa::Pkcs1v15Sign::new::<sha2::Sha256>(),
                    &digest,
                    black_box(&signature),
                )
                .is_ok()
        }),
        Rc::new(move || {
            rt.block_on(ours.verify_request(
                RequestHead::new("/sns", black_box(&empty)),
                black_box(&sns_body),
                now,
            ))
            .is_ok()
        }),
    ));
    cases
}

/// Every provider row, general ones first.
pub fn all() -> Vec<Case> {
    let mut cases = general();
    cases.extend(email());
    cases
}
