//! The operators' console (feature `console`): HTML pages, mounted in your
//! app, to see the inbox and act on its dead letters — what Sidekiq Web and
//! Oban Web are for job queues.
//!
//! The pages and every decision live here; `tower-webhooks` and
//! `actix-webhooks` (feature `console`) only translate their requests into a
//! [`ConsoleRequest`] and the [`ConsoleResponse`] back, so both answer the
//! same. Access is the application's decision, per request: the adapters'
//! `authorize` hook returns an [`Access`] (admin, read-only or denied, with
//! the identity that every action is logged with). Without `authorize`,
//! every request is denied with a page saying how to configure it.
//!
//! | page | what |
//! |---|---|
//! | `/` | whether processing runs or is paused (admins: pause / resume, see [`Inbox::set_paused`]); the gates, when the inbox keeps them ([pauses and limits by event type](crate::inbox::gates)): each selector paused or running, permits held now / its concurrency, its rate, its last update (admins: pause or resume one, or pause the events a new selector matches); counts (depth, due, oldest due age, in flight, dead, completed), a chart of them, dead letters by scheme and event type; purge completed (younger than [`min_purge_age`](Console::min_purge_age) only with "force" ticked) |
//! | `/dead` | dead letters, filtered by scheme, event type and receipt time (or looked up by delivery id or key), cursor-paginated; replay or discard the selected ones, or all that match the filter (the count shown first, at most [`bulk_limit`](Console::bulk_limit)); a delivery-id lookup or a count stops once the store has examined 10,000 dead letters, and offers to continue |
//! | `/deliveries?state=` | the deliveries in one state — tabs Due, Retrying, In flight, Dead, Completed ([`DeliveryState`](crate::inbox::DeliveryState)) — newest first (or oldest first), filtered by scheme, event type, delivery id and receipt time, cursor-paginated; read-only (the dead letters' actions are on `/dead`) |
//! | `/deliveries/item?key=` | one delivery in any state: its state, attempts, due time or lease end, last error, kept headers (credentials redacted), the body (admins; credential-named and configured JSON fields redacted, [`Console::redaction`]), and its attempt history as a timeline ([`Inbox::attempts`]) |
//! | `/actions?before=` | the [action log](crate::inbox::actions), newest first, 50 a page: who replayed, discarded, purged, paused or resumed what, when, through what (console, API, command line) and how many events it changed; every action of this console is recorded there |
//! | `/dead/item?key=` | one dead letter: metadata, kept headers (credentials redacted), the body (pretty-printed when JSON, its credential-named and configured fields redacted, capped; a JSON body over `body_cap` not shown), raw download (the exact bytes, admins only) |
//! | `POST /pause`, `POST /resume` | the whole inbox ([`Inbox::set_paused`]); with a form field `only=<selector>` (`stripe:invoice.*`), only the events it matches ([`Inbox::set_gate_paused`]; a malformed selector answers `400` saying why). Logged as `pause` / `resume` with the selector as the target, 1 event if it changed |
//!
//! **Safety.** Every state-changing request is a `POST` carrying a token
//! bound to the identity (HMAC, 12 hours), from the same origin (`Origin` /
//! `Sec-Fetch-Site`); read-only users see no action controls and their
//! `POST`s answer `403`. Every page is rendered by [maud](https://maud.lambda.xyz),
//! which escapes everything interpolated; responses carry
//! `Content-Security-Policy: default-src 'self'` with no inline script or
//! style, and the one stylesheet and script are embedded in the binary.
//! Bodies are shown to admins only unless
//! [`bodies_for_read_only`](Console::bodies_for_read_only) is set. Each
//! action is logged at `INFO` (target `webhooks_core::console`) with the
//! identity and what it affected, and counted in
//! `webhooks_console_actions_total{action, scope}` (feature `metrics`).
//!
//! ```
//! # #[cfg(feature = "sqlite")]
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use webhooks_core::console::{Access, Console, ConsoleRequest};
//! use webhooks_core::inbox::SqliteInbox;
//!
//! let inbox = SqliteInbox::connect("sqlite::memory:").await?;
//! inbox.migrate().await?;
//! let console = Console::new(Arc::new(inbox));
//! let headers = http::HeaderMap::new();
//! let request = ConsoleRequest::new(&http::Method::GET, "/", None, &headers, b"")
//!     .base("/ops/webhooks");
//! let page = console.handle(Some(Access::ReadOnly("alice".into())), request).await;
//! assert_eq!(page.status, 200);
//! assert!(page.headers["content-security-policy"].to_str()?.starts_with("default-src 'self'"));
//! # Ok(()) }
//! # #[cfg(not(feature = "sqlite"))] fn main() {}
//! ```

mod actions;
mod assets;
pub(crate) mod csrf;
mod gates;
mod params;
mod render;
mod retention;

use params::{clean_base, delivery_filter, field, list_filter, list_params, notice, parse_form};

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};

use crate::inbox::{DeadLetter, DeadLetterCursor, DeadLetterFilter, Inbox, InboxError};
use crate::redact::Redaction;

/// `webhooks_console_actions_total`: events affected by console actions,
/// labelled `action` (`replay`, `discard`, `purge`) and `scope` (`one`,
/// `selected`, `filter`, `completed`); pausing and resuming count one each
/// (`action` `pause` or `resume`, `scope` `inbox`, or `selector` for the
/// events one selector matches).
pub const ACTIONS: &str = "webhooks_console_actions_total";

/// The largest form body a console `POST` may carry; adapters refuse larger
/// ones with `413` before reading them whole.
pub const MAX_FORM_BYTES: usize = 256 * 1024;

/// What the application's `authorize` hook decides for one request (the
/// same type as the admin API's, so one hook can serve both).
pub use crate::inbox::admin::Access;

/// A request to the console, as an adapter translates it: the path is
/// relative to where the console is mounted.
#[derive(Clone, Copy)]
pub struct ConsoleRequest<'a> {
    method: &'a Method,
    path: &'a str,
    query: Option<&'a str>,
    headers: &'a HeaderMap,
    body: &'a [u8],
    base: &'a str,
    site: crate::cross_site::Site<'a>,
}

impl fmt::Debug for ConsoleRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The headers may carry credentials, the form a token: left out.
        f.debug_struct("ConsoleRequest")
            .field("method", self.method)
            .field("path", &self.path)
            .field("query", &self.query)
            .field("body_len", &self.body.len())
            .field("base", &self.base)
            .field("host", &self.site.host)
            .field("scheme", &self.site.scheme)
            .finish_non_exhaustive()
    }
}

impl<'a> ConsoleRequest<'a> {
    /// A request: `path` relative to the mount point, `query` without the
    /// `?`, `body` the (form) body of a `POST`.
    #[must_use]
    pub fn new(
        method: &'a Method,
        path: &'a str,
        query: Option<&'a str>,
        headers: &'a HeaderMap,
        body: &'a [u8],
    ) -> Self {
        Self {
            method,
            path,
            query,
            headers,
            body,
            base: "",
            site: crate::cross_site::Site::of(headers),
        }
    }

    /// The path the console is mounted at as the browser sees it
    /// (`/ops/webhooks`): links and form targets start with it.
    #[must_use]
    pub fn base(mut self, base: &'a str) -> Self {
        self.base = base;
        self
    }

    /// The request's host (`host:port`), when it is not in a `Host` header
    /// (HTTP/2's `:authority`): the `Origin` check compares against it.
    #[must_use]
    pub fn host(mut self, host: Option<&'a str>) -> Self {
        self.site = self.site.with_host(host);
        self
    }

    /// The scheme the request came over (`https`), when the adapter knows
    /// it (the URI's, the server's TLS): the `Origin` check compares
    /// against it, unless a proxy's `Forwarded` / `X-Forwarded-Proto` says
    /// otherwise. Unknown, only `host[:port]` is compared.
    #[must_use]
    pub fn scheme(mut self, scheme: Option<&'a str>) -> Self {
        self.site = self.site.with_scheme(scheme);
        self
    }
}

/// The console's answer: a status, headers and a body.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConsoleResponse {
    /// The status.
    pub status: StatusCode,
    /// The headers (content type, CSP and the other security headers, `Location`).
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

impl ConsoleResponse {
    fn new(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
            ),
        );
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        headers.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        Self {
            status,
            headers,
            body: body.into(),
        }
    }

    fn html(status: StatusCode, page: maud::Markup) -> Self {
        Self::new(status, "text/html; charset=utf-8", page.into_string())
    }

    fn see_other(location: &str) -> Self {
        let mut response = Self::new(StatusCode::SEE_OTHER, "text/plain; charset=utf-8", "");
        if let Ok(value) = HeaderValue::from_str(location) {
            response.headers.insert(header::LOCATION, value);
        }
        response
    }
}

/// The console over one inbox: configure it, then mount it with an adapter
/// (`tower_webhooks::Console`, `actix_webhooks::console`), which calls
/// [`handle`](Self::handle).
#[derive(Clone)]
pub struct Console {
    inner: Arc<Settings>,
}

#[derive(Clone)]
struct Settings {
    inbox: Arc<dyn Inbox>,
    csrf: csrf::CsrfKey,
    allowed_origins: Vec<String>,
    bodies_for_read_only: bool,
    bulk_limit: u32,
    body_cap: usize,
    refresh: Duration,
    min_purge_age: Duration,
    redaction: Redaction,
}

impl fmt::Debug for Console {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Console")
            .field("bodies_for_read_only", &self.inner.bodies_for_read_only)
            .field("bulk_limit", &self.inner.bulk_limit)
            .field("body_cap", &self.inner.body_cap)
            .field("refresh", &self.inner.refresh)
            .field("min_purge_age", &self.inner.min_purge_age)
            .finish_non_exhaustive()
    }
}

impl Console {
    /// The console of `inbox`, with a random token key (see
    /// [`csrf_key`](Self::csrf_key) for several processes).
    #[must_use]
    pub fn new(inbox: Arc<dyn Inbox>) -> Self {
        Self {
            inner: Arc::new(Settings {
                inbox,
                csrf: csrf::CsrfKey::random(),
                allowed_origins: Vec::new(),
                bodies_for_read_only: false,
                bulk_limit: crate::inbox::bulk::DEFAULT_BULK_LIMIT,
                body_cap: 64 * 1024,
                refresh: Duration::from_secs(5),
                min_purge_age: crate::inbox::DEFAULT_RETENTION,
                redaction: Redaction::new(),
            }),
        }
    }

    fn settings(mut self, change: impl FnOnce(&mut Settings)) -> Self {
        // Unshared while being configured; a clone configured later gets
        // its own copy instead of changing the other's.
        change(Arc::make_mut(&mut self.inner));
        self
    }

    /// The key that signs the forms' tokens. Each console draws a random one,
    /// so a page served by one process cannot act through another: behind a
    /// load balancer, give every process the same secret key.
    #[must_use]
    pub fn csrf_key(self, key: [u8; 32]) -> Self {
        self.settings(|s| s.csrf = csrf::CsrfKey::from_bytes(key))
    }

    /// Accepts `POST`s whose `Origin` is exactly `origin`
    /// (`https://ops.example.com`), besides the request's own host (for a
    /// proxy that rewrites `Host`).
    #[must_use]
    pub fn allow_origin(self, origin: impl Into<String>) -> Self {
        let origin = origin.into();
        self.settings(|s| s.allowed_origins.push(origin))
    }

    /// Shows bodies to read-only users too (default: admins only).
    #[must_use]
    pub fn bodies_for_read_only(self, yes: bool) -> Self {
        self.settings(|s| s.bodies_for_read_only = yes)
    }

    /// Shows these headers redacted too, besides those named as credentials
    /// ([`is_credential_header`](crate::redact::is_credential_header)): pass
    /// your verifier's [`credential_headers`](crate::RequestVerifier::credential_headers)
    /// when its signature header has a name of your choosing.
    #[must_use]
    pub fn redact_headers(self, names: impl IntoIterator<Item = http::HeaderName>) -> Self {
        let names: Vec<_> = names.into_iter().collect();
        self.settings(|s| s.redaction = std::mem::take(&mut s.redaction).headers(names))
    }

    /// What the item pages show of headers and bodies: configured headers
    /// and payload fields, an application hook ([`Redaction`]); replaces
    /// the names given to [`redact_headers`](Self::redact_headers) before.
    /// Credential-named headers and fields are redacted whatever it says,
    /// unless its hook shows them. JSON bodies longer than
    /// [`body_cap`](Self::body_cap) are not parsed, so not shown; the raw
    /// download (admins only) is the exact bytes.
    #[must_use]
    pub fn redaction(self, redaction: Redaction) -> Self {
        self.settings(|s| s.redaction = redaction)
    }

    /// The most dead letters one "all matching the filter" action affects
    /// (default [`DEFAULT_BULK_LIMIT`](crate::inbox::bulk::DEFAULT_BULK_LIMIT), 10,000; at least 1).
    #[must_use]
    pub fn bulk_limit(self, limit: u32) -> Self {
        self.settings(|s| s.bulk_limit = limit.max(1))
    }

    /// How much of a body the detail page shows (default 64 KiB), and the
    /// longest JSON body it parses to redact its fields (a longer one is
    /// not shown); the raw download has it whole.
    #[must_use]
    pub fn body_cap(self, bytes: usize) -> Self {
        self.settings(|s| s.body_cap = bytes)
    }

    /// How often the overview and the list refresh while the tab is visible
    /// (default 5 s; zero turns it off).
    #[must_use]
    pub fn refresh(self, every: Duration) -> Self {
        self.settings(|s| s.refresh = every)
    }

    /// The smallest age a purge of completed events accepts unless the
    /// form's "force" box is ticked (default: [`DEFAULT_RETENTION`](crate::inbox::DEFAULT_RETENTION),
    /// 7 days, the admin API's floor too): your inbox's retention when it is
    /// not the default. The completed events are the inbox's memory of
    /// processed deliveries: a sender's retry of a purged one runs again.
    /// Never below [`purge_floor`](crate::inbox::purge_floor) (the longest
    /// provider retry window plus a day): a shorter one is raised to it.
    #[must_use]
    pub fn min_purge_age(self, age: Duration) -> Self {
        self.settings(|s| s.min_purge_age = age)
    }

    /// Answers one request. `access` is what the application's `authorize`
    /// hook decided, `None` when none is configured (then every request is
    /// denied with a page saying how to configure it).
    pub async fn handle(
        &self,
        access: Option<Access>,
        request: ConsoleRequest<'_>,
    ) -> ConsoleResponse {
        let path = request.path.trim_end_matches('/');
        match (request.method, path) {
            (&Method::GET, "/assets/console.css") => {
                return ConsoleResponse::new(
                    StatusCode::OK,
                    "text/css; charset=utf-8",
                    assets::CSS,
                );
            }
            (&Method::GET, "/assets/console.js") => {
                return ConsoleResponse::new(
                    StatusCode::OK,
                    "text/javascript; charset=utf-8",
                    assets::JS,
                );
            }
            _ => {}
        }
        let base = clean_base(request.base);
        let (admin, who) = match access {
            None => {
                return ConsoleResponse::html(StatusCode::FORBIDDEN, render::not_configured(base));
            }
            Some(Access::Deny) => {
                return ConsoleResponse::html(
                    StatusCode::FORBIDDEN,
                    render::message(base, "Access denied", "You may not see this console."),
                );
            }
            Some(Access::Admin(who)) => (true, who),
            Some(Access::ReadOnly(who)) => (false, who),
        };
        let now = SystemTime::now();
        let view = render::View {
            base,
            who: &who,
            admin,
            csrf: if admin {
                self.inner.csrf.token(&who, now)
            } else {
                String::new()
            },
            refresh_secs: self.inner.refresh.as_secs(),
            min_purge_age: crate::inbox::purge_floor(self.inner.min_purge_age),
            recognised: self.inner.min_purge_age,
        };
        let query = parse_form(request.query.unwrap_or("").as_bytes());
        let result = match (request.method, path) {
            (&Method::GET, "") => self.overview(&view, &query).await,
            (&Method::GET, "/dead") => self.dead_list(&view, &query).await,
            (&Method::GET, "/dead/item") => self.detail(&view, &query).await,
            (&Method::GET, "/dead/raw") => self.raw(&view, &query).await,
            (&Method::GET, "/dead/bulk") => self.bulk_confirm(&view, &query).await,
            (&Method::GET, "/deliveries") => self.deliveries(&view, &query).await,
            (&Method::GET, "/deliveries/item") => self.delivery(&view, &query).await,
            (&Method::GET, "/actions") => self.action_log(&view, &query).await,
            (&Method::POST, "/replay" | "/discard" | "/bulk" | "/purge" | "/pause" | "/resume") => {
                if !admin {
                    return forbidden(base, "Read-only access: actions are not allowed.");
                }
                if let Err(reason) = request.site.check(
                    request.headers,
                    &self.inner.allowed_origins,
                    crate::cross_site::Client::Browser,
                ) {
                    return forbidden(base, reason);
                }
                let form = parse_form(request.body);
                let token = field(&form, "csrf").unwrap_or("");
                if !self.inner.csrf.verify(token, &who, now) {
                    return forbidden(
                        base,
                        "The form's token is missing, expired or not yours: reload the page and try again.",
                    );
                }
                self.act(&view, &path[1..], &form).await
            }
            (
                _,
                "" | "/dead" | "/dead/item" | "/dead/raw" | "/dead/bulk" | "/deliveries"
                | "/deliveries/item" | "/actions",
            ) => {
                return method_not_allowed(base);
            }
            (_, "/replay" | "/discard" | "/bulk" | "/purge" | "/pause" | "/resume") => {
                return method_not_allowed(base);
            }
            _ => {
                return ConsoleResponse::html(
                    StatusCode::NOT_FOUND,
                    render::message(base, "Not found", "No such console page."),
                );
            }
        };
        result.unwrap_or_else(|error| {
            tracing::warn!(error = %error, "console: inbox store failed");
            ConsoleResponse::html(
                StatusCode::SERVICE_UNAVAILABLE,
                render::message(
                    base,
                    "Inbox store unavailable",
                    "The inbox's store did not answer; try again.",
                ),
            )
        })
    }

    async fn overview(
        &self,
        view: &render::View<'_>,
        query: &[(String, String)],
    ) -> Result<ConsoleResponse, InboxError> {
        let stats = self.inner.inbox.stats().await?;
        // A bounded sample: the first pages of dead letters, grouped.
        let sample = self
            .collect(&DeadLetterFilter::default(), BREAKDOWN_SAMPLE, |_| true)
            .await?;
        let mut breakdown: BTreeMap<(String, String), u64> = BTreeMap::new();
        for dead in &sample.items {
            let kind = dead.meta.event_type.clone().unwrap_or_default();
            *breakdown
                .entry((dead.meta.scheme.clone(), kind))
                .or_default() += 1;
        }
        let notice = notice(query);
        let activity = self
            .inner
            .inbox
            .activity(crate::inbox::ACTIVITY_MINUTES)
            .await?;
        let gates = match self.inner.inbox.keeps_gates() {
            true => Some(self.inner.inbox.gates().await?),
            false => None,
        };
        Ok(ConsoleResponse::html(
            StatusCode::OK,
            render::overview(
                view,
                &stats,
                &breakdown,
                sample.more,
                notice.as_deref(),
                &activity,
                gates.as_deref(),
            ),
        ))
    }

    async fn dead_list(
        &self,
        view: &render::View<'_>,
        query: &[(String, String)],
    ) -> Result<ConsoleResponse, InboxError> {
        let filter = match list_filter(query) {
            Ok(filter) => filter,
            Err(reason) => return Ok(bad_request(view.base, &reason)),
        };
        let delivery = field(query, "delivery_id").filter(|v| !v.is_empty());
        let page = if let Some(wanted) = delivery {
            // The store cannot filter on delivery ids: look the value up as a
            // key (on the first page), then scan a bounded number of dead
            // letters for it, from the cursor when continuing.
            let mut found = Vec::new();
            if filter.after.is_none()
                && let Some(dead) = self.inner.inbox.dead_letter_get(wanted).await?
            {
                found.push(strip_body(dead));
            }
            let matched = self
                .collect(&filter, DELIVERY_SCAN, |d| {
                    d.meta.delivery_id.as_deref() == Some(wanted) && d.meta.key != wanted
                })
                .await?;
            found.extend(matched.items);
            render::ListPage {
                items: found,
                next: matched.next,
                scanned_all: !matched.more,
            }
        } else {
            let page = self.inner.inbox.dead_letters(&filter).await?;
            render::ListPage {
                items: page.items,
                next: page.next,
                scanned_all: true,
            }
        };
        let params = list_params(query);
        let notice = notice(query);
        Ok(ConsoleResponse::html(
            StatusCode::OK,
            render::dead_list(view, &params, &page, notice.as_deref()),
        ))
    }

    async fn detail(
        &self,
        view: &render::View<'_>,
        query: &[(String, String)],
    ) -> Result<ConsoleResponse, InboxError> {
        let Some(key) = field(query, "key") else {
            return Ok(bad_request(view.base, "key is required"));
        };
        let Some(dead) = self.inner.inbox.dead_letter_get(key).await? else {
            return Ok(ConsoleResponse::html(
                StatusCode::NOT_FOUND,
                render::message(
                    view.base,
                    "Not a dead letter",
                    "This event is not (or no longer) a dead letter: it was replayed or discarded.",
                ),
            ));
        };
        let show_body = view.admin || self.inner.bodies_for_read_only;
        let event = self.event(&dead.meta);
        let headers = event.headers(&dead.meta.headers);
        let body = show_body.then(|| event.body(&dead.body, self.inner.body_cap));
        let raw = view.admin && self.raw_allowed(&dead.meta);
        Ok(ConsoleResponse::html(
            StatusCode::OK,
            render::detail(
                view,
                &dead,
                &headers,
                body.as_ref(),
                raw,
                self.inner.body_cap,
            ),
        ))
    }

    async fn raw(
        &self,
        view: &render::View<'_>,
        query: &[(String, String)],
    ) -> Result<ConsoleResponse, InboxError> {
        // The exact bytes, not redacted: admins only, even with
        // `bodies_for_read_only`.
        if !view.admin {
            return Ok(forbidden(
                view.base,
                "The raw body (exact bytes, not redacted) is for admins only.",
            ));
        }
        let Some(key) = field(query, "key") else {
            return Ok(bad_request(view.base, "key is required"));
        };
        let Some(dead) = self.inner.inbox.dead_letter_get(key).await? else {
            return Ok(ConsoleResponse::html(
                StatusCode::NOT_FOUND,
                render::message(view.base, "Not a dead letter", "No such dead letter."),
            ));
        };
        if !self.raw_allowed(&dead.meta) {
            return Ok(forbidden(
                view.base,
                "The redaction hook masks or hides this body.",
            ));
        }
        let mut response =
            ConsoleResponse::new(StatusCode::OK, "application/octet-stream", dead.body);
        response.headers.insert(
            header::CONTENT_DISPOSITION,
            HeaderValue::from_static("attachment; filename=\"body.bin\""),
        );
        Ok(response)
    }

    async fn bulk_confirm(
        &self,
        view: &render::View<'_>,
        query: &[(String, String)],
    ) -> Result<ConsoleResponse, InboxError> {
        let (action, filter) = match params::bulk_request(query) {
            Ok(request) => request,
            Err(reason) => return Ok(bad_request(view.base, &reason)),
        };
        let found = self
            .collect(&filter, self.inner.bulk_limit as usize, |_| true)
            .await?;
        let scope = if found.capped {
            render::Counted::Capped
        } else if found.more {
            render::Counted::Limited
        } else {
            render::Counted::All
        };
        let params = render::ListParams {
            delivery_id: "",
            ..list_params(query)
        };
        Ok(ConsoleResponse::html(
            StatusCode::OK,
            render::bulk_confirm(
                view,
                action.as_str(),
                &params,
                found.items.len(),
                scope,
                self.inner.bulk_limit,
            ),
        ))
    }

    /// Dead letters matching `filter` and `keep`, at most `limit`, reading
    /// pages from the store from `filter.after` on, until the store has
    /// examined [`SCAN_CAP`] dead letters (matched or not: on Redis a call
    /// examines up to its budget and may return none of them).
    async fn collect(
        &self,
        filter: &DeadLetterFilter,
        limit: usize,
        keep: impl Fn(&DeadLetter) -> bool,
    ) -> Result<Collected, InboxError> {
        // One more than wanted tells whether the limit cut the list short.
        let page_size = u32::try_from(limit.saturating_add(1)).map_or(1_000, |n| n.min(1_000));
        let mut filter = DeadLetterFilter {
            limit: Some(page_size),
            ..filter.clone()
        };
        let mut items = Vec::new();
        let mut examined = 0_u64;
        loop {
            let page = self.inner.inbox.dead_letters(&filter).await?;
            examined = examined.saturating_add(page.examined);
            // Where a continuation starts: past the last dead letter looked at.
            let mut last = filter.after.take();
            for dead in page.items {
                if keep(&dead) {
                    if items.len() == limit {
                        return Ok(Collected {
                            items,
                            more: true,
                            capped: false,
                            next: last,
                        });
                    }
                    last = Some(cursor_of(&dead));
                    items.push(dead);
                } else {
                    last = Some(cursor_of(&dead));
                }
            }
            match page.next {
                Some(next) if examined >= SCAN_CAP => {
                    return Ok(Collected {
                        items,
                        more: true,
                        capped: true,
                        next: Some(next),
                    });
                }
                Some(next) => filter.after = Some(next),
                None => {
                    return Ok(Collected {
                        items,
                        more: false,
                        capped: false,
                        next: None,
                    });
                }
            }
        }
    }
}

impl Console {
    /// The deliveries in one state (`?state=`, due by default), newest first
    /// unless `order=oldest`, with the list's filters (the delivery id
    /// exact), cursor-paginated; read-only (the dead letters' actions are on
    /// `/dead`).
    async fn deliveries(
        &self,
        view: &render::View<'_>,
        query: &[(String, String)],
    ) -> Result<ConsoleResponse, InboxError> {
        let filter = match delivery_filter(query) {
            Ok(filter) => filter,
            Err(reason) => return Ok(bad_request(view.base, &reason)),
        };
        let page = self.inner.inbox.deliveries(&filter).await?;
        let params = list_params(query);
        Ok(ConsoleResponse::html(
            StatusCode::OK,
            render::deliveries(view, &params, &filter, &page),
        ))
    }

    /// One delivery in any state: metadata, headers, the body for admins
    /// (or everyone with [`bodies_for_read_only`](Console::bodies_for_read_only)).
    async fn delivery(
        &self,
        view: &render::View<'_>,
        query: &[(String, String)],
    ) -> Result<ConsoleResponse, InboxError> {
        let Some(key) = field(query, "key") else {
            return Ok(bad_request(view.base, "key is required"));
        };
        let Some(one) = self.inner.inbox.delivery_get(key).await? else {
            return Ok(ConsoleResponse::html(
                StatusCode::NOT_FOUND,
                render::message(
                    view.base,
                    "No such delivery",
                    "The inbox does not hold this event (never received, discarded or purged).",
                ),
            ));
        };
        let show_body = view.admin || self.inner.bodies_for_read_only;
        let event = self.event(&one.meta);
        let headers = event.headers(&one.meta.headers);
        let body = show_body.then(|| event.body(&one.body, self.inner.body_cap));
        let history = self.inner.inbox.attempts(key).await?;
        Ok(ConsoleResponse::html(
            StatusCode::OK,
            render::delivery(
                view,
                &one,
                &history,
                &headers,
                body.as_ref(),
                self.inner.body_cap,
            ),
        ))
    }

    /// The redaction of one event's page.
    fn event<'a>(&'a self, meta: &'a crate::inbox::EventMeta) -> crate::redact::EventRedaction<'a> {
        self.inner.redaction.event(
            crate::redact::Surface::Console,
            &meta.scheme,
            meta.event_type.as_deref(),
        )
    }

    /// Whether the raw download may serve this body: unless the hook masks
    /// or hides it as a whole (fields are the page's business: the
    /// download is the exact bytes).
    fn raw_allowed(&self, meta: &crate::inbox::EventMeta) -> bool {
        self.event(meta).body_decision() == crate::redact::Decision::Show
    }
}

/// How many dead letters the overview groups by scheme and event type.
const BREAKDOWN_SAMPLE: usize = 250;
/// The most dead letters a delivery-id lookup lists.
const DELIVERY_SCAN: usize = 10_000;
/// The most dead letters one request has the store examine (the store's
/// [`DeadLetterPage::examined`](crate::inbox::DeadLetterPage::examined)):
/// it stops after the call that reaches it (on Redis, calls of
/// `DEAD_LETTER_SCAN_BUDGET` entries per partition), with a cursor to
/// continue from.
const SCAN_CAP: u64 = 10_000;

/// What [`Console::collect`] found.
struct Collected {
    items: Vec<DeadLetter>,
    /// The limit or the scan cap stopped it before the end.
    more: bool,
    /// The scan cap stopped it.
    capped: bool,
    /// Where to continue, when it stopped before the end.
    next: Option<DeadLetterCursor>,
}

/// The cursor just past `dead`.
fn cursor_of(dead: &DeadLetter) -> DeadLetterCursor {
    DeadLetterCursor {
        received_at_ms: crate::inbox::to_ms(dead.meta.received_at),
        key: dead.meta.key.clone(),
    }
}

fn strip_body(mut dead: DeadLetter) -> DeadLetter {
    dead.body = Bytes::new();
    dead
}

fn forbidden(base: &str, reason: &str) -> ConsoleResponse {
    ConsoleResponse::html(
        StatusCode::FORBIDDEN,
        render::message(base, "Forbidden", reason),
    )
}

fn bad_request(base: &str, reason: &str) -> ConsoleResponse {
    ConsoleResponse::html(
        StatusCode::BAD_REQUEST,
        render::message(base, "Bad request", reason),
    )
}

fn method_not_allowed(base: &str) -> ConsoleResponse {
    ConsoleResponse::html(
        StatusCode::METHOD_NOT_ALLOWED,
        render::message(
            base,
            "Method not allowed",
            "This page does not take that method.",
        ),
    )
}
