//! What `connect` checks of an existing inbox table (issue 35, item 8).
//!
//! `migrate()` adds, beside the events table, the control table (the pause
//! flag, read by every lease) and the activity table (the per-minute
//! counters). A table made by an earlier version lacks them: accepts
//! succeeded while every lease failed (`no such table …_control`), and the
//! backlog grew silently. So `connect` probes an existing table's schema
//! with statements that read no row, and when a part is missing runs
//! `migrate()` (idempotent, additive) to add it; when the database refuses
//! (a role that may not create tables, a read-only file), `connect` fails
//! with an error naming `migrate()` and what is missing.
//!
//! An empty database is left alone: `connect` never creates the events
//! table itself (`migrate()` does, as before).

use super::InboxStatements;
use crate::inbox::{InboxError, OpenError};

/// What a probe found undefined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Undefined {
    /// The table does not exist.
    Table,
    /// A column does not exist.
    Column,
    /// The role may not read it (which MySQL also answers for a table that
    /// does not exist, rather than tell).
    Denied,
}

/// Every column the statements read or write, in no row: fails with an
/// undefined table when the events table is missing, an undefined column
/// when it lacks one.
pub(crate) fn columns_probe(sql: &InboxStatements) -> String {
    format!(
        "SELECT event_key, scheme, delivery_id, event_type, matched_key, headers, body, \
         received_at, signed_at, state, attempts, due_at, token, lease_until, last_error, \
         updated_at FROM {} WHERE 1 = 0",
        sql.quoted
    )
}

/// The control row, with the columns the statements use.
pub(crate) fn control_probe(sql: &InboxStatements) -> String {
    format!(
        "SELECT id, paused, updated_at FROM {} WHERE id = 1",
        sql.control
    )
}

/// The activity table's columns, in no row.
pub(crate) fn activity_probe(sql: &InboxStatements) -> String {
    format!(
        "SELECT minute, kind, slot, n FROM {} WHERE 1 = 0",
        super::activity_table(sql)
    )
}

/// Whether `error` says a table or column does not exist, or may not be
/// read (and the database's message): SQLite's `no such table` / `no such
/// column`, PostgreSQL's SQLSTATE 42P01 / 42703 / 42501, MySQL's 42S02 /
/// 42S22 / errors 1142 and 1143.
pub(crate) fn undefined(error: &sqlx::Error) -> Option<(Undefined, String)> {
    let sqlx::Error::Database(db) = error else {
        return None;
    };
    let message = db.message();
    #[cfg(feature = "mysql")]
    if let Some(mysql) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
        && matches!(mysql.number(), 1142 | 1143)
    {
        return Some((Undefined::Denied, message.to_owned()));
    }
    let kind = match db.code().as_deref() {
        Some("42501") => Undefined::Denied,
        // 42883: an undefined function (PostgreSQL's search function).
        Some("42P01" | "42S02" | "42883") => Undefined::Table,
        Some("42703" | "42S22") => Undefined::Column,
        // SQLite: SQLITE_ERROR (1), told apart by its message.
        Some("1") if message.starts_with("no such table") => Undefined::Table,
        Some("1") if message.starts_with("no such column") => Undefined::Column,
        _ => return None,
    };
    Some((kind, message.to_owned()))
}

/// The table exists without columns this version reads: `migrate()` cannot
/// help (it never alters an existing table).
pub(crate) fn incompatible(sql: &InboxStatements, message: &str) -> OpenError {
    OpenError::Store(InboxError::Protocol(format!(
        "the inbox table {} exists but lacks columns this version reads ({message}): it was \
         not created by this library's migrate(), which never alters an existing table; \
         point the inbox at another table",
        sql.quoted
    )))
}

/// The table is from an earlier version and `connect` could not bring it up
/// to date: `missing` names what is missing, `cause` why `migrate()` failed
/// (`None`: it ran, and the parts are still missing).
pub(crate) fn outdated(
    sql: &InboxStatements,
    missing: &[String],
    cause: Option<&InboxError>,
) -> OpenError {
    let why = match cause {
        Some(error) => format!("the database refused it: {}", chain(error)),
        None => "they are still missing after it".to_owned(),
    };
    OpenError::Store(InboxError::Protocol(format!(
        "the inbox table {} is from an earlier version ({} missing); connect ran migrate() to \
         add what is missing and {why}. Run migrate() once with a role that may create tables \
         and triggers, then connect again",
        sql.quoted,
        missing.join(", ")
    )))
}

/// `error` and its sources, `: `-separated (database messages: no URL, no
/// password, no row's content).
fn chain(error: &InboxError) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(next) = source {
        text.push_str(": ");
        text.push_str(&next.to_string());
        source = next.source();
    }
    text
}

/// The `check_schema` method `connect` calls, for an inbox with fields
/// `pool`, `sql` and `command_timeout` and an inherent `migrate()`.
macro_rules! schema_check {
    ($inbox:ident) => {
        impl $inbox {
            /// Brings an existing table of an earlier version up to date
            /// (see [`schema`](crate::inbox::sql::schema)); leaves an empty
            /// database alone.
            async fn check_schema(&self) -> Result<(), $crate::inbox::OpenError> {
                let Some(missing) = self.schema_gaps().await? else {
                    return Ok(());
                };
                if missing.is_empty() {
                    return Ok(());
                }
                tracing::warn!(
                    table = %self.sql.table,
                    missing = %missing.join(", "),
                    "the inbox's table is from an earlier version: running migrate()"
                );
                if let Err(error) = self.migrate().await {
                    return Err($crate::inbox::sql::schema::outdated(
                        &self.sql,
                        &missing,
                        Some(&error),
                    ));
                }
                match self.schema_gaps().await? {
                    Some(still) if !still.is_empty() => Err(
                        $crate::inbox::sql::schema::outdated(&self.sql, &still, None),
                    ),
                    _ => Ok(()),
                }
            }

            /// What the current schema needs and the database lacks beside
            /// the events table; `None` when there is no events table.
            async fn schema_gaps(&self) -> Result<Option<Vec<String>>, $crate::inbox::OpenError> {
                use $crate::inbox::sql::schema::{self, Undefined};
                match self.probe(&schema::columns_probe(&self.sql)).await? {
                    Err((Undefined::Table, _)) => return Ok(None),
                    Err((Undefined::Column, message)) => {
                        return Err(schema::incompatible(&self.sql, &message));
                    }
                    Err((Undefined::Denied, message)) => {
                        return Err($crate::inbox::OpenError::Store(
                            $crate::inbox::InboxError::Protocol(format!(
                                "the inbox table {} cannot be read: {message}",
                                self.sql.quoted
                            )),
                        ));
                    }
                    Ok(_) => {}
                }
                let gap = |what: &str, name: &str, found: Undefined| match found {
                    Undefined::Denied => format!("{what} {name} (missing or not readable)"),
                    _ => format!("{what} {name}"),
                };
                let mut missing = Vec::new();
                match self.probe(&schema::control_probe(&self.sql)).await? {
                    Err((found, _)) => missing.push(gap("the control table", &self.sql.control, found)),
                    Ok(0) => missing.push(format!("the control row of {}", self.sql.control)),
                    Ok(_) => {}
                }
                if let Err((found, _)) = self.probe(&schema::activity_probe(&self.sql)).await? {
                    let activity = $crate::inbox::sql::activity_table(&self.sql);
                    missing.push(gap("the activity table", &activity, found));
                }
                if let Err((found, _)) = self
                    .probe(&$crate::inbox::sql::attempts::probe(&self.sql))
                    .await?
                {
                    let attempts = $crate::inbox::sql::attempts::table(&self.sql);
                    missing.push(gap("the attempt history table", &attempts, found));
                }
                if let Err((found, _)) = self
                    .probe(&$crate::inbox::sql::actions::probe(&self.sql))
                    .await?
                {
                    let actions = $crate::inbox::sql::actions::table(&self.sql);
                    missing.push(gap("the action log table", &actions, found));
                }
                if let Err((found, _)) = self
                    .probe(&$crate::inbox::sql::gates::probe(&self.sql))
                    .await?
                {
                    let gates = $crate::inbox::sql::gates::table(&self.sql);
                    missing.push(gap("the gates tables", &gates, found));
                }
                if self.sql.search == $crate::inbox::sql::search::SearchSql::Postgres {
                    let function = $crate::inbox::sql::search::payload_function_probe(&self.sql.table);
                    if let Err((found, _)) = self.probe(&function).await? {
                        let name = $crate::inbox::sql::search::payload_function(&self.sql.table);
                        missing.push(gap("the search function", &name, found));
                    }
                }
                Ok(Some(missing))
            }

            /// Runs a probe: the rows it read, or what it found undefined.
            async fn probe(
                &self,
                statement: &str,
            ) -> Result<
                Result<usize, ($crate::inbox::sql::schema::Undefined, String)>,
                $crate::inbox::InboxError,
            > {
                let read = tokio::time::timeout(
                    self.command_timeout,
                    sqlx::query(statement).fetch_all(&self.pool),
                )
                .await
                .map_err(|_| $crate::inbox::InboxError::Timeout)?;
                match read {
                    Ok(rows) => Ok(Ok(rows.len())),
                    Err(error) => match $crate::inbox::sql::schema::undefined(&error) {
                        Some(found) => Ok(Err(found)),
                        None => Err($crate::dedup::sql::store_error(error).into()),
                    },
                }
            }
        }
    };
}
pub(crate) use schema_check;
