//! The pipeline's metrics, read back through `metrics-util`'s debugging
//! recorder: the exact series and labels each outcome produces.

#![cfg(feature = "metrics")]

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use webhooks_core::dedup::{Claim, ClaimToken, DedupStore, StoreError, Transition};
use webhooks_core::scheme::StandardWebhooks;
use webhooks_core::{Receiver, Rejection};

const NEW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OLD_SECRET: &str = "whsec_b2xkLXNlY3JldC1iZWluZy1yb3RhdGVkLW91dA==";

fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this test binary");
        snapshotter
    })
}

/// `name{label=value,…}` → value, for the series of `route` (counters as
/// their count, histograms as their number of samples).
///
/// Snapshots drain counters and histograms, and tests run concurrently: every snapshot is
/// folded into one accumulated view under a lock.
fn series(route: &str) -> BTreeMap<String, u64> {
    static SEEN: Mutex<BTreeMap<(String, String), u64>> = Mutex::new(BTreeMap::new());
    let mut seen = SEEN.lock().unwrap();
    for (key, _, _, value) in snapshotter().snapshot().into_vec() {
        let key = key.key();
        let Some(of) = key.labels().find(|l| l.key() == "route") else {
            continue;
        };
        let labels: Vec<String> = key
            .labels()
            .filter(|l| l.key() != "route")
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let id = (
            of.value().to_owned(),
            format!("{}{{{}}}", key.name(), labels.join(",")),
        );
        match value {
            DebugValue::Counter(n) => *seen.entry(id).or_default() += n,
            DebugValue::Histogram(samples) => *seen.entry(id).or_default() += samples.len() as u64,
            DebugValue::Gauge(_) => {}
        }
    }
    seen.iter()
        .filter(|((r, _), n)| r == route && **n > 0)
        .map(|((_, name), n)| (name.clone(), *n))
        .collect()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn request(secret: &str, id: &str, body: &[u8]) -> http::request::Parts {
    let signer = StandardWebhooks::new(secret).unwrap();
    let (mut parts, ()) = http::Request::post("/hook").body(()).unwrap().into_parts();
    parts.headers = signer.sign_headers(id, now(), body).unwrap();
    parts
}

async fn deliver(
    receiver: &Receiver,
    parts: http::request::Parts,
    status: u16,
) -> Result<u16, Rejection> {
    receiver
        .process(
            parts,
            bytes::Bytes::from_static(b"{}"),
            |_, _| async move { status },
            |s| *s,
        )
        .await
}

fn expected(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

#[tokio::test]
async fn every_outcome_has_its_series() {
    snapshotter();
    let route = "signals-outcomes";
    let verifier = StandardWebhooks::builder()
        .secret(NEW_SECRET)
        .secret(OLD_SECRET)
        .build()
        .unwrap();
    let receiver = Receiver::builder(verifier).namespace(route).build();

    // processed with the primary secret, then its duplicate
    assert_eq!(
        deliver(&receiver, request(NEW_SECRET, "m1", b"{}"), 204).await,
        Ok(204)
    );
    assert_eq!(
        deliver(&receiver, request(NEW_SECRET, "m1", b"{}"), 204).await,
        Err(Rejection::Duplicate)
    );
    // the rotated secret, a handler failure
    assert_eq!(
        deliver(&receiver, request(OLD_SECRET, "m2", b"{}"), 500).await,
        Ok(500)
    );
    // a forgery, and a request without headers
    let mut forged = request(NEW_SECRET, "m3", b"{}");
    forged.headers = request(NEW_SECRET, "m3", b"{\"other\":1}").headers;
    assert!(deliver(&receiver, forged, 204).await.is_err());
    let (bare, ()) = http::Request::post("/hook").body(()).unwrap().into_parts();
    assert!(deliver(&receiver, bare, 204).await.is_err());
    // a panicking handler
    let panicked = receiver
        .process(
            request(NEW_SECRET, "m4", b"{}"),
            bytes::Bytes::from_static(b"{}"),
            |_, _| async move { panic!("handler bug") },
            |s: &u16| *s,
        )
        .await;
    assert_eq!(panicked, Err(Rejection::HandlerPanicked));

    assert_eq!(
        series(route),
        expected(&[
            ("webhooks_body_size_bytes{scheme=standard-webhooks}", 6),
            (
                "webhooks_claim_duration_seconds{scheme=standard-webhooks}",
                4
            ),
            (
                "webhooks_duplicates_total{scheme=standard-webhooks,state=completed}",
                1
            ),
            (
                "webhooks_handler_duration_seconds{scheme=standard-webhooks}",
                3
            ),
            (
                "webhooks_handler_total{scheme=standard-webhooks,class=2xx}",
                1
            ),
            (
                "webhooks_handler_total{scheme=standard-webhooks,class=5xx}",
                1
            ),
            (
                "webhooks_handler_total{scheme=standard-webhooks,class=panic}",
                1
            ),
            ("webhooks_received_total{scheme=standard-webhooks}", 6),
            (
                "webhooks_rejected_total{scheme=standard-webhooks,reason=missing_header}",
                1
            ),
            (
                "webhooks_rejected_total{scheme=standard-webhooks,reason=no_matching_signature}",
                1
            ),
            (
                "webhooks_verified_total{scheme=standard-webhooks,key=primary}",
                3
            ),
            (
                "webhooks_verified_total{scheme=standard-webhooks,key=rotated}",
                1
            ),
            (
                "webhooks_verify_duration_seconds{scheme=standard-webhooks}",
                6
            ),
        ])
    );
}

/// The outcomes the first test does not reach: a retry while the first
/// attempt runs (409), a handler's 4xx, a body that never arrives (408).
#[tokio::test]
async fn in_flight_handler_4xx_and_body_timeout_have_their_series() {
    snapshotter();
    let route = "signals-more";
    let receiver = Receiver::builder(StandardWebhooks::new(NEW_SECRET).unwrap())
        .namespace(route)
        .body_timeout(Duration::from_millis(20))
        .build();
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let first = {
        let (receiver, gate) = (receiver.clone(), std::sync::Arc::clone(&gate));
        tokio::spawn(async move {
            receiver
                .process(
                    request(NEW_SECRET, "slow", b"{}"),
                    bytes::Bytes::from_static(b"{}"),
                    |_, _| async move {
                        let _ = started_tx.send(());
                        gate.notified().await;
                        204u16
                    },
                    |s| *s,
                )
                .await
        })
    };
    started.await.unwrap();
    let retry = deliver(&receiver, request(NEW_SECRET, "slow", b"{}"), 204).await;
    assert!(
        matches!(retry, Err(Rejection::InFlight { .. })),
        "{retry:?}"
    );
    gate.notify_one();
    assert_eq!(first.await.unwrap(), Ok(204));
    assert_eq!(
        deliver(&receiver, request(NEW_SECRET, "unprocessable", b"{}"), 422).await,
        Ok(422)
    );
    let stalled = receiver
        .receive(
            request(NEW_SECRET, "stalled", b"{}"),
            std::future::pending,
            |_, _| async move { 204u16 },
            |s| *s,
        )
        .await;
    assert_eq!(stalled, Err(Rejection::BodyTimeout));

    assert_eq!(
        series(route),
        expected(&[
            ("webhooks_body_size_bytes{scheme=standard-webhooks}", 3),
            (
                "webhooks_claim_duration_seconds{scheme=standard-webhooks}",
                3
            ),
            (
                "webhooks_duplicates_total{scheme=standard-webhooks,state=in_flight}",
                1
            ),
            (
                "webhooks_handler_duration_seconds{scheme=standard-webhooks}",
                2
            ),
            (
                "webhooks_handler_total{scheme=standard-webhooks,class=2xx}",
                1
            ),
            (
                "webhooks_handler_total{scheme=standard-webhooks,class=4xx}",
                1
            ),
            ("webhooks_received_total{scheme=standard-webhooks}", 4),
            (
                "webhooks_rejected_total{scheme=standard-webhooks,reason=body_timeout}",
                1
            ),
            (
                "webhooks_verified_total{scheme=standard-webhooks,key=primary}",
                3
            ),
            (
                "webhooks_verify_duration_seconds{scheme=standard-webhooks}",
                3
            ),
        ])
    );
}

/// A store that claims but fails to settle: every later operation errs.
struct FailsToSettle(webhooks_core::dedup::MemoryStore);

#[async_trait::async_trait]
impl DedupStore for FailsToSettle {
    async fn claim(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        self.0.claim(key, token, lease).await
    }
    async fn complete(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
    ) -> Result<Transition, StoreError> {
        Down.complete(key, token, retention).await
    }
    async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, StoreError> {
        Down.release(key, token).await
    }
    async fn extend(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Transition, StoreError> {
        Down.extend(key, token, lease).await
    }
}

/// `complete` and `release` failures are counted by operation, once per
/// try (`complete_retry` zero: one try), beside the handler's outcome.
#[tokio::test]
async fn settle_failures_are_counted_by_operation() {
    snapshotter();
    let route = "signals-settle-fails";
    let receiver = Receiver::builder(StandardWebhooks::new(NEW_SECRET).unwrap())
        .store(FailsToSettle(webhooks_core::dedup::MemoryStore::new()))
        .complete_retry(Duration::ZERO)
        .namespace(route)
        .build();
    assert_eq!(
        deliver(&receiver, request(NEW_SECRET, "ok", b"{}"), 204).await,
        Ok(204)
    );
    assert_eq!(
        deliver(&receiver, request(NEW_SECRET, "failed", b"{}"), 503).await,
        Ok(503)
    );
    // Let a background retry (if any) run.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let got = series(route);
    let errors: BTreeMap<_, _> = got
        .iter()
        .filter(|(k, _)| k.starts_with("webhooks_store_errors_total"))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    assert_eq!(
        errors,
        expected(&[
            (
                "webhooks_store_errors_total{scheme=standard-webhooks,operation=complete}",
                1
            ),
            (
                "webhooks_store_errors_total{scheme=standard-webhooks,operation=release}",
                1
            ),
        ]),
        "{got:#?}"
    );
}

/// A store that is down.
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

#[tokio::test]
async fn store_failures_are_counted_by_operation() {
    snapshotter();
    let route = "signals-store-down";
    let receiver = Receiver::builder(StandardWebhooks::new(NEW_SECRET).unwrap())
        .store(Down)
        .namespace(route)
        .build();
    let answer = deliver(&receiver, request(NEW_SECRET, "d1", b"{}"), 204).await;
    assert!(matches!(answer, Err(Rejection::StoreUnavailable { .. })));
    let got = series(route);
    assert_eq!(
        got.get("webhooks_store_errors_total{scheme=standard-webhooks,operation=claim}"),
        Some(&1),
        "{got:#?}"
    );
    assert_eq!(
        got.get("webhooks_rejected_total{scheme=standard-webhooks,reason=store_unavailable}"),
        Some(&1),
        "{got:#?}"
    );
    assert!(!got.keys().any(|k| k.starts_with("webhooks_handler_total")));
}

#[tokio::test]
async fn no_series_carries_an_id_or_a_secret() {
    snapshotter();
    let route = "signals-labels";
    let receiver = Receiver::builder(StandardWebhooks::new(NEW_SECRET).unwrap())
        .namespace(route)
        .build();
    deliver(
        &receiver,
        request(NEW_SECRET, "msg_secret_looking_id", b"{}"),
        204,
    )
    .await
    .unwrap();
    let got = series(route);
    assert!(!got.is_empty());
    for name in got.keys() {
        assert!(
            !name.contains("msg_secret_looking_id")
                && !name.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            "{name} leaks an id or a secret"
        );
        let labels = &name[name.find('{').unwrap() + 1..name.len() - 1];
        for label in labels.split(',') {
            let key = label.split('=').next().unwrap();
            assert!(
                ["scheme", "key", "reason", "state", "operation", "class"].contains(&key),
                "unexpected label {key} in {name}"
            );
        }
    }
}

/// `route_label` names the metrics' `route` instead of the namespace.
#[tokio::test]
async fn the_route_label_replaces_the_namespace_in_series() {
    snapshotter();
    let namespace = "signals-label-namespace";
    let label = "signals-label";
    let verifier = StandardWebhooks::new(NEW_SECRET).unwrap();
    let receiver = Receiver::builder(verifier)
        .namespace(namespace)
        .route_label(label)
        .build();
    assert_eq!(
        deliver(&receiver, request(NEW_SECRET, "label-1", b"{}"), 204).await,
        Ok(204)
    );
    let by_label = series(label);
    assert_eq!(
        by_label.get("webhooks_received_total{scheme=standard-webhooks}"),
        Some(&1),
        "{by_label:?}"
    );
    assert!(series(namespace).is_empty());
}

/// A store whose claims are always taken over before they settle: `complete`
/// and `release` find another attempt's token (a lease that ran out).
struct TakenOver(webhooks_core::dedup::MemoryStore);

#[async_trait::async_trait]
impl DedupStore for TakenOver {
    async fn claim(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        self.0.claim(key, token, lease).await
    }
    async fn complete(
        &self,
        _: &str,
        _: ClaimToken,
        _: Duration,
    ) -> Result<Transition, StoreError> {
        Ok(Transition::Stale)
    }
    async fn release(&self, _: &str, _: ClaimToken) -> Result<Transition, StoreError> {
        Ok(Transition::Stale)
    }
    async fn extend(&self, _: &str, _: ClaimToken, _: Duration) -> Result<Transition, StoreError> {
        Ok(Transition::Stale)
    }
}

/// A settlement refused because the lease was lost (another attempt took
/// the claim over) is counted once per claim, completed or released: the
/// series the lease-loss alert reads (docs/monitoring).
#[tokio::test]
async fn lost_leases_are_counted_once_per_claim() {
    snapshotter();
    let route = "signals-lease-lost";
    let receiver = Receiver::builder(StandardWebhooks::new(NEW_SECRET).unwrap())
        .store(TakenOver(webhooks_core::dedup::MemoryStore::new()))
        .namespace(route)
        .build();
    assert_eq!(
        deliver(&receiver, request(NEW_SECRET, "done", b"{}"), 204).await,
        Ok(204)
    );
    assert_eq!(
        deliver(&receiver, request(NEW_SECRET, "failed", b"{}"), 500).await,
        Ok(500)
    );
    let got = series(route);
    assert_eq!(
        got.get("webhooks_lease_lost_total{scheme=standard-webhooks}"),
        Some(&2),
        "{got:#?}"
    );
    assert!(
        !got.keys()
            .any(|k| k.starts_with("webhooks_store_errors_total")),
        "a lost lease is not a store error: {got:#?}"
    );
}
