//! The receive pipeline without a web framework: the rows of its outcome
//! table that the HTTP conformance suite cannot observe from outside.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[cfg(feature = "postgres")]
mod support;

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

/// Counts operations, records the keys it is asked to claim, and can be
/// told to fail or slow down some of them.
#[derive(Default)]
struct Recording {
    inner: MemoryStore,
    releases: AtomicUsize,
    completes: AtomicUsize,
    extends: AtomicUsize,
    keys: std::sync::Mutex<Vec<String>>,
    /// Every `complete` fails.
    fail_complete: bool,
    /// The first this many `complete`s fail.
    failing_completes: AtomicUsize,
    /// Each `complete` waits this long first.
    complete_delay: Duration,
    /// Each `release` waits this long before releasing.
    release_delay: Duration,
    fail_claim: bool,
    /// `claim` fails with a permanent error.
    refuse_claim: bool,
}

#[async_trait::async_trait]
impl DedupStore for Recording {
    async fn claim(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        self.keys.lock().unwrap().push(key.to_owned());
        if self.fail_claim {
            return Err(StoreError::Timeout);
        }
        if self.refuse_claim {
            return Err(StoreError::permanent(std::io::Error::other(
                "invalid byte sequence for encoding",
            )));
        }
        self.inner.claim(key, token, lease).await
    }
    async fn complete(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
    ) -> Result<Transition, StoreError> {
        tokio::time::sleep(self.complete_delay).await;
        self.completes.fetch_add(1, Ordering::SeqCst);
        let failing = self
            .failing_completes
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if self.fail_complete || failing {
            return Err(StoreError::Timeout);
        }
        self.inner.complete(key, token, retention).await
    }
    async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, StoreError> {
        tokio::time::sleep(self.release_delay).await;
        self.releases.fetch_add(1, Ordering::SeqCst);
        self.inner.release(key, token).await
    }
    async fn extend(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Transition, StoreError> {
        self.extends.fetch_add(1, Ordering::SeqCst);
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
    assert!(store.completes.load(Ordering::SeqCst) >= 1);
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
    let result = deliver(
        &open,
        "msg_s",
        b"{}",
        |_, delivery: webhooks_core::Delivery| {
            let runs = Arc::clone(&runs);
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                // Fail-open claimed nothing: the delivery must not say it did.
                assert_eq!(delivery.dedup_key, None);
                204u16
            }
        },
    )
    .await;
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

/// Polls `f` every 20 ms for up to `within` until it holds.
async fn eventually(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    f()
}

#[tokio::test]
async fn request_dropped_during_complete_still_completes() {
    let store = Arc::new(Recording {
        complete_delay: Duration::from_millis(300),
        ..Recording::default()
    });
    let receiver = receiver(Arc::clone(&store));
    // The handler answers at once; the request is dropped 100 ms later,
    // while `complete` is still under way (the client went away).
    let dropped = tokio::time::timeout(
        Duration::from_millis(100),
        deliver(&receiver, "msg_gone", b"{}", |_, _| async { 204u16 }),
    )
    .await;
    assert!(dropped.is_err(), "the request must be dropped mid-complete");
    assert!(
        eventually(Duration::from_secs(3), || store
            .completes
            .load(Ordering::SeqCst)
            == 1)
        .await
    );
    let retry = deliver(&receiver, "msg_gone", b"{}", |_, _| async { 204u16 }).await;
    assert_eq!(retry, Err(Rejection::Duplicate));
}

#[tokio::test]
async fn request_dropped_during_release_still_releases() {
    let store = Arc::new(Recording {
        release_delay: Duration::from_millis(300),
        ..Recording::default()
    });
    // The handler fails at once, so the claim is released; the request is
    // dropped 100 ms later, while `release` is still under way.
    let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .shared_store(Arc::clone(&store) as Arc<dyn DedupStore>)
        .lease(Duration::from_secs(60))
        .build();
    let dropped = tokio::time::timeout(
        Duration::from_millis(100),
        deliver(&receiver, "msg_fails", b"{}", |_, _| async { 500u16 }),
    )
    .await;
    assert!(dropped.is_err(), "the request must be dropped mid-release");
    assert!(
        eventually(Duration::from_secs(3), || store
            .releases
            .load(Ordering::SeqCst)
            == 1)
        .await
    );
    // Released, not left to its 60 s lease: the sender's retry runs now.
    let retry = deliver(&receiver, "msg_fails", b"{}", |_, _| async { 204u16 }).await;
    assert_eq!(retry, Ok(204));
}

#[tokio::test]
async fn failed_complete_is_retried_in_the_background() {
    let store = Arc::new(Recording {
        failing_completes: AtomicUsize::new(3),
        ..Recording::default()
    });
    // A lease shorter than the retries (100 + 200 + 400 ms): renewal keeps
    // the claim while the completion is retried.
    let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .shared_store(Arc::clone(&store) as Arc<dyn DedupStore>)
        .lease(Duration::from_millis(300))
        .build();
    let first = deliver(&receiver, "msg_retry", b"{}", |_, _| async { 204u16 }).await;
    assert_eq!(first, Ok(204), "the handler's answer goes out at once");
    assert!(
        eventually(Duration::from_secs(5), || store
            .completes
            .load(Ordering::SeqCst)
            == 4)
        .await
    );
    let retry = deliver(&receiver, "msg_retry", b"{}", |_, _| async { 204u16 }).await;
    assert_eq!(retry, Err(Rejection::Duplicate));
}

#[tokio::test]
async fn complete_retries_are_bounded() {
    let store = Arc::new(Recording {
        fail_complete: true,
        ..Recording::default()
    });
    // Tries at 0 and 100 ms; the next (300 ms) would leave the 250 ms window.
    let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .shared_store(Arc::clone(&store) as Arc<dyn DedupStore>)
        .complete_retry(Duration::from_millis(250))
        .build();
    let result = deliver(&receiver, "msg_bounded", b"{}", |_, _| async { 204u16 }).await;
    assert_eq!(result, Ok(204));
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(store.completes.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn slow_handler_renews_its_lease() {
    let store = Arc::new(Recording::default());
    let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .shared_store(Arc::clone(&store) as Arc<dyn DedupStore>)
        .lease(Duration::from_millis(300))
        .build();
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = |ms: u64| {
        let runs = Arc::clone(&runs);
        move |_, _| async move {
            runs.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            204u16
        }
    };
    let slow = deliver(&receiver, "msg_slow", b"{}", counted(900));
    let retry = async {
        // Twice the lease later: the holder renewed, so no takeover.
        tokio::time::sleep(Duration::from_millis(600)).await;
        deliver(&receiver, "msg_slow", b"{}", counted(0)).await
    };
    let (slow, retry) = tokio::join!(slow, retry);
    assert_eq!(slow, Ok(204));
    assert!(
        matches!(retry, Err(Rejection::InFlight { .. })),
        "{retry:?}"
    );
    assert!(store.extends.load(Ordering::SeqCst) >= 2);
    let after = deliver(&receiver, "msg_slow", b"{}", counted(0)).await;
    assert_eq!(after, Err(Rejection::Duplicate));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// Signs a JSON body carrying `id` and runs it through a receiver that
/// deduplicates on that id.
async fn deliver_body_id(receiver: &Receiver, id: &str) -> Result<u16, Rejection> {
    let body = serde_json::to_vec(&serde_json::json!({ "id": id })).unwrap();
    deliver(receiver, "msg_header", &body, |_, _| async { 204u16 }).await
}

#[tokio::test]
async fn ids_reach_the_store_as_safe_keys() {
    let store = Arc::new(Recording::default());
    let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .shared_store(Arc::clone(&store) as Arc<dyn DedupStore>)
        .dedup_key_json_pointer("/id")
        .build();
    let long = "x".repeat(1000);
    let ids = [
        "evt_plain",
        "nul\u{0}byte",
        "tab\there",
        "line\nbreak",
        "caf\u{e9}",
        long.as_str(),
        "webhooks:#sha256:0000",
    ];
    for id in ids {
        assert_eq!(deliver_body_id(&receiver, id).await, Ok(204), "{id:?}");
        // The same id again is a duplicate: the digest is stable.
        assert_eq!(
            deliver_body_id(&receiver, id).await,
            Err(Rejection::Duplicate),
            "{id:?}"
        );
    }
    let keys = store.keys.lock().unwrap().clone();
    let mut distinct = keys.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), ids.len(), "one key per id: {keys:?}");
    for key in &keys {
        assert!(
            key.len() <= webhooks_core::receiver::MAX_STORE_KEY_LEN,
            "{key}"
        );
        assert!(key.bytes().all(|b| (0x20..0x7f).contains(&b)), "{key:?}");
        assert!(key.starts_with("webhooks:"), "{key}");
    }
    assert!(keys.contains(&"webhooks:standard-webhooks:evt_plain".to_owned()));
}

#[tokio::test]
async fn permanent_store_error_is_400_not_503() {
    let store = Arc::new(Recording {
        refuse_claim: true,
        ..Recording::default()
    });
    let receiver = receiver(store);
    let result = deliver(&receiver, "msg_refused", b"{}", |_, _| async { 204u16 }).await;
    assert_eq!(result, Err(Rejection::IdRefused));
    assert_eq!(Rejection::IdRefused.status(), 400);
}

/// PostgreSQL refuses a NUL byte in text (SQLSTATE 22021): an id carrying
/// one must not answer 503 forever.
#[cfg(feature = "postgres")]
#[tokio::test]
async fn nul_in_an_id_is_processed_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    let store = webhooks_core::dedup::store_from_url(&url).await.unwrap();
    let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .shared_store(store)
        .namespace(format!("pipeline-nul-{}", support::unique_suffix()))
        .dedup_key_json_pointer("/id")
        .build();
    assert_eq!(deliver_body_id(&receiver, "evt\u{0}1").await, Ok(204));
    assert_eq!(
        deliver_body_id(&receiver, "evt\u{0}1").await,
        Err(Rejection::Duplicate)
    );
}

#[test]
fn on_reject_cannot_change_the_protocol() {
    // A hook that forgets the status and sets protocol headers of its own.
    let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .on_reject(|r| {
            let mut response = http::Response::new(bytes::Bytes::from(r.kind()));
            response
                .headers_mut()
                .insert("retry-after", http::HeaderValue::from_static("999"));
            response
                .headers_mut()
                .insert("webhook-duplicate", http::HeaderValue::from_static("false"));
            response
        })
        .build();
    let missing = receiver.rejection_response(&Rejection::Verify(
        webhooks_core::VerifyError::MissingHeader("webhook-id"),
    ));
    assert_eq!(missing.status(), 400);
    assert_eq!(missing.body().as_ref(), b"missing_header");
    assert!(missing.headers().get("retry-after").is_none());
    assert!(missing.headers().get("webhook-duplicate").is_none());
    let down = receiver.rejection_response(&Rejection::StoreUnavailable {
        retry_after: Duration::from_secs(5),
    });
    assert_eq!(down.status(), 503);
    assert_eq!(down.headers()["retry-after"], "5");
    let dup = receiver.rejection_response(&Rejection::Duplicate);
    assert_eq!(dup.status(), 200);
    assert_eq!(dup.headers()["webhook-duplicate"], "true");
    let misfit =
        receiver.rejection_response(&Rejection::Extract(webhooks_core::ExtractError::Json {
            path: "data.count".into(),
            message: "invalid type".into(),
        }));
    assert_eq!(misfit.status(), 422);
    assert_eq!(misfit.body().as_ref(), b"invalid_json");
}

#[tokio::test]
async fn body_read_has_a_deadline() {
    let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .body_timeout(Duration::from_millis(50))
        .build();
    let stalled = receiver
        .read_body(std::future::pending::<Result<bytes::Bytes, Rejection>>())
        .await;
    assert_eq!(stalled, Err(Rejection::BodyTimeout));
    assert_eq!(Rejection::BodyTimeout.status(), 408);
    let quick = receiver.read_body(async { Ok("{}".into()) }).await;
    assert_eq!(quick, Ok(bytes::Bytes::from_static(b"{}")));
}
