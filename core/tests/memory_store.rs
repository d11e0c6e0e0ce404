//! What the in-process store promises at its edges: at capacity it forgets the
//! oldest completions, never in-flight claims or recent completions; a claim
//! outlives its lease until somebody takes it over.
//!
//! ```text
//! cargo test -p webhooks-core --test memory_store
//! ```

use std::time::Duration;

use webhooks_core::dedup::{Claim, ClaimToken, DedupStore, MemoryStore, StoreError, Transition};

const LEASE: Duration = Duration::from_secs(60);
const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
const CAPACITY: u64 = 1_000;
/// Large enough for the store to split its capacity over 4 shards, each
/// evicting on its own.
const SHARDED: u64 = 4 * 4096;

/// Claims and completes `key`, as a successful delivery does.
async fn deliver(store: &MemoryStore, key: &str) {
    let token = ClaimToken::random();
    assert_eq!(
        store.claim(key, token, LEASE).await.unwrap(),
        Claim::Claimed,
        "{key} is new"
    );
    assert_eq!(
        store.complete(key, token, RETENTION).await.unwrap(),
        Transition::Applied,
        "{key} completes"
    );
}

/// A run at capacity: 20 times more deliveries than the store holds, each
/// retried at once. Every retry must be answered "completed" (none runs
/// again), and the latest half-capacity of completions must all be there.
#[tokio::test]
async fn recent_completions_survive_at_capacity() {
    recent_completions_survive(CAPACITY, 20).await;
}

/// The same with the capacity split over shards: each shard forgets its own
/// oldest completions, and the latest half-capacity still all survive.
#[tokio::test]
async fn recent_completions_survive_at_capacity_sharded() {
    recent_completions_survive(SHARDED, 5).await;
}

async fn recent_completions_survive(capacity: u64, times: u64) {
    let store = MemoryStore::with_capacity(capacity);
    let total = times * capacity;
    let mut rerun = 0;
    for i in 0..total {
        let key = format!("webhooks:test:msg_{i}");
        deliver(&store, &key).await;
        // The sender missed the 2xx and retries right away.
        match store
            .claim(&key, ClaimToken::random(), LEASE)
            .await
            .unwrap()
        {
            Claim::Completed => {}
            _ => rerun += 1,
        }
    }
    assert_eq!(rerun, 0, "immediate retries that would run again");
    let mut lost = 0;
    assert!(
        store.len() <= capacity as usize,
        "{} keys held",
        store.len()
    );
    for i in total - capacity / 2..total {
        let key = format!("webhooks:test:msg_{i}");
        if store
            .claim(&key, ClaimToken::random(), LEASE)
            .await
            .unwrap()
            != Claim::Completed
        {
            lost += 1;
        }
    }
    assert_eq!(lost, 0, "recent completions forgotten");
}

/// Claims in flight while the store overflows with completions are never the
/// ones dropped: retries still see them in flight and their holders complete.
#[tokio::test]
async fn in_flight_claims_survive_a_full_store() {
    in_flight_claims_survive(CAPACITY).await;
}

/// The same over 4 shards.
#[tokio::test]
async fn in_flight_claims_survive_a_full_store_sharded() {
    in_flight_claims_survive(SHARDED).await;
}

async fn in_flight_claims_survive(capacity: u64) {
    let store = MemoryStore::with_capacity(capacity);
    let held: Vec<_> = (0..100)
        .map(|i| (format!("webhooks:test:slow_{i}"), ClaimToken::random()))
        .collect();
    for (key, token) in &held {
        assert_eq!(
            store.claim(key, *token, LEASE).await.unwrap(),
            Claim::Claimed
        );
    }
    for i in 0..10 * capacity {
        deliver(&store, &format!("webhooks:test:msg_{i}")).await;
    }
    for (key, token) in &held {
        let retry = store.claim(key, ClaimToken::random(), LEASE).await.unwrap();
        assert!(matches!(retry, Claim::InFlight { .. }), "{key}: {retry:?}");
        assert_eq!(
            store.complete(key, *token, RETENTION).await.unwrap(),
            Transition::Applied,
            "{key}"
        );
    }
}

/// A store full of unexpired claims refuses a new one (503 upstream) rather
/// than forgetting a claim; once a lease ran out, that claim makes room.
#[tokio::test]
async fn full_of_claims_refuses_then_makes_room_from_expired_leases() {
    let store = MemoryStore::with_capacity(10);
    for i in 0..9 {
        let key = format!("webhooks:test:long_{i}");
        assert_eq!(
            store
                .claim(&key, ClaimToken::random(), LEASE)
                .await
                .unwrap(),
            Claim::Claimed
        );
    }
    let short = ClaimToken::random();
    let lease = Duration::from_millis(50);
    assert_eq!(
        store
            .claim("webhooks:test:short", short, lease)
            .await
            .unwrap(),
        Claim::Claimed
    );
    let refused = store
        .claim("webhooks:test:new", ClaimToken::random(), LEASE)
        .await;
    assert!(
        matches!(refused, Err(StoreError::Unavailable(_))),
        "{refused:?}"
    );
    tokio::time::sleep(lease * 3).await;
    assert_eq!(
        store
            .claim("webhooks:test:new", ClaimToken::random(), LEASE)
            .await
            .unwrap(),
        Claim::Claimed
    );
    assert_eq!(store.len(), 10);
    // The expired claim was the one forgotten.
    assert_eq!(
        store
            .complete("webhooks:test:short", short, RETENTION)
            .await
            .unwrap(),
        Transition::Stale
    );
}

/// A holder whose lease ran out, with nobody taking over, may still extend
/// and complete; after a takeover it may not.
#[tokio::test]
async fn late_complete_applies_until_someone_takes_over() {
    let store = MemoryStore::new();
    let lease = Duration::from_millis(50);

    let token = ClaimToken::random();
    assert_eq!(
        store.claim("a", token, lease).await.unwrap(),
        Claim::Claimed
    );
    tokio::time::sleep(lease * 3).await;
    assert_eq!(
        store.extend("a", token, lease).await.unwrap(),
        Transition::Applied
    );
    tokio::time::sleep(lease * 3).await;
    assert_eq!(
        store.complete("a", token, RETENTION).await.unwrap(),
        Transition::Applied
    );
    assert_eq!(
        store.claim("a", ClaimToken::random(), lease).await.unwrap(),
        Claim::Completed
    );

    let old = ClaimToken::random();
    assert_eq!(store.claim("b", old, lease).await.unwrap(), Claim::Claimed);
    tokio::time::sleep(lease * 3).await;
    let new = ClaimToken::random();
    assert_eq!(store.claim("b", new, lease).await.unwrap(), Claim::Claimed);
    assert_eq!(
        store.complete("b", old, RETENTION).await.unwrap(),
        Transition::Stale
    );
    assert_eq!(
        store.extend("b", old, lease).await.unwrap(),
        Transition::Stale
    );
    assert_eq!(store.release("b", old).await.unwrap(), Transition::Stale);
    assert_eq!(
        store.complete("b", new, RETENTION).await.unwrap(),
        Transition::Applied
    );
}

/// The answers the pipeline takes without awaiting (`claim_ready`,
/// `complete_ready`) are the store's own, with the same effects as the
/// awaited operations, mixed in either order.
#[tokio::test]
async fn ready_answers_match_the_awaited_ones() {
    let store = MemoryStore::new();
    let (first, second) = (ClaimToken::random(), ClaimToken::random());
    let ready = |key: &str, token| store.claim_ready(key, token, LEASE).map(Result::unwrap);
    assert_eq!(ready("a", first), Some(Claim::Claimed));
    assert!(matches!(
        store.claim("a", second, LEASE).await.unwrap(),
        Claim::InFlight { .. }
    ));
    assert!(matches!(ready("a", second), Some(Claim::InFlight { .. })));
    // Another token cannot complete it; the holder can, once.
    assert_eq!(
        store
            .complete_ready("a", second, RETENTION)
            .map(Result::unwrap),
        Some(Transition::Stale)
    );
    assert_eq!(
        store
            .complete_ready("a", first, RETENTION)
            .map(Result::unwrap),
        Some(Transition::Applied)
    );
    assert_eq!(
        store.complete("a", first, RETENTION).await.unwrap(),
        Transition::Stale,
        "already completed"
    );
    assert_eq!(ready("a", second), Some(Claim::Completed));
    assert_eq!(
        store.claim("a", second, LEASE).await.unwrap(),
        Claim::Completed
    );
    // Claimed by the awaited call, completed by the ready one.
    let token = ClaimToken::random();
    assert_eq!(
        store.claim("b", token, LEASE).await.unwrap(),
        Claim::Claimed
    );
    assert_eq!(
        store
            .complete_ready("b", token, RETENTION)
            .map(Result::unwrap),
        Some(Transition::Applied)
    );
    assert_eq!(ready("b", first), Some(Claim::Completed));
}
