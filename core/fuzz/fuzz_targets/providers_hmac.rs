//! Fuzzes the shared-secret provider schemes, one arm each, picked by an
//! arbitrary enum: Twilio, Square, Mandrill and HubSpot (URL-signing, through
//! `Verifier::verify_head` and a `PublicUrl` from the base, the `Host`
//! header, the forwarded headers or an exact URL), Linear, Zoom, Paddle,
//! Intercom, Typeform, Mailgun (JSON and form bodies), and the token schemes
//! GitLab (`X-Gitlab-Token`) and Postmark (`Authorization: Basic`).
//!
//! Each arm sends arbitrary headers, bodies, URLs and timestamps, or the
//! signature the scheme's own signer (`sign`/`sign_headers`) gives, as is or
//! mutated: a bit flipped, made with another secret, under a wrong prefix or
//! encoding, for another URL, timestamp or body, or raw bytes. Properties:
//!
//! * it never panics;
//! * a refusal is a `400`/`401` whose `Display` and `Debug` carry neither
//!   secret nor the genuine signature;
//! * an acceptance means the request carried the genuine signature for those
//!   exact bytes: for Square, HubSpot, Linear, Zoom, Paddle, Intercom,
//!   Typeform and Mailgun a naive HMAC of the signed content (the URL the
//!   verifier rebuilds, the timestamp text as sent); for Twilio and Mandrill
//!   (sorted form fields) what the scheme's signer gives for the same URL
//!   (Twilio: or the same URL with its port toggled) and body, and Twilio's
//!   `bodySHA256` matching the body; for GitLab the exact token; for
//!   Postmark the exact `user:password`. A signed timestamp is within the
//!   tolerance of the receiver's clock.
//!
//! ```text
//! cd core/fuzz && cargo +nightly fuzz run providers_hmac -- -max_total_time=900
//! ```

#![no_main]

mod common;

use std::time::Duration;

use arbitrary::Arbitrary;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use common::{OTHER, SECRET, TOLERANCE, Timestamp, b64, hex, hmac1, hmac256, insert};
use http::HeaderMap;
use libfuzzer_sys::fuzz_target;
use sha2::Digest as _;
use webhooks_core::scheme::{
    GitLab, HubSpot, Intercom, Linear, Mailgun, Mandrill, Paddle, Postmark, Square, Twilio,
    Typeform, Zoom,
};
use webhooks_core::{PublicUrl, RequestHead, Verified, Verifier, VerifyError};

/// Postmark's user name.
const USER: &str = "hooks";
/// The base and exact public URLs.
const BASE: &str = "https://hooks.example.com/base";
const EXACT: &str = "https://hooks.example.com:8443/exact/twilio?x=1";

/// How the receiver rebuilds the URL a URL-signing scheme signed.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Public {
    Base,
    Exact,
    Host { https: bool },
    Forwarded,
}

impl Public {
    fn url(self) -> PublicUrl {
        match self {
            Self::Base => PublicUrl::base(BASE).unwrap(),
            Self::Exact => PublicUrl::exact(EXACT).unwrap(),
            Self::Host { https } => PublicUrl::from_host_header(if https { "https" } else { "http" }),
            Self::Forwarded => PublicUrl::from_forwarded_headers(),
        }
    }
}

/// The request line and the headers a URL is rebuilt from.
#[derive(Arbitrary, Debug)]
struct Head {
    public: Public,
    path: Path,
    query: Option<String>,
    host: Option<Vec<u8>>,
    forwarded_host: Option<Vec<u8>>,
    forwarded_proto: Option<Vec<u8>>,
}

#[derive(Arbitrary, Debug)]
enum Path {
    Hooks,
    Escaped,
    Raw(String),
}

impl Head {
    fn path(&self) -> &str {
        match &self.path {
            Path::Hooks => "/hooks/in",
            Path::Escaped => "/hooks/a%3Ab%2Fc%20d%zz",
            Path::Raw(p) => p,
        }
    }

    fn headers(&self, h: &mut HeaderMap) {
        if let Some(v) = &self.host {
            insert(h, "host", v);
        }
        if let Some(v) = &self.forwarded_host {
            insert(h, "x-forwarded-host", v);
        }
        if let Some(v) = &self.forwarded_proto {
            insert(h, "x-forwarded-proto", v);
        }
    }
}

/// A signature header, from the scheme's signer or not.
#[derive(Arbitrary, Debug)]
enum Sig {
    /// The signer's, as is (with surrounding spaces, hex in either case).
    Genuine { spaces: u8, upper: bool },
    /// Made by a verifier holding the other secret.
    Other,
    /// The genuine MAC with one bit flipped.
    Flipped(u8),
    /// The genuine MAC under another prefix or in the other encoding.
    WrongPrefix(u8),
    /// The genuine MAC truncated or extended by a byte.
    Resized(bool),
    /// Anything.
    Raw(Vec<u8>),
}

/// How a scheme writes its MAC: a prefix, then hex or base64.
#[derive(Clone, Copy)]
struct Format {
    prefix: &'static str,
    hex: bool,
}

impl Format {
    fn encode(self, mac: &[u8], upper: bool) -> String {
        let digits = if self.hex {
            if upper { hex(mac).to_uppercase() } else { hex(mac) }
        } else {
            b64(mac)
        };
        format!("{}{digits}", self.prefix)
    }

    /// The MAC in a signer's output.
    fn decode(self, text: &str) -> Vec<u8> {
        let digits = text.strip_prefix(self.prefix).expect("the signer writes its prefix");
        if self.hex {
            (0..digits.len() / 2)
                .map(|i| u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).unwrap())
                .collect()
        } else {
            B64.decode(digits).unwrap()
        }
    }
}

const WRONG_PREFIXES: &[&str] = &["", "sha1=", "sha256=", "v0=", "v1=", "h1=", "Sha256=", "SHA1="];

impl Sig {
    /// The header text, given the genuine signer output and the other one.
    fn text(&self, format: Format, genuine: &str, other: &str) -> Vec<u8> {
        let mac = format.decode(genuine);
        match self {
            Self::Genuine { spaces, upper } => {
                let pad = " ".repeat(usize::from(spaces % 3));
                format!("{pad}{}{pad}", format.encode(&mac, *upper)).into_bytes()
            }
            Self::Other => other.as_bytes().to_vec(),
            Self::Flipped(bit) => {
                let mut mac = mac;
                let len = mac.len();
                mac[usize::from(bit / 8) % len] ^= 1 << (bit % 8);
                format.encode(&mac, false).into_bytes()
            }
            Self::WrongPrefix(i) => {
                let prefix = WRONG_PREFIXES[usize::from(*i) % WRONG_PREFIXES.len()];
                let flipped = Format {
                    prefix: "",
                    hex: if i & 0x80 != 0 { !format.hex } else { format.hex },
                };
                format!("{prefix}{}", flipped.encode(&mac, false)).into_bytes()
            }
            Self::Resized(longer) => {
                let mut mac = mac;
                if *longer { mac.push(0) } else { mac.pop(); }
                format.encode(&mac, false).into_bytes()
            }
            Self::Raw(raw) => raw.clone(),
        }
    }
}

/// A request body: form fields, JSON, or anything.
#[derive(Arbitrary, Debug)]
enum Body {
    Form(Vec<(String, String)>),
    Raw(Vec<u8>),
}

fn form_encode(pairs: &[(String, String)]) -> Vec<u8> {
    let enc = |s: &str| -> String {
        s.bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                b' ' => "+".to_owned(),
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
        .into_bytes()
}

impl Body {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Self::Form(pairs) => form_encode(pairs),
            Self::Raw(raw) => raw.clone(),
        }
    }
}

/// What is signed may differ from what is sent.
#[derive(Arbitrary, Debug)]
enum Tamper {
    None,
    /// The body sent has one more byte than the body signed.
    Append(u8),
    /// The body sent has one byte changed.
    Xor { at: u16, with: u8 },
    /// The signature is for another URL.
    OtherUrl,
    /// The signature is for another timestamp.
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

    fn url(&self, url: &str) -> String {
        match self {
            Self::OtherUrl => format!("{url}x"),
            _ => url.to_owned(),
        }
    }

    fn time(&self, t: u64) -> u64 {
        match self {
            Self::OtherTime(d) => t.wrapping_add_signed(i64::from(*d) | 1),
            _ => t,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Scheme {
    Twilio { head: Head, body: Body, body_sha256: Option<bool>, sig: Option<Sig>, idempotency: Option<Vec<u8>> },
    Square { head: Head, body: Vec<u8>, sig: Option<Sig> },
    Mandrill { head: Head, body: Body, sig: Option<Sig> },
    HubSpot { head: Head, body: Vec<u8>, millis: Millis, sig: Option<Sig>, time_header: bool },
    Linear { body: LinearBody, sig: Option<Sig>, delivery: Option<Vec<u8>> },
    Zoom { ts: Timestamp, body: Vec<u8>, sig: Option<Sig>, time_header: bool },
    Paddle { ts: Timestamp, body: Vec<u8>, sig: Option<Sig>, extra_h1: Option<Vec<u8>>, swap: bool },
    Intercom { body: Vec<u8>, sig: Option<Sig> },
    Typeform { body: Vec<u8>, sig: Option<Sig> },
    Mailgun { body: MailgunBody, content_type: Option<Vec<u8>> },
    GitLab { token: Option<Token>, event: Option<Vec<u8>>, uuid: Option<Vec<u8>>, body: Vec<u8> },
    Postmark { auth: Option<Auth>, body: Vec<u8> },
}

#[derive(Arbitrary, Debug)]
struct Input {
    scheme: Scheme,
    tamper: Tamper,
    skew: i16,
    extra: Vec<(String, Vec<u8>)>,
}

/// HubSpot's millisecond timestamp.
#[derive(Arbitrary, Debug)]
enum Millis {
    Near { offset: i16, ms: u16 },
    Padded { offset: i16, zeros: u8 },
    Raw(Vec<u8>),
}

impl Millis {
    fn text(&self) -> Vec<u8> {
        let near = |o: i16, ms: u16| {
            (common::NOW.wrapping_add_signed(i64::from(o)) * 1000 + u64::from(ms % 1000)).to_string()
        };
        match self {
            Self::Near { offset, ms } => near(*offset, *ms).into_bytes(),
            Self::Padded { offset, zeros } => {
                format!(" {}{} ", "0".repeat(usize::from(zeros % 3)), near(*offset, 0)).into_bytes()
            }
            Self::Raw(raw) => raw.clone(),
        }
    }
}

/// Linear's body: JSON with `webhookTimestamp` (ms), or anything.
#[derive(Arbitrary, Debug)]
enum LinearBody {
    Json { millis: Millis, quoted: bool, action: String },
    Raw(Vec<u8>),
}

impl LinearBody {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Self::Json { millis, quoted, action } => {
                let t = String::from_utf8_lossy(&millis.text()).into_owned();
                let t = if *quoted { serde_json_string(&t) } else { t };
                format!(r#"{{"action":{},"webhookTimestamp":{t}}}"#, serde_json_string(action)).into_bytes()
            }
            Self::Raw(raw) => raw.clone(),
        }
    }
}

fn serde_json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Mailgun's signature block, in JSON or a form, or anything.
#[derive(Arbitrary, Debug)]
enum MailgunBody {
    Signed { json: bool, ts: Timestamp, numeric: bool, token: String, sig: Sig, event: Option<String> },
    Raw(Vec<u8>),
}

/// `X-Gitlab-Token`.
#[derive(Arbitrary, Debug)]
enum Token {
    Genuine,
    Padded,
    Other,
    Prefix(u8),
    Raw(Vec<u8>),
}

/// `Authorization` for Postmark.
#[derive(Arbitrary, Debug)]
enum Auth {
    Genuine { lower: bool, spaces: u8 },
    OtherPassword,
    OtherUser,
    NoColon,
    Bearer,
    Raw(Vec<u8>),
    RawCredentials(Vec<u8>),
}

fn twilio(secret: &str, public: Public) -> Twilio {
    Twilio::builder().auth_token(secret).public_url(public.url()).build().unwrap()
}
fn square(secret: &str, public: Public) -> Square {
    Square::builder().signature_key(secret).public_url(public.url()).build().unwrap()
}
fn mandrill(secret: &str, public: Public) -> Mandrill {
    Mandrill::builder().webhook_key(secret).public_url(public.url()).build().unwrap()
}
fn hubspot(secret: &str, public: Public) -> HubSpot {
    HubSpot::builder()
        .client_secret(secret)
        .public_url(public.url())
        .tolerance(Duration::from_secs(TOLERANCE))
        .build()
        .unwrap()
}

/// The URL with its port toggled (`:443`/`:80` added, or an explicit port removed).
fn port_toggled(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let host_end = authority.rfind(']').map_or(0, |i| i + 1);
    match authority[host_end..].rfind(':') {
        Some(colon) => Some(format!("{scheme}://{}{tail}", &authority[..host_end + colon])),
        None => {
            let port = match scheme {
                "https" => 443,
                "http" => 80,
                _ => return None,
            };
            Some(format!("{scheme}://{authority}:{port}{tail}"))
        }
    }
}

/// HubSpot's URL decoding: only these escapes.
fn hubspot_decoded(url: &str) -> String {
    let mut out = String::new();
    let mut rest = url;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let decoded = match rest.get(i + 1..i + 3).map(str::to_ascii_uppercase).as_deref() {
            Some("3A") => Some(':'),
            Some("2F") => Some('/'),
            Some("3F") => Some('?'),
            Some("40") => Some('@'),
            Some("21") => Some('!'),
            Some("24") => Some('$'),
            Some("27") => Some('\''),
            Some("28") => Some('('),
            Some("29") => Some(')'),
            Some("2A") => Some('*'),
            Some("2C") => Some(','),
            Some("3B") => Some(';'),
            _ => None,
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[i + 3..];
            }
            None => {
                out.push('%');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn header_carries(h: &HeaderMap, name: &str, mac: &[u8]) -> bool {
    h.get_all(name).iter().any(|v| common::carries(v.as_bytes(), mac))
}

fn trimmed_header<'h>(h: &'h HeaderMap, name: &str) -> Option<&'h str> {
    h.get(name).and_then(|v| v.to_str().ok()).map(str::trim)
}

fn fresh(v: &Verified, skew: i16, tolerance: u64) {
    let now = common::NOW.wrapping_add_signed(i64::from(skew));
    let ts = v.timestamp.expect("a signed timestamp");
    assert!(ts.abs_diff(now) <= tolerance, "stale timestamp accepted: {v:?}");
}

fn ts_value(text: &[u8]) -> u64 {
    std::str::from_utf8(text).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(common::NOW)
}

fuzz_target!(|input: Input| {
    let Input { scheme, tamper, skew, extra } = input;
    let now = common::clock(skew);
    let mut h = HeaderMap::new();
    // What the refusal may not show.
    let mut genuine: Vec<Vec<u8>> = Vec::new();

    let result: Result<(Verified, Box<dyn Fn(&Verified, &HeaderMap, &[u8])>), VerifyError>;
    let body: Vec<u8>;

    macro_rules! url_scheme {
        ($head:expr, $make:ident) => {{
            let head: &Head = $head;
            head.headers(&mut h);
            let verifier = $make(SECRET, head.public);
            let other = $make(OTHER, head.public);
            (verifier, other)
        }};
    }

    match &scheme {
        Scheme::Twilio { head, body: b, body_sha256, sig, idempotency } => {
            let (v, o) = url_scheme!(head, twilio);
            let signed = b.bytes();
            body = tamper.body(&signed);
            let mut query = head.query.clone();
            if let Some(upper) = body_sha256 {
                let digest = Twilio::body_sha256_hex(&signed);
                let digest = if *upper { digest.to_uppercase() } else { digest };
                let q = query.map(|q| format!("{q}&")).unwrap_or_default();
                query = Some(format!("{q}bodySHA256={digest}"));
            }
            let rh = RequestHead::new(head.path(), &h).with_query(query.as_deref());
            let url = rh.url(&head.public.url()).unwrap_or_else(|_| format!("{BASE}/fallback"));
            let sign_url = tamper.url(&url);
            if let Some(sig) = sig {
                let fmt = Format { prefix: "", hex: false };
                // A body the signer cannot read as a form is signed as one that it can.
                let g = v.sign(&sign_url, &signed).unwrap_or_else(|_| v.sign(&sign_url, b"").unwrap());
                let ot = o.sign(&sign_url, &signed).unwrap_or_else(|_| o.sign(&sign_url, b"").unwrap());
                genuine.push(fmt.decode(&g));
                insert(&mut h, "x-twilio-signature", &sig.text(fmt, &g, &ot));
            }
            if let Some(id) = idempotency {
                insert(&mut h, "i-twilio-idempotency-token", id);
            }
            for (name, value) in &extra {
                insert(&mut h, name, value);
            }
            let rh = RequestHead::new(head.path(), &h).with_query(query.as_deref());
            let public = head.public.url();
            result = v.verify_head(rh, &body, now).map(|ok| {
                let url = rh.url(&public).expect("accepted, so the URL was rebuilt");
                let check: Box<dyn Fn(&Verified, &HeaderMap, &[u8])> = Box::new(move |_, h, body| {
                    let fmt = Format { prefix: "", hex: false };
                    let mut urls = vec![url.clone()];
                    urls.extend(port_toggled(&url));
                    let signed = urls.iter().any(|u| {
                        v.sign(u, body).is_ok_and(|s| header_carries(h, "x-twilio-signature", &fmt.decode(&s)))
                    });
                    assert!(signed, "Twilio accepted without the signer's signature for {url:?}: {h:?}");
                    if let Some(q) = url.split_once('?').map(|(_, q)| q) {
                        if let Some(expected) = q.split('&').find_map(|p| p.strip_prefix("bodySHA256=")) {
                            let actual = hex(&sha2::Sha256::digest(body));
                            assert!(expected.eq_ignore_ascii_case(&actual), "bodySHA256 {expected} for {actual}");
                        }
                    }
                });
                (ok, check)
            });
        }
        Scheme::Square { head, body: b, sig } => {
            let (v, o) = url_scheme!(head, square);
            body = tamper.body(b);
            let rh = RequestHead::new(head.path(), &h).with_query(head.query.as_deref());
            let url = rh.url(&head.public.url()).unwrap_or_else(|_| format!("{BASE}/fallback"));
            if let Some(sig) = sig {
                let fmt = Format { prefix: "", hex: false };
                let sign_url = tamper.url(&url);
                let g = v.sign(&sign_url, b);
                genuine.push(fmt.decode(&g));
                genuine.push(hmac256(SECRET, &[url.as_bytes(), &body]).to_vec());
                insert(&mut h, "x-square-hmacsha256-signature", &sig.text(fmt, &g, &o.sign(&sign_url, b)));
            }
            for (name, value) in &extra {
                insert(&mut h, name, value);
            }
            let rh = RequestHead::new(head.path(), &h).with_query(head.query.as_deref());
            let public = head.public.url();
            result = v.verify_head(rh, &body, now).map(|ok| {
                let url = rh.url(&public).expect("accepted, so the URL was rebuilt");
                let check: Box<dyn Fn(&Verified, &HeaderMap, &[u8])> = Box::new(move |_, h, body| {
                    let mac = hmac256(SECRET, &[url.as_bytes(), body]);
                    assert!(header_carries(h, "x-square-hmacsha256-signature", &mac), "Square bypass for {url:?}: {h:?}");
                });
                (ok, check)
            });
        }
        Scheme::Mandrill { head, body: b, sig } => {
            let (v, o) = url_scheme!(head, mandrill);
            let signed = b.bytes();
            body = tamper.body(&signed);
            let rh = RequestHead::new(head.path(), &h).with_query(head.query.as_deref());
            let url = rh.url(&head.public.url()).unwrap_or_else(|_| format!("{BASE}/fallback"));
            if let Some(sig) = sig {
                let fmt = Format { prefix: "", hex: false };
                let sign_url = tamper.url(&url);
                let g = v.sign(&sign_url, &signed).unwrap_or_else(|_| v.sign(&sign_url, b"").unwrap());
                let ot = o.sign(&sign_url, &signed).unwrap_or_else(|_| o.sign(&sign_url, b"").unwrap());
                genuine.push(fmt.decode(&g));
                insert(&mut h, "x-mandrill-signature", &sig.text(fmt, &g, &ot));
            }
            for (name, value) in &extra {
                insert(&mut h, name, value);
            }
            let rh = RequestHead::new(head.path(), &h).with_query(head.query.as_deref());
            let public = head.public.url();
            result = v.verify_head(rh, &body, now).map(|ok| {
                let url = rh.url(&public).expect("accepted, so the URL was rebuilt");
                let check: Box<dyn Fn(&Verified, &HeaderMap, &[u8])> = Box::new(move |_, h, body| {
                    let fmt = Format { prefix: "", hex: false };
                    let s = v.sign(&url, body).expect("accepted, so the body is a form");
                    assert!(header_carries(h, "x-mandrill-signature", &fmt.decode(&s)), "Mandrill bypass for {url:?}: {h:?}");
                });
                (ok, check)
            });
        }
        Scheme::HubSpot { head, body: b, millis, sig, time_header } => {
            let (v, o) = url_scheme!(head, hubspot);
            body = tamper.body(b);
            let text = millis.text();
            let ms = tamper.time(ts_value(&text));
            if *time_header {
                insert(&mut h, "x-hubspot-request-timestamp", &text);
            }
            let rh = RequestHead::new(head.path(), &h).with_query(head.query.as_deref());
            let url = rh.url(&head.public.url()).unwrap_or_else(|_| format!("{BASE}/fallback"));
            if let Some(sig) = sig {
                let fmt = Format { prefix: "", hex: false };
                let sign_url = tamper.url(&url);
                let g = v.sign(&sign_url, ms, b);
                genuine.push(fmt.decode(&g));
                insert(&mut h, "x-hubspot-signature-v3", &sig.text(fmt, &g, &o.sign(&sign_url, ms, b)));
            }
            for (name, value) in &extra {
                insert(&mut h, name, value);
            }
            let rh = RequestHead::new(head.path(), &h).with_query(head.query.as_deref());
            let public = head.public.url();
            result = v.verify_head(rh, &body, now).map(|ok| {
                let url = rh.url(&public).expect("accepted, so the URL was rebuilt");
                let check: Box<dyn Fn(&Verified, &HeaderMap, &[u8])> = Box::new(move |v, h, body| {
                    let t = trimmed_header(h, "x-hubspot-request-timestamp").expect("accepted, so timestamped");
                    let decoded = hubspot_decoded(&url);
                    let mac = hmac256(SECRET, &[b"POST", decoded.as_bytes(), body, t.as_bytes()]);
                    assert!(header_carries(h, "x-hubspot-signature-v3", &mac), "HubSpot bypass for {url:?}: {h:?}");
                    assert_eq!(v.timestamp, t.parse::<u64>().ok().map(|ms| ms / 1000));
                });
                (ok, check)
            });
        }
        Scheme::Linear { body: b, sig, delivery } => {
            let v = Linear::builder().secret(SECRET).build().unwrap();
            let o = Linear::new(OTHER).unwrap();
            let signed = b.bytes();
            body = tamper.body(&signed);
            if let Some(sig) = sig {
                let fmt = Format { prefix: "", hex: true };
                let g = v.sign(&signed);
                genuine.push(fmt.decode(&g));
                insert(&mut h, "linear-signature", &sig.text(fmt, &g, &o.sign(&signed)));
            }
            if let Some(d) = delivery {
                insert(&mut h, "linear-delivery", d);
            }
            for (name, value) in &extra {
                insert(&mut h, name, value);
            }
            result = v.verify(&h, &body, now).map(|ok| {
                let check: Box<dyn Fn(&Verified, &HeaderMap, &[u8])> = Box::new(move |v, h, body| {
                    assert!(header_carries(h, "linear-signature", &hmac256(SECRET, &[body])), "Linear bypass: {h:?}");
                    fresh(v, skew, 60);
                });
                (ok, check)
            });
        }
        Scheme::Zoom { ts, body: b, sig, time_header } => {
            let v = Zoom::new(SECRET).unwrap();
            let o = Zoom::new(OTHER).unwrap();
            body = tamper.body(b);
            let text = ts.text();
            let t = tamper.time(ts_value(&text));
            if *time_header {
                insert(&mut h, "x-zm-request-timestamp", &text);
            }
            if let Some(sig) = sig {
                let fmt = Format { prefix: "v0=", hex: true };
                let g = v.sign(t, b);
                genuine.push(fmt.decode(&g));
                insert(&mut h, "x-zm-signature", &sig.text(fmt, &g, &o.sign(t, b)));
            }
            for (name, value) in &extra {
                insert(&mut h, name, value);
            }
            result = v.verify(&h, &body, now).map(|ok| {
                let check: Box<dyn Fn(&Verified, &HeaderMap, &[u8])> = Box::new(move |v, h, body| {
                    let t = trimmed_header(h, "x-zm-request-timestamp").expect("accepted, so timestamped");
                    let mac = hmac256(SECRET, &[b"v0:", t.as_bytes(), b":", body]);
                    assert!(header_carries(h, "x-zm-signature", &mac), "Zoom bypass: {h:?}");
                    fresh(v, skew, TOLERANCE);
                });
                (ok, check)
            });
        }
        Scheme::Paddle { ts, body: b, sig, extra_h1, swap } => {
            let v = Paddle::builder().secret(SECRET).tolerance(Duration::from_secs(TOLERANCE)).build().unwrap();
            let o = Paddle::new(OTHER).unwrap();
            body = tamper.body(b);
            let text = String::from_utf8_lossy(&ts.text()).into_owned();
            let t = tamper.time(ts_value(text.as_bytes()));
            let value = match sig {
                Some(sig) => {
                    let g = v.sign(t, b);
                    let ot = o.sign(t, b);
                    let (_, g_h1) = g.split_once(";h1=").unwrap();
                    let (_, o_h1) = ot.split_once(";h1=").unwrap();
                    let fmt = Format { prefix: "", hex: true };
                    genuine.push(fmt.decode(g_h1));
                    let h1 = String::from_utf8_lossy(&sig.text(fmt, g_h1, o_h1)).into_owned();
                    let more = extra_h1.as_ref().map(|e| format!(";h1={}", String::from_utf8_lossy(e))).unwrap_or_default();
                    if *swap {
                        format!("h1={h1}{more};ts={text}")
                    } else {
                        format!("ts={text};h1={h1}{more}")
                    }
                }
                None => format!("ts={text}"),
            };
            insert(&mut h, "paddle-signature", value.as_bytes());
            for (name, value) in &extra {
                insert(&mut h, name, value);
            }
            result = v.verify(&h, &body, now).map(|ok| {
                let check: Box<dyn Fn(&Verified, &HeaderMap, &[u8])> = Box::new(move |v, h, body| {
                    let t = v.timestamp.expect("signed").to_string();
                    let mac = hmac256(SECRET, &[t.as_bytes(), b":", body]);
                    assert!(header_carries(h, "paddle-signature", &mac), "Paddle bypass: {h:?}");
                    fresh(v, skew, TOLERANCE);
                });
                (ok, check)
            });
        }
        Scheme::Intercom { body: b, sig } => {
            let v = Intercom::new(SECRET).unwrap();
            let o = Intercom::new(OTHER).unwrap();
            body = tamper.body(b);
            if let Some(sig) = sig {
                let fmt = Format { prefix: "sha1=", hex: true };
                let g = v.sign(b);
                genuine.push(fmt.decode(&g));
                insert(&mut h, "x-hub-signature", &sig.text(fmt, &g, &o.sign(b)));
            }
            for (name, value) in &extra {
                insert(&mut h, name, value);
            }
            result = v.verify(&h, &body, now).map(|ok| {
                let check: Box<dyn Fn(&Verified, &HeaderMap, &[u8])> = Box::new(|_, h, body| {
                    assert!(header_carries(h, "x-hub-signature", &hmac1(SECRET, body)), "Intercom bypass: {h:?}");
                });
                (ok, check)
            });
        }
        Scheme::Typeform { body: b, sig } => {
            let v = Typeform::new(SECRET).unwrap();
            let o = Typeform::new(OTHER).unwrap();
            body = tamper.body(b);
            if let Some(sig) = sig {
                let fmt = Format { prefix: "sha256=", hex: false };
                let g = v.sign(b);
                genuine.push(fmt.decode(&g));
                insert(&mut h, "typeform-signature", &sig.text(fmt, &g, &o.sign(b)));
            }
            for (name, value) in &extra {
                insert(&mut h, name, value);
            }
            result = v.verify(&h, &body, now).map(|ok| {
                let check: Box<dyn Fn(&Verified, &HeaderMap, &[u8])> = Box::new(|_, h, body| {
                    assert!(header_carries(h, "typeform-signature", &hmac256(SECRET, &[body])), "Typeform bypass: {h:?}");
                });
                (ok, check)
            });
        }
        Scheme::Mailgun { body: mb, content_type } => {
            let v = Mailgun::builder().secret(SECRET).tolerance(Duration::from_secs(TOLERANCE)).build().unwrap();
            let o = Mailgun::new(OTHER).unwrap();
            let signed = match mb {
                MailgunBody::Signed { json, ts, numeric, token, sig, event } => {
                    let text = String::from_utf8_lossy(&ts.text()).into_owned();
                    let t = tamper.time(ts_value(text.as_bytes()));
                    let fmt = Format { prefix: "", hex: true };
                    let g = v.sign(t, token);
                    genuine.push(fmt.decode(&g));
                    let s = String::from_utf8_lossy(&sig.text(fmt, &g, &o.sign(t, token))).into_owned();
                    if *json {
                        let ts_json = if *numeric { text.clone() } else { serde_json_string(&text) };
                        let event = event.as_deref().map(serde_json_string).unwrap_or_else(|| "null".into());
                        format!(
                            r#"{{"signature":{{"timestamp":{ts_json},"token":{},"signature":{}}},"event-data":{{"event":{event}}}}}"#,
                            serde_json_string(token),
                            serde_json_string(&s)
                        )
                        .into_bytes()
                    } else {
                        let mut pairs = vec![
                            ("timestamp".to_owned(), text.clone()),
                            ("token".to_owned(), token.clone()),
                            ("signature".to_owned(), s),
                        ];
                        if let Some(e) = event {
                            pairs.push(("event".to_owned(), e.clone()));
                        }
                        form_encode(&pairs)
                    }
                }
                MailgunBody::Raw(raw) => raw.clone(),
            };
            body = tamper.body(&signed);
            if let Some(ct) = content_type {
                insert(&mut h, "content-type", ct);
            }
            for (name, value) in &extra {
                insert(&mut h, name, value);
            }
            result = v.verify(&h, &body, now).map(|ok| {
                let check: Box<dyn Fn(&Verified, &HeaderMap, &[u8])> = Box::new(move |v, _, body| {
                    let token = v.id.as_deref().expect("the token is the id");
                    let t = v.timestamp.expect("signed").to_string();
                    let mac = hmac256(SECRET, &[t.as_bytes(), token.as_bytes()]);
                    assert!(common::carries(body, &mac), "Mailgun bypass: {:?}", String::from_utf8_lossy(body));
                    fresh(v, skew, TOLERANCE);
                });
                (ok, check)
            });
        }
        Scheme::GitLab { token, event, uuid, body: b } => {
            let v = GitLab::builder().token(SECRET).token("second-token-for-rotation").build().unwrap();
            body = b.clone();
            if let Some(token) = token {
                let text: Vec<u8> = match token {
                    Token::Genuine => {
                        let signed = v.sign_headers("Push Hook", "uuid").unwrap();
                        signed.get("x-gitlab-token").unwrap().as_bytes().to_vec()
                    }
                    Token::Padded => format!(" {SECRET}").into_bytes(),
                    Token::Other => OTHER.as_bytes().to_vec(),
                    Token::Prefix(n) => SECRET.as_bytes()[..usize::from(*n) % SECRET.len()].to_vec(),
                    Token::Raw(raw) => raw.clone(),
                };
                insert(&mut h, "x-gitlab-token", &text);
            }
            if let Some(e) = event {
                insert(&mut h, "x-gitlab-event", e);
            }
            if let Some(u) = uuid {
                insert(&mut h, "x-gitlab-event-uuid", u);
            }
            for (name, value) in &extra {
                insert(&mut h, name, value);
            }
            result = v.verify(&h, &body, now).map(|ok| {
                let check: Box<dyn Fn(&Verified, &HeaderMap, &[u8])> = Box::new(|_, h, _| {
                    let t = h.get("x-gitlab-token").map(|v| v.as_bytes());
                    assert!(
                        t == Some(SECRET.as_bytes()) || t == Some(b"second-token-for-rotation"),
                        "GitLab accepted another token: {h:?}"
                    );
                });
                (ok, check)
            });
        }
        Scheme::Postmark { auth, body: b } => {
            let v = Postmark::new(USER, SECRET).unwrap();
            body = b.clone();
            genuine.push(format!("{USER}:{SECRET}").into_bytes());
            if let Some(auth) = auth {
                let text: Vec<u8> = match auth {
                    Auth::Genuine { lower, spaces } => {
                        let s = v.sign();
                        let s = if *lower { s.replacen("Basic", "basic", 1) } else { s };
                        let pad = " ".repeat(usize::from(spaces % 3));
                        format!("{pad}{s}{pad}").into_bytes()
                    }
                    Auth::OtherPassword => format!("Basic {}", b64(format!("{USER}:{OTHER}").as_bytes())).into_bytes(),
                    Auth::OtherUser => format!("Basic {}", b64(format!("x{USER}:{SECRET}").as_bytes())).into_bytes(),
                    Auth::NoColon => format!("Basic {}", b64(format!("{USER}{SECRET}").as_bytes())).into_bytes(),
                    Auth::Bearer => format!("Bearer {}", b64(format!("{USER}:{SECRET}").as_bytes())).into_bytes(),
                    Auth::Raw(raw) => raw.clone(),
                    Auth::RawCredentials(raw) => format!("Basic {}", b64(raw)).into_bytes(),
                };
                insert(&mut h, "authorization", &text);
            }
            for (name, value) in &extra {
                insert(&mut h, name, value);
            }
            result = v.verify(&h, &body, now).map(|ok| {
                let check: Box<dyn Fn(&Verified, &HeaderMap, &[u8])> = Box::new(|_, h, _| {
                    let value = trimmed_header(h, "authorization").expect("accepted, so authorized");
                    let (scheme, encoded) = value.split_once(' ').expect("Basic <base64>");
                    assert!(scheme.eq_ignore_ascii_case("basic"), "{value}");
                    let decoded = B64.decode(encoded.trim()).expect("base64");
                    assert_eq!(decoded, format!("{USER}:{SECRET}").as_bytes(), "Postmark accepted other credentials");
                });
                (ok, check)
            });
        }
    }

    let genuine: Vec<&[u8]> = genuine.iter().map(Vec::as_slice).collect();
    match result {
        Ok((verified, check)) => check(&verified, &h, &body),
        Err(err) => common::check_refusal(&err, &genuine, &[]),
    }
});
