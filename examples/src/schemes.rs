//! The signature schemes the receiver accepts and the simulator signs with,
//! chosen by name at run time (`WEBHOOK_SCHEME`, `--scheme`).
//!
//! ```
//! use std::time::SystemTime;
//! use examples::schemes::Scheme;
//!
//! let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
//! for scheme in Scheme::ALL {
//!     let signer = scheme.signer(secret)?;
//!     let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?.as_secs();
//!     let headers = signer.headers("evt_1", "email.sent", now, b"{}")?;
//!     assert!(scheme.verifier(secret)?.verify(&headers, b"{}", SystemTime::now()).is_ok());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use http::HeaderMap;
use tower_webhooks::core::scheme::standard::Signer;
use tower_webhooks::core::scheme::{GitHub, Shopify, Slack, StandardWebhooks, Stripe};
use tower_webhooks::core::{ConfigError, Verifier};

/// A provider's signature scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Standard Webhooks (Svix and others): `webhook-id`, `-timestamp`, `-signature`.
    Standard,
    /// Stripe: `Stripe-Signature: t=…,v1=…`.
    Stripe,
    /// GitHub: `X-Hub-Signature-256`, `X-GitHub-Delivery`, `X-GitHub-Event`.
    GitHub,
    /// Slack: `X-Slack-Signature`, `X-Slack-Request-Timestamp`.
    Slack,
    /// Shopify: `X-Shopify-Hmac-Sha256`, `X-Shopify-Webhook-Id`, `X-Shopify-Topic`.
    Shopify,
}

impl Scheme {
    /// Every scheme.
    pub const ALL: [Self; 5] = [
        Self::Standard,
        Self::Stripe,
        Self::GitHub,
        Self::Slack,
        Self::Shopify,
    ];

    /// The name used on the command line and in the environment.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Standard => "standard",
            Self::Stripe => "stripe",
            Self::GitHub => "github",
            Self::Slack => "slack",
            Self::Shopify => "shopify",
        }
    }

    /// Whether the scheme signs a timestamp, so that stale replays are refused.
    /// (GitHub and Shopify sign only the body: a replay, under any delivery
    /// id, is caught by deduplicating on the body's digest.)
    #[must_use]
    pub fn signs_timestamp(self) -> bool {
        matches!(self, Self::Standard | Self::Stripe | Self::Slack)
    }

    /// A verifier for `secret`: Standard Webhooks reads it as `whsec_<base64>`,
    /// the others use its bytes as they are.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the secret is empty or (Standard) not base64.
    pub fn verifier(self, secret: &str) -> Result<Arc<dyn Verifier>, ConfigError> {
        Ok(match self {
            Self::Standard => Arc::new(StandardWebhooks::new(secret)?),
            Self::Stripe => Arc::new(Stripe::new(secret)?),
            Self::GitHub => Arc::new(GitHub::new(secret)?),
            Self::Slack => Arc::new(Slack::new(secret)?),
            Self::Shopify => Arc::new(Shopify::new(secret)?),
        })
    }

    /// A signer producing what this provider sends, for `secret`.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] as for [`verifier`](Self::verifier).
    pub fn signer(self, secret: &str) -> Result<SchemeSigner, ConfigError> {
        Ok(SchemeSigner(match self {
            Self::Standard => SignerKind::Standard(Signer::hmac(secret)?),
            Self::Stripe => SignerKind::Stripe(Stripe::new(secret)?),
            Self::GitHub => SignerKind::GitHub(GitHub::new(secret)?),
            Self::Slack => SignerKind::Slack(Slack::new(secret)?),
            Self::Shopify => SignerKind::Shopify(Shopify::new(secret)?),
        }))
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scheme {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|scheme| scheme.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!("unknown scheme {s:?}; expected standard, stripe, github, slack or shopify")
            })
    }
}

/// Signs deliveries as one provider does. `Debug` never shows the secret.
#[derive(Debug, Clone)]
pub struct SchemeSigner(SignerKind);

#[derive(Debug, Clone)]
enum SignerKind {
    Standard(Signer),
    Stripe(Stripe),
    GitHub(GitHub),
    Slack(Slack),
    Shopify(Shopify),
}

impl SchemeSigner {
    /// The headers for one delivery: `id` is the delivery id (ignored by
    /// schemes without one: Stripe and Slack carry it in the body),
    /// `event_type` the event's type (sent as GitHub's event and Shopify's
    /// topic), `timestamp` the signing time in Unix seconds (ignored by
    /// schemes that sign none).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when `id` or `event_type` cannot be a header value.
    pub fn headers(
        &self,
        id: &str,
        event_type: &str,
        timestamp: u64,
        body: &[u8],
    ) -> Result<HeaderMap, ConfigError> {
        match &self.0 {
            SignerKind::Standard(s) => s.headers(id, timestamp, body),
            SignerKind::Stripe(s) => s.sign_headers(timestamp, body),
            SignerKind::GitHub(s) => s.sign_headers(id, event_type, body),
            SignerKind::Slack(s) => s.sign_headers(timestamp, body),
            SignerKind::Shopify(s) => s.sign_headers(id, event_type, body),
        }
    }
}
