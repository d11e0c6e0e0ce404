//! [Typeform](https://www.typeform.com/developers/webhooks/secure-your-webhooks/)
//! webhooks: `Typeform-Signature: sha256=<base64 HMAC-SHA256 of the body>`.
//!
//! Typeform signs no timestamp, so there is no replay window: the receive
//! pipeline deduplicates on the body's `"event_id"`, which [`Verified::id`]
//! carries; [`Verified::event_type`] is its `"event_type"` (`form_response`).
//!
//! ```
//! use std::time::SystemTime;
//! use webhooks_core::{Verifier, VerifyError, scheme::Typeform};
//!
//! let typeform = Typeform::new("typeform-secret")?;
//! let body = br#"{"event_id":"01H","event_type":"form_response","form_response":{}}"#;
//! let headers = typeform.sign_headers(body)?;
//! let verified = typeform.verify(&headers, body, SystemTime::now())?;
//! assert_eq!(verified.id.as_deref(), Some("01H"));
//! assert_eq!(
//!     typeform.verify(&headers, b"{}", SystemTime::now()),
//!     Err(VerifyError::NoMatchingSignature)
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::SystemTime;

use hmac::Mac as _;
use http::{HeaderMap, HeaderName};

use super::provider::body_fields;
use super::{SecretList, Secrets, decode_base64_32, encode_base64, header, signed_headers};
use crate::{ConfigError, Identity, MatchedKey, Verified, Verifier, VerifyError};

const SIGNATURE: &str = "typeform-signature";
static SIGNATURE_NAME: HeaderName = HeaderName::from_static(SIGNATURE);
const SCHEME: &str = "typeform";

/// Verifies [Typeform](https://www.typeform.com/developers/webhooks/secure-your-webhooks/)
/// deliveries: `Typeform-Signature: sha256=<base64>` over the exact body.
#[derive(Clone)]
pub struct Typeform {
    secrets: Secrets,
}

debug_fields!(Typeform: secrets);

impl Typeform {
    /// A verifier with the webhook's secret.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Empty`] when the secret is empty.
    pub fn new(secret: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        Self::builder().secret(secret).build()
    }

    /// A builder for several secrets (rotation).
    pub fn builder() -> TypeformBuilder {
        TypeformBuilder::default()
    }

    /// The `Typeform-Signature` value Typeform would send, signed with the first secret.
    #[must_use]
    pub fn sign(&self, body: &[u8]) -> String {
        format!(
            "sha256={}",
            encode_base64(&self.secrets.sign(|m| m.update(body)))
        )
    }

    /// The headers Typeform would send.
    ///
    /// # Errors
    ///
    /// Never in practice; the signature is always a valid header value.
    pub fn sign_headers(&self, body: &[u8]) -> Result<HeaderMap, ConfigError> {
        signed_headers([(SIGNATURE, &self.sign(body), "signature")])
    }
}

impl Verifier for Typeform {
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
        let encoded = (value.trim())
            .strip_prefix("sha256=")
            .ok_or(VerifyError::malformed(
                SIGNATURE,
                "expected sha256=<base64>",
            ))?;
        let signature = decode_base64_32(encoded)
            .ok_or(VerifyError::malformed(SIGNATURE, "not base64 of 32 bytes"))?;
        let index = (self.secrets)
            .first_match(&signature, |m| m.update(body))
            .ok_or(VerifyError::NoMatchingSignature)?;
        let [id, event_type] = body_fields(body, ["event_id", "event_type"]);
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

/// Builds a [`Typeform`] verifier.
#[derive(Default)]
#[must_use]
pub struct TypeformBuilder {
    secrets: SecretList,
}

debug_fields!(TypeformBuilder: secrets);

impl TypeformBuilder {
    /// Adds a secret, used as the bytes given.
    pub fn secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.secrets.push(secret.as_ref());
        self
    }

    secrets_method!("Adds several secrets, in order.", AsRef<[u8]>);

    /// The verifier.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] met while adding secrets, or
    /// [`ConfigError::NoKeys`] when none was added.
    pub fn build(self) -> Result<Typeform, ConfigError> {
        Ok(Typeform {
            secrets: self.secrets.finish()?,
        })
    }
}
