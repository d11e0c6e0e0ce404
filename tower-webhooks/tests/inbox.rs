//! Inbox mode through the layer: one line (`Receiver::builder(v).inbox(inbox)`),
//! 202 once stored, the route's handler never called, a retry answered as a
//! duplicate. The decisions are core's; this checks the layer passes them on.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::routing::post;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use tower::ServiceExt as _;
use tower_webhooks::WebhookLayer;
use webhooks_core::Receiver;
use webhooks_core::inbox::{Inbox, SqliteInbox};
use webhooks_core::scheme::StandardWebhooks;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn signed(id: &str, body: &'static [u8]) -> Request<axum::body::Body> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let headers = StandardWebhooks::new(SECRET)
        .unwrap()
        .sign_headers(id, now, body)
        .unwrap();
    let mut request = Request::post("/hook")
        .body(axum::body::Body::new(Full::new(Bytes::from_static(body))))
        .unwrap();
    *request.headers_mut() = headers;
    request
}

#[tokio::test]
async fn stored_deliveries_get_202_and_retries_a_duplicate() {
    let inbox = SqliteInbox::connect("sqlite::memory:").await.unwrap();
    inbox.migrate().await.unwrap();
    let inbox: Arc<dyn Inbox> = Arc::new(inbox);
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .inbox(Arc::clone(&inbox))
        .build();
    let app = Router::new()
        .route(
            "/hook",
            post(move || async move {
                counter.fetch_add(1, Ordering::SeqCst);
                StatusCode::NO_CONTENT
            }),
        )
        .layer(WebhookLayer::from_receiver(receiver));

    let first = app
        .clone()
        .oneshot(signed("msg_1", b"{\"a\":1}"))
        .await
        .unwrap();
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    let again = app.oneshot(signed("msg_1", b"{\"a\":1}")).await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(again.headers()["webhook-duplicate"], "true");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "workers run the handler, not the route"
    );
    assert_eq!(inbox.stats().await.unwrap().pending, 1);
}

/// The admin service, nested under a prefix: list, inspect, replay once, stats.
#[cfg(feature = "inbox-admin")]
#[tokio::test]
async fn the_admin_service_lists_inspects_and_replays_once() {
    use http_body_util::BodyExt as _;
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

    let app = Router::new().nest_service(
        "/admin/inbox",
        tower_webhooks::InboxAdmin::new(Arc::clone(&inbox)),
    );
    let call = |method: &str, uri: &str| {
        let app = app.clone();
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .body(axum::body::Body::empty())
            .unwrap();
        async move {
            let response = app.oneshot(request).await.unwrap();
            let status = response.status();
            let bytes = response.into_body().collect().await.unwrap().to_bytes();
            let json = serde_json::from_slice::<serde_json::Value>(&bytes).unwrap_or_default();
            (status, json)
        }
    };
    let (status, list) = call("GET", "/admin/inbox/dead-letters?scheme=test").await;
    assert_eq!(status, 200);
    assert_eq!(list["items"][0]["last_error"], "boom");
    assert!(list["items"][0].get("body").is_none());
    let (status, one) = call("GET", "/admin/inbox/dead-letters/webhooks%3Atest%3Aa%2F1").await;
    assert_eq!(status, 200);
    assert_eq!(one["body"], "{\"n\":1}");
    assert_eq!(
        call(
            "POST",
            "/admin/inbox/dead-letters/webhooks%3Atest%3Aa%2F1/replay"
        )
        .await
        .0,
        200
    );
    assert_eq!(
        call(
            "POST",
            "/admin/inbox/dead-letters/webhooks%3Atest%3Aa%2F1/replay"
        )
        .await
        .0,
        409
    );
    assert_eq!(
        call(
            "DELETE",
            "/admin/inbox/dead-letters/webhooks%3Atest%3Aa%2F1"
        )
        .await
        .0,
        404
    );
    let (status, stats) = call("GET", "/admin/inbox/stats").await;
    assert_eq!((status.as_u16(), stats["pending"].as_u64()), (200, Some(1)));
    assert_eq!(call("PUT", "/admin/inbox/stats").await.0, 405);
    assert_eq!(call("GET", "/admin/inbox/nothing").await.0, 404);
    assert_eq!(call("POST", "/admin/inbox/purge").await.0, 400);
}
