//! The admin API's log lines and metric (issue 22), in a test binary of
//! their own (the log is captured with a scoped subscriber, which tests
//! running beside it in the same process would race for tracing's
//! per-callsite cache).

mod console_support;

use std::sync::Arc;

use console_support::{dead, inbox};
use http::{HeaderMap, Method};
use webhooks_core::inbox::Inbox;
use webhooks_core::inbox::admin::{self, Access, AdminConfig, AdminRequest, AdminResponse};

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

async fn call(
    inbox: &Arc<dyn Inbox>,
    access: Access,
    method: Method,
    path: &str,
    query: Option<&str>,
) -> AdminResponse {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    let request = AdminRequest::new(&method, path, query, &headers);
    admin::handle(&**inbox, &AdminConfig::default(), Some(access), request).await
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
    let body_canary = "{\"canary\":\"body-canary-a7d3\"}";
    metrics::with_local_recorder(&recorder, || {
        tracing::subscriber::with_default(subscriber, || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async {
                    let inbox = inbox().await;
                    for key in ["k1", "k2"] {
                        dead(&inbox, key, "order.paid", key, body_canary).await;
                    }
                    let ada = || Access::Admin("ada".into());
                    let replay = call(&inbox, ada(), Method::POST, "/dead-letters/k1/replay", None);
                    assert_eq!(replay.await.status, 200);
                    let discard = call(&inbox, ada(), Method::DELETE, "/dead-letters/k2", None);
                    assert_eq!(discard.await.status, 204);
                    let purge = call(
                        &inbox,
                        ada(),
                        Method::POST,
                        "/purge",
                        Some("older_than=604800"),
                    );
                    assert_eq!(purge.await.status, 200);
                    // Refused requests change nothing, log no action, count nothing.
                    let reader = Access::ReadOnly("rita".into());
                    let refused = call(
                        &inbox,
                        reader,
                        Method::POST,
                        "/dead-letters/k1/replay",
                        None,
                    );
                    assert_eq!(refused.await.status, 403);
                    let below = call(&inbox, ada(), Method::POST, "/purge", Some("older_than=1"));
                    assert_eq!(below.await.status, 400);
                    // Reads are not actions.
                    let read = call(&inbox, ada(), Method::GET, "/dead-letters/k1", None);
                    assert_eq!(read.await.status, 404);
                });
        });
    });
    let log = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("inbox admin action"))
        .collect();
    assert_eq!(lines.len(), 3, "{log}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains(" INFO ") && l.contains("who=ada")),
        "{log}"
    );
    assert!(
        lines[0].contains("action=\"replay\"")
            && lines[0].contains("key=k1")
            && lines[0].contains("applied=true"),
        "{log}"
    );
    assert!(
        lines[1].contains("action=\"discard\"") && lines[1].contains("key=k2"),
        "{log}"
    );
    assert!(
        lines[2].contains("action=\"purge\"") && lines[2].contains("older_than_secs=604800"),
        "{log}"
    );
    assert!(
        !log.contains("body-canary-a7d3"),
        "bodies never reach the log"
    );

    let mut counts = std::collections::BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        if key.name() != admin::ACTIONS {
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
    assert_eq!(counts.get("action=replay"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("action=discard"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("action=purge"), Some(&0), "{counts:?}");
    assert_eq!(counts.len(), 3, "{counts:?}");
}
