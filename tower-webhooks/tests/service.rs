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
