//! The inbox's metrics, read back through `metrics-util`'s debugging recorder.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use webhooks_core::inbox::{Inbox, Job, Shutdown, SqliteInbox, Worker, signals};
use webhooks_core::scheme::StandardWebhooks;
use webhooks_core::{Receiver, Rejection};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

#[tokio::test]
async fn accepts_attempts_and_gauges_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");

    let inbox = SqliteInbox::connect("sqlite::memory:").await.unwrap();
    inbox.migrate().await.unwrap();
    let inbox: Arc<dyn Inbox> = Arc::new(inbox);
    let verifier = StandardWebhooks::new(SECRET).unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let headers = verifier.sign_headers("msg_1", now, b"{}").unwrap();
    let receiver = Receiver::builder(verifier)
        .inbox(Arc::clone(&inbox))
        .namespace("email")
        .build();
    for expected in [202, 200] {
        let (mut parts, ()) = http::Request::post("/").body(()).unwrap().into_parts();
        parts.headers = headers.clone();
        let answer = receiver
            .process(parts, "{}".into(), |_, _| async { 204u16 }, |s| *s)
            .await;
        let Err(rejection @ (Rejection::Stored { .. } | Rejection::Duplicate)) = answer else {
            panic!("expected stored or duplicate, got {answer:?}");
        };
        assert_eq!(rejection.status(), expected);
    }
    let _gauges = signals::spawn_gauges(Arc::clone(&inbox), Duration::from_millis(10));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut seen = Seen::default();
    seen.fold(&snapshotter);
    let depth_before = seen.gauges.get(signals::DEPTH).copied();
    let worker = Worker::builder(Arc::clone(&inbox))
        .poll_interval(Duration::from_millis(10))
        .handler(|_: Job<serde_json::Value>| async { Ok::<(), String>(()) });
    let shutdown = Shutdown::new();
    let running = tokio::spawn(worker.run(shutdown.signal()));
    while inbox.stats().await.unwrap().completed == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    shutdown.trigger();
    running.await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;

    seen.fold(&snapshotter);
    let counts = &seen.counts;
    assert_eq!(
        counts.get("webhooks_inbox_accepted_total{route=email,outcome=stored}"),
        Some(&1)
    );
    assert_eq!(
        counts.get("webhooks_inbox_accepted_total{route=email,outcome=duplicate}"),
        Some(&1)
    );
    assert_eq!(
        counts.get("webhooks_inbox_attempts_total{outcome=completed}"),
        Some(&1)
    );
    assert_eq!(
        counts.get("webhooks_inbox_handler_duration_seconds{}"),
        Some(&1)
    );
    assert_eq!(depth_before, Some(1.0));
    assert_eq!(seen.gauges.get(signals::DEPTH), Some(&0.0));

    // A type the worker's enum does not list: completed at once, counted
    // as `unknown_type`, the handler not run.
    #[derive(serde::Deserialize)]
    #[serde(tag = "type", content = "data")]
    enum Email {
        #[serde(rename = "email.sent")]
        Sent {},
    }
    let event = webhooks_core::inbox::NewEvent::new(
        "email:test:new",
        "test",
        r#"{"type":"email.new","data":{}}"#,
    );
    inbox.accept(&event).await.unwrap();
    let worker = Worker::builder(Arc::clone(&inbox))
        .poll_interval(Duration::from_millis(10))
        .handler(|_: Job<webhooks_core::event::Event<Email>>| async { Err::<(), _>("ran") });
    let report = worker.run_until_idle().await;
    assert_eq!((report.unknown_type, report.completed), (1, 0));
    seen.fold(&snapshotter);
    assert_eq!(
        seen.counts
            .get("webhooks_inbox_attempts_total{outcome=unknown_type}"),
        Some(&1)
    );
    assert_eq!(
        seen.counts.get("webhooks_inbox_handler_duration_seconds{}"),
        Some(&1),
        "the handler did not run"
    );
}

/// Every snapshot folded together (snapshots drain counters and histograms).
#[derive(Default)]
struct Seen {
    counts: BTreeMap<String, u64>,
    gauges: BTreeMap<String, f64>,
}

impl Seen {
    fn fold(&mut self, snapshotter: &metrics_util::debugging::Snapshotter) {
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let key = key.key();
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            let name = format!("{}{{{}}}", key.name(), labels.join(","));
            match value {
                DebugValue::Counter(n) => *self.counts.entry(name).or_default() += n,
                DebugValue::Histogram(samples) => {
                    *self.counts.entry(name).or_default() += samples.len() as u64;
                }
                DebugValue::Gauge(g) => {
                    self.gauges.insert(key.name().to_owned(), g.into_inner());
                }
            }
        }
    }
}
