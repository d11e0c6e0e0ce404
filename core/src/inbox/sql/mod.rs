//! What the SQL inboxes share: the table, the statements (formatted once per
//! table and dialect), the builder and the [`Inbox`](super::Inbox) methods
//! that are one token-checked statement in every dialect.
//!
//! One table (default [`DEFAULT_INBOX_TABLE`]), created by `migrate()`:
//!
//! | column | meaning |
//! |---|---|
//! | `event_key` | the unique key (the dedup key), primary key |
//! | `scheme`, `delivery_id`, `event_type`, `matched_key` | what verification established |
//! | `headers` | the kept headers, a JSON array of pairs |
//! | `body` | the exact verified bytes |
//! | `received_at`, `signed_at` | receipt (ms, database clock), signed timestamp (s) |
//! | `state` | 0 pending, 1 leased, 2 completed, 3 dead |
//! | `attempts` | attempts started |
//! | `due_at` | when a pending event may be leased (ms) |
//! | `token`, `lease_until` | the lease's holder and end (ms) |
//! | `last_error` | the last attempt's error |
//! | `updated_at` | the last transition (ms): completion time, dead-letter time |
//!
//! Every time is read from the database's clock inside the statement.
//!
//! Beside it, `migrate()` creates `<table>_control`: one row (`id` 1) whose
//! `paused` column is the pause flag of [`Inbox::set_paused`](super::Inbox::set_paused).
//! The lease statements read it themselves (a `NOT EXISTS` on the control
//! table in their `WHERE`): a pause costs no extra round trip.
//!
//! `connect` checks an existing table's schema and brings a table of an
//! earlier version up to date (see [`schema`]).

pub(crate) mod actions;
pub(crate) mod attempts;
pub(crate) mod gates;
pub(crate) mod schema;
pub(crate) mod search;

mod macros;
mod rows;
mod statements;

use std::marker::PhantomData;
use std::time::Duration;

use crate::dedup::sql::{DEFAULT_COMMAND_TIMEOUT, SqlSettings, validate_table};

#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) use macros::returning_ops;
pub(crate) use macros::sql_inbox;
pub(crate) use rows::{DeadRow, DeliveryRow, LeaseRow, dead, delivery, leased};
pub(crate) use statements::{Dialect, InboxStatements, ListParam};

/// The tables `migrate()` creates for an inbox in `table`, to drop after a
/// test.
#[cfg(all(test, any(feature = "postgres", feature = "mysql")))]
pub(crate) fn tables_of(table: &str) -> Vec<String> {
    let mut tables = vec![table.to_owned()];
    for side in [
        "control", "activity", "gates", "permits", "attempts", "actions",
    ] {
        tables.push(format!("{table}_{side}"));
    }
    tables
}

/// The default table of the SQL inboxes.
pub const DEFAULT_INBOX_TABLE: &str = "webhooks_inbox";

pub(crate) const PENDING: i64 = 0;
pub(crate) const LEASED: i64 = 1;
pub(crate) const COMPLETED: i64 = 2;
pub(crate) const DEAD: i64 = 3;

/// Builds a SQL inbox from a URL: `SqliteInbox::builder`, `PostgresInbox::builder`
/// or `MySqlInbox::builder`, then `connect()`.
///
/// **Retention.** An inbox built here keeps its completed events until
/// something purges them: start a [`PurgeTask`](super::PurgeTask) (what
/// [`inbox_from_url`](super::inbox_from_url) does, with
/// [`DEFAULT_RETENTION`](super::DEFAULT_RETENTION)), or call
/// [`purge_completed`](super::Inbox::purge_completed) from a job of yours.
#[must_use]
pub struct SqlInboxBuilder<I> {
    pub(crate) url: String,
    pub(crate) settings: SqlSettings,
    pub(crate) backend: PhantomData<fn() -> I>,
}

impl<I> Clone for SqlInboxBuilder<I> {
    fn clone(&self) -> Self {
        Self {
            url: self.url.clone(),
            settings: self.settings.clone(),
            backend: PhantomData,
        }
    }
}

impl<I> std::fmt::Debug for SqlInboxBuilder<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold a password.
        f.debug_struct("SqlInboxBuilder")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl<I> SqlInboxBuilder<I> {
    pub(crate) fn new(url: &str, max_connections: u32) -> Self {
        let mut settings = SqlSettings::new(max_connections, DEFAULT_COMMAND_TIMEOUT);
        DEFAULT_INBOX_TABLE.clone_into(&mut settings.table);
        Self {
            url: url.to_owned(),
            settings,
            backend: PhantomData,
        }
    }

    /// The table's name (default [`DEFAULT_INBOX_TABLE`]); checked by
    /// `connect` to be a plain identifier.
    pub fn table(mut self, name: impl Into<String>) -> Self {
        self.settings.table = name.into();
        self
    }

    /// How long opening a connection may take (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.settings.connect_timeout = timeout;
        self
    }

    /// How long one operation may take, waiting for a pooled connection
    /// included (default 2 s).
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.settings.command_timeout = timeout;
        self
    }

    /// The pool's maximum number of connections.
    pub fn max_connections(mut self, max: u32) -> Self {
        self.settings.max_connections = max.max(1);
        self
    }

    pub(crate) fn validate(&self) -> Result<(), crate::ConfigError> {
        validate_table(&self.settings.table)
    }
}

/// Counter slots per (minute, kind) on the shared SQL servers: concurrent
/// statements on different connections upsert different rows, so that
/// they seldom wait for each other's counter row lock.
#[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))]
pub(crate) const ACTIVITY_SLOTS: u32 = 16;

/// The per-minute counters table, quoted: `<table>_activity`, primary key
/// `(minute, kind, slot)`, filled by the triggers `migrate()` creates on
/// the inbox table (see [`activity`](super::activity)).
pub(crate) fn activity_table(sql: &InboxStatements) -> String {
    let q = sql.quoted.chars().next().unwrap_or('"');
    format!("{q}{}_activity{q}", sql.table)
}

/// The counters of the minutes after `minute_now - ?1`, summed over the
/// slots, after a first row carrying the current minute (kind 0); bound:
/// the number of minutes. One range scan of the primary key: at most
/// minutes × 3 kinds × slots rows, whatever the inbox's size.
pub(crate) fn activity_read(
    sql: &InboxStatements,
    minute_now: &str,
    int: &str,
    param: &str,
) -> String {
    let a = activity_table(sql);
    format!(
        "SELECT CAST({minute_now} AS {int}), CAST(0 AS {int}), CAST(0 AS {int}) UNION ALL \
         SELECT minute, kind, CAST(SUM(n) AS {int}) FROM {a} \
         WHERE minute > {minute_now} - {param} GROUP BY minute, kind"
    )
}

/// Deletes the counters older than [`ACTIVITY_RETENTION`](super::ACTIVITY_RETENTION).
pub(crate) fn activity_prune(sql: &InboxStatements, minute_now: &str) -> String {
    let a = activity_table(sql);
    let keep = super::ACTIVITY_RETENTION.as_secs() / 60;
    format!("DELETE FROM {a} WHERE minute < {minute_now} - {keep}")
}

/// The trigger condition and kind shared by the dialects: a leased row
/// (state 1) that became completed (2) counts a completion (kind 2); one
/// that became dead (3), or pending again with its attempt kept (a retry;
/// a hand-back gives the attempt back), a failure (kind 3).
#[cfg_attr(not(any(feature = "sqlite", feature = "mysql")), allow(dead_code))]
pub(crate) const ACTIVITY_FAILED_OR_DONE: &str = "OLD.state = 1 AND (NEW.state = 2 OR NEW.state = 3 \
     OR (NEW.state = 0 AND NEW.attempts = OLD.attempts))";
