//! Instructions per delivery, the measure of `docs/performance.md`
//! ("Instructions per delivery"): `N` in-process requests through a
//! framework's own service, after a warm-up, with callgrind collecting only
//! inside [`measured`], which does nothing but send them.
//!
//! ```text
//! delivery_cost <axum|actix> <bare|memory|verify|duplicate|peer> [N] [WARMUP]
//! ```
//!
//! Run it through `core/bench/instructions.sh`, which builds, runs all ten
//! (framework × configuration) under
//! `valgrind --tool=callgrind --toggle-collect=delivery_cost::measured`
//! and prints the table. Natively it only checks the answers.
//!
//! Every request carries the same 1 KiB JSON body, signed with Standard
//! Webhooks `v1` under a fresh `webhook-id` (except `duplicate`: every
//! measured request repeats the warm-up's first id), and is signed and
//! built before the measured region.
//!
//! | config | route `POST /hook` |
//! |---|---|
//! | `bare` | the handler takes the framework's own JSON extractor (`axum::Json<T>`, `web::Json<T>`); no verification |
//! | `memory` | behind the layer / middleware with its defaults (in-process dedup); the handler takes `VerifiedWebhook<T>` |
//! | `verify` | the same with `no_dedup()` |
//! | `duplicate` | as `memory`, every measured request a duplicate (answered `200` without the handler) |
//! | `peer` | the `standardwebhooks` crate verifies in the handler, which then parses `T` with `serde_json` |
//!
//! axum: one `Router`, `ready().await` then `call(request)` per request;
//! actix-web: `test::init_service` then `call(request)`; both on a
//! current-thread tokio runtime (actix in a `LocalSet`, as its runtime does).

use std::future::Future;
use std::hint::black_box;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde::Deserialize;
use webhooks_core::Receiver;
use webhooks_core::scheme::StandardWebhooks;

/// The Standard Webhooks spec's example secret.
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// The body's size.
const BODY_LEN: usize = 1024;

/// What the handlers parse the body into: an invoice event, shaped like the
/// Standard Webhooks spec's example payload.
#[derive(Deserialize)]
#[allow(dead_code)] // read through black_box only
struct Payload {
    r#type: String,
    timestamp: String,
    data: Invoice,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct Invoice {
    id: String,
    customer: String,
    amount: u64,
    currency: String,
    paid: bool,
    lines: Vec<Line>,
    note: String,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct Line {
    description: String,
    quantity: u32,
    amount: u64,
}

/// A 1 KiB JSON body of [`Payload`]'s shape (the note pads it).
fn body() -> &'static [u8] {
    let head = r#"{"type":"invoice.paid","timestamp":"2026-12-01T12:00:00Z","data":{"id":"in_1QxYzA2eZvKYlo2C","customer":"cus_R8kD2mPq7WfN3x","amount":12900,"currency":"eur","paid":true,"lines":[{"description":"Team plan, monthly","quantity":5,"amount":9900},{"description":"Extra storage, 100 GB","quantity":1,"amount":2000},{"description":"Priority support","quantity":1,"amount":1000}],"note":""#;
    let tail = r#""}}"#;
    let pad = BODY_LEN - head.len() - tail.len();
    let text = format!("{head}{}{tail}", "x".repeat(pad));
    assert_eq!(text.len(), BODY_LEN);
    let _: Payload = serde_json::from_str(&text).expect("the body fits Payload");
    Box::leak(text.into_bytes().into_boxed_slice())
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Config {
    Bare,
    Memory,
    Verify,
    Duplicate,
    Peer,
}

impl Config {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "bare" => Self::Bare,
            "memory" => Self::Memory,
            "verify" => Self::Verify,
            "duplicate" => Self::Duplicate,
            "peer" => Self::Peer,
            _ => return None,
        })
    }

    /// The receiver of a layered configuration.
    fn receiver(self, verifier: &StandardWebhooks) -> Option<Receiver> {
        match self {
            Self::Bare | Self::Peer => None,
            Self::Memory | Self::Duplicate => Some(Receiver::new(verifier.clone())),
            Self::Verify => Some(Receiver::builder(verifier.clone()).no_dedup().build()),
        }
    }

    /// What every measured request must be answered.
    fn expected(self) -> u16 {
        match self {
            Self::Duplicate => 200,
            _ => 204,
        }
    }
}

/// The signed deliveries, in order: `warmup` first, then `n` measured ones.
/// Each has its own id, except that under `duplicate` the measured ones
/// repeat the first warm-up delivery's.
struct Deliveries {
    body: &'static [u8],
    headers: Vec<http::HeaderMap>,
}

fn deliveries(config: Config, warmup: usize, n: usize) -> Deliveries {
    let body = body();
    let verifier = StandardWebhooks::new(SECRET).expect("secret");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let headers = (0..warmup + n)
        .map(|i| {
            let id = if config == Config::Duplicate && i >= warmup {
                "msg_0".to_owned()
            } else {
                format!("msg_{i}")
            };
            let mut headers = verifier.sign_headers(&id, now, body).expect("sign");
            headers.insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            headers.insert(http::header::CONTENT_LENGTH, BODY_LEN.into());
            headers
        })
        .collect();
    Deliveries { body, headers }
}

/// The measured region: callgrind collects only while this runs
/// (`--toggle-collect=delivery_cost::measured`). `send` sends the
/// requests, built beforehand, and keeps their statuses.
#[inline(never)]
fn measured(send: impl FnOnce()) {
    send();
}

fn check(config: Config, statuses: &[u16]) {
    let expected = config.expected();
    if let Some((i, status)) = statuses.iter().enumerate().find(|(_, s)| **s != expected) {
        eprintln!("request {i} answered {status}, expected {expected} ({config:?})");
        std::process::exit(1);
    }
}

/// Verifies with the `standardwebhooks` crate, as a handler would without
/// this library, then parses the body.
fn peer(webhook: &standardwebhooks::Webhook, headers: &http::HeaderMap, body: &[u8]) -> u16 {
    if webhook.verify(body, headers).is_err() {
        return 401;
    }
    match serde_json::from_slice::<Payload>(body) {
        Ok(payload) => {
            black_box(payload);
            204
        }
        Err(_) => 422,
    }
}

fn axum(config: Config, warmup: usize, n: usize) {
    use axum::Router;
    use axum::body::Body;
    use axum::http::{HeaderMap, Request, StatusCode};
    use axum::routing::post;
    use tower::{Service as _, ServiceExt};
    use tower_webhooks::{VerifiedWebhook, WebhookLayer};

    let verifier = StandardWebhooks::new(SECRET).expect("secret");
    let router = match config {
        Config::Bare => Router::new().route(
            "/hook",
            post(|axum::Json(payload): axum::Json<Payload>| async move {
                black_box(payload);
                StatusCode::NO_CONTENT
            }),
        ),
        Config::Peer => {
            let webhook =
                std::sync::Arc::new(standardwebhooks::Webhook::new(SECRET).expect("secret"));
            Router::new().route(
                "/hook",
                post(move |headers: HeaderMap, body: Bytes| async move {
                    StatusCode::from_u16(peer(&webhook, &headers, &body)).expect("status")
                }),
            )
        }
        _ => Router::new()
            .route(
                "/hook",
                post(
                    |VerifiedWebhook(payload): VerifiedWebhook<Payload>| async move {
                        black_box(payload);
                        StatusCode::NO_CONTENT
                    },
                ),
            )
            .layer(WebhookLayer::from_receiver(
                config.receiver(&verifier).expect("a layered config"),
            )),
    };
    let Deliveries { body, headers } = deliveries(config, warmup, n);
    let mut requests: Vec<Request<Body>> = headers
        .into_iter()
        .map(|headers| {
            let mut request = Request::post("/hook")
                .body(Body::from(Bytes::from_static(body)))
                .expect("request");
            *request.headers_mut() = headers;
            request
        })
        .collect();
    let measured_requests = requests.split_off(warmup);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut app = router;
    let send = async |app: &mut Router, requests: Vec<Request<Body>>, statuses: &mut Vec<u16>| {
        for request in requests {
            let response = ServiceExt::<Request<Body>>::ready(app)
                .await
                .expect("infallible")
                .call(request)
                .await
                .expect("infallible");
            statuses.push(response.status().as_u16());
        }
    };
    let mut statuses = Vec::with_capacity(warmup.max(n));
    runtime.block_on(send(&mut app, requests, &mut statuses));
    check(
        if config == Config::Duplicate {
            Config::Memory
        } else {
            config
        },
        &statuses,
    );
    statuses.clear();
    measured(|| runtime.block_on(send(&mut app, measured_requests, &mut statuses)));
    check(config, &statuses);
}

fn actix(config: Config, warmup: usize, n: usize) {
    use actix_web::{App, HttpRequest, HttpResponse, test, web};
    use actix_webhooks::{VerifiedWebhook, Webhooks};

    let verifier = StandardWebhooks::new(SECRET).expect("secret");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    let Deliveries { body, headers } = deliveries(config, warmup, n);
    let mut requests: Vec<actix_http::Request> = headers
        .iter()
        .map(|headers| {
            let mut request = test::TestRequest::post().uri("/hook");
            for (name, value) in headers {
                request =
                    request.insert_header((name.as_str(), value.to_str().expect("visible ASCII")));
            }
            request.set_payload(Bytes::from_static(body)).to_request()
        })
        .collect();
    let measured_requests = requests.split_off(warmup);
    let mut statuses = Vec::with_capacity(warmup.max(n));
    // Each configuration's app is its own type: one generic sender.
    fn run<S, B>(
        runtime: &tokio::runtime::Runtime,
        local: &tokio::task::LocalSet,
        app: impl Future<Output = S>,
        (config, warm, measured_requests): (
            Config,
            Vec<actix_http::Request>,
            Vec<actix_http::Request>,
        ),
        statuses: &mut Vec<u16>,
    ) where
        S: actix_web::dev::Service<
                actix_http::Request,
                Response = actix_web::dev::ServiceResponse<B>,
                Error = actix_web::Error,
            >,
    {
        let app = local.block_on(runtime, app);
        let send = async |requests: Vec<actix_http::Request>, statuses: &mut Vec<u16>| {
            for request in requests {
                let response = app.call(request).await.expect("a response");
                statuses.push(response.status().as_u16());
            }
        };
        local.block_on(runtime, send(warm, statuses));
        check(
            if config == Config::Duplicate {
                Config::Memory
            } else {
                config
            },
            statuses,
        );
        statuses.clear();
        measured(|| local.block_on(runtime, send(measured_requests, statuses)));
        check(config, statuses);
    }
    let requests = (config, requests, measured_requests);
    match config {
        Config::Bare => {
            run(
                &runtime,
                &local,
                test::init_service(App::new().service(web::resource("/hook").route(
                    web::post().to(|web::Json(payload): web::Json<Payload>| async move {
                        black_box(payload);
                        HttpResponse::NoContent().finish()
                    }),
                ))),
                requests,
                &mut statuses,
            )
        }
        Config::Peer => {
            let webhook =
                std::sync::Arc::new(standardwebhooks::Webhook::new(SECRET).expect("secret"));
            run(
                &runtime,
                &local,
                test::init_service(App::new().service(web::resource("/hook").route(
                    web::post().to(move |req: HttpRequest, body: web::Bytes| {
                        let webhook = std::sync::Arc::clone(&webhook);
                        async move {
                            // The peer crate reads an http 1.x map; actix's is http 0.2.
                            let mut headers = http::HeaderMap::with_capacity(req.headers().len());
                            for (name, value) in req.headers() {
                                if let (Ok(n), Ok(v)) = (
                                    http::HeaderName::from_bytes(name.as_str().as_bytes()),
                                    http::HeaderValue::from_bytes(value.as_bytes()),
                                ) {
                                    headers.append(n, v);
                                }
                            }
                            let status = peer(&webhook, &headers, &body);
                            HttpResponse::build(
                                actix_web::http::StatusCode::from_u16(status).expect("status"),
                            )
                            .finish()
                        }
                    }),
                ))),
                requests,
                &mut statuses,
            );
        }
        _ => run(
            &runtime,
            &local,
            test::init_service(
                App::new().service(
                    web::resource("/hook")
                        .wrap(Webhooks::from_receiver(
                            config.receiver(&verifier).expect("a layered config"),
                        ))
                        .route(web::post().to(
                            |VerifiedWebhook(payload): VerifiedWebhook<Payload>| async move {
                                black_box(payload);
                                HttpResponse::NoContent().finish()
                            },
                        )),
                ),
            ),
            requests,
            &mut statuses,
        ),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage =
        "usage: delivery_cost <axum|actix> <bare|memory|verify|duplicate|peer> [N] [WARMUP]";
    let (Some(framework), Some(config)) = (args.get(1), args.get(2).and_then(|c| Config::parse(c)))
    else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let n = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(20_000);
    let warmup = args.get(4).and_then(|n| n.parse().ok()).unwrap_or(1_000);
    assert!(warmup >= 1, "duplicate needs the warm-up's first delivery");
    match framework.as_str() {
        "axum" => axum(config, warmup, n),
        "actix" => actix(config, warmup, n),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}
