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
//! | `floor` | a hand-written middleware doing the least a receiver must (see [`floor`], [`actix_floor`]) |
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
                (Config::Floor, _) => App::new()
                    .app_data(web::PayloadConfig::new(2 << 20))
                    .service(
                        web::resource("/hook")
                            .wrap(actix_floor::FloorMiddleware(floor::Floor::new(SECRET)))
                            .route(web::post().to(bare)),
                    ),
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

    impl Floor {
        /// The checks before the claim: headers, timestamp, signature.
        /// `header` reads a header's text (each framework's map); `Err` is
        /// the refusal's status.
        pub fn check<'h>(
            &self,
            header: impl Fn(Which) -> Option<&'h str>,
            body: &[u8],
        ) -> Result<&'h str, StatusCode> {
            let (Some(id), Some(ts_text), Some(signatures)) = (
                header(Which::Id),
                header(Which::Timestamp),
                header(Which::Signature),
            ) else {
                return Err(StatusCode::BAD_REQUEST);
            };
            let Ok(ts) = ts_text.parse::<u64>() else {
                return Err(StatusCode::BAD_REQUEST);
            };
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            if now.abs_diff(ts) > 300 {
                return Err(StatusCode::UNAUTHORIZED);
            }
            let mut mac = self.mac.clone();
            mac.update(id.as_bytes());
            mac.update(b".");
            mac.update(ts_text.as_bytes());
            mac.update(b".");
            mac.update(body);
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
            if authentic {
                Ok(id)
            } else {
                Err(StatusCode::UNAUTHORIZED)
            }
        }

        /// Claims `id`: `Err` with the answer for a duplicate (200) or one
        /// in flight (409).
        pub fn claim(&self, id: &str) -> Result<(), StatusCode> {
            let mut seen = self.seen.lock().expect("lock");
            match seen.get(id) {
                Some(true) => Err(StatusCode::OK),
                Some(false) => Err(StatusCode::CONFLICT),
                None => {
                    seen.insert(id.to_owned(), false);
                    Ok(())
                }
            }
        }

        /// Completes `id` after a 2xx, forgets it otherwise.
        pub fn settle(&self, id: String, success: bool) {
            let mut seen = self.seen.lock().expect("lock");
            if success {
                seen.insert(id, true);
            } else {
                seen.remove(&id);
            }
        }
    }

    /// The headers [`Floor::check`] reads.
    #[derive(Clone, Copy)]
    pub enum Which {
        Id,
        Timestamp,
        Signature,
    }

    pub async fn receive(State(floor): State<Floor>, request: Request, next: Next) -> Response {
        let (mut parts, body) = request.into_parts();
        let Ok(body) = axum::body::to_bytes(body, 1 << 20).await else {
            return StatusCode::PAYLOAD_TOO_LARGE.into_response();
        };
        let h = &parts.headers;
        let name = |which| match which {
            Which::Id => &ID,
            Which::Timestamp => &TIMESTAMP,
            Which::Signature => &SIGNATURE,
        };
        let id = match floor.check(|which| header(h, name(which)), &body) {
            Ok(id) => id.to_owned(),
            Err(status) => return status.into_response(),
        };
        if let Err(status) = floor.claim(&id) {
            return status.into_response();
        }
        parts.extensions.insert(Delivered {
            id: id.clone(),
            body: body.clone(),
        });
        let response = next.run(Request::from_parts(parts, Body::from(body))).await;
        floor.settle(id, response.status().is_success());
        response
    }
}

/// [`floor`]'s middleware for actix-web, written as its documentation
/// shows (a `Transform` and its `Service`): the payload gathered, the same
/// checks, claim and settlement, the body handed on.
mod actix_floor {
    use std::future::{Future, Ready, ready};
    use std::pin::Pin;
    use std::rc::Rc;

    use actix_web::body::{EitherBody, MessageBody};
    use actix_web::dev::{
        Payload, Service, ServiceRequest, ServiceResponse, Transform, forward_ready,
    };
    use actix_web::http::StatusCode;
    use actix_web::http::header::HeaderName;
    use actix_web::{Error, HttpMessage as _, HttpResponse};
    use bytes::BytesMut;
    use futures_util::StreamExt as _;

    use crate::floor::{Delivered, Floor, Which};

    static ID: HeaderName = HeaderName::from_static("webhook-id");
    static TIMESTAMP: HeaderName = HeaderName::from_static("webhook-timestamp");
    static SIGNATURE: HeaderName = HeaderName::from_static("webhook-signature");
    const LIMIT: usize = 1 << 20;

    pub struct FloorMiddleware(pub Floor);

    impl<S, B> Transform<S, ServiceRequest> for FloorMiddleware
    where
        S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error> + 'static,
        B: MessageBody + 'static,
    {
        type Response = ServiceResponse<EitherBody<B>>;
        type Error = Error;
        type Transform = FloorService<S>;
        type InitError = ();
        type Future = Ready<Result<Self::Transform, Self::InitError>>;

        fn new_transform(&self, service: S) -> Self::Future {
            ready(Ok(FloorService {
                service: Rc::new(service),
                floor: self.0.clone(),
            }))
        }
    }

    pub struct FloorService<S> {
        service: Rc<S>,
        floor: Floor,
    }

    type Answer<B> = Result<ServiceResponse<EitherBody<B>>, Error>;

    /// `req` answered `status` with an empty body.
    fn refuse<B>(req: ServiceRequest, status: StatusCode) -> Answer<B> {
        let response = HttpResponse::build(status).finish();
        Ok(req.into_response(response).map_into_right_body())
    }

    impl<S, B> Service<ServiceRequest> for FloorService<S>
    where
        S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error> + 'static,
        B: MessageBody + 'static,
    {
        type Response = ServiceResponse<EitherBody<B>>;
        type Error = Error;
        type Future = Pin<Box<dyn Future<Output = Answer<B>>>>;

        forward_ready!(service);

        fn call(&self, mut req: ServiceRequest) -> Self::Future {
            let service = Rc::clone(&self.service);
            let floor = self.floor.clone();
            Box::pin(async move {
                let mut payload = req.take_payload();
                let mut buf = BytesMut::new();
                while let Some(chunk) = payload.next().await {
                    let Ok(chunk) = chunk else {
                        return refuse(req, StatusCode::BAD_REQUEST);
                    };
                    if buf.len() + chunk.len() > LIMIT {
                        return refuse(req, StatusCode::PAYLOAD_TOO_LARGE);
                    }
                    buf.extend_from_slice(&chunk);
                }
                let body = buf.freeze();
                let checked = {
                    let headers = req.headers();
                    let header = |which| {
                        let name = match which {
                            Which::Id => &ID,
                            Which::Timestamp => &TIMESTAMP,
                            Which::Signature => &SIGNATURE,
                        };
                        headers.get(name)?.to_str().ok()
                    };
                    floor.check(header, &body).map(str::to_owned)
                };
                let id = match checked.and_then(|id| floor.claim(&id).map(|()| id)) {
                    Ok(id) => id,
                    Err(status) => {
                        let status = StatusCode::from_u16(status.as_u16()).expect("status");
                        return refuse(req, status);
                    }
                };
                req.extensions_mut().insert(Delivered {
                    id: id.clone(),
                    body: body.clone(),
                });
                req.set_payload(Payload::from(body));
                let response = service.call(req).await?;
                floor.settle(id, response.status().is_success());
                Ok(response.map_into_left_body())
            })
        }
    }
}
