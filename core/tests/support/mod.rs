//! Shared by webhooks-core's integration tests: where the test services are,
//! whether to skip or fail when one is down, unique names, and a TCP proxy
//! that can stall or cut a connection to a real server.
//!
//! Use it from a test file with `mod support;`.
//!
//! Service URLs come from the environment at run time:
//!
//! | variable | default |
//! |---|---|
//! | `WEBHOOKS_REDIS_URL` | `redis://127.0.0.1:6379` |
//! | `WEBHOOKS_REDIS_CLUSTER_URL` | `redis://127.0.0.1:7000` (a node of the cluster `.ci/redis-cluster` starts) |
//! | `WEBHOOKS_POSTGRES_URL` | `postgres://postgres@127.0.0.1:5432/test` |
//! | `WEBHOOKS_MYSQL_URL` | `mysql://root@127.0.0.1:3306/test` |
//! | `WEBHOOKS_NATS_URL` | `nats://127.0.0.1:4222` (JetStream enabled) |
//!
//! A service that does not accept a TCP connection makes the helper return
//! `None` (the test then skips, saying so on stderr), except under `CI=true`,
//! where it panics: CI must never pass by skipping.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test file uses a different part of this module"
)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Whether this run is CI's (`CI=true` or `CI=1`): an unreachable service
/// fails the test instead of skipping it.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// The Redis URL, if the server accepts connections.
pub async fn redis_url() -> Option<String> {
    service_url("Redis", "WEBHOOKS_REDIS_URL", "redis://127.0.0.1:6379").await
}

/// A node URL of the Redis Cluster (`.ci/redis-cluster start`), if it
/// accepts connections.
pub async fn redis_cluster_url() -> Option<String> {
    service_url(
        "Redis Cluster (start it with .ci/redis-cluster start)",
        "WEBHOOKS_REDIS_CLUSTER_URL",
        "redis://127.0.0.1:7000",
    )
    .await
}

/// The PostgreSQL URL, if the server accepts connections.
pub async fn postgres_url() -> Option<String> {
    service_url(
        "PostgreSQL",
        "WEBHOOKS_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    )
    .await
}

/// The MySQL / MariaDB URL, if the server accepts connections.
pub async fn mysql_url() -> Option<String> {
    service_url(
        "MySQL/MariaDB",
        "WEBHOOKS_MYSQL_URL",
        "mysql://root@127.0.0.1:3306/test",
    )
    .await
}

/// The NATS (JetStream) URL, if the server accepts connections.
pub async fn nats_url() -> Option<String> {
    service_url("NATS", "WEBHOOKS_NATS_URL", "nats://127.0.0.1:4222").await
}

/// The RabbitMQ URL, if the broker accepts connections.
pub async fn rabbitmq_url() -> Option<String> {
    service_url(
        "RabbitMQ",
        "WEBHOOKS_RABBITMQ_URL",
        "amqp://guest:guest@127.0.0.1:5672/%2f",
    )
    .await
}

/// `env`'s value (or `default`) if its host accepts a TCP connection within
/// two seconds. Otherwise: a panic under CI, else `None` after an `eprintln!`.
pub async fn service_url(service: &str, env: &str, default: &str) -> Option<String> {
    let url = std::env::var(env).unwrap_or_else(|_| default.to_owned());
    let Some(address) = authority(&url) else {
        panic!("{env} has no host:port: set it to a URL like {default}");
    };
    let reachable = matches!(
        tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(&address)).await,
        Ok(Ok(_))
    );
    if reachable {
        return Some(url);
    }
    let message = format!("{service} is not reachable at {address} (set {env} to point elsewhere)");
    assert!(!ci(), "{message}, and CI=true: failing instead of skipping");
    eprintln!("SKIPPED: {message}; set CI=true to fail instead");
    None
}

/// The `host:port` of `url` (no user, no password), with the scheme's
/// default port when it has none.
pub fn authority(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let (start, end) = authority_span(rest);
    let host_port = &rest[start..end];
    if host_port.is_empty() {
        return None;
    }
    if host_port
        .rsplit_once(':')
        .is_some_and(|(_, port)| port.parse::<u16>().is_ok())
    {
        return Some(host_port.to_owned());
    }
    let port = match scheme {
        "redis" | "rediss" => 6379,
        "postgres" | "postgresql" => 5432,
        "mysql" | "mariadb" => 3306,
        "amqp" => 5672,
        "amqps" => 5671,
        _ => return None,
    };
    Some(format!("{host_port}:{port}"))
}

/// `url` with its `host:port` replaced by `host_port` (user, password,
/// path and query kept).
pub fn with_authority(url: &str, host_port: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (start, end) = authority_span(rest);
    format!("{scheme}://{}{host_port}{}", &rest[..start], &rest[end..])
}

/// Byte range of `host[:port]` in the part of a URL after `://`.
fn authority_span(rest: &str) -> (usize, usize) {
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let start = rest[..end].rfind('@').map_or(0, |at| at + 1);
    (start, end)
}

/// A random 12-hex-digit suffix for table names and key prefixes, so that
/// parallel tests and runs never collide.
pub fn unique_suffix() -> String {
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).expect("OS randomness");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A TCP proxy to a real server, for fault injection: it forwards bytes both
/// ways until told to [`freeze`](Self::freeze) (connections stay open but
/// nothing passes: a hung server) or [`kill`](Self::kill) (connections are
/// cut and new ones refused: a dead server). Dropping it kills it.
pub struct FaultProxy {
    address: SocketAddr,
    frozen: Arc<AtomicBool>,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards to `upstream` (`host:port`).
    pub async fn start(upstream: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let address = listener.local_addr().expect("proxy address");
        let frozen = Arc::new(AtomicBool::new(false));
        let tasks: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let upstream = upstream.to_owned();
        let accept = {
            let frozen = Arc::clone(&frozen);
            let tasks = Arc::clone(&tasks);
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let Ok(server) = TcpStream::connect(&upstream).await else {
                        continue;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    let up = tokio::spawn(pump(client_read, server_write, Arc::clone(&frozen)));
                    let down = tokio::spawn(pump(server_read, client_write, Arc::clone(&frozen)));
                    tasks.lock().unwrap().extend([up, down]);
                }
            })
        };
        Self {
            address,
            frozen,
            tasks,
            accept,
        }
    }

    /// The proxy's `host:port`.
    pub fn authority(&self) -> String {
        self.address.to_string()
    }

    /// Stops forwarding: connections stay open, nothing passes.
    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }

    /// Forwards again.
    pub fn thaw(&self) {
        self.frozen.store(false, Ordering::SeqCst);
    }

    /// Cuts every connection and refuses new ones.
    pub fn kill(&self) {
        self.accept.abort();
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Every node of the Redis Cluster that the node at `authority` belongs
/// to, as `(host:port, flags)` from its `CLUSTER NODES` (sent as raw RESP:
/// the tests that use it need no Redis client).
pub async fn cluster_nodes(authority: &str) -> Vec<(String, String)> {
    let mut stream = TcpStream::connect(authority)
        .await
        .unwrap_or_else(|e| panic!("connect to the cluster node {authority}: {e}"));
    stream
        .write_all(b"*2\r\n$7\r\nCLUSTER\r\n$5\r\nNODES\r\n")
        .await
        .expect("send CLUSTER NODES");
    let mut reply = Vec::new();
    let mut buffer = [0u8; 4096];
    // `$<len>\r\n<text>\r\n`
    loop {
        let read = stream.read(&mut buffer).await.expect("read CLUSTER NODES");
        assert!(read > 0, "the node closed the connection");
        reply.extend_from_slice(&buffer[..read]);
        let text = String::from_utf8_lossy(&reply);
        let Some((header, body)) = text.split_once("\r\n") else {
            continue;
        };
        let length: usize = header
            .strip_prefix('$')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("CLUSTER NODES answered {header}"));
        if body.len() >= length {
            return body[..length]
                .lines()
                .filter_map(|line| {
                    let mut fields = line.split(' ');
                    let address = fields.nth(1)?;
                    let flags = fields.next()?;
                    let address = address.split('@').next()?;
                    Some((address.to_owned(), flags.to_owned()))
                })
                .collect();
        }
    }
}

/// A [`FaultProxy`] in front of every node of a Redis Cluster: a client
/// seeded with [`seed`](Self::seed) and told to reach each node through its
/// proxy ([`routes`](Self::routes)) only ever talks to the cluster through
/// them, so freezing or killing them all hangs or kills the whole cluster
/// for that client alone.
pub struct ClusterProxies {
    proxies: Vec<(String, FaultProxy)>,
}

impl ClusterProxies {
    /// A proxy per node of the cluster the node at `authority` belongs to.
    pub async fn start(authority: &str) -> Self {
        let mut proxies = Vec::new();
        for (node, _) in cluster_nodes(authority).await {
            let proxy = FaultProxy::start(&node).await;
            proxies.push((node, proxy));
        }
        Self { proxies }
    }

    /// A proxy's `host:port`, to seed the client with.
    pub fn seed(&self) -> String {
        self.proxies[0].1.authority()
    }

    /// `(node, its proxy)` for each node, for the client's address map.
    pub fn routes(&self) -> Vec<(String, String)> {
        self.proxies
            .iter()
            .map(|(node, proxy)| (node.clone(), proxy.authority()))
            .collect()
    }

    /// Freezes every proxy: connections stay open, nothing passes.
    pub fn freeze(&self) {
        self.proxies.iter().for_each(|(_, proxy)| proxy.freeze());
    }

    /// Thaws every proxy: they forward again (what was held passes).
    pub fn thaw(&self) {
        self.proxies.iter().for_each(|(_, proxy)| proxy.thaw());
    }

    /// Kills every proxy: connections are cut, new ones refused.
    pub fn kill(&self) {
        self.proxies.iter().for_each(|(_, proxy)| proxy.kill());
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    frozen: Arc<AtomicBool>,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        while frozen.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

/// The pid file `.ci/redis-cluster` keeps for its node on `port`
/// (`REDIS_CLUSTER_DIR`, default `/tmp/webhooks-redis-cluster`): the
/// failover tests kill only nodes that script manages.
pub fn cluster_pid_file(port: &str) -> std::path::PathBuf {
    let dir = std::env::var("REDIS_CLUSTER_DIR")
        .unwrap_or_else(|_| "/tmp/webhooks-redis-cluster".to_owned());
    std::path::PathBuf::from(dir).join(port).join("redis.pid")
}

/// `.ci/redis-cluster start` (a node that is down is started again and
/// rejoins): whether it succeeded.
pub fn restore_cluster() -> bool {
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.ci/redis-cluster");
    let status = std::process::Command::new(script).arg("start").status();
    matches!(status, Ok(s) if s.success())
}

/// Runs `rabbitmqctl` with `args`: its output, or why it failed.
pub fn rabbitmqctl(args: &[&str]) -> Result<String, String> {
    let output = std::process::Command::new("rabbitmqctl")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run rabbitmqctl: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "rabbitmqctl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// The test's own virtual host, deleted (with its queues) when dropped,
/// also when the test fails.
pub struct VirtualHost(pub String);

impl VirtualHost {
    /// A new virtual host, `guest` allowed everything in it.
    pub fn create() -> Result<Self, String> {
        let name = format!("webhooks_test_{}", unique_suffix());
        rabbitmqctl(&["add_vhost", &name])?;
        let host = Self(name);
        rabbitmqctl(&["set_permissions", "-p", &host.0, "guest", ".*", ".*", ".*"])?;
        Ok(host)
    }
}

impl Drop for VirtualHost {
    fn drop(&mut self) {
        if let Err(error) = rabbitmqctl(&["delete_vhost", &self.0]) {
            eprintln!("could not delete the virtual host: {error}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_are_found_and_replaced() {
        assert_eq!(
            authority("postgres://u:p@db:5433/x?sslmode=disable").as_deref(),
            Some("db:5433")
        );
        assert_eq!(
            authority("redis://127.0.0.1").as_deref(),
            Some("127.0.0.1:6379")
        );
        assert_eq!(
            with_authority("mysql://root:pw@127.0.0.1:3306/test", "127.0.0.1:1"),
            "mysql://root:pw@127.0.0.1:1/test"
        );
        assert_eq!(
            with_authority("redis://127.0.0.1:6379", "127.0.0.1:9"),
            "redis://127.0.0.1:9"
        );
    }
}
