//! [`Receiver::process`] and [`Receiver::receive`]: the whole pipeline for
//! one request, in its `webhook` tracing span, and the log line and signals
//! of its outcome.

use std::borrow::Borrow;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use tracing::{Instrument as _, field};

use super::admission::Step;
use super::{Incoming, Receiver};
use crate::headers::ReadOnce;
use crate::{Delivery, Rejection, RequestHead};

impl Receiver {
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
        self.process_with(request, body, |admission, request| {
            admission.run(|delivery| handler(request, delivery), status_of)
        })
    }

    /// [`process`](Self::process) under the
    /// [response budget](super::ReceiverBuilder::response_budget): the
    /// handler runs inline, and past the budget the delivery is stored in
    /// the budget's inbox and answered [`Rejection::Stored`] while the
    /// handler runs on (see [`Admission::run_within_budget`]). Without a
    /// budget it is `process` (with `Send + 'static` bounds).
    ///
    /// # Errors
    ///
    /// As [`process`](Self::process); [`Rejection::Stored`] past the budget.
    ///
    /// [`Admission::run_within_budget`]: super::Admission::run_within_budget
    pub fn process_within_budget<R, F, Fut, T, S>(
        &self,
        request: R,
        body: Bytes,
        handler: F,
        status_of: S,
    ) -> impl Future<Output = Result<T, Rejection>>
    where
        R: Incoming,
        F: FnOnce(R, Delivery) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
        T: Send + 'static,
        S: FnOnce(&T) -> u16 + Send + 'static,
    {
        self.process_with(request, body, |admission, request| {
            admission.run_within_budget(|delivery| handler(request, delivery), status_of)
        })
    }

    /// [`process`](Self::process)'s work, with the handler's step left to
    /// `run`: the body counted, the delivery admitted, then `run`.
    fn process_with<R, G, T>(
        &self,
        request: R,
        body: Bytes,
        run: impl FnOnce(super::Admission, R) -> G,
    ) -> impl Future<Output = Result<T, Rejection>>
    where
        R: Incoming,
        G: Future<Output = Result<T, Rejection>>,
    {
        // Boxed here, before anything holds it: the caller's future then
        // carries a pointer, not the work (nor a second copy of these
        // arguments, as an `async fn`'s state would).
        traced(
            self,
            || {
                Box::pin(async move {
                    self.inner
                        .signals
                        .body_read(self.inner.verifier.scheme(), body.len());
                    let admission = self.admit(request.head(), body).await?;
                    run(admission, request).await
                })
            },
            as_is,
        )
    }

    /// The whole pipeline from the request head on (what the adapters run):
    /// [`check_head`](Self::check_head), then the body read that
    /// `read_body` starts (the adapter's read, stopping at
    /// [`body_limit`](Self::body_limit)) under the
    /// [body timeout](Self::body_timeout), then [`process`](Self::process).
    /// When the body must be waited for, the scheme's checks of the head
    /// ([`RequestVerifier::check_head`]) run first, so a request that must
    /// fail is answered without waiting; a body that came with the head goes
    /// straight to verification, which refuses the same. Every step runs in
    /// the `webhook` span.
    ///
    /// `read_body` is called once the content length passed; the read it
    /// returns is kept only while it runs (a read future handed in
    /// already made would take room in the request's state until its end).
    ///
    /// # Errors
    ///
    /// A [`Rejection`] when the handler did not run or panicked.
    ///
    /// [`RequestVerifier::check_head`]: crate::RequestVerifier::check_head
    pub fn receive<R, Read, B, F, Fut, T>(
        &self,
        request: R,
        read_body: Read,
        handler: F,
        status_of: impl FnOnce(&T) -> u16,
    ) -> impl Future<Output = Result<T, Rejection>>
    where
        R: Incoming,
        Read: FnOnce() -> B,
        B: Future<Output = Result<Bytes, Rejection>>,
        F: FnOnce(R, Delivery) -> Fut,
        Fut: Future<Output = T>,
    {
        // Boxed at once, as in `process`.
        traced(
            self,
            || {
                Box::pin(Self::receive_work(
                    self, request, read_body, handler, status_of,
                ))
            },
            as_is,
        )
    }

    /// [`receive`](Self::receive) as one boxed future that owns its
    /// receiver (a clone: an `Arc`'s count) and answers what `answer` makes
    /// of the result: an adapter's whole response future (the tower
    /// layer's), in one allocation. `answer` is given the receiver, for
    /// [`rejection_response`](Self::rejection_response). A receiver with a
    /// [response budget](super::ReceiverBuilder::response_budget) runs
    /// [`receive_within_budget`](Self::receive_within_budget)'s pipeline
    /// instead.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use webhooks_core::{Receiver, Rejection};
    /// use webhooks_core::scheme::StandardWebhooks;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let receiver = Receiver::new(StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?);
    /// let head = http::Request::new(()).into_parts().0;
    /// let read = || async { Ok(Bytes::from_static(b"{}")) };
    /// let handler = |_head, _delivery| async { 204_u16 };
    /// let answer = |receiver: &Receiver, result: Result<u16, Rejection>| match result {
    ///     Ok(status) => status,
    ///     Err(rejection) => receiver.rejection_response(&rejection).status().as_u16(),
    /// };
    /// // It borrows nothing: it can be spawned as it is.
    /// let work = receiver.clone().receive_boxed(head, read, handler, |s| *s, answer);
    /// // No signature headers: refused before the handler.
    /// assert_eq!(tokio::spawn(work).await?, 400);
    /// # Ok(()) }
    /// ```
    pub fn receive_boxed<R, Read, B, F, Fut, T, A, U>(
        self,
        request: R,
        read_body: Read,
        handler: F,
        status_of: impl FnOnce(&T) -> u16 + Send + 'static,
        answer: A,
    ) -> Pin<Box<dyn Future<Output = U> + Send>>
    where
        R: Incoming + Send + Sync + 'static,
        Read: FnOnce() -> B + Send + 'static,
        B: Future<Output = Result<Bytes, Rejection>> + Send + 'static,
        F: FnOnce(R, Delivery) -> Fut + Send + 'static,
        Fut: Future<Output = T> + Send + 'static,
        T: Send + 'static,
        A: FnOnce(&Receiver, Result<T, Rejection>) -> U + Send + 'static,
    {
        let owner = self.clone();
        if self.response_budget().is_some() {
            // A late handler's delivery goes to the budget's inbox, its
            // future running on in a task of its own.
            let run = |admission: super::Admission, request| {
                admission.run_within_budget(|delivery| handler(request, delivery), status_of)
            };
            return Box::pin(traced(
                self,
                || Self::admit_then(owner, request, read_body, run),
                answer,
            ));
        }
        // Boxed where it is made: each move of the work on its way to the
        // box would copy it (a kilobyte).
        Box::pin(traced(
            self,
            || Self::receive_work(owner, request, read_body, handler, status_of),
            answer,
        ))
    }

    /// The work [`receive`](Self::receive) boxes: one allocation per
    /// request, kept small enough for the allocator's per-thread cache
    /// (glibc serves requests up to 1,032 bytes from it; a larger block
    /// takes its slower shared path; see the test `receive_work_fits_the_thread_cache`).
    // Not an `async fn`: that would copy every argument into the state a
    // second time (1,200 bytes instead of 968 in the size test below).
    #[allow(clippy::manual_async_fn)]
    fn receive_work<O, R, Read, B, F, Fut, T>(
        owner: O,
        request: R,
        read_body: Read,
        handler: F,
        status_of: impl FnOnce(&T) -> u16,
    ) -> impl Future<Output = Result<T, Rejection>>
    where
        O: Borrow<Receiver>,
        R: Incoming,
        Read: FnOnce() -> B,
        B: Future<Output = Result<Bytes, Rejection>>,
        F: FnOnce(R, Delivery) -> Fut,
        Fut: Future<Output = T>,
    {
        async move {
            let this = owner.borrow();
            let admission = 'admitted: {
                // Up to the verification, in a block: what it reads and
                // borrows (the head, its headers read once, the body's read)
                // is kept only while the body is read, and takes no room in
                // the steps after.
                let waiting = {
                    let head = request.head();
                    this.check_head(head.headers)?;
                    // The scheme's headers, read once for the check and the
                    // verification.
                    let headers = ReadOnce::new(head.headers, this.inner.verifier.head_names());
                    let head = RequestHead {
                        headers: &headers,
                        ..head
                    };
                    // Pinned where it is made; the head checked with it.
                    let (body, waited) = {
                        let read = std::pin::pin!(read_body());
                        this.read_checked(read, Some(head)).await?
                    };
                    let len = body.len();
                    let step = this.admit_ready(head, body);
                    this.count_body_read(head, &step, waited, len)?;
                    match step {
                        Ok(Step::Done(admitted)) => break 'admitted admitted?,
                        Ok(Step::Wait(admitting)) => Ok(admitting),
                        Err(body) => Err(body),
                    }
                };
                // Only what must wait is kept across the wait: a boxed
                // future, or the body for a verifier that must be awaited
                // (a key lookup), which reads the head again.
                match waiting {
                    Ok(admitting) => admitting.await?,
                    Err(body) => this.admit(request.head(), body).await?,
                }
            };
            admission
                .run(|delivery| handler(request, delivery), status_of)
                .await
        }
    }

    /// [`receive`](Self::receive) under the
    /// [response budget](super::ReceiverBuilder::response_budget) (the
    /// adapters reach it through [`receive_boxed`](Self::receive_boxed) and
    /// [`receive_local`](Self::receive_local) for a receiver that has one):
    /// the handler runs
    /// inline, and past the budget the delivery is stored in the budget's
    /// inbox and answered [`Rejection::Stored`] while the handler runs on
    /// (see [`Admission::run_within_budget`]).
    ///
    /// # Errors
    ///
    /// As [`receive`](Self::receive); [`Rejection::Stored`] past the budget.
    ///
    /// [`Admission::run_within_budget`]: super::Admission::run_within_budget
    pub fn receive_within_budget<R, Read, B, F, Fut, T, S>(
        &self,
        request: R,
        read_body: Read,
        handler: F,
        status_of: S,
    ) -> impl Future<Output = Result<T, Rejection>>
    where
        R: Incoming,
        Read: FnOnce() -> B,
        B: Future<Output = Result<Bytes, Rejection>>,
        F: FnOnce(R, Delivery) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
        T: Send + 'static,
        S: FnOnce(&T) -> u16 + Send + 'static,
    {
        self.receive_with(request, read_body, |admission, request| {
            admission.run_within_budget(|delivery| handler(request, delivery), status_of)
        })
    }

    /// [`receive_within_budget`](Self::receive_within_budget) for handlers
    /// whose future or output is not `Send` (actix-web's): past the budget
    /// the handler runs on in the current thread's
    /// [`LocalSet`](tokio::task::LocalSet) (see
    /// [`Admission::run_within_budget_local`]).
    ///
    /// # Errors
    ///
    /// As [`receive_within_budget`](Self::receive_within_budget).
    ///
    /// [`Admission::run_within_budget_local`]: super::Admission::run_within_budget_local
    pub fn receive_within_budget_local<R, Read, B, F, Fut, T, S>(
        &self,
        request: R,
        read_body: Read,
        handler: F,
        status_of: S,
    ) -> impl Future<Output = Result<T, Rejection>>
    where
        R: Incoming,
        Read: FnOnce() -> B,
        B: Future<Output = Result<Bytes, Rejection>>,
        F: FnOnce(R, Delivery) -> Fut,
        Fut: Future<Output = T> + 'static,
        T: 'static,
        S: FnOnce(&T) -> u16 + 'static,
    {
        self.receive_with(request, read_body, |admission, request| {
            admission.run_within_budget_local(|delivery| handler(request, delivery), status_of)
        })
    }

    /// The pipeline an adapter whose handler futures are not `Send`
    /// (actix-web's) runs for each request: [`receive`](Self::receive), or
    /// under the [response budget](super::ReceiverBuilder::response_budget)
    /// [`receive_within_budget_local`](Self::receive_within_budget_local).
    /// The choice is the receiver's: the adapter calls this one entry point.
    ///
    /// Both works are boxed as `receive` boxes its own (one allocation a
    /// request), here as one `dyn` type so that either fits the same future.
    ///
    /// # Errors
    ///
    /// As [`receive_within_budget`](Self::receive_within_budget).
    pub fn receive_local<'a, R, Read, B, F, Fut, T, S>(
        &'a self,
        request: R,
        read_body: Read,
        handler: F,
        status_of: S,
    ) -> impl Future<Output = Result<T, Rejection>> + 'a
    where
        R: Incoming + 'a,
        Read: FnOnce() -> B + 'a,
        B: Future<Output = Result<Bytes, Rejection>> + 'a,
        F: FnOnce(R, Delivery) -> Fut + 'a,
        Fut: Future<Output = T> + 'static,
        T: 'static,
        S: FnOnce(&T) -> u16 + 'static,
    {
        type Work<'a, T> = Pin<Box<dyn Future<Output = Result<T, Rejection>> + 'a>>;
        traced(
            self,
            || -> Work<'a, T> {
                if self.response_budget().is_some() {
                    // A late handler's future runs on in the current
                    // thread's `LocalSet`.
                    let run = |admission: super::Admission, request| {
                        admission.run_within_budget_local(
                            |delivery| handler(request, delivery),
                            status_of,
                        )
                    };
                    Box::pin(Self::admit_then(self, request, read_body, run))
                } else {
                    Box::pin(Self::receive_work(
                        self, request, read_body, handler, status_of,
                    ))
                }
            },
            as_is,
        )
    }

    /// The budgeted receives' work, with the handler's step left to `run`:
    /// the request admitted ([`admit_read`](Self::admit_read)), then `run`;
    /// boxed and traced.
    fn receive_with<R, Read, B, G, T>(
        &self,
        request: R,
        read_body: Read,
        run: impl FnOnce(super::Admission, R) -> G,
    ) -> impl Future<Output = Result<T, Rejection>>
    where
        R: Incoming,
        Read: FnOnce() -> B,
        B: Future<Output = Result<Bytes, Rejection>>,
        G: Future<Output = Result<T, Rejection>>,
    {
        traced(
            self,
            || Box::pin(Self::admit_then(self, request, read_body, run)),
            as_is,
        )
    }

    /// The request admitted ([`admit_read`](Self::admit_read)) by `owner`,
    /// then `run`: the budgeted receives' work, untraced.
    async fn admit_then<O, R, Read, B, G, T>(
        owner: O,
        request: R,
        read_body: Read,
        run: impl FnOnce(super::Admission, R) -> G,
    ) -> Result<T, Rejection>
    where
        O: Borrow<Receiver>,
        R: Incoming,
        Read: FnOnce() -> B,
        B: Future<Output = Result<Bytes, Rejection>>,
        G: Future<Output = Result<T, Rejection>>,
    {
        let admission = owner.borrow().admit_read(&request, read_body).await?;
        run(admission, request).await
    }

    /// What [`receive`](Self::receive) does up to the handler: the head's
    /// checks, the body's read under its timeout, the verification and the
    /// claim.
    async fn admit_read<R, Read, B>(
        &self,
        request: &R,
        read_body: Read,
    ) -> Result<super::Admission, Rejection>
    where
        R: Incoming,
        Read: FnOnce() -> B,
        B: Future<Output = Result<Bytes, Rejection>>,
    {
        let waiting = {
            let head = request.head();
            self.check_head(head.headers)?;
            let headers = ReadOnce::new(head.headers, self.inner.verifier.head_names());
            let head = RequestHead {
                headers: &headers,
                ..head
            };
            let (body, waited) = {
                let read = std::pin::pin!(read_body());
                self.read_checked(read, Some(head)).await?
            };
            let len = body.len();
            let step = self.admit_ready(head, body);
            self.count_body_read(head, &step, waited, len)?;
            match step {
                Ok(Step::Done(admitted)) => return admitted,
                Ok(Step::Wait(admitting)) => Ok(admitting),
                Err(body) => Err(body),
            }
        };
        match waiting {
            Ok(admitting) => admitting.await,
            Err(body) => self.admit(request.head(), body).await,
        }
    }

    /// Counts the body read (`len` bytes) that `step` (from
    /// [`admit_ready`](Self::admit_ready)) went on with. When the body was
    /// not `waited` for, [`read_checked`](Self::read_checked) left the
    /// head's check to the verification: a refusal the check would have made
    /// counts no body read, as when a head is refused before its body; and a
    /// verifier that must be awaited gets the check first, as before any
    /// wait.
    #[inline]
    fn count_body_read(
        &self,
        head: RequestHead<'_>,
        step: &Result<Step<'_>, Bytes>,
        waited: bool,
        len: usize,
    ) -> Result<(), Rejection> {
        let head_refused = match step {
            _ if waited => false,
            Ok(Step::Done(Err(Rejection::Verify(_)))) => {
                let now = (self.inner.clock)();
                self.inner.verifier.check_head(head, now).is_err()
            }
            Err(_) => {
                self.check_signature_head(head)?;
                false
            }
            Ok(_) => false,
        };
        if !head_refused {
            (self.inner.signals).body_read(self.inner.verifier.scheme(), len);
        }
        Ok(())
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

/// `work` in a `webhook` span (when something can see one), with the
/// request counted as received now and its outcome logged when it ends.
#[inline(always)]
fn traced<O, T, W, A, U>(owner: O, work: impl FnOnce() -> W, answer: A) -> Traced<O, W, A>
where
    O: Borrow<Receiver>,
    W: Future<Output = Result<T, Rejection>>,
    A: FnOnce(&Receiver, Result<T, Rejection>) -> U,
{
    let receiver = owner.borrow();
    let scheme = receiver.inner.verifier.scheme();
    // No span at all when nothing could see one (the usual case without a
    // subscriber): making a disabled span costs more than this check.
    let span = (tracing::level_enabled!(tracing::Level::INFO) || !log_drops_info())
        .then(|| {
            tracing::info_span!(
                "webhook",
                scheme,
                route = %receiver.inner.namespace,
                id = field::Empty,
                key = field::Empty,
                outcome = field::Empty,
                status = field::Empty,
                latency_us = field::Empty,
            )
        })
        .filter(|span| !span_unseen(span));
    let traced = match span {
        // The work is made in its arm: the plain one holds it as it is.
        None => Traced::Plain {
            owner,
            scheme,
            answer: Some(answer),
            work: work(),
        },
        Some(span) => Traced::Spanned {
            owner,
            scheme,
            answer: Some(answer),
            started: Instant::now(),
            // Boxed: a span is ≈ 50 bytes more in every request's future,
            // and most requests have none.
            work: Box::pin(work().instrument(span)),
        },
    };
    traced.receiver().inner.signals.received(scheme);
    traced
}

/// The pipeline's result as it is: what [`Receiver::receive`] answers.
fn as_is<T>(_: &Receiver, result: Result<T, Rejection>) -> Result<T, Rejection> {
    result
}

pin_project_lite::pin_project! {
    /// A request's pipeline in its `webhook` span, if any, and its outcome
    /// (signals, span fields, log line) when it ends.
    ///
    /// Written out rather than as an `async fn`, whose state would keep the
    /// work a second time beside the future it awaits.
    #[project = TracedProj]
    enum Traced<O, W, A> {
        Plain {
            owner: O,
            scheme: &'static str,
            // Taken when the work ends.
            answer: Option<A>,
            #[pin]
            work: W,
        },
        Spanned {
            owner: O,
            scheme: &'static str,
            answer: Option<A>,
            started: Instant,
            work: Pin<Box<tracing::instrument::Instrumented<W>>>,
        },
    }
}

impl<O: Borrow<Receiver>, W, A> Traced<O, W, A> {
    fn receiver(&self) -> &Receiver {
        match self {
            Self::Plain { owner, .. } | Self::Spanned { owner, .. } => owner.borrow(),
        }
    }
}

impl<O, T, W, A, U> Future for Traced<O, W, A>
where
    O: Borrow<Receiver>,
    W: Future<Output = Result<T, Rejection>>,
    A: FnOnce(&Receiver, Result<T, Rejection>) -> U,
{
    type Output = U;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            TracedProj::Plain {
                owner,
                scheme,
                answer,
                work,
            } => {
                let result = std::task::ready!(work.poll(cx));
                Poll::Ready(finish(
                    owner,
                    scheme,
                    answer,
                    result,
                    &tracing::Span::none(),
                ))
            }
            TracedProj::Spanned {
                owner,
                scheme,
                answer,
                started,
                work,
            } => {
                let result = std::task::ready!(work.as_mut().poll(cx));
                let span = work.span();
                let _enter = span.enter();
                span.record(
                    "latency_us",
                    u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
                );
                Poll::Ready(finish(owner, scheme, answer, result, span))
            }
        }
    }
}

/// A traced work's end: its outcome (in `span`), then `answer`.
fn finish<O, T, A, U>(
    owner: &O,
    scheme: &'static str,
    answer: &mut Option<A>,
    result: Result<T, Rejection>,
    span: &tracing::Span,
) -> U
where
    O: Borrow<Receiver>,
    A: FnOnce(&Receiver, Result<T, Rejection>) -> U,
{
    let receiver = owner.borrow();
    receiver.outcome(scheme, &result, span);
    let answer = answer.take().expect("Traced polled after completion");
    answer(receiver, result)
}

/// The target of the `webhook` span (this module's path).
const SPAN_TARGET: &str = module_path!();

/// The `webhook` span the pipeline runs in, when it is the current span.
/// `None` when nothing could see it: INFO (its level) is off everywhere
/// (no subscriber, or none that enables it), or the current span is
/// another one, which happens when the `webhook` span is disabled and so
/// not entered: the caller's span (an HTTP server's request span) must not
/// get this pipeline's `id` or `key`.
pub(super) fn current_webhook_span() -> Option<tracing::Span> {
    if !tracing::level_enabled!(tracing::Level::INFO) {
        return None;
    }
    let span = tracing::Span::current();
    let ours =
        (span.metadata()).is_some_and(|m| m.name() == "webhook" && m.target() == SPAN_TARGET);
    ours.then_some(span)
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

#[cfg(test)]
mod tests {
    use super::*;

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
    ///
    /// The body's read is made when the head has passed, and kept only
    /// while it runs: a larger read does not add to the handler's step
    /// (handed in already made, it was kept in every step, as large as
    /// it is).
    #[test]
    fn receive_work_fits_the_thread_cache() {
        let receiver = Receiver::new(
            crate::scheme::StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap(),
        );
        let parts = || http::Request::new(()).into_parts().0;
        assert_eq!(
            std::mem::size_of_val(&parts()),
            224,
            "the request head's size changed"
        );
        let read = || sized::<64, _>(Ok(Bytes::new()));
        assert_eq!(std::mem::size_of_val(&read()), 136);
        let handler = |_parts, _delivery| sized::<296, _>(204_u16);
        let work = Receiver::receive_work(&receiver, parts(), read, handler, |status| *status);
        let size = std::mem::size_of_val(&work);
        // 904 bytes since the refusal and response-budget changes: with the
        // real route future (24 bytes above this test's handler) 928, under
        // the 1,032-byte cache with room to spare.
        assert!(size <= 912, "the boxed work is {size} bytes");
        let larger = || sized::<200, _>(Ok(Bytes::new()));
        let work = Receiver::receive_work(&receiver, parts(), larger, handler, |status| *status);
        assert_eq!(std::mem::size_of_val(&work), size, "the read's size counts");
        // Owning its receiver and traced, the work is what the tower layer
        // boxes: its pointer and the trace's own fields are all it adds.
        let owned = traced(
            receiver.clone(),
            || Receiver::receive_work(receiver.clone(), parts(), read, handler, |status| *status),
            as_is,
        );
        let owned = std::mem::size_of_val(&owned);
        assert!(owned <= size + 32, "the owned work is {owned} bytes");
    }

    /// Counts the head checks; accepts every delivery (its body is its id).
    struct CountingChecks(std::sync::atomic::AtomicUsize);

    impl crate::Verifier for CountingChecks {
        fn verify(
            &self,
            _: &http::HeaderMap,
            body: &[u8],
            _: std::time::SystemTime,
        ) -> Result<crate::Verified, crate::VerifyError> {
            let id = String::from_utf8_lossy(body).into_owned();
            Ok(crate::Verified::new("counting", crate::MatchedKey::Secret(0)).with_id(id))
        }

        fn check_headers(
            &self,
            _: &http::HeaderMap,
            _: std::time::SystemTime,
        ) -> Result<(), crate::VerifyError> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        }
    }

    /// The head is checked before the body only when the body must be
    /// waited for (or its read failed); a body that came with the head goes
    /// to the verification, which refuses what the check would.
    #[tokio::test]
    async fn the_head_is_checked_first_only_when_the_body_must_be_waited_for() {
        let verifier = std::sync::Arc::new(CountingChecks(0.into()));
        let receiver = Receiver::new(std::sync::Arc::clone(&verifier));
        let checks = || verifier.0.load(std::sync::atomic::Ordering::Relaxed);
        let parts = || http::Request::new(()).into_parts().0;
        let handler = |_parts, _delivery| async { 204_u16 };
        let here = || async { Ok(Bytes::from_static(b"here")) };
        let answer = receiver.receive(parts(), here, handler, |s| *s).await;
        assert_eq!(answer, Ok(204));
        assert_eq!(checks(), 0);
        // Handed over just after the head (at the second poll): no check.
        let next = || async {
            tokio::task::yield_now().await;
            Ok(Bytes::from_static(b"next"))
        };
        let answer = receiver.receive(parts(), next, handler, |s| *s).await;
        assert_eq!(answer, Ok(204));
        assert_eq!(checks(), 0);
        let later = || async {
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
            Ok(Bytes::from_static(b"later"))
        };
        let answer = receiver.receive(parts(), later, handler, |s| *s).await;
        assert_eq!(answer, Ok(204));
        assert_eq!(checks(), 1);
        // A read that fails at once still answers the head's error first.
        let failed = || async { Err(Rejection::BodyRead) };
        let answer = receiver.receive(parts(), failed, handler, |s| *s).await;
        assert_eq!(answer, Err(Rejection::BodyRead));
        assert_eq!(checks(), 2);
        // A body that never comes: the head is checked at the second poll.
        let never = std::future::pending::<Result<Bytes, Rejection>>;
        let answer = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            receiver.receive(parts(), never, handler, |s| *s),
        )
        .await;
        assert!(answer.is_err(), "answered without a body");
        assert_eq!(checks(), 3);
    }
}
