//! Run with: cargo run --release -p webhooks-core --features postgres --example search_bench
//!
//! Search by a payload value on PostgreSQL at scale (issue 34): an inbox
//! table of `BENCH_ROWS` events (default 1,000,000; one in ten dead, the
//! rest completed), Stripe-like bodies, 20 per customer, then the
//! dead-letter and delivery listings searched with
//! `data.object.customer = cus_N` through the `Inbox` API:
//!
//! - without an index (a few runs), then with the GIN index docs/inbox.md
//!   documents (`jsonb_path_ops` on `"<table>_payload"(body)`), its build
//!   time reported;
//! - for a customer with 20 dead letters and for one with none (the search
//!   must then prove there is nothing);
//! - medians and the range of `BENCH_RUNS` runs (default 21).
//!
//! The server comes from `WEBHOOKS_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`); the table is its own and is
//! dropped afterwards.

#[path = "support/pg_tables.rs"]
mod pg_tables;

use std::time::{Duration, Instant};

use webhooks_core::inbox::{
    DeadLetterFilter, DeliveryFilter, DeliveryState, Inbox, PostgresInbox, Search, sqlx,
};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Median, min and max in milliseconds.
fn summary(mut times: Vec<Duration>) -> String {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1_000.0;
    format!(
        "median {:>8.2} ms  (min {:.2}, max {:.2}, {} runs)",
        ms(times[times.len() / 2]),
        ms(times[0]),
        ms(times[times.len() - 1]),
        times.len()
    )
}

async fn measure(inbox: &PostgresInbox, customer: &str, runs: u64, expect: usize) {
    let search: Search = format!("data.object.customer = {customer}")
        .parse()
        .expect("a search");
    let mut dead = Vec::new();
    let mut listed = Vec::new();
    for _ in 0..runs {
        let mut filter = DeadLetterFilter::default();
        filter.search = Some(search.clone());
        let started = Instant::now();
        let page = inbox.dead_letters(&filter).await.expect("dead letters");
        dead.push(started.elapsed());
        assert_eq!(page.items.len(), expect, "dead letters of {customer}");

        let mut filter = DeliveryFilter::state(DeliveryState::Dead);
        filter.search = Some(search.clone());
        let started = Instant::now();
        let page = inbox.deliveries(&filter).await.expect("deliveries");
        listed.push(started.elapsed());
        assert_eq!(page.items.len(), expect, "deliveries of {customer}");
    }
    println!(
        "  {customer:<9} ({expect:>2} dead)  dead_letters: {}",
        summary(dead)
    );
    println!(
        "  {customer:<9} ({expect:>2} dead)  deliveries:   {}",
        summary(listed)
    );
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("WEBHOOKS_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let rows = env_or("BENCH_ROWS", 1_000_000);
    let runs = env_or("BENCH_RUNS", 21).max(1);
    let table = format!("search_bench_{}", std::process::id());
    let inbox = PostgresInbox::builder(&url)
        .table(&table)
        .command_timeout(Duration::from_secs(600))
        .connect()
        .await?;
    inbox.migrate().await?;
    let pool = inbox.pool().clone();

    let started = Instant::now();
    // Loaded without the activity counters' trigger (not what is measured).
    sqlx::query(&format!("ALTER TABLE \"{table}\" DISABLE TRIGGER USER"))
        .execute(&pool)
        .await?;
    // 20 events per customer; one in ten dead (state 3, whole customers:
    // those whose number ends in 0), the rest completed (2).
    let customers = (rows / 20).max(1);
    let insert = format!(
        "INSERT INTO \"{table}\" (event_key, scheme, delivery_id, event_type, matched_key, \
         headers, body, received_at, signed_at, state, attempts, due_at, token, lease_until, \
         last_error, updated_at) \
         SELECT 'stripe:evt_' || i, 'stripe', 'evt_' || i, 'invoice.paid', 'k#0', '[]', \
         convert_to(json_build_object('id', 'evt_' || i, 'object', 'event', 'type', \
         'invoice.paid', 'data', json_build_object('object', json_build_object('id', \
         'in_' || i, 'customer', 'cus_' || (i % {customers}), 'amount_due', i % 10000, \
         'currency', 'eur')))::text, 'UTF8'), \
         1700000000000 + i, NULL, CASE WHEN i % 10 = 0 THEN 3 ELSE 2 END, 1, 0, NULL, NULL, \
         CASE WHEN i % 10 = 0 THEN 'billing API answered 503' END, 1700000000000 + i \
         FROM generate_series(1, {rows}) AS i"
    );
    sqlx::query(&insert).execute(&pool).await?;
    sqlx::query(&format!("ALTER TABLE \"{table}\" ENABLE TRIGGER USER"))
        .execute(&pool)
        .await?;
    sqlx::query(&format!("ANALYZE \"{table}\""))
        .execute(&pool)
        .await?;
    println!(
        "{rows} events ({} dead) inserted in {:.1} s",
        rows / 10,
        started.elapsed().as_secs_f64()
    );

    println!("without an index:");
    measure(&inbox, "cus_120", runs.min(3), 20).await;
    measure(&inbox, "cus_121", runs.min(3), 0).await;

    let started = Instant::now();
    sqlx::query(&format!(
        "CREATE INDEX \"{table}_payload_idx\" ON \"{table}\" \
         USING GIN (\"{table}_payload\"(body) jsonb_path_ops)"
    ))
    .execute(&pool)
    .await?;
    sqlx::query(&format!("ANALYZE \"{table}\""))
        .execute(&pool)
        .await?;
    println!(
        "GIN index (jsonb_path_ops) built in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    println!("with the index:");
    measure(&inbox, "cus_120", runs, 20).await;
    measure(&inbox, "cus_121", runs, 0).await;

    pg_tables::drop_inbox(&pool, &table).await?;
    Ok(())
}
