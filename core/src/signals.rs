//! Metrics: what the pipeline counts and times, through the [`metrics`] facade.
//!
//! With the `metrics` feature (on by default) every delivery updates the
//! series below. Nothing is exported until the application installs a
//! recorder — `metrics-exporter-prometheus`, a StatsD or OpenTelemetry bridge —
//! and without one the cost is a few relaxed atomic operations per delivery.
//! **Install the recorder before the first delivery**: each [`Receiver`]
//! resolves its handles on first use and keeps them.
//!
//! Labels are bounded: `scheme` (the verifier's name, e.g. `stripe`), `route`
//! (the receiver's [`route_label`](crate::ReceiverBuilder::route_label),
//! by default its [namespace](crate::ReceiverBuilder::namespace): one per
//! route you configure), and one small enumerated label per series. Delivery
//! ids, tenants, secrets and bodies are never labels.
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `webhooks_received_total` | counter | scheme, route | requests that reached the pipeline |
//! | `webhooks_verified_total` | counter | scheme, route, key | authentic deliveries; `key` is `primary` (first secret/key), `rotated` (any other), `lookup` (a tenant's secret) |
//! | `webhooks_rejected_total` | counter | scheme, route, reason | answers without running the handler, by [`Rejection::kind`] (duplicates excluded) |
//! | `webhooks_duplicates_total` | counter | scheme, route, state | retries acknowledged or deferred: `in_flight` (409) or `completed` (200) |
//! | `webhooks_store_errors_total` | counter | scheme, route, operation | dedup store failures: `claim`, `complete`, `release`, `extend` |
//! | `webhooks_handler_total` | counter | scheme, route, class | handler outcomes: `2xx`, `3xx`, `4xx`, `5xx`, `panic` |
//! | `webhooks_lease_lost_total` | counter | scheme, route | claims whose settlement (complete or release) was refused because another attempt took the delivery over after the lease ran out: the handler may have run twice |
//! | `webhooks_body_size_bytes` | histogram | scheme, route | size of bodies read in full |
//! | `webhooks_verify_duration_seconds` | histogram | scheme, route | signature verification |
//! | `webhooks_claim_duration_seconds` | histogram | scheme, route | the dedup claim |
//! | `webhooks_handler_duration_seconds` | histogram | scheme, route | the handler, until its response |
//!
//! So a graph of `webhooks_verified_total{key="rotated"}` shows when the old
//! secret of a rotation stops being used, and
//! `webhooks_rejected_total{reason="no_matching_signature"}` when a sender's
//! secret no longer matches.
//!
//! ```
//! use webhooks_core::signals;
//! assert_eq!(signals::REJECTED, "webhooks_rejected_total");
//! ```
//!
//! [`Receiver`]: crate::Receiver
//! [`Rejection::kind`]: crate::Rejection::kind
#![cfg_attr(
    not(feature = "metrics"),
    doc = "\n\n[`metrics`]: https://docs.rs/metrics"
)]

#[cfg(feature = "metrics")]
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::{MatchedKey, Rejection};

/// Counter: requests that reached the pipeline.
pub const RECEIVED: &str = "webhooks_received_total";
/// Counter: authentic deliveries, by which key matched.
pub const VERIFIED: &str = "webhooks_verified_total";
/// Counter: answers without running the handler, by reason (duplicates excluded).
pub const REJECTED: &str = "webhooks_rejected_total";
/// Counter: duplicates, `in_flight` or `completed`.
pub const DUPLICATES: &str = "webhooks_duplicates_total";
/// Counter: dedup store failures, by operation.
pub const STORE_ERRORS: &str = "webhooks_store_errors_total";
/// Counter: handler outcomes, by status class.
pub const HANDLER: &str = "webhooks_handler_total";
/// Counter: claims whose lease was lost (another attempt took the delivery over).
pub const LEASE_LOST: &str = "webhooks_lease_lost_total";
/// Histogram: body size in bytes.
pub const BODY_SIZE: &str = "webhooks_body_size_bytes";
/// Histogram: verification time in seconds.
pub const VERIFY_DURATION: &str = "webhooks_verify_duration_seconds";
/// Histogram: claim time in seconds.
pub const CLAIM_DURATION: &str = "webhooks_claim_duration_seconds";
/// Histogram: handler time in seconds.
pub const HANDLER_DURATION: &str = "webhooks_handler_duration_seconds";

/// A dedup store operation, the `operation` label of [`STORE_ERRORS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreOp {
    Claim,
    Complete,
    Release,
    Extend,
}

#[cfg(feature = "metrics")]
impl StoreOp {
    const ALL: [Self; 4] = [Self::Claim, Self::Complete, Self::Release, Self::Extend];

    fn label(self) -> &'static str {
        match self {
            Self::Claim => "claim",
            Self::Complete => "complete",
            Self::Release => "release",
            Self::Extend => "extend",
        }
    }
}

/// The `key` label of [`VERIFIED`].
#[cfg(any(feature = "metrics", test))]
fn key_label(key: &MatchedKey) -> &'static str {
    match key {
        MatchedKey::Secret(0) | MatchedKey::PublicKey(0) => "primary",
        MatchedKey::Secret(_) | MatchedKey::PublicKey(_) => "rotated",
        MatchedKey::Lookup { .. } => "lookup",
    }
}

/// A handler outcome, the `class` label of [`HANDLER`].
#[cfg(any(feature = "metrics", test))]
fn status_class(status: u16) -> &'static str {
    match status {
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

#[cfg(feature = "metrics")]
const KEYS: [&str; 3] = ["primary", "rotated", "lookup"];
#[cfg(feature = "metrics")]
const CLASSES: [&str; 5] = ["2xx", "3xx", "4xx", "5xx", "panic"];

/// One receiver's metric handles, resolved per scheme on first use.
pub(crate) struct Signals {
    #[cfg(feature = "metrics")]
    route: Arc<str>,
    #[cfg(feature = "metrics")]
    schemes: RwLock<Vec<Arc<SchemeHandles>>>,
    /// The first scheme's handles, read without a lock: a receiver's
    /// verifier nearly always reports one scheme.
    #[cfg(feature = "metrics")]
    first: std::sync::OnceLock<Arc<SchemeHandles>>,
}

impl std::fmt::Debug for Signals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signals").finish_non_exhaustive()
    }
}

/// The handles of one (scheme, route).
#[cfg(feature = "metrics")]
struct SchemeHandles {
    scheme: &'static str,
    received: metrics::Counter,
    verified: [metrics::Counter; 3],
    in_flight: metrics::Counter,
    completed: metrics::Counter,
    store_errors: [metrics::Counter; 4],
    handler: [metrics::Counter; 5],
    lease_lost: metrics::Counter,
    /// Rejection reasons seen so far (a few dozen at most: the kinds are an
    /// enumeration).
    rejected: RwLock<Vec<(&'static str, metrics::Counter)>>,
    body_size: metrics::Histogram,
    verify: metrics::Histogram,
    claim: metrics::Histogram,
    handler_time: metrics::Histogram,
}

#[cfg(feature = "metrics")]
impl SchemeHandles {
    fn new(scheme: &'static str, route: &Arc<str>) -> Self {
        let labels = || {
            vec![
                metrics::Label::from_static_parts("scheme", scheme),
                metrics::Label::new("route", metrics::SharedString::from(Arc::clone(route))),
            ]
        };
        let with = |name: &'static str, value: &'static str| {
            let mut l = labels();
            l.push(metrics::Label::from_static_parts(name, value));
            l
        };
        let counter = |metric: &'static str, labels: Vec<metrics::Label>| {
            metrics::with_recorder(|r| {
                r.register_counter(
                    &metrics::Key::from_parts(metric, labels),
                    &metrics::Metadata::new(module_path!(), metrics::Level::INFO, None),
                )
            })
        };
        let histogram = |metric: &'static str| {
            metrics::with_recorder(|r| {
                r.register_histogram(
                    &metrics::Key::from_parts(metric, labels()),
                    &metrics::Metadata::new(module_path!(), metrics::Level::INFO, None),
                )
            })
        };
        Self {
            scheme,
            received: counter(RECEIVED, labels()),
            verified: KEYS.map(|k| counter(VERIFIED, with("key", k))),
            in_flight: counter(DUPLICATES, with("state", "in_flight")),
            completed: counter(DUPLICATES, with("state", "completed")),
            store_errors: StoreOp::ALL
                .map(|op| counter(STORE_ERRORS, with("operation", op.label()))),
            handler: CLASSES.map(|c| counter(HANDLER, with("class", c))),
            lease_lost: counter(LEASE_LOST, labels()),
            rejected: RwLock::new(Vec::new()),
            body_size: histogram(BODY_SIZE),
            verify: histogram(VERIFY_DURATION),
            claim: histogram(CLAIM_DURATION),
            handler_time: histogram(HANDLER_DURATION),
        }
    }

    fn rejected(&self, reason: &'static str, route: &Arc<str>) {
        let read = self.rejected.read().unwrap_or_else(|e| e.into_inner());
        if let Some((_, c)) = read.iter().find(|(r, _)| *r == reason) {
            c.increment(1);
            return;
        }
        drop(read);
        let mut write = self.rejected.write().unwrap_or_else(|e| e.into_inner());
        if let Some((_, c)) = write.iter().find(|(r, _)| *r == reason) {
            c.increment(1);
            return;
        }
        let key = metrics::Key::from_parts(
            REJECTED,
            vec![
                metrics::Label::from_static_parts("scheme", self.scheme),
                metrics::Label::new("route", metrics::SharedString::from(Arc::clone(route))),
                metrics::Label::from_static_parts("reason", reason),
            ],
        );
        let counter = metrics::with_recorder(|r| {
            r.register_counter(
                &key,
                &metrics::Metadata::new(module_path!(), metrics::Level::INFO, None),
            )
        });
        counter.increment(1);
        write.push((reason, counter));
    }
}

/// Whether two scheme names are the same: by address first (a verifier
/// reports its one `&'static str`, so a delivery's signals nearly always
/// find it so), by content otherwise. The content alone cost a `memcmp` call
/// per signal, five a delivery.
#[cfg(any(feature = "metrics", test))]
fn same_scheme(a: &'static str, b: &'static str) -> bool {
    std::ptr::eq(a, b) || a == b
}

/// What the pipeline reports; every method is a no-op without the `metrics`
/// feature.
impl Signals {
    pub(crate) fn new(route: &str) -> Self {
        #[cfg(not(feature = "metrics"))]
        let _ = route;
        Self {
            #[cfg(feature = "metrics")]
            route: Arc::from(route),
            #[cfg(feature = "metrics")]
            schemes: RwLock::new(Vec::new()),
            #[cfg(feature = "metrics")]
            first: std::sync::OnceLock::new(),
        }
    }

    /// Runs `f` with the scheme's handles.
    #[cfg(feature = "metrics")]
    fn with(&self, scheme: &'static str, f: impl FnOnce(&SchemeHandles)) {
        match self.first.get() {
            Some(first) if same_scheme(first.scheme, scheme) => f(first),
            _ => f(&self.handles(scheme)),
        }
    }

    #[cfg(feature = "metrics")]
    fn handles(&self, scheme: &'static str) -> Arc<SchemeHandles> {
        {
            let read = self.schemes.read().unwrap_or_else(|e| e.into_inner());
            if let Some(h) = read.iter().find(|h| same_scheme(h.scheme, scheme)) {
                return Arc::clone(h);
            }
        }
        let mut write = self.schemes.write().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = write.iter().find(|h| same_scheme(h.scheme, scheme)) {
            return Arc::clone(h);
        }
        let handles = Arc::new(SchemeHandles::new(scheme, &self.route));
        write.push(Arc::clone(&handles));
        let _ = self.first.set(Arc::clone(&handles));
        handles
    }

    /// A request reached the pipeline.
    pub(crate) fn received(&self, scheme: &'static str) {
        #[cfg(feature = "metrics")]
        self.with(scheme, |h| h.received.increment(1));
        #[cfg(not(feature = "metrics"))]
        let _ = scheme;
    }

    /// A body was read in full.
    pub(crate) fn body_read(&self, scheme: &'static str, len: usize) {
        #[cfg(feature = "metrics")]
        self.with(scheme, |h| h.body_size.record(len as f64));
        #[cfg(not(feature = "metrics"))]
        let _ = (scheme, len);
    }

    /// A delivery verified.
    pub(crate) fn verified(&self, scheme: &'static str, key: &MatchedKey, took: Duration) {
        #[cfg(feature = "metrics")]
        {
            let index = KEYS.iter().position(|k| *k == key_label(key)).unwrap_or(0);
            self.with(scheme, |h| {
                h.verified[index].increment(1);
                h.verify.record(took);
            });
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (scheme, key, took);
    }

    /// Verification took `took` and failed (the rejection is counted by
    /// [`rejected`](Self::rejected)).
    pub(crate) fn verify_failed(&self, scheme: &'static str, took: Duration) {
        #[cfg(feature = "metrics")]
        self.with(scheme, |h| h.verify.record(took));
        #[cfg(not(feature = "metrics"))]
        let _ = (scheme, took);
    }

    /// The claim answered after `took`.
    pub(crate) fn claimed(&self, scheme: &'static str, took: Duration) {
        #[cfg(feature = "metrics")]
        self.with(scheme, |h| h.claim.record(took));
        #[cfg(not(feature = "metrics"))]
        let _ = (scheme, took);
    }

    /// The pipeline answered `rejection` without running the handler.
    pub(crate) fn rejected(&self, scheme: &'static str, rejection: &Rejection) {
        #[cfg(feature = "metrics")]
        {
            self.with(scheme, |h| match rejection {
                Rejection::Duplicate => h.completed.increment(1),
                Rejection::InFlight { .. } => h.in_flight.increment(1),
                Rejection::HandlerPanicked => {}
                other => h.rejected(other.kind(), &self.route),
            });
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (scheme, rejection);
    }

    /// A store operation failed.
    pub(crate) fn store_error(&self, scheme: &'static str, op: StoreOp) {
        #[cfg(feature = "metrics")]
        {
            let index = StoreOp::ALL.iter().position(|o| *o == op).unwrap_or(0);
            self.with(scheme, |h| h.store_errors[index].increment(1));
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (scheme, op);
    }

    /// A claim's settlement was refused: another attempt took it over.
    pub(crate) fn lease_lost(&self, scheme: &'static str) {
        #[cfg(feature = "metrics")]
        self.with(scheme, |h| h.lease_lost.increment(1));
        #[cfg(not(feature = "metrics"))]
        let _ = scheme;
    }

    /// The handler answered `status` (`None`: it panicked) after `took`.
    pub(crate) fn handled(&self, scheme: &'static str, status: Option<u16>, took: Duration) {
        #[cfg(feature = "metrics")]
        {
            let class = status.map_or("panic", status_class);
            let index = CLASSES.iter().position(|c| *c == class).unwrap_or(4);
            self.with(scheme, |h| {
                h.handler[index].increment(1);
                h.handler_time.record(took);
            });
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (scheme, status, took);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_bounded_enumerations() {
        assert_eq!(key_label(&MatchedKey::Secret(0)), "primary");
        assert_eq!(key_label(&MatchedKey::Secret(3)), "rotated");
        assert_eq!(key_label(&MatchedKey::PublicKey(0)), "primary");
        assert_eq!(
            key_label(&MatchedKey::Lookup {
                key_id: "tenant_secret_id".into(),
                index: 0
            }),
            "lookup"
        );
        assert_eq!(status_class(204), "2xx");
        assert_eq!(status_class(422), "4xx");
        assert_eq!(status_class(503), "5xx");
    }

    #[test]
    fn a_scheme_is_the_same_by_address_or_by_content() {
        let literal: &'static str = "stripe";
        let elsewhere: &'static str = String::from("stripe").leak();
        assert!(same_scheme(literal, literal));
        assert!(same_scheme(literal, elsewhere));
        assert!(!same_scheme(literal, "github"));
        // The same bytes, a shorter name: not the same.
        assert!(!same_scheme(literal, &literal[..5]));
    }
}
