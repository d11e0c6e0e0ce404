//! One list of store-level scenarios, run against every `DedupStore` backend
//! whose feature is on: `MemoryStore` always, Redis, PostgreSQL, MySQL/MariaDB
//! and SQLite with their features.
//!
//! ```text
//! cargo test -p webhooks-core --all-features --test store_suite
//! ```
//!
//! Servers are found through `WEBHOOKS_REDIS_URL`, `WEBHOOKS_POSTGRES_URL` and
//! `WEBHOOKS_MYSQL_URL` (see `support`); a server that is down skips its tests,
//! or fails them under `CI=true`. Every test works in its own table or key
//! prefix, so the tests run in parallel.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Barrier;
use webhooks_core::dedup::{Claim, ClaimToken, DedupStore, OpenError, StoreError, Transition};

/// A backend under test.
trait Backend: Sized {
    /// An isolated table or key prefix on a live server; `None` skips the test.
    async fn fresh() -> Option<Self>;
    /// Another store instance (its own pool or client) on that table or prefix.
    async fn open(&self) -> Arc<dyn DedupStore>;
    /// The server's `host:port`, for the fault-injecting proxy (`None`: no server).
    fn authority(&self) -> Option<String> {
        None
    }
    /// Opens the same table or prefix through `host_port`, with a 1 s connect
    /// timeout and a 500 ms command timeout.
    async fn open_at(&self, _host_port: &str) -> Result<Arc<dyn DedupStore>, OpenError> {
        unreachable!("no server to reach")
    }
    /// Opens a store that cannot work (a closed port, a missing directory);
    /// `None` where nothing can be unreachable.
    async fn open_unreachable(&self) -> Option<Result<Arc<dyn DedupStore>, OpenError>> {
        match self.authority() {
            Some(_) => Some(self.open_at("127.0.0.1:1").await),
            None => None,
        }
    }
    /// Another instance on the same table or prefix whose command timeout
    /// is 500 ms; `None` where there is nothing to wait for.
    async fn open_short(&self) -> Option<Arc<dyn DedupStore>> {
        match self.authority() {
            Some(host_port) => Some(self.open_at(&host_port).await.expect("open")),
            None => None,
        }
    }
    /// Makes `key`'s row (or the whole database) wait for a lock held by
    /// another session until the guard is dropped; `None` where no lock can
    /// be held from outside.
    async fn hold_lock(&self, _key: &str) -> Option<Box<dyn std::any::Any + Send>> {
        None
    }
    /// Removes what the test left.
    async fn cleanup(self) {}
}

const LEASE: Duration = Duration::from_secs(30);
/// A completion's retention where the scenario needs no other.
const DAY: Duration = Duration::from_secs(86_400);

fn key(name: &str) -> String {
    format!("webhooks:suite:{name}")
}

/// Claims `key` from `tasks` tasks released together by a barrier, spread
/// over `stores` round-robin; returns every answer.
async fn race(
    stores: &[Arc<dyn DedupStore>],
    key: &str,
    tasks: usize,
    lease: Duration,
) -> Vec<Claim> {
    let barrier = Arc::new(Barrier::new(tasks));
    let handles: Vec<_> = (0..tasks)
        .map(|i| {
            let store = Arc::clone(&stores[i % stores.len()]);
            let barrier = Arc::clone(&barrier);
            let key = key.to_owned();
            tokio::spawn(async move {
                barrier.wait().await;
                store.claim(&key, ClaimToken::random(), lease).await
            })
        })
        .collect();
    let mut answers = Vec::with_capacity(tasks);
    for handle in handles {
        answers.push(handle.await.expect("claim task").expect("claim"));
    }
    answers
}

fn claimed(answers: &[Claim]) -> usize {
    answers.iter().filter(|a| **a == Claim::Claimed).count()
}

/// Asserts that a store call succeeds with an answer that matches the
/// pattern: `answers!(store.release(&key, token), Transition::Stale)`.
macro_rules! answers {
    ($call:expr, $expected:pat) => {{
        let answer = $call.await.unwrap();
        assert!(
            matches!(answer, $expected),
            "{} answered {answer:?}",
            stringify!($call)
        );
    }};
}

/// Asserts the store error is one the pipeline answers with a 503.
fn assert_down(error: &StoreError) {
    assert!(
        matches!(error, StoreError::Unavailable(_) | StoreError::Timeout),
        "expected Unavailable or Timeout, got {error:?}"
    );
}

/// Asserts that opening failed with a 503 error, or (a backend may open
/// lazily) that the opened store's first claim, of `name`, does.
async fn assert_open_fails(opened: Result<Arc<dyn DedupStore>, OpenError>, name: &str) {
    match opened {
        Err(OpenError::Store(error)) => assert_down(&error),
        Err(other) => panic!("expected a store error, got {other:?}"),
        Ok(store) => {
            let error = store
                .claim(&key(name), ClaimToken::random(), LEASE)
                .await
                .unwrap_err();
            assert_down(&error);
        }
    }
}

/// Claims `name` `attempts` times: each fails with a 503 error in under 3 s.
async fn assert_claims_fail_fast(store: &dyn DedupStore, name: &str, attempts: usize) {
    for attempt in 0..attempts {
        let started = Instant::now();
        let error = store
            .claim(&key(name), ClaimToken::random(), LEASE)
            .await
            .unwrap_err();
        assert_down(&error);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "attempt {attempt} took {:?}",
            started.elapsed()
        );
    }
}

/// A fresh backend and a store on it; `None` (the test ends) without a server.
async fn fresh_store<B: Backend>() -> Option<(B, Arc<dyn DedupStore>)> {
    let backend = B::fresh().await?;
    let store = backend.open().await;
    Some((backend, store))
}

/// A fresh backend with a server, and a fault-injecting proxy in front of
/// it; `None` (the test ends) without either.
async fn behind_proxy<B: Backend>() -> Option<(B, support::FaultProxy)> {
    let backend = B::fresh().await?;
    let Some(upstream) = backend.authority() else {
        backend.cleanup().await;
        return None;
    };
    let proxy = support::FaultProxy::start(&upstream).await;
    Some((backend, proxy))
}

/// A store opened through `proxy`, on which `token` has claimed `name`.
async fn claimed_through<B: Backend>(
    backend: &B,
    proxy: &support::FaultProxy,
    name: &str,
    token: ClaimToken,
) -> Arc<dyn DedupStore> {
    let store = backend
        .open_at(&proxy.authority())
        .await
        .expect("open through the proxy");
    answers!(store.claim(&key(name), token, LEASE), Claim::Claimed);
    store
}

mod scenarios {
    use super::*;

    /// 64 tasks behind a barrier claim one key: exactly one wins, the others
    /// see it in flight.
    pub(super) async fn storm<B: Backend>() {
        let Some((backend, store)) = fresh_store::<B>().await else {
            return;
        };
        let answers = race(&[store], &key("storm"), 64, LEASE).await;
        assert_eq!(claimed(&answers), 1, "{answers:?}");
        for answer in answers.iter().filter(|a| **a != Claim::Claimed) {
            let Claim::InFlight { retry_after } = answer else {
                panic!("expected InFlight, got {answer:?}");
            };
            // The app-clock backends stamp `now` before a claim waits for
            // the lock, so the winner's deadline may be a little past `LEASE`
            // from the loser's `now`.
            assert!(
                *retry_after <= LEASE + Duration::from_secs(2)
                    && *retry_after > Duration::from_secs(20),
                "{retry_after:?}"
            );
        }
        backend.cleanup().await;
    }

    /// An expired lease is taken over exactly once; the old holder's
    /// complete, release and extend are then stale.
    pub(super) async fn lease_expiry_takeover<B: Backend>() {
        let Some((backend, store)) = fresh_store::<B>().await else {
            return;
        };
        let key = key("lease");
        let old = ClaimToken::random();
        let lease = Duration::from_millis(300);
        answers!(store.claim(&key, old, lease), Claim::Claimed);
        answers!(
            store.claim(&key, ClaimToken::random(), lease),
            Claim::InFlight { .. }
        );
        tokio::time::sleep(Duration::from_millis(450)).await;
        let answers = race(&[Arc::clone(&store)], &key, 16, LEASE).await;
        assert_eq!(claimed(&answers), 1, "one takeover: {answers:?}");
        answers!(store.complete(&key, old, DAY), Transition::Stale);
        // Told its lease is over, as the pipeline would be: stale too.
        answers!(
            store.complete_in_lease(&key, old, DAY, Duration::ZERO),
            Transition::Stale
        );
        answers!(store.release(&key, old), Transition::Stale);
        answers!(store.extend(&key, old, LEASE), Transition::Stale);
        // The takeover still holds: a new attempt sees it in flight.
        answers!(
            store.claim(&key, ClaimToken::random(), LEASE),
            Claim::InFlight { .. }
        );
        backend.cleanup().await;
    }

    /// A completion well within the lease (as the pipeline completes most
    /// deliveries) answers what `complete` answers: applied for the holder,
    /// remembered; stale once completed; stale for a key that is gone, and
    /// nothing written for it.
    pub(super) async fn completes_within_the_lease<B: Backend>() {
        let Some((backend, store)) = fresh_store::<B>().await else {
            return;
        };
        let held = key("in-lease");
        let token = ClaimToken::random();
        answers!(store.claim(&held, token, LEASE), Claim::Claimed);
        answers!(
            store.complete_in_lease(&held, token, DAY, LEASE),
            Transition::Applied
        );
        answers!(
            store.claim(&held, ClaimToken::random(), LEASE),
            Claim::Completed
        );
        answers!(
            store.complete_in_lease(&held, token, DAY, LEASE),
            Transition::Stale
        );
        let gone = key("in-lease-gone");
        answers!(
            store.complete_in_lease(&gone, token, DAY, LEASE),
            Transition::Stale
        );
        answers!(
            store.claim(&gone, ClaimToken::random(), LEASE),
            Claim::Claimed
        );
        backend.cleanup().await;
    }

    /// A lease that ran out while nobody took over still belongs to its
    /// token: `complete` (a slow handler, or a retried complete after a store
    /// outage) succeeds and the delivery is never run again; `extend`
    /// re-acquires the claim and `release` lets it go. Other tokens stay
    /// stale, and a late complete after a takeover or a completion by someone
    /// else changes nothing.
    pub(super) async fn late_settle_without_takeover<B: Backend>() {
        let Some((backend, store)) = fresh_store::<B>().await else {
            return;
        };
        let lease = Duration::from_millis(300);
        let run_out = || tokio::time::sleep(Duration::from_millis(450));

        // complete after the lease, nobody took over: applied, remembered.
        let done = key("late-complete");
        let token = ClaimToken::random();
        answers!(store.claim(&done, token, lease), Claim::Claimed);
        run_out().await;
        answers!(
            store.complete(&done, ClaimToken::random(), DAY),
            Transition::Stale
        );
        answers!(store.complete(&done, token, DAY), Transition::Applied);
        answers!(
            store.claim(&done, ClaimToken::random(), LEASE),
            Claim::Completed
        );
        answers!(store.complete(&done, token, DAY), Transition::Stale);

        // extend after the lease, nobody took over: the claim is ours again.
        let extended = key("late-extend");
        let token = ClaimToken::random();
        answers!(store.claim(&extended, token, lease), Claim::Claimed);
        run_out().await;
        answers!(
            store.extend(&extended, ClaimToken::random(), LEASE),
            Transition::Stale
        );
        answers!(store.extend(&extended, token, LEASE), Transition::Applied);
        answers!(
            store.claim(&extended, ClaimToken::random(), LEASE),
            Claim::InFlight { .. }
        );
        answers!(store.complete(&extended, token, DAY), Transition::Applied);

        // release after the lease: the next attempt may run at once.
        let released = key("late-release");
        let token = ClaimToken::random();
        answers!(store.claim(&released, token, lease), Claim::Claimed);
        run_out().await;
        answers!(store.release(&released, token), Transition::Applied);
        answers!(
            store.claim(&released, ClaimToken::random(), LEASE),
            Claim::Claimed
        );

        // Someone took over, then completed: the old token stays stale.
        let taken = key("late-taken");
        let old = ClaimToken::random();
        answers!(store.claim(&taken, old, lease), Claim::Claimed);
        run_out().await;
        let new = ClaimToken::random();
        answers!(store.claim(&taken, new, LEASE), Claim::Claimed);
        answers!(store.complete(&taken, old, DAY), Transition::Stale);
        answers!(store.extend(&taken, old, LEASE), Transition::Stale);
        answers!(store.complete(&taken, new, DAY), Transition::Applied);
        answers!(store.complete(&taken, old, DAY), Transition::Stale);
        answers!(store.release(&taken, old), Transition::Stale);
        answers!(
            store.claim(&taken, ClaimToken::random(), LEASE),
            Claim::Completed
        );
        backend.cleanup().await;
    }

    /// 1000 deliveries (500 ids, each sent twice at once) claim and complete
    /// concurrently while a thread burns a core: no store error (no 503),
    /// every id runs exactly once and ends completed.
    pub(super) async fn delivery_storm<B: Backend>() {
        let Some(backend) = B::fresh().await else {
            return;
        };
        let store = backend.open().await;
        const IDS: usize = 500;
        let burning = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let burner = {
            let burning = Arc::clone(&burning);
            std::thread::spawn(move || {
                let mut x = 0u64;
                while burning.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005) + 1);
                }
            })
        };
        let barrier = Arc::new(Barrier::new(2 * IDS));
        let handles: Vec<_> = (0..2 * IDS)
            .map(|i| {
                let store = Arc::clone(&store);
                let barrier = Arc::clone(&barrier);
                let key = key(&format!("delivery-storm-{}", i % IDS));
                tokio::spawn(async move {
                    barrier.wait().await;
                    let token = ClaimToken::random();
                    match store.claim(&key, token, LEASE).await? {
                        Claim::Claimed => {
                            // The handler.
                            tokio::task::yield_now().await;
                            store
                                .complete(&key, token, DAY)
                                .await
                                .map(|t| (i % IDS, Some(t)))
                        }
                        Claim::InFlight { .. } | Claim::Completed => Ok((i % IDS, None)),
                        other => panic!("unexpected {other:?}"),
                    }
                })
            })
            .collect();
        let mut runs = vec![0usize; IDS];
        let mut errors = Vec::new();
        for handle in handles {
            match handle.await.expect("delivery task") {
                Ok((id, Some(Transition::Applied))) => runs[id] += 1,
                Ok((id, Some(Transition::Stale))) => {
                    errors.push(format!("{id}: complete was stale"));
                    runs[id] += 1;
                }
                Ok((_, None)) => {}
                Err(error) => errors.push(format!("{error}")),
            }
        }
        burning.store(false, std::sync::atomic::Ordering::Relaxed);
        burner.join().expect("burner");
        assert!(
            errors.is_empty(),
            "{} errors: {:?}",
            errors.len(),
            &errors[..errors.len().min(5)]
        );
        let twice: Vec<_> = (0..IDS).filter(|&id| runs[id] > 1).collect();
        assert!(twice.is_empty(), "ran twice: {twice:?}");
        for (id, ran) in runs.iter().enumerate() {
            assert_eq!(*ran, 1, "id {id} never ran");
            answers!(
                store.claim(
                    &key(&format!("delivery-storm-{id}")),
                    ClaimToken::random(),
                    LEASE
                ),
                Claim::Completed
            );
        }
        backend.cleanup().await;
    }

    /// A released claim can be claimed again at once; a second release is stale.
    pub(super) async fn release_then_reclaim<B: Backend>() {
        let Some((backend, store)) = fresh_store::<B>().await else {
            return;
        };
        let key = key("release");
        let first = ClaimToken::random();
        answers!(store.claim(&key, first, LEASE), Claim::Claimed);
        answers!(store.release(&key, first), Transition::Applied);
        answers!(store.release(&key, first), Transition::Stale);
        let second = ClaimToken::random();
        answers!(store.claim(&key, second, LEASE), Claim::Claimed);
        answers!(store.complete(&key, first, LEASE), Transition::Stale);
        answers!(store.complete(&key, second, LEASE), Transition::Applied);
        backend.cleanup().await;
    }

    /// A completed key answers Completed until its retention ends, then can
    /// be claimed again; a completed claim can be neither completed, released
    /// nor extended again.
    pub(super) async fn completed_until_retention<B: Backend>() {
        let Some((backend, store)) = fresh_store::<B>().await else {
            return;
        };
        let key = key("completed");
        let token = ClaimToken::random();
        let retention = Duration::from_millis(500);
        answers!(store.claim(&key, token, LEASE), Claim::Claimed);
        answers!(store.complete(&key, token, retention), Transition::Applied);
        answers!(
            store.claim(&key, ClaimToken::random(), LEASE),
            Claim::Completed
        );
        answers!(store.complete(&key, token, retention), Transition::Stale);
        answers!(store.release(&key, token), Transition::Stale);
        answers!(store.extend(&key, token, LEASE), Transition::Stale);
        tokio::time::sleep(Duration::from_millis(200)).await;
        answers!(
            store.claim(&key, ClaimToken::random(), LEASE),
            Claim::Completed
        );
        tokio::time::sleep(Duration::from_millis(450)).await;
        answers!(
            store.claim(&key, ClaimToken::random(), LEASE),
            Claim::Claimed
        );
        backend.cleanup().await;
    }

    /// Only the holder's token extends the lease, and the extension holds.
    pub(super) async fn extend_needs_the_token<B: Backend>() {
        let Some((backend, store)) = fresh_store::<B>().await else {
            return;
        };
        let key = key("extend");
        let holder = ClaimToken::random();
        let short = Duration::from_millis(400);
        answers!(store.claim(&key, holder, short), Claim::Claimed);
        answers!(
            store.extend(&key, ClaimToken::random(), LEASE),
            Transition::Stale
        );
        answers!(
            store.extend(&key, holder, Duration::from_secs(5)),
            Transition::Applied
        );
        tokio::time::sleep(Duration::from_millis(600)).await;
        match store
            .claim(&key, ClaimToken::random(), LEASE)
            .await
            .unwrap()
        {
            Claim::InFlight { retry_after } => {
                assert!(retry_after > Duration::from_secs(3), "{retry_after:?}");
            }
            other => panic!("the extended lease should hold, got {other:?}"),
        }
        answers!(
            store.extend(&key, ClaimToken::random(), LEASE),
            Transition::Stale
        );
        // Unknown keys have nothing to extend.
        answers!(
            store.extend(&super::key("never"), holder, LEASE),
            Transition::Stale
        );
        backend.cleanup().await;
    }

    /// A token settles its own claim only: another key's token neither
    /// completes, releases nor extends it (the in-memory store finds a
    /// settled entry by its table hash and the token).
    pub(super) async fn a_token_settles_its_own_key_only<B: Backend>() {
        let Some((backend, store)) = fresh_store::<B>().await else {
            return;
        };
        let (a, b) = (key("own-a"), key("own-b"));
        let (token_a, token_b) = (ClaimToken::random(), ClaimToken::random());
        answers!(store.claim(&a, token_a, LEASE), Claim::Claimed);
        answers!(store.claim(&b, token_b, LEASE), Claim::Claimed);
        answers!(store.complete(&b, token_a, DAY), Transition::Stale);
        answers!(store.release(&a, token_b), Transition::Stale);
        answers!(store.extend(&b, token_a, LEASE), Transition::Stale);
        answers!(store.complete(&a, token_a, DAY), Transition::Applied);
        answers!(store.release(&b, token_b), Transition::Applied);
        answers!(
            store.claim(&a, ClaimToken::random(), LEASE),
            Claim::Completed
        );
        answers!(store.claim(&b, ClaimToken::random(), LEASE), Claim::Claimed);
        backend.cleanup().await;
    }

    /// Two store instances (two pools or clients) on one server: still
    /// exactly one winner, and each sees the other's completion.
    pub(super) async fn two_instances<B: Backend>() {
        let Some(backend) = B::fresh().await else {
            return;
        };
        let stores = [backend.open().await, backend.open().await];
        let key = key("two");
        let answers = race(&stores, &key, 64, LEASE).await;
        assert_eq!(claimed(&answers), 1, "{answers:?}");

        let other = key.clone() + "-done";
        let token = ClaimToken::random();
        answers!(stores[0].claim(&other, token, LEASE), Claim::Claimed);
        answers!(
            stores[1].claim(&other, ClaimToken::random(), LEASE),
            Claim::InFlight { .. }
        );
        answers!(
            stores[0].complete(&other, token, LEASE),
            Transition::Applied
        );
        answers!(
            stores[1].claim(&other, ClaimToken::random(), LEASE),
            Claim::Completed
        );
        drop(stores);
        backend.cleanup().await;
    }

    /// A server that is not there: opening fails within a few seconds with an
    /// error the pipeline answers with a 503.
    pub(super) async fn unreachable_fails_fast<B: Backend>() {
        let Some(backend) = B::fresh().await else {
            return;
        };
        let started = Instant::now();
        let Some(result) = backend.open_unreachable().await else {
            backend.cleanup().await;
            return;
        };
        let elapsed = started.elapsed();
        assert_open_fails(result, "down").await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "took {elapsed:?}"
        );
        backend.cleanup().await;
    }

    /// A server that stops answering mid-connection: operations time out
    /// instead of hanging.
    pub(super) async fn hung_server_times_out<B: Backend>() {
        let Some((backend, proxy)) = behind_proxy::<B>().await else {
            return;
        };
        let token = ClaimToken::random();
        let store = claimed_through(&backend, &proxy, "hung", token).await;
        proxy.freeze();
        assert_claims_fail_fast(&*store, "hung-2", 2).await;
        let started = Instant::now();
        assert_down(
            &store
                .complete(&key("hung"), token, LEASE)
                .await
                .unwrap_err(),
        );
        assert!(started.elapsed() < Duration::from_secs(3));
        proxy.kill();
        drop(store);
        backend.cleanup().await;
    }

    /// A server that goes away: operations fail fast, and keep failing fast
    /// while it stays away.
    pub(super) async fn dead_server_is_unavailable<B: Backend>() {
        let Some((backend, proxy)) = behind_proxy::<B>().await else {
            return;
        };
        let store = claimed_through(&backend, &proxy, "dead", ClaimToken::random()).await;
        proxy.kill();
        assert_claims_fail_fast(&*store, "dead-2", 3).await;
        drop(store);
        backend.cleanup().await;
    }

    /// A server that accepts connections but never answers: opening (or the
    /// first operation) fails within a few seconds.
    pub(super) async fn silent_server_fails_fast<B: Backend>() {
        let Some((backend, proxy)) = behind_proxy::<B>().await else {
            return;
        };
        proxy.freeze();
        let started = Instant::now();
        assert_open_fails(backend.open_at(&proxy.authority()).await, "silent").await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "took {:?}",
            started.elapsed()
        );
        proxy.kill();
        backend.cleanup().await;
    }

    /// A row locked by another session (a long transaction, a stuck
    /// migration): claim and complete give up with `Timeout` after the
    /// command timeout instead of waiting.
    pub(super) async fn lock_held_elsewhere_times_out<B: Backend>() {
        let Some((backend, store)) = fresh_store::<B>().await else {
            return;
        };
        let key = key("locked");
        let token = ClaimToken::random();
        answers!(store.claim(&key, token, LEASE), Claim::Claimed);
        let Some(guard) = backend.hold_lock(&key).await else {
            backend.cleanup().await;
            return;
        };
        let short = backend
            .open_short()
            .await
            .expect("a backend with locks has timeouts");
        let started = Instant::now();
        let error = short
            .claim(&key, ClaimToken::random(), LEASE)
            .await
            .unwrap_err();
        assert!(matches!(error, StoreError::Timeout), "{error:?}");
        let error = short.complete(&key, token, LEASE).await.unwrap_err();
        assert!(matches!(error, StoreError::Timeout), "{error:?}");
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "took {:?}",
            started.elapsed()
        );
        drop(guard);
        // Once the lock is gone, the claim still holds. A timed-out statement
        // may still run in the database once the lock is released (MySQL
        // keeps it waiting up to `innodb_lock_wait_timeout`): the late
        // `complete` then applies, and ours finds the key completed.
        answers!(
            store.complete(&key, token, LEASE),
            Transition::Applied | Transition::Stale
        );
        answers!(
            store.claim(&key, ClaimToken::random(), LEASE),
            Claim::Completed
        );
        drop((store, short));
        backend.cleanup().await;
    }
}

/// Instantiates every scenario for one backend.
macro_rules! store_suite {
    ($module:ident, $backend:ty) => {
        mod $module {
            use super::*;

            store_suite!(@tests $backend;
                storm,
                lease_expiry_takeover,
                late_settle_without_takeover,
                completes_within_the_lease,
                delivery_storm,
                release_then_reclaim,
                completed_until_retention,
                extend_needs_the_token,
                a_token_settles_its_own_key_only,
                two_instances,
                unreachable_fails_fast,
                hung_server_times_out,
                dead_server_is_unavailable,
                silent_server_fails_fast,
                lock_held_elsewhere_times_out,
            );
        }
    };
    (@tests $backend:ty; $($scenario:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $scenario() {
                scenarios::$scenario::<$backend>().await;
            }
        )*
    };
}

// ---------------------------------------------------------------------------
// MemoryStore
// ---------------------------------------------------------------------------

/// One process: "two instances" are two handles on one store.
struct Memory(Arc<webhooks_core::dedup::MemoryStore>);

impl Backend for Memory {
    async fn fresh() -> Option<Self> {
        Some(Self(Arc::new(webhooks_core::dedup::MemoryStore::new())))
    }
    async fn open(&self) -> Arc<dyn DedupStore> {
        Arc::clone(&self.0) as Arc<dyn DedupStore>
    }
}

store_suite!(memory, Memory);

/// The `open`, `authority` and `open_at` of a backend on a server at
/// `self.url`: `$store`'s builder, kept to the test's own table or key
/// prefix by `.$scope(self.scope())`.
#[cfg(any(feature = "redis", feature = "postgres", feature = "mysql"))]
macro_rules! opens_on_server {
    ($store:ty, $server:literal, $scope:ident) => {
        async fn open(&self) -> Arc<dyn DedupStore> {
            let store = <$store>::builder(&self.url)
                .$scope(self.scope())
                .connect()
                .await;
            Arc::new(store.expect(concat!("connect to ", $server)))
        }
        fn authority(&self) -> Option<String> {
            support::authority(&self.url)
        }
        async fn open_at(&self, host_port: &str) -> Result<Arc<dyn DedupStore>, OpenError> {
            let store = <$store>::builder(&support::with_authority(&self.url, host_port))
                .$scope(self.scope())
                .connect_timeout(Duration::from_secs(1))
                .command_timeout(Duration::from_millis(500))
                .connect()
                .await?;
            Ok(Arc::new(store))
        }
    };
}

// ---------------------------------------------------------------------------
// Redis
// ---------------------------------------------------------------------------

#[cfg(feature = "redis")]
struct Redis {
    url: String,
    prefix: String,
}

#[cfg(feature = "redis")]
impl Redis {
    fn scope(&self) -> &str {
        &self.prefix
    }
}

#[cfg(feature = "redis")]
impl Backend for Redis {
    async fn fresh() -> Option<Self> {
        let url = support::redis_url().await?;
        Some(Self {
            url,
            prefix: format!("dedup-test:{}:", support::unique_suffix()),
        })
    }
    opens_on_server!(webhooks_core::dedup::RedisStore, "Redis", key_prefix);
}

#[cfg(feature = "redis")]
store_suite!(redis, Redis);

/// Sends `SCRIPT FLUSH` to the Redis at `authority` (as a restarted or
/// flushed server would be: no script cached).
#[cfg(feature = "redis")]
async fn flush_scripts(authority: &str) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    stream
        .write_all(b"*2\r\n$6\r\nSCRIPT\r\n$5\r\nFLUSH\r\n")
        .await
        .unwrap();
    let mut reply = [0u8; 5];
    stream.read_exact(&mut reply).await.unwrap();
    assert_eq!(&reply, b"+OK\r\n");
}

/// Every operation runs its script by hash (`EVALSHA`); a server that lost
/// the scripts gets them loaded again, and every operation still answers.
#[cfg(feature = "redis")]
#[tokio::test]
async fn redis_scripts_flushed_on_the_server_are_loaded_again() {
    let Some((backend, store)) = fresh_store::<Redis>().await else {
        return;
    };
    let authority = backend.authority().expect("a TCP Redis URL");
    let (a, b) = (key("flushed-a"), key("flushed-b"));
    let token = ClaimToken::random();
    flush_scripts(&authority).await;
    assert_eq!(store.claim(&a, token, LEASE).await.unwrap(), Claim::Claimed);
    flush_scripts(&authority).await;
    // In flight: the claim's script decides (the fast path only sets).
    assert!(matches!(
        store.claim(&a, ClaimToken::random(), LEASE).await.unwrap(),
        Claim::InFlight { .. }
    ));
    flush_scripts(&authority).await;
    assert_eq!(
        store.extend(&a, token, LEASE).await.unwrap(),
        Transition::Applied
    );
    flush_scripts(&authority).await;
    assert_eq!(
        store
            .complete(&a, token, Duration::from_secs(60))
            .await
            .unwrap(),
        Transition::Applied
    );
    flush_scripts(&authority).await;
    assert_eq!(
        store.claim(&a, ClaimToken::random(), LEASE).await.unwrap(),
        Claim::Completed
    );
    assert_eq!(store.claim(&b, token, LEASE).await.unwrap(), Claim::Claimed);
    flush_scripts(&authority).await;
    assert_eq!(store.release(&b, token).await.unwrap(), Transition::Applied);
    backend.cleanup().await;
}

/// Issue 23: a fresh key is claimed by one plain `SET … NX GET` (no script):
/// its value is `{token}/+` and it lives the lease plus the grace; the
/// script reads the deadline back from that expiry (in flight for what is
/// left of the lease, then taken over).
#[cfg(feature = "redis")]
#[tokio::test]
async fn redis_claims_a_fresh_key_with_one_plain_set() {
    use webhooks_core::dedup::EXPIRED_CLAIM_GRACE;
    let Some((backend, store)) = fresh_store::<Redis>().await else {
        return;
    };
    let client = ::redis::Client::open(backend.url.as_str()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let fresh = key("fast");
    let token = ClaimToken::random();
    assert_eq!(
        store.claim(&fresh, token, LEASE).await.unwrap(),
        Claim::Claimed
    );
    let stored = format!("{}{fresh}", backend.scope());
    let value: String = ::redis::cmd("GET")
        .arg(&stored)
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(value, format!("{}/+", token.to_hex()));
    let pttl: i64 = ::redis::cmd("PTTL")
        .arg(&stored)
        .query_async(&mut connection)
        .await
        .unwrap();
    let full = i64::try_from((LEASE + EXPIRED_CLAIM_GRACE).as_millis()).unwrap();
    assert!(pttl <= full && pttl > full - 5_000, "{pttl}");
    let Claim::InFlight { retry_after } = store
        .claim(&fresh, ClaimToken::random(), LEASE)
        .await
        .unwrap()
    else {
        panic!("in flight expected");
    };
    assert!(
        retry_after <= LEASE && retry_after > LEASE - Duration::from_secs(5),
        "{retry_after:?}"
    );
    // A fast-path key whose lease has run out (its expiry within the grace)
    // is taken over by the script, and the old holder is stale.
    let () = ::redis::cmd("PEXPIRE")
        .arg(&stored)
        .arg(i64::try_from(EXPIRED_CLAIM_GRACE.as_millis()).unwrap() - 1_000)
        .query_async(&mut connection)
        .await
        .unwrap();
    let new = ClaimToken::random();
    assert_eq!(
        store.claim(&fresh, new, LEASE).await.unwrap(),
        Claim::Claimed
    );
    assert_eq!(
        store.complete(&fresh, token, LEASE).await.unwrap(),
        Transition::Stale
    );
    assert_eq!(
        store.complete(&fresh, new, LEASE).await.unwrap(),
        Transition::Applied
    );
    assert_eq!(
        store
            .claim(&fresh, ClaimToken::random(), LEASE)
            .await
            .unwrap(),
        Claim::Completed
    );
    backend.cleanup().await;
}

/// Well within its lease a completion is one plain `SET key done XX GET PX
/// retention` (no script): the value it replaced says whether the token
/// held the key. Near the end of the lease the script checks the token
/// before writing, as `complete` does.
#[tokio::test]
async fn redis_completes_within_its_lease_with_one_plain_set() {
    let Some((backend, store)) = fresh_store::<Redis>().await else {
        return;
    };
    let client = ::redis::Client::open(backend.url.as_str()).unwrap();
    let connection = client.get_multiplexed_async_connection().await.unwrap();
    let retention = Duration::from_secs(3_600);
    let stored = |key: &str| format!("{}{key}", backend.scope());
    let get = |key: String| {
        let mut connection = connection.clone();
        async move {
            ::redis::cmd("GET")
                .arg(&key)
                .query_async::<Option<String>>(&mut connection)
                .await
                .unwrap()
        }
    };

    // Held: completed, for the retention.
    let held = key("fast-complete");
    let token = ClaimToken::random();
    assert_eq!(
        store.claim(&held, token, LEASE).await.unwrap(),
        Claim::Claimed
    );
    assert_eq!(
        store
            .complete_in_lease(&held, token, retention, LEASE)
            .await
            .unwrap(),
        Transition::Applied
    );
    assert_eq!(get(stored(&held)).await.as_deref(), Some("done"));
    let pttl: i64 = ::redis::cmd("PTTL")
        .arg(stored(&held))
        .query_async(&mut connection.clone())
        .await
        .unwrap();
    assert!(pttl > 3_590_000 && pttl <= 3_600_000, "{pttl}");
    assert_eq!(
        store
            .claim(&held, ClaimToken::random(), LEASE)
            .await
            .unwrap(),
        Claim::Completed
    );
    // Completed already (a second completion): stale, still completed.
    assert_eq!(
        store
            .complete_in_lease(&held, token, retention, LEASE)
            .await
            .unwrap(),
        Transition::Stale
    );
    assert_eq!(get(stored(&held)).await.as_deref(), Some("done"));

    // Gone (expired, deleted): stale, and not written (`XX`).
    let gone = key("fast-complete-gone");
    assert_eq!(
        store
            .complete_in_lease(&gone, token, retention, LEASE)
            .await
            .unwrap(),
        Transition::Stale
    );
    assert_eq!(get(stored(&gone)).await, None);

    // Another token's, near the end of the lease: the script refuses, and
    // the other holder keeps the key.
    let taken = key("fast-complete-taken");
    let other = ClaimToken::random();
    assert_eq!(
        store.claim(&taken, other, LEASE).await.unwrap(),
        Claim::Claimed
    );
    assert_eq!(
        store
            .complete_in_lease(&taken, token, retention, Duration::from_millis(200))
            .await
            .unwrap(),
        Transition::Stale
    );
    assert_eq!(
        get(stored(&taken)).await,
        Some(format!("{}/+", other.to_hex()))
    );
    // Well within what this holder believed its lease to be (a claim lost
    // in a failover, a clock jump): stale too, and the key says completed,
    // which is true (this holder processed it); the other's release no
    // longer lets a third attempt run.
    assert_eq!(
        store
            .complete_in_lease(&taken, token, retention, LEASE)
            .await
            .unwrap(),
        Transition::Stale
    );
    assert_eq!(get(stored(&taken)).await.as_deref(), Some("done"));
    assert_eq!(
        store.release(&taken, other).await.unwrap(),
        Transition::Stale
    );
    assert_eq!(
        store
            .claim(&taken, ClaimToken::random(), LEASE)
            .await
            .unwrap(),
        Claim::Completed
    );
    backend.cleanup().await;
}

// ---------------------------------------------------------------------------
// Redis Cluster
// ---------------------------------------------------------------------------

/// The cluster `.ci/redis-cluster` starts (three primaries, one replica
/// each), found through one node, `WEBHOOKS_REDIS_CLUSTER_URL`. The suite's
/// proxy scenarios (a hung, dead or silent server) return early here: the
/// client learns every node's address from the cluster and would go around
/// a proxy in front of one node. `redis_cluster_nodes_behind_proxies_*`
/// below run them with a proxy in front of each node; a primary that really
/// dies is the failover test (`cluster_failover.rs`).
#[cfg(feature = "redis-cluster")]
struct RedisCluster {
    url: String,
    prefix: String,
}

#[cfg(feature = "redis-cluster")]
impl RedisCluster {
    fn builder(&self, node: &str) -> webhooks_core::dedup::RedisClusterStoreBuilder {
        webhooks_core::dedup::RedisClusterStore::builder([node]).key_prefix(&self.prefix)
    }
}

#[cfg(feature = "redis-cluster")]
impl Backend for RedisCluster {
    async fn fresh() -> Option<Self> {
        let url = support::redis_cluster_url().await?;
        Some(Self {
            url,
            prefix: format!("dedup-test:{}:", support::unique_suffix()),
        })
    }
    async fn open(&self) -> Arc<dyn DedupStore> {
        let store = self.builder(&self.url).connect().await;
        Arc::new(store.expect("connect to the Redis Cluster"))
    }
    async fn open_unreachable(&self) -> Option<Result<Arc<dyn DedupStore>, OpenError>> {
        let store = self
            .builder("redis://127.0.0.1:1")
            .connect_timeout(Duration::from_secs(1))
            .command_timeout(Duration::from_millis(500))
            .connect()
            .await;
        Some(store.map(|s| Arc::new(s) as Arc<dyn DedupStore>))
    }
}

#[cfg(feature = "redis-cluster")]
store_suite!(redis_cluster, RedisCluster);

/// The primaries' `host:port`, from `CLUSTER SHARDS`-like `CLUSTER NODES`.
#[cfg(feature = "redis-cluster")]
async fn cluster_primaries(url: &str) -> Vec<String> {
    let client = ::redis::Client::open(url).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let nodes: String = ::redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut connection)
        .await
        .unwrap();
    nodes
        .lines()
        .filter(|line| {
            let flags = line.split(' ').nth(2).unwrap_or("");
            flags.contains("master") && !flags.contains("fail")
        })
        .filter_map(|line| line.split(' ').nth(1))
        .map(|address| address.split('@').next().unwrap_or(address).to_owned())
        .collect()
}

/// The keys of a store spread over every primary (no hash tag funnels
/// them into one slot), and each primary holds only keys of its own slots.
#[cfg(feature = "redis-cluster")]
#[tokio::test]
async fn redis_cluster_keys_spread_over_every_primary() {
    let Some((backend, store)) = fresh_store::<RedisCluster>().await else {
        return;
    };
    for i in 0..64 {
        answers!(
            store.claim(&key(&format!("spread-{i}")), ClaimToken::random(), LEASE),
            Claim::Claimed
        );
    }
    assert_spread_over_every_primary(&backend, 64).await;
}

/// Every primary holds at least 5 of the `count` keys under the backend's
/// prefix (wherever the prefix stands in the name), and they hold `count`.
#[cfg(feature = "redis-cluster")]
async fn assert_spread_over_every_primary(backend: &RedisCluster, count: usize) {
    let primaries = cluster_primaries(&backend.url).await;
    assert_eq!(primaries.len(), 3, "{primaries:?}");
    let mut total = 0;
    for primary in &primaries {
        let client = ::redis::Client::open(format!("redis://{primary}")).unwrap();
        let mut connection = client.get_multiplexed_async_connection().await.unwrap();
        let keys: Vec<String> = ::redis::cmd("KEYS")
            .arg(format!("*{}*", backend.prefix))
            .query_async(&mut connection)
            .await
            .unwrap();
        assert!(
            keys.len() >= 5,
            "{primary} holds {} of {count} keys: {keys:?}",
            keys.len()
        );
        total += keys.len();
    }
    assert_eq!(total, count);
}

/// Delivery ids with a hash tag (`{…}`) cannot choose their slot: keys
/// that share one still spread over every primary (issue 35, item 9).
#[cfg(feature = "redis-cluster")]
#[tokio::test]
async fn redis_cluster_keys_with_braces_spread_over_every_primary() {
    let Some((backend, store)) = fresh_store::<RedisCluster>().await else {
        return;
    };
    for i in 0..64 {
        answers!(
            store.claim(&key(&format!("{{tag}}-{i}")), ClaimToken::random(), LEASE),
            Claim::Claimed
        );
    }
    assert_spread_over_every_primary(&backend, 64).await;
}

/// With `wait_for_replicas(1, …)`, every write is acknowledged by the key's
/// replica before the store answers: a claim, completion and extension
/// still answer as without it; asking for more replicas than the cluster
/// has fails the claim (503) and releases it, so the next attempt claims.
#[cfg(feature = "redis-cluster")]
#[tokio::test]
async fn redis_cluster_waits_for_replicas_when_asked() {
    let Some(backend) = RedisCluster::fresh().await else {
        return;
    };
    let store = backend
        .builder(&backend.url)
        .wait_for_replicas(1, Duration::from_secs(1))
        .connect()
        .await
        .unwrap();
    let (a, token) = (key("wait-a"), ClaimToken::random());
    answers!(store.claim(&a, token, LEASE), Claim::Claimed);
    answers!(store.extend(&a, token, LEASE), Transition::Applied);
    answers!(
        store.complete(&a, token, Duration::from_secs(60)),
        Transition::Applied
    );
    answers!(
        store.claim(&a, ClaimToken::random(), LEASE),
        Claim::Completed
    );

    let greedy = backend
        .builder(&backend.url)
        .wait_for_replicas(2, Duration::from_millis(100))
        .connect()
        .await
        .unwrap();
    let b = key("wait-b");
    let started = Instant::now();
    let error = greedy
        .claim(&b, ClaimToken::random(), LEASE)
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("unavailable")
            && std::error::Error::source(&error)
                .is_some_and(|e| e.to_string().contains("1 of 2 replicas")),
        "{error:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // Released again: the next attempt (without the wait) claims at once.
    answers!(store.claim(&b, ClaimToken::random(), LEASE), Claim::Claimed);
}

/// A store on the test's prefix that reaches every cluster node through
/// `proxies`, with a 1 s connect timeout and a 500 ms command timeout.
#[cfg(feature = "redis-cluster")]
async fn open_through(
    backend: &RedisCluster,
    proxies: &support::ClusterProxies,
) -> Result<Arc<dyn DedupStore>, OpenError> {
    let mut builder = backend
        .builder(&format!("redis://{}", proxies.seed()))
        .connect_timeout(Duration::from_secs(1))
        .command_timeout(Duration::from_millis(500));
    for (node, proxy) in proxies.routes() {
        builder = builder.map_node_address(node, proxy);
    }
    Ok(Arc::new(builder.connect().await?))
}

/// The cluster behind a proxy per node, and a store through them on which
/// `token` claimed `name`.
#[cfg(feature = "redis-cluster")]
async fn cluster_behind_proxies(
    name: &str,
    token: ClaimToken,
) -> Option<(RedisCluster, support::ClusterProxies, Arc<dyn DedupStore>)> {
    let backend = RedisCluster::fresh().await?;
    let authority = support::authority(&backend.url).expect("a host:port cluster URL");
    let proxies = support::ClusterProxies::start(&authority).await;
    let store = open_through(&backend, &proxies)
        .await
        .expect("open through the proxies");
    answers!(store.claim(&key(name), token, LEASE), Claim::Claimed);
    Some((backend, proxies, store))
}

/// A cluster that stops answering mid-connection: operations time out
/// instead of hanging (`hung_server_times_out`, every node hung).
#[cfg(feature = "redis-cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_nodes_behind_proxies_hung() {
    let token = ClaimToken::random();
    let Some((_backend, proxies, store)) = cluster_behind_proxies("hung", token).await else {
        return;
    };
    proxies.freeze();
    assert_claims_fail_fast(&*store, "hung-2", 2).await;
    let started = Instant::now();
    assert_down(
        &store
            .complete(&key("hung"), token, LEASE)
            .await
            .unwrap_err(),
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    proxies.kill();
}

/// A cluster that goes away: operations fail fast, and keep failing fast
/// (`dead_server_is_unavailable`, every node gone).
#[cfg(feature = "redis-cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_nodes_behind_proxies_dead() {
    let Some((_backend, proxies, store)) =
        cluster_behind_proxies("dead", ClaimToken::random()).await
    else {
        return;
    };
    proxies.kill();
    assert_claims_fail_fast(&*store, "dead-2", 3).await;
}

/// Nodes that accept connections but never answer: opening (or the first
/// operation) fails within a few seconds (`silent_server_fails_fast`).
#[cfg(feature = "redis-cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_nodes_behind_proxies_silent() {
    let Some(backend) = RedisCluster::fresh().await else {
        return;
    };
    let authority = support::authority(&backend.url).expect("a host:port cluster URL");
    let proxies = support::ClusterProxies::start(&authority).await;
    proxies.freeze();
    let started = Instant::now();
    assert_open_fails(open_through(&backend, &proxies).await, "silent").await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    proxies.kill();
}

// ---------------------------------------------------------------------------
// PostgreSQL and MySQL / MariaDB
// ---------------------------------------------------------------------------

/// A backend on an SQL server, in a table of its own (dropped at cleanup),
/// its scenarios in module `$module`, and its purge test `$purge_test`.
/// `$quote` quotes the table's name; `$lock` (`{t}` the quoted table,
/// bound: namespace, id) locks a row until the transaction ends.
#[cfg(any(feature = "postgres", feature = "mysql"))]
macro_rules! sql_server_backend {
    (
        $backend:ident($store:ty) on $url:path, $server:literal;
        quote: $quote:literal, lock: $lock:literal;
        $module:ident, $purge_test:ident
    ) => {
        struct $backend {
            url: String,
            store: $store,
        }

        impl $backend {
            fn scope(&self) -> &str {
                self.store.table()
            }
            fn quoted_table(&self) -> String {
                format!("{q}{}{q}", self.store.table(), q = $quote)
            }
        }

        impl Backend for $backend {
            async fn fresh() -> Option<Self> {
                let url = $url().await?;
                let store = <$store>::builder(&url)
                    .table(format!("dedup_test_{}", support::unique_suffix()))
                    .connect()
                    .await
                    .expect(concat!("connect to ", $server));
                store.migrate().await.expect("migrate");
                store.migrate().await.expect("migrate is idempotent");
                Some(Self { url, store })
            }
            opens_on_server!($store, $server, table);
            async fn hold_lock(&self, key: &str) -> Option<Box<dyn std::any::Any + Send>> {
                let (namespace, id) = key.split_once(':').expect("a namespaced key");
                let mut tx = self.store.pool().begin().await.expect("begin");
                sqlx::query(&format!($lock, t = self.quoted_table()))
                    .bind(namespace)
                    .bind(id)
                    .fetch_one(&mut *tx)
                    .await
                    .expect("lock the row");
                Some(Box::new(tx))
            }
            async fn cleanup(self) {
                let drop_table = format!("DROP TABLE IF EXISTS {}", self.quoted_table());
                sqlx::query(&drop_table)
                    .execute(self.store.pool())
                    .await
                    .expect("drop table");
            }
        }

        store_suite!($module, $backend);

        #[tokio::test]
        async fn $purge_test() {
            let Some(backend) = $backend::fresh().await else {
                return;
            };
            let store = &backend.store;
            let expired = expire_five_keep_one(store).await;
            assert_eq!(store.purge_expired(2).await.unwrap(), 5);
            assert_eq!(store.purge_expired(2).await.unwrap(), 0);
            kept_rows_survived(store, &expired).await;
            let task = store.spawn_purge(Duration::from_millis(50));
            assert!(!task.is_finished());
            task.stop();
            backend.cleanup().await;
        }
    };
}

#[cfg(feature = "postgres")]
sql_server_backend! {
    Postgres(webhooks_core::dedup::PostgresStore) on support::postgres_url, "PostgreSQL";
    quote: '"', lock: "SELECT 1 FROM {t} WHERE namespace = $1 AND id = $2 FOR UPDATE";
    postgres, postgres_purge_removes_only_expired_rows
}

#[cfg(feature = "mysql")]
sql_server_backend! {
    MySql(webhooks_core::dedup::MySqlStore) on support::mysql_url, "MySQL";
    quote: '`', lock: "SELECT 1 FROM {t} WHERE namespace = ? AND id = ? FOR UPDATE";
    mysql, mysql_purge_removes_only_expired_rows
}

// ---------------------------------------------------------------------------
// SQLite
// ---------------------------------------------------------------------------

#[cfg(feature = "sqlite")]
struct Sqlite {
    path: std::path::PathBuf,
}

#[cfg(feature = "sqlite")]
impl Sqlite {
    fn url(&self) -> String {
        format!("sqlite://{}", self.path.display())
    }
}

#[cfg(feature = "sqlite")]
impl Backend for Sqlite {
    async fn fresh() -> Option<Self> {
        let path = std::env::temp_dir().join(format!(
            "webhooks-dedup-test-{}.db",
            support::unique_suffix()
        ));
        let backend = Self { path };
        let store = webhooks_core::dedup::SqliteStore::connect(&backend.url())
            .await
            .expect("open SQLite");
        store.migrate().await.expect("migrate");
        store.migrate().await.expect("migrate is idempotent");
        store.pool().close().await;
        Some(backend)
    }
    async fn open(&self) -> Arc<dyn DedupStore> {
        Arc::new(
            webhooks_core::dedup::SqliteStore::connect(&self.url())
                .await
                .expect("open SQLite"),
        )
    }
    async fn open_short(&self) -> Option<Arc<dyn DedupStore>> {
        let store = webhooks_core::dedup::SqliteStore::builder(&self.url())
            .command_timeout(Duration::from_millis(500))
            .connect()
            .await
            .expect("open SQLite");
        Some(Arc::new(store))
    }
    async fn hold_lock(&self, key: &str) -> Option<Box<dyn std::any::Any + Send>> {
        // SQLite locks the whole database for writing.
        let (namespace, id) = key.split_once(':').expect("a namespaced key");
        let store = webhooks_core::dedup::SqliteStore::connect(&self.url())
            .await
            .expect("open SQLite");
        let mut tx = store.pool().begin().await.expect("begin");
        sqlx::query("UPDATE webhooks_dedup SET state = state WHERE namespace = ?1 AND id = ?2")
            .bind(namespace)
            .bind(id)
            .execute(&mut *tx)
            .await
            .expect("take the write lock");
        Some(Box::new((tx, store)))
    }
    async fn open_unreachable(&self) -> Option<Result<Arc<dyn DedupStore>, OpenError>> {
        let missing = self.path.with_extension("missing-dir").join("dedup.db");
        let store =
            webhooks_core::dedup::SqliteStore::builder(&format!("sqlite://{}", missing.display()))
                .connect_timeout(Duration::from_secs(1))
                .connect()
                .await;
        Some(store.map(|s| Arc::new(s) as Arc<dyn DedupStore>))
    }
    async fn cleanup(self) {
        remove_sqlite_files(&self.path);
    }
}

/// Removes an SQLite database file and its WAL companions.
#[cfg(feature = "sqlite")]
fn remove_sqlite_files(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
}

#[cfg(feature = "sqlite")]
store_suite!(sqlite, Sqlite);

// ---------------------------------------------------------------------------
// Opening by URL
// ---------------------------------------------------------------------------

#[tokio::test]
async fn store_from_url_opens_each_enabled_backend() {
    open_by_url_and_claim("memory://", "memory://").await;
    #[cfg(feature = "sqlite")]
    {
        let path = std::env::temp_dir().join(format!(
            "webhooks-dedup-url-{}.db",
            support::unique_suffix()
        ));
        let url = format!("sqlite://{}", path.display());
        open_by_url_and_claim(&url, "sqlite:// creates the file and the table").await;
        remove_sqlite_files(&path);
    }
    #[cfg(feature = "redis")]
    if let Some(url) = support::redis_url().await {
        open_by_url_and_claim(&url, "redis://").await;
    }
    #[cfg(feature = "redis-cluster")]
    if let Some(url) = support::redis_cluster_url().await {
        // The node as a redis-cluster:// seed, with a second (unreachable)
        // seed given the fred way: one answering seed is enough.
        let seed = support::authority(&url).expect("a host:port cluster URL");
        let url = format!("redis-cluster://{seed}?node=127.0.0.1:1");
        open_by_url_and_claim(&url, "redis-cluster://").await;
    }
    #[cfg(feature = "postgres")]
    if let Some(url) = support::postgres_url().await {
        open_by_url_and_claim(&url, "postgres:// migrates and opens").await;
    }
    #[cfg(feature = "mysql")]
    if let Some(url) = support::mysql_url().await {
        let url = url.replacen("mysql://", "mariadb://", 1);
        open_by_url_and_claim(&url, "mariadb:// migrates and opens").await;
    }
}

/// Opens `url` with `store_from_url` (`expect`ing `what`), claims a fresh
/// key there, and closes the store.
async fn open_by_url_and_claim(url: &str, what: &str) {
    let store = webhooks_core::dedup::store_from_url(url).await.expect(what);
    let key = format!("webhooks:url:{}", support::unique_suffix());
    answers!(
        store.claim(&key, ClaimToken::random(), LEASE),
        Claim::Claimed
    );
}

/// `store_from_url` starts the purge of SQL stores: a row whose lease ran
/// out before the store was opened is gone soon after, without the caller
/// doing anything.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
#[tokio::test]
async fn store_from_url_purges_sql_stores() {
    let id = format!("url-purge-{}", support::unique_suffix());
    let key = format!("webhooks:{id}");
    #[cfg(feature = "sqlite")]
    {
        let path = std::env::temp_dir().join(format!(
            "webhooks-dedup-url-purge-{}.db",
            support::unique_suffix()
        ));
        let url = format!("sqlite://{}", path.display());
        let store = webhooks_core::dedup::SqliteStore::connect(&url)
            .await
            .unwrap();
        store.migrate().await.unwrap();
        expire(&store, &key).await;
        let count = || {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM webhooks_dedup WHERE id = ?1")
                .bind(&id)
                .fetch_one(store.pool())
        };
        assert_eq!(count().await.unwrap(), 1);
        let opened = webhooks_core::dedup::store_from_url(&url).await.unwrap();
        assert!(
            purged(|| async { count().await.unwrap() }).await,
            "sqlite:// never purged"
        );
        drop(opened);
        store.pool().close().await;
        remove_sqlite_files(&path);
    }
    #[cfg(feature = "postgres")]
    if let Some(url) = support::postgres_url().await {
        let store = webhooks_core::dedup::PostgresStore::connect(&url)
            .await
            .unwrap();
        store.migrate().await.unwrap();
        expire(&store, &key).await;
        let count = || {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM webhooks_dedup WHERE id = $1")
                .bind(&id)
                .fetch_one(store.pool())
        };
        let opened = webhooks_core::dedup::store_from_url(&url).await.unwrap();
        assert!(
            purged(|| async { count().await.unwrap() }).await,
            "postgres:// never purged"
        );
        drop(opened);
    }
    #[cfg(feature = "mysql")]
    if let Some(url) = support::mysql_url().await {
        let store = webhooks_core::dedup::MySqlStore::connect(&url)
            .await
            .unwrap();
        store.migrate().await.unwrap();
        expire(&store, &key).await;
        let count = || {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM webhooks_dedup WHERE id = ?")
                .bind(&id)
                .fetch_one(store.pool())
        };
        let opened = webhooks_core::dedup::store_from_url(&url).await.unwrap();
        assert!(
            purged(|| async { count().await.unwrap() }).await,
            "mysql:// never purged"
        );
        drop(opened);
    }
}

/// Leaves `key` as a completed row whose retention is over.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
async fn expire(store: &dyn DedupStore, key: &str) {
    let token = ClaimToken::random();
    answers!(store.claim(key, token, LEASE), Claim::Claimed);
    answers!(
        store.complete(key, token, Duration::from_millis(1)),
        Transition::Applied
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
}

/// Whether `count` reaches 0 within 3 s.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
async fn purged<F, Fut>(count: F) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = i64>,
{
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(3) {
        if count().await == 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_purge_removes_only_expired_rows() {
    let Some(backend) = Sqlite::fresh().await else {
        return;
    };
    let store = webhooks_core::dedup::SqliteStore::connect(&backend.url())
        .await
        .unwrap();
    let expired = expire_five_keep_one(&store).await;
    assert_eq!(store.purge_expired(2).await.unwrap(), 5);
    assert_eq!(store.purge_expired(2).await.unwrap(), 0);
    kept_rows_survived(&store, &expired).await;
    // The background task purges too.
    let token = ClaimToken::random();
    answers!(
        store.claim("webhooks:purge:bg", token, LEASE),
        Claim::Claimed
    );
    answers!(
        store.complete("webhooks:purge:bg", token, Duration::from_millis(1)),
        Transition::Applied
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    let task = store.spawn_purge(Duration::from_millis(20));
    tokio::time::sleep(Duration::from_millis(200)).await;
    task.stop();
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM webhooks_dedup")
        .fetch_one(store.pool())
        .await
        .unwrap();
    // The live row and the two late completions (retention: `LEASE`).
    assert_eq!(left, 3, "only the live rows are left");
    store.pool().close().await;
    backend.cleanup().await;
}

/// Five completed rows whose retention is over, two claims whose lease ran
/// out moments ago (kept for their holders' late `complete`: returned), and
/// one live completed row.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
async fn expire_five_keep_one(store: &dyn DedupStore) -> Vec<(String, ClaimToken)> {
    let short = Duration::from_millis(1);
    for i in 0..5 {
        let key = format!("webhooks:purge:{i}");
        let token = ClaimToken::random();
        answers!(store.claim(&key, token, LEASE), Claim::Claimed);
        answers!(store.complete(&key, token, short), Transition::Applied);
    }
    let mut expired = Vec::new();
    for i in 0..2 {
        let key = format!("webhooks:purge:late-{i}");
        let token = ClaimToken::random();
        answers!(store.claim(&key, token, LEASE), Claim::Claimed);
        answers!(store.extend(&key, token, short), Transition::Applied);
        expired.push((key, token));
    }
    let live = ClaimToken::random();
    answers!(
        store.claim("webhooks:purge:live", live, LEASE),
        Claim::Claimed
    );
    answers!(
        store.complete("webhooks:purge:live", live, LEASE),
        Transition::Applied
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    expired
}

/// The rows of [`expire_five_keep_one`] that a purge keeps are still there:
/// the expired claims complete late, the live row is completed.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
async fn kept_rows_survived(store: &dyn DedupStore, expired: &[(String, ClaimToken)]) {
    for (key, token) in expired {
        answers!(store.complete(key, *token, LEASE), Transition::Applied);
    }
    answers!(
        store.claim("webhooks:purge:live", ClaimToken::random(), LEASE),
        Claim::Completed
    );
}
