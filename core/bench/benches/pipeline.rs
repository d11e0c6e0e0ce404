//! Cost of one delivery through the whole pipeline in an axum `Router`
//! (request in, response out, no network): what a receiver pays per
//! delivery on top of its handler.
//!
//! * `plain`: the route alone, the handler reading the body as `Bytes`;
//! * `verify_only`: behind `WebhookLayer` without dedup (Standard Webhooks v1);
//! * `verify_dedup_memory`: behind `WebhookLayer` with the in-process store:
//!   a fresh delivery id every iteration (claim + complete);
//! * `duplicate`: the same delivery again (verify + claim → 200 duplicate).
//!
//! ```text
//! cd core/bench && cargo bench --bench pipeline -- --warm-up-time 1 --measurement-time 3
//! ```

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::post;
use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use tower::ServiceExt as _;
use tower_webhooks::WebhookLayer;
use webhooks_core::Receiver;
use webhooks_core::scheme::StandardWebhooks;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

async fn handler(body: Bytes) -> StatusCode {
    black_box(body);
    StatusCode::NO_CONTENT
}

fn request(verifier: &StandardWebhooks, id: &str, body: &'static [u8]) -> Request<Body> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut request = Request::post("/hook").body(Body::from(body)).unwrap();
    *request.headers_mut() = verifier.sign_headers(id, now, body).unwrap();
    request
        .headers_mut()
        .insert("content-length", body.len().into());
    request
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let verifier = StandardWebhooks::new(SECRET).unwrap();
    let body: &'static [u8] = Box::leak(vec![b'a'; 1024].into_boxed_slice());
    let plain = Router::new().route("/hook", post(handler));
    let verify_only =
        Router::new()
            .route("/hook", post(handler))
            .layer(WebhookLayer::from_receiver(
                Receiver::builder(verifier.clone()).no_dedup().build(),
            ));
    let dedup = Router::new()
        .route("/hook", post(handler))
        .layer(WebhookLayer::new(verifier.clone()));

    let mut group = c.benchmark_group("pipeline_1KiB");
    // Requests are signed outside the timed part (signing is the sender's cost).
    let one = |app: &Router, request: Request<Body>| {
        runtime
            .block_on(app.clone().oneshot(request))
            .unwrap()
            .status()
    };
    group.bench_function("plain", |b| {
        b.iter_batched(
            || request(&verifier, "msg_plain", body),
            |r| assert_eq!(one(&plain, r), StatusCode::NO_CONTENT),
            criterion::BatchSize::SmallInput,
        )
    });
    group.bench_function("verify_only", |b| {
        b.iter_batched(
            || request(&verifier, "msg_verify", body),
            |r| assert_eq!(one(&verify_only, r), StatusCode::NO_CONTENT),
            criterion::BatchSize::SmallInput,
        )
    });
    let next = AtomicU64::new(0);
    group.bench_function("verify_dedup_memory", |b| {
        b.iter_batched(
            || {
                let id = format!("msg_{}", next.fetch_add(1, Ordering::Relaxed));
                request(&verifier, &id, body)
            },
            |r| assert_eq!(one(&dedup, r), StatusCode::NO_CONTENT),
            criterion::BatchSize::SmallInput,
        )
    });
    assert_eq!(
        one(&dedup, request(&verifier, "msg_dup", body)),
        StatusCode::NO_CONTENT
    );
    group.bench_function("duplicate", |b| {
        b.iter_batched(
            || request(&verifier, "msg_dup", body),
            |r| assert_eq!(one(&dedup, r), StatusCode::OK),
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
