//! The MySQL / MariaDB [`Inbox`](super::Inbox).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// The lease select's columns after the leased ones: its part (0 expired,
/// 1 pending), then the row's due time.
const PART: usize = 10;
const DUE: usize = 11;

/// How long a lease's pending part may start past the rows the leases
/// before it took, after a lease that read from the start of the due rows.
const FLOOR_FOR: Duration = Duration::from_millis(250);

/// Where a lease's pending part starts reading the `(state, due_at)` index.
///
/// A leased row's pending entry stays in that index, delete-marked, until
/// InnoDB's purge removes it (a fraction of a second to seconds behind),
/// and the oldest due rows are the ones leased first: a lease reading from
/// the start of the due rows steps over every entry the leases before it
/// left, locking and checking each against its clustered row (~2 pages
/// each: ~2,000 pages a lease at 2,000 events/s, the server's largest
/// cost). After a lease whose pending part was full, the next ones start at
/// the due time of its first pending row: the rows before it were leased,
/// or held by another transaction while it read (leased by that one, or
/// back to pending if it rolled back or had no room for them), or behind a
/// paused gate. Those wait at most [`FLOOR_FOR`]: a lease reads from the
/// start again once that long has passed since the last one that did, and
/// whenever the floor's part comes back short (the due rows past the floor
/// all leased), so a lease still takes as many rows as there are.
#[derive(Default)]
struct Floor {
    /// The due time the pending part starts at, and when the lease that
    /// last read from the start ran.
    due: Option<(i64, Instant)>,
}

impl Floor {
    /// The start of the next lease's pending part, if it need not read
    /// from the start of the due rows.
    fn start(&self) -> Option<i64> {
        self.due
            .filter(|(_, since)| since.elapsed() < FLOOR_FOR)
            .map(|(due, _)| due)
    }

    /// After a lease from `start` whose pending part returned `first` (the
    /// due time of its first row) and was full (`full`).
    fn after(&mut self, start: Option<i64>, first: Option<i64>, full: bool) {
        self.due = match (full, first, start) {
            // From the start: a new floor for the next `FLOOR_FOR`.
            (true, Some(first), None) => Some((first, Instant::now())),
            // From the floor: it moves up, never down, for the time left.
            (true, Some(first), Some(_)) => self.due.map(|(due, since)| (due.max(first), since)),
            // Short: the next lease reads from the start.
            _ => None,
        };
    }
}

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
///   AND (SELECT attempts FROM t WHERE <lease expired> LIMIT 1) IS NOT NULL
///   ORDER BY lease_until LIMIT ? FOR UPDATE SKIP LOCKED)
/// UNION ALL
/// (SELECT 1, <columns> FROM t FORCE INDEX (t_due) WHERE <pending and due>
///   AND due_at >= ?  -- the floor, see below
///   ORDER BY due_at LIMIT ? FOR UPDATE SKIP LOCKED);
/// UPDATE t SET state = 3, … WHERE event_key IN (…);  -- expired on their last attempt, if any
/// UPDATE t SET state = 1, token = ?, lease_until = now + ?, attempts = attempts + 1
///   WHERE event_key IN (…);  -- the takeovers first, then the pending rows
/// COMMIT;
/// ```
///
/// Concurrent workers skip each other's locked rows. A leased or completed
/// row's entries stay in the indexes, delete-marked, until InnoDB's purge
/// removes them (a fraction of a second to seconds later), and a locking
/// read steps over each, locking it and reading its row: the expired part
/// runs only when a non-locking read (which stops at the end of its range)
/// finds an expired lease, and the pending part starts at a floor, the due
/// time of the first pending row of an earlier full lease, so that it
/// does not step over the entries of the rows leased before. A row held
/// back behind the floor (locked by another transaction while a lease read
/// past it, or behind a paused gate) is leased within 250 ms: a lease reads
/// from the first due row again that long after the last one that did, and
/// whenever the floor's part comes back short. Accept is a plain
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
    /// Where the next lease's pending part starts (see [`Floor`]).
    floor: Arc<Mutex<Floor>>,
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
            floor: Arc::default(),
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
        // (unchanged) until the commit, a few milliseconds. The pending
        // part starts at the floor if there is one; if that part comes
        // back short, it is read again from the start.
        let mut start = self.floor_start();
        let (mut found, mut pending) = self.lease_read(&mut tx, max_attempts, batch, start).await?;
        if start.is_some() && pending.0 < batch {
            start = None;
            (found, pending) = self.lease_read(&mut tx, max_attempts, batch, None).await?;
        }
        if let Ok(mut floor) = self.floor.lock() {
            floor.after(start, pending.1, pending.0 >= batch);
        }
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

impl MySqlInbox {
    /// The start of the next lease's pending part (see [`Floor`]).
    fn floor_start(&self) -> Option<i64> {
        self.floor.lock().ok().and_then(|floor| floor.start())
    }

    /// The lease select, its pending part from `start` (or from the first
    /// due row): the rows with their part, in the select's order, and how
    /// many pending rows came back with the earliest due time of them.
    async fn lease_read(
        &self,
        tx: &mut sqlx::MySqlConnection,
        max_attempts: i64,
        batch: i64,
        start: Option<i64>,
    ) -> Result<(Vec<(i64, LeaseRow)>, (i64, Option<i64>)), sqlx::Error> {
        let rows = sqlx::query(&self.sql.lease_select)
            .bind(max_attempts)
            .bind(batch)
            .bind(start.unwrap_or(i64::MIN))
            .bind(batch)
            .fetch_all(&mut *tx)
            .await?;
        let mut found = Vec::with_capacity(rows.len());
        let mut pending = (0, None);
        for row in &rows {
            let part = row.try_get::<i64, _>(PART)?;
            if part == 1 {
                pending.0 += 1;
                let due = row.try_get::<i64, _>(DUE)?;
                pending.1 = Some(pending.1.map_or(due, |first: i64| first.min(due)));
            }
            found.push((part, LeaseRow::from_row(row)?));
        }
        Ok((found, pending))
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

    use std::time::{Duration, Instant};

    use super::{FLOOR_FOR, Floor, MySqlInbox};
    use crate::dedup::sql::tests::server_url;
    use crate::inbox::{ClaimToken, Inbox as _};

    /// A lease over a backlog reads two index ranges in their order: each
    /// part of its select one range of its own index, nothing sorted. (The
    /// select that asked for `pending OR taken over … ORDER BY due_at` read,
    /// locked and sorted every pending row.)
    #[tokio::test]
    async fn lease_plan_reads_index_ranges() {
        let Some((inbox, table)) = fresh_inbox("inbox_plan").await else {
            return;
        };
        let pool = inbox.pool();
        let digits = digits();
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
        // Some leases expired, so that the expired part runs too.
        sqlx::query(&format!(
            "UPDATE `{table}` SET lease_until = 1 WHERE state = 1 AND received_at <= 500"
        ))
        .execute(pool)
        .await
        .unwrap();
        let plan = sqlx::query(&format!("EXPLAIN {}", inbox.sql.lease_select))
            .bind(5_i64)
            .bind(8_i64)
            .bind(2_500_i64)
            .bind(8_i64)
            .fetch_all(pool)
            .await
            .unwrap();
        let rows: Vec<(String, String, String, String)> = plan
            .iter()
            .map(|row| {
                let text = |name: &str| {
                    row.try_get::<Option<String>, _>(name)
                        .ok()
                        .flatten()
                        .unwrap_or_default()
                };
                (text("table"), text("key"), text("Extra"), text("type"))
            })
            .collect();
        drop_tables(&inbox, &table).await;
        // The expired part (and its check for expired leases) reads
        // `(state, lease_until)`; the pending part a range of `(state,
        // due_at)` from its start (a `ref` on the state alone would read
        // every pending entry before it).
        let mut keys: Vec<&str> = rows
            .iter()
            .filter(|(t, ..)| *t == table)
            .map(|(_, key, extra, access)| {
                assert!(!extra.contains("filesort"), "{rows:?}");
                assert_eq!(access, "range", "{rows:?}");
                key.as_str()
            })
            .collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(
            keys,
            [format!("{table}_due"), format!("{table}_lease")],
            "{rows:?}"
        );
    }

    /// A backlog of `n` pending rows, due at 1..=n (keys `k1`…), in a new
    /// inbox's table.
    async fn backlog(n: usize) -> Option<(MySqlInbox, String)> {
        let (inbox, table) = fresh_inbox("inbox_walk").await?;
        let digits = digits();
        sqlx::query(&format!(
            "INSERT INTO `{table}` (event_key, scheme, matched_key, headers, body, received_at, \
             state, attempts, due_at, updated_at) \
             SELECT CONCAT('k', i), 'test', 'm', '', X'', i, 0, 0, i, i \
             FROM (SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 1 AS i \
             FROM ({digits}) a, ({digits}) b, ({digits}) c, ({digits}) e) AS n WHERE i <= {n}"
        ))
        .execute(inbox.pool())
        .await
        .unwrap();
        Some((inbox, table))
    }

    /// A new inbox on the test server, in a table named from `prefix`
    /// (`None` without a server, outside CI).
    async fn fresh_inbox(prefix: &str) -> Option<(MySqlInbox, String)> {
        let url = server_url("WEBHOOKS_MYSQL_URL", "mysql://root@127.0.0.1:3306/test").await?;
        let table = format!("{prefix}_{}", &ClaimToken::random().to_hex()[..12]);
        let inbox = MySqlInbox::builder(&url)
            .table(&table)
            .connect()
            .await
            .unwrap();
        inbox.migrate().await.unwrap();
        Some((inbox, table))
    }

    /// The digits 0–9 as a derived table's rows, to make backlogs of
    /// thousands of rows by cross joins (MariaDB stops a recursive `WITH`
    /// at 1,000 iterations).
    fn digits() -> String {
        (0..10)
            .map(|d| format!("SELECT {d} AS d"))
            .collect::<Vec<_>>()
            .join(" UNION ALL ")
    }

    async fn drop_tables(inbox: &MySqlInbox, table: &str) {
        for name in crate::inbox::sql::tables_of(table) {
            sqlx::query(&format!("DROP TABLE IF EXISTS `{name}`"))
                .execute(inbox.pool())
                .await
                .unwrap();
        }
    }

    /// The pages of the inbox's table a lease select reads (`ANALYZE`, in
    /// a transaction rolled back), its pending part from `start`.
    async fn pages_read(inbox: &MySqlInbox, table: &str, start: i64) -> u64 {
        let mut values = [5_i64, 8, start, 8].into_iter();
        let select: String = inbox
            .sql
            .lease_select
            .split('?')
            .enumerate()
            .map(|(i, piece)| match i {
                0 => piece.to_owned(),
                _ => format!("{}{piece}", values.next().unwrap()),
            })
            .collect();
        let mut tx = inbox.pool().begin().await.unwrap();
        let (json,): (String,) = sqlx::query_as(&format!("ANALYZE FORMAT=JSON {select}"))
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        tx.rollback().await.unwrap();
        fn walk(value: &serde_json::Value, table: &str) -> u64 {
            match value {
                serde_json::Value::Object(map) => {
                    let own = match (map.get("table_name"), map.get("r_engine_stats")) {
                        (Some(name), Some(stats)) if name == table => stats
                            .get("pages_accessed")
                            .and_then(serde_json::Value::as_u64)
                            .unwrap_or(0),
                        _ => 0,
                    };
                    own + map.values().map(|v| walk(v, table)).sum::<u64>()
                }
                serde_json::Value::Array(items) => items.iter().map(|v| walk(v, table)).sum(),
                _ => 0,
            }
        }
        walk(&serde_json::from_str(&json).unwrap(), table)
    }

    /// Neither part of a lease steps over the entries that completed
    /// leases left in the indexes until InnoDB's purge removes them: the
    /// expired part only runs when a lease expired (a non-locking check
    /// that stops at the end of its range), and the pending part starts at
    /// the floor. (The lease that read both ranges from their start read
    /// ~2 pages per such entry, locking and checking each.)
    #[tokio::test]
    async fn lease_reads_past_no_unpurged_entries() {
        let Some((inbox, table)) = backlog(1_500).await else {
            return;
        };
        let pool = inbox.pool();
        // A snapshot held open keeps purge from removing anything, and an
        // open read-write transaction makes every page changed since
        // newer than it (as concurrent leases do).
        let mut holder = pool.acquire().await.unwrap().detach();
        sqlx::raw_sql(&format!(
            "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ; \
             START TRANSACTION WITH CONSISTENT SNAPSHOT; \
             UPDATE `{table}_control` SET updated_at = updated_at + 1 WHERE id = 1"
        ))
        .execute(&mut holder)
        .await
        .unwrap();
        let mut taken = 0;
        while taken < 1_000 {
            let leased = inbox
                .lease(ClaimToken::random(), 50, Duration::from_secs(600), 5)
                .await
                .unwrap();
            assert_eq!(leased.len(), 50);
            let done: Vec<(&str, ClaimToken)> = leased
                .iter()
                .map(|event| (event.meta.key.as_str(), event.token))
                .collect();
            inbox.complete_many(&done).await.unwrap();
            taken += leased.len();
        }
        let from_start = pages_read(&inbox, &table, i64::MIN).await;
        let from_floor = pages_read(&inbox, &table, 1_001).await;
        sqlx::raw_sql("ROLLBACK")
            .execute(&mut holder)
            .await
            .unwrap();
        drop(holder);
        drop_tables(&inbox, &table).await;
        // From the start, the pending part alone steps over 1,000 entries.
        assert!(from_start > 1_000, "{from_start} pages from the start");
        assert!(from_floor < 100, "{from_floor} pages from the floor");
    }

    /// A row held back while a lease read past it (here: locked by another
    /// transaction, which then rolls back) is leased again once
    /// `FLOOR_FOR` passed, though newer rows past the floor fill every
    /// batch.
    #[tokio::test]
    async fn held_back_row_is_leased_after_floor_for() {
        let Some((inbox, table)) = backlog(40).await else {
            return;
        };
        let pool = inbox.pool();
        let mut other = pool.begin().await.unwrap();
        sqlx::query(&format!(
            "SELECT event_key FROM `{table}` WHERE event_key = 'k1' FOR UPDATE"
        ))
        .fetch_all(&mut *other)
        .await
        .unwrap();
        let lease = || inbox.lease(ClaimToken::random(), 8, Duration::from_secs(600), 5);
        let keys = |leased: Vec<crate::inbox::LeasedEvent>| -> Vec<String> {
            leased.into_iter().map(|event| event.meta.key).collect()
        };
        let first = keys(lease().await.unwrap());
        assert_eq!(first, (2..=9).map(|i| format!("k{i}")).collect::<Vec<_>>());
        other.rollback().await.unwrap();
        // Leased from the floor, past `k1` (or, on a machine slow enough
        // that `FLOOR_FOR` already passed, from the start, with `k1`).
        let mut later = keys(lease().await.unwrap());
        tokio::time::sleep(FLOOR_FOR).await;
        later.extend(keys(lease().await.unwrap()));
        drop_tables(&inbox, &table).await;
        assert!(later.iter().any(|key| key == "k1"), "{later:?}");
    }

    #[test]
    fn floor_moves_up_and_expires() {
        let mut floor = Floor::default();
        assert_eq!(floor.start(), None);
        floor.after(None, Some(5), true);
        assert_eq!(floor.start(), Some(5));
        floor.after(Some(5), Some(9), true);
        assert_eq!(floor.start(), Some(9));
        floor.after(Some(5), Some(7), true);
        assert_eq!(floor.start(), Some(9));
        // A short pending part: the next lease reads from the start.
        floor.after(Some(9), Some(12), false);
        assert_eq!(floor.start(), None);
        floor.after(None, None, false);
        assert_eq!(floor.start(), None);
        // Once `FLOOR_FOR` passed since the lease that read from the start.
        if let Some(past) = Instant::now().checked_sub(FLOOR_FOR) {
            floor.due = Some((3, past));
            assert_eq!(floor.start(), None);
            floor.after(Some(3), Some(4), true);
            assert_eq!(floor.start(), None);
        }
    }
}
