//! The SQL [`DedupStore`](super::DedupStore) backends (sqlx): PostgreSQL, MySQL or
//! MariaDB, and SQLite.
//!
//! Every backend keeps one table (named by the `table` setting, default
//! [`DEFAULT_TABLE`]), created by the idempotent `migrate()`:
//!
//! | column | meaning |
//! |---|---|
//! | `namespace` | the pipeline key up to its first `:` (`webhooks` in `webhooks:standard-webhooks:msg_1`) |
//! | `id` | the rest of the key (`standard-webhooks:msg_1`) |
//! | `state` | `1` in flight, `2` completed |
//! | `token` | the holder's [`ClaimToken`](super::ClaimToken), 32 hex digits |
//! | `expires_at` | epoch milliseconds: the lease deadline while in flight, the end of the retention once completed |
//!
//! The primary key is `(namespace, id)`; an index on `expires_at` serves the
//! purge. A namespace longer than 128 bytes or an id longer than 512 bytes is
//! stored as `sha256:` and the hex digest of its bytes (as is any part that
//! itself starts with `sha256:`), so that every key fits every database's
//! index limits.
//!
//! **Clock.** Every statement reads the database's clock, once per statement
//! (PostgreSQL `statement_timestamp()`, MySQL/MariaDB `UTC_TIMESTAMP(6)`,
//! SQLite `julianday('now')`, the host's clock), as Redis uses its server's
//! `TIME`: the application only passes spans (the lease, the retention) in
//! milliseconds. So instances whose clocks disagree, by any amount, still
//! exclude each other; only the database's clock matters (and for PostgreSQL
//! or MySQL with replicas, the primary's). `clock_skew_ms()` measures how far
//! this host's clock is from the database's, worth an alert since the
//! signature schemes check timestamps against this host's clock.
//!
//! **Expiry.** A lease that has passed lets the next claim take the row over
//! in the same atomic statement. Until one does, the row still holds its
//! token: the holder's late `complete`, `release` or `extend` (which
//! re-acquires) still applies. A completed row whose retention is over is dead.
//!
//! **Purge.** `purge_expired` (from a cron-like job), the background task of
//! `spawn_purge`, or [`store_from_url`](super::store_from_url) (which starts
//! one, hourly) delete completed rows whose retention is over, and in-flight
//! rows whose lease has been over for
//! [`EXPIRED_CLAIM_GRACE`](super::EXPIRED_CLAIM_GRACE) (an hour; until then
//! their holder may still complete them). Purging is not needed for
//! correctness, only to bound the table's size.
//!
//! **Timeouts.** An operation first waits for its turn at a connection: one
//! turn per pooled connection, given in order, at most `queue_timeout`
//! (default 30 s); then for the connection, at most `connect_timeout` (the
//! pool's acquire timeout: opening a connection if none is open); then runs,
//! at most `command_timeout` (default 2 s; SQLite 30 s, as there it is
//! mostly the wait for the file's write lock). A burst of deliveries thus queues
//! for the pool instead of timing out statements that run in milliseconds,
//! while an unreachable database still fails within the connect timeout once
//! an operation's turn comes. The command timeout is also set in the database
//! where it has an equivalent (PostgreSQL `statement_timeout`, InnoDB
//! `innodb_lock_wait_timeout`, SQLite's busy timeout). An expired timeout is
//! [`StoreError::Timeout`]; a refused or broken connection is
//! [`StoreError::Unavailable`]. A statement that timed out may still take
//! effect afterwards (it was sent; InnoDB, for one, keeps it waiting for its
//! lock): a late claim then acts like an attempt that crashed (its lease
//! expires), a late `complete` or `release` as if it had answered in time.
//!
//! **TLS.** webhooks-core enables none of sqlx's TLS features. To reach a
//! database over TLS, add sqlx to your own `Cargo.toml` with one of them
//! (`sqlx = { version = "0.8", features = ["tls-rustls"] }`): Cargo unifies
//! the features, and the `sslmode` / `ssl-mode` URL parameters then apply.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest as _, Sha256};

use super::{Claim, StoreError};
use crate::ConfigError;

#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "mysql")]
pub use mysql::{MySqlStore, MySqlStoreBuilder};

#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
pub use postgres::{PostgresStore, PostgresStoreBuilder};

#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteStore, SqliteStoreBuilder};

/// The default table name of the SQL backends.
pub const DEFAULT_TABLE: &str = "webhooks_dedup";

/// The default time allowed to open a database connection.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The default time allowed to one store operation.
pub(crate) const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// The default time an operation may wait for a free connection while all
/// are busy (sqlx's own default acquire timeout).
pub(crate) const DEFAULT_QUEUE_TIMEOUT: Duration = Duration::from_secs(30);

/// The default number of rows one purge statement deletes.
pub(crate) const DEFAULT_PURGE_BATCH: u32 = 1_000;

/// Longest table name accepted: leaves room for the index name's suffix
/// within PostgreSQL's 63-byte identifiers.
const MAX_TABLE_LEN: usize = 48;

/// Longest namespace stored as is.
const MAX_NAMESPACE_LEN: usize = 128;

/// Longest id stored as is.
const MAX_ID_LEN: usize = 512;

/// Marks a key part stored as its digest.
const DIGEST_MARKER: &str = "sha256:";

/// `state` of a claim in flight.
pub(crate) const IN_FLIGHT: i16 = 1;

/// `state` of a completed delivery.
pub(crate) const COMPLETED: i16 = 2;

/// Checks that `name` is a plain SQL identifier (`[A-Za-z_][A-Za-z0-9_]*`, at
/// most 48 bytes), so that it can be spliced into statements.
pub(crate) fn validate_table(name: &str) -> Result<(), ConfigError> {
    let mut bytes = name.bytes();
    let valid_start = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
    if !valid_start
        || name.len() > MAX_TABLE_LEN
        || !bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(ConfigError::Invalid {
            what: "dedup table name",
            reason: "must be 1 to 48 ASCII letters, digits or underscores, not starting with a digit",
        });
    }
    Ok(())
}

/// A pipeline key split into the table's `(namespace, id)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowKey {
    pub(crate) namespace: String,
    pub(crate) id: String,
}

impl RowKey {
    /// Splits `key` at its first `:` (no `:`: an empty namespace).
    pub(crate) fn new(key: &str) -> Self {
        let (namespace, id) = key.split_once(':').unwrap_or(("", key));
        Self {
            namespace: fit(namespace, MAX_NAMESPACE_LEN),
            id: fit(id, MAX_ID_LEN),
        }
    }
}

/// `part` itself, or its digest when it is too long (or could be mistaken
/// for a digest).
fn fit(part: &str, max: usize) -> String {
    if part.len() <= max && !part.starts_with(DIGEST_MARKER) {
        return part.to_owned();
    }
    let digest = Sha256::digest(part.as_bytes());
    let mut out = String::with_capacity(DIGEST_MARKER.len() + 64);
    out.push_str(DIGEST_MARKER);
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// Now, in epoch milliseconds, by the application's clock: used only to
/// measure the skew from the database's clock, never in a statement.
pub(crate) fn now_ms() -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    #[cfg(test)]
    let now = now + tests::APP_CLOCK_SKEW_MS.get();
    now
}

/// The longest span bound into a statement: 100 years, so that the
/// database's `now + span` never overflows a `BIGINT`.
const MAX_SPAN_MS: i64 = 100 * 365 * 86_400_000;

/// `d` in milliseconds, as bound into a statement (at most 100 years).
pub(crate) fn span_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).map_or(MAX_SPAN_MS, |ms| ms.min(MAX_SPAN_MS))
}

/// The time left until `deadline` (epoch milliseconds), at least zero.
pub(crate) fn remaining(now: i64, deadline: i64) -> Duration {
    Duration::from_millis(u64::try_from(deadline.saturating_sub(now)).unwrap_or(0))
}

/// Maps a sqlx error into the store's error, keeping it as the source.
pub(crate) fn store_error(error: sqlx::Error) -> StoreError {
    match error {
        sqlx::Error::PoolTimedOut => StoreError::Timeout,
        sqlx::Error::Database(ref db) if is_database_timeout(db.as_ref()) => StoreError::Timeout,
        sqlx::Error::Database(ref db) if is_data_error(db.as_ref()) => StoreError::permanent(error),
        sqlx::Error::Protocol(_)
        | sqlx::Error::RowNotFound
        | sqlx::Error::TypeNotFound { .. }
        | sqlx::Error::ColumnIndexOutOfBounds { .. }
        | sqlx::Error::ColumnNotFound(_)
        | sqlx::Error::ColumnDecode { .. }
        | sqlx::Error::Decode(_) => StoreError::Protocol(error.to_string()),
        other => StoreError::unavailable(other),
    }
}

/// Whether the database gave up waiting: PostgreSQL's `statement_timeout`
/// (SQLSTATE 57014) or `lock_timeout` (55P03), InnoDB's lock wait timeout
/// (1205), MySQL's `max_execution_time` (3024), MariaDB's
/// `max_statement_time` (1969), SQLite's busy timeout (`SQLITE_BUSY`, 5).
fn is_database_timeout(error: &(dyn sqlx::error::DatabaseError + 'static)) -> bool {
    #[cfg(feature = "mysql")]
    if let Some(mysql) = error.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        return matches!(mysql.number(), 1205 | 1969 | 3024);
    }
    #[cfg(feature = "sqlite")]
    if error
        .try_downcast_ref::<sqlx::sqlite::SqliteError>()
        .is_some()
    {
        // Extended codes of SQLITE_BUSY keep 5 in their low byte.
        return error
            .code()
            .and_then(|code| code.parse::<i32>().ok())
            .is_some_and(|code| code & 0xff == 5);
    }
    matches!(error.code().as_deref(), Some("57014" | "55P03"))
}

/// Whether the database refused a value it will refuse every time: a data
/// exception (SQLSTATE class `22`: PostgreSQL's invalid byte sequence 22021
/// for a NUL in text, a value too long 22001, …), MySQL's incorrect string
/// value (1366) or data too long (1406). Keys reach the stores as printable
/// ASCII of bounded length, so this is a last line: such an error is
/// [`StoreError::Permanent`] (a `400`), never an endless `503`.
fn is_data_error(error: &(dyn sqlx::error::DatabaseError + 'static)) -> bool {
    #[cfg(feature = "mysql")]
    if let Some(mysql) = error.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
        && matches!(mysql.number(), 1366 | 1406)
    {
        return true;
    }
    error
        .code()
        .is_some_and(|code| code.len() == 5 && code.starts_with("22"))
}

/// Runs one store operation within `limit`.
pub(crate) async fn within<T>(
    limit: Duration,
    operation: impl Future<Output = Result<T, sqlx::Error>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(limit, operation).await {
        Ok(result) => result.map_err(store_error),
        Err(_) => Err(StoreError::Timeout),
    }
}

/// Settings shared by the SQL builders.
#[derive(Debug, Clone)]
pub(crate) struct SqlSettings {
    pub(crate) table: String,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) queue_timeout: Duration,
    pub(crate) max_connections: u32,
}

impl SqlSettings {
    pub(crate) fn new(max_connections: u32, command_timeout: Duration) -> Self {
        Self {
            table: DEFAULT_TABLE.to_owned(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            command_timeout,
            queue_timeout: DEFAULT_QUEUE_TIMEOUT,
            max_connections,
        }
    }

    /// Parses `url` into the backend's connect options, after checking the
    /// table name; `what` and `reason` describe a URL that does not parse.
    pub(crate) fn connect_options<O: std::str::FromStr>(
        &self,
        url: &str,
        what: &'static str,
        reason: &'static str,
    ) -> Result<O, ConfigError> {
        validate_table(&self.table)?;
        O::from_str(url).map_err(|_| ConfigError::Invalid { what, reason })
    }

    /// A pool of at most `max_connections`, waiting `connect_timeout` for one
    /// (a free pooled connection, or a new one opened).
    pub(crate) fn pool_options<DB: sqlx::Database>(&self) -> sqlx::pool::PoolOptions<DB> {
        sqlx::pool::PoolOptions::new()
            .max_connections(self.max_connections)
            .acquire_timeout(self.connect_timeout)
    }
}

/// A store's statements, formatted once for its table.
pub(crate) struct Statements<C = String> {
    /// The table's name, unquoted.
    pub(crate) table: String,
    /// The backend's own claim statement (or statements).
    pub(crate) claim: C,
    /// Bound: the retention (ms), namespace, id, token.
    pub(crate) complete: String,
    /// Bound: namespace, id, token.
    pub(crate) release: String,
    /// Bound: the lease (ms), namespace, id, token.
    pub(crate) extend: String,
    /// The database's clock, in epoch milliseconds.
    pub(crate) now: String,
    /// Bound: the batch size.
    pub(crate) purge: String,
}

impl<C> Statements<C> {
    /// The backend's `claim` and `purge` with the token-checked statements,
    /// the same in every dialect but for the table's quoting (`quoted`), the
    /// `n`th parameter's placeholder (`param(n)`, from 1) and the database's
    /// clock in epoch milliseconds (`now`, an expression that keeps one value
    /// within a statement).
    pub(crate) fn new(
        table: &str,
        quoted: &str,
        param: fn(usize) -> String,
        now: &str,
        claim: C,
        purge: String,
    ) -> Self {
        // The row the token holds, in flight, whether or not its lease has
        // run out (a takeover replaces the token): parameters `first` to
        // `first + 2`.
        let held = |first: usize| {
            format!(
                "namespace = {} AND id = {} AND token = {} AND state = {IN_FLIGHT}",
                param(first),
                param(first + 1),
                param(first + 2),
            )
        };
        let span = param(1);
        Self {
            table: table.to_owned(),
            claim,
            complete: format!(
                "UPDATE {quoted} SET state = {COMPLETED}, expires_at = {now} + {span} WHERE {}",
                held(2)
            ),
            release: format!("DELETE FROM {quoted} WHERE {}", held(1)),
            extend: format!(
                "UPDATE {quoted} SET expires_at = {now} + {span} WHERE {}",
                held(2)
            ),
            now: now.to_owned(),
            purge,
        }
    }
}

/// The purge's condition on a row (`now` the database's clock): a completed
/// row once its retention is over, an in-flight one once its lease has been
/// over for [`EXPIRED_CLAIM_GRACE`](crate::dedup::EXPIRED_CLAIM_GRACE), so that
/// a late `complete` by its holder still finds it.
pub(crate) fn purgeable(now: &str) -> String {
    let grace = span_ms(crate::dedup::EXPIRED_CLAIM_GRACE);
    format!("expires_at <= {now} AND (state = {COMPLETED} OR expires_at <= {now} - {grace})")
}

/// The database type of a pool, for the statements the macro defines.
pub(crate) trait PoolDatabase {
    /// The pool's database.
    type Database: sqlx::Database;
}

impl<DB: sqlx::Database> PoolDatabase for sqlx::Pool<DB> {
    type Database = DB;
}

/// A row as a claim left it.
pub(crate) struct ClaimedRow {
    /// The database's clock when the row was read.
    now: i64,
    state: i64,
    /// Whether the row's token is the claimer's.
    holds: bool,
    expires_at: i64,
}

impl ClaimedRow {
    pub(crate) fn new(now: i64, state: impl Into<i64>, holds: bool, expires_at: i64) -> Self {
        Self {
            now,
            state: state.into(),
            holds,
            expires_at,
        }
    }

    /// What the claimer learns.
    pub(crate) fn outcome(self) -> Result<Claim, StoreError> {
        Ok(match i16::try_from(self.state).unwrap_or(0) {
            IN_FLIGHT if self.holds => Claim::Claimed,
            IN_FLIGHT => Claim::InFlight {
                retry_after: remaining(self.now, self.expires_at),
            },
            COMPLETED => Claim::Completed,
            other => return Err(StoreError::Protocol(format!("unknown state {other}"))),
        })
    }
}

/// Defines a SQL store and its builder, with everything the backends share:
/// the builder's settings, the constructors and accessors, the token-checked
/// `complete` / `release` / `extend`, `purge_expired` and `spawn_purge`, and
/// the [`DedupStore`](super::DedupStore) impl.
///
/// The backend's module supplies the rest: `fn statements(table: &str) ->
/// Statements<claim type>` (named by `statements`), the builder's `connect`
/// (which ends with `self.open(pool)`), the store's `migrate`, and
/// `claim_row` (the claim, without its timeout; see `claim_returning`). The
/// docs of the items whose wording differs between backends are given here,
/// in this order.
macro_rules! sql_store {
    (
        $(#[$store_doc:meta])*
        pub struct $store:ident {
            pool: $pool:ty,
            claim: $claim:ty,
            statements: $statements:path,
            backend: $backend:literal,
        }

        $(#[$builder_doc:meta])*
        pub struct $builder:ident {
            max_connections: $max:literal,
            command_timeout_secs: $command_secs:literal,
            debug: $debug:ident,
        }

        $(#[$builder_fn_doc:meta])* fn builder;
        $(#[$connect_fn_doc:meta])* fn connect;
        $(#[$new_doc:meta])* fn new;
        $(#[$connect_timeout_doc:meta])* fn connect_timeout;
        $(#[$command_timeout_doc:meta])* fn command_timeout;
        $(#[$max_connections_doc:meta])* fn max_connections;
        $(#[$purge_doc:meta])* fn purge_expired;
    ) => {
        $(#[$store_doc])*
        #[derive(Clone)]
        pub struct $store {
            pool: $pool,
            sql: ::std::sync::Arc<$crate::dedup::sql::Statements<$claim>>,
            command_timeout: ::std::time::Duration,
            /// One permit per pooled connection: operations queue here, in
            /// order, within `queue_timeout`.
            slots: ::std::sync::Arc<::tokio::sync::Semaphore>,
            queue_timeout: ::std::time::Duration,
        }

        $(#[$builder_doc])*
        #[derive(Clone)]
        #[must_use]
        pub struct $builder {
            url: String,
            settings: $crate::dedup::sql::SqlSettings,
        }

        $crate::dedup::sql::sql_store!(@debug $debug $builder);

        // The impls, in a block for the imports they share.
        const _: () = {
            use std::fmt;
            use std::sync::Arc;
            use std::time::Duration;

            use $crate::ConfigError;
            use $crate::dedup::sql::{
                DEFAULT_CONNECT_TIMEOUT, DEFAULT_PURGE_BATCH,
                DEFAULT_QUEUE_TIMEOUT, DEFAULT_TABLE, PurgeTask, RowKey, SqlSettings, span_ms, validate_table, within,
            };
            use $crate::dedup::{Claim, ClaimToken, DedupStore, OpenError, StoreError, Transition};

            impl fmt::Debug for $store {
                fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.debug_struct(stringify!($store))
                        .field("table", &self.sql.table)
                        .field("command_timeout", &self.command_timeout)
                        .field("queue_timeout", &self.queue_timeout)
                        .field("pool_size", &self.pool.size())
                        .finish_non_exhaustive()
                }
            }

            impl $builder {
                /// The table's name (default [`DEFAULT_TABLE`](crate::dedup::sql::DEFAULT_TABLE)); checked by
                /// [`connect`](Self::connect) to be a plain identifier.
                pub fn table(mut self, name: impl Into<String>) -> Self {
                    self.settings.table = name.into();
                    self
                }

                $(#[$connect_timeout_doc])*
                pub fn connect_timeout(mut self, timeout: Duration) -> Self {
                    self.settings.connect_timeout = timeout;
                    self
                }

                $(#[$command_timeout_doc])*
                pub fn command_timeout(mut self, timeout: Duration) -> Self {
                    self.settings.command_timeout = timeout;
                    self
                }

                $(#[$max_connections_doc])*
                pub fn max_connections(mut self, max: u32) -> Self {
                    self.settings.max_connections = max.max(1);
                    self
                }

                /// How long an operation may wait for a free connection while
                /// every pooled one is busy (default 30 s, sqlx's own default),
                /// answering [`StoreError::Timeout`](crate::dedup::StoreError::Timeout)
                /// after it. Operations queue in order; this wait counts neither
                /// towards the command timeout (a burst queueing for the pool
                /// does not time out statements that run fast) nor towards the
                /// connect timeout (an unreachable database still fails within
                /// it once an operation's turn comes).
                pub fn queue_timeout(mut self, timeout: Duration) -> Self {
                    self.settings.queue_timeout = timeout;
                    self
                }

                /// The store on the pool `connect` opens, within the connect timeout.
                async fn open(
                    &self,
                    connect: impl Future<Output = Result<$pool, sqlx::Error>>,
                ) -> Result<$store, OpenError> {
                    let pool = within(self.settings.connect_timeout, connect).await?;
                    Ok($store::from_parts(pool, &self.settings.table, self.settings.command_timeout)
                        .with_queue_timeout(self.settings.queue_timeout))
                }
            }

            impl $store {
                #[doc = concat!("Default of [`", stringify!($builder), "::connect_timeout`]: 5 seconds.")]
                pub const DEFAULT_CONNECT_TIMEOUT: Duration = DEFAULT_CONNECT_TIMEOUT;
                #[doc = concat!("Default of [`", stringify!($builder), "::command_timeout`]: ", stringify!($command_secs), " seconds.")]
                pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs($command_secs);
                #[doc = concat!("Default of [`", stringify!($builder), "::queue_timeout`]: 30 seconds.")]
                pub const DEFAULT_QUEUE_TIMEOUT: Duration = DEFAULT_QUEUE_TIMEOUT;

                $(#[$builder_fn_doc])*
                pub fn builder(url: &str) -> $builder {
                    $builder {
                        url: url.to_owned(),
                        settings: SqlSettings::new($max, Self::DEFAULT_COMMAND_TIMEOUT),
                    }
                }

                $(#[$connect_fn_doc])*
                pub async fn connect(url: &str) -> Result<Self, OpenError> {
                    Self::builder(url).connect().await
                }

                $(#[$new_doc])*
                #[must_use]
                pub fn new(pool: $pool) -> Self {
                    Self::from_parts(pool, DEFAULT_TABLE, Self::DEFAULT_COMMAND_TIMEOUT)
                }

                fn from_parts(pool: $pool, table: &str, command_timeout: Duration) -> Self {
                    let slots = usize::try_from(pool.options().get_max_connections())
                        .unwrap_or(usize::MAX)
                        .clamp(1, ::tokio::sync::Semaphore::MAX_PERMITS);
                    Self {
                        pool,
                        sql: Arc::new($statements(table)),
                        command_timeout,
                        slots: Arc::new(::tokio::sync::Semaphore::new(slots)),
                        queue_timeout: DEFAULT_QUEUE_TIMEOUT,
                    }
                }

                /// Lets an operation wait `timeout` for a free connection instead
                #[doc = concat!("(see [`", stringify!($builder), "::queue_timeout`]).")]
                #[must_use]
                pub fn with_queue_timeout(mut self, timeout: Duration) -> Self {
                    self.queue_timeout = timeout;
                    self
                }

                /// Uses the table `name` instead.
                ///
                /// # Errors
                ///
                /// [`ConfigError::Invalid`](crate::ConfigError::Invalid) unless `name` is a plain identifier.
                pub fn with_table(mut self, name: &str) -> Result<Self, ConfigError> {
                    validate_table(name)?;
                    self.sql = Arc::new($statements(name));
                    Ok(self)
                }

                /// Bounds every operation by `timeout` instead.
                #[must_use]
                pub fn with_command_timeout(mut self, timeout: Duration) -> Self {
                    self.command_timeout = timeout;
                    self
                }

                /// The connection pool.
                #[must_use]
                pub fn pool(&self) -> &$pool {
                    &self.pool
                }

                /// The table's name.
                #[must_use]
                pub fn table(&self) -> &str {
                    &self.sql.table
                }

                $(#[$purge_doc])*
                pub async fn purge_expired(&self, batch: u32) -> Result<u64, StoreError> {
                    let batch = batch.max(1);
                    let mut total = 0;
                    loop {
                        let (_turn, mut connection) = self.connection().await?;
                        let deleted = within(
                            self.command_timeout,
                            sqlx::query(&self.sql.purge)
                                .bind(i64::from(batch))
                                .execute(&mut *connection),
                        )
                        .await?
                        .rows_affected();
                        total += deleted;
                        if deleted < u64::from(batch) {
                            return Ok(total);
                        }
                    }
                }

                /// Runs [`purge_expired`](Self::purge_expired) every `interval` in a
                /// background task (batches of 1000), until the returned handle is dropped.
                /// Failures are logged (`tracing`), never fatal.
                ///
                /// # Panics
                ///
                /// Outside a Tokio runtime.
                pub fn spawn_purge(&self, interval: Duration) -> PurgeTask {
                    let store = self.clone();
                    PurgeTask::spawn(interval, $backend, move || {
                        let store = store.clone();
                        async move { store.purge_expired(DEFAULT_PURGE_BATCH).await }
                    })
                }

                /// A pooled connection: first this operation's turn (one
                /// permit per connection, in order, within the queue
                /// timeout), then the connection, within the pool's acquire
                /// timeout (the builder's `connect_timeout`). Neither wait is
                /// part of the command timeout.
                async fn connection(
                    &self,
                ) -> Result<
                    (
                        ::tokio::sync::OwnedSemaphorePermit,
                        sqlx::pool::PoolConnection<<$pool as $crate::dedup::sql::PoolDatabase>::Database>,
                    ),
                    StoreError,
                > {
                    let turn = ::tokio::time::timeout(
                        self.queue_timeout,
                        Arc::clone(&self.slots).acquire_owned(),
                    );
                    let permit = match turn.await {
                        Ok(Ok(permit)) => permit,
                        Ok(Err(_closed)) => {
                            return Err(StoreError::Protocol("connection queue closed".into()));
                        }
                        Err(_) => return Err(StoreError::Timeout),
                    };
                    let connection = self
                        .pool
                        .acquire()
                        .await
                        .map_err($crate::dedup::sql::store_error)?;
                    Ok((permit, connection))
                }

                /// The database's clock, in epoch milliseconds.
                async fn database_now_ms(&self) -> Result<i64, StoreError> {
                    let (_turn, mut connection) = self.connection().await?;
                    let select = format!("SELECT {}", self.sql.now);
                    within(
                        self.command_timeout,
                        sqlx::query_scalar::<_, i64>(&select).fetch_one(&mut *connection),
                    )
                    .await
                }

                /// How far the database's clock is ahead of this host's (negative:
                /// behind), measured by one query (half its round trip is
                /// counted as the database's answer time).
                ///
                /// Leases do not depend on it (they use the database's clock),
                /// but the signature schemes' timestamp tolerance uses this
                /// host's clock: a large skew is worth an alert.
                ///
                /// # Errors
                ///
                /// [`StoreError`] when the database cannot answer.
                pub async fn clock_skew_ms(&self) -> Result<i64, StoreError> {
                    let before = $crate::dedup::sql::now_ms();
                    let database = self.database_now_ms().await?;
                    let after = $crate::dedup::sql::now_ms();
                    Ok(database - (before + (after - before) / 2))
                }

                /// Runs one of the token-checked statements, binding the span
                /// from now (if any), the key and the token; applied when it
                /// matched the row.
                async fn token_update(
                    &self,
                    statement: &str,
                    key: &str,
                    token: ClaimToken,
                    span: Option<Duration>,
                ) -> Result<Transition, StoreError> {
                    let key = RowKey::new(key);
                    let mut query = sqlx::query(statement);
                    if let Some(span) = span {
                        query = query.bind(span_ms(span));
                    }
                    let query = query
                        .bind(key.namespace)
                        .bind(key.id)
                        .bind(token.to_hex());
                    let (_turn, mut connection) = self.connection().await?;
                    let done = within(self.command_timeout, query.execute(&mut *connection)).await?;
                    Ok(if done.rows_affected() > 0 {
                        Transition::Applied
                    } else {
                        Transition::Stale
                    })
                }
            }

            #[async_trait::async_trait]
            impl DedupStore for $store {
                async fn claim(
                    &self,
                    key: &str,
                    token: ClaimToken,
                    lease: Duration,
                ) -> Result<Claim, StoreError> {
                    let key = RowKey::new(key);
                    let mine = token.to_hex();
                    let (_turn, mut connection) = self.connection().await?;
                    within(
                        self.command_timeout,
                        self.claim_row(&mut connection, &key, &mine, span_ms(lease)),
                    )
                    .await?
                    .outcome()
                }

                async fn complete(
                    &self,
                    key: &str,
                    token: ClaimToken,
                    retention: Duration,
                ) -> Result<Transition, StoreError> {
                    self.token_update(&self.sql.complete, key, token, Some(retention)).await
                }

                async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, StoreError> {
                    self.token_update(&self.sql.release, key, token, None).await
                }

                async fn extend(
                    &self,
                    key: &str,
                    token: ClaimToken,
                    lease: Duration,
                ) -> Result<Transition, StoreError> {
                    self.token_update(&self.sql.extend, key, token, Some(lease)).await
                }
            }
        };
    };
    // The builder's `Debug`: `redacted` leaves the URL out (it may hold a
    // password); `derived` is the builder's own `#[derive(Debug)]`.
    (@debug derived $builder:ident) => {};
    (@debug redacted $builder:ident) => {
        impl ::std::fmt::Debug for $builder {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(stringify!($builder))
                    .field("settings", &self.settings)
                    .finish_non_exhaustive()
            }
        }
    };
}
pub(crate) use sql_store;

/// The `claim_row` of a backend whose claim is one
/// `INSERT … RETURNING state, token, expires_at, now` statement (PostgreSQL,
/// SQLite) on a connection of database `$db`, bound with namespace, id,
/// token and the lease (ms); `$state` is the type the `state` column decodes to.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
macro_rules! claim_returning {
    ($store:ident, $db:ty, $state:ty) => {
        impl $store {
            async fn claim_row(
                &self,
                connection: &mut ::sqlx::pool::PoolConnection<$db>,
                key: &$crate::dedup::sql::RowKey,
                token: &str,
                lease_ms: i64,
            ) -> Result<$crate::dedup::sql::ClaimedRow, ::sqlx::Error> {
                let (state, held, expires_at, now): ($state, String, i64, i64) =
                    ::sqlx::query_as(&self.sql.claim)
                        .bind(&key.namespace)
                        .bind(&key.id)
                        .bind(token)
                        .bind(lease_ms)
                        .fetch_one(&mut **connection)
                        .await?;
                let holds = held == token;
                Ok($crate::dedup::sql::ClaimedRow::new(
                    now, state, holds, expires_at,
                ))
            }
        }
    };
}
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) use claim_returning;

/// A background task that purges expired rows; see `spawn_purge` on the SQL
/// stores.
///
/// Dropping the handle (or calling [`stop`](Self::stop)) stops the task.
#[derive(Debug)]
#[must_use = "dropping the PurgeTask stops the purge"]
pub struct PurgeTask {
    handle: tokio::task::JoinHandle<()>,
}

impl PurgeTask {
    /// Spawns `purge` every `interval`, logging its failures.
    pub(crate) fn spawn<F, Fut>(interval: Duration, backend: &'static str, mut purge: F) -> Self
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Result<u64, StoreError>> + Send + 'static,
    {
        let handle = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval.max(Duration::from_millis(1)));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                match purge().await {
                    Ok(0) => {}
                    Ok(rows) => tracing::debug!(backend, rows, "purged expired dedup rows"),
                    Err(error) => {
                        tracing::warn!(backend, error = %error, "purging expired dedup rows failed");
                    }
                }
            }
        });
        Self { handle }
    }

    /// Stops the task (an ongoing purge statement is abandoned; the database
    /// rolls it back or finishes it, both harmless).
    pub fn stop(self) {
        // Drop aborts.
    }

    /// Whether the task has stopped (it only stops when told to, or if the
    /// runtime shuts down).
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

impl Drop for PurgeTask {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

/// How often the stores opened by [`store_from_url`](crate::dedup::store_from_url) purge.
pub const URL_PURGE_INTERVAL: Duration = Duration::from_secs(3_600);

/// A store with its purge task: the task stops when the last handle on the
/// store is dropped. What [`store_from_url`](crate::dedup::store_from_url)
/// returns for the SQL backends.
pub(crate) struct Purging<S> {
    store: S,
    _purge: PurgeTask,
}

impl<S> Purging<S> {
    pub(crate) fn new(store: S, purge: PurgeTask) -> Self {
        Self {
            store,
            _purge: purge,
        }
    }
}

#[async_trait::async_trait]
impl<S: super::DedupStore> super::DedupStore for Purging<S> {
    async fn claim(
        &self,
        key: &str,
        token: super::ClaimToken,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        self.store.claim(key, token, lease).await
    }
    async fn complete(
        &self,
        key: &str,
        token: super::ClaimToken,
        retention: Duration,
    ) -> Result<super::Transition, StoreError> {
        self.store.complete(key, token, retention).await
    }
    async fn complete_in_lease(
        &self,
        key: &str,
        token: super::ClaimToken,
        retention: Duration,
        lease_left: Duration,
    ) -> Result<super::Transition, StoreError> {
        self.store
            .complete_in_lease(key, token, retention, lease_left)
            .await
    }
    async fn release(
        &self,
        key: &str,
        token: super::ClaimToken,
    ) -> Result<super::Transition, StoreError> {
        self.store.release(key, token).await
    }
    async fn extend(
        &self,
        key: &str,
        token: super::ClaimToken,
        lease: Duration,
    ) -> Result<super::Transition, StoreError> {
        self.store.extend(key, token, lease).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::cell::Cell;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use crate::dedup::{ClaimToken, DedupStore, Transition};

    thread_local! {
        /// How far this thread's application clock is off, while a
        /// [`Skewed`] future is polled.
        pub(super) static APP_CLOCK_SKEW_MS: Cell<i64> = const { Cell::new(0) };
    }

    /// Polls `inner` as an instance whose clock is `skew_ms` off would.
    struct Skewed<F> {
        skew_ms: i64,
        inner: Pin<Box<F>>,
    }

    impl<F: Future> Future for Skewed<F> {
        type Output = F::Output;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            let previous = APP_CLOCK_SKEW_MS.replace(self.skew_ms);
            let result = self.inner.as_mut().poll(cx);
            APP_CLOCK_SKEW_MS.set(previous);
            result
        }
    }

    fn skewed<F: Future>(skew: i64, inner: F) -> Skewed<F> {
        Skewed {
            skew_ms: skew,
            inner: Box::pin(inner),
        }
    }

    const HOUR: i64 = 3_600_000;

    /// Two instances on one table whose application clocks are an hour
    /// apart (far more than any lease) still exclude each other, and each
    /// sees the other's completions and expiries as they really are.
    async fn skewed_instances_exclude_each_other(a: &dyn DedupStore, b: &dyn DedupStore) {
        let lease = Duration::from_secs(30);
        let day = Duration::from_secs(86_400);
        let fresh = || format!("webhooks:skew:{}", ClaimToken::random().to_hex());

        // B runs an hour ahead: A's live claim is not taken over.
        let key = fresh();
        let mine = ClaimToken::random();
        assert_eq!(a.claim(&key, mine, lease).await.unwrap(), Claim::Claimed);
        let theirs = skewed(HOUR, b.claim(&key, ClaimToken::random(), lease)).await;
        assert!(
            matches!(theirs.unwrap(), Claim::InFlight { .. }),
            "B (+1 h) took over a live claim"
        );
        // An instance ahead can still complete its own claim.
        let key = fresh();
        let token = ClaimToken::random();
        assert_eq!(
            skewed(HOUR, b.claim(&key, token, lease)).await.unwrap(),
            Claim::Claimed
        );
        let done = skewed(HOUR, b.complete(&key, token, day)).await.unwrap();
        assert_eq!(
            done,
            Transition::Applied,
            "B (+1 h) could not complete its own claim"
        );
        assert_eq!(
            a.claim(&key, ClaimToken::random(), lease).await.unwrap(),
            Claim::Completed
        );

        // B runs an hour behind: its claim is not dead for A.
        let key = fresh();
        let token = ClaimToken::random();
        assert_eq!(
            skewed(-HOUR, b.claim(&key, token, lease)).await.unwrap(),
            Claim::Claimed
        );
        let ours = a.claim(&key, ClaimToken::random(), lease).await.unwrap();
        assert!(
            matches!(ours, Claim::InFlight { .. }),
            "A took over the claim of B (-1 h): {ours:?}"
        );
        let done = skewed(-HOUR, b.complete(&key, token, day)).await.unwrap();
        assert_eq!(done, Transition::Applied);
        assert_eq!(
            a.claim(&key, ClaimToken::random(), lease).await.unwrap(),
            Claim::Completed
        );

        // A short lease of A really runs out for B (-1 h): B takes over.
        let key = fresh();
        let short = Duration::from_millis(300);
        assert_eq!(
            a.claim(&key, ClaimToken::random(), short).await.unwrap(),
            Claim::Claimed
        );
        tokio::time::sleep(Duration::from_millis(450)).await;
        let theirs = skewed(-HOUR, b.claim(&key, ClaimToken::random(), lease))
            .await
            .unwrap();
        assert_eq!(
            theirs,
            Claim::Claimed,
            "B (-1 h) waits an hour for an expired lease"
        );
    }

    /// `env`'s URL (or `default`) when its server accepts connections;
    /// `None` (skipped, said on stderr) without one, a panic under `CI=true`.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    async fn server_url(env: &str, default: &str) -> Option<String> {
        let url = std::env::var(env).unwrap_or_else(|_| default.to_owned());
        let authority = url.split_once("://").map(|(_, rest)| {
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            let start = rest[..end].rfind('@').map_or(0, |at| at + 1);
            rest[start..end].to_owned()
        })?;
        let reachable = matches!(
            tokio::time::timeout(
                Duration::from_secs(2),
                tokio::net::TcpStream::connect(&authority)
            )
            .await,
            Ok(Ok(_))
        );
        let ci = std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
        if !reachable {
            assert!(!ci, "{env}: {authority} is not reachable, and CI=true");
            eprintln!("SKIPPED: {authority} ({env}) is not reachable");
            return None;
        }
        Some(url)
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn sqlite_instances_with_skewed_clocks_exclude_each_other() {
        let path = std::env::temp_dir().join(format!(
            "webhooks-dedup-skew-{}.db",
            ClaimToken::random().to_hex()
        ));
        let url = format!("sqlite://{}", path.display());
        let a = SqliteStore::connect(&url).await.unwrap();
        a.migrate().await.unwrap();
        let b = SqliteStore::connect(&url).await.unwrap();
        skewed_instances_exclude_each_other(&a, &b).await;
        a.pool().close().await;
        b.pool().close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }

    #[cfg(feature = "postgres")]
    #[tokio::test]
    async fn postgres_instances_with_skewed_clocks_exclude_each_other() {
        let Some(url) = server_url(
            "WEBHOOKS_POSTGRES_URL",
            "postgres://postgres@127.0.0.1:5432/test",
        )
        .await
        else {
            return;
        };
        let table = format!("dedup_skew_{}", &ClaimToken::random().to_hex()[..12]);
        let a = PostgresStore::builder(&url)
            .table(&table)
            .connect()
            .await
            .unwrap();
        a.migrate().await.unwrap();
        let b = PostgresStore::builder(&url)
            .table(&table)
            .connect()
            .await
            .unwrap();
        skewed_instances_exclude_each_other(&a, &b).await;
        let drop_table = format!("DROP TABLE \"{table}\"");
        sqlx::query(&drop_table).execute(a.pool()).await.unwrap();
    }

    #[cfg(feature = "mysql")]
    #[tokio::test]
    async fn mysql_instances_with_skewed_clocks_exclude_each_other() {
        let Some(url) = server_url("WEBHOOKS_MYSQL_URL", "mysql://root@127.0.0.1:3306/test").await
        else {
            return;
        };
        let table = format!("dedup_skew_{}", &ClaimToken::random().to_hex()[..12]);
        let a = MySqlStore::builder(&url)
            .table(&table)
            .connect()
            .await
            .unwrap();
        a.migrate().await.unwrap();
        let b = MySqlStore::builder(&url)
            .table(&table)
            .connect()
            .await
            .unwrap();
        skewed_instances_exclude_each_other(&a, &b).await;
        let drop_table = format!("DROP TABLE `{table}`");
        sqlx::query(&drop_table).execute(a.pool()).await.unwrap();
    }

    #[cfg(feature = "postgres")]
    #[tokio::test]
    async fn postgres_data_errors_are_permanent() {
        let Some(url) = server_url(
            "WEBHOOKS_POSTGRES_URL",
            "postgres://postgres@127.0.0.1:5432/test",
        )
        .await
        else {
            return;
        };
        let store = PostgresStore::connect(&url).await.unwrap();
        // SQLSTATE 22021: PostgreSQL text cannot hold a NUL byte.
        let error = sqlx::query("SELECT $1::text")
            .bind("msg\0nul")
            .execute(store.pool())
            .await
            .unwrap_err();
        assert!(store_error(error).is_permanent());
        // A connection failure is not.
        let refused = sqlx::postgres::PgPoolOptions::new()
            .acquire_timeout(Duration::from_secs(2))
            .connect("postgres://postgres@127.0.0.1:1/test")
            .await
            .unwrap_err();
        assert!(!store_error(refused).is_permanent());
    }

    #[cfg(feature = "mysql")]
    #[tokio::test]
    async fn mysql_data_errors_are_permanent() {
        let Some(url) = server_url("WEBHOOKS_MYSQL_URL", "mysql://root@127.0.0.1:3306/test").await
        else {
            return;
        };
        let store = MySqlStore::connect(&url).await.unwrap();
        let table = format!("data_err_{}", &ClaimToken::random().to_hex()[..12]);
        sqlx::query(&format!("CREATE TABLE `{table}` (v VARCHAR(4) NOT NULL)"))
            .execute(store.pool())
            .await
            .unwrap();
        // Strict mode (the default): 1406, data too long.
        let error = sqlx::query(&format!("INSERT INTO `{table}` (v) VALUES (?)"))
            .bind("longer than four")
            .execute(store.pool())
            .await
            .unwrap_err();
        sqlx::query(&format!("DROP TABLE `{table}`"))
            .execute(store.pool())
            .await
            .unwrap();
        assert!(store_error(error).is_permanent());
    }

    #[test]
    fn a_skewed_future_sets_the_clock_only_while_polled() {
        let before = now_ms();
        let inside =
            futures_util::FutureExt::now_or_never(skewed(HOUR, async { now_ms() })).unwrap();
        assert!(inside - before >= HOUR - 1_000, "{inside} vs {before}");
        assert!(now_ms() - before < 1_000);
    }

    #[test]
    fn table_names_are_plain_identifiers() {
        assert!(validate_table("webhooks_dedup").is_ok());
        assert!(validate_table("_t9").is_ok());
        for bad in [
            "",
            "9t",
            "a-b",
            "a.b",
            "t;drop",
            "\"t\"",
            "ü",
            &"t".repeat(49),
        ] {
            assert!(validate_table(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn keys_split_at_the_first_colon() {
        let key = RowKey::new("webhooks:standard-webhooks:msg_1");
        assert_eq!(key.namespace, "webhooks");
        assert_eq!(key.id, "standard-webhooks:msg_1");
        assert_eq!(RowKey::new("bare").namespace, "");
    }

    #[test]
    fn long_parts_are_digested_injectively() {
        let long = "x".repeat(MAX_ID_LEN + 1);
        let key = RowKey::new(&format!("ns:{long}"));
        assert!(key.id.starts_with(DIGEST_MARKER));
        assert_eq!(key.id.len(), DIGEST_MARKER.len() + 64);
        // A short id that looks like a digest is digested too.
        let lookalike = RowKey::new(&format!("ns:{}", key.id));
        assert_ne!(lookalike.id, key.id);
        assert_eq!(RowKey::new(&"x".repeat(MAX_ID_LEN)).id.len(), MAX_ID_LEN);
    }
}
