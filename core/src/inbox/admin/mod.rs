//! The dead-letter admin API, framework-free: a method, a path relative to
//! where it is mounted, a query string and the request's headers in; a
//! status and a JSON body out. `tower-webhooks` (feature `inbox-admin`) and
//! `actix-webhooks` (same feature) only translate their requests to
//! [`handle`] and back, so both answer the same.
//!
//! **Access.** It shows bodies and replays deliveries, so who may do what
//! is the application's decision: give the adapter an `authorize` hook
//! returning an [`Access`] (the console's type): [`Access::Deny`] is `403`,
//! [`Access::ReadOnly`] may only `GET` and sees no bodies (unless
//! [`AdminConfig::bodies_for_read_only`]), [`Access::Admin`] may do
//! everything. **Without a hook every request is denied** (`403`, as the
//! console does), unless [`AdminConfig::allow_unauthenticated`] says the
//! API is behind your own authentication (a middleware in front of it, a
//! port bound to localhost); then every request is served as an admin's.
//!
//! **What answers show.** Credential headers kept with an event are
//! redacted for everyone, admins included: those named as credentials
//! ([`crate::redact::is_credential_header`]: `Authorization`, `Cookie`,
//! `X-Shopify-Hmac-Sha256`, `X-Hub-Signature-256`, ...) and those the
//! configuration names ([`AdminConfig::redact_headers`]: pass your
//! verifier's [`credential_headers`](crate::RequestVerifier::credential_headers)),
//! shown as `"redacted (N bytes)"`. In item answers, the body's JSON
//! fields named like credentials (`client_secret`, `access_token`, ...)
//! and the paths configured with [`AdminConfig::redaction`] are masked
//! (`"redacted (string, 24 bytes)"`, counted in `"body_redacted"`), and
//! its hook may show, mask or hide any header, field or body
//! ([`crate::redact`]); a JSON body over
//! [`DEFAULT_BODY_LIMIT`](crate::redact::DEFAULT_BODY_LIMIT) is not parsed,
//! so answered `"body": null` with `"body_omitted"`. Every answer, refusals included,
//! carries `Cache-Control: no-store` and `X-Content-Type-Options: nosniff`
//! ([`AdminResponse::headers`]).
//!
//! | method | path | answer |
//! |---|---|---|
//! | `GET` | `/dead-letters?scheme=&event_type=&from=&until=&q=&after=&limit=` | `200 {"items": [...], "next": cursor or null}` (`from`/`until`: Unix seconds; `q`: a [search](crate::inbox::search) such as `data.object.customer = cus_123 and error ~ 502`, `400` with what is wrong when it does not parse; bodies left out) |
//! | `GET` | `/dead-letters/{key}` | `200` the dead letter with `body` (UTF-8) or `body_base64` (read-only callers: `"body": null, "body_omitted": "read-only access"`); `404` |
//! | `POST` | `/dead-letters/{key}/replay` | `200 {"replayed": true}`; `409` when not (or no longer) dead — of concurrent replays one wins |
//! | `DELETE` | `/dead-letters/{key}` | `204`; `404` |
//! | `GET` | `/deliveries?state=&order=&scheme=&event_type=&delivery_id=&from=&until=&q=&after=&limit=` | `200 {"items": [...], "next": cursor or null}`: the deliveries in one state (`due` by default, `retrying`, `in_flight`, `dead`, `completed`), `order=newest` (default) or `oldest`, bodies left out ([`parse_delivery_query`]) |
//! | `GET` | `/deliveries/{key}` | `200` the delivery in any state, with `state` and `body` (UTF-8) or `body_base64` (as for a dead letter); `404` |
//! | `GET` | `/stats` | `200 {"pending", "due", "oldest_due_age_ms", "in_flight", "dead", "completed", "paused"}` |
//! | `GET` | `/activity?minutes=` | `200 {"minutes": [{"start", "accepted", "completed", "failed"}, ...], "totals": {"accepted", "completed", "failed"}}`: per minute, oldest first, the last the current minute (`start`: Unix seconds; `minutes`: 1 to 60, default 60; [`Inbox::activity`]) |
//! | `POST` | `/bulk/replay?scheme=&event_type=&from=&until=&q=&limit=[&dry_run=true]`, `/bulk/discard?…` | every dead letter matching the filter, oldest first, at most `limit` (default [`DEFAULT_BULK_LIMIT`](crate::inbox::bulk::DEFAULT_BULK_LIMIT), in batches: [`bulk`](crate::inbox::bulk)): `200 {"action", "matched", "applied", "skipped", "reached_limit"}`; with `dry_run=true` only `{"dry_run": true, "action", "matched", "more"}`; recorded in the action log with the filter |
//! | `GET` | `/actions?before=&limit=` | `200 {"actions": [{"id", "at_ms", "who", "via", "action", "target", "count"}, ...], "next": id or null}`: the [action log](crate::inbox::actions), newest first (`limit`: 1 to 500, default 50; `before`: the previous page's `next`); every replay, discard, purge, pause and resume through this API, the console or `webhooks inbox` is in it, with the caller's identity |
//! | `POST` | `/pause` | `200 {"paused": true, "changed": bool}`: every worker stops leasing from its next poll ([`Inbox::set_paused`]); deliveries are still accepted; `changed` is `false` when it was already paused |
//! | `POST` | `/resume` | `200 {"paused": false, "changed": bool}` |
//! | `POST` | `/pause?only=<selector>`, `/resume?only=<selector>` | one [selector](crate::inbox::gates)'s events only (`stripe:invoice.*`, `shopify`): `200 {"paused", "changed", "only"}` ([`Inbox::set_gate_paused`]); `400` for a selector that does not parse or an inbox that keeps no gates (the brokers); `409` when [`MAX_GATES`](crate::inbox::gates::MAX_GATES) are held |
//! | `GET` | `/gates` | `200 {"gates": [{"selector", "paused", "concurrency", "per_second", "running", "updated_at_ms"}, ...], "supported": bool}`: the paused selectors and the workers' limits, with the permits held now ([`Inbox::gates`]) |
//! | `POST` | `/purge?older_than=<seconds>[&force=true]` | `200 {"purged": n}` (completed events only); `400` when `older_than` is below the minimum ([`AdminConfig::min_purge_age`], the inbox's retention by default) without `force=true` |
//! | any but `GET`/`HEAD` | any | **must carry `Content-Type: application/json`** (a body is not needed); `403 {"error": ...}` without it, with a `Sec-Fetch-Site` other than `same-origin` or `none`, or with an `Origin` that is not the request's own (scheme, host and port; see below) nor an [allowed one](AdminConfig::allow_origin) |
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
//! The request's own origin is its scheme, host and port: an `Origin` of
//! `http://ops.example.com` is refused when the request came over
//! `https` (and the converse). The scheme is the first `proto` of a
//! proxy's `Forwarded`, else of `X-Forwarded-Proto`, else what the adapter
//! knows ([`AdminRequest::scheme`]: the URI's; actix: the server's TLS);
//! when nothing tells it (HTTP/1 straight to a server that is not told
//! about TLS), only `host[:port]` is compared, as before. A browser's own
//! `Sec-Fetch-Site` (`cross-site` for `http` to `https`) is refused first.
//!
//! **The completed events are the inbox's memory** of processed deliveries:
//! a sender's retry of a purged one is accepted and runs again. `purge`
//! therefore refuses an `older_than` below the retention unless
//! `force=true`.
//!
//! Each state-changing action is logged at `INFO` with the identity the
//! hook returned (`-` when [`allow_unauthenticated`](AdminConfig::allow_unauthenticated)
//! served it) and what it affected (a key, a count;
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
//! // What the adapter's `authorize` hook decided for this request.
//! let ada = || Some(admin::Access::Admin("ada".into()));
//! let get = admin::AdminRequest::new(&http::Method::GET, "/stats", None, &headers);
//! let answer = admin::handle(&inbox, &config, ada(), get).await;
//! assert_eq!(answer.status, 200);
//! assert_eq!(answer.body["pending"], 0);
//! assert_eq!(answer.headers["cache-control"], "no-store");
//!
//! // No hook: denied, unless the configuration allows it.
//! let get = admin::AdminRequest::new(&http::Method::GET, "/stats", None, &headers);
//! assert_eq!(admin::handle(&inbox, &config, None, get).await.status, 403);
//!
//! // A state-changing request needs `Content-Type: application/json`.
//! let purge = admin::AdminRequest::new(&http::Method::POST, "/purge", Some("older_than=604800"), &headers);
//! assert_eq!(admin::handle(&inbox, &config, ada(), purge).await.status, 403);
//! headers.insert("content-type", "application/json".parse()?);
//! let purge = admin::AdminRequest::new(&http::Method::POST, "/purge", Some("older_than=604800"), &headers);
//! assert_eq!(admin::handle(&inbox, &config, ada(), purge).await.status, 200);
//! # Ok(()) }
//! # #[cfg(not(feature = "sqlite"))] fn main() {}
//! ```

mod access;
mod answers;
mod config;
mod query;
mod routes;
#[cfg(test)]
mod tests;

use std::fmt;

use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use serde_json::{Value, json};

use super::Inbox;
pub use access::Access;
pub use config::AdminConfig;
pub use query::parse_delivery_query;
#[cfg(feature = "console")]
pub(crate) use query::{delivery_filter_from, search_of};

/// `webhooks_admin_actions_total`: events affected by admin API actions,
/// labelled `action` (`replay`, `discard`, `purge`), and pause / resume
/// requests (`pause`, `resume`, one each).
pub const ACTIONS: &str = "webhooks_admin_actions_total";

/// A request to the admin API, as an adapter translates it.
#[derive(Clone, Copy)]
pub struct AdminRequest<'a> {
    method: &'a Method,
    path: &'a str,
    query: Option<&'a str>,
    headers: &'a HeaderMap,
    site: crate::cross_site::Site<'a>,
}

impl fmt::Debug for AdminRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The headers may carry credentials: left out.
        f.debug_struct("AdminRequest")
            .field("method", self.method)
            .field("path", &self.path)
            .field("query", &self.query)
            .field("host", &self.site.host)
            .field("scheme", &self.site.scheme)
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
        Self {
            method,
            path,
            query,
            headers,
            site: crate::cross_site::Site::of(headers),
        }
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

/// What the admin API answers.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AdminResponse {
    /// The status.
    pub status: StatusCode,
    /// The headers, for the adapter to send as they are: on every answer
    /// `Cache-Control: no-store` (bodies and headers of deliveries are not
    /// for a cache) and `X-Content-Type-Options: nosniff`, and
    /// `Content-Type: application/json` unless the body is `null`.
    pub headers: HeaderMap,
    /// The JSON body (`null` for `204`).
    pub body: Value,
}

impl AdminResponse {
    fn new(status: StatusCode, body: Value) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        if !body.is_null() {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
        Self {
            status,
            headers,
            body,
        }
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

/// Answers one admin request. `access` is what the application's
/// `authorize` hook decided, `None` when none is configured: then every
/// request is denied (`403`), unless the configuration
/// [`allow_unauthenticated`](AdminConfig::allow_unauthenticated) (the API is
/// behind the application's own authentication).
pub async fn handle(
    inbox: &dyn Inbox,
    config: &AdminConfig,
    access: Option<Access>,
    request: AdminRequest<'_>,
) -> AdminResponse {
    let caller = match access::admit(config, access, &request) {
        Ok(caller) => caller,
        Err(reason) => return AdminResponse::error(StatusCode::FORBIDDEN, reason),
    };
    let path = request.path.trim_end_matches('/');
    let query = request.query.unwrap_or("");
    match routes::route(inbox, config, &caller, request.method, path, query).await {
        Ok(response) => response,
        Err(error) => {
            tracing::warn!(error = %error, "inbox admin: store failed");
            AdminResponse::error(StatusCode::SERVICE_UNAVAILABLE, "inbox store unavailable")
        }
    }
}
