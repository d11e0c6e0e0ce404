//! Run with: cargo run --release -p webhooks-core --all-features --example store_bench
//!
//! Measures every dedup store backend on this machine: claims per second with
//! 16 concurrent tasks over unique keys (20 000 claims by default), and the
//! latency of `claim` and of `complete` (median and 99th percentile) under the
//! same concurrency. Prints a table.
//!
//! Servers come from `WEBHOOKS_REDIS_URL` (default `redis://127.0.0.1:6379`),
//! `WEBHOOKS_POSTGRES_URL` (`postgres://postgres@127.0.0.1:5432/test`) and
//! `WEBHOOKS_MYSQL_URL` (`mysql://root@127.0.0.1:3306/test`); SQLite uses a
//! temporary file. A backend that cannot be opened is reported and skipped.
//! `BENCH_CLAIMS` and `BENCH_TASKS` change the counts; `BENCH_ONLY=sqlite`
//! runs only the backends whose row name contains that text. SQLite runs
//! twice, side by side: with its default pool of 4 connections (taking turns
//! at SQLite's write lock) and with a single writer connection (operations
//! only queue for it). Each run works in its own table or key prefix and
//! drops the tables afterwards.
//!
//! The Redis Cluster rows (`WEBHOOKS_REDIS_CLUSTER_URL`, default
//! `redis://127.0.0.1:7000`, the cluster `.ci/redis-cluster start` runs):
//! `RedisClusterStore` as configured by default, and with
//! `wait_for_replicas(1, 1 s)`.
//!
//! `BENCH_ROUNDS=n` (default 1) runs every backend `n` times, interleaved
//! (round 1: every backend, round 2: every backend, …), and prints for each
//! the median claims/s with its range, and its ratio to the single Redis of
//! the same round (median and range): on a machine shared with other work,
//! the ratios measured side by side hold better than the absolute figures.

use std::sync::Arc;
use std::time::{Duration, Instant};

use webhooks_core::dedup::{
    Claim, ClaimToken, DedupStore, MemoryStore, MySqlStore, OpenError, PostgresStore,
    RedisClusterStore, RedisStore, SqliteStore, Transition,
};

const LEASE: Duration = Duration::from_secs(60);
const RETENTION: Duration = Duration::from_secs(120);

struct Figures {
    claims_per_second: f64,
    claim_p50: Duration,
    claim_p99: Duration,
    complete_p50: Duration,
    complete_p99: Duration,
}

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn env_url(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
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

/// Runs `op` over `keys` from `tasks` concurrent tasks; returns the wall time
/// and every operation's latency, sorted.
async fn drive<F, Fut>(
    keys: Arc<Vec<(String, ClaimToken)>>,
    tasks: usize,
    op: F,
) -> (Duration, Vec<Duration>)
where
    F: Fn(String, ClaimToken) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let keys = Arc::clone(&keys);
            let op = op.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(keys.len() / tasks + 1);
                for (key, token) in keys.iter().skip(t).step_by(tasks) {
                    let at = Instant::now();
                    op(key.clone(), *token).await;
                    latencies.push(at.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut all = Vec::with_capacity(keys.len());
    for handle in handles {
        all.extend(handle.await.expect("bench task"));
    }
    let wall = started.elapsed();
    all.sort_unstable();
    (wall, all)
}

/// What every backend is measured with.
struct Run {
    claims: usize,
    tasks: usize,
    /// The connect timeout.
    connect: Duration,
}

async fn bench(store: Arc<dyn DedupStore>, &Run { claims, tasks, .. }: &Run) -> Figures {
    let run = suffix();
    let keys: Arc<Vec<(String, ClaimToken)>> = Arc::new(
        (0..claims)
            .map(|i| (format!("webhooks:bench-{run}:{i}"), ClaimToken::random()))
            .collect(),
    );
    // Warm the pools and caches.
    for i in 0..32 {
        let key = format!("webhooks:bench-{run}:warm-{i}");
        let _ = store.claim(&key, ClaimToken::random(), LEASE).await;
    }
    let claim_store = Arc::clone(&store);
    let (wall, claim_latencies) = drive(Arc::clone(&keys), tasks, move |key, token| {
        let store = Arc::clone(&claim_store);
        async move {
            let claim = store.claim(&key, token, LEASE).await.expect("claim");
            assert_eq!(claim, Claim::Claimed);
        }
    })
    .await;
    let complete_store = Arc::clone(&store);
    let (_, complete_latencies) = drive(keys, tasks, move |key, token| {
        let store = Arc::clone(&complete_store);
        async move {
            let done = store
                .complete(&key, token, RETENTION)
                .await
                .expect("complete");
            assert_eq!(done, Transition::Applied);
        }
    })
    .await;
    Figures {
        claims_per_second: claims as f64 / wall.as_secs_f64(),
        claim_p50: percentile(&claim_latencies, 0.50),
        claim_p99: percentile(&claim_latencies, 0.99),
        complete_p50: percentile(&complete_latencies, 0.50),
        complete_p99: percentile(&complete_latencies, 0.99),
    }
}

/// Benchmarks the store if it opened.
async fn bench_opened<S: DedupStore + 'static>(
    opened: Result<S, OpenError>,
    run: &Run,
) -> Result<Figures, String> {
    match opened {
        Ok(store) => Ok(bench(Arc::new(store), run).await),
        Err(error) => Err(error.to_string()),
    }
}

/// Opens the SQL store `$builder` and, if it opened, benchmarks it: creates
/// its table, measures, drops the table with `$drop` (if given; `{}` is the
/// table's name) and closes the pool.
macro_rules! bench_sql {
    ($run:expr, $builder:expr $(, $drop:literal)?) => {
        match $builder.connect_timeout($run.connect).connect().await {
            Ok(store) => {
                store.migrate().await.expect("migrate");
                let figures = bench(Arc::new(store.clone()), $run).await;
                $(
                    sqlx::query(&format!($drop, store.table()))
                        .execute(store.pool())
                        .await
                        .expect("drop table");
                )?
                store.pool().close().await;
                Ok(figures)
            }
            Err(error) => Err(error.to_string()),
        }
    };
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

type Rows = Vec<(&'static str, Result<Figures, String>)>;

/// Every backend once.
async fn round(run: &Run) -> Rows {
    let mut rows: Rows = Vec::new();
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let wanted = |name: &str| name.contains(only.as_str());

    if wanted("memory (sharded map)") {
        let memory: Arc<dyn DedupStore> = Arc::new(MemoryStore::new());
        rows.push(("memory (sharded map)", Ok(bench(memory, run).await)));
    }

    if wanted("redis") {
        let redis = RedisStore::builder(&env_url("WEBHOOKS_REDIS_URL", "redis://127.0.0.1:6379"))
            .key_prefix(format!("dedup-bench:{}:", suffix()))
            .connect_timeout(run.connect)
            .connect()
            .await;
        rows.push(("redis", bench_opened(redis, run).await));
    }

    let cluster_url = env_url("WEBHOOKS_REDIS_CLUSTER_URL", "redis://127.0.0.1:7000");
    for (name, wait) in [
        ("redis cluster (3 primaries)", 0),
        ("redis cluster (3 primaries, WAIT 1)", 1),
    ] {
        if !wanted(name) {
            continue;
        }
        let cluster = RedisClusterStore::builder([cluster_url.as_str()])
            .key_prefix(format!("dedup-bench:{}:", suffix()))
            .connect_timeout(run.connect)
            .wait_for_replicas(wait, Duration::from_secs(1))
            .connect()
            .await;
        rows.push((name, bench_opened(cluster, run).await));
    }

    let table = format!("dedup_bench_{}", suffix());
    let pool_size = run.tasks as u32;
    let postgres_url = env_url(
        "WEBHOOKS_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    );
    if wanted("postgres") {
        let postgres = PostgresStore::builder(&postgres_url).table(&table);
        let postgres = postgres.max_connections(pool_size);
        rows.push(("postgres", bench_sql!(run, postgres, "DROP TABLE \"{}\"")));
    }

    if wanted("mysql (mariadb)") {
        let mysql_url = env_url("WEBHOOKS_MYSQL_URL", "mysql://root@127.0.0.1:3306/test");
        let mysql = MySqlStore::builder(&mysql_url).table(&table);
        let mysql = mysql.max_connections(pool_size);
        rows.push(("mysql (mariadb)", bench_sql!(run, mysql, "DROP TABLE `{}`")));
    }

    for (name, connections) in [
        ("sqlite (WAL, file, 4 connections)", 4),
        ("sqlite (WAL, file, 1 writer connection)", 1),
    ] {
        if !wanted(name) {
            continue;
        }
        let path = std::env::temp_dir().join(format!("webhooks-dedup-bench-{}.db", suffix()));
        let sqlite = SqliteStore::builder(&format!("sqlite://{}", path.display()))
            .max_connections(connections);
        rows.push((name, bench_sql!(run, sqlite)));
        for suffix in ["", "-wal", "-shm"] {
            let mut file = path.clone().into_os_string();
            file.push(suffix);
            let _ = std::fs::remove_file(file);
        }
    }

    rows
}

#[tokio::main]
async fn main() {
    let run = Run {
        claims: env_count("BENCH_CLAIMS", 20_000),
        tasks: env_count("BENCH_TASKS", 16).max(1),
        connect: Duration::from_secs(2),
    };
    let rounds = env_count("BENCH_ROUNDS", 1).max(1);
    let Run { claims, tasks, .. } = run;
    println!("{claims} claims over unique keys, then {claims} completes, {tasks} concurrent tasks");
    println!();
    if rounds == 1 {
        print_table(&round(&run).await);
    } else {
        let mut all = Vec::new();
        for n in 0..rounds {
            println!("round {} of {rounds}", n + 1);
            let rows = round(&run).await;
            print_table(&rows);
            println!();
            all.push(rows);
        }
        print_summary(&all);
    }
}

fn print_table(rows: &Rows) {
    println!("| backend | claims/s | claim p50 | claim p99 | complete p50 | complete p99 |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, figures) in rows {
        match figures {
            Ok(f) => println!(
                "| {name} | {:.0} | {} | {} | {} | {} |",
                f.claims_per_second,
                ms(f.claim_p50),
                ms(f.claim_p99),
                ms(f.complete_p50),
                ms(f.complete_p99)
            ),
            Err(error) => println!("| {name} | skipped: {error} | | | | |"),
        }
    }
}

/// Per backend over the rounds: claims/s (median, min–max), its ratio to
/// the single Redis of the same round, and the median claim p50 and p99.
fn print_summary(rounds: &[Rows]) {
    println!(
        "{} interleaved rounds; median [min–max] over the rounds",
        rounds.len()
    );
    println!();
    println!("| backend | claims/s | × single Redis | claim p50 | claim p99 |");
    println!("|---|---:|---:|---:|---:|");
    let median = |mut v: Vec<f64>| -> (f64, f64, f64) {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let redis_of = |round: &Rows| {
        round
            .iter()
            .find(|(name, _)| *name == "redis")
            .and_then(|(_, f)| f.as_ref().ok().map(|f| f.claims_per_second))
    };
    for (i, (name, _)) in rounds[0].iter().enumerate() {
        let figures: Vec<(&Figures, Option<f64>)> = rounds
            .iter()
            .filter_map(|round| Some((round.get(i)?.1.as_ref().ok()?, redis_of(round))))
            .collect();
        if figures.is_empty() {
            println!("| {name} | skipped | | | |");
            continue;
        }
        let (rate, rate_min, rate_max) =
            median(figures.iter().map(|(f, _)| f.claims_per_second).collect());
        let ratios: Vec<f64> = figures
            .iter()
            .filter_map(|(f, redis)| Some(f.claims_per_second / (*redis)?))
            .collect();
        let ratio = if ratios.is_empty() {
            String::new()
        } else {
            let (r, lo, hi) = median(ratios);
            format!("{r:.2} [{lo:.2}–{hi:.2}]")
        };
        let (p50, _, _) = median(
            figures
                .iter()
                .map(|(f, _)| f.claim_p50.as_secs_f64())
                .collect(),
        );
        let (p99, _, _) = median(
            figures
                .iter()
                .map(|(f, _)| f.claim_p99.as_secs_f64())
                .collect(),
        );
        println!(
            "| {name} | {rate:.0} [{rate_min:.0}–{rate_max:.0}] | {ratio} | {} | {} |",
            ms(Duration::from_secs_f64(p50)),
            ms(Duration::from_secs_f64(p99))
        );
    }
}
