//! The dedup backends the suite runs on: in-process always, and each durable
//! backend whose cargo feature is on (`--all-features` turns on all four).
//!
//! Server URLs come from the environment at run time (`WEBHOOKS_REDIS_URL`,
//! `WEBHOOKS_REDIS_CLUSTER_URL`, `WEBHOOKS_POSTGRES_URL`,
//! `WEBHOOKS_MYSQL_URL`, with this machine's defaults). A server that does not answer skips its scenarios with a
//! message, except under `CI=true`, where they fail.

use std::sync::Arc;
use std::time::Duration;

use webhooks_core::dedup::{Claim, ClaimToken, DedupStore, StoreError, Transition};

#[path = "../../core/tests/support/mod.rs"]
mod support;

/// A dedup backend under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// The in-process store (`MemoryStore`: a sharded hash map).
    Memory,
    /// Redis.
    #[cfg(feature = "redis")]
    Redis,
    /// A Redis Cluster (`.ci/redis-cluster start`: three primaries, one
    /// replica each), through `redis-cluster://`.
    #[cfg(feature = "redis-cluster")]
    RedisCluster,
    /// PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres,
    /// MySQL / MariaDB.
    #[cfg(feature = "mysql")]
    Mysql,
    /// SQLite, in a temporary file.
    #[cfg(feature = "sqlite")]
    Sqlite,
}

impl Backend {
    /// Every backend compiled in.
    pub fn all() -> Vec<Backend> {
        vec![
            Backend::Memory,
            #[cfg(feature = "redis")]
            Backend::Redis,
            #[cfg(feature = "redis-cluster")]
            Backend::RedisCluster,
            #[cfg(feature = "postgres")]
            Backend::Postgres,
            #[cfg(feature = "mysql")]
            Backend::Mysql,
            #[cfg(feature = "sqlite")]
            Backend::Sqlite,
        ]
    }

    /// Its name in test names.
    pub fn name(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            #[cfg(feature = "redis")]
            Self::Redis => "redis",
            #[cfg(feature = "redis-cluster")]
            Self::RedisCluster => "redis-cluster",
            #[cfg(feature = "postgres")]
            Self::Postgres => "postgres",
            #[cfg(feature = "mysql")]
            Self::Mysql => "mysql",
            #[cfg(feature = "sqlite")]
            Self::Sqlite => "sqlite",
        }
    }

    /// The server URL, or `None` when the server is missing outside CI
    /// (under CI a missing server panics, failing the test).
    async fn url(self) -> Option<String> {
        match self {
            Self::Memory => Some("memory://".to_owned()),
            #[cfg(feature = "redis")]
            Self::Redis => support::redis_url().await,
            #[cfg(feature = "redis-cluster")]
            Self::RedisCluster => {
                let node = support::redis_cluster_url().await?;
                Some(format!("redis-cluster://{}", support::authority(&node)?))
            }
            #[cfg(feature = "postgres")]
            Self::Postgres => support::postgres_url().await,
            #[cfg(feature = "mysql")]
            Self::Mysql => support::mysql_url().await,
            #[cfg(feature = "sqlite")]
            Self::Sqlite => {
                let dir = std::env::temp_dir().join("webhooks-conformance");
                std::fs::create_dir_all(&dir).ok()?;
                let file = dir.join(format!("dedup-{}.db", support::unique_suffix()));
                Some(format!("sqlite://{}", file.display()))
            }
        }
    }

    /// A fresh store (its own pool or client), or `Ok(None)` when its server
    /// is missing outside CI.
    ///
    /// # Errors
    ///
    /// When the store cannot be opened.
    pub async fn store(self) -> Result<Option<Arc<dyn DedupStore>>, String> {
        let Some(url) = self.url().await else {
            return Ok(None);
        };
        migrate_once(self, &url).await?;
        open(&url).await.map(Some)
    }

    /// A store of this kind whose server stops answering once it is open:
    /// opened through a proxy that is then cut. (The in-process and SQLite
    /// stores have no server; they get a store that always fails.)
    ///
    /// # Errors
    ///
    /// When the store cannot be opened.
    pub async fn unreachable(self) -> Result<Arc<dyn DedupStore>, String> {
        let url = match self {
            Self::Memory => return Ok(Arc::new(DownStore)),
            #[cfg(feature = "sqlite")]
            Self::Sqlite => return Ok(Arc::new(DownStore)),
            // The client learns every node's address from the cluster: a
            // proxy in front of each node, each node reached through its own.
            #[cfg(feature = "redis-cluster")]
            Self::RedisCluster => {
                let url = self.url().await.ok_or("cluster not reachable")?;
                let seed = support::authority(&url).ok_or("URL without host")?;
                let proxies = support::ClusterProxies::start(&seed).await;
                let mut builder = webhooks_core::dedup::RedisClusterStore::builder([format!(
                    "redis://{}",
                    proxies.seed()
                )]);
                for (node, proxy) in proxies.routes() {
                    builder = builder.map_node_address(node, proxy);
                }
                let store = builder
                    .connect()
                    .await
                    .map_err(|e| format!("opening the store: {e}"))?;
                proxies.kill();
                return Ok(Arc::new(CutOff {
                    store: Arc::new(store),
                    _proxy: Box::new(proxies),
                }));
            }
            #[allow(unreachable_patterns, reason = "depends on the features")]
            _ => self.url().await.ok_or("server not reachable")?,
        };
        let upstream = support::authority(&url).ok_or("URL without host")?;
        let proxy = support::FaultProxy::start(&upstream).await;
        let store = open(&support::with_authority(&url, &proxy.authority())).await?;
        proxy.kill();
        Ok(Arc::new(CutOff {
            store,
            _proxy: Box::new(proxy),
        }))
    }
}

impl Backend {
    /// A fresh durable inbox on this backend's engine for one scenario: its
    /// own table (SQL) or key prefix (Redis), so concurrent runs never see
    /// each other's events (the tables are left behind, like the suite's
    /// keys). The in-process backend gets an in-memory SQLite inbox.
    /// `Ok(None)` when the server is missing outside CI, or when no inbox
    /// engine is compiled in (the in-process backend needs `sqlite`). The
    /// Redis Cluster gets a `RedisClusterInbox` (16 partitions).
    ///
    /// # Errors
    ///
    /// When the inbox cannot be opened or migrated.
    pub async fn inbox(self) -> Result<Option<Arc<dyn webhooks_core::inbox::Inbox>>, String> {
        #[allow(unused_variables, reason = "not every backend names its table")]
        let name = format!("inbox_conformance_{}", support::unique_suffix());
        let error = |e: &dyn std::fmt::Display| format!("opening the inbox: {e}");
        // A SQL inbox in a table of its own, migrated.
        #[allow(unused_macros, reason = "depends on the features")]
        macro_rules! sql_inbox {
            ($inbox:path) => {{
                let Some(url) = self.url().await else {
                    return Ok(None);
                };
                let inbox = <$inbox>::builder(&url)
                    .table(name)
                    .connect()
                    .await
                    .map_err(|e| error(&e))?;
                inbox.migrate().await.map_err(|e| error(&e))?;
                Ok(Some(Arc::new(inbox)))
            }};
        }
        match self {
            #[cfg(feature = "sqlite")]
            Self::Memory | Self::Sqlite => {
                let url = match self {
                    Self::Memory => "sqlite::memory:".to_owned(),
                    _ => match self.url().await {
                        Some(url) => url,
                        None => return Ok(None),
                    },
                };
                let inbox = webhooks_core::inbox::SqliteInbox::connect(&url)
                    .await
                    .map_err(|e| error(&e))?;
                inbox.migrate().await.map_err(|e| error(&e))?;
                Ok(Some(Arc::new(inbox)))
            }
            #[cfg(not(feature = "sqlite"))]
            Self::Memory => Ok(None),
            #[cfg(feature = "postgres")]
            Self::Postgres => sql_inbox!(webhooks_core::inbox::PostgresInbox),
            #[cfg(feature = "mysql")]
            Self::Mysql => sql_inbox!(webhooks_core::inbox::MySqlInbox),
            // The cluster inbox, partitioned (16 by default) under its own
            // prefix, through `inbox_from_url` as an application opens it.
            #[cfg(feature = "redis-cluster")]
            Self::RedisCluster => {
                let Some(url) = self.url().await else {
                    return Ok(None);
                };
                let inbox = webhooks_core::inbox::inbox_from_url(&format!(
                    "{url}?prefix={name}:&retention=off"
                ))
                .await
                .map_err(|e| error(&e))?;
                Ok(Some(inbox))
            }
            #[cfg(feature = "redis")]
            Self::Redis => {
                let Some(url) = self.url().await else {
                    return Ok(None);
                };
                let inbox = webhooks_core::inbox::RedisInbox::builder(&url)
                    .key_prefix(format!("{name}:"))
                    .connect()
                    .await
                    .map_err(|e| error(&e))?;
                Ok(Some(Arc::new(inbox)))
            }
        }
    }
}

async fn open(url: &str) -> Result<Arc<dyn DedupStore>, String> {
    webhooks_core::dedup::store_from_url(url)
        .await
        .map_err(|e| format!("opening the store: {e}"))
}

/// Creates each SQL backend's table once per run: concurrent `CREATE TABLE
/// IF NOT EXISTS` can race in PostgreSQL's catalog.
async fn migrate_once(backend: Backend, url: &str) -> Result<(), String> {
    static MIGRATED: tokio::sync::Mutex<Vec<&'static str>> =
        tokio::sync::Mutex::const_new(Vec::new());
    let mut done = MIGRATED.lock().await;
    if !done.contains(&backend.name()) {
        // Opening by URL migrates; the pool is dropped with this runtime's task.
        drop(open(url).await?);
        done.push(backend.name());
    }
    Ok(())
}

/// A real store whose connection to the server was cut.
struct CutOff {
    store: Arc<dyn DedupStore>,
    /// The proxy (or proxies) cut: kept until the store is dropped.
    _proxy: Box<dyn std::any::Any + Send + Sync>,
}

#[async_trait::async_trait]
impl DedupStore for CutOff {
    async fn claim(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        self.store.claim(key, token, lease).await
    }
    async fn complete(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
    ) -> Result<Transition, StoreError> {
        self.store.complete(key, token, retention).await
    }
    async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, StoreError> {
        self.store.release(key, token).await
    }
    async fn extend(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Transition, StoreError> {
        self.store.extend(key, token, lease).await
    }
}

/// A store that is always down (the in-process store cannot be).
#[derive(Debug)]
pub struct DownStore;

fn down() -> StoreError {
    StoreError::unavailable(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        "store is down",
    ))
}

#[async_trait::async_trait]
impl DedupStore for DownStore {
    async fn claim(&self, _: &str, _: ClaimToken, _: Duration) -> Result<Claim, StoreError> {
        Err(down())
    }
    async fn complete(
        &self,
        _: &str,
        _: ClaimToken,
        _: Duration,
    ) -> Result<Transition, StoreError> {
        Err(down())
    }
    async fn release(&self, _: &str, _: ClaimToken) -> Result<Transition, StoreError> {
        Err(down())
    }
    async fn extend(&self, _: &str, _: ClaimToken, _: Duration) -> Result<Transition, StoreError> {
        Err(down())
    }
}

/// A real store with faults injected around its settle path: a slow
/// `complete`, the first few `complete`s failing, `extend` always failing.
pub struct Faulty {
    store: Arc<dyn DedupStore>,
    complete_delay: Duration,
    complete_failures: std::sync::atomic::AtomicU32,
    extend_fails: bool,
}

impl Faulty {
    /// `store` without faults (add them with the methods below).
    pub fn new(store: Arc<dyn DedupStore>) -> Self {
        Self {
            store,
            complete_delay: Duration::ZERO,
            complete_failures: std::sync::atomic::AtomicU32::new(0),
            extend_fails: false,
        }
    }

    /// Each `complete` waits `delay` before it reaches the store.
    #[must_use]
    pub fn slow_complete(mut self, delay: Duration) -> Self {
        self.complete_delay = delay;
        self
    }

    /// The first `n` `complete`s fail as if the server were down.
    #[must_use]
    pub fn failing_completes(self, n: u32) -> Self {
        self.complete_failures
            .store(n, std::sync::atomic::Ordering::SeqCst);
        self
    }

    /// Every `extend` fails: the holder's lease renewals never reach the
    /// store (a frozen or partitioned holder).
    #[must_use]
    pub fn failing_extends(mut self) -> Self {
        self.extend_fails = true;
        self
    }
}

#[async_trait::async_trait]
impl DedupStore for Faulty {
    async fn claim(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        self.store.claim(key, token, lease).await
    }
    async fn complete(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
    ) -> Result<Transition, StoreError> {
        tokio::time::sleep(self.complete_delay).await;
        let failing = self.complete_failures.fetch_update(
            std::sync::atomic::Ordering::SeqCst,
            std::sync::atomic::Ordering::SeqCst,
            |n| n.checked_sub(1),
        );
        if failing.is_ok() {
            return Err(down());
        }
        self.store.complete(key, token, retention).await
    }
    async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, StoreError> {
        self.store.release(key, token).await
    }
    async fn extend(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Transition, StoreError> {
        if self.extend_fails {
            return Err(down());
        }
        self.store.extend(key, token, lease).await
    }
}
