//! async-stripe's event model through the extractors (feature `typed-stripe`,
//! docs/typed-events.md): a signed Stripe `payment_intent.succeeded` reaches
//! the handler as `VerifiedWebhook<stripe_webhook::Event>`, its PaymentIntent
//! typed, on axum and on actix-web. A forged signature is a 401 before the
//! handler; a type the crate was built without is a 422 (so is data that does
//! not fit), the sender's values never in the answer.

use axum::Router;
use axum::routing::post;
use stripe_webhook::{Event, EventObject};
use tower::ServiceExt as _;
use webhooks_core::scheme::Stripe;
use webhooks_core::testing::TestDelivery;

const SECRET: &str = "whsec_typed_stripe_test_secret";
const FORGER: &str = "whsec_not_the_endpoint_secret";

/// Stripe's `payment_intent.succeeded`, see data/typed/README.md.
const SUCCEEDED: &str = include_str!("data/typed/stripe_payment_intent_succeeded.json");

/// What the handler does with the typed event: read its fields.
fn describe(event: &Event) -> String {
    match &event.data.object {
        EventObject::PaymentIntentSucceeded(intent) => format!(
            "{} {}: {} {} {} received, order {}",
            event.type_.as_str(),
            event.id.as_str(),
            intent.id.as_str(),
            intent.amount_received,
            intent.currency,
            intent.metadata.get("order_id").map_or("-", String::as_str),
        ),
        _ => format!("{} not handled", event.type_.as_str()),
    }
}

/// (name, secret, body, expected status, expected start of the answer).
type Case = (&'static str, &'static str, String, u16, &'static str);

fn cases() -> Vec<Case> {
    // A type the crate's features leave out (async-stripe-treasury is off).
    let not_compiled_in = SUCCEEDED
        .replace(
            "payment_intent.succeeded",
            "treasury.received_credit.created",
        )
        .replace("evt_3MtwBwLkdIwHu7ix0nz5SEy3", "evt_not_compiled_in");
    // The amount as a string: the sender's value must not be echoed.
    let unfit = SUCCEEDED
        .replace(
            "\"amount_received\": 2000",
            "\"amount_received\": \"sk_live_leak\"",
        )
        .replace("evt_3MtwBwLkdIwHu7ix0nz5SEy3", "evt_unfit");
    vec![
        (
            "signed payment_intent.succeeded",
            SECRET,
            SUCCEEDED.to_owned(),
            200,
            "payment_intent.succeeded evt_3MtwBwLkdIwHu7ix0nz5SEy3: \
             pi_3MtwBwLkdIwHu7ix28a3tqPa 2000 usd received, order 6735",
        ),
        ("forged signature", FORGER, SUCCEEDED.to_owned(), 401, ""),
        (
            "type left out of the crate's features",
            SECRET,
            not_compiled_in,
            422,
            "invalid JSON at `.`: data.object: unknown event type",
        ),
        (
            "data that does not fit",
            SECRET,
            unfit,
            422,
            "invalid JSON at `.`: data.object.invalid type, expected i64",
        ),
    ]
}

fn check(name: &str, status: u16, body: &[u8], expected: u16, start: &str) {
    let body = std::str::from_utf8(body).unwrap();
    assert_eq!(status, expected, "{name}: {body}");
    assert!(body.starts_with(start), "{name}: {body:?}");
    assert!(!body.contains("sk_live_leak"), "{name}: {body:?}");
}

fn signed(secret: &str, body: String) -> (Stripe, TestDelivery) {
    (Stripe::new(secret).unwrap(), TestDelivery::new(body))
}

#[tokio::test]
async fn axum_hands_the_handler_a_stripe_event() {
    use tower_webhooks::{VerifiedWebhook, WebhookLayer};

    async fn on_stripe(VerifiedWebhook(event): VerifiedWebhook<Event>) -> String {
        describe(&event)
    }

    let app: Router = Router::new().route(
        "/stripe",
        post(on_stripe).route_layer(WebhookLayer::new(Stripe::new(SECRET).unwrap())),
    );
    for (name, secret, body, expected, start) in cases() {
        let (scheme, delivery) = signed(secret, body);
        let request =
            tower_webhooks::testing::signed_request(&scheme, "/stripe", delivery).unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        check(name, status, &body, expected, start);
    }
}

#[actix_web::test]
async fn actix_hands_the_handler_a_stripe_event() {
    use actix_web::{App, test, web};
    use actix_webhooks::{VerifiedWebhook, Webhooks};

    async fn on_stripe(VerifiedWebhook(event): VerifiedWebhook<Event>) -> String {
        describe(&event)
    }

    let app = test::init_service(
        App::new().service(
            web::resource("/stripe").route(
                web::post()
                    .to(on_stripe)
                    .wrap(Webhooks::new(Stripe::new(SECRET).unwrap())),
            ),
        ),
    )
    .await;
    for (name, secret, body, expected, start) in cases() {
        let (scheme, delivery) = signed(secret, body);
        let request = actix_webhooks::testing::signed_request(&scheme, "/stripe", delivery)
            .unwrap()
            .to_request();
        let response = test::call_service(&app, request).await;
        let status = response.status().as_u16();
        let body = test::read_body(response).await;
        check(name, status, &body, expected, start);
    }
}
