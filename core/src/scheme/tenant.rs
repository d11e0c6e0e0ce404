//! Per-tenant secrets: one endpoint receiving for many accounts, each with its own secret.
//!
//! A [`TenantVerifier`] reads the tenant id from the request (a path segment, a
//! header, or your own function), asks your [`KeyLookup`] for that tenant's
//! secrets (a database, a secret manager), builds the tenant's verifier of any
//! scheme with your factory, caches it, and verifies.
//!
//! | situation | answer |
//! |---|---|
//! | no tenant id in the request | `400` |
//! | lookup says the tenant is unknown (or has no secret) | `401` ([`VerifyError::UnknownKey`]) |
//! | lookup fails, or the tenant's secrets cannot build a verifier | `503` ([`VerifyError::KeyLookupUnavailable`]), so the sender retries |
//! | otherwise | the inner scheme's answer; [`MatchedKey::Lookup`] names the tenant |
//!
//! The tenant id is the delivery's [`Verified::scope`]: it is part of the
//! dedup key (`webhooks:stripe@acme:evt_1`), so a tenant signing another
//! tenant's delivery id with its own secret never makes that delivery a
//! duplicate.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::collections::HashMap;
//! use std::time::{Duration, SystemTime};
//! use webhooks_core::scheme::tenant::{KeyLookup, LookupError, Secret, TenantVerifier};
//! use webhooks_core::scheme::Stripe;
//! use webhooks_core::{MatchedKey, RequestHead, RequestVerifier, VerifyError};
//!
//! /// Your store of tenants' endpoint secrets.
//! struct Accounts(HashMap<String, Vec<String>>);
//!
//! #[async_trait::async_trait]
//! impl KeyLookup for Accounts {
//!     async fn secrets(&self, tenant: &str) -> Result<Option<Vec<Secret>>, LookupError> {
//!         Ok(self.0.get(tenant).map(|s| s.iter().map(Secret::from).collect()))
//!     }
//! }
//!
//! let accounts = Accounts(HashMap::from([("acme".into(), vec!["whsec_acme".into()])]));
//! // `POST /hooks/{tenant}/stripe`: the tenant id is path segment 1.
//! let verifier = TenantVerifier::builder(accounts, |secrets: &[Secret]| {
//!     Stripe::builder().secrets(secrets).build()
//! })
//! .tenant_from_path_segment(1)
//! .cache_ttl(Duration::from_secs(300))
//! .build()?;
//!
//! let headers = Stripe::new("whsec_acme")?.sign_headers(1_700_000_000, b"{}")?;
//! let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
//! let ok = verifier
//!     .verify_request(RequestHead::new("/hooks/acme/stripe", &headers), b"{}", now)
//!     .await?;
//! assert_eq!(ok.matched_key.to_string(), "acme#0");
//!
//! let unknown = verifier
//!     .verify_request(RequestHead::new("/hooks/globex/stripe", &headers), b"{}", now)
//!     .await;
//! assert_eq!(unknown, Err(VerifyError::UnknownKey));
//! # Ok(()) }
//! ```

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use moka::future::Cache;

use crate::{ConfigError, MatchedKey, RequestHead, RequestVerifier, Verified, VerifyError};

/// The longest tenant id accepted, in bytes.
const MAX_TENANT_LEN: usize = 256;
/// How long a tenant's verifier is cached by default.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(300);
/// How long "unknown tenant" is cached by default.
pub const DEFAULT_NEGATIVE_TTL: Duration = Duration::from_secs(30);
/// How many tenants are cached by default.
pub const DEFAULT_CACHE_CAPACITY: usize = 10_000;

/// A secret returned by a [`KeyLookup`], as text (`whsec_…`, a signing secret).
///
/// `Debug` never prints it. It is `AsRef<str>` and `AsRef<[u8]>`, so a slice of
/// them goes straight into any scheme builder's `secrets(…)`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Box<str>);

impl Secret {
    /// A secret from its text.
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into().into_boxed_str())
    }

    /// The secret's text.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// The text is wiped when the secret is dropped.
impl Drop for Secret {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

impl zeroize::ZeroizeOnDrop for Secret {}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl From<String> for Secret {
    fn from(secret: String) -> Self {
        Self::new(secret)
    }
}

impl From<&str> for Secret {
    fn from(secret: &str) -> Self {
        Self::new(secret)
    }
}

impl From<&String> for Secret {
    fn from(secret: &String) -> Self {
        Self::new(secret.as_str())
    }
}

impl AsRef<str> for Secret {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl AsRef<[u8]> for Secret {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// Why a [`KeyLookup`] could not answer (the store is unreachable, timed out…).
///
/// The request answers `503` so that the sender retries later. Keep secrets
/// out of the source error: it is logged.
#[derive(Debug, thiserror::Error)]
#[error("key lookup failed")]
pub struct LookupError(#[source] Box<dyn Error + Send + Sync>);

impl LookupError {
    /// Wraps the store's error, keeping it as the [`source`](Error::source).
    pub fn new(source: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Self(source.into())
    }
}

/// Where tenants' secrets live: your database, secret manager or configuration.
///
/// ```
/// use webhooks_core::scheme::tenant::{KeyLookup, LookupError, Secret};
///
/// struct Fixed;
///
/// #[async_trait::async_trait]
/// impl KeyLookup for Fixed {
///     async fn secrets(&self, tenant: &str) -> Result<Option<Vec<Secret>>, LookupError> {
///         match tenant {
///             // Current secret first, the previous one while the tenant rotates.
///             "acme" => Ok(Some(vec!["whsec_new".into(), "whsec_old".into()])),
///             "broken" => Err(LookupError::new("vault unreachable")),
///             _ => Ok(None),
///         }
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait KeyLookup: Send + Sync + 'static {
    /// The tenant's active secrets, newest first; `Ok(None)` (or an empty
    /// list) when the tenant is unknown.
    ///
    /// # Errors
    ///
    /// A [`LookupError`] when the store cannot answer now.
    async fn secrets(&self, tenant: &str) -> Result<Option<Vec<Secret>>, LookupError>;
}

#[async_trait::async_trait]
impl<L: KeyLookup + ?Sized> KeyLookup for Arc<L> {
    async fn secrets(&self, tenant: &str) -> Result<Option<Vec<Secret>>, LookupError> {
        (**self).secrets(tenant).await
    }
}

type Factory = dyn Fn(&[Secret]) -> Result<Arc<dyn RequestVerifier>, ConfigError> + Send + Sync;
type Extractor = dyn Fn(RequestHead<'_>) -> Option<String> + Send + Sync;

/// Where the tenant id is read from.
enum TenantSource {
    PathSegment(usize),
    /// The name as given, and parsed (lower-cased) by `build`.
    Header(&'static str, Option<http::HeaderName>),
    Custom(Box<Extractor>),
}

impl fmt::Debug for TenantSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PathSegment(i) => write!(f, "PathSegment({i})"),
            Self::Header(name, _) => write!(f, "Header({name:?})"),
            Self::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

impl TenantSource {
    fn tenant(&self, head: RequestHead<'_>) -> Result<Arc<str>, VerifyError> {
        let tenant = match self {
            Self::PathSegment(index) => head
                .path
                .trim_start_matches('/')
                .split('/')
                .nth(*index)
                .filter(|s| !s.is_empty())
                .ok_or(VerifyError::malformed(":path", "no tenant id segment"))?
                .to_owned(),
            Self::Header(name, parsed) => {
                let parsed = parsed.as_ref().ok_or(VerifyError::MissingHeader(name))?;
                crate::headers::get_str(head.headers, parsed)
                    .ok_or(VerifyError::MissingHeader(name))?
                    .map_err(|_| VerifyError::malformed(name, "not visible ASCII"))?
                    .trim()
                    .to_owned()
            }
            Self::Custom(f) => f(head).ok_or(VerifyError::malformed(
                "tenant id",
                "not found in the request",
            ))?,
        };
        if tenant.is_empty() {
            return Err(VerifyError::malformed("tenant id", "empty"));
        }
        if tenant.len() > MAX_TENANT_LEN {
            return Err(VerifyError::malformed("tenant id", "too long"));
        }
        // The id reaches logs and metrics: visible ASCII only.
        if !tenant.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(VerifyError::malformed("tenant id", "not visible ASCII"));
        }
        Ok(tenant.into())
    }
}

/// A cached lookup result: the tenant's verifier, or `None` for "unknown".
type Cached = Option<Arc<dyn RequestVerifier>>;

/// How long each cached answer lives: known tenants for `ttl`, unknown ones
/// for `negative_ttl`.
#[derive(Clone, Copy)]
struct Lifetimes {
    ttl: Duration,
    negative_ttl: Duration,
}

impl moka::Expiry<String, Cached> for Lifetimes {
    fn expire_after_create(&self, _: &String, value: &Cached, _: Instant) -> Option<Duration> {
        Some(if value.is_some() {
            self.ttl
        } else {
            self.negative_ttl
        })
    }
}

/// Verifies deliveries with per-tenant secrets found by a [`KeyLookup`].
///
/// See the [module documentation](self) for the statuses and an example.
///
/// Built verifiers are cached per tenant (in a [`moka`] cache) for
/// [`cache_ttl`](TenantVerifierBuilder::cache_ttl) (5 min by default),
/// unknown tenants for [`negative_cache_ttl`](TenantVerifierBuilder::negative_cache_ttl)
/// (30 s); failed lookups are not cached. Concurrent requests for a tenant
/// that is not cached share one lookup. Each distinct tenant id not cached
/// still costs one lookup: keep the lookup cheap (an indexed query), or put
/// a rate limit in front of the route. After changing a tenant's secrets,
/// call [`invalidate`](Self::invalidate) to use them at once.
pub struct TenantVerifier {
    lookup: Arc<dyn KeyLookup>,
    factory: Box<Factory>,
    source: TenantSource,
    cache: Cache<String, Cached>,
    lifetimes: Lifetimes,
    capacity: usize,
}

impl fmt::Debug for TenantVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TenantVerifier")
            .field("source", &self.source)
            .field("cached", &self.cache.entry_count())
            .field("cache_ttl", &self.lifetimes.ttl)
            .field("negative_cache_ttl", &self.lifetimes.negative_ttl)
            .field("cache_capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl TenantVerifier {
    /// A builder from the lookup and the factory that turns a tenant's
    /// secrets into its verifier (any scheme, any [`RequestVerifier`]).
    pub fn builder<L, F, V>(lookup: L, factory: F) -> TenantVerifierBuilder
    where
        L: KeyLookup,
        F: Fn(&[Secret]) -> Result<V, ConfigError> + Send + Sync + 'static,
        V: RequestVerifier + 'static,
    {
        TenantVerifierBuilder {
            lookup: Arc::new(lookup),
            factory: Box::new(move |secrets| {
                factory(secrets).map(|v| Arc::new(v) as Arc<dyn RequestVerifier>)
            }),
            source: None,
            ttl: DEFAULT_CACHE_TTL,
            negative_ttl: DEFAULT_NEGATIVE_TTL,
            capacity: DEFAULT_CACHE_CAPACITY,
        }
    }

    /// Forgets the cached verifier (or "unknown") of `tenant`: the next
    /// request looks it up again.
    pub async fn invalidate(&self, tenant: &str) {
        self.cache.invalidate(tenant).await;
    }

    /// Forgets every cached verifier.
    pub fn invalidate_all(&self) {
        self.cache.invalidate_all();
    }

    /// The tenant's verifier: from the cache, or looked up and built, once
    /// for all the requests that ask for it meanwhile.
    async fn verifier_for(
        &self,
        tenant: &Arc<str>,
    ) -> Result<Arc<dyn RequestVerifier>, VerifyError> {
        let cached = self
            .cache
            .try_get_with_by_ref(&**tenant, self.look_up(tenant))
            .await
            .map_err(|e| (*e).clone())?;
        cached.ok_or(VerifyError::UnknownKey)
    }

    /// Looks the tenant up and builds its verifier; `Ok(None)` for an unknown
    /// tenant (cached briefly), `Err` for a failure (not cached).
    async fn look_up(&self, tenant: &str) -> Result<Cached, VerifyError> {
        let secrets = match self.lookup.secrets(tenant).await {
            Ok(Some(secrets)) if !secrets.is_empty() => secrets,
            Ok(_) => return Ok(None),
            Err(e) => {
                tracing::warn!(
                    tenant = %tenant,
                    error = %e,
                    cause = e.source().map(tracing::field::display),
                    "tenant key lookup failed"
                );
                return Err(VerifyError::KeyLookupUnavailable);
            }
        };
        match (self.factory)(&secrets) {
            Ok(verifier) => Ok(Some(verifier)),
            Err(e) => {
                // The tenant's stored secrets are unusable: an operator must fix
                // them; the sender retries meanwhile.
                tracing::error!(tenant = %tenant, error = %e, "tenant secrets cannot build a verifier");
                Err(VerifyError::KeyLookupUnavailable)
            }
        }
    }
}

#[async_trait::async_trait]
impl RequestVerifier for TenantVerifier {
    /// `"tenant"`: the label of this route's metrics (the span and
    /// [`Verified::scheme`](crate::Verified::scheme) name the tenant's own
    /// scheme once a request verifies).
    fn scheme(&self) -> &'static str {
        "tenant"
    }

    async fn verify_request(
        &self,
        head: RequestHead<'_>,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let tenant = self.source.tenant(head)?;
        let verifier = self.verifier_for(&tenant).await?;
        let mut verified = verifier.verify_request(head, body, now).await?;
        // The tenant scopes the delivery's identity: another tenant, signing
        // the same id with its own secret, must not make this one a duplicate.
        verified.scope = Some(match verified.scope.take() {
            None => Arc::clone(&tenant),
            // An inner verifier that scopes too (tenants within a tenant):
            // both, with `/` and `%` in the tenant id escaped so the pair is unambiguous.
            Some(inner) => {
                let escaped = tenant.replace('%', "%25").replace('/', "%2F");
                format!("{escaped}/{inner}").into()
            }
        });
        verified.matched_key = match verified.matched_key {
            MatchedKey::Secret(index) | MatchedKey::PublicKey(index) => MatchedKey::Lookup {
                key_id: tenant,
                index,
            },
            // An inner verifier that already names its key keeps it.
            other @ MatchedKey::Lookup { .. } => other,
        };
        Ok(verified)
    }
}

/// Builds a [`TenantVerifier`].
#[must_use]
pub struct TenantVerifierBuilder {
    lookup: Arc<dyn KeyLookup>,
    factory: Box<Factory>,
    source: Option<TenantSource>,
    ttl: Duration,
    negative_ttl: Duration,
    capacity: usize,
}

impl fmt::Debug for TenantVerifierBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TenantVerifierBuilder")
            .field("source", &self.source)
            .field("cache_ttl", &self.ttl)
            .field("negative_cache_ttl", &self.negative_ttl)
            .field("cache_capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl TenantVerifierBuilder {
    /// Reads the tenant id from path segment `index`, counting from 0 after
    /// the leading `/` (`/hooks/{tenant}` is segment 1). Taken as is, not
    /// percent-decoded.
    pub fn tenant_from_path_segment(mut self, index: usize) -> Self {
        self.source = Some(TenantSource::PathSegment(index));
        self
    }

    /// Reads the tenant id from a header (`x-tenant-id`); its absence is a `400`.
    pub fn tenant_from_header(mut self, name: &'static str) -> Self {
        self.source = Some(TenantSource::Header(name, None));
        self
    }

    /// Reads the tenant id with your function (a subdomain from `Host`, a
    /// query parameter…); `None` is a `400`.
    pub fn tenant_from(
        mut self,
        extract: impl Fn(RequestHead<'_>) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.source = Some(TenantSource::Custom(Box::new(extract)));
        self
    }

    /// How long a tenant's verifier is cached (default 5 min; zero disables).
    pub fn cache_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How long an unknown tenant is remembered (default 30 s; zero disables),
    /// so a flood of requests for it does not reach the lookup.
    pub fn negative_cache_ttl(mut self, ttl: Duration) -> Self {
        self.negative_ttl = ttl;
        self
    }

    /// How many tenants are cached at most (default 10 000; zero disables).
    pub fn cache_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// The verifier.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Setting`] when no tenant id source was chosen, or the
    /// tenant header name is not a valid header name.
    pub fn build(self) -> Result<TenantVerifier, ConfigError> {
        let mut source = self
            .source
            .ok_or(ConfigError::Setting("no tenant id source"))?;
        if let TenantSource::Header(name, parsed) = &mut source {
            // Parsed once (lower-cased: names are case-insensitive).
            *parsed = Some(
                http::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| ConfigError::Setting("invalid tenant header name"))?,
            );
        }
        let lifetimes = Lifetimes {
            ttl: self.ttl,
            negative_ttl: self.negative_ttl,
        };
        let cache = Cache::builder()
            .max_capacity(u64::try_from(self.capacity).unwrap_or(u64::MAX))
            .expire_after(lifetimes)
            .build();
        Ok(TenantVerifier {
            lookup: self.lookup,
            factory: self.factory,
            source,
            cache,
            lifetimes,
            capacity: self.capacity,
        })
    }
}
