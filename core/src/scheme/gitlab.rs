//! [GitLab](https://docs.gitlab.com/user/project/integrations/webhooks/#create-a-webhook)
//! webhooks: the secret token configured on the webhook, sent back as is in
//! `X-Gitlab-Token`, compared in constant time.
//!
//! A token proves who sent the request but signs nothing: not the body, not
//! a time. Use it over HTTPS only. [`Verified::id`] is `Idempotency-Key`
//! (the same across retries of one delivery), or `X-Gitlab-Event-UUID`
//! without it; [`Verified::event_type`] is `X-Gitlab-Event` (`Push Hook`…).
//!
//! ```
//! use std::time::SystemTime;
//! use webhooks_core::{Verifier, VerifyError, scheme::GitLab};
//!
//! let gitlab = GitLab::new("my-webhook-token")?;
//! let headers = gitlab.sign_headers("Push Hook", "0198f11a-5c4f-7d8e-b3f6-9e2d1c8a7b6f")?;
//! let verified = gitlab.verify(&headers, b"{}", SystemTime::now())?;
//! assert_eq!(verified.event_type.as_deref(), Some("Push Hook"));
//!
//! let other = GitLab::new("another-token")?;
//! assert_eq!(other.verify(&headers, b"{}", SystemTime::now()), Err(VerifyError::NoMatchingSignature));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::SystemTime;

use http::{HeaderMap, HeaderName};
use sha2::{Digest as _, Sha256};

use super::provider::matching_token;
use super::{header, optional_header, signed_headers};
use crate::{ConfigError, Identity, MatchedKey, Verified, Verifier, VerifyError};

const TOKEN: &str = "x-gitlab-token";
const EVENT: &str = "x-gitlab-event";
const EVENT_UUID: &str = "x-gitlab-event-uuid";
const IDEMPOTENCY_KEY: &str = "idempotency-key";
static TOKEN_NAME: HeaderName = HeaderName::from_static(TOKEN);
static EVENT_NAME: HeaderName = HeaderName::from_static(EVENT);
static EVENT_UUID_NAME: HeaderName = HeaderName::from_static(EVENT_UUID);
static IDEMPOTENCY_KEY_NAME: HeaderName = HeaderName::from_static(IDEMPOTENCY_KEY);
const SCHEME: &str = "gitlab";

/// Verifies [GitLab](https://docs.gitlab.com/user/project/integrations/webhooks/)
/// deliveries by their secret token.
///
/// A missing `X-Gitlab-Token` is a `400`, a token matching none of the
/// configured ones a `401`. Tokens are kept as SHA-256 digests and the
/// presented one is compared by digest, so the comparison's time says
/// nothing about the tokens, not even their lengths. `Debug` shows only how
/// many tokens there are.
#[derive(Clone)]
pub struct GitLab {
    tokens: Vec<[u8; 32]>,
    /// The first token, for [`sign_headers`](Self::sign_headers).
    first: String,
}

impl std::fmt::Debug for GitLab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitLab")
            .field("tokens", &self.tokens.len())
            .finish()
    }
}

impl GitLab {
    /// A verifier with one secret token.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Empty`] when the token is empty.
    pub fn new(token: impl Into<String>) -> Result<Self, ConfigError> {
        Self::builder().token(token).build()
    }

    /// A builder for several tokens (rotation).
    pub fn builder() -> GitLabBuilder {
        GitLabBuilder::default()
    }

    /// The headers GitLab would send: the first token, the event and the
    /// delivery id (as both `Idempotency-Key` and `X-Gitlab-Event-UUID`).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when `event` or `uuid` cannot be a header value.
    pub fn sign_headers(&self, event: &str, uuid: &str) -> Result<HeaderMap, ConfigError> {
        signed_headers([
            (TOKEN, self.first.as_str(), "token"),
            (EVENT, event, "event"),
            (EVENT_UUID, uuid, "event uuid"),
            (IDEMPOTENCY_KEY, uuid, "idempotency key"),
        ])
    }
}

impl Verifier for GitLab {
    fn scheme(&self) -> &'static str {
        SCHEME
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        _body: &[u8],
        _now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let token = header(headers, &TOKEN_NAME, TOKEN)?;
        let index = matching_token(&self.tokens, token.as_bytes())
            .ok_or(VerifyError::NoMatchingSignature)?;
        let id = match optional_header(headers, &IDEMPOTENCY_KEY_NAME, IDEMPOTENCY_KEY)? {
            Some(key) => Some(key),
            None => optional_header(headers, &EVENT_UUID_NAME, EVENT_UUID)?,
        };
        Ok(Verified {
            scheme: SCHEME,
            id: id.map(str::to_owned),
            timestamp: None,
            event_type: optional_header(headers, &EVENT_NAME, EVENT)?.map(str::to_owned),
            matched_key: MatchedKey::Secret(index),
            scope: None,
            identity: Identity::Content,
        })
    }
}

/// Builds a [`GitLab`] verifier.
#[derive(Default)]
#[must_use]
pub struct GitLabBuilder {
    tokens: Vec<String>,
}

impl std::fmt::Debug for GitLabBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitLabBuilder")
            .field("tokens", &self.tokens.len())
            .finish()
    }
}

impl GitLabBuilder {
    /// Adds a secret token.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.tokens.push(token.into());
        self
    }

    /// Adds several tokens, in order.
    pub fn tokens<I>(self, tokens: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        tokens.into_iter().fold(self, Self::token)
    }

    /// The verifier.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Empty`] for an empty token, [`ConfigError::Invalid`]
    /// for one that cannot be a header value, [`ConfigError::NoKeys`] when
    /// none was added.
    pub fn build(self) -> Result<GitLab, ConfigError> {
        let mut digests = Vec::with_capacity(self.tokens.len());
        for token in &self.tokens {
            if token.is_empty() {
                return Err(ConfigError::Empty("token"));
            }
            if http::HeaderValue::from_str(token).is_err() || token.trim() != token {
                return Err(ConfigError::Invalid {
                    what: "token",
                    reason: "not a header value without surrounding spaces",
                });
            }
            digests.push(Sha256::digest(token.as_bytes()).into());
        }
        let first = self.tokens.into_iter().next().ok_or(ConfigError::NoKeys)?;
        Ok(GitLab {
            tokens: digests,
            first,
        })
    }
}
