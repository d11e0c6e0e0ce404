//! [Shopify](https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-2-validate-the-origin-of-your-webhook-to-ensure-its-coming-from-shopify)
//! webhook signatures: `X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256 of the body>`,
//! keyed with the app's client secret.
//!
//! Shopify signs no timestamp and not `X-Shopify-Webhook-Id`: a captured
//! delivery verifies forever, under any webhook id. So the receive pipeline
//! deduplicates Shopify deliveries on the body's SHA-256
//! ([`Identity::Content`]); a replay is a duplicate for as long as the store
//! remembers the delivery (the retention, 7 days by default), whatever id it
//! carries. [`Verified::id`] still carries `X-Shopify-Webhook-Id`, which
//! Shopify always sends: a request without it is refused (`400`).
//!
//! To deduplicate on `X-Shopify-Webhook-Id` instead (a replay under a fresh
//! id then runs again), set
//! `Receiver::builder(shopify).dedup_key(|verified, _| verified.id.clone())`.
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

use std::time::SystemTime;

use hmac::Mac as _;
use http::{HeaderMap, HeaderName};

use super::credential::{self, OtherCredential};
use super::{
    SecretList, Secrets, decode_base64_32, encode_base64, header, optional_header, signed_headers,
};
use crate::{ConfigError, Identity, MatchedKey, Verified, Verifier, VerifyError};

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
/// * [`Verified::id`] is `X-Shopify-Webhook-Id` (required: `400` without
///   it), [`Verified::event_type`] is `X-Shopify-Topic`; neither is signed,
///   nor is a timestamp, so deliveries are deduplicated on the body
///   ([`Identity::Content`]).
#[derive(Clone)]
pub struct Shopify {
    secrets: Secrets,
}

debug_fields!(Shopify: secrets);

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
        encode_base64(&self.secrets.sign(|mac| mac.update(body)))
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
        signed_headers([
            (SIGNATURE, &self.sign(body), "signature"),
            (WEBHOOK_ID, webhook_id, "webhook id"),
            (TOPIC, topic, "topic"),
        ])
    }
}

impl Verifier for Shopify {
    fn scheme(&self) -> &'static str {
        SCHEME
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        _now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let value = header(headers, &SIGNATURE_NAME, SIGNATURE)?;
        // Shopify always sends one: a request without it is not Shopify's.
        let webhook_id = optional_header(headers, &WEBHOOK_ID_NAME, WEBHOOK_ID)?
            .ok_or(VerifyError::MissingHeader(WEBHOOK_ID))?;
        let signature = decode_base64_32(value.trim())
            .ok_or(VerifyError::malformed(SIGNATURE, "not base64 of 32 bytes"))?;
        let index = (self.secrets)
            .first_match(&signature, |mac| mac.update(body))
            .ok_or(VerifyError::NoMatchingSignature)?;
        Ok(Verified {
            scheme: SCHEME,
            id: Some(webhook_id.to_owned()),
            timestamp: None,
            event_type: optional_header(headers, &TOPIC_NAME, TOPIC)?.map(str::to_owned),
            matched_key: MatchedKey::Secret(index),
            scope: None,
            identity: Identity::Content,
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

debug_fields!(ShopifyBuilder: secrets, ..);

/// Shopify's access tokens (public app, custom app, private app).
const ACCESS_TOKENS: &[OtherCredential] = &[OtherCredential::prefixed(
    &["shpat_", "shpca_", "shppa_"],
    "this is a Shopify access token, not the client secret: use the app's \
     client secret (API secret key)",
)];

impl ShopifyBuilder {
    /// Adds a client secret, used as the bytes given.
    ///
    /// An Admin API access token (`shpat_…`, `shpca_…`, `shppa_…`) is
    /// refused: Shopify signs webhooks with the app's client secret.
    pub fn secret(mut self, client_secret: impl AsRef<[u8]>) -> Self {
        let secret = client_secret.as_ref();
        match credential::refuse(secret, ACCESS_TOKENS) {
            Ok(()) => self.secrets.push(secret),
            Err(e) => self.secrets.fail(e),
        }
        self
    }

    secrets_method!("Adds several client secrets, in order.", AsRef<[u8]>);

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
