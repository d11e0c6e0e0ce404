//! The layer and its service.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum_core::body::Body;
use axum_core::extract::DefaultBodyLimit;
use bytes::Bytes;
use http::{Request, Response};
use http_body::Body as HttpBody;
use tower_layer::Layer;
use tower_service::Service;
use webhooks_core::{BodyCollector, Receiver, Rejection, RequestVerifier};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Verifies, deduplicates and guards every request to the wrapped service.
///
/// The body the handler reads is the one the layer read, within the
/// receiver's limit, and verified: the layer turns axum's own extractors'
/// limit off ([`DefaultBodyLimit::disable`]) on the request it hands on, so
/// a body it verified and claimed is never refused by the handler's
/// extractor for its size (axum's default is 2 MiB), and the extractor
/// does not wrap a body already whole in a limit of its own. A
/// `DefaultBodyLimit` layered between this layer and the handler still
/// wins: keep its limit at least the receiver's.
///
/// ```
/// use tower_webhooks::WebhookLayer;
/// use tower_webhooks::core::{Receiver, scheme::StandardWebhooks};
/// use std::time::Duration;
///
/// # fn main() -> Result<(), tower_webhooks::core::ConfigError> {
/// let verifier = StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
/// // Defaults: 1 MiB limit, in-process dedup.
/// let layer = WebhookLayer::new(verifier.clone());
/// // Or configured:
/// let layer = WebhookLayer::from_receiver(
///     Receiver::builder(verifier)
///         .body_limit(256 * 1024)
///         .lease(Duration::from_secs(30))
///         .build(),
/// );
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct WebhookLayer {
    receiver: Receiver,
}

impl fmt::Debug for WebhookLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookLayer")
            .field("receiver", &self.receiver)
            .finish()
    }
}

impl WebhookLayer {
    /// A layer with the default pipeline around `verifier`.
    #[must_use]
    pub fn new(verifier: impl RequestVerifier + 'static) -> Self {
        Self::from_receiver(Receiver::new(verifier))
    }

    /// A layer around a configured pipeline.
    #[must_use]
    pub fn from_receiver(receiver: Receiver) -> Self {
        Self { receiver }
    }
}

impl From<Receiver> for WebhookLayer {
    fn from(receiver: Receiver) -> Self {
        Self::from_receiver(receiver)
    }
}

impl<S> Layer<S> for WebhookLayer {
    type Service = Webhook<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Webhook {
            inner,
            receiver: self.receiver.clone(),
        }
    }
}

/// The service [`WebhookLayer`] produces.
///
/// Rejections are responses (never `Service::Error`); each rejection response
/// carries the [`Rejection`] in its extensions for outer layers.
#[derive(Clone)]
pub struct Webhook<S> {
    inner: S,
    receiver: Receiver,
}

impl<S: fmt::Debug> fmt::Debug for Webhook<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Webhook")
            .field("inner", &self.inner)
            .field("receiver", &self.receiver)
            .finish()
    }
}

/// The response future of [`Webhook`].
pub type ResponseFuture<E> =
    Pin<Box<dyn Future<Output = Result<Response<Body>, E>> + Send + 'static>>;

impl<S, B, ResBody> Service<Request<B>> for Webhook<S>
where
    S: Service<Request<Body>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: HttpBody + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
    ResBody: HttpBody<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The clone is not ready; keep the ready one for this call.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let receiver = &self.receiver;
        let (parts, body) = request.into_parts();
        let limit = receiver.body_limit();
        let read = move || read_limited(body, limit);
        let handler = hand_on(inner, receiver);
        let status = |result: &Result<Response<ResBody>, S::Error>| match result {
            Ok(response) => response.status().as_u16(),
            Err(_) => 500,
        };
        // The request's one allocation: the pipeline's work (under the
        // response budget, if the receiver has one), boxed where it is made.
        receiver
            .clone()
            .receive_boxed(parts, read, handler, status, answer)
    }
}

/// What the handler is called with: the request with the verified
/// delivery in its extensions and its body, already whole.
fn hand_on<S, ResBody>(
    mut inner: S,
    receiver: &Receiver,
) -> impl FnOnce(http::request::Parts, webhooks_core::Delivery) -> S::Future + use<S, ResBody>
where
    S: Service<Request<Body>, Response = Response<ResBody>>,
{
    // The extractors render their rejections with the receiver's hook,
    // when it has one (each insert is an allocation).
    let on_reject = receiver.has_on_reject().then(|| receiver.clone());
    move |mut parts, delivery| {
        let body = Body::from(delivery.body.clone());
        parts.extensions.insert(delivery);
        if let Some(receiver) = on_reject {
            parts.extensions.insert(receiver);
        }
        let mut request = Request::from_parts(parts, body);
        // axum's `Bytes`, `String`, `Json` and `Form` apply no limit of their
        // own (not their 2 MiB default, nor an outer layer's): the body is
        // whole, read within the receiver's limit, and a body verified and
        // claimed is never refused by the handler's extractor.
        DefaultBodyLimit::disable().apply(&mut request);
        inner.call(request)
    }
}

/// What the pipeline answers: the handler's result, or a rejection.
type Received<ResBody, E> = Result<Result<Response<ResBody>, E>, Rejection>;

/// The response to the pipeline's answer: the handler's, or the rejection's.
fn answer<ResBody, E>(
    receiver: &Receiver,
    received: Received<ResBody, E>,
) -> Result<Response<Body>, E>
where
    ResBody: HttpBody<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    match received {
        Ok(result) => result.map(|response| response.map(Body::new)),
        Err(r) => Ok(rejection_response(receiver, r)),
    }
}

/// Reads the body's data frames into a [`BodyCollector`], which refuses one
/// that would take it past `limit` before keeping it.
async fn read_limited<B>(body: B, limit: usize) -> Result<Bytes, Rejection>
where
    B: HttpBody,
{
    let mut body = std::pin::pin!(body);
    let mut collected = BodyCollector::new(limit);
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let frame = frame.map_err(|_| Rejection::BodyRead)?;
        // Trailers carry nothing that is verified.
        if let Ok(data) = frame.into_data() {
            collected.push_buf(data)?;
        }
    }
    Ok(collected.finish())
}

fn rejection_response(receiver: &Receiver, rejection: Rejection) -> Response<Body> {
    let mut response = receiver.rejection_response(&rejection).map(Body::from);
    response.extensions_mut().insert(rejection);
    response
}
