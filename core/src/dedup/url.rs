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
/// | `postgres://…`, `postgresql://…` | `PostgresStore` | `postgres` | `migrate()` runs, purge task started |
/// | `mysql://…`, `mariadb://…` | `MySqlStore` | `mysql` | `migrate()` runs, purge task started |
/// | `sqlite://path`, `sqlite:path` | `SqliteStore` | `sqlite` | file created, `migrate()` runs, purge task started |
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
    match scheme.as_str() {
        "memory" => memory(),
        "redis" | "rediss" | "redis+unix" | "unix" => redis(url).await,
        "postgres" | "postgresql" => postgres(url).await,
        "mysql" | "mariadb" => mysql(url).await,
        "sqlite" => sqlite(url).await,
        _ => Err(ConfigError::Invalid {
            what: "dedup store URL",
            reason: "unknown scheme; expected memory, redis, postgres, mysql, mariadb or sqlite",
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
        "memory:// needs webhooks-core's `memory` feature",
    ))
}

#[cfg(feature = "redis")]
async fn redis(url: &str) -> Result<Arc<dyn DedupStore>, OpenError> {
    Ok(Arc::new(super::RedisStore::connect(url).await?))
}

#[cfg(not(feature = "redis"))]
async fn redis(_: &str) -> Result<Arc<dyn DedupStore>, OpenError> {
    Err(feature_off(
        "redis:// needs webhooks-core's `redis` feature",
    ))
}

#[cfg(feature = "postgres")]
async fn postgres(url: &str) -> Result<Arc<dyn DedupStore>, OpenError> {
    let store = super::PostgresStore::connect(url).await?;
    store.migrate().await?;
    let purge = store.spawn_purge(super::sql::URL_PURGE_INTERVAL);
    Ok(Arc::new(super::sql::Purging::new(store, purge)))
}

#[cfg(not(feature = "postgres"))]
async fn postgres(_: &str) -> Result<Arc<dyn DedupStore>, OpenError> {
    Err(feature_off(
        "postgres:// needs webhooks-core's `postgres` feature",
    ))
}

#[cfg(feature = "mysql")]
async fn mysql(url: &str) -> Result<Arc<dyn DedupStore>, OpenError> {
    let store = super::MySqlStore::connect(url).await?;
    store.migrate().await?;
    let purge = store.spawn_purge(super::sql::URL_PURGE_INTERVAL);
    Ok(Arc::new(super::sql::Purging::new(store, purge)))
}

#[cfg(not(feature = "mysql"))]
async fn mysql(_: &str) -> Result<Arc<dyn DedupStore>, OpenError> {
    Err(feature_off(
        "mysql:// and mariadb:// need webhooks-core's `mysql` feature",
    ))
}

#[cfg(feature = "sqlite")]
async fn sqlite(url: &str) -> Result<Arc<dyn DedupStore>, OpenError> {
    let store = super::SqliteStore::connect(url).await?;
    store.migrate().await?;
    let purge = store.spawn_purge(super::sql::URL_PURGE_INTERVAL);
    Ok(Arc::new(super::sql::Purging::new(store, purge)))
}

#[cfg(not(feature = "sqlite"))]
async fn sqlite(_: &str) -> Result<Arc<dyn DedupStore>, OpenError> {
    Err(feature_off(
        "sqlite:// needs webhooks-core's `sqlite` feature",
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

    #[cfg(not(feature = "redis"))]
    #[tokio::test]
    async fn a_scheme_whose_feature_is_off_names_the_feature() {
        let reason = config_reason(store_from_url("redis://127.0.0.1").await);
        assert!(reason.contains("`redis` feature"), "{reason}");
    }
}
