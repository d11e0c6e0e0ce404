//! Shared by the CLI's integration tests: the built `webhooks` binary, the
//! test key of each scheme, and receivers on both frameworks (axum through
//! tower-webhooks' `WebhookLayer`, actix-web through actix-webhooks'
//! middleware) with one route per scheme, `/<scheme>`, on 127.0.0.1:0.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test file uses a different part of this module"
)]

use std::net::SocketAddr;
use std::process::{Command, Output};

use std::time::{Duration, SystemTime};

use webhooks_core::scheme::registry::{
    self, HMAC, KeyKind, SCHEMES, SNS, SchemeInfo, SchemeOptions,
};
use webhooks_core::scheme::sns::{CertificateFetcher, FetchError, Sns, TEST_CERTIFICATE_URL};
use webhooks_core::{PublicUrl, Receiver, RequestHead, RequestVerifier, Verified, VerifyError};

/// The `webhooks` binary.
pub fn webhooks() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_webhooks"));
    command.env_remove("WEBHOOKS_SECRET").env("NO_COLOR", "1");
    command
}

/// Runs `webhooks` with `args`.
pub fn run(args: &[&str]) -> Output {
    webhooks()
        .args(args)
        .output()
        .expect("the webhooks binary runs")
}

/// The exit code, stdout and stderr of `output`, as text.
pub fn text(output: &Output) -> (i32, String, String) {
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs `webhooks --json …` and parses its stdout.
pub fn run_json(args: &[&str]) -> (i32, serde_json::Value) {
    let output = webhooks().arg("--json").args(args).output().expect("runs");
    let (code, stdout, stderr) = text(&output);
    let value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout:?}; stderr {stderr:?}"));
    (code, value)
}

/// The key `send`/`sign` take for `scheme`: the shared secret, or for a key
/// pair the private key.
pub fn signing_key(scheme: &str) -> &'static str {
    match scheme {
        "standard-webhooks" => "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "stripe" => "whsec_cli_test_secret",
        "discord" | "sendgrid" => {
            "0707070707070707070707070707070707070707070707070707070707070707"
        }
        "postmark" => "hooks:cli-test-password",
        "sns" => include_str!("../data/sns/test-key.pem"),
        _ => "cli-test-secret",
    }
}

/// The `hmac` scheme of the tests: a provider signing its timestamp, the
/// URL called and the body, with an id and an event type header
/// (`tests/data/acme.spec` is the same, one entry a line).
pub const HMAC_SPEC: &str = "name=acme;header=X-Acme-Signature;prefix=sha256=;\
    content={timestamp}.{url}.{body};timestamp-header=X-Acme-Timestamp;id-header=X-Acme-Id;\
    event-type-header=X-Acme-Event";

/// The arguments `scheme` needs besides its key: `--hmac-spec` for `hmac`.
pub fn scheme_args(scheme: &str) -> Vec<&'static str> {
    match scheme {
        "hmac" => vec!["--hmac-spec", HMAC_SPEC],
        _ => Vec::new(),
    }
}

/// `options` with the test spec for `hmac`.
pub fn with_spec(scheme: &str, options: SchemeOptions) -> SchemeOptions {
    match scheme {
        "hmac" => options.hmac_spec(HMAC_SPEC.parse().unwrap()),
        _ => options,
    }
}

/// What `scheme` signs, as the tests configure it (for `hmac`, its spec's).
pub fn described(scheme: &str) -> SchemeInfo {
    registry::describe(scheme, &with_spec(scheme, SchemeOptions::new())).unwrap()
}

/// No network: the SNS receivers pin the test certificate instead.
struct NoNetwork;

#[async_trait::async_trait]
impl CertificateFetcher for NoNetwork {
    async fn fetch(&self, _: &str) -> Result<Vec<u8>, FetchError> {
        Err(FetchError::new("the tests fetch no certificate"))
    }
}

/// The SNS verifier of the tests: the test key's certificate pinned at the
/// signer's default URL, any topic, messages up to 5 minutes old.
pub fn sns_verifier() -> Sns {
    Sns::builder(NoNetwork)
        .any_topic()
        .max_age(Duration::from_secs(300))
        .certificate(
            TEST_CERTIFICATE_URL,
            include_str!("../data/sns/test-cert.pem"),
        )
        .build()
        .unwrap()
}

/// The verifier of `scheme` with its test key.
pub fn verifier(scheme: &str, options: &SchemeOptions) -> Box<dyn RequestVerifier> {
    match scheme {
        "sns" => Box::new(sns_verifier()),
        _ => Box::new(
            registry::verifier(
                scheme,
                &[verifying_key(scheme)],
                &with_spec(scheme, options.clone()),
            )
            .unwrap(),
        ),
    }
}

/// Verifies a request with `scheme`'s test verifier, now.
pub fn verify(
    scheme: &str,
    options: &SchemeOptions,
    head: RequestHead<'_>,
    body: &[u8],
) -> Result<Verified, VerifyError> {
    let verifier = verifier(scheme, options);
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(verifier.verify_request(head, body, SystemTime::now()))
}

/// The key the verifier takes: the shared secret, or the public key.
pub fn verifying_key(scheme: &str) -> String {
    let options = with_spec(scheme, SchemeOptions::new());
    let signer = registry::signer(scheme, signing_key(scheme), &options).unwrap();
    match signer.info().key {
        KeyKind::KeyPair => signer.public_key().unwrap().to_owned(),
        _ => signing_key(scheme).to_owned(),
    }
}

/// Every scheme this build has (`hmac` with [`HMAC_SPEC`]).
pub fn schemes() -> impl Iterator<Item = &'static SchemeInfo> {
    SCHEMES
        .iter()
        .chain([&HMAC, &SNS])
        .filter(|s| s.is_available())
}

/// A pipeline per scheme for a receiver reached at `addr`.
fn receivers(addr: SocketAddr) -> Vec<(String, Receiver)> {
    let options =
        SchemeOptions::new().public_url(PublicUrl::base(format!("http://{addr}")).unwrap());
    schemes()
        .map(|s| {
            let receiver = match s.name {
                "sns" => Receiver::builder(sns_verifier()).build(),
                _ => Receiver::builder(
                    registry::verifier(
                        s.name,
                        &[verifying_key(s.name)],
                        &with_spec(s.name, options.clone()),
                    )
                    .unwrap(),
                )
                .build(),
            };
            (format!("/{}", s.name), receiver)
        })
        .collect()
}

/// A running receiver app.
pub struct App {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Option<Box<dyn FnOnce() + Send>>,
}

impl App {
    /// The URL of `scheme`'s route.
    pub fn url(&self, scheme: &str) -> String {
        format!("http://{}/{scheme}", self.addr)
    }
}

impl Drop for App {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop();
        }
    }
}

/// The frameworks.
#[derive(Debug, Clone, Copy)]
pub enum Framework {
    /// axum with tower-webhooks.
    Axum,
    /// actix-web with actix-webhooks.
    Actix,
}

impl Framework {
    /// Both.
    pub const ALL: [Framework; 2] = [Framework::Axum, Framework::Actix];

    /// Starts the app.
    pub fn start(self) -> App {
        match self {
            Self::Axum => start_axum(),
            Self::Actix => start_actix(),
        }
    }
}

fn start_axum() -> App {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let app = receivers(addr)
        .into_iter()
        .fold(axum::Router::new(), |app, (path, r)| {
            app.route(
                &path,
                axum::routing::post(|| async { http::StatusCode::NO_CONTENT })
                    .layer(tower_webhooks::WebhookLayer::from_receiver(r)),
            )
        });
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let server = axum::serve(listener, app);
            tokio::select! {
                _ = server => {}
                _ = tokio::task::spawn_blocking(move || rx.recv()) => {}
            }
        });
    });
    App {
        addr,
        stop: Some(Box::new(move || {
            let _ = tx.send(());
        })),
    }
}

fn start_actix() -> App {
    use actix_web::{App as ActixApp, HttpResponse, HttpServer, web};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let routes = receivers(addr);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let system = actix_web::rt::System::new();
        system.block_on(async move {
            let server = HttpServer::new(move || {
                routes.iter().fold(ActixApp::new(), |app, (path, r)| {
                    app.service(
                        web::resource(path.as_str())
                            .wrap(actix_webhooks::Webhooks::from_receiver(r.clone()))
                            .route(web::post().to(|| async { HttpResponse::NoContent().finish() })),
                    )
                })
            })
            .workers(2)
            .disable_signals()
            .shutdown_timeout(1)
            .listen(listener)
            .unwrap()
            .run();
            let _ = tx.send(server.handle());
            let _ = server.await;
        });
    });
    let handle = rx.recv().unwrap();
    App {
        addr,
        stop: Some(Box::new(move || drop(handle.stop(false)))),
    }
}
