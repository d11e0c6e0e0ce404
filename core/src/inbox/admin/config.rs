//! The admin API's settings beyond the inbox it serves.

use std::time::Duration;

use http::HeaderName;

use crate::redact::Redaction;

/// How an admin API answers, beyond the inbox it serves: the adapters'
/// builders (`min_purge_age`, `allow_origin`, `allow_unauthenticated`, ...)
/// fill one in.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AdminConfig {
    pub(super) min_purge_age: Duration,
    pub(super) allowed_origins: Vec<String>,
    pub(super) allow_unauthenticated: bool,
    pub(super) bodies_for_read_only: bool,
    pub(super) redaction: Redaction,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            min_purge_age: crate::inbox::DEFAULT_RETENTION,
            allowed_origins: Vec::new(),
            allow_unauthenticated: false,
            bodies_for_read_only: false,
            redaction: Redaction::new(),
        }
    }
}

impl AdminConfig {
    /// The defaults: purges no younger than [`DEFAULT_RETENTION`](crate::inbox::DEFAULT_RETENTION)
    /// (7 days) without `force=true`, no other origin accepted, every
    /// request denied without an `authorize` hook, bodies for admins only.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The smallest `older_than` a purge accepts without `force=true`: your
    /// inbox's retention when it is not the default 7 days (the completed
    /// events are its memory of processed deliveries). Never below
    /// [`purge_floor`](crate::inbox::purge_floor): a shorter one is raised
    /// to it.
    #[must_use]
    pub fn min_purge_age(mut self, age: Duration) -> Self {
        self.min_purge_age = age;
        self
    }

    /// Accepts state-changing requests whose `Origin` is exactly `origin`
    /// (`https://ops.example.com`), besides the request's own origin (for a
    /// proxy that rewrites `Host`).
    #[must_use]
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.allowed_origins.push(origin.into());
        self
    }

    /// Serves requests without an `authorize` hook as an admin's (identity
    /// `-` in the logs): **only** when the API is reachable through your
    /// own authentication alone (a middleware in front of it, a port bound
    /// to localhost for local use). Without this call and without a hook,
    /// every request is answered `403`.
    #[must_use]
    pub fn allow_unauthenticated(mut self) -> Self {
        self.allow_unauthenticated = true;
        self
    }

    /// Shows bodies to read-only callers too (default: admins only; a
    /// read-only caller's item answers carry `"body": null` and
    /// `"body_omitted": "read-only access"`).
    #[must_use]
    pub fn bodies_for_read_only(mut self, yes: bool) -> Self {
        self.bodies_for_read_only = yes;
        self
    }

    /// Shows these headers redacted too, besides those named as credentials
    /// ([`is_credential_header`](crate::redact::is_credential_header)): pass
    /// your verifier's [`credential_headers`](crate::RequestVerifier::credential_headers)
    /// when its signature header has a name of your choosing.
    #[must_use]
    pub fn redact_headers(mut self, names: impl IntoIterator<Item = HeaderName>) -> Self {
        self.redaction = self.redaction.headers(names);
        self
    }

    /// What answers show of headers and bodies: configured headers and
    /// payload fields, an application hook ([`Redaction`]); replaces the
    /// names given to [`redact_headers`](Self::redact_headers) before.
    /// JSON bodies over [`DEFAULT_BODY_LIMIT`](crate::redact::DEFAULT_BODY_LIMIT)
    /// are not parsed, so answered `"body": null` with `"body_omitted"`.
    #[must_use]
    pub fn redaction(mut self, redaction: Redaction) -> Self {
        self.redaction = redaction;
        self
    }

    /// The smallest `older_than` a purge accepts without `force=true`:
    /// [`min_purge_age`](Self::min_purge_age), raised to
    /// [`purge_floor`](crate::inbox::purge_floor) (the longest provider
    /// retry window plus a day) when it is shorter.
    #[must_use]
    pub fn purge_minimum(&self) -> Duration {
        crate::inbox::purge_floor(self.min_purge_age)
    }
}
