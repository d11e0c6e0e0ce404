//! `testing::signed_request` with a URL-signing provider: the `TestRequest`
//! it builds verifies through the middleware end to end, the URL signed
//! being `TEST_ORIGIN` and the request URI, or the delivery's own URL.

use actix_web::{App, HttpResponse, test, web};
use actix_webhooks::Webhooks;
use actix_webhooks::testing::{TEST_ORIGIN, TestDelivery, signed_request};
use webhooks_core::PublicUrl;
use webhooks_core::scheme::Twilio;

async fn ok() -> HttpResponse {
    HttpResponse::NoContent().finish()
}

fn twilio(public: &str) -> Twilio {
    Twilio::builder()
        .auth_token("twilio-auth-token")
        .public_url(PublicUrl::base(public).unwrap())
        .build()
        .unwrap()
}

#[actix_web::test]
async fn twilio_signed_for_the_test_origin_verifies_through_the_middleware() {
    let verifier = twilio(TEST_ORIGIN);
    let app = test::init_service(
        App::new().service(
            web::resource("/twilio/sms")
                .route(web::post().to(ok).wrap(Webhooks::new(verifier.clone()))),
        ),
    )
    .await;
    let form = "From=%2B15550001111&Body=hello";
    let request = signed_request(&verifier, "/twilio/sms?channel=sms", form).unwrap();
    let response = test::call_service(&app, request.to_request()).await;
    assert_eq!(response.status(), 204);

    // The query is signed: the same headers on another query are refused.
    let request = signed_request(&verifier, "/twilio/sms?channel=sms", form)
        .unwrap()
        .uri("/twilio/sms?channel=voice");
    let response = test::call_service(&app, request.to_request()).await;
    assert_eq!(response.status(), 401);
}

#[actix_web::test]
async fn a_delivery_url_matches_the_public_url_configured() {
    let verifier = twilio("https://hooks.example.org");
    let app = test::init_service(
        App::new().service(
            web::resource("/twilio/sms")
                .route(web::post().to(ok).wrap(Webhooks::new(verifier.clone()))),
        ),
    )
    .await;
    let form = "From=%2B15550001111&Body=hello";
    let request = signed_request(&verifier, "/twilio/sms", form).unwrap();
    let response = test::call_service(&app, request.to_request()).await;
    assert_eq!(response.status(), 401);
    let delivery = TestDelivery::new(form).url("https://hooks.example.org/twilio/sms");
    let request = signed_request(&verifier, "/twilio/sms", delivery).unwrap();
    let response = test::call_service(&app, request.to_request()).await;
    assert_eq!(response.status(), 204);
}
