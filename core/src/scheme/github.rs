//! [GitHub](https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries)
//! webhook signatures: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`.
//!
//! GitHub signs no timestamp and not `X-GitHub-Delivery`: a captured delivery
//! verifies forever, under any delivery id. So the receive pipeline
//! deduplicates GitHub deliveries on the body's SHA-256
//! ([`Identity::Content`]); a replay is a duplicate for as long as the store
//! remembers the delivery (the retention, 7 days by default), whatever id it
//! carries. [`Verified::id`] still carries `X-GitHub-Delivery`, which GitHub
//! always sends: a request without it is refused (`400`).
//!
//! To deduplicate on `X-GitHub-Delivery` instead (a replay under a fresh id
//! then runs again), set
//! `Receiver::builder(github).dedup_key(|verified, _| verified.id.clone())`.
//!
//! ```
//! use std::time::SystemTime;
//! use webhooks_core::{Verifier, VerifyError, scheme::GitHub};
//!
//! // GitHub's documented example.
//! let github = GitHub::new("It's a Secret to Everybody")?;
//! let mut headers = http::HeaderMap::new();
//! headers.insert(
//!     "x-hub-signature-256",
//!     "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17".parse()?,
//! );
//! headers.insert("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958".parse()?);
//! headers.insert("x-github-event", "issues".parse()?);
//!
//! let verified = github.verify(&headers, b"Hello, World!", SystemTime::now())?;
//! assert_eq!(verified.id.as_deref(), Some("72d3162e-cc78-11e3-81ab-4c9367dc0958"));
//! assert_eq!(verified.event_type.as_deref(), Some("issues"));
//!
//! let tampered = github.verify(&headers, b"Hello, World?", SystemTime::now());
//! assert_eq!(tampered, Err(VerifyError::NoMatchingSignature));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::time::SystemTime;

use hmac::{Hmac, Mac as _};
use http::{HeaderMap, HeaderName};
use sha1::Sha1;

use super::credential::{self, OtherCredential};
use super::{
    SecretList, Secrets, encode_hex, header, optional_header, prefixed_hex, signed_headers,
};
use crate::{ConfigError, Identity, MatchedKey, Verified, Verifier, VerifyError};

const SIGNATURE_256: &str = "x-hub-signature-256";
const SIGNATURE_SHA1: &str = "x-hub-signature";
const DELIVERY: &str = "x-github-delivery";
const EVENT: &str = "x-github-event";
/// The same names, parsed once (see [`header`]).
static SIGNATURE_256_NAME: HeaderName = HeaderName::from_static(SIGNATURE_256);
static SIGNATURE_SHA1_NAME: HeaderName = HeaderName::from_static(SIGNATURE_SHA1);
static DELIVERY_NAME: HeaderName = HeaderName::from_static(DELIVERY);
static EVENT_NAME: HeaderName = HeaderName::from_static(EVENT);
const SCHEME: &str = "github";

type HmacSha1 = Hmac<Sha1>;

/// Verifies [GitHub](https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries)
/// deliveries.
///
/// * header `X-Hub-Signature-256: sha256=<64 hex digits>` over the exact body;
/// * the legacy `X-Hub-Signature: sha1=…` is refused (the request answers
///   `400 missing header x-hub-signature-256`) unless
///   [`allow_sha1`](GitHubBuilder::allow_sha1) is set, and even then it is used
///   only when the SHA-256 header is absent;
/// * [`Verified::id`] is `X-GitHub-Delivery` (required: `400` without it),
///   [`Verified::event_type`] is `X-GitHub-Event`; neither is signed, nor is
///   a timestamp, so deliveries are deduplicated on the body
///   ([`Identity::Content`]).
#[derive(Clone)]
pub struct GitHub {
    secrets: Secrets,
    /// The same secrets keyed for SHA-1, when it is allowed.
    sha1: Option<Secrets<HmacSha1>>,
}

impl fmt::Debug for GitHub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitHub")
            .field("secrets", &self.secrets)
            .field("allow_sha1", &self.sha1.is_some())
            .finish()
    }
}

impl GitHub {
    /// A verifier with one webhook secret, SHA-256 only.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Empty`] when the secret is empty.
    pub fn new(secret: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        Self::builder().secret(secret).build()
    }

    /// A builder for several secrets (rotation) and the SHA-1 fallback.
    pub fn builder() -> GitHubBuilder {
        GitHubBuilder::default()
    }

    /// The `X-Hub-Signature-256` value GitHub would send, signed with the first secret.
    #[must_use]
    pub fn sign(&self, body: &[u8]) -> String {
        let mac = self.secrets.sign(|mac| mac.update(body));
        format!("sha256={}", encode_hex(&mac))
    }

    /// The `X-Hub-Signature` (SHA-1) value GitHub would send, signed with the
    /// first secret, or `None` when SHA-1 is not allowed.
    #[must_use]
    pub fn sign_sha1(&self, body: &[u8]) -> Option<String> {
        let mac = self.sha1.as_ref()?.sign(|mac| mac.update(body));
        Some(format!("sha1={}", encode_hex(&mac)))
    }

    /// The headers GitHub would send: the signature, the delivery id and the event.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when `delivery` or `event` cannot be a header value.
    pub fn sign_headers(
        &self,
        delivery: &str,
        event: &str,
        body: &[u8],
    ) -> Result<HeaderMap, ConfigError> {
        signed_headers([
            (SIGNATURE_256, &self.sign(body), "signature"),
            (DELIVERY, delivery, "delivery id"),
            (EVENT, event, "event"),
        ])
    }
}

impl GitHub {
    /// `X-GitHub-Delivery`, once a signature header is known to be there.
    fn delivery<'h>(&self, headers: &'h HeaderMap) -> Result<&'h str, VerifyError> {
        let signed = headers.contains_key(&SIGNATURE_256_NAME)
            || (self.sha1.is_some() && headers.contains_key(&SIGNATURE_SHA1_NAME));
        if !signed {
            return Err(VerifyError::MissingHeader(SIGNATURE_256));
        }
        // GitHub always sends one: a request without it is not GitHub's.
        optional_header(headers, &DELIVERY_NAME, DELIVERY)?
            .ok_or(VerifyError::MissingHeader(DELIVERY))
    }
}

impl Verifier for GitHub {
    fn scheme(&self) -> &'static str {
        SCHEME
    }

    /// A signature header and `X-GitHub-Delivery` present: checked before
    /// the body is read.
    fn check_headers(&self, headers: &HeaderMap, _now: SystemTime) -> Result<(), VerifyError> {
        self.delivery(headers).map(|_| ())
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        _now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let delivery = self.delivery(headers)?;
        let index = match (headers.contains_key(&SIGNATURE_256_NAME), &self.sha1) {
            (false, Some(sha1)) if headers.contains_key(&SIGNATURE_SHA1_NAME) => {
                let signature = prefixed_hex::<20>(
                    header(headers, &SIGNATURE_SHA1_NAME, SIGNATURE_SHA1)?,
                    "sha1=",
                    SIGNATURE_SHA1,
                    "expected sha1=<hex>",
                    "not 40 hex digits",
                )?;
                sha1.first_match(&signature, |mac| mac.update(body))
                    .ok_or(VerifyError::NoMatchingSignature)?
            }
            _ => {
                let signature = prefixed_hex::<32>(
                    header(headers, &SIGNATURE_256_NAME, SIGNATURE_256)?,
                    "sha256=",
                    SIGNATURE_256,
                    "expected sha256=<hex>",
                    "not 64 hex digits",
                )?;
                (self.secrets)
                    .first_match(&signature, |mac| mac.update(body))
                    .ok_or(VerifyError::NoMatchingSignature)?
            }
        };
        Ok(Verified {
            scheme: SCHEME,
            id: Some(delivery.to_owned()),
            timestamp: None,
            event_type: optional_header(headers, &EVENT_NAME, EVENT)?.map(str::to_owned),
            matched_key: MatchedKey::Secret(index),
            scope: None,
            identity: Identity::Content,
        })
    }
}

/// Builds a [`GitHub`] verifier.
///
/// Errors in any secret are kept and reported by [`build`](Self::build).
#[derive(Default)]
#[must_use]
pub struct GitHubBuilder {
    secrets: SecretList,
    /// The same secrets keyed for SHA-1, kept only when it is allowed.
    sha1: SecretList<HmacSha1>,
    allow_sha1: bool,
}

debug_fields!(GitHubBuilder: secrets, allow_sha1, ..);

/// GitHub's token formats (personal, OAuth, user-to-server, server-to-server,
/// refresh), none of which is a webhook secret.
const TOKENS: &[OtherCredential] = &[OtherCredential::prefixed(
    &["ghp_", "github_pat_", "gho_", "ghu_", "ghs_", "ghr_"],
    "this is a GitHub token, not a webhook secret: use the secret entered in \
     the webhook's settings (Settings > Webhooks)",
)];

impl GitHubBuilder {
    /// Adds a webhook secret, used as the bytes given.
    ///
    /// A GitHub token (`ghp_…`, `github_pat_…` and the other
    /// [documented prefixes](https://docs.github.com/en/authentication/keeping-your-account-and-data-secure/about-authentication-to-github#githubs-token-formats))
    /// is refused: GitHub signs with the secret entered in the webhook's settings.
    pub fn secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        let secret = secret.as_ref();
        match credential::refuse(secret, TOKENS) {
            Ok(()) => {
                self.secrets.push(secret);
                self.sha1.push(secret);
            }
            Err(e) => self.secrets.fail(e),
        }
        self
    }

    secrets_method!("Adds several webhook secrets, in order.", AsRef<[u8]>);

    /// Accepts the legacy SHA-1 `X-Hub-Signature` when, and only when, the
    /// `X-Hub-Signature-256` header is absent (GitHub Enterprise Server before
    /// 3.0 sends only SHA-1). Off by default: HMAC-SHA1 is weaker, and a
    /// receiver that accepts it lets an attacker pick the weaker check.
    pub fn allow_sha1(mut self) -> Self {
        self.allow_sha1 = true;
        self
    }

    /// The verifier.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] met while adding secrets, or
    /// [`ConfigError::NoKeys`] when none was added.
    pub fn build(self) -> Result<GitHub, ConfigError> {
        let secrets = self.secrets.finish()?;
        // The SHA-1 keys come from the same secrets: the same errors, met first above.
        let sha1 = self.allow_sha1.then(|| self.sha1.finish()).transpose()?;
        Ok(GitHub { secrets, sha1 })
    }
}
