//! The SQLite [`DedupStore`].

use std::fmt;
use std::str::FromStr as _;
use std::sync::Arc;
use std::time::Duration;

use sqlx::Row as _;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

use super::{
    COMPLETED, DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_PURGE_BATCH, IN_FLIGHT,
    PurgeTask, RowKey, SqlSettings, deadline_ms, now_ms, remaining, validate_table, within,
};
use crate::ConfigError;
use crate::dedup::url::OpenError;
use crate::dedup::{Claim, ClaimToken, DedupStore, StoreError, Transition};

/// A [`DedupStore`] in an SQLite file: durable across restarts, shared by
/// the processes of one host (never put the file on a network file system).
///
/// The builder opens the file in WAL mode (readers never block the writer)
/// with a busy timeout equal to the command timeout, creating it if missing.
/// Claim is the same single statement as the PostgreSQL store's:
/// `INSERT … ON CONFLICT (namespace, id) DO UPDATE SET … (take over only a
/// dead row) RETURNING state, token, expires_at`; SQLite runs it under its
/// database write lock, so exactly one claimer wins. `complete`, `release`
/// and `extend` are token-checked `UPDATE` / `DELETE` statements. See the
/// [module docs](crate::dedup::sql) for the table, the clock and the timeouts.
///
/// `sqlite::memory:` works too, with a single connection: a store that
/// forgets everything at exit, for tests.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use webhooks_core::dedup::{Claim, ClaimToken, DedupStore, SqliteStore};
///
/// let path = std::env::temp_dir().join(format!("dedup-doc-{}.db", ClaimToken::random().to_hex()));
/// let store = SqliteStore::builder(&format!("sqlite://{}", path.display()))
///     .connect()
///     .await?;
/// store.migrate().await?;
/// let lease = Duration::from_secs(30);
/// assert_eq!(store.claim("webhooks:msg_1", ClaimToken::random(), lease).await?, Claim::Claimed);
/// # drop(store); let _ = std::fs::remove_file(&path); Ok(()) }
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    sql: Arc<Statements>,
    command_timeout: Duration,
}

struct Statements {
    table: String,
    claim: String,
    complete: String,
    release: String,
    extend: String,
    purge: String,
}

impl Statements {
    fn new(table: &str) -> Self {
        let t = format!("\"{table}\"");
        Self {
            table: table.to_owned(),
            claim: format!(
                "INSERT INTO {t} AS d (namespace, id, state, token, expires_at) \
                 VALUES (?1, ?2, {IN_FLIGHT}, ?3, ?4) \
                 ON CONFLICT (namespace, id) DO UPDATE SET \
                 state = CASE WHEN d.expires_at <= ?5 THEN {IN_FLIGHT} ELSE d.state END, \
                 token = CASE WHEN d.expires_at <= ?5 THEN excluded.token ELSE d.token END, \
                 expires_at = CASE WHEN d.expires_at <= ?5 THEN excluded.expires_at ELSE d.expires_at END \
                 RETURNING state, token, expires_at"
            ),
            complete: format!(
                "UPDATE {t} SET state = {COMPLETED}, expires_at = ?4 \
                 WHERE namespace = ?1 AND id = ?2 AND token = ?3 AND state = {IN_FLIGHT} AND expires_at > ?5"
            ),
            release: format!(
                "DELETE FROM {t} \
                 WHERE namespace = ?1 AND id = ?2 AND token = ?3 AND state = {IN_FLIGHT} AND expires_at > ?4"
            ),
            extend: format!(
                "UPDATE {t} SET expires_at = ?4 \
                 WHERE namespace = ?1 AND id = ?2 AND token = ?3 AND state = {IN_FLIGHT} AND expires_at > ?5"
            ),
            purge: format!(
                "DELETE FROM {t} WHERE rowid IN \
                 (SELECT rowid FROM {t} WHERE expires_at <= ?1 LIMIT ?2)"
            ),
        }
    }
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("table", &self.sql.table)
            .field("command_timeout", &self.command_timeout)
            .field("pool_size", &self.pool.size())
            .finish_non_exhaustive()
    }
}

/// Builds a [`SqliteStore`] from a URL; see [`SqliteStore::builder`].
#[derive(Clone, Debug)]
#[must_use]
pub struct SqliteStoreBuilder {
    url: String,
    settings: SqlSettings,
}

impl SqliteStoreBuilder {
    /// The table's name (default [`DEFAULT_TABLE`](super::DEFAULT_TABLE)); checked by
    /// [`connect`](Self::connect) to be a plain identifier.
    pub fn table(mut self, name: impl Into<String>) -> Self {
        self.settings.table = name.into();
        self
    }

    /// How long opening the file may take, the pool's acquire timeout
    /// (default [`SqliteStore::DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.settings.connect_timeout = timeout;
        self
    }

    /// How long one store operation may take, waiting for the write lock
    /// (the busy timeout) and a pooled connection included (default
    /// [`SqliteStore::DEFAULT_COMMAND_TIMEOUT`]).
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.settings.command_timeout = timeout;
        self
    }

    /// The pool's maximum number of connections (default 4; SQLite has one
    /// writer at a time, so more rarely helps).
    pub fn max_connections(mut self, max: u32) -> Self {
        self.settings.max_connections = max.max(1);
        self
    }

    /// Opens (creating if missing) the file in WAL mode.
    /// Does not create the table: call [`SqliteStore::migrate`].
    ///
    /// # Errors
    ///
    /// [`OpenError::Config`] for a bad URL or table name,
    /// [`OpenError::Store`] when the file cannot be opened in time.
    pub async fn connect(self) -> Result<SqliteStore, OpenError> {
        validate_table(&self.settings.table)?;
        let options =
            SqliteConnectOptions::from_str(&self.url).map_err(|_| ConfigError::Invalid {
                what: "sqlite URL",
                reason: "not a URL sqlx accepts (sqlite://path/to/file.db)",
            })?;
        let in_memory = self.url.contains(":memory:") || self.url.contains("mode=memory");
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(self.settings.command_timeout);
        let mut pool = SqlitePoolOptions::new()
            .max_connections(self.settings.max_connections)
            .acquire_timeout(self.settings.connect_timeout);
        if in_memory {
            // The database lives as long as one connection does.
            pool = pool
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None);
        }
        let pool =
            match tokio::time::timeout(self.settings.connect_timeout, pool.connect_with(options))
                .await
            {
                Ok(pool) => pool.map_err(super::store_error)?,
                Err(_) => return Err(StoreError::Timeout.into()),
            };
        Ok(SqliteStore {
            pool,
            sql: Arc::new(Statements::new(&self.settings.table)),
            command_timeout: self.settings.command_timeout,
        })
    }
}

impl SqliteStore {
    /// Default of [`SqliteStoreBuilder::connect_timeout`]: 5 seconds.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = DEFAULT_CONNECT_TIMEOUT;
    /// Default of [`SqliteStoreBuilder::command_timeout`]: 2 seconds.
    pub const DEFAULT_COMMAND_TIMEOUT: Duration = DEFAULT_COMMAND_TIMEOUT;

    /// A builder for a store in the file named by `url`
    /// (`sqlite://relative/or/absolute/path.db`, `sqlite:path.db`, or
    /// `sqlite::memory:`).
    pub fn builder(url: &str) -> SqliteStoreBuilder {
        SqliteStoreBuilder {
            url: url.to_owned(),
            settings: SqlSettings::new(4),
        }
    }

    /// Opens with the defaults; see [`builder`](Self::builder).
    ///
    /// # Errors
    ///
    /// As [`SqliteStoreBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self, OpenError> {
        Self::builder(url).connect().await
    }

    /// A store on an existing pool, with the default table and command
    /// timeout. Open that pool in WAL mode with a busy timeout.
    #[must_use]
    pub fn new(pool: SqlitePool) -> Self {
        Self {
            pool,
            sql: Arc::new(Statements::new(super::DEFAULT_TABLE)),
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
        }
    }

    /// Uses the table `name` instead.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] unless `name` is a plain identifier.
    pub fn with_table(mut self, name: &str) -> Result<Self, ConfigError> {
        validate_table(name)?;
        self.sql = Arc::new(Statements::new(name));
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
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// The table's name.
    #[must_use]
    pub fn table(&self) -> &str {
        &self.sql.table
    }

    /// Creates the table and its index if they do not exist. Idempotent.
    ///
    /// # Errors
    ///
    /// [`StoreError`] when the file cannot be written.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let table = &self.sql.table;
        let create = format!(
            "CREATE TABLE IF NOT EXISTS \"{table}\" (\
             namespace TEXT NOT NULL, \
             id TEXT NOT NULL, \
             state INTEGER NOT NULL, \
             token TEXT NOT NULL, \
             expires_at INTEGER NOT NULL, \
             PRIMARY KEY (namespace, id))"
        );
        let index = format!(
            "CREATE INDEX IF NOT EXISTS \"{table}_expires_at\" ON \"{table}\" (expires_at)"
        );
        within(self.command_timeout.max(Duration::from_secs(10)), async {
            sqlx::query(&create).execute(&self.pool).await?;
            sqlx::query(&index).execute(&self.pool).await?;
            Ok(())
        })
        .await
    }

    /// Deletes every row that had expired when called, `batch` rows per
    /// statement (so that no statement holds the write lock long), and
    /// returns how many it deleted.
    ///
    /// # Errors
    ///
    /// [`StoreError`] when a statement fails; rows deleted before stay deleted.
    pub async fn purge_expired(&self, batch: u32) -> Result<u64, StoreError> {
        let now = now_ms();
        let batch = batch.max(1);
        let mut total = 0;
        loop {
            let deleted = within(
                self.command_timeout,
                sqlx::query(&self.sql.purge)
                    .bind(now)
                    .bind(batch)
                    .execute(&self.pool),
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
        PurgeTask::spawn(interval, "sqlite", move || {
            let store = store.clone();
            async move { store.purge_expired(DEFAULT_PURGE_BATCH).await }
        })
    }

    async fn token_update(
        &self,
        statement: &str,
        key: &str,
        token: ClaimToken,
        until: Option<i64>,
        now: i64,
    ) -> Result<Transition, StoreError> {
        let key = RowKey::new(key);
        let mut query = sqlx::query(statement)
            .bind(key.namespace)
            .bind(key.id)
            .bind(token.to_hex());
        if let Some(until) = until {
            query = query.bind(until);
        }
        let done = within(self.command_timeout, query.bind(now).execute(&self.pool)).await?;
        Ok(if done.rows_affected() > 0 {
            Transition::Applied
        } else {
            Transition::Stale
        })
    }
}

#[async_trait::async_trait]
impl DedupStore for SqliteStore {
    async fn claim(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        let row_key = RowKey::new(key);
        let now = now_ms();
        let mine = token.to_hex();
        let row = within(
            self.command_timeout,
            sqlx::query(&self.sql.claim)
                .bind(row_key.namespace)
                .bind(row_key.id)
                .bind(mine.clone())
                .bind(deadline_ms(now, lease))
                .bind(now)
                .fetch_one(&self.pool),
        )
        .await?;
        let read = || -> Result<(i64, String, i64), sqlx::Error> {
            Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
        };
        let (state, held, expires_at) = read().map_err(super::store_error)?;
        Ok(match i16::try_from(state).unwrap_or(0) {
            IN_FLIGHT if held == mine => Claim::Claimed,
            IN_FLIGHT => Claim::InFlight {
                retry_after: remaining(now, expires_at),
            },
            COMPLETED => Claim::Completed,
            other => return Err(StoreError::Protocol(format!("unknown state {other}"))),
        })
    }

    async fn complete(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
    ) -> Result<Transition, StoreError> {
        let now = now_ms();
        self.token_update(
            &self.sql.complete,
            key,
            token,
            Some(deadline_ms(now, retention)),
            now,
        )
        .await
    }

    async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, StoreError> {
        self.token_update(&self.sql.release, key, token, None, now_ms())
            .await
    }

    async fn extend(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Transition, StoreError> {
        let now = now_ms();
        self.token_update(
            &self.sql.extend,
            key,
            token,
            Some(deadline_ms(now, lease)),
            now,
        )
        .await
    }
}
