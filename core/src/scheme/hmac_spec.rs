//! A [`GenericHmac`] described by one line of text: for tools that take
//! their configuration as words (a command line, an environment variable, a
//! config file), such as the registry's `hmac` scheme
//! ([`SchemeOptions::hmac_spec`](super::registry::SchemeOptions::hmac_spec))
//! and the `webhooks` CLI's `--hmac-spec`.
//!
//! A spec is `key=value` entries separated by `;` (or by line breaks, for a
//! spec kept in a file). Each key is one [`GenericHmacBuilder`] setting;
//! the secrets are never part of a spec (give them to the builder).
//!
//! | key | builder | value | default |
//! |---|---|---|---|
//! | `name` | [`GenericHmac::builder`]'s scheme name ([`Verified::scheme`](crate::Verified::scheme)) | text | `hmac` |
//! | `header` | [`GenericHmac::builder`]'s signature header | a header name | one of `header`, `json-field` is required |
//! | `json-field` | [`signature_json_field`](GenericHmacBuilder::signature_json_field) | a top-level JSON field | |
//! | `algorithm` | [`algorithm`](GenericHmacBuilder::algorithm) | `sha1`, `sha256`, `sha512` | `sha256` |
//! | `encoding` | [`encoding`](GenericHmacBuilder::encoding) | `hex`, `base64` | `hex` |
//! | `prefix` | [`prefix`](GenericHmacBuilder::prefix) | text (`sha256=`) | none |
//! | `content` | [`signed_content`](GenericHmacBuilder::signed_content) | a template: `{body}`, `{timestamp}`, `{url}`, `{header:NAME}`, `{json:FIELD}`, `{{`, `}}` | `{body}` |
//! | `content-prefix` | [`content_prefix`](GenericHmacBuilder::content_prefix) (not with `content`) | text | none |
//! | `timestamp-header` | [`timestamp_header`](GenericHmacBuilder::timestamp_header) | a header name | no timestamp |
//! | `timestamp-json-field` | [`timestamp_json_field`](GenericHmacBuilder::timestamp_json_field) | a top-level JSON field | no timestamp |
//! | `timestamp-unit` | the unit of either | `s`, `ms` | `s` |
//! | `separator` | [`signed_timestamp`](GenericHmacBuilder::signed_timestamp) with `timestamp-header` (signs `{timestamp}SEP{body}`; not with `content`) | text | none |
//! | `tolerance` | [`tolerance`](GenericHmacBuilder::tolerance) (only with a timestamp) | whole seconds, `300` or `300s` | 300 s |
//! | `id-header` | [`id_header`](GenericHmacBuilder::id_header) | a header name | none |
//! | `event-type-header` | [`event_type_header`](GenericHmacBuilder::event_type_header) | a header name | none |
//!
//! Keys are case-insensitive, `_` may be written for `-`, and each is given
//! at most once. Whitespace around keys and values is ignored. A value is
//! taken up to the next unescaped `;` or line break; in it `\;` is a `;`,
//! `\\` a backslash, `\"` a quote and `\n`, `\r`, `\t` a line feed,
//! carriage return and tab. A value may instead be in double quotes
//! (`prefix="v1, "`): then `;` and whitespace are kept as they are, and the
//! same escapes apply. An empty value is refused (leave the key out).
//! [`Display`](std::fmt::Display) writes a spec back in this form, keys in
//! the table's order; parsing it gives the same spec.
//!
//! The URL a `{url}` signs is deployment, not format: give the builder its
//! [`PublicUrl`] (the registry takes it from
//! `SchemeOptions::public_url`).
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use webhooks_core::Verifier;
//! use webhooks_core::scheme::GenericHmacSpec;
//!
//! let spec: GenericHmacSpec = "name=acme; header=X-Acme-Signature; prefix=sha256=; \
//!     content={timestamp}.{body}; timestamp-header=X-Acme-Timestamp; id-header=X-Acme-Id"
//!     .parse()?;
//! assert_eq!(spec.name(), "acme");
//! assert!(spec.signs_timestamp());
//! let acme = spec.builder()?.secret("acme-signing-secret").build()?;
//!
//! let mut headers = acme.sign_headers(1_700_000_000, b"{}")?;
//! headers.insert("x-acme-id", "d-1".parse()?);
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_030);
//! let verified = acme.verify(&headers, b"{}", now)?;
//! assert_eq!((verified.scheme, verified.id.as_deref()), ("acme", Some("d-1")));
//!
//! // Written back, it parses to the same spec.
//! assert_eq!(spec.to_string().parse::<GenericHmacSpec>()?, spec);
//!
//! // Every mistake names the key.
//! let err = "header=X-Sig; algorithm=md5".parse::<GenericHmacSpec>().unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "hmac spec key `algorithm` is invalid: expected sha1, sha256 or sha512"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Through the [registry](super::registry), as the scheme `hmac`:
//! ```
//! use std::time::SystemTime;
//! use webhooks_core::scheme::GenericHmacSpec;
//! use webhooks_core::scheme::registry::{self, SchemeOptions};
//! use webhooks_core::testing::{SignTest, TestDelivery};
//!
//! let spec: GenericHmacSpec =
//!     "name=acme;header=X-Acme-Signature;prefix=sha256=;content={timestamp}.{body};\
//!      timestamp-header=X-Acme-Timestamp".parse()?;
//! let options = SchemeOptions::new().hmac_spec(spec);
//! let signer = registry::signer("hmac", "acme-secret", &options)?;
//! let verifier = registry::verifier("hmac", &["acme-secret"], &options)?;
//! let delivery = TestDelivery::new(r#"{"type":"order.paid"}"#);
//! let headers = signer.sign_test(&delivery)?;
//! let verified = verifier.verify(&headers, delivery.body(), SystemTime::now())?;
//! assert_eq!(verified.scheme, "acme");
//! let info = registry::describe("hmac", &options)?;
//! assert_eq!(info.signature_header, Some("x-acme-signature"));
//! assert!(info.signs_timestamp);
//! // Without a spec: a ConfigError saying so.
//! let err = registry::verifier("hmac", &["acme-secret"], &SchemeOptions::new()).err().unwrap();
//! assert!(err.to_string().contains("hmac_spec"), "{err}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use http::HeaderName;

use super::{GenericHmac, GenericHmacBuilder, HmacAlgorithm, SignatureEncoding, TimestampUnit};
use crate::{ConfigError, PublicUrl};

/// Where a value travels: a header, or a top-level field of a JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Location {
    Header(String),
    JsonField(String),
}

/// A [`GenericHmac`] configuration parsed from text (see the
/// [module](self) for the grammar): [`FromStr`] parses it, [`Display`](fmt::Display)
/// writes it back, [`builder`](Self::builder) turns it into a
/// [`GenericHmacBuilder`] to add the secrets to.
///
/// It holds no secret: `Debug` and `Display` show the whole configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenericHmacSpec {
    name: Option<String>,
    signature: Location,
    algorithm: Option<HmacAlgorithm>,
    encoding: Option<SignatureEncoding>,
    prefix: Option<String>,
    content: Option<String>,
    content_prefix: Option<String>,
    timestamp: Option<Location>,
    timestamp_unit: Option<TimestampUnit>,
    separator: Option<String>,
    tolerance: Option<Duration>,
    id_header: Option<String>,
    event_type_header: Option<String>,
}

/// The keys, in the order [`Display`](fmt::Display) writes them, with what
/// their errors call them.
const KEYS: [(&str, &str); 15] = [
    ("name", "hmac spec key `name`"),
    ("header", "hmac spec key `header`"),
    ("json-field", "hmac spec key `json-field`"),
    ("algorithm", "hmac spec key `algorithm`"),
    ("encoding", "hmac spec key `encoding`"),
    ("prefix", "hmac spec key `prefix`"),
    ("content", "hmac spec key `content`"),
    ("content-prefix", "hmac spec key `content-prefix`"),
    ("timestamp-header", "hmac spec key `timestamp-header`"),
    (
        "timestamp-json-field",
        "hmac spec key `timestamp-json-field`",
    ),
    ("timestamp-unit", "hmac spec key `timestamp-unit`"),
    ("separator", "hmac spec key `separator`"),
    ("tolerance", "hmac spec key `tolerance`"),
    ("id-header", "hmac spec key `id-header`"),
    ("event-type-header", "hmac spec key `event-type-header`"),
];

/// What an error about the spec as a whole is called.
const SPEC: &str = "hmac spec";

/// The error naming `key` (one of [`KEYS`]).
fn invalid(key: &str, reason: &'static str) -> ConfigError {
    let what = KEYS
        .iter()
        .find(|(k, _)| *k == key)
        .map_or(SPEC, |(_, what)| what);
    ConfigError::Invalid { what, reason }
}

/// `key` as written, normalised: lowercase, `_` as `-`.
fn normalise(key: &str) -> String {
    key.trim().to_ascii_lowercase().replace('_', "-")
}

/// Splits `text` into `(key, value)` entries, values unescaped.
fn entries(text: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        // The key: up to `=`, or an entry without a value.
        let mut key = String::new();
        let mut has_value = false;
        for c in chars.by_ref() {
            match c {
                '=' => {
                    has_value = true;
                    break;
                }
                ';' | '\n' => break,
                c => key.push(c),
            }
        }
        let key = normalise(&key);
        if !has_value {
            if !key.is_empty() {
                return Err(match KEYS.iter().any(|(k, _)| *k == key) {
                    true => invalid(&key, "no value (expected key=value)"),
                    false => ConfigError::Invalid {
                        what: SPEC,
                        reason: "an entry is not key=value",
                    },
                });
            }
            if chars.peek().is_none() {
                return Ok(out);
            }
            continue;
        }
        while chars.next_if(|c| *c != '\n' && c.is_whitespace()).is_some() {}
        let value = match chars.next_if_eq(&'"') {
            Some(_) => {
                let mut raw = String::new();
                let mut closed = false;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => {
                            closed = true;
                            break;
                        }
                        '\\' => {
                            raw.push(c);
                            raw.extend(chars.next());
                        }
                        c => raw.push(c),
                    }
                }
                if !closed {
                    return Err(invalid(&key, "unterminated quoted value"));
                }
                for c in chars.by_ref() {
                    match c {
                        ';' | '\n' => break,
                        c if c.is_whitespace() => {}
                        _ => return Err(invalid(&key, "text after the closing quote")),
                    }
                }
                unescape(&key, &raw)?
            }
            None => {
                let mut raw = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        ';' | '\n' => break,
                        '\\' => {
                            raw.push(c);
                            raw.extend(chars.next());
                        }
                        c => raw.push(c),
                    }
                }
                unescape(&key, raw.trim())?
            }
        };
        out.push((key, value));
    }
}

/// `raw` with its escapes replaced.
fn unescape(key: &str, raw: &str) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next() {
            Some(c @ ('\\' | ';' | '"')) => c,
            Some('n') => '\n',
            Some('r') => '\r',
            Some('t') => '\t',
            _ => {
                return Err(invalid(
                    key,
                    "unknown escape (use \\\\, \\;, \\\", \\n, \\r or \\t)",
                ));
            }
        });
    }
    Ok(out)
}

/// `value` written for a spec: escaped, quoted when its ends are whitespace.
fn quote(value: &str) -> String {
    let quoted = value.starts_with(char::is_whitespace) || value.ends_with(char::is_whitespace);
    let mut out = String::with_capacity(value.len() + 2);
    if quoted {
        out.push('"');
    }
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            ';' if !quoted => out.push_str("\\;"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    if quoted {
        out.push('"');
    }
    out
}

fn header_name(key: &str, value: String) -> Result<String, ConfigError> {
    match HeaderName::from_bytes(value.as_bytes()) {
        Ok(_) => Ok(value),
        Err(_) => Err(invalid(key, "not a header name")),
    }
}

/// The placeholders of a `signed_content` template (`body`, `url`,
/// `header:x`…), `{{` and `}}` skipped.
fn placeholders(template: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            rest = &tail[2..];
        } else if let (true, Some(end)) = (tail.starts_with('{'), tail.find('}')) {
            out.push(&tail[1..end]);
            rest = &tail[end + 1..];
        } else {
            rest = &tail[1..];
        }
    }
    out
}

impl FromStr for GenericHmacSpec {
    type Err = ConfigError;

    /// Parses a spec (see the [module](self)).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] naming the key (`hmac spec key `header``)
    /// for a bad value, a key given twice or keys that exclude each other,
    /// and naming the spec for an unknown key, an entry that is not
    /// `key=value` or no signature location.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut given: [Option<String>; KEYS.len()] = Default::default();
        for (key, value) in entries(text)? {
            let Some(slot) = KEYS.iter().position(|(k, _)| *k == key) else {
                return Err(ConfigError::Invalid {
                    what: SPEC,
                    reason: "unknown key; the keys are name, header, json-field, algorithm, \
                             encoding, prefix, content, content-prefix, timestamp-header, \
                             timestamp-json-field, timestamp-unit, separator, tolerance, \
                             id-header, event-type-header",
                });
            };
            if given[slot].is_some() {
                return Err(invalid(&key, "given twice"));
            }
            if value.is_empty() {
                return Err(invalid(&key, "empty value (leave the key out)"));
            }
            given[slot] = Some(value);
        }
        let [
            name,
            header,
            json_field,
            algorithm,
            encoding,
            prefix,
            content,
            content_prefix,
            timestamp_header,
            timestamp_json_field,
            timestamp_unit,
            separator,
            tolerance,
            id_header,
            event_type_header,
        ] = given;
        let signature = match (header, json_field) {
            (Some(header), None) => Location::Header(header_name("header", header)?),
            (None, Some(field)) => Location::JsonField(field),
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "json-field",
                    "excludes header (the signature is in one place)",
                ));
            }
            (None, None) => {
                return Err(ConfigError::Invalid {
                    what: SPEC,
                    reason: "no signature location: give header=NAME (or json-field=FIELD)",
                });
            }
        };
        if prefix
            .as_deref()
            .is_some_and(|p| p.starts_with(char::is_whitespace))
            && matches!(signature, Location::Header(_))
        {
            return Err(invalid(
                "prefix",
                "starts with whitespace, which a header value loses",
            ));
        }
        let algorithm = algorithm
            .map(|a| match a.to_ascii_lowercase().replace('-', "").as_str() {
                "sha1" => Ok(HmacAlgorithm::Sha1),
                "sha256" => Ok(HmacAlgorithm::Sha256),
                "sha512" => Ok(HmacAlgorithm::Sha512),
                _ => Err(invalid("algorithm", "expected sha1, sha256 or sha512")),
            })
            .transpose()?;
        let encoding = encoding
            .map(|e| match e.to_ascii_lowercase().as_str() {
                "hex" => Ok(SignatureEncoding::Hex),
                "base64" => Ok(SignatureEncoding::Base64),
                _ => Err(invalid("encoding", "expected hex or base64")),
            })
            .transpose()?;
        if let Some(template) = &content {
            if content_prefix.is_some() {
                return Err(invalid(
                    "content-prefix",
                    "excludes content (write the prefix in the content template)",
                ));
            }
            if let Err(e) = GenericHmac::builder("spec", "x-spec").signed_content(template) {
                return Err(invalid(
                    "content",
                    match e {
                        ConfigError::Setting(reason) => reason,
                        _ => "not a signed content template",
                    },
                ));
            }
        }
        let timestamp = match (timestamp_header, timestamp_json_field) {
            (Some(header), None) => {
                Some(Location::Header(header_name("timestamp-header", header)?))
            }
            (None, Some(field)) => Some(Location::JsonField(field)),
            (None, None) => None,
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "timestamp-json-field",
                    "excludes timestamp-header (the timestamp is in one place)",
                ));
            }
        };
        let timestamp_unit = timestamp_unit
            .map(|u| match u.to_ascii_lowercase().as_str() {
                "s" | "seconds" => Ok(TimestampUnit::Seconds),
                "ms" | "milliseconds" => Ok(TimestampUnit::Milliseconds),
                _ => Err(invalid("timestamp-unit", "expected s or ms")),
            })
            .transpose()?;
        if timestamp_unit.is_some() && timestamp.is_none() {
            return Err(invalid(
                "timestamp-unit",
                "needs timestamp-header or timestamp-json-field",
            ));
        }
        if separator.is_some() {
            if !matches!(timestamp, Some(Location::Header(_))) {
                return Err(invalid("separator", "needs timestamp-header"));
            }
            if content.is_some() {
                return Err(invalid(
                    "separator",
                    "excludes content (write the separator in the content template)",
                ));
            }
            if timestamp_unit == Some(TimestampUnit::Milliseconds) {
                return Err(invalid(
                    "separator",
                    "signs a timestamp in seconds: for ms write content={timestamp}SEP{body}",
                ));
            }
        }
        let tolerance = tolerance
            .map(|t| {
                let digits = t.strip_suffix('s').unwrap_or(&t);
                digits
                    .parse::<u64>()
                    .map(Duration::from_secs)
                    .map_err(|_| invalid("tolerance", "expected whole seconds (300 or 300s)"))
            })
            .transpose()?;
        if tolerance.is_some() && timestamp.is_none() {
            return Err(invalid(
                "tolerance",
                "needs timestamp-header or timestamp-json-field",
            ));
        }
        let spec = Self {
            name,
            signature,
            algorithm,
            encoding,
            prefix,
            content,
            content_prefix,
            timestamp,
            timestamp_unit,
            separator,
            tolerance,
            id_header: id_header.map(|h| header_name("id-header", h)).transpose()?,
            event_type_header: event_type_header
                .map(|h| header_name("event-type-header", h))
                .transpose()?,
        };
        // What only the whole configuration tells ({timestamp} without a
        // timestamp, {body} signed by a signature inside it): the builder's
        // own checks, named after the key at fault.
        let probe = spec
            .builder()?
            .secret("spec-probe")
            .public_url(PublicUrl::exact("https://example.com/")?)
            .build();
        match probe {
            Ok(_) => Ok(spec),
            Err(ConfigError::Setting(reason)) => Err(match &spec.signature {
                Location::JsonField(_) if reason.contains("signature inside the body") => {
                    invalid("json-field", reason)
                }
                _ if spec.content.is_some() => invalid("content", reason),
                _ => invalid("", reason),
            }),
            Err(other) => Err(other),
        }
    }
}

impl fmt::Display for GenericHmacSpec {
    /// The spec in the [module](self)'s grammar, keys in its table's order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut entry = |f: &mut fmt::Formatter<'_>, key: &str, value: &str| {
            let sep = if first { "" } else { ";" };
            first = false;
            write!(f, "{sep}{key}={}", quote(value))
        };
        if let Some(name) = &self.name {
            entry(f, "name", name)?;
        }
        match &self.signature {
            Location::Header(h) => entry(f, "header", h)?,
            Location::JsonField(j) => entry(f, "json-field", j)?,
        }
        if let Some(algorithm) = self.algorithm {
            entry(
                f,
                "algorithm",
                match algorithm {
                    HmacAlgorithm::Sha1 => "sha1",
                    HmacAlgorithm::Sha256 => "sha256",
                    HmacAlgorithm::Sha512 => "sha512",
                },
            )?;
        }
        if let Some(encoding) = self.encoding {
            entry(
                f,
                "encoding",
                match encoding {
                    SignatureEncoding::Hex => "hex",
                    SignatureEncoding::Base64 => "base64",
                },
            )?;
        }
        for (key, value) in [
            ("prefix", &self.prefix),
            ("content", &self.content),
            ("content-prefix", &self.content_prefix),
        ] {
            if let Some(value) = value {
                entry(f, key, value)?;
            }
        }
        match &self.timestamp {
            Some(Location::Header(h)) => entry(f, "timestamp-header", h)?,
            Some(Location::JsonField(j)) => entry(f, "timestamp-json-field", j)?,
            None => {}
        }
        if let Some(unit) = self.timestamp_unit {
            entry(
                f,
                "timestamp-unit",
                match unit {
                    TimestampUnit::Seconds => "s",
                    TimestampUnit::Milliseconds => "ms",
                },
            )?;
        }
        if let Some(separator) = &self.separator {
            entry(f, "separator", separator)?;
        }
        if let Some(tolerance) = self.tolerance {
            entry(f, "tolerance", &tolerance.as_secs().to_string())?;
        }
        for (key, value) in [
            ("id-header", &self.id_header),
            ("event-type-header", &self.event_type_header),
        ] {
            if let Some(value) = value {
                entry(f, key, value)?;
            }
        }
        Ok(())
    }
}

impl GenericHmacSpec {
    /// The scheme's name ([`Verified::scheme`](crate::Verified::scheme)):
    /// `name=`, or `hmac`.
    #[must_use]
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("hmac")
    }

    /// The signature header, as written (`None` for a signature in a JSON
    /// field).
    #[must_use]
    pub fn signature_header(&self) -> Option<&str> {
        match &self.signature {
            Location::Header(h) => Some(h),
            Location::JsonField(_) => None,
        }
    }

    /// The JSON field holding the signature, when it is in the body.
    #[must_use]
    pub fn signature_json_field(&self) -> Option<&str> {
        match &self.signature {
            Location::JsonField(j) => Some(j),
            Location::Header(_) => None,
        }
    }

    /// Whether a timestamp is read and checked against the replay window.
    #[must_use]
    pub fn signs_timestamp(&self) -> bool {
        self.timestamp.is_some()
    }

    /// Whether the timestamp is in a header (a test signer can send it).
    #[must_use]
    pub fn timestamp_header(&self) -> Option<&str> {
        match &self.timestamp {
            Some(Location::Header(h)) => Some(h),
            _ => None,
        }
    }

    /// Whether the signed content has `{url}` (the verifier then needs a
    /// [`PublicUrl`]).
    #[must_use]
    pub fn signs_url(&self) -> bool {
        self.content
            .as_deref()
            .is_some_and(|c| placeholders(c).contains(&"url"))
    }

    /// Whether the signed content has the raw body (`{body}`, the default).
    #[must_use]
    pub fn signs_body(&self) -> bool {
        match &self.content {
            Some(c) => placeholders(c).contains(&"body"),
            None => true,
        }
    }

    /// The replay window given with `tolerance=`.
    #[must_use]
    pub fn tolerance(&self) -> Option<Duration> {
        self.tolerance
    }

    /// A builder configured as the spec says, to add the secrets (and for
    /// `{url}` a [`PublicUrl`]) to.
    ///
    /// # Errors
    ///
    /// None for a parsed spec (its template was checked when parsed); the
    /// `Result` is the builder's own
    /// [`signed_content`](GenericHmacBuilder::signed_content)'s.
    pub fn builder(&self) -> Result<GenericHmacBuilder, ConfigError> {
        let header = self.signature_header().unwrap_or("x-signature");
        let mut b = GenericHmac::builder(self.name(), header);
        if let Some(template) = &self.content {
            b = b
                .signed_content(template)
                .map_err(|_| invalid("content", "not a signed content template"))?;
        }
        if let Location::JsonField(field) = &self.signature {
            b = b.signature_json_field(field.as_str());
        }
        if let Some(algorithm) = self.algorithm {
            b = b.algorithm(algorithm);
        }
        if let Some(encoding) = self.encoding {
            b = b.encoding(encoding);
        }
        if let Some(prefix) = &self.prefix {
            b = b.prefix(prefix.as_str());
        }
        if let Some(content_prefix) = &self.content_prefix {
            b = b.content_prefix(content_prefix.as_str());
        }
        let unit = self.timestamp_unit.unwrap_or_default();
        match (&self.timestamp, &self.separator) {
            (Some(Location::Header(h)), Some(sep)) => {
                b = b.signed_timestamp(h.as_str(), sep.as_str());
            }
            (Some(Location::Header(h)), None) => b = b.timestamp_header(h.as_str(), unit),
            (Some(Location::JsonField(j)), _) => b = b.timestamp_json_field(j.as_str(), unit),
            (None, _) => {}
        }
        if let Some(tolerance) = self.tolerance {
            b = b.tolerance(tolerance);
        }
        if let Some(h) = &self.id_header {
            b = b.id_header(h.as_str());
        }
        if let Some(h) = &self.event_type_header {
            b = b.event_type_header(h.as_str());
        }
        Ok(b)
    }
}

#[cfg(test)]
mod tests;
