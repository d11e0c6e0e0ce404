//! [`RabbitMqInboxBuilder`]: the settings, and the queues and exchange
//! declared or checked at connection.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapin::uri::{AMQPScheme, AMQPUri};

use super::super::OpenError;
use super::{RabbitMqInbox, Shared};
use crate::ConfigError;
use crate::dedup::DedupStore;

/// Settings of a [`RabbitMqInbox`], from [`RabbitMqInbox::builder`].
#[derive(Clone)]
pub struct RabbitMqInboxBuilder {
    pub(super) url: String,
    pub(super) store: Option<Arc<dyn DedupStore>>,
    pub(super) queue: String,
    pub(super) delivery_limit: u32,
    pub(super) retention: Duration,
    pub(super) connect_timeout: Duration,
    pub(super) command_timeout: Duration,
}

impl fmt::Debug for RabbitMqInboxBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the URL: it holds the password.
        f.debug_struct("RabbitMqInboxBuilder")
            .field("queue", &self.queue)
            .field("delivery_limit", &self.delivery_limit)
            .field("retention", &self.retention)
            .finish_non_exhaustive()
    }
}

impl RabbitMqInboxBuilder {
    /// The queue's name (1 to 100 of `A-Z a-z 0-9 _ - . :`; default
    /// `webhooks`). The dead-letter exchange and queues are named after it.
    #[must_use]
    pub fn queue(mut self, name: impl Into<String>) -> Self {
        self.queue = name.into();
        self
    }

    /// The queue's `x-delivery-limit` (default 100; 0: none): a delivery
    /// handed back that many times (its workers died holding it) is
    /// dead-lettered by the broker itself. Keep it above the workers'
    /// `max_attempts`, which dead-letters first, with the error.
    #[must_use]
    pub fn delivery_limit(mut self, limit: u32) -> Self {
        self.delivery_limit = limit;
        self
    }

    /// How long accepted keys and completion records are kept in the dedup
    /// store (default 7 days, [`DEFAULT_RETENTION`](super::super::DEFAULT_RETENTION)):
    /// keep it above the senders' retry window.
    #[must_use]
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// How long connecting may take (default 5 s).
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one operation may take, a publish and its confirm included
    /// (default 5 s): past it, the operation fails with
    /// [`InboxError::Timeout`](super::super::InboxError::Timeout) (`503` at accept).
    #[must_use]
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Connects, and declares the queues and the dead-letter exchange, or
    /// checks them (an existing queue declared with other arguments is
    /// refused by the broker).
    ///
    /// # Errors
    ///
    /// [`OpenError::Config`] for an invalid URL or queue name;
    /// [`OpenError::Store`] when the broker (or the dedup store named in
    /// the URL) cannot be reached or refuses.
    pub async fn connect(self) -> Result<RabbitMqInbox, OpenError> {
        const WHAT: &str = "RabbitMQ inbox";
        let name = self.queue.clone();
        if name.is_empty()
            || name.len() > 100
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
        {
            return Err(ConfigError::Invalid {
                what: WHAT,
                reason: "the queue name is 1 to 100 of A-Z, a-z, 0-9, `_`, `-`, `.` and `:`",
            }
            .into());
        }
        // Parsed here, so that no error of the parser (which may quote the
        // URL, password included) is ever shown.
        let uri: AMQPUri = self.url.parse().map_err(|_| ConfigError::Invalid {
            what: WHAT,
            reason: "the URL is not an AMQP URL (amqp://user:password@host:port/vhost)",
        })?;
        if uri.scheme == AMQPScheme::AMQPS {
            crate::tls::use_ring();
        }
        let Some(store) = self.store else {
            return Err(ConfigError::Invalid {
                what: WHAT,
                reason: "a RabbitMQ inbox needs a dedup store (the builder's, or `dedup=` in the URL)",
            }
            .into());
        };
        let inbox = RabbitMqInbox {
            shared: Arc::new(Shared {
                space: super::broker::namespace(&uri.vhost, &name),
                uri,
                name,
                store,
                link: tokio::sync::Mutex::new(None),
                leasing: tokio::sync::Mutex::new(None),
                generation: AtomicU64::new(0),
                held: Mutex::new(HashMap::new()),
                delivery_limit: self.delivery_limit,
                retention: self.retention,
                connect_timeout: self.connect_timeout,
                timeout: self.command_timeout,
            }),
        };
        inbox.shared.declare().await.map_err(OpenError::Store)?;
        Ok(inbox)
    }
}

impl RabbitMqInbox {
    /// A builder for the broker at `url` (`amqp://user:password@host:port/vhost`,
    /// `amqps://…`; the default vhost `/` is `%2f`), with `store` as the
    /// record of what was accepted and completed. Every process using the
    /// queue must share it: a Redis, PostgreSQL or MySQL store, not the
    /// in-process one (which dedups within one process only).
    #[must_use]
    pub fn builder(url: &str, store: Arc<dyn DedupStore>) -> RabbitMqInboxBuilder {
        let mut builder = Self::builder_without_store(url);
        builder.store = Some(store);
        builder
    }

    fn builder_without_store(url: &str) -> RabbitMqInboxBuilder {
        RabbitMqInboxBuilder {
            url: url.to_owned(),
            store: None,
            queue: "webhooks".to_owned(),
            delivery_limit: 100,
            retention: super::super::DEFAULT_RETENTION,
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(5),
        }
    }

    /// A builder from an inbox URL:
    /// `amqp://user:password@host:port/vhost?queue=Q&dedup=redis%3A%2F%2Fhost[&delivery_limit=100]`
    /// (the library's `retention` already taken out by
    /// [`inbox_from_url`](super::super::inbox_from_url)); the dedup store's
    /// URL, percent-encoded if it has a query of its own.
    pub(crate) async fn builder_from_url(url: &str) -> Result<RabbitMqInboxBuilder, OpenError> {
        const WHAT: &str = "inbox URL";
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut builder = Self::builder_without_store(base);
        let mut kept = Vec::new();
        let mut dedup = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decoded = || {
                percent_encoding::percent_decode_str(value)
                    .decode_utf8()
                    .map(|v| v.into_owned())
                    .map_err(|_| ConfigError::Invalid {
                        what: WHAT,
                        reason: "a RabbitMQ inbox URL parameter is not valid percent-encoded UTF-8",
                    })
            };
            match name {
                "queue" => builder.queue = decoded()?,
                "dedup" => dedup = Some(decoded()?),
                "delivery_limit" => {
                    builder.delivery_limit = value.parse().map_err(|_| ConfigError::Invalid {
                        what: WHAT,
                        reason: "`delivery_limit` is a number (0: none)",
                    })?;
                }
                // lapin's own connection parameters.
                "heartbeat" | "connection_timeout" | "channel_max" | "frame_max" => {
                    kept.push(pair);
                }
                _ => {
                    return Err(ConfigError::Invalid {
                        what: WHAT,
                        reason: "a RabbitMQ inbox URL takes `queue`, `dedup`, `delivery_limit`, \
                                 `retention`, and lapin's `heartbeat`, \
                                 `connection_timeout`, `channel_max` and `frame_max`",
                    }
                    .into());
                }
            }
        }
        if !kept.is_empty() {
            builder.url = format!("{base}?{}", kept.join("&"));
        }
        let Some(dedup) = dedup else {
            return Err(ConfigError::Invalid {
                what: WHAT,
                reason: "a RabbitMQ inbox URL names its dedup store: `dedup=redis://…` (percent-encoded)",
            }
            .into());
        };
        builder.store = Some(
            crate::dedup::store_from_url(&dedup)
                .await
                .map_err(OpenError::from)?,
        );
        Ok(builder)
    }
}
