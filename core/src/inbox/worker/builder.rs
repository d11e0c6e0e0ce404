//! The [`WorkerBuilder`]: a worker's settings and its handler, plain,
//! transactional, or run under a claim on a dedup store.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt as _;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
use futures_util::future::BoxFuture;

use super::{Backoff, Config, Handle, Job, JobEvent, Ran, Shared, Worker};
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
use crate::inbox::Transition;
use crate::inbox::{ClaimToken, Inbox};

/// Configures a [`Worker`]; start from [`Worker::builder`], or from
/// [`Worker::transactional`] for a handler that writes in the inbox's
/// transaction (`Store` is then the SQL inbox).
#[cfg_attr(
    not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
    doc = "\n\n[`Worker::transactional`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.Worker.html#method.transactional"
)]
#[must_use]
pub struct WorkerBuilder<T, Store = ()> {
    pub(super) inbox: Arc<dyn Inbox>,
    /// The SQL inbox a transactional handler writes in; `()` otherwise.
    #[cfg_attr(
        not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
        allow(dead_code)
    )]
    pub(super) store: Store,
    pub(super) config: Config,
    /// Set by [`claim_on`](WorkerBuilder::claim_on).
    pub(super) claim_on: Option<ClaimOn>,
    pub(super) marker: PhantomData<fn(T)>,
}

/// The dedup store a worker claims each event's key on before running it
/// (a route with a [response budget](crate::ResponseBudget)), and the
/// retention of the completions it records there.
pub(super) struct ClaimOn {
    store: Arc<dyn crate::dedup::DedupStore>,
    retention: Duration,
}

/// How much longer than the worker's timeout its dedup claim lasts: the
/// handler is bounded by the timeout, so the claim needs no renewal.
const CLAIM_LEASE_MARGIN: Duration = Duration::from_secs(5);

/// The longest wait between two claims of an event whose inline run still
/// holds it.
const CLAIM_POLL: Duration = Duration::from_millis(250);

impl<T, Store> fmt::Debug for WorkerBuilder<T, Store> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<T: JobEvent, Store> WorkerBuilder<T, Store> {
    /// How many events this worker runs at once, each in its own task
    /// (default 1). Run more workers, in this process or others, freely.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.config.concurrency = n.max(1);
        self
    }

    /// How many events one lease takes (default 1). Leased events wait in
    /// the worker, their leases renewed, until their turn. A lease counts an
    /// attempt: if the process dies, the unstarted rest of its batch has
    /// been charged one each (keep `max_attempts` above the batch's share
    /// of crashes, or the batch at 1 when handlers may kill the process).
    pub fn batch(mut self, n: u32) -> Self {
        self.config.batch = n.max(1);
        self
    }

    /// The lease (default 30 s), renewed every third of it while the worker
    /// holds the event: a crashed worker's events are taken over after at
    /// most this long.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config.lease = lease.max(Duration::from_millis(30));
        self
    }

    /// Attempts before an event is dead-lettered (default 8).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.config.max_attempts = n.max(1);
        self
    }

    /// How long one handler run may take (default 30 s); a timeout is a
    /// failed attempt.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.config.timeout = timeout;
        self
    }

    /// The retry backoff (default 1 s doubling up to 1 h, full jitter).
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.config.backoff = backoff;
        self
    }

    /// How long an idle worker waits before looking for due events again
    /// (default 500 ms).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.config.poll_interval = interval;
        self
    }

    /// The name this worker's attempts are recorded under in the inbox's
    /// [attempt history](crate::inbox::attempts) (default: the host's name
    /// and the process id, `web-1:4242`), cut to
    /// [`MAX_WORKER_NAME_LEN`](crate::inbox::attempts::MAX_WORKER_NAME_LEN) bytes.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        let name =
            crate::inbox::attempts::cut(name.into(), crate::inbox::attempts::MAX_WORKER_NAME_LEN);
        self.config.name = std::sync::Arc::from(name);
        self
    }

    /// Bounds the events `selector` matches to `limit` (running at once,
    /// started per second) across every worker of every process that sets
    /// the same limit on the inbox; see [the `gates`
    /// module](crate::inbox::gates). Call once per selector; the first
    /// limit whose selector matches an event applies.
    ///
    /// Before running such an event the worker takes a permit from the
    /// store; refused, it hands the event back unstarted, due when the
    /// store says a permit may be free (its attempt is not counted, and
    /// [`WorkerReport::deferred`](super::WorkerReport::deferred) counts it).
    ///
    /// ```
    /// # #[cfg(feature = "sqlite")]
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::Arc;
    /// use webhooks_core::inbox::gates::Limit;
    /// use webhooks_core::inbox::{Inbox, Job, SqliteInbox, Worker};
    ///
    /// let inbox = SqliteInbox::connect("sqlite::memory:").await?;
    /// inbox.migrate().await?;
    /// let inbox: Arc<dyn Inbox> = Arc::new(inbox);
    /// let worker = Worker::builder(inbox)
    ///     .concurrency(8)
    ///     // Stripe's invoice events: 2 at a time, 10 started per second.
    ///     .limit("stripe:invoice.*".parse()?, Limit::concurrency(2).and_per_second(10))
    ///     .handler(|job: Job<serde_json::Value>| async move { Ok::<(), std::io::Error>(()) });
    /// # drop(worker);
    /// # Ok(()) }
    /// # #[cfg(not(feature = "sqlite"))] fn main() {}
    /// ```
    ///
    /// # Panics
    ///
    /// On an inbox that keeps no gates (the broker-backed ones:
    /// [`Inbox::keeps_gates`] is `false`): the limit could not be kept.
    pub fn limit(
        mut self,
        selector: crate::inbox::gates::Selector,
        limit: crate::inbox::gates::Limit,
    ) -> Self {
        assert!(
            self.inbox.keeps_gates(),
            "WorkerBuilder::limit: this inbox keeps no gates (a broker-backed inbox), so the \
             limit on {selector} could not be kept"
        );
        let mut limits = self.config.limits.to_vec();
        limits.retain(|(s, _)| *s != selector);
        limits.push((selector, limit));
        self.config.limits = Arc::from(limits);
        self
    }

    /// Whether to record each attempt in the inbox's
    /// [attempt history](crate::inbox::attempts) (default `true`; one more
    /// round trip per completion flush and per failure).
    pub fn attempt_history(mut self, record: bool) -> Self {
        self.config.history = record;
        self
    }

    /// The worker, running `handler`, an async function of the [`Job`]
    /// whose error's `Display` is kept as the attempt's error.
    ///
    /// ```
    /// # #[cfg(feature = "sqlite")]
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::Arc;
    /// use webhooks_core::inbox::{Inbox, Job, NewEvent, Shutdown, SqliteInbox, Worker};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Event { n: u32 }
    ///
    /// let inbox = SqliteInbox::connect("sqlite::memory:").await?;
    /// inbox.migrate().await?;
    /// let inbox: Arc<dyn Inbox> = Arc::new(inbox);
    /// inbox.accept(&NewEvent::new("webhooks:test:1", "test", r#"{"n":7}"#)).await?;
    ///
    /// let worker = Worker::builder(Arc::clone(&inbox)).handler(|job: Job<Event>| async move {
    ///     assert_eq!(job.event.n, 7);
    ///     Ok::<(), std::io::Error>(())
    /// });
    /// let shutdown = Shutdown::new();
    /// let running = tokio::spawn(worker.run(shutdown.signal()));
    /// while inbox.stats().await?.completed == 0 {
    ///     tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    /// }
    /// shutdown.trigger();
    /// assert_eq!(running.await?.completed, 1);
    /// # Ok(()) }
    /// # #[cfg(not(feature = "sqlite"))] fn main() {}
    /// ```
    pub fn handler<F, Fut, E>(self, handler: F) -> Worker<T>
    where
        F: Fn(Job<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: fmt::Display,
    {
        let handle: Handle<T> = Arc::new(move |job, _| {
            let fut = handler(job);
            Box::pin(async move {
                fut.await.map_err(|e| e.to_string())?;
                Ok(Ran::Succeeded)
            })
        });
        self.finish(handle)
    }

    /// The worker, running a tower `Service` per [`Job`] (cloned per call,
    /// driven to readiness first).
    pub fn service<S>(self, service: S) -> Worker<T>
    where
        S: tower_service::Service<Job<T>, Response = ()> + Clone + Send + Sync + 'static,
        S::Future: Send + 'static,
        S::Error: fmt::Display,
    {
        let handle: Handle<T> = Arc::new(move |job, _| {
            let mut service = service.clone();
            Box::pin(async move {
                futures_util::future::poll_fn(|cx| service.poll_ready(cx))
                    .await
                    .map_err(|e| e.to_string())?;
                service.call(job).await.map_err(|e| e.to_string())?;
                Ok(Ran::Succeeded)
            })
        });
        self.finish(handle)
    }

    /// Claims each event's key on `store` (the dedup store of a route with
    /// a [response budget](crate::ResponseBudget)) before running the
    /// handler, and records its success there (kept for `retention`, the
    /// route's [retention](crate::ReceiverBuilder::retention)): the route's
    /// inline run and this worker then run a delivery to success once
    /// between them.
    ///
    /// | the claim | the worker |
    /// |---|---|
    /// | claimed | runs the handler; completes the claim on success, releases it otherwise |
    /// | completed (the inline run succeeded) | completes the event without running the handler |
    /// | in flight (the inline run still runs) | waits up to half its [`timeout`](Self::timeout), then fails the attempt (retried later) |
    /// | store unavailable | fails the attempt (retried later) |
    ///
    /// The claim's lease is the [`timeout`](Self::timeout) plus 5 s (the
    /// handler never runs longer).
    pub fn claim_on(
        mut self,
        store: Arc<dyn crate::dedup::DedupStore>,
        retention: Duration,
    ) -> Self {
        self.claim_on = Some(ClaimOn { store, retention });
        self
    }

    fn finish(self, handle: Handle<T>) -> Worker<T> {
        let handle = match self.claim_on {
            Some(claim_on) => claimed(handle, claim_on, self.config.timeout),
            None => handle,
        };
        Worker {
            shared: Arc::new(Shared {
                inbox: self.inbox,
                config: self.config,
                handle,
            }),
        }
    }
}

#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
impl<T: JobEvent, I: crate::inbox::TransactionalInbox> WorkerBuilder<T, I> {
    /// The worker, running `handler` in a transaction of the inbox's
    /// database: the handler's writes and the event's completion commit
    /// together, or not at all (**exactly-once effects**).
    ///
    /// For each event the worker begins a transaction, runs `handler` with
    /// it, then marks the event completed *in the same transaction* — only if
    /// this worker's lease token still holds the event — and commits:
    ///
    /// - handler `Err`, timeout, panic, or a body not fitting `T`: the
    ///   transaction is rolled back (nothing the handler wrote stays), and
    ///   the event is retried or dead-lettered as usual;
    /// - the lease was lost meanwhile (it expired and another worker took
    ///   the event over): the completion matches nothing, the transaction is
    ///   rolled back, the outcome counts as `stale`;
    /// - the process dies before the commit: the database rolls the
    ///   transaction back; the event is leased again after its lease expires;
    /// - the commit fails: the event is retried (if the commit did land, the
    ///   event is completed and the retry is refused as stale).
    ///
    /// So among all the attempts at an event, exactly one commits its
    /// writes. The handler may still *run* more than once: effects outside
    /// the transaction (an e-mail, an HTTP call) stay at least once. The
    /// timeout covers the whole transaction; keep handlers shorter than it,
    /// and on SQLite shorter than the command timeout: a write transaction
    /// holds SQLite's database lock, so accepts wait for it.
    ///
    /// The handler gets the transaction as `&mut sqlx::Transaction`; write
    /// with `&mut **tx` as the executor, and return a boxed future (the
    /// pattern of sqlx's own `Connection::transaction`):
    ///
    /// ```no_run
    /// # #[cfg(feature = "postgres")]
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use webhooks_core::inbox::{Job, PostgresInbox, Shutdown, Worker};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Payment { id: String, cents: i64 }
    ///
    /// let inbox = PostgresInbox::connect("postgres://app@db.internal/app").await?;
    /// inbox.migrate().await?;
    /// let worker = Worker::transactional(inbox).concurrency(4).transactional_handler(
    ///     |job: Job<Payment>, tx| {
    ///         Box::pin(async move {
    ///             sqlx::query("INSERT INTO payments (id, cents) VALUES ($1, $2)")
    ///                 .bind(&job.event.id)
    ///                 .bind(job.event.cents)
    ///                 .execute(&mut **tx)
    ///                 .await?;
    ///             Ok::<(), sqlx::Error>(())
    ///         })
    ///     },
    /// );
    /// let shutdown = Shutdown::new();
    /// tokio::spawn(worker.run(shutdown.signal()));
    /// # Ok(()) }
    /// ```
    pub fn transactional_handler<F, E>(self, handler: F) -> Worker<T>
    where
        F: for<'c> Fn(
                Job<T>,
                &'c mut sqlx::Transaction<'static, I::Database>,
            ) -> BoxFuture<'c, Result<(), E>>
            + Send
            + Sync
            + 'static,
        E: fmt::Display,
    {
        let store = Arc::new(self.store.clone());
        let handler = Arc::new(handler);
        let handle: Handle<T> = Arc::new(move |job: Job<T>, token| {
            let store = Arc::clone(&store);
            let handler = Arc::clone(&handler);
            Box::pin(async move {
                let key = job.meta.key.clone();
                let mut tx = store
                    .begin()
                    .await
                    .map_err(|e| format!("beginning the transaction failed: {e}"))?;
                // On `Err` (or a timeout or panic dropping this future),
                // dropping `tx` rolls it back.
                handler(job, &mut tx).await.map_err(|e| e.to_string())?;
                let completed = store
                    .complete_in(&mut tx, &key, token)
                    .await
                    .map_err(|e| format!("recording the completion failed: {e}"))?;
                match completed {
                    Transition::Applied => {
                        tx.commit()
                            .await
                            .map_err(|e| format!("committing the transaction failed: {e}"))?;
                    }
                    Transition::Stale => {
                        let _ = tx.rollback().await;
                    }
                }
                Ok(Ran::Recorded(completed))
            })
        });
        self.finish(handle)
    }
}

/// `handle`, run only under a claim of the event's key on the dedup store
/// (see [`WorkerBuilder::claim_on`]).
fn claimed<T: Send + 'static>(handle: Handle<T>, on: ClaimOn, timeout: Duration) -> Handle<T> {
    use crate::dedup::Claim;
    let on = Arc::new(on);
    Arc::new(move |job: Job<T>, token: ClaimToken| {
        let (handle, on) = (Arc::clone(&handle), Arc::clone(&on));
        Box::pin(async move {
            let key = job.meta.key.clone();
            let mine = ClaimToken::random();
            let lease = timeout + CLAIM_LEASE_MARGIN;
            let waited_enough = std::time::Instant::now() + timeout / 2;
            loop {
                match on.store.claim(&key, mine, lease).await {
                    Ok(Claim::Claimed) => break,
                    Ok(Claim::Completed) => {
                        tracing::info!(
                            "inbox event already processed by its inline run; completed without running the handler"
                        );
                        return Ok(Ran::Succeeded);
                    }
                    Ok(Claim::InFlight { retry_after }) => {
                        if std::time::Instant::now() >= waited_enough {
                            return Err(
                                "the delivery's inline run still holds its claim".to_owned()
                            );
                        }
                        tokio::time::sleep(retry_after.min(CLAIM_POLL)).await;
                    }
                    Err(error) => {
                        return Err(format!(
                            "the dedup store cannot claim the delivery: {error}"
                        ));
                    }
                }
            }
            // Settled even when the handler panics; a timeout dropping this
            // future leaves the claim to its lease.
            let ran = AssertUnwindSafe(handle(job, token)).catch_unwind().await;
            match ran {
                Ok(Ok(ran)) => {
                    if let Err(error) = on.store.complete(&key, mine, on.retention).await {
                        tracing::error!(error = %error, "recording the delivery's success in the dedup store failed; its claim expires with its lease");
                    }
                    Ok(ran)
                }
                Ok(Err(error)) => {
                    let _ = on.store.release(&key, mine).await;
                    Err(error)
                }
                Err(panic) => {
                    let _ = on.store.release(&key, mine).await;
                    std::panic::resume_unwind(panic)
                }
            }
        })
    })
}
