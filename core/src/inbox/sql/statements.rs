//! The statements of one SQL inbox, formatted once per table and dialect
//! ([`InboxStatements`], from a [`Dialect`]), and the listings' statements
//! built per filter.

use super::{COMPLETED, DEAD, LEASED, PENDING};
use crate::inbox::{DeadLetterFilter, DeliveryFilter, DeliveryOrder, DeliveryState};

/// The columns a lease returns, in [`LeaseRow`](super::LeaseRow) order.
/// The lease's attempt count: one more, saturating well inside every
/// engine's integer range. A damaged or hand-edited row at the type's limit
/// would otherwise make the lease itself fail on every poll (PostgreSQL and
/// MySQL: out of range; SQLite: the sum turns into a `REAL` that no longer
/// decodes), stalling the whole inbox behind one row (found by the
/// `inbox_records` fuzz target).
const NEXT_ATTEMPT: &str = "CASE WHEN attempts < 2147483647 THEN attempts + 1 ELSE attempts END";

pub(crate) const LEASE_COLUMNS: &str = "event_key, scheme, delivery_id, event_type, matched_key, \
     headers, body, received_at, signed_at, attempts";

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
    /// PostgreSQL has; its lease then answers the rows in the order chosen),
    /// or the reap is a statement of its own.
    pub(crate) reap_in_lease: bool,
    /// The batch completion, from the quoted table, the clock expression and
    /// the completed state (see [`InboxStatements::complete_many`]).
    pub(crate) complete_many: fn(&str, &str, i64, i64) -> String,
    /// How a search's conditions are written.
    pub(crate) search: super::search::SearchSql,
}

/// The statements of one inbox, formatted once for its table. Each statement
/// uses its parameters once each, in binding order, so that MySQL's `?`
/// placeholders bind the same way as numbered ones.
pub(crate) struct InboxStatements {
    pub(crate) table: String,
    pub(crate) quoted: String,
    pub(crate) param: fn(usize) -> String,
    /// The dialect's clock expression.
    pub(crate) now: &'static str,
    /// How a search's conditions are written.
    pub(crate) search: super::search::SearchSql,
    /// Bound: key, scheme, delivery id, event type, matched key, headers, body, signed at.
    pub(crate) accept: String,
    /// Dead-letters the leases expired on their last attempt, skipping rows
    /// another transaction holds (`IN (SELECT … FOR UPDATE SKIP LOCKED)`);
    /// bound: error, max attempts.
    #[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
    pub(crate) reap: String,
    /// MySQL's lease select, one statement of two parts (`UNION ALL`),
    /// each locked (`FOR UPDATE SKIP LOCKED`) and each one range of one
    /// index read in its order (no sort, no row locked but those returned),
    /// the leased columns ([`LEASE_COLUMNS`], attempts before this lease),
    /// then the part (0 or 1) and the row's due time:
    ///
    /// 0. the expired leases, oldest first (`(state, lease_until)`): those on
    ///    their last attempt (to dead-letter: MySQL cannot select from the
    ///    table it updates) and, unless paused, those with attempts left (to
    ///    take over). Read only when a non-locking read of one row finds
    ///    one: a locking read steps over every entry that completed leases
    ///    left delete-marked past the range until InnoDB's purge removes
    ///    them, locking and checking each, while the non-locking one stops
    ///    at the end of its range (it reads `attempts`, outside the index,
    ///    so that InnoDB checks each entry against the range before it
    ///    reads the row: `SELECT 1` reads the index alone and steps over
    ///    them too; `lease_reads_past_no_unpurged_entries` in `mysql.rs`);
    /// 1. the due pending rows, oldest due first (`(state, due_at)`, forced:
    ///    the optimizer may otherwise read every pending entry from the
    ///    first, the range's start only a filter), from a due time (the
    ///    MySQL inbox's floor, see `mysql.rs`), unless paused. (The
    ///    one-statement lease's `pending OR taken over` condition cannot use
    ///    one index in order: InnoDB then reads and locks every pending row
    ///    to sort them, and concurrent workers skip them all.)
    ///
    /// Bound: max attempts, part 0's limit, part 1's first due time, part
    /// 1's limit.
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(crate) lease_select: String,
    /// Then their update (`IN (` is last); bound: error, then the keys.
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(crate) reap_update: String,
    /// One-statement lease; bound: token, lease ms, max attempts, batch,
    /// and with [`Dialect::reap_in_lease`] the reap's error (numbered
    /// parameters: max attempts and batch are used more than once). MySQL
    /// leases in a transaction instead (`lease_select`, `lease_update`).
    #[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
    pub(crate) lease: String,
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
    /// Hands a lease back unstarted, due later; bound: delay ms, key, token.
    pub(crate) defer: String,
    /// The gates' statements.
    pub(crate) gates: super::gates::GateStatements,
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
        // No paused gate matches the row (see `gates`).
        let unpaused = super::gates::unpaused(table, q);
        let dead_columns = format!("{columns}, last_error, updated_at");
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
        let mut made = Self {
            table: table.to_owned(),
            quoted: t.clone(),
            param: p,
            now,
            search: d.search,
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
            lease_select: format!(
                "(SELECT {columns}, CAST(0 AS SIGNED), due_at FROM {t} WHERE state = {LEASED} \
                 AND lease_until <= {now} \
                 AND (SELECT attempts FROM {t} WHERE state = {LEASED} AND lease_until <= {now} LIMIT 1) \
                 IS NOT NULL \
                 AND (attempts >= {} OR (NOT EXISTS (SELECT 1 FROM {c} WHERE paused <> 0) \
                 AND {unpaused})) \
                 ORDER BY lease_until LIMIT {}{lock}) UNION ALL \
                 (SELECT {columns}, CAST(1 AS SIGNED), due_at FROM {t} FORCE INDEX ({q}{table}_due{q}) \
                 WHERE state = {PENDING} AND due_at >= {} AND due_at <= {now} \
                 AND NOT EXISTS (SELECT 1 FROM {c} WHERE paused <> 0) AND {unpaused} \
                 ORDER BY due_at LIMIT {}{lock})",
                p(1),
                p(2),
                p(3),
                p(4),
                lock = d.lock
            ),
            reap_update: format!(
                "UPDATE {t}{} SET state = {DEAD}, token = NULL, lease_until = NULL, last_error = {}, \
                 updated_at = {now} WHERE event_key IN (",
                d.by_key,
                p(1)
            ),
            lease: {
                // Two index range reads, each in its own order, so nothing
                // is sorted and a lease's cost does not grow with the
                // backlog (one `pending OR taken over … ORDER BY due_at`
                // read and sorted every due row, and PostgreSQL compiled
                // that plan with its JIT at every lease): the expired
                // leases with attempts left (`(state, lease_until)`), then
                // the due pending rows (`(state, due_at)`), each up to the
                // batch, the takeovers chosen first.
                let open =
                    format!("NOT EXISTS (SELECT 1 FROM {c} WHERE paused <> 0) AND {unpaused}");
                let (reap, lock) = (
                    if d.reap_in_lease {
                        // The reap first, in the same statement (one round
                        // trip): the rows it dead-letters (attempts >= max)
                        // are never taken over (attempts < max).
                        format!(
                            "reaped AS (UPDATE {t} SET state = {DEAD}, token = NULL, \
                             lease_until = NULL, last_error = {}, updated_at = {now} \
                             WHERE event_key IN (SELECT event_key FROM {t} WHERE {}{})), ",
                            p(5),
                            expired(3),
                            d.lock
                        )
                    } else {
                        String::new()
                    },
                    d.lock,
                );
                let picked = format!(
                    "WITH {reap}taken AS (SELECT event_key AS k, lease_until AS pick_at FROM {t} \
                     WHERE state = {LEASED} AND lease_until <= {now} AND attempts < {max} AND {open} \
                     ORDER BY lease_until LIMIT {batch}{lock}), \
                     fresh AS (SELECT event_key AS k, due_at AS pick_at FROM {t} \
                     WHERE state = {PENDING} AND due_at <= {now} AND {open} \
                     ORDER BY due_at LIMIT {batch}{lock}), \
                     picked AS (SELECT k, part, pick_at FROM (SELECT k, 0 AS part, pick_at FROM taken \
                     UNION ALL SELECT k, 1 AS part, pick_at FROM fresh) AS c \
                     ORDER BY part, pick_at LIMIT {batch})",
                    max = p(3),
                    batch = p(4),
                );
                let set = format!(
                    "UPDATE {t} SET state = {LEASED}, token = {}, lease_until = {now} + {}, \
                     attempts = {NEXT_ATTEMPT}, updated_at = {now}",
                    p(1),
                    p(2)
                );
                if d.reap_in_lease {
                    // In the order chosen (PostgreSQL can return the
                    // chosen rows' columns from an `UPDATE … FROM`).
                    format!(
                        "{picked}, leased AS ({set} FROM picked WHERE event_key = picked.k \
                         RETURNING {columns}, part, pick_at) \
                         SELECT {columns} FROM leased ORDER BY part, pick_at"
                    )
                } else {
                    format!(
                        "{picked} {set} WHERE event_key IN (SELECT k FROM picked) RETURNING {columns}"
                    )
                }
            },
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
            defer: format!(
                "UPDATE {t} SET state = {PENDING}, token = NULL, lease_until = NULL, \
                 due_at = {now} + {}, attempts = attempts - 1, updated_at = {now} WHERE {}",
                p(1),
                held(2)
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
                limit = crate::inbox::COMPLETED_COUNT_LIMIT
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
            gates: super::gates::GateStatements::default(),
        };
        made.gates = super::gates::GateStatements::new(&made);
        made
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
                    .map(|t| ListParam::Int(crate::inbox::to_ms(t))),
            ),
            (
                " AND received_at < ?",
                filter
                    .received_until
                    .map(|t| ListParam::Int(crate::inbox::to_ms(t))),
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
        self.push_search(filter.search.as_ref(), &mut sql, &mut params);
        sql.push_str(&format!(
            " ORDER BY received_at {direction}, event_key {direction} LIMIT {}",
            filter.page_size()
        ));
        (sql, params)
    }

    /// Appends a search's conditions and their values.
    fn push_search(
        &self,
        search: Option<&crate::inbox::Search>,
        sql: &mut String,
        params: &mut Vec<ListParam>,
    ) {
        if let Some(search) = search {
            super::search::push(
                self.search,
                &self.table,
                search,
                &mut super::search::Builder {
                    sql,
                    params,
                    param: self.param,
                },
            );
        }
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
                ListParam::Int(crate::inbox::to_ms(from)),
            );
        }
        if let Some(until) = filter.received_until {
            next(
                &mut sql,
                " AND received_at < ?",
                ListParam::Int(crate::inbox::to_ms(until)),
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
        self.push_search(filter.search.as_ref(), &mut sql, &mut params);
        sql.push_str(" ORDER BY received_at, event_key LIMIT ");
        sql.push_str(&filter.page_size().to_string());
        (sql, params)
    }
}

/// The columns a delivery row ends with, after the body, in [`DeliveryRow`](super::DeliveryRow)
/// order (`{now}` is the dialect's clock).
pub(super) const DELIVERY_TAIL: &str = "received_at, signed_at, attempts, last_error, updated_at, state, \
     due_at, lease_until, {now}";

/// A value bound to the dead-letter listing.
pub(crate) enum ListParam {
    Text(String),
    Int(i64),
}
