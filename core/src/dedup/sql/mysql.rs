//! The MySQL / MariaDB [`DedupStore`](crate::dedup::DedupStore).

use std::time::Duration;

use futures_util::FutureExt as _;
use sqlx::Connection as _;
use sqlx::Row as _;
use sqlx::mysql::{MySql, MySqlConnectOptions, MySqlPool};
use sqlx::pool::PoolConnection;

use super::{ClaimedRow, IN_FLIGHT, RowKey, Statements, purgeable, sql_store, within};
use crate::dedup::StoreError;
use crate::dedup::url::OpenError;

/// How many times a claim is retried after InnoDB chose it as a deadlock
/// victim (possible when many attempts insert one new key at once).
const DEADLOCK_RETRIES: u32 = 5;

sql_store! {
    /// A [`DedupStore`](crate::dedup::DedupStore) in a MySQL (8.0+) or MariaDB (10.3+) InnoDB table,
    /// shared by every instance that uses the same database and table.
    ///
    /// MySQL has no `RETURNING`, and the affected-row count of
    /// `INSERT … ON DUPLICATE KEY UPDATE` cannot tell an insert from an untouched
    /// duplicate under sqlx (which always sets `CLIENT_FOUND_ROWS`: both count 1).
    /// So a claim is one short transaction of two statements on one connection:
    ///
    /// ```sql
    /// -- now: TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) DIV 1000, the database's clock
    /// INSERT INTO t (namespace, id, state, token, expires_at) VALUES (?, ?, 1, :token, now + :lease)
    /// ON DUPLICATE KEY UPDATE
    ///   state      = IF(expires_at <= now, 1, state),
    ///   token      = IF(expires_at <= now, :token, token),
    ///   expires_at = IF(expires_at <= now, now + :lease, expires_at);  -- last: see below
    /// SELECT state, token, expires_at, now FROM t WHERE namespace = ? AND id = ? FOR UPDATE;
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
    /// statements matching the token and the in-flight state; with
    /// `CLIENT_FOUND_ROWS` their affected-row count is the number of rows
    /// matched, which is what they report. Every statement reads the
    /// database's clock (`UTC_TIMESTAMP(6)`, evaluated once per statement and
    /// independent of the session's time zone).
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
    pub struct MySqlStore {
        pool: MySqlPool,
        claim: ClaimStatements,
        statements: statements,
        backend: "mysql",
    }

    /// Builds a [`MySqlStore`] from a URL; see [`MySqlStore::builder`].
    pub struct MySqlStoreBuilder {
        max_connections: 10,
        command_timeout_secs: 2,
        debug: redacted,
    }

    /// A builder for a store on the database at `url`
    /// (`mysql://user:password@host:port/database`; `mariadb://` is accepted
    /// as a synonym).
    fn builder;

    /// Connects with the defaults; see [`builder`](Self::builder).
    ///
    /// # Errors
    ///
    /// As [`MySqlStoreBuilder::connect`].
    fn connect;

    /// A store on an existing pool, with the default table and command
    /// timeout. The pool's own settings (acquire timeout, size, session
    /// variables) apply.
    fn new;

    /// How long getting a connection may take (a free pooled one, or a new
    /// one opened): the pool's acquire timeout (default
    /// [`MySqlStore::DEFAULT_CONNECT_TIMEOUT`]).
    fn connect_timeout;

    /// How long one store operation may take once it has a connection
    /// (default [`MySqlStore::DEFAULT_COMMAND_TIMEOUT`]); the wait for a pooled
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

/// The claim's two statements.
struct ClaimStatements {
    upsert: String,
    read: String,
}

/// The database's clock in epoch milliseconds: UTC (no time zone
/// conversion), one value per statement.
const NOW: &str = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)";

fn statements(table: &str) -> Statements<ClaimStatements> {
    let t = format!("`{table}`");
    let claim = ClaimStatements {
        upsert: format!(
            "INSERT INTO {t} (namespace, id, state, token, expires_at) \
             VALUES (?, ?, {IN_FLIGHT}, ?, {NOW} + ?) \
             ON DUPLICATE KEY UPDATE \
             state = IF(expires_at <= {NOW}, {IN_FLIGHT}, state), \
             token = IF(expires_at <= {NOW}, ?, token), \
             expires_at = IF(expires_at <= {NOW}, {NOW} + ?, expires_at)"
        ),
        read: format!(
            "SELECT state, token, expires_at, {NOW} FROM {t} \
             WHERE namespace = ? AND id = ? FOR UPDATE"
        ),
    };
    let purge = format!(
        "DELETE FROM {t} WHERE {} ORDER BY expires_at LIMIT ?",
        purgeable(NOW)
    );
    Statements::new(table, &t, |_| "?".to_owned(), NOW, claim, purge)
}

impl MySqlStoreBuilder {
    /// Opens the pool and one connection to check that the database answers.
    /// Does not create the table: call [`MySqlStore::migrate`].
    ///
    /// # Errors
    ///
    /// [`OpenError::Config`] for a bad URL or table name,
    /// [`OpenError::Store`] when the database cannot be reached in time.
    pub async fn connect(self) -> Result<MySqlStore, OpenError> {
        let url = match self.url.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("mariadb") => {
                format!("mysql://{rest}")
            }
            _ => self.url.clone(),
        };
        let options: MySqlConnectOptions = self.settings.connect_options(
            &url,
            "mysql URL",
            "not a URL sqlx accepts (mysql://user:password@host:port/database)",
        )?;
        let lock_wait = self.settings.command_timeout.as_secs().max(1);
        let pool = self
            .settings
            .pool_options()
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
        self.open(pool).await
    }
}

impl MySqlStore {
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

    /// The claim, retried when InnoDB picks it as a deadlock victim.
    async fn claim_row(
        &self,
        connection: &mut PoolConnection<MySql>,
        key: &RowKey,
        token: &str,
        lease_ms: i64,
    ) -> Result<ClaimedRow, sqlx::Error> {
        let mut attempts = 0;
        loop {
            match self.claim_once(connection, key, token, lease_ms).await {
                Err(error) if is_deadlock(&error) && attempts < DEADLOCK_RETRIES => {
                    attempts += 1;
                }
                result => return result,
            }
        }
    }

    /// One claim transaction: the row as it left it.
    async fn claim_once(
        &self,
        connection: &mut PoolConnection<MySql>,
        key: &RowKey,
        token: &str,
        lease_ms: i64,
    ) -> Result<ClaimedRow, sqlx::Error> {
        let mut tx = connection.begin().await?;
        sqlx::query(&self.sql.claim.upsert)
            .bind(&key.namespace)
            .bind(&key.id)
            .bind(token)
            .bind(lease_ms)
            .bind(token)
            .bind(lease_ms)
            .execute(&mut *tx)
            .await?;
        let row = sqlx::query(&self.sql.claim.read)
            .bind(&key.namespace)
            .bind(&key.id)
            .fetch_one(&mut *tx)
            .await?;
        // The token column is `ascii_bin`, which MySQL reports as binary.
        let state: i8 = row.try_get(0)?;
        let held: Vec<u8> = row.try_get(1)?;
        let now: i64 = row.try_get(3)?;
        let claimed = ClaimedRow::new(now, state, held == token.as_bytes(), row.try_get(2)?);
        tx.commit().await?;
        Ok(claimed)
    }
}

/// Whether `error` is InnoDB's deadlock (SQLSTATE 40001, error 1213).
fn is_deadlock(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(db) => db.code().as_deref() == Some("40001"),
        _ => false,
    }
}
