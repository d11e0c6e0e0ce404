//! The dead-letter admin API, framework-free: a method, a path relative to
//! where it is mounted, a query string and the request's headers in; a
//! status and a JSON body out. `tower-webhooks` (feature `inbox-admin`) and
//! `actix-webhooks` (same feature) only translate their requests to
//! [`handle`] and back, so both answer the same. It shows bodies and
//! replays deliveries: **mount it behind your own authentication**, or give
//! the adapter an `authorize` hook returning an [`Access`] (the console's
//! type): [`Access::Deny`] is `403`, [`Access::ReadOnly`] may only `GET`,
//! [`Access::Admin`] may do everything. Without a hook every request is
//! served, as before the hook existed.
//!
//! | method | path | answer |
//! |---|---|---|
//! | `GET` | `/dead-letters?scheme=&event_type=&from=&until=&after=&limit=` | `200 {"items": [...], "next": cursor or null}` (`from`/`until`: Unix seconds; bodies left out) |
//! | `GET` | `/dead-letters/{key}` | `200` the dead letter with `body` (UTF-8) or `body_base64`; `404` |
//! | `POST` | `/dead-letters/{key}/replay` | `200 {"replayed": true}`; `409` when not (or no longer) dead — of concurrent replays one wins |
//! | `DELETE` | `/dead-letters/{key}` | `204`; `404` |
//! | `GET` | `/deliveries?state=&order=&scheme=&event_type=&delivery_id=&from=&until=&after=&limit=` | `200 {"items": [...], "next": cursor or null}`: the deliveries in one state (`due` by default, `retrying`, `in_flight`, `dead`, `completed`), `order=newest` (default) or `oldest`, bodies left out ([`parse_delivery_query`]) |
//! | `GET` | `/deliveries/{key}` | `200` the delivery in any state, with `state` and `body` (UTF-8) or `body_base64`; `404` |
//! | `GET` | `/stats` | `200 {"pending", "due", "oldest_due_age_ms", "in_flight", "dead", "completed", "paused"}` |
//! | `GET` | `/activity?minutes=` | `200 {"minutes": [{"start", "accepted", "completed", "failed"}, ...], "totals": {"accepted", "completed", "failed"}}`: per minute, oldest first, the last the current minute (`start`: Unix seconds; `minutes`: 1 to 60, default 60; [`Inbox::activity`]) |
//! | `POST` | `/pause` | `200 {"paused": true, "changed": bool}`: every worker stops leasing from its next poll ([`Inbox::set_paused`]); deliveries are still accepted; `changed` is `false` when it was already paused |
//! | `POST` | `/resume` | `200 {"paused": false, "changed": bool}` |
//! | `POST` | `/purge?older_than=<seconds>[&force=true]` | `200 {"purged": n}` (completed events only); `400` when `older_than` is below the minimum ([`AdminConfig::min_purge_age`], the inbox's retention by default) without `force=true` |
//! | any but `GET`/`HEAD` | any | **must carry `Content-Type: application/json`** (a body is not needed); `403 {"error": ...}` without it, with a `Sec-Fetch-Site` other than `same-origin` or `none`, or with an `Origin` whose `host[:port]` is not the request's `Host` |
//!
//! Keys in paths are percent-encoded. A store failure is `503`; a malformed
//! parameter `400`; an unknown path `404`; a wrong method `405`.
//!
//! **Cross-site requests.** A page open in an operator's browser can send a
//! "simple" cross-site `POST` (a form, `fetch` without custom headers)
//! carrying the operator's cookies or the network position of their
//! machine. Such a request cannot carry `Content-Type: application/json`
//! without a CORS preflight, which this API never answers, and a browser
//! marks it with `Origin` / `Sec-Fetch-Site`: so every state-changing
//! request needs the header, and those the browser marks as cross-site are
//! refused (the checks the console uses for its forms). API clients send
//! the header: `curl -X POST -H 'Content-Type: application/json' …`.
//!
//! **The completed events are the inbox's memory** of processed deliveries:
//! a sender's retry of a purged one is accepted and runs again. `purge`
//! therefore refuses an `older_than` below the retention unless
//! `force=true`.
//!
//! Each state-changing action is logged at `INFO` with the identity the
//! hook returned (`-` without a hook) and what it affected (a key, a count;
//! never a body), and counted in `webhooks_admin_actions_total{action}`
//! (`replay`, `discard`, `purge`: events affected; `pause`, `resume`: one
//! per request; feature `metrics`).
//!
//! ```
//! # #[cfg(feature = "sqlite")]
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use webhooks_core::inbox::{SqliteInbox, admin};
//!
//! let inbox = SqliteInbox::connect("sqlite::memory:").await?;
//! inbox.migrate().await?;
//! let config = admin::AdminConfig::default();
//! let mut headers = http::HeaderMap::new();
//! let get = admin::AdminRequest::new(&http::Method::GET, "/stats", None, &headers);
//! let answer = admin::handle(&inbox, &config, None, get).await;
//! assert_eq!(answer.status, 200);
//! assert_eq!(answer.body["pending"], 0);
//!
//! // A state-changing request needs `Content-Type: application/json`.
//! let purge = admin::AdminRequest::new(&http::Method::POST, "/purge", Some("older_than=604800"), &headers);
//! assert_eq!(admin::handle(&inbox, &config, None, purge).await.status, 403);
//! headers.insert("content-type", "application/json".parse()?);
//! let purge = admin::AdminRequest::new(&http::Method::POST, "/purge", Some("older_than=604800"), &headers);
//! assert_eq!(admin::handle(&inbox, &config, None, purge).await.status, 200);
//! # Ok(()) }
//! # #[cfg(not(feature = "sqlite"))] fn main() {}
//! ```

use std::fmt;
use std::time::{Duration, UNIX_EPOCH};

use base64::Engine as _;
use http::{HeaderMap, Method, StatusCode, header};
use serde_json::{Value, json};

use super::{
    DeadLetter, DeadLetterCursor, DeadLetterFilter, Delivery, DeliveryCursor, DeliveryFilter,
    Inbox, Transition, to_ms,
};
use crate::cross_site;

/// `webhooks_admin_actions_total`: events affected by admin API actions,
/// labelled `action` (`replay`, `discard`, `purge`), and pause / resume
/// requests (`pause`, `resume`, one each).
pub const ACTIONS: &str = "webhooks_admin_actions_total";

/// What the application's `authorize` hook decides for one request, in the
/// admin API and the console alike.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Access {
    /// Sees everything and may act; the identity is logged with each action.
    Admin(String),
    /// May read: `GET`s. Its state-changing requests answer `403` (in the
    /// console: no action controls; bodies only if configured).
    ReadOnly(String),
    /// Answered `403`.
    Deny,
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Admin(who) => f.debug_tuple("Admin").field(who).finish(),
            Self::ReadOnly(who) => f.debug_tuple("ReadOnly").field(who).finish(),
            Self::Deny => f.write_str("Deny"),
        }
    }
}

/// How an admin API answers, beyond the inbox it serves: the adapters'
/// builders (`min_purge_age`, `allow_origin`) fill one in.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AdminConfig {
    min_purge_age: Duration,
    allowed_origins: Vec<String>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            min_purge_age: super::DEFAULT_RETENTION,
            allowed_origins: Vec::new(),
        }
    }
}

impl AdminConfig {
    /// The defaults: purges no younger than [`DEFAULT_RETENTION`](super::DEFAULT_RETENTION)
    /// (7 days) without `force=true`, no other origin accepted.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The smallest `older_than` a purge accepts without `force=true`: your
    /// inbox's retention when it is not the default 7 days (the completed
    /// events are its memory of processed deliveries).
    #[must_use]
    pub fn min_purge_age(mut self, age: Duration) -> Self {
        self.min_purge_age = age;
        self
    }

    /// Accepts state-changing requests whose `Origin` is exactly `origin`
    /// (`https://ops.example.com`), besides the request's own host (for a
    /// proxy that rewrites `Host`).
    #[must_use]
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.allowed_origins.push(origin.into());
        self
    }

    /// The smallest `older_than` a purge accepts without `force=true`.
    #[must_use]
    pub fn purge_minimum(&self) -> Duration {
        self.min_purge_age
    }
}

/// A request to the admin API, as an adapter translates it.
#[derive(Clone, Copy)]
pub struct AdminRequest<'a> {
    method: &'a Method,
    path: &'a str,
    query: Option<&'a str>,
    headers: &'a HeaderMap,
    host: Option<&'a str>,
}

impl fmt::Debug for AdminRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The headers may carry credentials: left out.
        f.debug_struct("AdminRequest")
            .field("method", self.method)
            .field("path", &self.path)
            .field("query", &self.query)
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl<'a> AdminRequest<'a> {
    /// A request: `path` relative to the mount point, `query` without the
    /// `?`, the request's headers (`Content-Type`, `Origin`,
    /// `Sec-Fetch-Site`, `Host` are read).
    #[must_use]
    pub fn new(
        method: &'a Method,
        path: &'a str,
        query: Option<&'a str>,
        headers: &'a HeaderMap,
    ) -> Self {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        Self {
            method,
            path,
            query,
            headers,
            host,
        }
    }

    /// The request's host (`host:port`), when it is not in a `Host` header
    /// (HTTP/2's `:authority`): the `Origin` check compares against it.
    #[must_use]
    pub fn host(mut self, host: Option<&'a str>) -> Self {
        if host.is_some() {
            self.host = host;
        }
        self
    }
}

/// What the admin API answers.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AdminResponse {
    /// The status.
    pub status: StatusCode,
    /// The JSON body (`null` for `204`).
    pub body: Value,
}

impl AdminResponse {
    fn new(status: StatusCode, body: Value) -> Self {
        Self { status, body }
    }

    fn error(status: StatusCode, reason: &str) -> Self {
        Self::new(status, json!({ "error": reason }))
    }

    /// The body as bytes (`application/json`), empty for `204`.
    #[must_use]
    pub fn body_bytes(&self) -> Vec<u8> {
        if self.body.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(&self.body).unwrap_or_default()
        }
    }
}

/// The header every state-changing request must carry.
const REQUIRED_CONTENT_TYPE: &str = "application/json";

/// Answers one admin request. `access` is what the application's
/// `authorize` hook decided, `None` when none is configured (then every
/// request is served: the API is behind the application's own
/// authentication).
pub async fn handle(
    inbox: &dyn Inbox,
    config: &AdminConfig,
    access: Option<Access>,
    request: AdminRequest<'_>,
) -> AdminResponse {
    let method = request.method;
    let who = match access {
        None => "-".to_owned(),
        Some(Access::Deny) => {
            return AdminResponse::error(StatusCode::FORBIDDEN, "access denied");
        }
        Some(Access::ReadOnly(_)) if !method.is_safe() => {
            return AdminResponse::error(
                StatusCode::FORBIDDEN,
                "read-only access: only GET requests are allowed",
            );
        }
        Some(Access::Admin(who) | Access::ReadOnly(who)) => who,
    };
    if !method.is_safe() {
        if let Err(reason) = cross_site::check_origin(
            request.headers,
            request.host,
            &config.allowed_origins,
            cross_site::Client::Api,
        ) {
            return AdminResponse::error(StatusCode::FORBIDDEN, reason);
        }
        if !is_json(request.headers) {
            return AdminResponse::error(
                StatusCode::FORBIDDEN,
                "state-changing requests must carry Content-Type: application/json",
            );
        }
    }
    let path = request.path.trim_end_matches('/');
    let query = request.query.unwrap_or("");
    match route(inbox, config, &who, method, path, query).await {
        Ok(response) => response,
        Err(error) => {
            tracing::warn!(error = %error, "inbox admin: store failed");
            AdminResponse::error(StatusCode::SERVICE_UNAVAILABLE, "inbox store unavailable")
        }
    }
}

/// Whether the request says its body is JSON (parameters such as
/// `charset` allowed).
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONTENT_TYPE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(';')
                .next()
                .is_some_and(|media| media.trim().eq_ignore_ascii_case(REQUIRED_CONTENT_TYPE))
        })
}

fn count(action: &'static str, n: u64) {
    #[cfg(feature = "metrics")]
    metrics::counter!(ACTIONS, "action" => action).increment(n);
    #[cfg(not(feature = "metrics"))]
    let _ = (action, n);
}

/// `GET /activity[?minutes=n]`: the per-minute series ([`Inbox::activity`]).
async fn activity(
    inbox: &dyn Inbox,
    method: &Method,
    minutes: Option<&str>,
) -> Result<AdminResponse, super::InboxError> {
    if method != Method::GET {
        return Ok(AdminResponse::error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed",
        ));
    }
    let minutes = match minutes.map(str::parse::<u32>) {
        None => super::ACTIVITY_MINUTES,
        Some(Ok(n)) if (1..=super::ACTIVITY_MINUTES).contains(&n) => n,
        Some(_) => {
            return Ok(AdminResponse::error(
                StatusCode::BAD_REQUEST,
                "`minutes` is a number from 1 to 60",
            ));
        }
    };
    let activity = inbox.activity(minutes).await?;
    let (accepted, completed, failed) = activity.totals();
    let series: Vec<_> = activity
        .minutes
        .iter()
        .map(|m| {
            json!({
                "start": m.start.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
                "accepted": m.accepted,
                "completed": m.completed,
                "failed": m.failed,
            })
        })
        .collect();
    Ok(AdminResponse::new(
        StatusCode::OK,
        json!({
            "minutes": series,
            "totals": {"accepted": accepted, "completed": completed, "failed": failed},
        }),
    ))
}

async fn route(
    inbox: &dyn Inbox,
    config: &AdminConfig,
    who: &str,
    method: &Method,
    path: &str,
    query: &str,
) -> Result<AdminResponse, super::InboxError> {
    let params = parse_query(query);
    let get = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let not_allowed = || AdminResponse::error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    if path == "/stats" {
        if method != Method::GET {
            return Ok(not_allowed());
        }
        let stats = inbox.stats().await?;
        return Ok(AdminResponse::new(
            StatusCode::OK,
            json!({
                "pending": stats.pending,
                "due": stats.due,
                "oldest_due_age_ms": stats.oldest_due_age.map(|d| d.as_millis() as u64),
                "in_flight": stats.in_flight,
                "dead": stats.dead,
                "completed": stats.completed,
                "paused": stats.paused,
            }),
        ));
    }
    if path == "/activity" {
        return activity(inbox, method, get("minutes")).await;
    }
    if path == "/pause" || path == "/resume" {
        if method != Method::POST {
            return Ok(not_allowed());
        }
        let (paused, action) = if path == "/pause" {
            (true, "pause")
        } else {
            (false, "resume")
        };
        let changed = inbox.set_paused(paused).await?;
        tracing::info!(who = %who, action, changed, "inbox admin action");
        count(action, 1);
        return Ok(AdminResponse::new(
            StatusCode::OK,
            json!({ "paused": paused, "changed": changed }),
        ));
    }
    if path == "/purge" {
        if method != Method::POST {
            return Ok(not_allowed());
        }
        let Some(secs) = get("older_than").and_then(|v| v.parse::<u64>().ok()) else {
            return Ok(AdminResponse::error(
                StatusCode::BAD_REQUEST,
                "older_than (seconds) is required",
            ));
        };
        let force = match get("force") {
            None | Some("false") => false,
            Some("true") => true,
            Some(_) => {
                return Ok(AdminResponse::error(
                    StatusCode::BAD_REQUEST,
                    "force is true or false",
                ));
            }
        };
        let minimum = config.min_purge_age.as_secs();
        if secs < minimum && !force {
            return Ok(AdminResponse::new(
                StatusCode::BAD_REQUEST,
                json!({
                    "error": format!(
                        "older_than is below the minimum of {minimum} seconds: the completed events are the inbox's memory of processed deliveries (a sender's retry of a purged one runs again); add force=true to purge anyway"
                    ),
                    "min_older_than": minimum,
                }),
            ));
        }
        let purged = inbox.purge_completed(Duration::from_secs(secs)).await?;
        tracing::info!(who = %who, action = "purge", older_than_secs = secs, force, purged, "inbox admin action");
        count("purge", purged);
        return Ok(AdminResponse::new(
            StatusCode::OK,
            json!({ "purged": purged }),
        ));
    }
    if path == "/deliveries" {
        if method != Method::GET {
            return Ok(not_allowed());
        }
        let filter = match parse_delivery_query(query) {
            Ok(filter) => filter,
            Err(error) => return Ok(AdminResponse::error(StatusCode::BAD_REQUEST, error)),
        };
        let page = inbox.deliveries(&filter).await?;
        let items: Vec<Value> = page.items.iter().map(|d| delivery_json(d, false)).collect();
        return Ok(AdminResponse::new(
            StatusCode::OK,
            json!({ "items": items, "next": page.next.map(|c| c.to_string()) }),
        ));
    }
    if let Some(key) = path.strip_prefix("/deliveries/") {
        if method != Method::GET {
            return Ok(not_allowed());
        }
        return Ok(match inbox.delivery_get(&percent_decode(key)).await? {
            Some(one) => AdminResponse::new(StatusCode::OK, delivery_json(&one, true)),
            None => AdminResponse::error(StatusCode::NOT_FOUND, "no such delivery"),
        });
    }
    if path == "/dead-letters" {
        if method != Method::GET {
            return Ok(not_allowed());
        }
        let mut filter = DeadLetterFilter {
            scheme: get("scheme").map(str::to_owned),
            event_type: get("event_type").map(str::to_owned),
            ..DeadLetterFilter::default()
        };
        for (name, slot) in [
            ("from", &mut filter.received_from),
            ("until", &mut filter.received_until),
        ] {
            if let Some(value) = get(name) {
                // A number of seconds past what a time can hold is refused
                // too (adding it would panic; found by the admin_api fuzz target).
                let Some(time) = value
                    .parse::<u64>()
                    .ok()
                    .and_then(|secs| UNIX_EPOCH.checked_add(Duration::from_secs(secs)))
                else {
                    return Ok(AdminResponse::error(
                        StatusCode::BAD_REQUEST,
                        "from and until are Unix seconds",
                    ));
                };
                *slot = Some(time);
            }
        }
        if let Some(after) = get("after") {
            let Ok(cursor) = after.parse::<DeadLetterCursor>() else {
                return Ok(AdminResponse::error(
                    StatusCode::BAD_REQUEST,
                    "malformed cursor",
                ));
            };
            filter.after = Some(cursor);
        }
        if let Some(limit) = get("limit") {
            let Ok(limit) = limit.parse() else {
                return Ok(AdminResponse::error(
                    StatusCode::BAD_REQUEST,
                    "limit is a number",
                ));
            };
            filter.limit = Some(limit);
        }
        let page = inbox.dead_letters(&filter).await?;
        let items: Vec<Value> = page.items.iter().map(|d| dead_json(d, false)).collect();
        return Ok(AdminResponse::new(
            StatusCode::OK,
            json!({ "items": items, "next": page.next.map(|c| c.to_string()) }),
        ));
    }
    let Some(rest) = path.strip_prefix("/dead-letters/") else {
        return Ok(AdminResponse::error(
            StatusCode::NOT_FOUND,
            "no such admin route",
        ));
    };
    if let Some(key) = rest.strip_suffix("/replay") {
        if method != Method::POST {
            return Ok(not_allowed());
        }
        let key = percent_decode(key);
        let outcome = inbox.replay(&key).await?;
        let applied = outcome == Transition::Applied;
        tracing::info!(who = %who, action = "replay", key = %key, applied, "inbox admin action");
        return Ok(if applied {
            count("replay", 1);
            AdminResponse::new(StatusCode::OK, json!({ "replayed": true }))
        } else {
            AdminResponse::error(StatusCode::CONFLICT, "not a dead letter")
        });
    }
    let key = percent_decode(rest);
    if method == Method::GET {
        return Ok(match inbox.dead_letter_get(&key).await? {
            Some(dead) => AdminResponse::new(StatusCode::OK, dead_json(&dead, true)),
            None => AdminResponse::error(StatusCode::NOT_FOUND, "no such dead letter"),
        });
    }
    if method == Method::DELETE {
        let outcome = inbox.discard(&key).await?;
        let applied = outcome == Transition::Applied;
        tracing::info!(who = %who, action = "discard", key = %key, applied, "inbox admin action");
        return Ok(if applied {
            count("discard", 1);
            AdminResponse::new(StatusCode::NO_CONTENT, Value::Null)
        } else {
            AdminResponse::error(StatusCode::NOT_FOUND, "no such dead letter")
        });
    }
    Ok(not_allowed())
}

fn dead_json(dead: &DeadLetter, with_body: bool) -> Value {
    let meta = &dead.meta;
    let mut value = json!({
        "key": meta.key,
        "scheme": meta.scheme,
        "delivery_id": meta.delivery_id,
        "event_type": meta.event_type,
        "matched_key": meta.matched_key,
        "headers": meta.headers,
        "received_at_ms": to_ms(meta.received_at),
        "signed_at": meta.signed_at,
        "attempts": dead.attempts,
        "last_error": dead.last_error,
        "dead_at_ms": to_ms(dead.dead_at),
    });
    if with_body {
        match std::str::from_utf8(&dead.body) {
            Ok(text) => value["body"] = Value::String(text.to_owned()),
            Err(_) => {
                value["body_base64"] =
                    Value::String(base64::engine::general_purpose::STANDARD.encode(&dead.body));
            }
        }
    }
    value
}

/// Parses the query of `GET /deliveries` (also the console's list page):
/// `state` (`due` by default, `retrying`, `in_flight`, `dead`,
/// `completed`), `order` (`newest` by default, `oldest`), `scheme`,
/// `event_type`, `delivery_id` (empty means any), `from` / `until` (Unix
/// seconds), `after` (a [`DeliveryCursor`] of the same order), `limit`.
/// Unknown names are ignored; a later repetition of a name is ignored.
///
/// # Errors
///
/// A short message for a `400` when a value is malformed.
pub fn parse_delivery_query(query: &str) -> Result<DeliveryFilter, &'static str> {
    let params = parse_query(query);
    let get = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let mut filter = delivery_filter_from(
        get,
        |value| {
            value
                .parse::<u64>()
                .ok()
                .and_then(|secs| UNIX_EPOCH.checked_add(Duration::from_secs(secs)))
        },
        "from and until are Unix seconds",
    )?;
    if let Some(limit) = get("limit").filter(|v| !v.is_empty()) {
        filter.limit = Some(limit.parse().map_err(|_| "limit is a number")?);
    }
    Ok(filter)
}

/// The deliveries filter both the admin API and the console read: `scheme`,
/// `event_type`, `delivery_id` (empty means any), `state`, `order`, `from` /
/// `until` (read by `time`, refused with `time_error`) and `after` (a
/// cursor of the same order). `get` answers a query value by name; the
/// caller decides whether an empty `state` or `order` is absent or wrong.
pub(crate) fn delivery_filter_from<'q>(
    get: impl Fn(&str) -> Option<&'q str>,
    time: impl Fn(&str) -> Option<std::time::SystemTime>,
    time_error: &'static str,
) -> Result<DeliveryFilter, &'static str> {
    let text = |name: &str| get(name).filter(|v| !v.is_empty()).map(str::to_owned);
    let mut filter = DeliveryFilter {
        scheme: text("scheme"),
        event_type: text("event_type"),
        delivery_id: text("delivery_id"),
        ..DeliveryFilter::default()
    };
    if let Some(state) = get("state") {
        filter.state = state
            .parse()
            .map_err(|_| "state is due, retrying, in_flight, dead or completed")?;
    }
    if let Some(order) = get("order") {
        filter.order = order.parse().map_err(|_| "order is newest or oldest")?;
    }
    for (name, slot) in [
        ("from", &mut filter.received_from),
        ("until", &mut filter.received_until),
    ] {
        if let Some(value) = get(name).filter(|v| !v.is_empty()) {
            *slot = Some(time(value).ok_or(time_error)?);
        }
    }
    if let Some(after) = get("after").filter(|v| !v.is_empty()) {
        let cursor = after
            .parse::<DeliveryCursor>()
            .map_err(|_| "malformed cursor")?;
        if cursor.order != filter.order {
            return Err("the cursor was made for the other order");
        }
        filter.after = Some(cursor);
    }
    Ok(filter)
}

fn delivery_json(one: &Delivery, with_body: bool) -> Value {
    let meta = &one.meta;
    let mut value = json!({
        "key": meta.key,
        "state": one.state.as_str(),
        "scheme": meta.scheme,
        "delivery_id": meta.delivery_id,
        "event_type": meta.event_type,
        "matched_key": meta.matched_key,
        "headers": meta.headers,
        "received_at_ms": to_ms(meta.received_at),
        "signed_at": meta.signed_at,
        "attempts": one.attempts,
        "last_error": one.last_error,
        "due_at_ms": one.due_at.map(to_ms),
        "lease_until_ms": one.lease_until.map(to_ms),
        "updated_at_ms": to_ms(one.updated_at),
    });
    if with_body {
        match std::str::from_utf8(&one.body) {
            Ok(text) => value["body"] = Value::String(text.to_owned()),
            Err(_) => {
                value["body_base64"] =
                    Value::String(base64::engine::general_purpose::STANDARD.encode(&one.body));
            }
        }
    }
    value
}

/// The query's pairs, decoded as a form (`+` is a space, `%XX` a byte;
/// invalid UTF-8 replaced), through the `form_urlencoded` crate (off the
/// delivery path: only the admin API reads queries).
fn parse_query(query: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(query.as_bytes())
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect()
}

/// A key from the path: `%XX` escapes decoded (a `+` stays a `+`; invalid
/// escapes are kept as they are, invalid UTF-8 replaced).
fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request with `headers` (name, value pairs) and the `Host` the
    /// `Origin` checks compare with.
    async fn call(
        inbox: &dyn Inbox,
        config: &AdminConfig,
        access: Option<Access>,
        method: Method,
        target: &str,
        headers: &[(&'static str, &'static str)],
    ) -> AdminResponse {
        let mut map = HeaderMap::new();
        map.insert(header::HOST, "ops.example:8080".parse().unwrap());
        for (name, value) in headers {
            map.append(*name, value.parse().unwrap());
        }
        let (path, query) = match target.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (target, None),
        };
        handle(
            inbox,
            config,
            access,
            AdminRequest::new(&method, path, query, &map),
        )
        .await
    }

    const JSON: (&str, &str) = ("content-type", "application/json");

    #[cfg(feature = "sqlite")]
    async fn inbox() -> crate::inbox::SqliteInbox {
        let inbox = crate::inbox::SqliteInbox::connect("sqlite::memory:")
            .await
            .unwrap();
        inbox.migrate().await.unwrap();
        inbox
    }

    /// Found by the `admin_api` fuzz target (issue 25, item 9): a `from`
    /// past what a `SystemTime` holds panicked; it is a 400.
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn times_past_the_clock_s_range_are_400() {
        let inbox = inbox().await;
        let config = AdminConfig::default();
        for query in ["from=12321478040788926463", "until=18446744073709551615"] {
            let target = format!("/dead-letters?{query}");
            let answer = call(&inbox, &config, None, Method::GET, &target, &[]).await;
            assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{query}");
        }
        let fine = call(
            &inbox,
            &config,
            None,
            Method::GET,
            "/dead-letters?from=0",
            &[],
        )
        .await;
        assert_eq!(fine.status, StatusCode::OK);
    }

    /// Issue 22: a state-changing request a browser could send from another
    /// site is refused before it reaches the inbox.
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn cross_site_state_changes_are_403() {
        let inbox = inbox().await;
        let config = AdminConfig::default();
        let purge = "/purge?older_than=604800";
        let refused: [&[(&str, &str)]; 6] = [
            // A simple request: no header at all, or a form's content type.
            &[],
            &[("content-type", "application/x-www-form-urlencoded")],
            &[("content-type", "text/plain")],
            &[JSON, ("origin", "http://evil.example")],
            &[JSON, ("origin", "null")],
            &[JSON, ("sec-fetch-site", "cross-site")],
        ];
        for headers in refused {
            for (method, target) in [
                (Method::POST, purge),
                (Method::POST, "/dead-letters/k/replay"),
                (Method::DELETE, "/dead-letters/k"),
                (Method::POST, "/pause"),
                (Method::POST, "/resume"),
            ] {
                let answer = call(&inbox, &config, None, method.clone(), target, headers).await;
                assert_eq!(
                    answer.status,
                    StatusCode::FORBIDDEN,
                    "{method} {target} {headers:?}"
                );
                assert!(answer.body["error"].is_string(), "{}", answer.body);
            }
        }
        let same_site = call(
            &inbox,
            &config,
            None,
            Method::POST,
            purge,
            &[JSON, ("sec-fetch-site", "same-site")],
        )
        .await;
        assert_eq!(same_site.status, StatusCode::FORBIDDEN);
        let missing = call(&inbox, &config, None, Method::POST, purge, &[]).await;
        assert!(
            missing.body["error"]
                .as_str()
                .unwrap()
                .contains("Content-Type: application/json"),
            "{}",
            missing.body
        );
        let allowed: [&[(&str, &str)]; 5] = [
            &[JSON],
            &[("content-type", "Application/JSON; charset=utf-8")],
            &[JSON, ("origin", "http://ops.example:8080")],
            &[
                JSON,
                ("sec-fetch-site", "same-origin"),
                ("origin", "http://ops.example:8080"),
            ],
            &[JSON, ("sec-fetch-site", "none")],
        ];
        for headers in allowed {
            let answer = call(&inbox, &config, None, Method::POST, purge, headers).await;
            assert_eq!(
                answer.status,
                StatusCode::OK,
                "{headers:?}: {}",
                answer.body
            );
            assert_eq!(answer.body["purged"], 0);
        }
        // GETs stay as they are, whatever the browser says.
        let get = call(
            &inbox,
            &config,
            None,
            Method::GET,
            "/stats",
            &[
                ("sec-fetch-site", "cross-site"),
                ("origin", "http://evil.example"),
            ],
        )
        .await;
        assert_eq!(get.status, StatusCode::OK);
        // An allowed origin (a proxy rewriting Host) passes.
        let behind_proxy = AdminConfig::new().allow_origin("https://ops.example.com");
        let answer = call(
            &inbox,
            &behind_proxy,
            None,
            Method::POST,
            purge,
            &[JSON, ("origin", "https://ops.example.com")],
        )
        .await;
        assert_eq!(answer.status, StatusCode::OK);
    }

    /// Issue 22: a purge below the retention is refused (the completed
    /// events are the dedup memory) unless forced.
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn purges_below_the_minimum_need_force() {
        use crate::inbox::{ClaimToken, NewEvent};

        let inbox = inbox().await;
        inbox
            .accept(&NewEvent::new("webhooks:test:done", "test", "{}"))
            .await
            .unwrap();
        let token = ClaimToken::random();
        let leased = inbox
            .lease(token, 1, Duration::from_secs(30), 3)
            .await
            .unwrap();
        let done = inbox.complete(&leased[0].meta.key, token).await.unwrap();
        assert_eq!(done, Transition::Applied);

        let config = AdminConfig::default();
        let below = call(
            &inbox,
            &config,
            None,
            Method::POST,
            "/purge?older_than=60",
            &[JSON],
        )
        .await;
        assert_eq!(below.status, StatusCode::BAD_REQUEST);
        let reason = below.body["error"].as_str().unwrap();
        assert!(reason.contains("604800"), "{reason}");
        assert!(
            reason.contains("memory of processed deliveries"),
            "{reason}"
        );
        assert_eq!(below.body["min_older_than"], 604_800);
        assert_eq!(inbox.stats().await.unwrap().completed, 1, "nothing purged");
        let bad_force = call(
            &inbox,
            &config,
            None,
            Method::POST,
            "/purge?older_than=60&force=yes",
            &[JSON],
        )
        .await;
        assert_eq!(bad_force.status, StatusCode::BAD_REQUEST);
        let at_minimum = call(
            &inbox,
            &config,
            None,
            Method::POST,
            "/purge?older_than=604800",
            &[JSON],
        )
        .await;
        assert_eq!(
            (at_minimum.status, &at_minimum.body["purged"]),
            (StatusCode::OK, &json!(0))
        );

        // A configured minimum replaces the retention.
        let short = AdminConfig::new().min_purge_age(Duration::from_secs(1));
        let refused = call(
            &inbox,
            &short,
            None,
            Method::POST,
            "/purge?older_than=0",
            &[JSON],
        )
        .await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert_eq!(refused.body["min_older_than"], 1);

        let forced = call(
            &inbox,
            &config,
            None,
            Method::POST,
            "/purge?older_than=0&force=true",
            &[JSON],
        )
        .await;
        assert_eq!(forced.status, StatusCode::OK, "{}", forced.body);
        assert_eq!(forced.body["purged"], 1);
        assert_eq!(inbox.stats().await.unwrap().completed, 0);
    }

    /// Issue 22: the `authorize` hook's decision, as in the console.
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn access_is_the_hook_s_decision() {
        let inbox = inbox().await;
        let config = AdminConfig::default();
        let purge = "/purge?older_than=604800";
        let reader = || Some(Access::ReadOnly("rita".into()));
        let admin = || Some(Access::Admin("ada".into()));
        for (access, method, target, status) in [
            (
                Some(Access::Deny),
                Method::GET,
                "/stats",
                StatusCode::FORBIDDEN,
            ),
            (
                Some(Access::Deny),
                Method::POST,
                purge,
                StatusCode::FORBIDDEN,
            ),
            (reader(), Method::GET, "/stats", StatusCode::OK),
            (reader(), Method::GET, "/dead-letters", StatusCode::OK),
            (
                reader(),
                Method::GET,
                "/deliveries?state=completed&order=oldest",
                StatusCode::OK,
            ),
            (
                reader(),
                Method::GET,
                "/deliveries?state=sleeping",
                StatusCode::BAD_REQUEST,
            ),
            (
                reader(),
                Method::GET,
                "/deliveries/k",
                StatusCode::NOT_FOUND,
            ),
            (
                admin(),
                Method::POST,
                "/deliveries",
                StatusCode::METHOD_NOT_ALLOWED,
            ),
            (reader(), Method::POST, purge, StatusCode::FORBIDDEN),
            (
                reader(),
                Method::POST,
                "/dead-letters/k/replay",
                StatusCode::FORBIDDEN,
            ),
            (
                reader(),
                Method::DELETE,
                "/dead-letters/k",
                StatusCode::FORBIDDEN,
            ),
            (admin(), Method::GET, "/stats", StatusCode::OK),
            (admin(), Method::POST, purge, StatusCode::OK),
            (
                admin(),
                Method::POST,
                "/dead-letters/k/replay",
                StatusCode::CONFLICT,
            ),
            (
                admin(),
                Method::DELETE,
                "/dead-letters/k",
                StatusCode::NOT_FOUND,
            ),
            (None, Method::POST, purge, StatusCode::OK),
            (reader(), Method::POST, "/pause", StatusCode::FORBIDDEN),
            (reader(), Method::POST, "/resume", StatusCode::FORBIDDEN),
            (
                Some(Access::Deny),
                Method::POST,
                "/pause",
                StatusCode::FORBIDDEN,
            ),
            (
                admin(),
                Method::GET,
                "/pause",
                StatusCode::METHOD_NOT_ALLOWED,
            ),
        ] {
            let label = format!("{access:?} {method} {target}");
            let answer = call(&inbox, &config, access, method, target, &[JSON]).await;
            assert_eq!(answer.status, status, "{label}: {}", answer.body);
        }
        // An admin's request is still checked for being cross-site.
        let cross = call(
            &inbox,
            &config,
            admin(),
            Method::POST,
            purge,
            &[JSON, ("sec-fetch-site", "cross-site")],
        )
        .await;
        assert_eq!(cross.status, StatusCode::FORBIDDEN);
    }

    /// Issue 22: pause and resume through the API; refused requests leave
    /// the flag as it was.
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn pause_and_resume() {
        let inbox = inbox().await;
        let config = AdminConfig::default();
        let admin = || Some(Access::Admin("ada".into()));
        let stats = call(&inbox, &config, None, Method::GET, "/stats", &[]).await;
        assert_eq!(stats.body["paused"], false);
        // Refused: read-only, cross-site, no JSON content type.
        let reader = Some(Access::ReadOnly("rita".into()));
        let refused = call(&inbox, &config, reader, Method::POST, "/pause", &[JSON]).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        let cross = [JSON, ("sec-fetch-site", "cross-site")];
        let refused = call(&inbox, &config, admin(), Method::POST, "/pause", &cross).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        let refused = call(&inbox, &config, admin(), Method::POST, "/pause", &[]).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        assert!(
            !inbox.paused().await.unwrap(),
            "refused requests changed nothing"
        );

        let paused = call(&inbox, &config, admin(), Method::POST, "/pause", &[JSON]).await;
        assert_eq!(paused.status, StatusCode::OK, "{}", paused.body);
        assert_eq!(paused.body, json!({"paused": true, "changed": true}));
        let again = call(&inbox, &config, admin(), Method::POST, "/pause/", &[JSON]).await;
        assert_eq!(again.body, json!({"paused": true, "changed": false}));
        assert!(inbox.paused().await.unwrap());
        let stats = call(&inbox, &config, None, Method::GET, "/stats", &[]).await;
        assert_eq!(stats.body["paused"], true);
        let resumed = call(&inbox, &config, admin(), Method::POST, "/resume", &[JSON]).await;
        assert_eq!(resumed.body, json!({"paused": false, "changed": true}));
        assert!(!inbox.paused().await.unwrap());
    }

    /// Issue 22: the per-minute series, for read-only callers too.
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn activity_series() {
        let inbox = inbox().await;
        inbox
            .accept(&crate::inbox::NewEvent::new("k:1", "test", "{}"))
            .await
            .unwrap();
        let config = AdminConfig::default();
        let reader = || Some(Access::ReadOnly("rita".into()));
        let answer = call(&inbox, &config, reader(), Method::GET, "/activity", &[]).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        let minutes = answer.body["minutes"].as_array().unwrap();
        assert_eq!(minutes.len(), 60);
        assert_eq!(minutes[59]["start"].as_u64().unwrap() % 60, 0);
        assert_eq!(
            answer.body["totals"],
            json!({"accepted": 1, "completed": 0, "failed": 0})
        );
        let short = call(
            &inbox,
            &config,
            reader(),
            Method::GET,
            "/activity?minutes=5",
            &[],
        )
        .await;
        assert_eq!(short.body["minutes"].as_array().unwrap().len(), 5);
        for bad in [
            "/activity?minutes=0",
            "/activity?minutes=61",
            "/activity?minutes=x",
        ] {
            let answer = call(&inbox, &config, reader(), Method::GET, bad, &[]).await;
            assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{bad}");
        }
        let post = call(&inbox, &config, None, Method::POST, "/activity", &[JSON]).await;
        assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED);
    }

    #[test]
    fn requests_leave_their_headers_out_of_debug() {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, "Bearer hunter2".parse().unwrap());
        let request = AdminRequest::new(&Method::GET, "/stats", None, &headers);
        assert!(!format!("{request:?}").contains("hunter2"));
    }

    #[test]
    fn delivery_queries_parse() {
        let filter = parse_delivery_query("").unwrap();
        assert_eq!(filter, DeliveryFilter::default());
        let filter = parse_delivery_query(
            "state=in_flight&order=oldest&scheme=stripe&event_type=&delivery_id=msg%201\
             &from=10&until=20&after=o.5.k.1&limit=7",
        )
        .unwrap();
        assert_eq!(filter.state, super::super::DeliveryState::InFlight);
        assert_eq!(filter.order, super::super::DeliveryOrder::OldestFirst);
        assert_eq!(filter.scheme.as_deref(), Some("stripe"));
        assert_eq!(filter.event_type, None);
        assert_eq!(filter.delivery_id.as_deref(), Some("msg 1"));
        assert_eq!(
            filter.received_from,
            Some(UNIX_EPOCH + Duration::from_secs(10))
        );
        let after = filter.after.unwrap();
        assert_eq!((after.received_at_ms, after.key.as_str()), (5, "k.1"));
        assert_eq!(filter.limit, Some(7));
        for bad in [
            "state=x",
            "order=up",
            "from=-1",
            "until=99999999999999999999",
            "after=5.k",
            "after=o.5.k",
            "limit=many",
        ] {
            assert!(parse_delivery_query(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn queries_and_keys_are_percent_decoded() {
        assert_eq!(
            percent_decode("webhooks%3Atest%3Amsg_1"),
            "webhooks:test:msg_1"
        );
        assert_eq!(percent_decode("100%"), "100%");
        // A path keeps its `+`; a bad escape stays as it is.
        assert_eq!(percent_decode("a+b%2Bc%zz%+1"), "a+b+c%zz%+1");
        assert_eq!(
            parse_query("scheme=stripe&event_type=a%2Eb+c&x"),
            [
                ("scheme".to_owned(), "stripe".to_owned()),
                ("event_type".to_owned(), "a.b c".to_owned()),
                ("x".to_owned(), String::new())
            ]
        );
    }
}
