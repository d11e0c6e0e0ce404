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
//! | `pipeline-redis` | as `pipeline-dedup`, on `RedisStore` (`WEBHOOKS_REDIS_URL`, default the local server): the client's share of two round trips |
//! | `store` | `MemoryStore` claim + complete of `N` distinct keys |
//! | `ratios [NAME…]` | every provider row (or those named), its contenders interleaved: 101 rounds of a ~5 ms batch of each in turn, medians per call and per-round ratios to `raw` with min–max (a noisy machine drifts between criterion's sequential runs; here each round's contenders share the same moment) |
//! | `provider NAME WHO` | one provider row of `src/providers.rs` (the `schemes` bench's): `WHO` is `raw`, `ours` or another contender (`raw_with_parse`); `N` is then the third argument |
//!
//! ```text
//! valgrind --tool=callgrind --callgrind-out-file=cg.out target/release/instructions provider mailgun ours 2000
//! ```
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
        "pipeline-redis" => {
            // The Redis at `WEBHOOKS_REDIS_URL` (default the local one), keys
            // under a prefix of this run's own, kept for a minute.
            let url = std::env::var("WEBHOOKS_REDIS_URL")
                .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
            let prefix = format!(
                "instructions:{}:{}:",
                std::process::id(),
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_nanos()
            );
            let store = runtime
                .block_on(
                    webhooks_core::dedup::RedisStore::builder(&url)
                        .key_prefix(prefix)
                        .connect(),
                )
                .expect("Redis for pipeline-redis");
            let receiver = Receiver::builder(verifier.clone())
                .store(store)
                .retention(Duration::from_secs(60))
                // A benchmark's ids never come back: short on purpose.
                .allow_retention_below_retry_window()
                .build();
            pipeline(app(Some(receiver)), distinct(n), StatusCode::NO_CONTENT);
        }
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

#[path = "../providers.rs"]
mod providers;

/// `N` calls of one contender of one provider row.
#[inline(never)]
fn provider(name: &str, who: &str, n: usize) {
    let cases = providers::all();
    let Some(case) = cases.iter().find(|c| c.name == name) else {
        let names: Vec<_> = cases.iter().map(|c| c.name).collect();
        eprintln!("unknown provider {name}; one of {names:?}");
        std::process::exit(2);
    };
    case.check();
    let Some(f) = case.contender(who) else {
        eprintln!("unknown contender {who}: raw, ours or another's name");
        std::process::exit(2);
    };
    let started = std::time::Instant::now();
    provider_loop(&**f, n);
    eprintln!(
        "{name} {who}: {:.0} ns/iter",
        started.elapsed().as_nanos() as f64 / n as f64
    );
}

/// The measured loop (callgrind: the inclusive count of this function / `N`).
#[inline(never)]
fn provider_loop(f: &dyn Fn() -> bool, n: usize) {
    for _ in 0..n {
        assert!(black_box(f()));
    }
}

/// ns per call of a batch of `n` calls of `f`.
fn batch(f: &dyn Fn() -> bool, n: usize) -> f64 {
    let started = std::time::Instant::now();
    for _ in 0..n {
        assert!(black_box(f()));
    }
    started.elapsed().as_nanos() as f64 / n as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The `ratios` workload: for each row, 101 rounds; in each round every
/// contender runs one batch (sized to ~5 ms from a first estimate), in
/// order; the table gives each contender's median ns per call with min–max
/// across rounds, and its per-round ratio to `raw` (median, min–max).
fn ratios(filter: &[String]) {
    const ROUNDS: usize = 101;
    for case in providers::all() {
        if !filter.is_empty() && !filter.iter().any(|f| f == case.name) {
            continue;
        }
        case.check();
        let mut contenders: Vec<(&str, &dyn Fn() -> bool)> =
            vec![("raw", &*case.raw), ("webhooks_core", &*case.ours)];
        contenders.extend(case.others.iter().map(|(n, f)| (*n, &**f)));
        // Warm up and size the batches to ~5 ms each.
        let sizes: Vec<usize> = contenders
            .iter()
            .map(|(_, f)| {
                let estimate = batch(*f, 50).max(1.0);
                ((5_000_000.0 / estimate) as usize).clamp(1, 1_000_000)
            })
            .collect();
        let mut times = vec![Vec::with_capacity(ROUNDS); contenders.len()];
        for round in 0..ROUNDS {
            // Rotate who goes first, so no contender always follows another.
            for k in 0..contenders.len() {
                let i = (k + round) % contenders.len();
                times[i].push(batch(contenders[i].1, sizes[i]));
            }
        }
        for (i, (name, _)) in contenders.iter().enumerate() {
            let mut ratio: Vec<f64> = times[i]
                .iter()
                .zip(&times[0])
                .map(|(t, raw)| t / raw)
                .collect();
            let (lo, hi) = (
                times[i].iter().copied().fold(f64::INFINITY, f64::min),
                times[i].iter().copied().fold(0.0, f64::max),
            );
            let (rlo, rhi) = (
                ratio.iter().copied().fold(f64::INFINITY, f64::min),
                ratio.iter().copied().fold(0.0, f64::max),
            );
            println!(
                "{}\t{name}\t{:.0}\t{lo:.0}\t{hi:.0}\t{:.3}\t{rlo:.3}\t{rhi:.3}",
                case.name,
                median(&mut times[i].clone()),
                median(&mut ratio),
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("ratios") {
        ratios(&args[2..]);
        return;
    }
    if args.get(1).map(String::as_str) == Some("provider") {
        let (Some(name), Some(who)) = (args.get(2), args.get(3)) else {
            eprintln!("usage: instructions provider NAME raw|ours|OTHER [N]");
            std::process::exit(2);
        };
        let n = args.get(4).and_then(|n| n.parse().ok()).unwrap_or(10_000);
        provider(name, who, n);
        return;
    }
    let workload = args.get(1).map_or("pipeline-dedup", String::as_str);
    let n = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(10_000);
    run(workload, n);
}
