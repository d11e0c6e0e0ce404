//! A fixed workload for counting instructions with callgrind (repeatable on a
//! noisy machine, unlike timings): before/after figures for code changes.
//!
//! ```text
//! cd core/bench && cargo build --release --bins
//! valgrind --tool=callgrind --callgrind-out-file=cg.out target/release/instructions pipeline-dedup 20000
//! callgrind_annotate --inclusive=yes cg.out | head -60
//! ```
//!
//! Workloads (`N` iterations each, after one untimed warm-up):
//!
//! | workload | what runs `N` times |
//! |---|---|
//! | `raw` | pre-keyed HMAC-SHA256 of a 1 KiB Standard Webhooks delivery, compared with its tag |
//! | `verify` | `StandardWebhooks::verify` of that delivery |
//! | `pipeline-bare` | a 1 KiB POST through an axum `Router` (`oneshot`, no network), no layer |
//! | `pipeline-verify` | the same behind `WebhookLayer`, `no_dedup()` |
//! | `pipeline-dedup` | the same behind `WebhookLayer` with the in-process store, `N` distinct ids |
//! | `pipeline-dup` | the same delivery again (answered 200 duplicate) |
//! | `store` | `MemoryStore` claim + complete of `N` distinct keys |
//!
//! Requests are signed before the loop; divide the inclusive instruction
//! count of `run` by `N`.

use std::hint::black_box;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::post;
use bytes::Bytes;
use hmac_shim::keyed_raw;
use tower::ServiceExt as _;
use tower_webhooks::WebhookLayer;
use webhooks_core::Receiver;
use webhooks_core::Verifier as _;
use webhooks_core::dedup::{ClaimToken, DedupStore as _, MemoryStore};
use webhooks_core::scheme::StandardWebhooks;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

mod hmac_shim {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD as B64;
    use hmac::{KeyInit as _, Mac as _};

    /// A pre-keyed raw HMAC check of `{id}.{ts}.{body}` against `tag`.
    pub(crate) fn keyed_raw(secret: &str) -> impl Fn(&str, &str, &[u8], &[u8]) -> bool {
        let key = B64.decode(secret.trim_start_matches("whsec_")).unwrap();
        let keyed = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
        move |id, ts, body, tag| {
            let mut mac = std::hint::black_box(&keyed).clone();
            mac.update(id.as_bytes());
            mac.update(b".");
            mac.update(ts.as_bytes());
            mac.update(b".");
            mac.update(body);
            mac.finalize().into_bytes().as_slice() == tag
        }
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn request(verifier: &StandardWebhooks, id: &str, body: &'static [u8]) -> Request<Body> {
    let mut request = Request::post("/hook").body(Body::from(body)).unwrap();
    *request.headers_mut() = verifier.sign_headers(id, now(), body).unwrap();
    request
        .headers_mut()
        .insert("content-length", body.len().into());
    request
}

#[inline(never)]
fn run(workload: &str, n: usize) {
    let verifier = StandardWebhooks::new(SECRET).unwrap();
    let body: &'static [u8] = Box::leak(vec![b'a'; 1024].into_boxed_slice());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let handler = post(|body: Bytes| async move {
        black_box(body);
        StatusCode::NO_CONTENT
    });
    let app = |layer: Option<Receiver>| {
        let router = Router::new().route("/hook", handler.clone());
        match layer {
            Some(r) => router.layer(WebhookLayer::from_receiver(r)),
            None => router,
        }
    };
    let pipeline = |app: Router, ids: Vec<String>, expect: StatusCode| {
        let requests: Vec<_> = ids.iter().map(|id| request(&verifier, id, body)).collect();
        // Warm-up: a delivery of its own, except for duplicates (the first one).
        let warm = if expect == StatusCode::OK {
            "msg_0"
        } else {
            "msg_warm"
        };
        let first = request(&verifier, warm, body);
        runtime.block_on(async {
            // Warm-up (and, for duplicates, the first delivery).
            let _ = app.clone().oneshot(first).await;
            for r in requests {
                let status = timed(&app, r).await;
                assert_eq!(status, expect);
            }
        });
    };
    let distinct = |n: usize| (0..n).map(|i| format!("msg_{i}")).collect::<Vec<_>>();
    match workload {
        "raw" | "verify" => {
            let ts = now();
            let headers = verifier.sign_headers("msg_1", ts, body).unwrap();
            let sig = headers["webhook-signature"].to_str().unwrap();
            use base64::Engine as _;
            let tag = base64::engine::general_purpose::STANDARD
                .decode(sig.trim_start_matches("v1,"))
                .unwrap();
            let raw = keyed_raw(SECRET);
            let ts_text = ts.to_string();
            let at = SystemTime::UNIX_EPOCH + Duration::from_secs(ts);
            let started = std::time::Instant::now();
            for _ in 0..n {
                if workload == "raw" {
                    assert!(raw("msg_1", &ts_text, black_box(body), &tag));
                } else {
                    black_box(
                        verifier
                            .verify(black_box(&headers), black_box(body), at)
                            .unwrap(),
                    );
                }
            }
            // Natively (not under callgrind), a rough timing too.
            eprintln!(
                "{workload}: {:.0} ns/iter",
                started.elapsed().as_nanos() as f64 / n as f64
            );
        }
        "pipeline-bare" => pipeline(app(None), vec!["msg_0".into(); n], StatusCode::NO_CONTENT),
        "pipeline-verify" => pipeline(
            app(Some(Receiver::builder(verifier.clone()).no_dedup().build())),
            vec!["msg_0".into(); n],
            StatusCode::NO_CONTENT,
        ),
        "pipeline-dedup" => pipeline(
            app(Some(Receiver::new(verifier.clone()))),
            distinct(n),
            StatusCode::NO_CONTENT,
        ),
        "pipeline-dup" => pipeline(
            app(Some(Receiver::new(verifier.clone()))),
            vec!["msg_0".into(); n],
            StatusCode::OK,
        ),
        "store" => runtime.block_on(async {
            let store = MemoryStore::new();
            let keys: Vec<_> = distinct(n)
                .into_iter()
                .map(|id| format!("webhooks:standard-webhooks:{id}"))
                .collect();
            for key in &keys {
                let token = ClaimToken::random();
                store
                    .claim(key, token, Duration::from_secs(60))
                    .await
                    .unwrap();
                let _ = store
                    .complete(key, token, Duration::from_secs(86_400))
                    .await
                    .unwrap();
            }
        }),
        other => {
            eprintln!("unknown workload {other}");
            std::process::exit(2);
        }
    }
}

#[inline(never)]
async fn timed(app: &Router, request: Request<Body>) -> StatusCode {
    app.clone().oneshot(request).await.unwrap().status()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let workload = args.get(1).map_or("pipeline-dedup", String::as_str);
    let n = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(10_000);
    run(workload, n);
}
