//! An SQL inbox opened on the schema of an earlier version (issue 35, item
//! 8): the events table exists, but not what `migrate()` now adds beside it
//! (the control table, the activity table and its triggers). Without a
//! check, accepts succeeded while every lease failed (`no such table
//! …_control`) and the backlog grew silently. `connect` now brings such a
//! schema up to date, or fails naming `migrate()` when it cannot.
//!
//! ```text
//! cargo test -p webhooks-core --features sqlite,postgres,mysql --test inbox_schema
//! ```
//!
//! Servers come from `WEBHOOKS_POSTGRES_URL` / `WEBHOOKS_MYSQL_URL` (see
//! `support`); a server that is down skips its tests, or fails them under
//! `CI=true`.

mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use webhooks_core::inbox::{
    Action, ActionKind, Attempt, AttemptOutcome, ClaimToken, Inbox, NewEvent, OpenError,
};

/// The password of the restricted roles the refusal tests create.
const RESTRICTED_PASSWORD: &str = "restricted-Secret-1";

/// One backend, one table (or SQLite file) of its own.
struct Old {
    kind: &'static str,
    url: String,
    table: String,
}

impl Old {
    #[cfg(feature = "sqlite")]
    fn sqlite() -> Self {
        let path =
            std::env::temp_dir().join(format!("inbox-schema-{}.db", support::unique_suffix()));
        Self {
            kind: "sqlite",
            url: format!("sqlite://{}", path.display()),
            table: "inbox".into(),
        }
    }

    #[cfg(feature = "postgres")]
    async fn postgres() -> Option<Self> {
        Some(Self {
            kind: "postgres",
            url: support::postgres_url().await?,
            table: format!("inbox_old_{}", support::unique_suffix()),
        })
    }

    #[cfg(feature = "mysql")]
    async fn mysql() -> Option<Self> {
        Some(Self {
            kind: "mysql",
            url: support::mysql_url().await?,
            table: format!("inbox_old_{}", support::unique_suffix()),
        })
    }

    /// The events table as the earlier version's `migrate()` created it
    /// (no control table, no activity table, no triggers), holding one
    /// pending event that version accepted, or only `columns` when given
    /// (a table this version cannot read).
    async fn create_old_schema(&self, columns: Option<&str>) {
        let t = &self.table;
        match self.kind {
            #[cfg(feature = "sqlite")]
            "sqlite" => {
                let pool = sqlx::SqlitePool::connect(&format!("{}?mode=rwc", self.url))
                    .await
                    .expect("create the SQLite file");
                // In WAL mode, as the inbox has always opened it (a read-only
                // open can then keep the mode).
                sqlx::query("PRAGMA journal_mode = WAL")
                    .execute(&pool)
                    .await
                    .unwrap();
                let create = columns.map_or_else(
                    || {
                        format!(
                            "CREATE TABLE \"{t}\" (event_key TEXT NOT NULL PRIMARY KEY, \
                             scheme TEXT NOT NULL, delivery_id TEXT, event_type TEXT, \
                             matched_key TEXT NOT NULL, headers TEXT NOT NULL, body BLOB NOT NULL, \
                             received_at INTEGER NOT NULL, signed_at INTEGER, state INTEGER NOT NULL, \
                             attempts INTEGER NOT NULL, due_at INTEGER NOT NULL, token TEXT, \
                             lease_until INTEGER, last_error TEXT, updated_at INTEGER NOT NULL)"
                        )
                    },
                    |columns| format!("CREATE TABLE \"{t}\" ({columns})"),
                );
                sqlx::query(&create).execute(&pool).await.expect("create");
                if columns.is_none() {
                    sqlx::query(&self.old_row()).execute(&pool).await.unwrap();
                }
                pool.close().await;
            }
            #[cfg(feature = "postgres")]
            "postgres" => {
                let pool = sqlx::PgPool::connect(&self.url).await.expect("connect");
                let create = format!(
                    "CREATE TABLE \"{t}\" (event_key TEXT NOT NULL PRIMARY KEY, \
                     scheme TEXT NOT NULL, delivery_id TEXT, event_type TEXT, \
                     matched_key TEXT NOT NULL, headers TEXT NOT NULL, body BYTEA NOT NULL, \
                     received_at BIGINT NOT NULL, signed_at BIGINT, state BIGINT NOT NULL, \
                     attempts BIGINT NOT NULL, due_at BIGINT NOT NULL, token TEXT, \
                     lease_until BIGINT, last_error TEXT, updated_at BIGINT NOT NULL)"
                );
                sqlx::query(&create).execute(&pool).await.expect("create");
                sqlx::query(&self.old_row()).execute(&pool).await.unwrap();
                pool.close().await;
            }
            #[cfg(feature = "mysql")]
            "mysql" => {
                let pool = sqlx::MySqlPool::connect(&self.url).await.expect("connect");
                let create = format!(
                    "CREATE TABLE `{t}` (\
                     event_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, \
                     scheme VARCHAR(64) NOT NULL, delivery_id TEXT, event_type TEXT, \
                     matched_key TEXT NOT NULL, headers MEDIUMTEXT NOT NULL, body LONGBLOB NOT NULL, \
                     received_at BIGINT NOT NULL, signed_at BIGINT, state BIGINT NOT NULL, \
                     attempts BIGINT NOT NULL, due_at BIGINT NOT NULL, \
                     token CHAR(32) CHARACTER SET ascii COLLATE ascii_bin, lease_until BIGINT, \
                     last_error TEXT, updated_at BIGINT NOT NULL, PRIMARY KEY (event_key), \
                     KEY `{t}_due` (state, due_at), KEY `{t}_lease` (state, lease_until), \
                     KEY `{t}_received` (state, received_at, event_key), \
                     KEY `{t}_updated` (state, updated_at)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
                );
                sqlx::query(&create).execute(&pool).await.expect("create");
                sqlx::query(&self.old_row()).execute(&pool).await.unwrap();
                pool.close().await;
            }
            other => panic!("backend {other} not built"),
        }
    }

    /// One pending event, due since the epoch, as the earlier version stored it.
    fn old_row(&self) -> String {
        let q = if self.kind == "mysql" { '`' } else { '"' };
        let body = if self.kind == "postgres" {
            "'\\x7b7d'::bytea"
        } else {
            "X'7b7d'"
        };
        format!(
            "INSERT INTO {q}{t}{q} (event_key, scheme, matched_key, headers, body, received_at, \
             state, attempts, due_at, updated_at) VALUES ('old-1', 'test', '', '[]', {body}, 0, \
             0, 0, 0, 0)",
            t = self.table
        )
    }

    /// Opens the inbox with the builder, as an application does: `connect`
    /// only, no `migrate()`.
    async fn connect(&self, url: &str) -> Result<Arc<dyn Inbox>, OpenError> {
        let timeout = Duration::from_secs(5);
        match self.kind {
            #[cfg(feature = "sqlite")]
            "sqlite" => Ok(Arc::new(
                webhooks_core::inbox::SqliteInbox::builder(url)
                    .table(&self.table)
                    .command_timeout(timeout)
                    .connect()
                    .await?,
            )),
            #[cfg(feature = "postgres")]
            "postgres" => Ok(Arc::new(
                webhooks_core::inbox::PostgresInbox::builder(url)
                    .table(&self.table)
                    .command_timeout(timeout)
                    .connect()
                    .await?,
            )),
            #[cfg(feature = "mysql")]
            "mysql" => Ok(Arc::new(
                webhooks_core::inbox::MySqlInbox::builder(url)
                    .table(&self.table)
                    .command_timeout(timeout)
                    .connect()
                    .await?,
            )),
            other => panic!("backend {other} not built"),
        }
    }

    /// Runs `migrate()` as the owner.
    async fn migrate(&self) {
        match self.kind {
            #[cfg(feature = "sqlite")]
            "sqlite" => webhooks_core::inbox::SqliteInbox::builder(&self.url)
                .table(&self.table)
                .connect()
                .await
                .expect("connect")
                .migrate()
                .await
                .expect("migrate"),
            #[cfg(feature = "postgres")]
            "postgres" => webhooks_core::inbox::PostgresInbox::builder(&self.url)
                .table(&self.table)
                .connect()
                .await
                .expect("connect")
                .migrate()
                .await
                .expect("migrate"),
            #[cfg(feature = "mysql")]
            "mysql" => webhooks_core::inbox::MySqlInbox::builder(&self.url)
                .table(&self.table)
                .connect()
                .await
                .expect("connect")
                .migrate()
                .await
                .expect("migrate"),
            other => panic!("backend {other} not built"),
        }
    }

    /// A URL through which the events table can be read and written but no
    /// table or trigger created: a read-only SQLite file, or a role with
    /// only `SELECT, INSERT, UPDATE, DELETE` on the table.
    async fn restricted_url(&self) -> String {
        match self.kind {
            "sqlite" => format!("{}?mode=ro", self.url),
            #[cfg(feature = "postgres")]
            "postgres" => {
                let role = self.role();
                let pool = sqlx::PgPool::connect(&self.url).await.expect("connect");
                for statement in [
                    format!("CREATE ROLE \"{role}\" LOGIN PASSWORD '{RESTRICTED_PASSWORD}'"),
                    format!(
                        "GRANT SELECT, INSERT, UPDATE, DELETE ON \"{}\" TO \"{role}\"",
                        self.table
                    ),
                ] {
                    sqlx::query(&statement).execute(&pool).await.expect("role");
                }
                pool.close().await;
                with_user(&self.url, &role)
            }
            #[cfg(feature = "mysql")]
            "mysql" => {
                let role = self.role();
                let pool = sqlx::MySqlPool::connect(&self.url).await.expect("connect");
                for statement in [
                    format!("CREATE USER '{role}'@'%' IDENTIFIED BY '{RESTRICTED_PASSWORD}'"),
                    format!(
                        "GRANT SELECT, INSERT, UPDATE, DELETE ON `{}` TO '{role}'@'%'",
                        self.table
                    ),
                ] {
                    sqlx::query(&statement).execute(&pool).await.expect("user");
                }
                pool.close().await;
                with_user(&self.url, &role)
            }
            other => panic!("backend {other} not built"),
        }
    }

    /// The restricted role of [`restricted_url`](Self::restricted_url).
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    fn role(&self) -> String {
        format!("{}_app", self.table)
    }

    /// The inbox's tables.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    fn tables(&self) -> [String; 5] {
        [
            self.table.clone(),
            format!("{}_control", self.table),
            format!("{}_activity", self.table),
            format!("{}_attempts", self.table),
            format!("{}_actions", self.table),
        ]
    }

    /// Runs one statement as the owner.
    async fn exec(&self, statement: &str) {
        match self.kind {
            #[cfg(feature = "sqlite")]
            "sqlite" => {
                let pool = sqlx::SqlitePool::connect(&self.url).await.expect("open");
                sqlx::query(statement)
                    .execute(&pool)
                    .await
                    .expect(statement);
                pool.close().await;
            }
            #[cfg(feature = "postgres")]
            "postgres" => {
                let pool = sqlx::PgPool::connect(&self.url).await.expect("connect");
                sqlx::query(statement)
                    .execute(&pool)
                    .await
                    .expect(statement);
                pool.close().await;
            }
            #[cfg(feature = "mysql")]
            "mysql" => {
                let pool = sqlx::MySqlPool::connect(&self.url).await.expect("connect");
                sqlx::query(statement)
                    .execute(&pool)
                    .await
                    .expect(statement);
                pool.close().await;
            }
            other => panic!("backend {other} not built"),
        }
    }

    /// Drops the tables, the trigger function and the role (or the file).
    async fn cleanup(&self) {
        match self.kind {
            "sqlite" => {
                let path = self.url.trim_start_matches("sqlite://");
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{path}{suffix}"));
                }
            }
            #[cfg(feature = "postgres")]
            "postgres" => {
                if let Ok(pool) = sqlx::PgPool::connect(&self.url).await {
                    for table in self.tables() {
                        let _ = sqlx::query(&format!("DROP TABLE IF EXISTS \"{table}\""))
                            .execute(&pool)
                            .await;
                    }
                    for statement in [
                        format!("DROP FUNCTION IF EXISTS \"{}_act_fn\"", self.table),
                        format!("DROP ROLE IF EXISTS \"{}\"", self.role()),
                    ] {
                        let _ = sqlx::query(&statement).execute(&pool).await;
                    }
                }
            }
            #[cfg(feature = "mysql")]
            "mysql" => {
                if let Ok(pool) = sqlx::MySqlPool::connect(&self.url).await {
                    for table in self.tables() {
                        let _ = sqlx::query(&format!("DROP TABLE IF EXISTS `{table}`"))
                            .execute(&pool)
                            .await;
                    }
                    let _ = sqlx::query(&format!("DROP USER IF EXISTS '{}'@'%'", self.role()))
                        .execute(&pool)
                        .await;
                }
            }
            _ => {}
        }
    }
}

/// `url` with its user and password replaced by `user` and [`RESTRICTED_PASSWORD`].
#[cfg(any(feature = "postgres", feature = "mysql"))]
fn with_user(url: &str, user: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let host = rest[..end].rfind('@').map_or(0, |at| at + 1);
    format!("{scheme}://{user}:{RESTRICTED_PASSWORD}@{}", &rest[host..])
}

/// Leases everything due; panics with the store's error.
async fn lease_all(inbox: &dyn Inbox) -> Vec<String> {
    let mut keys: Vec<String> = inbox
        .lease(ClaimToken::random(), 10, Duration::from_secs(30), 5)
        .await
        .expect("lease on the upgraded schema")
        .into_iter()
        .map(|event| event.meta.key)
        .collect();
    keys.sort();
    keys
}

/// The earlier version's table, opened with `connect` only: the event it
/// stored and one accepted now are both leased, and pausing and the
/// activity counters work.
async fn earlier_schema_is_brought_up_to_date(old: Old) {
    old.create_old_schema(None).await;
    let inbox = old.connect(&old.url).await.expect("connect");
    inbox
        .accept(&NewEvent::new("new-1", "test", "{}"))
        .await
        .expect("accept");
    assert_eq!(lease_all(&*inbox).await, ["new-1", "old-1"]);
    assert!(!inbox.paused().await.expect("the control row exists"));
    assert!(inbox.set_paused(true).await.expect("pause"));
    assert!(inbox.set_paused(false).await.expect("resume"));
    let activity = inbox.activity(5).await.expect("the activity table exists");
    let accepted: u64 = activity.minutes.iter().map(|minute| minute.accepted).sum();
    assert_eq!(accepted, 1, "the accept after connect was counted");
    drop(inbox);
    // migrate() afterwards is still a no-op that succeeds.
    old.migrate().await;
    old.cleanup().await;
}

/// The previous version's schema (issue 34: before the attempt history and
/// the action log): `connect` adds the two tables, keeps the stored
/// events, and both work at once.
async fn previous_schema_gains_the_history_and_the_log(old: Old) {
    old.migrate().await;
    let inbox = old.connect(&old.url).await.expect("connect");
    inbox
        .accept(&NewEvent::new("kept-1", "test", "{}"))
        .await
        .expect("accept");
    drop(inbox);
    // Each table alone missing (the schema check must notice either).
    let q = if old.kind == "mysql" { '`' } else { '"' };
    for (round, added) in ["attempts", "actions", "gates", "permits"]
        .into_iter()
        .enumerate()
    {
        old.exec(&format!("DROP TABLE {q}{}_{added}{q}", old.table))
            .await;
        let inbox = old.connect(&old.url).await.expect("connect upgrades");
        if round == 0 {
            assert_eq!(lease_all(&*inbox).await, ["kept-1"]);
        }
        let now = SystemTime::now();
        inbox
            .record_attempts(&[("kept-1", Attempt::new(1, now, now, AttemptOutcome::Failed))])
            .await
            .expect("the attempt history table exists");
        assert!(!inbox.attempts("kept-1").await.expect("attempts").is_empty());
        inbox
            .record_action(&Action::new(ActionKind::Pause, "ops").via("test"))
            .await
            .expect("the action log table exists");
        let log = inbox.actions(None, 10).await.expect("actions").actions;
        assert_eq!(log[0].kind, ActionKind::Pause, "{added}");
        // The gates tables (issue 34, item 5): the leases read them.
        let selector: webhooks_core::inbox::gates::Selector = "test:x".parse().unwrap();
        inbox
            .set_gate_paused(&selector, true)
            .await
            .expect("the gates table exists");
        let limit = webhooks_core::inbox::gates::Limit::concurrency(1);
        inbox
            .acquire_permit(&selector, limit, "k", Duration::from_secs(5))
            .await
            .expect("the permits table exists");
        inbox
            .lease(ClaimToken::random(), 1, Duration::from_secs(5), 5)
            .await
            .expect("a lease reads the gates");
        inbox
            .set_gate_paused(&selector, false)
            .await
            .expect("resume");
    }
    old.cleanup().await;
}

/// The earlier version's table, opened through a URL that cannot create
/// tables: `connect` fails, naming `migrate()` and what is missing, and
/// never the password.
async fn earlier_schema_that_cannot_be_upgraded_fails_connect(old: Old) {
    old.create_old_schema(None).await;
    let restricted = old.restricted_url().await;
    let error = match old.connect(&restricted).await {
        Ok(inbox) => {
            // What happened before: accepts succeed while every lease fails.
            let accepted = inbox.accept(&NewEvent::new("new-1", "test", "{}")).await;
            let leased = inbox
                .lease(ClaimToken::random(), 10, Duration::from_secs(30), 5)
                .await;
            old.cleanup().await;
            panic!(
                "connect succeeded on a schema it could not bring up to date \
                 (accept: {accepted:?}, lease: {leased:?})"
            );
        }
        Err(error) => error.to_string(),
    };
    old.cleanup().await;
    assert!(error.contains("migrate()"), "{error}");
    assert!(
        error.contains(&format!("{}_control", old.table)),
        "the error names the missing control table: {error}"
    );
    assert!(!error.contains(RESTRICTED_PASSWORD), "{error}");
}

/// An empty database: `connect` creates nothing and succeeds (`migrate()`
/// follows), as before.
async fn an_empty_database_is_left_to_migrate(old: Old) {
    let inbox = old.connect(&old.url).await.expect("connect");
    inbox
        .accept(&NewEvent::new("early", "test", "{}"))
        .await
        .expect_err("connect created no table");
    drop(inbox);
    old.migrate().await;
    let inbox = old.connect(&old.url).await.expect("connect after migrate");
    inbox
        .accept(&NewEvent::new("new-1", "test", "{}"))
        .await
        .expect("accept");
    assert_eq!(lease_all(&*inbox).await, ["new-1"]);
    drop(inbox);
    old.cleanup().await;
}

macro_rules! engine_tests {
    ($engine:ident, $feature:literal, $old:expr) => {
        #[cfg(feature = $feature)]
        mod $engine {
            use super::*;

            #[tokio::test]
            async fn connect_brings_an_earlier_schema_up_to_date() {
                if let Some(old) = $old {
                    earlier_schema_is_brought_up_to_date(old).await;
                }
            }

            #[tokio::test]
            async fn connect_refuses_an_earlier_schema_it_cannot_upgrade_naming_migrate() {
                if let Some(old) = $old {
                    earlier_schema_that_cannot_be_upgraded_fails_connect(old).await;
                }
            }

            #[tokio::test]
            async fn connect_adds_the_history_and_log_tables_to_the_previous_schema() {
                if let Some(old) = $old {
                    previous_schema_gains_the_history_and_the_log(old).await;
                }
            }

            #[tokio::test]
            async fn connect_leaves_an_empty_database_to_migrate() {
                if let Some(old) = $old {
                    an_empty_database_is_left_to_migrate(old).await;
                }
            }
        }
    };
}

engine_tests!(sqlite, "sqlite", Some(Old::sqlite()));
engine_tests!(postgres, "postgres", Old::postgres().await);
engine_tests!(mysql, "mysql", Old::mysql().await);

/// `inbox_from_url` (connect, then `migrate()`) opens the earlier schema too.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn inbox_from_url_opens_an_earlier_schema() {
    let old = Old::sqlite();
    old.create_old_schema(None).await;
    let inbox = webhooks_core::inbox::inbox_from_url(&format!(
        "{}?table={}&retention=off",
        old.url, old.table
    ))
    .await
    .expect("inbox_from_url");
    assert_eq!(lease_all(&*inbox).await, ["old-1"]);
    drop(inbox);
    old.cleanup().await;
}

/// A table named like the inbox but without the columns this version
/// reads: `connect` refuses it, naming `migrate()` (which never alters an
/// existing table), instead of failing on every operation later.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn a_table_without_the_columns_this_version_reads_is_refused() {
    let old = Old::sqlite();
    old.create_old_schema(Some(
        "event_key TEXT NOT NULL PRIMARY KEY, scheme TEXT NOT NULL, body BLOB NOT NULL",
    ))
    .await;
    let error = old
        .connect(&old.url)
        .await
        .map(|_| ())
        .expect_err("a table missing columns")
        .to_string();
    old.cleanup().await;
    assert!(error.contains("migrate()"), "{error}");
    assert!(error.contains("columns"), "{error}");
}
