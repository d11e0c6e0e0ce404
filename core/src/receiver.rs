//! The receive pipeline both framework adapters call:
//! limit → verify → claim → handler → complete or release.
//!
//! | situation | store | response |
//! |---|---|---|
//! | `Content-Length` above the limit | — | 413, before a byte of the body is read |
//! | body grows past the limit while reading | — | 413, reading stops at the limit |
//! | missing or malformed signature headers | — | 400 + short reason |
//! | bad signature, timestamp outside tolerance | — | 401 + short reason |
//! | verified, first time | claim (atomic, lease, random token) | handler runs |
//! | same id while another attempt holds the claim | — | 409 + `Retry-After` (≥ 1 s) |
//! | same id after a completed attempt | — | 200 + `webhook-duplicate: true` |
//! | store unreachable at claim | — | 503 + `Retry-After` (or, with [`StoreFailure::Open`], the handler runs) |
//! | handler answered 2xx | complete (token-checked) | the handler's response |
//! | handler answered anything else | release (token-checked) | the handler's response |
//! | handler panicked | release | 500 |
//! | request dropped mid-handler | release, best effort | — |
//! | process crashed holding the claim | the lease expires; the next retry takes over | — |
//! | complete fails after a 2xx | logged | the handler's response |
//!
//! Verification happens before the claim, so a forged request can never claim
//! a real delivery id.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::{SystemTime, UNIX_EPOCH};
//! use webhooks_core::{Receiver, Rejection, scheme::StandardWebhooks};
//!
//! let verifier = StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
//! let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
//! let headers = verifier.sign_headers("msg_1", now, b"{}")?;
//! let receiver = Receiver::new(verifier); // in-process dedup, 1 MiB limit
//!
//! let (mut parts, ()) = http::Request::post("/webhooks").body(())?.into_parts();
//! parts.headers = headers;
//! let handler = |_parts, _delivery| async move { 204u16 };
//! let first = receiver.process(parts.clone(), "{}".into(), handler, |s| *s).await;
//! assert_eq!(first, Ok(204));
//! // The sender retries: acknowledged, the handler does not run again.
//! let again = receiver.process(parts, "{}".into(), handler, |s| *s).await;
//! assert_eq!(again, Err(Rejection::Duplicate));
//! # Ok(()) }
//! ```

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use futures_util::FutureExt as _;
use http::{HeaderMap, Response, header};
use tracing::{Instrument as _, field};

use crate::dedup::{Claim, ClaimToken, DedupStore, Transition};
use crate::{Delivery, Rejection, RequestHead, RequestVerifier, Verified};

/// The default body limit: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
/// The default claim lease: how long one attempt may run before a retry may take over.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);
/// The default retention of completed ids: 7 days (senders retry for up to 3).
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// The default `Retry-After` when the store is unavailable.
pub const DEFAULT_STORE_RETRY_AFTER: Duration = Duration::from_secs(5);
/// The default longest `Retry-After` sent with a 409 while another attempt
/// holds the delivery.
pub const DEFAULT_IN_FLIGHT_RETRY_AFTER: Duration = Duration::from_secs(5);
/// The default key namespace.
pub const DEFAULT_NAMESPACE: &str = "webhooks";

/// A framework's request, as the pipeline needs to see it before the handler:
/// its path and headers. The adapters implement it for their request types.
pub trait Incoming {
    /// The path and headers.
    fn head(&self) -> RequestHead<'_>;
}

impl Incoming for http::request::Parts {
    fn head(&self) -> RequestHead<'_> {
        RequestHead::new(self.uri.path(), &self.headers)
    }
}

/// What to do when the dedup store cannot be reached at claim time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreFailure {
    /// Answer `503` with `Retry-After`; the handler does not run (the default).
    #[default]
    Closed,
    /// Run the handler without deduplication, and log a warning.
    Open,
}

type KeyFn = Arc<dyn Fn(&Verified, &[u8]) -> Option<String> + Send + Sync>;
type RejectFn = Arc<dyn Fn(&Rejection) -> Response<Bytes> + Send + Sync>;
type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

struct Inner {
    verifier: Arc<dyn RequestVerifier>,
    store: Option<Arc<dyn DedupStore>>,
    body_limit: usize,
    lease: Duration,
    retention: Duration,
    namespace: String,
    key_fn: Option<KeyFn>,
    store_failure: StoreFailure,
    store_retry_after: Duration,
    in_flight_retry_after: Duration,
    on_reject: Option<RejectFn>,
    clock: Clock,
    inbox: Option<crate::inbox::accept::InboxAccept>,
}

/// The configured receive pipeline. Cheap to clone (one `Arc`).
///
/// Build it with [`Receiver::new`] (in-process dedup, defaults everywhere) or
/// [`Receiver::builder`]. The framework adapters wrap one of these.
#[derive(Clone)]
pub struct Receiver {
    inner: Arc<Inner>,
}

impl fmt::Debug for Receiver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        f.debug_struct("Receiver")
            .field("body_limit", &i.body_limit)
            .field("dedup", &i.store.is_some())
            .field("lease", &i.lease)
            .field("retention", &i.retention)
            .field("namespace", &i.namespace)
            .field("store_failure", &i.store_failure)
            .field("inbox", &i.inbox.is_some())
            .finish_non_exhaustive()
    }
}

impl Receiver {
    /// A pipeline with the defaults: 1 MiB body limit, in-process dedup
    /// (with the `memory` feature; none without it), 60 s lease, 7 days retention.
    pub fn new(verifier: impl RequestVerifier + 'static) -> Self {
        Self::builder(verifier).build()
    }

    /// A builder to change the defaults.
    pub fn builder(verifier: impl RequestVerifier + 'static) -> ReceiverBuilder {
        ReceiverBuilder::new(Arc::new(verifier))
    }

    /// The body limit in bytes.
    #[must_use]
    pub fn body_limit(&self) -> usize {
        self.inner.body_limit
    }

    /// The first step, before reading the body: refuses a `Content-Length`
    /// above the limit (413) or one that is not a number (400).
    ///
    /// # Errors
    ///
    /// [`Rejection::PayloadTooLarge`] or [`Rejection::BodyRead`].
    pub fn check_head(&self, headers: &HeaderMap) -> Result<(), Rejection> {
        let Some(value) = headers.get(header::CONTENT_LENGTH) else {
            return Ok(());
        };
        let length: u64 = value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .ok_or(Rejection::BodyRead)?;
        if length > self.inner.body_limit as u64 {
            return Err(Rejection::PayloadTooLarge {
                limit: self.inner.body_limit,
            });
        }
        Ok(())
    }

    /// The response for a rejection: the user's function if one was set,
    /// otherwise [`Rejection::to_response`].
    #[must_use]
    pub fn rejection_response(&self, rejection: &Rejection) -> Response<Bytes> {
        match &self.inner.on_reject {
            // A stored delivery is an acknowledgement, not a failure to shape.
            Some(f) if !matches!(rejection, Rejection::Stored { .. }) => f(rejection),
            _ => rejection.to_response(),
        }
    }

    /// Verifies the body and claims the delivery, without running anything.
    ///
    /// The building block of [`process`](Self::process), public for queue
    /// workers and custom integrations. The returned [`Admission`] must be
    /// settled; dropping it releases the claim.
    ///
    /// # Errors
    ///
    /// Every [`Rejection`] the table above lists before the handler.
    pub async fn admit(&self, head: RequestHead<'_>, body: Bytes) -> Result<Admission, Rejection> {
        let inner = &self.inner;
        let now = (inner.clock)();
        let headers = head.headers;
        let verified = inner.verifier.verify_request(head, &body, now).await?;
        let span = tracing::Span::current();
        span.record("scheme", verified.scheme);
        if let Some(id) = &verified.id {
            span.record("id", id.as_str());
        }
        span.record("key", field::display(&verified.matched_key));

        let id = match &inner.key_fn {
            Some(f) => f(&verified, &body),
            None => verified.id.clone(),
        };
        if let Some(inbox) = &inner.inbox {
            // Inbox mode: the inbox's unique key is the dedup; workers run the handler.
            let (ns, retry) = (&inner.namespace, inner.store_retry_after);
            return Err(inbox.store(ns, id, verified, headers, body, retry).await);
        }
        let Some(store) = &inner.store else {
            return Ok(Admission::unclaimed(Delivery::new(verified, None, body)));
        };
        let Some(id) = id else {
            return Ok(Admission::unclaimed(Delivery::new(verified, None, body)));
        };
        let key = format!("{}:{}:{}", inner.namespace, verified.scheme, id);
        let token = ClaimToken::random();
        match store.claim(&key, token, inner.lease).await {
            Ok(Claim::Claimed) => Ok(Admission {
                claim: Some(ClaimGuard {
                    store: Arc::clone(store),
                    key: key.clone(),
                    token,
                    retention: inner.retention,
                    settled: false,
                }),
                delivery: Delivery::new(verified, Some(key), body),
            }),
            Ok(Claim::InFlight { retry_after }) => Err(Rejection::InFlight {
                // The other attempt usually ends long before its lease: ask
                // the sender back soon, never later than the lease allows.
                retry_after: retry_after
                    .min(inner.in_flight_retry_after)
                    .max(Duration::from_secs(1)),
            }),
            Ok(Claim::Completed) => Err(Rejection::Duplicate),
            Err(error) => match inner.store_failure {
                StoreFailure::Closed => {
                    tracing::error!(error = %error, "dedup store unavailable at claim; answering 503");
                    Err(Rejection::StoreUnavailable {
                        retry_after: inner.store_retry_after,
                    })
                }
                StoreFailure::Open => {
                    tracing::warn!(error = %error, "dedup store unavailable at claim; running the handler without deduplication (fail-open)");
                    Ok(Admission::unclaimed(Delivery::new(
                        verified,
                        Some(key),
                        body,
                    )))
                }
            },
        }
    }

    /// The whole pipeline for one request whose body has been read (within
    /// [`body_limit`](Self::body_limit)): verify, claim, run `handler` with the
    /// request (headers, path, extensions) and the verified delivery, then
    /// complete (when `status_of` the handler's output is 2xx) or release.
    ///
    /// A panic in `handler` (or in the future it returns) is caught: the claim
    /// is released and [`Rejection::HandlerPanicked`] returned. If the returned
    /// future is dropped mid-handler, the claim is released in the background.
    /// Each call runs in a `webhook` tracing span with the id, scheme, matched
    /// key, outcome and latency (never the body or a secret).
    ///
    /// # Errors
    ///
    /// A [`Rejection`] when the handler did not run or panicked.
    pub async fn process<R, F, Fut, T>(
        &self,
        request: R,
        body: Bytes,
        handler: F,
        status_of: impl FnOnce(&T) -> u16,
    ) -> Result<T, Rejection>
    where
        R: Incoming,
        F: FnOnce(R, Delivery) -> Fut,
        Fut: Future<Output = T>,
    {
        let span = tracing::info_span!(
            "webhook",
            scheme = field::Empty,
            id = field::Empty,
            key = field::Empty,
            outcome = field::Empty,
            status = field::Empty,
            latency_ms = field::Empty,
        );
        let started = Instant::now();
        let result = async {
            let admission = self.admit(request.head(), body).await?;
            admission
                .run(|delivery| handler(request, delivery), status_of)
                .await
        }
        .instrument(span.clone())
        .await;
        let _enter = span.enter();
        span.record("latency_ms", started.elapsed().as_secs_f64() * 1000.0);
        match &result {
            Ok(_) => tracing::debug!("webhook handled"),
            Err(stored @ Rejection::Stored { .. }) => {
                span.record("outcome", stored.kind());
                tracing::debug!("webhook stored in the inbox");
            }
            Err(rejection) => {
                span.record("outcome", rejection.kind());
                span.record("status", rejection.status().as_u16());
                if rejection.status().is_server_error() {
                    tracing::warn!(reason = %rejection, "webhook not processed");
                } else {
                    tracing::info!(reason = %rejection, "webhook refused");
                }
            }
        }
        result
    }
}

/// A verified delivery and, when deduplicated, the claim on it.
///
/// Settle it with [`run`](Self::run) or through its [`ClaimGuard`]; dropping
/// it unsettled releases the claim in the background.
#[derive(Debug)]
#[non_exhaustive]
pub struct Admission {
    /// The verified delivery.
    pub delivery: Delivery,
    /// The claim, when the delivery is deduplicated.
    pub claim: Option<ClaimGuard>,
}

impl Admission {
    fn unclaimed(delivery: Delivery) -> Self {
        Self {
            delivery,
            claim: None,
        }
    }

    /// Runs `handler` with the delivery, catching panics, then completes the
    /// claim if `status_of` its output is 2xx and releases it otherwise.
    ///
    /// # Errors
    ///
    /// [`Rejection::HandlerPanicked`] when the handler panicked.
    pub async fn run<F, Fut, T>(
        self,
        handler: F,
        status_of: impl FnOnce(&T) -> u16,
    ) -> Result<T, Rejection>
    where
        F: FnOnce(Delivery) -> Fut,
        Fut: Future<Output = T>,
    {
        let Self { delivery, claim } = self;
        let outcome = match std::panic::catch_unwind(AssertUnwindSafe(|| handler(delivery))) {
            Ok(fut) => AssertUnwindSafe(fut).catch_unwind().await,
            Err(panic) => Err(panic),
        };
        let span = tracing::Span::current();
        match outcome {
            Ok(output) => {
                let status = status_of(&output);
                span.record("status", status);
                let success = (200..300).contains(&status);
                span.record(
                    "outcome",
                    if success {
                        "processed"
                    } else {
                        "handler_failed"
                    },
                );
                if let Some(claim) = claim {
                    if success {
                        claim.complete().await;
                    } else {
                        claim.release().await;
                    }
                }
                Ok(output)
            }
            Err(_) => {
                tracing::error!("webhook handler panicked; claim released");
                if let Some(claim) = claim {
                    claim.release().await;
                }
                Err(Rejection::HandlerPanicked)
            }
        }
    }
}

/// One attempt's claim on a delivery.
///
/// [`complete`](Self::complete) or [`release`](Self::release) it; when it is
/// dropped unsettled (the request future was dropped), it releases the claim
/// on the current tokio runtime in the background, best effort.
pub struct ClaimGuard {
    store: Arc<dyn DedupStore>,
    key: String,
    token: ClaimToken,
    retention: Duration,
    settled: bool,
}

impl fmt::Debug for ClaimGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClaimGuard")
            .field("key", &self.key)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl ClaimGuard {
    /// The namespaced key the delivery was claimed under.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Marks the delivery processed. Returns whether the claim still held;
    /// a stale claim (the lease expired and another attempt took over) or a
    /// store error is logged and changes nothing.
    pub async fn complete(mut self) -> bool {
        self.settled = true;
        match self
            .store
            .complete(&self.key, self.token, self.retention)
            .await
        {
            Ok(Transition::Applied) => true,
            Ok(Transition::Stale) => {
                tracing::warn!(key = %self.key, "complete refused: the claim's lease expired and another attempt took over");
                false
            }
            Err(error) => {
                tracing::error!(key = %self.key, error = %error, "complete failed after a 2xx; a retry may run the handler again");
                false
            }
        }
    }

    /// Forgets the claim so the sender's retry can run. Returns whether the
    /// claim still held.
    pub async fn release(mut self) -> bool {
        self.settled = true;
        match self.store.release(&self.key, self.token).await {
            Ok(Transition::Applied) => true,
            Ok(Transition::Stale) => false,
            Err(error) => {
                tracing::warn!(key = %self.key, error = %error, "release failed; the lease will expire instead");
                false
            }
        }
    }
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(key = %self.key, "claim dropped outside a runtime; the lease will expire instead");
            return;
        };
        let store = Arc::clone(&self.store);
        let key = std::mem::take(&mut self.key);
        let token = self.token;
        runtime.spawn(async move {
            if let Err(error) = store.release(&key, token).await {
                tracing::warn!(key = %key, error = %error, "release after a dropped request failed; the lease will expire instead");
            }
        });
    }
}

/// Configures a [`Receiver`].
#[must_use]
pub struct ReceiverBuilder {
    inner: Inner,
}

impl fmt::Debug for ReceiverBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReceiverBuilder").finish_non_exhaustive()
    }
}

impl ReceiverBuilder {
    fn new(verifier: Arc<dyn RequestVerifier>) -> Self {
        #[cfg(feature = "memory")]
        let store: Option<Arc<dyn DedupStore>> = Some(Arc::new(crate::dedup::MemoryStore::new()));
        #[cfg(not(feature = "memory"))]
        let store: Option<Arc<dyn DedupStore>> = None;
        Self {
            inner: Inner {
                verifier,
                store,
                body_limit: DEFAULT_BODY_LIMIT,
                lease: DEFAULT_LEASE,
                retention: DEFAULT_RETENTION,
                namespace: DEFAULT_NAMESPACE.to_owned(),
                key_fn: None,
                store_failure: StoreFailure::Closed,
                store_retry_after: DEFAULT_STORE_RETRY_AFTER,
                in_flight_retry_after: DEFAULT_IN_FLIGHT_RETRY_AFTER,
                on_reject: None,
                clock: Arc::new(SystemTime::now),
                inbox: None,
            },
        }
    }

    /// The largest body accepted, in bytes (default 1 MiB).
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.inner.body_limit = bytes;
        self
    }

    /// The dedup store (default: in-process [`MemoryStore`](crate::dedup::MemoryStore)).
    pub fn store(mut self, store: impl DedupStore) -> Self {
        self.inner.store = Some(Arc::new(store));
        self
    }

    /// The dedup store, chosen at run time.
    pub fn shared_store(mut self, store: Arc<dyn DedupStore>) -> Self {
        self.inner.store = Some(store);
        self
    }

    /// No deduplication: every verified delivery runs the handler.
    pub fn no_dedup(mut self) -> Self {
        self.inner.store = None;
        self
    }

    /// How long one attempt may hold a delivery before a retry may take over
    /// (default 60 s). Set it above your handler's worst-case duration.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.inner.lease = lease;
        self
    }

    /// How long a completed id is remembered (default 7 days).
    pub fn retention(mut self, retention: Duration) -> Self {
        self.inner.retention = retention;
        self
    }

    /// The prefix of every dedup key (default `webhooks`); give each route that
    /// shares a store its own.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.inner.namespace = namespace.into();
        self
    }

    /// Derives the dedup id from the verified delivery (for schemes without an
    /// id, or to deduplicate on an event id in the body). `None` means: do not
    /// deduplicate this delivery.
    pub fn dedup_key(
        mut self,
        f: impl Fn(&Verified, &[u8]) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.inner.key_fn = Some(Arc::new(f));
        self
    }

    /// Deduplicates on a JSON field of the body, named by a JSON pointer
    /// (`"/id"`, `"/data/event_id"`); strings and numbers are used as is.
    pub fn dedup_key_json_pointer(self, pointer: impl Into<String>) -> Self {
        let pointer = pointer.into();
        self.dedup_key(move |_, body| json_pointer_id(body, &pointer))
    }

    /// What to do when the store is unreachable at claim (default: fail closed, 503).
    pub fn on_store_failure(mut self, policy: StoreFailure) -> Self {
        self.inner.store_failure = policy;
        self
    }

    /// The `Retry-After` sent with a 503 when the store is unreachable (default 5 s).
    pub fn store_retry_after(mut self, after: Duration) -> Self {
        self.inner.store_retry_after = after;
        self
    }

    /// The longest `Retry-After` sent with a 409 while another attempt holds
    /// the delivery (default 5 s; the remaining lease when that is shorter;
    /// never under 1 s).
    pub fn in_flight_retry_after(mut self, after: Duration) -> Self {
        self.inner.in_flight_retry_after = after;
        self
    }

    /// Replaces the response of every rejection (the status decision stays
    /// in [`Rejection::status`]; this only shapes what is sent).
    pub fn on_reject(
        mut self,
        f: impl Fn(&Rejection) -> Response<Bytes> + Send + Sync + 'static,
    ) -> Self {
        self.inner.on_reject = Some(Arc::new(f));
        self
    }

    /// The clock used for timestamp tolerance (default `SystemTime::now`).
    pub fn clock(mut self, clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.inner.clock = Arc::new(clock);
        self
    }

    /// Inbox mode: each verified delivery is stored in `inbox` (its dedup
    /// key unique: a stored delivery's retry is answered as a duplicate), the
    /// sender answered `202` once it is stored, and [`Worker`](crate::inbox::Worker)s
    /// run the handler; the route's own handler is not called. Store down:
    /// `503` + `Retry-After` ([`store_retry_after`](Self::store_retry_after)),
    /// never fail-open. The dedup store is not used.
    pub fn inbox(mut self, inbox: Arc<dyn crate::inbox::Inbox>) -> Self {
        self.inner.inbox = Some(crate::inbox::accept::InboxAccept::new(inbox));
        self
    }

    /// The status answered once a delivery is stored in the inbox (default
    /// `202 Accepted`). Needs [`inbox`](Self::inbox) first.
    pub fn inbox_status(mut self, status: http::StatusCode) -> Self {
        if let Some(inbox) = &mut self.inner.inbox {
            inbox.status = status;
        }
        self
    }

    /// Request headers stored with each inbox event and handed to the worker
    /// (default none). Needs [`inbox`](Self::inbox) first.
    pub fn inbox_keep_headers(mut self, names: impl IntoIterator<Item = http::HeaderName>) -> Self {
        if let Some(inbox) = &mut self.inner.inbox {
            inbox.keep_headers = names.into_iter().collect();
        }
        self
    }

    /// The pipeline.
    pub fn build(self) -> Receiver {
        Receiver {
            inner: Arc::new(self.inner),
        }
    }
}

/// Reads a string or number at `pointer` in a JSON body.
pub(crate) fn json_pointer_id(body: &[u8], pointer: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    match value.pointer(pointer)? {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
