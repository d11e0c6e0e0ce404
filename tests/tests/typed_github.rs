//! octocrab's GitHub event model through the extractors (feature
//! `typed-github`, docs/typed-events.md). octocrab builds its `WebhookEvent`
//! from the `X-GitHub-Event` header and the body
//! (`WebhookEvent::try_from_header_and_body`), so it is no `Deserialize`
//! type for `VerifiedWebhook<T>`: the handler takes `RawWebhook` (the
//! verified metadata, whose `event_type` is that header, and the exact
//! verified bytes) and calls it; `ExtractError::from(serde_json::Error)`
//! makes its failure the same 422 as the extractors'. Recorded `push` and
//! `issues` deliveries reach the handler typed, on axum and on actix-web; an
//! event type octocrab does not model is acknowledged; a forged signature is
//! a 401 before the handler.

use axum::Router;
use axum::routing::post;
use octocrab::models::webhook_events::{WebhookEvent, WebhookEventPayload};
use tower::ServiceExt as _;
use webhooks_core::ExtractError;
use webhooks_core::scheme::GitHub;
use webhooks_core::testing::TestDelivery;

const SECRET: &str = "typed-github-secret";
const FORGER: &str = "not-the-github-secret";

/// Recorded deliveries, see data/typed/README.md.
const PUSH: &str = include_str!("data/typed/github_push.json");
const ISSUES_OPENED: &str = include_str!("data/typed/github_issues_opened.json");

/// What the handler does with the typed event: read its fields.
fn describe(event: &WebhookEvent) -> String {
    let repository = event
        .repository
        .as_ref()
        .and_then(|r| r.full_name.as_deref())
        .unwrap_or("-");
    match &event.specific {
        WebhookEventPayload::Push(push) => {
            format!("push {} to {repository} at {}", push.r#ref, push.after)
        }
        WebhookEventPayload::Issues(issues) => format!(
            "issues {:?} #{} {:?} in {repository}",
            issues.action, issues.issue.number, issues.issue.title
        ),
        WebhookEventPayload::Unknown(_) => format!("not modelled: {:?}", event.kind),
        _ => format!("not handled: {:?}", event.kind),
    }
}

/// (name, secret, X-GitHub-Event, body, expected status, expected start).
type Case = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    u16,
    &'static str,
);

fn cases() -> Vec<Case> {
    vec![
        (
            "push",
            SECRET,
            "push",
            PUSH,
            200,
            "push refs/tags/v0.2.1 to gagbo/app-test-repo at f19c884ab35c8d243bf9d857d631a5d4f190079f",
        ),
        (
            "issues",
            SECRET,
            "issues",
            ISSUES_OPENED,
            200,
            "issues Opened #1 \"Add option to remove the notification\" in gagbo/circadian.nvim",
        ),
        (
            "a type octocrab does not model: acknowledged",
            SECRET,
            "some_future_event",
            r#"{"action":"created"}"#,
            200,
            "not modelled: Unknown(\"some_future_event\")",
        ),
        (
            "a known type whose body does not fit",
            SECRET,
            "push",
            r#"{"created":"sk_live_leak"}"#,
            422,
            "invalid JSON at `.`: invalid type, expected a boolean",
        ),
        ("forged signature", FORGER, "push", PUSH, 401, ""),
    ]
}

fn check(name: &str, status: u16, body: &[u8], expected: u16, start: &str) {
    let body = std::str::from_utf8(body).unwrap();
    assert_eq!(status, expected, "{name}: {body}");
    assert!(body.starts_with(start), "{name}: {body:?}");
    assert!(!body.contains("sk_live_leak"), "{name}: {body:?}");
}

fn delivery(event_type: &str, body: &'static str) -> TestDelivery {
    TestDelivery::new(body).event_type(event_type)
}

#[tokio::test]
async fn axum_hands_the_handler_an_octocrab_event() {
    use tower_webhooks::{ExtractRejection, RawWebhook, WebhookLayer};

    async fn on_github(raw: RawWebhook) -> Result<String, ExtractRejection> {
        let kind = raw.meta.event_type.as_deref().unwrap_or_default();
        let event =
            WebhookEvent::try_from_header_and_body(kind, &raw.body).map_err(ExtractError::from)?;
        Ok(describe(&event))
    }

    let app: Router = Router::new().route(
        "/github",
        post(on_github).route_layer(WebhookLayer::new(GitHub::new(SECRET).unwrap())),
    );
    for (name, secret, kind, body, expected, start) in cases() {
        let scheme = GitHub::new(secret).unwrap();
        let request =
            tower_webhooks::testing::signed_request(&scheme, "/github", delivery(kind, body))
                .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        check(name, status, &body, expected, start);
    }
}

#[actix_web::test]
async fn actix_hands_the_handler_an_octocrab_event() {
    use actix_web::{App, test, web};
    use actix_webhooks::{ExtractRejection, RawWebhook, Webhooks};

    async fn on_github(raw: RawWebhook) -> Result<String, ExtractRejection> {
        let kind = raw.meta.event_type.as_deref().unwrap_or_default();
        let event =
            WebhookEvent::try_from_header_and_body(kind, &raw.body).map_err(ExtractError::from)?;
        Ok(describe(&event))
    }

    let app = test::init_service(
        App::new().service(
            web::resource("/github").route(
                web::post()
                    .to(on_github)
                    .wrap(Webhooks::new(GitHub::new(SECRET).unwrap())),
            ),
        ),
    )
    .await;
    for (name, secret, kind, body, expected, start) in cases() {
        let scheme = GitHub::new(secret).unwrap();
        let request =
            actix_webhooks::testing::signed_request(&scheme, "/github", delivery(kind, body))
                .unwrap()
                .to_request();
        let response = test::call_service(&app, request).await;
        let status = response.status().as_u16();
        let body = test::read_body(response).await;
        check(name, status, &body, expected, start);
    }
}
