//! [Shopify](https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-2-validate-the-origin-of-your-webhook-to-ensure-its-coming-from-shopify)
//! webhook signatures: `X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256 of the body>`,
//! keyed with the app's client secret.
//!
//! Shopify signs no timestamp: deduplicate on `X-Shopify-Webhook-Id`, which
//! [`Verified::id`] carries (the receive pipeline does this by default).
//!
//! ```
//! use std::time::SystemTime;
//! use webhooks_core::{MatchedKey, Verifier, scheme::Shopify};
//!
//! // While rotating the client secret, both are accepted.
//! let shopify = Shopify::builder().secret("new_secret").secret("old_secret").build()?;
//! let signed_by_old = Shopify::new("old_secret")?;
//! let body = br#"{"id":820982911946154508}"#;
//! let headers = signed_by_old.sign_headers("b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "orders/create", body)?;
//!
//! let verified = shopify.verify(&headers, body, SystemTime::now())?;
//! assert_eq!(verified.matched_key, MatchedKey::Secret(1));
//! assert_eq!(verified.event_type.as_deref(), Some("orders/create"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::time::SystemTime;

use hmac::Mac as _;
use http::{HeaderMap, HeaderName};

use super::{
    HmacKey, SecretList, decode_base64_32, encode_base64, header, header_value, mac_of,
    matching_secret, optional_header,
};
use crate::{ConfigError, MatchedKey, Verified, Verifier, VerifyError};

const SIGNATURE: &str = "x-shopify-hmac-sha256";
const WEBHOOK_ID: &str = "x-shopify-webhook-id";
const TOPIC: &str = "x-shopify-topic";
/// The same names, parsed once (see [`header`]).
static SIGNATURE_NAME: HeaderName = HeaderName::from_static(SIGNATURE);
static WEBHOOK_ID_NAME: HeaderName = HeaderName::from_static(WEBHOOK_ID);
static TOPIC_NAME: HeaderName = HeaderName::from_static(TOPIC);
const SCHEME: &str = "shopify";

/// Verifies [Shopify](https://shopify.dev/docs/apps/build/webhooks/subscribe/https) deliveries.
///
/// * header `X-Shopify-Hmac-Sha256: <base64 of 32 bytes>` over the exact body;
/// * [`Verified::id`] is `X-Shopify-Webhook-Id`, [`Verified::event_type`] is
///   `X-Shopify-Topic`; no timestamp is signed.
#[derive(Clone)]
pub struct Shopify {
    secrets: Vec<HmacKey>,
}

impl fmt::Debug for Shopify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shopify")
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

impl Shopify {
    /// A verifier with one client secret.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Empty`] when the secret is empty.
    pub fn new(client_secret: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        Self::builder().secret(client_secret).build()
    }

    /// A builder for several secrets (rotation).
    pub fn builder() -> ShopifyBuilder {
        ShopifyBuilder::default()
    }

    /// The `X-Shopify-Hmac-Sha256` value Shopify would send, signed with the first secret.
    #[must_use]
    pub fn sign(&self, body: &[u8]) -> String {
        encode_base64(&mac_of(&self.secrets[0], |mac| mac.update(body)))
    }

    /// The headers Shopify would send: the signature, the webhook id and the topic.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when `webhook_id` or `topic` cannot be a header value.
    pub fn sign_headers(
        &self,
        webhook_id: &str,
        topic: &str,
        body: &[u8],
    ) -> Result<HeaderMap, ConfigError> {
        let mut headers = HeaderMap::with_capacity(3);
        headers.insert(SIGNATURE, header_value(&self.sign(body), "signature")?);
        headers.insert(WEBHOOK_ID, header_value(webhook_id, "webhook id")?);
        headers.insert(TOPIC, header_value(topic, "topic")?);
        Ok(headers)
    }
}

impl Verifier for Shopify {
    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        _now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let value = header(headers, &SIGNATURE_NAME, SIGNATURE)?;
        let signature = decode_base64_32(value.trim())
            .ok_or(VerifyError::malformed(SIGNATURE, "not base64 of 32 bytes"))?;
        let index = matching_secret(&self.secrets, &signature, |mac| mac.update(body))
            .ok_or(VerifyError::NoMatchingSignature)?;
        Ok(Verified {
            scheme: SCHEME,
            id: optional_header(headers, &WEBHOOK_ID_NAME, WEBHOOK_ID)?.map(str::to_owned),
            timestamp: None,
            event_type: optional_header(headers, &TOPIC_NAME, TOPIC)?.map(str::to_owned),
            matched_key: MatchedKey::Secret(index),
        })
    }
}

/// Builds a [`Shopify`] verifier.
///
/// Errors in any secret are kept and reported by [`build`](Self::build).
#[derive(Default)]
#[must_use]
pub struct ShopifyBuilder {
    secrets: SecretList,
}

impl fmt::Debug for ShopifyBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShopifyBuilder")
            .field("secrets", &self.secrets.len())
            .finish_non_exhaustive()
    }
}

impl ShopifyBuilder {
    /// Adds a client secret, used as the bytes given.
    pub fn secret(mut self, client_secret: impl AsRef<[u8]>) -> Self {
        self.secrets.push(client_secret.as_ref());
        self
    }

    /// Adds several client secrets, in order.
    pub fn secrets<I>(self, secrets: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        secrets.into_iter().fold(self, Self::secret)
    }

    /// The verifier.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] met while adding secrets, or
    /// [`ConfigError::NoKeys`] when none was added.
    pub fn build(self) -> Result<Shopify, ConfigError> {
        Ok(Shopify {
            secrets: self.secrets.finish()?,
        })
    }
}
