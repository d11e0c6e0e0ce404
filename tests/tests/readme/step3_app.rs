use axum::{Router, http::StatusCode, routing::{get, post}};
use tower_webhooks::{VerifiedWebhook, WebhookLayer, core::scheme::StandardWebhooks};

#[derive(serde::Deserialize)]
struct EmailEvent {
    #[serde(rename = "type")]
    kind: String,
}

async fn on_email(VerifiedWebhook(event): VerifiedWebhook<EmailEvent>) -> StatusCode {
    println!("{}", event.kind); // runs once per delivery, on verified bytes
    StatusCode::NO_CONTENT
}

fn app(secret: &str) -> Result<Router, tower_webhooks::core::ConfigError> {
    let webhooks = WebhookLayer::new(StandardWebhooks::new(secret)?); // in-process dedup by default
    Ok(Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/webhooks/email", post(on_email).route_layer(webhooks)))
}
