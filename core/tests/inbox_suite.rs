//! One list of durable-inbox scenarios, run against every `Inbox` backend
//! whose feature is on: SQLite, PostgreSQL, MySQL/MariaDB and Redis.
//!
//! ```text
//! cargo test -p webhooks-core --all-features --test inbox_suite
//! ```
//!
//! Servers come from `WEBHOOKS_POSTGRES_URL` / `WEBHOOKS_MYSQL_URL` /
//! `WEBHOOKS_REDIS_URL` (see
//! `support`); a server that is down skips its tests, or fails them under
//! `CI=true`. Each test works in its own table (or SQLite file).
//!
//! The multi-process scenarios re-run this test binary as child processes
//! (the ignored test `child_process`, told what to do through environment
//! variables): real processes, really aborted.
//!
//! `INBOX_SUITE_EVENTS` sets the event count of the no-fault run (default
//! 2,000); `two_processes_ten_thousand` runs the issue's 10,000 events on
//! every backend (about 45 s for all four, run side by side).
//! The crash run uses 1,000 events, 100 of them crashing.

mod support;

use std::collections::HashMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use webhooks_core::inbox::{
    Accepted, Backoff, ClaimToken, DeadLetterFilter, Inbox, InboxError, Job, NewEvent, Shutdown,
    Transition, Worker,
};
use webhooks_core::scheme::StandardWebhooks;
use webhooks_core::{Receiver, Rejection};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Which backend, where, in which table: everything a child process needs.
#[derive(Debug, Clone)]
struct Target {
    kind: String,
    url: String,
    table: String,
}

impl Target {
    #[cfg(feature = "sqlite")]
    async fn sqlite() -> Option<Self> {
        let path =
            std::env::temp_dir().join(format!("inbox-suite-{}.db", support::unique_suffix()));
        Some(Self {
            kind: "sqlite".into(),
            url: format!("sqlite://{}", path.display()),
            table: "inbox".into(),
        })
    }

    #[cfg(feature = "postgres")]
    async fn postgres() -> Option<Self> {
        Some(Self {
            kind: "postgres".into(),
            url: support::postgres_url().await?,
            table: format!("inbox_{}", support::unique_suffix()),
        })
    }

    #[cfg(feature = "mysql")]
    async fn mysql() -> Option<Self> {
        Some(Self {
            kind: "mysql".into(),
            url: support::mysql_url().await?,
            table: format!("inbox_{}", support::unique_suffix()),
        })
    }

    #[cfg(feature = "redis")]
    async fn redis() -> Option<Self> {
        Some(Self {
            kind: "redis".into(),
            url: support::redis_url().await?,
            table: format!("inbox-{}:", support::unique_suffix()),
        })
    }

    fn encode(&self) -> String {
        format!("{}|{}|{}", self.kind, self.table, self.url)
    }

    fn decode(text: &str) -> Self {
        let mut parts = text.splitn(3, '|');
        let kind = parts.next().unwrap().to_owned();
        let table = parts.next().unwrap().to_owned();
        let url = parts.next().unwrap().to_owned();
        Self { kind, url, table }
    }

    /// The inbox, migrated.
    async fn open(&self) -> Arc<dyn Inbox> {
        self.open_at(&self.url, Duration::from_secs(5))
            .await
            .expect("open inbox")
    }

    /// The inbox through another URL (a proxy), with `timeout` per command.
    async fn open_at(
        &self,
        url: &str,
        timeout: Duration,
    ) -> Result<Arc<dyn Inbox>, webhooks_core::inbox::OpenError> {
        match self.kind.as_str() {
            #[cfg(feature = "sqlite")]
            "sqlite" => {
                let inbox = webhooks_core::inbox::SqliteInbox::builder(url)
                    .table(&self.table)
                    .command_timeout(timeout)
                    .connect_timeout(Duration::from_secs(2))
                    .connect()
                    .await?;
                inbox.migrate().await?;
                Ok(Arc::new(inbox))
            }
            #[cfg(feature = "postgres")]
            "postgres" => {
                let inbox = webhooks_core::inbox::PostgresInbox::builder(url)
                    .table(&self.table)
                    .command_timeout(timeout)
                    .connect_timeout(Duration::from_secs(2))
                    .max_connections(6)
                    .connect()
                    .await?;
                inbox.migrate().await?;
                Ok(Arc::new(inbox))
            }
            #[cfg(feature = "mysql")]
            "mysql" => {
                let inbox = webhooks_core::inbox::MySqlInbox::builder(url)
                    .table(&self.table)
                    .command_timeout(timeout)
                    .connect_timeout(Duration::from_secs(2))
                    .max_connections(6)
                    .connect()
                    .await?;
                inbox.migrate().await?;
                Ok(Arc::new(inbox))
            }
            #[cfg(feature = "redis")]
            "redis" => {
                let inbox = webhooks_core::inbox::RedisInbox::builder(url)
                    .key_prefix(&self.table)
                    .command_timeout(timeout)
                    .connect_timeout(Duration::from_secs(2))
                    .connect()
                    .await?;
                Ok(Arc::new(inbox))
            }
            other => panic!("backend {other} not built"),
        }
    }

    /// Drops the table (or the file).
    async fn cleanup(&self) {
        match self.kind.as_str() {
            "sqlite" => {
                let path = self.url.trim_start_matches("sqlite://");
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{path}{suffix}"));
                }
            }
            #[cfg(feature = "postgres")]
            "postgres" => {
                if let Ok(pool) = sqlx::PgPool::connect(&self.url).await {
                    let _ = sqlx::query(&format!("DROP TABLE IF EXISTS \"{}\"", self.table))
                        .execute(&pool)
                        .await;
                }
            }
            #[cfg(feature = "mysql")]
            "mysql" => {
                if let Ok(pool) = sqlx::MySqlPool::connect(&self.url).await {
                    let _ = sqlx::query(&format!("DROP TABLE IF EXISTS `{}`", self.table))
                        .execute(&pool)
                        .await;
                }
            }
            #[cfg(feature = "redis")]
            "redis" => {
                if let Ok(client) = ::redis::Client::open(self.url.as_str())
                    && let Ok(mut conn) = client.get_multiplexed_async_connection().await
                {
                    let keys: Vec<String> = ::redis::cmd("KEYS")
                        .arg(format!("{}*", self.table))
                        .query_async(&mut conn)
                        .await
                        .unwrap_or_default();
                    for chunk in keys.chunks(500) {
                        let _: Result<(), _> =
                            ::redis::cmd("DEL").arg(chunk).query_async(&mut conn).await;
                    }
                }
            }
            _ => {}
        }
    }
}

/// The test event.
#[derive(Debug, serde::Deserialize, serde::Serialize)]
struct Event {
    n: u64,
    #[serde(default)]
    crash: bool,
}

fn body(n: u64, crash: bool) -> String {
    serde_json::to_string(&Event { n, crash }).unwrap()
}

fn key(n: u64) -> String {
    format!("webhooks:test:evt_{n}")
}

/// Accepts `count` events, `crash` of them (every tenth, from the first)
/// marked to abort their process on their first attempt.
async fn accept_many(inbox: &Arc<dyn Inbox>, count: u64, crash: u64) {
    let chunks: Vec<_> = (0..8u64)
        .map(|lane| {
            let inbox = Arc::clone(inbox);
            tokio::spawn(async move {
                let mut n = lane;
                while n < count {
                    let crashes = n % 10 == 0 && n / 10 < crash;
                    let event = NewEvent::new(key(n), "test", body(n, crashes));
                    assert_eq!(inbox.accept(&event).await.unwrap(), Accepted::Stored);
                    n += 8;
                }
            })
        })
        .collect();
    for chunk in chunks {
        chunk.await.unwrap();
    }
}

/// A worker whose handler appends `start <key>` and `done <key>` lines to
/// `log` (one `write` each, so processes sharing the file never interleave
/// within a line) and aborts the process on a crashing event's first attempt.
fn logging_worker(inbox: Arc<dyn Inbox>, log: PathBuf, batch: u32) -> Worker<Event> {
    Worker::builder(inbox)
        .concurrency(2)
        .batch(batch)
        // Long enough that a renewal stuck behind a lock on a loaded machine
        // (MySQL waits up to its 2 s lock timeout) does not let the lease run
        // out under a surviving process: with 2 s, one CI-like run saw a
        // survivor's event leased again and run twice, as a lease that
        // runs out allows. Crashed events wait out this lease.
        .lease(Duration::from_secs(5))
        .max_attempts(5)
        .poll_interval(Duration::from_millis(20))
        .backoff(Backoff {
            base: Duration::from_millis(10),
            max: Duration::from_millis(50),
        })
        .handler(move |job: Job<Event>| {
            let log = log.clone();
            async move {
                let pid = std::process::id();
                append(&log, &format!("start {pid} {}\n", job.meta.key));
                // The first start of a crashing event (not `attempt == 1`: an
                // event leased in a batch by a process that died before
                // starting it has had an attempt counted already).
                if job.event.crash && first_start(&log, &job.meta.key) {
                    std::process::abort();
                }
                append(&log, &format!("done {pid} {}\n", job.meta.key));
                Ok::<(), std::io::Error>(())
            }
        })
}

/// Whether this is `key`'s first start, across processes: creates a marker
/// file next to the log, atomically.
fn first_start(log: &std::path::Path, key: &str) -> bool {
    let marker = log.with_extension(format!("{}.started", key.replace(':', "_")));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(marker)
        .is_ok()
}

fn append(path: &PathBuf, line: &str) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open log");
    file.write_all(line.as_bytes()).expect("write log");
}

/// How many `start` / `done` lines each key has.
fn read_log(path: &PathBuf) -> (HashMap<String, u32>, HashMap<String, u32>) {
    read_log_except(path, &[])
}

/// The same, leaving out the `done` lines of the processes in `aborted`.
fn read_log_except(
    path: &PathBuf,
    aborted: &[u32],
) -> (HashMap<String, u32>, HashMap<String, u32>) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let (mut starts, mut dones) = (HashMap::new(), HashMap::new());
    for line in text.lines() {
        let mut fields = line.splitn(3, ' ');
        let (what, pid, key) = (
            fields.next().unwrap(),
            fields.next().unwrap(),
            fields.next().expect("log line"),
        );
        if what == "done" && aborted.contains(&pid.parse().unwrap()) {
            continue;
        }
        let map = if what == "start" {
            &mut starts
        } else {
            &mut dones
        };
        *map.entry(key.to_owned()).or_insert(0) += 1;
    }
    (starts, dones)
}

fn temp_log() -> PathBuf {
    std::env::temp_dir().join(format!("inbox-log-{}.txt", support::unique_suffix()))
}

/// Starts this test binary as a child running `mode` on `target`.
fn spawn_child(mode: &str, target: &Target, log: &PathBuf) -> Child {
    Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--ignored",
            "--exact",
            "child_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("INBOX_CHILD_MODE", mode)
        .env("INBOX_CHILD_TARGET", target.encode())
        .env("INBOX_CHILD_LOG", log)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn child")
}

/// Waits for `child` up to `limit`.
async fn wait_child(child: &mut Child, limit: Duration) -> ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait child") {
            return status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("child did not finish within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether the queue is drained: nothing pending, nothing leased.
async fn drained(inbox: &Arc<dyn Inbox>) -> bool {
    let stats = inbox.stats().await.expect("stats");
    stats.pending == 0 && stats.in_flight == 0
}

/// The child side of the multi-process scenarios. Ignored: only ever run by
/// `spawn_child`, which passes `--ignored --exact child_process`.
#[test]
#[ignore = "run by the multi-process scenarios as a child process"]
fn child_process() {
    let mode = std::env::var("INBOX_CHILD_MODE").expect("INBOX_CHILD_MODE: run by the suite");
    let target = Target::decode(&std::env::var("INBOX_CHILD_TARGET").expect("target"));
    let log = PathBuf::from(std::env::var("INBOX_CHILD_LOG").expect("log"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let inbox = target.open().await;
        match mode.as_str() {
            // Two workers until the queue is drained. Batches of 4 without
            // faults; of 1 when processes abort (a lease counts an attempt:
            // the unstarted rest of a dead process's batch would be charged one).
            "work" | "work_crashing" => {
                let shutdown = Shutdown::new();
                let batch = if mode == "work" { 4 } else { 1 };
                let worker = logging_worker(Arc::clone(&inbox), log, batch);
                let running = tokio::spawn(worker.run(shutdown.signal()));
                while !drained(&inbox).await {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                shutdown.trigger();
                running.await.unwrap();
            }
            // Accept one signed delivery through the pipeline, then die.
            "accept_then_abort" => {
                let receiver = receiver(Arc::clone(&inbox));
                let answer = deliver(&receiver, "msg_crash", &body(1, false)).await;
                assert_eq!(answer.map(|r| r.status()), Ok(http::StatusCode::ACCEPTED));
                append(&log, "accepted\n");
                std::process::abort();
            }
            #[cfg(feature = "sqlite")]
            "tx_abort_sqlite" => transactional::sqlite::child_abort(&target, log).await,
            #[cfg(feature = "postgres")]
            "tx_abort_postgres" => transactional::postgres::child_abort(&target, log).await,
            #[cfg(feature = "mysql")]
            "tx_abort_mysql" => transactional::mysql::child_abort(&target, log).await,
            other => panic!("unknown child mode {other}"),
        }
    });
}

fn receiver(inbox: Arc<dyn Inbox>) -> Receiver {
    let verifier = StandardWebhooks::new(SECRET).unwrap();
    Receiver::builder(verifier)
        .inbox(inbox)
        .store_retry_after(Duration::from_secs(7))
        .build()
}

/// Runs one signed delivery through the pipeline; `Err` holds the rejection
/// (a stored delivery is `Rejection::Stored`), `Ok` would mean the route's
/// handler ran.
async fn deliver(receiver: &Receiver, id: &str, body: &str) -> Result<Rejection, ()> {
    let verifier = StandardWebhooks::new(SECRET).unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let headers = verifier.sign_headers(id, now, body.as_bytes()).unwrap();
    let (mut parts, ()) = http::Request::post("/webhooks")
        .body(())
        .unwrap()
        .into_parts();
    parts.headers = headers;
    let ran = receiver
        .process(
            parts,
            body.to_owned().into(),
            |_, _| async { 204u16 },
            |s| *s,
        )
        .await;
    match ran {
        Ok(_) => Err(()),
        Err(rejection) => Ok(rejection),
    }
}

// ---------------------------------------------------------------- scenarios

/// 2,000 events (`INBOX_SUITE_EVENTS` to change), 2 processes × 2 workers,
/// no faults: every event started once and completed once. The 10,000-event
/// run is `two_processes_ten_thousand`.
async fn two_processes_no_faults(target: Target) {
    let count: u64 = std::env::var("INBOX_SUITE_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    two_processes(target, count).await;
}

/// The issue's figure: 10,000 events, 2 processes × 2 workers, no faults.
async fn two_processes_ten_thousand(target: Target) {
    two_processes(target, 10_000).await;
}

async fn two_processes(target: Target, count: u64) {
    let inbox = target.open().await;
    accept_many(&inbox, count, 0).await;
    let log = temp_log();
    let mut children = [
        spawn_child("work", &target, &log),
        spawn_child("work", &target, &log),
    ];
    for child in &mut children {
        let status = wait_child(child, Duration::from_secs(300)).await;
        assert!(status.success(), "worker process failed: {status}");
    }
    let (starts, dones) = read_log(&log);
    assert_eq!(starts.len() as u64, count, "every event started");
    assert_eq!(dones.len() as u64, count, "every event done");
    assert!(starts.values().all(|&n| n == 1), "an event started twice");
    assert!(dones.values().all(|&n| n == 1), "an event completed twice");
    let stats = inbox.stats().await.unwrap();
    assert_eq!((stats.completed, stats.dead, stats.pending), (count, 0, 0));
    let _ = std::fs::remove_file(&log);
    target.cleanup().await;
}

/// 100 events abort their worker process on their first attempt; the
/// processes are restarted; every event completes exactly once, and those
/// 100 started at least twice. The handler runs twice only for events that
/// were running in a process when it aborted: every event has one `done`
/// line from the surviving processes at most, and one at least overall.
async fn crashing_processes(target: Target) {
    let count: u64 = 1_000;
    let crashing = 100;
    let inbox = target.open().await;
    accept_many(&inbox, count, crashing).await;
    let log = temp_log();
    let mut children = vec![
        spawn_child("work_crashing", &target, &log),
        spawn_child("work_crashing", &target, &log),
    ];
    let started = Instant::now();
    let mut aborted = Vec::new();
    loop {
        for child in &mut children {
            if let Some(status) = child.try_wait().unwrap() {
                if !status.success() {
                    aborted.push(child.id());
                }
                *child = spawn_child("work_crashing", &target, &log);
            }
        }
        if drained(&inbox).await {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "not drained in time"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for child in &mut children {
        if !wait_child(child, Duration::from_secs(60)).await.success() {
            aborted.push(child.id());
        }
    }
    assert!(!aborted.is_empty(), "no process aborted");
    let stats = inbox.stats().await.unwrap();
    assert_eq!((stats.completed, stats.dead), (count, 0));
    let (starts, dones) = read_log(&log);
    assert_eq!(dones.len() as u64, count, "every event done");
    let (_, survivors) = read_log_except(&log, &aborted);
    assert!(
        survivors.values().all(|&n| n == 1),
        "a surviving process ran an event twice"
    );
    for n in (0..count).filter(|n| n % 10 == 0 && n / 10 < crashing) {
        assert!(starts[&key(n)] >= 2, "crashing event {n} started once");
    }
    let stats = inbox.stats().await.unwrap();
    assert_eq!((stats.completed, stats.dead), (count, 0));
    let _ = std::fs::remove_file(&log);
    for n in 0..count {
        let _ = std::fs::remove_file(
            log.with_extension(format!("{}.started", key(n).replace(':', "_"))),
        );
    }
    target.cleanup().await;
}

/// A worker stuck past its lease: the event is taken over once, and the
/// stuck worker can no longer complete, retry, hand back or dead-letter it.
async fn lease_expiry_takeover(target: Target) {
    let inbox = target.open().await;
    inbox
        .accept(&NewEvent::new(key(1), "test", body(1, false)))
        .await
        .unwrap();
    let stuck = ClaimToken::random();
    let first = inbox
        .lease(stuck, 10, Duration::from_millis(300), 5)
        .await
        .unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].attempt, 1);
    // Still held: nobody else gets it.
    assert!(
        inbox
            .lease(ClaimToken::random(), 10, Duration::from_secs(5), 5)
            .await
            .unwrap()
            .is_empty()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let taker = ClaimToken::random();
    let second = inbox
        .lease(taker, 10, Duration::from_secs(5), 5)
        .await
        .unwrap();
    assert_eq!(second.len(), 1, "exactly one takeover");
    assert_eq!(second[0].attempt, 2);
    assert!(
        inbox
            .lease(ClaimToken::random(), 10, Duration::from_secs(5), 5)
            .await
            .unwrap()
            .is_empty()
    );
    let k = key(1);
    assert_eq!(inbox.complete(&k, stuck).await.unwrap(), Transition::Stale);
    assert_eq!(
        inbox
            .retry(&k, stuck, Duration::ZERO, "late")
            .await
            .unwrap(),
        Transition::Stale
    );
    assert_eq!(inbox.release(&k, stuck).await.unwrap(), Transition::Stale);
    assert_eq!(
        inbox.dead_letter(&k, stuck, "late").await.unwrap(),
        Transition::Stale
    );
    assert_eq!(
        inbox
            .extend(&k, stuck, Duration::from_secs(1))
            .await
            .unwrap(),
        Transition::Stale
    );
    assert_eq!(
        inbox
            .extend(&k, taker, Duration::from_secs(5))
            .await
            .unwrap(),
        Transition::Applied
    );
    assert_eq!(
        inbox.complete(&k, taker).await.unwrap(),
        Transition::Applied
    );
    assert_eq!(inbox.complete(&k, taker).await.unwrap(), Transition::Stale);
    let stats = inbox.stats().await.unwrap();
    assert_eq!((stats.completed, stats.in_flight, stats.pending), (1, 0, 0));
    target.cleanup().await;
}

/// A batch of completions is token-checked pair by pair, answered in order,
/// a key listed twice with different tokens applied once.
async fn complete_many_is_token_checked(target: Target) {
    let inbox = target.open().await;
    for n in 0..3 {
        inbox
            .accept(&NewEvent::new(key(n), "test", body(n, false)))
            .await
            .unwrap();
    }
    let (a, b) = (ClaimToken::random(), ClaimToken::random());
    let first = inbox.lease(a, 2, Duration::from_secs(30), 5).await.unwrap();
    let second = inbox.lease(b, 2, Duration::from_secs(30), 5).await.unwrap();
    assert_eq!((first.len(), second.len()), (2, 1));
    let (a0, a1, b0) = (
        first[0].meta.key.as_str(),
        first[1].meta.key.as_str(),
        second[0].meta.key.as_str(),
    );
    assert_eq!(inbox.complete_many(&[]).await.unwrap(), vec![]);
    assert_eq!(
        inbox
            .complete_many(&[(a0, a), (b0, a), (a1, a), (b0, b)])
            .await
            .unwrap(),
        vec![
            Transition::Applied,
            Transition::Stale,
            Transition::Applied,
            Transition::Applied
        ]
    );
    assert_eq!(
        inbox.complete_many(&[(b0, a)]).await.unwrap(),
        vec![Transition::Stale]
    );
    let stats = inbox.stats().await.unwrap();
    assert_eq!((stats.completed, stats.in_flight, stats.pending), (3, 0, 0));
    target.cleanup().await;
}

/// A lease that expires on the last attempt dead-letters the event: a
/// handler that kills its process cannot loop forever.
async fn expiry_on_last_attempt_dead_letters(target: Target) {
    let inbox = target.open().await;
    inbox
        .accept(&NewEvent::new(key(1), "test", body(1, true)))
        .await
        .unwrap();
    for attempt in 1..=2 {
        let leased = inbox
            .lease(ClaimToken::random(), 1, Duration::from_millis(100), 2)
            .await
            .unwrap();
        assert_eq!(leased.len(), 1);
        assert_eq!(leased[0].attempt, attempt);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        inbox
            .lease(ClaimToken::random(), 1, Duration::from_secs(1), 2)
            .await
            .unwrap()
            .is_empty()
    );
    let dead = inbox
        .dead_letter_get(&key(1))
        .await
        .unwrap()
        .expect("dead-lettered");
    assert_eq!(dead.attempts, 2);
    assert!(dead.last_error.unwrap().contains("lease expired"));
    target.cleanup().await;
}

/// Poison: dead letter after N attempts with its last error; two concurrent
/// replays make one new attempt; the replay is processed once.
async fn poison_dead_letter_and_replay(target: Target) {
    let inbox = target.open().await;
    inbox
        .accept(&NewEvent::new(key(7), "test", body(7, false)).with_event_type("email.sent"))
        .await
        .unwrap();
    let fail = Arc::new(AtomicBool::new(true));
    let starts = Arc::new(AtomicU32::new(0));
    let worker = {
        let (fail, starts) = (Arc::clone(&fail), Arc::clone(&starts));
        Worker::builder(Arc::clone(&inbox))
            .max_attempts(3)
            .poll_interval(Duration::from_millis(10))
            .backoff(Backoff {
                base: Duration::from_millis(5),
                max: Duration::from_millis(20),
            })
            .handler(move |job: Job<Event>| {
                let (fail, starts) = (Arc::clone(&fail), Arc::clone(&starts));
                async move {
                    starts.fetch_add(1, Ordering::SeqCst);
                    if fail.load(Ordering::SeqCst) {
                        Err(format!("boom on attempt {}", job.attempt))
                    } else {
                        Ok(())
                    }
                }
            })
    };
    let shutdown = Shutdown::new();
    let running = tokio::spawn(worker.clone().run(shutdown.signal()));
    wait_for(|| async { inbox.stats().await.unwrap().dead == 1 }).await;
    assert_eq!(starts.load(Ordering::SeqCst), 3);

    let page = inbox
        .dead_letters(&DeadLetterFilter::default())
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1);
    let listed = &page.items[0];
    assert_eq!(listed.meta.key, key(7));
    assert_eq!(listed.attempts, 3);
    assert_eq!(listed.last_error.as_deref(), Some("boom on attempt 3"));
    assert!(listed.body.is_empty(), "listings leave the body out");
    let inspected = inbox.dead_letter_get(&key(7)).await.unwrap().unwrap();
    assert_eq!(inspected.body, body(7, false).as_bytes());
    assert_eq!(inspected.meta.event_type.as_deref(), Some("email.sent"));

    // Two operators replay at once: one new attempt.
    fail.store(false, Ordering::SeqCst);
    let other = target.open().await; // another pool: really concurrent
    let k = key(7);
    let (a, b) = tokio::join!(inbox.replay(&k), other.replay(&k));
    let applied = [a.unwrap(), b.unwrap()]
        .iter()
        .filter(|t| **t == Transition::Applied)
        .count();
    assert_eq!(applied, 1, "exactly one replay applies");
    wait_for(|| async { inbox.stats().await.unwrap().completed == 1 }).await;
    shutdown.trigger();
    let report = running.await.unwrap();
    assert_eq!(starts.load(Ordering::SeqCst), 4, "the replay ran once");
    assert_eq!(
        (report.completed, report.dead_lettered, report.retried),
        (1, 1, 2)
    );
    assert_eq!(inbox.replay(&key(7)).await.unwrap(), Transition::Stale);
    assert_eq!(inbox.discard(&key(7)).await.unwrap(), Transition::Stale);
    target.cleanup().await;
}

/// Listing filters and pages; discard; purge of completed events.
async fn dead_letter_admin(target: Target) {
    let inbox = target.open().await;
    for n in 0..5 {
        let kind = if n % 2 == 0 { "even" } else { "odd" };
        inbox
            .accept(&NewEvent::new(key(n), "test", body(n, false)).with_event_type(kind))
            .await
            .unwrap();
    }
    let token = ClaimToken::random();
    let leased = inbox
        .lease(token, 10, Duration::from_secs(30), 5)
        .await
        .unwrap();
    assert_eq!(leased.len(), 5);
    for event in &leased {
        let n: u64 = event.meta.key.rsplit('_').next().unwrap().parse().unwrap();
        let done = if n == 4 {
            inbox.complete(&event.meta.key, token).await
        } else {
            inbox.dead_letter(&event.meta.key, token, "failed").await
        };
        assert_eq!(done.unwrap(), Transition::Applied);
    }
    // Pages of 3, then the rest.
    let mut filter = DeadLetterFilter::default();
    filter.limit = Some(3);
    let first = inbox.dead_letters(&filter).await.unwrap();
    assert_eq!(first.items.len(), 3);
    filter.after = Some(first.next.clone().expect("a full page has a next cursor"));
    let second = inbox.dead_letters(&filter).await.unwrap();
    assert_eq!(second.items.len(), 1);
    assert!(second.next.is_none());
    let mut all: Vec<_> = first
        .items
        .iter()
        .chain(&second.items)
        .map(|d| d.meta.key.clone())
        .collect();
    all.sort();
    assert_eq!(all, [key(0), key(1), key(2), key(3)]);
    // Filters.
    let mut by_type = DeadLetterFilter::default();
    by_type.event_type = Some("odd".into());
    assert_eq!(inbox.dead_letters(&by_type).await.unwrap().items.len(), 2);
    let mut by_scheme = DeadLetterFilter::default();
    by_scheme.scheme = Some("stripe".into());
    assert!(
        inbox
            .dead_letters(&by_scheme)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let mut later = DeadLetterFilter::default();
    later.received_from = Some(SystemTime::now() + Duration::from_secs(3600));
    assert!(inbox.dead_letters(&later).await.unwrap().items.is_empty());
    // Discard once.
    assert_eq!(inbox.discard(&key(0)).await.unwrap(), Transition::Applied);
    assert_eq!(inbox.discard(&key(0)).await.unwrap(), Transition::Stale);
    assert!(inbox.dead_letter_get(&key(0)).await.unwrap().is_none());
    // Purge: the completed one, not yet old enough, then gone.
    assert_eq!(
        inbox
            .purge_completed(Duration::from_secs(3600))
            .await
            .unwrap(),
        0
    );
    assert_eq!(inbox.purge_completed(Duration::ZERO).await.unwrap(), 1);
    let stats = inbox.stats().await.unwrap();
    assert_eq!((stats.dead, stats.completed), (3, 0));
    target.cleanup().await;
}

/// Accepted through the pipeline, then the process aborts before any worker
/// ran: after the "restart" a worker processes it, once.
async fn accept_then_crash(target: Target) {
    let log = temp_log();
    let mut child = spawn_child("accept_then_abort", &target, &log);
    let status = wait_child(&mut child, Duration::from_secs(60)).await;
    assert!(!status.success(), "the child aborts after accepting");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "accepted\n");
    let inbox = target.open().await;
    assert_eq!(inbox.stats().await.unwrap().pending, 1);
    let ran = Arc::new(AtomicU32::new(0));
    let worker = {
        let ran = Arc::clone(&ran);
        Worker::builder(Arc::clone(&inbox))
            .poll_interval(Duration::from_millis(10))
            .handler(move |job: Job<Event>| {
                let ran = Arc::clone(&ran);
                async move {
                    assert_eq!(job.event.n, 1);
                    assert_eq!(job.meta.delivery_id.as_deref(), Some("msg_crash"));
                    assert_eq!(job.meta.scheme, "standard-webhooks");
                    assert!(job.meta.signed_at.is_some());
                    ran.fetch_add(1, Ordering::SeqCst);
                    Ok::<(), String>(())
                }
            })
    };
    let shutdown = Shutdown::new();
    let running = tokio::spawn(worker.run(shutdown.signal()));
    wait_for(|| async { inbox.stats().await.unwrap().completed == 1 }).await;
    shutdown.trigger();
    running.await.unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    // The sender's retry after the restart: a duplicate, not a second event.
    let again = deliver(&receiver(Arc::clone(&inbox)), "msg_crash", &body(1, false)).await;
    assert_eq!(again, Ok(Rejection::Duplicate));
    let _ = std::fs::remove_file(&log);
    target.cleanup().await;
}

/// The store is down at accept: 503 + Retry-After and nothing stored; back
/// up, the sender's retry is stored once (then answered as a duplicate).
async fn store_down_at_accept(target: Target) {
    let direct = target.open().await;
    let (through, outage) = target.outage().await;
    let receiver = receiver(through);
    let body = body(3, false);

    let outage_guard = outage.start().await;
    let answer = deliver(&receiver, "msg_down", &body).await.unwrap();
    assert_eq!(answer.status(), 503);
    assert_eq!(answer.retry_after(), Some(Duration::from_secs(7)));
    // Read while still down (a direct connection; SQLite's WAL lets it read
    // past the held write lock): once the lock goes, SQLite's worker may
    // still commit the attempt that was answered 503, as said below.
    let stats = direct.stats().await.unwrap();
    assert_eq!(stats.pending, 0, "nothing stored while down");
    drop(outage_guard);

    // Back: the sender's retry (a pooled connection may still be broken:
    // retry like a sender does, on 503 only). The insert of the attempt
    // answered 503 may still commit once the store is back (SQLite runs a
    // statement on its worker thread even after the request gave up): the
    // retry then finds it stored and answers the duplicate 2xx. Either way
    // the sender ends with a 2xx and the delivery is stored exactly once.
    let mut acknowledged = 0;
    for _ in 0..20 {
        match deliver(&receiver, "msg_down", &body).await.unwrap() {
            Rejection::Stored { status } => {
                assert_eq!(status, 202);
                acknowledged += 1;
                break;
            }
            Rejection::Duplicate => {
                acknowledged += 1;
                break;
            }
            Rejection::StoreUnavailable { .. } => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(acknowledged, 1, "acknowledged once the store is back");
    assert_eq!(
        deliver(&receiver, "msg_down", &body).await,
        Ok(Rejection::Duplicate)
    );
    assert_eq!(direct.stats().await.unwrap().pending, 1);
    target.cleanup().await;
}

/// Graceful stop mid-batch: the running event finishes, the rest of the
/// batch is handed back unstarted; a later worker finishes the queue;
/// nothing is lost and nothing runs twice.
async fn graceful_stop_mid_batch(target: Target) {
    let inbox = target.open().await;
    let count = 20;
    for n in 0..count {
        inbox
            .accept(&NewEvent::new(key(n), "test", body(n, false)))
            .await
            .unwrap();
    }
    let starts: Arc<Mutex<Vec<u64>>> = Arc::default();
    let make = |starts: Arc<Mutex<Vec<u64>>>| {
        Worker::builder(Arc::clone(&inbox))
            .batch(10)
            .poll_interval(Duration::from_millis(10))
            .handler(move |job: Job<Event>| {
                let starts = Arc::clone(&starts);
                async move {
                    starts.lock().unwrap().push(job.event.n);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Ok::<(), String>(())
                }
            })
    };
    let shutdown = Shutdown::new();
    let running = tokio::spawn(make(Arc::clone(&starts)).run(shutdown.signal()));
    wait_for(|| async { starts.lock().unwrap().len() >= 3 }).await;
    shutdown.trigger();
    let report = running.await.unwrap();
    let stats = inbox.stats().await.unwrap();
    assert_eq!(stats.in_flight, 0, "nothing left leased");
    assert_eq!(stats.completed, report.completed);
    assert!(report.handed_back >= 1, "the batch's rest was handed back");
    assert_eq!(stats.pending, count - report.completed);
    assert_eq!(starts.lock().unwrap().len() as u64, report.completed);

    let shutdown = Shutdown::new();
    let running = tokio::spawn(make(Arc::clone(&starts)).run(shutdown.signal()));
    wait_for(|| async { inbox.stats().await.unwrap().completed == count }).await;
    shutdown.trigger();
    running.await.unwrap();
    let mut all = starts.lock().unwrap().clone();
    all.sort_unstable();
    assert_eq!(
        all,
        (0..count).collect::<Vec<_>>(),
        "each event ran exactly once"
    );
    // Handed-back events were not charged an attempt.
    target.cleanup().await;
}

/// Handler outcomes: a timeout and a panic are failed attempts; a body that
/// does not fit `T` is too, with the field's path and without the body.
async fn timeouts_panics_and_bad_json(target: Target) {
    let inbox = target.open().await;
    inbox
        .accept(&NewEvent::new(key(1), "test", body(1, false)))
        .await
        .unwrap();
    inbox
        .accept(&NewEvent::new(key(2), "test", body(2, false)))
        .await
        .unwrap();
    inbox
        .accept(&NewEvent::new(key(3), "test", r#"{"n":"secret-value"}"#))
        .await
        .unwrap();
    let worker = Worker::builder(Arc::clone(&inbox))
        .max_attempts(1)
        .timeout(Duration::from_millis(100))
        .poll_interval(Duration::from_millis(10))
        .handler(|job: Job<Event>| async move {
            if job.event.n == 1 {
                tokio::time::sleep(Duration::from_secs(5)).await;
            } else {
                panic!("handler bug");
            }
            Ok::<(), String>(())
        });
    let shutdown = Shutdown::new();
    let running = tokio::spawn(worker.run(shutdown.signal()));
    wait_for(|| async { inbox.stats().await.unwrap().dead == 3 }).await;
    shutdown.trigger();
    running.await.unwrap();
    let error = |n| {
        let inbox = Arc::clone(&inbox);
        async move {
            inbox
                .dead_letter_get(&key(n))
                .await
                .unwrap()
                .unwrap()
                .last_error
                .unwrap()
        }
    };
    assert!(error(1).await.contains("timed out"));
    assert_eq!(error(2).await, "handler panicked");
    let json = error(3).await;
    assert!(json.contains("`n`") || json.contains("at `n`"), "{json}");
    assert!(!json.contains("secret-value"), "{json}");
    target.cleanup().await;
}

/// Delegates to an inbox, but fails every completion while `failing` is set.
struct FailingCompletions {
    inner: Arc<dyn Inbox>,
    failing: AtomicBool,
}

#[async_trait::async_trait]
impl Inbox for FailingCompletions {
    async fn accept(&self, event: &NewEvent) -> Result<Accepted, InboxError> {
        self.inner.accept(event).await
    }
    async fn lease(
        &self,
        token: ClaimToken,
        batch: u32,
        lease: Duration,
        max_attempts: u32,
    ) -> Result<Vec<webhooks_core::inbox::LeasedEvent>, InboxError> {
        self.inner.lease(token, batch, lease, max_attempts).await
    }
    async fn extend(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Transition, InboxError> {
        self.inner.extend(key, token, lease).await
    }
    async fn complete(&self, key: &str, token: ClaimToken) -> Result<Transition, InboxError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(InboxError::Timeout);
        }
        self.inner.complete(key, token).await
    }
    async fn complete_many(
        &self,
        done: &[(&str, ClaimToken)],
    ) -> Result<Vec<Transition>, InboxError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(InboxError::Timeout);
        }
        self.inner.complete_many(done).await
    }
    async fn retry(
        &self,
        key: &str,
        token: ClaimToken,
        delay: Duration,
        error: &str,
    ) -> Result<Transition, InboxError> {
        self.inner.retry(key, token, delay, error).await
    }
    async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, InboxError> {
        self.inner.release(key, token).await
    }
    async fn dead_letter(
        &self,
        key: &str,
        token: ClaimToken,
        error: &str,
    ) -> Result<Transition, InboxError> {
        self.inner.dead_letter(key, token, error).await
    }
    async fn dead_letters(
        &self,
        filter: &DeadLetterFilter,
    ) -> Result<webhooks_core::inbox::DeadLetterPage, InboxError> {
        self.inner.dead_letters(filter).await
    }
    async fn dead_letter_get(
        &self,
        key: &str,
    ) -> Result<Option<webhooks_core::inbox::DeadLetter>, InboxError> {
        self.inner.dead_letter_get(key).await
    }
    async fn replay(&self, key: &str) -> Result<Transition, InboxError> {
        self.inner.replay(key).await
    }
    async fn discard(&self, key: &str) -> Result<Transition, InboxError> {
        self.inner.discard(key).await
    }
    async fn purge_completed(&self, older_than: Duration) -> Result<u64, InboxError> {
        self.inner.purge_completed(older_than).await
    }
    async fn stats(&self) -> Result<webhooks_core::inbox::InboxStats, InboxError> {
        self.inner.stats().await
    }
}

/// Completions that cannot be recorded (the store fails every batch
/// completion): the events are neither lost nor marked done; they stay
/// leased, are leased again once the lease expires, and complete once.
async fn completion_failure_leaves_events_leased(target: Target) {
    let direct = target.open().await;
    let count = 5;
    for n in 0..count {
        direct
            .accept(&NewEvent::new(key(n), "test", body(n, false)))
            .await
            .unwrap();
    }
    let failing = Arc::new(FailingCompletions {
        inner: Arc::clone(&direct),
        failing: AtomicBool::new(true),
    });
    let starts = Arc::new(AtomicU32::new(0));
    let worker = {
        let starts = Arc::clone(&starts);
        Worker::builder(Arc::clone(&failing) as Arc<dyn Inbox>)
            .batch(count as u32)
            .lease(Duration::from_millis(1500))
            .poll_interval(Duration::from_millis(10))
            .handler(move |_: Job<Event>| {
                let starts = Arc::clone(&starts);
                async move {
                    starts.fetch_add(1, Ordering::SeqCst);
                    Ok::<(), String>(())
                }
            })
    };
    let shutdown = Shutdown::new();
    let running = tokio::spawn(worker.run(shutdown.signal()));
    wait_for(|| async { starts.load(Ordering::SeqCst) == count as u32 }).await;
    // The flusher tries four times over about 750 ms, then gives up.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let stats = direct.stats().await.unwrap();
    assert_eq!(
        (stats.completed, stats.in_flight, stats.pending),
        (0, count, 0),
        "not recorded: still leased, neither done nor lost"
    );
    failing.failing.store(false, Ordering::SeqCst);
    wait_for(|| async { direct.stats().await.unwrap().completed == count }).await;
    shutdown.trigger();
    let report = running.await.unwrap();
    assert_eq!(report.completed, count, "each completed once");
    assert_eq!(
        starts.load(Ordering::SeqCst),
        2 * count as u32,
        "run again after the lease expired"
    );
    let stats = direct.stats().await.unwrap();
    assert_eq!(
        (stats.completed, stats.in_flight, stats.pending),
        (count, 0, 0)
    );
    target.cleanup().await;
}

async fn wait_for<F, Fut>(condition: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !condition().await {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "condition not met in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ---------------------------------------------------------------- outages

/// Makes the store unreachable while the guard lives.
enum Outage {
    /// A TCP proxy that, while down, cuts every connection and refuses new ones.
    Proxy(Arc<Toggle>),
    /// Another connection holds SQLite's write lock.
    SqliteLock(String),
}

impl Target {
    /// An inbox whose store can be taken down, with 300 ms command timeouts.
    async fn outage(&self) -> (Arc<dyn Inbox>, Outage) {
        if self.kind == "sqlite" {
            let inbox = self
                .open_at(&self.url, Duration::from_millis(300))
                .await
                .unwrap();
            return (inbox, Outage::SqliteLock(self.url.clone()));
        }
        let upstream = support::authority(&self.url).expect("host:port");
        let toggle = Toggle::start(upstream).await;
        let url = support::with_authority(&self.url, &toggle.address);
        let inbox = self
            .open_at(&url, Duration::from_millis(300))
            .await
            .unwrap();
        (inbox, Outage::Proxy(toggle))
    }
}

impl Outage {
    async fn start(&self) -> Box<dyn std::any::Any + Send> {
        match self {
            Self::Proxy(toggle) => {
                toggle.down();
                Box::new(DownGuard(Arc::clone(toggle)))
            }
            #[cfg(feature = "sqlite")]
            Self::SqliteLock(url) => {
                use sqlx::Connection as _;
                let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
                sqlx::query("BEGIN EXCLUSIVE")
                    .execute(&mut conn)
                    .await
                    .unwrap();
                Box::new(conn)
            }
            #[cfg(not(feature = "sqlite"))]
            Self::SqliteLock(_) => unreachable!(),
        }
    }
}

struct DownGuard(Arc<Toggle>);

impl Drop for DownGuard {
    fn drop(&mut self) {
        self.0.up();
    }
}

/// A TCP proxy on a fixed port that can be taken down and brought back.
struct Toggle {
    address: String,
    down: AtomicBool,
    pumps: Mutex<Vec<JoinHandle<()>>>,
}

impl Toggle {
    async fn start(upstream: String) -> Arc<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let toggle = Arc::new(Self {
            address: listener.local_addr().unwrap().to_string(),
            down: AtomicBool::new(false),
            pumps: Mutex::default(),
        });
        let weak = Arc::downgrade(&toggle);
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let Some(toggle) = weak.upgrade() else { return };
                if toggle.down.load(Ordering::SeqCst) {
                    let _ = client.shutdown().await;
                    continue;
                }
                let Ok(mut server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                toggle.pumps.lock().unwrap().push(tokio::spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }));
            }
        });
        toggle
    }

    fn down(&self) {
        self.down.store(true, Ordering::SeqCst);
        for pump in self.pumps.lock().unwrap().drain(..) {
            pump.abort();
        }
    }

    fn up(&self) {
        self.down.store(false, Ordering::SeqCst);
    }
}

// ------------------------------------------------- exactly-once effects (SQL)

/// The handler's own table: one row per committed write.
fn effects_table(target: &Target) -> String {
    format!("{}_fx", target.table.replace(['-', ':'], "_"))
}

/// The transactional scenarios, on one SQL backend (`$inbox`), with the
/// dialect's placeholders; `$takeover`: whether a stuck transaction can be
/// taken over (not on SQLite, whose write lock the stuck transaction holds).
macro_rules! transactional_tests {
    ($backend:ident, $feature:literal, $inbox:ty, $p1:literal, $p2:literal, $takeover:literal) => {
        #[cfg(feature = $feature)]
        pub(crate) mod $backend {
            use super::*;

            /// The concrete inbox, migrated, and its effects table, created.
            pub(crate) async fn open(target: &Target) -> ($inbox, String) {
                let inbox = <$inbox>::builder(&target.url)
                    .table(&target.table)
                    .command_timeout(Duration::from_secs(5))
                    .max_connections(6)
                    .connect()
                    .await
                    .expect("open inbox");
                inbox.migrate().await.expect("migrate");
                let fx = effects_table(target);
                sqlx::query(&format!(
                    "CREATE TABLE IF NOT EXISTS {fx} (event_key VARCHAR(255) NOT NULL, attempt BIGINT NOT NULL)"
                ))
                .execute(inbox.pool())
                .await
                .expect("effects table");
                (inbox, fx)
            }

            /// The committed writes: (key, attempt), sorted.
            async fn effects(inbox: &$inbox, fx: &str) -> Vec<(String, i64)> {
                let mut rows: Vec<(String, i64)> =
                    sqlx::query_as(&format!("SELECT event_key, attempt FROM {fx}"))
                        .fetch_all(inbox.pool())
                        .await
                        .expect("read effects");
                rows.sort();
                rows
            }

            async fn cleanup(target: &Target, inbox: &$inbox, fx: &str) {
                let _ = sqlx::query(&format!("DROP TABLE {fx}"))
                    .execute(inbox.pool())
                    .await;
                target.cleanup().await;
            }

            /// A transactional worker whose handler writes `(key, attempt)`
            /// in the transaction, then fails on the attempts in `fail_on`,
            /// aborts the process on those in `abort_on`, or blocks its
            /// thread for `stuck` on the first attempt.
            pub(crate) fn writer(
                inbox: $inbox,
                fx: String,
                lease: Duration,
                fail_on: &'static [u32],
                abort_on: &'static [u32],
                stuck: Duration,
                starts: Arc<AtomicU32>,
            ) -> Worker<Event> {
                Worker::transactional(inbox)
                    .concurrency(2)
                    .batch(4)
                    .lease(lease)
                    .timeout(Duration::from_secs(20))
                    .poll_interval(Duration::from_millis(10))
                    .backoff(Backoff {
                        base: Duration::from_millis(10),
                        max: Duration::from_millis(20),
                    })
                    .transactional_handler(move |job: Job<Event>, tx| {
                        let insert = format!(
                            "INSERT INTO {fx} (event_key, attempt) VALUES ({}, {})",
                            $p1, $p2
                        );
                        let starts = Arc::clone(&starts);
                        Box::pin(async move {
                            starts.fetch_add(1, Ordering::SeqCst);
                            sqlx::query(&insert)
                                .bind(&job.meta.key)
                                .bind(i64::from(job.attempt))
                                .execute(&mut **tx)
                                .await
                                .map_err(|e| e.to_string())?;
                            if abort_on.contains(&job.attempt) {
                                std::process::abort();
                            }
                            if job.attempt == 1 && !stuck.is_zero() {
                                // Blocks the thread, renewals included: a
                                // live worker that stopped making progress.
                                std::thread::sleep(stuck);
                            }
                            if fail_on.contains(&job.attempt) {
                                return Err("failed after writing".to_owned());
                            }
                            Ok(())
                        })
                    })
            }

            /// Drains the inbox with `worker`; returns its report.
            async fn drain(
                inbox: &$inbox,
                worker: Worker<Event>,
                completed: u64,
            ) -> webhooks_core::inbox::WorkerReport {
                let shutdown = Shutdown::new();
                let running = tokio::spawn(worker.run(shutdown.signal()));
                wait_for(|| async { inbox.stats().await.unwrap().completed == completed }).await;
                shutdown.trigger();
                running.await.unwrap()
            }

            /// The handler's writes and the completion commit together:
            /// 20 events, exactly one row each.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tx_writes_commit_with_the_completion() {
                let Some(target) = Target::$backend().await else { return };
                let (inbox, fx) = open(&target).await;
                let count = 20;
                for n in 0..count {
                    inbox.accept(&NewEvent::new(key(n), "test", body(n, false))).await.unwrap();
                }
                let starts = Arc::new(AtomicU32::new(0));
                let worker = writer(inbox.clone(), fx.clone(), Duration::from_secs(5), &[], &[], Duration::ZERO, Arc::clone(&starts));
                let report = drain(&inbox, worker, count).await;
                assert_eq!(report.completed, count);
                let rows = effects(&inbox, &fx).await;
                let mut expected: Vec<(String, i64)> = (0..count).map(|n| (key(n), 1)).collect();
                expected.sort();
                assert_eq!(rows, expected, "one committed write per event");
                let stats = inbox.stats().await.unwrap();
                assert_eq!((stats.completed, stats.in_flight, stats.pending), (count, 0, 0));
                cleanup(&target, &inbox, &fx).await;
            }

            /// The handler writes, then fails: its write is rolled back and
            /// the event retried; after the successful retry, one row.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tx_failed_attempt_leaves_no_write() {
                let Some(target) = Target::$backend().await else { return };
                let (inbox, fx) = open(&target).await;
                inbox.accept(&NewEvent::new(key(1), "test", body(1, false))).await.unwrap();
                let starts = Arc::new(AtomicU32::new(0));
                let worker = writer(inbox.clone(), fx.clone(), Duration::from_secs(5), &[1, 2], &[], Duration::ZERO, Arc::clone(&starts));
                let report = drain(&inbox, worker, 1).await;
                assert_eq!((report.completed, report.retried), (1, 2));
                assert_eq!(starts.load(Ordering::SeqCst), 3);
                assert_eq!(effects(&inbox, &fx).await, vec![(key(1), 3)], "only the successful attempt's write");
                cleanup(&target, &inbox, &fx).await;
            }

            /// A worker stuck mid-handler past its lease: the event is taken
            /// over and completed with its write; the stuck worker's
            /// completion is refused in its transaction, which rolls back.
            /// Exactly one row in total. (On SQLite the stuck transaction
            /// holds the database lock, so nobody can take over: it
            /// completes late, still with exactly one row.)
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tx_stale_worker_commit_is_refused() {
                let Some(target) = Target::$backend().await else { return };
                let (inbox, fx) = open(&target).await;
                inbox.accept(&NewEvent::new(key(1), "test", body(1, false))).await.unwrap();
                let starts = Arc::new(AtomicU32::new(0));
                let shutdown = Shutdown::new();
                // On a runtime of its own, which the stuck handler blocks
                // (its lease renewals included), as a stuck process would;
                // with a pool of its own too: a pooled connection opened on
                // that runtime fails once the runtime is gone, so it must
                // never serve this test's later queries.
                let signal = shutdown.signal();
                let (stuck_target, stuck_starts) = (target.clone(), Arc::clone(&starts));
                let stuck = std::thread::spawn(move || {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap()
                        .block_on(async move {
                            let (inbox, fx) = open(&stuck_target).await;
                            let stuck = writer(inbox, fx, Duration::from_millis(300), &[], &[], Duration::from_millis(1500), stuck_starts);
                            stuck.run(signal).await
                        })
                });
                wait_for(|| async { starts.load(Ordering::SeqCst) >= 1 }).await;
                let taker = writer(inbox.clone(), fx.clone(), Duration::from_secs(5), &[], &[], Duration::ZERO, Arc::clone(&starts));
                let taker = tokio::spawn(taker.run(shutdown.signal()));
                wait_for(|| async { inbox.stats().await.unwrap().completed == 1 }).await;
                // Let the stuck worker wake up and try to commit.
                tokio::time::sleep(Duration::from_millis(1800)).await;
                shutdown.trigger();
                let taker = taker.await.unwrap();
                let stuck = tokio::task::spawn_blocking(move || stuck.join().unwrap()).await.unwrap();
                let rows = effects(&inbox, &fx).await;
                assert_eq!(rows.len(), 1, "exactly one committed write: {rows:?}");
                assert_eq!(stuck.completed + taker.completed, 1);
                if $takeover {
                    assert_eq!(rows, vec![(key(1), 2)], "the takeover's write");
                    assert_eq!(stuck.stale + taker.stale, 1, "the stuck attempt was refused");
                    assert_eq!(starts.load(Ordering::SeqCst), 2);
                }
                let stats = inbox.stats().await.unwrap();
                assert_eq!((stats.completed, stats.in_flight, stats.pending), (1, 0, 0));
                cleanup(&target, &inbox, &fx).await;
            }

            /// The process aborts after the handler's write, before the
            /// commit: nothing of that attempt stays; the next attempt
            /// (after the lease expires) writes once.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tx_abort_before_commit_leaves_no_write() {
                let Some(target) = Target::$backend().await else { return };
                let (inbox, fx) = open(&target).await;
                inbox.accept(&NewEvent::new(key(1), "test", body(1, false))).await.unwrap();
                let log = temp_log();
                let mut child = spawn_child(concat!("tx_abort_", stringify!($backend)), &target, &log);
                let status = wait_child(&mut child, Duration::from_secs(60)).await;
                assert!(!status.success(), "the child should have aborted");
                assert_eq!(std::fs::read_to_string(&log).unwrap_or_default(), "wrote\n", "the child wrote before aborting");
                assert!(effects(&inbox, &fx).await.is_empty(), "the aborted attempt's write was rolled back");
                let starts = Arc::new(AtomicU32::new(0));
                let worker = writer(inbox.clone(), fx.clone(), Duration::from_secs(5), &[], &[], Duration::ZERO, Arc::clone(&starts));
                drain(&inbox, worker, 1).await;
                assert_eq!(effects(&inbox, &fx).await, vec![(key(1), 2)]);
                let _ = std::fs::remove_file(&log);
                cleanup(&target, &inbox, &fx).await;
            }

            /// The child side of the abort scenario.
            pub(crate) async fn child_abort(target: &Target, log: PathBuf) {
                let (inbox, fx) = open(target).await;
                let worker = Worker::transactional(inbox)
                    .lease(Duration::from_millis(500))
                    .poll_interval(Duration::from_millis(10))
                    .transactional_handler(move |job: Job<Event>, tx| {
                        let insert = format!(
                            "INSERT INTO {fx} (event_key, attempt) VALUES ({}, {})",
                            $p1, $p2
                        );
                        let log = log.clone();
                        Box::pin(async move {
                            sqlx::query(&insert)
                                .bind(&job.meta.key)
                                .bind(i64::from(job.attempt))
                                .execute(&mut **tx)
                                .await
                                .map_err(|e| e.to_string())?;
                            append(&log, "wrote\n");
                            if job.attempt >= 1 {
                                std::process::abort();
                            }
                            Ok::<(), String>(())
                        })
                    });
                let shutdown = Shutdown::new();
                worker.run(shutdown.signal()).await;
            }
        }
    };
}

mod transactional {
    use super::*;

    transactional_tests!(
        sqlite,
        "sqlite",
        webhooks_core::inbox::SqliteInbox,
        "?1",
        "?2",
        false
    );
    transactional_tests!(
        postgres,
        "postgres",
        webhooks_core::inbox::PostgresInbox,
        "$1",
        "$2",
        true
    );
    transactional_tests!(
        mysql,
        "mysql",
        webhooks_core::inbox::MySqlInbox,
        "?",
        "?",
        true
    );
}

// ---------------------------------------------------------------- per backend

macro_rules! backend_tests {
    ($backend:ident, $feature:literal: $($scenario:ident),* $(,)?) => {
        #[cfg(feature = $feature)]
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    if let Some(target) = super::Target::$backend().await {
                        super::$scenario(target).await;
                    }
                }
            )*

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn two_processes_ten_thousand() {
                if let Some(target) = super::Target::$backend().await {
                    super::two_processes_ten_thousand(target).await;
                }
            }
        }
    };
}

macro_rules! suite {
    ($($backend:ident, $feature:literal);* $(;)?) => {
        $(
            backend_tests!($backend, $feature:
                two_processes_no_faults,
                crashing_processes,
                lease_expiry_takeover,
                expiry_on_last_attempt_dead_letters,
                poison_dead_letter_and_replay,
                dead_letter_admin,
                accept_then_crash,
                store_down_at_accept,
                graceful_stop_mid_batch,
                timeouts_panics_and_bad_json,
                completion_failure_leaves_events_leased,
                complete_many_is_token_checked,
            );
        )*
    };
}

suite! {
    sqlite, "sqlite";
    postgres, "postgres";
    mysql, "mysql";
    redis, "redis";
}
