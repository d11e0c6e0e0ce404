//! The chaos tests' shared harness (`cluster_inbox_failover`,
//! `nats_inbox_chaos`, `rabbitmq_inbox_chaos`): receiver processes (the test
//! binary run again as a child, serving HTTP/1.1 through a `Receiver` in
//! inbox mode), senders that retry each signed delivery until a `2xx` as a
//! provider does (some also sent forged, once), and a transactional handler
//! whose effect shows whether an event committed once.
//!
//! Use it from a test file with
//! `#[path = "support/chaos.rs"] mod chaos;` (it needs `mod support;` too),
//! and give the file an ignored test named `receiver_process` that calls
//! [`receiver_child`]: [`ReceiverProcess::start`] runs that test in a child.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each chaos test uses a different part of this module"
)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use webhooks_core::Receiver;
use webhooks_core::inbox::{Backoff, Inbox, Job, Shutdown, Worker, WorkerReport};
use webhooks_core::scheme::StandardWebhooks;

use crate::support::unique_suffix;

/// The receivers' secret.
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// Another secret: what a forger signs with.
const FORGED_SECRET: &str = "whsec_c2VjcmV0LW9mLXNvbWVib2R5LWVsc2UtMTIzNA==";
/// Deliveries in flight at once.
pub const IN_FLIGHT: usize = 32;
/// The child's port file: set only in a receiver process.
const PORT_FILE: &str = "CHAOS_CHILD_PORT_FILE";

/// A number from the environment, or `default`.
pub fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The delivery id (`webhook-id`) of genuine delivery `n`.
pub fn message_id(n: usize) -> String {
    format!("msg_chaos_{n}")
}

// ---------------------------------------------------------- the receivers

/// A receiver process: this test binary running its `receiver_process`.
pub struct ReceiverProcess {
    child: Child,
    /// Where it serves `POST /hook`.
    pub port: u16,
}

impl ReceiverProcess {
    /// Starts one with `env` (what its `receiver_process` reads to open the
    /// inbox) and waits until it listens.
    pub async fn start(env: &[(&str, String)]) -> Self {
        let port_file = std::env::temp_dir().join(format!("chaos-port-{}", unique_suffix()));
        let child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--ignored",
                "--exact",
                "receiver_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env(PORT_FILE, &port_file)
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
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ReceiverProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Two receiver processes, replaced one at a time.
pub type Receivers = Arc<Mutex<Vec<ReceiverProcess>>>;

/// SIGKILLs receiver `which` and puts a new one, started with `env`, in its
/// place.
pub async fn replace_receiver(receivers: &Receivers, which: usize, env: &[(&str, String)]) {
    receivers.lock().unwrap()[which].kill();
    let replacement = ReceiverProcess::start(env).await;
    receivers.lock().unwrap()[which] = replacement;
}

/// The variable [`open_from_env`] reads the inbox URL from.
pub const INBOX_URL: &str = "CHAOS_CHILD_INBOX_URL";

/// For [`receiver_child`]: the inbox `inbox_from_url` opens at the URL in
/// [`INBOX_URL`], tried again for 30 s while the servers come back.
pub async fn open_from_env() -> Arc<dyn Inbox> {
    let inbox_url = std::env::var(INBOX_URL).expect("the inbox URL");
    let started = Instant::now();
    loop {
        match webhooks_core::inbox::inbox_from_url(&inbox_url).await {
            Ok(inbox) => return inbox,
            Err(error) if started.elapsed() < Duration::from_secs(30) => {
                eprintln!("opening the inbox: {error}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("could not open the inbox: {error}"),
        }
    }
}

/// The child side, for a test's ignored `receiver_process`: opens the inbox
/// with `open` and serves `POST /hook` over HTTP/1.1 (one request per
/// connection) through a `Receiver` in inbox mode, until killed. Outside a
/// receiver process it says so and returns.
pub fn receiver_child<F, Fut>(open: F)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Arc<dyn Inbox>>,
{
    let Ok(port_file) = std::env::var(PORT_FILE) else {
        eprintln!("receiver_process is started by the chaos test");
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let inbox = open().await;
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

// ------------------------------------------------------------ the senders

/// Sends delivery `n` ([`message_id`], or `msg_forged_<n>` signed with
/// another secret) to `port`: the status, or `None` when the connection
/// failed.
pub async fn send(port: u16, n: usize, forged: bool) -> Option<u16> {
    let body = format!("{{\"type\":\"chaos.test\",\"n\":{n},\"forged\":{forged}}}");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let (secret, id) = if forged {
        (FORGED_SECRET, format!("msg_forged_{n}"))
    } else {
        (SECRET, message_id(n))
    };
    let headers = StandardWebhooks::new(secret)
        .unwrap()
        .sign_headers(&id, now, body.as_bytes())
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
pub struct Outcome {
    /// Deliveries answered 2xx, with when.
    pub acknowledged: Mutex<BTreeMap<usize, Instant>>,
    /// Answers by status (0: connection failed).
    pub statuses: Mutex<BTreeMap<u16, usize>>,
    /// Forged deliveries answered 2xx (must stay empty).
    pub forged_accepted: Mutex<Vec<usize>>,
    /// Answers to forgeries by status.
    pub forged_statuses: Mutex<BTreeMap<u16, usize>>,
}

impl Outcome {
    /// Prints the answers by status, to genuine deliveries and to forgeries.
    pub fn print_answers(&self) {
        eprintln!(
            "answers by status (0: connection failed): {:?}",
            self.statuses.lock().unwrap()
        );
        eprintln!(
            "answers to forgeries: {:?}",
            self.forged_statuses.lock().unwrap()
        );
    }

    /// The deliveries answered 2xx.
    pub fn acknowledged(&self) -> BTreeSet<usize> {
        self.acknowledged.lock().unwrap().keys().copied().collect()
    }
}

/// The senders' run: `deliveries` deliveries, delivery `n` first sent
/// `n` × `pace` after the start (so that deliveries arrive through every
/// round of faults), each retried every 100 ms, from whichever receiver is
/// up, until a `2xx`; one in `forge_every` (if any) also sent forged, once.
pub struct Senders {
    /// The senders' tasks: each panics if a delivery is never acknowledged.
    pub tasks: Vec<JoinHandle<()>>,
    /// How many deliveries were started.
    pub next: Arc<AtomicUsize>,
    /// What they saw.
    pub outcome: Arc<Outcome>,
    /// When they started.
    pub start: Instant,
    deliveries: usize,
}

impl Senders {
    /// Starts [`IN_FLIGHT`] senders against `receivers`.
    pub fn start(
        receivers: &Receivers,
        deliveries: usize,
        pace: Duration,
        forge_every: Option<usize>,
    ) -> Self {
        let start = Instant::now();
        let outcome = Arc::new(Outcome::default());
        let next = Arc::new(AtomicUsize::new(0));
        let ports = |receivers: &Receivers| -> Vec<u16> {
            receivers.lock().unwrap().iter().map(|r| r.port).collect()
        };
        let tasks = (0..IN_FLIGHT)
            .map(|sender| {
                let (outcome, next, receivers) = (
                    Arc::clone(&outcome),
                    Arc::clone(&next),
                    Arc::clone(receivers),
                );
                tokio::spawn(async move {
                    let mut attempt = sender;
                    loop {
                        let n = next.fetch_add(1, Ordering::SeqCst);
                        if n >= deliveries {
                            return;
                        }
                        let due = start + pace * u32::try_from(n).unwrap();
                        tokio::time::sleep_until(due.into()).await;
                        if forge_every.is_some_and(|every| n % every == 0) {
                            // A forgery, once: never 2xx, never stored.
                            let ports = ports(&receivers);
                            attempt += 1;
                            let status = send(ports[attempt % ports.len()], n, true).await;
                            *outcome
                                .forged_statuses
                                .lock()
                                .unwrap()
                                .entry(status.unwrap_or(0))
                                .or_default() += 1;
                            if status.is_some_and(|s| (200..300).contains(&s)) {
                                outcome.forged_accepted.lock().unwrap().push(n);
                            }
                        }
                        let started = Instant::now();
                        loop {
                            let ports = ports(&receivers);
                            attempt += 1;
                            let status = send(ports[attempt % ports.len()], n, false).await;
                            *outcome
                                .statuses
                                .lock()
                                .unwrap()
                                .entry(status.unwrap_or(0))
                                .or_default() += 1;
                            if status.is_some_and(|s| (200..300).contains(&s)) {
                                outcome
                                    .acknowledged
                                    .lock()
                                    .unwrap()
                                    .insert(n, Instant::now());
                                break;
                            }
                            assert!(
                                started.elapsed() < Duration::from_secs(240),
                                "delivery {n} was never acknowledged"
                            );
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                })
            })
            .collect();
        Self {
            tasks,
            next,
            outcome,
            start,
            deliveries,
        }
    }

    /// Whether every delivery has been started.
    pub fn all_started(&self) -> bool {
        self.next.load(Ordering::SeqCst) >= self.deliveries
    }

    /// How many deliveries have been started.
    pub fn started(&self) -> usize {
        self.next.load(Ordering::SeqCst).min(self.deliveries)
    }

    /// Waits for every sender (each gives up on a delivery after 240 s).
    pub async fn finish(&mut self) {
        for task in self.tasks.drain(..) {
            tokio::time::timeout(Duration::from_secs(300), task)
                .await
                .expect("a sender hung")
                .expect("a sender failed");
        }
    }
}

// ------------------------------------------------------------- the worker

/// A chaos delivery's body.
#[derive(serde::Deserialize)]
pub struct Event {
    n: usize,
    forged: bool,
}

/// What the handler saw, by delivery number.
#[derive(Default)]
pub struct Runs {
    /// Every run: (attempt, whether it committed the effect).
    pub by_n: Mutex<HashMap<usize, Vec<(u32, bool)>>>,
    /// Forged deliveries that reached the handler (must stay empty).
    pub forged: Mutex<Vec<usize>>,
}

impl Runs {
    /// How many deliveries have committed their effect.
    pub fn applied(&self) -> usize {
        self.by_n
            .lock()
            .unwrap()
            .values()
            .filter(|runs| runs.iter().any(|(_, applied)| *applied))
            .count()
    }
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

/// A worker on `inbox` with the transactional handler: it retries a
/// delivery until it runs, and never dead-letters.
pub fn worker(inbox: Arc<dyn Inbox>, dir: PathBuf, runs: Arc<Runs>) -> Worker<Event> {
    Worker::builder(inbox)
        .concurrency(4)
        .batch(16)
        .lease(Duration::from_secs(10))
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

/// A [`worker`] running in this process.
pub struct Working {
    shutdown: Shutdown,
    task: JoinHandle<WorkerReport>,
}

impl Working {
    /// Starts a [`worker`] on `inbox`, its effects in `effects`.
    pub fn start(inbox: Arc<dyn Inbox>, effects: &Effects, runs: &Arc<Runs>) -> Self {
        let shutdown = Shutdown::new();
        let task = tokio::spawn(
            worker(inbox, effects.dir.clone(), Arc::clone(runs)).run(shutdown.signal()),
        );
        Self { shutdown, task }
    }

    /// Stops it (within 60 s).
    pub async fn stop(self) {
        self.shutdown.trigger();
        tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .expect("the worker did not stop")
            .expect("the worker failed");
    }
}

/// The effects the worker committed, in a fresh directory.
pub struct Effects {
    /// Where `applied/<n>` files go.
    pub dir: PathBuf,
}

impl Effects {
    /// A fresh, empty directory.
    pub fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("chaos-applied-{}", unique_suffix()));
        std::fs::create_dir_all(&dir).unwrap();
        Self { dir }
    }

    /// The deliveries whose effect was committed.
    pub fn on_disk(&self) -> BTreeSet<usize> {
        std::fs::read_dir(&self.dir)
            .unwrap()
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
            .collect()
    }
}

impl Drop for Effects {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits (up to 120 s) until the worker has applied every acknowledged
/// delivery and the inbox has nothing pending or in flight.
pub async fn drain(inbox: &dyn Inbox, runs: &Runs, acknowledged: usize) {
    let started = Instant::now();
    loop {
        let stats = inbox.stats().await.ok();
        let drained = stats.is_some_and(|s| s.pending == 0 && s.in_flight == 0);
        if (runs.applied() >= acknowledged && drained)
            || started.elapsed() > Duration::from_secs(120)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Late redeliveries or second copies, if any, have time to show.
    tokio::time::sleep(Duration::from_secs(2)).await;
}

/// The end of a run with a worker: what was lost, committed twice, or let
/// through.
pub struct Verdict {
    /// Answered 2xx, never applied.
    pub lost: Vec<usize>,
    /// Applied, never answered 2xx.
    pub unacknowledged_applied: Vec<usize>,
    /// Effects committed more than once.
    pub committed_twice: Vec<usize>,
    /// Runs beyond each delivery's first.
    pub redelivered: usize,
    /// Acknowledged, applied.
    pub acknowledged: usize,
    /// Applied.
    pub applied: usize,
}

impl Verdict {
    /// Compares what the senders saw with what the worker did.
    pub fn new(outcome: &Outcome, runs: &Runs, effects: &Effects) -> Self {
        let acknowledged = outcome.acknowledged();
        let on_disk = effects.on_disk();
        let by_n = runs.by_n.lock().unwrap();
        Self {
            lost: acknowledged.difference(&on_disk).copied().collect(),
            unacknowledged_applied: on_disk.difference(&acknowledged).copied().collect(),
            committed_twice: by_n
                .iter()
                .filter(|(_, runs)| runs.iter().filter(|(_, applied)| *applied).count() > 1)
                .map(|(n, _)| *n)
                .collect(),
            redelivered: by_n.values().map(|runs| runs.len().saturating_sub(1)).sum(),
            acknowledged: acknowledged.len(),
            applied: on_disk.len(),
        }
    }

    /// Every delivery acknowledged and applied once; no forgery answered
    /// 2xx or run.
    pub fn assert_once(&self, deliveries: usize, outcome: &Outcome, runs: &Runs) {
        assert_eq!(
            self.acknowledged, deliveries,
            "every delivery acknowledged in the end"
        );
        assert!(
            self.lost.is_empty(),
            "{} deliveries answered 2xx were never applied: {:?}",
            self.lost.len(),
            self.lost.iter().take(20).collect::<Vec<_>>()
        );
        assert!(
            self.unacknowledged_applied.is_empty(),
            "applied but never answered 2xx: {:?}",
            self.unacknowledged_applied
        );
        assert!(
            self.committed_twice.is_empty(),
            "effects committed twice: {:?}",
            self.committed_twice
        );
        let forged_accepted = outcome.forged_accepted.lock().unwrap().clone();
        let forged_run = runs.forged.lock().unwrap().clone();
        assert!(
            forged_accepted.is_empty() && forged_run.is_empty(),
            "forgeries answered 2xx {forged_accepted:?}, reached the handler {forged_run:?}"
        );
        assert!(
            !outcome.forged_statuses.lock().unwrap().is_empty(),
            "no forgery was sent: the check above proved nothing"
        );
    }
}
