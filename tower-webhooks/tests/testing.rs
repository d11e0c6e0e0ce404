//! `testing::signed_request` with a URL-signing provider: the request it
//! builds verifies through the layer end to end, the URL signed being
//! `TEST_ORIGIN` and the request URI, or the delivery's own URL.

use axum::Router;
use axum::routing::post;
use http::StatusCode;
use tower::ServiceExt as _;
use tower_webhooks::WebhookLayer;
use tower_webhooks::testing::{TEST_ORIGIN, TestDelivery, signed_request};
use webhooks_core::PublicUrl;
use webhooks_core::scheme::{HubSpot, Twilio};

async fn ok() -> StatusCode {
    StatusCode::NO_CONTENT
}

fn twilio(public: &str) -> Twilio {
    Twilio::builder()
        .auth_token("twilio-auth-token")
        .public_url(PublicUrl::base(public).unwrap())
        .build()
        .unwrap()
}

fn app(verifier: Twilio) -> Router {
    Router::new().route(
        "/twilio/sms",
        post(ok).route_layer(WebhookLayer::new(verifier)),
    )
}

#[tokio::test]
async fn twilio_signed_for_the_test_origin_verifies_through_the_layer() {
    let verifier = twilio(TEST_ORIGIN);
    let form = "From=%2B15550001111&Body=hello";
    let request = signed_request(&verifier, "/twilio/sms?channel=sms", form).unwrap();
    let response = app(verifier.clone()).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);

    // The query is signed: the same headers on another query are refused.
    let mut request = signed_request(&verifier, "/twilio/sms?channel=sms", form).unwrap();
    *request.uri_mut() = "/twilio/sms?channel=voice".parse().unwrap();
    let response = app(verifier).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_delivery_url_matches_the_public_url_configured() {
    let verifier = twilio("https://hooks.example.org");
    let form = "From=%2B15550001111&Body=hello";
    // Signed for TEST_ORIGIN: not the URL this verifier rebuilds.
    let request = signed_request(&verifier, "/twilio/sms", form).unwrap();
    let response = app(verifier.clone()).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    // Signed for the public URL: verifies.
    let delivery = TestDelivery::new(form).url("https://hooks.example.org/twilio/sms");
    let request = signed_request(&verifier, "/twilio/sms", delivery).unwrap();
    let response = app(verifier).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn hubspot_signs_method_url_body_and_milliseconds() {
    let verifier = HubSpot::builder()
        .client_secret("hubspot-client-secret")
        .public_url(PublicUrl::base(TEST_ORIGIN).unwrap())
        .build()
        .unwrap();
    let app = Router::new().route(
        "/hubspot",
        post(ok).route_layer(WebhookLayer::new(verifier.clone())),
    );
    let body = r#"[{"eventId":1,"subscriptionType":"contact.creation"}]"#;
    let request = signed_request(&verifier, "/hubspot", body).unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn a_form_delivery_reaches_axum_form_with_its_content_type() {
    let verifier = twilio(TEST_ORIGIN);
    let app = Router::new().route(
        "/twilio/sms",
        post(
            |axum::Form(form): axum::Form<Vec<(String, String)>>| async move {
                assert_eq!(form[1], ("Body".to_owned(), "hello".to_owned()));
                StatusCode::NO_CONTENT
            },
        )
        .route_layer(WebhookLayer::new(verifier.clone())),
    );
    let form = "From=%2B15550001111&Body=hello";
    let delivery = TestDelivery::new(form).content_type("application/x-www-form-urlencoded");
    let request = signed_request(&verifier, "/twilio/sms", delivery).unwrap();
    assert_eq!(
        request.headers()[http::header::CONTENT_TYPE],
        "application/x-www-form-urlencoded"
    );
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    // The default is JSON, which axum's `Form` refuses.
    let request = signed_request(&verifier, "/twilio/sms", form).unwrap();
    assert_eq!(
        request.headers()[http::header::CONTENT_TYPE],
        "application/json"
    );
}
