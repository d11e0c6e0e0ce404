//! [Intercom](https://developers.intercom.com/docs/webhooks/webhook-notifications#signed-notifications)
//! webhook notifications: `X-Hub-Signature: sha1=<hex HMAC-SHA1 of the body>`,
//! keyed with the app's client secret.
//!
//! Intercom signs no timestamp, so there is no replay window: the receive
//! pipeline deduplicates on the notification's `"id"` (`notif_…`), which
//! [`Verified::id`] carries; [`Verified::event_type`] is its `"topic"`.
//!
//! ```
//! use std::time::SystemTime;
//! use webhooks_core::{Verifier, VerifyError, scheme::Intercom};
//!
//! let intercom = Intercom::new("client-secret")?;
//! let body = br#"{"type":"notification_event","id":"notif_1","topic":"conversation.user.created"}"#;
//! let headers = intercom.sign_headers(body)?;
//! let verified = intercom.verify(&headers, body, SystemTime::now())?;
//! assert_eq!(verified.id.as_deref(), Some("notif_1"));
//! assert_eq!(verified.event_type.as_deref(), Some("conversation.user.created"));
//! assert_eq!(
//!     intercom.verify(&headers, b"{}", SystemTime::now()),
//!     Err(VerifyError::NoMatchingSignature)
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::SystemTime;

use hmac::Mac as _;
use http::{HeaderMap, HeaderName};

use super::provider::{HmacSha1, body_fields};
use super::{SecretList, Secrets, encode_hex, header, prefixed_hex, signed_headers};
use crate::{ConfigError, Identity, MatchedKey, Verified, Verifier, VerifyError};

const SIGNATURE: &str = "x-hub-signature";
static SIGNATURE_NAME: HeaderName = HeaderName::from_static(SIGNATURE);
const SCHEME: &str = "intercom";

/// Verifies [Intercom](https://developers.intercom.com/docs/webhooks/webhook-notifications)
/// notifications: `X-Hub-Signature: sha1=<40 hex digits>` over the exact body.
#[derive(Clone)]
pub struct Intercom {
    secrets: Secrets<HmacSha1>,
}

debug_fields!(Intercom: secrets);

impl Intercom {
    /// A verifier with the app's client secret.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Empty`] when the secret is empty.
    pub fn new(client_secret: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        Self::builder().secret(client_secret).build()
    }

    /// A builder for several secrets (rotation).
    pub fn builder() -> IntercomBuilder {
        IntercomBuilder::default()
    }

    /// The `X-Hub-Signature` value Intercom would send, signed with the first secret.
    #[must_use]
    pub fn sign(&self, body: &[u8]) -> String {
        format!(
            "sha1={}",
            encode_hex(&self.secrets.sign(|m| m.update(body)))
        )
    }

    /// The headers Intercom would send.
    ///
    /// # Errors
    ///
    /// Never in practice; the signature is always a valid header value.
    pub fn sign_headers(&self, body: &[u8]) -> Result<HeaderMap, ConfigError> {
        signed_headers([(SIGNATURE, &self.sign(body), "signature")])
    }
}

impl Verifier for Intercom {
    fn scheme(&self) -> &'static str {
        SCHEME
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        _now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let signature = prefixed_hex::<20>(
            header(headers, &SIGNATURE_NAME, SIGNATURE)?,
            "sha1=",
            SIGNATURE,
            "expected sha1=<hex>",
            "not 40 hex digits",
        )?;
        let index = (self.secrets)
            .first_match(&signature, |m| m.update(body))
            .ok_or(VerifyError::NoMatchingSignature)?;
        let [id, event_type] = body_fields(body, ["id", "topic"]);
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

/// Builds an [`Intercom`] verifier.
#[derive(Default)]
#[must_use]
pub struct IntercomBuilder {
    secrets: SecretList<HmacSha1>,
}

debug_fields!(IntercomBuilder: secrets);

impl IntercomBuilder {
    /// Adds a client secret, used as the bytes given.
    pub fn secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.secrets.push(secret.as_ref());
        self
    }

    secrets_method!("Adds several client secrets, in order.", AsRef<[u8]>);

    /// The verifier.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] met while adding secrets, or
    /// [`ConfigError::NoKeys`] when none was added.
    pub fn build(self) -> Result<Intercom, ConfigError> {
        Ok(Intercom {
            secrets: self.secrets.finish()?,
        })
    }
}
