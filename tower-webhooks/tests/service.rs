//! The tower service on its own: generic bodies, extensions for outer layers,
//! and both ways axum attaches it.

use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::routing::post;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full};
use tower::{ServiceBuilder, ServiceExt as _};
use tower_webhooks::{Rejection, VerifiedWebhook, WebhookLayer};
use webhooks_core::scheme::StandardWebhooks;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn signed(id: &str, body: &'static [u8]) -> Request<Full<Bytes>> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let headers = StandardWebhooks::new(SECRET)
        .unwrap()
        .sign_headers(id, now, body)
        .unwrap();
    let mut request = Request::post("/hook")
        .body(Full::new(Bytes::from_static(body)))
        .unwrap();
    *request.headers_mut() = headers;
    request
}

async fn echo(
    request: Request<axum::body::Body>,
) -> Result<Response<axum::body::Body>, Infallible> {
    let delivery = request
        .extensions()
        .get::<webhooks_core::Delivery>()
        .cloned();
    let body = request.into_body().collect().await.unwrap().to_bytes();
    // The bytes put back are the verified ones.
    assert_eq!(Some(&body), delivery.as_ref().map(|d| &d.body));
    Ok(Response::new(axum::body::Body::from(body)))
}

#[tokio::test]
async fn any_body_type_in_and_the_verified_bytes_back() {
    let layer = WebhookLayer::new(StandardWebhooks::new(SECRET).unwrap());
    let service = ServiceBuilder::new().layer(layer).service_fn(echo);
    let response = service
        .clone()
        .oneshot(signed("msg_1", b"{\"a\":1}"))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body.as_ref(), b"{\"a\":1}");
}

#[tokio::test]
async fn rejections_are_responses_with_the_reason_in_extensions() {
    let layer = WebhookLayer::new(StandardWebhooks::new(SECRET).unwrap());
    let service = ServiceBuilder::new().layer(layer).service_fn(echo);
    let mut request = signed("msg_2", b"{}");
    *request.body_mut() = Full::new(Bytes::from_static(b"{ }"));
    let response = service.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        response.extensions().get::<Rejection>(),
        Some(&Rejection::Verify(
            webhooks_core::VerifyError::NoMatchingSignature
        ))
    );
}

#[derive(serde::Deserialize)]
struct Event {
    a: u32,
}

async fn typed(VerifiedWebhook(event): VerifiedWebhook<Event>) -> String {
    event.a.to_string()
}

#[tokio::test]
async fn route_layer_and_layer_both_accept_it() {
    let layer = WebhookLayer::new(StandardWebhooks::new(SECRET).unwrap());
    let with_route_layer = Router::new()
        .route("/hook", post(typed))
        .route_layer(layer.clone());
    let with_layer = Router::new().route("/hook", post(typed)).layer(layer);
    for (i, app) in [with_route_layer, with_layer].into_iter().enumerate() {
        let response = app
            .oneshot(signed(&format!("msg_r{i}"), b"{\"a\":7}"))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body.as_ref(), b"7");
    }
}

/// A body sent frame by frame.
type FrameBody = http_body_util::StreamBody<
    futures_util::stream::Iter<std::vec::IntoIter<Result<http_body::Frame<Bytes>, Infallible>>>,
>;

/// `signed`'s request with its body sent as `frames`, ending with trailers
/// (which carry nothing verified) and without a `Content-Length`.
fn in_frames(id: &str, body: &'static [u8], frames: &[&'static [u8]]) -> Request<FrameBody> {
    let (parts, _) = signed(id, body).into_parts();
    let mut frames: Vec<_> = frames
        .iter()
        .map(|f| Ok(http_body::Frame::data(Bytes::from_static(f))))
        .collect();
    frames.push(Ok(http_body::Frame::trailers(http::HeaderMap::new())));
    Request::from_parts(
        parts,
        http_body_util::StreamBody::new(futures_util::stream::iter(frames)),
    )
}

#[tokio::test]
async fn a_body_in_several_frames_is_joined_then_verified() {
    let layer = WebhookLayer::new(StandardWebhooks::new(SECRET).unwrap());
    let service = ServiceBuilder::new().layer(layer).service_fn(echo);
    let request = in_frames("msg_frames", b"{\"a\":12}", &[b"{\"a\"", b":1", b"2}"]);
    let response = service.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body.as_ref(), b"{\"a\":12}");
}

#[tokio::test]
async fn a_body_past_the_limit_in_several_frames_is_413() {
    let receiver = webhooks_core::Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .body_limit(8)
        .build();
    let service = ServiceBuilder::new()
        .layer(WebhookLayer::from_receiver(receiver))
        .service_fn(echo);
    // 9 bytes in frames of 4, 4 and 1: refused at the third.
    let request = in_frames("msg_big", b"{\"a\":123}", &[b"{\"a\"", b":123", b"}"]);
    let response = service.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // Exactly the limit, in frames: accepted.
    let request = in_frames("msg_limit", b"{\"a\":12}", &[b"{\"a\"", b":12}"]);
    let response = service.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

/// Issue 34, item 8: with a response budget, a handler that answers in
/// time answers itself; one that does not is stored in the inbox and
/// answered `202` while it runs on, and the worker claiming on the same
/// dedup store completes the event without running it again.
#[tokio::test]
async fn a_late_handler_is_handed_to_the_inbox_and_runs_once() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    use webhooks_core::dedup::{DedupStore, MemoryStore};
    use webhooks_core::inbox::{Inbox, Job, SqliteInbox, Worker};
    use webhooks_core::{Receiver, ResponseBudget};

    let inbox = SqliteInbox::connect("sqlite::memory:").await.unwrap();
    inbox.migrate().await.unwrap();
    let inbox: Arc<dyn Inbox> = Arc::new(inbox);
    // In-process here; a store that outlives the process in production.
    let store: Arc<dyn DedupStore> = Arc::new(MemoryStore::new());
    let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .shared_store(Arc::clone(&store))
        .response_budget(ResponseBudget::new(Arc::clone(&inbox)).budget(Duration::from_millis(100)))
        .build();
    let effects = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&effects);
    let service = ServiceBuilder::new()
        .layer(WebhookLayer::from_receiver(receiver))
        .service_fn(move |request: Request<axum::body::Body>| {
            let effects = Arc::clone(&counted);
            async move {
                let slow = request.uri().path() == "/slow";
                if slow {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                effects.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Infallible>(Response::new(axum::body::Body::from("done")))
            }
        });

    let fast = service
        .clone()
        .oneshot(signed("msg_fast", b"{}"))
        .await
        .unwrap();
    assert_eq!(fast.status(), StatusCode::OK, "answered by the handler");

    let mut slow = signed("msg_slow", b"{\"late\":true}");
    *slow.uri_mut() = "/slow".parse().unwrap();
    let late = service.clone().oneshot(slow).await.unwrap();
    assert_eq!(late.status(), StatusCode::ACCEPTED, "stored and answered");
    assert_eq!(inbox.stats().await.unwrap().pending, 1);

    // The worker waits for the inline run, finds it done, runs nothing.
    let ran = Arc::new(AtomicUsize::new(0));
    let worker_ran = Arc::clone(&ran);
    let report = Worker::builder(Arc::clone(&inbox))
        .claim_on(store, Duration::from_secs(7 * 86_400))
        .handler(move |_: Job<serde_json::Value>| {
            let ran = Arc::clone(&worker_ran);
            async move {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok::<(), std::io::Error>(())
            }
        })
        .run_until_idle()
        .await;
    assert_eq!(report.completed, 1, "{report:?}");
    assert_eq!(ran.load(Ordering::SeqCst), 0, "the inline run did it");
    assert_eq!(effects.load(Ordering::SeqCst), 2, "one effect each");
}
