//! The dead-letter admin API as an actix scope (feature `inbox-admin`).

use std::sync::Arc;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, Scope, web};
use webhooks_core::inbox::Inbox;
use webhooks_core::inbox::admin::{self, Access, AdminConfig, AdminRequest};

type Authorize = dyn Fn(&HttpRequest) -> Access + Send + Sync;

/// The inbox's dead-letter admin API (list, inspect, replay, discard, stats,
/// purge, pause and resume processing — see [`core::inbox::admin`](crate::core::inbox::admin)),
/// configured here and mounted with [`scope`](Self::scope) (or
/// [`inbox_admin`] for the defaults). Who may read and act is your
/// [`authorize`](Self::authorize) hook's decision (the console's):
/// read-only users may only `GET` and see no bodies. Without a hook every
/// request is denied, unless [`allow_unauthenticated`](Self::allow_unauthenticated)
/// says it is behind your own authentication. Credential headers are
/// redacted; every answer carries `Cache-Control: no-store`.
///
/// ```no_run
/// # fn run(inbox: std::sync::Arc<dyn actix_webhooks::core::inbox::Inbox>) {
/// use std::time::Duration;
/// use actix_web::App;
/// use actix_webhooks::InboxAdmin;
/// use actix_webhooks::core::inbox::admin::Access;
///
/// let admin = InboxAdmin::new(inbox)
///     .min_purge_age(Duration::from_secs(3 * 24 * 3600)) // the inbox's retention
///     .authorize(|request| match request.headers().get("x-ops-user") {
///         // e.g. set by an authenticating proxy that strips it from outside requests
///         Some(user) => Access::ReadOnly(user.to_str().unwrap_or("?").to_owned()),
///         None => Access::Deny,
///     });
/// let app = App::new().service(admin.scope("/admin/inbox"));
/// # let _ = app; }
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
    pub fn authorize(
        mut self,
        decide: impl Fn(&HttpRequest) -> Access + Send + Sync + 'static,
    ) -> Self {
        self.authorize = Some(Arc::new(decide));
        self
    }

    /// The admin API as a scope at `path` (a fixed path, such as
    /// `/admin/inbox`).
    pub fn scope(self, path: &str) -> Scope {
        let mount = path.trim_end_matches('/').to_owned();
        web::scope(path).default_service(web::to(move |req: HttpRequest| {
            let this = self.clone();
            let mount = mount.clone();
            async move {
                let access = this.authorize.as_ref().map(|decide| decide(&req));
                let method = http::Method::from_bytes(req.method().as_str().as_bytes())
                    .unwrap_or(http::Method::GET);
                let mut headers = http::HeaderMap::new();
                for (name, value) in req.headers() {
                    if let (Ok(name), Ok(value)) = (
                        http::HeaderName::from_bytes(name.as_str().as_bytes()),
                        http::HeaderValue::from_bytes(value.as_bytes()),
                    ) {
                        headers.append(name, value);
                    }
                }
                let relative = req.path().strip_prefix(&mount).unwrap_or(req.path());
                let query = (!req.query_string().is_empty()).then(|| req.query_string());
                let host = req.uri().authority().map(|a| a.as_str().to_owned());
                // The server's TLS, else the URI's scheme (proxies' headers are read in core).
                let scheme = if req.app_config().secure() {
                    Some("https")
                } else {
                    req.uri().scheme_str()
                };
                let request = AdminRequest::new(&method, relative, query, &headers)
                    .host(host.as_deref())
                    .scheme(scheme);
                let answer = admin::handle(&*this.inbox, &this.config, access, request).await;
                let status = StatusCode::from_u16(answer.status.as_u16())
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let mut response = HttpResponse::build(status);
                for (name, value) in &answer.headers {
                    response.insert_header((name.as_str(), value.as_bytes()));
                }
                if answer.body.is_null() {
                    response.finish()
                } else {
                    response.body(answer.body_bytes())
                }
            }
        }))
    }
}

/// The admin API of `inbox` with the defaults as a scope at `path`: with
/// no `authorize` hook, **every request is denied** (`403`). Configure an
/// [`InboxAdmin`] instead:
///
/// ```no_run
/// # fn run(inbox: std::sync::Arc<dyn actix_webhooks::core::inbox::Inbox>) {
/// use actix_web::App;
/// use actix_webhooks::InboxAdmin;
///
/// // Behind your own authentication middleware only:
/// let app = App::new().service(InboxAdmin::new(inbox).allow_unauthenticated().scope("/admin/inbox"));
/// # let _ = app; }
/// ```
#[deprecated(
    note = "without an authorize hook every request is denied: use InboxAdmin::new(inbox).authorize(..) (or .allow_unauthenticated() behind your own authentication) and .scope(path)"
)]
pub fn inbox_admin(path: &str, inbox: Arc<dyn Inbox>) -> Scope {
    InboxAdmin::new(inbox).scope(path)
}
