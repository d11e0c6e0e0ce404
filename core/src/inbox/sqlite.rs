//! The SQLite [`Inbox`](super::Inbox): the embedded default.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqliteSynchronous};

use super::sql::schema::schema_check;
use super::sql::{Dialect, InboxStatements, SqlInboxBuilder, returning_ops, sql_inbox};
use super::{ClaimToken, InboxError, OpenError, Transition};
use crate::dedup::sql::within;

const DIALECT: Dialect = Dialect {
    param: sqlite_param,
    now: "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
    int: "INTEGER",
    empty_blob: "X''",
    quote: '"',
    lock: "",
    key_select: "event_key",
    by_key: "",
    reap_in_lease: false,
    complete_many: sqlite_complete_many,
    search: super::sql::search::SearchSql::Sqlite,
};

/// The head of the batch completion: the pairs follow as `VALUES` rows.
fn sqlite_complete_many(t: &str, now: &str, leased: i64, completed: i64) -> String {
    format!(
        "UPDATE {t} SET state = {completed}, token = NULL, lease_until = NULL, \
         updated_at = {now} WHERE state = {leased} AND (event_key, token) IN (VALUES "
    )
}

/// At most this many pairs per statement (two parameters each, far below
/// SQLite's limit of 32,766).
const COMPLETE_CHUNK: usize = 500;

/// The current minute of the database's clock (minutes since the epoch).
const ACTIVITY_MINUTE: &str =
    "(CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) / 60000)";

fn sqlite_param(n: usize) -> String {
    format!("?{n}")
}

/// An [`Inbox`](super::Inbox) in an SQLite file, for the processes of one host
/// (never on a network file system).
///
/// The file is opened in WAL mode with `synchronous = FULL`: an accepted
/// event is on disk when [`accept`](super::Inbox::accept) returns. A lease is
/// one `UPDATE … WHERE event_key IN (<expired leases by (state, lease_until),
/// then due pending rows by (state, due_at), up to n>) RETURNING …` (each
/// part one index range in its order: a lease costs the same whatever the
/// backlog), which SQLite runs under its database write lock: two workers
/// never lease the same event. `sqlite::memory:` works with a single connection, for tests.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use webhooks_core::inbox::SqliteInbox;
///
/// let path = std::env::temp_dir().join(format!("inbox-doc-{}.db", std::process::id()));
/// let inbox = SqliteInbox::builder(&format!("sqlite://{}", path.display())).connect().await?;
/// inbox.migrate().await?;
/// # drop(inbox); let _ = std::fs::remove_file(&path); Ok(()) }
/// ```
#[derive(Clone)]
pub struct SqliteInbox {
    pool: SqlitePool,
    sql: Arc<InboxStatements>,
    command_timeout: Duration,
}

schema_check!(SqliteInbox);
sql_inbox!(SqliteInbox, SqlitePool, sqlx::Sqlite);
returning_ops!(SqliteInbox);

impl SqliteInbox {
    /// The batch completion: one statement per [`COMPLETE_CHUNK`] pairs.
    async fn complete_events(
        &self,
        done: &[(&str, ClaimToken)],
    ) -> Result<Vec<Transition>, sqlx::Error> {
        let distinct: HashSet<&str> = done.iter().map(|(key, _)| *key).collect();
        if distinct.len() < done.len() {
            // A key twice: the statement cannot tell which pair applied.
            let mut out = Vec::with_capacity(done.len());
            for (key, token) in done {
                let applied = sqlx::query(&self.sql.complete)
                    .bind(*key)
                    .bind(token.to_hex())
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                out.push(if applied > 0 {
                    Transition::Applied
                } else {
                    Transition::Stale
                });
            }
            return Ok(out);
        }
        let mut out = Vec::with_capacity(done.len());
        for chunk in done.chunks(COMPLETE_CHUNK) {
            let mut statement = self.sql.complete_many.clone();
            for i in 0..chunk.len() {
                if i > 0 {
                    statement.push_str(", ");
                }
                statement.push_str(&format!("(?{}, ?{})", 2 * i + 1, 2 * i + 2));
            }
            statement.push_str(") RETURNING event_key");
            let mut query = sqlx::query_as::<_, (String,)>(&statement);
            for (key, token) in chunk {
                query = query.bind(*key).bind(token.to_hex());
            }
            let applied: HashSet<String> = query
                .fetch_all(&self.pool)
                .await?
                .into_iter()
                .map(|(key,)| key)
                .collect();
            out.extend(chunk.iter().map(|(key, _)| {
                if applied.contains(*key) {
                    Transition::Applied
                } else {
                    Transition::Stale
                }
            }));
        }
        Ok(out)
    }

    /// A builder for an inbox in the file named by `url` (`sqlite://path.db`,
    /// `sqlite:path.db`, `sqlite::memory:`), created if missing.
    pub fn builder(url: &str) -> SqlInboxBuilder<Self> {
        SqlInboxBuilder::new(url, 4)
    }

    /// Opens with the defaults; see [`builder`](Self::builder).
    ///
    /// # Errors
    ///
    /// As [`SqlInboxBuilder::connect`](SqlInboxBuilder#method.connect-2).
    pub async fn connect(url: &str) -> Result<Self, OpenError> {
        Self::builder(url).connect().await
    }

    /// An inbox on an existing pool (open it in WAL mode with a busy timeout),
    /// with the default table and a 2 s command timeout.
    #[must_use]
    pub fn new(pool: SqlitePool) -> Self {
        Self::from_parts(pool, super::DEFAULT_INBOX_TABLE, Duration::from_secs(2))
    }

    fn from_parts(pool: SqlitePool, table: &str, command_timeout: Duration) -> Self {
        Self {
            pool,
            sql: Arc::new(InboxStatements::new(table, &DIALECT)),
            command_timeout,
        }
    }

    /// Creates the table and its indexes if missing, the control table
    /// (`<table>_control`, the pause flag) with its one row, and the
    /// per-minute activity table (`<table>_activity`) with the two triggers
    /// that fill it (see [`activity`](super::activity)). Idempotent.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the file cannot be written.
    pub async fn migrate(&self) -> Result<(), InboxError> {
        let table = &self.sql.table;
        let t = &self.sql.quoted;
        let c = &self.sql.control;
        let statements = [
            format!(
                "CREATE TABLE IF NOT EXISTS {t} (\
                 event_key TEXT NOT NULL PRIMARY KEY, \
                 scheme TEXT NOT NULL, \
                 delivery_id TEXT, \
                 event_type TEXT, \
                 matched_key TEXT NOT NULL, \
                 headers TEXT NOT NULL, \
                 body BLOB NOT NULL, \
                 received_at INTEGER NOT NULL, \
                 signed_at INTEGER, \
                 state INTEGER NOT NULL, \
                 attempts INTEGER NOT NULL, \
                 due_at INTEGER NOT NULL, \
                 token TEXT, \
                 lease_until INTEGER, \
                 last_error TEXT, \
                 updated_at INTEGER NOT NULL)"
            ),
            format!("CREATE INDEX IF NOT EXISTS \"{table}_due\" ON {t} (state, due_at)"),
            format!("CREATE INDEX IF NOT EXISTS \"{table}_lease\" ON {t} (state, lease_until)"),
            format!(
                "CREATE INDEX IF NOT EXISTS \"{table}_received\" ON {t} (state, received_at, event_key)"
            ),
            format!("CREATE INDEX IF NOT EXISTS \"{table}_updated\" ON {t} (state, updated_at)"),
            format!(
                "CREATE TABLE IF NOT EXISTS {c} (id INTEGER NOT NULL PRIMARY KEY, \
                 paused INTEGER NOT NULL, updated_at INTEGER NOT NULL)"
            ),
            format!(
                "INSERT INTO {c} (id, paused, updated_at) VALUES (1, 0, {now}) \
                 ON CONFLICT (id) DO NOTHING",
                now = DIALECT.now
            ),
        ];
        let activity = self.activity_migration();
        let attempts = super::sql::attempts::create(
            &self.sql,
            &super::sql::attempts::Types {
                key: "TEXT",
                int: "INTEGER",
                short: "TEXT",
                text: "TEXT",
            },
        );
        within(self.command_timeout.max(Duration::from_secs(10)), async {
            let actions = super::sql::actions::create_sqlite(&self.sql);
            let gates = super::sql::gates::create(&self.sql);
            for statement in statements
                .iter()
                .chain(&activity)
                .chain(&attempts)
                .chain(&actions)
                .chain(&gates)
            {
                sqlx::query(statement).execute(&self.pool).await?;
            }
            Ok(())
        })
        .await?;
        Ok(())
    }
}

impl SqlInboxBuilder<SqliteInbox> {
    /// Opens (creating if missing) the file in WAL mode, `synchronous = FULL`,
    /// Opens (creating if missing) the file in WAL mode, `synchronous = FULL`,
    /// with a busy timeout of the command timeout. Does not create the table:
    /// call [`SqliteInbox::migrate`].
    ///
    /// When the table exists, checks its schema: a table of an earlier
    /// version (without the control or activity table that `migrate()` now
    /// adds, on which accepts would succeed while every lease fails) is
    /// brought up to date by running [`SqliteInbox::migrate`] (idempotent,
    /// additive). An empty database is left alone.
    ///
    /// # Errors
    ///
    /// [`OpenError::Config`] for a bad URL or table name, [`OpenError::Store`]
    /// when the file cannot be opened in time; also when the table is from an earlier version and
    /// `migrate()` failed (a read-only file: the error names `migrate()` and what
    /// is missing), or when the table lacks columns this version reads.
    pub async fn connect(self) -> Result<SqliteInbox, OpenError> {
        self.validate()?;
        let options: SqliteConnectOptions = self.settings.connect_options(
            &self.url,
            "sqlite URL",
            "not a URL sqlx accepts (sqlite://path/to/file.db)",
        )?;
        let in_memory = self.url.contains(":memory:") || self.url.contains("mode=memory");
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(self.settings.command_timeout);
        let mut pool = self.settings.pool_options();
        if in_memory {
            pool = pool
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None);
        }
        let pool = within(self.settings.connect_timeout, pool.connect_with(options))
            .await
            .map_err(InboxError::from)?;
        let inbox =
            SqliteInbox::from_parts(pool, &self.settings.table, self.settings.command_timeout);
        inbox.check_schema().await?;
        Ok(inbox)
    }
}

impl SqliteInbox {
    /// The activity table and its triggers: an `AFTER INSERT` counting
    /// accepted events, an `AFTER UPDATE OF state` counting completions and
    /// failures, each one upsert in the statement that fired it. SQLite
    /// has one writer at a time: one slot.
    fn activity_migration(&self) -> [String; 3] {
        let table = &self.sql.table;
        let t = &self.sql.quoted;
        let a = super::sql::activity_table(&self.sql);
        let upsert = |kind: &str| {
            format!(
                "INSERT INTO {a} (minute, kind, slot, n) VALUES ({ACTIVITY_MINUTE}, {kind}, 0, 1) \
                 ON CONFLICT (minute, kind, slot) DO UPDATE SET n = {a}.n + 1"
            )
        };
        [
            format!(
                "CREATE TABLE IF NOT EXISTS {a} (minute INTEGER NOT NULL, kind INTEGER NOT NULL, \
                 slot INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (minute, kind, slot))"
            ),
            format!(
                "CREATE TRIGGER IF NOT EXISTS \"{table}_act_ins\" AFTER INSERT ON {t} \
                 FOR EACH ROW BEGIN {}; END",
                upsert("1")
            ),
            format!(
                "CREATE TRIGGER IF NOT EXISTS \"{table}_act_upd\" AFTER UPDATE OF state ON {t} \
                 FOR EACH ROW WHEN {} BEGIN {}; END",
                super::sql::ACTIVITY_FAILED_OR_DONE,
                upsert("CASE NEW.state WHEN 2 THEN 2 ELSE 3 END")
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::SqliteInbox;
    use crate::inbox::ClaimToken;

    /// A lease over a backlog reads two index ranges in their order: no
    /// scan of the inbox and no sort of its rows (the lease that asked for
    /// `pending OR taken over … ORDER BY due_at` read every due row through
    /// both indexes and sorted them in a temporary B-tree).
    #[tokio::test]
    async fn lease_plan_reads_index_ranges() {
        let inbox = SqliteInbox::connect("sqlite::memory:").await.unwrap();
        inbox.migrate().await.unwrap();
        let t = &inbox.sql.quoted;
        let backlog = format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000) \
             INSERT INTO {t} (event_key, scheme, matched_key, headers, body, received_at, \
             state, attempts, due_at, updated_at, lease_until) \
             SELECT 'k' || i, 'test', 'm', '', X'', i, i % 5 = 0, i % 5 = 0, i, i, \
             CASE WHEN i % 5 = 0 THEN 4000000000000 + i END FROM n"
        );
        sqlx::query(&backlog).execute(inbox.pool()).await.unwrap();
        sqlx::query("ANALYZE").execute(inbox.pool()).await.unwrap();
        let plan: Vec<(i64, i64, i64, String)> =
            sqlx::query_as(&format!("EXPLAIN QUERY PLAN {}", inbox.sql.lease))
                .bind(ClaimToken::random().to_hex())
                .bind(60_000_i64)
                .bind(5_i64)
                .bind(8_i64)
                .fetch_all(inbox.pool())
                .await
                .unwrap();
        let table = &inbox.sql.table;
        let details: Vec<&str> = plan.iter().map(|(.., detail)| detail.as_str()).collect();
        let whole = details.join("\n");
        assert!(
            !details.iter().any(|d| d.contains("MULTI-INDEX OR")),
            "{whole}"
        );
        assert!(
            !details
                .iter()
                .any(|d| *d == format!("SCAN {table}") || d.starts_with(&format!("SCAN {table} "))),
            "{whole}"
        );
        for index in ["due", "lease"] {
            assert!(
                details
                    .iter()
                    .any(|d| d.starts_with(&format!("SEARCH {table} USING INDEX {table}_{index} "))),
                "{whole}"
            );
        }
    }
}
