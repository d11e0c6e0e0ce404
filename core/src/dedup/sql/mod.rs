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
//! **Clock.** Deadlines are computed with the application's clock
//! ([`SystemTime`]) and passed to the database as epoch-millisecond
//! parameters; the database's own clock is never read, so all three backends
//! behave the same. Instances sharing a table need synchronized clocks (NTP):
//! a skew of `s` lets a lease be taken over `s` early, or late.
//!
//! **Expiry.** A row whose `expires_at` has passed is dead: the next claim
//! takes it over in the same atomic statement. Dead rows are removed by
//! `purge_expired` (call it from a cron-like job) or by the background task
//! of `spawn_purge`; neither is needed for correctness, only to bound the
//! table's size.
//!
//! **Timeouts.** `connect_timeout` bounds opening a connection (the pool's
//! acquire timeout); `command_timeout` bounds every operation, waiting for a
//! pooled connection included, and is also set in the database where it has
//! an equivalent (PostgreSQL `statement_timeout`, InnoDB
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

use super::StoreError;
use crate::ConfigError;

#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

#[cfg(feature = "mysql")]
pub use mysql::{MySqlStore, MySqlStoreBuilder};
#[cfg(feature = "postgres")]
pub use postgres::{PostgresStore, PostgresStoreBuilder};
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteStore, SqliteStoreBuilder};

/// The default table name of the SQL backends.
pub const DEFAULT_TABLE: &str = "webhooks_dedup";

/// The default time allowed to open a database connection.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The default time allowed to one store operation.
pub(crate) const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

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

/// Now, in epoch milliseconds, by the application's clock.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `now + d` in epoch milliseconds, saturating.
pub(crate) fn deadline_ms(now: i64, d: Duration) -> i64 {
    now.saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
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
    pub(crate) max_connections: u32,
}

impl SqlSettings {
    pub(crate) fn new(max_connections: u32) -> Self {
        Self {
            table: DEFAULT_TABLE.to_owned(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            max_connections,
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
