//! [`Admission::run`]: the handler's future, the lease renewal it may
//! need, then the claim's settlement, as one hand-written future.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use futures_util::FutureExt as _;
use futures_util::future::Either;

use super::admission::{Admission, Observer};
use super::settlement::ClaimGuard;
use crate::{Delivery, Rejection};

impl Admission {
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
            handoff: _,
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
    // Inlined where the handler's output is awaited: called, it gave the
    // output back by `memcpy` (a response is larger than a few registers).
    #[inline(always)]
    pub(super) fn handled<T>(
        claim: Option<ClaimGuard>,
        observer: Option<&Observer>,
        handler_started: Instant,
        outcome: Result<T, Box<dyn std::any::Any + Send>>,
        status_of: impl FnOnce(&T) -> u16,
    ) -> (Result<T, Rejection>, Option<Settling>) {
        let span = super::pipeline::current_webhook_span();
        let record = |field: &str, value: &dyn tracing::Value| {
            if let Some(span) = &span {
                span.record(field, value);
            }
        };
        match outcome {
            Ok(output) => {
                let status = status_of(&output);
                if let Some(o) = observer {
                    o.signals
                        .handled(o.scheme, Some(status), handler_started.elapsed());
                }
                record("status", &status);
                let success = (200..300).contains(&status);
                if !success {
                    tracing::warn!(
                        status,
                        "webhook handler did not succeed; claim released for the sender's retry"
                    );
                }
                record(
                    "outcome",
                    &if success {
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
pub(super) type Settling = Pin<Box<dyn Future<Output = bool> + Send>>;

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
