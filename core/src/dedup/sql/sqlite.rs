//! The SQLite [`DedupStore`](crate::dedup::DedupStore).

use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool};

use super::{IN_FLIGHT, Statements, claim_returning, purgeable, sql_store, within};
use crate::dedup::StoreError;
use crate::dedup::url::OpenError;

sql_store! {
    /// A [`DedupStore`](crate::dedup::DedupStore) in an SQLite file: durable across restarts, shared by
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
    pub struct SqliteStore {
        pool: SqlitePool,
        claim: String,
        statements: statements,
        backend: "sqlite",
    }

    /// Builds a [`SqliteStore`] from a URL; see [`SqliteStore::builder`].
    #[derive(Debug)]
    pub struct SqliteStoreBuilder {
        max_connections: 4,
        command_timeout_secs: 30,
        debug: derived,
    }

    /// A builder for a store in the file named by `url`
    /// (`sqlite://relative/or/absolute/path.db`, `sqlite:path.db`, or
    /// `sqlite::memory:`).
    fn builder;

    /// Opens with the defaults; see [`builder`](Self::builder).
    ///
    /// # Errors
    ///
    /// As [`SqliteStoreBuilder::connect`].
    fn connect;

    /// A store on an existing pool, with the default table and command
    /// timeout. Open that pool in WAL mode with a busy timeout.
    fn new;

    /// How long opening the file, or waiting for the connection while other
    /// operations use it, may take: the pool's acquire timeout (default
    /// [`SqliteStore::DEFAULT_CONNECT_TIMEOUT`]).
    fn connect_timeout;

    /// How long one statement may take once it has the connection, waiting
    /// for the write lock held by another connection or process (the busy
    /// timeout) included (default [`SqliteStore::DEFAULT_COMMAND_TIMEOUT`],
    /// 30 s). The wait for the connection is bounded by the connect timeout.
    ///
    /// Why 30 s and not the 2 s of the networked stores: an embedded
    /// database has no server to hang, so this is almost all lock waiting,
    /// and the pooled connections of a burst wait for the write lock here,
    /// retried by SQLite's busy handler by sleeping, not in order. On a
    /// starved CPU a burst of hundreds of concurrent deliveries saw one
    /// operation in a thousand wait past 2 s (a 503, and a completion that
    /// had to be retried); 30 s holds the store suite's storm on a loaded
    /// 2-core machine. Lower it only if a 503 is better for you than a slow
    /// answer.
    fn command_timeout;

    /// The pool's maximum number of connections (default 4). SQLite has one
    /// writer at a time and every operation writes, so the connections take
    /// turns at its write lock (waiting at most the busy timeout, the command
    /// timeout); more connections still overlap the rest of each operation,
    /// which on a loaded machine is most of it (`store_bench`: 3 to 8 times
    /// the claims per second of a single connection). With `1`, operations
    /// only queue for the connection (in order, within the queue timeout) and
    /// never wait for the lock inside SQLite, unless another process writes
    /// the same file.
    fn max_connections;

    /// Deletes every row that had expired when called, `batch` rows per
    /// statement (so that no statement holds the write lock long), and
    /// returns how many it deleted.
    ///
    /// # Errors
    ///
    /// [`StoreError`] when a statement fails; rows deleted before stay deleted.
    fn purge_expired;
}

claim_returning!(SqliteStore, sqlx::Sqlite, i64);

/// The host's clock in epoch milliseconds, read by SQLite: one value within
/// a statement (`'now'` is stable within one step).
const NOW: &str = "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)";

fn statements(table: &str) -> Statements {
    let t = format!("\"{table}\"");
    let claim = format!(
        "INSERT INTO {t} AS d (namespace, id, state, token, expires_at) \
         VALUES (?1, ?2, {IN_FLIGHT}, ?3, {NOW} + ?4) \
         ON CONFLICT (namespace, id) DO UPDATE SET \
         state = CASE WHEN d.expires_at <= {NOW} THEN {IN_FLIGHT} ELSE d.state END, \
         token = CASE WHEN d.expires_at <= {NOW} THEN excluded.token ELSE d.token END, \
         expires_at = CASE WHEN d.expires_at <= {NOW} THEN excluded.expires_at ELSE d.expires_at END \
         RETURNING state, token, expires_at, {NOW}"
    );
    let purge = format!(
        "DELETE FROM {t} WHERE rowid IN \
         (SELECT rowid FROM {t} WHERE {} LIMIT ?1)",
        purgeable(NOW)
    );
    Statements::new(table, &t, |n| format!("?{n}"), NOW, claim, purge)
}

impl SqliteStoreBuilder {
    /// Opens (creating if missing) the file in WAL mode.
    /// Does not create the table: call [`SqliteStore::migrate`].
    ///
    /// # Errors
    ///
    /// [`OpenError::Config`] for a bad URL or table name,
    /// [`OpenError::Store`] when the file cannot be opened in time.
    pub async fn connect(self) -> Result<SqliteStore, OpenError> {
        let options: SqliteConnectOptions = self.settings.connect_options(
            &self.url,
            "sqlite URL",
            "not a URL sqlx accepts (sqlite://path/to/file.db)",
        )?;
        let in_memory = self.url.contains(":memory:") || self.url.contains("mode=memory");
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(self.settings.command_timeout);
        let mut pool = self.settings.pool_options();
        if in_memory {
            // The database lives as long as one connection does.
            pool = pool
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None);
        }
        self.open(pool.connect_with(options)).await
    }
}

impl SqliteStore {
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
}
