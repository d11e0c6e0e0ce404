//! The receive pipeline both framework adapters call:
//! limit → verify → claim → handler → complete or release.
//!
//! | situation | store | response |
//! |---|---|---|
//! | `Content-Length` above the limit | — | 413, before a byte of the body is read |
//! | body grows past the limit while reading | — | 413, reading stops at the limit |
//! | body not fully received within the body timeout | — | 408 |
//! | missing or malformed signature headers | — | 400 + short reason (from the head alone, before the body is read, where the scheme can tell) |
//! | bad signature, timestamp outside tolerance | — | 401 + short reason (a timestamp outside the tolerance: before the body is read) |
//! | verified, first time | claim (atomic, lease, random token) | handler runs |
//! | handler still running | lease renewed every third of the lease | — |
//! | same id while another attempt holds the claim | — | 409 + `Retry-After` (≥ 1 s) |
//! | same id after a completed attempt | — | 200 + `webhook-duplicate: true` |
//! | store unreachable at claim | — | 503 + `Retry-After` (or, with [`StoreFailure::Open`], the handler runs without a dedup key; never for a [replay token](crate::Identity::ReplayToken)) |
//! | store refuses the key for good at claim | — | 400 |
//! | handler answered 2xx | complete (token-checked) | the handler's response |
//! | complete fails after a 2xx | retried in the background with backoff, lease still renewed | the handler's response |
//! | handler answered anything else | release (token-checked) | the handler's response |
//! | handler panicked | release | 500 |
//! | request dropped mid-handler | release, in the background | — |
//! | request dropped after the handler answered | complete or release finishes (a runtime task) | — |
//! | request dropped while claiming | the lease expires; the next retry takes over | — |
//! | renewals fail and another attempt takes over | the late complete is refused and logged | the handler's response |
//! | process crashed holding the claim | the lease expires; the next retry takes over | — |
//!
//! Keys reach the store only as short printable ASCII: any other key is
//! replaced by `{namespace}:#sha256:{hex}` of it, so control bytes and
//! oversized ids are deduplicated like any other, never refused by a store.
//! An `on_reject` hook shapes the body and headers of rejections; their
//! status, `Retry-After` and `webhook-duplicate` stay the library's.
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
use std::fmt::Write as _;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use futures_util::FutureExt as _;
use futures_util::future::Either;
use http::{Response, header};
use sha2::{Digest as _, Sha256};
use tokio::sync::oneshot;
use tracing::{Instrument as _, field};

use crate::dedup::{Claim, ClaimToken, DedupStore, StoreError, Transition};
use crate::signals::{Signals, StoreOp};
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
/// The namespace of every [`Identity::ReplayToken`](crate::Identity::ReplayToken)
/// (Mailgun's token), whatever the route's: a token seen by one route is
/// refused by every route sharing the store.
pub const REPLAY_NAMESPACE: &str = "webhooks-replay";
/// The default longest time reading a request body may take: 30 s.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// The default time a failed `complete` is retried in the background: 5 minutes.
pub const DEFAULT_COMPLETE_RETRY: Duration = Duration::from_secs(300);

/// A framework's request, as the pipeline needs to see it before the handler:
/// its path and headers. The adapters implement it for their request types.
pub trait Incoming {
    /// The path and headers.
    fn head(&self) -> RequestHead<'_>;
}

impl Incoming for http::request::Parts {
    fn head(&self) -> RequestHead<'_> {
        RequestHead::new(self.uri.path(), &self.headers).with_query(self.uri.query())
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
    body_timeout: Duration,
    lease: Duration,
    retention: Duration,
    namespace: String,
    key_fn: Option<KeyFn>,
    store_failure: StoreFailure,
    store_retry_after: Duration,
    in_flight_retry_after: Duration,
    complete_retry: Duration,
    on_reject: Option<RejectFn>,
    clock: Clock,
    inbox: Option<crate::inbox::accept::InboxAccept>,
    signals: Arc<Signals>,
    /// Completions this process retries in the background.
    pending: Arc<PendingCompletions>,
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
            .field("body_timeout", &i.body_timeout)
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
    #[track_caller]
    pub fn new(verifier: impl RequestVerifier + 'static) -> Self {
        Self::builder(verifier).build()
    }

    /// A builder to change the defaults.
    #[track_caller]
    pub fn builder(verifier: impl RequestVerifier + 'static) -> ReceiverBuilder {
        ReceiverBuilder::new(Arc::new(verifier), std::panic::Location::caller())
    }

    /// The body limit in bytes.
    #[must_use]
    pub fn body_limit(&self) -> usize {
        self.inner.body_limit
    }

    /// Whether an [`on_reject`](ReceiverBuilder::on_reject) hook shapes
    /// rejection responses. Without one, [`rejection_response`](Self::rejection_response)
    /// is [`Rejection::to_response`], so an adapter's extractors need the
    /// receiver only when this is `true`.
    #[must_use]
    pub fn has_on_reject(&self) -> bool {
        self.inner.on_reject.is_some()
    }

    /// Whether this pipeline stores deliveries in an inbox
    /// ([`ReceiverBuilder::inbox`]): then no route handler ever runs, and
    /// the adapters' inbox routes need none.
    #[must_use]
    pub fn has_inbox(&self) -> bool {
        self.inner.inbox.is_some()
    }

    /// How long reading the body may take.
    #[must_use]
    pub fn body_timeout(&self) -> Duration {
        self.inner.body_timeout
    }

    /// The first step, before reading the body: refuses a `Content-Length`
    /// above the limit (413) or one that is not a number (400).
    ///
    /// # Errors
    ///
    /// [`Rejection::PayloadTooLarge`] or [`Rejection::BodyRead`].
    pub fn check_head(&self, headers: &dyn crate::HeaderLookup) -> Result<(), Rejection> {
        let Some(value) = crate::headers::get_str(headers, &header::CONTENT_LENGTH) else {
            return Ok(());
        };
        let length: u64 = value
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

    /// The scheme's checks of the head before the body is read
    /// ([`RequestVerifier::check_head`]: signature header present and
    /// well-formed, signed timestamp inside the tolerance): a request that
    /// must fail is answered at once, without waiting for its body.
    fn check_signature_head(&self, head: RequestHead<'_>) -> Result<(), Rejection> {
        let started = Instant::now();
        let now = (self.inner.clock)();
        self.inner.verifier.check_head(head, now).map_err(|error| {
            (self.inner.signals).verify_failed(self.inner.verifier.scheme(), started.elapsed());
            error.into()
        })
    }

    /// Runs `read` (an adapter's limited body read) under the body timeout.
    ///
    /// # Errors
    ///
    /// [`Rejection::BodyTimeout`] when `read` has not finished within
    /// [`body_timeout`](Self::body_timeout); otherwise `read`'s own rejection.
    pub async fn read_body<F>(&self, read: F) -> Result<Bytes, Rejection>
    where
        F: Future<Output = Result<Bytes, Rejection>>,
    {
        // A body that is already here (most are: it came with the head)
        // needs no timer; the deadline is armed only if the read must wait.
        let mut read = std::pin::pin!(read);
        if let Poll::Ready(done) =
            std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await
        {
            return done;
        }
        tokio::time::timeout(self.inner.body_timeout, read)
            .await
            .unwrap_or(Err(Rejection::BodyTimeout))
    }

    /// The response for a rejection: the user's `on_reject` function shapes
    /// the body and headers, otherwise [`Rejection::to_response`]. Either way
    /// the status, `Retry-After` and `webhook-duplicate` are the library's,
    /// set after the hook ran.
    #[must_use]
    pub fn rejection_response(&self, rejection: &Rejection) -> Response<Bytes> {
        match &self.inner.on_reject {
            // A stored delivery is an acknowledgement, not a failure to
            // shape; a handshake's answer is the provider's protocol.
            Some(f)
                if !matches!(
                    rejection,
                    Rejection::Stored { .. } | Rejection::Handshake(_)
                ) =>
            {
                let mut response = f(rejection);
                rejection.apply_protocol(&mut response);
                response
            }
            _ => rejection.to_response(),
        }
    }

    /// The response for a rejection in parts
    /// ([`Rejection::response_parts`]) when it is the library's own, or
    /// `None` when the `on_reject` hook shapes it (then
    /// [`rejection_response`](Self::rejection_response)): for an adapter to
    /// build its framework's response without an intermediate
    /// [`http::Response`].
    #[must_use]
    pub fn rejection_parts(&self, rejection: &Rejection) -> Option<crate::ResponseParts> {
        let shaped = self.inner.on_reject.is_some()
            && !matches!(
                rejection,
                Rejection::Stored { .. } | Rejection::Handshake(_)
            );
        (!shaped).then(|| rejection.response_parts())
    }

    /// Verifies the body and claims the delivery, without running anything.
    ///
    /// The building block of [`process`](Self::process), public for queue
    /// workers and custom integrations. The returned [`Admission`] must be
    /// settled; dropping it releases the claim. [`Admission::run`] renews
    /// the lease while the handler runs; without it, call
    /// [`ClaimGuard::start_renewal`].
    ///
    /// # Errors
    ///
    /// Every [`Rejection`] the table above lists before the handler.
    pub async fn admit(&self, head: RequestHead<'_>, body: Bytes) -> Result<Admission, Rejection> {
        let now = (self.inner.clock)();
        let verify_started = Instant::now();
        // A verifier that needs no I/O answers at once, without a boxed future.
        // (`if let`, and `match` inside a `let`: neither the verifier's
        // answer nor the step is kept across an await.)
        let result = if let Some(result) = self.inner.verifier.verify_ready(head, &body, now) {
            result
        } else {
            self.inner.verifier.verify_request(head, &body, now).await
        };
        // What follows verification is synchronous unless the store (or the
        // inbox) must be awaited: then its state is boxed, so that this
        // future (carried in every request's) stays small.
        let admitting = match self.after_verify(result, verify_started, head.headers, body) {
            Step::Done(admitted) => return admitted,
            Step::Wait(admitting) => admitting,
        };
        admitting.await
    }

    /// Everything [`admit`](Self::admit) does once the verifier answered:
    /// signals and span fields, the dedup id, then the inbox or the claim.
    fn after_verify<'a>(
        &'a self,
        result: Result<Verified, crate::VerifyError>,
        verify_started: Instant,
        headers: &'a dyn crate::HeaderLookup,
        body: Bytes,
    ) -> Step<'a> {
        let inner = &self.inner;
        let scheme = inner.verifier.scheme();
        // One clock reading ends the verification and starts the claim.
        let verified_at = Instant::now();
        let verified = match result {
            Ok(verified) => {
                let took = verified_at.saturating_duration_since(verify_started);
                inner.signals.verified(scheme, &verified.matched_key, took);
                verified
            }
            Err(error) => {
                let took = verified_at.saturating_duration_since(verify_started);
                inner.signals.verify_failed(scheme, took);
                return Step::Done(Err(error.into()));
            }
        };
        let observer = Observer {
            signals: Arc::clone(&inner.signals),
            scheme,
        };
        let span = tracing::Span::current();
        span.record("scheme", verified.scheme);
        if let Some(id) = &verified.id {
            span.record("id", id.as_str());
        }
        span.record("key", field::display(&verified.matched_key));

        if let Some(answer) = inner.verifier.handshake(&verified, &body) {
            // Answered by the library in both modes: never stored, claimed
            // or handed to the handler.
            return Step::Done(Err(Rejection::Handshake(Box::new(answer))));
        }
        // A replay token (Mailgun's) is the only guard of data the signature
        // does not cover: it is claimed under one namespace for every route,
        // and a custom dedup key does not replace it.
        let replay_token = verified.identity == crate::Identity::ReplayToken;
        let id = match &inner.key_fn {
            Some(f) if !replay_token => f(&verified, &body).map(std::borrow::Cow::Owned),
            _ => verified.dedup_id_ref(&body),
        };
        if let Some(inbox) = &inner.inbox {
            // Inbox mode: the inbox's unique key is the dedup; workers run the handler.
            let (ns, retry) = (&inner.namespace, inner.store_retry_after);
            let id = id.map(std::borrow::Cow::into_owned);
            let stored = inbox.store(ns, id, verified, headers, body, retry);
            return Step::Wait(Box::pin(async move { Err(stored.await) }));
        }
        let (Some(store), Some(id)) = (&inner.store, id) else {
            return Step::Done(Ok(Admission::unclaimed(Delivery::new(
                verified, None, body,
            ))
            .observed(observer)));
        };
        let key_namespace = key_namespace(&inner.namespace, &verified);
        let key = store_key(key_namespace, verified.dedup_key(key_namespace, &id));
        let claiming = Claiming {
            verified,
            key,
            token: ClaimToken::random(),
            body,
            observer,
            started: verified_at,
        };
        if let Some(token) = inner.pending.token(&claiming.key) {
            // This process handled the delivery and retries its completion:
            // record it first and answer the redelivery as a duplicate,
            // rather than let the claim be taken over and run it again.
            return Step::Wait(Box::pin(self.pending_first(store, claiming, token)));
        }
        // A store that needs no I/O answers at once, without a boxed future.
        match store.claim_ready(&claiming.key, claiming.token, inner.lease) {
            Some(claimed) => Step::Done(self.claimed(store, claimed, claiming)),
            None => Step::Wait(Box::pin(async move {
                let claimed = (**store)
                    .claim(&claiming.key, claiming.token, inner.lease)
                    .await;
                self.claimed(store, claimed, claiming)
            })),
        }
    }

    /// A redelivery of a key whose completion this process retries in the
    /// background: that completion is tried first. Recorded, or still
    /// failing: a duplicate (the handler succeeded here). Refused (another
    /// process took the claim over meanwhile): claimed as usual.
    async fn pending_first(
        &self,
        store: &Arc<dyn DedupStore>,
        claiming: Claiming,
        token: ClaimToken,
    ) -> Result<Admission, Rejection> {
        let inner = &self.inner;
        let key = &claiming.key;
        match (**store).complete(key, token, inner.retention).await {
            Ok(Transition::Applied) => {
                inner.pending.remove(key, token);
                tracing::info!(key = %key, "a pending completion recorded before its redelivery; answered as a duplicate");
                Err(Rejection::Duplicate)
            }
            Err(error) => {
                tracing::warn!(key = %key, error = %error, "a redelivery of a delivery whose completion is still pending; answered as a duplicate");
                Err(Rejection::Duplicate)
            }
            Ok(Transition::Stale) => {
                inner.pending.remove(key, token);
                let claimed = (**store)
                    .claim(&claiming.key, claiming.token, inner.lease)
                    .await;
                self.claimed(store, claimed, claiming)
            }
        }
    }

    /// The store's answer to a claim, as an admission or a rejection.
    fn claimed(
        &self,
        store: &Arc<dyn DedupStore>,
        claimed: Result<Claim, StoreError>,
        claiming: Claiming,
    ) -> Result<Admission, Rejection> {
        let inner = &self.inner;
        let Claiming {
            verified,
            key,
            token,
            body,
            observer,
            started,
        } = claiming;
        let scheme = observer.scheme;
        inner.signals.claimed(scheme, started.elapsed());
        if claimed.is_err() {
            inner.signals.store_error(scheme, StoreOp::Claim);
        }
        match claimed {
            Ok(Claim::Claimed) => {
                let claim =
                    ClaimGuard::start(Arc::clone(store), &key, token, inner, observer.clone());
                Ok(Admission {
                    claim: Some(claim),
                    delivery: Delivery::new(verified, Some(key), body),
                    observer: Some(observer),
                })
            }
            Ok(Claim::InFlight { retry_after }) => Err(Rejection::InFlight {
                // The other attempt usually ends long before its lease: ask
                // the sender back soon, never later than the lease allows.
                retry_after: retry_after
                    .min(inner.in_flight_retry_after)
                    .max(Duration::from_secs(1)),
            }),
            Ok(Claim::Completed) => Err(Rejection::Duplicate),
            Err(error) => {
                // Never open on a replay token: it is the only guard.
                let policy = match verified.identity {
                    crate::Identity::ReplayToken => StoreFailure::Closed,
                    _ => inner.store_failure,
                };
                match policy {
                    StoreFailure::Closed if error.is_permanent() => {
                        tracing::error!(error = %error, "dedup store refused the key at claim; answering 400");
                        Err(Rejection::IdRefused)
                    }
                    StoreFailure::Closed => {
                        tracing::error!(error = %error, "dedup store unavailable at claim; answering 503");
                        Err(Rejection::StoreUnavailable {
                            retry_after: inner.store_retry_after,
                        })
                    }
                    StoreFailure::Open => {
                        tracing::error!(error = %error, "dedup store failed at claim; running the handler without deduplication (fail-open)");
                        // Nothing was claimed: the delivery carries no dedup key.
                        Ok(Admission::unclaimed(Delivery::new(verified, None, body))
                            .observed(observer))
                    }
                }
            }
        }
    }

    /// The whole pipeline for one request whose body has been read (within
    /// [`body_limit`](Self::body_limit)): verify, claim, run `handler` with the
    /// request (headers, path, extensions) and the verified delivery, then
    /// complete (when `status_of` the handler's output is 2xx) or release.
    ///
    /// A panic in `handler` (or in the future it returns) is caught: the claim
    /// is released and [`Rejection::HandlerPanicked`] returned. If the returned
    /// future is dropped mid-handler, the claim is released in the background;
    /// once the handler has answered, the completion (or release) finishes
    /// even if the future is dropped. Each call runs in a `webhook` tracing
    /// span with the id, scheme, matched key, outcome and latency (never the
    /// body or a secret).
    ///
    /// # Errors
    ///
    /// A [`Rejection`] when the handler did not run or panicked.
    pub fn process<R, F, Fut, T>(
        &self,
        request: R,
        body: Bytes,
        handler: F,
        status_of: impl FnOnce(&T) -> u16,
    ) -> impl Future<Output = Result<T, Rejection>>
    where
        R: Incoming,
        F: FnOnce(R, Delivery) -> Fut,
        Fut: Future<Output = T>,
    {
        // Boxed here, before anything holds it: the caller's future then
        // carries a pointer, not the work (nor a second copy of these
        // arguments, as an `async fn`'s state would).
        self.traced(Box::pin(async move {
            self.inner
                .signals
                .body_read(self.inner.verifier.scheme(), body.len());
            let admission = self.admit(request.head(), body).await?;
            admission
                .run(|delivery| handler(request, delivery), status_of)
                .await
        }))
    }

    /// The whole pipeline from the request head on, as the adapters call it:
    /// [`check_head`](Self::check_head), the scheme's checks of the head
    /// ([`RequestVerifier::check_head`]), then `read_body` (the adapter's read
    /// of the body, stopping at [`body_limit`](Self::body_limit)) under the
    /// [body timeout](Self::body_timeout), then [`process`](Self::process).
    /// Every step runs in the `webhook` span.
    ///
    /// # Errors
    ///
    /// A [`Rejection`] when the handler did not run or panicked.
    pub fn receive<R, B, F, Fut, T>(
        &self,
        request: R,
        read_body: B,
        handler: F,
        status_of: impl FnOnce(&T) -> u16,
    ) -> impl Future<Output = Result<T, Rejection>>
    where
        R: Incoming,
        B: Future<Output = Result<Bytes, Rejection>>,
        F: FnOnce(R, Delivery) -> Fut,
        Fut: Future<Output = T>,
    {
        // Boxed at once, as in `process`.
        self.traced(Box::pin(
            self.receive_work(request, read_body, handler, status_of),
        ))
    }

    /// The work [`receive`](Self::receive) boxes: one allocation per
    /// request, kept small enough for the allocator's per-thread cache
    /// (glibc serves requests up to 1,032 bytes from it; a larger block
    /// takes its slower shared path; see the test `receive_work_fits_the_thread_cache`).
    // Not an `async fn`: that would copy every argument into the state a
    // second time (1,200 bytes instead of 968 in the size test below).
    #[allow(clippy::manual_async_fn)]
    fn receive_work<R, B, F, Fut, T>(
        &self,
        request: R,
        read_body: B,
        handler: F,
        status_of: impl FnOnce(&T) -> u16,
    ) -> impl Future<Output = Result<T, Rejection>>
    where
        R: Incoming,
        B: Future<Output = Result<Bytes, Rejection>>,
        F: FnOnce(R, Delivery) -> Fut,
        Fut: Future<Output = T>,
    {
        async move {
            self.check_head(request.head().headers)?;
            self.check_signature_head(request.head())?;
            let body = self.read_body(read_body).await?;
            self.inner
                .signals
                .body_read(self.inner.verifier.scheme(), body.len());
            let admission = self.admit(request.head(), body).await?;
            admission
                .run(|delivery| handler(request, delivery), status_of)
                .await
        }
    }

    /// Runs `work` in a `webhook` span and logs its outcome.
    async fn traced<T, W>(&self, work: Pin<Box<W>>) -> Result<T, Rejection>
    where
        W: Future<Output = Result<T, Rejection>>,
    {
        let scheme = self.inner.verifier.scheme();
        let span = tracing::info_span!(
            "webhook",
            scheme,
            route = %self.inner.namespace,
            id = field::Empty,
            key = field::Empty,
            outcome = field::Empty,
            status = field::Empty,
            latency_us = field::Empty,
        );
        if span_unseen(&span) {
            // Nothing to enter, record or time: the outcome's events only.
            self.inner.signals.received(scheme);
            let result = work.await;
            self.outcome(scheme, &result, &tracing::Span::none());
            return result;
        }
        let started = Instant::now();
        self.inner.signals.received(scheme);
        let result = work.instrument(span.clone()).await;
        let _enter = span.enter();
        span.record(
            "latency_us",
            u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
        );
        self.outcome(scheme, &result, &span);
        result
    }

    /// The outcome of a delivery: its signals, the `webhook` span's fields
    /// and the log line.
    fn outcome<T>(
        &self,
        scheme: &'static str,
        result: &Result<T, Rejection>,
        span: &tracing::Span,
    ) {
        match result {
            // Per-delivery success stays below INFO: enable DEBUG for the
            // `webhooks_core` target (or read the span) to see each one.
            Ok(_) => tracing::debug!("webhook handled"),
            Err(stored @ Rejection::Stored { .. }) => {
                span.record("outcome", stored.kind());
                tracing::debug!("webhook stored in the inbox");
            }
            // Answered, not refused: no rejection counted.
            Err(handshake @ Rejection::Handshake(_)) => {
                span.record("outcome", handshake.kind());
                tracing::debug!("webhook handshake answered");
            }
            Err(rejection) => {
                self.inner.signals.rejected(scheme, rejection);
                span.record("outcome", rejection.kind());
                span.record("status", rejection.status().as_u16());
                match rejection {
                    Rejection::Duplicate | Rejection::InFlight { .. } => {
                        tracing::debug!(reason = %rejection, "webhook retry acknowledged");
                    }
                    r if r.status().is_server_error() => {
                        tracing::warn!(reason = %rejection, "webhook not processed");
                    }
                    _ => tracing::info!(reason = %rejection, "webhook refused"),
                }
            }
        }
    }
}

/// Whether nothing can see the `webhook` span: no subscriber enabled it,
/// and tracing's `log` fallback (when a dependency turns on tracing's `log`
/// feature, as actix-web does, and no subscriber is set) would write none
/// of it. The pipeline then neither enters the span, records its fields nor
/// times the request for it.
fn span_unseen(span: &tracing::Span) -> bool {
    span.is_disabled() && (span.metadata().is_none() || log_drops_info())
}

/// Whether `log` drops INFO records (the `webhook` span's level): then
/// tracing's `log` fallback writes nothing of the span. Without the `log`
/// feature this cannot be read, and is taken to be false.
fn log_drops_info() -> bool {
    #[cfg(feature = "log")]
    {
        log::STATIC_MAX_LEVEL < log::LevelFilter::Info || log::max_level() < log::LevelFilter::Info
    }
    #[cfg(not(feature = "log"))]
    {
        false
    }
}

/// Longest key handed to a store as is, in bytes; longer keys reach it as a
/// digest.
pub const MAX_STORE_KEY_LEN: usize = 256;

/// Marks a key that reaches the store as a digest.
const DIGEST_MARKER: &str = ":#sha256:";

/// The namespace a delivery's dedup key is made in: the route's, or for a
/// [replay token](crate::Identity::ReplayToken) [`REPLAY_NAMESPACE`], the
/// same for every route.
pub(crate) fn key_namespace<'a>(route: &'a str, verified: &Verified) -> &'a str {
    match verified.identity {
        crate::Identity::ReplayToken => REPLAY_NAMESPACE,
        _ => route,
    }
}

/// The key a store sees for the pipeline key `key`: `key` itself when it is
/// at most [`MAX_STORE_KEY_LEN`] bytes of printable ASCII (space included)
/// and does not contain `:#sha256:`; otherwise `{namespace}:#sha256:{hex}`,
/// the SHA-256 of the whole key. Control bytes (NUL…), non-ASCII text and
/// oversized ids thus never reach a store, and a digest key can never equal
/// a key stored as is.
pub(crate) fn store_key(namespace: &str, key: String) -> String {
    // One pass: printable, and without `#` a key cannot hold the marker
    // (the rare key with one is searched for it).
    let mut printable = key.len() <= MAX_STORE_KEY_LEN;
    let mut hash_sign = false;
    for b in key.bytes() {
        printable &= (0x20..0x7f).contains(&b);
        hash_sign |= b == b'#';
    }
    let safe = printable && !(hash_sign && key.contains(DIGEST_MARKER));
    if safe {
        return key;
    }
    let digest = Sha256::digest(key.as_bytes());
    let mut out = String::with_capacity(namespace.len() + DIGEST_MARKER.len() + 64);
    out.push_str(namespace);
    out.push_str(DIGEST_MARKER);
    for byte in digest {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// Where [`Receiver::admit`] stands once the verifier answered.
// `Done` is the common answer: boxing it would cost an allocation per request.
#[allow(clippy::large_enum_variant)]
enum Step<'a> {
    /// Admitted or refused without waiting.
    Done(Result<Admission, Rejection>),
    /// The store or the inbox must be awaited.
    Wait(Pin<Box<dyn Future<Output = Result<Admission, Rejection>> + Send + 'a>>),
}

/// A verified delivery on its way through the store's claim.
struct Claiming {
    verified: Verified,
    key: String,
    token: ClaimToken,
    body: Bytes,
    observer: Observer,
    started: Instant,
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
    observer: Option<Observer>,
}

/// Where a delivery's handler outcome and store failures are reported.
#[derive(Clone)]
struct Observer {
    signals: Arc<Signals>,
    scheme: &'static str,
}

impl Observer {
    fn store_error(&self, op: StoreOp) {
        self.signals.store_error(self.scheme, op);
    }
}

impl fmt::Debug for Observer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observer")
            .field("scheme", &self.scheme)
            .finish_non_exhaustive()
    }
}

impl Admission {
    fn unclaimed(delivery: Delivery) -> Self {
        Self {
            delivery,
            claim: None,
            observer: None,
        }
    }

    fn observed(mut self, observer: Observer) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Runs `handler` with the delivery, catching panics, then completes the
    /// claim if `status_of` its output is 2xx and releases it otherwise.
    ///
    /// `handler` is called at once (its synchronous part runs in this call);
    /// the future it returns runs when the returned future is polled.
    ///
    /// # Errors
    ///
    /// [`Rejection::HandlerPanicked`] when the handler panicked.
    pub fn run<F, Fut, T>(
        self,
        handler: F,
        status_of: impl FnOnce(&T) -> u16,
    ) -> impl Future<Output = Result<T, Rejection>>
    where
        F: FnOnce(Delivery) -> Fut,
        Fut: Future<Output = T>,
    {
        let Self {
            delivery,
            claim,
            observer,
        } = self;
        let handler_started = Instant::now();
        // Called here, not in the future below: neither the handler nor the
        // delivery it consumes is then carried in that future's state.
        let outcome = match std::panic::catch_unwind(AssertUnwindSafe(|| handler(delivery))) {
            Ok(fut) => Either::Left(AssertUnwindSafe(fut).catch_unwind()),
            Err(panic) => Either::Right(std::future::ready(Err(panic))),
        };
        Running {
            outcome,
            claim,
            observer,
            status_of: Some(status_of),
            handler_started,
            beat: None,
            settling: None,
        }
    }

    /// What [`run`](Self::run) does once the handler's future answered:
    /// signals, span fields and the log line, then the settlement to await,
    /// if any (a release, or a completion the store cannot answer at once).
    fn handled<T>(
        claim: Option<ClaimGuard>,
        observer: Option<&Observer>,
        handler_started: Instant,
        outcome: Result<T, Box<dyn std::any::Any + Send>>,
        status_of: impl FnOnce(&T) -> u16,
    ) -> (Result<T, Rejection>, Option<Settling>) {
        let span = tracing::Span::current();
        match outcome {
            Ok(output) => {
                let status = status_of(&output);
                if let Some(o) = observer {
                    o.signals
                        .handled(o.scheme, Some(status), handler_started.elapsed());
                }
                span.record("status", status);
                let success = (200..300).contains(&status);
                if !success {
                    tracing::warn!(
                        status,
                        "webhook handler did not succeed; claim released for the sender's retry"
                    );
                }
                span.record(
                    "outcome",
                    if success {
                        "processed"
                    } else {
                        "handler_failed"
                    },
                );
                // The settle futures are boxed: a store that answers at once
                // needs neither, and they would otherwise size every
                // request's future.
                let settling = claim.and_then(|mut claim| -> Option<Settling> {
                    if !success {
                        Some(Box::pin(claim.release()))
                    } else if claim.complete_ready().is_none() {
                        Some(Box::pin(claim.complete()))
                    } else {
                        None
                    }
                });
                (Ok(output), settling)
            }
            Err(_) => {
                if let Some(o) = observer {
                    o.signals.handled(o.scheme, None, handler_started.elapsed());
                }
                tracing::error!("webhook handler panicked; claim released");
                let settling = claim.map(|claim| -> Settling { Box::pin(claim.release()) });
                (Err(Rejection::HandlerPanicked), settling)
            }
        }
    }
}

/// A claim's release or completion under way.
type Settling = Pin<Box<dyn Future<Output = bool> + Send>>;

pin_project_lite::pin_project! {
    /// The future of [`Admission::run`]: the handler's, then the settlement.
    ///
    /// Written out rather than as an `async` block, whose state would hold
    /// the handler's future twice (captured, then pinned) and lay its
    /// suspend points out side by side: this is a fifth of its size, and it
    /// sizes every request's future.
    struct Running<H, S, T> {
        #[pin]
        outcome: H,
        claim: Option<ClaimGuard>,
        observer: Option<Observer>,
        // Taken when the handler answered.
        status_of: Option<S>,
        handler_started: Instant,
        // Armed when the handler did not answer on its first poll: renewal
        // starts if it fires first (boxed: most handlers never need it).
        beat: Option<Pin<Box<tokio::time::Sleep>>>,
        // The settlement being awaited, and the output it holds back
        // (boxed: only a release or a store that must be awaited needs it).
        settling: Option<Box<(Settling, Result<T, Rejection>)>>,
    }
}

impl<H, S, T> Future for Running<H, S, T>
where
    H: Future<Output = Result<T, Box<dyn std::any::Any + Send>>>,
    S: FnOnce(&T) -> u16,
{
    type Output = Result<T, Rejection>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Some(settling) = this.settling.as_mut() {
            std::task::ready!(settling.0.as_mut().poll(cx));
            if let Some(settled) = this.settling.take() {
                return Poll::Ready(settled.1);
            }
        }
        let outcome = match this.outcome.poll(cx) {
            Poll::Ready(outcome) => outcome,
            Poll::Pending => {
                // Renewal starts only if the handler outlives one renewal
                // interval: a quick handler costs a timer, not a task, and
                // one that answers on its first poll not even the timer.
                if let Some(guard) = this.claim.as_mut().filter(|g| !g.renewing()) {
                    let beat = this.beat.get_or_insert_with(|| {
                        Box::pin(tokio::time::sleep(guard.renewal_interval()))
                    });
                    if beat.as_mut().poll(cx).is_ready() {
                        guard.start_renewal();
                        *this.beat = None;
                    }
                }
                return Poll::Pending;
            }
        };
        *this.beat = None;
        let status_of = this
            .status_of
            .take()
            .expect("Running polled after completion");
        let (output, settling) = Admission::handled(
            this.claim.take(),
            this.observer.as_ref(),
            *this.handler_started,
            outcome,
            status_of,
        );
        if let Some(mut settling) = settling
            && settling.as_mut().poll(cx).is_pending()
        {
            *this.settling = Some(Box::new((settling, output)));
            return Poll::Pending;
        }
        Poll::Ready(output)
    }
}

/// The first wait before a failed `complete` is tried again.
const FIRST_COMPLETE_RETRY: Duration = Duration::from_millis(100);
/// The longest wait between two tries of a failed `complete`.
const MAX_COMPLETE_RETRY: Duration = Duration::from_secs(10);
/// The shortest interval between two lease renewals.
const MIN_RENEWAL: Duration = Duration::from_millis(10);

/// One attempt's claim on a delivery.
///
/// Once [started](Self::start_renewal) (by [`Admission::run`] when the
/// handler outlives a third of the lease), a background task renews the
/// lease every third of it ([`DedupStore::extend`]), so a slow handler keeps
/// its delivery; if a renewal finds that another attempt took over, it stops
/// and says so in the log (the later `complete` is then refused by the store).
///
/// [`complete`](Self::complete) or [`release`](Self::release) it. Both run in
/// the caller's task; if the caller's future is dropped before the
/// settlement finished, the rest of it runs as a task on the tokio runtime,
/// so it still finishes. A `complete` that
/// fails is retried in the background with backoff (see
/// [`ReceiverBuilder::complete_retry`]). When the guard is dropped unsettled
/// (the request future was dropped mid-handler), it releases the claim in
/// the background, best effort.
pub struct ClaimGuard {
    key: Arc<str>,
    token: ClaimToken,
    settle: Option<Settle>,
}

impl fmt::Debug for ClaimGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClaimGuard")
            .field("key", &self.key)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

/// What settling a claim needs; owned by the settling task once settled.
struct Settle {
    store: Arc<dyn DedupStore>,
    key: Arc<str>,
    token: ClaimToken,
    retention: Duration,
    complete_retry: Duration,
    /// The renewal task's handles, once it started (most claims settle
    /// before: they pay for neither).
    renewal: Option<Renewal>,
    lease: Duration,
    observer: Observer,
    /// Where a completion retried in the background is registered.
    pending: Arc<PendingCompletions>,
}

impl ClaimGuard {
    /// A guard on a fresh claim, with its lease renewal started.
    fn start(
        store: Arc<dyn DedupStore>,
        key: &str,
        token: ClaimToken,
        inner: &Inner,
        observer: Observer,
    ) -> Self {
        let key: Arc<str> = Arc::from(key);
        Self {
            key: Arc::clone(&key),
            token,
            settle: Some(Settle {
                store,
                key,
                token,
                lease: inner.lease,
                retention: inner.retention,
                complete_retry: inner.complete_retry,
                renewal: None,
                observer,
                pending: Arc::clone(&inner.pending),
            }),
        }
    }

    /// The namespaced key the delivery was claimed under.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    /// How often the lease is renewed: a third of the lease (at least 10 ms).
    #[must_use]
    pub fn renewal_interval(&self) -> Duration {
        self.settle
            .as_ref()
            .map_or(MIN_RENEWAL, |s| (s.lease / 3).max(MIN_RENEWAL))
    }

    /// Starts renewing the lease in the background now, then every
    /// [`renewal_interval`](Self::renewal_interval), until the claim is
    /// settled or another attempt took over. [`Admission::run`] calls it
    /// when the handler is still running after one interval; call it
    /// yourself when you settle the guard without `run`. Idempotent.
    pub fn start_renewal(&mut self) {
        if let Some(settle) = self.settle.as_mut() {
            settle.start_renewal();
        }
    }

    /// Marks the delivery processed. Returns whether the first try applied;
    /// a stale claim (another attempt took over) is logged and changes
    /// nothing, a store error is logged and the completion retried in the
    /// background.
    pub async fn complete(mut self) -> bool {
        if let Some(applied) = self.complete_ready() {
            return applied;
        }
        let Some(settle) = self.settle.take() else {
            return false;
        };
        if tokio::runtime::Handle::try_current().is_err() {
            // No runtime to retry on: one try, here (boxed: this rare path
            // must not grow every request's future).
            return Box::pin(settle.complete()).await;
        }
        // The first try runs here (or, if this future is dropped first, as
        // a runtime task); retries of a failed one run as a runtime task.
        Detached::new(settle.complete()).await.unwrap_or(false)
    }

    /// Whether the lease renewal runs.
    fn renewing(&self) -> bool {
        self.settle.as_ref().is_some_and(|s| s.renewal.is_some())
    }

    /// Completes at once, when the store answers without I/O (the
    /// in-process one) and no renewal runs: then nothing awaits, so nothing
    /// can be dropped halfway, and neither a boxed future nor a detached
    /// settlement is needed. `None` when [`complete`](Self::complete) must
    /// be awaited.
    fn complete_ready(&mut self) -> Option<bool> {
        let settle = self.settle.as_ref()?;
        if settle.renewal.is_some() {
            return None;
        }
        let result = settle
            .store
            .complete_ready(&settle.key, settle.token, settle.retention)?;
        let settle = self.settle.take()?;
        Some(settle.completed(result))
    }

    /// Forgets the claim so the sender's retry can run. Returns whether the
    /// claim still held.
    pub async fn release(mut self) -> bool {
        let Some(settle) = self.settle.take() else {
            return false;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(_) => Detached::new(settle.release()).await.unwrap_or(false),
            Err(_) => Box::pin(settle.release()).await,
        }
    }
}

/// Work that runs in the task that polls it, until that task drops it:
/// then whatever is left runs to its end as a task on the tokio runtime.
///
/// Settling a claim this way costs one allocation where a spawned task costs
/// a task, a scheduling round and a wake-up, yet survives the request's
/// future being dropped halfway, like a spawned task.
struct Detached<T: Send + 'static> {
    work: Option<Pin<Box<dyn Future<Output = T> + Send>>>,
}

impl<T: Send + 'static> Detached<T> {
    fn new(work: impl Future<Output = T> + Send + 'static) -> Self {
        Self {
            work: Some(Box::pin(work)),
        }
    }
}

impl<T: Send + 'static> Future for Detached<T> {
    /// `None` once finished (polled again after its output was taken).
    type Output = Option<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let Some(work) = self.work.as_mut() else {
            return Poll::Ready(None);
        };
        let output = std::task::ready!(work.as_mut().poll(cx));
        self.work = None;
        Poll::Ready(Some(output))
    }
}

impl<T: Send + 'static> Drop for Detached<T> {
    fn drop(&mut self) {
        if let Some(work) = self.work.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn(work)),
                Err(_) => tracing::warn!(
                    "a claim's settlement was dropped outside a runtime; its lease will expire instead"
                ),
            }
        }
    }
}

impl Settle {
    /// Starts the renewal task, unless it runs already or there is no runtime.
    fn start_renewal(&mut self) {
        if self.renewal.is_some() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (stop, stopped) = oneshot::channel();
        let settled = Arc::new(tokio::sync::Mutex::new(false));
        runtime.spawn(renew(
            Arc::clone(&self.store),
            Arc::clone(&self.key),
            self.token,
            self.lease,
            Arc::clone(&settled),
            stopped,
            self.observer.clone(),
        ));
        self.renewal = Some(Renewal {
            settled,
            _stop: stop,
        });
    }

    /// One try at `complete`, with `settled` set as its outcome says under
    /// the renewal's lock (if a renewal runs).
    async fn try_complete(&self) -> Result<Transition, StoreError> {
        let complete = (*self.store).complete(&self.key, self.token, self.retention);
        let Some(renewal) = &self.renewal else {
            return complete.await;
        };
        let mut settled = renewal.settled.lock().await;
        let result = complete.await;
        *settled = !matches!(&result, Err(e) if !e.is_permanent());
        result
    }

    /// Completes; returns whether the first try applied. A try that failed
    /// for a reason that may pass is retried with backoff for up to
    /// `complete_retry`, as a runtime task (when there is a runtime).
    async fn complete(self) -> bool {
        let result = self.try_complete().await;
        self.completed(result)
    }

    /// Handles the first try's `result`: logs a stale claim; counts, logs and
    /// (as a runtime task) retries a failure that may pass.
    fn completed(self, result: Result<Transition, StoreError>) -> bool {
        match result {
            Ok(Transition::Applied) => true,
            Ok(Transition::Stale) => {
                tracing::warn!(key = %self.key, "complete refused: another attempt took over the claim");
                false
            }
            Err(error) => {
                self.complete_failed(&error);
                if !error.is_permanent() {
                    match tokio::runtime::Handle::try_current() {
                        Ok(runtime) => drop(runtime.spawn(self.retry_complete(error))),
                        Err(_) => {
                            tracing::error!(key = %self.key, error = %error, "complete failed after a 2xx and there is no runtime to retry on; a retry may run the handler again")
                        }
                    }
                }
                false
            }
        }
    }

    /// Counts and logs a failed `complete` (a permanent refusal is final).
    fn complete_failed(&self, error: &StoreError) {
        self.observer.store_error(StoreOp::Complete);
        if error.is_permanent() {
            tracing::error!(key = %self.key, error = %error, "complete refused for good by the store; a retry may run the handler again");
        }
    }

    /// Retries a `complete` whose first try failed with `error`, with
    /// backoff, for up to `complete_retry`, the lease renewed meanwhile.
    async fn retry_complete(mut self, mut error: StoreError) {
        // Registered while it retries: a redelivery to this process records
        // it first instead of taking the claim over (`pending_first`).
        let _registered = self.pending.register(&self.key, self.token);
        let started = Instant::now();
        let mut delay = FIRST_COMPLETE_RETRY;
        let mut attempt: u32 = 1;
        loop {
            if started.elapsed() + delay > self.complete_retry {
                tracing::error!(key = %self.key, error = %error, attempt, "complete failed after a 2xx; giving up, a retry may run the handler again");
                return;
            }
            // Keep the claim while the completion is retried (idempotent).
            self.start_renewal();
            tracing::error!(key = %self.key, error = %error, attempt, retry_in_ms = delay.as_millis() as u64, "complete failed after a 2xx; retrying in the background");
            tokio::time::sleep(delay).await;
            if !self.pending.holds(&self.key, self.token) {
                tracing::info!(key = %self.key, "complete recorded by a redelivery to this process");
                return;
            }
            delay = (delay * 2).min(MAX_COMPLETE_RETRY);
            attempt += 1;
            match self.try_complete().await {
                Ok(Transition::Applied) => {
                    tracing::info!(key = %self.key, attempt, "complete succeeded on a retry");
                    return;
                }
                Ok(Transition::Stale) => {
                    tracing::warn!(key = %self.key, "complete refused: another attempt took over the claim");
                    return;
                }
                Err(next) => {
                    self.complete_failed(&next);
                    if next.is_permanent() {
                        return;
                    }
                    error = next;
                }
            }
        }
    }

    /// Releases once; a failure leaves the lease to expire.
    async fn release(self) -> bool {
        let _settled = match &self.renewal {
            Some(renewal) => {
                let mut settled = renewal.settled.lock().await;
                *settled = true;
                Some(settled)
            }
            None => None,
        };
        match (*self.store).release(&self.key, self.token).await {
            Ok(Transition::Applied) => true,
            Ok(Transition::Stale) => false,
            Err(error) => {
                self.observer.store_error(StoreOp::Release);
                tracing::error!(key = %self.key, error = %error, "release failed; the lease will expire instead");
                false
            }
        }
    }
}

/// The completions this process failed to record and retries in the
/// background, by key (see [`Receiver::pending_first`]). Per receiver:
/// across processes the lease rule stands.
#[derive(Default)]
struct PendingCompletions {
    /// How many are registered: the claim path looks no further at zero.
    count: std::sync::atomic::AtomicUsize,
    keys: std::sync::Mutex<std::collections::HashMap<Arc<str>, ClaimToken>>,
}

impl PendingCompletions {
    fn keys(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<Arc<str>, ClaimToken>> {
        self.keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers `key`'s completion with `token` until the guard is dropped.
    fn register(self: &Arc<Self>, key: &Arc<str>, token: ClaimToken) -> PendingRegistration {
        if self.keys().insert(Arc::clone(key), token).is_none() {
            self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        PendingRegistration {
            pending: Arc::clone(self),
            key: Arc::clone(key),
            token,
        }
    }

    /// The token of `key`'s pending completion, if any.
    fn token(&self, key: &str) -> Option<ClaimToken> {
        if self.count.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            return None;
        }
        self.keys().get(key).copied()
    }

    /// Whether `key`'s completion with `token` is still pending.
    fn holds(&self, key: &str, token: ClaimToken) -> bool {
        self.token(key) == Some(token)
    }

    /// Unregisters `key`'s completion with `token` (not a later one's).
    fn remove(&self, key: &str, token: ClaimToken) {
        let mut keys = self.keys();
        if keys.get(key) == Some(&token) {
            keys.remove(key);
            self.count.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// Unregisters a pending completion when its background retry ends.
struct PendingRegistration {
    pending: Arc<PendingCompletions>,
    key: Arc<str>,
    token: ClaimToken,
}

impl Drop for PendingRegistration {
    fn drop(&mut self) {
        self.pending.remove(&self.key, self.token);
    }
}

/// A running renewal task's handles.
struct Renewal {
    /// `true` once settled. The renewal holds it while it calls `extend`, so
    /// a renewal never races a settlement into a misleading "taken over".
    settled: Arc<tokio::sync::Mutex<bool>>,
    /// Dropped (with the settlement) to stop the renewal task.
    _stop: oneshot::Sender<()>,
}

/// Renews the lease every third of it until stopped, settled, or taken over.
async fn renew(
    store: Arc<dyn DedupStore>,
    key: Arc<str>,
    token: ClaimToken,
    lease: Duration,
    settled: Arc<tokio::sync::Mutex<bool>>,
    mut stop: oneshot::Receiver<()>,
    observer: Observer,
) {
    let every = (lease / 3).max(MIN_RENEWAL);
    let mut first = true;
    loop {
        // Started one interval after the claim: renew at once, then every interval.
        if !std::mem::take(&mut first) {
            let beat = std::pin::pin!(tokio::time::sleep(every));
            if let Either::Left(_) = futures_util::future::select(&mut stop, beat).await {
                return;
            }
        }
        let settled = settled.lock().await;
        if *settled {
            return;
        }
        match (*store).extend(&key, token, lease).await {
            Ok(Transition::Applied) => tracing::trace!(key = %key, "lease renewed"),
            Ok(Transition::Stale) => {
                tracing::warn!(key = %key, "lease renewal refused: the lease ran out and another attempt took over; this attempt's completion will be refused");
                return;
            }
            Err(error) => {
                observer.store_error(StoreOp::Extend);
                tracing::error!(key = %key, error = %error, "lease renewal failed; trying again at the next renewal");
            }
        }
    }
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        let Some(settle) = self.settle.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(key = %self.key, "claim dropped outside a runtime; the lease will expire instead");
            return;
        };
        runtime.spawn(async move {
            let key = Arc::clone(&settle.key);
            if !settle.release().await {
                tracing::debug!(key = %key, "release after a dropped request changed nothing");
            }
        });
    }
}

/// Configures a [`Receiver`].
#[must_use]
pub struct ReceiverBuilder {
    inner: Inner,
    /// `inbox_status` / `inbox_keep_headers`, applied at build whatever the
    /// order of the calls.
    inbox_settings: crate::inbox::accept::InboxSettings,
    /// No store was chosen: [`build`](ReceiverBuilder::build) gives the
    /// receiver an in-process store (feature `memory`).
    default_store: bool,
    /// Where in the source the receiver is built (`Receiver::new`/`builder`,
    /// or actix's `Webhooks::new`, which track their caller). Read only by
    /// the in-process store's sharing (feature `memory`).
    #[cfg_attr(not(feature = "memory"), allow(dead_code))]
    site: &'static std::panic::Location<'static>,
    /// Set by [`share_default_store`](ReceiverBuilder::share_default_store).
    share_group: Option<u64>,
    /// Set by [`route_label`](ReceiverBuilder::route_label).
    route_label: Option<String>,
}

impl fmt::Debug for ReceiverBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReceiverBuilder").finish_non_exhaustive()
    }
}

impl ReceiverBuilder {
    fn new(
        verifier: Arc<dyn RequestVerifier>,
        site: &'static std::panic::Location<'static>,
    ) -> Self {
        Self {
            default_store: true,
            site,
            share_group: None,
            route_label: None,
            inner: Inner {
                verifier,
                store: None,
                body_limit: DEFAULT_BODY_LIMIT,
                body_timeout: DEFAULT_BODY_TIMEOUT,
                lease: DEFAULT_LEASE,
                retention: DEFAULT_RETENTION,
                namespace: DEFAULT_NAMESPACE.to_owned(),
                key_fn: None,
                store_failure: StoreFailure::Closed,
                store_retry_after: DEFAULT_STORE_RETRY_AFTER,
                in_flight_retry_after: DEFAULT_IN_FLIGHT_RETRY_AFTER,
                complete_retry: DEFAULT_COMPLETE_RETRY,
                on_reject: None,
                clock: Arc::new(SystemTime::now),
                inbox: None,
                signals: Arc::new(Signals::new(DEFAULT_NAMESPACE)),
                pending: Arc::default(),
            },
            inbox_settings: crate::inbox::accept::InboxSettings::default(),
        }
    }

    /// The largest body accepted, in bytes (default 1 MiB).
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.inner.body_limit = bytes;
        self
    }

    /// The longest time reading the body may take (default 30 s); a body
    /// that has not fully arrived by then (a stalled or trickled upload, a
    /// `Content-Length` larger than what is sent) is answered `408`.
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.inner.body_timeout = timeout;
        self
    }

    /// The dedup store (default: an in-process [`MemoryStore`] of the
    /// receiver's own, or shared with its copies, see
    /// [`share_default_store`](Self::share_default_store); none without the
    /// `memory` feature).
    #[cfg_attr(
        feature = "memory",
        doc = "\n\n[`MemoryStore`]: crate::dedup::MemoryStore"
    )]
    #[cfg_attr(
        not(feature = "memory"),
        doc = "\n\n[`MemoryStore`]: https://docs.rs/webhooks-core/latest/webhooks_core/dedup/struct.MemoryStore.html"
    )]
    pub fn store(mut self, store: impl DedupStore) -> Self {
        self.inner.store = Some(Arc::new(store));
        self.default_store = false;
        self
    }

    /// The dedup store, chosen at run time.
    pub fn shared_store(mut self, store: Arc<dyn DedupStore>) -> Self {
        self.inner.store = Some(store);
        self.default_store = false;
        self
    }

    /// Shares the default in-process store (when no store is set) with the
    /// other receivers of this process built at the same place in the source
    /// (the same `Receiver::builder` or `Receiver::new` call), with the same
    /// [`namespace`](Self::namespace) and the same `group`, while one of them
    /// lives.
    ///
    /// For frameworks that build the app once per worker thread: actix-web
    /// runs `HttpServer::new`'s factory on each worker, and a store per
    /// receiver would let two retries of one delivery on two workers both
    /// run. actix-webhooks' `Webhooks::new` does this with the actix
    /// `System`'s id as the group (the workers of one server; two tests, two
    /// systems, keep apart); call it yourself when you build the receiver
    /// inside the factory, or build it once outside and clone it in.
    ///
    /// ```
    /// use webhooks_core::{Receiver, scheme::StandardWebhooks};
    ///
    /// let verifier = StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
    /// // What a factory run on each of 4 workers builds: one store between them.
    /// let workers: Vec<Receiver> = (0..4)
    ///     .map(|_| Receiver::builder(verifier.clone()).share_default_store(1).build())
    ///     .collect();
    /// # Ok::<(), webhooks_core::ConfigError>(())
    /// ```
    pub fn share_default_store(mut self, group: u64) -> Self {
        self.share_group = Some(group);
        self
    }

    /// No deduplication: every verified delivery runs the handler.
    pub fn no_dedup(mut self) -> Self {
        self.inner.store = None;
        self.default_store = false;
        self
    }

    /// How long one attempt holds a delivery before a retry may take over
    /// when it stops renewing (default 60 s). While the handler runs the
    /// lease is renewed every third of it, so a slow handler keeps its
    /// delivery; the lease bounds how long a crashed process blocks retries.
    /// A handler that never returns keeps its delivery: bound handlers with a
    /// timeout (dropping the request future releases the claim).
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
    /// shares a store its own. Deliveries identified by a
    /// [replay token](crate::Identity::ReplayToken) (Mailgun) are claimed
    /// under [`REPLAY_NAMESPACE`] instead, so that a token seen on one route
    /// is refused on every other: use one shared store for all the routes of
    /// a Mailgun account.
    /// Two receivers that share both the store and
    /// the namespace, but not the scheme or the
    /// [`route_label`](Self::route_label), are logged at `warn` when built:
    /// the deliveries of one can be taken for duplicates of the other's.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.inner.namespace = namespace.into();
        self
    }

    /// The `route` label of the receiver's metrics (default: the
    /// [`namespace`](Self::namespace)). Set it when routes are told apart by
    /// something else than their namespace (a namespace shared on purpose,
    /// or a longer one than you want in a label); keep it bounded: one value
    /// per route you configure, never an id.
    pub fn route_label(mut self, label: impl Into<String>) -> Self {
        self.route_label = Some(label.into());
        self
    }

    /// Derives the dedup id from the verified delivery (for schemes without an
    /// id, or to deduplicate on an event id in the body). `None` means: do not
    /// deduplicate this delivery. Not used for deliveries identified by a
    /// [replay token](crate::Identity::ReplayToken) (Mailgun): their token is
    /// claimed under [`REPLAY_NAMESPACE`] whatever this function says.
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

    /// What to do when the store is unreachable at claim (default: fail
    /// closed, 503). Deliveries identified by a
    /// [replay token](crate::Identity::ReplayToken) (Mailgun) always fail
    /// closed: the token is their only replay guard.
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

    /// How long a `complete` that failed after the handler's 2xx is retried
    /// in the background, with backoff from 100 ms doubling up to 10 s
    /// (default 5 minutes; zero: one try only).
    pub fn complete_retry(mut self, window: Duration) -> Self {
        self.inner.complete_retry = window;
        self
    }

    /// Shapes the body and headers of every rejection's response, including
    /// the extractors' 422/500. The status, `Retry-After` and
    /// `webhook-duplicate` stay the library's: they are set after `f` runs,
    /// whatever it returned.
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
    /// `202 Accepted`). Needs [`inbox`](Self::inbox), called before or after.
    pub fn inbox_status(mut self, status: http::StatusCode) -> Self {
        self.inbox_settings.status = Some(status);
        self
    }

    /// Request headers stored with each inbox event and handed to the worker
    /// (default none). Needs [`inbox`](Self::inbox), called before or after.
    pub fn inbox_keep_headers(mut self, names: impl IntoIterator<Item = http::HeaderName>) -> Self {
        self.inbox_settings.keep_headers = Some(names.into_iter().collect());
        self
    }

    /// The pipeline.
    ///
    /// # Panics
    ///
    /// When [`inbox_status`](Self::inbox_status) or
    /// [`inbox_keep_headers`](Self::inbox_keep_headers) was set without an
    /// [`inbox`](Self::inbox): a configuration that would silently do
    /// nothing.
    pub fn build(mut self) -> Receiver {
        match &mut self.inner.inbox {
            Some(inbox) => self.inbox_settings.apply(inbox),
            None => assert!(
                self.inbox_settings.is_empty(),
                "ReceiverBuilder: inbox_status / inbox_keep_headers need an inbox (ReceiverBuilder::inbox)"
            ),
        }
        if self.default_store {
            // Without the `memory` feature there is no default store: no dedup.
            #[cfg(feature = "memory")]
            {
                let store = match self.share_group {
                    Some(group) => crate::dedup::MemoryStore::process_default(
                        &self.inner.namespace,
                        self.site,
                        group,
                    ),
                    None => crate::dedup::MemoryStore::new(),
                };
                self.inner.store = Some(Arc::new(store));
            }
        }
        let route = self.route_label.as_deref().unwrap_or(&self.inner.namespace);
        if let Some(store) = &self.inner.store {
            let scheme = self.inner.verifier.scheme();
            if let Some(other) = note_store_user(store, &self.inner.namespace, scheme, route) {
                tracing::warn!(
                    namespace = %self.inner.namespace,
                    scheme,
                    route,
                    other_scheme = other.0,
                    other_route = %other.1,
                    "two receivers share the dedup store and the namespace: a delivery to one \
                     can be taken for a duplicate of the other's; give each route its own \
                     namespace (ReceiverBuilder::namespace)"
                );
            }
        }
        self.inner.signals = Arc::new(Signals::new(route));
        Receiver {
            inner: Arc::new(self.inner),
        }
    }
}

/// The receivers built with each explicit store, while the store lives: its
/// address, the namespace, the scheme and the route label.
type StoreUser = (Weak<dyn DedupStore>, String, &'static str, String);
static STORE_USERS: std::sync::Mutex<Vec<StoreUser>> = std::sync::Mutex::new(Vec::new());

/// Records a receiver built on `store`; returns the scheme and route of a
/// live receiver already on the same store and namespace whose scheme or
/// route differ (the same scheme and route are copies of one route: actix
/// workers, tests).
fn note_store_user(
    store: &Arc<dyn DedupStore>,
    namespace: &str,
    scheme: &'static str,
    route: &str,
) -> Option<(&'static str, String)> {
    let mut users = STORE_USERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    users.retain(|(store, ..)| store.strong_count() > 0);
    let clash = users
        .iter()
        .find(|(other, ns, other_scheme, other_route)| {
            std::ptr::addr_eq(other.as_ptr(), Arc::as_ptr(store))
                && ns == namespace
                && (*other_scheme != scheme || other_route != route)
        })
        .map(|(_, _, other_scheme, other_route)| (*other_scheme, other_route.clone()));
    users.push((
        Arc::downgrade(store),
        namespace.to_owned(),
        scheme,
        route.to_owned(),
    ));
    clash
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharing_a_store_and_namespace_across_routes_is_noted() {
        let store: Arc<dyn DedupStore> = Arc::new(crate::dedup::MemoryStore::new());
        let other_store: Arc<dyn DedupStore> = Arc::new(crate::dedup::MemoryStore::new());
        assert_eq!(
            note_store_user(&store, "ns-note", "stripe", "ns-note"),
            None
        );
        // A copy of the same route (an actix worker, a test): nothing to say.
        assert_eq!(
            note_store_user(&store, "ns-note", "stripe", "ns-note"),
            None
        );
        // Another scheme, or another route label, on the same store and namespace.
        assert_eq!(
            note_store_user(&store, "ns-note", "github", "ns-note"),
            Some(("stripe", "ns-note".to_owned()))
        );
        assert!(note_store_user(&store, "ns-note", "stripe", "payments").is_some());
        // Another namespace or another store is fine.
        assert_eq!(note_store_user(&store, "ns-note-2", "github", "x"), None);
        assert_eq!(
            note_store_user(&other_store, "ns-note", "github", "y"),
            None
        );
        // A store that is gone is forgotten.
        drop(store);
        let again: Arc<dyn DedupStore> = Arc::new(crate::dedup::MemoryStore::new());
        assert_eq!(note_store_user(&again, "ns-note", "github", "z"), None);
    }

    /// A future whose state is `N` bytes, answering `value` after one
    /// pending poll.
    #[allow(clippy::manual_async_fn)]
    fn sized<const N: usize, T>(value: T) -> impl Future<Output = T> {
        async move {
            let state = [0u8; N];
            tokio::task::yield_now().await;
            std::hint::black_box(&state);
            value
        }
    }

    /// The boxed work of one request stays within glibc's per-thread cache
    /// (1,032 bytes) for the sizes axum hands it: a 224-byte request head,
    /// a 136-byte body read and a 320-byte route future (the layer's types,
    /// measured with `-Zprint-type-sizes`). It was 2,144 bytes, an
    /// allocation from the shared arena on every request.
    #[test]
    fn receive_work_fits_the_thread_cache() {
        let receiver = Receiver::new(
            crate::scheme::StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap(),
        );
        let (parts, ()) = http::Request::new(()).into_parts();
        assert_eq!(
            std::mem::size_of_val(&parts),
            224,
            "the request head's size changed"
        );
        let read = sized::<64, _>(Ok(Bytes::new()));
        assert_eq!(std::mem::size_of_val(&read), 136);
        let handler = |_parts, _delivery| sized::<296, _>(204_u16);
        let work = receiver.receive_work(parts, read, handler, |status| *status);
        let size = std::mem::size_of_val(&work);
        assert!(size <= 1032, "the boxed work is {size} bytes");
    }
}
