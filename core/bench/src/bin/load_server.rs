//! The server side of the load benchmark (driven by `loadbench`, see
//! `src/bin/loadbench.rs`): one route, `POST /hook`, on `127.0.0.1:<port>`,
//! set up as one of the benchmark's configurations.
//!
//! ```text
//! load_server <axum|actix> <bare|verify|dedup|peer|redis|postgres> <port> [namespace]
//! ```
//!
//! | config | route |
//! |---|---|
//! | `bare` | the handler reads the body and answers 204 |
//! | `verify` | behind the webhook layer/middleware, `no_dedup()` |
//! | `dedup` | behind the layer with its defaults (in-process store) |
//! | `peer` | the `standardwebhooks` crate verifies inside the handler |
//! | `floor` | axum only: a hand-written middleware doing the least a receiver must (see [`floor`]) |
//! | `redis` | behind the layer with `RedisStore` (`WEBHOOKS_REDIS_URL`) |
//! | `postgres` | behind the layer with `PostgresStore` (`WEBHOOKS_POSTGRES_URL`, table `loadbench_dedup`) |
//!
//! The runtime is each framework's default (one worker per available core:
//! the benchmark pins the server to one core with `taskset`). It prints
//! `ready` once listening.

use std::time::Duration;

use bytes::Bytes;
use webhooks_core::Receiver;
use webhooks_core::dedup::{PostgresStore, RedisStore};
use webhooks_core::scheme::StandardWebhooks;

/// The benchmark's Standard Webhooks secret (the spec's example secret).
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// Shared stores keep completed ids this long, so that runs clean up after
/// themselves (the cost per delivery does not depend on it).
const SHARED_RETENTION: Duration = Duration::from_secs(600);
const PG_TABLE: &str = "loadbench_dedup";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Config {
    Bare,
    Verify,
    Dedup,
    Peer,
    Floor,
    Redis,
    Postgres,
}

impl Config {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "bare" => Self::Bare,
            "verify" => Self::Verify,
            "dedup" => Self::Dedup,
            "peer" => Self::Peer,
            "floor" => Self::Floor,
            "redis" => Self::Redis,
            "postgres" => Self::Postgres,
            _ => return None,
        })
    }
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// The receiver for a layered configuration (`None` for `bare` and `peer`).
async fn receiver(config: Config, namespace: &str) -> Option<Receiver> {
    let verifier = StandardWebhooks::new(SECRET).expect("secret");
    let builder = Receiver::builder(verifier).namespace(namespace);
    Some(match config {
        Config::Bare | Config::Peer | Config::Floor => return None,
        Config::Verify => builder.no_dedup().build(),
        Config::Dedup => builder.build(),
        Config::Redis => {
            let url = env_or("WEBHOOKS_REDIS_URL", "redis://127.0.0.1:6379");
            let store = RedisStore::connect(&url).await.expect("redis");
            builder
                .store(store)
                .retention(SHARED_RETENTION)
                // A benchmark's ids never come back: short on purpose.
                .allow_retention_below_retry_window()
                .build()
        }
        Config::Postgres => {
            let url = env_or(
                "WEBHOOKS_POSTGRES_URL",
                "postgres://postgres@127.0.0.1:5432/test",
            );
            // The driver finds this pool's backends by application name.
            let sep = if url.contains('?') { '&' } else { '?' };
            let url = format!("{url}{sep}application_name=loadbench");
            let store = PostgresStore::builder(&url)
                .table(PG_TABLE)
                .connect()
                .await
                .expect("postgres");
            store.migrate().await.expect("migrate");
            builder
                .store(store)
                .retention(SHARED_RETENTION)
                // A benchmark's ids never come back: short on purpose.
                .allow_retention_below_retry_window()
                .build()
        }
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: load_server <axum|actix> <bare|verify|dedup|peer|floor|redis|postgres> <port> [namespace]";
    let (Some(framework), Some(config), Some(port)) = (
        args.get(1),
        args.get(2).and_then(|c| Config::parse(c)),
        args.get(3).and_then(|p| p.parse::<u16>().ok()),
    ) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let namespace = args.get(4).map_or("loadbench", String::as_str).to_owned();
    match framework.as_str() {
        "axum" => axum_server(config, port, &namespace),
        "actix" => actix_server(config, port, &namespace),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}

/// Verifies with the `standardwebhooks` crate, as a handler would without
/// this library.
fn peer_verify(webhook: &standardwebhooks::Webhook, headers: &http::HeaderMap, body: &[u8]) -> u16 {
    match webhook.verify(body, headers) {
        Ok(()) => 204,
        Err(_) => 401,
    }
}

fn axum_server(config: Config, port: u16, namespace: &str) {
    use axum::Router;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::post;
    use tower_webhooks::WebhookLayer;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let app = match (config, receiver(config, namespace).await) {
            (Config::Peer, _) => {
                let webhook =
                    std::sync::Arc::new(standardwebhooks::Webhook::new(SECRET).expect("secret"));
                Router::new().route(
                    "/hook",
                    post(move |headers: HeaderMap, body: Bytes| {
                        let webhook = std::sync::Arc::clone(&webhook);
                        async move {
                            StatusCode::from_u16(peer_verify(&webhook, &headers, &body)).unwrap()
                        }
                    }),
                )
            }
            (Config::Floor, _) => Router::new()
                .route(
                    "/hook",
                    post(|body: Bytes| async move {
                        std::hint::black_box(body);
                        StatusCode::NO_CONTENT
                    }),
                )
                .layer(axum::middleware::from_fn_with_state(
                    floor::Floor::new(SECRET),
                    floor::receive,
                )),
            (_, None) => Router::new().route(
                "/hook",
                post(|body: Bytes| async move {
                    std::hint::black_box(body);
                    StatusCode::NO_CONTENT
                }),
            ),
            (_, Some(receiver)) => Router::new()
                .route(
                    "/hook",
                    post(|body: Bytes| async move {
                        std::hint::black_box(body);
                        StatusCode::NO_CONTENT
                    }),
                )
                .layer(WebhookLayer::from_receiver(receiver)),
        };
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind");
        println!("ready");
        axum::serve(listener, app).await.expect("serve");
    });
}

fn actix_server(config: Config, port: u16, namespace: &str) {
    use actix_web::{App, HttpRequest, HttpResponse, web};
    use actix_webhooks::Webhooks;

    let system = actix_web::rt::System::new();
    let receiver = system.block_on(receiver(config, namespace));
    system.block_on(async move {
        let peer = std::sync::Arc::new(standardwebhooks::Webhook::new(SECRET).expect("secret"));
        let server = actix_web::HttpServer::new(move || {
            let bare = |body: web::Bytes| async move {
                std::hint::black_box(body);
                HttpResponse::NoContent().finish()
            };
            match (config, receiver.clone()) {
                (Config::Floor, _) => {
                    eprintln!("load_server: the floor is axum's only");
                    std::process::exit(2);
                }
                (Config::Peer, _) => {
                    let peer = peer.clone();
                    App::new().route(
                        "/hook",
                        web::post().to(move |req: HttpRequest, body: web::Bytes| {
                            let peer = peer.clone();
                            async move {
                                // The peer crate reads an http 1.x map; actix's is http 0.2.
                                let mut headers = http::HeaderMap::new();
                                for (name, value) in req.headers() {
                                    if let (Ok(n), Ok(v)) = (
                                        http::HeaderName::from_bytes(name.as_str().as_bytes()),
                                        http::HeaderValue::from_bytes(value.as_bytes()),
                                    ) {
                                        headers.append(n, v);
                                    }
                                }
                                let status = peer_verify(&peer, &headers, &body);
                                HttpResponse::build(
                                    actix_web::http::StatusCode::from_u16(status).unwrap(),
                                )
                                .finish()
                            }
                        }),
                    )
                }
                // The same 2 MiB `web::Bytes` limit as the layer's routes,
                // so that `loadbench --memory --configs bare` compares.
                (_, None) => App::new()
                    .app_data(web::PayloadConfig::new(2 << 20))
                    .route("/hook", web::post().to(bare)),
                // actix's own `web::Bytes` limit (256 KiB) would refuse
                // verified bodies the layer accepted: the layer's applies.
                (_, Some(receiver)) => App::new()
                    .app_data(web::PayloadConfig::new(2 << 20))
                    .service(
                        web::resource("/hook")
                            .wrap(Webhooks::from_receiver(receiver))
                            .route(web::post().to(bare)),
                    ),
            }
        })
        .bind(("127.0.0.1", port))
        .expect("bind")
        .run();
        println!("ready");
        server.await.expect("serve");
    });
}

/// The floor of a receiving layer over axum: what any receiver of Standard
/// Webhooks deliveries must do per request, written by hand with the
/// ecosystem's crates and nothing else: buffer the body, read the three
/// headers, check the timestamp, HMAC-SHA256 the signed content, compare
/// each `v1` signature in constant time, claim the id in a map under a
/// mutex (std's `HashMap`, sized for a run's ids up front; no lease,
/// expiry, eviction, metrics, span or panic guard), hand
/// the handler the id and body as an extension, then mark the id completed
/// on a 2xx or forget it otherwise. `http_instructions.sh` counts it as
/// another configuration: the library's own cost against what this one
/// costs.
mod floor {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    use std::time::{SystemTime, UNIX_EPOCH};

    use axum::body::Body;
    use axum::extract::{Request, State};
    use axum::http::StatusCode;
    use axum::middleware::Next;
    use axum::response::{IntoResponse, Response};
    use base64::Engine as _;
    use bytes::Bytes;
    use hmac::{KeyInit as _, Mac as _};
    use subtle::ConstantTimeEq as _;

    type HmacSha256 = hmac::Hmac<sha2::Sha256>;

    /// The keyed HMAC (cloned per request, as the library keys it once) and
    /// the ids seen: `false` in flight, `true` completed.
    #[derive(Clone)]
    pub struct Floor {
        mac: HmacSha256,
        seen: Arc<Mutex<HashMap<String, bool>>>,
    }

    /// What the handler is handed (the benchmark's handler reads the body
    /// alone, as the layer's does).
    #[derive(Clone)]
    #[allow(dead_code)]
    pub struct Delivered {
        pub id: String,
        pub body: Bytes,
    }

    impl Floor {
        pub fn new(secret: &str) -> Self {
            let key = base64::engine::general_purpose::STANDARD
                .decode(secret.trim_start_matches("whsec_"))
                .expect("secret");
            Self {
                mac: HmacSha256::new_from_slice(&key).expect("key"),
                seen: Arc::new(Mutex::new(HashMap::with_capacity(ROOM))),
            }
        }
    }

    use axum::http::HeaderName;

    static ID: HeaderName = HeaderName::from_static("webhook-id");
    static TIMESTAMP: HeaderName = HeaderName::from_static("webhook-timestamp");
    static SIGNATURE: HeaderName = HeaderName::from_static("webhook-signature");

    /// Ids the map has room for from the start (a benchmark run's).
    const ROOM: usize = 1 << 16;

    fn header<'a>(headers: &'a axum::http::HeaderMap, name: &HeaderName) -> Option<&'a str> {
        headers.get(name)?.to_str().ok()
    }

    pub async fn receive(State(floor): State<Floor>, request: Request, next: Next) -> Response {
        let (mut parts, body) = request.into_parts();
        let Ok(body) = axum::body::to_bytes(body, 1 << 20).await else {
            return StatusCode::PAYLOAD_TOO_LARGE.into_response();
        };
        let h = &parts.headers;
        let (Some(id), Some(ts_text), Some(signatures)) =
            (header(h, &ID), header(h, &TIMESTAMP), header(h, &SIGNATURE))
        else {
            return StatusCode::BAD_REQUEST.into_response();
        };
        let Ok(ts) = ts_text.parse::<u64>() else {
            return StatusCode::BAD_REQUEST.into_response();
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if now.abs_diff(ts) > 300 {
            return StatusCode::UNAUTHORIZED.into_response();
        }
        let mut mac = floor.mac.clone();
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(ts_text.as_bytes());
        mac.update(b".");
        mac.update(&body);
        let tag = mac.finalize().into_bytes();
        let authentic = signatures
            .split(' ')
            .filter_map(|s| s.strip_prefix("v1,"))
            .any(|s| {
                let mut decoded = [0u8; 32];
                base64::engine::general_purpose::STANDARD
                    .decode_slice(s, &mut decoded)
                    .is_ok_and(|n| n == 32 && bool::from(decoded.ct_eq(&tag[..])))
            });
        if !authentic {
            return StatusCode::UNAUTHORIZED.into_response();
        }
        let id = id.to_owned();
        {
            let mut seen = floor.seen.lock().expect("lock");
            match seen.get(&id) {
                Some(true) => return StatusCode::OK.into_response(),
                Some(false) => return StatusCode::CONFLICT.into_response(),
                None => {
                    seen.insert(id.clone(), false);
                }
            }
        }
        parts.extensions.insert(Delivered {
            id: id.clone(),
            body: body.clone(),
        });
        let response = next.run(Request::from_parts(parts, Body::from(body))).await;
        let mut seen = floor.seen.lock().expect("lock");
        if response.status().is_success() {
            seen.insert(id, true);
        } else {
            seen.remove(&id);
        }
        response
    }
}
