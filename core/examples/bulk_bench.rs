//! Run with: cargo run --release -p webhooks-core --features postgres --example bulk_bench
//!
//! A bulk replay beside accepts on PostgreSQL (issue 34): `BENCH_DEAD`
//! dead letters (default 10,000) replayed with `inbox::bulk::run` while 16
//! tasks accept new deliveries for its whole duration, against the same
//! accept load alone for as long. Reports accept latency (median, 99th
//! percentile) idle and during the bulk, and the bulk's own time. Three
//! rounds, idle and busy phases alternating in one run.
//!
//! The server comes from `WEBHOOKS_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`); the table is its own and is
//! dropped afterwards.

#[path = "support/pg_tables.rs"]
mod pg_tables;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use webhooks_core::inbox::bulk::{self, BulkAction};
use webhooks_core::inbox::{DeadLetterFilter, Inbox, NewEvent, PostgresInbox, sqlx};

const TASKS: u64 = 16;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Accepts from 16 tasks until `stop` is set; their latencies, sorted.
async fn accepts(
    inbox: &Arc<PostgresInbox>,
    stop: &Arc<AtomicBool>,
    next: &Arc<AtomicU64>,
) -> Vec<Duration> {
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let inbox = Arc::clone(inbox);
        let next = Arc::clone(next);
        let stop = Arc::clone(stop);
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let event = NewEvent::new(
                    format!("stripe:evt_new_{i}"),
                    "stripe",
                    format!(r#"{{"id":"evt_new_{i}","type":"invoice.paid"}}"#),
                );
                let started = Instant::now();
                inbox.accept(&event).await.expect("accept");
                times.push(started.elapsed());
            }
            times
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("task"));
    }
    all.sort();
    all
}

fn quantiles(times: &[Duration]) -> (f64, f64) {
    let ms = |d: Duration| d.as_secs_f64() * 1_000.0;
    (
        ms(times[times.len() / 2]),
        ms(times[times.len() * 99 / 100]),
    )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("WEBHOOKS_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let dead = env_or("BENCH_DEAD", 10_000);
    let mut idle_for = Duration::from_secs(3);
    let table = format!("bulk_bench_{}", std::process::id());
    let inbox = Arc::new(PostgresInbox::builder(&url).table(&table).connect().await?);
    inbox.migrate().await?;
    let pool = inbox.pool().clone();
    let next = Arc::new(AtomicU64::new(0));
    println!("bulk replay of {dead} dead letters beside accepts from 16 tasks, PostgreSQL");
    for round in 1..=3 {
        // Dead letters to replay, loaded directly.
        sqlx::query(&format!(
            "INSERT INTO \"{table}\" (event_key, scheme, delivery_id, event_type, matched_key, \
             headers, body, received_at, signed_at, state, attempts, due_at, token, lease_until, \
             last_error, updated_at) \
             SELECT 'stripe:evt_dead_{round}_' || i, 'stripe', 'evt_dead_' || i, 'invoice.paid', \
             'k#0', '[]', convert_to('{{\"id\":\"evt_' || i || '\"}}', 'UTF8'), \
             1700000000000 + i, NULL, 3, 5, 0, NULL, NULL, 'billing API answered 503', \
             1700000000000 + i FROM generate_series(1, {dead}) AS i"
        ))
        .execute(&pool)
        .await?;

        // Idle: accepts alone for as long as the last bulk took (3 s first).
        let stop = Arc::new(AtomicBool::new(false));
        let timer = {
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                tokio::time::sleep(idle_for).await;
                stop.store(true, Ordering::Relaxed);
            })
        };
        let idle = accepts(&inbox, &stop, &next).await;
        timer.await?;
        // Busy: accepts for the whole of the bulk replay.
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let replay = {
            let inbox = Arc::clone(&inbox);
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let outcome = bulk::run(
                    &*inbox,
                    BulkAction::Replay,
                    &DeadLetterFilter::default(),
                    10_000,
                    |_| {},
                )
                .await
                .expect("bulk replay");
                stop.store(true, Ordering::Relaxed);
                (outcome, started.elapsed())
            })
        };
        let busy = accepts(&inbox, &stop, &next).await;
        let (outcome, took) = replay.await?;
        idle_for = took;
        assert_eq!(outcome.progress.applied, dead.min(10_000));
        let (idle_p50, idle_p99) = quantiles(&idle);
        let (busy_p50, busy_p99) = quantiles(&busy);
        println!(
            "round {round}: accept idle p50 {idle_p50:.2} ms p99 {idle_p99:.2} ms ({} accepts) | \
             during the bulk p50 {busy_p50:.2} ms p99 {busy_p99:.2} ms ({} accepts; p99 {:.2}x) | \
             bulk: {} replayed in {:.1} s",
            idle.len(),
            busy.len(),
            busy_p99 / idle_p99,
            outcome.progress.applied,
            took.as_secs_f64()
        );
    }
    pg_tables::drop_inbox(&pool, &table).await?;
    Ok(())
}
