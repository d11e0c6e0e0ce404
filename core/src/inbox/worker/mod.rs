//! [`Worker`]: leases due events, runs the handler, settles each event.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{BoxFuture, Either};
use tokio::sync::mpsc;

use self::run::{flush_loop, run_loop};
use super::{ClaimToken, Inbox, Transition};

mod backoff;
mod builder;
mod job;
mod run;
mod shutdown;

pub use backoff::Backoff;
pub use builder::WorkerBuilder;
pub use job::{HandlerError, Job, JobEvent};
pub use shutdown::{Shutdown, ShutdownSignal};

/// What a handler run achieved: it succeeded (the worker records the
/// completion), or it recorded the completion itself, in its transaction.
enum Ran {
    Succeeded,
    /// The event's type is not one the handler knows: not run.
    UnknownType,
    /// Only transactional handlers (the SQL backends' features) record.
    #[cfg_attr(
        not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
        allow(dead_code)
    )]
    Recorded(Transition),
}

type Handle<T> =
    Arc<dyn Fn(Job<T>, ClaimToken) -> BoxFuture<'static, Result<Ran, String>> + Send + Sync>;

#[derive(Debug, Clone)]
struct Config {
    concurrency: usize,
    batch: u32,
    lease: Duration,
    max_attempts: u32,
    timeout: Duration,
    backoff: Backoff,
    poll_interval: Duration,
    /// The name attempts are recorded under.
    name: Arc<str>,
    /// Whether attempts are recorded ([`Inbox::record_attempts`]).
    history: bool,
    /// The limits, first match wins ([`WorkerBuilder::limit`]).
    limits: Arc<[(crate::inbox::gates::Selector, crate::inbox::gates::Limit)]>,
}

struct Shared<T> {
    inbox: Arc<dyn Inbox>,
    config: Config,
    handle: Handle<T>,
}

/// Processes an inbox's events: leases due ones, renews the leases while it
/// holds them, runs the handler with a timeout (catching panics), then
/// completes, retries (backoff with full jitter) or dead-letters each.
///
/// Run any number of workers, in any number of processes, on one inbox.
/// [`run`](Self::run) returns once its [`ShutdownSignal`] fires and the
/// events in hand are finished (the running one) or handed back (the rest of
/// the batch).
pub struct Worker<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for Worker<T> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T> fmt::Debug for Worker<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

/// What a worker did, when it stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerReport {
    /// Events completed.
    pub completed: u64,
    /// Failed attempts rescheduled.
    pub retried: u64,
    /// Events dead-lettered after their last attempt.
    pub dead_lettered: u64,
    /// Leased events handed back unstarted at shutdown.
    pub handed_back: u64,
    /// Settlements refused: the lease had been lost to another worker.
    pub stale: u64,
    /// Events of a type the handler does not know, completed without
    /// running it (see [`JobEvent`]).
    pub unknown_type: u64,
    /// Events handed back unstarted because their
    /// [limit](WorkerBuilder::limit) refused a permit (not attempts).
    pub deferred: u64,
}

impl WorkerReport {
    fn add(&mut self, other: Self) {
        self.completed += other.completed;
        self.retried += other.retried;
        self.dead_lettered += other.dead_lettered;
        self.handed_back += other.handed_back;
        self.stale += other.stale;
        self.unknown_type += other.unknown_type;
        self.deferred += other.deferred;
    }
}

enum Settle {
    Complete,
    /// Completed without running the handler: a type it does not know.
    CompleteUnknown,
    /// Completed in the handler's transaction (applied), or refused there
    /// and rolled back (stale).
    Recorded(Transition),
    Retry(Duration, String),
    DeadLetter(String),
    HandBack,
}

/// A finished attempt, for the history: its number, start and how the
/// handler ended (`None`: it succeeded or was completed unrun).
#[derive(Clone, Copy)]
struct Tried {
    number: u32,
    started_at: std::time::SystemTime,
    failure: Option<crate::inbox::AttemptOutcome>,
}

impl<T: JobEvent> Worker<T> {
    /// A builder for a worker on `inbox`.
    pub fn builder(inbox: Arc<dyn Inbox>) -> WorkerBuilder<T> {
        WorkerBuilder {
            inbox,
            store: (),
            config: Self::defaults(),
            claim_on: None,
            marker: PhantomData,
        }
    }

    /// A builder for a worker on a SQL inbox whose handler writes in the
    /// inbox's transaction; finish it with
    /// [`transactional_handler`](WorkerBuilder::transactional_handler).
    #[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
    pub fn transactional<I: super::TransactionalInbox>(inbox: I) -> WorkerBuilder<T, I> {
        WorkerBuilder {
            inbox: Arc::new(inbox.clone()),
            store: inbox,
            config: Self::defaults(),
            claim_on: None,
            marker: PhantomData,
        }
    }

    fn defaults() -> Config {
        Config {
            concurrency: 1,
            batch: 1,
            lease: Duration::from_secs(30),
            max_attempts: 8,
            timeout: Duration::from_secs(30),
            backoff: Backoff::default(),
            poll_interval: Duration::from_millis(500),
            name: Arc::from(crate::inbox::attempts::default_worker_name()),
            history: true,
            limits: Arc::from(Vec::new()),
        }
    }

    /// Runs until `signal` fires, then finishes or hands back what it holds
    /// (to stop on any other future, see [`run_until`](Self::run_until)).
    /// The loops run in their own tasks: dropping this future does not stop
    /// them (trigger the [`Shutdown`] instead); an aborted runtime stops them
    /// mid-event, and the leases they held expire and are taken over.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime.
    pub async fn run(self, signal: ShutdownSignal) -> WorkerReport {
        let (completions, flushing) = mpsc::unbounded_channel();
        let flusher = tokio::spawn(flush_loop(Arc::clone(&self.shared), flushing));
        let loops: Vec<_> = (0..self.shared.config.concurrency)
            .map(|_| {
                tokio::spawn(run_loop(
                    Arc::clone(&self.shared),
                    signal.clone(),
                    completions.clone(),
                ))
            })
            .collect();
        drop(completions);
        let mut report = WorkerReport::default();
        for handle in loops.into_iter().chain([flusher]) {
            match handle.await {
                Ok(one) => report.add(one),
                Err(error) => tracing::error!(error = %error, "inbox worker task failed"),
            }
        }
        report
    }
}

impl<T: JobEvent> Worker<T> {
    /// Runs until `stop` resolves, then finishes or hands back what it
    /// holds, as [`run`](Self::run). Any future stops it: a
    /// `CancellationToken`'s `cancelled()`, `tokio::signal::ctrl_c()`, a
    /// oneshot receiver.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime.
    pub async fn run_until<F: Future>(self, stop: F) -> WorkerReport {
        let shutdown = Shutdown::new();
        let mut running = pin!(self.run(shutdown.signal()));
        let stop = pin!(stop);
        match futures_util::future::select(running.as_mut(), stop).await {
            Either::Left((report, _)) => report,
            Either::Right((_stopped, _)) => {
                shutdown.trigger();
                running.await
            }
        }
    }

    /// Runs until nothing in the inbox is due or in flight, then stops: a
    /// test helper, so that tests need not poll [`Inbox::stats`] with sleeps.
    /// Events waiting for a retry's backoff are not due: it returns before
    /// they run (give tests a short [`Backoff`]). A [paused](Inbox::set_paused)
    /// inbox is idle once nothing is in flight. The inbox is looked at
    /// every 10 ms.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime.
    pub async fn run_until_idle(self) -> WorkerReport {
        let inbox = Arc::clone(&self.shared.inbox);
        self.run_until(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                match inbox.stats().await {
                    Ok(stats) if (stats.due == 0 || stats.paused) && stats.in_flight == 0 => {
                        return;
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(error = %error, "inbox stats failed while waiting for idle");
                    }
                }
            }
        })
        .await
    }
}
