//! The Redis [`Inbox`](super::Inbox): a hash per event plus sorted sets, every
//! operation one Lua script.

mod engine;
mod gates;
mod history;
mod log;
mod replies;
mod scripts;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

#[cfg(feature = "redis-cluster")]
pub(super) use self::engine::partition_of;
pub(super) use self::engine::{Engine, Partition};
#[cfg(feature = "redis-cluster")]
pub(super) use self::replies::accepted;
pub(super) use self::replies::inbox_error;
pub use self::scripts::{DEAD_LETTER_SCAN_BUDGET, DELIVERY_SCAN_BUDGET};
use super::{Accepted, InboxError, NewEvent, OpenError};
use crate::ConfigError;

/// Implements [`Inbox`](super::Inbox) for a type whose `engine` field is an
/// [`Engine`]; `accept` goes through the type's own `accept_event`.
macro_rules! inbox_over_engine {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl $crate::inbox::Inbox for $ty {
            async fn accept(
                &self,
                event: &$crate::inbox::NewEvent,
            ) -> Result<$crate::inbox::Accepted, $crate::inbox::InboxError> {
                self.accept_event(event).await
            }

            async fn lease(
                &self,
                token: $crate::inbox::ClaimToken,
                batch: u32,
                lease: std::time::Duration,
                max_attempts: u32,
            ) -> Result<Vec<$crate::inbox::LeasedEvent>, $crate::inbox::InboxError> {
                self.engine.lease(token, batch, lease, max_attempts).await
            }

            async fn extend(
                &self,
                key: &str,
                token: $crate::inbox::ClaimToken,
                lease: std::time::Duration,
            ) -> Result<$crate::inbox::Transition, $crate::inbox::InboxError> {
                self.engine.extend(key, token, lease).await
            }

            async fn complete(
                &self,
                key: &str,
                token: $crate::inbox::ClaimToken,
            ) -> Result<$crate::inbox::Transition, $crate::inbox::InboxError> {
                self.engine.complete(key, token).await
            }

            async fn complete_many(
                &self,
                done: &[(&str, $crate::inbox::ClaimToken)],
            ) -> Result<Vec<$crate::inbox::Transition>, $crate::inbox::InboxError> {
                self.engine.complete_many(done).await
            }

            async fn retry(
                &self,
                key: &str,
                token: $crate::inbox::ClaimToken,
                delay: std::time::Duration,
                error: &str,
            ) -> Result<$crate::inbox::Transition, $crate::inbox::InboxError> {
                self.engine.retry(key, token, delay, error).await
            }

            async fn release(
                &self,
                key: &str,
                token: $crate::inbox::ClaimToken,
            ) -> Result<$crate::inbox::Transition, $crate::inbox::InboxError> {
                self.engine.release(key, token).await
            }

            async fn dead_letter(
                &self,
                key: &str,
                token: $crate::inbox::ClaimToken,
                error: &str,
            ) -> Result<$crate::inbox::Transition, $crate::inbox::InboxError> {
                self.engine.dead_letter(key, token, error).await
            }

            async fn dead_letters(
                &self,
                filter: &$crate::inbox::DeadLetterFilter,
            ) -> Result<$crate::inbox::DeadLetterPage, $crate::inbox::InboxError> {
                self.engine.dead_letters(filter).await
            }

            async fn dead_letter_get(
                &self,
                key: &str,
            ) -> Result<Option<$crate::inbox::DeadLetter>, $crate::inbox::InboxError> {
                self.engine.dead_letter_get(key).await
            }

            async fn replay(
                &self,
                key: &str,
            ) -> Result<$crate::inbox::Transition, $crate::inbox::InboxError> {
                self.engine.replay(key).await
            }

            async fn discard(
                &self,
                key: &str,
            ) -> Result<$crate::inbox::Transition, $crate::inbox::InboxError> {
                self.engine.discard(key).await
            }

            async fn purge_completed(
                &self,
                older_than: std::time::Duration,
            ) -> Result<u64, $crate::inbox::InboxError> {
                self.engine.purge_completed(older_than).await
            }

            async fn stats(&self) -> Result<$crate::inbox::InboxStats, $crate::inbox::InboxError> {
                self.engine.stats().await
            }

            async fn set_paused(&self, paused: bool) -> Result<bool, $crate::inbox::InboxError> {
                self.engine.set_paused(paused).await
            }

            async fn paused(&self) -> Result<bool, $crate::inbox::InboxError> {
                self.engine.paused().await
            }

            async fn deliveries(
                &self,
                filter: &$crate::inbox::DeliveryFilter,
            ) -> Result<$crate::inbox::DeliveryPage, $crate::inbox::InboxError> {
                self.engine.deliveries(filter).await
            }

            async fn delivery_get(
                &self,
                key: &str,
            ) -> Result<Option<$crate::inbox::Delivery>, $crate::inbox::InboxError> {
                self.engine.delivery_get(key).await
            }

            async fn record_attempts(
                &self,
                attempts: &[(&str, $crate::inbox::Attempt)],
            ) -> Result<(), $crate::inbox::InboxError> {
                self.engine.record_attempts(attempts).await
            }

            async fn attempts(
                &self,
                key: &str,
            ) -> Result<Vec<$crate::inbox::Attempt>, $crate::inbox::InboxError> {
                self.engine.attempts(key).await
            }

            fn keeps_attempts(&self) -> bool {
                true
            }

            async fn record_action(
                &self,
                action: &$crate::inbox::Action,
            ) -> Result<(), $crate::inbox::InboxError> {
                self.engine.record_action(action).await
            }

            async fn actions(
                &self,
                before: Option<u64>,
                limit: u32,
            ) -> Result<$crate::inbox::ActionPage, $crate::inbox::InboxError> {
                self.engine.actions(before, limit).await
            }

            fn keeps_actions(&self) -> bool {
                true
            }

            async fn activity(
                &self,
                minutes: u32,
            ) -> Result<$crate::inbox::Activity, $crate::inbox::InboxError> {
                self.engine.activity(minutes).await
            }

            async fn set_gate_paused(
                &self,
                selector: &$crate::inbox::gates::Selector,
                paused: bool,
            ) -> Result<bool, $crate::inbox::InboxError> {
                self.engine.set_gate_paused(selector, paused).await
            }

            async fn gates(
                &self,
            ) -> Result<Vec<$crate::inbox::gates::Gate>, $crate::inbox::InboxError> {
                self.engine.gates().await
            }

            async fn acquire_permit(
                &self,
                selector: &$crate::inbox::gates::Selector,
                limit: $crate::inbox::gates::Limit,
                holder: &str,
                hold: std::time::Duration,
            ) -> Result<$crate::inbox::gates::Permit, $crate::inbox::InboxError> {
                self.engine
                    .acquire_permit(selector, limit, holder, hold)
                    .await
            }

            async fn release_permit(
                &self,
                selector: &$crate::inbox::gates::Selector,
                holder: &str,
            ) -> Result<(), $crate::inbox::InboxError> {
                self.engine.release_permit(selector, holder).await
            }

            async fn defer(
                &self,
                key: &str,
                token: $crate::inbox::ClaimToken,
                delay: std::time::Duration,
            ) -> Result<$crate::inbox::Transition, $crate::inbox::InboxError> {
                self.engine.defer(key, token, delay).await
            }

            fn keeps_gates(&self) -> bool {
                true
            }
        }
    };
}
#[cfg(feature = "redis-cluster")]
pub(super) use inbox_over_engine;

/// An [`Inbox`](super::Inbox) on Redis (or Valkey).
///
/// Each event is a hash (`prefix + "e:" + key`); four sorted sets index them:
/// pending by due time, leased by lease end, dead by receipt, completed by
/// completion (`prefix + "pending"`, `"leased"`, `"dead"`, `"done"`); the
/// key `prefix + "paused"` exists while processing is paused. Pauses by
/// selector and the permits of limits
/// ([`gates`](super::gates)) are a hash of the paused selectors
/// (`prefix + "gates"`), a sorted set of the pending events they set aside
/// (`prefix + "parked"`, still counted as pending), and per gate a hash and
/// a sorted set of its permits' holders (`prefix + "gate:" + selector`,
/// `prefix + "permits:" + selector`, listed in `prefix + "gates:all"`). Every
/// operation is one Lua script reading the server's clock (`TIME`), so it
/// is atomic against every other worker and receiver. For a Redis Cluster,
/// see `RedisClusterInbox` (feature `redis-cluster`): the same scripts over
/// hash-tagged partitions.
///
/// **Durability.** Redis answers before its disk has the write unless the
/// append-only file is fsynced on every write: a `2xx` for a stored delivery
/// is only as durable as `appendonly yes` with `appendfsync always` (or a
/// `WAITAOF` after the write, Redis 7.2+). With `appendfsync everysec` (the
/// default when AOF is on) a crash of the Redis host loses up to a second of
/// acknowledged deliveries; with AOF off, everything since the last snapshot.
/// [`connect`](RedisInboxBuilder::connect) reads both settings and logs a
/// warning unless they are `yes` and `always`. Also set `maxmemory-policy
/// noeviction`: an evicted event is lost.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use webhooks_core::inbox::RedisInbox;
///
/// let inbox = RedisInbox::builder("redis://127.0.0.1:6379").key_prefix("inbox:").connect().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisInbox {
    engine: Engine<ConnectionManager>,
    prefix: Arc<str>,
}

inbox_over_engine!(RedisInbox);

impl fmt::Debug for RedisInbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisInbox")
            .field("prefix", &self.prefix)
            .field("command_timeout", &self.engine.command_timeout())
            .finish_non_exhaustive()
    }
}

/// Builds a [`RedisInbox`]; see [`RedisInbox::builder`].
///
/// **Retention.** An inbox built here keeps its completed events until
/// something purges them (under `noeviction`, a full Redis answers every
/// accept with an error): start a [`PurgeTask`](super::PurgeTask) (what
/// [`inbox_from_url`](super::inbox_from_url) does, with
/// [`DEFAULT_RETENTION`](super::DEFAULT_RETENTION)), or call
/// [`purge_completed`](super::Inbox::purge_completed) from a job of yours.
#[derive(Clone)]
#[must_use]
pub struct RedisInboxBuilder {
    url: String,
    prefix: String,
    connect_timeout: Duration,
    command_timeout: Duration,
}

impl fmt::Debug for RedisInboxBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may hold a password.
        f.debug_struct("RedisInboxBuilder")
            .field("prefix", &self.prefix)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .finish_non_exhaustive()
    }
}

impl RedisInboxBuilder {
    /// The prefix of every key (default `inbox:`).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long connecting may take (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one operation may take (default 2 s).
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Connects, then warns (a `tracing` warning) unless the server fsyncs
    /// every write (`appendonly yes`, `appendfsync always`).
    ///
    /// # Errors
    ///
    /// [`OpenError::Config`] for a URL redis-rs does not accept,
    /// [`OpenError::Store`] when the server cannot be reached in time.
    pub async fn connect(self) -> Result<RedisInbox, OpenError> {
        #[cfg(feature = "redis-tls")]
        crate::tls::use_ring();
        let client = redis::Client::open(self.url.as_str()).map_err(|_| ConfigError::Invalid {
            what: "redis URL",
            reason: "not a URL redis-rs accepts (redis://[user:password@]host[:port][/db])",
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.command_timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(200));
        #[cfg(feature = "redis-tls")]
        let probe = client.clone();
        let connection = match tokio::time::timeout(
            self.connect_timeout,
            ConnectionManager::new_with_config(client, config),
        )
        .await
        {
            Ok(Ok(connection)) => connection,
            failed => {
                #[cfg(feature = "redis-tls")]
                if crate::tls::answers_plain_redis(&probe).await {
                    return Err(crate::tls::PLAIN_REDIS.into());
                }
                return Err(match failed {
                    Ok(Err(error)) => inbox_error(error),
                    _ => InboxError::Timeout,
                }
                .into());
            }
        };
        // One partition whose prefix is the key prefix: the keys every
        // earlier version wrote.
        let inbox = RedisInbox {
            engine: Engine::new(
                connection,
                vec![Partition::new(self.prefix.clone())],
                self.command_timeout,
            ),
            prefix: Arc::from(self.prefix.as_str()),
        };
        inbox.warn_unless_durable().await;
        Ok(inbox)
    }
}

/// The warning of an inbox whose server may lose acknowledged deliveries,
/// from its `appendonly` and `appendfsync` settings (`None`: unreadable).
pub(super) fn warn_unless_durable(appendonly: Option<&str>, appendfsync: Option<&str>) {
    match (appendonly, appendfsync) {
        (Some("yes"), Some("always")) => {}
        (Some(appendonly), Some(appendfsync)) => tracing::warn!(
            appendonly,
            appendfsync,
            "the Redis server does not fsync every write (appendonly yes, appendfsync always): \
             a delivery answered 2xx can be lost if the Redis host crashes"
        ),
        _ => tracing::debug!("could not read the Redis AOF settings"),
    }
}

impl RedisInbox {
    async fn accept_event(&self, event: &NewEvent) -> Result<Accepted, InboxError> {
        self.engine.accept(event).await
    }

    /// A builder for an inbox on the server at `url`.
    pub fn builder(url: &str) -> RedisInboxBuilder {
        RedisInboxBuilder {
            url: url.to_owned(),
            prefix: "inbox:".to_owned(),
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(2),
        }
    }

    /// Connects with the defaults; see [`builder`](Self::builder).
    ///
    /// # Errors
    ///
    /// As [`RedisInboxBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self, OpenError> {
        Self::builder(url).connect().await
    }

    /// The key prefix.
    #[must_use]
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// Logs a warning unless every write is fsynced before Redis answers.
    /// Silent when `CONFIG` is not allowed (managed services often disable it).
    async fn warn_unless_durable(&self) {
        let appendonly = self.config_get("appendonly").await;
        let appendfsync = self.config_get("appendfsync").await;
        warn_unless_durable(appendonly.as_deref(), appendfsync.as_deref());
    }

    /// One `CONFIG GET` value, if the server allows it.
    async fn config_get(&self, name: &str) -> Option<String> {
        let mut connection = self.engine.connection().clone();
        let reply = tokio::time::timeout(
            self.engine.command_timeout(),
            redis::cmd("CONFIG")
                .arg("GET")
                .arg(name)
                .query_async::<HashMap<String, String>>(&mut connection),
        )
        .await;
        match reply {
            Ok(Ok(mut config)) => config.remove(name),
            _ => None,
        }
    }
}
