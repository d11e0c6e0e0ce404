//! [`Worker`]: leases due events, runs the handler, settles each event.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::FutureExt as _;
use futures_util::future::{BoxFuture, Either};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::Instrument as _;

use super::{ClaimToken, EventMeta, Inbox, InboxError, LeasedEvent, Transition};
use crate::ExtractError;
use crate::event::Event;

/// What the handler gets: the typed event (see [`JobEvent`]: the body as
/// JSON, like the `VerifiedWebhook<T>` extractors, or an [`Event<E>`]
/// dispatched on its type, like `WebhookEvent<E>`), the attempt number, the
/// first receipt time and the metadata.
///
/// `Debug` shows the body's length, never its content.
#[non_exhaustive]
pub struct Job<T> {
    /// The event.
    pub event: T,
    /// This attempt's number, from 1.
    pub attempt: u32,
    /// When the inbox first stored the delivery.
    pub received_at: SystemTime,
    /// Scheme, delivery id, event type, matched key, kept headers, signed timestamp.
    pub meta: EventMeta,
    /// The exact verified body.
    pub body: Bytes,
}

impl<T> fmt::Debug for Job<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("attempt", &self.attempt)
            .field("received_at", &self.received_at)
            .field("meta", &self.meta)
            .field("body_len", &self.body.len())
            .finish_non_exhaustive()
    }
}

/// What a [`Worker`]'s [`Job`]s carry, decoded from the stored event.
///
/// - Any `T: DeserializeOwned`: the body as JSON. A body that does not fit
///   is a failed attempt (retried, then dead-lettered).
/// - [`Event<E>`]: dispatched on the event type exactly as the request
///   path's `WebhookEvent<E>` ([`Delivery::event`](crate::Delivery::event)),
///   with the type recorded at accept (the scheme's header, or the body's
///   `"type"`). A type `E` does not list is **completed at once**, without
///   running the handler and never retried (counted as
///   `webhooks_inbox_attempts_total{outcome="unknown_type"}`), so the
///   handler only ever sees [`Event::Known`]. A known type whose data does
///   not fit its variant is a failed attempt whose error names the field,
///   never its value.
///
/// ```
/// # #[cfg(feature = "sqlite")]
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use webhooks_core::event::Event;
/// use webhooks_core::inbox::{Inbox, Job, NewEvent, SqliteInbox, Worker};
///
/// #[derive(serde::Deserialize)]
/// #[serde(tag = "type", content = "data")]
/// enum Email {
///     #[serde(rename = "email.sent")]
///     Sent { email_id: String },
/// }
///
/// let inbox = SqliteInbox::connect("sqlite::memory:").await?;
/// inbox.migrate().await?;
/// let inbox: Arc<dyn Inbox> = Arc::new(inbox);
/// let sent = r#"{"type":"email.sent","data":{"email_id":"em_1"}}"#;
/// let new = r#"{"type":"email.clicked","data":{}}"#;
/// inbox.accept(&NewEvent::new("webhooks:test:1", "test", sent).with_event_type("email.sent")).await?;
/// inbox.accept(&NewEvent::new("webhooks:test:2", "test", new).with_event_type("email.clicked")).await?;
///
/// let worker = Worker::builder(Arc::clone(&inbox)).handler(|job: Job<Event<Email>>| async move {
///     let Event::Known(Email::Sent { email_id }) = job.event else { unreachable!() };
///     assert_eq!(email_id, "em_1");
///     Ok::<(), std::io::Error>(())
/// });
/// let report = worker.run_until_idle().await;
/// assert_eq!((report.completed, report.unknown_type), (1, 1));
/// # Ok(()) }
/// # #[cfg(not(feature = "sqlite"))] fn main() {}
/// ```
pub trait JobEvent: Sized + Send + 'static {
    /// Decodes the stored body, whose event type was recorded as `event_type`.
    ///
    /// # Errors
    ///
    /// [`ExtractError::Json`] naming the failing field: a failed attempt.
    fn decode(event_type: Option<&str>, body: &[u8]) -> Result<Self, ExtractError>;

    /// The event type, when it is one the handler does not know: the worker
    /// then completes the event without running the handler.
    fn unknown_type(&self) -> Option<&str> {
        None
    }
}

impl<T: DeserializeOwned + Send + 'static> JobEvent for T {
    fn decode(_: Option<&str>, body: &[u8]) -> Result<Self, ExtractError> {
        crate::delivery::parse_json(body)
    }
}

impl<E: DeserializeOwned + Send + 'static> JobEvent for Event<E> {
    fn decode(event_type: Option<&str>, body: &[u8]) -> Result<Self, ExtractError> {
        crate::event::dispatch(event_type, body)
    }

    fn unknown_type(&self) -> Option<&str> {
        match self {
            Event::Known(_) => None,
            Event::Unknown { event_type } => Some(event_type),
        }
    }
}

/// A handler's failure, as stored with the event: its `Display` text.
///
/// Keep secrets and the body out of your error messages: they are stored
/// and shown in the dead-letter admin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerError(pub String);

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HandlerError {}

/// Exponential backoff with full jitter: before attempt `n + 1`, wait a
/// uniformly random time between zero and `min(max, base × 2^(n-1))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first ceiling (default 1 s).
    pub base: Duration,
    /// The largest ceiling (default 1 h).
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            max: Duration::from_secs(3600),
        }
    }
}

impl Backoff {
    /// The ceiling after failed attempt `attempt` (from 1).
    #[must_use]
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32
            .checked_shl(attempt.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// A random delay within the ceiling (full jitter).
    #[must_use]
    pub fn delay(&self, attempt: u32) -> Duration {
        let ceiling = self.ceiling(attempt);
        let mut bytes = [0u8; 8];
        if getrandom::fill(&mut bytes).is_err() {
            return ceiling / 2;
        }
        let fraction = (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64;
        ceiling.mul_f64(fraction)
    }
}

/// Tells workers to stop: each finishes the event it is running and hands
/// the rest of its batch back. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Shutdown {
    sender: Arc<watch::Sender<bool>>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    /// A shutdown not triggered yet.
    #[must_use]
    pub fn new() -> Self {
        Self {
            sender: Arc::new(watch::channel(false).0),
        }
    }

    /// Triggers it.
    pub fn trigger(&self) {
        self.sender.send_replace(true);
    }

    /// What workers watch.
    #[must_use]
    pub fn signal(&self) -> ShutdownSignal {
        ShutdownSignal {
            receiver: self.sender.subscribe(),
        }
    }
}

/// The watching side of a [`Shutdown`].
#[derive(Debug, Clone)]
pub struct ShutdownSignal {
    receiver: watch::Receiver<bool>,
}

impl ShutdownSignal {
    /// Whether shutdown was triggered (or its `Shutdown` is gone: nothing
    /// can stop the worker any more, so it stops).
    #[must_use]
    pub fn is_triggered(&self) -> bool {
        *self.receiver.borrow() || self.receiver.has_changed().is_err()
    }

    /// Resolves once shutdown is triggered (or its `Shutdown` is gone).
    pub async fn triggered(&mut self) {
        let _ = self.receiver.wait_for(|stop| *stop).await;
    }
}

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

/// Configures a [`Worker`]; start from [`Worker::builder`], or from
/// [`Worker::transactional`] for a handler that writes in the inbox's
/// transaction (`Store` is then the SQL inbox).
#[cfg_attr(
    not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
    doc = "\n\n[`Worker::transactional`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.Worker.html#method.transactional"
)]
#[must_use]
pub struct WorkerBuilder<T, Store = ()> {
    inbox: Arc<dyn Inbox>,
    /// The SQL inbox a transactional handler writes in; `()` otherwise.
    #[cfg_attr(
        not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
        allow(dead_code)
    )]
    store: Store,
    config: Config,
    /// Set by [`claim_on`](WorkerBuilder::claim_on).
    claim_on: Option<ClaimOn>,
    marker: PhantomData<fn(T)>,
}

/// The dedup store a worker claims each event's key on before running it
/// (a route with a [response budget](crate::ResponseBudget)), and the
/// retention of the completions it records there.
struct ClaimOn {
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

#[derive(Debug, Clone)]
struct Config {
    concurrency: usize,
    batch: u32,
    lease: Duration,
    max_attempts: u32,
    timeout: Duration,
    backoff: Backoff,
    poll_interval: Duration,
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
impl<T: JobEvent, I: super::TransactionalInbox> WorkerBuilder<T, I> {
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
}

impl WorkerReport {
    fn add(&mut self, other: Self) {
        self.completed += other.completed;
        self.retried += other.retried;
        self.dead_lettered += other.dead_lettered;
        self.handed_back += other.handed_back;
        self.stale += other.stale;
        self.unknown_type += other.unknown_type;
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

/// A completion waiting for the flusher.
struct Completion {
    key: String,
    token: ClaimToken,
    /// Completed without running the handler (a type it does not know).
    unknown_type: bool,
    /// The batch's held keys: the flusher takes `key` out once recorded (or
    /// given up), so that its lease is renewed until then.
    held: Arc<Mutex<Vec<String>>>,
    /// Dropped once recorded (or given up).
    recorded: oneshot::Sender<()>,
}

async fn run_loop<T: JobEvent>(
    shared: Arc<Shared<T>>,
    mut signal: ShutdownSignal,
    completions: mpsc::UnboundedSender<Completion>,
) -> WorkerReport {
    let config = &shared.config;
    let mut report = WorkerReport::default();
    let mut failures = 0u32;
    while !signal.is_triggered() {
        let token = ClaimToken::random();
        let leased = shared
            .inbox
            .lease(token, config.batch, config.lease, config.max_attempts)
            .await;
        let events = match leased {
            Ok(events) => {
                failures = 0;
                events
            }
            Err(error) => {
                failures = failures.saturating_add(1);
                tracing::warn!(error = %error, "inbox lease failed; retrying");
                let wait = config.poll_interval.saturating_mul(failures.min(10));
                idle(&mut signal, wait).await;
                continue;
            }
        };
        if events.is_empty() {
            idle(&mut signal, config.poll_interval).await;
            continue;
        }
        report.add(run_batch(&shared, &signal, token, events, &completions).await);
    }
    report
}

/// Records the completions the loops send, several at a time: while one
/// [`Inbox::complete_many`] is on its way, the next completions gather, so
/// fast handlers share a round trip and a commit (across the worker's
/// loops), and a slow handler's completion is recorded as soon as it
/// finishes. Ends once every loop has ended and everything sent is recorded.
/// A batch waits for its completions before its loop leases again, and
/// renews their leases meanwhile.
async fn flush_loop<T>(
    shared: Arc<Shared<T>>,
    mut flushing: mpsc::UnboundedReceiver<Completion>,
) -> WorkerReport {
    let mut report = WorkerReport::default();
    let mut done = Vec::new();
    while flushing.recv_many(&mut done, 1024).await > 0 {
        complete_all(&shared, &done, &mut report).await;
        for completion in done.drain(..) {
            completion
                .held
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|k| *k != completion.key);
            drop(completion.recorded);
        }
    }
    report
}

/// Sleeps for `wait`, or until shutdown.
async fn idle(signal: &mut ShutdownSignal, wait: Duration) {
    let sleep = pin!(tokio::time::sleep(wait));
    let stop = pin!(signal.triggered());
    futures_util::future::select(sleep, stop).await;
}

/// Runs a leased batch one event at a time, renewing the leases of every
/// event still held meanwhile. A succeeded event goes to the flusher
/// ([`flush_loop`]) and stays held (renewed) until its completion is
/// recorded; the batch ends once all are. One whose completion the flusher
/// cannot record stays leased, and is run again after its lease expires:
/// never marked done without its record.
async fn run_batch<T: JobEvent>(
    shared: &Shared<T>,
    signal: &ShutdownSignal,
    token: ClaimToken,
    events: Vec<LeasedEvent>,
    completions: &mpsc::UnboundedSender<Completion>,
) -> WorkerReport {
    let held: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(
        events.iter().map(|e| e.meta.key.clone()).collect(),
    ));
    let release = |key: &str| {
        held.lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|k| k != key);
    };
    let work = pin!(async {
        let mut report = WorkerReport::default();
        let mut flushing = Vec::new();
        for event in events {
            let key = event.meta.key.clone();
            let settle = if signal.is_triggered() {
                Settle::HandBack
            } else {
                run_one(shared, event).await
            };
            if matches!(settle, Settle::Complete | Settle::CompleteUnknown) {
                let (recorded, done) = oneshot::channel();
                let completion = Completion {
                    key: key.clone(),
                    token,
                    unknown_type: matches!(settle, Settle::CompleteUnknown),
                    held: Arc::clone(&held),
                    recorded,
                };
                if completions.send(completion).is_ok() {
                    flushing.push(done);
                    continue;
                }
            }
            settle_one(shared, &key, token, settle, &mut report).await;
            release(&key);
        }
        for done in flushing {
            // `Err`: the flusher is gone; the lease will expire.
            let _ = done.await;
        }
        report
    });
    let renew = pin!(async {
        let every = shared.config.lease / 3;
        loop {
            tokio::time::sleep(every).await;
            let keys = held.lock().unwrap_or_else(|e| e.into_inner()).clone();
            for key in keys {
                match shared.inbox.extend(&key, token, shared.config.lease).await {
                    Ok(Transition::Applied) => {}
                    Ok(Transition::Stale) => {
                        tracing::warn!(key = %key, "inbox lease lost (expired and taken over); this attempt's outcome will be refused");
                    }
                    Err(error) => {
                        tracing::warn!(key = %key, error = %error, "renewing an inbox lease failed");
                    }
                }
            }
        }
    });
    match futures_util::future::select(work, renew).await {
        Either::Left((report, _)) => report,
        Either::Right(((), _)) => unreachable!("the renewal loop never ends"),
    }
}

/// Runs the handler for one event: decode, timeout, panic catching.
async fn run_one<T: JobEvent>(shared: &Shared<T>, event: LeasedEvent) -> Settle {
    let config = &shared.config;
    let attempt = event.attempt;
    let span = tracing::info_span!(
        "inbox_job",
        key = %event.meta.key,
        scheme = %event.meta.scheme,
        attempt,
    );
    let token = event.token;
    let outcome = async {
        let typed = T::decode(event.meta.event_type.as_deref(), &event.body)
            .map_err(|e| format!("the body does not fit the handler's type: {e}"))?;
        if let Some(event_type) = typed.unknown_type() {
            tracing::info!(
                event_type,
                "inbox event of a type the handler does not know; completed without running it"
            );
            return Ok(Ran::UnknownType);
        }
        let job = Job {
            event: typed,
            attempt,
            received_at: event.meta.received_at,
            meta: event.meta,
            body: event.body,
        };
        let handle = Arc::clone(&shared.handle);
        let run = AssertUnwindSafe(async move { handle(job, token).await }).catch_unwind();
        let started = std::time::Instant::now();
        let ran = tokio::time::timeout(config.timeout, run).await;
        super::signals::handler_ran(started);
        match ran {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err("handler panicked".to_owned()),
            Err(_) => Err(format!(
                "handler timed out after {} ms",
                config.timeout.as_millis()
            )),
        }
    }
    .instrument(span.clone())
    .await;
    let _enter = span.enter();
    match outcome {
        Ok(Ran::Succeeded) => Settle::Complete,
        Ok(Ran::UnknownType) => Settle::CompleteUnknown,
        Ok(Ran::Recorded(transition)) => Settle::Recorded(transition),
        Err(error) if attempt >= config.max_attempts => {
            tracing::warn!(error = %error, "inbox event failed its last attempt; dead-lettering");
            Settle::DeadLetter(error)
        }
        Err(error) => {
            tracing::info!(error = %error, "inbox event failed; retrying");
            Settle::Retry(config.backoff.delay(attempt), error)
        }
    }
}

/// Records `completions` with one [`Inbox::complete_many`], retrying store
/// errors a few times within the lease.
async fn complete_all<T>(
    shared: &Shared<T>,
    completions: &[Completion],
    report: &mut WorkerReport,
) {
    let done: Vec<(&str, ClaimToken)> = completions
        .iter()
        .map(|c| (c.key.as_str(), c.token))
        .collect();
    let mut wait = Duration::from_millis(50);
    for _ in 0..4 {
        match shared.inbox.complete_many(&done).await {
            Ok(transitions) => {
                for (completion, transition) in completions.iter().zip(transitions) {
                    let key = &completion.key;
                    match transition {
                        Transition::Applied if completion.unknown_type => {
                            report.unknown_type += 1;
                            super::signals::attempt("unknown_type");
                        }
                        Transition::Applied => {
                            report.completed += 1;
                            super::signals::attempt("completed");
                        }
                        Transition::Stale => {
                            tracing::warn!(key = %key, "inbox outcome refused: the lease was taken over");
                            super::signals::attempt("stale");
                            report.stale += 1;
                        }
                    }
                }
                return;
            }
            Err(error) => {
                tracing::warn!(events = done.len(), error = %error, "recording inbox completions failed; retrying");
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
    }
    tracing::error!(
        events = done.len(),
        "could not record inbox completions; the leases will expire and the events run again"
    );
}

/// Records an outcome, retrying store errors a few times within the lease.
async fn settle_one<T>(
    shared: &Shared<T>,
    key: &str,
    token: ClaimToken,
    settle: Settle,
    report: &mut WorkerReport,
) {
    let inbox = &shared.inbox;
    let mut wait = Duration::from_millis(50);
    for _ in 0..4 {
        let result: Result<Transition, InboxError> = match &settle {
            Settle::Complete | Settle::CompleteUnknown => inbox.complete(key, token).await,
            Settle::Retry(delay, error) => inbox.retry(key, token, *delay, error).await,
            Settle::DeadLetter(error) => inbox.dead_letter(key, token, error).await,
            Settle::HandBack => inbox.release(key, token).await,
            Settle::Recorded(transition) => Ok(*transition),
        };
        match result {
            Ok(Transition::Applied) => {
                let outcome = match settle {
                    Settle::Complete => {
                        report.completed += 1;
                        "completed"
                    }
                    Settle::CompleteUnknown => {
                        report.unknown_type += 1;
                        "unknown_type"
                    }
                    Settle::Retry(..) => {
                        report.retried += 1;
                        "retried"
                    }
                    Settle::DeadLetter(_) => {
                        report.dead_lettered += 1;
                        "dead_lettered"
                    }
                    Settle::HandBack => {
                        report.handed_back += 1;
                        "handed_back"
                    }
                    Settle::Recorded(_) => {
                        report.completed += 1;
                        "completed"
                    }
                };
                super::signals::attempt(outcome);
                return;
            }
            Ok(Transition::Stale) => {
                tracing::warn!(key = %key, "inbox outcome refused: the lease was taken over");
                super::signals::attempt("stale");
                report.stale += 1;
                return;
            }
            Err(error) => {
                tracing::warn!(key = %key, error = %error, "recording an inbox outcome failed; retrying");
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
    }
    tracing::error!(key = %key, "could not record an inbox outcome; the lease will expire and the event run again");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_ceilings_double_up_to_the_max() {
        let backoff = Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        assert_eq!(backoff.ceiling(1), Duration::from_millis(100));
        assert_eq!(backoff.ceiling(2), Duration::from_millis(200));
        assert_eq!(backoff.ceiling(5), Duration::from_secs(1));
        assert_eq!(backoff.ceiling(200), Duration::from_secs(1));
        for attempt in 1..10 {
            assert!(backoff.delay(attempt) <= backoff.ceiling(attempt));
        }
    }
}
