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
