//! Choosing a [`DedupStore`] backend from a URL at run time.

use std::sync::Arc;

use super::{DedupStore, StoreError};
use crate::ConfigError;

/// Why a store could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The URL or a setting is invalid, or names a backend whose cargo
    /// feature is off. Never contains the URL (it may hold a password).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store could not be reached, or refused to set up its table.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Opens the dedup store named by `url`, with each backend's default settings.
///
/// | URL | backend | feature | table / keys |
/// |---|---|---|---|
/// | `memory://` | `MemoryStore` | `memory` | — |
/// | `redis://…`, `rediss://…`, `redis+unix://…`, `unix://…` | `RedisStore` | `redis` | key prefix `dedup:` |
/// | `redis-cluster://host:port[,host:port…][?node=host:port…]`, `rediss-cluster://…` | `RedisClusterStore` | `redis-cluster` | key prefix `dedup:` |
/// | `postgres://…`, `postgresql://…` | `PostgresStore` | `postgres` | `migrate()` runs, purge task started |
/// | `mysql://…`, `mariadb://…` | `MySqlStore` | `mysql` | `migrate()` runs, purge task started |
/// | `sqlite://path`, `sqlite:path` | `SqliteStore` | `sqlite` | file created, `migrate()` runs, purge task started |
///
/// Two parameters of the library's own are taken out of the query (the
/// others reach the driver): `table` names the SQL table (default
/// `webhooks_dedup`) and `prefix` the Redis key prefix, so that two stores
/// can share a database (`postgres://app@db/app?table=orders_dedup`).
///
/// For the SQL backends the table is created if missing: `migrate()` is
/// idempotent and cheap, so opening by URL is enough to start. (Without the
/// `CREATE` privilege, build the store with its builder, which never
/// migrates, after creating the table once by other means.)
///
/// **Purge.** A SQL store opened here also purges its expired rows: once at
/// opening, then every hour (`sql::URL_PURGE_INTERVAL`), in a Tokio task that
/// stops when the last handle on the returned store is dropped. Every
/// instance opened by URL purges; that is harmless (the purge deletes in
/// small batches, skipping rows another purge holds). A store built with a
/// builder purges only when told to (`spawn_purge`, or `purge_expired` from
/// a job of your own). Use the builders for other tables, prefixes, timeouts
/// or purge intervals.
///
/// ```no_run
/// # async fn run() -> Result<(), webhooks_core::dedup::OpenError> {
/// use webhooks_core::dedup::store_from_url;
///
/// let url = std::env::var("DEDUP_URL").unwrap_or_else(|_| "memory://".into());
/// let store = store_from_url(&url).await?;
/// # let _ = store; Ok(()) }
/// ```
///
/// # Errors
///
/// [`OpenError::Config`] for an unknown scheme, a scheme whose feature is
/// off (the message names the feature) or a malformed URL;
/// [`OpenError::Store`] when the store does not answer within its connect
/// timeout.
///
/// # Panics
///
/// For the SQL and Redis backends, outside a Tokio runtime (their drivers,
/// and the purge task, run on Tokio).
pub async fn store_from_url(url: &str) -> Result<Arc<dyn DedupStore>, OpenError> {
    let scheme = url
        .split_once(':')
        .map(|(scheme, _)| scheme.to_ascii_lowercase())
        .ok_or(ConfigError::Invalid {
            what: "dedup store URL",
            reason: "has no scheme (memory://, redis://, postgres://, mysql:// or sqlite://)",
        })?;
    let options = crate::inbox::url::UrlOptions::take(url, "dedup store URL")?;
    let redis_scheme = matches!(
        scheme.as_str(),
        "redis" | "rediss" | "redis+unix" | "unix" | "redis-cluster" | "rediss-cluster"
    );
    let misplaced = match (&options.table, &options.prefix) {
        (Some(_), _) => redis_scheme || scheme == "memory",
        (_, Some(_)) => !redis_scheme,
        _ => false,
    };
    if misplaced || options.retention.is_some() || options.partitions.is_some() {
        return Err(ConfigError::Invalid {
            what: "dedup store URL",
            reason: "`table` is for the SQL stores, `prefix` for Redis (the retention is the receiver's, \
                     `partitions` the cluster inbox's)",
        }
        .into());
    }
    let (url, table, prefix) = (options.url.as_str(), options.table, options.prefix);
    match scheme.as_str() {
        "memory" => memory(),
        "redis" | "rediss" | "redis+unix" | "unix" => redis(url, prefix).await,
        "redis-cluster" | "rediss-cluster" => redis_cluster(url, prefix).await,
        "postgres" | "postgresql" => postgres(url, table).await,
        "mysql" | "mariadb" => mysql(url, table).await,
        "sqlite" => sqlite(url, table).await,
        _ => Err(ConfigError::Invalid {
            what: "dedup store URL",
            reason: "unknown scheme; expected memory, redis, redis-cluster, postgres, mysql, mariadb \
                     or sqlite",
        }
        .into()),
    }
}

#[cfg(feature = "memory")]
fn memory() -> Result<Arc<dyn DedupStore>, OpenError> {
    Ok(Arc::new(super::MemoryStore::new()))
}

#[cfg(not(feature = "memory"))]
fn memory() -> Result<Arc<dyn DedupStore>, OpenError> {
    Err(feature_off(
        "memory:// needs the `memory` feature of the crate you depend on (tower-webhooks, actix-webhooks or webhooks-core)",
    ))
}

#[cfg(feature = "redis")]
async fn redis(url: &str, prefix: Option<String>) -> Result<Arc<dyn DedupStore>, OpenError> {
    let builder = super::RedisStore::builder(url);
    let builder = match prefix {
        Some(prefix) => builder.key_prefix(prefix),
        None => builder,
    };
    Ok(Arc::new(builder.connect().await?))
}

#[cfg(not(feature = "redis"))]
async fn redis(_: &str, _: Option<String>) -> Result<Arc<dyn DedupStore>, OpenError> {
    Err(feature_off(
        "redis:// needs the `redis` feature of the crate you depend on (tower-webhooks, actix-webhooks or webhooks-core)",
    ))
}

#[cfg(feature = "redis-cluster")]
async fn redis_cluster(
    url: &str,
    prefix: Option<String>,
) -> Result<Arc<dyn DedupStore>, OpenError> {
    let builder = super::RedisClusterStore::builder_from_url(url)?;
    let builder = match prefix {
        Some(prefix) => builder.key_prefix(prefix),
        None => builder,
    };
    Ok(Arc::new(builder.connect().await?))
}

#[cfg(not(feature = "redis-cluster"))]
async fn redis_cluster(_: &str, _: Option<String>) -> Result<Arc<dyn DedupStore>, OpenError> {
    Err(feature_off(
        "redis-cluster:// needs webhooks-core's `redis-cluster` feature",
    ))
}

#[cfg(feature = "postgres")]
async fn postgres(url: &str, table: Option<String>) -> Result<Arc<dyn DedupStore>, OpenError> {
    let builder = super::PostgresStore::builder(url);
    let store = match table {
        Some(table) => builder.table(table),
        None => builder,
    }
    .connect()
    .await?;
    store.migrate().await?;
    let purge = store.spawn_purge(super::sql::URL_PURGE_INTERVAL);
    Ok(Arc::new(super::sql::Purging::new(store, purge)))
}

#[cfg(not(feature = "postgres"))]
async fn postgres(_: &str, _: Option<String>) -> Result<Arc<dyn DedupStore>, OpenError> {
    Err(feature_off(
        "postgres:// needs the `postgres` feature of the crate you depend on (tower-webhooks, actix-webhooks or webhooks-core)",
    ))
}

#[cfg(feature = "mysql")]
async fn mysql(url: &str, table: Option<String>) -> Result<Arc<dyn DedupStore>, OpenError> {
    let builder = super::MySqlStore::builder(url);
    let store = match table {
        Some(table) => builder.table(table),
        None => builder,
    }
    .connect()
    .await?;
    store.migrate().await?;
    let purge = store.spawn_purge(super::sql::URL_PURGE_INTERVAL);
    Ok(Arc::new(super::sql::Purging::new(store, purge)))
}

#[cfg(not(feature = "mysql"))]
async fn mysql(_: &str, _: Option<String>) -> Result<Arc<dyn DedupStore>, OpenError> {
    Err(feature_off(
        "mysql:// and mariadb:// need the `mysql` feature of the crate you depend on (tower-webhooks, actix-webhooks or webhooks-core)",
    ))
}

#[cfg(feature = "sqlite")]
async fn sqlite(url: &str, table: Option<String>) -> Result<Arc<dyn DedupStore>, OpenError> {
    let builder = super::SqliteStore::builder(url);
    let store = match table {
        Some(table) => builder.table(table),
        None => builder,
    }
    .connect()
    .await?;
    store.migrate().await?;
    let purge = store.spawn_purge(super::sql::URL_PURGE_INTERVAL);
    Ok(Arc::new(super::sql::Purging::new(store, purge)))
}

#[cfg(not(feature = "sqlite"))]
async fn sqlite(_: &str, _: Option<String>) -> Result<Arc<dyn DedupStore>, OpenError> {
    Err(feature_off(
        "sqlite:// needs the `sqlite` feature of the crate you depend on (tower-webhooks, actix-webhooks or webhooks-core)",
    ))
}

#[allow(dead_code, reason = "used only by the schemes whose feature is off")]
fn feature_off(reason: &'static str) -> OpenError {
    ConfigError::Invalid {
        what: "dedup store URL",
        reason,
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_reason(result: Result<Arc<dyn DedupStore>, OpenError>) -> &'static str {
        match result {
            Err(OpenError::Config(ConfigError::Invalid { reason, .. })) => reason,
            Err(other) => panic!("expected a config error, got {other}"),
            Ok(_) => panic!("expected a config error, got a store"),
        }
    }

    #[tokio::test]
    async fn unknown_and_missing_schemes_are_config_errors() {
        assert!(config_reason(store_from_url("ftp://x").await).contains("unknown scheme"));
        assert!(config_reason(store_from_url("nothing").await).contains("no scheme"));
    }

    #[cfg(feature = "memory")]
    #[tokio::test]
    async fn memory_scheme_opens_a_memory_store() {
        assert!(store_from_url("memory://").await.is_ok());
        assert!(store_from_url("MEMORY://").await.is_ok());
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn the_url_names_the_table() {
        use crate::dedup::{Claim, ClaimToken};
        let path = std::env::temp_dir().join(format!(
            "dedup-url-table-{}-{}.db",
            std::process::id(),
            ClaimToken::random().to_hex()
        ));
        let url = format!("sqlite://{}", path.display());
        let a = store_from_url(&format!("{url}?table=dedup_a"))
            .await
            .unwrap();
        let b = store_from_url(&format!("{url}?table=dedup_b"))
            .await
            .unwrap();
        let lease = std::time::Duration::from_secs(30);
        for store in [&a, &b] {
            let claimed = store.claim("k", ClaimToken::random(), lease).await.unwrap();
            assert_eq!(claimed, Claim::Claimed, "each table claims on its own");
        }
        let again = a.claim("k", ClaimToken::random(), lease).await.unwrap();
        assert!(matches!(again, Claim::InFlight { .. }));
        assert!(
            config_reason(store_from_url(&format!("{url}?prefix=x")).await).contains("`table`")
        );
        drop((a, b));
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }

    #[cfg(not(feature = "redis-cluster"))]
    #[tokio::test]
    async fn the_cluster_scheme_without_its_feature_names_the_feature() {
        let reason = config_reason(store_from_url("redis-cluster://127.0.0.1:7000").await);
        assert!(reason.contains("`redis-cluster` feature"), "{reason}");
    }

    #[cfg(feature = "redis-cluster")]
    #[tokio::test]
    async fn a_malformed_cluster_url_is_a_config_error() {
        let reason = config_reason(store_from_url("redis-cluster://a:7000/3").await);
        assert!(reason.contains("database 0"), "{reason}");
    }

    #[tokio::test]
    async fn partitions_are_the_cluster_inbox_s_not_a_store_s() {
        let reason = config_reason(store_from_url("redis-cluster://a:7000?partitions=4").await);
        assert!(reason.contains("`partitions`"), "{reason}");
    }

    #[cfg(not(feature = "redis"))]
    #[tokio::test]
    async fn a_scheme_whose_feature_is_off_names_the_feature() {
        let reason = config_reason(store_from_url("redis://127.0.0.1").await);
        assert!(reason.contains("`redis` feature"), "{reason}");
        // Named for a user of either adapter, which forwards the feature.
        assert!(
            reason.contains("tower-webhooks") && reason.contains("actix-webhooks"),
            "{reason}"
        );
    }
}
