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

/// Asserts the store error is one the pipeline answers with a 503.
fn assert_down(error: &StoreError) {
    assert!(
        matches!(error, StoreError::Unavailable(_) | StoreError::Timeout),
        "expected Unavailable or Timeout, got {error:?}"
    );
}

mod scenarios {
    use super::*;

    /// 64 tasks behind a barrier claim one key: exactly one wins, the others
    /// see it in flight.
    pub(super) async fn storm<B: Backend>() {
        let Some(backend) = B::fresh().await else {
            return;
        };
        let store = backend.open().await;
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
        let Some(backend) = B::fresh().await else {
            return;
        };
        let store = backend.open().await;
        let key = key("lease");
        let old = ClaimToken::random();
        let lease = Duration::from_millis(300);
        assert_eq!(store.claim(&key, old, lease).await.unwrap(), Claim::Claimed);
        assert!(matches!(
            store
                .claim(&key, ClaimToken::random(), lease)
                .await
                .unwrap(),
            Claim::InFlight { .. }
        ));
        tokio::time::sleep(Duration::from_millis(450)).await;
        let answers = race(&[Arc::clone(&store)], &key, 16, LEASE).await;
        assert_eq!(claimed(&answers), 1, "one takeover: {answers:?}");
        let day = Duration::from_secs(86_400);
        assert_eq!(
            store.complete(&key, old, day).await.unwrap(),
            Transition::Stale
        );
        assert_eq!(store.release(&key, old).await.unwrap(), Transition::Stale);
        assert_eq!(
            store.extend(&key, old, LEASE).await.unwrap(),
            Transition::Stale
        );
        // The takeover still holds: a new attempt sees it in flight.
        assert!(matches!(
            store
                .claim(&key, ClaimToken::random(), LEASE)
                .await
                .unwrap(),
            Claim::InFlight { .. }
        ));
        backend.cleanup().await;
    }

    /// A released claim can be claimed again at once; a second release is stale.
    pub(super) async fn release_then_reclaim<B: Backend>() {
        let Some(backend) = B::fresh().await else {
            return;
        };
        let store = backend.open().await;
        let key = key("release");
        let first = ClaimToken::random();
        assert_eq!(
            store.claim(&key, first, LEASE).await.unwrap(),
            Claim::Claimed
        );
        assert_eq!(
            store.release(&key, first).await.unwrap(),
            Transition::Applied
        );
        assert_eq!(store.release(&key, first).await.unwrap(), Transition::Stale);
        let second = ClaimToken::random();
        assert_eq!(
            store.claim(&key, second, LEASE).await.unwrap(),
            Claim::Claimed
        );
        assert_eq!(
            store.complete(&key, first, LEASE).await.unwrap(),
            Transition::Stale
        );
        assert_eq!(
            store.complete(&key, second, LEASE).await.unwrap(),
            Transition::Applied
        );
        backend.cleanup().await;
    }

    /// A completed key answers Completed until its retention ends, then can
    /// be claimed again; a completed claim can be neither completed, released
    /// nor extended again.
    pub(super) async fn completed_until_retention<B: Backend>() {
        let Some(backend) = B::fresh().await else {
            return;
        };
        let store = backend.open().await;
        let key = key("completed");
        let token = ClaimToken::random();
        let retention = Duration::from_millis(500);
        assert_eq!(
            store.claim(&key, token, LEASE).await.unwrap(),
            Claim::Claimed
        );
        assert_eq!(
            store.complete(&key, token, retention).await.unwrap(),
            Transition::Applied
        );
        assert_eq!(
            store
                .claim(&key, ClaimToken::random(), LEASE)
                .await
                .unwrap(),
            Claim::Completed
        );
        assert_eq!(
            store.complete(&key, token, retention).await.unwrap(),
            Transition::Stale
        );
        assert_eq!(store.release(&key, token).await.unwrap(), Transition::Stale);
        assert_eq!(
            store.extend(&key, token, LEASE).await.unwrap(),
            Transition::Stale
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            store
                .claim(&key, ClaimToken::random(), LEASE)
                .await
                .unwrap(),
            Claim::Completed
        );
        tokio::time::sleep(Duration::from_millis(450)).await;
        assert_eq!(
            store
                .claim(&key, ClaimToken::random(), LEASE)
                .await
                .unwrap(),
            Claim::Claimed
        );
        backend.cleanup().await;
    }

    /// Only the holder's token extends the lease, and the extension holds.
    pub(super) async fn extend_needs_the_token<B: Backend>() {
        let Some(backend) = B::fresh().await else {
            return;
        };
        let store = backend.open().await;
        let key = key("extend");
        let holder = ClaimToken::random();
        let short = Duration::from_millis(400);
        assert_eq!(
            store.claim(&key, holder, short).await.unwrap(),
            Claim::Claimed
        );
        assert_eq!(
            store
                .extend(&key, ClaimToken::random(), LEASE)
                .await
                .unwrap(),
            Transition::Stale
        );
        assert_eq!(
            store
                .extend(&key, holder, Duration::from_secs(5))
                .await
                .unwrap(),
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
        assert_eq!(
            store
                .extend(&key, ClaimToken::random(), LEASE)
                .await
                .unwrap(),
            Transition::Stale
        );
        // Unknown keys have nothing to extend.
        assert_eq!(
            store
                .extend(&super::key("never"), holder, LEASE)
                .await
                .unwrap(),
            Transition::Stale
        );
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
        assert_eq!(
            stores[0].claim(&other, token, LEASE).await.unwrap(),
            Claim::Claimed
        );
        assert!(matches!(
            stores[1]
                .claim(&other, ClaimToken::random(), LEASE)
                .await
                .unwrap(),
            Claim::InFlight { .. }
        ));
        assert_eq!(
            stores[0].complete(&other, token, LEASE).await.unwrap(),
            Transition::Applied
        );
        assert_eq!(
            stores[1]
                .claim(&other, ClaimToken::random(), LEASE)
                .await
                .unwrap(),
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
        match result {
            Err(OpenError::Store(error)) => assert_down(&error),
            Err(other) => panic!("expected a store error, got {other:?}"),
            Ok(store) => {
                // A backend may open lazily: then the first operation fails.
                let error = store
                    .claim(&key("down"), ClaimToken::random(), LEASE)
                    .await
                    .unwrap_err();
                assert_down(&error);
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "took {elapsed:?}"
        );
        backend.cleanup().await;
    }

    /// A server that stops answering mid-connection: operations time out
    /// instead of hanging.
    pub(super) async fn hung_server_times_out<B: Backend>() {
        let Some(backend) = B::fresh().await else {
            return;
        };
        let Some(upstream) = backend.authority() else {
            backend.cleanup().await;
            return;
        };
        let proxy = support::FaultProxy::start(&upstream).await;
        let store = backend
            .open_at(&proxy.authority())
            .await
            .expect("open through the proxy");
        let token = ClaimToken::random();
        assert_eq!(
            store.claim(&key("hung"), token, LEASE).await.unwrap(),
            Claim::Claimed
        );
        proxy.freeze();
        for attempt in 0..2 {
            let started = Instant::now();
            let error = store
                .claim(&key("hung-2"), ClaimToken::random(), LEASE)
                .await
                .unwrap_err();
            assert_down(&error);
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "attempt {attempt} took {:?}",
                started.elapsed()
            );
        }
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
        let Some(backend) = B::fresh().await else {
            return;
        };
        let Some(upstream) = backend.authority() else {
            backend.cleanup().await;
            return;
        };
        let proxy = support::FaultProxy::start(&upstream).await;
        let store = backend
            .open_at(&proxy.authority())
            .await
            .expect("open through the proxy");
        let token = ClaimToken::random();
        assert_eq!(
            store.claim(&key("dead"), token, LEASE).await.unwrap(),
            Claim::Claimed
        );
        proxy.kill();
        for attempt in 0..3 {
            let started = Instant::now();
            let error = store
                .claim(&key("dead-2"), ClaimToken::random(), LEASE)
                .await
                .unwrap_err();
            assert_down(&error);
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "attempt {attempt} took {:?}",
                started.elapsed()
            );
        }
        drop(store);
        backend.cleanup().await;
    }

    /// A server that accepts connections but never answers: opening (or the
    /// first operation) fails within a few seconds.
    pub(super) async fn silent_server_fails_fast<B: Backend>() {
        let Some(backend) = B::fresh().await else {
            return;
        };
        let Some(upstream) = backend.authority() else {
            backend.cleanup().await;
            return;
        };
        let proxy = support::FaultProxy::start(&upstream).await;
        proxy.freeze();
        let started = Instant::now();
        match backend.open_at(&proxy.authority()).await {
            Err(OpenError::Store(error)) => assert_down(&error),
            Err(other) => panic!("expected a store error, got {other:?}"),
            Ok(store) => {
                let error = store
                    .claim(&key("silent"), ClaimToken::random(), LEASE)
                    .await
                    .unwrap_err();
                assert_down(&error);
            }
        }
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
        let Some(backend) = B::fresh().await else {
            return;
        };
        let store = backend.open().await;
        let key = key("locked");
        let token = ClaimToken::random();
        assert_eq!(
            store.claim(&key, token, LEASE).await.unwrap(),
            Claim::Claimed
        );
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
        let last = store.complete(&key, token, LEASE).await.unwrap();
        assert!(matches!(last, Transition::Applied | Transition::Stale));
        assert_eq!(
            store
                .claim(&key, ClaimToken::random(), LEASE)
                .await
                .unwrap(),
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
                release_then_reclaim,
                completed_until_retention,
                extend_needs_the_token,
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

// ---------------------------------------------------------------------------
// Redis
// ---------------------------------------------------------------------------

#[cfg(feature = "redis")]
struct Redis {
    url: String,
    prefix: String,
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
    async fn open(&self) -> Arc<dyn DedupStore> {
        Arc::new(
            webhooks_core::dedup::RedisStore::builder(&self.url)
                .key_prefix(&self.prefix)
                .connect()
                .await
                .expect("connect to Redis"),
        )
    }
    fn authority(&self) -> Option<String> {
        support::authority(&self.url)
    }
    async fn open_at(&self, host_port: &str) -> Result<Arc<dyn DedupStore>, OpenError> {
        let store = webhooks_core::dedup::RedisStore::builder(&support::with_authority(
            &self.url, host_port,
        ))
        .key_prefix(&self.prefix)
        .connect_timeout(Duration::from_secs(1))
        .command_timeout(Duration::from_millis(500))
        .connect()
        .await?;
        Ok(Arc::new(store))
    }
}

#[cfg(feature = "redis")]
store_suite!(redis, Redis);

// ---------------------------------------------------------------------------
// PostgreSQL
// ---------------------------------------------------------------------------

#[cfg(feature = "postgres")]
struct Postgres {
    url: String,
    store: webhooks_core::dedup::PostgresStore,
}

#[cfg(feature = "postgres")]
impl Backend for Postgres {
    async fn fresh() -> Option<Self> {
        let url = support::postgres_url().await?;
        let store = webhooks_core::dedup::PostgresStore::builder(&url)
            .table(format!("dedup_test_{}", support::unique_suffix()))
            .connect()
            .await
            .expect("connect to PostgreSQL");
        store.migrate().await.expect("migrate");
        store.migrate().await.expect("migrate is idempotent");
        Some(Self { url, store })
    }
    async fn open(&self) -> Arc<dyn DedupStore> {
        Arc::new(
            webhooks_core::dedup::PostgresStore::builder(&self.url)
                .table(self.store.table())
                .connect()
                .await
                .expect("connect to PostgreSQL"),
        )
    }
    fn authority(&self) -> Option<String> {
        support::authority(&self.url)
    }
    async fn open_at(&self, host_port: &str) -> Result<Arc<dyn DedupStore>, OpenError> {
        let store = webhooks_core::dedup::PostgresStore::builder(&support::with_authority(
            &self.url, host_port,
        ))
        .table(self.store.table())
        .connect_timeout(Duration::from_secs(1))
        .command_timeout(Duration::from_millis(500))
        .connect()
        .await?;
        Ok(Arc::new(store))
    }
    async fn hold_lock(&self, key: &str) -> Option<Box<dyn std::any::Any + Send>> {
        let (namespace, id) = key.split_once(':').expect("a namespaced key");
        let mut tx = self.store.pool().begin().await.expect("begin");
        let lock = format!(
            "SELECT 1 FROM \"{}\" WHERE namespace = $1 AND id = $2 FOR UPDATE",
            self.store.table()
        );
        sqlx::query(&lock)
            .bind(namespace)
            .bind(id)
            .fetch_one(&mut *tx)
            .await
            .expect("lock the row");
        Some(Box::new(tx))
    }
    async fn cleanup(self) {
        let drop_table = format!("DROP TABLE IF EXISTS \"{}\"", self.store.table());
        sqlx::query(&drop_table)
            .execute(self.store.pool())
            .await
            .expect("drop table");
    }
}

#[cfg(feature = "postgres")]
store_suite!(postgres, Postgres);

// ---------------------------------------------------------------------------
// MySQL / MariaDB
// ---------------------------------------------------------------------------

#[cfg(feature = "mysql")]
struct MySql {
    url: String,
    store: webhooks_core::dedup::MySqlStore,
}

#[cfg(feature = "mysql")]
impl Backend for MySql {
    async fn fresh() -> Option<Self> {
        let url = support::mysql_url().await?;
        let store = webhooks_core::dedup::MySqlStore::builder(&url)
            .table(format!("dedup_test_{}", support::unique_suffix()))
            .connect()
            .await
            .expect("connect to MySQL");
        store.migrate().await.expect("migrate");
        store.migrate().await.expect("migrate is idempotent");
        Some(Self { url, store })
    }
    async fn open(&self) -> Arc<dyn DedupStore> {
        Arc::new(
            webhooks_core::dedup::MySqlStore::builder(&self.url)
                .table(self.store.table())
                .connect()
                .await
                .expect("connect to MySQL"),
        )
    }
    fn authority(&self) -> Option<String> {
        support::authority(&self.url)
    }
    async fn open_at(&self, host_port: &str) -> Result<Arc<dyn DedupStore>, OpenError> {
        let store = webhooks_core::dedup::MySqlStore::builder(&support::with_authority(
            &self.url, host_port,
        ))
        .table(self.store.table())
        .connect_timeout(Duration::from_secs(1))
        .command_timeout(Duration::from_millis(500))
        .connect()
        .await?;
        Ok(Arc::new(store))
    }
    async fn hold_lock(&self, key: &str) -> Option<Box<dyn std::any::Any + Send>> {
        let (namespace, id) = key.split_once(':').expect("a namespaced key");
        let mut tx = self.store.pool().begin().await.expect("begin");
        let lock = format!(
            "SELECT 1 FROM `{}` WHERE namespace = ? AND id = ? FOR UPDATE",
            self.store.table()
        );
        sqlx::query(&lock)
            .bind(namespace)
            .bind(id)
            .fetch_one(&mut *tx)
            .await
            .expect("lock the row");
        Some(Box::new(tx))
    }
    async fn cleanup(self) {
        let drop_table = format!("DROP TABLE IF EXISTS `{}`", self.store.table());
        sqlx::query(&drop_table)
            .execute(self.store.pool())
            .await
            .expect("drop table");
    }
}

#[cfg(feature = "mysql")]
store_suite!(mysql, MySql);

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
        for suffix in ["", "-wal", "-shm"] {
            let mut file = self.path.clone().into_os_string();
            file.push(suffix);
            let _ = std::fs::remove_file(file);
        }
    }
}

#[cfg(feature = "sqlite")]
store_suite!(sqlite, Sqlite);

// ---------------------------------------------------------------------------
// Opening by URL
// ---------------------------------------------------------------------------

#[tokio::test]
async fn store_from_url_opens_each_enabled_backend() {
    use webhooks_core::dedup::store_from_url;

    let memory = store_from_url("memory://").await.expect("memory://");
    assert_eq!(
        memory
            .claim("webhooks:url:1", ClaimToken::random(), LEASE)
            .await
            .unwrap(),
        Claim::Claimed
    );

    #[cfg(feature = "sqlite")]
    {
        let path = std::env::temp_dir().join(format!(
            "webhooks-dedup-url-{}.db",
            support::unique_suffix()
        ));
        let store = store_from_url(&format!("sqlite://{}", path.display()))
            .await
            .expect("sqlite:// creates the file and the table");
        assert_eq!(
            store
                .claim("webhooks:url:1", ClaimToken::random(), LEASE)
                .await
                .unwrap(),
            Claim::Claimed
        );
        drop(store);
        for suffix in ["", "-wal", "-shm"] {
            let mut file = path.clone().into_os_string();
            file.push(suffix);
            let _ = std::fs::remove_file(file);
        }
    }
    #[cfg(feature = "redis")]
    if let Some(url) = support::redis_url().await {
        let store = store_from_url(&url).await.expect("redis://");
        let key = format!("webhooks:url:{}", support::unique_suffix());
        assert_eq!(
            store
                .claim(&key, ClaimToken::random(), LEASE)
                .await
                .unwrap(),
            Claim::Claimed
        );
    }
    #[cfg(feature = "postgres")]
    if let Some(url) = support::postgres_url().await {
        let store = store_from_url(&url)
            .await
            .expect("postgres:// migrates and opens");
        let key = format!("webhooks:url:{}", support::unique_suffix());
        assert_eq!(
            store
                .claim(&key, ClaimToken::random(), LEASE)
                .await
                .unwrap(),
            Claim::Claimed
        );
    }
    #[cfg(feature = "mysql")]
    if let Some(url) = support::mysql_url().await {
        let url = url.replacen("mysql://", "mariadb://", 1);
        let store = store_from_url(&url)
            .await
            .expect("mariadb:// migrates and opens");
        let key = format!("webhooks:url:{}", support::unique_suffix());
        assert_eq!(
            store
                .claim(&key, ClaimToken::random(), LEASE)
                .await
                .unwrap(),
            Claim::Claimed
        );
    }
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_purge_removes_only_expired_rows() {
    let Some(backend) = Postgres::fresh().await else {
        return;
    };
    let store = &backend.store;
    expire_five_keep_one(store).await;
    assert_eq!(store.purge_expired(2).await.unwrap(), 5);
    assert_eq!(store.purge_expired(2).await.unwrap(), 0);
    live_row_survived(store).await;
    let task = store.spawn_purge(Duration::from_millis(50));
    assert!(!task.is_finished());
    task.stop();
    backend.cleanup().await;
}

#[cfg(feature = "mysql")]
#[tokio::test]
async fn mysql_purge_removes_only_expired_rows() {
    let Some(backend) = MySql::fresh().await else {
        return;
    };
    let store = &backend.store;
    expire_five_keep_one(store).await;
    assert_eq!(store.purge_expired(2).await.unwrap(), 5);
    assert_eq!(store.purge_expired(2).await.unwrap(), 0);
    live_row_survived(store).await;
    backend.cleanup().await;
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
    expire_five_keep_one(&store).await;
    assert_eq!(store.purge_expired(2).await.unwrap(), 5);
    assert_eq!(store.purge_expired(2).await.unwrap(), 0);
    live_row_survived(&store).await;
    // The background task purges too.
    let token = ClaimToken::random();
    store
        .claim("webhooks:purge:bg", token, Duration::from_millis(1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let task = store.spawn_purge(Duration::from_millis(20));
    tokio::time::sleep(Duration::from_millis(200)).await;
    task.stop();
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM webhooks_dedup")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(left, 1, "only the live row is left");
    store.pool().close().await;
    backend.cleanup().await;
}

/// Five rows whose lease or retention is over, and one live claim.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
async fn expire_five_keep_one(store: &dyn DedupStore) {
    for i in 0..5 {
        let key = format!("webhooks:purge:{i}");
        let token = ClaimToken::random();
        assert_eq!(
            store.claim(&key, token, LEASE).await.unwrap(),
            Claim::Claimed
        );
        let short = Duration::from_millis(1);
        if i % 2 == 0 {
            assert_eq!(
                store.complete(&key, token, short).await.unwrap(),
                Transition::Applied
            );
        } else {
            assert_eq!(
                store.extend(&key, token, short).await.unwrap(),
                Transition::Applied
            );
        }
    }
    let live = ClaimToken::random();
    assert_eq!(
        store
            .claim("webhooks:purge:live", live, LEASE)
            .await
            .unwrap(),
        Claim::Claimed
    );
    assert_eq!(
        store
            .complete("webhooks:purge:live", live, LEASE)
            .await
            .unwrap(),
        Transition::Applied
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
}

/// The live row of [`expire_five_keep_one`] is still there after a purge.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
async fn live_row_survived(store: &dyn DedupStore) {
    assert_eq!(
        store
            .claim("webhooks:purge:live", ClaimToken::random(), LEASE)
            .await
            .unwrap(),
        Claim::Completed
    );
}
