//! aws_lambda_events' SNS and SES models through the extractors (feature
//! `typed-aws`, docs/typed-events.md): an Amazon SES receipt notification
//! delivered over SNS (an SES receipt rule's SNS action), signed as SNS signs
//! (RSA, the test certificate served by a test fetcher), reaches the handler
//! as `VerifiedWebhook<SnsMessageObj<SimpleEmailService>>`: the SNS envelope
//! and the SES notification inside its `Message` string, both typed, on axum
//! and on actix-web. A forged message is a 401 before the handler; a
//! `Message` that is not an SES notification is a 422 naming `Message`.

use aws_lambda_events::event::ses::SimpleEmailService;
use aws_lambda_events::event::sns::SnsMessageObj;
use axum::Router;
use axum::routing::post;
use tower::ServiceExt as _;
use webhooks_conformance::providers_email::{SNS_CERT_URL, SNS_TOPIC, TestCertificates};
use webhooks_core::scheme::sns::{SignatureVersion, Signer, Sns, SnsMessage};

/// The test certificate's private key (core/tests/data/sns/).
const SNS_KEY: &[u8] = include_bytes!("../../core/tests/data/sns/test-key.der");
/// An SES receipt notification, see data/typed/README.md.
const SES_RECEIVED: &str = include_str!("data/typed/ses_received.json");

/// SES over SNS, as the handler receives it.
type SesOverSns = SnsMessageObj<SimpleEmailService>;

/// What the handler does with the typed notification: read its fields.
fn describe(sns: &SesOverSns) -> String {
    let ses = &sns.message;
    format!(
        "{} from {}: {:?} from {:?} to {:?}, spam {:?}, {} bytes of content",
        sns.message_id,
        sns.topic_arn,
        ses.mail.common_headers.subject.as_deref().unwrap_or("-"),
        ses.mail.common_headers.from,
        ses.receipt.recipients,
        ses.receipt.spam_verdict.status.as_deref().unwrap_or("-"),
        ses.content.as_deref().map_or(0, str::len),
    )
}

fn verifier() -> Sns {
    Sns::builder(TestCertificates::default())
        .topic_arn(SNS_TOPIC)
        .build()
        .unwrap()
}

/// The body SNS posts: `message` signed (SignatureVersion 2) by the test key.
fn signed(message_id: &str, message: &str) -> Vec<u8> {
    let mut notification =
        SnsMessage::notification(message_id, SNS_TOPIC, message, "2026-12-01T17:00:00.000Z")
            .with_subject("Amazon SES Email Receipt Notification");
    notification.unsubscribe_url = Some(format!(
        "https://sns.eu-west-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn={SNS_TOPIC}:0b5d8c2e"
    ));
    Signer::from_pkcs8_der(SNS_KEY, SNS_CERT_URL)
        .unwrap()
        .sign(notification, SignatureVersion::V2)
        .unwrap()
}

/// (name, body, expected status, expected start of the answer).
fn cases() -> Vec<(&'static str, Vec<u8>, u16, &'static str)> {
    let received = signed("6a1f4f8e-1b0e-5f3c-9d3e-6f4b2c1d0e9a", SES_RECEIVED);
    let forged = String::from_utf8(received.clone())
        .unwrap()
        .replace("Example subject", "Forged subject")
        .into_bytes();
    let not_ses = signed(
        "0c6c7a43-9b2d-5e8f-a1c4-3d2e1f0a9b8c",
        r#"{"notificationType":"Received","mail":{"headersTruncated":"sk_live_leak"}}"#,
    );
    vec![
        (
            "SES receipt notification over SNS",
            received,
            200,
            "6a1f4f8e-1b0e-5f3c-9d3e-6f4b2c1d0e9a from arn:aws:sns:eu-west-1:123456789012:ses-events: \
             \"Example subject\" from [\"sender@example.com\"] to [\"recipient@example.com\"], \
             spam \"PASS\", 133 bytes of content",
        ),
        ("forged (body changed after signing)", forged, 401, ""),
        (
            "a Message that is no SES notification",
            not_ses,
            422,
            "invalid JSON at `Message`: invalid type, expected a boolean",
        ),
    ]
}

fn check(name: &str, status: u16, body: &[u8], expected: u16, start: &str) {
    let body = std::str::from_utf8(body).unwrap();
    assert_eq!(status, expected, "{name}: {body}");
    assert!(body.starts_with(start), "{name}: {body:?}");
    assert!(!body.contains("sk_live_leak"), "{name}: {body:?}");
}

#[tokio::test]
async fn axum_hands_the_handler_ses_over_sns() {
    use tower_webhooks::{VerifiedWebhook, WebhookLayer};

    async fn on_ses(VerifiedWebhook(sns): VerifiedWebhook<SesOverSns>) -> String {
        describe(&sns)
    }

    let app: Router = Router::new().route(
        "/ses",
        post(on_ses).route_layer(WebhookLayer::new(verifier())),
    );
    for (name, body, expected, start) in cases() {
        let request = http::Request::post("/ses")
            .header("content-type", "text/plain; charset=UTF-8")
            .header("x-amz-sns-message-type", "Notification")
            .body(axum::body::Body::from(body))
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
async fn actix_hands_the_handler_ses_over_sns() {
    use actix_web::{App, test, web};
    use actix_webhooks::{VerifiedWebhook, Webhooks};

    async fn on_ses(VerifiedWebhook(sns): VerifiedWebhook<SesOverSns>) -> String {
        describe(&sns)
    }

    let app = test::init_service(App::new().service(
        web::resource("/ses").route(web::post().to(on_ses).wrap(Webhooks::new(verifier()))),
    ))
    .await;
    for (name, body, expected, start) in cases() {
        let request = test::TestRequest::post()
            .uri("/ses")
            .insert_header(("content-type", "text/plain; charset=UTF-8"))
            .insert_header(("x-amz-sns-message-type", "Notification"))
            .set_payload(body)
            .to_request();
        let response = test::call_service(&app, request).await;
        let status = response.status().as_u16();
        let body = test::read_body(response).await;
        check(name, status, &body, expected, start);
    }
}
