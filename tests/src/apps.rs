//! The test apps: the same routes and handler behaviour on each framework.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use bytes::Bytes;
use tower_webhooks::{RawWebhook, VerifiedWebhook, WebhookLayer, WebhookMeta};
use webhooks_core::Receiver;
use webhooks_core::dedup::DedupStore;
use webhooks_core::scheme::GitHub;

use crate::behaviour::{Behaviour, EXPECT_EVENT_HEADER, MODE_HEADER, TestHeaders, TypedEvent};
use crate::keys;

/// What a scenario configures in the app under test.
#[derive(Clone)]
pub struct Spec {
    /// The claim lease.
    pub lease: Duration,
    /// The body limit.
    pub body_limit: usize,
    /// The dedup store.
    pub store: Arc<dyn DedupStore>,
    /// The key namespace (unique per scenario, so shared servers do not mix runs).
    pub namespace: String,
}

impl Spec {
    /// The pipeline this spec describes, around the apps' verifier.
    ///
    /// # Errors
    ///
    /// When the verifier cannot be built.
    pub fn receiver(&self) -> Result<Receiver, String> {
        let verifier = keys::verifier().map_err(|e| e.to_string())?;
        Ok(Receiver::builder(verifier)
            .body_limit(self.body_limit)
            .lease(self.lease)
            .shared_store(Arc::clone(&self.store))
            .namespace(self.namespace.clone())
            .build())
    }

    /// A second pipeline for the `/github` route: the GitHub scheme on the same store.
    ///
    /// # Errors
    ///
    /// When the verifier cannot be built.
    pub fn github_receiver(&self) -> Result<Receiver, String> {
        let verifier = GitHub::new(keys::GITHUB_SECRET).map_err(|e| e.to_string())?;
        Ok(Receiver::builder(verifier)
            .body_limit(self.body_limit)
            .lease(self.lease)
            .shared_store(Arc::clone(&self.store))
            .namespace(self.namespace.clone())
            .build())
    }
}

/// A running app: its address and its handler's counters.
pub struct RunningApp {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The handler behaviour, to count runs.
    pub behaviour: Arc<Behaviour>,
    _server: ServerGuard,
}

/// Stops a server when dropped.
enum ServerGuard {
    Tokio(tokio::task::JoinHandle<()>),
    Actix(actix_web::dev::ServerHandle),
}

impl Drop for ServerGuard {
    fn drop(&mut self) {
        match self {
            Self::Tokio(handle) => handle.abort(),
            // `stop` sends the command at once; its future only waits for it.
            Self::Actix(handle) => drop(handle.stop(false)),
        }
    }
}

/// A web framework under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framework {
    /// axum through tower-webhooks.
    Axum,
    /// actix-web through actix-webhooks.
    Actix,
}

impl Framework {
    /// Every framework.
    pub const ALL: &'static [Framework] = &[Framework::Axum, Framework::Actix];

    /// Its name in test names.
    pub fn name(self) -> &'static str {
        match self {
            Self::Axum => "axum",
            Self::Actix => "actix",
        }
    }

    /// Starts the app on a free loopback port.
    ///
    /// Routes: `/hook` (mode from `x-test-mode`), `/typed` (typed JSON),
    /// both behind the Standard Webhooks layer; `/github` (like `/hook`)
    /// behind a GitHub layer; `/unguarded` (typed JSON, no layer); and one
    /// route per provider family (`/twilio`, `/paddle`, `/gitlab`, see
    /// [`providers`](crate::providers)).
    ///
    /// # Errors
    ///
    /// When the app cannot start.
    pub async fn start(self, spec: &Spec) -> Result<RunningApp, String> {
        let behaviour = Arc::new(Behaviour::default());
        let receivers = (spec.receiver()?, spec.github_receiver()?);
        let providers = crate::providers::receivers(spec)?;
        match self {
            Self::Axum => start_axum(receivers, providers, behaviour).await,
            Self::Actix => start_actix(receivers, providers, behaviour).await,
        }
    }
}

fn test_headers(headers: &HeaderMap) -> TestHeaders<'_> {
    TestHeaders {
        mode: headers.get(MODE_HEADER).and_then(|v| v.to_str().ok()),
        expect_event: headers.get(EXPECT_EVENT_HEADER).map(|v| v.as_bytes()),
    }
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

async fn axum_hook(
    State(behaviour): State<Arc<Behaviour>>,
    raw: RawWebhook,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    // The exact verified bytes must be what the handler reads.
    status(
        behaviour
            .hook(test_headers(&headers), &raw.meta, body == raw.body)
            .await,
    )
}

async fn axum_typed(
    State(behaviour): State<Arc<Behaviour>>,
    WebhookMeta(meta): WebhookMeta,
    headers: HeaderMap,
    VerifiedWebhook(event): VerifiedWebhook<TypedEvent>,
) -> StatusCode {
    status(behaviour.typed(test_headers(&headers), &meta, &event).await)
}

async fn start_axum(
    (receiver, github): (Receiver, Receiver),
    providers: Vec<(&'static str, Receiver)>,
    behaviour: Arc<Behaviour>,
) -> Result<RunningApp, String> {
    let standard = axum::Router::new()
        .route("/hook", post(axum_hook))
        .route("/typed", post(axum_typed))
        .layer(WebhookLayer::from_receiver(receiver));
    let github = axum::Router::new()
        .route("/github", post(axum_hook))
        .route_layer(WebhookLayer::from_receiver(github));
    let app = providers
        .into_iter()
        .fold(standard.merge(github), |app, (path, r)| {
            app.merge(
                axum::Router::new()
                    .route(path, post(axum_hook))
                    .route_layer(WebhookLayer::from_receiver(r)),
            )
        });
    let app = app
        .route("/unguarded", post(axum_typed))
        .with_state(Arc::clone(&behaviour));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let handle = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(RunningApp {
        addr,
        behaviour,
        _server: ServerGuard::Tokio(handle),
    })
}

mod actix {
    use std::sync::Arc;

    use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
    use actix_webhooks::{RawWebhook, VerifiedWebhook, WebhookMeta};

    use crate::behaviour::{Behaviour, EXPECT_EVENT_HEADER, MODE_HEADER, TestHeaders, TypedEvent};

    fn test_headers(req: &HttpRequest) -> TestHeaders<'_> {
        TestHeaders {
            mode: req.headers().get(MODE_HEADER).and_then(|v| v.to_str().ok()),
            expect_event: req.headers().get(EXPECT_EVENT_HEADER).map(|v| v.as_bytes()),
        }
    }

    fn status(code: u16) -> HttpResponse {
        HttpResponse::new(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
    }

    pub(super) async fn hook(
        behaviour: web::Data<Arc<Behaviour>>,
        raw: RawWebhook,
        req: HttpRequest,
        body: web::Bytes,
    ) -> HttpResponse {
        status(
            behaviour
                .hook(test_headers(&req), &raw.meta, body == raw.body)
                .await,
        )
    }

    pub(super) async fn typed(
        behaviour: web::Data<Arc<Behaviour>>,
        WebhookMeta(meta): WebhookMeta,
        req: HttpRequest,
        VerifiedWebhook(event): VerifiedWebhook<TypedEvent>,
    ) -> HttpResponse {
        status(behaviour.typed(test_headers(&req), &meta, &event).await)
    }
}

async fn start_actix(
    (receiver, github): (Receiver, Receiver),
    providers: Vec<(&'static str, Receiver)>,
    behaviour: Arc<Behaviour>,
) -> Result<RunningApp, String> {
    use actix_web::{App, HttpServer, web};
    use actix_webhooks::Webhooks;

    let (tx, rx) = tokio::sync::oneshot::channel();
    let shared = Arc::clone(&behaviour);
    std::thread::spawn(move || {
        let system = actix_web::rt::System::new();
        system.block_on(async move {
            let server = HttpServer::new(move || {
                let webhooks = Webhooks::from_receiver(receiver.clone());
                let app = providers.iter().fold(App::new(), |app, (path, r)| {
                    app.service(
                        web::resource(*path)
                            .wrap(Webhooks::from_receiver(r.clone()))
                            .route(web::post().to(actix::hook)),
                    )
                });
                app.app_data(web::Data::new(Arc::clone(&shared)))
                    .service(
                        web::resource("/github")
                            .wrap(Webhooks::from_receiver(github.clone()))
                            .route(web::post().to(actix::hook)),
                    )
                    .service(
                        web::resource("/hook")
                            .wrap(webhooks.clone())
                            .route(web::post().to(actix::hook)),
                    )
                    .service(
                        web::resource("/typed")
                            .wrap(webhooks)
                            .route(web::post().to(actix::typed)),
                    )
                    .route("/unguarded", web::post().to(actix::typed))
            })
            .workers(2)
            .disable_signals()
            .shutdown_timeout(1)
            .bind(("127.0.0.1", 0));
            let server = match server {
                Ok(server) => server,
                Err(e) => {
                    let _ = tx.send(Err(e.to_string()));
                    return;
                }
            };
            let addr = server.addrs()[0];
            let server = server.run();
            let _ = tx.send(Ok((addr, server.handle())));
            let _ = server.await;
        });
    });
    let (addr, handle) = rx.await.map_err(|e| e.to_string())??;
    Ok(RunningApp {
        addr,
        behaviour,
        _server: ServerGuard::Actix(handle),
    })
}
