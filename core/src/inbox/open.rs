//! [`inbox_from_url`]: the inbox a URL names, opened with its engine's
//! defaults, its table created, its purge started.

use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "nats")]
use super::JetStreamInbox;
#[cfg(feature = "mysql")]
use super::MySqlInbox;
#[cfg(feature = "postgres")]
use super::PostgresInbox;
#[cfg(feature = "rabbitmq")]
use super::RabbitMqInbox;
#[cfg(feature = "redis-cluster")]
use super::RedisClusterInbox;
#[cfg(feature = "redis")]
use super::RedisInbox;
#[cfg(feature = "sqlite")]
use super::SqliteInbox;
#[cfg(doc)]
use super::purge_floor;
use super::{DEFAULT_PURGE_INTERVAL, DEFAULT_RETENTION, Inbox, OpenError, PurgeTask, purge, url};
use crate::ConfigError;

/// Opens the inbox named by `url`, creates its table if missing, and starts
/// the purge of completed events.
///
/// | URL | backend | feature |
/// |---|---|---|
/// | `postgres://…`, `postgresql://…` | [`PostgresInbox`] | `postgres` |
/// | `mysql://…`, `mariadb://…` | [`MySqlInbox`] | `mysql` |
/// | `sqlite://path`, `sqlite:path` | [`SqliteInbox`] | `sqlite` |
/// | `redis://…`, `rediss://…`, `redis+unix://…` | [`RedisInbox`] | `redis` |
/// | `redis-cluster://host:port[,host:port…]`, `rediss-cluster://…` | [`RedisClusterInbox`] | `redis-cluster` |
/// | `nats://host:port[,host:port…][/STREAM]`, `tls://…` | [`JetStreamInbox`] | `nats` |
/// | `amqp://user:password@host:port/vhost?dedup=…`, `amqps://…` | [`RabbitMqInbox`] | `rabbitmq` |
///
/// Query parameters of the library's own (the others reach the driver):
///
/// | parameter | meaning | default |
/// |---|---|---|
/// | `table` | the SQL table (two inboxes can share a database) | `webhooks_inbox` |
/// | `prefix` | the Redis key prefix | `inbox:` |
/// | `partitions` | the Redis Cluster inbox's partitions (never change it while events are stored) | [`RedisClusterInbox::DEFAULT_PARTITIONS`] (16) |
/// | `replicas` | the JetStream streams' replicas (NATS only) | 1 |
/// | `duplicate_window` | the JetStream stream's duplicate window (NATS only): `2m`, `1h` | 2 minutes |
/// | `queue` | the RabbitMQ queue (RabbitMQ only) | `webhooks` |
/// | `dedup` | the RabbitMQ inbox's dedup store, the record of what was accepted (RabbitMQ only, required): a store URL, percent-encoded (`redis%3A%2F%2Fhost%3A6379`) | none |
/// | `delivery_limit` | the RabbitMQ queue's `x-delivery-limit` (RabbitMQ only; 0: none) | 100 |
/// | `retention` | how long completed events are kept: `7d`, `12h`, `30m`, `90` (seconds), or `off`; refused below [`purge_floor`] (the longest provider retry window plus a day: 4 days) without `short_retention=allow` | [`DEFAULT_RETENTION`] (7 days) |
/// | `short_retention` | `allow`: accept a `retention` below the providers' retry windows (a late retry of a purged delivery runs again) | refused |
///
/// **Purge.** Events completed more than the retention ago are deleted at
/// opening, then every hour ([`DEFAULT_PURGE_INTERVAL`]), by a Tokio task
/// that stops once every handle on the returned inbox is dropped. Keep the
/// retention above the senders' retry window: a retry of a purged delivery
/// is stored and processed again. `retention=off` keeps completed events
/// until you call [`Inbox::purge_completed`]. An inbox built with a builder
/// purges only when told to ([`PurgeTask::spawn`]).
///
/// ```no_run
/// # async fn run() -> Result<(), webhooks_core::inbox::OpenError> {
/// use webhooks_core::inbox::inbox_from_url;
///
/// let orders = inbox_from_url("postgres://app@db/app?table=orders_inbox&retention=14d").await?;
/// let billing = inbox_from_url("postgres://app@db/app?table=billing_inbox").await?;
/// # let _ = (orders, billing); Ok(()) }
/// ```
///
/// # Errors
///
/// [`OpenError::Config`] for an unknown scheme, one whose feature is off, a
/// malformed URL, an invalid table name or retention, or `table` on Redis
/// (`prefix` on SQL); [`OpenError::Store`] when the store does not answer.
///
/// # Panics
///
/// Outside a Tokio runtime.
#[cfg_attr(
    not(feature = "postgres"),
    doc = "\n\n[`PostgresInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.PostgresInbox.html"
)]
#[cfg_attr(
    not(feature = "mysql"),
    doc = "\n\n[`MySqlInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.MySqlInbox.html"
)]
#[cfg_attr(
    not(feature = "sqlite"),
    doc = "\n\n[`SqliteInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.SqliteInbox.html"
)]
#[cfg_attr(
    not(feature = "redis"),
    doc = "\n\n[`RedisInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.RedisInbox.html"
)]
#[cfg_attr(
    not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
    doc = "\n\n[`DEFAULT_INBOX_TABLE`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/constant.DEFAULT_INBOX_TABLE.html"
)]
#[cfg_attr(
    not(feature = "nats"),
    doc = "\n\n[`JetStreamInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.JetStreamInbox.html"
)]
#[cfg_attr(
    not(feature = "rabbitmq"),
    doc = "\n\n[`RabbitMqInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.RabbitMqInbox.html"
)]
#[cfg_attr(
    not(feature = "redis-cluster"),
    doc = "\n\n[`RedisClusterInbox`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.RedisClusterInbox.html\n[`RedisClusterInbox::DEFAULT_PARTITIONS`]: https://docs.rs/webhooks-core/latest/webhooks_core/inbox/struct.RedisClusterInbox.html#associatedconstant.DEFAULT_PARTITIONS"
)]
pub async fn inbox_from_url(url: &str) -> Result<Arc<dyn Inbox>, OpenError> {
    const WHAT: &str = "inbox URL";
    let scheme = url
        .split_once(':')
        .map(|(scheme, _)| scheme.to_ascii_lowercase())
        .ok_or(ConfigError::Invalid {
            what: WHAT,
            reason: "has no scheme (postgres://, mysql://, sqlite:// or redis://)",
        })?;
    let options = url::UrlOptions::take(url, WHAT)?;
    let retention = match options.retention.as_deref() {
        None => Some(DEFAULT_RETENTION),
        Some(text) => purge::parse_retention(text).ok_or(ConfigError::Invalid {
            what: WHAT,
            reason: "`retention` is `off` or a positive number with a unit (s, m, h, d)",
        })?,
    };
    match options.short_retention.as_deref() {
        None => {
            let floor = crate::scheme::registry::longest_retention_floor();
            if let Some(retention) = retention.filter(|r| *r < floor) {
                return Err(ConfigError::RetentionBelowRetryWindow {
                    scheme: "any",
                    retention_secs: retention.as_secs(),
                    floor_secs: floor.as_secs(),
                }
                .into());
            }
        }
        Some("allow") => {}
        Some(_) => {
            return Err(ConfigError::Invalid {
                what: WHAT,
                reason: "`short_retention` is `allow`",
            }
            .into());
        }
    }
    let cluster = matches!(scheme.as_str(), "redis-cluster" | "rediss-cluster");
    let nats = matches!(scheme.as_str(), "nats" | "tls" | "jetstream");
    if nats && (options.prefix.is_some() || options.table.is_some() || options.partitions.is_some())
    {
        return Err(ConfigError::Invalid {
            what: WHAT,
            reason: "a NATS inbox is named by the URL's path (nats://host:port/STREAM), not `table` or `prefix`",
        }
        .into());
    }
    let rabbitmq = matches!(scheme.as_str(), "amqp" | "amqps");
    if rabbitmq
        && (options.prefix.is_some() || options.table.is_some() || options.partitions.is_some())
    {
        return Err(ConfigError::Invalid {
            what: WHAT,
            reason: "a RabbitMQ inbox is named by `queue=`, not `table` or `prefix`",
        }
        .into());
    }
    let sql = !cluster
        && !nats
        && !rabbitmq
        && !matches!(scheme.as_str(), "redis" | "rediss" | "redis+unix" | "unix");
    if (sql && options.prefix.is_some()) || (!sql && !nats && options.table.is_some()) {
        return Err(ConfigError::Invalid {
            what: WHAT,
            reason: "`table` is for the SQL inboxes, `prefix` for Redis",
        }
        .into());
    }
    let partitions = match options.partitions.as_deref() {
        None => None,
        Some(_) if !cluster => {
            return Err(ConfigError::Invalid {
                what: WHAT,
                reason: "`partitions` is for the Redis Cluster inbox (redis-cluster://)",
            }
            .into());
        }
        Some(text) => Some(text.parse::<u16>().map_err(|_| ConfigError::Invalid {
            what: WHAT,
            reason: "`partitions` is a number from 1 to 1024",
        })?),
    };
    let (url, table, prefix) = (options.url.as_str(), options.table, options.prefix);
    let inbox = match scheme.as_str() {
        "postgres" | "postgresql" => postgres(url, table).await?,
        "mysql" | "mariadb" => mysql(url, table).await?,
        "sqlite" => sqlite(url, table).await?,
        "redis" | "rediss" | "redis+unix" | "unix" => redis_inbox(url, prefix).await?,
        "redis-cluster" | "rediss-cluster" => redis_cluster_inbox(url, prefix, partitions).await?,
        "nats" | "tls" | "jetstream" => nats_inbox(url, retention).await?,
        "amqp" | "amqps" => rabbitmq_inbox(url, retention).await?,
        _ => {
            return Err(ConfigError::Invalid {
                what: WHAT,
                reason: "unknown scheme; expected postgres, mysql, mariadb, sqlite, redis, \
                         redis-cluster, nats or amqp",
            }
            .into());
        }
    };
    if let Some(retention) = retention {
        PurgeTask::spawn(&inbox, retention, DEFAULT_PURGE_INTERVAL).detach();
    }
    Ok(inbox)
}

#[cfg(feature = "postgres")]
async fn postgres(url: &str, table: Option<String>) -> Result<Arc<dyn Inbox>, OpenError> {
    let builder = PostgresInbox::builder(url);
    let inbox = match table {
        Some(table) => builder.table(table),
        None => builder,
    }
    .connect()
    .await?;
    inbox.migrate().await?;
    Ok(Arc::new(inbox))
}

#[cfg(not(feature = "postgres"))]
async fn postgres(_: &str, _: Option<String>) -> Result<Arc<dyn Inbox>, OpenError> {
    Err(feature_off(
        "postgres:// needs the `postgres` feature of the crate you depend on (tower-webhooks, actix-webhooks or webhooks-core)",
    ))
}

#[cfg(feature = "mysql")]
async fn mysql(url: &str, table: Option<String>) -> Result<Arc<dyn Inbox>, OpenError> {
    let builder = MySqlInbox::builder(url);
    let inbox = match table {
        Some(table) => builder.table(table),
        None => builder,
    }
    .connect()
    .await?;
    inbox.migrate().await?;
    Ok(Arc::new(inbox))
}

#[cfg(not(feature = "mysql"))]
async fn mysql(_: &str, _: Option<String>) -> Result<Arc<dyn Inbox>, OpenError> {
    Err(feature_off(
        "mysql:// and mariadb:// need the `mysql` feature of the crate you depend on (tower-webhooks, actix-webhooks or webhooks-core)",
    ))
}

#[cfg(feature = "sqlite")]
async fn sqlite(url: &str, table: Option<String>) -> Result<Arc<dyn Inbox>, OpenError> {
    let builder = SqliteInbox::builder(url);
    let inbox = match table {
        Some(table) => builder.table(table),
        None => builder,
    }
    .connect()
    .await?;
    inbox.migrate().await?;
    Ok(Arc::new(inbox))
}

#[cfg(not(feature = "sqlite"))]
async fn sqlite(_: &str, _: Option<String>) -> Result<Arc<dyn Inbox>, OpenError> {
    Err(feature_off(
        "sqlite:// needs the `sqlite` feature of the crate you depend on (tower-webhooks, actix-webhooks or webhooks-core)",
    ))
}

#[cfg(feature = "redis")]
async fn redis_inbox(url: &str, prefix: Option<String>) -> Result<Arc<dyn Inbox>, OpenError> {
    let builder = RedisInbox::builder(url);
    let inbox = match prefix {
        Some(prefix) => builder.key_prefix(prefix),
        None => builder,
    }
    .connect()
    .await?;
    Ok(Arc::new(inbox))
}

#[cfg(not(feature = "redis"))]
async fn redis_inbox(_: &str, _: Option<String>) -> Result<Arc<dyn Inbox>, OpenError> {
    Err(feature_off(
        "redis:// needs the `redis` feature of the crate you depend on (tower-webhooks, actix-webhooks or webhooks-core)",
    ))
}

#[cfg(feature = "redis-cluster")]
async fn redis_cluster_inbox(
    url: &str,
    prefix: Option<String>,
    partitions: Option<u16>,
) -> Result<Arc<dyn Inbox>, OpenError> {
    let mut builder = RedisClusterInbox::builder_from_url(url)?;
    if let Some(prefix) = prefix {
        builder = builder.key_prefix(prefix);
    }
    if let Some(partitions) = partitions {
        builder = builder.partitions(partitions);
    }
    Ok(Arc::new(builder.connect().await?))
}

#[cfg(not(feature = "redis-cluster"))]
async fn redis_cluster_inbox(
    _: &str,
    _: Option<String>,
    _: Option<u16>,
) -> Result<Arc<dyn Inbox>, OpenError> {
    Err(feature_off(
        "redis-cluster:// needs webhooks-core's `redis-cluster` feature",
    ))
}

#[cfg(feature = "nats")]
async fn nats_inbox(url: &str, retention: Option<Duration>) -> Result<Arc<dyn Inbox>, OpenError> {
    let mut builder = JetStreamInbox::builder_from_url(url)?;
    // `retention=off`: kept until purged (a zero age is no limit to JetStream).
    builder = builder.retention(retention.unwrap_or(Duration::ZERO));
    Ok(Arc::new(builder.connect().await?))
}

#[cfg(not(feature = "nats"))]
async fn nats_inbox(_: &str, _: Option<Duration>) -> Result<Arc<dyn Inbox>, OpenError> {
    Err(feature_off(
        "nats:// needs webhooks-core's `nats` feature (tower-webhooks and actix-webhooks forward it)",
    ))
}

#[cfg(feature = "rabbitmq")]
async fn rabbitmq_inbox(
    url: &str,
    retention: Option<Duration>,
) -> Result<Arc<dyn Inbox>, OpenError> {
    let mut builder = RabbitMqInbox::builder_from_url(url).await?;
    if let Some(retention) = retention {
        builder = builder.retention(retention);
    }
    Ok(Arc::new(builder.connect().await?))
}

#[cfg(not(feature = "rabbitmq"))]
async fn rabbitmq_inbox(_: &str, _: Option<Duration>) -> Result<Arc<dyn Inbox>, OpenError> {
    Err(feature_off(
        "amqp:// needs webhooks-core's `rabbitmq` feature (tower-webhooks and actix-webhooks forward it)",
    ))
}

#[allow(dead_code, reason = "used only by the backends whose feature is off")]
fn feature_off(reason: &'static str) -> OpenError {
    ConfigError::Invalid {
        what: "inbox URL",
        reason,
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unknown_schemes_are_config_errors() {
        assert!(matches!(
            inbox_from_url("ftp://x").await,
            Err(OpenError::Config(_))
        ));
    }
}
