//! The response-budget guard ([`ResponseBudget`]): the handler runs inline,
//! and a delivery whose handler has not answered by the provider's deadline
//! (minus a margin) is handed to the inbox, answered `2xx`, and left to
//! finish where it runs, or to a worker claiming on the same dedup store.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::FutureExt as _;
use futures_util::future::Either;
use http::StatusCode;

use super::admission::{Admission, Observer};
use super::settlement::ClaimGuard;
use crate::inbox::{Inbox, NewEvent};
use crate::{ConfigError, Delivery, Rejection, Verified};

/// The margin taken off the provider's deadline by default: 1 s (the
/// network, the store's write, the answer).
pub const DEFAULT_BUDGET_MARGIN: Duration = Duration::from_secs(1);

/// A route's response budget: run the handler inline, and hand the delivery
/// to `inbox` when it has not answered by the provider's deadline minus a
/// margin ([`ReceiverBuilder::response_budget`](super::ReceiverBuilder::response_budget)).
///
/// One dedup claim (its random token) decides who runs the handler: the
/// inline run holds it from the start and renews it while it runs; a
/// [`Worker`](crate::inbox::Worker) built with
/// [`claim_on`](crate::inbox::WorkerBuilder::claim_on) claims it before
/// running anything. So the worker finds
///
/// | the inline run… | the worker's claim | the worker |
/// |---|---|---|
/// | still running | in flight | waits, then retries later (the event stays in the inbox) |
/// | succeeded (claim completed) | completed | completes the event without running the handler |
/// | failed or panicked (claim released) | claimed | runs the handler |
/// | died with its process | claimed once the lease expired | runs the handler |
///
/// | await point | what happens |
/// |---|---|
/// | request dropped before the budget | the claim is released (as without a budget); nothing was stored or acknowledged: the provider retries |
/// | request dropped after the budget | the rest runs as a runtime task: the store, the handler, the settlement all finish |
/// | the inbox write fails after the budget | `503` + `Retry-After`; the handler still finishes and settles the claim: the provider's retry finds it in flight, completed (a duplicate) or released (it runs) |
/// | the lease runs out while the inline run continues | the worker may claim and run it; the inline run's completion is then refused by its token (logged) |
///
/// The budget defaults to the scheme's documented
/// [`response_deadline`](crate::scheme::registry::SchemeInfo::response_deadline)
/// (Slack 3 s, Shopify 5 s, GitHub and Square 10 s, Svix 15 s) minus
/// [`DEFAULT_BUDGET_MARGIN`]; set it for the others.
///
/// ```
/// # #[cfg(all(feature = "sqlite", feature = "memory"))]
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use webhooks_core::dedup::MemoryStore;
/// use webhooks_core::inbox::{Inbox, SqliteInbox};
/// use webhooks_core::{Receiver, ResponseBudget, scheme::Shopify};
///
/// let inbox = SqliteInbox::connect("sqlite::memory:").await?;
/// inbox.migrate().await?;
/// let inbox: Arc<dyn Inbox> = Arc::new(inbox);
/// // Shopify waits 5 s: answer within 4 s, inline or from the inbox.
/// let receiver = Receiver::builder(Shopify::new("app-secret")?)
///     .store(MemoryStore::new()) // use a shared store in production
///     .response_budget(ResponseBudget::new(Arc::clone(&inbox)))
///     .try_build()?;
/// assert_eq!(receiver.response_budget(), Some(Duration::from_secs(4)));
/// # Ok(()) }
/// # #[cfg(not(all(feature = "sqlite", feature = "memory")))] fn main() {}
/// ```
#[derive(Clone)]
#[must_use]
pub struct ResponseBudget {
    inbox: Arc<dyn Inbox>,
    budget: Option<Duration>,
    margin: Duration,
    status: StatusCode,
}

impl fmt::Debug for ResponseBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseBudget")
            .field("budget", &self.budget)
            .field("margin", &self.margin)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl ResponseBudget {
    /// Hands late deliveries to `inbox`, answering `202`; the budget is the
    /// scheme's deadline minus [`DEFAULT_BUDGET_MARGIN`].
    pub fn new(inbox: Arc<dyn Inbox>) -> Self {
        Self {
            inbox,
            budget: None,
            margin: DEFAULT_BUDGET_MARGIN,
            status: StatusCode::ACCEPTED,
        }
    }

    /// How long the handler runs inline before the delivery is handed to
    /// the inbox (replaces the scheme's deadline minus the margin).
    pub fn budget(mut self, budget: Duration) -> Self {
        self.budget = Some(budget);
        self
    }

    /// What is taken off the scheme's deadline (default 1 s).
    pub fn margin(mut self, margin: Duration) -> Self {
        self.margin = margin;
        self
    }

    /// The status answered once a late delivery is stored (default `202`).
    pub fn status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// The budget for `scheme`, as [`ReceiverBuilder::try_build`](super::ReceiverBuilder::try_build) resolves it.
    pub(super) fn resolve(self, scheme: &'static str, route: &str) -> Result<Handoff, ConfigError> {
        let budget = match self.budget {
            Some(budget) => budget,
            None => {
                let deadline = crate::scheme::registry::find(scheme)
                    .ok()
                    .and_then(|info| info.response_deadline)
                    .ok_or(ConfigError::Setting(
                        "response_budget: this scheme documents no response deadline; set ResponseBudget::budget",
                    ))?;
                deadline.saturating_sub(self.margin)
            }
        };
        if budget.is_zero() {
            return Err(ConfigError::Setting(
                "response_budget: the budget is zero (the margin is not below the deadline)",
            ));
        }
        if !(200..300).contains(&self.status.as_u16()) {
            return Err(ConfigError::Setting(
                "response_budget: the status answered once stored must be 2xx",
            ));
        }
        Ok(Handoff {
            inbox: self.inbox,
            budget,
            status: self.status,
            route: Arc::from(route),
        })
    }
}

/// A receiver's resolved response budget.
#[derive(Clone)]
pub(super) struct Handoff {
    inbox: Arc<dyn Inbox>,
    pub(super) budget: Duration,
    status: StatusCode,
    /// The `route` label of the accept counter: the receiver's namespace,
    /// as for inbox mode's accepts.
    route: Arc<str>,
}

impl Handoff {
    /// What a claimed delivery needs to be handed over: its inbox event
    /// (keyed by the claim's key, which the worker claims), made before the
    /// handler takes the delivery. `None` for a key the inbox would digest
    /// (longer than [`MAX_KEY_LEN`](crate::inbox::MAX_KEY_LEN)): the worker
    /// could not claim it; such a delivery runs inline whatever its time.
    pub(super) fn prepare(
        &self,
        verified: &Verified,
        key: &str,
        body: &Bytes,
        retry_after: Duration,
    ) -> Option<Box<Prepared>> {
        if key.len() > crate::inbox::MAX_KEY_LEN {
            tracing::warn!(
                "dedup key longer than the inbox's: this delivery cannot be handed over and runs inline past its budget"
            );
            return None;
        }
        let event_type = match &verified.event_type {
            Some(event_type) => Some(event_type.clone()),
            None if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') => {
                crate::event::body_type(body).ok().flatten()
            }
            None => None,
        };
        let event = NewEvent {
            key: key.to_owned(),
            scheme: verified.scheme.to_owned(),
            delivery_id: verified.id.clone(),
            event_type,
            matched_key: verified.matched_key.to_string(),
            headers: Vec::new(),
            body: body.clone(),
            signed_at: verified.timestamp,
        };
        Some(Box::new(Prepared {
            handoff: self.clone(),
            event,
            retry_after,
        }))
    }
}

/// A claimed delivery's inbox event, ready to be handed over.
pub(super) struct Prepared {
    handoff: Handoff,
    event: NewEvent,
    retry_after: Duration,
}

impl fmt::Debug for Prepared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prepared")
            .field("budget", &self.handoff.budget)
            .finish_non_exhaustive()
    }
}

/// A handler's outcome: its output, or its panic.
type Caught<T> = Result<T, Box<dyn Any + Send>>;

impl Admission {
    /// [`run`](Self::run) under the receiver's
    /// [response budget](super::ReceiverBuilder::response_budget): the
    /// handler runs inline; if it has not answered within the budget, the
    /// delivery is stored in the budget's inbox and this answers
    /// [`Rejection::Stored`] (the configured `2xx`) while the handler runs
    /// on as a runtime task ([`tokio::spawn`]), its claim settled as usual
    /// when it ends. An inbox that cannot store it:
    /// [`Rejection::StoreUnavailable`] (the handler still runs on). Without
    /// a budget (or a claim) it is `run`.
    ///
    /// The handler's future and output must be `Send + 'static`: they may
    /// outlive the request. For a framework whose handlers are not `Send`
    /// (actix-web), see [`run_within_budget_local`](Self::run_within_budget_local).
    ///
    /// # Errors
    ///
    /// As [`run`](Self::run), and the two above.
    pub fn run_within_budget<F, Fut, T, S>(
        self,
        handler: F,
        status_of: S,
    ) -> impl Future<Output = Result<T, Rejection>> + Send
    where
        F: FnOnce(Delivery) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
        T: Send + 'static,
        S: FnOnce(&T) -> u16 + Send + 'static,
    {
        let parts = match self.split_budget() {
            Ok(parts) => parts,
            Err(admission) => return Either::Left(admission.run(handler, status_of)),
        };
        let started = Instant::now();
        let outcome: Pin<Box<dyn Future<Output = Caught<T>> + Send>> =
            match std::panic::catch_unwind(AssertUnwindSafe(|| handler(parts.delivery))) {
                Ok(fut) => Box::pin(AssertUnwindSafe(fut).catch_unwind()),
                Err(panic) => Box::pin(std::future::ready(Err(panic))),
            };
        Either::Right(budgeted(parts.rest, started, outcome, status_of, |rest| {
            drop(tokio::spawn(rest.run()))
        }))
    }

    /// [`run_within_budget`](Self::run_within_budget) for handlers whose
    /// future or output is not `Send` (actix-web's): past the budget the
    /// handler runs on as a task of the current thread's
    /// [`LocalSet`](tokio::task::LocalSet) ([`tokio::task::spawn_local`];
    /// actix-web runs every worker on one).
    ///
    /// # Errors
    ///
    /// As [`run_within_budget`](Self::run_within_budget).
    ///
    /// # Panics
    ///
    /// Past the budget, outside a `LocalSet`.
    pub fn run_within_budget_local<F, Fut, T, S>(
        self,
        handler: F,
        status_of: S,
    ) -> impl Future<Output = Result<T, Rejection>>
    where
        F: FnOnce(Delivery) -> Fut,
        Fut: Future<Output = T> + 'static,
        T: 'static,
        S: FnOnce(&T) -> u16 + 'static,
    {
        let parts = match self.split_budget() {
            Ok(parts) => parts,
            Err(admission) => return Either::Left(admission.run(handler, status_of)),
        };
        let started = Instant::now();
        let outcome: Pin<Box<dyn Future<Output = Caught<T>>>> =
            match std::panic::catch_unwind(AssertUnwindSafe(|| handler(parts.delivery))) {
                Ok(fut) => Box::pin(AssertUnwindSafe(fut).catch_unwind()),
                Err(panic) => Box::pin(std::future::ready(Err(panic))),
            };
        Either::Right(budgeted(parts.rest, started, outcome, status_of, |rest| {
            drop(tokio::task::spawn_local(rest.run()))
        }))
    }

    /// The admission's parts when it has a budget and a claim, or itself.
    // The admission handed back is the common answer (no budget): boxing it
    // would cost an allocation per request.
    #[allow(clippy::result_large_err)]
    fn split_budget(self) -> Result<BudgetParts, Self> {
        let Self {
            delivery,
            claim,
            observer,
            handoff,
        } = self;
        match (handoff, claim) {
            (Some(prepared), Some(claim)) => Ok(BudgetParts {
                delivery,
                rest: Rest {
                    prepared,
                    claim,
                    observer,
                },
            }),
            (_, claim) => Err(Self {
                delivery,
                claim,
                observer,
                handoff: None,
            }),
        }
    }
}

/// A budgeted admission: the delivery for the handler, and the rest.
struct BudgetParts {
    delivery: Delivery,
    rest: Rest,
}

/// What a budgeted run needs besides the handler.
struct Rest {
    prepared: Box<Prepared>,
    claim: ClaimGuard,
    observer: Option<Observer>,
}

/// The handler's `outcome` inline within the budget, then handed over:
/// what follows the budget is given to `spawn` as a [`HandOver`].
async fn budgeted<O, T, S, Sp>(
    rest: Rest,
    started: Instant,
    mut outcome: O,
    status_of: S,
    spawn: Sp,
) -> Result<T, Rejection>
where
    O: Future<Output = Caught<T>> + Unpin,
    S: FnOnce(&T) -> u16,
    Sp: FnOnce(HandOver<O, S>),
{
    let Rest {
        prepared,
        mut claim,
        observer,
    } = rest;
    let Prepared {
        handoff,
        event,
        retry_after,
    } = *prepared;
    if handoff.budget >= claim.renewal_interval() {
        claim.start_renewal();
    }
    let finished = {
        let mut timer = std::pin::pin!(tokio::time::sleep(handoff.budget));
        std::future::poll_fn(|cx| {
            if let Poll::Ready(out) = Pin::new(&mut outcome).poll(cx) {
                return Poll::Ready(Some(out));
            }
            timer.as_mut().poll(cx).map(|()| None)
        })
        .await
    };
    if let Some(out) = finished {
        let (output, settling) =
            Admission::handled(Some(claim), observer.as_ref(), started, out, status_of);
        if let Some(settling) = settling {
            settling.await;
        }
        return output;
    }
    // Over budget: the rest runs as a task of its own, which neither the
    // request's end nor its future's drop can stop.
    claim.start_renewal();
    let (answer, answered) = tokio::sync::oneshot::channel();
    spawn(HandOver {
        handoff,
        event,
        retry_after,
        answer,
        outcome,
        claim,
        observer,
        started,
        status_of,
    });
    Err(answered
        .await
        .unwrap_or(Rejection::StoreUnavailable { retry_after }))
}

/// What runs past the budget, in a task of its own: the inbox's write, the
/// answer, then the rest of the handler and the claim's settlement.
struct HandOver<O, S> {
    handoff: Handoff,
    event: NewEvent,
    retry_after: Duration,
    answer: tokio::sync::oneshot::Sender<Rejection>,
    outcome: O,
    claim: ClaimGuard,
    observer: Option<Observer>,
    started: Instant,
    status_of: S,
}

impl<O, S> HandOver<O, S> {
    async fn run<T>(self)
    where
        O: Future<Output = Caught<T>>,
        S: FnOnce(&T) -> u16,
    {
        let Self {
            handoff,
            event,
            retry_after,
            answer,
            outcome,
            claim,
            observer,
            started,
            status_of,
        } = self;
        let stored = handoff.inbox.accept(&event).await;
        drop(event);
        let reply = match stored {
            Ok(_) => {
                crate::inbox::signals::accepted(&handoff.route, "handed_over");
                tracing::info!(
                    budget_ms = u64::try_from(handoff.budget.as_millis()).unwrap_or(u64::MAX),
                    "webhook handler over its response budget; delivery stored in the inbox and answered"
                );
                Rejection::Stored {
                    status: handoff.status,
                }
            }
            Err(error) => {
                crate::inbox::signals::accepted(&handoff.route, "unavailable");
                tracing::error!(error = %error, "webhook handler over its response budget and the inbox cannot store it; answering 503, the handler runs on");
                Rejection::StoreUnavailable { retry_after }
            }
        };
        let _ = answer.send(reply);
        let out = outcome.await;
        let (_, settling) =
            Admission::handled(Some(claim), observer.as_ref(), started, out, status_of);
        if let Some(settling) = settling {
            settling.await;
        }
    }
}
