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

pub(crate) mod schema;

use std::marker::PhantomData;
use std::time::Duration;

use crate::dedup::sql::{DEFAULT_COMMAND_TIMEOUT, SqlSettings, validate_table};

use super::{
    DeadLetter, DeadLetterFilter, Delivery, DeliveryFilter, DeliveryOrder, DeliveryState,
    EventMeta, LeasedEvent, decode_headers, from_ms,
};
use crate::dedup::ClaimToken;

/// The default table of the SQL inboxes.
pub const DEFAULT_INBOX_TABLE: &str = "webhooks_inbox";

pub(crate) const PENDING: i64 = 0;
pub(crate) const LEASED: i64 = 1;
pub(crate) const COMPLETED: i64 = 2;
pub(crate) const DEAD: i64 = 3;

/// The columns a lease returns, in [`LeaseRow`] order.
/// The lease's attempt count: one more, saturating well inside every
/// engine's integer range. A damaged or hand-edited row at the type's limit
/// would otherwise make the lease itself fail on every poll (PostgreSQL and
/// MySQL: out of range; SQLite: the sum turns into a `REAL` that no longer
/// decodes), stalling the whole inbox behind one row (found by the
/// `inbox_records` fuzz target).
const NEXT_ATTEMPT: &str = "CASE WHEN attempts < 2147483647 THEN attempts + 1 ELSE attempts END";

pub(crate) const LEASE_COLUMNS: &str = "event_key, scheme, delivery_id, event_type, matched_key, \
     headers, body, received_at, signed_at, attempts";

/// A leased row.
pub(crate) type LeaseRow = (
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    String,
    Vec<u8>,
    i64,
    Option<i64>,
    i64,
);

/// A dead-letter row.
pub(crate) type DeadRow = (
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    String,
    Vec<u8>,
    i64,
    Option<i64>,
    i64,
    Option<String>,
    i64,
);

/// The text columns every row starts with: key, scheme, delivery id, event
/// type, matched key, headers.
type Head = (
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    String,
);

fn meta(head: Head, received_at: i64, signed_at: Option<i64>) -> EventMeta {
    let (key, scheme, delivery_id, event_type, matched_key, headers) = head;
    EventMeta {
        key,
        scheme,
        delivery_id,
        event_type,
        matched_key,
        headers: decode_headers(&headers),
        received_at: from_ms(received_at),
        signed_at: signed_at.and_then(|s| u64::try_from(s).ok()),
    }
}

pub(crate) fn leased(row: LeaseRow, token: ClaimToken) -> LeasedEvent {
    let (key, scheme, delivery_id, event_type, matched_key, headers, body, received, signed, n) =
        row;
    LeasedEvent {
        meta: meta(
            (key, scheme, delivery_id, event_type, matched_key, headers),
            received,
            signed,
        ),
        body: body.into(),
        attempt: u32::try_from(n).unwrap_or(u32::MAX),
        token,
    }
}

pub(crate) fn dead(row: DeadRow) -> DeadLetter {
    let (
        key,
        scheme,
        delivery_id,
        event_type,
        matched_key,
        headers,
        body,
        received,
        signed,
        n,
        error,
        at,
    ) = row;
    DeadLetter {
        meta: meta(
            (key, scheme, delivery_id, event_type, matched_key, headers),
            received,
            signed,
        ),
        attempts: u32::try_from(n).unwrap_or(u32::MAX),
        last_error: error,
        dead_at: from_ms(at),
        body: body.into(),
    }
}

/// How a dialect writes what differs.
pub(crate) struct Dialect {
    /// The `n`th placeholder, from 1.
    pub(crate) param: fn(usize) -> String,
    /// Now, in epoch milliseconds, as an SQL expression (the database's clock).
    pub(crate) now: &'static str,
    /// The type to `CAST` an integer aggregate to.
    pub(crate) int: &'static str,
    /// An empty blob literal.
    pub(crate) empty_blob: &'static str,
    /// How to quote an identifier.
    pub(crate) quote: char,
    /// What locks the due rows a lease selects (`FOR UPDATE SKIP LOCKED`, or nothing).
    pub(crate) lock: &'static str,
    /// How to select the key as text (MySQL reports a `_bin` column as binary).
    pub(crate) key_select: &'static str,
    /// What follows the table in an `UPDATE … WHERE event_key IN (…)` to
    /// make it use the primary key (MySQL: `FORCE INDEX (PRIMARY)`; its
    /// optimizer may otherwise scan a `(state, …)` index, locking rows that
    /// concurrent leases select, and deadlock).
    pub(crate) by_key: &'static str,
    /// Whether the lease statement reaps too (a data-modifying `WITH`, as
    /// PostgreSQL has), or the reap is a statement of its own.
    pub(crate) reap_in_lease: bool,
    /// The batch completion, from the quoted table, the clock expression and
    /// the completed state (see [`InboxStatements::complete_many`]).
    pub(crate) complete_many: fn(&str, &str, i64, i64) -> String,
}

/// The statements of one inbox, formatted once for its table. Each statement
/// uses its parameters once each, in binding order, so that MySQL's `?`
/// placeholders bind the same way as numbered ones.
pub(crate) struct InboxStatements {
    pub(crate) table: String,
    pub(crate) quoted: String,
    param: fn(usize) -> String,
    /// The dialect's clock expression.
    now: &'static str,
    /// Bound: key, scheme, delivery id, event type, matched key, headers, body, signed at.
    pub(crate) accept: String,
    /// Dead-letters the leases expired on their last attempt, skipping rows
    /// another transaction holds (`IN (SELECT … FOR UPDATE SKIP LOCKED)`);
    /// bound: error, max attempts.
    #[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
    pub(crate) reap: String,
    /// MySQL's expired leases, oldest first, locked: those on their last
    /// attempt (to dead-letter: MySQL cannot select from the table it
    /// updates) and, unless the inbox is paused, those with attempts left
    /// (to take over). The leased columns ([`LEASE_COLUMNS`], attempts
    /// before this lease); bound: max attempts, limit. One
    /// range of the `(state, lease_until)` index in its order: no sort,
    /// and no row locked but those returned.
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(crate) expired_select: String,
    /// Then their update (`IN (` is last); bound: error, then the keys.
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(crate) reap_update: String,
    /// One-statement lease; bound: token, lease ms, max attempts, batch,
    /// and with [`Dialect::reap_in_lease`] the reap's error. MySQL leases in
    /// two statements instead (`lease_select`, `lease_update`).
    #[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
    pub(crate) lease: String,
    /// MySQL's due pending rows, oldest due first, locked: their leased
    /// columns (attempts before this lease); bound: limit.
    /// One range of the `(state, due_at)` index in its order. (The
    /// one-statement lease's `pending OR taken over` condition cannot use
    /// one index in order: InnoDB then reads and locks every pending row to
    /// sort them, and concurrent workers skip them all.)
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(crate) pending_select: String,
    /// The lease's update of the rows whose keys follow (`IN (` is last);
    /// bound: token, lease ms, then the keys.
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(crate) lease_update: String,
    /// Bound: lease ms, key, token.
    pub(crate) extend: String,
    /// Bound: key, token.
    pub(crate) complete: String,
    /// The batch completion: the whole statement on PostgreSQL (bound: the
    /// keys, the tokens, as arrays); elsewhere its head, followed by one
    /// `(key, token)` pair per entry and `)`.
    pub(crate) complete_many: String,
    /// Bound: delay ms, error, key, token.
    pub(crate) retry: String,
    /// Bound: key, token.
    pub(crate) release: String,
    /// Bound: error, key, token.
    pub(crate) dead_letter: String,
    /// Bound: key.
    pub(crate) replay: String,
    /// Bound: key.
    pub(crate) discard: String,
    /// Bound: age ms.
    pub(crate) purge: String,
    /// Bound: key.
    pub(crate) get: String,
    /// The dead-letter listing's select, without its filters.
    list: String,
    /// No parameters.
    pub(crate) stats: String,
    /// The control table, quoted.
    pub(crate) control: String,
    /// Sets the pause flag if it differs; bound: the flag, the flag again.
    pub(crate) set_paused: String,
    /// The pause flag; no parameters.
    pub(crate) paused: String,
    /// The delivery listing's select, without its conditions (see
    /// [`InboxStatements::deliveries`]).
    deliveries: String,
    /// One delivery in any state, with its body; bound: key.
    pub(crate) delivery_get: String,
}

impl InboxStatements {
    pub(crate) fn new(table: &str, d: &Dialect) -> Self {
        let q = d.quote;
        let t = format!("{q}{table}{q}");
        let c = format!("{q}{table}_control{q}");
        let now = d.now;
        let p = d.param;
        let int = d.int;
        let columns = LEASE_COLUMNS.replacen("event_key", d.key_select, 1);
        let dead_columns = format!("{columns}, last_error, updated_at");
        // A due row: pending and due, or leased with an expired lease and
        // attempts left (a takeover); parameter `n`: the max attempts.
        // Nothing is due while the inbox is paused.
        let due = |n: usize| {
            format!(
                "((state = {PENDING} AND due_at <= {now}) OR \
                 (state = {LEASED} AND lease_until <= {now} AND attempts < {})) \
                 AND NOT EXISTS (SELECT 1 FROM {c} WHERE paused <> 0)",
                p(n)
            )
        };
        // A leased row whose lease expired on its last attempt; parameter
        // `n`: the max attempts.
        let expired = |n: usize| {
            format!(
                "state = {LEASED} AND lease_until <= {now} AND attempts >= {}",
                p(n)
            )
        };
        let held = |first: usize| {
            format!(
                "event_key = {} AND token = {} AND state = {LEASED}",
                p(first),
                p(first + 1)
            )
        };
        Self {
            table: table.to_owned(),
            quoted: t.clone(),
            param: p,
            now,
            accept: format!(
                "INSERT INTO {t} (event_key, scheme, delivery_id, event_type, matched_key, headers, \
                 body, signed_at, received_at, state, attempts, due_at, updated_at) \
                 VALUES ({}, {}, {}, {}, {}, {}, {}, {}, {now}, {PENDING}, 0, {now}, {now})",
                p(1),
                p(2),
                p(3),
                p(4),
                p(5),
                p(6),
                p(7),
                p(8)
            ),
            reap: format!(
                "UPDATE {t} SET state = {DEAD}, token = NULL, lease_until = NULL, last_error = {}, \
                 updated_at = {now} WHERE event_key IN (SELECT event_key FROM {t} WHERE {}{})",
                p(1),
                expired(2),
                d.lock
            ),
            expired_select: format!(
                "SELECT {columns} FROM {t} WHERE state = {LEASED} AND lease_until <= {now} \
                 AND (attempts >= {} OR NOT EXISTS (SELECT 1 FROM {c} WHERE paused <> 0)) \
                 ORDER BY lease_until LIMIT {}{}",
                p(1),
                p(2),
                d.lock
            ),
            reap_update: format!(
                "UPDATE {t}{} SET state = {DEAD}, token = NULL, lease_until = NULL, last_error = {}, \
                 updated_at = {now} WHERE event_key IN (",
                d.by_key,
                p(1)
            ),
            lease: format!(
                "{}UPDATE {t} SET state = {LEASED}, token = {}, lease_until = {now} + {}, \
                 attempts = {NEXT_ATTEMPT}, updated_at = {now} WHERE event_key IN \
                 (SELECT event_key FROM {t} WHERE {} ORDER BY due_at LIMIT {}{}) \
                 RETURNING {columns}",
                if d.reap_in_lease {
                    // The reap first, in the same statement (one round trip):
                    // the rows it dead-letters (attempts >= max) are never
                    // due (attempts < max).
                    format!(
                        "WITH reaped AS (UPDATE {t} SET state = {DEAD}, token = NULL, \
                         lease_until = NULL, last_error = {}, updated_at = {now} \
                         WHERE event_key IN (SELECT event_key FROM {t} WHERE {}{})) ",
                        p(5),
                        expired(3),
                        d.lock
                    )
                } else {
                    String::new()
                },
                p(1),
                p(2),
                due(3),
                p(4),
                d.lock
            ),
            pending_select: format!(
                "SELECT {columns} FROM {t} WHERE state = {PENDING} AND due_at <= {now} \
                 AND NOT EXISTS (SELECT 1 FROM {c} WHERE paused <> 0) \
                 ORDER BY due_at LIMIT {}{}",
                p(1),
                d.lock
            ),
            lease_update: format!(
                "UPDATE {t}{} SET state = {LEASED}, token = {}, lease_until = {now} + {}, \
                 attempts = {NEXT_ATTEMPT}, updated_at = {now} WHERE event_key IN (",
                d.by_key,
                p(1),
                p(2)
            ),
            extend: format!(
                "UPDATE {t} SET lease_until = {now} + {} WHERE {}",
                p(1),
                held(2)
            ),
            complete: format!(
                "UPDATE {t} SET state = {COMPLETED}, token = NULL, lease_until = NULL, \
                 updated_at = {now} WHERE {}",
                held(1)
            ),
            complete_many: (d.complete_many)(&t, now, LEASED, COMPLETED),
            retry: format!(
                "UPDATE {t} SET state = {PENDING}, token = NULL, lease_until = NULL, \
                 due_at = {now} + {}, last_error = {}, updated_at = {now} WHERE {}",
                p(1),
                p(2),
                held(3)
            ),
            release: format!(
                "UPDATE {t} SET state = {PENDING}, token = NULL, lease_until = NULL, due_at = {now}, \
                 attempts = attempts - 1, updated_at = {now} WHERE {}",
                held(1)
            ),
            dead_letter: format!(
                "UPDATE {t} SET state = {DEAD}, token = NULL, lease_until = NULL, last_error = {}, \
                 updated_at = {now} WHERE {}",
                p(1),
                held(2)
            ),
            replay: format!(
                "UPDATE {t} SET state = {PENDING}, attempts = 0, due_at = {now}, updated_at = {now} \
                 WHERE event_key = {} AND state = {DEAD}",
                p(1)
            ),
            discard: format!(
                "DELETE FROM {t} WHERE event_key = {} AND state = {DEAD}",
                p(1)
            ),
            purge: format!(
                "DELETE FROM {t} WHERE state = {COMPLETED} AND updated_at <= {now} - {}",
                p(1)
            ),
            get: format!(
                "SELECT {dead_columns} FROM {t} WHERE event_key = {} AND state = {DEAD}",
                p(1)
            ),
            list: format!(
                "SELECT {}, scheme, delivery_id, event_type, matched_key, headers, {}, \
                 received_at, signed_at, attempts, last_error, updated_at FROM {t} WHERE state = {DEAD}",
                d.key_select, d.empty_blob
            ),
            // One indexed count per state (each reads only its state's
            // index entries), the completed ones counted up to a limit: the
            // cost never grows with the completed rows the retention keeps.
            stats: format!(
                "SELECT {now}, \
                 (SELECT CAST(COUNT(*) AS {int}) FROM {t} WHERE state = {PENDING}), \
                 (SELECT CAST(COUNT(*) AS {int}) FROM {t} WHERE state = {PENDING} AND due_at <= {now}), \
                 (SELECT MIN(due_at) FROM {t} WHERE state = {PENDING} AND due_at <= {now}), \
                 (SELECT CAST(COUNT(*) AS {int}) FROM {t} WHERE state = {LEASED}), \
                 (SELECT CAST(COUNT(*) AS {int}) FROM {t} WHERE state = {DEAD}), \
                 (SELECT CAST(COUNT(*) AS {int}) FROM (SELECT 1 AS one FROM {t} \
                 WHERE state = {COMPLETED} LIMIT {limit}) AS done), \
                 (SELECT CAST(COUNT(*) AS {int}) FROM {c} WHERE paused <> 0)",
                limit = super::COMPLETED_COUNT_LIMIT
            ),
            set_paused: format!(
                "UPDATE {c} SET paused = {}, updated_at = {now} WHERE id = 1 AND paused <> {}",
                p(1),
                p(2)
            ),
            paused: format!("SELECT CAST(paused AS {int}) FROM {c} WHERE id = 1"),
            deliveries: format!(
                "SELECT {}, scheme, delivery_id, event_type, matched_key, headers, {}, \
                 {DELIVERY_TAIL} FROM {t} WHERE ",
                d.key_select, d.empty_blob
            )
            .replace("{now}", now),
            delivery_get: format!(
                "SELECT {}, scheme, delivery_id, event_type, matched_key, headers, body, \
                 {DELIVERY_TAIL} FROM {t} WHERE event_key = {}",
                d.key_select,
                p(1)
            )
            .replace("{now}", now),
            control: c,
        }
    }

    /// The delivery listing's statement for `filter`, and the values to
    /// bind in order: one range of the `(state, received_at, event_key)`
    /// index from the cursor, in the filter's order.
    pub(crate) fn deliveries(&self, filter: &DeliveryFilter) -> (String, Vec<ListParam>) {
        let now = self.now;
        let mut sql = self.deliveries.clone();
        sql.push_str(&match filter.state {
            DeliveryState::Due => format!("state = {PENDING} AND due_at <= {now}"),
            DeliveryState::Retrying => format!("state = {PENDING} AND due_at > {now}"),
            DeliveryState::InFlight => format!("state = {LEASED}"),
            DeliveryState::Dead => format!("state = {DEAD}"),
            DeliveryState::Completed => format!("state = {COMPLETED}"),
        });
        let mut params = Vec::new();
        let mut next = |sql: &mut String, condition: &str, value: ListParam| {
            params.push(value);
            let placeholder = (self.param)(params.len());
            sql.push_str(&condition.replace('?', &placeholder));
        };
        let text = |value: &Option<String>| value.clone().map(ListParam::Text);
        for (condition, value) in [
            (" AND scheme = ?", text(&filter.scheme)),
            (" AND event_type = ?", text(&filter.event_type)),
            (" AND delivery_id = ?", text(&filter.delivery_id)),
            (
                " AND received_at >= ?",
                filter
                    .received_from
                    .map(|t| ListParam::Int(super::to_ms(t))),
            ),
            (
                " AND received_at < ?",
                filter
                    .received_until
                    .map(|t| ListParam::Int(super::to_ms(t))),
            ),
        ] {
            if let Some(value) = value {
                next(&mut sql, condition, value);
            }
        }
        let newest = filter.order == DeliveryOrder::NewestFirst;
        let (past, direction) = if newest { ('<', "DESC") } else { ('>', "ASC") };
        if let Some(after) = &filter.after {
            // (received_at, event_key) past (ms, key), spelled out for every dialect.
            next(
                &mut sql,
                &format!(" AND (received_at {past} ?"),
                ListParam::Int(after.received_at_ms),
            );
            next(
                &mut sql,
                " OR (received_at = ?",
                ListParam::Int(after.received_at_ms),
            );
            next(
                &mut sql,
                &format!(" AND event_key {past} ?))"),
                ListParam::Text(after.key.clone()),
            );
        }
        sql.push_str(&format!(
            " ORDER BY received_at {direction}, event_key {direction} LIMIT {}",
            filter.page_size()
        ));
        (sql, params)
    }

    /// The listing statement for `filter`, and the values to bind in order.
    pub(crate) fn list(&self, filter: &DeadLetterFilter) -> (String, Vec<ListParam>) {
        let mut sql = self.list.clone();
        let mut params = Vec::new();
        let mut next = |sql: &mut String, condition: &str, value: ListParam| {
            params.push(value);
            let placeholder = (self.param)(params.len());
            sql.push_str(&condition.replace('?', &placeholder));
        };
        if let Some(scheme) = &filter.scheme {
            next(&mut sql, " AND scheme = ?", ListParam::Text(scheme.clone()));
        }
        if let Some(kind) = &filter.event_type {
            next(
                &mut sql,
                " AND event_type = ?",
                ListParam::Text(kind.clone()),
            );
        }
        if let Some(from) = filter.received_from {
            next(
                &mut sql,
                " AND received_at >= ?",
                ListParam::Int(super::to_ms(from)),
            );
        }
        if let Some(until) = filter.received_until {
            next(
                &mut sql,
                " AND received_at < ?",
                ListParam::Int(super::to_ms(until)),
            );
        }
        if let Some(after) = &filter.after {
            // (received_at, event_key) > (ms, key), spelled out for every dialect.
            next(
                &mut sql,
                " AND (received_at > ?",
                ListParam::Int(after.received_at_ms),
            );
            next(
                &mut sql,
                " OR (received_at = ?",
                ListParam::Int(after.received_at_ms),
            );
            next(
                &mut sql,
                " AND event_key > ?))",
                ListParam::Text(after.key.clone()),
            );
        }
        sql.push_str(" ORDER BY received_at, event_key LIMIT ");
        sql.push_str(&filter.page_size().to_string());
        (sql, params)
    }
}

/// The columns a delivery row ends with, after the body, in [`DeliveryRow`]
/// order (`{now}` is the dialect's clock).
const DELIVERY_TAIL: &str = "received_at, signed_at, attempts, last_error, updated_at, state, \
     due_at, lease_until, {now}";

/// A delivery row: the head, the body, then [`DELIVERY_TAIL`].
pub(crate) type DeliveryRow = (
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    String,
    Vec<u8>,
    i64,
    Option<i64>,
    i64,
    Option<String>,
    i64,
    i64,
    Option<i64>,
    Option<i64>,
    i64,
);

pub(crate) fn delivery(row: DeliveryRow) -> Delivery {
    let (
        key,
        scheme,
        delivery_id,
        event_type,
        matched_key,
        headers,
        body,
        received,
        signed,
        n,
        error,
        updated,
        state,
        due_at,
        lease_until,
        now,
    ) = row;
    let state = match state {
        PENDING if due_at.is_some_and(|at| at > now) => DeliveryState::Retrying,
        PENDING => DeliveryState::Due,
        LEASED => DeliveryState::InFlight,
        COMPLETED => DeliveryState::Completed,
        _ => DeliveryState::Dead,
    };
    Delivery {
        meta: meta(
            (key, scheme, delivery_id, event_type, matched_key, headers),
            received,
            signed,
        ),
        state,
        attempts: u32::try_from(n).unwrap_or(u32::MAX),
        last_error: error,
        due_at: due_at
            .filter(|_| matches!(state, DeliveryState::Due | DeliveryState::Retrying))
            .map(from_ms),
        lease_until: lease_until
            .filter(|_| state == DeliveryState::InFlight)
            .map(from_ms),
        updated_at: from_ms(updated),
        body: body.into(),
    }
}

/// A value bound to the dead-letter listing.
pub(crate) enum ListParam {
    Text(String),
    Int(i64),
}

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

/// Implements for `$inbox` (fields `pool`, `sql: Arc<InboxStatements>`,
/// `command_timeout`) the [`Inbox`](crate::inbox::Inbox) methods that are
/// the same in every dialect; the backend supplies `accept_event`,
/// `lease_events` and `complete_events` (without the timeout).
macro_rules! sql_inbox {
    ($inbox:ident, $pool:ty, $db:ty) => {
        const _: () = {
            use std::time::Duration;

            use $crate::dedup::sql::within;
            use $crate::inbox::sql::{DeadRow, ListParam, dead};
            use $crate::inbox::{
                Accepted, ClaimToken, DeadLetter, DeadLetterCursor, DeadLetterFilter,
                DeadLetterPage, Inbox, InboxError, InboxStats, LeasedEvent, NewEvent, Transition,
                millis, truncate_error,
            };

            impl std::fmt::Debug for $inbox {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.debug_struct(stringify!($inbox))
                        .field("table", &self.sql.table)
                        .field("command_timeout", &self.command_timeout)
                        .finish_non_exhaustive()
                }
            }

            impl $inbox {
                /// The table's name.
                #[must_use]
                pub fn table(&self) -> &str {
                    &self.sql.table
                }

                /// The connection pool.
                #[must_use]
                pub fn pool(&self) -> &$pool {
                    &self.pool
                }

                /// Runs a token-checked statement bound with `lead` (if any)
                /// then the `text` values; applied when it matched a row.
                async fn transition(
                    &self,
                    statement: &str,
                    lead: Option<i64>,
                    text: &[&str],
                ) -> Result<Transition, InboxError> {
                    let mut query = sqlx::query(statement);
                    if let Some(value) = lead {
                        query = query.bind(value);
                    }
                    for value in text {
                        query = query.bind(*value);
                    }
                    let done = within(self.command_timeout, query.execute(&self.pool)).await?;
                    Ok(if done.rows_affected() > 0 {
                        Transition::Applied
                    } else {
                        Transition::Stale
                    })
                }
            }

            #[async_trait::async_trait]
            impl $crate::inbox::TransactionalInbox for $inbox {
                type Database = $db;

                async fn begin(&self) -> Result<sqlx::Transaction<'static, $db>, InboxError> {
                    Ok(within(self.command_timeout, self.pool.begin()).await?)
                }

                async fn complete_in(
                    &self,
                    tx: &mut sqlx::Transaction<'static, $db>,
                    key: &str,
                    token: ClaimToken,
                ) -> Result<Transition, InboxError> {
                    let done = within(
                        self.command_timeout,
                        sqlx::query(&self.sql.complete)
                            .bind(key)
                            .bind(token.to_hex())
                            .execute(&mut **tx),
                    )
                    .await?;
                    Ok(if done.rows_affected() > 0 {
                        Transition::Applied
                    } else {
                        Transition::Stale
                    })
                }
            }

            #[async_trait::async_trait]
            impl Inbox for $inbox {
                async fn accept(&self, event: &NewEvent) -> Result<Accepted, InboxError> {
                    Ok(within(self.command_timeout, self.accept_event(event)).await?)
                }

                async fn lease(
                    &self,
                    token: ClaimToken,
                    batch: u32,
                    lease: Duration,
                    max_attempts: u32,
                ) -> Result<Vec<LeasedEvent>, InboxError> {
                    let max = i64::from(max_attempts.max(1));
                    within(
                        self.command_timeout,
                        self.lease_events(token, i64::from(batch.max(1)), millis(lease), max),
                    )
                    .await
                    .map_err(InboxError::from)
                }

                async fn extend(
                    &self,
                    key: &str,
                    token: ClaimToken,
                    lease: Duration,
                ) -> Result<Transition, InboxError> {
                    self.transition(
                        &self.sql.extend,
                        Some(millis(lease)),
                        &[key, &token.to_hex()],
                    )
                    .await
                }

                async fn complete(
                    &self,
                    key: &str,
                    token: ClaimToken,
                ) -> Result<Transition, InboxError> {
                    self.transition(&self.sql.complete, None, &[key, &token.to_hex()])
                        .await
                }

                async fn complete_many(
                    &self,
                    done: &[(&str, ClaimToken)],
                ) -> Result<Vec<Transition>, InboxError> {
                    if done.is_empty() {
                        return Ok(Vec::new());
                    }
                    Ok(within(self.command_timeout, self.complete_events(done)).await?)
                }

                async fn retry(
                    &self,
                    key: &str,
                    token: ClaimToken,
                    delay: Duration,
                    error: &str,
                ) -> Result<Transition, InboxError> {
                    self.transition(
                        &self.sql.retry,
                        Some(millis(delay)),
                        &[truncate_error(error), key, &token.to_hex()],
                    )
                    .await
                }

                async fn release(
                    &self,
                    key: &str,
                    token: ClaimToken,
                ) -> Result<Transition, InboxError> {
                    self.transition(&self.sql.release, None, &[key, &token.to_hex()])
                        .await
                }

                async fn dead_letter(
                    &self,
                    key: &str,
                    token: ClaimToken,
                    error: &str,
                ) -> Result<Transition, InboxError> {
                    self.transition(
                        &self.sql.dead_letter,
                        None,
                        &[truncate_error(error), key, &token.to_hex()],
                    )
                    .await
                }

                async fn dead_letters(
                    &self,
                    filter: &DeadLetterFilter,
                ) -> Result<DeadLetterPage, InboxError> {
                    let (statement, params) = self.sql.list(filter);
                    let mut query = sqlx::query_as::<_, DeadRow>(&statement);
                    for param in params {
                        query = match param {
                            ListParam::Text(text) => query.bind(text),
                            ListParam::Int(int) => query.bind(int),
                        };
                    }
                    let rows = within(self.command_timeout, query.fetch_all(&self.pool)).await?;
                    let items: Vec<DeadLetter> = rows.into_iter().map(dead).collect();
                    let full = items.len() >= filter.page_size() as usize;
                    let next = items.last().filter(|_| full).map(|last| DeadLetterCursor {
                        received_at_ms: $crate::inbox::to_ms(last.meta.received_at),
                        key: last.meta.key.clone(),
                    });
                    let examined = items.len() as u64;
                    Ok(DeadLetterPage {
                        items,
                        next,
                        examined,
                    })
                }

                async fn dead_letter_get(
                    &self,
                    key: &str,
                ) -> Result<Option<DeadLetter>, InboxError> {
                    let row = within(
                        self.command_timeout,
                        sqlx::query_as::<_, DeadRow>(&self.sql.get)
                            .bind(key)
                            .fetch_optional(&self.pool),
                    )
                    .await?;
                    Ok(row.map(dead))
                }

                async fn replay(&self, key: &str) -> Result<Transition, InboxError> {
                    self.transition(&self.sql.replay, None, &[key]).await
                }

                async fn discard(&self, key: &str) -> Result<Transition, InboxError> {
                    self.transition(&self.sql.discard, None, &[key]).await
                }

                async fn purge_completed(&self, older_than: Duration) -> Result<u64, InboxError> {
                    let done = within(
                        self.command_timeout,
                        sqlx::query(&self.sql.purge)
                            .bind(millis(older_than))
                            .execute(&self.pool),
                    )
                    .await?;
                    // The activity counters past their retention: best
                    // effort (the table is missing until `migrate()` ran).
                    let prune = $crate::inbox::sql::activity_prune(&self.sql, ACTIVITY_MINUTE);
                    if let Err(error) = within(
                        self.command_timeout,
                        sqlx::query(&prune).execute(&self.pool),
                    )
                    .await
                    {
                        tracing::debug!(%error, "could not prune the inbox's activity counters");
                    }
                    Ok(done.rows_affected())
                }

                async fn stats(&self) -> Result<InboxStats, InboxError> {
                    let (now, pending, due, oldest, in_flight, dead, completed, paused): (
                        i64,
                        i64,
                        i64,
                        Option<i64>,
                        i64,
                        i64,
                        i64,
                        i64,
                    ) = within(
                        self.command_timeout,
                        sqlx::query_as(&self.sql.stats).fetch_one(&self.pool),
                    )
                    .await?;
                    let count = |n: i64| u64::try_from(n).unwrap_or(0);
                    Ok(InboxStats {
                        pending: count(pending),
                        due: count(due),
                        oldest_due_age: oldest.map(|at| {
                            Duration::from_millis(
                                u64::try_from(now.saturating_sub(at)).unwrap_or(0),
                            )
                        }),
                        in_flight: count(in_flight),
                        dead: count(dead),
                        completed: count(completed),
                        paused: paused > 0,
                    })
                }

                async fn set_paused(&self, paused: bool) -> Result<bool, InboxError> {
                    let flag = i64::from(paused);
                    let done = within(
                        self.command_timeout,
                        sqlx::query(&self.sql.set_paused)
                            .bind(flag)
                            .bind(flag)
                            .execute(&self.pool),
                    )
                    .await?;
                    let changed = done.rows_affected() > 0;
                    if !changed {
                        // Already so, or no control row (never migrated).
                        self.paused().await?;
                    }
                    $crate::inbox::signals::pause_set(paused, changed);
                    Ok(changed)
                }

                async fn paused(&self) -> Result<bool, InboxError> {
                    let row: Option<(i64,)> = within(
                        self.command_timeout,
                        sqlx::query_as(&self.sql.paused).fetch_optional(&self.pool),
                    )
                    .await?;
                    match row {
                        Some((flag,)) => Ok(flag != 0),
                        None => Err(InboxError::Protocol(format!(
                            "the inbox's control table {} has no row: run migrate()",
                            self.sql.control
                        ))),
                    }
                }

                async fn deliveries(
                    &self,
                    filter: &$crate::inbox::DeliveryFilter,
                ) -> Result<$crate::inbox::DeliveryPage, InboxError> {
                    let (statement, params) = self.sql.deliveries(filter);
                    let mut query =
                        sqlx::query_as::<_, $crate::inbox::sql::DeliveryRow>(&statement);
                    for param in params {
                        query = match param {
                            ListParam::Text(text) => query.bind(text),
                            ListParam::Int(int) => query.bind(int),
                        };
                    }
                    let rows = within(self.command_timeout, query.fetch_all(&self.pool)).await?;
                    let items: Vec<$crate::inbox::Delivery> =
                        rows.into_iter().map($crate::inbox::sql::delivery).collect();
                    let full = items.len() >= filter.page_size() as usize;
                    let next =
                        items
                            .last()
                            .filter(|_| full)
                            .map(|last| $crate::inbox::DeliveryCursor {
                                order: filter.order,
                                received_at_ms: $crate::inbox::to_ms(last.meta.received_at),
                                key: last.meta.key.clone(),
                            });
                    Ok($crate::inbox::DeliveryPage { items, next })
                }

                async fn delivery_get(
                    &self,
                    key: &str,
                ) -> Result<Option<$crate::inbox::Delivery>, InboxError> {
                    let row = within(
                        self.command_timeout,
                        sqlx::query_as::<_, $crate::inbox::sql::DeliveryRow>(
                            &self.sql.delivery_get,
                        )
                        .bind(key)
                        .fetch_optional(&self.pool),
                    )
                    .await?;
                    Ok(row.map($crate::inbox::sql::delivery))
                }

                async fn activity(
                    &self,
                    minutes: u32,
                ) -> Result<$crate::inbox::Activity, InboxError> {
                    let minutes = $crate::inbox::activity::clamp_minutes(minutes);
                    let statement = $crate::inbox::sql::activity_read(
                        &self.sql,
                        ACTIVITY_MINUTE,
                        DIALECT.int,
                        &(DIALECT.param)(1),
                    );
                    let rows: Vec<(i64, i64, i64)> = within(
                        self.command_timeout,
                        sqlx::query_as(&statement)
                            .bind(i64::from(minutes))
                            .fetch_all(&self.pool),
                    )
                    .await?;
                    let now = rows
                        .iter()
                        .find(|(_, kind, _)| *kind == 0)
                        .map(|(minute, _, _)| *minute)
                        .ok_or_else(|| {
                            InboxError::Protocol("the activity read returned no clock".into())
                        })?;
                    Ok($crate::inbox::Activity::from_rows(now, minutes, rows))
                }
            }
        };
    };
}
pub(crate) use sql_inbox;

/// The `accept_event` and `lease_events` of a backend with
/// `INSERT … ON CONFLICT DO NOTHING` and `UPDATE … RETURNING` (PostgreSQL, SQLite).
#[cfg(any(feature = "postgres", feature = "sqlite"))]
macro_rules! returning_ops {
    ($inbox:ident) => {
        impl $inbox {
            async fn accept_event(
                &self,
                event: &$crate::inbox::NewEvent,
            ) -> Result<$crate::inbox::Accepted, sqlx::Error> {
                let statement = format!("{} ON CONFLICT (event_key) DO NOTHING", self.sql.accept);
                let done = sqlx::query(&statement)
                    .bind(event.stored_key())
                    .bind(&event.scheme)
                    .bind(&event.delivery_id)
                    .bind(&event.event_type)
                    .bind(&event.matched_key)
                    .bind($crate::inbox::encode_headers(&event.headers))
                    .bind(event.body.as_ref())
                    .bind(event.signed_at.and_then(|s| i64::try_from(s).ok()))
                    .execute(&self.pool)
                    .await?;
                Ok(if done.rows_affected() > 0 {
                    $crate::inbox::Accepted::Stored
                } else {
                    $crate::inbox::Accepted::Duplicate
                })
            }

            async fn lease_events(
                &self,
                token: $crate::inbox::ClaimToken,
                batch: i64,
                lease_ms: i64,
                max_attempts: i64,
            ) -> Result<Vec<$crate::inbox::LeasedEvent>, sqlx::Error> {
                let mut lease = sqlx::query_as(&self.sql.lease)
                    .bind(token.to_hex())
                    .bind(lease_ms)
                    .bind(max_attempts)
                    .bind(batch);
                if DIALECT.reap_in_lease {
                    lease = lease.bind($crate::inbox::EXPIRED_ON_LAST_ATTEMPT);
                } else {
                    sqlx::query(&self.sql.reap)
                        .bind($crate::inbox::EXPIRED_ON_LAST_ATTEMPT)
                        .bind(max_attempts)
                        .execute(&self.pool)
                        .await?;
                }
                let rows: Vec<$crate::inbox::sql::LeaseRow> = lease.fetch_all(&self.pool).await?;
                Ok(rows
                    .into_iter()
                    .map(|row| $crate::inbox::sql::leased(row, token))
                    .collect())
            }
        }
    };
}
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) use returning_ops;

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
