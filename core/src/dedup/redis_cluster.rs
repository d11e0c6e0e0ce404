//! The Redis Cluster [`DedupStore`].

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::Script;
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};

use super::redis::{
    Scripts, claim_answer, eval_cmd, grace, millis, run_script, store_error, transition,
};
use super::url::OpenError;
use super::{Claim, ClaimToken, DedupStore, RedisStore, StoreError, Transition};
use crate::ConfigError;

/// A [`DedupStore`] on a Redis Cluster (or a cluster-mode managed Redis or
/// Valkey), shared by every instance that uses the same cluster and key
/// prefix.
///
/// Keys, values and scripts are [`RedisStore`]'s: each delivery is one string
/// key, `prefix + pipeline key`, and every operation is one Lua script that
/// declares that key as its only `KEYS[1]` (this store runs the claim script
/// for every claim; the single-server store's plain-`SET` fast path for a
/// fresh key is not used here, and the values it writes read the same). The cluster client sends each
/// script to the primary that owns the key's slot, so the keys (and the load)
/// spread over the cluster's primaries, and every operation stays atomic on
/// its key. The guarantees are the single server's: one claim wins, a
/// completed key answers completed for its retention, only the holder's token
/// completes, releases or extends. (Do not put a hash tag, `{…}`, in the
/// prefix: every key would land in one slot, on one primary.)
///
/// The client learns the cluster's layout from the nodes it is given (one is
/// enough, more survive that one being down), follows `MOVED` and `ASK`
/// redirections and refreshes its slot map when a node fails or slots move.
///
/// **Failover and durability.** A cluster replicates asynchronously: a
/// primary acknowledges a write before its replica has it. When a primary
/// fails, its replica takes over after `cluster-node-timeout` plus an
/// election (a few seconds); meanwhile operations on that primary's slots
/// fail or time out (the pipeline answers 503 and the sender retries), and
/// a write the old primary acknowledged just before it failed can be lost:
/// a lost claim lets a second attempt run concurrently, a lost completion
/// lets a later retry of the delivery run again.
/// [`wait_for_replicas`](RedisClusterStoreBuilder::wait_for_replicas) closes
/// most of that window: each claim, completion and extension goes to the
/// key's primary in one pipeline with a `WAIT` (so that the count is the one
/// of the connection that wrote), and the store reports the operation as failed
/// (a 503 for a claim, a retried completion) unless that many replicas
/// acknowledged it. `WAIT` does not make Redis strongly consistent (a
/// replica that acknowledged may still lose an election to one that did
/// not, if there are several), and it costs a round trip to the replica per
/// write. A primary without a replica (after a failover, until the old
/// primary is back as its replica) then fails every write to its slots:
/// run more replicas per primary where that matters.
///
/// **Eviction** and **timeouts** are as for [`RedisStore`]: run every node with
/// `maxmemory-policy noeviction`; `connect_timeout` bounds each connection
/// attempt to a node, `command_timeout` every operation (redirections,
/// reconnections and retries included).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use webhooks_core::dedup::RedisClusterStore;
///
/// let store = RedisClusterStore::builder([
///     "redis://10.0.0.1:6379",
///     "redis://10.0.0.2:6379",
///     "redis://10.0.0.3:6379",
/// ])
/// .key_prefix("billing:dedup:")
/// .wait_for_replicas(1, Duration::from_millis(100))
/// .connect()
/// .await?;
/// # let _ = store; Ok(()) }
/// ```
///
/// Or from a URL, as [`store_from_url`](super::store_from_url) opens it:
/// `redis-cluster://[user:password@]host:port[,host:port…][?node=host:port…]`
/// (`rediss-cluster://` for TLS, with the `redis-tls` feature).
#[derive(Clone)]
pub struct RedisClusterStore {
    connection: ClusterConnection,
    prefix: Arc<str>,
    command_timeout: Duration,
    wait: Option<WaitForReplicas>,
    scripts: Arc<Scripts>,
}

/// `WAIT replicas timeout` after each write.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WaitForReplicas {
    pub(crate) replicas: u32,
    pub(crate) timeout: Duration,
}

/// Why [`write_then_wait`] has no answer.
#[derive(Debug)]
pub(crate) enum WaitError {
    /// An error from Redis or the connection (a redirection, a
    /// reconnection, a node that failed between the write and its `WAIT`).
    Redis(redis::RedisError),
    /// No answer within the timeout.
    Timeout,
}

impl From<redis::RedisError> for WaitError {
    fn from(error: redis::RedisError) -> Self {
        Self::Redis(error)
    }
}

/// Runs `cmd` (an `EVALSHA` of `script` on keys of `slot_key`'s slot) and
/// `WAIT replicas timeout` as **one pipeline on one connection**, to the
/// primary that owns the slot, and answers the script's reply with the
/// replica count that `WAIT` reported.
///
/// Why one pipeline: `WAIT` counts the replicas that acknowledged the
/// replication offset of *its own connection's* last write. Sent apart, a
/// `WAIT` the cluster client retries (after the node died, a reconnection,
/// a redirection) runs on another connection — the promoted replica's, or
/// any primary the client falls back to — whose count says nothing about
/// the write: the write could be answered as replicated while the replica
/// never had it (issue 35). In one pipeline the two replies come from the
/// same connection in order; a retry re-sends both (the scripts are
/// idempotent), and a reply with a redirection for the script is retried by
/// the client, never answered. The script must write on every path whose
/// answer is acknowledged (the accept script counts a duplicate), so that
/// the connection's offset covers the data the answer vouches for.
///
/// A node without the script (`NOSCRIPT`, after a failover) gets it loaded
/// and the pipeline sent again, once.
pub(crate) async fn write_then_wait(
    connection: &ClusterConnection,
    script: &Script,
    cmd: redis::Cmd,
    slot_key: &[u8],
    wait: WaitForReplicas,
    command_timeout: Duration,
) -> Result<(redis::Value, u32), WaitError> {
    let route = SingleNodeRoutingInfo::SpecificNode(Route::with_key(slot_key, SlotAddr::Master));
    let mut pipeline = redis::pipe();
    pipeline
        .add_command(cmd)
        .cmd("WAIT")
        .arg(wait.replicas)
        .arg(millis(wait.timeout));
    let mut connection = connection.clone();
    let run = async {
        let mut loaded = false;
        loop {
            let replies = connection
                .route_pipeline(pipeline.clone(), 0, 2, route.clone())
                .await?;
            let mut replies = replies.into_iter();
            let (Some(reply), Some(waited), None) =
                (replies.next(), replies.next(), replies.next())
            else {
                return Err(WaitError::Redis(redis::RedisError::from((
                    redis::ErrorKind::Client,
                    "a pipeline of two commands answered another number of replies",
                ))));
            };
            match reply {
                redis::Value::ServerError(error)
                    if !loaded && error.kind() == Some(redis::ServerErrorKind::NoScript) =>
                {
                    script.load_async(&mut connection).await?;
                    loaded = true;
                }
                reply => {
                    let reply = reply.extract_error()?;
                    let acknowledged =
                        redis::from_redis_value::<u32>(waited).map_err(redis::RedisError::from)?;
                    return Ok((reply, acknowledged));
                }
            }
        }
    };
    match tokio::time::timeout(command_timeout + wait.timeout, run).await {
        Ok(result) => result,
        Err(_) => Err(WaitError::Timeout),
    }
}

impl fmt::Debug for RedisClusterStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisClusterStore")
            .field("prefix", &self.prefix)
            .field("command_timeout", &self.command_timeout)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

/// Builds a [`RedisClusterStore`]; see [`RedisClusterStore::builder`].
#[derive(Clone)]
#[must_use]
pub struct RedisClusterStoreBuilder {
    nodes: Vec<String>,
    prefix: String,
    connect_timeout: Duration,
    command_timeout: Duration,
    wait: Option<WaitForReplicas>,
    address_map: Vec<(String, String)>,
}

impl fmt::Debug for RedisClusterStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The node URLs may hold a password: never printed.
        f.debug_struct("RedisClusterStoreBuilder")
            .field("nodes", &self.nodes.len())
            .field("prefix", &self.prefix)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl RedisClusterStoreBuilder {
    /// The prefix put before every pipeline key (default
    /// [`RedisStore::DEFAULT_PREFIX`]). No hash tag (`{…}`) in it: the keys
    /// must spread over the slots.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long one connection attempt to a node may take (default
    /// [`RedisStore::DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one store operation may take, redirections and retries
    /// included (default [`RedisStore::DEFAULT_COMMAND_TIMEOUT`]). With
    /// [`wait_for_replicas`](Self::wait_for_replicas), the `WAIT` has its
    /// own timeout on top.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// After each claim, completion and extension, waits (Redis' `WAIT`, on
    /// the key's primary) until `replicas` replicas have the write, for at
    /// most `timeout`; fewer makes the operation fail as
    /// [`StoreError::Unavailable`] (a claim is then released again, best
    /// effort). Off by default. `replicas` 0 turns it off.
    ///
    /// `WAIT` holds the connection it is sent on (one per node, shared by
    /// every operation of this store) until it returns: the store's writes
    /// to one primary then go one replica round trip at a time.
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.wait = (replicas > 0).then_some(WaitForReplicas { replicas, timeout });
        self
    }

    /// Connects to `to` (`host:port`) wherever the cluster announces node
    /// `from` (`host:port`, as `CLUSTER SLOTS` lists it): for nodes that
    /// announce addresses the application cannot reach (behind NAT, in
    /// containers, through a proxy). Redirections still name `from`.
    pub fn map_node_address(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.address_map.push((from.into(), to.into()));
        self
    }

    /// Connects, learning the cluster's layout from the first node that
    /// answers.
    ///
    /// # Errors
    ///
    /// [`OpenError::Config`] for node URLs redis-rs does not accept (or
    /// none), a key prefix with a brace, or an address map entry that is
    /// not `host:port`;
    /// [`OpenError::Store`] when no node can be reached in time.
    pub async fn connect(self) -> Result<RedisClusterStore, OpenError> {
        if self.prefix.contains(['{', '}']) {
            return Err(ConfigError::Invalid {
                what: "redis cluster key prefix",
                reason: "has a brace: a hash tag would put every key in one slot",
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
        let store = RedisClusterStore {
            connection,
            prefix: Arc::from(self.prefix),
            command_timeout: self.command_timeout,
            wait: self.wait,
            scripts: Arc::new(Scripts::new()),
        };
        store.warn_unless_noeviction().await;
        Ok(store)
    }
}

/// A connection to the cluster `nodes` (seed node URLs) belong to, as the
/// cluster store and the cluster inbox open it: `connect_timeout` per
/// connection attempt (and for the whole opening), `command_timeout` per
/// request, redirections and retries included; `address_map` as
/// [`RedisClusterStoreBuilder::map_node_address`].
pub(crate) async fn cluster_connection(
    nodes: &[String],
    connect_timeout: Duration,
    command_timeout: Duration,
    address_map: &[(String, String)],
) -> Result<ClusterConnection, OpenError> {
    if nodes.is_empty() {
        return Err(ConfigError::Invalid {
            what: "redis cluster nodes",
            reason: "none given",
        }
        .into());
    }
    #[cfg(feature = "redis-tls")]
    crate::tls::use_ring();
    let mut builder = ClusterClientBuilder::new(nodes.iter().map(String::as_str))
        .connection_timeout(connect_timeout)
        .response_timeout(command_timeout)
        // A request is retried (after a redirection, a reconnection, a
        // slot map refresh) while the command timeout lets it.
        .retries(8)
        .min_retry_wait(10)
        .max_retry_wait(200);
    if !address_map.is_empty() {
        let mut map = HashMap::new();
        for (from, to) in address_map {
            map.insert(node_address(from)?, node_address(to)?);
        }
        builder = builder.node_address_map(map);
    }
    let client: ClusterClient = builder.build().map_err(|_| ConfigError::Invalid {
        what: "redis cluster node URL",
        reason: "not a URL redis-rs accepts (redis://[user:password@]host[:port], \
                 the same user and password on every node; rediss:// needs the \
                 `redis-tls` feature)",
    })?;
    match tokio::time::timeout(connect_timeout, client.get_async_connection()).await {
        Ok(connection) => Ok(connection.map_err(store_error)?),
        Err(_) => Err(StoreError::Timeout.into()),
    }
}

/// `host:port` as redis-rs' node address.
fn node_address(host_port: &str) -> Result<redis::cluster::NodeAddress, ConfigError> {
    let invalid = ConfigError::Invalid {
        what: "redis cluster node address",
        reason: "not host:port",
    };
    let (host, port) = host_port.rsplit_once(':').ok_or(invalid.clone())?;
    let port = port.parse::<u16>().map_err(|_| invalid.clone())?;
    if host.is_empty() {
        return Err(invalid);
    }
    Ok(redis::cluster::NodeAddress::new(host, port))
}

impl RedisClusterStore {
    /// A builder for a store on the cluster that `nodes` belong to, each a
    /// node URL `redis://[user:password@]host[:port]` (`rediss://` with the
    /// `redis-tls` feature). One node is enough to find the others; give
    /// more so that opening survives one being down.
    pub fn builder<I, S>(nodes: I) -> RedisClusterStoreBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        RedisClusterStoreBuilder {
            nodes: nodes.into_iter().map(Into::into).collect(),
            prefix: RedisStore::DEFAULT_PREFIX.to_owned(),
            connect_timeout: RedisStore::DEFAULT_CONNECT_TIMEOUT,
            command_timeout: RedisStore::DEFAULT_COMMAND_TIMEOUT,
            wait: None,
            address_map: Vec::new(),
        }
    }

    /// A builder for the cluster named by a `redis-cluster://` URL:
    ///
    /// ```text
    /// redis-cluster://[user:password@]host:port[,host:port…][/0][?node=host:port[&node=host:port…]]
    /// rediss-cluster://…   (TLS, with the `redis-tls` feature)
    /// ```
    ///
    /// Every node listed (before the path, comma-separated, and in `node=`
    /// parameters, the form the `fred` client reads) is a seed; the user and
    /// password apply to all of them. A cluster has only database 0.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] for another scheme, no node, a node without
    /// a port, a database other than 0 or an unknown parameter. The error
    /// never contains the URL.
    pub fn builder_from_url(url: &str) -> Result<RedisClusterStoreBuilder, ConfigError> {
        Ok(Self::builder(cluster_nodes(url)?))
    }

    /// Connects to the cluster named by a `redis-cluster://` URL (see
    /// [`builder_from_url`](Self::builder_from_url)) with the defaults.
    ///
    /// # Errors
    ///
    /// As [`builder_from_url`](Self::builder_from_url) and
    /// [`RedisClusterStoreBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self, OpenError> {
        Self::builder_from_url(url)?.connect().await
    }

    /// The key prefix.
    #[must_use]
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// The cluster connection.
    #[must_use]
    pub fn connection(&self) -> &ClusterConnection {
        &self.connection
    }

    /// Logs a warning when a primary may evict keys (asks one primary; the
    /// nodes of a cluster are normally configured alike). Silent when
    /// `CONFIG` is not allowed.
    async fn warn_unless_noeviction(&self) {
        let mut connection = self.connection.clone();
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("GET").arg("maxmemory-policy");
        let reply = tokio::time::timeout(
            self.command_timeout,
            connection.route_command(
                cmd,
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary),
            ),
        )
        .await;
        match reply
            .map(|r| r.and_then(|v| Ok(redis::from_redis_value::<HashMap<String, String>>(v)?)))
        {
            Ok(Ok(config)) => match config.get("maxmemory-policy").map(String::as_str) {
                Some("noeviction") | None => {}
                Some(policy) => tracing::warn!(
                    policy,
                    "the Redis Cluster may evict dedup keys (maxmemory-policy is not noeviction): \
                     an evicted key lets a delivery run twice"
                ),
            },
            Ok(Err(error)) => {
                tracing::debug!(error = %error, "could not read maxmemory-policy");
            }
            Err(_) => tracing::debug!("reading maxmemory-policy timed out"),
        }
    }

    async fn run<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        key: &str,
        token: ClaimToken,
        millis: &[u64],
    ) -> Result<T, StoreError> {
        let cmd = eval_cmd(script, &key_prefix(&self.prefix, key), key, token, millis);
        let mut connection = self.connection.clone();
        run_script(&mut connection, script, &cmd, self.command_timeout).await
    }

    /// `script` on `key`; with
    /// [`wait_for_replicas`](RedisClusterStoreBuilder::wait_for_replicas),
    /// in one pipeline with its `WAIT` ([`write_then_wait`]), answered with
    /// the replica count that `WAIT` reported (`None` without the wait).
    async fn run_waited<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        key: &str,
        token: ClaimToken,
        millis: &[u64],
    ) -> Result<(T, Option<u32>), StoreError> {
        let Some(wait) = self.wait else {
            return Ok((self.run(script, key, token, millis).await?, None));
        };
        let prefix = key_prefix(&self.prefix, key);
        let cmd = eval_cmd(script, &prefix, key, token, millis);
        let slot_key = format!("{prefix}{key}");
        let (reply, acknowledged) = write_then_wait(
            &self.connection,
            script,
            cmd,
            slot_key.as_bytes(),
            wait,
            self.command_timeout,
        )
        .await
        .map_err(|error| match error {
            WaitError::Redis(error) => store_error(error),
            WaitError::Timeout => StoreError::Timeout,
        })?;
        let reply = redis::from_redis_value(reply).map_err(|e| store_error(e.into()))?;
        Ok((reply, Some(acknowledged)))
    }

    /// An error unless `acknowledged` replicas are enough.
    fn replicated(&self, acknowledged: Option<u32>) -> Result<(), StoreError> {
        match (self.wait, acknowledged) {
            (Some(wait), Some(acknowledged)) if acknowledged < wait.replicas => {
                Err(StoreError::unavailable(NotReplicated {
                    acknowledged,
                    wanted: wait.replicas,
                }))
            }
            _ => Ok(()),
        }
    }

    /// A token script (with its wait for the replicas, when it applied).
    async fn token_script(
        &self,
        script: &Script,
        key: &str,
        token: ClaimToken,
        millis: &[u64],
    ) -> Result<Transition, StoreError> {
        let (answer, acknowledged) = self.run_waited(script, key, token, millis).await?;
        let answer = transition(answer);
        if answer == Transition::Applied {
            self.replicated(acknowledged)?;
        }
        Ok(answer)
    }
}

/// The prefix of `key`'s name in the cluster: `prefix`, or `{}` and
/// `prefix` for a key with a brace. Redis hashes only what is between a
/// name's first `{` and the next `}` when that is not empty: a delivery id
/// with `{…}` in it would choose its own slot (every such delivery on one
/// primary). A leading empty tag `{}` makes Redis hash the whole name.
/// Names of brace-free keys are unchanged, and none of them starts with
/// `{}` (the prefix has no brace), so no two keys share a name.
fn key_prefix<'a>(prefix: &'a str, key: &str) -> std::borrow::Cow<'a, str> {
    if key.contains(['{', '}']) {
        std::borrow::Cow::Owned(format!("{{}}{prefix}"))
    } else {
        std::borrow::Cow::Borrowed(prefix)
    }
}

/// Fewer replicas than asked for acknowledged a write in time.
#[derive(Debug, thiserror::Error)]
#[error("{acknowledged} of {wanted} replicas acknowledged the write in time")]
struct NotReplicated {
    acknowledged: u32,
    wanted: u32,
}

/// The seed node URLs of a `redis-cluster://` URL.
pub(crate) fn cluster_nodes(url: &str) -> Result<Vec<String>, ConfigError> {
    let invalid = |reason| ConfigError::Invalid {
        what: "redis cluster URL",
        reason,
    };
    let (scheme, rest) = url.split_once("://").ok_or(invalid(
        "not redis-cluster://[user:password@]host:port[,host:port…][?node=host:port…]",
    ))?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "redis-cluster" => "redis",
        "rediss-cluster" => "rediss",
        _ => {
            return Err(invalid(
                "the scheme is not redis-cluster:// or rediss-cluster://",
            ));
        }
    };
    let rest = rest.split_once('#').map_or(rest, |(rest, _)| rest);
    let (main, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = main.find('/').map_or((main, ""), |at| main.split_at(at));
    if !matches!(path, "" | "/" | "/0") {
        return Err(invalid("a cluster has only database 0"));
    }
    let (userinfo, hosts) = authority
        .rsplit_once('@')
        .map_or(("", authority), |(user, hosts)| (user, hosts));
    let mut seeds: Vec<&str> = hosts.split(',').filter(|h| !h.is_empty()).collect();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("node", node)) if !node.is_empty() => seeds.push(node),
            _ => return Err(invalid("unknown parameter (only node=host:port)")),
        }
    }
    if seeds.is_empty() {
        return Err(invalid("no node"));
    }
    seeds
        .into_iter()
        .map(|seed| {
            node_address(seed).map_err(|_| invalid("a node is not host:port"))?;
            Ok(if userinfo.is_empty() {
                format!("{scheme}://{seed}")
            } else {
                format!("{scheme}://{userinfo}@{seed}")
            })
        })
        .collect()
}

#[async_trait::async_trait]
impl DedupStore for RedisClusterStore {
    async fn claim(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        let (answer, acknowledged) = self
            .run_waited(&self.scripts.claim, key, token, &[millis(lease), grace()])
            .await?;
        let claim = claim_answer(answer)?;
        if claim == Claim::Claimed
            && let Err(error) = self.replicated(acknowledged)
        {
            // Not safely claimed: let the sender's retry claim again at
            // once rather than after the lease.
            let _ = self.release(key, token).await;
            return Err(error);
        }
        Ok(claim)
    }

    async fn complete(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
    ) -> Result<Transition, StoreError> {
        self.token_script(&self.scripts.complete, key, token, &[millis(retention)])
            .await
    }

    async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, StoreError> {
        let answer = self.run(&self.scripts.release, key, token, &[]).await?;
        Ok(transition(answer))
    }

    async fn extend(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Transition, StoreError> {
        self.token_script(&self.scripts.extend, key, token, &[millis(lease), grace()])
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(url: &str) -> &'static str {
        match cluster_nodes(url) {
            Err(ConfigError::Invalid { reason, .. }) => reason,
            other => panic!("{url}: expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn cluster_urls_list_their_seeds() {
        assert_eq!(
            cluster_nodes("redis-cluster://127.0.0.1:7000").unwrap(),
            ["redis://127.0.0.1:7000"]
        );
        assert_eq!(
            cluster_nodes("REDIS-CLUSTER://u:p%40ss@a:7000,b:7001/0?node=c:7002&node=d:7003")
                .unwrap(),
            [
                "redis://u:p%40ss@a:7000",
                "redis://u:p%40ss@b:7001",
                "redis://u:p%40ss@c:7002",
                "redis://u:p%40ss@d:7003",
            ]
        );
        assert_eq!(
            cluster_nodes("rediss-cluster://:secret@a:6380/").unwrap(),
            ["rediss://:secret@a:6380"]
        );
    }

    #[test]
    fn bad_cluster_urls_are_config_errors_without_the_url() {
        assert!(reason("redis://a:7000").contains("scheme"));
        assert!(reason("redis-cluster://").contains("no node"));
        assert!(reason("redis-cluster://a:7000/1").contains("database 0"));
        assert!(reason("redis-cluster://a:7000?prefix=x").contains("unknown parameter"));
        assert!(reason("redis-cluster://a").contains("host:port"));
        assert!(reason("redis-cluster://a:7000?node=b").contains("host:port"));
        assert!(reason("nothing").contains("redis-cluster://"));
        let error = cluster_nodes("redis-cluster://u:hunter2@a/5").unwrap_err();
        assert!(!error.to_string().contains("hunter2"), "{error}");
    }

    #[test]
    fn keys_with_braces_cannot_choose_their_slot() {
        assert_eq!(key_prefix("dedup:", "standard:msg_1"), "dedup:");
        assert_eq!(key_prefix("dedup:", "standard:{x}"), "{}dedup:");
        assert_eq!(key_prefix("dedup:", "a}b"), "{}dedup:");
    }

    #[test]
    fn debug_never_prints_node_urls() {
        let builder = RedisClusterStore::builder(["redis://u:hunter2@a:7000"]);
        let debug = format!("{builder:?}");
        assert!(
            !debug.contains("hunter2") && debug.contains("nodes: 1"),
            "{debug}"
        );
    }

    #[tokio::test]
    async fn no_nodes_is_a_config_error() {
        let error = RedisClusterStore::builder(Vec::<String>::new())
            .connect()
            .await
            .unwrap_err();
        assert!(matches!(error, OpenError::Config(_)), "{error:?}");
    }
}
