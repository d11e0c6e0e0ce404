//! Typed dispatch on the event type, through both frameworks: the type from a
//! header (GitHub's `X-GitHub-Event`) or from the body (Standard Webhooks'
//! `"type"`), enums internally (`tag = "type"`) and adjacently (`tag = "type",
//! content = "data"`) tagged. A known type reaches its variant; an unknown
//! one is acknowledged (2xx), never a 422; a known type with bad data is a
//! 422 naming the field. Also shown: the `#[serde(other)]` advice this
//! replaces answers 422 for every new type on an adjacently tagged enum.

use axum::Router;
use axum::routing::post;
use http::StatusCode;
use serde::Deserialize;
use tower::ServiceExt as _;
use webhooks_core::scheme::{GitHub, StandardWebhooks};
use webhooks_core::testing::TestDelivery;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const GITHUB_SECRET: &str = "dispatch-github-secret";

fn standard_webhooks() -> StandardWebhooks {
    StandardWebhooks::new(SECRET).unwrap()
}

fn github() -> GitHub {
    GitHub::new(GITHUB_SECRET).unwrap()
}

/// Standard Webhooks' body shape, `{"type", "timestamp", "data"}`, as an
/// adjacently tagged enum.
#[derive(Deserialize)]
#[serde(tag = "type", content = "data")]
enum Adjacent {
    #[serde(rename = "email.sent")]
    Sent { email_id: String },
    #[serde(rename = "email.opened")]
    Opened,
}

/// The same body as an internally tagged enum (fields beside the tag).
#[derive(Deserialize)]
#[serde(tag = "type")]
enum Internal {
    #[serde(rename = "email.sent")]
    Sent { data: SentData },
}

#[derive(Deserialize)]
struct SentData {
    email_id: String,
}

/// GitHub's events: the type in `X-GitHub-Event`, the body is the data.
#[derive(Deserialize)]
#[serde(tag = "type", content = "data")]
enum GitHubEvent {
    #[serde(rename = "issues")]
    Issues { action: String },
}

/// The old advice: `#[serde(other)]` on an adjacently tagged enum.
#[derive(Deserialize)]
#[serde(tag = "type", content = "data")]
#[allow(dead_code)] // only ever deserialized, to show the 422
enum OldAdvice {
    #[serde(rename = "email.sent")]
    Sent { email_id: String },
    #[serde(other)]
    Unknown,
}

use webhooks_core::event::Event;

fn adjacent(event: Event<Adjacent>) -> String {
    match event {
        Event::Known(Adjacent::Sent { email_id }) => format!("sent {email_id}"),
        Event::Known(Adjacent::Opened) => "opened".into(),
        Event::Unknown { event_type } => format!("unknown {event_type}"),
    }
}

fn internal(event: Event<Internal>) -> String {
    match event {
        Event::Known(Internal::Sent { data }) => format!("sent {}", data.email_id),
        Event::Unknown { event_type } => format!("unknown {event_type}"),
    }
}

fn github_event(event: Event<GitHubEvent>) -> String {
    match event {
        Event::Known(GitHubEvent::Issues { action }) => format!("issues {action}"),
        Event::Unknown { event_type } => format!("unknown {event_type}"),
    }
}

/// (route, scheme, delivery, expected status, expected body or its start).
struct Case {
    path: &'static str,
    github: bool,
    delivery: TestDelivery,
    status: u16,
    body: &'static str,
}

fn cases() -> Vec<Case> {
    let standard = |body: &'static str| TestDelivery::new(body);
    let gh = |kind: &str, body: &'static str| TestDelivery::new(body).event_type(kind);
    let sent =
        r#"{"type":"email.sent","timestamp":"2024-01-01T00:00:00Z","data":{"email_id":"em_1"}}"#;
    let new_type =
        r#"{"type":"email.scheduled","timestamp":"2024-01-01T00:00:00Z","data":{"at":1}}"#;
    let bad = r#"{"type":"email.sent","timestamp":"2024-01-01T00:00:00Z","data":{"email_id":7}}"#;
    let case = |path, github, delivery, status, body| Case {
        path,
        github,
        delivery,
        status,
        body,
    };
    vec![
        case("/adjacent", false, standard(sent), 200, "sent em_1"),
        case(
            "/adjacent",
            false,
            standard(r#"{"type":"email.opened","data":{}}"#),
            200,
            "opened",
        ),
        case(
            "/adjacent",
            false,
            standard(new_type),
            200,
            "unknown email.scheduled",
        ),
        case(
            "/adjacent",
            false,
            standard(bad),
            422,
            "invalid JSON at `data.email_id`",
        ),
        case("/internal", false, standard(sent), 200, "sent em_1"),
        case(
            "/internal",
            false,
            standard(new_type),
            200,
            "unknown email.scheduled",
        ),
        case("/internal", false, standard(bad), 422, "invalid JSON"),
        case(
            "/github",
            true,
            gh("issues", r#"{"action":"opened"}"#),
            200,
            "issues opened",
        ),
        case(
            "/github",
            true,
            gh("star", r#"{"action":"created"}"#),
            200,
            "unknown star",
        ),
        case(
            "/github",
            true,
            gh("issues", r#"{"action":5}"#),
            422,
            "invalid JSON at `data.action`",
        ),
        // What `#[serde(other)]` on an adjacently tagged enum does with a new type.
        case(
            "/old-advice",
            false,
            standard(new_type),
            422,
            "invalid JSON",
        ),
    ]
}

fn check(case: &Case, status: u16, body: &str) {
    assert_eq!(status, case.status, "{} {body}", case.path);
    assert!(body.starts_with(case.body), "{}: {body:?}", case.path);
}

#[tokio::test]
async fn axum_dispatches_on_the_event_type() {
    use tower_webhooks::{VerifiedWebhook, WebhookEvent, WebhookLayer};
    let standard = || WebhookLayer::new(standard_webhooks());
    let app: Router = Router::new()
        .route(
            "/adjacent",
            post(|WebhookEvent(e): WebhookEvent<Adjacent>| async move { adjacent(e) })
                .route_layer(standard()),
        )
        .route(
            "/internal",
            post(|WebhookEvent(e): WebhookEvent<Internal>| async move { internal(e) })
                .route_layer(standard()),
        )
        .route(
            "/github",
            post(|WebhookEvent(e): WebhookEvent<GitHubEvent>| async move { github_event(e) })
                .route_layer(WebhookLayer::new(github())),
        )
        .route(
            "/old-advice",
            post(|_: VerifiedWebhook<OldAdvice>| async { StatusCode::NO_CONTENT })
                .route_layer(standard()),
        );
    for case in cases() {
        let (path, delivery) = (case.path, case.delivery.clone());
        let request = if case.github {
            tower_webhooks::testing::signed_request(&github(), path, delivery)
        } else {
            tower_webhooks::testing::signed_request(&standard_webhooks(), path, delivery)
        }
        .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        check(&case, status, std::str::from_utf8(&body).unwrap());
    }
}

#[actix_web::test]
async fn actix_dispatches_on_the_event_type() {
    use actix_web::{App, HttpResponse, test, web};
    use actix_webhooks::{VerifiedWebhook, WebhookEvent, Webhooks};
    let standard = || Webhooks::new(standard_webhooks());
    let app = test::init_service(
        App::new()
            .service(web::resource("/adjacent").route(
                web::post()
                    .to(|WebhookEvent(e): WebhookEvent<Adjacent>| async move { adjacent(e) })
                    .wrap(standard()),
            ))
            .service(web::resource("/internal").route(
                web::post()
                    .to(|WebhookEvent(e): WebhookEvent<Internal>| async move { internal(e) })
                    .wrap(standard()),
            ))
            .service(
                web::resource("/github").route(
                    web::post()
                        .to(|WebhookEvent(e): WebhookEvent<GitHubEvent>| async move {
                            github_event(e)
                        })
                        .wrap(Webhooks::new(github())),
                ),
            )
            .service(web::resource("/old-advice").route(
                web::post()
                    .to(|_: VerifiedWebhook<OldAdvice>| async { HttpResponse::NoContent().finish() })
                    .wrap(standard()),
            )),
    )
    .await;
    for case in cases() {
        let (path, delivery) = (case.path, case.delivery.clone());
        let request = if case.github {
            actix_webhooks::testing::signed_request(&github(), path, delivery)
        } else {
            actix_webhooks::testing::signed_request(&standard_webhooks(), path, delivery)
        }
        .unwrap()
        .to_request();
        let response = test::call_service(&app, request).await;
        let status = response.status().as_u16();
        let body = test::read_body(response).await;
        check(&case, status, std::str::from_utf8(&body).unwrap());
    }
}
