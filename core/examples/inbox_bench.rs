//! Run with: cargo run --release -p webhooks-core --all-features --example inbox_bench
//!
//! Measures every inbox backend on this machine, side by side with the dedup
//! claim on the same server in the same run:
//!
//! - accept latency (median, 99th percentile) and accepts per second, with 16
//!   concurrent tasks over unique keys (`BENCH_EVENTS`, default 5 000);
//! - the dedup store's claim latency under the same load (the comparison the
//!   inbox's accept should stay within 1.5× of);
//! - events processed per second end to end: a `Worker` with 4 concurrent
//!   loops (`BENCH_BATCH` events per lease, default 8) and a no-op handler,
//!   from start until every accepted event is completed (`BENCH_HISTORY=0`:
//!   without recording the attempt history).
//!
//! Servers come from `WEBHOOKS_POSTGRES_URL`, `WEBHOOKS_MYSQL_URL`,
//! `WEBHOOKS_REDIS_URL`, `WEBHOOKS_REDIS_CLUSTER_URL` (the test defaults;
//! the cluster is the one `.ci/redis-cluster start` runs: a
//! `RedisClusterInbox` with its default 16 partitions, beside a
//! `RedisClusterStore`); SQLite uses a temporary file. A backend that cannot
//! be opened is skipped; `BENCH_ONLY=Redis` runs only the backends whose
//! name contains that text. Each run uses its own tables or key prefix and
//! deletes them afterwards. With the `nats` feature too, the JetStream inbox
//! runs on `WEBHOOKS_NATS_URL` (default `nats://127.0.0.1:4222`), its own
//! streams deleted afterwards. With the `rabbitmq` feature too, the RabbitMQ
//! inbox runs on `WEBHOOKS_RABBITMQ_URL` (default
//! `amqp://guest:guest@127.0.0.1:5672/%2f`), its dedup store on the Redis
//! above, its queues deleted afterwards.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use webhooks_core::dedup::{
    ClaimToken, DedupStore, MySqlStore, PostgresStore, RedisClusterStore, RedisStore, SqliteStore,
};
use webhooks_core::inbox::{
    Inbox, Job, MySqlInbox, NewEvent, PostgresInbox, RedisClusterInbox, RedisInbox, Shutdown,
    SqliteInbox, Worker,
};

const TASKS: usize = 16;

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn env_url(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// Whether `BENCH_ONLY` (if set) is part of `backend`'s name.
fn wanted(backend: &str) -> bool {
    std::env::var("BENCH_ONLY").map_or(true, |only| backend.contains(&only))
}

fn suffix() -> String {
    ClaimToken::random().to_hex()[..12].to_owned()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Runs `op(i)` for `0..n` from 16 tasks; wall time and sorted latencies.
async fn drive<F, Fut>(n: usize, op: F) -> (Duration, Vec<Duration>)
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|lane| {
            let op = Arc::clone(&op);
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut i = lane;
                while i < n {
                    let t = Instant::now();
                    op(i).await;
                    latencies.push(t.elapsed());
                    i += TASKS;
                }
                latencies
            })
        })
        .collect();
    let mut all = Vec::with_capacity(n);
    for task in tasks {
        all.extend(task.await.expect("task"));
    }
    let wall = started.elapsed();
    all.sort_unstable();
    (wall, all)
}

struct Row {
    backend: &'static str,
    accept_p50: Duration,
    accept_p99: Duration,
    accepts_per_second: f64,
    claim_p50: Duration,
    claim_p99: Duration,
    events_per_second: f64,
}

async fn measure(
    backend: &'static str,
    inbox: Arc<dyn Inbox>,
    dedup: Arc<dyn DedupStore>,
    n: usize,
    batch: u32,
) -> Row {
    let run = suffix();
    let body = r#"{"type":"email.delivered","data":{"email_id":"e_1","count":3}}"#;
    let (wall, accepts) = {
        let inbox = Arc::clone(&inbox);
        let run = run.clone();
        drive(n, move |i| {
            let inbox = Arc::clone(&inbox);
            let event = NewEvent::new(format!("bench:test:{run}:{i}"), "test", body);
            async move {
                inbox.accept(&event).await.expect("accept");
            }
        })
        .await
    };
    let (_, claims) = {
        let dedup = Arc::clone(&dedup);
        let run = run.clone();
        drive(n, move |i| {
            let dedup = Arc::clone(&dedup);
            let key = format!("bench:test:{run}:{i}");
            async move {
                dedup
                    .claim(&key, ClaimToken::random(), Duration::from_secs(60))
                    .await
                    .expect("claim");
            }
        })
        .await
    };
    // The handler counts what it ran: waiting on that costs the inbox
    // nothing (polling `stats()` would count every row of the table, a
    // load production does not have). A worker shut down records every
    // completion it sent before it ends, so the time is taken after.
    let handled = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&handled);
    let worker = Worker::builder(Arc::clone(&inbox))
        .concurrency(4)
        .batch(batch)
        .poll_interval(Duration::from_millis(5))
        .attempt_history(std::env::var("BENCH_HISTORY").map_or(true, |v| v != "0"))
        .handler(move |_: Job<serde_json::Value>| {
            counter.fetch_add(1, Ordering::Relaxed);
            async { Ok::<(), String>(()) }
        });
    let shutdown = Shutdown::new();
    let started = Instant::now();
    let running = tokio::spawn(worker.run(shutdown.signal()));
    while handled.load(Ordering::Relaxed) < n {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    shutdown.trigger();
    let report = running.await.expect("worker");
    let processing = started.elapsed();
    let stats = inbox.stats().await.expect("stats");
    assert_eq!(
        stats.completed as usize, n,
        "every event recorded completed"
    );
    assert_eq!(report.completed as usize, n, "every event completed once");
    Row {
        backend,
        accept_p50: percentile(&accepts, 0.5),
        accept_p99: percentile(&accepts, 0.99),
        accepts_per_second: n as f64 / wall.as_secs_f64(),
        claim_p50: percentile(&claims, 0.5),
        claim_p99: percentile(&claims, 0.99),
        events_per_second: n as f64 / processing.as_secs_f64(),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = env_count("BENCH_EVENTS", 5_000);
    let batch = u32::try_from(env_count("BENCH_BATCH", 8)).unwrap_or(8);
    let mut rows = Vec::new();

    if wanted("SQLite") {
        rows.extend(sqlite(n, batch).await);
    }
    if wanted("PostgreSQL") {
        rows.extend(postgres(n, batch).await);
    }
    if wanted("MariaDB/MySQL") {
        rows.extend(mysql(n, batch).await);
    }
    if wanted("Redis") {
        rows.extend(redis_single(n, batch).await);
    }
    if wanted("Redis Cluster (3 primaries, 16 partitions)") {
        rows.extend(redis_cluster(n, batch).await);
    }
    #[cfg(feature = "nats")]
    if wanted("NATS JetStream (R1, file)") {
        rows.extend(jetstream(n, batch).await);
    }
    #[cfg(feature = "rabbitmq")]
    if wanted("RabbitMQ (quorum queue, Redis dedup)") {
        rows.extend(rabbitmq(n, batch).await);
    }
    print_table(rows);
}

async fn sqlite(n: usize, batch: u32) -> Option<Row> {
    let mut row = None;
    let dir = std::env::temp_dir().join(format!("inbox-bench-{}", suffix()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let sqlite_inbox = format!("sqlite://{}", dir.join("inbox.db").display());
    let sqlite_dedup = format!("sqlite://{}", dir.join("dedup.db").display());
    if let (Ok(inbox), Ok(dedup)) = (
        SqliteInbox::connect(&sqlite_inbox).await,
        SqliteStore::connect(&sqlite_dedup).await,
    ) {
        inbox.migrate().await.expect("migrate");
        dedup.migrate().await.expect("migrate");
        row = Some(measure("SQLite", Arc::new(inbox), Arc::new(dedup), n, batch).await);
    }
    let _ = std::fs::remove_dir_all(&dir);
    row
}

async fn postgres(n: usize, batch: u32) -> Option<Row> {
    let pg = env_url(
        "WEBHOOKS_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    );
    let table = format!("bench_inbox_{}", suffix());
    let dedup_table = format!("bench_dedup_{}", suffix());
    match (
        PostgresInbox::builder(&pg)
            .table(&table)
            .max_connections(16)
            .connect()
            .await,
        PostgresStore::builder(&pg)
            .table(&dedup_table)
            .max_connections(16)
            .connect()
            .await,
    ) {
        (Ok(inbox), Ok(dedup)) => {
            inbox.migrate().await.expect("migrate");
            dedup.migrate().await.expect("migrate");
            let pool = inbox.pool().clone();
            let row = measure("PostgreSQL", Arc::new(inbox), Arc::new(dedup), n, batch).await;
            for t in [&table, &dedup_table] {
                let _ = sqlx::query(&format!("DROP TABLE \"{t}\""))
                    .execute(&pool)
                    .await;
            }
            Some(row)
        }
        _ => {
            eprintln!("PostgreSQL skipped: cannot connect");
            None
        }
    }
}

async fn mysql(n: usize, batch: u32) -> Option<Row> {
    let my = env_url("WEBHOOKS_MYSQL_URL", "mysql://root@127.0.0.1:3306/test");
    let table = format!("bench_inbox_{}", suffix());
    let dedup_table = format!("bench_dedup_{}", suffix());
    match (
        MySqlInbox::builder(&my)
            .table(&table)
            .max_connections(16)
            .connect()
            .await,
        MySqlStore::builder(&my)
            .table(&dedup_table)
            .max_connections(16)
            .connect()
            .await,
    ) {
        (Ok(inbox), Ok(dedup)) => {
            inbox.migrate().await.expect("migrate");
            dedup.migrate().await.expect("migrate");
            let pool = inbox.pool().clone();
            let row = measure("MariaDB/MySQL", Arc::new(inbox), Arc::new(dedup), n, batch).await;
            for t in [&table, &dedup_table] {
                let _ = sqlx::query(&format!("DROP TABLE `{t}`"))
                    .execute(&pool)
                    .await;
            }
            Some(row)
        }
        _ => {
            eprintln!("MySQL skipped: cannot connect");
            None
        }
    }
}

async fn redis_single(n: usize, batch: u32) -> Option<Row> {
    let redis_url = env_url("WEBHOOKS_REDIS_URL", "redis://127.0.0.1:6379");
    let prefix = format!("bench-inbox-{}:", suffix());
    match (
        RedisInbox::builder(&redis_url)
            .key_prefix(&prefix)
            .connect()
            .await,
        RedisStore::builder(&redis_url)
            .key_prefix(format!("{prefix}dedup:"))
            .connect()
            .await,
    ) {
        (Ok(inbox), Ok(dedup)) => {
            let row = measure("Redis", Arc::new(inbox), Arc::new(dedup), n, batch).await;
            if let Ok(client) = redis::Client::open(redis_url.as_str())
                && let Ok(mut conn) = client.get_multiplexed_async_connection().await
            {
                let keys: Vec<String> = redis::cmd("KEYS")
                    .arg(format!("{prefix}*"))
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_default();
                for chunk in keys.chunks(500) {
                    let _: Result<(), _> =
                        redis::cmd("DEL").arg(chunk).query_async(&mut conn).await;
                }
            }
            Some(row)
        }
        _ => {
            eprintln!("Redis skipped: cannot connect");
            None
        }
    }
}

/// The JetStream inbox (feature `nats`) on its own streams, beside the Redis
/// dedup store (JetStream has no dedup store of its own: its claim column
/// is Redis').
#[cfg(feature = "nats")]
async fn jetstream(n: usize, batch: u32) -> Option<Row> {
    let nats_url = env_url("WEBHOOKS_NATS_URL", "nats://127.0.0.1:4222");
    let redis_url = env_url("WEBHOOKS_REDIS_URL", "redis://127.0.0.1:6379");
    let name = format!("BENCH{}", suffix());
    match (
        webhooks_core::inbox::JetStreamInbox::builder(&nats_url)
            .stream(&name)
            .connect()
            .await,
        RedisStore::builder(&redis_url)
            .key_prefix(format!("bench-{name}:dedup:"))
            .connect()
            .await,
    ) {
        (Ok(inbox), Ok(dedup)) => {
            let row = measure(
                "NATS JetStream (R1, file)",
                Arc::new(inbox.clone()),
                Arc::new(dedup),
                n,
                batch,
            )
            .await;
            let _ = inbox.delete().await;
            Some(row)
        }
        _ => {
            eprintln!(
                "NATS JetStream skipped: cannot connect (NATS, or Redis for the claim column)"
            );
            None
        }
    }
}

/// The RabbitMQ inbox (feature `rabbitmq`) on its own queues, its dedup
/// store (the record of what was accepted) on Redis, beside the same Redis
/// store's claim.
#[cfg(feature = "rabbitmq")]
async fn rabbitmq(n: usize, batch: u32) -> Option<Row> {
    let amqp_url = env_url(
        "WEBHOOKS_RABBITMQ_URL",
        "amqp://guest:guest@127.0.0.1:5672/%2f",
    );
    let redis_url = env_url("WEBHOOKS_REDIS_URL", "redis://127.0.0.1:6379");
    let name = format!("bench-{}", suffix());
    let stores = (
        RedisStore::builder(&redis_url)
            .key_prefix(format!("{name}:inbox:"))
            .connect()
            .await,
        RedisStore::builder(&redis_url)
            .key_prefix(format!("{name}:dedup:"))
            .connect()
            .await,
    );
    let (Ok(record), Ok(dedup)) = stores else {
        eprintln!("RabbitMQ skipped: cannot connect to Redis (its dedup store)");
        return None;
    };
    match webhooks_core::inbox::RabbitMqInbox::builder(&amqp_url, Arc::new(record))
        .queue(&name)
        .connect()
        .await
    {
        Ok(inbox) => {
            let row = measure(
                "RabbitMQ (quorum queue, Redis dedup)",
                Arc::new(inbox.clone()),
                Arc::new(dedup),
                n,
                batch,
            )
            .await;
            let _ = inbox.delete().await;
            Some(row)
        }
        Err(_) => {
            eprintln!("RabbitMQ skipped: cannot connect");
            None
        }
    }
}

async fn redis_cluster(n: usize, batch: u32) -> Option<Row> {
    let url = env_url("WEBHOOKS_REDIS_CLUSTER_URL", "redis://127.0.0.1:7000");
    let prefix = format!("bench-inbox-{}:", suffix());
    match (
        RedisClusterInbox::builder([url.as_str()])
            .key_prefix(&prefix)
            .connect()
            .await,
        RedisClusterStore::builder([url.as_str()])
            .key_prefix(format!("{prefix}dedup:"))
            .connect()
            .await,
    ) {
        (Ok(inbox), Ok(dedup)) => {
            let row = measure(
                "Redis Cluster (3 primaries, 16 partitions)",
                Arc::new(inbox),
                Arc::new(dedup.clone()),
                n,
                batch,
            )
            .await;
            // KEYS goes to every primary; each DEL to its key's.
            let mut conn = dedup.connection().clone();
            for pattern in [format!("{{{prefix}p*"), format!("{prefix}*")] {
                let keys: Vec<String> = redis::cmd("KEYS")
                    .arg(pattern)
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_default();
                for key in keys {
                    let _: Result<(), _> = redis::cmd("DEL").arg(key).query_async(&mut conn).await;
                }
            }
            Some(row)
        }
        _ => {
            eprintln!("Redis Cluster skipped: cannot connect");
            None
        }
    }
}

fn print_table(rows: Vec<Row>) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "| backend | accept p50 | accept p99 | dedup claim p50 | dedup claim p99 | accept / claim (p50) | accepts/s | events/s end to end |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {:.3} ms | {:.3} ms | {:.3} ms | {:.3} ms | {:.2}× | {:.0} | {:.0} |",
            r.backend,
            ms(r.accept_p50),
            ms(r.accept_p99),
            ms(r.claim_p50),
            ms(r.claim_p99),
            ms(r.accept_p50) / ms(r.claim_p50).max(1e-9),
            r.accepts_per_second,
            r.events_per_second,
        );
    }
}
