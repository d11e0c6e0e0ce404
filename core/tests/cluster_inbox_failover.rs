//! Issue 35, item 0: a `RedisClusterInbox` with `wait_for_replicas(1, 500 ms)`
//! never loses a delivery it acknowledged, when primaries die — some while
//! their replica lags behind — and receiver processes are SIGKILLed.
//!
//! Two receiver processes (this test binary, run as children) take signed
//! deliveries over HTTP/1.1 into the cluster inbox, 32 in flight, each
//! retried by its sender until a `2xx`, as a provider does. Five times a
//! primary is SIGKILLed and its replica takes over; before every other kill
//! the replica is first cut off (`CLIENT KILL TYPE replica` on the primary,
//! whose ACL then denies `PSYNC`/`SYNC`: the link stays down) 0.5–1.5 s
//! before the kill. A receiver is SIGKILLed and started again in every
//! round. At the end, every delivery that was answered `2xx` must be in the
//! inbox.
//!
//! ```text
//! .ci/redis-cluster start
//! cargo test -p webhooks-core --features redis-cluster --test cluster_inbox_failover
//! ```
//!
//! `FAILOVER_DELIVERIES` (default 2,000), `FAILOVER_PACE_MS` (a new delivery
//! every 25 ms), `FAILOVER_KILLS` (default 5) and
//! `FAILOVER_WAIT=0` (no `wait_for_replicas`: the test then shows the loss
//! it exists to catch) change the run. It kills nodes of the cluster
//! `.ci/redis-cluster` manages only (found by their pid files; the test
//! skips otherwise, or fails under `CI=true`) and restores the cluster with
//! `.ci/redis-cluster start` after each round and at the end, also when the
//! test fails.

#[path = "support/chaos.rs"]
mod chaos;
mod support;

use std::collections::HashSet;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chaos::{ReceiverProcess, Receivers, Senders, env_number};
use webhooks_core::inbox::{
    DeliveryFilter, DeliveryOrder, DeliveryState, Inbox, RedisClusterInbox,
};

/// The replica wait the issue's setup uses.
const WAIT: Duration = Duration::from_millis(500);

/// Opens the inbox the receivers and the final check share, on the cluster
/// of `nodes` (`host:port`).
async fn open_inbox(nodes: &[String], prefix: &str, wait: bool) -> RedisClusterInbox {
    let mut builder = RedisClusterInbox::builder(nodes.iter().map(|n| format!("redis://{n}")))
        .key_prefix(prefix)
        .command_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(1));
    if wait {
        builder = builder.wait_for_replicas(1, WAIT);
    }
    let started = Instant::now();
    loop {
        match builder.clone().connect().await {
            Ok(inbox) => return inbox,
            Err(error) if started.elapsed() < Duration::from_secs(30) => {
                eprintln!("connecting to the cluster: {error}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("could not connect to the cluster: {error}"),
        }
    }
}

// ------------------------------------------------------------- the cluster

/// One node as `CLUSTER NODES` lists it.
#[derive(Debug, Clone)]
struct Node {
    id: String,
    address: String,
    primary: bool,
    failed: bool,
}

async fn admin(address: &str) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(format!("redis://{address}")).expect("node URL");
    tokio::time::timeout(
        Duration::from_secs(2),
        client.get_multiplexed_async_connection(),
    )
    .await
    .unwrap_or_else(|_| panic!("connecting to {address} timed out"))
    .unwrap_or_else(|e| panic!("connect to {address}: {e}"))
}

/// The cluster as the node at `address` sees it.
async fn nodes(address: &str) -> Vec<Node> {
    try_nodes(address)
        .await
        .unwrap_or_else(|| panic!("CLUSTER NODES on {address} failed"))
}

/// `CLUSTER NODES`' text as nodes.
fn parse_nodes(text: &str) -> Vec<Node> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let flags = *fields.get(2)?;
            Some(Node {
                id: fields.first()?.to_string(),
                address: fields.get(1)?.split('@').next()?.to_owned(),
                primary: flags.contains("master"),
                failed: flags.contains("fail"),
            })
        })
        .collect()
}

/// The cluster as the node at `address` sees it, if it answers.
async fn try_nodes(address: &str) -> Option<Vec<Node>> {
    let client = redis::Client::open(format!("redis://{address}")).ok()?;
    let mut connection = tokio::time::timeout(
        Duration::from_secs(1),
        client.get_multiplexed_async_connection(),
    )
    .await
    .ok()?
    .ok()?;
    let text: String = tokio::time::timeout(
        Duration::from_secs(1),
        redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async(&mut connection),
    )
    .await
    .ok()?
    .ok()?;
    Some(parse_nodes(&text))
}

/// The live primaries as the first live node of `seeds` sees them, sorted.
async fn live_primaries(seeds: &[String]) -> Vec<Node> {
    for seed in seeds {
        if let Some(nodes) = try_nodes(seed).await {
            let mut primaries: Vec<Node> = nodes
                .into_iter()
                .filter(|n| n.primary && !n.failed)
                .collect();
            primaries.sort_by(|a, b| a.address.cmp(&b.address));
            return primaries;
        }
    }
    panic!("no node of the cluster answers");
}

/// Cuts `primary`'s replica off and keeps it off: the primary's default
/// user may no longer `PSYNC`/`SYNC` (the replica's user here), then its
/// replication links are killed.
async fn make_replica_lag(primary: &Node) {
    let mut connection = admin(&primary.address).await;
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "default", "-psync", "-sync"][..])
        .query_async(&mut connection)
        .await
        .expect("ACL SETUSER");
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "replica"][..])
        .query_async(&mut connection)
        .await
        .expect("CLIENT KILL TYPE replica");
    eprintln!(
        "{}: {killed} replication link(s) cut, resync denied",
        primary.address
    );
}

/// Gives every node's default user back `PSYNC`/`SYNC` (best effort).
async fn allow_sync_everywhere(addresses: &[String]) {
    for address in addresses {
        let client = redis::Client::open(format!("redis://{address}")).expect("node URL");
        if let Ok(Ok(mut connection)) = tokio::time::timeout(
            Duration::from_secs(1),
            client.get_multiplexed_async_connection(),
        )
        .await
        {
            let _: Result<(), _> = redis::cmd("ACL")
                .arg(&["SETUSER", "default", "+psync", "+sync"][..])
                .query_async(&mut connection)
                .await;
        }
    }
}

fn kill_node(address: &str) {
    let port = address.rsplit_once(':').expect("host:port").1;
    let pid =
        std::fs::read_to_string(support::cluster_pid_file(port)).expect("the node's pid file");
    let status = Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -9 {} failed", pid.trim());
}

/// Restores the cluster (and every node's sync permission) when dropped,
/// even if the test panicked.
struct Restore(Vec<String>);

impl Drop for Restore {
    fn drop(&mut self) {
        if !support::restore_cluster() {
            eprintln!("could not restore the cluster: run .ci/redis-cluster start");
        }
        let addresses = self.0.clone();
        let _ = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(allow_sync_everywhere(&addresses));
        })
        .join();
    }
}

// ---------------------------------------------------------- the receivers

/// What a receiver process needs to open the inbox.
fn receiver_env(nodes: &[String], prefix: &str, wait: bool) -> [(&'static str, String); 3] {
    [
        ("FAILOVER_CHILD_NODES", nodes.join(",")),
        ("FAILOVER_CHILD_PREFIX", prefix.to_owned()),
        (
            "FAILOVER_CHILD_WAIT",
            if wait { "1" } else { "0" }.to_owned(),
        ),
    ]
}

/// The child side: a receiver on the cluster inbox. Ignored: only run by
/// `ReceiverProcess::start`.
#[test]
#[ignore = "run by the failover test as a receiver process"]
fn receiver_process() {
    chaos::receiver_child(|| async {
        let nodes: Vec<String> = std::env::var("FAILOVER_CHILD_NODES")
            .expect("nodes")
            .split(',')
            .map(str::to_owned)
            .collect();
        let prefix = std::env::var("FAILOVER_CHILD_PREFIX").expect("prefix");
        let wait = std::env::var("FAILOVER_CHILD_WAIT").is_ok_and(|v| v == "1");
        let inbox: Arc<dyn Inbox> = Arc::new(open_inbox(&nodes, &prefix, wait).await);
        inbox
    });
}

// ---------------------------------------------------------------- the test

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_deliveries_survive_failover_with_a_lagging_replica() {
    let Some(url) = support::redis_cluster_url().await else {
        return;
    };
    let seed = support::authority(&url).expect("a host:port cluster URL");
    let all = nodes(&seed).await;
    let addresses: Vec<String> = all.iter().map(|n| n.address.clone()).collect();
    assert_eq!(
        all.iter().filter(|n| n.primary && !n.failed).count(),
        3,
        "expected three live primaries: run .ci/redis-cluster start"
    );
    for node in &all {
        let port = node.address.rsplit_once(':').expect("host:port").1;
        if !support::cluster_pid_file(port).exists() {
            let message = format!(
                "{} is not a node .ci/redis-cluster manages: not killing it",
                node.address
            );
            assert!(!support::ci(), "{message}, and CI=true");
            eprintln!("SKIPPED: {message}");
            return;
        }
    }
    let _restore = Restore(addresses.clone());
    let deliveries = env_number("FAILOVER_DELIVERIES", 2_000);
    let kills = env_number("FAILOVER_KILLS", 5);
    let wait = std::env::var("FAILOVER_WAIT").map_or(true, |v| v != "0");
    let prefix = format!("failover-inbox:{}:", support::unique_suffix());

    let env = receiver_env(&addresses, &prefix, wait);
    let receivers: Receivers = Arc::new(Mutex::new(vec![
        ReceiverProcess::start(&env).await,
        ReceiverProcess::start(&env).await,
    ]));

    // The senders: each delivery until it is answered 2xx, as a provider
    // retries (here every 100 ms, from whichever receiver is up). Delivery
    // `n` is first sent `n` × the pace after the start, so that deliveries
    // keep arriving through every round of faults.
    let pace = Duration::from_millis(env_number("FAILOVER_PACE_MS", 25) as u64);
    let mut senders = Senders::start(&receivers, deliveries, pace, None);

    // The faults, while the senders run.
    let mut kills_at = Vec::new();
    for round in 0..kills {
        tokio::time::sleep(Duration::from_millis(700)).await;
        if senders.all_started() {
            eprintln!("all deliveries sent before round {round}");
            break;
        }
        let primaries = live_primaries(&addresses).await;
        let victim = primaries[round % primaries.len()].clone();
        let lagging = round % 2 == 0;
        if lagging {
            make_replica_lag(&victim).await;
            // 0.5–1.5 s of lag before the kill.
            let lag = 500 + (round as u64 * 397) % 1000;
            tokio::time::sleep(Duration::from_millis(lag)).await;
        }
        // A receiver dies too, and comes back.
        chaos::replace_receiver(&receivers, round % 2, &env).await;
        kill_node(&victim.address);
        let killed_at = Instant::now();
        kills_at.push((victim.address.clone(), killed_at, lagging));
        eprintln!(
            "round {round}: killed primary {} (replica lagging: {lagging})",
            victim.address
        );
        // Its replica takes over.
        loop {
            let survivors: Vec<String> = addresses
                .iter()
                .filter(|a| **a != victim.address)
                .cloned()
                .collect();
            let now = live_primaries(&survivors).await;
            if now.len() == 3 && now.iter().all(|p| p.id != victim.id) {
                eprintln!("  failover after {:?}", killed_at.elapsed());
                break;
            }
            assert!(
                killed_at.elapsed() < Duration::from_secs(30),
                "no replica took over {} within 30 s",
                victim.address
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // The old primary back, as a replica: until then its shard has no
        // replica and every accept there is answered 503, by design.
        let restored = tokio::task::spawn_blocking(support::restore_cluster)
            .await
            .unwrap();
        assert!(restored, "could not restore the cluster");
        allow_sync_everywhere(&addresses).await;
    }

    senders.finish().await;
    let outcome = &senders.outcome;
    let statuses = outcome.statuses.lock().unwrap().clone();
    eprintln!("answers by status (0: connection failed): {statuses:?}");

    // Every delivery answered 2xx is in the inbox (nothing runs it here: all
    // are pending).
    let inbox: Arc<dyn Inbox> = Arc::new(open_inbox(&addresses, &prefix, false).await);
    let mut stored = HashSet::new();
    let mut filter = DeliveryFilter::default();
    filter.state = DeliveryState::Due;
    filter.order = DeliveryOrder::OldestFirst;
    filter.limit = Some(500);
    for _ in 0..100_000 {
        let page = inbox.deliveries(&filter).await.expect("list the inbox");
        for item in page.items {
            if let Some(id) = item.meta.delivery_id {
                stored.insert(id);
            }
        }
        match page.next {
            Some(next) => filter.after = Some(next),
            None => break,
        }
    }
    let acknowledged = outcome.acknowledged.lock().unwrap().clone();
    let lost: Vec<(usize, String)> = acknowledged
        .iter()
        .filter(|(id, _)| !stored.contains(&chaos::message_id(**id)))
        .map(|(id, at)| {
            // The kill nearest to the acknowledgement, and how far from it.
            let near = kills_at
                .iter()
                .map(|(node, killed, lagging)| {
                    let (distance, sign) = if *at >= *killed {
                        (at.duration_since(*killed), "+")
                    } else {
                        (killed.duration_since(*at), "-")
                    };
                    let lag = if *lagging { " (lagging)" } else { "" };
                    (distance, format!("{node}{lag} {sign}{distance:?}"))
                })
                .min_by_key(|(distance, _)| *distance)
                .map(|(_, text)| text)
                .unwrap_or_default();
            (*id, near)
        })
        .collect();
    eprintln!(
        "{} deliveries, {} acknowledged, {} stored, {} acknowledged but lost",
        deliveries,
        acknowledged.len(),
        stored.len(),
        lost.len()
    );
    cleanup(&addresses, &prefix).await;
    assert_eq!(
        acknowledged.len(),
        deliveries,
        "every delivery acknowledged in the end"
    );
    assert!(
        lost.is_empty(),
        "{} deliveries answered 2xx are gone from the inbox: {:?}",
        lost.len(),
        lost.iter().take(10).collect::<Vec<_>>()
    );
}

/// Deletes the test's keys from every primary.
async fn cleanup(addresses: &[String], prefix: &str) {
    for primary in live_primaries(addresses).await {
        let mut connection = admin(&primary.address).await;
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{{{prefix}p*"))
            .query_async(&mut connection)
            .await
            .unwrap_or_default();
        for key in keys {
            let _: Result<(), _> = redis::cmd("DEL")
                .arg(key)
                .query_async(&mut connection)
                .await;
        }
    }
}
