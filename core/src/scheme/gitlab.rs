//! [GitLab](https://docs.gitlab.com/user/project/integrations/webhooks/#create-a-webhook)
//! webhooks: the secret token configured on the webhook, sent back as is in
//! `X-Gitlab-Token`, compared in constant time.
//!
//! A token proves who sent the request but signs nothing: not the body, not
//! a time, so a captured request can be replayed forever. Use it over HTTPS
//! only, and prefer GitLab's **signing token** where your GitLab offers it.
//!
//! # Signed webhooks: use [`StandardWebhooks`](super::StandardWebhooks)
//!
//! A GitLab webhook with a signing token (`whsec_<base64>` of 32 bytes, set
//! in the webhook's settings or the hooks API's `signing_token`) is signed
//! the Standard Webhooks way, with the same headers: `webhook-id` (the
//! delivery's `Idempotency-Key`, the same across retries), `webhook-timestamp`
//! and `webhook-signature: v1,<base64 HMAC-SHA256 of {id}.{timestamp}.{body}>`
//! (gitlab-org/gitlab merge request 230944, "Add webhook HMAC signing token").
//! Verify it with `StandardWebhooks::new(signing_token)`: the body and the
//! time are signed, replays past 300 s are refused and retries deduplicated
//! on `webhook-id`. The event type stays in `X-Gitlab-Event` (read it from
//! the request). While GitLab sends both, the secret token adds nothing to
//! the signature: verify the signature alone.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use webhooks_core::{Verifier, scheme::StandardWebhooks};
//!
//! let signing_token = "whsec_dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0dGVzdHRlc3Q=";
//! let gitlab = StandardWebhooks::new(signing_token)?;
//! let headers = gitlab.sign_headers("0198f11a-5c4f-7d8e-b3f6-9e2d1c8a7b6f", 1_700_000_000, b"{}")?;
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_010);
//! assert!(gitlab.verify(&headers, b"{}", now).is_ok());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The secret token [`Verified::id`] is `Idempotency-Key`
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
use zeroize::Zeroizing;

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
    /// The tokens' digests, wiped on drop.
    tokens: Zeroizing<Vec<[u8; 32]>>,
    /// The first token, for [`sign_headers`](Self::sign_headers); wiped on drop.
    first: Zeroizing<String>,
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

impl GitLab {
    /// The index of the token `X-Gitlab-Token` carries.
    fn token_index(&self, headers: &HeaderMap) -> Result<usize, VerifyError> {
        let token = header(headers, &TOKEN_NAME, TOKEN)?;
        matching_token(&self.tokens, token.as_bytes()).ok_or(VerifyError::NoMatchingSignature)
    }
}

impl Verifier for GitLab {
    fn scheme(&self) -> &'static str {
        SCHEME
    }

    /// The token is all there is to check: a wrong one is refused before
    /// the body is read.
    fn check_headers(&self, headers: &HeaderMap, _now: SystemTime) -> Result<(), VerifyError> {
        self.token_index(headers).map(|_| ())
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        _body: &[u8],
        _now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let index = self.token_index(headers)?;
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
    tokens: Zeroizing<Vec<String>>,
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
        let mut digests = Zeroizing::new(Vec::with_capacity(self.tokens.len()));
        for token in self.tokens.iter() {
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
        let first = Zeroizing::new(self.tokens.first().ok_or(ConfigError::NoKeys)?.clone());
        Ok(GitLab {
            tokens: digests,
            first,
        })
    }
}
