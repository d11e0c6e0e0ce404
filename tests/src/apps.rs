//! The test apps: the same routes and handler behaviour on each framework.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use bytes::Bytes;
use tower_webhooks::{RawWebhook, VerifiedWebhook, WebhookLayer, WebhookMeta, WebhookRefusal};
use webhooks_core::dedup::DedupStore;
use webhooks_core::inbox::Inbox;
use webhooks_core::scheme::{GitHub, Shopify};
use webhooks_core::{Receiver, ReceiverBuilder, Rejection, RequestVerifier};

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
    /// The body-read deadline.
    pub body_timeout: Duration,
    /// Whether rejections go through an `on_reject` hook that renders
    /// `{"error":"<kind>"}` and tries to set its own status and protocol
    /// headers (which the library must override).
    pub custom_rejections: bool,
    /// A durable inbox: when set, the app also serves `/inbox` (Standard
    /// Webhooks in inbox mode: stored, `202`) and the dead-letter admin API
    /// under `/admin/inbox` (no hook, `allow_unauthenticated`),
    /// `/admin/guarded` (the `x-test-access` hook) and `/admin/nohook` (no
    /// hook: every request denied).
    pub inbox: Option<Arc<dyn Inbox>>,
    /// A response budget (issue 34): the `/hook` route runs its handler
    /// inline for this long, then hands the delivery to this inbox.
    pub budget: Option<(Arc<dyn Inbox>, Duration)>,
}

impl Spec {
    /// The pipeline this spec describes, around the apps' verifier.
    ///
    /// # Errors
    ///
    /// When the verifier cannot be built.
    pub fn receiver(&self) -> Result<Receiver, String> {
        Ok(self.pipeline(keys::verifier().map_err(|e| e.to_string())?))
    }

    /// A second pipeline for the `/github` route: the GitHub scheme on the same store.
    ///
    /// # Errors
    ///
    /// When the verifier cannot be built.
    pub fn github_receiver(&self) -> Result<Receiver, String> {
        Ok(self.pipeline(GitHub::new(keys::GITHUB_SECRET).map_err(|e| e.to_string())?))
    }

    /// The `/shopify` route's pipeline: the Shopify scheme on the same store.
    ///
    /// # Errors
    ///
    /// When the verifier cannot be built.
    pub fn shopify_receiver(&self) -> Result<Receiver, String> {
        Ok(self.pipeline(Shopify::new(keys::SHOPIFY_SECRET).map_err(|e| e.to_string())?))
    }

    /// The `/tenants/{tenant}/hook` route's pipeline: Standard Webhooks with
    /// each tenant's own secret ([`keys::tenants`]), on the same store.
    ///
    /// # Errors
    ///
    /// When the verifier cannot be built.
    pub fn tenant_receiver(&self) -> Result<Receiver, String> {
        Ok(self.pipeline(keys::tenants().map_err(|e| e.to_string())?))
    }

    /// The `/inbox` route's pipeline: the apps' verifier storing into
    /// `inbox` (inbox mode).
    ///
    /// # Errors
    ///
    /// When the verifier cannot be built.
    pub fn inbox_receiver(&self, inbox: Arc<dyn Inbox>) -> Result<Receiver, String> {
        let verifier = keys::verifier().map_err(|e| e.to_string())?;
        Ok(self.builder(verifier).inbox(inbox).build())
    }

    /// The routes mounted with an inbox, and their pipelines: in inbox mode
    /// (storing into `inbox`) `/inbox` (Standard Webhooks), `/inbox/slack`
    /// (Slack, signed with [`INBOX_SLACK_SECRET`]), `/inbox/github`,
    /// `/inbox/zoom` ([`HANDSHAKE_ZOOM_SECRET`]), `/inbox/discord`
    /// ([`HANDSHAKE_DISCORD_SEED`]) and `/inbox/sns` (SNS with a
    /// subscription-confirmation hook recording into [`SNS_CONFIRMATIONS`]);
    /// and the same Zoom, Slack, Discord and SNS verifiers in request mode
    /// under `/handshake/…`.
    ///
    /// # Errors
    ///
    /// When a verifier cannot be built.
    pub fn inbox_receivers(&self, inbox: &Arc<dyn Inbox>) -> Result<Routes, String> {
        use webhooks_core::scheme::{Discord, Slack, Zoom};
        let error = |e: webhooks_core::ConfigError| e.to_string();
        let slack = || Slack::new(INBOX_SLACK_SECRET).map_err(error);
        let zoom = || Zoom::new(HANDSHAKE_ZOOM_SECRET).map_err(error);
        let discord =
            || Discord::new(&Discord::public_key_hex(&HANDSHAKE_DISCORD_SEED)).map_err(error);
        let sns = || {
            webhooks_core::scheme::sns::Sns::builder(
                crate::providers_email::TestCertificates::default(),
            )
            .topic_arn(crate::providers_email::SNS_TOPIC)
            .on_subscription_confirmation(|message| {
                SNS_CONFIRMATIONS
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(message.message_id);
            })
            .build()
            .map_err(error)
        };
        let github = GitHub::new(keys::GITHUB_SECRET).map_err(error)?;
        Ok(vec![
            ("/inbox", self.inbox_receiver(Arc::clone(inbox))?),
            ("/inbox/slack", self.stored(slack()?, inbox)),
            ("/inbox/github", self.stored(github, inbox)),
            ("/inbox/zoom", self.stored(zoom()?, inbox)),
            ("/inbox/discord", self.stored(discord()?, inbox)),
            ("/inbox/sns", self.stored(sns()?, inbox)),
            ("/handshake/zoom", self.pipeline(zoom()?)),
            ("/handshake/slack", self.pipeline(slack()?)),
            ("/handshake/discord", self.pipeline(discord()?)),
            ("/handshake/sns", self.pipeline(sns()?)),
        ])
    }

    /// An inbox-mode pipeline around `verifier`, storing into `inbox`.
    fn stored(&self, verifier: impl RequestVerifier + 'static, inbox: &Arc<dyn Inbox>) -> Receiver {
        self.builder(verifier).inbox(Arc::clone(inbox)).build()
    }

    /// A pipeline around `verifier` with this spec's limit, lease, store and namespace.
    fn pipeline(&self, verifier: impl RequestVerifier + 'static) -> Receiver {
        self.builder(verifier).build()
    }

    fn builder(&self, verifier: impl RequestVerifier + 'static) -> ReceiverBuilder {
        let builder = Receiver::builder(verifier)
            .body_limit(self.body_limit)
            .body_timeout(self.body_timeout)
            .lease(self.lease)
            .shared_store(Arc::clone(&self.store))
            .namespace(self.namespace.clone());
        let builder = match &self.budget {
            Some((inbox, budget)) => builder.response_budget(
                webhooks_core::ResponseBudget::new(Arc::clone(inbox)).budget(*budget),
            ),
            None => builder,
        };
        if self.custom_rejections {
            builder.on_reject(custom_rejection)
        } else {
            builder
        }
    }
}

/// The Slack signing secret of the `/inbox/slack` and `/handshake/slack` routes.
pub const INBOX_SLACK_SECRET: &str = "slack-inbox-signing-secret";

/// The smallest purge age of the admin API mounted at `/admin/guarded`:
/// 5 days, above the providers' retry windows (a shorter one is raised to
/// `webhooks_core::inbox::purge_floor`, 4 days).
pub const GUARDED_ADMIN_MIN_PURGE: Duration = Duration::from_secs(5 * 86_400);

/// The `authorize` hook of `/admin/guarded`, from its `x-test-access`
/// header: `admin:<who>`, `read:<who>`, anything else (or none) denied.
fn test_access(value: Option<&[u8]>) -> webhooks_core::inbox::admin::Access {
    use webhooks_core::inbox::admin::Access;
    let value = value
        .and_then(|v| std::str::from_utf8(v).ok())
        .unwrap_or("");
    match value.split_once(':') {
        Some(("admin", who)) => Access::Admin(who.to_owned()),
        Some(("read", who)) => Access::ReadOnly(who.to_owned()),
        _ => Access::Deny,
    }
}

/// The Zoom secret token of the `/inbox/zoom` and `/handshake/zoom` routes.
pub const HANDSHAKE_ZOOM_SECRET: &str = "zoom-handshake-secret-token";
/// The Discord signer's private key of the `/inbox/discord` and
/// `/handshake/discord` routes.
pub const HANDSHAKE_DISCORD_SEED: [u8; 32] = [11; 32];
/// The message ids of the SNS subscription confirmations the `/inbox/sns`
/// and `/handshake/sns` hooks received.
pub static SNS_CONFIRMATIONS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// The `on_reject` hook of [`Spec::custom_rejections`]: a JSON body, and a
/// status and protocol headers of its own that the library must replace.
fn custom_rejection(rejection: &Rejection) -> http::Response<Bytes> {
    let mut response = http::Response::new(Bytes::from(format!(
        "{{\"error\":\"{}\"}}",
        rejection.kind()
    )));
    let headers = response.headers_mut();
    headers.insert(
        "content-type",
        http::HeaderValue::from_static("application/json"),
    );
    headers.insert("retry-after", http::HeaderValue::from_static("999"));
    headers.insert("webhook-duplicate", http::HeaderValue::from_static("false"));
    response
}

/// Paths and their pipelines.
pub type Routes = Vec<(&'static str, Receiver)>;

/// The pipelines of one app, one per guarded route group.
#[derive(Clone)]
struct Receivers {
    standard: Receiver,
    github: Receiver,
    shopify: Receiver,
    tenant: Receiver,
    /// One route per email sender ([`crate::providers_email`]).
    senders: Vec<(&'static str, Receiver)>,
    /// One route per provider family (see [`providers`](crate::providers)).
    providers: Vec<(&'static str, Receiver)>,
    /// The inbox routes' pipelines and the inbox its admin API serves.
    inbox: Option<(Routes, Arc<dyn Inbox>)>,
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
    /// `/text`, `/json` and `/form` (like `/hook`, the body read again by the
    /// framework's `String`, JSON and form extractors), all behind the
    /// Standard Webhooks layer; with [`Spec::inbox`], `/inbox` (inbox mode)
    /// and the dead-letter admin API under `/admin/inbox`; `/github`, `/shopify` and
    /// `/tenants/{tenant}/hook` (like `/hook`) behind a GitHub, a Shopify and
    /// a per-tenant Standard Webhooks layer; `/unguarded` (typed JSON, no
    /// layer); one route per email sender (`/sendgrid`, `/mailgun`, `/sns`,
    /// `/postmark`, see [`providers_email`](crate::providers_email)) and one
    /// per provider family (`/twilio`, `/paddle`, `/gitlab`, see
    /// [`providers`](crate::providers)).
    ///
    /// # Errors
    ///
    /// When the app cannot start.
    pub async fn start(self, spec: &Spec) -> Result<RunningApp, String> {
        let behaviour = Arc::new(Behaviour::default());
        let receivers = Receivers {
            standard: spec.receiver()?,
            github: spec.github_receiver()?,
            shopify: spec.shopify_receiver()?,
            tenant: spec.tenant_receiver()?,
            senders: crate::providers_email::receivers(spec)?,
            providers: crate::providers::receivers(spec)?,
            inbox: match &spec.inbox {
                Some(inbox) => Some((spec.inbox_receivers(inbox)?, Arc::clone(inbox))),
                None => None,
            },
        };
        match self {
            Self::Axum => start_axum(receivers, behaviour).await,
            Self::Actix => start_actix(receivers, behaviour).await,
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
) -> Result<StatusCode, WebhookRefusal> {
    // The exact verified bytes must be what the handler reads.
    behaviour
        .hook_answer(test_headers(&headers), &raw.meta, body == raw.body)
        .await
        .map(status)
        .map_err(|refusal| WebhookRefusal::new(refusal, &raw.meta))
}

async fn axum_text(
    State(behaviour): State<Arc<Behaviour>>,
    raw: RawWebhook,
    headers: HeaderMap,
    text: String,
) -> StatusCode {
    let intact = text.as_bytes() == raw.body;
    status(
        behaviour
            .hook(test_headers(&headers), &raw.meta, intact)
            .await,
    )
}

async fn axum_json(
    State(behaviour): State<Arc<Behaviour>>,
    raw: RawWebhook,
    headers: HeaderMap,
    axum::Json(value): axum::Json<serde_json::Value>,
) -> StatusCode {
    let intact = serde_json::from_slice::<serde_json::Value>(&raw.body).ok() == Some(value);
    status(
        behaviour
            .hook(test_headers(&headers), &raw.meta, intact)
            .await,
    )
}

async fn axum_form(
    State(behaviour): State<Arc<Behaviour>>,
    raw: RawWebhook,
    headers: HeaderMap,
    axum::Form(form): axum::Form<Vec<(String, String)>>,
) -> StatusCode {
    let intact = crate::behaviour::form_matches(&form, &raw.body);
    status(
        behaviour
            .hook(test_headers(&headers), &raw.meta, intact)
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

async fn start_axum(receivers: Receivers, behaviour: Arc<Behaviour>) -> Result<RunningApp, String> {
    let standard = axum::Router::new()
        .route("/hook", post(axum_hook))
        .route("/typed", post(axum_typed))
        .route("/text", post(axum_text))
        .route("/json", post(axum_json))
        .route("/form", post(axum_form))
        .layer(WebhookLayer::from_receiver(receivers.standard));
    let hook_behind = |path: &str, receiver: Receiver| {
        axum::Router::new()
            .route(path, post(axum_hook))
            .route_layer(WebhookLayer::from_receiver(receiver))
    };
    let app = standard
        .merge(hook_behind("/github", receivers.github))
        .merge(hook_behind("/shopify", receivers.shopify))
        .merge(hook_behind("/tenants/{tenant}/hook", receivers.tenant));
    let app = (receivers.senders.into_iter())
        .chain(receivers.providers)
        .fold(app, |app, (path, r)| app.merge(hook_behind(path, r)));
    let app = match receivers.inbox {
        // Inbox-mode routes need no handler.
        Some((routes, inbox)) => routes
            .into_iter()
            .fold(app, |app, (path, r)| match r.has_inbox() {
                true => app.route_service(path, tower_webhooks::InboxRoute::new(r)),
                false => app.merge(hook_behind(path, r)),
            })
            .nest_service(
                "/admin/guarded",
                tower_webhooks::InboxAdmin::new(Arc::clone(&inbox))
                    .min_purge_age(GUARDED_ADMIN_MIN_PURGE)
                    .authorize(|request| {
                        test_access(request.headers.get("x-test-access").map(|v| v.as_bytes()))
                    }),
            )
            .nest_service(
                "/admin/nohook",
                tower_webhooks::InboxAdmin::new(Arc::clone(&inbox)),
            )
            .nest_service(
                "/admin/inbox",
                tower_webhooks::InboxAdmin::new(inbox).allow_unauthenticated(),
            ),
        None => app,
    };
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
    use actix_webhooks::{RawWebhook, VerifiedWebhook, WebhookMeta, WebhookRefusal};

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
    ) -> Result<HttpResponse, WebhookRefusal> {
        behaviour
            .hook_answer(test_headers(&req), &raw.meta, body == raw.body)
            .await
            .map(status)
            .map_err(|refusal| WebhookRefusal::new(refusal, &raw.meta))
    }

    pub(super) async fn text(
        behaviour: web::Data<Arc<Behaviour>>,
        raw: RawWebhook,
        req: HttpRequest,
        text: String,
    ) -> HttpResponse {
        let intact = text.as_bytes() == raw.body;
        status(behaviour.hook(test_headers(&req), &raw.meta, intact).await)
    }

    pub(super) async fn json(
        behaviour: web::Data<Arc<Behaviour>>,
        raw: RawWebhook,
        req: HttpRequest,
        web::Json(value): web::Json<serde_json::Value>,
    ) -> HttpResponse {
        let intact = serde_json::from_slice::<serde_json::Value>(&raw.body).ok() == Some(value);
        status(behaviour.hook(test_headers(&req), &raw.meta, intact).await)
    }

    pub(super) async fn form(
        behaviour: web::Data<Arc<Behaviour>>,
        raw: RawWebhook,
        req: HttpRequest,
        web::Form(form): web::Form<Vec<(String, String)>>,
    ) -> HttpResponse {
        let intact = crate::behaviour::form_matches(&form, &raw.body);
        status(behaviour.hook(test_headers(&req), &raw.meta, intact).await)
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
    receivers: Receivers,
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
                let webhooks = Webhooks::from_receiver(receivers.standard.clone());
                let hook_behind = |path: &str, receiver: &Receiver| {
                    web::resource(path)
                        .wrap(Webhooks::from_receiver(receiver.clone()))
                        .route(web::post().to(actix::hook))
                };
                let app = App::new()
                    .app_data(web::Data::new(Arc::clone(&shared)))
                    .service(hook_behind("/github", &receivers.github))
                    .service(hook_behind("/shopify", &receivers.shopify))
                    .service(hook_behind("/tenants/{tenant}/hook", &receivers.tenant));
                let app = (receivers.senders.iter())
                    .chain(receivers.providers.iter())
                    .fold(app, |app, (path, receiver)| {
                        app.service(hook_behind(path, receiver))
                    });
                let app = match &receivers.inbox {
                    // Inbox-mode routes need no handler.
                    Some((routes, inbox)) => routes
                        .iter()
                        .fold(app, |app, (path, r)| match r.has_inbox() {
                            true => app.service(actix_webhooks::inbox_route(path, r.clone())),
                            false => app.service(hook_behind(path, r)),
                        })
                        .service(
                            actix_webhooks::InboxAdmin::new(Arc::clone(inbox))
                                .min_purge_age(GUARDED_ADMIN_MIN_PURGE)
                                .authorize(|request| {
                                    test_access(
                                        request
                                            .headers()
                                            .get("x-test-access")
                                            .map(|v| v.as_bytes()),
                                    )
                                })
                                .scope("/admin/guarded"),
                        )
                        .service(
                            actix_webhooks::InboxAdmin::new(Arc::clone(inbox))
                                .scope("/admin/nohook"),
                        )
                        .service(
                            actix_webhooks::InboxAdmin::new(Arc::clone(inbox))
                                .allow_unauthenticated()
                                .scope("/admin/inbox"),
                        ),
                    None => app,
                };
                app.service(
                    web::resource("/hook")
                        .wrap(webhooks.clone())
                        .route(web::post().to(actix::hook)),
                )
                .service(
                    web::resource("/text")
                        .wrap(webhooks.clone())
                        .route(web::post().to(actix::text)),
                )
                .service(
                    web::resource("/json")
                        .wrap(webhooks.clone())
                        .route(web::post().to(actix::json)),
                )
                .service(
                    web::resource("/form")
                        .wrap(webhooks.clone())
                        .route(web::post().to(actix::form)),
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
