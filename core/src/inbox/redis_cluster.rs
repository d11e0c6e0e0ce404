//! The Redis Cluster [`Inbox`](super::Inbox): [`RedisInbox`](super::RedisInbox)'s
//! scripts over hash-tagged partitions.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};

use super::redis::{
    Engine, Partition, accepted, inbox_error, inbox_over_engine, partition_of, warn_unless_durable,
};
use super::{Accepted, InboxError, NewEvent, OpenError, stored_key};
use crate::ConfigError;
use crate::dedup::redis_cluster::{
    WaitError, WaitForReplicas, cluster_connection, cluster_nodes, write_then_wait,
};

/// An [`Inbox`](super::Inbox) on a Redis Cluster (or a cluster-mode managed
/// Redis or Valkey), whose events spread over the cluster's primaries.
///
/// **Partitions.** The events are split into a fixed number of partitions
/// (default [`DEFAULT_PARTITIONS`](Self::DEFAULT_PARTITIONS)); partition
/// `n`'s keys are [`RedisInbox`](super::RedisInbox)'s — a hash per event,
/// pending, leased, dead and done sets — under the prefix
/// `{<key prefix>p<n>}:`, e.g. `{inbox:p3}:pending`, `{inbox:p3}:e:<key>`.
/// The braces are a hash tag: all of a partition's keys are in one slot,
/// so each script (the very scripts of the single-server inbox) runs
/// atomically on the primary that owns it, while the partitions' slots —
/// and with them the load — spread over the primaries. An event's
/// partition is a hash of its stored key (the first eight bytes of its
/// SHA-256, modulo the number of partitions): accept, complete, retry,
/// replay, discard and inspection go straight to its primary.
///
/// Operations over many events work partition by partition, each script
/// bounded: a lease visits the partitions from a round-robin start, each
/// asked for what the batch still lacks, until the batch is full (at most
/// one script per partition, so an idle poll costs one per partition; a
/// partition that fails is passed over, the lease failing only when it
/// leased nothing); a batch completion is one script per partition it
/// touches, side by side (atomic per partition, not across them); the
/// dead-letter listing asks
/// every partition for a page after the same cursor and merges them in
/// receipt order (each call examines at most
/// [`DEAD_LETTER_SCAN_BUDGET`](super::DEAD_LETTER_SCAN_BUDGET) entries per
/// partition); stats are summed; the purge goes partition after partition.
///
/// **Pause.** The pause flag ([`set_paused`](super::Inbox::set_paused)) is
/// a key in each partition's slot, `{<key prefix>p<n>}:paused`, all set or
/// deleted together: each partition's lease script reads its own copy
/// atomically (a key in one fixed slot could not be read by the scripts of
/// the other slots), so a lease costs no extra round trip and none leases
/// once `set_paused` has returned. Should setting them fail part way, the
/// inbox reports itself paused (any copy set) until `set_paused` is called
/// again.
///
/// **Gates.** Pauses by selector ([`set_gate_paused`](super::Inbox::set_gate_paused))
/// are kept the same way: each partition holds its copy of the paused
/// selectors (`{<key prefix>p<n>}:gates`), which its lease script reads,
/// setting the events they match aside in the partition
/// (`{<key prefix>p<n>}:parked`) until a resume moves them back. The gates
/// themselves and the permits of limits
/// ([`acquire_permit`](super::Inbox::acquire_permit)) live in the first
/// partition's slot (`{<key prefix>p0}:gate:<selector>`, `…:permits:<selector>`),
/// so that every process takes permits from the same place, one script
/// each.
///
/// Choose the number of partitions once: **it must not change while events
/// are stored**, or events would be looked for in the wrong partition. To
/// change it, open a second inbox with a new key prefix and the new count,
/// point the receivers at it, and keep workers on the old one until it is
/// drained (`stats()`: nothing pending or in flight), then drop it. More
/// partitions than primaries spread better (16 over 3 primaries: about 5
/// each; the slots of `{prefix p0}`… fall where their CRC16 puts them, so
/// the split is uneven for few partitions); each costs one script per idle
/// poll and per stats or listing call.
///
/// **Failover and durability.** A cluster replicates asynchronously: an
/// accept answered `2xx` can be lost if its primary fails before its
/// replica has it (unless
/// [`wait_for_replicas`](RedisClusterInboxBuilder::wait_for_replicas)), on
/// top of [`RedisInbox`](super::RedisInbox)'s fsync caveat (run every node with `appendonly yes`, `appendfsync always`,
/// `maxmemory-policy noeviction`; [`connect`](RedisClusterInboxBuilder::connect)
/// reads one primary's settings and warns otherwise). While a primary is
/// failing over, operations on its partitions fail or time out (accepts
/// answer `503`, the sender retries) and the other partitions keep working.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use webhooks_core::inbox::RedisClusterInbox;
///
/// let inbox = RedisClusterInbox::builder(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379"])
///     .key_prefix("orders:inbox:")
///     .partitions(32)
///     .connect()
///     .await?;
/// # let _ = inbox; Ok(()) }
/// ```
///
/// Or from a URL, as [`inbox_from_url`](super::inbox_from_url) opens it:
/// `redis-cluster://[user:password@]host:port[,host:port…][?partitions=16&prefix=inbox:]`.
#[derive(Clone)]
pub struct RedisClusterInbox {
    engine: Engine<ClusterConnection>,
    prefix: Arc<str>,
    wait: Option<WaitForReplicas>,
}

/// Fewer replicas than asked for acknowledged an accept in time.
#[derive(Debug, thiserror::Error)]
#[error("{acknowledged} of {wanted} replicas acknowledged the accept in time")]
struct NotReplicated {
    acknowledged: u32,
    wanted: u32,
}

inbox_over_engine!(RedisClusterInbox);

impl fmt::Debug for RedisClusterInbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisClusterInbox")
            .field("prefix", &self.prefix)
            .field("partitions", &self.engine.partitions().len())
            .field("command_timeout", &self.engine.command_timeout())
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

/// Builds a [`RedisClusterInbox`]; see [`RedisClusterInbox::builder`].
///
/// **Retention** is as for [`RedisInboxBuilder`](super::RedisInboxBuilder):
/// start a [`PurgeTask`](super::PurgeTask), or open the inbox with
/// [`inbox_from_url`](super::inbox_from_url), which does.
#[derive(Clone)]
#[must_use]
pub struct RedisClusterInboxBuilder {
    nodes: Vec<String>,
    prefix: String,
    partitions: u16,
    connect_timeout: Duration,
    command_timeout: Duration,
    address_map: Vec<(String, String)>,
    wait: Option<WaitForReplicas>,
}

impl fmt::Debug for RedisClusterInboxBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The node URLs may hold a password: never printed.
        f.debug_struct("RedisClusterInboxBuilder")
            .field("nodes", &self.nodes.len())
            .field("prefix", &self.prefix)
            .field("partitions", &self.partitions)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl RedisClusterInboxBuilder {
    /// With each accept (a stored event or a duplicate), waits (Redis'
    /// `WAIT`, sent with the accept script in one pipeline to the event's
    /// primary, so that it counts the replicas of that very write) until
    /// `replicas` replicas have it, for at most `timeout`; fewer makes the accept fail
    /// as [`InboxError::Unavailable`] (the pipeline answers `503`, the
    /// sender retries: a duplicate once the event is replicated, stored
    /// again if the primary lost it). So a `2xx` is only answered for an
    /// event a replica has. Off by default; `replicas` 0 turns it off.
    /// Only accepts wait: a lost completion or retry lets the event run
    /// again (at least once), never lose it.
    ///
    /// `WAIT` holds the connection it is sent on (one per node, shared by
    /// every operation of this inbox) until it returns.
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.wait = (replicas > 0).then_some(WaitForReplicas { replicas, timeout });
        self
    }

    /// The prefix of every key, inside each partition's hash tag (default
    /// `inbox:`). No braces: it is part of the tag.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How many partitions (default
    /// [`DEFAULT_PARTITIONS`](RedisClusterInbox::DEFAULT_PARTITIONS), from 1
    /// to [`MAX_PARTITIONS`](RedisClusterInbox::MAX_PARTITIONS)). Never
    /// change it while events are stored (see [`RedisClusterInbox`]).
    pub fn partitions(mut self, partitions: u16) -> Self {
        self.partitions = partitions;
        self
    }

    /// How long one connection attempt to a node may take (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one script may take, redirections and retries included
    /// (default 2 s). An operation over every partition runs one script per
    /// partition, each with this timeout.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Connects to `to` (`host:port`) wherever the cluster announces node
    /// `from` (`host:port`): as
    /// [`RedisClusterStoreBuilder::map_node_address`](crate::dedup::RedisClusterStoreBuilder::map_node_address).
    pub fn map_node_address(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.address_map.push((from.into(), to.into()));
        self
    }

    /// Connects, learning the cluster's layout from the first node that
    /// answers, then warns (a `tracing` warning) unless a primary fsyncs
    /// every write and never evicts.
    ///
    /// # Errors
    ///
    /// [`OpenError::Config`] for node URLs redis-rs does not accept (or
    /// none), a key prefix with a brace, or a number of partitions out of
    /// range; [`OpenError::Store`] when no node can be reached in time.
    pub async fn connect(self) -> Result<RedisClusterInbox, OpenError> {
        if self.prefix.contains(['{', '}']) {
            return Err(ConfigError::Invalid {
                what: "redis cluster inbox key prefix",
                reason: "has a brace: the prefix goes inside each partition's hash tag",
            }
            .into());
        }
        if !(1..=RedisClusterInbox::MAX_PARTITIONS).contains(&self.partitions) {
            return Err(ConfigError::Invalid {
                what: "redis cluster inbox partitions",
                reason: "not between 1 and 1024",
            }
            .into());
        }
        let connection = cluster_connection(
            &self.nodes,
            self.connect_timeout,
            self.command_timeout,
            &self.address_map,
        )
        .await?;
        let partitions = (0..self.partitions)
            .map(|n| Partition::new(partition_prefix(&self.prefix, n)))
            .collect();
        let inbox = RedisClusterInbox {
            engine: Engine::new(connection, partitions, self.command_timeout),
            prefix: Arc::from(self.prefix.as_str()),
            wait: self.wait,
        };
        inbox.warn_unless_safe().await;
        Ok(inbox)
    }
}

/// Partition `n`'s key prefix: `{<prefix>p<n>}:`.
fn partition_prefix(prefix: &str, n: u16) -> String {
    format!("{{{prefix}p{n}}}:")
}

impl RedisClusterInbox {
    /// The number of partitions unless told otherwise.
    pub const DEFAULT_PARTITIONS: u16 = 16;

    /// The most partitions an inbox may have.
    pub const MAX_PARTITIONS: u16 = 1024;

    /// A builder for an inbox on the cluster that `nodes` belong to, each a
    /// node URL `redis://[user:password@]host[:port]` (`rediss://` with the
    /// `redis-tls` feature). One node is enough to find the others; give
    /// more so that opening survives one being down.
    pub fn builder<I, S>(nodes: I) -> RedisClusterInboxBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        RedisClusterInboxBuilder {
            nodes: nodes.into_iter().map(Into::into).collect(),
            prefix: "inbox:".to_owned(),
            partitions: Self::DEFAULT_PARTITIONS,
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(2),
            address_map: Vec::new(),
            wait: None,
        }
    }

    /// The engine's accept; with
    /// [`wait_for_replicas`](RedisClusterInboxBuilder::wait_for_replicas),
    /// the accept script and its `WAIT` in one pipeline on the event's
    /// primary ([`write_then_wait`]): a `2xx` only when the node that ran
    /// the script reported the replicas for it. Any error, redirection or
    /// retry in between is an error (`503`, the sender retries).
    async fn accept_event(&self, event: &NewEvent) -> Result<Accepted, InboxError> {
        let Some(wait) = self.wait else {
            return self.engine.accept(event).await;
        };
        let (cmd, script) = self.engine.accept_cmd(event);
        let partition = self.partition_prefix_of_stored(&event.stored_key());
        let (reply, acknowledged) = write_then_wait(
            self.engine.connection(),
            script,
            cmd,
            partition.as_bytes(),
            WaitForReplicas {
                replicas: wait.replicas,
                timeout: wait.timeout,
            },
            self.engine.command_timeout(),
        )
        .await
        .map_err(|error| match error {
            WaitError::Redis(error) => inbox_error(error),
            WaitError::Timeout => InboxError::Timeout,
        })?;
        let stored = redis::from_redis_value::<i64>(reply).map_err(|e| inbox_error(e.into()))?;
        if acknowledged < wait.replicas {
            return Err(InboxError::unavailable(NotReplicated {
                acknowledged,
                wanted: wait.replicas,
            }));
        }
        Ok(accepted(stored))
    }

    /// A builder for the cluster named by a `redis-cluster://` URL, as
    /// [`RedisClusterStore::builder_from_url`](crate::dedup::RedisClusterStore::builder_from_url)
    /// reads it (the library's `prefix`, `partitions` and `retention`
    /// parameters are [`inbox_from_url`](super::inbox_from_url)'s).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] for another scheme, no node, a node without
    /// a port, a database other than 0 or an unknown parameter. The error
    /// never contains the URL.
    pub fn builder_from_url(url: &str) -> Result<RedisClusterInboxBuilder, ConfigError> {
        Ok(Self::builder(cluster_nodes(url)?))
    }

    /// The key prefix.
    #[must_use]
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// The number of partitions.
    #[must_use]
    pub fn partitions(&self) -> usize {
        self.engine.partitions().len()
    }

    /// The key prefix of the partition that stores the event `key`
    /// (`{<key prefix>p<n>}:`): its hash is that prefix, `e:` and the
    /// stored key; its sets that prefix and `pending`, `leased`, `dead`,
    /// `done`.
    #[must_use]
    pub fn partition_prefix_of(&self, key: &str) -> &str {
        self.partition_prefix_of_stored(&stored_key(key))
    }

    fn partition_prefix_of_stored(&self, stored: &str) -> &str {
        self.engine.partitions()[partition_of(stored, self.partitions())].prefix()
    }

    /// Every partition's key prefix, in partition order.
    pub fn partition_prefixes(&self) -> impl Iterator<Item = &str> {
        self.engine.partitions().iter().map(Partition::prefix)
    }

    /// Warns unless a primary fsyncs every write and never evicts (asks one
    /// primary; a cluster's nodes are normally configured alike). Silent
    /// when `CONFIG` is not allowed.
    async fn warn_unless_safe(&self) {
        let mut connection = self.engine.connection().clone();
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("GET")
            .arg("appendonly")
            .arg("appendfsync")
            .arg("maxmemory-policy");
        let reply = tokio::time::timeout(
            self.engine.command_timeout(),
            connection.route_command(
                cmd,
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary),
            ),
        )
        .await;
        let config = match reply
            .map(|r| r.and_then(|v| Ok(redis::from_redis_value::<HashMap<String, String>>(v)?)))
        {
            Ok(Ok(config)) => config,
            _ => {
                tracing::debug!("could not read the Redis Cluster's settings");
                return;
            }
        };
        warn_unless_durable(
            config.get("appendonly").map(String::as_str),
            config.get("appendfsync").map(String::as_str),
        );
        match config.get("maxmemory-policy").map(String::as_str) {
            Some("noeviction") | None => {}
            Some(policy) => tracing::warn!(
                policy,
                "the Redis Cluster may evict inbox events (maxmemory-policy is not noeviction)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_prefixes_are_hash_tags() {
        assert_eq!(partition_prefix("inbox:", 3), "{inbox:p3}:");
    }

    #[test]
    fn debug_never_prints_node_urls() {
        let builder = RedisClusterInbox::builder(["redis://u:hunter2@a:7000"]);
        let debug = format!("{builder:?}");
        assert!(
            !debug.contains("hunter2") && debug.contains("nodes: 1"),
            "{debug}"
        );
    }

    #[tokio::test]
    async fn bad_settings_are_config_errors() {
        for builder in [
            RedisClusterInbox::builder(Vec::<String>::new()),
            RedisClusterInbox::builder(["redis://127.0.0.1:1"]).key_prefix("{x}"),
            RedisClusterInbox::builder(["redis://127.0.0.1:1"]).partitions(0),
            RedisClusterInbox::builder(["redis://127.0.0.1:1"]).partitions(1025),
        ] {
            let error = builder.connect().await.unwrap_err();
            assert!(matches!(error, OpenError::Config(_)), "{error:?}");
        }
    }
}
