//! The [`Verifier`] trait every signature scheme implements, and what it returns.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use http::{HeaderMap, HeaderName};
use sha2::{Digest as _, Sha256};

use crate::PublicUrl;
use crate::VerifyError;
use crate::headers::HeaderLookup;

/// Which configured secret or key verified a delivery.
///
/// During a rotation the receiver holds the old and the new secret; watching
/// this value (it is on every [`Verified`] and in the delivery's tracing span)
/// tells an operator when the old one has stopped being used.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MatchedKey {
    /// The symmetric secret at this index, in the order they were configured.
    Secret(usize),
    /// The public key at this index, in the order they were configured.
    PublicKey(usize),
    /// A key found by a lookup (a tenant's secret), with the lookup's key id
    /// and the index among the secrets it returned.
    Lookup {
        /// The id the key was looked up by (a tenant id, a key id).
        key_id: Arc<str>,
        /// The index among the secrets the lookup returned.
        index: usize,
    },
}

impl fmt::Display for MatchedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Secret(i) => write!(f, "secret#{i}"),
            Self::PublicKey(i) => write!(f, "public_key#{i}"),
            Self::Lookup { key_id, index } => write!(f, "{key_id}#{index}"),
        }
    }
}

/// What identifies a delivery for deduplication: whether its id can be
/// trusted to stop replays.
///
/// | scheme | identity | a captured delivery replayed… |
/// |---|---|---|
/// | Standard Webhooks, Stripe | [`SignedId`](Self::SignedId) | …under its id: a duplicate; under another id: `401` |
/// | GitHub, Shopify, [`GenericHmac`](crate::scheme::GenericHmac) | [`Content`](Self::Content) | …under any id: a duplicate (same body) |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Identity {
    /// [`Verified::id`], which the signature covers (Standard Webhooks'
    /// `webhook-id`, Stripe's body `id`): a replay cannot change it without
    /// breaking the signature.
    #[default]
    SignedId,
    /// The body's SHA-256: the scheme's id travels in a header the signature
    /// does not cover (GitHub's `X-GitHub-Delivery`, Shopify's
    /// `X-Shopify-Webhook-Id`), so anyone who captured a delivery could resend
    /// it under a fresh id. [`Verified::id`] still carries the provider's id,
    /// for logs and handlers.
    Content,
    /// [`Verified::id`] is a token the signature covers, unique per request
    /// across every route that trusts the same key, while the event data is
    /// **not** signed (Mailgun's `token`): only the token stops a captured
    /// signature from carrying other event data, to this route or to another
    /// one of the same account. The receive pipeline therefore claims the
    /// token under the route-independent namespace
    /// [`REPLAY_NAMESPACE`](crate::receiver::REPLAY_NAMESPACE), whatever the route's
    /// namespace or custom [`dedup_key`](crate::ReceiverBuilder::dedup_key),
    /// and never fails open on it: share one store between every route of
    /// the account.
    ReplayToken,
}

/// What a [`Verifier`] established about an authentic delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verified {
    /// The scheme's name (`"standard-webhooks"`, `"stripe"`…).
    pub scheme: &'static str,
    /// The delivery id the sender gave, if the scheme carries one.
    pub id: Option<String>,
    /// The signed timestamp, in Unix seconds, if the scheme signs one.
    pub timestamp: Option<u64>,
    /// The event type the sender gave in a header, if any (GitHub's
    /// `X-GitHub-Event`, Shopify's topic).
    pub event_type: Option<String>,
    /// Which secret or key matched.
    pub matched_key: MatchedKey,
    /// Whose delivery this is, when one endpoint receives for several senders
    /// (the tenant, set by `TenantVerifier`).
    /// Part of the dedup key: one sender's ids never collide with another's.
    pub scope: Option<Arc<str>>,
    /// What the delivery is deduplicated on by default.
    pub identity: Identity,
}

impl Verified {
    /// A verification result with only the scheme and the matched key set
    /// (no scope, [`Identity::SignedId`]).
    ///
    /// For custom [`Verifier`] implementations; add the rest with the `with_*` methods.
    #[must_use]
    pub fn new(scheme: &'static str, matched_key: MatchedKey) -> Self {
        Self {
            scheme,
            id: None,
            timestamp: None,
            event_type: None,
            matched_key,
            scope: None,
            identity: Identity::SignedId,
        }
    }

    /// Sets the delivery id. It is deduplicated on as it is, so it must be
    /// covered by the signature; otherwise also set [`Identity::Content`].
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Sets the signed timestamp (Unix seconds).
    #[must_use]
    pub fn with_timestamp(mut self, timestamp: u64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }

    /// Sets the event type.
    #[must_use]
    pub fn with_event_type(mut self, event_type: impl Into<String>) -> Self {
        self.event_type = Some(event_type.into());
        self
    }

    /// Sets whose delivery this is (a tenant, an account): see [`scope`](Self::scope).
    #[must_use]
    pub fn with_scope(mut self, scope: impl Into<Arc<str>>) -> Self {
        self.scope = Some(scope.into());
        self
    }

    /// Sets what the delivery is deduplicated on.
    #[must_use]
    pub fn with_identity(mut self, identity: Identity) -> Self {
        self.identity = identity;
        self
    }

    /// What the receive pipeline deduplicates this delivery on when no
    /// [`dedup_key`](crate::ReceiverBuilder::dedup_key) function is set: the
    /// signed [`id`](Self::id) (`None` when the scheme carries none), or for
    /// [`Identity::Content`] `sha256:<hex>` of `body`, the exact bytes verified.
    ///
    /// ```
    /// use webhooks_core::{Identity, MatchedKey, Verified};
    ///
    /// let signed = Verified::new("acme", MatchedKey::Secret(0)).with_id("evt_1");
    /// assert_eq!(signed.dedup_id(b"{}").as_deref(), Some("evt_1"));
    /// let unsigned = signed.with_identity(Identity::Content);
    /// assert_eq!(
    ///     unsigned.dedup_id(b"{}").as_deref(),
    ///     Some("sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a")
    /// );
    /// ```
    #[must_use]
    pub fn dedup_id(&self, body: &[u8]) -> Option<String> {
        self.dedup_id_ref(body).map(std::borrow::Cow::into_owned)
    }

    /// [`dedup_id`](Self::dedup_id), borrowing a signed id instead of
    /// copying it.
    pub(crate) fn dedup_id_ref(&self, body: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
        match self.identity {
            Identity::SignedId | Identity::ReplayToken => {
                self.id.as_deref().map(std::borrow::Cow::Borrowed)
            }
            Identity::Content => Some(std::borrow::Cow::Owned(format!(
                "sha256:{}",
                crate::scheme::encode_hex(&Sha256::digest(body))
            ))),
        }
    }

    /// The dedup key of the delivery identified by `id` under `namespace`:
    /// `{namespace}:{scheme}:{id}`, or with a [`scope`](Self::scope)
    /// `{namespace}:{scheme}@{scope}:{id}`, where `%` and `:` in the scope
    /// are percent-encoded so that no scope can spell another's keys.
    ///
    /// ```
    /// use webhooks_core::{MatchedKey, Verified};
    ///
    /// let v = Verified::new("stripe", MatchedKey::Secret(0));
    /// assert_eq!(v.dedup_key("webhooks", "evt_1"), "webhooks:stripe:evt_1");
    /// let v = v.with_scope("acme:eu");
    /// assert_eq!(v.dedup_key("webhooks", "evt_1"), "webhooks:stripe@acme%3Aeu:evt_1");
    /// ```
    #[must_use]
    pub fn dedup_key(&self, namespace: &str, id: &str) -> String {
        match &self.scope {
            None => {
                // Sized once: this runs for every deduplicated delivery.
                let mut key =
                    String::with_capacity(namespace.len() + self.scheme.len() + id.len() + 2);
                for part in [namespace, ":", self.scheme, ":", id] {
                    key.push_str(part);
                }
                key
            }
            Some(scope) => {
                let scope = scope.replace('%', "%25").replace(':', "%3A");
                format!("{namespace}:{}@{scope}:{id}", self.scheme)
            }
        }
    }
}

/// A signature scheme: decides whether a request is an authentic, fresh delivery.
///
/// It receives the request headers, the exact raw body bytes and the current
/// time (passed in, so tests and replays can fix the clock). Implementations are
/// `Send + Sync` so that one verifier serves every request as `Arc<dyn Verifier>`.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use std::sync::Arc;
/// use webhooks_core::{Verifier, scheme::StandardWebhooks};
///
/// let verifier: Arc<dyn Verifier> =
///     Arc::new(StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap());
/// let mut headers = http::HeaderMap::new();
/// headers.insert("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek".parse().unwrap());
/// headers.insert("webhook-timestamp", "1614265330".parse().unwrap());
/// headers.insert(
///     "webhook-signature",
///     "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=".parse().unwrap(),
/// );
/// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1614265330);
/// let verified = verifier.verify(&headers, br#"{"test": 2432232314}"#, now).unwrap();
/// assert_eq!(verified.id.as_deref(), Some("msg_p5jXN8AQM9LWM0D4loKWxJek"));
/// ```
pub trait Verifier: Send + Sync {
    /// The scheme's name, as [`Verified::scheme`] reports it (`"stripe"`…):
    /// the `scheme` label of the pipeline's metrics and tracing span, known
    /// before a request verifies. Defaults to `"custom"`.
    fn scheme(&self) -> &'static str {
        "custom"
    }

    /// Verifies one request.
    ///
    /// # Errors
    ///
    /// A [`VerifyError`] saying why the request is not an authentic, fresh delivery.
    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError>;

    /// Verifies one request, seeing its path and query too.
    ///
    /// Schemes that sign the request URL (Twilio, Square, Mandrill,
    /// HubSpot, a [`GenericHmac`](crate::scheme::GenericHmac) with `{url}`)
    /// override this; the receive pipeline calls it. The default calls
    /// [`verify`](Self::verify).
    ///
    /// # Errors
    ///
    /// As [`verify`](Self::verify).
    fn verify_head(
        &self,
        head: RequestHead<'_>,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        self.verify(head.header_map(), body, now)
    }

    /// The answer to a provider handshake, if this verified request is one
    /// (Zoom's URL validation, Discord's PING, Slack's URL verification):
    /// the pipeline then answers it itself, and neither stores it nor runs
    /// the handler. Called only after [`verify`](Self::verify) succeeded.
    /// Defaults to `None`.
    fn handshake(&self, verified: &Verified, body: &[u8]) -> Option<crate::Handshake> {
        let _ = (verified, body);
        None
    }

    /// Checks, before the body is read, what the headers alone can tell:
    /// the scheme's signature header present and well-formed, its signed
    /// timestamp inside the tolerance. The receive pipeline calls it when
    /// the body did not come with the head, before waiting for it, so a
    /// request that must fail is answered at once instead of after its body
    /// (which an attacker can trickle for the whole body timeout); a body
    /// that came with the head goes straight to [`verify`](Self::verify).
    /// The default checks nothing.
    ///
    /// An implementation refuses only what [`verify`](Self::verify) would
    /// refuse, with the error `verify` would give for any body: the
    /// pipeline relies on it when it skips this check.
    ///
    /// # Errors
    ///
    /// The [`VerifyError`] that `verify` would return whatever the body.
    fn check_headers(&self, headers: &HeaderMap, now: SystemTime) -> Result<(), VerifyError> {
        let _ = (headers, now);
        Ok(())
    }

    /// [`check_headers`](Self::check_headers) on the request's head, which
    /// the receive pipeline calls. The default calls `check_headers` with
    /// [`RequestHead::header_map`]; a scheme that reads the headers through
    /// [`HeaderLookup`] overrides it (and [`verify_head`](Self::verify_head))
    /// so that a framework's own header map is never copied.
    ///
    /// # Errors
    ///
    /// As [`check_headers`](Self::check_headers).
    fn check_request_head(
        &self,
        head: RequestHead<'_>,
        now: SystemTime,
    ) -> Result<(), VerifyError> {
        self.check_headers(head.header_map(), now)
    }

    /// The groups of header names this scheme reads on every request with
    /// [`HeaderLookup::get_first_of`] (each group: one header under
    /// its alternative names), `'static` so that the list is recognised by
    /// its address. The receive pipeline reads them once, before
    /// [`check_request_head`](Self::check_request_head), and answers that
    /// reading again to [`verify_head`](Self::verify_head) instead of
    /// looking the headers up twice. Defaults to none.
    ///
    /// [`HeaderLookup::get_first_of`]: crate::HeaderLookup::get_first_of
    fn head_names(&self) -> &'static [&'static [HeaderName]] {
        &[]
    }

    /// The request headers this scheme reads a credential from (a
    /// signature, a token), for the console and the inbox admin API to show
    /// redacted ([`Redaction::verifier`](crate::redact::Redaction::verifier)).
    /// Defaults to none: the built-in schemes' headers are recognised by
    /// their names ([`is_credential_header`](crate::redact::is_credential_header));
    /// a scheme whose header name is configured (the generic HMAC's) lists it.
    fn credential_headers(&self) -> Vec<HeaderName> {
        Vec::new()
    }
}

impl<V: Verifier + ?Sized> Verifier for Arc<V> {
    fn scheme(&self) -> &'static str {
        (**self).scheme()
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        (**self).verify(headers, body, now)
    }

    fn verify_head(
        &self,
        head: RequestHead<'_>,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        (**self).verify_head(head, body, now)
    }

    fn handshake(&self, verified: &Verified, body: &[u8]) -> Option<crate::Handshake> {
        (**self).handshake(verified, body)
    }

    fn check_headers(&self, headers: &HeaderMap, now: SystemTime) -> Result<(), VerifyError> {
        (**self).check_headers(headers, now)
    }

    fn check_request_head(
        &self,
        head: RequestHead<'_>,
        now: SystemTime,
    ) -> Result<(), VerifyError> {
        (**self).check_request_head(head, now)
    }

    fn head_names(&self) -> &'static [&'static [HeaderName]] {
        (**self).head_names()
    }

    fn credential_headers(&self) -> Vec<HeaderName> {
        (**self).credential_headers()
    }
}

impl<V: Verifier + ?Sized> Verifier for Box<V> {
    fn scheme(&self) -> &'static str {
        (**self).scheme()
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        (**self).verify(headers, body, now)
    }

    fn verify_head(
        &self,
        head: RequestHead<'_>,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        (**self).verify_head(head, body, now)
    }

    fn handshake(&self, verified: &Verified, body: &[u8]) -> Option<crate::Handshake> {
        (**self).handshake(verified, body)
    }

    fn check_headers(&self, headers: &HeaderMap, now: SystemTime) -> Result<(), VerifyError> {
        (**self).check_headers(headers, now)
    }

    fn check_request_head(
        &self,
        head: RequestHead<'_>,
        now: SystemTime,
    ) -> Result<(), VerifyError> {
        (**self).check_request_head(head, now)
    }

    fn head_names(&self) -> &'static [&'static [HeaderName]] {
        (**self).head_names()
    }

    fn credential_headers(&self) -> Vec<HeaderName> {
        (**self).credential_headers()
    }
}

/// What a [`RequestVerifier`] sees of a request: its path, query and headers.
///
/// Schemes that sign the URL the provider called rebuild it with
/// [`url`](Self::url) from a configured [`PublicUrl`]: behind a proxy the
/// `Host` header is not the public host, so it is never trusted by default.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct RequestHead<'a> {
    /// The request path (without the query), as received (percent-encoded).
    pub path: &'a str,
    /// The query string (without the `?`), as received, if the request had one.
    pub query: Option<&'a str>,
    /// The request headers, read in place ([`HeaderLookup`]: an
    /// [`http::HeaderMap`], or a framework's own map).
    pub headers: &'a dyn HeaderLookup,
}

/// The path and query; not the headers (they carry signatures).
impl fmt::Debug for RequestHead<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestHead")
            .field("path", &self.path)
            .field("query", &self.query)
            .finish_non_exhaustive()
    }
}

impl<'a> RequestHead<'a> {
    /// A request head from a path and headers, without a query.
    #[must_use]
    pub fn new(path: &'a str, headers: &'a dyn HeaderLookup) -> Self {
        Self {
            path,
            query: None,
            headers,
        }
    }

    /// A request head from the request target's path and query
    /// (`/sms?a=1`), split at the first `?`.
    ///
    /// ```
    /// # use webhooks_core::RequestHead;
    /// let headers = http::HeaderMap::new();
    /// let head = RequestHead::from_path_and_query("/sms?a=1&b=2", &headers);
    /// assert_eq!((head.path, head.query), ("/sms", Some("a=1&b=2")));
    /// ```
    #[must_use]
    pub fn from_path_and_query(path_and_query: &'a str, headers: &'a dyn HeaderLookup) -> Self {
        // A plain loop: cheaper than `split_once`'s searcher on a short path.
        match path_and_query.bytes().position(|b| b == b'?') {
            Some(at) => Self::new(&path_and_query[..at], headers)
                .with_query(Some(&path_and_query[at + 1..])),
            None => Self::new(path_and_query, headers),
        }
    }

    /// The same head with the query string set.
    #[must_use]
    pub fn with_query(mut self, query: Option<&'a str>) -> Self {
        self.query = query;
        self
    }

    /// The headers as an [`http::HeaderMap`] ([`HeaderLookup::header_map`]):
    /// the map itself when the request's headers are one, otherwise a copy
    /// made once, on first use.
    #[must_use]
    pub fn header_map(&self) -> &'a HeaderMap {
        self.headers.header_map()
    }

    /// The path followed by `?` and the query when there is one.
    #[must_use]
    pub fn path_and_query(&self) -> String {
        match self.query {
            Some(query) => format!("{}?{query}", self.path),
            None => self.path.to_owned(),
        }
    }

    /// The URL the provider called, as [`public`](PublicUrl) says to
    /// rebuild it.
    ///
    /// # Errors
    ///
    /// With [`PublicUrl::from_host_header`] or
    /// [`PublicUrl::from_forwarded_headers`]: a `400` when the header it
    /// reads is missing or not a plain host.
    pub fn url(&self, public: &PublicUrl) -> Result<String, VerifyError> {
        public.url_of(self)
    }
}

/// The asynchronous form of [`Verifier`] the receive pipeline calls.
///
/// Every [`Verifier`] is a `RequestVerifier`. Implement this directly only when
/// verifying needs I/O or the request path, as the per-tenant key lookup does.
#[async_trait::async_trait]
pub trait RequestVerifier: Send + Sync {
    /// The scheme's name (see [`Verifier::scheme`]). Defaults to `"custom"`.
    fn scheme(&self) -> &'static str {
        "custom"
    }

    /// Verifies one request.
    ///
    /// # Errors
    ///
    /// A [`VerifyError`] saying why the request is not an authentic, fresh delivery.
    async fn verify_request(
        &self,
        head: RequestHead<'_>,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError>;

    /// Verifies one request at once when that needs no I/O: `Some` with
    /// what [`verify_request`](Self::verify_request) would answer, or `None`
    /// (the default) when only `verify_request` can tell.
    ///
    /// Every [`Verifier`] answers here, so the pipeline verifies it without
    /// allocating a future; an implementation whose
    /// `verify_request` may wait (a key lookup) keeps the default.
    ///
    /// ```
    /// use std::time::SystemTime;
    /// use webhooks_core::{RequestHead, RequestVerifier, scheme::StandardWebhooks};
    ///
    /// let verifier = StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    /// let headers = http::HeaderMap::new();
    /// let head = RequestHead::new("/hook", &headers);
    /// let answer = verifier.verify_ready(head, b"{}", SystemTime::now());
    /// assert!(matches!(answer, Some(Err(_))), "unsigned: refused at once");
    /// ```
    fn verify_ready(
        &self,
        head: RequestHead<'_>,
        body: &[u8],
        now: SystemTime,
    ) -> Option<Result<Verified, VerifyError>> {
        let _ = (head, body, now);
        None
    }

    /// The answer to a provider handshake (see [`Verifier::handshake`]).
    /// Defaults to `None`.
    fn handshake(&self, verified: &Verified, body: &[u8]) -> Option<crate::Handshake> {
        let _ = (verified, body);
        None
    }

    /// Checks, before the body is read, what the request's head alone can
    /// tell (see [`Verifier::check_headers`], which every [`Verifier`]
    /// answers here). The default checks nothing.
    ///
    /// # Errors
    ///
    /// The [`VerifyError`] that [`verify_request`](Self::verify_request)
    /// would return whatever the body.
    fn check_head(&self, head: RequestHead<'_>, now: SystemTime) -> Result<(), VerifyError> {
        let _ = (head, now);
        Ok(())
    }

    /// The groups of header names read on every request, once per request
    /// (see [`Verifier::head_names`]). Defaults to none.
    fn head_names(&self) -> &'static [&'static [HeaderName]] {
        &[]
    }

    /// The request headers this scheme reads a credential from (see
    /// [`Verifier::credential_headers`]). Defaults to none.
    fn credential_headers(&self) -> Vec<HeaderName> {
        Vec::new()
    }
}

#[async_trait::async_trait]
impl<V: Verifier + ?Sized> RequestVerifier for V {
    fn scheme(&self) -> &'static str {
        Verifier::scheme(self)
    }

    fn verify_ready(
        &self,
        head: RequestHead<'_>,
        body: &[u8],
        now: SystemTime,
    ) -> Option<Result<Verified, VerifyError>> {
        Some(self.verify_head(head, body, now))
    }

    fn check_head(&self, head: RequestHead<'_>, now: SystemTime) -> Result<(), VerifyError> {
        self.check_request_head(head, now)
    }

    fn head_names(&self) -> &'static [&'static [HeaderName]] {
        Verifier::head_names(self)
    }

    fn credential_headers(&self) -> Vec<HeaderName> {
        Verifier::credential_headers(self)
    }

    async fn verify_request(
        &self,
        head: RequestHead<'_>,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        self.verify_head(head, body, now)
    }

    fn handshake(&self, verified: &Verified, body: &[u8]) -> Option<crate::Handshake> {
        Verifier::handshake(self, verified, body)
    }
}
