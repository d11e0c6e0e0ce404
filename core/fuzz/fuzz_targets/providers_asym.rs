//! Fuzzes the public-key provider schemes, one arm each, picked by an
//! arbitrary enum: Discord (`X-Signature-Ed25519`, ed25519 over
//! `{timestamp}{body}`), SendGrid (`X-Twilio-Email-Event-Webhook-Signature`,
//! DER ECDSA P-256 over `{timestamp}{body}`) and Amazon SNS (RSA over the
//! canonical message, SignatureVersion 1 and 2, through
//! `RequestVerifier::verify_request` on a current-thread runtime, with a
//! certificate fetcher that serves the test certificate and never touches
//! the network).
//!
//! Each arm sends arbitrary headers, bodies and timestamps, or what the
//! scheme's own signer (`Discord::sign_headers`, `sendgrid::Signer`,
//! `sns::Signer`) gives, as is or mutated: a bit flipped, signed by another
//! key, for another timestamp or body, a field changed after signing, another
//! certificate URL, or raw bytes. Properties:
//!
//! * it never panics;
//! * a refusal is a `400`/`401` (for SNS, `503` only when the certificate at
//!   an allowed URL cannot be fetched or read, as `sns` documents) whose
//!   `Display` and `Debug` carry no genuine signature;
//! * an acceptance means the request carried the genuine signature for those
//!   exact bytes: Discord's signature header is the ed25519 signature (which
//!   is deterministic) of the timestamp text as sent and the body; SendGrid's
//!   is what the signer gives for that timestamp and body (the timestamp
//!   written as the signer writes it); SNS's `Signature` is what the signer
//!   gives for the message's own fields and version, the certificate URL is
//!   the one serving the signer's certificate, and the topic is allowed. A
//!   signed timestamp is within the tolerance (SNS: `max_age`, when set).
//!
//! ```text
//! cd core/fuzz && cargo +nightly fuzz run providers_asym -- -max_total_time=900
//! ```

#![no_main]

mod common;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use arbitrary::Arbitrary;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use common::{TOLERANCE, Timestamp, b64, hex, insert};
use ed25519_dalek::Signer as _;
use http::HeaderMap;
use libfuzzer_sys::fuzz_target;
use webhooks_core::scheme::sendgrid::Signer as SendGridSigner;
use webhooks_core::scheme::sns::{self, CertificateFetcher, FetchError, SignatureVersion, SnsMessage};
use webhooks_core::scheme::{Discord, SendGrid, Sns};
use webhooks_core::{RequestHead, RequestVerifier, Verified, Verifier, VerifyError};

const SEED: [u8; 32] = [7; 32];
const OTHER_SEED: [u8; 32] = [8; 32];
const P256: [u8; 32] = [9; 32];
const OTHER_P256: [u8; 32] = [10; 32];

static DISCORD: LazyLock<Discord> =
    LazyLock::new(|| Discord::new(&Discord::public_key_hex(&SEED)).unwrap());
static SENDGRID_SIGNER: LazyLock<SendGridSigner> =
    LazyLock::new(|| SendGridSigner::from_bytes(&P256).unwrap());
static SENDGRID_OTHER: LazyLock<SendGridSigner> =
    LazyLock::new(|| SendGridSigner::from_bytes(&OTHER_P256).unwrap());
static SENDGRID: LazyLock<SendGrid> =
    LazyLock::new(|| SendGrid::new(SENDGRID_SIGNER.public_key()).unwrap());

// SNS: the test key's certificate is served at CERT_URL; Amazon's real
// certificate (another key) at REAL_URL; garbage at GARBAGE_URL; a fetch
// error everywhere else.
const KEY_DER: &[u8] = include_bytes!("../../tests/data/sns/test-key.der");
const CERT_PEM: &str = include_str!("../../tests/data/sns/test-cert.pem");
const REAL_PEM: &str =
    include_str!("../../tests/data/sns/aws-SimpleNotificationService-7ff5318490ec183fbaddaa2a969abfda.pem");
const CERT_URL: &str = "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-test.pem";
const REAL_URL: &str = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-real.pem";
const GARBAGE_URL: &str = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-garbage.pem";
const DOWN_URL: &str = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-down.pem";
const TOPIC: &str = "arn:aws:sns:eu-west-1:123456789012:ses-events";

struct Fixed;

#[async_trait::async_trait]
impl CertificateFetcher for Fixed {
    async fn fetch(&self, url: &str) -> Result<Vec<u8>, FetchError> {
        match url {
            CERT_URL => Ok(CERT_PEM.as_bytes().to_vec()),
            REAL_URL => Ok(REAL_PEM.as_bytes().to_vec()),
            GARBAGE_URL => Ok(b"-----BEGIN CERTIFICATE-----\nnot one\n".to_vec()),
            _ => Err(FetchError::new("no network in the fuzzer")),
        }
    }
}

static SNS_SIGNER: LazyLock<sns::Signer> =
    LazyLock::new(|| sns::Signer::from_pkcs8_der(KEY_DER, CERT_URL).unwrap());
/// What the signer gave per message and version: RSA signing dominates the
/// run time, and the signer is deterministic (PKCS #1 v1.5).
fn sns_sign(message: SnsMessage, version: SignatureVersion) -> Option<Vec<u8>> {
    thread_local! {
        static CACHE: RefCell<HashMap<(String, bool), Option<Vec<u8>>>> = RefCell::new(HashMap::new());
    }
    let key = (serde_json::to_string(&message).ok()?, version == SignatureVersion::V2);
    if let Some(hit) = CACHE.with(|c| c.borrow().get(&key).cloned()) {
        return hit;
    }
    let signed = SNS_SIGNER.sign(message, version).ok();
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= 4096 {
            c.clear();
        }
        c.insert(key, signed.clone());
    });
    signed
}

/// Any topic, no `max_age`.
/// No fetch budget here: a servable certificate must always be had.
static SNS_ANY: LazyLock<Sns> = LazyLock::new(|| {
    Sns::builder(Fixed)
        .any_topic()
        .fetch_rate(u32::MAX, Duration::from_secs(1))
        .build()
        .unwrap()
});
/// One topic, `max_age` of the tolerance, uncached (every verification fetches).
static SNS_STRICT: LazyLock<Sns> = LazyLock::new(|| {
    Sns::builder(Fixed)
        .topic_arn(TOPIC)
        .max_age(Duration::from_secs(TOLERANCE))
        .cache_ttl(Duration::ZERO)
        .fetch_rate(u32::MAX, Duration::from_secs(1))
        .build()
        .unwrap()
});
static RUNTIME: LazyLock<tokio::runtime::Runtime> =
    LazyLock::new(|| tokio::runtime::Builder::new_current_thread().build().unwrap());

/// A signature as sent, from the signer or not.
#[derive(Arbitrary, Debug)]
enum Sig {
    Genuine { spaces: u8, upper: bool },
    /// Made with the other key.
    Other,
    /// One bit flipped in the signature's bytes.
    Flipped(u16),
    /// The genuine bytes in the other encoding (hex for base64 and back).
    Reencoded,
    /// The genuine bytes truncated or extended by one.
    Resized(bool),
    Raw(Vec<u8>),
}

impl Sig {
    /// The text sent, given the genuine and the other signature's bytes.
    fn text(&self, hex_encoded: bool, genuine: &[u8], other: &[u8]) -> Vec<u8> {
        let enc = |bytes: &[u8], hexed: bool, upper: bool| {
            if hexed {
                if upper { hex(bytes).to_uppercase() } else { hex(bytes) }
            } else {
                b64(bytes)
            }
        };
        match self {
            Self::Genuine { spaces, upper } => {
                let pad = " ".repeat(usize::from(spaces % 3));
                format!("{pad}{}{pad}", enc(genuine, hex_encoded, *upper)).into_bytes()
            }
            Self::Other => enc(other, hex_encoded, false).into_bytes(),
            Self::Flipped(bit) => {
                let mut sig = genuine.to_vec();
                let len = sig.len();
                sig[usize::from(bit / 8) % len] ^= 1 << (bit % 8);
                enc(&sig, hex_encoded, false).into_bytes()
            }
            Self::Reencoded => enc(genuine, !hex_encoded, false).into_bytes(),
            Self::Resized(longer) => {
                let mut sig = genuine.to_vec();
                if *longer {
                    sig.push(0);
                } else {
                    sig.pop();
                }
                enc(&sig, hex_encoded, false).into_bytes()
            }
            Self::Raw(raw) => raw.clone(),
        }
    }
}

/// What is signed may differ from what is sent.
#[derive(Arbitrary, Debug)]
enum Tamper {
    None,
    Append(u8),
    Xor { at: u16, with: u8 },
    OtherTime(i16),
}

impl Tamper {
    fn body(&self, signed: &[u8]) -> Vec<u8> {
        let mut sent = signed.to_vec();
        match self {
            Self::Append(b) => sent.push(*b),
            Self::Xor { at, with } if !sent.is_empty() => {
                let i = usize::from(*at) % sent.len();
                sent[i] ^= with | 1;
            }
            _ => {}
        }
        sent
    }

    fn time(&self, t: u64) -> u64 {
        match self {
            Self::OtherTime(d) => t.wrapping_add_signed(i64::from(*d) | 1),
            _ => t,
        }
    }
}

/// An SNS message's fields.
#[derive(Arbitrary, Debug)]
struct SnsFields {
    kind: Kind,
    message_id: String,
    topic: Topic,
    message: String,
    subject: Option<String>,
    token: Option<String>,
    subscribe_url: Option<String>,
    /// Seconds from NOW, written as SNS writes it.
    when: When,
}

#[derive(Arbitrary, Debug)]
enum Kind {
    Notification,
    SubscriptionConfirmation,
    UnsubscribeConfirmation,
    Raw(String),
}

#[derive(Arbitrary, Debug)]
enum Topic {
    Ours,
    Theirs,
    Raw(String),
}

#[derive(Arbitrary, Debug)]
enum When {
    Near { offset: i16, millis: Option<u16> },
    Raw(String),
}

/// After signing.
#[derive(Arbitrary, Debug)]
enum SnsMutation {
    None,
    /// A field's value changed (by name) to another string.
    Field { name: u8, value: String },
    /// A field removed.
    Remove(u8),
    /// The other signature version written over.
    OtherVersion,
    /// `SignatureVersion` set to anything.
    Version(String),
    /// Another `SigningCertURL`.
    CertUrl(CertUrl),
    /// The signature mutated.
    Signature(Sig),
    /// Bytes appended to the JSON.
    Append(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
enum CertUrl {
    Real,
    Garbage,
    Down,
    Http,
    OtherHost,
    Raw(String),
}

const FIELDS: &[&str] = &[
    "Type",
    "MessageId",
    "TopicArn",
    "Subject",
    "Message",
    "Timestamp",
    "Token",
    "SubscribeURL",
    "UnsubscribeURL",
    "SignatureVersion",
    "Signature",
    "SigningCertURL",
];

#[derive(Arbitrary, Debug)]
enum Scheme {
    Discord { ts: Timestamp, time_header: bool, sig: Option<Sig>, body: Vec<u8> },
    SendGrid { ts: Timestamp, time_header: bool, sig: Option<Sig>, body: Vec<u8> },
    Sns { strict: bool, fields: SnsFields, v2: bool, mutation: SnsMutation, type_header: Option<Vec<u8>> },
    SnsRaw { strict: bool, body: Vec<u8>, type_header: Option<Vec<u8>> },
}

#[derive(Arbitrary, Debug)]
struct Input {
    scheme: Scheme,
    tamper: Tamper,
    skew: i16,
    extra: Vec<(String, Vec<u8>)>,
}

fn ts_value(text: &[u8]) -> u64 {
    std::str::from_utf8(text).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(common::NOW)
}

fn trimmed_header<'h>(h: &'h HeaderMap, name: &str) -> Option<&'h str> {
    h.get(name).and_then(|v| v.to_str().ok()).map(str::trim)
}

fn fresh(v: &Verified, skew: i16, tolerance: u64) {
    let now = common::NOW.wrapping_add_signed(i64::from(skew));
    let ts = v.timestamp.expect("a signed timestamp");
    assert!(ts.abs_diff(now) <= tolerance, "stale timestamp accepted: {v:?}");
}

/// `YYYY-MM-DDTHH:MM:SS[.mmm]Z` of Unix seconds.
fn iso(secs: u64, millis: Option<u16>) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil date from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    let frac = millis.map(|ms| format!(".{:03}", ms % 1000)).unwrap_or_default();
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}{frac}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn sns_message(f: &SnsFields, tamper: &Tamper) -> Option<SnsMessage> {
    let topic = match &f.topic {
        Topic::Ours => TOPIC.to_owned(),
        Topic::Theirs => "arn:aws:sns:us-east-1:999999999999:theirs".to_owned(),
        Topic::Raw(t) => t.clone(),
    };
    let when = match &f.when {
        When::Near { offset, millis } => {
            iso(tamper.time(common::NOW.wrapping_add_signed(i64::from(*offset))), *millis)
        }
        When::Raw(w) => w.clone(),
    };
    let id = if f.message_id.is_empty() { "msg-1".to_owned() } else { f.message_id.clone() };
    let mut m = match &f.kind {
        Kind::Notification => SnsMessage::notification(id, topic, f.message.clone(), when),
        Kind::SubscriptionConfirmation | Kind::UnsubscribeConfirmation | Kind::Raw(_) => {
            let mut m = SnsMessage::subscription_confirmation(
                id,
                topic,
                f.token.clone().unwrap_or_else(|| "token".into()),
                f.subscribe_url
                    .clone()
                    .unwrap_or_else(|| "https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription".into()),
                when,
            );
            m.message = f.message.clone();
            match &f.kind {
                Kind::UnsubscribeConfirmation => m.kind = "UnsubscribeConfirmation".into(),
                Kind::Raw(k) => m.kind = k.clone(),
                _ => {}
            }
            m
        }
    };
    if let Some(s) = &f.subject {
        m = m.with_subject(s.clone());
    }
    Some(m)
}

/// The bytes of a base64 signature, leading zero bytes dropped (the same
/// RSA integer).
fn sns_signature(text: &str) -> Option<Vec<u8>> {
    let bytes = B64.decode(text).ok()?;
    let first = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
    Some(bytes[first..].to_vec())
}

fuzz_target!(|input: Input| {
    let Input { scheme, tamper, skew, extra } = input;
    let now = common::clock(skew);
    let mut h = HeaderMap::new();
    let mut genuine: Vec<Vec<u8>> = Vec::new();
    let mut allowed: &[u16] = &[];
    let body: Vec<u8>;
    let result: Result<Verified, VerifyError>;

    match &scheme {
        Scheme::Discord { ts, time_header, sig, body: b } => {
            let text = ts.text();
            let t = tamper.time(ts_value(&text));
            body = tamper.body(b);
            if *time_header {
                insert(&mut h, "x-signature-timestamp", &text);
            }
            if let Some(sig) = sig {
                let signed = Discord::sign_headers(&SEED, t, b).unwrap();
                let g = signed.get("x-signature-ed25519").unwrap().to_str().unwrap();
                let g: Vec<u8> = (0..64).map(|i| u8::from_str_radix(&g[2 * i..2 * i + 2], 16).unwrap()).collect();
                let other = ed25519_dalek::SigningKey::from_bytes(&OTHER_SEED)
                    .sign(&[t.to_string().as_bytes(), b].concat())
                    .to_bytes();
                insert(&mut h, "x-signature-ed25519", &sig.text(true, &g, &other));
                genuine.push(g);
            }
            for (name, value) in &extra {
                insert(&mut h, name, value);
            }
            result = DISCORD.verify(&h, &body, now);
            if let Ok(v) = &result {
                let raw = trimmed_header(&h, "x-signature-timestamp").expect("accepted, so timestamped");
                let expected = ed25519_dalek::SigningKey::from_bytes(&SEED)
                    .sign(&[raw.as_bytes(), &body].concat())
                    .to_bytes();
                let sent = trimmed_header(&h, "x-signature-ed25519").expect("accepted, so signed");
                assert!(sent.eq_ignore_ascii_case(&hex(&expected)), "Discord bypass: {h:?}");
                fresh(v, skew, TOLERANCE);
            }
        }
        Scheme::SendGrid { ts, time_header, sig, body: b } => {
            let text = ts.text();
            let t = tamper.time(ts_value(&text));
            body = tamper.body(b);
            if *time_header {
                insert(&mut h, "x-twilio-email-event-webhook-timestamp", &text);
            }
            if let Some(sig) = sig {
                let g = B64.decode(SENDGRID_SIGNER.sign(t, b)).unwrap();
                let other = B64.decode(SENDGRID_OTHER.sign(t, b)).unwrap();
                insert(&mut h, "x-twilio-email-event-webhook-signature", &sig.text(false, &g, &other));
                genuine.push(g);
            }
            for (name, value) in &extra {
                insert(&mut h, name, value);
            }
            result = SENDGRID.verify(&h, &body, now);
            if let Ok(v) = &result {
                let raw = trimmed_header(&h, "x-twilio-email-event-webhook-timestamp").expect("timestamped");
                let t: u64 = raw.parse().expect("accepted, so a number");
                assert_eq!(raw, t.to_string(), "SendGrid accepted a timestamp written otherwise than signed");
                let expected = B64.decode(SENDGRID_SIGNER.sign(t, &body)).unwrap();
                let sent = trimmed_header(&h, "x-twilio-email-event-webhook-signature").expect("signed");
                assert_eq!(B64.decode(sent).ok(), Some(expected), "SendGrid bypass: {h:?}");
                fresh(v, skew, TOLERANCE);
            }
        }
        Scheme::Sns { .. } | Scheme::SnsRaw { .. } => {
            let (strict, type_header) = match &scheme {
                Scheme::Sns { strict, type_header, .. } | Scheme::SnsRaw { strict, type_header, .. } => {
                    (*strict, type_header)
                }
                _ => unreachable!(),
            };
            body = match &scheme {
                Scheme::Sns { fields, v2, mutation, .. } => {
                    let version = if *v2 { SignatureVersion::V2 } else { SignatureVersion::V1 };
                    match sns_message(fields, &tamper).and_then(|m| sns_sign(m, version)) {
                        None => b"{}".to_vec(),
                        Some(signed) => {
                            let mut json: serde_json::Map<String, serde_json::Value> =
                                serde_json::from_slice(&signed).unwrap();
                            if let Some(sig) = json.get("Signature").and_then(|s| s.as_str()) {
                                genuine.push(B64.decode(sig).unwrap());
                            }
                            let mut append = Vec::new();
                            match mutation {
                                SnsMutation::None => {}
                                SnsMutation::Field { name, value } => {
                                    let name = FIELDS[usize::from(*name) % FIELDS.len()];
                                    json.insert(name.into(), value.clone().into());
                                }
                                SnsMutation::Remove(name) => {
                                    json.remove(FIELDS[usize::from(*name) % FIELDS.len()]);
                                }
                                SnsMutation::OtherVersion => {
                                    json.insert("SignatureVersion".into(), if *v2 { "1" } else { "2" }.into());
                                }
                                SnsMutation::Version(v) => {
                                    json.insert("SignatureVersion".into(), v.clone().into());
                                }
                                SnsMutation::CertUrl(c) => {
                                    let url = match c {
                                        CertUrl::Real => REAL_URL.to_owned(),
                                        CertUrl::Garbage => GARBAGE_URL.to_owned(),
                                        CertUrl::Down => DOWN_URL.to_owned(),
                                        CertUrl::Http => CERT_URL.replacen("https", "http", 1),
                                        CertUrl::OtherHost => CERT_URL.replacen("amazonaws.com", "amazonaws.com.evil.com", 1),
                                        CertUrl::Raw(u) => u.clone(),
                                    };
                                    json.insert("SigningCertURL".into(), url.into());
                                }
                                SnsMutation::Signature(sig) => {
                                    let g = genuine.last().cloned().unwrap_or_default();
                                    if !g.is_empty() {
                                        let text = sig.text(false, &g, &[0xAA; 256]);
                                        json.insert(
                                            "Signature".into(),
                                            String::from_utf8_lossy(&text).into_owned().into(),
                                        );
                                    }
                                }
                                SnsMutation::Append(bytes) => append = bytes.clone(),
                            }
                            let mut out = serde_json::to_vec(&json).unwrap();
                            out.extend_from_slice(&append);
                            tamper.body(&out)
                        }
                    }
                }
                Scheme::SnsRaw { body, .. } => body.clone(),
                _ => unreachable!(),
            };
            if let Some(t) = type_header {
                insert(&mut h, "x-amz-sns-message-type", t);
            }
            for (name, value) in &extra {
                insert(&mut h, name, value);
            }
            let sns = if strict { &*SNS_STRICT } else { &*SNS_ANY };
            result = RUNTIME.block_on(sns.verify_request(RequestHead::new("/sns", &h), &body, now));
            match &result {
                Ok(v) => {
                    let message: SnsMessage = serde_json::from_slice(&body).expect("accepted, so an SNS message");
                    // Cached by path: the same certificate named on another
                    // allowed host (or in other letter case) is the same key.
                    let named = message.signing_cert_url.to_ascii_lowercase();
                    assert!(
                        named.starts_with("https://sns.") && named.ends_with("/simplenotificationservice-test.pem"),
                        "accepted with another certificate: {named}"
                    );
                    if strict {
                        assert_eq!(named, CERT_URL.to_ascii_lowercase(), "fetched another certificate");
                    }
                    if strict {
                        assert_eq!(message.topic_arn, TOPIC, "accepted another topic");
                        fresh(v, skew, TOLERANCE);
                    }
                    let version = match message.signature_version.as_str() {
                        "1" => SignatureVersion::V1,
                        "2" => SignatureVersion::V2,
                        other => panic!("accepted SignatureVersion {other:?}"),
                    };
                    let sent = sns_signature(&message.signature).expect("accepted, so base64");
                    let resigned = sns_sign(message, version).expect("accepted, so signable");
                    let resigned: SnsMessage = serde_json::from_slice(&resigned).unwrap();
                    assert_eq!(
                        Some(sent),
                        sns_signature(&resigned.signature),
                        "SNS accepted a signature the signer does not give"
                    );
                }
                Err(VerifyError::KeyLookupUnavailable) => {
                    // Only for an allowed URL whose certificate cannot be had.
                    let json: serde_json::Value = serde_json::from_slice(&body).expect("fetched, so JSON");
                    let url = json.get("SigningCertURL").and_then(|u| u.as_str()).unwrap_or_default();
                    assert!(url != CERT_URL && url != REAL_URL, "503 for a servable certificate {url}");
                    allowed = &[503];
                }
                Err(_) => {}
            }
        }
    }

    if let Err(err) = &result {
        let genuine: Vec<&[u8]> = genuine.iter().map(Vec::as_slice).collect();
        common::check_refusal(err, &genuine, allowed);
    }
});
