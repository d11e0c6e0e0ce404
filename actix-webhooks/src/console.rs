//! The operators' console as an actix scope (feature `console`).

use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, Scope, web};
use webhooks_core::console::{self, Access, ConsoleRequest};
use webhooks_core::inbox::Inbox;

type Authorize = dyn Fn(&HttpRequest) -> Access + Send + Sync;

/// The inbox's console (overview, dead letters, replay, discard, purge —
/// see [`core::console`](crate::core::console)), configured here and
/// mounted with [`console()`]. Who may see it and act is your
/// [`authorize`](Self::authorize) hook's decision, per request; without it,
/// every request is denied.
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
    /// user's, or denied (read your session, an extension your
    /// authentication middleware set, …).
    #[must_use]
    pub fn authorize(
        mut self,
        decide: impl Fn(&HttpRequest) -> Access + Send + Sync + 'static,
    ) -> Self {
        self.authorize = Some(Arc::new(decide));
        self
    }
}

/// The console as a scope at `path` (a fixed path, such as `/ops/webhooks`):
///
/// ```no_run
/// # fn run(inbox: std::sync::Arc<dyn actix_webhooks::core::inbox::Inbox>) {
/// use actix_web::App;
/// use actix_webhooks::Console;
/// use actix_webhooks::core::console::Access;
///
/// let app = App::new().service(actix_webhooks::console(
///     "/ops/webhooks",
///     Console::new(inbox).authorize(|request| match request.headers().get("x-ops-user") {
///         // e.g. set by an authenticating proxy that strips it from outside requests
///         Some(user) => Access::ReadOnly(user.to_str().unwrap_or("?").to_owned()),
///         None => Access::Deny,
///     }),
/// ));
/// # let _ = app; }
/// ```
pub fn console(path: &str, console: Console) -> Scope {
    let mount = path.trim_end_matches('/').to_owned();
    web::scope(path).default_service(web::to(move |req: HttpRequest, payload: web::Payload| {
        let console = console.clone();
        let mount = mount.clone();
        async move {
            let access = console.authorize.as_ref().map(|decide| decide(&req));
            let method = http::Method::from_bytes(req.method().as_str().as_bytes())
                .unwrap_or(http::Method::GET);
            let body = if method == http::Method::POST && matches!(access, Some(Access::Admin(_))) {
                match payload.to_bytes_limited(console::MAX_FORM_BYTES).await {
                    Ok(Ok(bytes)) => bytes,
                    _ => {
                        return HttpResponse::build(StatusCode::PAYLOAD_TOO_LARGE)
                            .body("form too large or unreadable");
                    }
                }
            } else {
                web::Bytes::new()
            };
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
            let request = ConsoleRequest::new(&method, relative, query, &headers, &body)
                .base(&mount)
                .host(host.as_deref())
                .scheme(scheme);
            let answer = console.console.handle(access, request).await;
            let status = StatusCode::from_u16(answer.status.as_u16())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = HttpResponse::build(status);
            for (name, value) in &answer.headers {
                response.append_header((name.as_str(), value.as_bytes()));
            }
            response.body(answer.body)
        }
    }))
}
