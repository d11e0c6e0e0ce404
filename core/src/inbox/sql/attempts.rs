//! The SQL inboxes' attempt history: `<table>_attempts`, one row per
//! recorded attempt (see [`attempts`](crate::inbox::attempts)).
//!
//! | column | meaning |
//! |---|---|
//! | `event_key` | the event's key (indexed with `started_at`) |
//! | `number` | the attempt's number |
//! | `started_at`, `ended_at` | ms since the epoch, the worker's clock (`ended_at` indexed: the purge) |
//! | `outcome` | [`AttemptOutcome::as_str`](crate::inbox::AttemptOutcome::as_str) |
//! | `error` | the error, at most 2 KiB |
//! | `worker` | the worker's name |
//!
//! A flush's attempts are one multi-row `INSERT`; an event past its first
//! attempt (or one that failed) also has its rows beyond the newest
//! [`ATTEMPTS_KEPT`] deleted, in the same transaction; a first attempt that
//! succeeds (the common case) costs the insert only. Discarding an event
//! deletes its rows; a purge deletes the rows of events no longer stored.

use std::time::SystemTime;

use super::InboxStatements;
use crate::inbox::{ATTEMPTS_KEPT, Attempt, AttemptOutcome};

/// The most attempts one `INSERT` carries (7 parameters each: well inside
/// every engine's limit on parameters).
pub(crate) const INSERT_CHUNK: usize = 500;

/// The history table, quoted.
pub(crate) fn table(sql: &InboxStatements) -> String {
    let q = sql.quoted.chars().next().unwrap_or('"');
    format!("{q}{}_attempts{q}", sql.table)
}

/// The dialect's column types: key, integer, short text, text.
pub(crate) struct Types {
    pub(crate) key: &'static str,
    pub(crate) int: &'static str,
    pub(crate) short: &'static str,
    pub(crate) text: &'static str,
}

/// `CREATE TABLE IF NOT EXISTS` and its two indexes (SQLite and PostgreSQL;
/// MySQL declares its keys in the table, see [`create_mysql`]).
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
pub(crate) fn create(sql: &InboxStatements, types: &Types) -> [String; 3] {
    let a = table(sql);
    let name = &sql.table;
    [
        format!(
            "CREATE TABLE IF NOT EXISTS {a} (event_key {key} NOT NULL, number {int} NOT NULL, \
             started_at {int} NOT NULL, ended_at {int} NOT NULL, outcome {short} NOT NULL, \
             error {text}, worker {short} NOT NULL)",
            key = types.key,
            int = types.int,
            short = types.short,
            text = types.text
        ),
        format!("CREATE INDEX IF NOT EXISTS \"{name}_att_key\" ON {a} (event_key, started_at)"),
        format!("CREATE INDEX IF NOT EXISTS \"{name}_att_end\" ON {a} (ended_at)"),
    ]
}

/// MySQL's `CREATE TABLE IF NOT EXISTS`, keys included (InnoDB wants a
/// primary key: an auto-increment id).
#[cfg_attr(not(feature = "mysql"), allow(dead_code))]
pub(crate) fn create_mysql(sql: &InboxStatements) -> String {
    let a = table(sql);
    let name = &sql.table;
    format!(
        "CREATE TABLE IF NOT EXISTS {a} (id BIGINT NOT NULL AUTO_INCREMENT, \
         event_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, \
         number BIGINT NOT NULL, started_at BIGINT NOT NULL, ended_at BIGINT NOT NULL, \
         outcome VARCHAR(16) NOT NULL, error TEXT, worker VARCHAR(64) NOT NULL, \
         PRIMARY KEY (id), KEY `{name}_att_key` (event_key, started_at), \
         KEY `{name}_att_end` (ended_at)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
    )
}

/// The columns, in no row: the schema check's probe.
pub(crate) fn probe(sql: &InboxStatements) -> String {
    format!(
        "SELECT event_key, number, started_at, ended_at, outcome, error, worker FROM {} WHERE 1 = 0",
        table(sql)
    )
}

/// An `INSERT` of `rows` attempts; bound per row: key, number, started,
/// ended, outcome, error, worker.
pub(crate) fn insert(sql: &InboxStatements, param: fn(usize) -> String, rows: usize) -> String {
    let mut statement = format!(
        "INSERT INTO {} (event_key, number, started_at, ended_at, outcome, error, worker) VALUES ",
        table(sql)
    );
    for row in 0..rows {
        if row > 0 {
            statement.push_str(", ");
        }
        statement.push('(');
        for column in 0..7 {
            if column > 0 {
                statement.push_str(", ");
            }
            statement.push_str(&param(row * 7 + column + 1));
        }
        statement.push(')');
    }
    statement
}

/// Binds `attempts` to an [`insert`] of as many rows.
pub(crate) fn bind<'q, DB>(
    mut query: sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments<'q>>,
    attempts: &'q [(&'q str, Attempt)],
) -> sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments<'q>>
where
    DB: sqlx::Database,
    &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<&'q str>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    for (key, attempt) in attempts {
        query = query
            .bind(*key)
            .bind(i64::from(attempt.number))
            .bind(ms(attempt.started_at))
            .bind(ms(attempt.ended_at))
            .bind(attempt.outcome.as_str())
            .bind(attempt.error.as_deref())
            .bind(attempt.worker.as_str());
    }
    query
}

/// Deletes an event's rows older than its newest [`ATTEMPTS_KEPT`]; bound:
/// key, key. (The inner select is a derived table: MySQL cannot otherwise
/// read the table it deletes from.)
pub(crate) fn trim(sql: &InboxStatements, param: fn(usize) -> String) -> String {
    let a = table(sql);
    format!(
        "DELETE FROM {a} WHERE event_key = {} AND started_at < (SELECT started_at FROM \
         (SELECT started_at FROM {a} WHERE event_key = {} ORDER BY started_at DESC \
         LIMIT 1 OFFSET {}) AS kept)",
        param(1),
        param(2),
        ATTEMPTS_KEPT - 1
    )
}

/// An event's newest [`ATTEMPTS_KEPT`] rows, newest first; bound: key.
pub(crate) fn select(sql: &InboxStatements, param: fn(usize) -> String) -> String {
    format!(
        "SELECT number, started_at, ended_at, outcome, error, worker FROM {} \
         WHERE event_key = {} ORDER BY started_at DESC, number DESC LIMIT {ATTEMPTS_KEPT}",
        table(sql),
        param(1)
    )
}

/// Deletes an event's rows; bound: key.
pub(crate) fn delete(sql: &InboxStatements, param: fn(usize) -> String) -> String {
    format!("DELETE FROM {} WHERE event_key = {}", table(sql), param(1))
}

/// Deletes the rows, ended before the age bound, of events no longer
/// stored; bound: the age in ms.
pub(crate) fn purge(sql: &InboxStatements, now: &str, param: fn(usize) -> String) -> String {
    let a = table(sql);
    let t = &sql.quoted;
    format!(
        "DELETE FROM {a} WHERE ended_at <= {now} - {} AND NOT EXISTS \
         (SELECT 1 FROM {t} WHERE {t}.event_key = {a}.event_key)",
        param(1)
    )
}

/// Whether recording `attempt` may take its event past [`ATTEMPTS_KEPT`]
/// rows: not a first attempt, or not a success. (Counting restarts at 1
/// after a replay, and a replay keeps at most the newest
/// `ATTEMPTS_KEPT - 1`: a successful first attempt never needs the trim.)
pub(crate) fn needs_trim(attempt: &Attempt) -> bool {
    attempt.number > 1 || !attempt.outcome.is_success()
}

/// One row read back: number, started, ended, outcome, error, worker.
pub(crate) type AttemptRow = (i64, i64, i64, String, Option<String>, String);

/// The rows (newest first) as attempts, oldest first; rows of an outcome
/// this version does not know are kept as failures.
pub(crate) fn attempts(rows: Vec<AttemptRow>) -> Vec<Attempt> {
    let at = |ms: i64| {
        SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    };
    let mut out: Vec<Attempt> = rows
        .into_iter()
        .map(|(number, started, ended, outcome, error, worker)| {
            let mut attempt = Attempt::new(
                u32::try_from(number).unwrap_or(0),
                at(started),
                at(ended),
                AttemptOutcome::parse(&outcome).unwrap_or(AttemptOutcome::Failed),
            )
            .with_worker(worker);
            attempt.error = error;
            attempt
        })
        .collect();
    out.reverse();
    out
}

/// Milliseconds since the epoch, for binding.
pub(crate) fn ms(at: SystemTime) -> i64 {
    crate::inbox::to_ms(at)
}
