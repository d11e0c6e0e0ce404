//! The dead-letter admin API as a tower service (feature `inbox-admin`).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum_core::body::Body;
use http::request::Parts;
use http::{Request, Response};
use tower_service::Service;
use webhooks_core::inbox::Inbox;
use webhooks_core::inbox::admin::{self, Access, AdminConfig, AdminRequest};

type Authorize = dyn Fn(&Parts) -> Access + Send + Sync;

/// The inbox's dead-letter admin API (list, inspect, replay, discard, stats,
/// purge, pause and resume processing — see [`core::inbox::admin`](crate::core::inbox::admin)) as a
/// tower service answering JSON. Mount it with `nest_service` and give it
/// an [`authorize`](Self::authorize) hook (the console's): read-only users
/// may only `GET` and see no bodies. Without a hook every request is
/// denied, unless [`allow_unauthenticated`](Self::allow_unauthenticated)
/// says it is behind your own authentication. Credential headers are
/// redacted; every answer carries `Cache-Control: no-store`.
/// State-changing requests (`POST`, `DELETE`) must carry
/// `Content-Type: application/json`, and those a browser marks as
/// cross-site are refused.
///
/// ```no_run
/// # async fn run(inbox: std::sync::Arc<dyn tower_webhooks::core::inbox::Inbox>) {
/// use axum::Router;
/// use tower_webhooks::InboxAdmin;
/// use tower_webhooks::core::inbox::admin::Access;
///
/// #[derive(Clone)]
/// struct User { name: String, admin: bool } // put there by your auth layer
///
/// let admin: Router = Router::new().nest_service(
///     "/admin/inbox",
///     InboxAdmin::new(inbox).authorize(|request| match request.extensions.get::<User>() {
///         Some(user) if user.admin => Access::Admin(user.name.clone()),
///         Some(user) => Access::ReadOnly(user.name.clone()),
///         None => Access::Deny,
///     }),
/// );
/// # }
/// ```
#[derive(Clone)]
pub struct InboxAdmin {
    inbox: Arc<dyn Inbox>,
    config: AdminConfig,
    authorize: Option<Arc<Authorize>>,
}

impl std::fmt::Debug for InboxAdmin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboxAdmin")
            .field("config", &self.config)
            .field("authorize", &self.authorize.is_some())
            .finish_non_exhaustive()
    }
}

impl InboxAdmin {
    /// The admin API of `inbox`, with core's defaults and no `authorize`
    /// hook: every request is denied (`403`) until you give it one
    /// ([`authorize`](Self::authorize)), or say it is behind your own
    /// authentication ([`allow_unauthenticated`](Self::allow_unauthenticated)).
    #[must_use]
    pub fn new(inbox: Arc<dyn Inbox>) -> Self {
        Self::from_core(inbox, AdminConfig::default())
    }

    /// The admin API of `inbox`, configured in core.
    #[must_use]
    pub fn from_core(inbox: Arc<dyn Inbox>, config: AdminConfig) -> Self {
        Self {
            inbox,
            config,
            authorize: None,
        }
    }

    /// The smallest `older_than` a purge accepts without `force=true`
    /// (default: the inbox's default retention, 7 days); see
    /// [`AdminConfig::min_purge_age`].
    #[must_use]
    pub fn min_purge_age(mut self, age: Duration) -> Self {
        self.config = self.config.min_purge_age(age);
        self
    }

    /// Accepts state-changing requests whose `Origin` is exactly `origin`,
    /// besides the request's own origin; see [`AdminConfig::allow_origin`].
    #[must_use]
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.config = self.config.allow_origin(origin);
        self
    }

    /// Serves requests without an [`authorize`](Self::authorize) hook as an
    /// admin's: **only** when the API is reachable through your own
    /// authentication alone (a middleware in front of it, a port bound to
    /// localhost for local use); see [`AdminConfig::allow_unauthenticated`].
    #[must_use]
    pub fn allow_unauthenticated(mut self) -> Self {
        self.config = self.config.allow_unauthenticated();
        self
    }

    /// Shows bodies to read-only users too (default: admins only); see
    /// [`AdminConfig::bodies_for_read_only`].
    #[must_use]
    pub fn bodies_for_read_only(mut self, yes: bool) -> Self {
        self.config = self.config.bodies_for_read_only(yes);
        self
    }

    /// Shows these headers redacted too, besides those named as
    /// credentials (your verifier's `credential_headers`); see
    /// [`AdminConfig::redact_headers`].
    #[must_use]
    pub fn redact_headers(mut self, names: impl IntoIterator<Item = http::HeaderName>) -> Self {
        self.config = self.config.redact_headers(names);
        self
    }

    /// What answers show of headers and payload fields: configured paths
    /// and an application hook; see [`AdminConfig::redaction`] and
    /// [`Redaction`](webhooks_core::redact::Redaction).
    #[must_use]
    pub fn redaction(mut self, redaction: webhooks_core::redact::Redaction) -> Self {
        self.config = self.config.redaction(redaction);
        self
    }

    /// Decides, for each request, whether it is an admin's (may do
    /// everything), a read-only user's (`GET`s only, no bodies) or denied
    /// (`403`).
    #[must_use]
    pub fn authorize(mut self, decide: impl Fn(&Parts) -> Access + Send + Sync + 'static) -> Self {
        self.authorize = Some(Arc::new(decide));
        self
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
        let this = self.clone();
        // The body is never read: the parameters are in the path and query.
        let (parts, _body) = request.into_parts();
        Box::pin(async move {
            let access = this.authorize.as_ref().map(|decide| decide(&parts));
            let uri = &parts.uri;
            let host = uri.authority().map(http::uri::Authority::as_str);
            let request = AdminRequest::new(&parts.method, uri.path(), uri.query(), &parts.headers)
                .host(host)
                .scheme(uri.scheme_str());
            let answer = admin::handle(&*this.inbox, &this.config, access, request).await;
            let mut response = Response::new(Body::from(answer.body_bytes()));
            *response.status_mut() = answer.status;
            *response.headers_mut() = answer.headers;
            Ok(response)
        })
    }
}
