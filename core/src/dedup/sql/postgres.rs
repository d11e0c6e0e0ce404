//! The PostgreSQL [`DedupStore`](crate::dedup::DedupStore).

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool};

use super::{IN_FLIGHT, Statements, claim_returning, purgeable, sql_store, within};
use crate::dedup::StoreError;
use crate::dedup::url::OpenError;

sql_store! {
    /// A [`DedupStore`](crate::dedup::DedupStore) in a PostgreSQL table, shared by every instance that
    /// uses the same database and table.
    ///
    /// Claim is one statement, atomic under any concurrency:
    ///
    /// ```sql
    /// -- now: (EXTRACT(EPOCH FROM statement_timestamp()) * 1000)::BIGINT, the database's clock
    /// INSERT INTO t AS d (namespace, id, state, token, expires_at) VALUES ($1, $2, 1, $3, now + $4)
    /// ON CONFLICT (namespace, id) DO UPDATE SET
    ///   state      = CASE WHEN d.expires_at <= now THEN 1 ELSE d.state END,
    ///   token      = CASE WHEN d.expires_at <= now THEN excluded.token ELSE d.token END,
    ///   expires_at = CASE WHEN d.expires_at <= now THEN excluded.expires_at ELSE d.expires_at END
    /// RETURNING state, token, expires_at, now
    /// ```
    ///
    /// A new key is inserted; a live row is locked and written back unchanged;
    /// a dead one (lease or retention over) is taken over. Either way the
    /// statement returns the row as it now is, and the caller holds the claim
    /// exactly when the returned token is its own. (Answering a duplicate writes
    /// a row version, a cost paid only by duplicates.) `complete`, `release` and
    /// `extend` are `UPDATE` / `DELETE` statements that match the token and the
    /// in-flight state. Every statement reads the database's clock
    /// (`statement_timestamp()`, one value per statement). See the [module docs](crate::dedup::sql)
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
    pub struct PostgresStore {
        pool: PgPool,
        claim: String,
        statements: statements,
        backend: "postgres",
    }

    /// Builds a [`PostgresStore`] from a URL; see [`PostgresStore::builder`].
    pub struct PostgresStoreBuilder {
        max_connections: 10,
        command_timeout_secs: 2,
        debug: redacted,
    }

    /// A builder for a store on the database at `url`
    /// (`postgres://user:password@host:port/database`).
    fn builder;

    /// Connects with the defaults; see [`builder`](Self::builder).
    ///
    /// # Errors
    ///
    /// As [`PostgresStoreBuilder::connect`].
    fn connect;

    /// A store on an existing pool, with the default table and command
    /// timeout. The pool's own settings (acquire timeout, size) apply.
    fn new;

    /// How long getting a connection may take (a free pooled one, or a new
    /// one opened): the pool's acquire timeout (default
    /// [`PostgresStore::DEFAULT_CONNECT_TIMEOUT`]).
    fn connect_timeout;

    /// How long one store operation may take once it has a connection
    /// (default [`PostgresStore::DEFAULT_COMMAND_TIMEOUT`]); the wait for a pooled
    /// connection is bounded by the connect timeout instead, so that a burst
    /// queueing for the pool does not time out statements that would run fast.
    fn command_timeout;

    /// The pool's maximum number of connections (default 10).
    fn max_connections;

    /// Deletes every row that had expired when called, `batch` rows per
    /// statement (so no statement holds many locks), and returns how many it
    /// deleted.
    ///
    /// # Errors
    ///
    /// [`StoreError`] when a statement fails; rows deleted before stay deleted.
    fn purge_expired;
}

claim_returning!(PostgresStore, sqlx::Postgres, i16);

/// The database's clock in epoch milliseconds: the statement's start, one
/// value however often a statement reads it.
const NOW: &str = "(EXTRACT(EPOCH FROM statement_timestamp()) * 1000)::BIGINT";

fn statements(table: &str) -> Statements {
    let t = format!("\"{table}\"");
    let claim = format!(
        "INSERT INTO {t} AS d (namespace, id, state, token, expires_at) \
         VALUES ($1, $2, {IN_FLIGHT}, $3, {NOW} + $4) \
         ON CONFLICT (namespace, id) DO UPDATE SET \
         state = CASE WHEN d.expires_at <= {NOW} THEN {IN_FLIGHT} ELSE d.state END, \
         token = CASE WHEN d.expires_at <= {NOW} THEN excluded.token ELSE d.token END, \
         expires_at = CASE WHEN d.expires_at <= {NOW} THEN excluded.expires_at ELSE d.expires_at END \
         RETURNING state, token, expires_at, {NOW}"
    );
    let dead = purgeable(NOW);
    let purge = format!(
        "DELETE FROM {t} WHERE (namespace, id) IN \
         (SELECT namespace, id FROM {t} WHERE {dead} LIMIT $1 FOR UPDATE SKIP LOCKED) \
         AND {dead}"
    );
    Statements::new(table, &t, |n| format!("${n}"), NOW, claim, purge)
}

impl PostgresStoreBuilder {
    /// Opens the pool and one connection to check that the database answers.
    /// Does not create the table: call [`PostgresStore::migrate`].
    ///
    /// # Errors
    ///
    /// [`OpenError::Config`] for a bad URL or table name,
    /// [`OpenError::Store`] when the database cannot be reached in time.
    pub async fn connect(self) -> Result<PostgresStore, OpenError> {
        let options: PgConnectOptions = self.settings.connect_options(
            &self.url,
            "postgres URL",
            "not a URL sqlx accepts (postgres://user:password@host:port/database)",
        )?;
        let options = options.options([(
            "statement_timeout",
            self.settings.command_timeout.as_millis().max(1),
        )]);
        self.open(self.settings.pool_options().connect_with(options))
            .await
    }
}

impl PostgresStore {
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
}
