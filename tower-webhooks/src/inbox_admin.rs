//! The dead-letter admin API as a tower service (feature `inbox-admin`).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum_core::body::Body;
use http::{HeaderValue, Request, Response, header};
use tower_service::Service;
use webhooks_core::inbox::{Inbox, admin};

/// The inbox's dead-letter admin API (list, inspect, replay, discard, stats,
/// purge — see [`webhooks_core::inbox::admin`]) as a tower service answering
/// JSON. Mount it with `nest_service`, **behind your own authentication**:
///
/// ```no_run
/// # async fn run(inbox: std::sync::Arc<dyn webhooks_core::inbox::Inbox>) {
/// use axum::Router;
/// use tower_webhooks::InboxAdmin;
///
/// let admin: Router = Router::new()
///     .nest_service("/admin/inbox", InboxAdmin::new(inbox));
///     // .layer(your_auth_layer)
/// # }
/// ```
#[derive(Clone)]
pub struct InboxAdmin {
    inbox: Arc<dyn Inbox>,
}

impl std::fmt::Debug for InboxAdmin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboxAdmin").finish_non_exhaustive()
    }
}

impl InboxAdmin {
    /// The admin API of `inbox`.
    #[must_use]
    pub fn new(inbox: Arc<dyn Inbox>) -> Self {
        Self { inbox }
    }
}

impl<B: Send + 'static> Service<Request<B>> for InboxAdmin {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let inbox = Arc::clone(&self.inbox);
        Box::pin(async move {
            let uri = request.uri();
            let answer = admin::handle(&*inbox, request.method(), uri.path(), uri.query()).await;
            let mut response = Response::new(Body::from(answer.body_bytes()));
            *response.status_mut() = answer.status;
            if !answer.body.is_null() {
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
            }
            Ok(response)
        })
    }
}
