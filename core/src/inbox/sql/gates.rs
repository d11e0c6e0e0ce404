//! The SQL inboxes' gates (see [`gates`](crate::inbox::gates)): two tables
//! `migrate()` creates.
//!
//! `<table>_gates`, one row per selector paused or limited:
//!
//! | column | meaning |
//! |---|---|
//! | `selector` | its text form (primary key) |
//! | `scheme_like`, `type_like` | its patterns as `LIKE` patterns (escape `!`), lowercase |
//! | `paused` | 1 while paused: the lease statements skip the events it matches |
//! | `concurrency`, `per_second` | the limit a worker last took a permit under (NULL: none) |
//! | `tokens`, `refilled_at` | the rate's bucket, in thousandths of a token, and its last refill (ms) |
//! | `updated_at` | the last change (ms) |
//!
//! `<table>_permits`, one row per permit held: `selector`, `holder` (the
//! event's key; primary key together) and `held_until` (ms).
//!
//! A permit is taken in one transaction whose first statement upserts the
//! gate's row: that row's lock serialises the takers of one selector (on
//! SQLite the write lock does), so the count of permits each reads is the
//! count every other taker left. Releasing deletes one row by its key.

use super::InboxStatements;
use super::search::SearchSql;
use crate::inbox::gates::{Gate, Limit, Selector};

/// The gates table, quoted.
pub(crate) fn table(sql: &InboxStatements) -> String {
    let q = sql.quoted.chars().next().unwrap_or('"');
    format!("{q}{}_gates{q}", sql.table)
}

/// The permits table, quoted.
pub(crate) fn permits(sql: &InboxStatements) -> String {
    let q = sql.quoted.chars().next().unwrap_or('"');
    format!("{q}{}_permits{q}", sql.table)
}

/// The `CREATE TABLE IF NOT EXISTS` statements of both tables.
pub(crate) fn create(sql: &InboxStatements) -> [String; 2] {
    let (g, p) = (table(sql), permits(sql));
    match sql.search {
        SearchSql::Mysql => [
            format!(
                "CREATE TABLE IF NOT EXISTS {g} (selector VARCHAR(200) CHARACTER SET ascii \
                 COLLATE ascii_bin NOT NULL, scheme_like VARCHAR(400) NOT NULL, \
                 type_like VARCHAR(400) NOT NULL, paused BIGINT NOT NULL, concurrency BIGINT, \
                 per_second BIGINT, tokens BIGINT NOT NULL, refilled_at BIGINT NOT NULL, \
                 updated_at BIGINT NOT NULL, PRIMARY KEY (selector)) ENGINE=InnoDB \
                 DEFAULT CHARSET=utf8mb4"
            ),
            format!(
                "CREATE TABLE IF NOT EXISTS {p} (selector VARCHAR(200) CHARACTER SET ascii \
                 COLLATE ascii_bin NOT NULL, holder VARCHAR(255) CHARACTER SET utf8mb4 \
                 COLLATE utf8mb4_bin NOT NULL, held_until BIGINT NOT NULL, \
                 PRIMARY KEY (selector, holder)) ENGINE=InnoDB"
            ),
        ],
        SearchSql::Sqlite | SearchSql::Postgres => {
            let int = if sql.search == SearchSql::Sqlite {
                "INTEGER"
            } else {
                "BIGINT"
            };
            [
                format!(
                    "CREATE TABLE IF NOT EXISTS {g} (selector TEXT NOT NULL PRIMARY KEY, \
                     scheme_like TEXT NOT NULL, type_like TEXT NOT NULL, paused {int} NOT NULL, \
                     concurrency {int}, per_second {int}, tokens {int} NOT NULL, \
                     refilled_at {int} NOT NULL, updated_at {int} NOT NULL)"
                ),
                format!(
                    "CREATE TABLE IF NOT EXISTS {p} (selector TEXT NOT NULL, holder TEXT NOT NULL, \
                     held_until {int} NOT NULL, PRIMARY KEY (selector, holder))"
                ),
            ]
        }
    }
}

/// Both tables' columns, in no row: the schema check's probe.
pub(crate) fn probe(sql: &InboxStatements) -> String {
    format!(
        "SELECT g.selector, g.scheme_like, g.type_like, g.paused, g.concurrency, g.per_second, \
         g.tokens, g.refilled_at, g.updated_at, p.holder, p.held_until FROM {} g \
         JOIN {} p ON p.selector = g.selector WHERE 1 = 0",
        table(sql),
        permits(sql)
    )
}

/// The condition the lease statements add: no paused gate matches the row
/// (its `scheme` and `event_type`). The gates table is tiny (at most
/// [`MAX_GATES`](crate::inbox::gates::MAX_GATES) rows).
pub(crate) fn unpaused(table: &str, quote: char) -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM {quote}{table}_gates{quote} WHERE paused <> 0 \
         AND LOWER(scheme) LIKE scheme_like ESCAPE '!' \
         AND LOWER(COALESCE(event_type, '')) LIKE type_like ESCAPE '!')"
    )
}

/// The statements of the gates, formatted once per inbox.
#[derive(Default)]
pub(crate) struct GateStatements {
    /// Bound: paused flag, selector, paused flag.
    pub(crate) set_paused: String,
    /// Bound: selector, scheme like, type like.
    pub(crate) insert_paused: String,
    /// Bound: selector. Deletes a resumed gate without a limit.
    pub(crate) forget: String,
    /// No parameters.
    pub(crate) count: String,
    /// No parameters.
    pub(crate) list: String,
    /// Bound: selector, scheme like, type like, concurrency, per second,
    /// tokens; then concurrency, per second again on MySQL.
    pub(crate) upsert_limit: String,
    /// Bound: selector.
    pub(crate) bucket: String,
    /// Bound: now, selector.
    pub(crate) expire: String,
    /// Bound: holder, selector.
    pub(crate) held: String,
    /// Bound: until, selector, holder.
    pub(crate) renew: String,
    /// Bound: selector, holder, until.
    pub(crate) take: String,
    /// Bound: tokens, refilled at, selector.
    pub(crate) spend: String,
    /// Bound: selector, holder.
    pub(crate) release: String,
}

impl GateStatements {
    pub(crate) fn new(sql: &InboxStatements) -> Self {
        let (g, t) = (table(sql), permits(sql));
        let p = sql.param;
        let now = sql.now;
        let mysql = sql.search == SearchSql::Mysql;
        let (insert_ignore, ignore_tail) = if mysql {
            ("INSERT IGNORE INTO", "")
        } else {
            ("INSERT INTO", " ON CONFLICT (selector) DO NOTHING")
        };
        let upsert_tail = if mysql {
            format!(
                " ON DUPLICATE KEY UPDATE concurrency = {}, per_second = {}, updated_at = {now}",
                p(7),
                p(8)
            )
        } else {
            format!(
                " ON CONFLICT (selector) DO UPDATE SET concurrency = excluded.concurrency, \
                 per_second = excluded.per_second, updated_at = {now}"
            )
        };
        Self {
            set_paused: format!(
                "UPDATE {g} SET paused = {}, updated_at = {now} WHERE selector = {} \
                 AND paused <> {}",
                p(1),
                p(2),
                p(3)
            ),
            insert_paused: format!(
                "{insert_ignore} {g} (selector, scheme_like, type_like, paused, concurrency, \
                 per_second, tokens, refilled_at, updated_at) VALUES ({}, {}, {}, 1, NULL, NULL, \
                 0, {now}, {now}){ignore_tail}",
                p(1),
                p(2),
                p(3)
            ),
            forget: format!(
                "DELETE FROM {g} WHERE selector = {} AND paused = 0 AND concurrency IS NULL \
                 AND per_second IS NULL",
                p(1)
            ),
            count: format!("SELECT CAST(COUNT(*) AS {}) FROM {g}", int(sql)),
            list: format!(
                "SELECT {}, CAST(g.paused AS {i}), CAST(g.concurrency AS {i}), \
                 CAST(g.per_second AS {i}), CAST(g.updated_at AS {i}), \
                 (SELECT CAST(COUNT(*) AS {i}) FROM {t} p WHERE p.selector = g.selector \
                 AND p.held_until > {now}) FROM {g} g ORDER BY g.selector",
                // MySQL reports an `ascii_bin` column as binary.
                if mysql {
                    "CAST(g.selector AS CHAR)"
                } else {
                    "g.selector"
                },
                i = int(sql)
            ),
            upsert_limit: format!(
                "INSERT INTO {g} (selector, scheme_like, type_like, paused, concurrency, \
                 per_second, tokens, refilled_at, updated_at) VALUES ({}, {}, {}, 0, {}, {}, {}, \
                 {now}, {now}){upsert_tail}",
                p(1),
                p(2),
                p(3),
                p(4),
                p(5),
                p(6)
            ),
            bucket: format!(
                "SELECT CAST(tokens AS {i}), CAST(refilled_at AS {i}), CAST({now} AS {i}) \
                 FROM {g} WHERE selector = {}",
                p(1),
                i = int(sql)
            ),
            expire: format!(
                "DELETE FROM {t} WHERE selector = {} AND held_until <= {}",
                p(1),
                p(2)
            ),
            held: format!(
                "SELECT CAST(COUNT(*) AS {i}), \
                 CAST(COALESCE(SUM(CASE WHEN holder = {} THEN 1 ELSE 0 END), 0) AS {i}) \
                 FROM {t} WHERE selector = {}",
                p(1),
                p(2),
                i = int(sql)
            ),
            renew: format!(
                "UPDATE {t} SET held_until = {} WHERE selector = {} AND holder = {}",
                p(1),
                p(2),
                p(3)
            ),
            take: format!(
                "INSERT INTO {t} (selector, holder, held_until) VALUES ({}, {}, {})",
                p(1),
                p(2),
                p(3)
            ),
            spend: format!(
                "UPDATE {g} SET tokens = {}, refilled_at = {} WHERE selector = {}",
                p(1),
                p(2),
                p(3)
            ),
            release: format!(
                "DELETE FROM {t} WHERE selector = {} AND holder = {}",
                p(1),
                p(2)
            ),
        }
    }
}

fn int(sql: &InboxStatements) -> &'static str {
    match sql.search {
        SearchSql::Sqlite => "INTEGER",
        SearchSql::Postgres => "BIGINT",
        SearchSql::Mysql => "SIGNED",
    }
}

/// A row of [`GateStatements::list`].
pub(crate) type GateRow = (String, i64, Option<i64>, Option<i64>, i64, i64);

/// The gates read back; a row whose selector no longer parses (written by
/// hand) is skipped.
pub(crate) fn gates(rows: Vec<GateRow>) -> Vec<Gate> {
    rows.into_iter()
        .filter_map(
            |(selector, paused, concurrency, per_second, updated_at, running)| {
                let selector: Selector = selector.parse().ok()?;
                let limit = (concurrency.is_some() || per_second.is_some()).then(|| Limit {
                    concurrency: concurrency.and_then(|n| u32::try_from(n).ok()),
                    per_second: per_second.and_then(|n| u32::try_from(n).ok()),
                });
                Some(Gate {
                    selector,
                    paused: paused != 0,
                    limit,
                    running: u64::try_from(running).unwrap_or(0),
                    updated_at,
                })
            },
        )
        .collect()
}

/// The gate methods of a SQL inbox (fields `pool`, `sql`), called by the [`Inbox`](crate::inbox::Inbox) impl.
macro_rules! sql_gates {
    ($inbox:ident) => {
        impl $inbox {
            async fn gate_set_paused(
                &self,
                selector: &$crate::inbox::gates::Selector,
                paused: bool,
            ) -> Result<Option<bool>, sqlx::Error> {
                let g = &self.sql.gates;
                let name = selector.to_string();
                let flag = i64::from(paused);
                let changed = sqlx::query(&g.set_paused)
                    .bind(flag)
                    .bind(&name)
                    .bind(flag)
                    .execute(&self.pool)
                    .await?
                    .rows_affected()
                    > 0;
                if changed {
                    if !paused {
                        sqlx::query(&g.forget)
                            .bind(&name)
                            .execute(&self.pool)
                            .await?;
                    }
                    return Ok(Some(true));
                }
                if !paused {
                    return Ok(Some(false));
                }
                let (held,): (i64,) = sqlx::query_as(&g.count).fetch_one(&self.pool).await?;
                if usize::try_from(held).unwrap_or(usize::MAX) >= $crate::inbox::gates::MAX_GATES {
                    // Too many gates: the caller refuses.
                    return Ok(None);
                }
                let inserted = sqlx::query(&g.insert_paused)
                    .bind(&name)
                    .bind(selector.scheme_like())
                    .bind(selector.type_like())
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
                Ok(Some(inserted > 0))
            }

            async fn gate_list(&self) -> Result<Vec<$crate::inbox::gates::Gate>, sqlx::Error> {
                let rows: Vec<$crate::inbox::sql::gates::GateRow> =
                    sqlx::query_as(&self.sql.gates.list)
                        .fetch_all(&self.pool)
                        .await?;
                Ok($crate::inbox::sql::gates::gates(rows))
            }

            async fn permit_acquire(
                &self,
                selector: &$crate::inbox::gates::Selector,
                limit: $crate::inbox::gates::Limit,
                holder: &str,
                hold: std::time::Duration,
            ) -> Result<$crate::inbox::gates::Permit, sqlx::Error> {
                use $crate::inbox::gates::{DEFER_BUSY, Permit, refill, until_token};
                let g = &self.sql.gates;
                let name = selector.to_string();
                let concurrency = limit.concurrency.map(i64::from);
                let per_second = limit.per_second.map(i64::from);
                let full = per_second.unwrap_or(0).saturating_mul(1000);
                let mut tx = self.pool.begin().await?;
                // First, the write that locks the gate's row.
                let mut upsert = sqlx::query(&g.upsert_limit)
                    .bind(&name)
                    .bind(selector.scheme_like())
                    .bind(selector.type_like())
                    .bind(concurrency)
                    .bind(per_second)
                    .bind(full);
                if self.sql.search == $crate::inbox::sql::search::SearchSql::Mysql {
                    upsert = upsert.bind(concurrency).bind(per_second);
                }
                upsert.execute(&mut *tx).await?;
                let (tokens, refilled_at, now): (i64, i64, i64) = sqlx::query_as(&g.bucket)
                    .bind(&name)
                    .fetch_one(&mut *tx)
                    .await?;
                sqlx::query(&g.expire)
                    .bind(&name)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                let (count, mine): (i64, i64) = sqlx::query_as(&g.held)
                    .bind(holder)
                    .bind(&name)
                    .fetch_one(&mut *tx)
                    .await?;
                let until = now.saturating_add(i64::try_from(hold.as_millis()).unwrap_or(i64::MAX));
                if mine > 0 {
                    sqlx::query(&g.renew)
                        .bind(until)
                        .bind(&name)
                        .bind(holder)
                        .execute(&mut *tx)
                        .await?;
                    tx.commit().await?;
                    return Ok(Permit::Granted);
                }
                if concurrency.is_some_and(|c| count >= c) {
                    tx.commit().await?;
                    return Ok(Permit::Denied {
                        retry_after: DEFER_BUSY,
                    });
                }
                let mut left = tokens;
                if let Some(rate) = limit.per_second {
                    left = refill(tokens, now - refilled_at, rate);
                    if left < 1000 {
                        sqlx::query(&g.spend)
                            .bind(left)
                            .bind(now)
                            .bind(&name)
                            .execute(&mut *tx)
                            .await?;
                        tx.commit().await?;
                        return Ok(Permit::Denied {
                            retry_after: until_token(left, rate),
                        });
                    }
                    left -= 1000;
                }
                sqlx::query(&g.take)
                    .bind(&name)
                    .bind(holder)
                    .bind(until)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(&g.spend)
                    .bind(left)
                    .bind(now)
                    .bind(&name)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(Permit::Granted)
            }

            async fn permit_release(
                &self,
                selector: &$crate::inbox::gates::Selector,
                holder: &str,
            ) -> Result<(), sqlx::Error> {
                sqlx::query(&self.sql.gates.release)
                    .bind(selector.to_string())
                    .bind(holder)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }
        }
    };
}
pub(crate) use sql_gates;
