//! The receiver: configuration from the environment, the webhook pipeline,
//! and the axum app (shared by `bin/receiver.rs` and the demo).
//!
//! | route | what |
//! |---|---|
//! | `POST /webhooks/email` | behind [`WebhookLayer`]: verified, deduplicated, applied in one transaction; `204` |
//! | `GET /emails/{id}` | the email's [`EmailState`](crate::state::EmailState) as JSON, or `404` |
//! | `GET /suppressions` | the suppression list as JSON |
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use examples::app::{Config, open, router};
//!
//! let config = Config::from_env()?;
//! let (receiver, store) = open(&config).await?;
//! let listener = tokio::net::TcpListener::bind(("127.0.0.1", config.port)).await?;
//! axum::serve(listener, router(receiver, store)).await?;
//! # Ok(()) }
//! ```

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use tower_webhooks::core::dedup::{DedupStore, store_from_url};
use tower_webhooks::core::{ConfigError, Receiver};
use tower_webhooks::{VerifiedWebhook, WebhookLayer};

use crate::event::EmailEvent;
use crate::schemes::Scheme;
use crate::store::EmailStore;

/// The route the provider posts to.
pub const WEBHOOK_PATH: &str = "/webhooks/email";

/// The dedup key namespace of this receiver.
pub const NAMESPACE: &str = "email-events";

/// The receiver's configuration, from the environment.
///
/// | variable | default |
/// |---|---|
/// | `WEBHOOK_SECRET` | required (`whsec_…` for Standard Webhooks) |
/// | `WEBHOOK_SCHEME` | `standard` (or `stripe`, `github`, `slack`, `shopify`) |
/// | `PORT` | `3000` |
/// | `DEDUP_URL` | `memory://` (also `sqlite://…`; `redis://…`, `postgres://…`, `mysql://…` with this package's features) |
/// | `DATABASE_URL` | `sqlite://<temp dir>/webhooks-email-events/email-events.sqlite` |
///
/// `Debug` shows neither the secret nor the URLs (they may hold passwords).
#[derive(Clone)]
pub struct Config {
    /// The signing secret.
    pub secret: String,
    /// The provider's signature scheme.
    pub scheme: Scheme,
    /// The port to listen on (on 127.0.0.1).
    pub port: u16,
    /// Where deduplication state lives.
    pub dedup_url: String,
    /// Where the email state lives; `None` for the default file.
    pub database_url: Option<String>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("scheme", &self.scheme)
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Reads the variables the table above lists.
    ///
    /// # Errors
    ///
    /// A message naming the variable that is missing or malformed.
    pub fn from_env() -> Result<Self, String> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let secret = var("WEBHOOK_SECRET").ok_or(
            "WEBHOOK_SECRET is not set (for Standard Webhooks: whsec_ followed by base64)",
        )?;
        let scheme = var("WEBHOOK_SCHEME")
            .map_or(Ok(Scheme::Standard), |s| s.parse())
            .map_err(|e| format!("WEBHOOK_SCHEME: {e}"))?;
        let port = var("PORT")
            .map_or(Ok(3000), |p| p.trim().parse())
            .map_err(|_| "PORT is not a port number".to_owned())?;
        Ok(Self {
            secret,
            scheme,
            port,
            dedup_url: var("DEDUP_URL").unwrap_or_else(|| "memory://".to_owned()),
            database_url: var("DATABASE_URL"),
        })
    }

    /// Where the default database lives: a directory in the system's temp dir.
    #[must_use]
    pub fn default_database_dir() -> PathBuf {
        std::env::temp_dir().join("webhooks-email-events")
    }
}

/// The webhook pipeline for `scheme` and `secret` over a dedup store.
///
/// Slack sends no delivery id, so its deliveries are deduplicated on the
/// body's event `id`.
///
/// # Errors
///
/// [`ConfigError`] when the secret is unusable for the scheme.
pub fn receiver(
    scheme: Scheme,
    secret: &str,
    store: Arc<dyn DedupStore>,
) -> Result<Receiver, ConfigError> {
    let builder = Receiver::builder(scheme.verifier(secret)?)
        .shared_store(store)
        .namespace(NAMESPACE)
        .body_limit(64 * 1024);
    Ok(match scheme {
        Scheme::Slack => builder.dedup_key_json_pointer("/id"),
        _ => builder,
    }
    .build())
}

/// The pipeline in inbox mode: verified deliveries are stored in `inbox` and
/// answered `202`; [`Worker`](tower_webhooks::core::inbox::Worker)s apply them.
///
/// # Errors
///
/// [`ConfigError`] when the secret is unusable for the scheme.
pub fn inbox_receiver(
    scheme: Scheme,
    secret: &str,
    inbox: Arc<dyn tower_webhooks::core::inbox::Inbox>,
) -> Result<Receiver, ConfigError> {
    let builder = Receiver::builder(scheme.verifier(secret)?)
        .inbox(inbox)
        .namespace(NAMESPACE)
        .body_limit(64 * 1024);
    Ok(match scheme {
        Scheme::Slack => builder.dedup_key_json_pointer("/id"),
        _ => builder,
    }
    .build())
}

/// Opens what `config` names: the dedup store, the pipeline and the database.
///
/// # Errors
///
/// When a store cannot be opened or the secret is unusable; the message never
/// contains the secret or a URL.
pub async fn open(config: &Config) -> Result<(Receiver, EmailStore), Box<dyn std::error::Error>> {
    let dedup = store_from_url(&config.dedup_url)
        .await
        .map_err(|e| format!("DEDUP_URL: {e}"))?;
    let receiver = receiver(config.scheme, &config.secret, dedup)
        .map_err(|e| format!("WEBHOOK_SECRET: {e}"))?;
    let store = match &config.database_url {
        Some(url) => EmailStore::open(url).await,
        None => {
            let dir = Config::default_database_dir();
            std::fs::create_dir_all(&dir)?;
            EmailStore::open_in(&dir).await
        }
    }
    .map_err(|e| format!("DATABASE_URL: {e}"))?;
    Ok((receiver, store))
}

/// The app: the webhook route behind the pipeline, and the two read routes.
pub fn router(receiver: Receiver, store: EmailStore) -> Router {
    Router::new()
        .route(
            WEBHOOK_PATH,
            post(on_email).route_layer(WebhookLayer::from_receiver(receiver)),
        )
        .route("/emails/{id}", get(get_email))
        .route("/suppressions", get(get_suppressions))
        .with_state(store)
}

/// Applies a verified, first-time event. Unknown types are acknowledged.
async fn on_email(
    State(store): State<EmailStore>,
    VerifiedWebhook(event): VerifiedWebhook<EmailEvent>,
) -> StatusCode {
    match store.apply(&event).await {
        Ok(_) => StatusCode::NO_CONTENT,
        Err(error) => {
            // A 500 releases the claim: the provider's retry applies it later.
            eprintln!("applying a {} event failed: {error}", event.kind());
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

async fn get_email(State(store): State<EmailStore>, Path(id): Path<String>) -> Response {
    match store.email(&id).await {
        Ok(Some(state)) => Json(state).into_response(),
        Ok(None) => (StatusCode::NOT_FOUND, "no such email").into_response(),
        Err(error) => internal(&error),
    }
}

async fn get_suppressions(State(store): State<EmailStore>) -> Response {
    match store.suppressions().await {
        Ok(list) => Json(list).into_response(),
        Err(error) => internal(&error),
    }
}

fn internal(error: &sqlx::Error) -> Response {
    eprintln!("database error: {error}");
    StatusCode::INTERNAL_SERVER_ERROR.into_response()
}
