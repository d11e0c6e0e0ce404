//! The MySQL / MariaDB [`Inbox`](super::Inbox).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt as _;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool};
use sqlx::{FromRow as _, Row as _};

use super::sql::schema::schema_check;
use super::sql::{Dialect, InboxStatements, LeaseRow, SqlInboxBuilder, leased, sql_inbox};
use super::{Accepted, ClaimToken, InboxError, LeasedEvent, NewEvent, OpenError, Transition};
use crate::dedup::sql::within;

const DIALECT: Dialect = Dialect {
    param: mysql_param,
    now: "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)",
    int: "SIGNED",
    empty_blob: "X''",
    quote: '`',
    lock: " FOR UPDATE SKIP LOCKED",
    key_select: "CAST(event_key AS CHAR)",
    by_key: " FORCE INDEX (PRIMARY)",
    reap_in_lease: false,
    complete_many: mysql_complete_many,
    search: super::sql::search::SearchSql::Mysql,
};

/// The head of the batch completion: the `(?, ?)` pairs follow. MySQL has no
/// `UPDATE … RETURNING`, so the completed rows keep their token: when fewer
/// rows than pairs changed, [`MySqlInbox::complete_events`] reads which
/// pairs did. (A completed row's token is never checked again: every
/// transition requires the leased state.) The primary key is forced: with
/// many pairs the optimizer prefers the `(state, …)` indexes, whose scan
/// locks rows the leases are selecting and deadlocks with them.
fn mysql_complete_many(t: &str, now: &str, leased: i64, completed: i64) -> String {
    format!(
        "UPDATE {t} FORCE INDEX (PRIMARY) SET state = {completed}, lease_until = NULL, \
         updated_at = {now} WHERE state = {leased} AND (event_key, token) IN ("
    )
}

/// At most this many pairs per statement.
const COMPLETE_CHUNK: usize = 500;

/// The lease select's last column, after the leased ones: its part (0
/// expired, 1 pending).
const PART: usize = 10;

/// The current minute of the database's clock (minutes since the epoch).
const ACTIVITY_MINUTE: &str = "(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) DIV 60000)";

fn mysql_param(_: usize) -> String {
    "?".to_owned()
}

/// An [`Inbox`](super::Inbox) in a MySQL (8.0+) or MariaDB (10.6+) InnoDB
/// table, shared by every worker and receiver using it.
///
/// MySQL has no `UPDATE … RETURNING`, so a lease is one short transaction
/// of four round trips:
///
/// ```sql
/// BEGIN;
/// (SELECT 0, <columns> FROM t WHERE <lease expired>
///   ORDER BY lease_until LIMIT ? FOR UPDATE SKIP LOCKED)
/// UNION ALL
/// (SELECT 1, <columns> FROM t WHERE <pending and due>
///   ORDER BY due_at LIMIT ? FOR UPDATE SKIP LOCKED);
/// UPDATE t SET state = 3, … WHERE event_key IN (…);  -- expired on their last attempt, if any
/// UPDATE t SET state = 1, token = ?, lease_until = now + ?, attempts = attempts + 1
///   WHERE event_key IN (…);  -- the takeovers first, then the pending rows
/// COMMIT;
/// ```
///
/// Concurrent workers skip each other's locked rows. Accept is a plain
/// `INSERT`; a duplicate key is [`Accepted::Duplicate`]. Keys are
/// `VARCHAR(255)` in `utf8mb4_bin` (compared byte for byte). The pool's
/// sessions use `READ COMMITTED` and an `innodb_lock_wait_timeout` of the
/// command timeout (whole seconds, at least 1).
///
/// A lease transaction takes several round trips, and InnoDB's locking
/// reads can keep a lock on the record just past the range they scanned
/// (an event another worker holds) until the transaction ends. If the
/// process freezes between those round trips (a handler blocking the
/// runtime's only thread, `SIGSTOP`, a paused VM), that event cannot be
/// taken over until the process wakes or its connection ends: it runs late,
/// never twice. Run workers on a multi-threaded runtime, keep blocking work
/// off it (`spawn_blocking`), and let the server close connections that
/// stop answering (`wait_timeout`, or MariaDB's `idle_transaction_timeout`).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use webhooks_core::inbox::MySqlInbox;
///
/// let inbox = MySqlInbox::builder("mysql://app:secret@db.internal/app").connect().await?;
/// inbox.migrate().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MySqlInbox {
    pool: MySqlPool,
    sql: Arc<InboxStatements>,
    command_timeout: Duration,
}

schema_check!(MySqlInbox);
sql_inbox!(MySqlInbox, MySqlPool, sqlx::MySql);

impl MySqlInbox {
    /// A builder for an inbox on the database at `url`
    /// (`mysql://user:password@host:port/database`, or `mariadb://…`).
    pub fn builder(url: &str) -> SqlInboxBuilder<Self> {
        SqlInboxBuilder::new(url, 10)
    }

    /// Connects with the defaults; see [`builder`](Self::builder).
    ///
    /// # Errors
    ///
    /// As the builder's `connect`.
    pub async fn connect(url: &str) -> Result<Self, OpenError> {
        Self::builder(url).connect().await
    }

    /// An inbox on an existing pool, with the default table and a 2 s
    /// command timeout.
    #[must_use]
    pub fn new(pool: MySqlPool) -> Self {
        Self::from_parts(pool, super::DEFAULT_INBOX_TABLE, Duration::from_secs(2))
    }

    fn from_parts(pool: MySqlPool, table: &str, command_timeout: Duration) -> Self {
        Self {
            pool,
            sql: Arc::new(InboxStatements::new(table, &DIALECT)),
            command_timeout,
        }
    }

    /// Creates the table (InnoDB, utf8mb4, with its indexes) if missing, the
    /// control table (`<table>_control`, the pause flag) with its one row,
    /// and the per-minute activity table (`<table>_activity`) with the two
    /// triggers that fill it (see [`activity`](super::activity)); creating
    /// a trigger needs the `TRIGGER` privilege, and with binary logging on,
    /// `SUPER` or `log_bin_trust_function_creators = 1`. Idempotent.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the database cannot answer or refuses.
    pub async fn migrate(&self) -> Result<(), InboxError> {
        let table = &self.sql.table;
        let create = format!(
            "CREATE TABLE IF NOT EXISTS `{table}` (\
             event_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, \
             scheme VARCHAR(64) NOT NULL, \
             delivery_id TEXT, \
             event_type TEXT, \
             matched_key TEXT NOT NULL, \
             headers MEDIUMTEXT NOT NULL, \
             body LONGBLOB NOT NULL, \
             received_at BIGINT NOT NULL, \
             signed_at BIGINT, \
             state BIGINT NOT NULL, \
             attempts BIGINT NOT NULL, \
             due_at BIGINT NOT NULL, \
             token CHAR(32) CHARACTER SET ascii COLLATE ascii_bin, \
             lease_until BIGINT, \
             last_error TEXT, \
             updated_at BIGINT NOT NULL, \
             PRIMARY KEY (event_key), \
             KEY `{table}_due` (state, due_at), \
             KEY `{table}_lease` (state, lease_until), \
             KEY `{table}_received` (state, received_at, event_key), \
             KEY `{table}_updated` (state, updated_at)\
             ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
        );
        let c = &self.sql.control;
        let control = format!(
            "CREATE TABLE IF NOT EXISTS {c} (id BIGINT NOT NULL, paused BIGINT NOT NULL, \
             updated_at BIGINT NOT NULL, PRIMARY KEY (id)) ENGINE=InnoDB"
        );
        let seed = format!(
            "INSERT IGNORE INTO {c} (id, paused, updated_at) VALUES (1, 0, {})",
            DIALECT.now
        );
        within(self.command_timeout.max(Duration::from_secs(10)), async {
            let attempts = super::sql::attempts::create_mysql(&self.sql);
            let actions = super::sql::actions::create_mysql(&self.sql);
            let [gates, permits] = super::sql::gates::create(&self.sql);
            for statement in [
                &create, &control, &seed, &attempts, &actions, &gates, &permits,
            ] {
                sqlx::query(statement).execute(&self.pool).await?;
            }
            self.migrate_activity().await
        })
        .await?;
        Ok(())
    }

    async fn accept_event(&self, event: &NewEvent) -> Result<Accepted, sqlx::Error> {
        let inserted = sqlx::query(&self.sql.accept)
            .bind(event.stored_key())
            .bind(&event.scheme)
            .bind(&event.delivery_id)
            .bind(&event.event_type)
            .bind(&event.matched_key)
            .bind(super::encode_headers(&event.headers))
            .bind(event.body.as_ref())
            .bind(event.signed_at.and_then(|s| i64::try_from(s).ok()))
            .execute(&self.pool)
            .await;
        match inserted {
            Ok(_) => Ok(Accepted::Stored),
            Err(sqlx::Error::Database(db)) if db.is_unique_violation() => Ok(Accepted::Duplicate),
            Err(other) => Err(other),
        }
    }

    /// The batch completion: one statement per [`COMPLETE_CHUNK`] pairs, and
    /// a read of the completed pairs only when some did not apply.
    async fn complete_events(
        &self,
        done: &[(&str, ClaimToken)],
    ) -> Result<Vec<Transition>, sqlx::Error> {
        let mut out = Vec::with_capacity(done.len());
        for chunk in done.chunks(COMPLETE_CHUNK) {
            let tokens: Vec<String> = chunk.iter().map(|(_, token)| token.to_hex()).collect();
            let pairs = vec!["(?, ?)"; chunk.len()].join(", ");
            let update = format!("{}{pairs})", self.sql.complete_many);
            let mut query = sqlx::query(&update);
            for ((key, _), token) in chunk.iter().zip(&tokens) {
                query = query.bind(*key).bind(token);
            }
            let changed = query.execute(&self.pool).await?.rows_affected();
            if changed == chunk.len() as u64 {
                out.extend(std::iter::repeat_n(Transition::Applied, chunk.len()));
                continue;
            }
            let read = format!(
                "SELECT CAST(event_key AS CHAR), CAST(token AS CHAR) FROM {} WHERE state = {} \
                 AND (event_key, token) IN ({pairs})",
                self.sql.quoted,
                super::sql::COMPLETED
            );
            let mut query = sqlx::query_as::<_, (String, String)>(&read);
            for ((key, _), token) in chunk.iter().zip(&tokens) {
                query = query.bind(*key).bind(token);
            }
            let applied: HashSet<(String, String)> =
                query.fetch_all(&self.pool).await?.into_iter().collect();
            out.extend(chunk.iter().zip(&tokens).map(|((key, _), token)| {
                if applied.contains(&((*key).to_owned(), token.clone())) {
                    Transition::Applied
                } else {
                    Transition::Stale
                }
            }));
        }
        Ok(out)
    }

    async fn lease_events(
        &self,
        token: ClaimToken,
        batch: i64,
        lease_ms: i64,
        max_attempts: i64,
    ) -> Result<Vec<LeasedEvent>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        // One round trip reads both: the expired leases (those on their
        // last attempt are dead-lettered, the others taken over) and the due
        // pending rows, each part up to the batch. Rows other transactions
        // hold are skipped: a plain `UPDATE … WHERE state = 1 AND
        // lease_until <= …` locks its way along an index and deadlocks
        // with completions. Pending rows past the batch's room stay locked
        // (unchanged) until the commit, a few milliseconds.
        let mut found = sqlx::query(&self.sql.lease_select)
            .bind(max_attempts)
            .bind(batch)
            .bind(batch)
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(|row| Ok((row.try_get::<i64, _>(PART)?, LeaseRow::from_row(row)?)))
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        // The takeovers first, each part in its order (a stable sort).
        found.sort_by_key(|(part, _)| *part);
        let room = usize::try_from(batch).unwrap_or(usize::MAX);
        let mut last = Vec::new();
        let mut rows: Vec<LeaseRow> = Vec::with_capacity(room.min(found.len()));
        for (part, row) in found {
            if part == 0 && row.9 >= max_attempts {
                last.push(row);
            } else if rows.len() < room {
                rows.push(row);
            }
        }
        if !last.is_empty() {
            let list = vec!["?"; last.len()].join(", ");
            let update = format!("{}{list})", self.sql.reap_update);
            let mut query = sqlx::query(&update).bind(super::EXPIRED_ON_LAST_ATTEMPT);
            for row in &last {
                query = query.bind(&row.0);
            }
            query.execute(&mut *tx).await?;
        }
        if rows.is_empty() {
            tx.commit().await?;
            return Ok(Vec::new());
        }
        let list = vec!["?"; rows.len()].join(", ");
        let update = format!("{}{list})", self.sql.lease_update);
        let mut query = sqlx::query(&update).bind(token.to_hex()).bind(lease_ms);
        for row in &rows {
            query = query.bind(&row.0);
        }
        query.execute(&mut *tx).await?;
        tx.commit().await?;
        // The rows as the update left them: the attempt counted as the
        // update's `NEXT_ATTEMPT` does (capped at `i32::MAX`).
        Ok(rows
            .into_iter()
            .map(|mut row| {
                row.9 = if row.9 < i64::from(i32::MAX) {
                    row.9 + 1
                } else {
                    row.9
                };
                leased(row, token)
            })
            .collect())
    }
}

impl SqlInboxBuilder<MySqlInbox> {
    /// Opens the pool and one connection. Does not create the table:
    /// call [`MySqlInbox::migrate`].
    ///
    /// When the table exists, checks its schema: a table of an earlier
    /// version (without the control or activity table that `migrate()` now
    /// adds, on which accepts would succeed while every lease fails) is
    /// brought up to date by running [`MySqlInbox::migrate`] (idempotent,
    /// additive). An empty database is left alone.
    ///
    /// # Errors
    ///
    /// [`OpenError::Config`] for a bad URL or table name, [`OpenError::Store`]
    /// when the database cannot be reached in time; also when the table is from an earlier version and
    /// `migrate()` failed (a user that may not create tables or triggers: the error names `migrate()` and what
    /// is missing), or when the table lacks columns this version reads.
    pub async fn connect(self) -> Result<MySqlInbox, OpenError> {
        self.validate()?;
        // sqlx names the scheme `mysql`; MariaDB users may write `mariadb`.
        let url = match self.url.strip_prefix("mariadb:") {
            Some(rest) => format!("mysql:{rest}"),
            None => self.url.clone(),
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
        let pool = within(self.settings.connect_timeout, pool)
            .await
            .map_err(InboxError::from)?;
        let inbox =
            MySqlInbox::from_parts(pool, &self.settings.table, self.settings.command_timeout);
        inbox.check_schema().await?;
        Ok(inbox)
    }
}

impl MySqlInbox {
    /// The activity table and its triggers, each trigger created unless
    /// `information_schema` lists it (MySQL before 8.0.29 has no `CREATE
    /// TRIGGER IF NOT EXISTS`). Each upserts one counter row in the
    /// statement that fired it; the slot is the connection id modulo
    /// [`ACTIVITY_SLOTS`](super::sql::ACTIVITY_SLOTS), so one statement
    /// locks one counter row, and concurrent connections mostly different
    /// ones. Sent as text (`CREATE TRIGGER` cannot be prepared).
    async fn migrate_activity(&self) -> Result<(), sqlx::Error> {
        let table = &self.sql.table;
        let t = &self.sql.quoted;
        let a = super::sql::activity_table(&self.sql);
        let slots = super::sql::ACTIVITY_SLOTS;
        let upsert = |kind: &str| {
            format!(
                "INSERT INTO {a} (minute, kind, slot, n) \
                 VALUES ({ACTIVITY_MINUTE}, {kind}, CONNECTION_ID() % {slots}, 1) \
                 ON DUPLICATE KEY UPDATE n = n + 1"
            )
        };
        sqlx::query(&format!(
            "CREATE TABLE IF NOT EXISTS {a} (minute BIGINT NOT NULL, \
             kind BIGINT NOT NULL, \
             slot BIGINT NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (minute, kind, slot)) \
             ENGINE=InnoDB"
        ))
        .execute(&self.pool)
        .await?;
        let triggers = [
            (
                format!("{table}_act_ins"),
                format!("AFTER INSERT ON {t} FOR EACH ROW {}", upsert("1")),
            ),
            (
                format!("{table}_act_upd"),
                format!(
                    "AFTER UPDATE ON {t} FOR EACH ROW BEGIN IF {} THEN {}; END IF; END",
                    super::sql::ACTIVITY_FAILED_OR_DONE,
                    upsert("IF(NEW.state = 2, 2, 3)")
                ),
            ),
        ];
        for (name, body) in triggers {
            let (exists,): (i64,) = sqlx::query_as(
                "SELECT CAST(COUNT(*) AS SIGNED) FROM information_schema.TRIGGERS \
                 WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = ?",
            )
            .bind(&name)
            .fetch_one(&self.pool)
            .await?;
            if exists > 0 {
                continue;
            }
            let created = sqlx::raw_sql(&format!("CREATE TRIGGER `{name}` {body}"))
                .execute(&self.pool)
                .await;
            match created {
                // Created meanwhile by another instance's migrate().
                Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("HY000") => {
                    let (exists,): (i64,) = sqlx::query_as(
                        "SELECT CAST(COUNT(*) AS SIGNED) FROM information_schema.TRIGGERS \
                         WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = ?",
                    )
                    .bind(&name)
                    .fetch_one(&self.pool)
                    .await?;
                    if exists == 0 {
                        return Err(sqlx::Error::Database(db));
                    }
                }
                other => {
                    other?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use sqlx::Row as _;

    use super::MySqlInbox;
    use crate::dedup::sql::tests::server_url;
    use crate::inbox::ClaimToken;

    /// A lease over a backlog reads two index ranges in their order: each
    /// part of its select one range of its own index, nothing sorted. (The
    /// select that asked for `pending OR taken over … ORDER BY due_at` read,
    /// locked and sorted every pending row.)
    #[tokio::test]
    async fn lease_plan_reads_index_ranges() {
        let Some(url) = server_url("WEBHOOKS_MYSQL_URL", "mysql://root@127.0.0.1:3306/test").await
        else {
            return;
        };
        let table = format!("inbox_plan_{}", &ClaimToken::random().to_hex()[..12]);
        let inbox = MySqlInbox::builder(&url)
            .table(&table)
            .connect()
            .await
            .unwrap();
        inbox.migrate().await.unwrap();
        let pool = inbox.pool();
        // 5,000 rows from digits (MariaDB stops a recursive `WITH` at
        // 1,000 iterations).
        let digits = (0..10)
            .map(|d| format!("SELECT {d} AS d"))
            .collect::<Vec<_>>()
            .join(" UNION ALL ");
        let backlog = format!(
            "INSERT INTO `{table}` (event_key, scheme, matched_key, headers, body, received_at, \
             state, attempts, due_at, updated_at, lease_until) \
             SELECT CONCAT('k', i), 'test', 'm', '', X'', i, i % 5 = 0, i % 5 = 0, i, i, \
             CASE WHEN i % 5 = 0 THEN 4000000000000 + i END \
             FROM (SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 1 AS i \
             FROM ({digits}) a, ({digits}) b, ({digits}) c, ({digits}) e WHERE e.d < 5) AS n"
        );
        sqlx::query(&backlog).execute(pool).await.unwrap();
        sqlx::query(&format!("ANALYZE TABLE `{table}`"))
            .execute(pool)
            .await
            .unwrap();
        let plan = sqlx::query(&format!("EXPLAIN {}", inbox.sql.lease_select))
            .bind(5_i64)
            .bind(8_i64)
            .bind(8_i64)
            .fetch_all(pool)
            .await
            .unwrap();
        let rows: Vec<(String, String, String)> = plan
            .iter()
            .map(|row| {
                let text = |name: &str| {
                    row.try_get::<Option<String>, _>(name)
                        .ok()
                        .flatten()
                        .unwrap_or_default()
                };
                (text("table"), text("key"), text("Extra"))
            })
            .collect();
        for name in crate::inbox::sql::tables_of(&table) {
            sqlx::query(&format!("DROP TABLE IF EXISTS `{name}`"))
                .execute(pool)
                .await
                .unwrap();
        }
        let mut keys: Vec<&str> = rows
            .iter()
            .filter(|(t, ..)| *t == table)
            .map(|(_, key, extra)| {
                assert!(!extra.contains("filesort"), "{rows:?}");
                key.as_str()
            })
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [format!("{table}_due"), format!("{table}_lease")],
            "{rows:?}"
        );
    }
}
