//! An inbox-mode route: the pipeline alone, no handler.

use std::convert::Infallible;
use std::task::{Context, Poll};

use axum_core::body::Body;
use http::{Request, Response, StatusCode};
use http_body::Body as HttpBody;
use tower_layer::Layer as _;
use tower_service::Service;
use webhooks_core::Receiver;

use crate::layer::{ResponseFuture, Webhook, WebhookLayer};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The service of a route whose receiver stores deliveries in an inbox
/// ([`ReceiverBuilder::inbox`](webhooks_core::ReceiverBuilder::inbox)):
/// verified deliveries are stored and answered (`202`), workers run the
/// handler, so the route needs none.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # #[cfg(feature = "sqlite")] {
/// use std::sync::Arc;
/// use axum::Router;
/// use tower_webhooks::InboxRoute;
/// use webhooks_core::{Receiver, inbox::SqliteInbox, scheme::StandardWebhooks};
///
/// let inbox = SqliteInbox::connect("sqlite::memory:").await?;
/// inbox.migrate().await?;
/// let verifier = StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
/// let receiver = Receiver::builder(verifier).inbox(Arc::new(inbox)).build();
/// let app: Router = Router::new().route_service("/webhooks", InboxRoute::new(receiver));
/// # let _ = app; }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct InboxRoute {
    inner: Webhook<NoHandler>,
}

impl InboxRoute {
    /// The route's service around `receiver`.
    ///
    /// # Panics
    ///
    /// When `receiver` has no inbox: its deliveries would need a handler.
    #[must_use]
    pub fn new(receiver: Receiver) -> Self {
        assert!(
            receiver.has_inbox(),
            "InboxRoute needs a receiver with an inbox (ReceiverBuilder::inbox)"
        );
        Self {
            inner: WebhookLayer::from_receiver(receiver).layer(NoHandler),
        }
    }
}

impl<B> Service<Request<B>> for InboxRoute
where
    B: HttpBody + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ResponseFuture<Infallible>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Service::<Request<B>>::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        self.inner.call(request)
    }
}

/// The handler behind an inbox pipeline: never reached (an inbox-mode
/// pipeline answers every request itself); `500` if it were.
#[derive(Debug, Clone, Copy)]
struct NoHandler;

impl Service<Request<Body>> for NoHandler {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Body>) -> Self::Future {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        std::future::ready(Ok(response))
    }
}
