//! A Redis Cluster primary dies while deliveries run through the pipeline
//! on a `RedisClusterStore` (with `wait_for_replicas(1, …)`): its replica
//! takes over; deliveries answered meanwhile get 503 (never another error),
//! every delivery answered 2xx stays processed (a redelivery is a duplicate),
//! and no delivery runs twice once the senders' retries are through.
//!
//! ```text
//! .ci/redis-cluster start
//! cargo test -p webhooks-core --features redis-cluster --test cluster_failover
//! ```
//!
//! It kills a primary of the cluster `.ci/redis-cluster` manages (found by
//! its pid file; a cluster it does not manage is never touched, and the test
//! skips, or fails under `CI=true`), and restores it with
//! `.ci/redis-cluster start` at the end, also when the test fails.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use webhooks_core::dedup::RedisClusterStore;
use webhooks_core::scheme::StandardWebhooks;
use webhooks_core::{Receiver, Rejection};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// Deliveries in flight at once.
const SENDERS: usize = 8;
/// The lease: a claim left behind by a 503 (its release could not reach the
/// dead primary) blocks the sender's retries this long.
const LEASE: Duration = Duration::from_secs(2);

fn request(id: &str) -> http::request::Parts {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let verifier = StandardWebhooks::new(SECRET).unwrap();
    let (mut parts, ()) = http::Request::post("/hook").body(()).unwrap().into_parts();
    parts.headers = verifier.sign_headers(id, now, b"{}").unwrap();
    parts
}

/// Runs `.ci/redis-cluster start` when dropped: the killed primary is
/// started again and rejoins as a replica, even if the test panicked.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        if !support::restore_cluster() {
            eprintln!("could not restore the cluster: run .ci/redis-cluster start");
        }
    }
}

/// The live primaries (`host:port`) as `node` sees them.
async fn primaries(node: &str) -> Vec<String> {
    support::cluster_nodes(node)
        .await
        .into_iter()
        .filter(|(_, flags)| flags.contains("master") && !flags.contains("fail"))
        .map(|(address, _)| address)
        .collect()
}

/// How each delivery was answered: a status per attempt.
#[derive(Default)]
struct Log {
    answers: Mutex<BTreeMap<usize, Vec<u16>>>,
}

impl Log {
    fn record(&self, id: usize, status: u16) {
        self.answers
            .lock()
            .unwrap()
            .entry(id)
            .or_default()
            .push(status);
    }
}

/// Delivers `id` once; the handler counts its runs in `runs[id]`.
async fn deliver(receiver: &Receiver, runs: &[AtomicUsize], id: usize) -> u16 {
    let name = format!("failover-{id}");
    let result = receiver
        .process(
            request(&name),
            bytes::Bytes::from_static(b"{}"),
            |_, _| async move {
                runs[id].fetch_add(1, Ordering::SeqCst);
                200u16
            },
            |s| *s,
        )
        .await;
    match result {
        Ok(status) => status,
        Err(rejection) => {
            let status = rejection.status().as_u16();
            assert!(
                matches!(
                    rejection,
                    Rejection::Duplicate
                        | Rejection::StoreUnavailable { .. }
                        | Rejection::InFlight { .. }
                ),
                "delivery {id} answered {status} ({})",
                rejection.kind()
            );
            status
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_failover() {
    let Some(url) = support::redis_cluster_url().await else {
        return;
    };
    let seed = support::authority(&url).expect("a host:port cluster URL");
    let before = primaries(&seed).await;
    assert_eq!(
        before.len(),
        3,
        "expected three live primaries, got {before:?}: run .ci/redis-cluster start"
    );
    // A primary other than the seed, managed by .ci/redis-cluster.
    let victim = before
        .iter()
        .find(|p| **p != seed)
        .expect("a primary other than the seed")
        .clone();
    let port = victim.rsplit_once(':').expect("host:port").1.to_owned();
    let Ok(pid) = std::fs::read_to_string(support::cluster_pid_file(&port)) else {
        let message = format!(
            "{victim} is not a node .ci/redis-cluster manages (no {}): not killing it",
            support::cluster_pid_file(&port).display()
        );
        assert!(!support::ci(), "{message}, and CI=true");
        eprintln!("SKIPPED: {message}");
        return;
    };
    let _restore = Restore;

    let store = RedisClusterStore::builder([url.as_str()])
        .key_prefix(format!("failover-test:{}:", support::unique_suffix()))
        .command_timeout(Duration::from_secs(1))
        .wait_for_replicas(1, Duration::from_millis(500))
        .connect()
        .await
        .expect("connect to the cluster");
    let store = Arc::new(store);
    let receiver = Arc::new(
        Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
            .shared_store(store as _)
            .lease(LEASE)
            .build(),
    );
    const MAX_IDS: usize = 200_000;
    let runs: Arc<Vec<AtomicUsize>> = Arc::new((0..MAX_IDS).map(|_| AtomicUsize::new(0)).collect());
    let log = Arc::new(Log::default());
    let next = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));

    // Senders: each new delivery once, until stopped.
    let senders: Vec<_> = (0..SENDERS)
        .map(|_| {
            let (receiver, runs, log) =
                (Arc::clone(&receiver), Arc::clone(&runs), Arc::clone(&log));
            let (next, stop) = (Arc::clone(&next), Arc::clone(&stop));
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let id = next.fetch_add(1, Ordering::SeqCst);
                    assert!(id < MAX_IDS, "more deliveries than the test counts");
                    let status = deliver(&receiver, &runs, id).await;
                    log.record(id, status);
                }
            })
        })
        .collect();

    // Traffic, then the kill, then traffic until the replica took over.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let killed = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .expect("run kill");
    assert!(killed.success(), "kill -9 {} failed", pid.trim());
    let killed_at = Instant::now();
    let survivor = before.iter().find(|p| **p != victim).unwrap().clone();
    loop {
        let now = primaries(&survivor).await;
        if now.len() == 3 && !now.contains(&victim) {
            eprintln!(
                "failover after {:?}: primaries {now:?}",
                killed_at.elapsed()
            );
            break;
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(30),
            "no replica took over {victim} within 30 s (primaries: {now:?})"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Traffic on the new layout, then stop.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    for sender in senders {
        tokio::time::timeout(Duration::from_secs(10), sender)
            .await
            .expect("a sender hung")
            .expect("a sender failed");
    }
    let sent = next.load(Ordering::SeqCst);

    let first: BTreeMap<usize, u16> = log
        .answers
        .lock()
        .unwrap()
        .iter()
        .map(|(id, answers)| (*id, answers[0]))
        .collect();
    let ok = first.values().filter(|s| **s == 200).count();
    let unavailable = first.values().filter(|s| **s == 503).count();
    eprintln!("{sent} deliveries: {ok} answered 200, {unavailable} answered 503");
    assert!(unavailable > 0, "no delivery saw the failover: {first:?}");
    assert!(ok > unavailable, "most deliveries should succeed");
    // A delivery answered 409 on its first attempt: the cluster client
    // retried its claim after a lost reply (the first run had claimed).
    // Either way, nothing else.
    assert!(
        first.values().all(|s| matches!(s, 200 | 409 | 503)),
        "{first:?}"
    );

    // The senders' retries: every delivery again until it is answered 200
    // (processed now, or a duplicate). A 2xx delivery must come back as a
    // duplicate, never run again.
    // The killed node back (as a replica of the new primary): until then
    // that primary has no replica, and `WAIT 1` fails every write to its
    // slots (503), by design.
    let restored = tokio::task::spawn_blocking(support::restore_cluster)
        .await
        .unwrap();
    assert!(
        restored,
        "could not restore the cluster with .ci/redis-cluster start"
    );

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut pending: Vec<usize> = (0..sent).collect();
    while !pending.is_empty() {
        assert!(
            Instant::now() < deadline,
            "{} deliveries still not answered 200 after 60 s of retries: {:?}",
            pending.len(),
            pending
                .iter()
                .take(5)
                .map(|id| (id, log.answers.lock().unwrap()[id].clone()))
                .collect::<Vec<_>>()
        );
        let mut still = Vec::new();
        for id in pending {
            let status = deliver(&receiver, &runs, id).await;
            log.record(id, status);
            if status != 200 {
                still.push(id);
            }
        }
        pending = still;
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    let twice: Vec<_> = (0..sent)
        .filter(|&id| runs[id].load(Ordering::SeqCst) > 1)
        .collect();
    assert!(
        twice.is_empty(),
        "ran twice: {:?}",
        twice
            .iter()
            .take(10)
            .map(|id| (id, log.answers.lock().unwrap()[id].clone()))
            .collect::<Vec<_>>()
    );
    let never: Vec<_> = (0..sent)
        .filter(|&id| runs[id].load(Ordering::SeqCst) == 0)
        .collect();
    assert!(never.is_empty(), "never ran: {never:?}");
    // Every delivery answered 2xx the first time was a duplicate after.
    let answers = log.answers.lock().unwrap();
    for (id, status) in &first {
        if *status == 200 {
            assert_eq!(
                runs[*id].load(Ordering::SeqCst),
                1,
                "delivery {id}: {:?}",
                answers[id]
            );
        }
    }
}
