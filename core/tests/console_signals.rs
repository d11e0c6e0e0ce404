//! The console's log lines and metric, in a test binary of their own (the
//! log is captured with a scoped subscriber, which tests running beside it
//! in the same process would race for tracing's per-callsite cache).

mod console_support;

use std::sync::Arc;

use console_support::*;
use webhooks_core::console::Console;

/// A writer appending to a shared buffer (the captured log).
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[test]
fn actions_are_logged_with_the_identity_and_counted() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    let log = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(log.clone())
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .finish();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let body_canary = "{\"canary\":\"body-canary-5c1e\"}";
    metrics::with_local_recorder(&recorder, || {
        tracing::subscriber::with_default(subscriber, || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async {
                    let inbox = inbox().await;
                    for key in ["k1", "k2", "k3"] {
                        dead(&inbox, key, "order.paid", key, body_canary).await;
                    }
                    let console = Console::new(Arc::clone(&inbox));
                    let page = get(&console, admin(), "/dead/item", Some("key=k1")).await;
                    let csrf = token(text(&page));
                    let origin = [("origin", ORIGIN)];
                    let one = form(&[("csrf", &csrf), ("key", "k1"), ("scope", "one")]);
                    assert_eq!(
                        post(&console, admin(), "/replay", &one, &origin)
                            .await
                            .status,
                        303
                    );
                    let two = form(&[("csrf", &csrf), ("key", "k2"), ("key", "k3")]);
                    assert_eq!(
                        post(&console, admin(), "/discard", &two, &origin)
                            .await
                            .status,
                        303
                    );
                    // Below the 7-day floor: forced, and logged as such.
                    let purge = form(&[("csrf", &csrf), ("older_than", "1h"), ("force", "on")]);
                    assert_eq!(
                        post(&console, admin(), "/purge", &purge, &origin)
                            .await
                            .status,
                        303
                    );
                    // Refused requests change nothing and count nothing.
                    assert_eq!(
                        post(&console, reader(), "/replay", &one, &origin)
                            .await
                            .status,
                        403
                    );
                });
        });
    });
    let log = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("console action"))
        .collect();
    assert_eq!(lines.len(), 3, "{log}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains(" INFO ") && l.contains("who=alice")),
        "{log}"
    );
    assert!(
        lines[0].contains("action=\"replay\"")
            && lines[0].contains("scope=\"one\"")
            && lines[0].contains("key=k1")
            && lines[0].contains("applied=1"),
        "{log}"
    );
    assert!(
        lines[1].contains("action=\"discard\"")
            && lines[1].contains("scope=\"selected\"")
            && lines[1].contains("applied=2"),
        "{log}"
    );
    assert!(
        lines[2].contains("action=\"purge\"") && lines[2].contains("force=true"),
        "{log}"
    );
    assert!(
        !log.contains("body-canary-5c1e"),
        "bodies never reach the log"
    );

    let mut counts = std::collections::BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        if key.name() != webhooks_core::console::ACTIONS {
            continue;
        }
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        if let DebugValue::Counter(n) = value {
            counts.insert(labels.join(","), n);
        }
    }
    assert_eq!(
        counts.get("action=replay,scope=one"),
        Some(&1),
        "{counts:?}"
    );
    assert_eq!(
        counts.get("action=discard,scope=selected"),
        Some(&2),
        "{counts:?}"
    );
    assert_eq!(
        counts.get("action=purge,scope=completed"),
        Some(&0),
        "{counts:?}"
    );
    assert_eq!(counts.len(), 3, "{counts:?}");
}
