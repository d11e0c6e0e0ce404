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
//! applied, once; the stream stored each delivery once (its last sequence
//! is the number of deliveries: nothing else publishes to it);
//! no forged delivery was answered 2xx or reached the handler; nothing was
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

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{TcpListener, TcpStream};
use webhooks_core::Receiver;
use webhooks_core::inbox::{Backoff, Inbox, JetStreamInbox, Job, Shutdown, Worker, inbox_from_url};
use webhooks_core::scheme::StandardWebhooks;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const FORGED_SECRET: &str = "whsec_c2VjcmV0LW9mLXNvbWVib2R5LWVsc2UtMTIzNA==";
/// Deliveries in flight at once.
const IN_FLIGHT: usize = 32;
/// One delivery in this many is also sent forged.
const FORGE_EVERY: usize = 25;
const DEFAULT_URL: &str = "nats://127.0.0.1:4231,nats://127.0.0.1:4232,nats://127.0.0.1:4233";

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

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

/// A receiver process: this test binary running `receiver_process`.
struct ReceiverProcess {
    child: Child,
    port: u16,
}

impl ReceiverProcess {
    async fn start(inbox_url: &str) -> Self {
        let port_file =
            std::env::temp_dir().join(format!("nats-chaos-port-{}", support::unique_suffix()));
        let child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--ignored",
                "--exact",
                "receiver_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("CHAOS_CHILD_INBOX_URL", inbox_url)
            .env("CHAOS_CHILD_PORT_FILE", &port_file)
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn a receiver process");
        let started = Instant::now();
        let port = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file)
                && let Ok(port) = text.trim().parse()
            {
                break port;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the receiver process did not start"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let _ = std::fs::remove_file(&port_file);
        Self { child, port }
    }

    /// SIGKILL.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ReceiverProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The child side: serves `POST /hook` over HTTP/1.1 (one request per
/// connection) through a `Receiver` in inbox mode, on the inbox
/// `inbox_from_url` opens. Ignored: only run by `ReceiverProcess::start`.
#[test]
#[ignore = "run by the chaos test as a receiver process"]
fn receiver_process() {
    let Ok(inbox_url) = std::env::var("CHAOS_CHILD_INBOX_URL") else {
        eprintln!("receiver_process is started by the chaos test");
        return;
    };
    let port_file = std::env::var("CHAOS_CHILD_PORT_FILE").expect("port file");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let started = Instant::now();
        let inbox = loop {
            match inbox_from_url(&inbox_url).await {
                Ok(inbox) => break inbox,
                Err(error) if started.elapsed() < Duration::from_secs(30) => {
                    eprintln!("opening the inbox: {error}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(error) => panic!("could not open the inbox: {error}"),
            }
        };
        let receiver = Arc::new(
            Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
                .inbox(inbox)
                .build(),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        std::fs::write(&port_file, port.to_string()).unwrap();
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let receiver = Arc::clone(&receiver);
            tokio::spawn(async move {
                let _ = serve(stream, &receiver).await;
            });
        }
    });
}

/// One request on `stream`, answered with the pipeline's status.
async fn serve(stream: TcpStream, receiver: &Receiver) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    let mut request = http::Request::post("/hook");
    let mut length = 0usize;
    loop {
        line.clear();
        reader.read_line(&mut line).await?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().unwrap_or(0);
        }
        request = request.header(name, value);
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    let (parts, ()) = request.body(()).unwrap().into_parts();
    let status = match receiver
        .process(parts, body.into(), |_, _| async { 204u16 }, |s| *s)
        .await
    {
        Ok(status) => status,
        Err(rejection) => rejection.status().as_u16(),
    };
    let mut stream = reader.into_inner();
    stream
        .write_all(
            format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await?;
    stream.shutdown().await
}

/// Sends delivery `id` (`msg_chaos_<id>`, or `msg_forged_<id>` signed with
/// another secret) to `port`: the status, or `None` when the connection
/// failed.
async fn send(port: u16, id: usize, forged: bool) -> Option<u16> {
    let body = format!("{{\"type\":\"chaos.test\",\"n\":{id},\"forged\":{forged}}}");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let (secret, message_id) = if forged {
        (FORGED_SECRET, format!("msg_forged_{id}"))
    } else {
        (SECRET, format!("msg_chaos_{id}"))
    };
    let headers = StandardWebhooks::new(secret)
        .unwrap()
        .sign_headers(&message_id, now, body.as_bytes())
        .unwrap();
    let mut request = format!(
        "POST /hook HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in &headers {
        request.push_str(&format!("{name}: {}\r\n", value.to_str().unwrap()));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    let exchange = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut reply = Vec::new();
        stream.read_to_end(&mut reply).await.ok()?;
        let text = String::from_utf8_lossy(&reply);
        text.split(' ').nth(1)?.parse().ok()
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .ok()
        .flatten()
}

/// What the senders saw.
#[derive(Default)]
struct Outcome {
    /// Deliveries answered 2xx.
    acknowledged: Mutex<BTreeSet<usize>>,
    /// Answers by status (0: connection failed).
    statuses: Mutex<BTreeMap<u16, usize>>,
    /// Forged deliveries answered 2xx (must stay empty), and all answers to forgeries.
    forged_accepted: Mutex<Vec<usize>>,
    forged_statuses: Mutex<BTreeMap<u16, usize>>,
}

// ------------------------------------------------------------- the worker

#[derive(serde::Deserialize)]
struct Event {
    n: usize,
    forged: bool,
}

/// What the handler saw, by delivery number.
#[derive(Default)]
struct Runs {
    /// Every run: (attempt, whether it committed the effect).
    by_n: Mutex<HashMap<usize, Vec<(u32, bool)>>>,
    /// Forged deliveries that reached the handler (must stay empty).
    forged: Mutex<Vec<usize>>,
}

/// The transactional effect of delivery `n`: creating `applied/<n>` (the
/// commit) happens at most once; a redelivery finds it and commits nothing.
fn apply(dir: &Path, n: usize, key: &str) -> std::io::Result<bool> {
    use std::io::Write as _;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join(n.to_string()))
    {
        Ok(mut file) => {
            file.write_all(key.as_bytes())?;
            Ok(true)
        }
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(error) => Err(error),
    }
}

fn worker(inbox: Arc<dyn Inbox>, dir: PathBuf, runs: Arc<Runs>) -> Worker<Event> {
    Worker::builder(inbox)
        .concurrency(4)
        .batch(16)
        .lease(Duration::from_secs(10))
        // Never dead-letter here: a delivery is retried until it runs.
        .max_attempts(1_000)
        .poll_interval(Duration::from_millis(20))
        .backoff(Backoff {
            base: Duration::from_millis(50),
            max: Duration::from_millis(500),
        })
        .handler(move |job: Job<Event>| {
            let (dir, runs) = (dir.clone(), Arc::clone(&runs));
            async move {
                if job.event.forged {
                    runs.forged.lock().unwrap().push(job.event.n);
                    return Ok(());
                }
                let applied = apply(&dir, job.event.n, &job.meta.key)?;
                runs.by_n
                    .lock()
                    .unwrap()
                    .entry(job.event.n)
                    .or_default()
                    .push((job.attempt, applied));
                Ok::<(), std::io::Error>(())
            }
        })
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
    let applied_dir =
        std::env::temp_dir().join(format!("nats-chaos-applied-{}", support::unique_suffix()));
    std::fs::create_dir_all(&applied_dir).unwrap();
    let runs = Arc::new(Runs::default());
    let shared: Arc<dyn Inbox> = Arc::new(inbox.clone());
    let shutdown = Shutdown::new();
    let working = tokio::spawn(
        worker(Arc::clone(&shared), applied_dir.clone(), Arc::clone(&runs)).run(shutdown.signal()),
    );

    let receivers = Arc::new(Mutex::new(vec![
        ReceiverProcess::start(&inbox_url).await,
        ReceiverProcess::start(&inbox_url).await,
    ]));
    let ports = |receivers: &Mutex<Vec<ReceiverProcess>>| -> Vec<u16> {
        receivers.lock().unwrap().iter().map(|r| r.port).collect()
    };

    // The senders: each delivery until it is answered 2xx (every 100 ms,
    // from whichever receiver is up); delivery `n` is first sent `n` × the
    // pace after the start, so that deliveries arrive through every round.
    let start = Instant::now();
    let outcome = Arc::new(Outcome::default());
    let next = Arc::new(AtomicUsize::new(0));
    let senders: Vec<_> = (0..IN_FLIGHT)
        .map(|sender| {
            let (outcome, next, receivers) = (
                Arc::clone(&outcome),
                Arc::clone(&next),
                Arc::clone(&receivers),
            );
            tokio::spawn(async move {
                let mut attempt = sender;
                loop {
                    let id = next.fetch_add(1, Ordering::SeqCst);
                    if id >= deliveries {
                        return;
                    }
                    let due = start + pace * u32::try_from(id).unwrap();
                    tokio::time::sleep_until(due.into()).await;
                    if id % FORGE_EVERY == 0 {
                        // A forgery, once: never 2xx, never published.
                        let ports = ports(&receivers);
                        attempt += 1;
                        let status = send(ports[attempt % ports.len()], id, true).await;
                        *outcome
                            .forged_statuses
                            .lock()
                            .unwrap()
                            .entry(status.unwrap_or(0))
                            .or_default() += 1;
                        if status.is_some_and(|s| (200..300).contains(&s)) {
                            outcome.forged_accepted.lock().unwrap().push(id);
                        }
                    }
                    let started = Instant::now();
                    loop {
                        let ports = ports(&receivers);
                        attempt += 1;
                        let status = send(ports[attempt % ports.len()], id, false).await;
                        *outcome
                            .statuses
                            .lock()
                            .unwrap()
                            .entry(status.unwrap_or(0))
                            .or_default() += 1;
                        if status.is_some_and(|s| (200..300).contains(&s)) {
                            outcome.acknowledged.lock().unwrap().insert(id);
                            break;
                        }
                        assert!(
                            started.elapsed() < Duration::from_secs(240),
                            "delivery {id} was never acknowledged"
                        );
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            })
        })
        .collect();

    // The faults, while the senders run.
    let mut rounds = 0;
    for round in 0..kills {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        if next.load(Ordering::SeqCst) >= deliveries {
            eprintln!("all deliveries sent before round {round}");
            break;
        }
        // A receiver dies, and comes back.
        {
            let which = round % 2;
            receivers.lock().unwrap()[which].kill();
            let replacement = ReceiverProcess::start(&inbox_url).await;
            receivers.lock().unwrap()[which] = replacement;
        }
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
            start.elapsed(),
            next.load(Ordering::SeqCst).min(deliveries)
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

    for sender in senders {
        tokio::time::timeout(Duration::from_secs(300), sender)
            .await
            .expect("a sender hung")
            .expect("a sender failed");
    }
    let sent_in = start.elapsed();
    receivers.lock().unwrap().clear();

    // The worker drains the stream: every acknowledged delivery applied.
    let acknowledged = outcome.acknowledged.lock().unwrap().clone();
    let drain_started = Instant::now();
    loop {
        let applied = runs
            .by_n
            .lock()
            .unwrap()
            .values()
            .filter(|runs| runs.iter().any(|(_, applied)| *applied))
            .count();
        let stats = inbox.stats().await.ok();
        let drained = stats.is_some_and(|s| s.pending == 0 && s.in_flight == 0);
        if (applied >= acknowledged.len() && drained)
            || drain_started.elapsed() > Duration::from_secs(120)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Late redeliveries or second copies, if any, have time to show.
    tokio::time::sleep(Duration::from_secs(2)).await;
    shutdown.trigger();
    tokio::time::timeout(Duration::from_secs(60), working)
        .await
        .expect("the worker did not stop")
        .expect("the worker failed");
    let stats = inbox.stats().await.expect("stats");

    // The figures.
    let by_n = runs.by_n.lock().unwrap().clone();
    let on_disk: BTreeSet<usize> = std::fs::read_dir(&applied_dir)
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    let lost: Vec<usize> = acknowledged.difference(&on_disk).copied().collect();
    let unacknowledged_applied: Vec<usize> = on_disk.difference(&acknowledged).copied().collect();
    let committed_twice: Vec<usize> = by_n
        .iter()
        .filter(|(_, runs)| runs.iter().filter(|(_, applied)| *applied).count() > 1)
        .map(|(n, _)| *n)
        .collect();
    // Every message the stream ever stored has a sequence, and only the
    // receivers publish to it: a second copy of a delivery (a dedup missed
    // across a leader change, say) shows as a last sequence above the
    // deliveries. Runs restarted at attempt 1 are counted apart: a
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
    let restarted_at_one: Vec<usize> = by_n
        .iter()
        .filter(|(_, runs)| runs.iter().filter(|(attempt, _)| *attempt == 1).count() > 1)
        .map(|(n, _)| *n)
        .collect();
    let redelivered = by_n
        .values()
        .map(|runs| runs.len().saturating_sub(1))
        .sum::<usize>();
    let forged_statuses = outcome.forged_statuses.lock().unwrap().clone();
    let forged_accepted = outcome.forged_accepted.lock().unwrap().clone();
    let forged_run = runs.forged.lock().unwrap().clone();
    eprintln!(
        "answers by status (0: connection failed): {:?}",
        outcome.statuses.lock().unwrap()
    );
    eprintln!("answers to forgeries: {forged_statuses:?}");
    eprintln!(
        "{deliveries} deliveries, {} acknowledged, {} applied; lost {}, committed twice {}, \
         stored by the stream {stored} (second copies {published_twice}), runs beyond the \
         first {redelivered} (of which at attempt 1 again {}: {:?}); {rounds} rounds \
         (receiver and JetStream node SIGKILLed); sent in {sent_in:?}, drained after {:?}; \
         stats: pending {} in flight {} completed {} dead {}; run {:?}",
        acknowledged.len(),
        on_disk.len(),
        lost.len(),
        committed_twice.len(),
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
    let _ = std::fs::remove_dir_all(&applied_dir);
    assert!(
        rounds >= kills.min(3),
        "only {rounds} rounds of faults ran: slow the senders (CHAOS_PACE_MS)"
    );
    assert_eq!(
        acknowledged.len(),
        deliveries,
        "every delivery acknowledged in the end"
    );
    assert!(
        lost.is_empty(),
        "{} deliveries answered 2xx were never applied: {:?}",
        lost.len(),
        lost.iter().take(20).collect::<Vec<_>>()
    );
    assert!(
        unacknowledged_applied.is_empty(),
        "applied but never answered 2xx: {unacknowledged_applied:?}"
    );
    assert!(
        committed_twice.is_empty(),
        "effects committed twice: {committed_twice:?}"
    );
    assert_eq!(
        published_twice, 0,
        "the stream stored {stored} messages for {deliveries} deliveries"
    );
    assert!(
        forged_accepted.is_empty() && forged_run.is_empty(),
        "forgeries answered 2xx {forged_accepted:?}, reached the handler {forged_run:?}"
    );
    assert!(
        !forged_statuses.is_empty(),
        "no forgery was sent: the check above proved nothing"
    );
    assert_eq!(stats.dead, 0, "nothing dead-lettered");
}
