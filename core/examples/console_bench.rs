//! Run with: cargo run --release -p webhooks-core --features console,sqlite,postgres --example console_bench
//!
//! How long the console takes to render its pages over an inbox holding
//! many dead letters (`BENCH_DEAD`, default 100 000), on SQLite (a temporary
//! file) and PostgreSQL (`WEBHOOKS_POSTGRES_URL`, the test default; skipped
//! when it cannot be opened, in a table of its own, dropped afterwards).
//! Each page is rendered `BENCH_RUNS` times (default 21); the median and the
//! slowest are printed, in milliseconds, store round trips included.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use webhooks_core::console::{Access, Console, ConsoleRequest};
use webhooks_core::inbox::{ClaimToken, Inbox, NewEvent, PostgresInbox, SqliteInbox};

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Stores `count` events and dead-letters them all (`tasks` at a time).
async fn fill(inbox: &Arc<dyn Inbox>, count: usize, tasks: usize) {
    let started = Instant::now();
    futures_util::stream::iter(0..count)
        .map(|n| {
            let inbox = Arc::clone(inbox);
            async move {
                let kind = ["order.paid", "order.refunded", "invoice.failed"][n % 3];
                let mut event = NewEvent::new(
                    format!("webhooks:bench:msg_{n:07}"),
                    "bench",
                    format!("{{\"id\":\"msg_{n:07}\",\"amount\":{n}}}"),
                )
                .with_event_type(kind);
                event.delivery_id = Some(format!("msg_{n:07}"));
                inbox.accept(&event).await.expect("accept");
            }
        })
        .buffer_unordered(tasks)
        .collect::<Vec<()>>()
        .await;
    let mut dead = 0;
    while dead < count {
        let token = ClaimToken::random();
        let leased = inbox
            .lease(token, 1_000, Duration::from_secs(300), 1)
            .await
            .expect("lease");
        assert!(!leased.is_empty(), "nothing left to lease");
        futures_util::stream::iter(leased)
            .map(|event| {
                let inbox = Arc::clone(inbox);
                async move {
                    let done = inbox
                        .dead_letter(&event.meta.key, token, "bench: handler failed")
                        .await
                        .expect("dead letter");
                    assert_eq!(done, webhooks_core::inbox::Transition::Applied);
                }
            })
            .buffer_unordered(tasks)
            .collect::<Vec<()>>()
            .await;
        dead = usize::try_from(inbox.stats().await.expect("stats").dead).unwrap_or(0);
    }
    eprintln!(
        "  filled {count} dead letters in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

async fn measure(name: &str, inbox: Arc<dyn Inbox>) {
    let console_inbox = Arc::clone(&inbox);
    let console = Console::new(inbox);
    let runs = env_count("BENCH_RUNS", 21);
    let headers = http::HeaderMap::new();
    let key = "key=webhooks%3Abench%3Amsg_0050000";
    let pages: [(&str, &str, Option<&str>); 6] = [
        ("overview", "/", None),
        ("dead letters, first page", "/dead", None),
        (
            "dead letters, by event type",
            "/dead",
            Some("event_type=invoice.failed"),
        ),
        ("dead letter detail", "/dead/item", Some(key)),
        (
            "bulk count (bounded: 1,000)",
            "/dead/bulk",
            Some("action=replay&event_type=order.paid"),
        ),
        (
            "lookup by delivery id (scans 10,000)",
            "/dead",
            Some("delivery_id=msg_0009000"),
        ),
    ];
    println!("{name}");
    let mut stats = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        console_inbox.stats().await.expect("stats");
        stats.push(started.elapsed());
    }
    stats.sort();
    println!(
        "  {:<40} median {:>7.2} ms   max {:>7.2} ms",
        "(Inbox::stats alone)",
        stats[runs / 2].as_secs_f64() * 1e3,
        stats[runs - 1].as_secs_f64() * 1e3
    );
    for (label, path, query) in pages {
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let started = Instant::now();
            let page = console
                .handle(
                    Some(Access::ReadOnly("bench".into())),
                    ConsoleRequest::new(&http::Method::GET, path, query, &headers, b""),
                )
                .await;
            times.push(started.elapsed());
            assert_eq!(page.status, 200, "{label}");
        }
        times.sort();
        println!(
            "  {label:<40} median {:>7.2} ms   max {:>7.2} ms",
            times[runs / 2].as_secs_f64() * 1e3,
            times[runs - 1].as_secs_f64() * 1e3
        );
    }
}

#[tokio::main]
async fn main() {
    let count = env_count("BENCH_DEAD", 100_000);
    let dir = std::env::temp_dir().join(format!("console-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let sqlite = SqliteInbox::connect(&format!("sqlite://{}/inbox.db?mode=rwc", dir.display()))
        .await
        .expect("sqlite");
    sqlite.migrate().await.expect("migrate");
    let sqlite: Arc<dyn Inbox> = Arc::new(sqlite);
    fill(&sqlite, count, 1).await;
    measure(&format!("SQLite, {count} dead letters"), sqlite).await;
    let _ = std::fs::remove_dir_all(&dir);

    let url = std::env::var("WEBHOOKS_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let table = format!("console_bench_{}", std::process::id());
    match PostgresInbox::builder(&url)
        .table(&table)
        .max_connections(16)
        .connect()
        .await
    {
        Ok(postgres) => {
            postgres.migrate().await.expect("migrate");
            let inbox: Arc<dyn Inbox> = Arc::new(postgres.clone());
            fill(&inbox, count, 16).await;
            measure(&format!("PostgreSQL, {count} dead letters"), inbox).await;
            let drop = format!("DROP TABLE IF EXISTS \"{table}\"");
            let _ = webhooks_core::inbox::sqlx::query(&drop)
                .execute(postgres.pool())
                .await;
        }
        Err(error) => eprintln!("PostgreSQL skipped: {error}"),
    }
}
