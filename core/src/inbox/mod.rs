//! The durable inbox: store each verified delivery, answer at once, process it
//! in [`Worker`]s with retries, dead letters and replay.
//!
//! With an inbox configured ([`ReceiverBuilder::inbox`](crate::ReceiverBuilder::inbox)),
//! the pipeline verifies a delivery, [`accept`](Inbox::accept)s it (an insert
//! whose unique key is the dedup key: that uniqueness *is* the deduplication),
//! and only then answers the sender (`202` by default). Workers, in any number
//! of processes, [`lease`](Inbox::lease) due events, run the handler, and
//! [`complete`](Inbox::complete), [`retry`](Inbox::retry) or
//! [`dead_letter`](Inbox::dead_letter) them.
//!
//! Every transition of a leased event names the lease's [`ClaimToken`]: a
//! worker whose lease expired and was taken over can never complete, retry,
//! hand back or dead-letter the event someone else now holds
//! ([`Transition::Stale`]). Every time is the database's own clock, so workers
//! on hosts with skewed clocks still agree.
//!
//! | state | how it gets there | leaves by |
//! |---|---|---|
//! | pending | accepted; retried; handed back; replayed | leased when due |
//! | leased | a worker leased it (attempt + 1) | complete, retry, dead letter, hand back; lease expiry (taken over, or dead-lettered if it was the last attempt) |
//! | completed | the handler succeeded | purged after the retention |
//! | dead | the last attempt failed, or its lease expired | replayed or discarded |
//!
//! **Guarantee.** Each delivery is stored once (a sender's retry of a stored
//! delivery is answered as a duplicate) and completed once. The handler runs at
//! least once; exactly once unless a crash or a lease expiry hits while it runs
//! (then the next lease runs it again).
//!
//! **Exactly-once effects on SQL.** With [`Worker::transactional`], the
//! handler writes in a transaction of the inbox's database, and the worker
//! records the completion — token-checked — in that same transaction before
//! committing: the handler's writes and "done" commit together or not at
//! all. A failed, timed-out or panicking attempt rolls back; a worker whose
//! lease was taken over finds its completion refused and rolls back; a
//! process that dies before the commit leaves nothing. So of all the attempts
//! at an event, exactly one commits its writes — the writes in that
//! transaction, to that database. The handler itself may still run more
//! than once, and effects outside the transaction (an e-mail, an HTTP call)
//! stay at least once. PostgreSQL, MySQL/MariaDB and SQLite
//! ([`TransactionalInbox`]); not Redis.
//!
//! **Completions in batches.** A worker does not record each completion on
//! its own: its loops hand them to one flusher, which records all that are
//! waiting with [`Inbox::complete_many`] (one statement, one commit), while
//! the next ones gather. Each stays token-checked, and an event stays leased
//! (its lease renewed) until its completion is recorded.
//!
//! | backend | feature | lease |
//! |---|---|---|
//! | [`SqliteInbox`] | `sqlite` | one `UPDATE … RETURNING` under SQLite's write lock |
//! | [`PostgresInbox`] | `postgres` | `UPDATE … WHERE key IN (SELECT … FOR UPDATE SKIP LOCKED) RETURNING` |
//! | [`MySqlInbox`] | `mysql` | `SELECT … FOR UPDATE SKIP LOCKED` then `UPDATE`, one transaction |
//! | [`RedisInbox`] | `redis` | a Lua script over a hash per event and sorted sets (see its durability note) |
//! | [`RedisClusterInbox`] | `redis-cluster` | the same scripts over hash-tagged partitions, one script per partition visited |
//! | [`JetStreamInbox`] | `nats` | a fetch from a durable pull consumer (`ack_wait` = the lease); see its module |
//!
//! [`inbox_from_url`] picks one at run time.
//!
//! ```
//! # #[cfg(feature = "sqlite")]
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use webhooks_core::dedup::{ClaimToken, Transition};
//! use webhooks_core::inbox::{Accepted, Inbox, NewEvent, SqliteInbox};
//!
//! let inbox = SqliteInbox::connect("sqlite::memory:").await?;
//! inbox.migrate().await?;
//! let event = NewEvent::new("webhooks:test:msg_1", "test", "{}");
//! assert_eq!(inbox.accept(&event).await?, Accepted::Stored);
//! assert_eq!(inbox.accept(&event).await?, Accepted::Duplicate);
//!
//! let token = ClaimToken::random();
//! let leased = inbox.lease(token, 10, Duration::from_secs(30), 5).await?;
//! assert_eq!(leased.len(), 1);
//! assert_eq!(leased[0].attempt, 1);
//! // A worker whose lease was taken over cannot complete:
//! assert_eq!(inbox.complete(&leased[0].meta.key, ClaimToken::random()).await?, Transition::Stale);
//! assert_eq!(inbox.complete(&leased[0].meta.key, token).await?, Transition::Applied);
//! # Ok(()) }
//! # #[cfg(not(feature = "sqlite"))] fn main() {}
//! ```
#![cfg_attr(
    not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
    doc = "\n\n[`Worker::transactional`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.Worker.html#method.transactional\n[`TransactionalInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/trait.TransactionalInbox.html"
)]
#![cfg_attr(
    not(feature = "postgres"),
    doc = "\n\n[`PostgresInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.PostgresInbox.html"
)]
#![cfg_attr(
    not(feature = "mysql"),
    doc = "\n\n[`MySqlInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.MySqlInbox.html"
)]
#![cfg_attr(
    not(feature = "sqlite"),
    doc = "\n\n[`SqliteInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.SqliteInbox.html"
)]
#![cfg_attr(
    not(feature = "redis"),
    doc = "\n\n[`RedisInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.RedisInbox.html"
)]
#![cfg_attr(
    not(feature = "redis-cluster"),
    doc = "\n\n[`RedisClusterInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.RedisClusterInbox.html"
)]
#![cfg_attr(
    not(feature = "nats"),
    doc = "\n\n[`JetStreamInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.JetStreamInbox.html"
)]

use std::fmt;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use sha2::{Digest as _, Sha256};

use crate::ConfigError;
pub use crate::dedup::{ClaimToken, Transition};

pub(crate) mod accept;
pub mod actions;
pub mod activity;
pub mod admin;
pub mod attempts;
pub mod bulk;
pub mod gates;
mod purge;
pub mod search;
pub mod signals;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod sql;

#[cfg(any(feature = "nats", feature = "rabbitmq"))]
mod broker_format;
mod encoding;
mod listing;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "nats")]
mod nats;
mod open;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "rabbitmq")]
mod rabbitmq;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "redis-cluster")]
mod redis_cluster;
#[cfg(feature = "sqlite")]
mod sqlite;
pub(crate) mod url;
mod worker;

#[cfg(feature = "redis")]
pub use self::redis::{
    DEAD_LETTER_SCAN_BUDGET, DELIVERY_SCAN_BUDGET, RedisInbox, RedisInboxBuilder,
};
#[cfg(feature = "redis-cluster")]
pub use self::redis_cluster::{RedisClusterInbox, RedisClusterInboxBuilder};
pub use actions::{
    ACTION_LOG_RETENTION, Action, ActionKind, ActionPage, MAX_ACTION_TARGET_LEN,
    MAX_ACTION_VIA_LEN, MAX_ACTIONS_PAGE, MAX_ACTOR_LEN,
};
pub use activity::{ACTIVITY_MINUTES, ACTIVITY_RETENTION, Activity, ActivityMinute};
pub use attempts::{ATTEMPTS_KEPT, Attempt, AttemptOutcome, MAX_ATTEMPT_ERROR_LEN};
pub(crate) use encoding::to_ms;
#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "redis"
))]
pub(crate) use encoding::{decode_headers, encode_headers, millis};
#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "redis",
    feature = "nats",
    feature = "rabbitmq"
))]
pub(crate) use encoding::{from_ms, truncate_error};
#[cfg(any(feature = "nats", feature = "rabbitmq"))]
pub(crate) use listing::page_in_memory;
pub use listing::{
    DeadLetter, DeadLetterCursor, DeadLetterFilter, DeadLetterPage, Delivery, DeliveryCursor,
    DeliveryFilter, DeliveryOrder, DeliveryPage, DeliveryState,
};
#[cfg(feature = "mysql")]
pub use mysql::MySqlInbox;
#[cfg(feature = "nats")]
pub use nats::{
    CONSUMER, DEAD_HEADER, JetStreamInbox, JetStreamInboxBuilder, LISTING_SCAN_BUDGET, META_HEADER,
};
pub use open::inbox_from_url;
#[cfg(feature = "postgres")]
pub use postgres::PostgresInbox;
pub use purge::{DEFAULT_PURGE_INTERVAL, DEFAULT_RETENTION, PurgeTask, purge_floor};
#[cfg(feature = "rabbitmq")]
pub use rabbitmq::{RabbitMqInbox, RabbitMqInboxBuilder};
pub use search::{
    MAX_PATH_DEPTH, MAX_PATH_LEN, MAX_SEARCH_LEN, MAX_SEARCH_TERMS, MAX_SEARCH_VALUE_LEN, Search,
    SearchError, SearchOp, SearchTerm, Segment,
};
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub use sql::{DEFAULT_INBOX_TABLE, SqlInboxBuilder};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteInbox;
/// The sqlx crate this inbox is built on, for the transactions of
/// [`Worker::transactional`] (so that your sqlx is the same version).
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub use sqlx;
pub use worker::{
    Backoff, HandlerError, Job, JobEvent, Shutdown, ShutdownSignal, Worker, WorkerBuilder,
    WorkerReport,
};

/// The error kept with an event whose lease expired on its last attempt.
pub const EXPIRED_ON_LAST_ATTEMPT: &str =
    "lease expired on the last attempt: the worker crashed, was killed or stalled";

/// The longest error text stored with a retried or dead-lettered event.
pub const MAX_ERROR_LEN: usize = 2_000;

/// The longest key stored as is; longer keys are stored as `sha256:` and the
/// hex digest of their bytes.
pub const MAX_KEY_LEN: usize = 255;

/// Why an inbox operation failed. Every backend maps its driver's errors into
/// it, keeping them as the source.
///
/// At accept, the pipeline answers `503` with `Retry-After` for every variant:
/// nothing was acknowledged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InboxError {
    /// The store could not be reached or refused the operation.
    #[error("inbox store unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The store did not answer in time.
    #[error("inbox store timed out")]
    Timeout,
    /// The store answered something this backend does not understand.
    #[error("inbox store returned an unexpected answer: {0}")]
    Protocol(String),
    /// The store refused this event for good (a byte sequence it cannot
    /// store): retrying the same delivery fails the same way. At accept: `400`.
    #[error("inbox store refused the event")]
    Permanent(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl InboxError {
    /// Wraps a driver error as [`InboxError::Unavailable`], keeping it as the source.
    pub fn unavailable(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Unavailable(Box::new(error))
    }
}

impl From<crate::dedup::StoreError> for InboxError {
    fn from(error: crate::dedup::StoreError) -> Self {
        use crate::dedup::StoreError;
        match error {
            StoreError::Timeout => Self::Timeout,
            StoreError::Protocol(message) => Self::Protocol(message),
            StoreError::Unavailable(source) => Self::Unavailable(source),
            StoreError::Permanent(source) => Self::Permanent(source),
        }
    }
}

/// Why an inbox could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The URL or a setting is invalid, or names a backend whose cargo
    /// feature is off. Never contains the URL (it may hold a password).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store could not be reached, or refused to set up its table.
    #[error(transparent)]
    Store(#[from] InboxError),
}

impl From<crate::dedup::OpenError> for OpenError {
    fn from(error: crate::dedup::OpenError) -> Self {
        match error {
            crate::dedup::OpenError::Config(config) => Self::Config(config),
            crate::dedup::OpenError::Store(store) => Self::Store(store.into()),
        }
    }
}

/// A verified delivery to store: what [`Inbox::accept`] inserts.
///
/// `Debug` shows the body's length, never its content.
#[derive(Clone)]
#[non_exhaustive]
pub struct NewEvent {
    /// The unique key: the pipeline's dedup key (`namespace:scheme:id`).
    pub key: String,
    /// The scheme's name.
    pub scheme: String,
    /// The sender's delivery id, if any.
    pub delivery_id: Option<String>,
    /// The event type, if the scheme reports one.
    pub event_type: Option<String>,
    /// Which secret or key matched (`secret#0`), never the secret.
    pub matched_key: String,
    /// The request headers kept with the event (those the receiver was told to keep).
    pub headers: Vec<(String, String)>,
    /// The exact verified body.
    pub body: Bytes,
    /// The signed timestamp (Unix seconds), if the scheme signs one.
    pub signed_at: Option<u64>,
}

impl fmt::Debug for NewEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewEvent")
            .field("key", &self.key)
            .field("scheme", &self.scheme)
            .field("delivery_id", &self.delivery_id)
            .field("event_type", &self.event_type)
            .field("matched_key", &self.matched_key)
            .field("headers", &self.headers.len())
            .field("body_len", &self.body.len())
            .field("signed_at", &self.signed_at)
            .finish()
    }
}

impl NewEvent {
    /// An event with only its key, scheme and body (for tests and custom
    /// integrations; the pipeline fills every field).
    #[must_use]
    pub fn new(key: impl Into<String>, scheme: impl Into<String>, body: impl Into<Bytes>) -> Self {
        Self {
            key: key.into(),
            scheme: scheme.into(),
            delivery_id: None,
            event_type: None,
            matched_key: String::new(),
            headers: Vec::new(),
            body: body.into(),
            signed_at: None,
        }
    }

    /// Sets the event type.
    #[must_use]
    pub fn with_event_type(mut self, event_type: impl Into<String>) -> Self {
        self.event_type = Some(event_type.into());
        self
    }

    /// The key as stored: itself, or its digest when longer than [`MAX_KEY_LEN`].
    #[must_use]
    pub fn stored_key(&self) -> String {
        stored_key(&self.key)
    }
}

/// `key`, or `sha256:` and its hex digest when longer than [`MAX_KEY_LEN`] bytes.
pub(crate) fn stored_key(key: &str) -> String {
    if key.len() <= MAX_KEY_LEN {
        return key.to_owned();
    }
    let digest = Sha256::digest(key.as_bytes());
    let mut out = String::from("sha256:");
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// The answer to [`Inbox::accept`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Accepted {
    /// Inserted, durably: the sender may be told it was received.
    Stored,
    /// An event with this key is already stored (in any state): nothing changed.
    Duplicate,
}

/// What the inbox keeps about an event besides its body.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventMeta {
    /// The stored key.
    pub key: String,
    /// The scheme's name.
    pub scheme: String,
    /// The sender's delivery id, if any.
    pub delivery_id: Option<String>,
    /// The event type, if known.
    pub event_type: Option<String>,
    /// Which secret or key matched.
    pub matched_key: String,
    /// The kept request headers.
    pub headers: Vec<(String, String)>,
    /// When the inbox first stored the delivery (the database's clock).
    pub received_at: SystemTime,
    /// The signed timestamp (Unix seconds), if any.
    pub signed_at: Option<u64>,
}

/// An event a worker holds: run the handler, then settle it with the token.
///
/// `Debug` shows the body's length, never its content.
#[derive(Clone)]
#[non_exhaustive]
pub struct LeasedEvent {
    /// The metadata.
    pub meta: EventMeta,
    /// The exact verified body.
    pub body: Bytes,
    /// This attempt's number, from 1.
    pub attempt: u32,
    /// The lease's token.
    pub token: ClaimToken,
}

impl fmt::Debug for LeasedEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasedEvent")
            .field("meta", &self.meta)
            .field("body_len", &self.body.len())
            .field("attempt", &self.attempt)
            .field("token", &self.token)
            .finish()
    }
}

/// Counts for dashboards and alerts (see [`Inbox::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct InboxStats {
    /// Events waiting, due now or later (the queue depth).
    pub pending: u64,
    /// Of those, the ones due now.
    pub due: u64,
    /// How long the oldest due event has been waiting past its due time.
    pub oldest_due_age: Option<Duration>,
    /// Events leased by a worker.
    pub in_flight: u64,
    /// Dead letters.
    pub dead: u64,
    /// Completed events not yet purged. Redis counts them all; the SQL
    /// backends count up to [`COMPLETED_COUNT_LIMIT`] (a count at the limit
    /// means at least that many), so that `stats()` costs the same however
    /// many completed events the retention keeps.
    pub completed: u64,
    /// Whether processing is paused ([`Inbox::set_paused`]): no worker
    /// leases anything until it is resumed.
    pub paused: bool,
}

/// The most completed events the SQL backends' [`Inbox::stats`] counts.
pub const COMPLETED_COUNT_LIMIT: u64 = 100_000;

/// A durable inbox of verified deliveries.
///
/// Every operation is one atomic step in the store (a statement, a
/// transaction, a Lua script). Implementations are used as `Arc<dyn Inbox>`,
/// so a deployment chooses its backend at run time ([`inbox_from_url`]).
#[async_trait::async_trait]
pub trait Inbox: Send + Sync + 'static {
    /// Inserts `event`, unique on its key, due now. Returns only once the
    /// insert is durable.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer: nothing may be acknowledged.
    async fn accept(&self, event: &NewEvent) -> Result<Accepted, InboxError>;

    /// Leases up to `batch` due events to `token` for `lease`, counting one
    /// attempt each. Due: pending with a due time passed, or leased with an
    /// expired lease and fewer than `max_attempts` attempts (a takeover).
    /// Leased events whose lease expired on attempt `max_attempts` or later
    /// are dead-lettered first (the worker crashed or stalled on its last try).
    ///
    /// While the inbox is [paused](Self::set_paused) it leases nothing (the
    /// flag is read in the lease's own statement or script, so every worker
    /// of every process obeys it from its next poll).
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn lease(
        &self,
        token: ClaimToken,
        batch: u32,
        lease: Duration,
        max_attempts: u32,
    ) -> Result<Vec<LeasedEvent>, InboxError>;

    /// Renews the lease to `lease` from now, if `token` still holds the event.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn extend(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Transition, InboxError>;

    /// Marks the event completed, if `token` still holds it.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn complete(&self, key: &str, token: ClaimToken) -> Result<Transition, InboxError>;

    /// Marks each `(key, token)` completed if its token still holds it, and
    /// answers one [`Transition`] per entry, in order. The [`Worker`] flushes
    /// the completions it collects through this, so a batch costs one round
    /// trip and one commit instead of one each.
    ///
    /// Every backend of this crate does it in one statement (one script on
    /// Redis): all or nothing — on a Redis Cluster, one script per partition
    /// the entries fall in, each all or nothing. The default loops over [`complete`](Self::complete)
    /// and is not atomic: after an error, entries applied before it answer
    /// [`Transition::Stale`] when retried. An entry never reported
    /// [`Applied`](Transition::Applied) stays leased, and its lease expires.
    /// An entry its own token already completed answers `Stale`, except on
    /// MySQL, which keeps the token of a completed row and answers `Applied`.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn complete_many(
        &self,
        done: &[(&str, ClaimToken)],
    ) -> Result<Vec<Transition>, InboxError> {
        let mut out = Vec::with_capacity(done.len());
        for (key, token) in done {
            out.push(self.complete(key, *token).await?);
        }
        Ok(out)
    }

    /// Makes the event pending again, due after `delay`, keeping `error`
    /// (truncated to [`MAX_ERROR_LEN`]), if `token` still holds it.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn retry(
        &self,
        key: &str,
        token: ClaimToken,
        delay: Duration,
        error: &str,
    ) -> Result<Transition, InboxError>;

    /// Hands the event back unstarted (a worker stopping): pending, due now,
    /// and this attempt not counted, if `token` still holds it.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, InboxError>;

    /// Dead-letters the event with `error`, if `token` still holds it.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn dead_letter(
        &self,
        key: &str,
        token: ClaimToken,
        error: &str,
    ) -> Result<Transition, InboxError>;

    /// Lists dead letters (without bodies), oldest receipt first. A page
    /// may hold fewer than the limit and still have a
    /// [`next`](DeadLetterPage::next) cursor: list until it is `None`.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn dead_letters(&self, filter: &DeadLetterFilter) -> Result<DeadLetterPage, InboxError>;

    /// One dead letter with its body; `None` if `key` is not dead-lettered.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn dead_letter_get(&self, key: &str) -> Result<Option<DeadLetter>, InboxError>;

    /// Makes a dead letter pending again, due now, with a fresh attempt
    /// budget. Of concurrent replays of one event exactly one is
    /// [`Applied`](Transition::Applied).
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn replay(&self, key: &str) -> Result<Transition, InboxError>;

    /// Deletes a dead letter.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn discard(&self, key: &str) -> Result<Transition, InboxError>;

    /// Deletes the events completed more than `older_than` ago; returns how
    /// many. Keep `older_than` above the senders' retry window (days): a
    /// retry of a purged delivery is stored and processed again.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn purge_completed(&self, older_than: Duration) -> Result<u64, InboxError>;

    /// Queue depth, age of the oldest due event, in-flight and dead counts.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn stats(&self) -> Result<InboxStats, InboxError>;

    /// Pauses (`true`) or resumes (`false`) processing, for every worker of
    /// every process using this store; returns whether it changed (pausing
    /// a paused inbox is a no-op answering `false`).
    ///
    /// The flag lives in the inbox's own store: a control table created by
    /// `migrate()` on SQL (`<table>_control`), the key `<prefix>paused` on
    /// Redis, `{<prefix>p<n>}:paused` in each partition's slot on a Redis
    /// Cluster, the subject `<S>_CTL.paused` on JetStream. While paused,
    /// [`lease`](Self::lease) hands out nothing, so workers stop starting
    /// attempts from their next poll; attempts already running finish and
    /// settle normally, and [`accept`](Self::accept) keeps storing
    /// deliveries (senders still get their `2xx`): a pause stops
    /// processing, not receiving. Leases that expired on their last attempt
    /// may still be dead-lettered meanwhile.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer (on SQL, also when
    /// `migrate()` never ran on it).
    async fn set_paused(&self, paused: bool) -> Result<bool, InboxError>;

    /// Whether processing is paused (see [`set_paused`](Self::set_paused)).
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn paused(&self) -> Result<bool, InboxError>;

    /// Lists the deliveries in one state (without bodies), in the filter's
    /// order by receipt time (newest first by default), with its filters
    /// (scheme, event type, delivery id, received between). A page may hold
    /// fewer than the limit and still have a
    /// [`next`](DeliveryPage::next) cursor: list until it is `None`. Every
    /// event in the state for the whole walk is listed exactly once; one
    /// that changes state meanwhile may be listed or not.
    ///
    /// On SQL one statement reads the `(state, received_at, event_key)`
    /// index from the cursor, in the listing's direction, until the page is
    /// full (filters that match few of the state's events read more of it;
    /// due and retrying events share the pending state and are told apart
    /// by `due_at`). On Redis each call examines at most
    /// `DELIVERY_SCAN_BUDGET` receipt-index entries per partition (the
    /// index holds the events stored since it exists: older ones appear
    /// under `Dead` only), so a page may be short, even empty, with a
    /// cursor.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn deliveries(&self, filter: &DeliveryFilter) -> Result<DeliveryPage, InboxError>;

    /// One delivery in any state, with its body; `None` if `key` is not
    /// stored (never accepted, discarded or purged).
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn delivery_get(&self, key: &str) -> Result<Option<Delivery>, InboxError>;

    /// Per-minute accepted, completed and failed counts over the last
    /// `minutes` minutes (clamped to 1 ..= [`ACTIVITY_MINUTES`]), oldest
    /// first, ending with the current minute of the store's clock; idle
    /// minutes are zeros. Counted in the store by every process using it
    /// (see [the `activity` module](crate::inbox::activity) for what counts and what
    /// it costs); the cost of reading does not depend on the inbox's size.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer (on SQL, also when
    /// `migrate()` did not create the activity table).
    async fn activity(&self, minutes: u32) -> Result<Activity, InboxError>;

    /// Appends each `(key, attempt)` to its event's attempt history (see
    /// [the `attempts` module](crate::inbox::attempts)), keeping the newest
    /// [`ATTEMPTS_KEPT`] per event; the [`Worker`] calls it once per
    /// settled attempt, the completions of a flush in one call. An attempt
    /// for an event no longer stored is dropped, now or at the next purge.
    ///
    /// The default keeps nothing ([`keeps_attempts`](Self::keeps_attempts)
    /// is `false`): the broker-backed inboxes. Every database inbox of this
    /// crate keeps them, in one statement (one script on Redis).
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer (the entries are lost;
    /// the events are not affected).
    async fn record_attempts(&self, attempts: &[(&str, Attempt)]) -> Result<(), InboxError> {
        let _ = attempts;
        Ok(())
    }

    /// The event's attempt history, oldest first, at most [`ATTEMPTS_KEPT`];
    /// empty if it has none, is not stored, or the inbox keeps none.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn attempts(&self, key: &str) -> Result<Vec<Attempt>, InboxError> {
        let _ = key;
        Ok(Vec::new())
    }

    /// Whether [`record_attempts`](Self::record_attempts) keeps anything.
    fn keeps_attempts(&self) -> bool {
        false
    }

    /// [`complete_many`](Self::complete_many), and for each entry that
    /// applied, its attempt appended to the history
    /// ([`record_attempts`](Self::record_attempts)): the [`Worker`]'s flush
    /// of its completions. Answers one [`Transition`] per entry, in order;
    /// an entry that did not apply records nothing.
    ///
    /// PostgreSQL does both in one statement, so a flush costs one commit,
    /// not two (a batch whose attempts need older entries trimmed, past
    /// their first attempt, takes the default). The default calls
    /// `complete_many`, then `record_attempts` with the applied entries; an
    /// error recording them loses the entries (logged), never the
    /// completions.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer: as `complete_many`'s.
    async fn complete_many_recorded(
        &self,
        done: &[(&str, ClaimToken, Attempt)],
    ) -> Result<Vec<Transition>, InboxError> {
        complete_then_record(self, done).await
    }

    /// Adds an entry to the inbox's action log ([the `actions`
    /// module](crate::inbox::actions)) and deletes the entries older than
    /// [`ACTION_LOG_RETENTION`]; the store assigns the entry's
    /// [`id`](Action::id). Callers usually go through
    /// [`actions::record`], which logs a
    /// failure instead of returning it.
    ///
    /// The default keeps nothing ([`keeps_actions`](Self::keeps_actions)
    /// is `false`): the broker-backed inboxes.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer (the entry is lost).
    async fn record_action(&self, action: &Action) -> Result<(), InboxError> {
        let _ = action;
        Ok(())
    }

    /// A page of the action log, newest first: at most `limit` entries
    /// (within 1 and [`MAX_ACTIONS_PAGE`]) older than the entry `before`
    /// (the previous page's [`next`](ActionPage::next); `None`: the newest).
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn actions(&self, before: Option<u64>, limit: u32) -> Result<ActionPage, InboxError> {
        let _ = (before, limit);
        Ok(ActionPage::default())
    }

    /// Whether [`record_action`](Self::record_action) keeps anything.
    fn keeps_actions(&self) -> bool {
        false
    }

    /// Pauses (`true`) or resumes (`false`) the events `selector` matches
    /// ([the `gates` module](crate::inbox::gates)), for every worker of
    /// every process; returns whether it changed. The other events flow as
    /// before, and deliveries keep being accepted.
    ///
    /// The default refuses ([`keeps_gates`](Self::keeps_gates) is
    /// `false`): the broker-backed inboxes.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer, the inbox keeps no
    /// gates, or it holds [`MAX_GATES`](gates::MAX_GATES) already.
    async fn set_gate_paused(
        &self,
        selector: &gates::Selector,
        paused: bool,
    ) -> Result<bool, InboxError> {
        let _ = (selector, paused);
        Err(gates::unsupported("this"))
    }

    /// The gates the store holds (paused selectors, and the limits workers
    /// asked permits under), by selector.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn gates(&self) -> Result<Vec<gates::Gate>, InboxError> {
        Ok(Vec::new())
    }

    /// Takes (or renews, for the same `holder`) a permit under `limit` for
    /// the events `selector` matches, held for `hold`: granted while fewer
    /// than the limit's concurrency are held by others and a token of its
    /// rate is left (a renewal takes no token). Atomic across processes.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer or keeps no gates.
    async fn acquire_permit(
        &self,
        selector: &gates::Selector,
        limit: gates::Limit,
        holder: &str,
        hold: Duration,
    ) -> Result<gates::Permit, InboxError> {
        let _ = (selector, limit, holder, hold);
        Err(gates::unsupported("this"))
    }

    /// Returns `holder`'s permit (none held: nothing to do).
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer (the permit frees
    /// itself when its hold ends).
    async fn release_permit(
        &self,
        selector: &gates::Selector,
        holder: &str,
    ) -> Result<(), InboxError> {
        let _ = (selector, holder);
        Ok(())
    }

    /// Hands the event back unstarted, due after `delay`, its attempt not
    /// counted, if `token` still holds it: what a worker does with an
    /// event its limit refused a permit. The default hands it back due now
    /// ([`release`](Self::release)).
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    async fn defer(
        &self,
        key: &str,
        token: ClaimToken,
        delay: Duration,
    ) -> Result<Transition, InboxError> {
        let _ = delay;
        self.release(key, token).await
    }

    /// Whether the inbox keeps gates (pauses by selector, limits).
    fn keeps_gates(&self) -> bool {
        false
    }
}

/// A SQL inbox whose completion can be recorded in a caller's transaction:
/// what [`Worker::transactional`] needs for exactly-once effects.
/// Implemented by [`PostgresInbox`], [`MySqlInbox`] and [`SqliteInbox`].
///
/// Use it directly to settle an event in your own transaction: begin one
/// with [`begin`](Self::begin), write, call [`complete_in`](Self::complete_in)
/// with the lease's token, and commit only if it was
/// [`Applied`](Transition::Applied).
#[cfg_attr(
    not(feature = "postgres"),
    doc = "\n\n[`PostgresInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.PostgresInbox.html"
)]
#[cfg_attr(
    not(feature = "mysql"),
    doc = "\n\n[`MySqlInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.MySqlInbox.html"
)]
#[cfg_attr(
    not(feature = "sqlite"),
    doc = "\n\n[`SqliteInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.SqliteInbox.html"
)]
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
#[async_trait::async_trait]
pub trait TransactionalInbox: Inbox + Clone {
    /// The sqlx database (`sqlx::Postgres`, `sqlx::MySql`, `sqlx::Sqlite`).
    type Database: sqlx::Database;

    /// Begins a transaction on the inbox's pool.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the database cannot answer in time.
    async fn begin(&self) -> Result<sqlx::Transaction<'static, Self::Database>, InboxError>;

    /// Marks the event completed inside `tx`, if `token` still holds it:
    /// the completion commits, or rolls back, with the transaction. After
    /// [`Applied`](Transition::Applied) the event's row stays locked by `tx`
    /// until it ends; after [`Stale`](Transition::Stale), roll back.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the database cannot answer in time.
    async fn complete_in(
        &self,
        tx: &mut sqlx::Transaction<'static, Self::Database>,
        key: &str,
        token: ClaimToken,
    ) -> Result<Transition, InboxError>;
}

/// [`Inbox::complete_many_recorded`]'s default: the completions, then the
/// attempts of those that applied (a store error there is logged: the
/// completions stand).
pub(crate) async fn complete_then_record<I: Inbox + ?Sized>(
    inbox: &I,
    done: &[(&str, ClaimToken, Attempt)],
) -> Result<Vec<Transition>, InboxError> {
    let pairs: Vec<(&str, ClaimToken)> =
        done.iter().map(|(key, token, _)| (*key, *token)).collect();
    let transitions = inbox.complete_many(&pairs).await?;
    let applied: Vec<(&str, Attempt)> = done
        .iter()
        .zip(&transitions)
        .filter(|(_, t)| **t == Transition::Applied)
        .map(|((key, _, attempt), _)| (*key, attempt.clone()))
        .collect();
    if !applied.is_empty()
        && let Err(error) = inbox.record_attempts(&applied).await
    {
        tracing::warn!(events = applied.len(), error = %error, "recording inbox attempts failed; their history misses them");
    }
    Ok(transitions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_keys_are_digested() {
        assert_eq!(stored_key("a:b:c"), "a:b:c");
        let long = "k".repeat(MAX_KEY_LEN + 1);
        assert_eq!(stored_key(&long).len(), 7 + 64);
    }

    #[test]
    fn debug_never_shows_the_body() {
        let event = NewEvent::new("k", "s", "secret-body");
        assert!(!format!("{event:?}").contains("secret-body"));
    }
}
