//! [Mailchimp Transactional (Mandrill)](https://mailchimp.com/developer/transactional/guides/track-respond-activity-webhooks/#authenticating-webhook-requests)
//! webhooks: `X-Mandrill-Signature: <base64 HMAC-SHA1>` of the webhook URL
//! followed by each POST parameter, sorted by name, as name then value;
//! keyed with the webhook's key.
//!
//! Mandrill signs no timestamp and sends no delivery id: a batch
//! (`mandrill_events`, a JSON array of events each with its `_id`) can only
//! be deduplicated by content or per event, in the handler.
//!
//! ```
//! use std::time::SystemTime;
//! use webhooks_core::{PublicUrl, RequestHead, Verifier, VerifyError, scheme::Mandrill};
//!
//! let mandrill = Mandrill::builder()
//!     .webhook_key("mandrill-webhook-key")
//!     .public_url(PublicUrl::base("https://hooks.example.com")?)
//!     .build()?;
//! let body = b"mandrill_events=%5B%5D";
//! let headers = mandrill.sign_headers("https://hooks.example.com/mandrill", body)?;
//! let head = RequestHead::new("/mandrill", &headers);
//! assert!(mandrill.verify_head(head, body, SystemTime::now()).is_ok());
//! assert_eq!(
//!     mandrill.verify_head(head, b"mandrill_events=%5B1%5D", SystemTime::now()),
//!     Err(VerifyError::NoMatchingSignature)
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::SystemTime;

use hmac::Mac as _;
use http::{HeaderMap, HeaderName};

use super::provider::{FormParams, HmacSha1, MAX_MAC, decode_base64_into, sorted_form_params};
use super::{SecretList, Secrets, encode_base64, header, signed_headers};
use crate::{ConfigError, Identity, MatchedKey, PublicUrl, Verified, VerifyError};

const SIGNATURE: &str = "x-mandrill-signature";
static SIGNATURE_NAME: HeaderName = HeaderName::from_static(SIGNATURE);
const SCHEME: &str = "mandrill";

/// Verifies [Mandrill](https://mailchimp.com/developer/transactional/guides/track-respond-activity-webhooks/)
/// webhook batches.
///
/// The signature missing or not base64 of 20 bytes is a `400`, a body that
/// is not form-encoded a `400`, a signature matching no key a `401`.
#[derive(Clone)]
pub struct Mandrill {
    secrets: Secrets<HmacSha1>,
    public_url: PublicUrl,
}

debug_fields!(Mandrill: secrets, public_url);

fn feed(mac: &mut HmacSha1, url: &str, params: &FormParams) {
    mac.update(url.as_bytes());
    for (name, value) in params.iter() {
        mac.update(name.as_bytes());
        mac.update(value.as_bytes());
    }
}

impl Mandrill {
    /// A builder: add the webhook key(s) and the [`PublicUrl`].
    pub fn builder() -> MandrillBuilder {
        MandrillBuilder::default()
    }

    /// The `X-Mandrill-Signature` Mandrill would send for a POST of the
    /// form `body` to `url`, signed with the first key.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when the body is not form-encoded.
    pub fn sign(&self, url: &str, body: &[u8]) -> Result<String, ConfigError> {
        let params = sorted_form_params(body).ok_or(ConfigError::Invalid {
            what: "body",
            reason: "not form-encoded",
        })?;
        Ok(encode_base64(&self.secrets.sign(|m| feed(m, url, &params))))
    }

    /// The headers Mandrill would send for a POST to `url`.
    ///
    /// # Errors
    ///
    /// As [`sign`](Self::sign).
    pub fn sign_headers(&self, url: &str, body: &[u8]) -> Result<HeaderMap, ConfigError> {
        signed_headers([(SIGNATURE, &self.sign(url, body)?, "signature")])
    }

    /// Verifies a POST to `url`, the webhook URL as registered.
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
        let mut signature = [0u8; MAX_MAC];
        let signature = match decode_base64_into(value.trim(), &mut signature) {
            Some(20) => &signature[..20],
            _ => return Err(VerifyError::malformed(SIGNATURE, "not base64 of 20 bytes")),
        };
        let params = sorted_form_params(body).ok_or(VerifyError::malformed(
            "content-type",
            "body is not form-encoded",
        ))?;
        let index = (self.secrets)
            .first_match(signature, |m| feed(m, url, &params))
            .ok_or(VerifyError::NoMatchingSignature)?;
        Ok(Verified {
            scheme: SCHEME,
            id: None,
            timestamp: None,
            event_type: None,
            matched_key: MatchedKey::Secret(index),
            scope: None,
            identity: Identity::Content,
        })
    }
}

url_signing_verifier!(Mandrill);

/// Builds a [`Mandrill`] verifier.
#[derive(Default)]
#[must_use]
pub struct MandrillBuilder {
    secrets: SecretList<HmacSha1>,
    public_url: Option<PublicUrl>,
}

debug_fields!(MandrillBuilder: secrets, public_url);

impl MandrillBuilder {
    /// Adds a webhook key, used as the bytes given.
    pub fn webhook_key(mut self, key: impl AsRef<[u8]>) -> Self {
        self.secrets.push(key.as_ref());
        self
    }

    /// Adds several webhook keys, in order.
    pub fn webhook_keys<I>(self, keys: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        keys.into_iter().fold(self, Self::webhook_key)
    }

    /// How to rebuild the webhook URL (required).
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
    pub fn build(self) -> Result<Mandrill, ConfigError> {
        Ok(Mandrill {
            secrets: self.secrets.finish()?,
            public_url: self.public_url.ok_or(ConfigError::Setting(
                "public_url is required: Mandrill signs the webhook URL",
            ))?,
        })
    }
}
