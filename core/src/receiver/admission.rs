//! [`Receiver::admit`]: verification, then the claim on the delivery (or
//! its storage in the inbox), and the [`Admission`] that carries the claim
//! to the handler.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tracing::field;

use super::settlement::ClaimGuard;
use super::{Receiver, StoreFailure};
use crate::dedup::{Claim, ClaimToken, DedupStore, StoreError, Transition};
use crate::key::{key_namespace, store_key};
use crate::signals::{Signals, StoreOp};
use crate::{Delivery, Rejection, RequestHead, Verified};

impl Receiver {
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
        // A verifier that needs no I/O answers at once, without a boxed
        // future; what follows verification is synchronous unless the store
        // (or the inbox) must be awaited: then its state is boxed, so that
        // this future (carried in every request's) stays small.
        let body = match self.admit_ready(head, body) {
            Ok(Step::Done(admitted)) => return admitted,
            Ok(Step::Wait(admitting)) => return admitting.await,
            Err(body) => body,
        };
        let now = (self.inner.clock)();
        let verify_started = Instant::now();
        let result = self.inner.verifier.verify_request(head, &body, now).await;
        let admitting = match self.after_verify(result, verify_started, head.headers, body) {
            Step::Done(admitted) => return admitted,
            Step::Wait(admitting) => admitting,
        };
        admitting.await
    }

    /// [`admit`](Self::admit) up to the first wait, when the verifier
    /// answers at once: what is left to await (if anything) borrows
    /// neither `head` nor its headers. `Err` gives the body back when the
    /// verifier must be awaited (then call `admit`).
    #[inline]
    pub(super) fn admit_ready(
        &self,
        head: RequestHead<'_>,
        body: Bytes,
    ) -> Result<Step<'_>, Bytes> {
        let now = (self.inner.clock)();
        let verify_started = Instant::now();
        match self.inner.verifier.verify_ready(head, &body, now) {
            Some(result) => Ok(self.after_verify(result, verify_started, head.headers, body)),
            None => Err(body),
        }
    }

    /// Everything [`admit`](Self::admit) does once the verifier answered:
    /// signals and span fields, the dedup id, then the inbox or the claim.
    #[inline]
    fn after_verify(
        &self,
        result: Result<Verified, crate::VerifyError>,
        verify_started: Instant,
        headers: &dyn crate::HeaderLookup,
        body: Bytes,
    ) -> Step<'_> {
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
        if let Some(span) = super::pipeline::current_webhook_span() {
            span.record("scheme", verified.scheme);
            if let Some(id) = &verified.id {
                span.record("id", id.as_str());
            }
            span.record("key", field::display(&verified.matched_key));
        }

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
            let delivery = Delivery::new(verified, None, body);
            return Step::Done(Ok(Admission::unclaimed(delivery, Some(observer))));
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
    // Inlined into `after_verify`'s answer at once: called, it took the
    // claiming state and gave the admission back by `memcpy` (two calls a
    // delivery).
    #[inline(always)]
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
                let claim = ClaimGuard::start(Arc::clone(store), &key, token, started, inner);
                let handoff = (inner.budget.as_ref())
                    .and_then(|b| b.prepare(&verified, &key, &body, inner.store_retry_after));
                Ok(Admission {
                    claim: Some(claim),
                    delivery: Delivery::new(verified, Some(key), body),
                    observer: Some(observer),
                    handoff,
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
                        let delivery = Delivery::new(verified, None, body);
                        Ok(Admission::unclaimed(delivery, Some(observer)))
                    }
                }
            }
        }
    }
}

/// Where [`Receiver::admit`] stands once the verifier answered.
// `Done` is the common answer: boxing it would cost an allocation per request.
#[allow(clippy::large_enum_variant)]
pub(super) enum Step<'a> {
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
    pub(super) observer: Option<Observer>,
    /// The inbox event to hand over past the response budget, when the
    /// receiver has one.
    pub(super) handoff: Option<Box<super::budget::Prepared>>,
}

/// Where a delivery's handler outcome and store failures are reported.
#[derive(Clone)]
pub(super) struct Observer {
    pub(super) signals: Arc<Signals>,
    pub(super) scheme: &'static str,
}

impl Observer {
    pub(super) fn store_error(&self, op: StoreOp) {
        self.signals.store_error(self.scheme, op);
    }

    /// A settlement was refused: the lease was lost to another attempt.
    pub(super) fn lease_lost(&self) {
        self.signals.lease_lost(self.scheme);
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
    /// An admission without a claim, built whole (a builder step taking and
    /// giving back the admission moved it twice by `memcpy`).
    fn unclaimed(delivery: Delivery, observer: Option<Observer>) -> Self {
        Self {
            delivery,
            claim: None,
            observer,
            handoff: None,
        }
    }
}
