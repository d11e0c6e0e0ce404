//! The receiver's state in SQLite (sqlx, WAL): one transaction per event.
//!
//! | table | holds |
//! |---|---|
//! | `emails` | one row per email: [`EmailState`] |
//! | `suppressions` | one row per suppressed address: [`Suppression`] |
//! | `event_log` | one row per *application* of an event, deliberately without a unique key, so a double application would show (the demo counts them) |
//!
//! [`EmailStore::apply`] reads the email's row, runs the pure state machine
//! ([`EmailState::apply`]) and writes the result, all inside one
//! `BEGIN IMMEDIATE` transaction: concurrent events about the same email are
//! serialised by SQLite's write lock, and a failure leaves nothing half done
//! (the handler answers 500, the claim is released, the sender retries).
//!
//! Deduplication happens before, in the webhook pipeline. Should it ever let a
//! delivery through twice (an in-process dedup store forgets on restart), the
//! state machine makes the second application harmless; only the log would
//! show it.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use examples::event::{EmailEvent, EventKind};
//! use examples::store::EmailStore;
//!
//! let dir = tempfile::tempdir()?;
//! let store = EmailStore::open_in(dir.path()).await?;
//! let event = EmailEvent::new(EventKind::Delivered, "evt_1", 1_000, "em_1", "ada@example.com");
//! assert!(store.apply(&event).await?.changed);
//! let state = store.email("em_1").await?.expect("stored");
//! assert_eq!(state.status.map(|s| s.as_str()), Some("delivered"));
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr as _;
use std::time::Duration;

use sqlx::Row as _;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};

use crate::event::EmailEvent;
use crate::state::{Applied, DeliveryStatus, EmailState, Suppression, SuppressionReason};

/// The file [`EmailStore::open_in`] creates in its directory.
pub const DATABASE_FILE: &str = "email-events.sqlite";

/// The tables, from `examples/migrations/` (embedded at build time).
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// The emails, the suppression list and the event log, in one SQLite file.
///
/// Cheap to clone (a connection pool).
#[derive(Debug, Clone)]
pub struct EmailStore {
    pool: SqlitePool,
}

impl EmailStore {
    /// Opens (creating if missing) the database at `url` (`sqlite://path`,
    /// `sqlite:path`) in WAL mode, and creates the tables.
    ///
    /// # Errors
    ///
    /// When the URL is malformed or the file cannot be opened.
    pub async fn open(url: &str) -> Result<Self, sqlx::Error> {
        Self::with_options(SqliteConnectOptions::from_str(url)?).await
    }

    /// Opens (creating if missing) [`DATABASE_FILE`] in `dir`.
    ///
    /// # Errors
    ///
    /// When the file cannot be opened.
    pub async fn open_in(dir: &Path) -> Result<Self, sqlx::Error> {
        Self::with_options(SqliteConnectOptions::new().filename(dir.join(DATABASE_FILE))).await
    }

    async fn with_options(options: SqliteConnectOptions) -> Result<Self, sqlx::Error> {
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await?;
        let store = Self { pool };
        store.migrate().await?;
        Ok(store)
    }

    /// Applies the migrations in `examples/migrations/` that have not run
    /// yet (sqlx's migrator; idempotent).
    ///
    /// # Errors
    ///
    /// When SQLite refuses, or an applied migration was changed since.
    pub async fn migrate(&self) -> Result<(), sqlx::Error> {
        MIGRATOR.run(&self.pool).await?;
        Ok(())
    }

    /// Applies one event in one transaction: the email's state, the
    /// suppression list and the event log. Unknown events change nothing.
    ///
    /// # Errors
    ///
    /// When SQLite fails; nothing is written then.
    pub async fn apply(&self, event: &EmailEvent) -> Result<Applied, sqlx::Error> {
        let Some(envelope) = event.envelope() else {
            return Ok(Applied::default());
        };
        // IMMEDIATE takes the write lock first, so the read below cannot be
        // overtaken by a concurrent writer (no lost update, no BUSY upgrade).
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let row = sqlx::query("SELECT * FROM emails WHERE email_id = ?")
            .bind(envelope.email_id)
            .fetch_optional(&mut *tx)
            .await?;
        let existed = row.is_some();
        let mut state = match row {
            Some(row) => email_from_row(&row)?,
            None => EmailState::new(envelope.email_id, envelope.recipient),
        };
        let applied = state.apply(event);
        if applied.changed || !existed {
            sqlx::query(
                "INSERT INTO emails
                    (email_id, recipient, status, status_at, opened_at, clicked_at, unsubscribed_at)
                 VALUES (?, ?, ?, ?, ?, ?, ?)
                 ON CONFLICT (email_id) DO UPDATE SET
                    status = excluded.status,
                    status_at = excluded.status_at,
                    opened_at = excluded.opened_at,
                    clicked_at = excluded.clicked_at,
                    unsubscribed_at = excluded.unsubscribed_at",
            )
            .bind(&state.email_id)
            .bind(&state.recipient)
            .bind(state.status.map(DeliveryStatus::as_str))
            .bind(state.status_at.map(to_db))
            .bind(state.opened_at.map(to_db))
            .bind(state.clicked_at.map(to_db))
            .bind(state.unsubscribed_at.map(to_db))
            .execute(&mut *tx)
            .await?;
        }
        if let Some(offered) = &applied.suppression {
            let current = sqlx::query("SELECT * FROM suppressions WHERE recipient = ?")
                .bind(&offered.recipient)
                .fetch_optional(&mut *tx)
                .await?
                .map(|row| suppression_from_row(&row))
                .transpose()?;
            if current.is_none_or(|current| offered.supersedes(&current)) {
                sqlx::query(
                    "INSERT INTO suppressions (recipient, reason, since, email_id)
                     VALUES (?, ?, ?, ?)
                     ON CONFLICT (recipient) DO UPDATE SET
                        reason = excluded.reason,
                        since = excluded.since,
                        email_id = excluded.email_id",
                )
                .bind(&offered.recipient)
                .bind(offered.reason.as_str())
                .bind(to_db(offered.since))
                .bind(&offered.email_id)
                .execute(&mut *tx)
                .await?;
            }
        }
        sqlx::query(
            "INSERT INTO event_log (event_id, email_id, event_type, occurred_at, changed)
             VALUES (?, ?, ?, ?, ?)",
        )
        .bind(envelope.id)
        .bind(envelope.email_id)
        .bind(event.kind().as_str())
        .bind(to_db(envelope.occurred_at))
        .bind(applied.changed)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(applied)
    }

    /// One email's state.
    ///
    /// # Errors
    ///
    /// When SQLite fails.
    pub async fn email(&self, email_id: &str) -> Result<Option<EmailState>, sqlx::Error> {
        sqlx::query("SELECT * FROM emails WHERE email_id = ?")
            .bind(email_id)
            .fetch_optional(&self.pool)
            .await?
            .map(|row| email_from_row(&row))
            .transpose()
    }

    /// Every email, by id.
    ///
    /// # Errors
    ///
    /// When SQLite fails.
    pub async fn emails(&self) -> Result<Vec<EmailState>, sqlx::Error> {
        sqlx::query("SELECT * FROM emails ORDER BY email_id")
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(email_from_row)
            .collect()
    }

    /// The suppression list, by address.
    ///
    /// # Errors
    ///
    /// When SQLite fails.
    pub async fn suppressions(&self) -> Result<Vec<Suppression>, sqlx::Error> {
        sqlx::query("SELECT * FROM suppressions ORDER BY recipient")
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(suppression_from_row)
            .collect()
    }

    /// How many times each event id was applied, from the event log.
    ///
    /// # Errors
    ///
    /// When SQLite fails.
    pub async fn applications(&self) -> Result<BTreeMap<String, u64>, sqlx::Error> {
        let rows = sqlx::query("SELECT event_id, COUNT(*) AS n FROM event_log GROUP BY event_id")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("event_id")?, from_db(row.try_get("n")?))))
            .collect()
    }

    /// Closes the pool (checkpointing the WAL).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

fn email_from_row(row: &SqliteRow) -> Result<EmailState, sqlx::Error> {
    let status: Option<String> = row.try_get("status")?;
    let status = status
        .map(|s| {
            DeliveryStatus::parse(&s).ok_or_else(|| corrupt("emails.status", "unknown status"))
        })
        .transpose()?;
    let at = |column: &str| -> Result<Option<u64>, sqlx::Error> {
        Ok(row.try_get::<Option<i64>, _>(column)?.map(from_db))
    };
    Ok(EmailState {
        email_id: row.try_get("email_id")?,
        recipient: row.try_get("recipient")?,
        status,
        status_at: at("status_at")?,
        opened_at: at("opened_at")?,
        clicked_at: at("clicked_at")?,
        unsubscribed_at: at("unsubscribed_at")?,
    })
}

fn suppression_from_row(row: &SqliteRow) -> Result<Suppression, sqlx::Error> {
    let reason: String = row.try_get("reason")?;
    Ok(Suppression {
        recipient: row.try_get("recipient")?,
        reason: SuppressionReason::parse(&reason)
            .ok_or_else(|| corrupt("suppressions.reason", "unknown reason"))?,
        since: from_db(row.try_get("since")?),
        email_id: row.try_get("email_id")?,
    })
}

fn corrupt(column: &str, what: &str) -> sqlx::Error {
    sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: what.into(),
    }
}

/// Unix milliseconds fit an `i64` for the next 290 million years.
fn to_db(t: u64) -> i64 {
    i64::try_from(t).unwrap_or(i64::MAX)
}

fn from_db(t: i64) -> u64 {
    u64::try_from(t).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::event::EventKind::{self, *};
    use crate::state::Ledger;

    fn ev(kind: EventKind, i: usize, at: u64) -> EmailEvent {
        EmailEvent::new(kind, format!("evt_{i}"), at, "em_1", "a@example.com")
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    async fn stored(events: &[EmailEvent]) -> Ledger {
        let dir = tempfile::tempdir().unwrap();
        let store = EmailStore::open_in(dir.path()).await.unwrap();
        for event in events {
            let _ = store.apply(event).await.unwrap();
        }
        let ledger = Ledger {
            emails: store
                .emails()
                .await
                .unwrap()
                .into_iter()
                .map(|e| (e.email_id.clone(), e))
                .collect(),
            suppressions: store
                .suppressions()
                .await
                .unwrap()
                .into_iter()
                .map(|s| (s.recipient.clone(), s))
                .collect(),
        };
        store.close().await;
        ledger
    }

    #[test]
    fn the_database_holds_what_the_state_machine_says() {
        let events = [
            ev(Opened, 0, 30),
            ev(Bounced, 1, 20),
            ev(Sent, 2, 10),
            ev(Delivered, 3, 40),
            ev(Complained, 4, 50),
        ];
        let ledger = runtime().block_on(stored(&events));
        assert_eq!(ledger, Ledger::from_events(&events));
        let state = &ledger.emails["em_1"];
        assert_eq!(state.status, Some(DeliveryStatus::Bounced));
        assert_eq!(state.opened_at, Some(30));
        assert_eq!(ledger.suppressions["a@example.com"].since, 20);
    }

    #[test]
    fn every_application_is_logged_and_unknown_events_are_not() {
        runtime().block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let store = EmailStore::open_in(dir.path()).await.unwrap();
            let event = ev(Delivered, 0, 5);
            assert!(store.apply(&event).await.unwrap().changed);
            assert!(!store.apply(&event).await.unwrap().changed);
            let _ = store.apply(&EmailEvent::Unknown).await.unwrap();
            let counts = store.applications().await.unwrap();
            assert_eq!(counts.len(), 1);
            assert_eq!(counts["evt_0"], 2);
        });
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]

        #[test]
        fn any_permutation_stored_ends_the_same(
            events in prop::collection::vec(
                (prop::sample::select(EventKind::KNOWN.to_vec()), 0u64..10), 1..8,
            )
            .prop_map(|v| v.into_iter().enumerate().map(|(i, (k, at))| ev(k, i, at)).collect::<Vec<_>>())
            .prop_shuffle()
        ) {
            let mut sorted = events.clone();
            sorted.sort_by_key(|e| e.envelope().map(|e| e.occurred_at));
            let ledger = runtime().block_on(stored(&events));
            prop_assert_eq!(ledger, Ledger::from_events(&sorted));
        }
    }
}
