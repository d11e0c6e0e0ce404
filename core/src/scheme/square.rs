//! [Square](https://developer.squareup.com/docs/webhooks/step3validate)
//! webhooks: `x-square-hmacsha256-signature: <base64 HMAC-SHA256>` of the
//! subscription's notification URL followed by the body, keyed with the
//! subscription's signature key.
//!
//! Square signs the notification URL as registered, so configure it with
//! [`PublicUrl::exact`] (or [`PublicUrl::base`] when the request path is the
//! registered one). Square signs no timestamp: the pipeline deduplicates on
//! the body's `"event_id"` ([`Verified::id`]); [`Verified::event_type`] is
//! its `"type"`.
//!
//! ```
//! use std::time::SystemTime;
//! use webhooks_core::{PublicUrl, Verifier, VerifyError, scheme::Square};
//!
//! // Square's documented example.
//! let square = Square::builder()
//!     .signature_key("asdf1234")
//!     .public_url(PublicUrl::exact("https://example.com/webhook")?)
//!     .build()?;
//! let mut headers = http::HeaderMap::new();
//! headers.insert(
//!     "x-square-hmacsha256-signature",
//!     "2kRE5qRU2tR+tBGlDwMEw2avJ7QM4ikPYD/PJ3bd9Og=".parse()?,
//! );
//! assert!(square.verify(&headers, br#"{"hello":"world"}"#, SystemTime::now()).is_ok());
//! assert_eq!(
//!     square.verify(&headers, br#"{"hello":"world!"}"#, SystemTime::now()),
//!     Err(VerifyError::NoMatchingSignature)
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::SystemTime;

use hmac::Mac as _;
use http::{HeaderMap, HeaderName};

use super::provider::body_fields;
use super::{
    HmacSha256, SecretList, Secrets, decode_base64_32, encode_base64, header, signed_headers,
};
use crate::{ConfigError, Identity, MatchedKey, PublicUrl, Verified, VerifyError};

const SIGNATURE: &str = "x-square-hmacsha256-signature";
static SIGNATURE_NAME: HeaderName = HeaderName::from_static(SIGNATURE);
const SCHEME: &str = "square";

/// Verifies [Square](https://developer.squareup.com/docs/webhooks/step3validate)
/// webhook events.
///
/// The signature header missing or not base64 of 32 bytes is a `400`; a
/// signature matching no key is a `401`.
#[derive(Clone)]
pub struct Square {
    secrets: Secrets,
    public_url: PublicUrl,
}

debug_fields!(Square: secrets, public_url);

fn feed(mac: &mut HmacSha256, url: &str, body: &[u8]) {
    mac.update(url.as_bytes());
    mac.update(body);
}

impl Square {
    /// A builder: add the signature key(s) and the [`PublicUrl`].
    pub fn builder() -> SquareBuilder {
        SquareBuilder::default()
    }

    /// The signature Square would send for a notification to `url`, signed
    /// with the first key.
    #[must_use]
    pub fn sign(&self, url: &str, body: &[u8]) -> String {
        encode_base64(&self.secrets.sign(|m| feed(m, url, body)))
    }

    /// The headers Square would send for a notification to `url`.
    ///
    /// # Errors
    ///
    /// Never in practice; the signature is always a valid header value.
    pub fn sign_headers(&self, url: &str, body: &[u8]) -> Result<HeaderMap, ConfigError> {
        signed_headers([(SIGNATURE, &self.sign(url, body), "signature")])
    }

    /// Verifies a notification sent to `url`.
    ///
    /// # Errors
    ///
    /// As [`Verifier::verify`](crate::Verifier::verify).
    pub fn verify_url(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: &[u8],
        _now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let value = header(headers, &SIGNATURE_NAME, SIGNATURE)?;
        let signature = decode_base64_32(value.trim())
            .ok_or(VerifyError::malformed(SIGNATURE, "not base64 of 32 bytes"))?;
        let index = (self.secrets)
            .first_match(&signature, |m| feed(m, url, body))
            .ok_or(VerifyError::NoMatchingSignature)?;
        let [id, event_type] = body_fields(body, ["event_id", "type"]);
        Ok(Verified {
            scheme: SCHEME,
            id,
            timestamp: None,
            event_type,
            matched_key: MatchedKey::Secret(index),
            scope: None,
            identity: Identity::SignedId,
        })
    }
}

url_signing_verifier!(Square);

/// Builds a [`Square`] verifier.
#[derive(Default)]
#[must_use]
pub struct SquareBuilder {
    secrets: SecretList,
    public_url: Option<PublicUrl>,
}

debug_fields!(SquareBuilder: secrets, public_url);

impl SquareBuilder {
    /// Adds a subscription signature key, used as the bytes given.
    pub fn signature_key(mut self, key: impl AsRef<[u8]>) -> Self {
        self.secrets.push(key.as_ref());
        self
    }

    /// Adds several signature keys, in order.
    pub fn signature_keys<I>(self, keys: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        keys.into_iter().fold(self, Self::signature_key)
    }

    /// The notification URL (required; usually [`PublicUrl::exact`]).
    pub fn public_url(mut self, public_url: PublicUrl) -> Self {
        self.public_url = Some(public_url);
        self
    }

    /// The verifier.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] met while adding keys,
    /// [`ConfigError::NoKeys`] when none was added, [`ConfigError::Setting`]
    /// without a public URL.
    pub fn build(self) -> Result<Square, ConfigError> {
        Ok(Square {
            secrets: self.secrets.finish()?,
            public_url: self.public_url.ok_or(ConfigError::Setting(
                "public_url is required: Square signs the notification URL",
            ))?,
        })
    }
}
