//! [`JetStreamInboxBuilder`]: the settings, and the streams and consumer
//! created or checked at connection.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, Context, consumer, stream};

use super::super::{InboxError, OpenError};
use super::format::ms_u64;
use super::{CONSUMER, JetStreamInbox, Shared};
use crate::ConfigError;

/// Settings of a [`JetStreamInbox`], from [`JetStreamInbox::builder`].
#[derive(Clone)]
pub struct JetStreamInboxBuilder {
    pub(super) url: String,
    pub(super) stream: String,
    pub(super) replicas: usize,
    pub(super) duplicate_window: Duration,
    pub(super) retention: Duration,
    pub(super) lease: Duration,
    pub(super) connect_timeout: Duration,
    pub(super) command_timeout: Duration,
}

impl fmt::Debug for JetStreamInboxBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the URL: it may hold a password or token.
        f.debug_struct("JetStreamInboxBuilder")
            .field("stream", &self.stream)
            .field("replicas", &self.replicas)
            .field("duplicate_window", &self.duplicate_window)
            .field("retention", &self.retention)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl JetStreamInboxBuilder {
    /// The stream's name (`[A-Za-z0-9_-]`, at most 32 characters; default
    /// `WEBHOOKS`). The other streams and buckets are named after it.
    #[must_use]
    pub fn stream(mut self, name: impl Into<String>) -> Self {
        self.stream = name.into();
        self
    }

    /// Copies of every stream and bucket (1 to 5; default 1). Use 3 on a
    /// JetStream cluster.
    #[must_use]
    pub fn replicas(mut self, replicas: usize) -> Self {
        self.replicas = replicas;
        self
    }

    /// The stream's duplicate window (default 2 minutes, the server's): a
    /// publish with the same `Nats-Msg-Id` within it is recognised by the
    /// server. Past it, the accepted-key record (`<S>_KEYS`) answers.
    #[must_use]
    pub fn duplicate_window(mut self, window: Duration) -> Self {
        self.duplicate_window = window;
        self
    }

    /// How long accepted keys and completions are kept (default 7 days,
    /// [`DEFAULT_RETENTION`](super::super::DEFAULT_RETENTION)): keep it above the
    /// senders' retry window.
    #[must_use]
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// The consumer's `ack_wait` when it is created (default 30 s). A lease
    /// asked for with another duration updates it, for every worker.
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How long connecting may take (default 5 s).
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one operation may take (default 5 s): past it, the
    /// operation fails with [`InboxError::Timeout`] (`503` at accept).
    #[must_use]
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Connects, and creates the streams, buckets and consumer or checks
    /// them (an existing stream keeps its settings).
    ///
    /// # Errors
    ///
    /// [`OpenError::Config`] for an invalid name or replica count;
    /// [`OpenError::Store`] when the server cannot be reached or refuses.
    pub async fn connect(self) -> Result<JetStreamInbox, OpenError> {
        let name = self.stream.clone();
        if name.is_empty()
            || name.len() > 32
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(ConfigError::Invalid {
                what: "JetStream inbox",
                reason: "the stream name is 1 to 32 of A-Z, a-z, 0-9, `_` and `-`",
            }
            .into());
        }
        if !(1..=5).contains(&self.replicas) {
            return Err(ConfigError::Invalid {
                what: "JetStream inbox",
                reason: "replicas is 1 to 5",
            }
            .into());
        }
        // One server, or several separated by commas (the servers of a
        // cluster: the client connects to one of them, and moves to another
        // when it fails).
        let servers = self
            .url
            .split(',')
            .map(|server| server.trim().parse::<async_nats::ServerAddr>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| ConfigError::Invalid {
                what: "JetStream inbox",
                reason: "a server is nats://host:port (several separated by commas)",
            })?;
        let client = async_nats::ConnectOptions::new()
            .connection_timeout(self.connect_timeout)
            .request_timeout(Some(self.command_timeout))
            .connect(servers.as_slice())
            .await
            .map_err(InboxError::unavailable)?;
        let context = jetstream::new(client);
        let timeout = self.command_timeout;
        let setup = async {
            let main = get_or_create(
                &context,
                stream::Config {
                    name: name.clone(),
                    subjects: vec![format!("{name}.in.>")],
                    retention: stream::RetentionPolicy::WorkQueue,
                    storage: stream::StorageType::File,
                    num_replicas: self.replicas,
                    duplicate_window: self.duplicate_window,
                    ..stream::Config::default()
                },
            )
            .await?;
            let per_key = |suffix: &str, max_age: Duration| stream::Config {
                name: format!("{name}_{suffix}"),
                subjects: vec![format!("{name}_{suffix}.>")],
                storage: stream::StorageType::File,
                num_replicas: self.replicas,
                max_messages_per_subject: 1,
                max_age,
                ..stream::Config::default()
            };
            let dead = get_or_create(&context, per_key("DEAD", Duration::ZERO)).await?;
            let done = get_or_create(&context, per_key("DONE", self.retention)).await?;
            let activity = get_or_create(
                &context,
                stream::Config {
                    max_messages_per_subject: 0,
                    ..per_key("ACT", super::super::activity::ACTIVITY_RETENTION)
                },
            )
            .await?;
            let keys = get_or_create(&context, per_key("KEYS", self.retention)).await?;
            let control = get_or_create(&context, per_key("CTL", Duration::ZERO)).await?;
            let consumer_config = consumer::pull::Config {
                durable_name: Some(CONSUMER.to_owned()),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: self.lease,
                max_deliver: -1,
                max_ack_pending: 10_000,
                ..consumer::pull::Config::default()
            };
            let consumer = main
                .get_or_create_consumer(CONSUMER, consumer_config.clone())
                .await
                .map_err(InboxError::unavailable)?;
            let ack_wait = consumer.cached_info().config.ack_wait;
            Ok::<_, InboxError>((
                main,
                dead,
                done,
                activity,
                keys,
                control,
                consumer,
                consumer_config,
                ack_wait,
            ))
        };
        let (main, dead, done, activity, keys, control, consumer, consumer_config, ack_wait) =
            tokio::time::timeout(timeout.saturating_mul(4), setup)
                .await
                .map_err(|_| InboxError::Timeout)??;
        Ok(JetStreamInbox {
            shared: Arc::new(Shared {
                context,
                name,
                main,
                dead,
                done,
                activity,
                keys,
                control,
                consumer: Mutex::new(consumer),
                consumer_config,
                ack_wait_ms: AtomicU64::new(ms_u64(ack_wait)),
                held: Mutex::new(HashMap::new()),
                timeout,
            }),
        })
    }
}

async fn get_or_create(
    context: &Context,
    config: stream::Config,
) -> Result<stream::Stream, InboxError> {
    let name = config.name.clone();
    context
        .get_or_create_stream(config)
        .await
        .map_err(InboxError::unavailable)?;
    context
        .get_stream(name)
        .await
        .map_err(InboxError::unavailable)
}

impl JetStreamInbox {
    /// A builder for the server at `url` (`nats://host:port`, `tls://…`;
    /// credentials as `nats://user:password@host` or `nats://token@host`),
    /// or for the servers of a cluster, separated by commas
    /// (`nats://a:4222,nats://b:4222,nats://c:4222`): the client connects to
    /// one that answers, and reconnects to another when it fails.
    #[must_use]
    pub fn builder(url: &str) -> JetStreamInboxBuilder {
        JetStreamInboxBuilder {
            url: url.to_owned(),
            stream: "WEBHOOKS".to_owned(),
            replicas: 1,
            duplicate_window: Duration::from_secs(120),
            retention: super::super::DEFAULT_RETENTION,
            lease: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(5),
        }
    }

    /// A builder from an inbox URL: `nats://host:port[/STREAM][?replicas=3&duplicate_window=1h]`
    /// (the library's `retention` already taken out by [`inbox_from_url`](super::super::inbox_from_url)).
    /// A cluster's servers are separated by commas, each with or without
    /// its scheme (`nats://a:4222,b:4222,nats://c:4222/STREAM`); the stream
    /// follows the last one.
    pub(crate) fn builder_from_url(url: &str) -> Result<JetStreamInboxBuilder, ConfigError> {
        const WHAT: &str = "inbox URL";
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let (scheme, rest) = base.split_once("://").ok_or(ConfigError::Invalid {
            what: WHAT,
            reason: "a NATS inbox URL is nats://host:port[/STREAM]",
        })?;
        let scheme = if scheme.eq_ignore_ascii_case("jetstream") {
            "nats"
        } else {
            scheme
        };
        let parts: Vec<&str> = rest.split(',').collect();
        let mut servers = Vec::with_capacity(parts.len());
        let mut path = "";
        for (n, part) in parts.iter().enumerate() {
            // A repeated scheme (`nats://a,nats://b`): each server is the
            // first's kind.
            let part = part.trim();
            let part = part.split_once("://").map_or(part, |(_, rest)| rest);
            let (authority, after) = part.split_once('/').unwrap_or((part, ""));
            if authority.is_empty() || (n + 1 < parts.len() && !after.is_empty()) {
                return Err(ConfigError::Invalid {
                    what: WHAT,
                    reason: "a NATS inbox URL is nats://host:port[,host:port…][/STREAM]",
                });
            }
            servers.push(format!("{scheme}://{authority}"));
            path = after;
        }
        let mut builder = Self::builder(&servers.join(","));
        if !path.is_empty() {
            builder = builder.stream(path.trim_end_matches('/'));
        }
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            match name {
                "replicas" => {
                    builder.replicas = value.parse().map_err(|_| ConfigError::Invalid {
                        what: WHAT,
                        reason: "`replicas` is a number from 1 to 5",
                    })?;
                }
                "duplicate_window" => {
                    builder.duplicate_window = super::super::purge::parse_retention(value)
                        .flatten()
                        .ok_or(ConfigError::Invalid {
                            what: WHAT,
                            reason: "`duplicate_window` is a number with a unit (s, m, h, d)",
                        })?;
                }
                _ => {
                    return Err(ConfigError::Invalid {
                        what: WHAT,
                        reason: "a NATS inbox URL takes `replicas`, `duplicate_window` and `retention`",
                    });
                }
            }
        }
        Ok(builder)
    }
}
