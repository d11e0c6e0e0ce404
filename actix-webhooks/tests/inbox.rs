//! Inbox mode through the middleware: one line (`Receiver::builder(v).inbox(inbox)`),
//! 202 once stored, the route's handler never called, a retry answered as a
//! duplicate; the same answers as the tower layer (core decides).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use actix_web::test::{self, TestRequest};
use actix_web::{App, HttpResponse, web};
use actix_webhooks::Webhooks;
use webhooks_core::Receiver;
use webhooks_core::inbox::{Inbox, SqliteInbox};
use webhooks_core::scheme::StandardWebhooks;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn signed(id: &str, body: &'static str) -> TestRequest {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let headers = StandardWebhooks::new(SECRET)
        .unwrap()
        .sign_headers(id, now, body.as_bytes())
        .unwrap();
    let mut request = TestRequest::post().uri("/hook").set_payload(body);
    for (name, value) in &headers {
        request = request.insert_header((name.as_str(), value.to_str().unwrap()));
    }
    request
}

#[actix_web::test]
async fn stored_deliveries_get_202_and_retries_a_duplicate() {
    let inbox = SqliteInbox::connect("sqlite::memory:").await.unwrap();
    inbox.migrate().await.unwrap();
    let inbox: Arc<dyn Inbox> = Arc::new(inbox);
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .inbox(Arc::clone(&inbox))
        .build();
    let app = test::init_service(
        App::new().service(
            web::resource("/hook")
                .wrap(Webhooks::from_receiver(receiver))
                .route(web::post().to(move || {
                    counter.fetch_add(1, Ordering::SeqCst);
                    async { HttpResponse::NoContent().finish() }
                })),
        ),
    )
    .await;

    let first = test::call_service(&app, signed("msg_1", "{\"a\":1}").to_request()).await;
    assert_eq!(first.status(), 202);
    let again = test::call_service(&app, signed("msg_1", "{\"a\":1}").to_request()).await;
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers().get("webhook-duplicate").unwrap(), "true");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "workers run the handler, not the route"
    );
    assert_eq!(inbox.stats().await.unwrap().pending, 1);
}

/// The admin scope: list, inspect, replay once, stats — the same answers as
/// the tower service (core decides).
#[cfg(feature = "inbox-admin")]
#[actix_web::test]
async fn the_admin_scope_lists_inspects_and_replays_once() {
    use webhooks_core::inbox::{ClaimToken, NewEvent};

    let inbox = SqliteInbox::connect("sqlite::memory:").await.unwrap();
    inbox.migrate().await.unwrap();
    let inbox: Arc<dyn Inbox> = Arc::new(inbox);
    inbox
        .accept(&NewEvent::new("webhooks:test:a/1", "test", "{\"n\":1}"))
        .await
        .unwrap();
    let token = ClaimToken::random();
    let leased = inbox
        .lease(token, 1, std::time::Duration::from_secs(30), 3)
        .await
        .unwrap();
    let dead = inbox
        .dead_letter(&leased[0].meta.key, token, "boom")
        .await
        .unwrap();
    assert_eq!(dead, webhooks_core::inbox::Transition::Applied);

    let app = test::init_service(App::new().service(actix_webhooks::inbox_admin(
        "/admin/inbox",
        Arc::clone(&inbox),
    )))
    .await;
    macro_rules! call {
        ($method:ident, $uri:expr) => {{
            let response =
                test::call_service(&app, TestRequest::$method().uri($uri).to_request()).await;
            let status = response.status().as_u16();
            let bytes = test::read_body(response).await;
            (
                status,
                serde_json::from_slice::<serde_json::Value>(&bytes).unwrap_or_default(),
            )
        }};
    }
    let (status, list) = call!(get, "/admin/inbox/dead-letters?scheme=test");
    assert_eq!(status, 200);
    assert_eq!(list["items"][0]["last_error"], "boom");
    assert!(list["items"][0].get("body").is_none());
    let (status, one) = call!(get, "/admin/inbox/dead-letters/webhooks%3Atest%3Aa%2F1");
    assert_eq!(status, 200);
    assert_eq!(one["body"], "{\"n\":1}");
    assert_eq!(
        call!(
            post,
            "/admin/inbox/dead-letters/webhooks%3Atest%3Aa%2F1/replay"
        )
        .0,
        200
    );
    assert_eq!(
        call!(
            post,
            "/admin/inbox/dead-letters/webhooks%3Atest%3Aa%2F1/replay"
        )
        .0,
        409
    );
    assert_eq!(
        call!(delete, "/admin/inbox/dead-letters/webhooks%3Atest%3Aa%2F1").0,
        404
    );
    let (status, stats) = call!(get, "/admin/inbox/stats");
    assert_eq!((status, stats["pending"].as_u64()), (200, Some(1)));
    assert_eq!(call!(put, "/admin/inbox/stats").0, 405);
    assert_eq!(call!(get, "/admin/inbox/nothing").0, 404);
    assert_eq!(call!(post, "/admin/inbox/purge").0, 400);
}
