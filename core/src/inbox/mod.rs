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
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use sha2::{Digest as _, Sha256};

use crate::ConfigError;
pub use crate::dedup::{ClaimToken, Transition};

pub(crate) mod accept;
pub mod activity;
pub mod admin;
mod purge;
pub mod signals;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod sql;

#[cfg(any(feature = "nats", feature = "rabbitmq"))]
mod broker_format;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "nats")]
mod nats;
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
pub use activity::{ACTIVITY_MINUTES, ACTIVITY_RETENTION, Activity, ActivityMinute};
#[cfg(feature = "mysql")]
pub use mysql::MySqlInbox;
#[cfg(feature = "nats")]
pub use nats::{
    CONSUMER, DEAD_HEADER, JetStreamInbox, JetStreamInboxBuilder, LISTING_SCAN_BUDGET, META_HEADER,
};
#[cfg(feature = "postgres")]
pub use postgres::PostgresInbox;
pub use purge::{DEFAULT_PURGE_INTERVAL, DEFAULT_RETENTION, PurgeTask, purge_floor};
#[cfg(feature = "rabbitmq")]
pub use rabbitmq::{RabbitMqInbox, RabbitMqInboxBuilder};
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

/// A dead-lettered event: listed without its body, inspected with it.
///
/// `Debug` shows the body's length, never its content.
#[derive(Clone)]
#[non_exhaustive]
pub struct DeadLetter {
    /// The metadata.
    pub meta: EventMeta,
    /// How many attempts ran.
    pub attempts: u32,
    /// The last attempt's error (the handler's message, a timeout, a panic,
    /// or an expired lease), never the body.
    pub last_error: Option<String>,
    /// When the event was dead-lettered (the database's clock).
    pub dead_at: SystemTime,
    /// The body; empty in [`Inbox::dead_letters`] listings.
    pub body: Bytes,
}

impl fmt::Debug for DeadLetter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadLetter")
            .field("meta", &self.meta)
            .field("attempts", &self.attempts)
            .field("last_error", &self.last_error)
            .field("dead_at", &self.dead_at)
            .field("body_len", &self.body.len())
            .finish()
    }
}

/// Which dead letters [`Inbox::dead_letters`] lists, oldest receipt first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLetterFilter {
    /// Only this scheme.
    pub scheme: Option<String>,
    /// Only this event type.
    pub event_type: Option<String>,
    /// Only events received at or after this time.
    pub received_from: Option<SystemTime>,
    /// Only events received before this time.
    pub received_until: Option<SystemTime>,
    /// Continue after this page's [`next`](DeadLetterPage::next) cursor.
    pub after: Option<DeadLetterCursor>,
    /// At most this many (default 50, at most 1000).
    pub limit: Option<u32>,
}

impl DeadLetterFilter {
    /// The page size: `limit`, 50 by default, within 1 to 1000.
    #[must_use]
    pub fn page_size(&self) -> u32 {
        self.limit.unwrap_or(50).clamp(1, 1000)
    }
}

/// Where a page of dead letters ended: pass it back as
/// [`DeadLetterFilter::after`]. Its string form (`Display` / `FromStr`) is
/// what the admin routers use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterCursor {
    /// The last listed event's receipt time, epoch milliseconds.
    pub received_at_ms: i64,
    /// The last listed event's key.
    pub key: String,
}

impl fmt::Display for DeadLetterCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.received_at_ms, self.key)
    }
}

impl std::str::FromStr for DeadLetterCursor {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = ConfigError::Invalid {
            what: "dead-letter cursor",
            reason: "expected <milliseconds>.<key>",
        };
        let (ms, key) = s.split_once('.').ok_or(invalid.clone())?;
        Ok(Self {
            received_at_ms: ms.parse().map_err(|_| invalid)?,
            key: key.to_owned(),
        })
    }
}

/// One page of dead letters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DeadLetterPage {
    /// The dead letters, bodies left out.
    pub items: Vec<DeadLetter>,
    /// The cursor of the next page: set when this one is full, and on Redis
    /// also when the listing stopped after examining
    /// `DEAD_LETTER_SCAN_BUDGET` entries (the page
    /// may then be short, even empty). Follow it until it is `None`.
    pub next: Option<DeadLetterCursor>,
    /// How many stored dead letters this call examined, matched or not:
    /// on Redis counted by the listing script (at most
    /// `DEAD_LETTER_SCAN_BUDGET` per partition, however few match), on SQL
    /// the rows returned (the database applies the filter). What a caller
    /// bounds its own scans with (the console stops at 10,000).
    pub examined: u64,
}

/// Which deliveries [`Inbox::deliveries`] lists: the state an event is in.
///
/// `Due` and `Retrying` split the pending events by their due time: an
/// event is accepted, replayed or released due now, so a pending event not
/// yet due is one whose last attempt failed and that waits for its backoff.
/// A retrying event becomes due when its time comes, without any write:
/// between two pages it may move from one listing to the other.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeliveryState {
    /// Pending and due now: the next lease may take it.
    #[default]
    Due,
    /// Pending, due later: waiting for the backoff after a failed attempt.
    Retrying,
    /// Leased by a worker (its lease may have expired and not yet been
    /// taken over).
    InFlight,
    /// Dead-lettered.
    Dead,
    /// Completed, not yet purged.
    Completed,
}

impl DeliveryState {
    /// Every state, in the console's order.
    pub const ALL: [Self; 5] = [
        Self::Due,
        Self::Retrying,
        Self::InFlight,
        Self::Dead,
        Self::Completed,
    ];

    /// The name the admin API and the console use: `due`, `retrying`,
    /// `in_flight`, `dead`, `completed`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Due => "due",
            Self::Retrying => "retrying",
            Self::InFlight => "in_flight",
            Self::Dead => "dead",
            Self::Completed => "completed",
        }
    }
}

impl fmt::Display for DeliveryState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for DeliveryState {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or(ConfigError::Invalid {
                what: "delivery state",
                reason: "expected due, retrying, in_flight, dead or completed",
            })
    }
}

/// The order of an [`Inbox::deliveries`] listing, by receipt time (then
/// key).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeliveryOrder {
    /// The most recently received first (the console's default).
    #[default]
    NewestFirst,
    /// The oldest first (the dead-letter listing's order).
    OldestFirst,
}

impl DeliveryOrder {
    /// The name the admin API and the console use: `newest` or `oldest`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NewestFirst => "newest",
            Self::OldestFirst => "oldest",
        }
    }
}

impl std::str::FromStr for DeliveryOrder {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "newest" => Ok(Self::NewestFirst),
            "oldest" => Ok(Self::OldestFirst),
            _ => Err(ConfigError::Invalid {
                what: "delivery order",
                reason: "expected newest or oldest",
            }),
        }
    }
}

/// Which deliveries [`Inbox::deliveries`] lists, and in which order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeliveryFilter {
    /// The state (default [`DeliveryState::Due`]).
    pub state: DeliveryState,
    /// The order (default [`DeliveryOrder::NewestFirst`]).
    pub order: DeliveryOrder,
    /// Only this scheme.
    pub scheme: Option<String>,
    /// Only this event type.
    pub event_type: Option<String>,
    /// Only this sender's delivery id.
    pub delivery_id: Option<String>,
    /// Only events received at or after this time.
    pub received_from: Option<SystemTime>,
    /// Only events received before this time.
    pub received_until: Option<SystemTime>,
    /// Continue after this page's [`next`](DeliveryPage::next) cursor: past
    /// its position in this filter's `order` (older than it when newest
    /// first, newer when oldest first).
    pub after: Option<DeliveryCursor>,
    /// At most this many (default 50, at most 1000).
    pub limit: Option<u32>,
}

impl DeliveryFilter {
    /// A filter for `state`, newest first, without other conditions.
    #[must_use]
    pub fn state(state: DeliveryState) -> Self {
        Self {
            state,
            ..Self::default()
        }
    }

    /// The page size: `limit`, 50 by default, within 1 to 1000.
    #[must_use]
    pub fn page_size(&self) -> u32 {
        self.limit.unwrap_or(50).clamp(1, 1000)
    }
}

/// Where a page of deliveries ended: pass it back as
/// [`DeliveryFilter::after`] with the same order. It remembers the order it
/// was made for; its string form (`Display` / `FromStr`,
/// `<n|o>.<milliseconds>.<key>`) is what the admin API and the console use,
/// and they refuse a cursor of the other order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryCursor {
    /// The order of the listing that made it.
    pub order: DeliveryOrder,
    /// The last listed (or examined) event's receipt time, epoch milliseconds.
    pub received_at_ms: i64,
    /// The last listed (or examined) event's key.
    pub key: String,
}

impl fmt::Display for DeliveryCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let order = match self.order {
            DeliveryOrder::NewestFirst => 'n',
            DeliveryOrder::OldestFirst => 'o',
        };
        write!(f, "{order}.{}.{}", self.received_at_ms, self.key)
    }
}

impl std::str::FromStr for DeliveryCursor {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = ConfigError::Invalid {
            what: "delivery cursor",
            reason: "expected <n|o>.<milliseconds>.<key>",
        };
        let (order, rest) = s.split_once('.').ok_or(invalid.clone())?;
        let order = match order {
            "n" => DeliveryOrder::NewestFirst,
            "o" => DeliveryOrder::OldestFirst,
            _ => return Err(invalid),
        };
        let (ms, key) = rest.split_once('.').ok_or(invalid.clone())?;
        Ok(Self {
            order,
            received_at_ms: ms.parse().map_err(|_| invalid)?,
            key: key.to_owned(),
        })
    }
}

/// A delivery in any state, as [`Inbox::deliveries`] lists it (without its
/// body) and [`Inbox::delivery_get`] shows it (with it).
///
/// `Debug` shows the body's length, never its content.
#[derive(Clone)]
#[non_exhaustive]
pub struct Delivery {
    /// The metadata.
    pub meta: EventMeta,
    /// Its state when it was read.
    pub state: DeliveryState,
    /// How many attempts started.
    pub attempts: u32,
    /// The last failed attempt's error, if any (never the body).
    pub last_error: Option<String>,
    /// When a pending event is (or was) due; `None` in other states.
    pub due_at: Option<SystemTime>,
    /// When an in-flight event's lease ends; `None` in other states.
    pub lease_until: Option<SystemTime>,
    /// The last transition (the completion time of a completed event, the
    /// dead-letter time of a dead one).
    pub updated_at: SystemTime,
    /// The body; empty in [`Inbox::deliveries`] listings.
    pub body: Bytes,
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("meta", &self.meta)
            .field("state", &self.state)
            .field("attempts", &self.attempts)
            .field("last_error", &self.last_error)
            .field("due_at", &self.due_at)
            .field("lease_until", &self.lease_until)
            .field("updated_at", &self.updated_at)
            .field("body_len", &self.body.len())
            .finish()
    }
}

/// One page of deliveries.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DeliveryPage {
    /// The deliveries, bodies left out, in the filter's order.
    pub items: Vec<Delivery>,
    /// The cursor of the next page: set when this one is full, and on Redis
    /// also when a scan stopped after examining
    /// `DELIVERY_SCAN_BUDGET` entries (the page may then be short, even
    /// empty). Follow it until it is `None`.
    pub next: Option<DeliveryCursor>,
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

#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "redis",
    feature = "nats",
    feature = "rabbitmq"
))]
/// Epoch milliseconds as a time.
pub(crate) fn from_ms(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// One page of `items` as `filter` asks: for the engines that list a whole
/// state from the broker and cannot filter, order or page at the source
/// (JetStream, RabbitMQ). Filters by scheme, event type, delivery id and
/// received time, orders by `(received_at, key)` and resumes after the
/// filter's cursor.
#[cfg(any(feature = "nats", feature = "rabbitmq"))]
pub(crate) fn page_in_memory(mut items: Vec<Delivery>, filter: &DeliveryFilter) -> DeliveryPage {
    items.retain(|d| {
        filter.scheme.as_ref().is_none_or(|x| *x == d.meta.scheme)
            && filter
                .event_type
                .as_ref()
                .is_none_or(|x| Some(x) == d.meta.event_type.as_ref())
            && filter
                .delivery_id
                .as_ref()
                .is_none_or(|x| Some(x) == d.meta.delivery_id.as_ref())
            && filter.received_from.is_none_or(|t| d.meta.received_at >= t)
            && filter.received_until.is_none_or(|t| d.meta.received_at < t)
    });
    let position = |d: &Delivery| (to_ms(d.meta.received_at), d.meta.key.clone());
    items.sort_by_key(position);
    if filter.order == DeliveryOrder::NewestFirst {
        items.reverse();
    }
    if let Some(after) = &filter.after {
        let cursor = (after.received_at_ms, after.key.clone());
        items.retain(|d| match filter.order {
            DeliveryOrder::NewestFirst => position(d) < cursor,
            DeliveryOrder::OldestFirst => position(d) > cursor,
        });
    }
    let size = filter.page_size() as usize;
    let next = (items.len() > size).then(|| {
        let (received_at_ms, key) = position(&items[size - 1]);
        DeliveryCursor {
            order: filter.order,
            received_at_ms,
            key,
        }
    });
    items.truncate(size);
    DeliveryPage { items, next }
}

/// A time as epoch milliseconds.
pub(crate) fn to_ms(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "redis"
))]
/// A duration as milliseconds, saturating.
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "redis",
    feature = "nats",
    feature = "rabbitmq"
))]
/// `error` cut to [`MAX_ERROR_LEN`] bytes at a character boundary.
pub(crate) fn truncate_error(error: &str) -> &str {
    if error.len() <= MAX_ERROR_LEN {
        return error;
    }
    let mut end = MAX_ERROR_LEN;
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    &error[..end]
}

#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "redis"
))]
/// The headers as stored: a JSON array of `[name, value]` pairs.
pub(crate) fn encode_headers(headers: &[(String, String)]) -> String {
    serde_json::to_string(headers).unwrap_or_else(|_| "[]".to_owned())
}

#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "redis"
))]
/// The stored headers back.
pub(crate) fn decode_headers(text: &str) -> Vec<(String, String)> {
    serde_json::from_str(text).unwrap_or_default()
}

/// Opens the inbox named by `url`, creates its table if missing, and starts
/// the purge of completed events.
///
/// | URL | backend | feature |
/// |---|---|---|
/// | `postgres://…`, `postgresql://…` | [`PostgresInbox`] | `postgres` |
/// | `mysql://…`, `mariadb://…` | [`MySqlInbox`] | `mysql` |
/// | `sqlite://path`, `sqlite:path` | [`SqliteInbox`] | `sqlite` |
/// | `redis://…`, `rediss://…`, `redis+unix://…` | [`RedisInbox`] | `redis` |
/// | `redis-cluster://host:port[,host:port…]`, `rediss-cluster://…` | [`RedisClusterInbox`] | `redis-cluster` |
/// | `nats://host:port[,host:port…][/STREAM]`, `tls://…` | [`JetStreamInbox`] | `nats` |
/// | `amqp://user:password@host:port/vhost?dedup=…`, `amqps://…` | [`RabbitMqInbox`] | `rabbitmq` |
///
/// Query parameters of the library's own (the others reach the driver):
///
/// | parameter | meaning | default |
/// |---|---|---|
/// | `table` | the SQL table (two inboxes can share a database) | `webhooks_inbox` |
/// | `prefix` | the Redis key prefix | `inbox:` |
/// | `partitions` | the Redis Cluster inbox's partitions (never change it while events are stored) | [`RedisClusterInbox::DEFAULT_PARTITIONS`] (16) |
/// | `replicas` | the JetStream streams' replicas (NATS only) | 1 |
/// | `duplicate_window` | the JetStream stream's duplicate window (NATS only): `2m`, `1h` | 2 minutes |
/// | `queue` | the RabbitMQ queue (RabbitMQ only) | `webhooks` |
/// | `dedup` | the RabbitMQ inbox's dedup store, the record of what was accepted (RabbitMQ only, required): a store URL, percent-encoded (`redis%3A%2F%2Fhost%3A6379`) | none |
/// | `delivery_limit` | the RabbitMQ queue's `x-delivery-limit` (RabbitMQ only; 0: none) | 100 |
/// | `retention` | how long completed events are kept: `7d`, `12h`, `30m`, `90` (seconds), or `off`; refused below [`purge_floor`] (the longest provider retry window plus a day: 4 days) without `short_retention=allow` | [`DEFAULT_RETENTION`] (7 days) |
/// | `short_retention` | `allow`: accept a `retention` below the providers' retry windows (a late retry of a purged delivery runs again) | refused |
///
/// **Purge.** Events completed more than the retention ago are deleted at
/// opening, then every hour ([`DEFAULT_PURGE_INTERVAL`]), by a Tokio task
/// that stops once every handle on the returned inbox is dropped. Keep the
/// retention above the senders' retry window: a retry of a purged delivery
/// is stored and processed again. `retention=off` keeps completed events
/// until you call [`Inbox::purge_completed`]. An inbox built with a builder
/// purges only when told to ([`PurgeTask::spawn`]).
///
/// ```no_run
/// # async fn run() -> Result<(), webhooks_core::inbox::OpenError> {
/// use webhooks_core::inbox::inbox_from_url;
///
/// let orders = inbox_from_url("postgres://app@db/app?table=orders_inbox&retention=14d").await?;
/// let billing = inbox_from_url("postgres://app@db/app?table=billing_inbox").await?;
/// # let _ = (orders, billing); Ok(()) }
/// ```
///
/// # Errors
///
/// [`OpenError::Config`] for an unknown scheme, one whose feature is off, a
/// malformed URL, an invalid table name or retention, or `table` on Redis
/// (`prefix` on SQL); [`OpenError::Store`] when the store does not answer.
///
/// # Panics
///
/// Outside a Tokio runtime.
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
#[cfg_attr(
    not(feature = "redis"),
    doc = "\n\n[`RedisInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.RedisInbox.html"
)]
#[cfg_attr(
    not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
    doc = "\n\n[`DEFAULT_INBOX_TABLE`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/constant.DEFAULT_INBOX_TABLE.html"
)]
#[cfg_attr(
    not(feature = "nats"),
    doc = "\n\n[`JetStreamInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.JetStreamInbox.html"
)]
#[cfg_attr(
    not(feature = "rabbitmq"),
    doc = "\n\n[`RabbitMqInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.RabbitMqInbox.html"
)]
#[cfg_attr(
    not(feature = "redis-cluster"),
    doc = "\n\n[`RedisClusterInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.RedisClusterInbox.html\n[`RedisClusterInbox::DEFAULT_PARTITIONS`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.RedisClusterInbox.html#associatedconstant.DEFAULT_PARTITIONS"
)]
pub async fn inbox_from_url(url: &str) -> Result<Arc<dyn Inbox>, OpenError> {
    const WHAT: &str = "inbox URL";
    let scheme = url
        .split_once(':')
        .map(|(scheme, _)| scheme.to_ascii_lowercase())
        .ok_or(ConfigError::Invalid {
            what: WHAT,
            reason: "has no scheme (postgres://, mysql://, sqlite:// or redis://)",
        })?;
    let options = url::UrlOptions::take(url, WHAT)?;
    let retention = match options.retention.as_deref() {
        None => Some(DEFAULT_RETENTION),
        Some(text) => purge::parse_retention(text).ok_or(ConfigError::Invalid {
            what: WHAT,
            reason: "`retention` is `off` or a positive number with a unit (s, m, h, d)",
        })?,
    };
    match options.short_retention.as_deref() {
        None => {
            let floor = crate::scheme::registry::longest_retention_floor();
            if let Some(retention) = retention.filter(|r| *r < floor) {
                return Err(ConfigError::RetentionBelowRetryWindow {
                    scheme: "any",
                    retention_secs: retention.as_secs(),
                    floor_secs: floor.as_secs(),
                }
                .into());
            }
        }
        Some("allow") => {}
        Some(_) => {
            return Err(ConfigError::Invalid {
                what: WHAT,
                reason: "`short_retention` is `allow`",
            }
            .into());
        }
    }
    let cluster = matches!(scheme.as_str(), "redis-cluster" | "rediss-cluster");
    let nats = matches!(scheme.as_str(), "nats" | "tls" | "jetstream");
    if nats && (options.prefix.is_some() || options.table.is_some() || options.partitions.is_some())
    {
        return Err(ConfigError::Invalid {
            what: WHAT,
            reason: "a NATS inbox is named by the URL's path (nats://host:port/STREAM), not `table` or `prefix`",
        }
        .into());
    }
    let rabbitmq = matches!(scheme.as_str(), "amqp" | "amqps");
    if rabbitmq
        && (options.prefix.is_some() || options.table.is_some() || options.partitions.is_some())
    {
        return Err(ConfigError::Invalid {
            what: WHAT,
            reason: "a RabbitMQ inbox is named by `queue=`, not `table` or `prefix`",
        }
        .into());
    }
    let sql = !cluster
        && !nats
        && !rabbitmq
        && !matches!(scheme.as_str(), "redis" | "rediss" | "redis+unix" | "unix");
    if (sql && options.prefix.is_some()) || (!sql && !nats && options.table.is_some()) {
        return Err(ConfigError::Invalid {
            what: WHAT,
            reason: "`table` is for the SQL inboxes, `prefix` for Redis",
        }
        .into());
    }
    let partitions = match options.partitions.as_deref() {
        None => None,
        Some(_) if !cluster => {
            return Err(ConfigError::Invalid {
                what: WHAT,
                reason: "`partitions` is for the Redis Cluster inbox (redis-cluster://)",
            }
            .into());
        }
        Some(text) => Some(text.parse::<u16>().map_err(|_| ConfigError::Invalid {
            what: WHAT,
            reason: "`partitions` is a number from 1 to 1024",
        })?),
    };
    let (url, table, prefix) = (options.url.as_str(), options.table, options.prefix);
    let inbox = match scheme.as_str() {
        "postgres" | "postgresql" => postgres(url, table).await?,
        "mysql" | "mariadb" => mysql(url, table).await?,
        "sqlite" => sqlite(url, table).await?,
        "redis" | "rediss" | "redis+unix" | "unix" => redis_inbox(url, prefix).await?,
        "redis-cluster" | "rediss-cluster" => redis_cluster_inbox(url, prefix, partitions).await?,
        "nats" | "tls" | "jetstream" => nats_inbox(url, retention).await?,
        "amqp" | "amqps" => rabbitmq_inbox(url, retention).await?,
        _ => {
            return Err(ConfigError::Invalid {
                what: WHAT,
                reason: "unknown scheme; expected postgres, mysql, mariadb, sqlite, redis, \
                         redis-cluster, nats or amqp",
            }
            .into());
        }
    };
    if let Some(retention) = retention {
        PurgeTask::spawn(&inbox, retention, DEFAULT_PURGE_INTERVAL).detach();
    }
    Ok(inbox)
}

#[cfg(feature = "postgres")]
async fn postgres(url: &str, table: Option<String>) -> Result<Arc<dyn Inbox>, OpenError> {
    let builder = PostgresInbox::builder(url);
    let inbox = match table {
        Some(table) => builder.table(table),
        None => builder,
    }
    .connect()
    .await?;
    inbox.migrate().await?;
    Ok(Arc::new(inbox))
}

#[cfg(not(feature = "postgres"))]
async fn postgres(_: &str, _: Option<String>) -> Result<Arc<dyn Inbox>, OpenError> {
    Err(feature_off(
        "postgres:// needs the `postgres` feature of the crate you depend on (tower-webhooks, actix-webhooks or webhooks-core)",
    ))
}

#[cfg(feature = "mysql")]
async fn mysql(url: &str, table: Option<String>) -> Result<Arc<dyn Inbox>, OpenError> {
    let builder = MySqlInbox::builder(url);
    let inbox = match table {
        Some(table) => builder.table(table),
        None => builder,
    }
    .connect()
    .await?;
    inbox.migrate().await?;
    Ok(Arc::new(inbox))
}

#[cfg(not(feature = "mysql"))]
async fn mysql(_: &str, _: Option<String>) -> Result<Arc<dyn Inbox>, OpenError> {
    Err(feature_off(
        "mysql:// and mariadb:// need the `mysql` feature of the crate you depend on (tower-webhooks, actix-webhooks or webhooks-core)",
    ))
}

#[cfg(feature = "sqlite")]
async fn sqlite(url: &str, table: Option<String>) -> Result<Arc<dyn Inbox>, OpenError> {
    let builder = SqliteInbox::builder(url);
    let inbox = match table {
        Some(table) => builder.table(table),
        None => builder,
    }
    .connect()
    .await?;
    inbox.migrate().await?;
    Ok(Arc::new(inbox))
}

#[cfg(not(feature = "sqlite"))]
async fn sqlite(_: &str, _: Option<String>) -> Result<Arc<dyn Inbox>, OpenError> {
    Err(feature_off(
        "sqlite:// needs the `sqlite` feature of the crate you depend on (tower-webhooks, actix-webhooks or webhooks-core)",
    ))
}

#[cfg(feature = "redis")]
async fn redis_inbox(url: &str, prefix: Option<String>) -> Result<Arc<dyn Inbox>, OpenError> {
    let builder = RedisInbox::builder(url);
    let inbox = match prefix {
        Some(prefix) => builder.key_prefix(prefix),
        None => builder,
    }
    .connect()
    .await?;
    Ok(Arc::new(inbox))
}

#[cfg(not(feature = "redis"))]
async fn redis_inbox(_: &str, _: Option<String>) -> Result<Arc<dyn Inbox>, OpenError> {
    Err(feature_off(
        "redis:// needs the `redis` feature of the crate you depend on (tower-webhooks, actix-webhooks or webhooks-core)",
    ))
}

#[cfg(feature = "redis-cluster")]
async fn redis_cluster_inbox(
    url: &str,
    prefix: Option<String>,
    partitions: Option<u16>,
) -> Result<Arc<dyn Inbox>, OpenError> {
    let mut builder = RedisClusterInbox::builder_from_url(url)?;
    if let Some(prefix) = prefix {
        builder = builder.key_prefix(prefix);
    }
    if let Some(partitions) = partitions {
        builder = builder.partitions(partitions);
    }
    Ok(Arc::new(builder.connect().await?))
}

#[cfg(not(feature = "redis-cluster"))]
async fn redis_cluster_inbox(
    _: &str,
    _: Option<String>,
    _: Option<u16>,
) -> Result<Arc<dyn Inbox>, OpenError> {
    Err(feature_off(
        "redis-cluster:// needs webhooks-core's `redis-cluster` feature",
    ))
}

#[cfg(feature = "nats")]
async fn nats_inbox(url: &str, retention: Option<Duration>) -> Result<Arc<dyn Inbox>, OpenError> {
    let mut builder = JetStreamInbox::builder_from_url(url)?;
    // `retention=off`: kept until purged (a zero age is no limit to JetStream).
    builder = builder.retention(retention.unwrap_or(Duration::ZERO));
    Ok(Arc::new(builder.connect().await?))
}

#[cfg(not(feature = "nats"))]
async fn nats_inbox(_: &str, _: Option<Duration>) -> Result<Arc<dyn Inbox>, OpenError> {
    Err(feature_off(
        "nats:// needs webhooks-core's `nats` feature (tower-webhooks and actix-webhooks forward it)",
    ))
}

#[cfg(feature = "rabbitmq")]
async fn rabbitmq_inbox(
    url: &str,
    retention: Option<Duration>,
) -> Result<Arc<dyn Inbox>, OpenError> {
    let mut builder = RabbitMqInbox::builder_from_url(url).await?;
    if let Some(retention) = retention {
        builder = builder.retention(retention);
    }
    Ok(Arc::new(builder.connect().await?))
}

#[cfg(not(feature = "rabbitmq"))]
async fn rabbitmq_inbox(_: &str, _: Option<Duration>) -> Result<Arc<dyn Inbox>, OpenError> {
    Err(feature_off(
        "amqp:// needs webhooks-core's `rabbitmq` feature (tower-webhooks and actix-webhooks forward it)",
    ))
}

#[allow(dead_code, reason = "used only by the backends whose feature is off")]
fn feature_off(reason: &'static str) -> OpenError {
    ConfigError::Invalid {
        what: "inbox URL",
        reason,
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The brokers' listing: filtered, newest first, in pages that resume
    /// after their cursor; the last page has none.
    #[cfg(any(feature = "nats", feature = "rabbitmq"))]
    #[test]
    fn page_in_memory_filters_orders_and_resumes() {
        let at = |ms: u64| SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
        let item = |key: &str, scheme: &str, ms: u64| Delivery {
            meta: EventMeta {
                key: key.to_owned(),
                scheme: scheme.to_owned(),
                delivery_id: None,
                event_type: None,
                matched_key: String::new(),
                headers: Vec::new(),
                received_at: at(ms),
                signed_at: None,
            },
            state: DeliveryState::Dead,
            attempts: 1,
            last_error: None,
            due_at: None,
            lease_until: None,
            updated_at: at(ms),
            body: Bytes::new(),
        };
        let all = || {
            vec![
                item("b", "stripe", 20),
                item("x", "github", 25),
                item("a", "stripe", 20),
                item("c", "stripe", 30),
                item("d", "stripe", 40),
            ]
        };
        let keys = |page: &DeliveryPage| -> Vec<String> {
            page.items.iter().map(|d| d.meta.key.clone()).collect()
        };
        let mut filter = DeliveryFilter {
            state: DeliveryState::Dead,
            order: DeliveryOrder::NewestFirst,
            scheme: Some("stripe".to_owned()),
            limit: Some(2),
            ..DeliveryFilter::default()
        };
        let first = page_in_memory(all(), &filter);
        assert_eq!(keys(&first), ["d", "c"]);
        filter.after = first.next;
        let second = page_in_memory(all(), &filter);
        assert_eq!(keys(&second), ["b", "a"], "ties ordered by key");
        assert!(second.next.is_none(), "the last page has no cursor");
        filter.after = None;
        filter.order = DeliveryOrder::OldestFirst;
        filter.received_from = Some(at(21));
        filter.limit = Some(10);
        let oldest = page_in_memory(all(), &filter);
        assert_eq!(keys(&oldest), ["c", "d"]);
        assert!(oldest.next.is_none());
    }

    #[test]
    fn long_keys_are_digested() {
        assert_eq!(stored_key("a:b:c"), "a:b:c");
        let long = "k".repeat(MAX_KEY_LEN + 1);
        assert_eq!(stored_key(&long).len(), 7 + 64);
    }

    #[cfg(any(
        feature = "postgres",
        feature = "mysql",
        feature = "sqlite",
        feature = "redis"
    ))]
    #[test]
    fn errors_are_truncated_at_char_boundaries() {
        let text = "é".repeat(MAX_ERROR_LEN);
        let cut = truncate_error(&text);
        assert!(cut.len() <= MAX_ERROR_LEN);
        assert!(cut.chars().all(|c| c == 'é'));
    }

    #[test]
    fn cursors_round_trip() {
        let cursor = DeadLetterCursor {
            received_at_ms: 17,
            key: "a.b:c".into(),
        };
        assert_eq!(
            cursor.to_string().parse::<DeadLetterCursor>().unwrap(),
            cursor
        );
        assert!("x".parse::<DeadLetterCursor>().is_err());
    }

    #[test]
    fn debug_never_shows_the_body() {
        let event = NewEvent::new("k", "s", "secret-body");
        assert!(!format!("{event:?}").contains("secret-body"));
    }

    #[tokio::test]
    async fn unknown_schemes_are_config_errors() {
        assert!(matches!(
            inbox_from_url("ftp://x").await,
            Err(OpenError::Config(_))
        ));
    }
}
