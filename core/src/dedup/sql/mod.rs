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

mod macros;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) use macros::claim_returning;
pub(crate) use macros::sql_store;

mod purge;
pub(crate) use purge::Purging;
pub use purge::{PurgeTask, URL_PURGE_INTERVAL};

#[cfg(test)]
pub(crate) mod tests;

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
