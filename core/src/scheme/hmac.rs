//! A configurable HMAC scheme, for providers without a dedicated type.
//!
//! Most webhook senders sign the same way with small variations: which
//! digest (SHA-1, SHA-256, SHA-512), where the signature is (a header, with
//! or without a prefix such as `sha256=`, or a field of a JSON body), hex or
//! base64, and what is signed: the body, or a template of the timestamp, the
//! URL the provider called, other headers or body fields and the body.
//! Describe those with [`GenericHmac::builder`] and the crypto,
//! constant-time comparison, rotation and replay window come for free.
//! Every name is owned: a verifier can be configured from a file or a
//! database at run time.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use webhooks_core::{Verifier, VerifyError, scheme::{GenericHmac, SignatureEncoding}};
//!
//! // A provider sending `X-Acme-Signature: sha256=<hex>` over `{ts}.{body}`,
//! // with `X-Acme-Timestamp`, `X-Acme-Delivery` and `X-Acme-Event`.
//! let acme = GenericHmac::builder("acme", "x-acme-signature")
//!     .secret("acme-signing-secret")
//!     .prefix("sha256=")
//!     .encoding(SignatureEncoding::Hex)
//!     .signed_timestamp("x-acme-timestamp", ".")
//!     .tolerance(Duration::from_secs(120))
//!     .id_header("x-acme-delivery")
//!     .event_type_header("x-acme-event")
//!     .build()?;
//!
//! let mut headers = acme.sign_headers(1_700_000_000, b"{}")?;
//! headers.insert("x-acme-delivery", "d-1".parse()?);
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_030);
//! let verified = acme.verify(&headers, b"{}", now)?;
//! assert_eq!((verified.scheme, verified.id.as_deref()), ("acme", Some("d-1")));
//!
//! headers.remove("x-acme-signature");
//! assert_eq!(
//!     acme.verify(&headers, b"{}", now),
//!     Err(VerifyError::MissingHeader("x-acme-signature"))
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A provider that signs the URL it called, with SHA-512 in base64, and
//! its millisecond timestamp in a header:
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use webhooks_core::{PublicUrl, RequestHead, Verifier};
//! use webhooks_core::scheme::{GenericHmac, HmacAlgorithm, SignatureEncoding, TimestampUnit};
//!
//! let globex = GenericHmac::builder(String::from("globex"), String::from("x-globex-signature"))
//!     .secret("globex-secret")
//!     .algorithm(HmacAlgorithm::Sha512)
//!     .encoding(SignatureEncoding::Base64)
//!     .timestamp_header("x-globex-time", TimestampUnit::Milliseconds)
//!     .signed_content("{timestamp}\n{url}\n{body}")?
//!     .public_url(PublicUrl::base("https://hooks.example.com")?)
//!     .build()?;
//!
//! let url = "https://hooks.example.com/globex?tenant=7";
//! let headers = globex.sign_headers_for(url, 1_700_000_000_000, b"{}")?;
//! let head = RequestHead::from_path_and_query("/globex?tenant=7", &headers);
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_001);
//! assert!(globex.verify_head(head, b"{}", now).is_ok());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::time::{Duration, SystemTime};

use ::hmac::{KeyInit, Mac};
use http::{HeaderMap, HeaderName, HeaderValue};

use super::provider::{
    HmacSha1, HmacSha512, MAX_MAC, decode_base64_into, decode_hex_into, intern, json_object,
    json_text,
};
use super::{
    DEFAULT_TOLERANCE, HmacSha256, SecretList, Secrets, check_timestamp, decimal, encode_base64,
    encode_hex, header, optional_header, parse_timestamp,
};
use crate::{
    ConfigError, Identity, MatchedKey, PublicUrl, RequestHead, Verified, Verifier, VerifyError,
};

/// How the signature bytes are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SignatureEncoding {
    /// Hex digits, either case (written lowercase by [`GenericHmac::sign`]).
    #[default]
    Hex,
    /// Standard padded base64.
    Base64,
}

/// The HMAC's hash function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum HmacAlgorithm {
    /// HMAC-SHA1 (20-byte MAC): older providers (Twilio, Mandrill, Intercom).
    Sha1,
    /// HMAC-SHA256 (32-byte MAC), what most providers use.
    #[default]
    Sha256,
    /// HMAC-SHA512 (64-byte MAC).
    Sha512,
}

impl HmacAlgorithm {
    fn mac_len(self) -> usize {
        match self {
            Self::Sha1 => 20,
            Self::Sha256 => 32,
            Self::Sha512 => 64,
        }
    }
}

/// The unit of a signed timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TimestampUnit {
    /// Unix seconds.
    #[default]
    Seconds,
    /// Unix milliseconds (HubSpot, Linear).
    Milliseconds,
}

/// The secrets keyed for the configured algorithm.
#[derive(Clone)]
enum Keys {
    Sha1(Secrets<HmacSha1>),
    Sha256(Secrets<HmacSha256>),
    Sha512(Secrets<HmacSha512>),
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sha1(s) => fmt::Debug::fmt(s, f),
            Self::Sha256(s) => fmt::Debug::fmt(s, f),
            Self::Sha512(s) => fmt::Debug::fmt(s, f),
        }
    }
}

/// A header or a top-level field of a JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Place {
    Header(Named),
    Json(&'static str),
}

impl Place {
    fn shown(&self) -> &'static str {
        match self {
            Self::Header(n) => n.shown,
            Self::Json(field) => field,
        }
    }
}

/// One piece of the signed content.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(Box<str>),
    Body,
    Timestamp,
    Url,
    Value(Place),
}

/// A configured header name, parsed once, and its interned text for errors.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Named {
    name: HeaderName,
    shown: &'static str,
}

impl Named {
    fn parse(name: &str) -> Result<Self, ConfigError> {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ConfigError::Setting("invalid header name"))?;
        let shown = intern(name.as_str());
        Ok(Self { name, shown })
    }
}

/// An HMAC verifier described by configuration.
///
/// What it checks, in order:
///
/// 1. the signature (header or JSON field) is present (`400` otherwise),
///    starts with the configured prefix and decodes to a MAC of the
///    algorithm's length (`400` otherwise);
/// 2. with a timestamp ([`timestamp_header`](GenericHmacBuilder::timestamp_header),
///    [`timestamp_json_field`](GenericHmacBuilder::timestamp_json_field),
///    [`signed_timestamp`](GenericHmacBuilder::signed_timestamp)): it is
///    present and integer (`400` otherwise) and within the tolerance either
///    side of the receiver's clock (`401` otherwise);
/// 3. the MAC of the [signed content](GenericHmacBuilder::signed_content)
///    matches one of the secrets, compared in constant time (`401` otherwise).
///
/// One signature per request; providers that send a list of signatures
/// need a dedicated scheme. `Debug` shows the configuration and how many
/// secrets there are, never a secret.
#[derive(Clone)]
pub struct GenericHmac {
    scheme: &'static str,
    keys: Keys,
    algorithm: HmacAlgorithm,
    signature: Place,
    prefix: String,
    encoding: SignatureEncoding,
    content: Vec<Part>,
    template: String,
    timestamp: Option<(Place, TimestampUnit)>,
    tolerance: Duration,
    public_url: Option<PublicUrl>,
    /// Whether any place is a JSON field (the body is parsed only then).
    reads_json: bool,
    id: Option<Named>,
    event_type: Option<Named>,
}

debug_fields!(
    GenericHmac: scheme, keys, algorithm, signature, prefix, encoding, template,
    timestamp, tolerance, public_url, id, event_type
);

/// What one request offers the signed content.
struct Request<'r> {
    headers: &'r HeaderMap,
    body: &'r [u8],
    timestamp: &'r [u8],
    url: &'r str,
    json: Option<&'r serde_json::Map<String, serde_json::Value>>,
}

impl GenericHmac {
    /// A builder for a scheme named `scheme` (reported in [`Verified::scheme`])
    /// whose signature is in the header `signature_header` (see
    /// [`signature_json_field`](GenericHmacBuilder::signature_json_field)
    /// for one in the body).
    pub fn builder(
        scheme: impl Into<String>,
        signature_header: impl Into<String>,
    ) -> GenericHmacBuilder {
        GenericHmacBuilder {
            scheme: scheme.into(),
            signature_header: signature_header.into(),
            signature_field: None,
            secrets: Vec::new(),
            algorithm: HmacAlgorithm::default(),
            prefix: String::new(),
            encoding: SignatureEncoding::default(),
            content_prefix: String::new(),
            template: None,
            timestamp: None,
            separator: None,
            tolerance: None,
            public_url: None,
            id_header: None,
            event_type_header: None,
        }
    }

    /// The scheme's name.
    #[must_use]
    pub fn scheme(&self) -> &'static str {
        self.scheme
    }

    /// The signature value the provider would send (with the prefix),
    /// signed with the first secret, for content without a URL or other
    /// headers and fields. `timestamp` is used only when one is signed, as
    /// is (in the configured unit).
    #[must_use]
    pub fn sign(&self, timestamp: u64, body: &[u8]) -> String {
        self.sign_for("", timestamp, body)
    }

    /// [`sign`](Self::sign) for a request to `url`.
    #[must_use]
    pub fn sign_for(&self, url: &str, timestamp: u64, body: &[u8]) -> String {
        let mut buf = [0u8; 20];
        let ts = decimal(timestamp, &mut buf);
        let empty = HeaderMap::new();
        let request = Request {
            headers: &empty,
            body,
            timestamp: ts,
            url,
            json: None,
        };
        self.signature_text(&request)
    }

    /// The signature value (prefix and encoded MAC) this verifier expects
    /// for `request`, signed with its first secret.
    fn signature_text(&self, request: &Request<'_>) -> String {
        let mac = match &self.keys {
            Keys::Sha1(s) => s.sign(|m| self.feed(m, request)).to_vec(),
            Keys::Sha256(s) => s.sign(|m| self.feed(m, request)).to_vec(),
            Keys::Sha512(s) => s.sign(|m| self.feed(m, request)).to_vec(),
        };
        let encoded = match self.encoding {
            SignatureEncoding::Hex => encode_hex(&mac),
            SignatureEncoding::Base64 => encode_base64(&mac),
        };
        format!("{}{encoded}", self.prefix)
    }

    /// The headers the provider would send: the signature (when it is in a
    /// header) and the timestamp (when it is in one). Add the id and event
    /// type headers yourself.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when the configured prefix cannot be in a header value.
    pub fn sign_headers(&self, timestamp: u64, body: &[u8]) -> Result<HeaderMap, ConfigError> {
        self.sign_headers_for("", timestamp, body)
    }

    /// [`sign_headers`](Self::sign_headers) for a request to `url`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when the configured prefix cannot be in a header value.
    pub fn sign_headers_for(
        &self,
        url: &str,
        timestamp: u64,
        body: &[u8],
    ) -> Result<HeaderMap, ConfigError> {
        let mut headers = HeaderMap::new();
        if let Place::Header(named) = &self.signature {
            let value =
                HeaderValue::from_str(&self.sign_for(url, timestamp, body)).map_err(|_| {
                    ConfigError::Invalid {
                        what: "signature",
                        reason: "not a valid header value",
                    }
                })?;
            headers.insert(named.name.clone(), value);
        }
        if let Some((Place::Header(named), _)) = &self.timestamp {
            headers.insert(named.name.clone(), timestamp.into());
        }
        Ok(headers)
    }

    /// The headers for a test delivery (`testing::SignTest`): the id and
    /// event type headers when configured, the timestamp header (in the
    /// configured unit) and the signature over the configured content, which
    /// may use those headers and the body's JSON fields.
    ///
    /// A signature or timestamp in a JSON field is refused: the body would
    /// have to be rewritten.
    pub(crate) fn sign_test_headers(
        &self,
        url: &str,
        unix_seconds: u64,
        id: &str,
        event_type: Option<&str>,
        body: &[u8],
    ) -> Result<HeaderMap, ConfigError> {
        let value = |text: &str, what| {
            HeaderValue::from_str(text).map_err(|_| ConfigError::Invalid {
                what,
                reason: "not a valid header value",
            })
        };
        let mut headers = HeaderMap::new();
        if let Some(named) = &self.id {
            headers.insert(named.name.clone(), value(id, "delivery id")?);
        }
        if let (Some(named), Some(event_type)) = (&self.event_type, event_type) {
            headers.insert(named.name.clone(), value(event_type, "event type")?);
        }
        let timestamp = match &self.timestamp {
            None => String::new(),
            Some((Place::Json(_), _)) => {
                return Err(ConfigError::Setting(
                    "a timestamp in a JSON field: put it in the body and sign with sign_for",
                ));
            }
            Some((Place::Header(named), unit)) => {
                let stamp = match unit {
                    TimestampUnit::Seconds => unix_seconds,
                    TimestampUnit::Milliseconds => unix_seconds.saturating_mul(1000),
                }
                .to_string();
                headers.insert(named.name.clone(), value(&stamp, "timestamp")?);
                stamp
            }
        };
        let Place::Header(signature) = &self.signature else {
            return Err(ConfigError::Setting(
                "a signature in a JSON field: put it in the body and sign with sign_for",
            ));
        };
        let parsed = match self.reads_json {
            true => serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(body).ok(),
            false => None,
        };
        let request = Request {
            headers: &headers,
            body,
            timestamp: timestamp.as_bytes(),
            url,
            json: parsed.as_ref(),
        };
        let signed = value(&self.signature_text(&request), "signature")?;
        headers.insert(signature.name.clone(), signed);
        Ok(headers)
    }

    /// Writes the signed content into the MAC, piece by piece.
    fn feed<M: Mac>(&self, mac: &mut M, request: &Request<'_>) {
        for part in &self.content {
            match part {
                Part::Literal(text) => mac.update(text.as_bytes()),
                Part::Body => mac.update(request.body),
                Part::Timestamp => mac.update(request.timestamp),
                Part::Url => mac.update(request.url.as_bytes()),
                Part::Value(Place::Header(named)) => {
                    if let Some(v) = request.headers.get(&named.name) {
                        mac.update(v.as_bytes());
                    }
                }
                Part::Value(Place::Json(field)) => {
                    if let Some(v) = request.json.and_then(|j| j.get(*field)) {
                        match v {
                            serde_json::Value::String(s) => mac.update(s.as_bytes()),
                            other => mac.update(other.to_string().as_bytes()),
                        }
                    }
                }
            }
        }
    }

    fn decode(&self, value: &str, out: &mut [u8; MAX_MAC]) -> Result<usize, VerifyError> {
        let name = self.signature.shown();
        let encoded = value
            .trim()
            .strip_prefix(self.prefix.as_str())
            .ok_or(VerifyError::malformed(name, "unexpected signature prefix"))?;
        let len = match self.encoding {
            SignatureEncoding::Hex => decode_hex_into(encoded, out),
            SignatureEncoding::Base64 => decode_base64_into(encoded, out),
        };
        match len {
            Some(n) if n == self.algorithm.mac_len() => Ok(n),
            _ => Err(VerifyError::malformed(
                name,
                match self.encoding {
                    SignatureEncoding::Hex => "not hex of the MAC's length",
                    SignatureEncoding::Base64 => "not base64 of the MAC's length",
                },
            )),
        }
    }

    /// Reads a header or JSON field that must be present.
    fn read<'r>(
        place: &Place,
        headers: &'r HeaderMap,
        json: Option<&'r serde_json::Map<String, serde_json::Value>>,
    ) -> Result<std::borrow::Cow<'r, str>, VerifyError> {
        match place {
            Place::Header(named) => header(headers, &named.name, named.shown).map(Into::into),
            Place::Json(field) => {
                let value = json
                    .and_then(|j| j.get(*field))
                    .ok_or(VerifyError::MissingHeader(field))?;
                json_text(value, field).map(Into::into)
            }
        }
    }

    /// Verifies a request to `url` (the URL the provider called, used when
    /// the signed content has `{url}`).
    ///
    /// # Errors
    ///
    /// As [`Verifier::verify`].
    pub fn verify_url(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let parsed = match self.reads_json {
            true => Some(json_object(body, self.signature.shown())?),
            false => None,
        };
        let json = parsed.as_ref();
        let value = Self::read(&self.signature, headers, json)?;
        let mut signature = [0u8; MAX_MAC];
        let len = self.decode(&value, &mut signature)?;
        let signature = &signature[..len];
        let (timestamp, ts_text) = match &self.timestamp {
            Some((place, unit)) => {
                let raw = Self::read(place, headers, json)?;
                let raw = raw.trim().to_owned();
                let stamp = parse_timestamp(place.shown(), &raw)?;
                let seconds = match unit {
                    TimestampUnit::Seconds => stamp,
                    TimestampUnit::Milliseconds => stamp / 1000,
                };
                check_timestamp(seconds, now, self.tolerance)?;
                // Signed exactly as sent (trimmed), like Slack's and Svix's libraries.
                (Some(seconds), raw)
            }
            None => (None, String::new()),
        };
        let request = Request {
            headers,
            body,
            timestamp: ts_text.as_bytes(),
            url,
            json,
        };
        let index = match &self.keys {
            Keys::Sha1(s) => s.first_match(signature, |m| self.feed(m, &request)),
            Keys::Sha256(s) => s.first_match(signature, |m| self.feed(m, &request)),
            Keys::Sha512(s) => s.first_match(signature, |m| self.feed(m, &request)),
        }
        .ok_or(VerifyError::NoMatchingSignature)?;
        let optional = |named: &Option<Named>| match named {
            Some(n) => optional_header(headers, &n.name, n.shown).map(|v| v.map(str::to_owned)),
            None => Ok(None),
        };
        Ok(Verified {
            scheme: self.scheme,
            id: optional(&self.id)?,
            timestamp,
            event_type: optional(&self.event_type)?,
            matched_key: MatchedKey::Secret(index),
            scope: None,
            // The id header is not signed: deduplicate on the body (not on
            // the signed timestamp, which a sender's retry may change).
            identity: Identity::Content,
        })
    }
}

impl Verifier for GenericHmac {
    fn scheme(&self) -> &'static str {
        self.scheme
    }

    /// Verifies without the request line: a `{url}` in the signed content is
    /// then the [`PublicUrl`] alone, right only for [`PublicUrl::exact`]
    /// (the receive pipeline calls [`verify_head`](Verifier::verify_head)).
    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        self.verify_head(RequestHead::new("", headers), body, now)
    }

    fn verify_head(
        &self,
        head: RequestHead<'_>,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        match &self.public_url {
            Some(public) => self.verify_url(&head.url(public)?, head.header_map(), body, now),
            None => self.verify_url("", head.header_map(), body, now),
        }
    }

    /// The configured signature header, whatever its name.
    fn credential_headers(&self) -> Vec<HeaderName> {
        match &self.signature {
            Place::Header(named) => vec![named.name.clone()],
            Place::Json(_) => Vec::new(),
        }
    }
}

/// Builds a [`GenericHmac`] verifier.
///
/// Errors are kept and reported by [`build`](Self::build).
#[must_use]
pub struct GenericHmacBuilder {
    scheme: String,
    signature_header: String,
    signature_field: Option<String>,
    secrets: Vec<Vec<u8>>,
    algorithm: HmacAlgorithm,
    prefix: String,
    encoding: SignatureEncoding,
    content_prefix: String,
    template: Option<Vec<Part>>,
    timestamp: Option<(String, bool, TimestampUnit)>,
    separator: Option<String>,
    tolerance: Option<Duration>,
    public_url: Option<PublicUrl>,
    id_header: Option<String>,
    event_type_header: Option<String>,
}

impl fmt::Debug for GenericHmacBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GenericHmacBuilder")
            .field("scheme", &self.scheme)
            .field("signature_header", &self.signature_header)
            .field("secrets", &self.secrets.len())
            .finish_non_exhaustive()
    }
}

impl GenericHmacBuilder {
    /// Adds a secret, used as the bytes given (decode it first if your
    /// provider shows it in hex or base64 and keys the HMAC with the bytes).
    pub fn secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.secrets.push(secret.as_ref().to_vec());
        self
    }

    secrets_method!("Adds several secrets, in order.", AsRef<[u8]>);

    /// The hash function (SHA-256 by default).
    pub fn algorithm(mut self, algorithm: HmacAlgorithm) -> Self {
        self.algorithm = algorithm;
        self
    }

    /// The signature is the top-level string field `field` of a JSON body,
    /// not a header. The body is then not signed as such: describe what is
    /// with [`signed_content`](Self::signed_content) (`{json:…}` fields).
    pub fn signature_json_field(mut self, field: impl Into<String>) -> Self {
        self.signature_field = Some(field.into());
        self
    }

    /// A prefix the signature value starts with (`sha256=`); none by default.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How the signature is encoded (hex by default).
    pub fn encoding(mut self, encoding: SignatureEncoding) -> Self {
        self.encoding = encoding;
        self
    }

    /// Literal text signed before everything else (Slack's `v0:`); none by
    /// default. Only without [`signed_content`](Self::signed_content).
    pub fn content_prefix(mut self, content_prefix: impl Into<String>) -> Self {
        self.content_prefix = content_prefix.into();
        self
    }

    /// Signs the timestamp in `header` before the body, joined by `separator`:
    /// the content becomes `{timestamp}{separator}{body}`, and the timestamp
    /// (Unix seconds) must be within the [tolerance](Self::tolerance).
    pub fn signed_timestamp(
        mut self,
        header: impl Into<String>,
        separator: impl Into<String>,
    ) -> Self {
        self.timestamp = Some((header.into(), false, TimestampUnit::Seconds));
        self.separator = Some(separator.into());
        self
    }

    /// The timestamp is in `header`, in `unit`; it must be within the
    /// [tolerance](Self::tolerance). Sign it with `{timestamp}` in
    /// [`signed_content`](Self::signed_content).
    pub fn timestamp_header(mut self, header: impl Into<String>, unit: TimestampUnit) -> Self {
        self.timestamp = Some((header.into(), false, unit));
        self
    }

    /// The timestamp is the top-level field `field` of a JSON body (an
    /// integer or a string of digits), in `unit`.
    pub fn timestamp_json_field(mut self, field: impl Into<String>, unit: TimestampUnit) -> Self {
        self.timestamp = Some((field.into(), true, unit));
        self
    }

    /// What is signed, as a template: literal text and the placeholders
    /// `{body}` (the raw body), `{timestamp}` (as sent), `{url}` (the URL the
    /// provider called, see [`public_url`](Self::public_url)),
    /// `{header:NAME}` and `{json:FIELD}` (a top-level field of a JSON
    /// body); `{{` and `}}` are literal braces. The default is `{body}`
    /// (with [`signed_timestamp`](Self::signed_timestamp):
    /// `{timestamp}{separator}{body}`).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Setting`] for an unknown placeholder or an unmatched brace.
    pub fn signed_content(mut self, template: &str) -> Result<Self, ConfigError> {
        self.template = Some(parse_template(template)?);
        Ok(self)
    }

    /// How to rebuild the URL the provider called, for `{url}`.
    pub fn public_url(mut self, public_url: PublicUrl) -> Self {
        self.public_url = Some(public_url);
        self
    }

    tolerance_method!(
        ///
        /// Only with a timestamp.
    );

    /// The header carrying the delivery id ([`Verified::id`]).
    ///
    /// The signature does not cover it, so deliveries are deduplicated on
    /// the body's SHA-256 ([`Identity::Content`]), with or without this
    /// header: a captured delivery replayed under a fresh id (within the
    /// tolerance, or forever without a signed timestamp) is a duplicate. To
    /// deduplicate on this header instead, set
    /// `Receiver::builder(v).dedup_key(|verified, _| verified.id.clone())`.
    pub fn id_header(mut self, header: impl Into<String>) -> Self {
        self.id_header = Some(header.into());
        self
    }

    /// The header carrying the event type ([`Verified::event_type`]).
    pub fn event_type_header(mut self, header: impl Into<String>) -> Self {
        self.event_type_header = Some(header.into());
        self
    }

    /// The verifier.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Empty`] for an empty secret, [`ConfigError::NoKeys`]
    /// when none was added, or [`ConfigError::Setting`] for an invalid
    /// header name, an empty scheme name, a tolerance without a timestamp,
    /// `{timestamp}` without one, `{url}` without a public URL, or a
    /// content prefix with a template.
    pub fn build(self) -> Result<GenericHmac, ConfigError> {
        fn keys<M: Mac + KeyInit + Clone>(secrets: &[Vec<u8>]) -> Result<Secrets<M>, ConfigError> {
            let mut list = SecretList::<M>::default();
            for s in secrets {
                list.push(s);
            }
            list.finish()
        }
        let keys = match self.algorithm {
            HmacAlgorithm::Sha1 => Keys::Sha1(keys(&self.secrets)?),
            HmacAlgorithm::Sha256 => Keys::Sha256(keys(&self.secrets)?),
            HmacAlgorithm::Sha512 => Keys::Sha512(keys(&self.secrets)?),
        };
        if self.scheme.is_empty() {
            return Err(ConfigError::Setting("scheme name is empty"));
        }
        let signature = match &self.signature_field {
            Some(field) => Place::Json(json_field(field)?),
            None => Place::Header(Named::parse(&self.signature_header)?),
        };
        let timestamp = match &self.timestamp {
            Some((name, false, unit)) => Some((Place::Header(Named::parse(name)?), *unit)),
            Some((field, true, unit)) => Some((Place::Json(json_field(field)?), *unit)),
            None => None,
        };
        if self.tolerance.is_some() && timestamp.is_none() {
            return Err(ConfigError::Setting("tolerance needs a signed timestamp"));
        }
        let content = match (self.template, &self.separator) {
            (Some(_), _) if !self.content_prefix.is_empty() => {
                return Err(ConfigError::Setting(
                    "content_prefix and signed_content exclude each other",
                ));
            }
            (Some(parts), _) => parts,
            (None, separator) => {
                let mut parts = Vec::new();
                if !self.content_prefix.is_empty() {
                    parts.push(Part::Literal(self.content_prefix.into()));
                }
                if let Some(sep) = separator.as_ref().filter(|_| timestamp.is_some()) {
                    parts.push(Part::Timestamp);
                    parts.push(Part::Literal(sep.as_str().into()));
                }
                parts.push(Part::Body);
                parts
            }
        };
        if content.contains(&Part::Timestamp) && timestamp.is_none() {
            return Err(ConfigError::Setting("{timestamp} needs a timestamp source"));
        }
        if content.contains(&Part::Url) && self.public_url.is_none() {
            return Err(ConfigError::Setting("{url} needs a public_url"));
        }
        if matches!(signature, Place::Json(_)) && content.contains(&Part::Body) {
            return Err(ConfigError::Setting(
                "a signature inside the body cannot sign {body}",
            ));
        }
        let is_json = |p: &Place| matches!(p, Place::Json(_));
        let reads_json = is_json(&signature)
            || timestamp.as_ref().is_some_and(|(p, _)| is_json(p))
            || content
                .iter()
                .any(|p| matches!(p, Part::Value(Place::Json(_))));
        Ok(GenericHmac {
            scheme: intern(&self.scheme),
            keys,
            algorithm: self.algorithm,
            signature,
            prefix: self.prefix,
            encoding: self.encoding,
            template: render(&content),
            content,
            timestamp,
            tolerance: self.tolerance.unwrap_or(DEFAULT_TOLERANCE),
            public_url: self.public_url,
            reads_json,
            id: self.id_header.as_deref().map(Named::parse).transpose()?,
            event_type: self
                .event_type_header
                .as_deref()
                .map(Named::parse)
                .transpose()?,
        })
    }
}

fn json_field(field: &str) -> Result<&'static str, ConfigError> {
    if field.is_empty() {
        return Err(ConfigError::Setting("empty JSON field name"));
    }
    Ok(intern(field))
}

/// Parses a [`signed_content`](GenericHmacBuilder::signed_content) template.
fn parse_template(template: &str) -> Result<Vec<Part>, ConfigError> {
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        literal.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("{{") {
            literal.push('{');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("}}") {
            literal.push('}');
            rest = after;
        } else if tail.starts_with('}') {
            return Err(ConfigError::Setting("unmatched } in signed content"));
        } else {
            let end = tail
                .find('}')
                .ok_or(ConfigError::Setting("unclosed { in signed content"))?;
            if !literal.is_empty() {
                parts.push(Part::Literal(std::mem::take(&mut literal).into()));
            }
            let placeholder = &tail[1..end];
            parts.push(match placeholder {
                "body" => Part::Body,
                "timestamp" => Part::Timestamp,
                "url" => Part::Url,
                _ => match placeholder.split_once(':') {
                    Some(("header", name)) => Part::Value(Place::Header(Named::parse(name)?)),
                    Some(("json", field)) => Part::Value(Place::Json(json_field(field)?)),
                    _ => {
                        return Err(ConfigError::Setting(
                            "unknown placeholder in signed content",
                        ));
                    }
                },
            });
            rest = &tail[end + 1..];
        }
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        parts.push(Part::Literal(literal.into()));
    }
    Ok(parts)
}

/// The template back as text, for `Debug`.
fn render(parts: &[Part]) -> String {
    let mut out = String::new();
    for part in parts {
        match part {
            Part::Literal(text) => out.push_str(&text.replace('{', "{{").replace('}', "}}")),
            Part::Body => out.push_str("{body}"),
            Part::Timestamp => out.push_str("{timestamp}"),
            Part::Url => out.push_str("{url}"),
            Part::Value(Place::Header(n)) => out.push_str(&format!("{{header:{}}}", n.shown)),
            Part::Value(Place::Json(f)) => out.push_str(&format!("{{json:{f}}}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_parse_and_render() {
        let parts = parse_template("v0:{timestamp}:{url}{{x}}{header:X-A}{json:ts}{body}").unwrap();
        assert_eq!(
            render(&parts),
            "v0:{timestamp}:{url}{{x}}{header:x-a}{json:ts}{body}"
        );
        for bad in ["{nope}", "{body", "a}b", "{header:bad name}", "{json:}"] {
            assert!(parse_template(bad).is_err(), "{bad}");
        }
    }
}
