//! Issue 37, "Done when": a `JetStreamInbox` on an R3 stream of a 3-node
//! JetStream cluster never loses a delivery it acknowledged, never publishes
//! a forgery, and a transactional handler commits each event's effect once,
//! while receiver processes are SIGKILLed and JetStream nodes are SIGKILLed
//! and restarted.
//!
//! Two receiver processes (this test binary, run as children) take signed
//! deliveries over HTTP/1.1 into the inbox (opened with `inbox_from_url` on
//! the cluster's three servers), 32 in flight, each retried by its sender
//! every 100 ms until a `2xx`, as a provider does; one delivery in 25 is
//! also sent forged (a bad signature), once. A worker in this process drains
//! the stream meanwhile, with a transactional handler: the effect of
//! delivery `n` is the file `applied/<n>`, created with `create_new` (it
//! exists or it does not: a redelivery finds it and commits nothing). In
//! every round a receiver is SIGKILLed and started again, and the node that
//! leads the stream (even rounds) or its accepted-key record `<S>_KEYS` (odd
//! rounds) is SIGKILLed, then restarted 2 s later.
//!
//! At the end: every delivery was answered 2xx; every one answered 2xx was
//! applied, once; no forged delivery was answered 2xx or reached the handler; nothing was
//! dead-lettered.
//!
//! ```text
//! .ci/nats-cluster start
//! cargo test -p webhooks-core --features nats --test nats_inbox_chaos -- --nocapture
//! .ci/nats-cluster stop
//! ```
//!
//! The cluster comes from `WEBHOOKS_NATS_CLUSTER_URL` (default
//! `nats://127.0.0.1:4231,nats://127.0.0.1:4232,nats://127.0.0.1:4233`). The
//! test kills only nodes `.ci/nats-cluster` manages (found by their pid files
//! under `NATS_CLUSTER_DIR`, default `/tmp/webhooks-nats-cluster`), and
//! restores the cluster with `.ci/nats-cluster start` after each kill and at
//! the end, also when the test fails. Without the cluster it skips, saying
//! so; under `CI=true` it fails (and so does an unset
//! `WEBHOOKS_NATS_CLUSTER_URL`, which `.ci/run` exports). `CHAOS_DELIVERIES` (default 2,000),
//! `CHAOS_PACE_MS` (a new delivery every 25 ms) and `CHAOS_KILLS` (default
//! 4) change the run.

#[path = "support/chaos.rs"]
mod chaos;
mod support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chaos::{ReceiverProcess, Receivers, Runs, Senders, env_number};
use tokio::net::TcpStream;
use webhooks_core::inbox::{Inbox, JetStreamInbox};

/// One delivery in this many is also sent forged.
const FORGE_EVERY: usize = 25;
const DEFAULT_URL: &str = "nats://127.0.0.1:4231,nats://127.0.0.1:4232,nats://127.0.0.1:4233";

// ------------------------------------------------------------- the cluster

fn cluster_dir() -> PathBuf {
    PathBuf::from(
        std::env::var("NATS_CLUSTER_DIR")
            .unwrap_or_else(|_| "/tmp/webhooks-nats-cluster".to_owned()),
    )
}

/// The pid file `.ci/nats-cluster` keeps for server `webhooks-n<i>`.
fn pid_file(server_name: &str) -> Option<PathBuf> {
    let node = server_name.strip_prefix("webhooks-n")?;
    Some(cluster_dir().join(format!("n{node}")).join("nats.pid"))
}

/// `.ci/nats-cluster start`: a node that is down is started again and
/// rejoins; waits for a meta leader with both peers current.
fn restore_cluster() -> bool {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.ci/nats-cluster");
    let status = Command::new(script)
        .arg("start")
        .stdout(Stdio::null())
        .status();
    matches!(status, Ok(s) if s.success())
}

/// Restores the cluster when dropped, even if the test panicked.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        if !restore_cluster() {
            eprintln!("could not restore the cluster: run .ci/nats-cluster start");
        }
    }
}

/// The cluster's URL if its servers accept connections and are nodes
/// `.ci/nats-cluster` manages; otherwise a skip (a failure under CI).
async fn cluster_url() -> Option<String> {
    // `.ci/run` exports it: under CI its absence is a broken setup, not a
    // reason to guess.
    assert!(
        !support::ci() || std::env::var_os("WEBHOOKS_NATS_CLUSTER_URL").is_some(),
        "WEBHOOKS_NATS_CLUSTER_URL is not set, and CI=true (.ci/run sets it after .ci/nats-cluster start)"
    );
    let url = std::env::var("WEBHOOKS_NATS_CLUSTER_URL").unwrap_or_else(|_| DEFAULT_URL.into());
    let skip = |message: String| {
        assert!(
            !support::ci(),
            "{message}, and CI=true: failing instead of skipping"
        );
        eprintln!("SKIPPED: {message}; set CI=true to fail instead");
    };
    for server in url.split(',') {
        let address = server.rsplit_once("://").map_or(server, |(_, a)| a);
        let reachable = matches!(
            tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(address)).await,
            Ok(Ok(_))
        );
        if !reachable {
            skip(format!(
                "the NATS cluster is not reachable at {address} (start it with \
                 .ci/nats-cluster start, or set WEBHOOKS_NATS_CLUSTER_URL)"
            ));
            return None;
        }
    }
    for node in 1..=3 {
        let pid = pid_file(&format!("webhooks-n{node}")).unwrap();
        if !pid.exists() {
            skip(format!(
                "{} does not exist: not a cluster .ci/nats-cluster manages, not killing its nodes",
                pid.display()
            ));
            return None;
        }
    }
    Some(url)
}

/// A plain client on the cluster, for the stream's placement.
async fn admin(url: &str) -> async_nats::jetstream::Context {
    let servers: Vec<async_nats::ServerAddr> = url.split(',').map(|s| s.parse().unwrap()).collect();
    let client = async_nats::ConnectOptions::new()
        .request_timeout(Some(Duration::from_secs(2)))
        .connect(servers.as_slice())
        .await
        .expect("connect to the cluster");
    async_nats::jetstream::new(client)
}

/// The stream's leader and whether every replica is current, if known now.
async fn placement(
    context: &async_nats::jetstream::Context,
    stream: &str,
) -> Option<(String, bool)> {
    let mut handle = tokio::time::timeout(Duration::from_secs(3), context.get_stream(stream))
        .await
        .ok()?
        .ok()?;
    let info = tokio::time::timeout(Duration::from_secs(3), handle.info())
        .await
        .ok()?
        .ok()?;
    let cluster = info.cluster.clone()?;
    let leader = cluster.leader.clone()?;
    let current = cluster.replicas.len() == 2 && cluster.replicas.iter().all(|r| r.current);
    Some((leader, current))
}

/// Waits until `stream` has a leader and both its replicas are current.
async fn wait_current(context: &async_nats::jetstream::Context, stream: &str) -> String {
    let started = Instant::now();
    loop {
        if let Some((leader, true)) = placement(context, stream).await {
            return leader;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{stream} has no leader with current replicas after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn kill_node(server_name: &str) {
    let file = pid_file(server_name)
        .unwrap_or_else(|| panic!("{server_name} is not a node .ci/nats-cluster manages"));
    let pid = std::fs::read_to_string(&file).expect("the node's pid file");
    let status = Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -9 {} failed", pid.trim());
}

// ---------------------------------------------------------- the receivers

/// What a receiver process needs: the inbox URL.
fn receiver_env(inbox_url: &str) -> [(&'static str, String); 1] {
    [(chaos::INBOX_URL, inbox_url.to_owned())]
}

/// The child side: a receiver on the inbox `inbox_from_url` opens.
/// Ignored: only run by `ReceiverProcess::start`.
#[test]
#[ignore = "run by the chaos test as a receiver process"]
fn receiver_process() {
    chaos::receiver_child(chaos::open_from_env);
}

// ---------------------------------------------------------------- the test

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_deliveries_survive_receiver_and_jetstream_node_kills() {
    let Some(url) = cluster_url().await else {
        return;
    };
    let _restore = Restore;
    let run_started = Instant::now();
    let deliveries = env_number("CHAOS_DELIVERIES", 2_000);
    let kills = env_number("CHAOS_KILLS", 4);
    let pace = Duration::from_millis(env_number("CHAOS_PACE_MS", 25) as u64);
    let stream = format!("CHAOS{}", support::unique_suffix());
    let inbox_url = format!("{url}/{stream}?replicas=3");
    let env = receiver_env(&inbox_url);

    // The streams, R3, created once here; the receivers find them.
    let inbox = JetStreamInbox::builder(&url)
        .stream(&stream)
        .replicas(3)
        .connect()
        .await
        .expect("create the R3 streams on the cluster");
    let admin = admin(&url).await;
    let keys_stream = format!("{stream}_KEYS");
    eprintln!(
        "stream {stream} led by {}",
        wait_current(&admin, &stream).await
    );

    // The worker, in this process, from the start.
    let effects = chaos::Effects::new();
    let runs = Arc::new(Runs::default());
    let shared: Arc<dyn Inbox> = Arc::new(inbox.clone());
    let working = chaos::Working::start(Arc::clone(&shared), &effects, &runs);

    let receivers: Receivers = Arc::new(Mutex::new(vec![
        ReceiverProcess::start(&env).await,
        ReceiverProcess::start(&env).await,
    ]));
    let mut senders = Senders::start(&receivers, deliveries, pace, Some(FORGE_EVERY));

    // The faults, while the senders run.
    let mut rounds = 0;
    for round in 0..kills {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        if senders.all_started() {
            eprintln!("all deliveries sent before round {round}");
            break;
        }
        // A receiver dies, and comes back.
        chaos::replace_receiver(&receivers, round % 2, &env).await;
        // The node leading the stream (even rounds) or the accepted-key
        // record (odd rounds) dies, and comes back 2 s later.
        let target = if round % 2 == 0 {
            &stream
        } else {
            &keys_stream
        };
        let victim = wait_current(&admin, target).await;
        kill_node(&victim);
        let killed_at = Instant::now();
        eprintln!(
            "round {round} at {:?}: SIGKILLed {victim} (leader of {target}), {} sent",
            senders.start.elapsed(),
            senders.started()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        let restored = tokio::task::spawn_blocking(restore_cluster).await.unwrap();
        assert!(restored, "could not restart {victim}");
        let leader = wait_current(&admin, &stream).await;
        wait_current(&admin, &keys_stream).await;
        eprintln!(
            "  {victim} back; {stream} led by {leader}, replicas current, {:?} after the kill",
            killed_at.elapsed()
        );
        rounds += 1;
    }

    senders.finish().await;
    let sent_in = senders.start.elapsed();
    receivers.lock().unwrap().clear();

    // The worker drains the stream: every acknowledged delivery applied.
    let outcome = &senders.outcome;
    let drain_started = Instant::now();
    chaos::drain(&inbox, &runs, outcome.acknowledged().len()).await;
    working.stop().await;
    let stats = inbox.stats().await.expect("stats");

    // The figures.
    let verdict = chaos::Verdict::new(outcome, &runs, &effects);
    // Every message the stream ever stored has a sequence, and only the
    // receivers publish to it: a second copy of a delivery (JetStream's
    // duplicate window missed a re-publish across a leader change: seen
    // once in 2,000, in one run of six) shows as a last sequence above the
    // deliveries. Reported, not asserted: the server stores it, and the
    // worker drops it if its twin completed (else runs it: at least once,
    // and the effect commits once, as asserted). Runs restarted at attempt 1 are counted apart: a
    // consumer whose leader died before its delivery count was replicated
    // delivers again as attempt 1, from the same stored copy.
    let mut info = admin.get_stream(&stream).await.expect("the stream");
    let stored = info
        .info()
        .await
        .expect("the stream's info")
        .state
        .last_sequence;
    let published_twice = usize::try_from(stored).unwrap().saturating_sub(deliveries);
    let restarted_at_one: Vec<usize> = runs
        .by_n
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, runs)| runs.iter().filter(|(attempt, _)| *attempt == 1).count() > 1)
        .map(|(n, _)| *n)
        .collect();
    outcome.print_answers();
    eprintln!(
        "{deliveries} deliveries, {} acknowledged, {} applied; lost {}, committed twice {}, \
         stored by the stream {stored} (second copies {published_twice}), runs beyond the \
         first {} (of which at attempt 1 again {}: {:?}); {rounds} rounds \
         (receiver and JetStream node SIGKILLed); sent in {sent_in:?}, drained after {:?}; \
         stats: pending {} in flight {} completed {} dead {}; run {:?}",
        verdict.acknowledged,
        verdict.applied,
        verdict.lost.len(),
        verdict.committed_twice.len(),
        verdict.redelivered,
        restarted_at_one.len(),
        restarted_at_one.iter().take(10).collect::<Vec<_>>(),
        drain_started.elapsed(),
        stats.pending,
        stats.in_flight,
        stats.completed,
        stats.dead,
        run_started.elapsed(),
    );

    let _ = inbox.delete().await;
    assert!(
        rounds >= kills.min(3),
        "only {rounds} rounds of faults ran: slow the senders (CHAOS_PACE_MS)"
    );
    verdict.assert_once(deliveries, outcome, &runs);
    assert_eq!(stats.dead, 0, "nothing dead-lettered");
}
