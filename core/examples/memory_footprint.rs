//! Run with: `cargo run --release -p webhooks-core --example memory_footprint`
//!
//! How much memory the in-process [`MemoryStore`] takes per remembered
//! delivery: claims and completes `N` deliveries (keys shaped like the
//! pipeline's, `webhooks:standard-webhooks:msg_<27 chars>`), then reports the
//! growth of the process's resident set per entry. Linux only (reads
//! `/proc/self/statm`).

use std::time::{Duration, Instant};

use webhooks_core::dedup::{Claim, ClaimToken, DedupStore, MemoryStore, Transition};

const ENTRIES: [u64; 2] = [100_000, 1_000_000];

/// Resident set size in bytes.
fn rss() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    println!("| completed deliveries | RSS growth | per entry | claim + complete |");
    println!("|---:|---:|---:|---:|");
    for n in ENTRIES {
        let store = MemoryStore::with_capacity(n * 2);
        let before = rss().unwrap_or(0);
        let started = Instant::now();
        for i in 0..n {
            let key = format!("webhooks:standard-webhooks:msg_{i:027}");
            let token = ClaimToken::random();
            let claimed = store.claim(&key, token, Duration::from_secs(60)).await;
            assert!(matches!(claimed, Ok(Claim::Claimed)), "fresh key claimed");
            let done = store
                .complete(&key, token, Duration::from_secs(7 * 24 * 3600))
                .await;
            assert!(matches!(done, Ok(Transition::Applied)), "completed");
        }
        let elapsed = started.elapsed();
        let grown = rss().unwrap_or(0).saturating_sub(before);
        println!(
            "| {n} | {:.1} MiB | {} B | {:.2} µs |",
            grown as f64 / (1024.0 * 1024.0),
            grown / n,
            elapsed.as_secs_f64() * 1e6 / n as f64
        );
        drop(store);
    }
}
