//! The MySQL / MariaDB [`DedupStore`].

use std::fmt;
use std::str::FromStr as _;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt as _;
use sqlx::Row as _;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};

use super::{
    COMPLETED, DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_PURGE_BATCH, IN_FLIGHT,
    PurgeTask, RowKey, SqlSettings, deadline_ms, now_ms, remaining, validate_table, within,
};
use crate::ConfigError;
use crate::dedup::url::OpenError;
use crate::dedup::{Claim, ClaimToken, DedupStore, StoreError, Transition};

/// How many times a claim is retried after InnoDB chose it as a deadlock
/// victim (possible when many attempts insert one new key at once).
const DEADLOCK_RETRIES: u32 = 5;

/// A [`DedupStore`] in a MySQL (8.0+) or MariaDB (10.3+) InnoDB table,
/// shared by every instance that uses the same database and table.
///
/// MySQL has no `RETURNING`, and the affected-row count of
/// `INSERT … ON DUPLICATE KEY UPDATE` cannot tell an insert from an untouched
/// duplicate under sqlx (which always sets `CLIENT_FOUND_ROWS`: both count 1).
/// So a claim is one short transaction of two statements on one connection:
///
/// ```sql
/// INSERT INTO t (namespace, id, state, token, expires_at) VALUES (?, ?, 1, ?, ?)
/// ON DUPLICATE KEY UPDATE
///   state      = IF(expires_at <= :now, 1, state),
///   token      = IF(expires_at <= :now, :token, token),
///   expires_at = IF(expires_at <= :now, :until, expires_at);  -- last: see below
/// SELECT state, token, expires_at FROM t WHERE namespace = ? AND id = ? FOR UPDATE;
/// ```
///
/// The `INSERT` either creates the row or, on the duplicate, takes InnoDB's
/// exclusive lock on it and takes it over only if it is dead (MySQL evaluates
/// the assignments left to right, each seeing the columns already assigned,
/// which is why `expires_at`, the column every condition reads, comes last).
/// The lock is held until commit, so the locking `SELECT` reads the row exactly
/// as this statement left it: the caller holds the claim when the token read
/// back is its own. Concurrent claimers of the same key queue on that lock,
/// and exactly one of them wins. A claim that InnoDB picks as a deadlock
/// victim is retried (at most 5 times, within the command timeout).
///
/// `complete`, `release` and `extend` are single `UPDATE` / `DELETE`
/// statements matching the token, the in-flight state and an unexpired lease;
/// with `CLIENT_FOUND_ROWS` their affected-row count is the number of rows
/// matched, which is what they report.
///
/// Keys are stored as `VARBINARY`, compared byte for byte (not through a
/// case-insensitive collation). The pool's sessions use `READ COMMITTED` and an
/// `innodb_lock_wait_timeout` of the command timeout (whole seconds, at least 1).
/// See the [module docs](crate::dedup::sql) for the table, the clock and the
/// timeouts.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use webhooks_core::dedup::MySqlStore;
///
/// let store = MySqlStore::builder("mysql://app:secret@db.internal/app")
///     .connect_timeout(Duration::from_secs(3))
///     .connect()
///     .await?;
/// store.migrate().await?;
/// let _purge = store.spawn_purge(Duration::from_secs(3600));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MySqlStore {
    pool: MySqlPool,
    sql: Arc<Statements>,
    command_timeout: Duration,
}

struct Statements {
    table: String,
    claim: String,
    read: String,
    complete: String,
    release: String,
    extend: String,
    purge: String,
}

impl Statements {
    fn new(table: &str) -> Self {
        let t = format!("`{table}`");
        Self {
            table: table.to_owned(),
            claim: format!(
                "INSERT INTO {t} (namespace, id, state, token, expires_at) \
                 VALUES (?, ?, {IN_FLIGHT}, ?, ?) \
                 ON DUPLICATE KEY UPDATE \
                 state = IF(expires_at <= ?, {IN_FLIGHT}, state), \
                 token = IF(expires_at <= ?, ?, token), \
                 expires_at = IF(expires_at <= ?, ?, expires_at)"
            ),
            read: format!(
                "SELECT state, token, expires_at FROM {t} WHERE namespace = ? AND id = ? FOR UPDATE"
            ),
            complete: format!(
                "UPDATE {t} SET state = {COMPLETED}, expires_at = ? \
                 WHERE namespace = ? AND id = ? AND token = ? AND state = {IN_FLIGHT} AND expires_at > ?"
            ),
            release: format!(
                "DELETE FROM {t} \
                 WHERE namespace = ? AND id = ? AND token = ? AND state = {IN_FLIGHT} AND expires_at > ?"
            ),
            extend: format!(
                "UPDATE {t} SET expires_at = ? \
                 WHERE namespace = ? AND id = ? AND token = ? AND state = {IN_FLIGHT} AND expires_at > ?"
            ),
            purge: format!("DELETE FROM {t} WHERE expires_at <= ? ORDER BY expires_at LIMIT ?"),
        }
    }
}

impl fmt::Debug for MySqlStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MySqlStore")
            .field("table", &self.sql.table)
            .field("command_timeout", &self.command_timeout)
            .field("pool_size", &self.pool.size())
            .finish_non_exhaustive()
    }
}

/// Builds a [`MySqlStore`] from a URL; see [`MySqlStore::builder`].
#[derive(Clone)]
#[must_use]
pub struct MySqlStoreBuilder {
    url: String,
    settings: SqlSettings,
}

impl fmt::Debug for MySqlStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may hold a password: never printed.
        f.debug_struct("MySqlStoreBuilder")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl MySqlStoreBuilder {
    /// The table's name (default [`DEFAULT_TABLE`](super::DEFAULT_TABLE)); checked by
    /// [`connect`](Self::connect) to be a plain identifier.
    pub fn table(mut self, name: impl Into<String>) -> Self {
        self.settings.table = name.into();
        self
    }

    /// How long opening a connection may take, the pool's acquire timeout
    /// (default [`MySqlStore::DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.settings.connect_timeout = timeout;
        self
    }

    /// How long one store operation may take, waiting for a pooled
    /// connection included (default [`MySqlStore::DEFAULT_COMMAND_TIMEOUT`]).
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.settings.command_timeout = timeout;
        self
    }

    /// The pool's maximum number of connections (default 10).
    pub fn max_connections(mut self, max: u32) -> Self {
        self.settings.max_connections = max.max(1);
        self
    }

    /// Opens the pool and one connection to check that the database answers.
    /// Does not create the table: call [`MySqlStore::migrate`].
    ///
    /// # Errors
    ///
    /// [`OpenError::Config`] for a bad URL or table name,
    /// [`OpenError::Store`] when the database cannot be reached in time.
    pub async fn connect(self) -> Result<MySqlStore, OpenError> {
        validate_table(&self.settings.table)?;
        let url = match self.url.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("mariadb") => {
                format!("mysql://{rest}")
            }
            _ => self.url.clone(),
        };
        let options = MySqlConnectOptions::from_str(&url).map_err(|_| ConfigError::Invalid {
            what: "mysql URL",
            reason: "not a URL sqlx accepts (mysql://user:password@host:port/database)",
        })?;
        let lock_wait = self.settings.command_timeout.as_secs().max(1);
        let pool = MySqlPoolOptions::new()
            .max_connections(self.settings.max_connections)
            .acquire_timeout(self.settings.connect_timeout)
            .after_connect(move |conn, _| {
                async move {
                    sqlx::query(&format!(
                        "SET SESSION innodb_lock_wait_timeout = {lock_wait}"
                    ))
                    .execute(&mut *conn)
                    .await?;
                    sqlx::query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                        .execute(&mut *conn)
                        .await?;
                    Ok(())
                }
                .boxed()
            })
            .connect_with(options);
        let pool = match tokio::time::timeout(self.settings.connect_timeout, pool).await {
            Ok(pool) => pool.map_err(super::store_error)?,
            Err(_) => return Err(StoreError::Timeout.into()),
        };
        Ok(MySqlStore {
            pool,
            sql: Arc::new(Statements::new(&self.settings.table)),
            command_timeout: self.settings.command_timeout,
        })
    }
}

impl MySqlStore {
    /// Default of [`MySqlStoreBuilder::connect_timeout`]: 5 seconds.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = DEFAULT_CONNECT_TIMEOUT;
    /// Default of [`MySqlStoreBuilder::command_timeout`]: 2 seconds.
    pub const DEFAULT_COMMAND_TIMEOUT: Duration = DEFAULT_COMMAND_TIMEOUT;

    /// A builder for a store on the database at `url`
    /// (`mysql://user:password@host:port/database`; `mariadb://` is accepted
    /// as a synonym).
    pub fn builder(url: &str) -> MySqlStoreBuilder {
        MySqlStoreBuilder {
            url: url.to_owned(),
            settings: SqlSettings::new(10),
        }
    }

    /// Connects with the defaults; see [`builder`](Self::builder).
    ///
    /// # Errors
    ///
    /// As [`MySqlStoreBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self, OpenError> {
        Self::builder(url).connect().await
    }

    /// A store on an existing pool, with the default table and command
    /// timeout. The pool's own settings (acquire timeout, size, session
    /// variables) apply.
    #[must_use]
    pub fn new(pool: MySqlPool) -> Self {
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
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// The table's name.
    #[must_use]
    pub fn table(&self) -> &str {
        &self.sql.table
    }

    /// Creates the table (InnoDB, with its index) if it does not exist.
    /// Idempotent, and safe to run from several instances at once.
    ///
    /// # Errors
    ///
    /// [`StoreError`] when the database cannot answer or refuses (no
    /// `CREATE` privilege).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let table = &self.sql.table;
        let create = format!(
            "CREATE TABLE IF NOT EXISTS `{table}` (\
             namespace VARBINARY(128) NOT NULL, \
             id VARBINARY(512) NOT NULL, \
             state TINYINT NOT NULL, \
             token CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL, \
             expires_at BIGINT NOT NULL, \
             PRIMARY KEY (namespace, id), \
             KEY `{table}_expires_at` (expires_at)\
             ) ENGINE=InnoDB"
        );
        within(
            self.command_timeout.max(Duration::from_secs(10)),
            sqlx::query(&create).execute(&self.pool),
        )
        .await
        .map(drop)
    }

    /// Deletes every row that had expired when called, `batch` rows per
    /// statement (so no statement holds many locks), and returns how many it
    /// deleted.
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
        PurgeTask::spawn(interval, "mysql", move || {
            let store = store.clone();
            async move { store.purge_expired(DEFAULT_PURGE_BATCH).await }
        })
    }

    /// One claim transaction: `(state, token, expires_at)` as it left the row.
    async fn claim_once(
        &self,
        key: &RowKey,
        token: &str,
        until: i64,
        now: i64,
    ) -> Result<(i8, Vec<u8>, i64), sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(&self.sql.claim)
            .bind(&key.namespace)
            .bind(&key.id)
            .bind(token)
            .bind(until)
            .bind(now)
            .bind(now)
            .bind(token)
            .bind(now)
            .bind(until)
            .execute(&mut *tx)
            .await?;
        let row = sqlx::query(&self.sql.read)
            .bind(&key.namespace)
            .bind(&key.id)
            .fetch_one(&mut *tx)
            .await?;
        // The token column is `ascii_bin`, which MySQL reports as binary.
        let state = (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
        tx.commit().await?;
        Ok(state)
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
        let mut query = sqlx::query(statement);
        if let Some(until) = until {
            query = query.bind(until);
        }
        let query = query
            .bind(&key.namespace)
            .bind(&key.id)
            .bind(token.to_hex())
            .bind(now);
        let done = within(self.command_timeout, query.execute(&self.pool)).await?;
        Ok(if done.rows_affected() > 0 {
            Transition::Applied
        } else {
            Transition::Stale
        })
    }
}

/// Whether `error` is InnoDB's deadlock (SQLSTATE 40001, error 1213).
fn is_deadlock(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(db) => db.code().as_deref() == Some("40001"),
        _ => false,
    }
}

#[async_trait::async_trait]
impl DedupStore for MySqlStore {
    async fn claim(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        let row_key = RowKey::new(key);
        let mine = token.to_hex();
        let (now, (state, held, expires_at)) = within(self.command_timeout, async {
            let mut attempts = 0;
            loop {
                let now = now_ms();
                match self
                    .claim_once(&row_key, &mine, deadline_ms(now, lease), now)
                    .await
                {
                    Err(error) if is_deadlock(&error) && attempts < DEADLOCK_RETRIES => {
                        attempts += 1;
                    }
                    result => return result.map(|row| (now, row)),
                }
            }
        })
        .await?;
        Ok(match i16::from(state) {
            IN_FLIGHT if held == mine.as_bytes() => Claim::Claimed,
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
