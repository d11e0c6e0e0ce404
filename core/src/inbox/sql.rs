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

use std::marker::PhantomData;
use std::time::Duration;

use crate::dedup::sql::{DEFAULT_COMMAND_TIMEOUT, SqlSettings, validate_table};

use super::{DeadLetter, DeadLetterFilter, EventMeta, LeasedEvent, decode_headers, from_ms};
use crate::dedup::ClaimToken;

/// The default table of the SQL inboxes.
pub const DEFAULT_INBOX_TABLE: &str = "webhooks_inbox";

pub(crate) const PENDING: i64 = 0;
pub(crate) const LEASED: i64 = 1;
pub(crate) const COMPLETED: i64 = 2;
pub(crate) const DEAD: i64 = 3;

/// The columns a lease returns, in [`LeaseRow`] order.
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
    /// Bound: key, scheme, delivery id, event type, matched key, headers, body, signed at.
    pub(crate) accept: String,
    /// Dead-letters the leases expired on their last attempt, skipping rows
    /// another transaction holds (`IN (SELECT … FOR UPDATE SKIP LOCKED)`);
    /// bound: error, max attempts.
    #[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
    pub(crate) reap: String,
    /// MySQL's reap, which cannot select from the table it updates: the
    /// keys, locked; bound: max attempts.
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(crate) reap_select: String,
    /// Then their update (`IN (` is last); bound: error, then the keys.
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(crate) reap_update: String,
    /// One-statement lease; bound: token, lease ms, max attempts, batch,
    /// and with [`Dialect::reap_in_lease`] the reap's error. MySQL leases in
    /// two statements instead (`lease_select`, `lease_update`).
    #[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
    pub(crate) lease: String,
    /// The keys of due rows, locked; bound: max attempts, batch.
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(crate) lease_select: String,
    /// The leased columns of the rows whose keys follow (`IN (` is last).
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(crate) lease_read: String,
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
}

impl InboxStatements {
    pub(crate) fn new(table: &str, d: &Dialect) -> Self {
        let q = d.quote;
        let t = format!("{q}{table}{q}");
        let now = d.now;
        let p = d.param;
        let int = d.int;
        let columns = LEASE_COLUMNS.replacen("event_key", d.key_select, 1);
        let dead_columns = format!("{columns}, last_error, updated_at");
        // A due row: pending and due, or leased with an expired lease and
        // attempts left (a takeover); parameter `n`: the max attempts.
        let due = |n: usize| {
            format!(
                "((state = {PENDING} AND due_at <= {now}) OR \
                 (state = {LEASED} AND lease_until <= {now} AND attempts < {}))",
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
            reap_select: format!(
                "SELECT {} FROM {t} WHERE {}{}",
                d.key_select,
                expired(1),
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
                 attempts = attempts + 1, updated_at = {now} WHERE event_key IN \
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
            lease_select: format!(
                "SELECT {} FROM {t} WHERE {} ORDER BY due_at LIMIT {}{}",
                d.key_select,
                due(1),
                p(2),
                d.lock
            ),
            lease_read: format!("SELECT {columns} FROM {t} WHERE event_key IN ("),
            lease_update: format!(
                "UPDATE {t}{} SET state = {LEASED}, token = {}, lease_until = {now} + {}, \
                 attempts = attempts + 1, updated_at = {now} WHERE event_key IN (",
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
            stats: format!(
                "SELECT {now}, \
                 CAST(COALESCE(SUM(CASE WHEN state = {PENDING} THEN 1 ELSE 0 END), 0) AS {int}), \
                 CAST(COALESCE(SUM(CASE WHEN state = {PENDING} AND due_at <= {now} THEN 1 ELSE 0 END), 0) AS {int}), \
                 MIN(CASE WHEN state = {PENDING} AND due_at <= {now} THEN due_at END), \
                 CAST(COALESCE(SUM(CASE WHEN state = {LEASED} THEN 1 ELSE 0 END), 0) AS {int}), \
                 CAST(COALESCE(SUM(CASE WHEN state = {DEAD} THEN 1 ELSE 0 END), 0) AS {int}), \
                 CAST(COALESCE(SUM(CASE WHEN state = {COMPLETED} THEN 1 ELSE 0 END), 0) AS {int}) \
                 FROM {t}"
            ),
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

/// A value bound to the dead-letter listing.
pub(crate) enum ListParam {
    Text(String),
    Int(i64),
}

/// Builds a SQL inbox from a URL: `SqliteInbox::builder`, `PostgresInbox::builder`
/// or `MySqlInbox::builder`, then `connect()`.
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
                    Ok(DeadLetterPage { items, next })
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
                    Ok(done.rows_affected())
                }

                async fn stats(&self) -> Result<InboxStats, InboxError> {
                    let (now, pending, due, oldest, in_flight, dead, completed): (
                        i64,
                        i64,
                        i64,
                        Option<i64>,
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
                        oldest_due_age: oldest
                            .map(|at| Duration::from_millis(u64::try_from(now - at).unwrap_or(0))),
                        in_flight: count(in_flight),
                        dead: count(dead),
                        completed: count(completed),
                    })
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
