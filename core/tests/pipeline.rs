//! The receive pipeline without a web framework: the rows of its outcome
//! table that the HTTP conformance suite cannot observe from outside.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use webhooks_core::dedup::{Claim, ClaimToken, DedupStore, MemoryStore, StoreError, Transition};
use webhooks_core::scheme::StandardWebhooks;
use webhooks_core::{Receiver, Rejection, StoreFailure};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn request(id: &str, body: &[u8]) -> http::request::Parts {
    let verifier = StandardWebhooks::new(SECRET).unwrap();
    let (mut parts, ()) = http::Request::post("/hook").body(()).unwrap().into_parts();
    parts.headers = verifier.sign_headers(id, now(), body).unwrap();
    parts
}

/// Counts operations and can be told to fail `complete`.
#[derive(Default)]
struct Recording {
    inner: MemoryStore,
    releases: AtomicUsize,
    completes: AtomicUsize,
    fail_complete: bool,
    fail_claim: bool,
}

#[async_trait::async_trait]
impl DedupStore for Recording {
    async fn claim(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        if self.fail_claim {
            return Err(StoreError::Timeout);
        }
        self.inner.claim(key, token, lease).await
    }
    async fn complete(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
    ) -> Result<Transition, StoreError> {
        self.completes.fetch_add(1, Ordering::SeqCst);
        if self.fail_complete {
            return Err(StoreError::Timeout);
        }
        self.inner.complete(key, token, retention).await
    }
    async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, StoreError> {
        self.releases.fetch_add(1, Ordering::SeqCst);
        self.inner.release(key, token).await
    }
    async fn extend(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Transition, StoreError> {
        self.inner.extend(key, token, lease).await
    }
}

/// Signs `body` as delivery `id` and runs it through `receiver` with `handler`,
/// whose output is the response status.
async fn deliver<F, Fut>(
    receiver: &Receiver,
    id: &str,
    body: &[u8],
    handler: F,
) -> Result<u16, Rejection>
where
    F: FnOnce(http::request::Parts, webhooks_core::Delivery) -> Fut,
    Fut: std::future::Future<Output = u16>,
{
    let bytes = bytes::Bytes::copy_from_slice(body);
    receiver
        .process(request(id, body), bytes, handler, |s| *s)
        .await
}

fn receiver(store: Arc<Recording>) -> Receiver {
    Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .shared_store(store)
        .build()
}

#[tokio::test]
async fn dropped_request_releases_the_claim() {
    let store = Arc::new(Recording::default());
    let receiver = receiver(Arc::clone(&store));
    let started = Arc::new(tokio::sync::Notify::new());
    let signal = Arc::clone(&started);
    let slow = deliver(&receiver, "msg_drop", b"{}", move |_, _| async move {
        signal.notify_one();
        tokio::time::sleep(Duration::from_secs(3600)).await;
        204u16
    });
    // Drive the request until the handler runs, then drop it (client gone).
    tokio::select! {
        _ = slow => panic!("the handler cannot finish"),
        () = started.notified() => {}
    }
    // The background release runs on the runtime.
    for _ in 0..100 {
        if store.releases.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(store.releases.load(Ordering::SeqCst), 1);
    // And a retry runs the handler.
    let retry = deliver(&receiver, "msg_drop", b"{}", |_, _| async { 204u16 }).await;
    assert_eq!(retry, Ok(204));
}

#[tokio::test]
async fn failed_complete_still_returns_the_handlers_response() {
    let store = Arc::new(Recording {
        fail_complete: true,
        ..Recording::default()
    });
    let receiver = receiver(Arc::clone(&store));
    let result = deliver(&receiver, "msg_c", b"{}", |_, _| async { 202u16 }).await;
    assert_eq!(result, Ok(202));
    assert_eq!(store.completes.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn store_down_fails_closed_by_default_and_open_on_request() {
    let store = Arc::new(Recording {
        fail_claim: true,
        ..Recording::default()
    });
    let runs = Arc::new(AtomicUsize::new(0));
    let handler = |runs: Arc<AtomicUsize>| {
        move |_, _| async move {
            runs.fetch_add(1, Ordering::SeqCst);
            204u16
        }
    };
    let closed = receiver(Arc::clone(&store));
    let result = deliver(&closed, "msg_s", b"{}", handler(Arc::clone(&runs))).await;
    assert!(matches!(result, Err(Rejection::StoreUnavailable { .. })));
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    let open = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .shared_store(store)
        .on_store_failure(StoreFailure::Open)
        .build();
    let result = deliver(&open, "msg_s", b"{}", handler(Arc::clone(&runs))).await;
    assert_eq!(result, Ok(204));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn key_function_and_no_dedup() {
    // Deduplicate on a body field instead of the header id.
    let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .dedup_key_json_pointer("/event/id")
        .build();
    let body = br#"{"event":{"id":"evt_1"}}"#;
    let ok = |_, _| async { 204u16 };
    let first = deliver(&receiver, "msg_a", body, ok).await;
    assert_eq!(first, Ok(204));
    // Another header id, same event id: a duplicate.
    let second = deliver(&receiver, "msg_b", body, ok).await;
    assert_eq!(second, Err(Rejection::Duplicate));

    let no_dedup = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .no_dedup()
        .build();
    for _ in 0..2 {
        let r = deliver(&no_dedup, "msg_n", b"{}", ok).await;
        assert_eq!(r, Ok(204));
    }
}

#[tokio::test]
async fn rejection_responses_can_be_replaced() {
    let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .on_reject(|r| {
            let mut response = http::Response::new(bytes::Bytes::from(format!(
                "{{\"error\":\"{}\"}}",
                r.kind()
            )));
            *response.status_mut() = r.status();
            response
        })
        .build();
    let (parts, ()) = http::Request::post("/hook").body(()).unwrap().into_parts();
    let Err(rejection) = receiver
        .process(parts, "{}".into(), |_, _| async { 204u16 }, |s| *s)
        .await
    else {
        panic!("unsigned request accepted");
    };
    let response = receiver.rejection_response(&rejection);
    assert_eq!(response.status(), 400);
    assert_eq!(response.body().as_ref(), br#"{"error":"missing_header"}"#);
}

#[test]
fn content_length_is_checked_before_reading() {
    let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .body_limit(10)
        .build();
    let mut headers = http::HeaderMap::new();
    headers.insert("content-length", "11".parse().unwrap());
    assert_eq!(
        receiver.check_head(&headers),
        Err(Rejection::PayloadTooLarge { limit: 10 })
    );
    headers.insert("content-length", "10".parse().unwrap());
    assert_eq!(receiver.check_head(&headers), Ok(()));
    headers.insert("content-length", "ten".parse().unwrap());
    assert_eq!(receiver.check_head(&headers), Err(Rejection::BodyRead));
}

#[test]
fn delivery_debug_never_shows_the_body() {
    let delivery = webhooks_core::Delivery::new(
        webhooks_core::Verified::new("test", webhooks_core::MatchedKey::Secret(0)),
        None,
        bytes::Bytes::from_static(b"card=4242424242424242"),
    );
    let shown = format!("{delivery:?}");
    assert!(!shown.contains("4242"), "{shown}");
}
