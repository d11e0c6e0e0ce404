//! The operators' console as a tower service (feature `console`).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum_core::body::Body;
use http::request::Parts;
use http::{Method, Request, Response, StatusCode};
use tower_service::Service;
use webhooks_core::console::{self, Access, ConsoleRequest};
use webhooks_core::inbox::Inbox;

type Authorize = dyn Fn(&Parts) -> Access + Send + Sync;

/// The inbox's console (overview, dead letters, replay, discard, purge —
/// see [`core::console`](crate::core::console)) as a tower service
/// answering HTML. Mount it with one line; who may see it and act is your
/// [`authorize`](Self::authorize) hook's decision, per request (read your
/// session or your authentication layer's extension from the request's
/// parts). Without it, every request is denied.
///
/// ```no_run
/// # async fn run(inbox: std::sync::Arc<dyn tower_webhooks::core::inbox::Inbox>) {
/// use axum::Router;
/// use tower_webhooks::Console;
/// use tower_webhooks::core::console::Access;
///
/// #[derive(Clone)]
/// struct User { name: String, admin: bool } // put there by your auth layer
///
/// let app: Router = Router::new().nest_service(
///     "/ops/webhooks",
///     Console::new(inbox).authorize(|request| match request.extensions.get::<User>() {
///         Some(user) if user.admin => Access::Admin(user.name.clone()),
///         Some(user) => Access::ReadOnly(user.name.clone()),
///         None => Access::Deny,
///     }),
/// );
/// # }
/// ```
///
/// Under axum's `nest_service`, links and forms point below the nesting
/// path (read from axum's `OriginalUri`).
#[derive(Clone)]
pub struct Console {
    console: console::Console,
    authorize: Option<Arc<Authorize>>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("console", &self.console)
            .field("authorize", &self.authorize.is_some())
            .finish()
    }
}

impl Console {
    /// The console of `inbox`, with core's defaults.
    #[must_use]
    pub fn new(inbox: Arc<dyn Inbox>) -> Self {
        Self::from_core(console::Console::new(inbox))
    }

    /// A console configured in core (bodies for read-only users, the bulk
    /// limit, the token key shared by several processes, …).
    #[must_use]
    pub fn from_core(console: console::Console) -> Self {
        Self {
            console,
            authorize: None,
        }
    }

    /// Decides, for each request, whether it is an admin's, a read-only
    /// user's, or denied.
    #[must_use]
    pub fn authorize(mut self, decide: impl Fn(&Parts) -> Access + Send + Sync + 'static) -> Self {
        self.authorize = Some(Arc::new(decide));
        self
    }
}

/// Where the nested service is mounted, as the browser sees it.
fn mount_base(parts: &Parts) -> String {
    let inner = parts.uri.path();
    let Some(original) = parts.extensions.get::<axum::extract::OriginalUri>() else {
        return String::new();
    };
    let original = original.path();
    if let Some(base) = original.strip_suffix(inner) {
        return base.to_owned();
    }
    if inner == "/" {
        return original.trim_end_matches('/').to_owned();
    }
    String::new()
}

impl Service<Request<Body>> for Console {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let access = this.authorize.as_ref().map(|decide| decide(&parts));
            let body = if parts.method == Method::POST && matches!(access, Some(Access::Admin(_))) {
                match axum::body::to_bytes(body, console::MAX_FORM_BYTES).await {
                    Ok(bytes) => bytes,
                    Err(_) => {
                        let mut response =
                            Response::new(Body::from("form too large or unreadable"));
                        *response.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
                        return Ok(response);
                    }
                }
            } else {
                bytes::Bytes::new()
            };
            let base = mount_base(&parts);
            let host = parts.uri.authority().map(http::uri::Authority::as_str);
            let request = ConsoleRequest::new(
                &parts.method,
                parts.uri.path(),
                parts.uri.query(),
                &parts.headers,
                &body,
            )
            .base(&base)
            .host(host)
            .scheme(parts.uri.scheme_str());
            let answer = this.console.handle(access, request).await;
            let mut response = Response::new(Body::from(answer.body));
            *response.status_mut() = answer.status;
            *response.headers_mut() = answer.headers;
            Ok(response)
        })
    }
}
