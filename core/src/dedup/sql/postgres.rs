//! The PostgreSQL [`DedupStore`].

use std::fmt;
use std::str::FromStr as _;
use std::time::Duration;

use sqlx::Row as _;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::{
    COMPLETED, DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_PURGE_BATCH, IN_FLIGHT,
    PurgeTask, RowKey, SqlSettings, deadline_ms, now_ms, remaining, validate_table, within,
};
use crate::ConfigError;
use crate::dedup::url::OpenError;
use crate::dedup::{Claim, ClaimToken, DedupStore, StoreError, Transition};

/// A [`DedupStore`] in a PostgreSQL table, shared by every instance that
/// uses the same database and table.
///
/// Claim is one statement, atomic under any concurrency:
///
/// ```sql
/// INSERT INTO t AS d (namespace, id, state, token, expires_at) VALUES ($1, $2, 1, $3, $4)
/// ON CONFLICT (namespace, id) DO UPDATE SET
///   state      = CASE WHEN d.expires_at <= $5 THEN 1 ELSE d.state END,
///   token      = CASE WHEN d.expires_at <= $5 THEN excluded.token ELSE d.token END,
///   expires_at = CASE WHEN d.expires_at <= $5 THEN excluded.expires_at ELSE d.expires_at END
/// RETURNING state, token, expires_at
/// ```
///
/// A new key is inserted; a live row is locked and written back unchanged;
/// a dead one (lease or retention over) is taken over. Either way the
/// statement returns the row as it now is, and the caller holds the claim
/// exactly when the returned token is its own. (Answering a duplicate writes
/// a row version, a cost paid only by duplicates.) `complete`, `release` and
/// `extend` are `UPDATE` / `DELETE` statements that match the token, the
/// in-flight state and an unexpired lease. See the [module docs](crate::dedup::sql)
/// for the table, the clock and the timeouts; `command_timeout` is also set
/// as the session's `statement_timeout` (a startup option: behind PgBouncer,
/// list `options` in its `ignore_startup_parameters`).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use webhooks_core::dedup::PostgresStore;
///
/// let store = PostgresStore::builder("postgres://app@db.internal/app")
///     .table("webhooks_dedup")
///     .command_timeout(Duration::from_secs(1))
///     .connect()
///     .await?;
/// store.migrate().await?;
/// let _purge = store.spawn_purge(Duration::from_secs(3600));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresStore {
    pool: PgPool,
    sql: std::sync::Arc<Statements>,
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
                 VALUES ($1, $2, {IN_FLIGHT}, $3, $4) \
                 ON CONFLICT (namespace, id) DO UPDATE SET \
                 state = CASE WHEN d.expires_at <= $5 THEN {IN_FLIGHT} ELSE d.state END, \
                 token = CASE WHEN d.expires_at <= $5 THEN excluded.token ELSE d.token END, \
                 expires_at = CASE WHEN d.expires_at <= $5 THEN excluded.expires_at ELSE d.expires_at END \
                 RETURNING state, token, expires_at"
            ),
            complete: format!(
                "UPDATE {t} SET state = {COMPLETED}, expires_at = $4 \
                 WHERE namespace = $1 AND id = $2 AND token = $3 AND state = {IN_FLIGHT} AND expires_at > $5"
            ),
            release: format!(
                "DELETE FROM {t} \
                 WHERE namespace = $1 AND id = $2 AND token = $3 AND state = {IN_FLIGHT} AND expires_at > $4"
            ),
            extend: format!(
                "UPDATE {t} SET expires_at = $4 \
                 WHERE namespace = $1 AND id = $2 AND token = $3 AND state = {IN_FLIGHT} AND expires_at > $5"
            ),
            purge: format!(
                "DELETE FROM {t} WHERE (namespace, id) IN \
                 (SELECT namespace, id FROM {t} WHERE expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED) \
                 AND expires_at <= $1"
            ),
        }
    }
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("table", &self.sql.table)
            .field("command_timeout", &self.command_timeout)
            .field("pool_size", &self.pool.size())
            .finish_non_exhaustive()
    }
}

/// Builds a [`PostgresStore`] from a URL; see [`PostgresStore::builder`].
#[derive(Clone)]
#[must_use]
pub struct PostgresStoreBuilder {
    url: String,
    settings: SqlSettings,
}

impl fmt::Debug for PostgresStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may hold a password: never printed.
        f.debug_struct("PostgresStoreBuilder")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl PostgresStoreBuilder {
    /// The table's name (default [`DEFAULT_TABLE`](super::DEFAULT_TABLE)); checked by
    /// [`connect`](Self::connect) to be a plain identifier.
    pub fn table(mut self, name: impl Into<String>) -> Self {
        self.settings.table = name.into();
        self
    }

    /// How long opening a connection may take, the pool's acquire timeout
    /// (default [`PostgresStore::DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.settings.connect_timeout = timeout;
        self
    }

    /// How long one store operation may take, waiting for a pooled
    /// connection included (default [`PostgresStore::DEFAULT_COMMAND_TIMEOUT`]).
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
    /// Does not create the table: call [`PostgresStore::migrate`].
    ///
    /// # Errors
    ///
    /// [`OpenError::Config`] for a bad URL or table name,
    /// [`OpenError::Store`] when the database cannot be reached in time.
    pub async fn connect(self) -> Result<PostgresStore, OpenError> {
        validate_table(&self.settings.table)?;
        let options = PgConnectOptions::from_str(&self.url).map_err(|_| ConfigError::Invalid {
            what: "postgres URL",
            reason: "not a URL sqlx accepts (postgres://user:password@host:port/database)",
        })?;
        let options = options.options([(
            "statement_timeout",
            self.settings.command_timeout.as_millis().max(1),
        )]);
        let pool = PgPoolOptions::new()
            .max_connections(self.settings.max_connections)
            .acquire_timeout(self.settings.connect_timeout)
            .connect_with(options);
        let pool = match tokio::time::timeout(self.settings.connect_timeout, pool).await {
            Ok(pool) => pool.map_err(super::store_error)?,
            Err(_) => return Err(StoreError::Timeout.into()),
        };
        Ok(PostgresStore {
            pool,
            sql: std::sync::Arc::new(Statements::new(&self.settings.table)),
            command_timeout: self.settings.command_timeout,
        })
    }
}

impl PostgresStore {
    /// Default of [`PostgresStoreBuilder::connect_timeout`]: 5 seconds.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = DEFAULT_CONNECT_TIMEOUT;
    /// Default of [`PostgresStoreBuilder::command_timeout`]: 2 seconds.
    pub const DEFAULT_COMMAND_TIMEOUT: Duration = DEFAULT_COMMAND_TIMEOUT;

    /// A builder for a store on the database at `url`
    /// (`postgres://user:password@host:port/database`).
    pub fn builder(url: &str) -> PostgresStoreBuilder {
        PostgresStoreBuilder {
            url: url.to_owned(),
            settings: SqlSettings::new(10),
        }
    }

    /// Connects with the defaults; see [`builder`](Self::builder).
    ///
    /// # Errors
    ///
    /// As [`PostgresStoreBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self, OpenError> {
        Self::builder(url).connect().await
    }

    /// A store on an existing pool, with the default table and command
    /// timeout. The pool's own settings (acquire timeout, size) apply.
    #[must_use]
    pub fn new(pool: PgPool) -> Self {
        Self {
            pool,
            sql: std::sync::Arc::new(Statements::new(super::DEFAULT_TABLE)),
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
        self.sql = std::sync::Arc::new(Statements::new(name));
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
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The table's name.
    #[must_use]
    pub fn table(&self) -> &str {
        &self.sql.table
    }

    /// Creates the table and its index if they do not exist. Idempotent, and
    /// safe to run from several instances at once (it holds a transaction-level
    /// advisory lock).
    ///
    /// # Errors
    ///
    /// [`StoreError`] when the database cannot answer or refuses (no
    /// `CREATE` privilege).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let table = &self.sql.table;
        let create = format!(
            "CREATE TABLE IF NOT EXISTS \"{table}\" (\
             namespace TEXT NOT NULL, \
             id TEXT NOT NULL, \
             state SMALLINT NOT NULL, \
             token TEXT NOT NULL, \
             expires_at BIGINT NOT NULL, \
             PRIMARY KEY (namespace, id))"
        );
        let index = format!(
            "CREATE INDEX IF NOT EXISTS \"{table}_expires_at\" ON \"{table}\" (expires_at)"
        );
        let lock_key = format!("webhooks-core dedup migrate {table}");
        within(self.command_timeout.max(Duration::from_secs(10)), async {
            let mut tx = self.pool.begin().await?;
            sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
                .bind(&lock_key)
                .execute(&mut *tx)
                .await?;
            sqlx::query(&create).execute(&mut *tx).await?;
            sqlx::query(&index).execute(&mut *tx).await?;
            tx.commit().await
        })
        .await
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
        let batch = i64::from(batch.max(1));
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
            if deleted < batch.unsigned_abs() {
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
        PurgeTask::spawn(interval, "postgres", move || {
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
            .bind(&key.namespace)
            .bind(&key.id)
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
impl DedupStore for PostgresStore {
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
                .bind(&row_key.namespace)
                .bind(&row_key.id)
                .bind(&mine)
                .bind(deadline_ms(now, lease))
                .bind(now)
                .fetch_one(&self.pool),
        )
        .await?;
        let read = || -> Result<(i16, String, i64), sqlx::Error> {
            Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
        };
        let (state, held, expires_at) = read().map_err(super::store_error)?;
        Ok(match state {
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
