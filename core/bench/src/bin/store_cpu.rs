//! Server CPU per delivery: the library's dedup stores against the
//! hand-written floor for two round trips (issue 23, docs/performance.md
//! "Server CPU per delivery").
//!
//! ```text
//! cargo run --release --bin store_cpu -- [deliveries per run] [rounds]
//! ```
//!
//! One delivery is what the pipeline asks of a store: a claim before the
//! handler and a completion after it, one after the other on one connection.
//!
//! - **Redis**: `RedisStore::claim` + `complete_in_lease`, as the pipeline
//!   completes (a `SET … NX GET` and, well within the lease, a
//!   `SET … XX GET`) against
//!   `SET key token NX PX lease` + `SET key done PX retention`, through the
//!   same `redis` crate and `ConnectionManager`. The server is a private
//!   `redis-server` this program starts on a free port (nothing else talks
//!   to it); its CPU is `INFO cpu`'s `used_cpu_user + used_cpu_sys`.
//! - **PostgreSQL** (`WEBHOOKS_POSTGRES_URL`, default
//!   `postgres://postgres@127.0.0.1:5432/test`): `PostgresStore::claim` +
//!   `complete` against `INSERT … ON CONFLICT DO NOTHING` + `UPDATE` on a
//!   table of the same shape, each through a pool of one connection; the CPU
//!   is that connection's backend process (`pg_backend_pid()`,
//!   `/proc/<pid>/stat` user + system ticks), so other clients of the
//!   server do not count.
//!
//! The two sides alternate within each round (which goes first alternates
//! too); the figure is the median per-round ratio library / hand-written,
//! with the lowest and highest.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use webhooks_core::dedup::{Claim, ClaimToken, DedupStore, PostgresStore, RedisStore, Transition};

const LEASE: Duration = Duration::from_secs(30);
const RETENTION: Duration = Duration::from_secs(3600);

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .map_or(20_000, |a| a.parse().expect("deliveries"));
    let rounds: usize = args.next().map_or(7, |a| a.parse().expect("rounds"));
    println!("{n} deliveries per run, {rounds} rounds, library and hand-written alternating");

    let redis = PrivateRedis::start();
    redis_rounds(&redis.url(), n, rounds).await;
    drop(redis);

    let pg = std::env::var("WEBHOOKS_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    postgres_rounds(&pg, n, rounds).await;
}

/// A `redis-server` of this program's own, on a free port, persisting
/// nothing; killed on drop.
struct PrivateRedis {
    child: Child,
    port: u16,
}

impl PrivateRedis {
    fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server on PATH");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { child, port }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server's CPU seconds so far (user + system).
async fn redis_cpu(conn: &mut ConnectionManager) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(conn)
        .await
        .expect("INFO");
    info.lines()
        .filter_map(|line| {
            let (name, value) = line.trim().split_once(':')?;
            matches!(name, "used_cpu_user" | "used_cpu_sys").then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

async fn redis_rounds(url: &str, n: usize, rounds: usize) {
    let store = RedisStore::builder(url)
        .key_prefix("lib:")
        .connect()
        .await
        .expect("redis");
    let mut probe = store.connection().clone();
    let mut hand = store.connection().clone();
    let lease_ms = LEASE.as_millis() as u64;
    let retention_ms = RETENTION.as_millis() as u64;
    // Load the scripts and warm both paths.
    library_run(&store, "warm", 1_000).await;
    for i in 0..1_000 {
        hand_redis(&mut hand, &format!("hand:warm:{i}"), lease_ms, retention_ms).await;
    }
    let mut library = Vec::new();
    let mut handwritten = Vec::new();
    for round in 0..rounds {
        for side in order(round) {
            let before = redis_cpu(&mut probe).await;
            if side == Side::Library {
                library_run(&store, &format!("r{round}"), n).await;
            } else {
                for i in 0..n {
                    hand_redis(
                        &mut hand,
                        &format!("hand:r{round}:{i}"),
                        lease_ms,
                        retention_ms,
                    )
                    .await;
                }
            }
            let spent = redis_cpu(&mut probe).await - before;
            let per = spent * 1e6 / n as f64;
            if side == Side::Library {
                library.push(per)
            } else {
                handwritten.push(per)
            }
        }
    }
    report("Redis 7 (private redis-server)", &library, &handwritten);
}

async fn hand_redis(conn: &mut ConnectionManager, key: &str, lease_ms: u64, retention_ms: u64) {
    let token = ClaimToken::random().to_hex();
    let claimed: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(&token)
        .arg("NX")
        .arg("PX")
        .arg(lease_ms)
        .query_async(conn)
        .await
        .expect("SET NX");
    assert!(claimed.is_some(), "a fresh key is claimed");
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("done")
        .arg("PX")
        .arg(retention_ms)
        .query_async(conn)
        .await
        .expect("SET done");
}

/// `n` fresh deliveries through a library store: claim, then complete with
/// what is left of the lease, as the pipeline does.
async fn library_run(store: &dyn DedupStore, run: &str, n: usize) {
    for i in 0..n {
        let key = format!("{run}:{i}");
        let token = ClaimToken::random();
        let claimed_at = Instant::now();
        let claim = store.claim(&key, token, LEASE).await.expect("claim");
        assert!(matches!(claim, Claim::Claimed), "a fresh key is claimed");
        let lease_left = LEASE.saturating_sub(claimed_at.elapsed());
        let completed = store
            .complete_in_lease(&key, token, RETENTION, lease_left)
            .await
            .expect("complete");
        assert_eq!(completed, Transition::Applied, "the holder completes");
    }
}

/// The CPU seconds of one PostgreSQL backend so far (user + system).
fn backend_cpu(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .expect("the backend's /proc entry (same machine)");
    // Fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 here.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / clock_ticks_per_second()
}

fn clock_ticks_per_second() -> f64 {
    let out = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .expect("getconf");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("CLK_TCK")
}

async fn postgres_rounds(url: &str, n: usize, rounds: usize) {
    let store = PostgresStore::builder(url)
        .table("bench_store_cpu_lib")
        .max_connections(1)
        .connect()
        .await
        .expect("postgres");
    store.migrate().await.expect("migrate");
    let hand = PostgresStore::builder(url)
        .table("bench_store_cpu_hand")
        .max_connections(1)
        .connect()
        .await
        .expect("postgres");
    hand.migrate().await.expect("migrate");
    for pool in [store.pool(), hand.pool()] {
        for table in ["bench_store_cpu_lib", "bench_store_cpu_hand"] {
            sqlx::query(&format!("TRUNCATE \"{table}\""))
                .execute(pool)
                .await
                .expect("truncate");
        }
    }
    let pid = |pool| async move {
        sqlx::query_scalar::<_, i32>("SELECT pg_backend_pid()")
            .fetch_one(pool)
            .await
            .expect("pid")
    };
    let (lib_pid, hand_pid) = (pid(store.pool()).await, pid(hand.pool()).await);
    let insert = "INSERT INTO \"bench_store_cpu_hand\" (namespace, id, state, token, expires_at) \
                  VALUES ($1, $2, 1, $3, (EXTRACT(EPOCH FROM statement_timestamp()) * 1000)::BIGINT + $4) \
                  ON CONFLICT DO NOTHING";
    let update = "UPDATE \"bench_store_cpu_hand\" SET state = 2, \
                  expires_at = (EXTRACT(EPOCH FROM statement_timestamp()) * 1000)::BIGINT + $3 \
                  WHERE namespace = $1 AND id = $2";
    let hand_run = |run: String, n: usize| {
        let pool = hand.pool().clone();
        async move {
            for i in 0..n {
                let id = format!("{run}:{i}");
                let token = ClaimToken::random().to_hex();
                let inserted = sqlx::query(insert)
                    .bind("bench")
                    .bind(&id)
                    .bind(&token)
                    .bind(LEASE.as_millis() as i64)
                    .execute(&pool)
                    .await
                    .expect("insert");
                assert_eq!(inserted.rows_affected(), 1, "a fresh key is claimed");
                sqlx::query(update)
                    .bind("bench")
                    .bind(&id)
                    .bind(RETENTION.as_millis() as i64)
                    .execute(&pool)
                    .await
                    .expect("update");
            }
        }
    };
    library_run(&store, "warm", 1_000).await;
    hand_run("warm".to_owned(), 1_000).await;
    // The backends must not have changed (a pool of one, never closed).
    assert_eq!(
        (pid(store.pool()).await, pid(hand.pool()).await),
        (lib_pid, hand_pid)
    );
    let mut library = Vec::new();
    let mut handwritten = Vec::new();
    for round in 0..rounds {
        for side in order(round) {
            let (backend, before) = match side {
                Side::Library => (lib_pid, backend_cpu(lib_pid)),
                Side::Hand => (hand_pid, backend_cpu(hand_pid)),
            };
            if side == Side::Library {
                library_run(&store, &format!("r{round}"), n).await;
            } else {
                hand_run(format!("r{round}"), n).await;
            }
            let per = (backend_cpu(backend) - before) * 1e6 / n as f64;
            if side == Side::Library {
                library.push(per)
            } else {
                handwritten.push(per)
            }
        }
    }
    assert_eq!(
        (pid(store.pool()).await, pid(hand.pool()).await),
        (lib_pid, hand_pid)
    );
    report(
        "PostgreSQL 15 (the connection's backend)",
        &library,
        &handwritten,
    );
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Library,
    Hand,
}

fn order(round: usize) -> [Side; 2] {
    if round % 2 == 0 {
        [Side::Library, Side::Hand]
    } else {
        [Side::Hand, Side::Library]
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

fn report(what: &str, library: &[f64], hand: &[f64]) {
    let mut ratios: Vec<f64> = library.iter().zip(hand).map(|(l, h)| l / h).collect();
    let (lo, hi) = ratios
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    let (mut l, mut h) = (library.to_vec(), hand.to_vec());
    println!(
        "{what}: library {:.2} µs, hand-written {:.2} µs server CPU per delivery (medians); \
         ratio median {:.3} (lowest {lo:.3}, highest {hi:.3}, {} rounds)",
        median(&mut l),
        median(&mut h),
        median(&mut ratios),
        ratios.len()
    );
}
