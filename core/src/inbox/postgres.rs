//! The PostgreSQL [`Inbox`](super::Inbox).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool};

use super::sql::schema::schema_check;
use super::sql::{Dialect, InboxStatements, SqlInboxBuilder, returning_ops, sql_inbox};
use super::{ClaimToken, InboxError, OpenError, Transition};
use crate::dedup::sql::within;

const DIALECT: Dialect = Dialect {
    param: pg_param,
    now: "CAST(EXTRACT(EPOCH FROM now()) * 1000 AS BIGINT)",
    int: "BIGINT",
    empty_blob: "''::bytea",
    quote: '"',
    lock: " FOR UPDATE SKIP LOCKED",
    key_select: "event_key",
    by_key: "",
    reap_in_lease: true,
    complete_many: pg_complete_many,
    search: super::sql::search::SearchSql::Postgres,
};

/// One statement for the whole batch: the pairs arrive as two arrays,
/// joined to the table by key and token.
fn pg_complete_many(t: &str, now: &str, leased: i64, completed: i64) -> String {
    format!(
        "UPDATE {t} AS i SET state = {completed}, token = NULL, lease_until = NULL, \
         updated_at = {now} FROM unnest($1::text[], $2::text[]) AS d(k, tok) \
         WHERE i.event_key = d.k AND i.token = d.tok AND i.state = {leased} \
         RETURNING d.k, d.tok"
    )
}

/// One [`Transition`] per `(key, token)`: applied when the statement
/// returned the pair.
fn transitions(keys: &[&str], tokens: &[String], applied: &[(String, String)]) -> Vec<Transition> {
    let applied: HashSet<(&str, &str)> = applied
        .iter()
        .map(|(key, token)| (key.as_str(), token.as_str()))
        .collect();
    keys.iter()
        .zip(tokens)
        .map(|(key, token)| {
            if applied.contains(&(*key, token.as_str())) {
                Transition::Applied
            } else {
                Transition::Stale
            }
        })
        .collect()
}

/// The current minute of the database's clock (minutes since the epoch).
const ACTIVITY_MINUTE: &str = "(CAST(EXTRACT(EPOCH FROM now()) * 1000 AS BIGINT) / 60000)";

fn pg_param(n: usize) -> String {
    format!("${n}")
}

/// An [`Inbox`](super::Inbox) in a PostgreSQL table, shared by every worker
/// and receiver that uses the same database and table.
///
/// A lease is one statement, which also dead-letters the leases expired on
/// their last attempt:
///
/// ```sql
/// WITH reaped AS (UPDATE t SET state = 3, … WHERE event_key IN
///                   (SELECT event_key FROM t WHERE <expired on the last attempt>
///                    FOR UPDATE SKIP LOCKED)),
///   taken AS (SELECT … WHERE state = 1 AND lease_until <= now AND attempts < $3
///             ORDER BY lease_until LIMIT $4 FOR UPDATE SKIP LOCKED),
///   fresh AS (SELECT … WHERE state = 0 AND due_at <= now
///             ORDER BY due_at LIMIT $4 FOR UPDATE SKIP LOCKED),
///   picked AS (<taken, then fresh> LIMIT $4),
///   leased AS (UPDATE t SET state = 1, token = $1, lease_until = now + $2,
///              attempts = attempts + 1 FROM picked … RETURNING …)
/// SELECT … FROM leased ORDER BY <takeovers first, each part in its order>
/// ```
///
/// Each part reads one index range in its order (`(state, lease_until)`,
/// `(state, due_at)`), so a lease costs the same whatever the backlog.
/// Concurrent workers skip each other's locked rows instead of waiting, so
/// each leases a disjoint batch. A batch of completions is one statement
/// too: `UPDATE t … FROM unnest($1::text[], $2::text[]) AS d(k, tok) WHERE
/// event_key = d.k AND token = d.tok AND state = 1 RETURNING d.k, d.tok`,
/// with the attempts of those that applied inserted by the same statement
/// when the worker records its history. Accept is `INSERT … ON CONFLICT (event_key)
/// DO NOTHING`; it returns after the commit (with `synchronous_commit` on, the
/// server's default, the row is on disk). `command_timeout` is also the
/// session's `statement_timeout`.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use webhooks_core::inbox::PostgresInbox;
///
/// let inbox = PostgresInbox::builder("postgres://app@db.internal/app").connect().await?;
/// inbox.migrate().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresInbox {
    pool: PgPool,
    sql: Arc<InboxStatements>,
    command_timeout: Duration,
}

schema_check!(PostgresInbox);
sql_inbox!(PostgresInbox, PgPool, sqlx::Postgres;
    async fn complete_many_recorded(
        &self,
        done: &[(&str, ClaimToken, super::Attempt)],
    ) -> Result<Vec<Transition>, InboxError> {
        self.complete_recorded(done).await
    }
);
returning_ops!(PostgresInbox);

impl PostgresInbox {
    /// [`Inbox::complete_many_recorded`](super::Inbox::complete_many_recorded)
    /// in one statement (one commit): the completions, and the attempts of
    /// those that applied inserted from the completion's `RETURNING`. A
    /// batch with an attempt past its first (whose older entries are
    /// trimmed) takes the two steps of the default instead.
    async fn complete_recorded(
        &self,
        done: &[(&str, ClaimToken, super::Attempt)],
    ) -> Result<Vec<Transition>, InboxError> {
        use super::sql::attempts as history;
        if done.is_empty() {
            return Ok(Vec::new());
        }
        if done
            .iter()
            .any(|(_, _, attempt)| history::needs_trim(attempt))
        {
            return super::complete_then_record(self, done).await;
        }
        let statement = format!(
            "WITH a AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], \
             $4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::text[]) \
             AS a(k, tok, n, s, e, o, err, w)), \
             done AS (UPDATE {t} AS i SET state = {completed}, token = NULL, \
             lease_until = NULL, updated_at = {now} FROM a \
             WHERE i.event_key = a.k AND i.token = a.tok AND i.state = {leased} \
             RETURNING a.k, a.tok), \
             kept AS (INSERT INTO {attempts} (event_key, number, started_at, ended_at, \
             outcome, error, worker) SELECT a.k, a.n, a.s, a.e, a.o, a.err, a.w \
             FROM a JOIN done ON done.k = a.k AND done.tok = a.tok) \
             SELECT k, tok FROM done",
            t = self.sql.quoted,
            now = DIALECT.now,
            completed = super::sql::COMPLETED,
            leased = super::sql::LEASED,
            attempts = history::table(&self.sql),
        );
        let keys: Vec<&str> = done.iter().map(|(key, ..)| *key).collect();
        let tokens: Vec<String> = done.iter().map(|(_, token, _)| token.to_hex()).collect();
        let numbers: Vec<i64> = done.iter().map(|(.., a)| i64::from(a.number)).collect();
        let started: Vec<i64> = done
            .iter()
            .map(|(.., a)| history::ms(a.started_at))
            .collect();
        let ended: Vec<i64> = done.iter().map(|(.., a)| history::ms(a.ended_at)).collect();
        let outcomes: Vec<&str> = done.iter().map(|(.., a)| a.outcome.as_str()).collect();
        let errors: Vec<Option<&str>> = done.iter().map(|(.., a)| a.error.as_deref()).collect();
        let workers: Vec<&str> = done.iter().map(|(.., a)| a.worker.as_str()).collect();
        let query = sqlx::query_as::<_, (String, String)>(&statement)
            .bind(&keys)
            .bind(&tokens)
            .bind(&numbers)
            .bind(&started)
            .bind(&ended)
            .bind(&outcomes)
            .bind(&errors)
            .bind(&workers)
            .fetch_all(&self.pool);
        let applied = within(self.command_timeout, query).await?;
        Ok(transitions(&keys, &tokens, &applied))
    }

    /// The batch completion: one statement, one commit.
    async fn complete_events(
        &self,
        done: &[(&str, ClaimToken)],
    ) -> Result<Vec<Transition>, sqlx::Error> {
        let keys: Vec<&str> = done.iter().map(|(key, _)| *key).collect();
        let tokens: Vec<String> = done.iter().map(|(_, token)| token.to_hex()).collect();
        let applied: Vec<(String, String)> = sqlx::query_as(&self.sql.complete_many)
            .bind(&keys)
            .bind(&tokens)
            .fetch_all(&self.pool)
            .await?;
        Ok(transitions(&keys, &tokens, &applied))
    }

    /// A builder for an inbox on the database at `url`
    /// (`postgres://user:password@host:port/database`).
    pub fn builder(url: &str) -> SqlInboxBuilder<Self> {
        SqlInboxBuilder::new(url, 10)
    }

    /// Opens with the defaults; see [`builder`](Self::builder).
    ///
    /// # Errors
    ///
    /// As the builder's `connect`.
    pub async fn connect(url: &str) -> Result<Self, OpenError> {
        Self::builder(url).connect().await
    }

    /// An inbox on an existing pool,
    /// with the default table and a 2 s command timeout.
    #[must_use]
    pub fn new(pool: PgPool) -> Self {
        Self::from_parts(pool, super::DEFAULT_INBOX_TABLE, Duration::from_secs(2))
    }

    fn from_parts(pool: PgPool, table: &str, command_timeout: Duration) -> Self {
        Self {
            pool,
            sql: Arc::new(InboxStatements::new(table, &DIALECT)),
            command_timeout,
        }
    }

    /// Creates the table and its indexes if missing, the control table
    /// (`<table>_control`, the pause flag) with its one row, and the
    /// per-minute activity table (`<table>_activity`) with the trigger
    /// function and the two triggers that fill it (see
    /// [`activity`](super::activity)). Idempotent, and
    /// safe to run from several instances at once (a transaction-level
    /// advisory lock).
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the database cannot answer or refuses.
    pub async fn migrate(&self) -> Result<(), InboxError> {
        let table = &self.sql.table;
        let t = &self.sql.quoted;
        let c = &self.sql.control;
        let statements = [
            format!(
                "CREATE TABLE IF NOT EXISTS {t} (\
                 event_key TEXT NOT NULL PRIMARY KEY, \
                 scheme TEXT NOT NULL, \
                 delivery_id TEXT, \
                 event_type TEXT, \
                 matched_key TEXT NOT NULL, \
                 headers TEXT NOT NULL, \
                 body BYTEA NOT NULL, \
                 received_at BIGINT NOT NULL, \
                 signed_at BIGINT, \
                 state BIGINT NOT NULL, \
                 attempts BIGINT NOT NULL, \
                 due_at BIGINT NOT NULL, \
                 token TEXT, \
                 lease_until BIGINT, \
                 last_error TEXT, \
                 updated_at BIGINT NOT NULL)"
            ),
            format!("CREATE INDEX IF NOT EXISTS \"{table}_due\" ON {t} (state, due_at)"),
            format!("CREATE INDEX IF NOT EXISTS \"{table}_lease\" ON {t} (state, lease_until)"),
            format!(
                "CREATE INDEX IF NOT EXISTS \"{table}_received\" ON {t} (state, received_at, event_key)"
            ),
            format!("CREATE INDEX IF NOT EXISTS \"{table}_updated\" ON {t} (state, updated_at)"),
            format!(
                "CREATE TABLE IF NOT EXISTS {c} (id BIGINT NOT NULL PRIMARY KEY, \
                 paused BIGINT NOT NULL, updated_at BIGINT NOT NULL)"
            ),
            format!(
                "INSERT INTO {c} (id, paused, updated_at) VALUES (1, 0, {now}) \
                 ON CONFLICT (id) DO NOTHING",
                now = DIALECT.now
            ),
        ];
        let activity = self.activity_migration();
        let attempts = super::sql::attempts::create(
            &self.sql,
            &super::sql::attempts::Types {
                key: "TEXT",
                int: "BIGINT",
                short: "TEXT",
                text: "TEXT",
            },
        );
        let lock_key = format!("webhooks-core inbox migrate {table}");
        within(self.command_timeout.max(Duration::from_secs(10)), async {
            let mut tx = self.pool.begin().await?;
            sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
                .bind(&lock_key)
                .execute(&mut *tx)
                .await?;
            let actions = super::sql::actions::create_postgres(&self.sql);
            let payload = [super::sql::search::create_payload_function(&self.sql.table)];
            for statement in statements
                .iter()
                .chain(&activity)
                .chain(&attempts)
                .chain(&actions)
                .chain(&payload)
                .chain(&super::sql::gates::create(&self.sql))
            {
                sqlx::query(statement).execute(&mut *tx).await?;
            }
            tx.commit().await
        })
        .await?;
        Ok(())
    }
}

impl SqlInboxBuilder<PostgresInbox> {
    /// Opens the pool and one connection. Does not create the table:
    /// call [`PostgresInbox::migrate`].
    ///
    /// When the table exists, checks its schema: a table of an earlier
    /// version (without the control or activity table that `migrate()` now
    /// adds, on which accepts would succeed while every lease fails) is
    /// brought up to date by running [`PostgresInbox::migrate`] (idempotent,
    /// additive). An empty database is left alone.
    ///
    /// # Errors
    ///
    /// [`OpenError::Config`] for a bad URL or table name, [`OpenError::Store`]
    /// when the database cannot be reached in time; also when the table is from an earlier version and
    /// `migrate()` failed (a role that may not create tables: the error names `migrate()` and what
    /// is missing), or when the table lacks columns this version reads.
    pub async fn connect(self) -> Result<PostgresInbox, OpenError> {
        self.validate()?;
        let options: PgConnectOptions = self.settings.connect_options(
            &self.url,
            "postgres URL",
            "not a URL sqlx accepts (postgres://user:password@host:port/database)",
        )?;
        let options = options.options([(
            "statement_timeout",
            self.settings.command_timeout.as_millis().max(1),
        )]);
        let pool = within(
            self.settings.connect_timeout,
            self.settings.pool_options().connect_with(options),
        )
        .await
        .map_err(InboxError::from)?;
        let inbox =
            PostgresInbox::from_parts(pool, &self.settings.table, self.settings.command_timeout);
        inbox.check_schema().await?;
        Ok(inbox)
    }
}

impl PostgresInbox {
    /// The activity table, its trigger function and its triggers (created
    /// only if missing: no table lock once they exist). The function upserts
    /// one counter row in the statement that fired it; the slot is the
    /// backend's pid modulo [`ACTIVITY_SLOTS`](super::sql::ACTIVITY_SLOTS),
    /// so one statement locks one counter row, and concurrent connections
    /// mostly different ones.
    fn activity_migration(&self) -> [String; 4] {
        let table = &self.sql.table;
        let t = &self.sql.quoted;
        let a = super::sql::activity_table(&self.sql);
        let slots = super::sql::ACTIVITY_SLOTS;
        let function = format!("\"{table}_act_fn\"");
        let trigger = |name: &str, what: &str| {
            format!(
                "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = '{table}_{name}' \
                 AND tgrelid = '{t}'::regclass) THEN CREATE TRIGGER \"{table}_{name}\" {what} \
                 EXECUTE PROCEDURE {function}(); END IF; END $$"
            )
        };
        [
            format!(
                "CREATE TABLE IF NOT EXISTS {a} (minute BIGINT NOT NULL, kind BIGINT NOT NULL, \
                 slot BIGINT NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (minute, kind, slot))"
            ),
            format!(
                "CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 DECLARE k BIGINT; BEGIN \
                 IF TG_OP = 'INSERT' THEN k := 1; \
                 ELSIF NEW.state = 2 THEN k := 2; \
                 ELSIF NEW.state = 3 OR (NEW.state = 0 AND NEW.attempts = OLD.attempts) THEN k := 3; \
                 ELSE RETURN NULL; END IF; \
                 INSERT INTO {a} (minute, kind, slot, n) \
                 VALUES ({ACTIVITY_MINUTE}, k, pg_backend_pid() % {slots}, 1) \
                 ON CONFLICT (minute, kind, slot) DO UPDATE SET n = {a}.n + 1; \
                 RETURN NULL; END $$"
            ),
            trigger("act_ins", &format!("AFTER INSERT ON {t} FOR EACH ROW")),
            trigger(
                "act_upd",
                &format!(
                    "AFTER UPDATE OF state ON {t} FOR EACH ROW \
                     WHEN (OLD.state = 1 AND NEW.state <> 1)"
                ),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::PostgresInbox;
    use crate::dedup::sql::tests::server_url;
    use crate::inbox::ClaimToken;

    /// A lease over a backlog reads two index ranges in their order: no
    /// sequential scan of the inbox and no sort of its rows. (The lease
    /// that asked for `pending OR taken over … ORDER BY due_at` read and
    /// sorted every due row, and PostgreSQL compiled that plan with its JIT
    /// at every lease: 1,100 events a second at a backlog of 20,000.)
    #[tokio::test]
    async fn lease_plan_reads_index_ranges() {
        let Some(url) = server_url(
            "WEBHOOKS_POSTGRES_URL",
            "postgres://postgres@127.0.0.1:5432/test",
        )
        .await
        else {
            return;
        };
        let table = format!("inbox_plan_{}", &ClaimToken::random().to_hex()[..12]);
        let inbox = PostgresInbox::builder(&url)
            .table(&table)
            .connect()
            .await
            .unwrap();
        inbox.migrate().await.unwrap();
        let pool = inbox.pool();
        let backlog = format!(
            "INSERT INTO \"{table}\" (event_key, scheme, matched_key, headers, body, \
             received_at, state, attempts, due_at, updated_at, lease_until) \
             SELECT 'k' || i, 'test', 'm', '', ''::bytea, i, \
             CASE WHEN i % 5 = 0 THEN 1 ELSE 0 END, CASE WHEN i % 5 = 0 THEN 1 ELSE 0 END, \
             i, i, CASE WHEN i % 5 = 0 THEN 4000000000000 + i END \
             FROM generate_series(1, 5000) AS i"
        );
        sqlx::query(&backlog).execute(pool).await.unwrap();
        sqlx::query(&format!("ANALYZE \"{table}\""))
            .execute(pool)
            .await
            .unwrap();
        let plan: Vec<(String,)> = sqlx::query_as(&format!("EXPLAIN {}", inbox.sql.lease))
            .bind(ClaimToken::random().to_hex())
            .bind(60_000_i64)
            .bind(5_i64)
            .bind(8_i64)
            .bind("expired")
            .fetch_all(pool)
            .await
            .unwrap();
        let plan: Vec<&str> = plan.iter().map(|(line,)| line.as_str()).collect();
        for name in crate::inbox::sql::tables_of(&table) {
            let drop = format!("DROP TABLE IF EXISTS \"{name}\"");
            sqlx::query(&drop).execute(pool).await.unwrap();
        }
        let function = format!("DROP FUNCTION IF EXISTS \"{table}_act_fn\"");
        sqlx::query(&function).execute(pool).await.unwrap();
        let whole = plan.join("\n");
        // The inbox itself, not its `_control` or `_gates` tables.
        let scans = |kind: &str| {
            plan.iter().any(|line| {
                line.contains(&format!("{kind} on {table} "))
                    || line.ends_with(&format!("{kind} on {table}"))
            })
        };
        assert!(!scans("Seq Scan"), "{whole}");
        assert!(!scans("Bitmap Heap Scan"), "{whole}");
        for index in ["due", "lease"] {
            assert!(
                whole.contains(&format!("Index Scan using {table}_{index} on {table}")),
                "{whole}"
            );
        }
    }
}
