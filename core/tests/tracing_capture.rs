//! What the pipeline logs, captured at TRACE: every answer (413 included)
//! inside the `webhook` span with its scheme and route, and never a secret,
//! a body or a signature, whatever the outcome.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tracing_subscriber::fmt::MakeWriter;
use webhooks_core::dedup::{Claim, ClaimToken, DedupStore, StoreError, Transition};
use webhooks_core::scheme::StandardWebhooks;
use webhooks_core::{Receiver, Rejection};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// The secret's bytes as the base64 inside `whsec_`, and a body marker.
const SECRET_B64: &str = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const CANARY: &str = "body-canary-7f3a";

/// A writer appending to a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Runs `work` on a current-thread runtime with every event and span
/// (TRACE, with span fields) written to the returned capture.
fn capture<F: std::future::Future<Output = ()>>(work: impl FnOnce() -> F) -> Captured {
    capture_filtered("trace", work)
}

/// [`capture`] of what `filter` (an `EnvFilter` directive) lets through.
fn capture_filtered<F: std::future::Future<Output = ()>>(
    filter: &str,
    work: impl FnOnce() -> F,
) -> Captured {
    let out = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(out.clone())
        .with_env_filter(filter)
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                work().await;
                // Let background settle tasks log too.
                tokio::time::sleep(Duration::from_millis(50)).await;
            });
    });
    out
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn signed(id: &str, timestamp: u64, body: &[u8]) -> http::request::Parts {
    let verifier = StandardWebhooks::new(SECRET).unwrap();
    let (mut parts, ()) = http::Request::post("/hook").body(()).unwrap().into_parts();
    parts.headers = verifier.sign_headers(id, timestamp, body).unwrap();
    parts
}

async fn receive(
    receiver: &Receiver,
    parts: http::request::Parts,
    body: &[u8],
    status: u16,
) -> Result<u16, Rejection> {
    let body = Bytes::copy_from_slice(body);
    receiver
        .receive(
            parts,
            || async move { Ok(body) },
            |_, _| async move { status },
            |s| *s,
        )
        .await
}

#[test]
fn body_timeout_is_answered_inside_the_span() {
    let out = capture(|| async {
        let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
            .body_timeout(Duration::from_millis(50))
            .namespace("capture-408")
            .build();
        let parts = signed("msg_slow", now(), b"{}");
        // A body that never arrives.
        let answer = receiver
            .receive(
                parts,
                std::future::pending,
                |_, _| async move { 204u16 },
                |s| *s,
            )
            .await;
        assert!(matches!(answer, Err(Rejection::BodyTimeout)), "{answer:?}");
    });
    let text = out.text();
    let line = text
        .lines()
        .find(|l| l.contains("body_timeout"))
        .unwrap_or_else(|| panic!("no 408 line in:\n{text}"));
    assert!(line.contains("webhook{"), "408 outside the span: {line}");
    assert!(line.contains("route=capture-408"), "{line}");
    assert!(line.contains("status=408"), "{line}");
    assert!(line.contains("latency_us="), "{line}");
}

#[test]
fn payload_too_large_is_answered_inside_the_span() {
    let out = capture(|| async {
        let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
            .body_limit(16)
            .namespace("capture-413")
            .build();
        let mut parts = signed("msg_big", now(), b"{}");
        parts
            .headers
            .insert("content-length", "17".parse().unwrap());
        let answer = receive(&receiver, parts, b"{}", 204).await;
        assert!(matches!(answer, Err(Rejection::PayloadTooLarge { .. })));
    });
    let text = out.text();
    let line = text
        .lines()
        .find(|l| l.contains("payload_too_large"))
        .unwrap_or_else(|| panic!("no 413 line in:\n{text}"));
    assert!(line.contains("webhook{"), "413 outside the span: {line}");
    assert!(
        line.contains("scheme=\"standard-webhooks\"") || line.contains("scheme=standard-webhooks"),
        "{line}"
    );
    assert!(line.contains("route=capture-413"), "{line}");
    assert!(line.contains("status=413"), "{line}");
    assert!(line.contains("latency_us="), "{line}");
}

/// A store that fails every operation.
struct Down;

#[async_trait::async_trait]
impl DedupStore for Down {
    async fn claim(&self, _: &str, _: ClaimToken, _: Duration) -> Result<Claim, StoreError> {
        Err(StoreError::Timeout)
    }
    async fn complete(
        &self,
        _: &str,
        _: ClaimToken,
        _: Duration,
    ) -> Result<Transition, StoreError> {
        Err(StoreError::Timeout)
    }
    async fn release(&self, _: &str, _: ClaimToken) -> Result<Transition, StoreError> {
        Err(StoreError::Timeout)
    }
    async fn extend(&self, _: &str, _: ClaimToken, _: Duration) -> Result<Transition, StoreError> {
        Err(StoreError::Timeout)
    }
}

#[test]
fn no_secret_body_or_signature_at_any_level() {
    let body = format!(r#"{{"type":"email.sent","data":{{"note":"{CANARY}"}}}}"#);
    let body = body.as_bytes().to_vec();
    let mut signatures = Vec::new();
    let out = capture(|| {
        let body = body.clone();
        let signatures = &mut signatures;
        async move {
            let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
                .namespace("capture-all")
                .build();
            let first = signed("msg_a", now(), &body);
            signatures.push(
                first.headers["webhook-signature"]
                    .to_str()
                    .unwrap()
                    .to_owned(),
            );
            assert_eq!(receive(&receiver, first.clone(), &body, 204).await, Ok(204));
            // duplicate, handler failure, tampered body, stale, unsigned
            assert!(receive(&receiver, first.clone(), &body, 204).await.is_err());
            let failing = signed("msg_b", now(), &body);
            signatures.push(
                failing.headers["webhook-signature"]
                    .to_str()
                    .unwrap()
                    .to_owned(),
            );
            assert_eq!(receive(&receiver, failing, &body, 500).await, Ok(500));
            let mut tampered = body.clone();
            tampered.push(b' ');
            assert!(receive(&receiver, first, &tampered, 204).await.is_err());
            let stale = signed("msg_c", now() - 3600, &body);
            signatures.push(
                stale.headers["webhook-signature"]
                    .to_str()
                    .unwrap()
                    .to_owned(),
            );
            assert!(receive(&receiver, stale, &body, 204).await.is_err());
            let (bare, ()) = http::Request::post("/hook").body(()).unwrap().into_parts();
            assert!(receive(&receiver, bare, &body, 204).await.is_err());
            // a JSON body that does not fit the handler's type
            let delivery = webhooks_core::Delivery::new(
                webhooks_core::Verified::new(
                    "standard-webhooks",
                    webhooks_core::MatchedKey::Secret(0),
                ),
                None,
                Bytes::from(body.clone()),
            );
            #[derive(Debug, serde::Deserialize)]
            #[allow(dead_code)]
            struct Strict {
                data: std::collections::BTreeMap<String, u32>,
            }
            assert!(delivery.json::<Strict>().is_err());
            // the store down at claim and at complete
            let down = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
                .store(Down)
                .namespace("capture-down")
                .build();
            let d = signed("msg_d", now(), &body);
            assert!(receive(&down, d, &body, 204).await.is_err());
            // a panicking handler
            let p = signed("msg_e", now(), &body);
            let panicked = receiver
                .receive(
                    p,
                    {
                        let body = Bytes::from(body.clone());
                        || async move { Ok(body) }
                    },
                    |_, _| async move { panic!("handler bug") },
                    |s: &u16| *s,
                )
                .await;
            assert_eq!(panicked, Err(Rejection::HandlerPanicked));
        }
    });
    let text = out.text();
    assert!(text.contains("webhook"), "nothing captured");
    assert!(
        text.contains("WARN"),
        "the handler's 500 and the 422 warn:\n{text}"
    );
    assert!(
        text.contains("ERROR"),
        "the store failure is an error:\n{text}"
    );
    for needle in [SECRET, SECRET_B64, CANARY, "email.sent"] {
        assert!(
            !text.contains(needle),
            "{needle:?} appears in the logs:\n{text}"
        );
    }
    for signature in &signatures {
        let value = signature.trim_start_matches("v1,");
        assert!(
            !text.contains(value),
            "a signature appears in the logs:\n{text}"
        );
    }
}

/// With the `webhook` span filtered out, the caller's span is the current
/// one while the pipeline runs: it must not get the delivery's `id`,
/// `key`, `status` or `outcome` (the pipeline recorded them into
/// `Span::current()`).
#[test]
fn a_callers_span_gets_no_field_of_the_pipeline() {
    let out = capture_filtered("tracing_capture=trace,webhooks_core=off", || async {
        let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
            .namespace("capture-callers-span")
            .build();
        let request = tracing::info_span!(
            "request",
            id = tracing::field::Empty,
            key = tracing::field::Empty,
            status = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        let body = b"{}";
        let parts = signed("msg_callers_span", now(), body);
        let _entered = request.enter();
        let answer = receive(&receiver, parts, body, 204).await;
        assert_eq!(answer, Ok(204));
        tracing::info!("answered");
    });
    let text = out.text();
    let line = (text.lines())
        .find(|l| l.contains("answered"))
        .unwrap_or_else(|| panic!("no line in:\n{text}"));
    assert!(line.contains("request"), "{line}");
    for field in ["msg_callers_span", "secret#0", "processed", "status="] {
        assert!(
            !line.contains(field),
            "{field} in the caller's span: {line}"
        );
    }
}

/// The boxed pipeline that owns its receiver (`receive_boxed`, the tower
/// layer's) runs in the same `webhook` span as `receive`: the id, the
/// matched key and the outcome recorded on it, its latency, and the
/// handler's own events inside it; it answers what `answer` made of the
/// result.
#[test]
fn the_owned_pipeline_runs_in_the_webhook_span() {
    let out = capture(|| async {
        let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
            .namespace("capture-owned")
            .build();
        let body = Bytes::from_static(b"{}");
        let parts = signed("msg_owned", now(), &body);
        let answer = |_: &Receiver, result: Result<u16, Rejection>| result.map(|s| s + 1);
        let work = receiver.clone().receive_boxed(
            parts,
            || async move { Ok(body) },
            |_, _| async {
                tracing::info!("handler ran");
                204u16
            },
            |s| *s,
            answer,
        );
        // It borrows nothing: it runs as a task of its own.
        assert_eq!(tokio::spawn(work).await.unwrap(), Ok(205));
        // A refusal too, answered in the span with its status.
        let parts = signed("msg_owned_late", now() - 3600, b"{}");
        let refused = receiver.clone().receive_boxed(
            parts,
            || async { Ok(Bytes::from_static(b"{}")) },
            |_, _| async { 204u16 },
            |s| *s,
            |_, result| result,
        );
        assert!(matches!(refused.await, Err(Rejection::Verify(_))));
    });
    let text = out.text();
    let ran = (text.lines())
        .find(|l| l.contains("handler ran"))
        .unwrap_or_else(|| panic!("no handler line in:\n{text}"));
    assert!(
        ran.contains("webhook{"),
        "the handler outside the span: {ran}"
    );
    assert!(ran.contains("route=capture-owned"), "{ran}");
    assert!(ran.contains("msg_owned"), "{ran}");
    assert!(ran.contains("key=secret#0"), "{ran}");
    let refused = (text.lines())
        .find(|l| l.contains("webhook refused"))
        .unwrap_or_else(|| panic!("no refusal line in:\n{text}"));
    assert!(refused.contains("status=401"), "{refused}");
    assert!(refused.contains("latency_us="), "{refused}");
}
