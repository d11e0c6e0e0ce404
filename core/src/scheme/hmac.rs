//! A configurable HMAC-SHA256 scheme, for providers without a dedicated type.
//!
//! Most webhook senders sign the same way with small variations: which header
//! carries the signature, whether it has a prefix (`sha256=`), hex or base64,
//! and whether a timestamp header is signed in front of the body. Describe
//! those with [`GenericHmac::builder`] and the crypto, constant-time
//! comparison, rotation and replay window come for free.
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

use std::time::{Duration, SystemTime};

use ::hmac::Mac as _;
use http::{HeaderMap, HeaderName};

use super::{
    DEFAULT_TOLERANCE, HmacSha256, SecretList, Secrets, check_timestamp, decimal, decode_base64_32,
    decode_hex, encode_base64, encode_hex, header, optional_header, parse_timestamp,
    signed_headers,
};
use crate::{ConfigError, Identity, MatchedKey, Verified, Verifier, VerifyError};

/// How the signature bytes are written in the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SignatureEncoding {
    /// 64 hex digits, either case (written lowercase by [`GenericHmac::sign`]).
    #[default]
    Hex,
    /// Standard padded base64 of the 32 bytes.
    Base64,
}

/// A timestamp header signed in front of the body.
#[derive(Debug, Clone)]
struct SignedTimestamp {
    header: &'static str,
    separator: String,
}

/// An HMAC-SHA256 verifier described by configuration.
///
/// What it checks, in order:
///
/// 1. the signature header is present (`400` otherwise), starts with the
///    configured prefix and decodes to 32 bytes (`400` otherwise);
/// 2. with [`signed_timestamp`](GenericHmacBuilder::signed_timestamp): the
///    timestamp header is present, integer Unix seconds, and within the
///    tolerance either side of the receiver's clock (`401` otherwise);
/// 3. the MAC of `{content_prefix}{timestamp}{separator}{body}` (or of
///    `{content_prefix}{body}` without a timestamp) matches one of the
///    secrets, compared in constant time (`401` otherwise).
///
/// One signature per header; providers that send a list of signatures, or
/// millisecond timestamps, need a dedicated scheme.
#[derive(Clone)]
pub struct GenericHmac {
    scheme: &'static str,
    secrets: Secrets,
    signature_header: &'static str,
    prefix: String,
    encoding: SignatureEncoding,
    content_prefix: String,
    timestamp: Option<SignedTimestamp>,
    tolerance: Duration,
    id_header: Option<&'static str>,
    event_type_header: Option<&'static str>,
    /// The configured names, parsed once at build (see [`header`]).
    names: HeaderNames,
}

/// [`GenericHmac`]'s header names, parsed, each with the name as configured
/// for errors.
#[derive(Clone)]
struct HeaderNames {
    signature: Named,
    /// Present exactly when a timestamp is signed.
    timestamp: Option<Named>,
    id: Option<Named>,
    event_type: Option<Named>,
}

#[derive(Clone)]
struct Named {
    name: HeaderName,
    shown: &'static str,
}

impl Named {
    fn parse(shown: &'static str) -> Result<Self, ConfigError> {
        let name = HeaderName::from_bytes(shown.as_bytes())
            .map_err(|_| ConfigError::Setting("invalid header name"))?;
        Ok(Self { name, shown })
    }
}

debug_fields!(
    GenericHmac: scheme, secrets, signature_header, prefix, encoding, content_prefix,
    timestamp, tolerance, id_header, event_type_header
);

impl GenericHmac {
    /// A builder for a scheme named `scheme` (reported in [`Verified::scheme`])
    /// whose signature is in `signature_header`.
    pub fn builder(scheme: &'static str, signature_header: &'static str) -> GenericHmacBuilder {
        GenericHmacBuilder {
            scheme,
            signature_header,
            secrets: SecretList::default(),
            prefix: String::new(),
            encoding: SignatureEncoding::default(),
            content_prefix: String::new(),
            timestamp: None,
            tolerance: None,
            id_header: None,
            event_type_header: None,
        }
    }

    /// The scheme's name.
    #[must_use]
    pub fn scheme(&self) -> &'static str {
        self.scheme
    }

    /// The signature header value the provider would send, signed with the
    /// first secret. `timestamp` is used only with a signed timestamp.
    #[must_use]
    pub fn sign(&self, timestamp: u64, body: &[u8]) -> String {
        let mut buf = [0u8; 20];
        let ts = decimal(timestamp, &mut buf);
        let mac = self.secrets.sign(|mac| self.feed(mac, ts, body));
        let encoded = match self.encoding {
            SignatureEncoding::Hex => encode_hex(&mac),
            SignatureEncoding::Base64 => encode_base64(&mac),
        };
        format!("{}{encoded}", self.prefix)
    }

    /// The headers the provider would send: the signature and, when one is
    /// signed, the timestamp. Add the id and event type headers yourself.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when the configured prefix cannot be in a header value.
    pub fn sign_headers(&self, timestamp: u64, body: &[u8]) -> Result<HeaderMap, ConfigError> {
        let signature = self.sign(timestamp, body);
        let mut headers = signed_headers([(self.signature_header, &signature, "signature")])?;
        if let Some(ts) = &self.timestamp {
            headers.insert(ts.header, timestamp.into());
        }
        Ok(headers)
    }

    /// Writes the signed content into the MAC, without concatenating.
    fn feed(&self, mac: &mut HmacSha256, timestamp: &[u8], body: &[u8]) {
        mac.update(self.content_prefix.as_bytes());
        if let Some(ts) = &self.timestamp {
            mac.update(timestamp);
            mac.update(ts.separator.as_bytes());
        }
        mac.update(body);
    }

    fn decode(&self, value: &str) -> Result<[u8; 32], VerifyError> {
        let name = self.signature_header;
        let encoded = value
            .trim()
            .strip_prefix(self.prefix.as_str())
            .ok_or(VerifyError::malformed(name, "unexpected signature prefix"))?;
        match self.encoding {
            SignatureEncoding::Hex => {
                decode_hex::<32>(encoded).ok_or(VerifyError::malformed(name, "not 64 hex digits"))
            }
            SignatureEncoding::Base64 => decode_base64_32(encoded)
                .ok_or(VerifyError::malformed(name, "not base64 of 32 bytes")),
        }
    }
}

impl Verifier for GenericHmac {
    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let names = &self.names;
        let value = header(headers, &names.signature.name, names.signature.shown)?;
        let signature = self.decode(value)?;
        let (timestamp, ts_text) = match &names.timestamp {
            Some(ts) => {
                let raw = header(headers, &ts.name, ts.shown)?;
                let timestamp = parse_timestamp(ts.shown, raw)?;
                check_timestamp(timestamp, now, self.tolerance)?;
                // Signed exactly as sent (trimmed), like Slack's and Svix's libraries.
                (Some(timestamp), raw.trim())
            }
            None => (None, ""),
        };
        let index = (self.secrets)
            .first_match(&signature, |mac| self.feed(mac, ts_text.as_bytes(), body))
            .ok_or(VerifyError::NoMatchingSignature)?;
        let optional = |named: &Option<Named>| match named {
            Some(n) => optional_header(headers, &n.name, n.shown).map(|v| v.map(str::to_owned)),
            None => Ok(None),
        };
        Ok(Verified {
            scheme: self.scheme,
            id: optional(&names.id)?,
            timestamp,
            event_type: optional(&names.event_type)?,
            matched_key: MatchedKey::Secret(index),
            scope: None,
            // The id header is not signed: deduplicate on the body (not on
            // the signed timestamp, which a sender's retry may change).
            identity: Identity::Content,
        })
    }
}

/// Builds a [`GenericHmac`] verifier.
///
/// Errors are kept and reported by [`build`](Self::build).
#[must_use]
pub struct GenericHmacBuilder {
    scheme: &'static str,
    signature_header: &'static str,
    secrets: SecretList,
    prefix: String,
    encoding: SignatureEncoding,
    content_prefix: String,
    timestamp: Option<SignedTimestamp>,
    tolerance: Option<Duration>,
    id_header: Option<&'static str>,
    event_type_header: Option<&'static str>,
}

debug_fields!(GenericHmacBuilder: scheme, signature_header, secrets, ..);

impl GenericHmacBuilder {
    /// Adds a secret, used as the bytes given (decode it first if your
    /// provider shows it in hex or base64 and keys the HMAC with the bytes).
    pub fn secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.secrets.push(secret.as_ref());
        self
    }

    secrets_method!("Adds several secrets, in order.", AsRef<[u8]>);

    /// A prefix the signature header value starts with (`sha256=`); none by default.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How the signature is encoded (hex by default).
    pub fn encoding(mut self, encoding: SignatureEncoding) -> Self {
        self.encoding = encoding;
        self
    }

    /// Literal bytes signed before everything else (Slack's `v0:`); none by default.
    pub fn content_prefix(mut self, content_prefix: impl Into<String>) -> Self {
        self.content_prefix = content_prefix.into();
        self
    }

    /// Signs the timestamp in `header` before the body, joined by `separator`:
    /// the content becomes `{timestamp}{separator}{body}`, and the timestamp
    /// must be within the [tolerance](Self::tolerance).
    pub fn signed_timestamp(mut self, header: &'static str, separator: impl Into<String>) -> Self {
        self.timestamp = Some(SignedTimestamp {
            header,
            separator: separator.into(),
        });
        self
    }

    tolerance_method!(
        ///
        /// Only with [`signed_timestamp`](Self::signed_timestamp).
    );

    /// The header carrying the delivery id ([`Verified::id`]).
    ///
    /// The signature does not cover it, so deliveries are deduplicated on
    /// the body's SHA-256 ([`Identity::Content`]), with or without this
    /// header: a captured delivery replayed under a fresh id (within the
    /// tolerance, or forever without a signed timestamp) is a duplicate. To
    /// deduplicate on this header instead, set
    /// `Receiver::builder(v).dedup_key(|verified, _| verified.id.clone())`.
    pub fn id_header(mut self, header: &'static str) -> Self {
        self.id_header = Some(header);
        self
    }

    /// The header carrying the event type ([`Verified::event_type`]).
    pub fn event_type_header(mut self, header: &'static str) -> Self {
        self.event_type_header = Some(header);
        self
    }

    /// The verifier.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] met while adding secrets,
    /// [`ConfigError::NoKeys`] when none was added, or [`ConfigError::Setting`]
    /// for an invalid header name, an empty scheme name, or a tolerance
    /// without a signed timestamp.
    pub fn build(self) -> Result<GenericHmac, ConfigError> {
        let secrets = self.secrets.finish()?;
        if self.scheme.is_empty() {
            return Err(ConfigError::Setting("scheme name is empty"));
        }
        let names = HeaderNames {
            signature: Named::parse(self.signature_header)?,
            timestamp: self
                .timestamp
                .as_ref()
                .map(|ts| Named::parse(ts.header))
                .transpose()?,
            id: self.id_header.map(Named::parse).transpose()?,
            event_type: self.event_type_header.map(Named::parse).transpose()?,
        };
        if self.tolerance.is_some() && self.timestamp.is_none() {
            return Err(ConfigError::Setting(
                "tolerance needs a signed timestamp header",
            ));
        }
        Ok(GenericHmac {
            scheme: self.scheme,
            secrets,
            signature_header: self.signature_header,
            prefix: self.prefix,
            encoding: self.encoding,
            content_prefix: self.content_prefix,
            timestamp: self.timestamp,
            tolerance: self.tolerance.unwrap_or(DEFAULT_TOLERANCE),
            id_header: self.id_header,
            event_type_header: self.event_type_header,
            names,
        })
    }
}
