//! The inbox's metrics, through the [`metrics`](https://docs.rs/metrics) facade
//! (with the `metrics` feature; without it every call is a no-op).
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `webhooks_inbox_accepted_total` | counter | route, outcome | accepts: `stored`, `duplicate`, `unavailable`, `refused`; `handed_over` (a [response budget](crate::ResponseBudget)'s late delivery stored); `route` is the receiver's namespace |
//! | `webhooks_inbox_attempts_total` | counter | outcome | worker attempts: `completed`, `unknown_type` (a type the handler's `Event<E>` does not list: completed without running it), `retried`, `dead_lettered`, `handed_back`, `stale` (refused: the lease was lost; with a transactional handler, its writes were rolled back) |
//! | `webhooks_inbox_handler_duration_seconds` | histogram | | one handler run |
//! | `webhooks_inbox_depth` | gauge | | pending events (due now or later) |
//! | `webhooks_inbox_due` | gauge | | pending events due now |
//! | `webhooks_inbox_oldest_due_age_seconds` | gauge | | how long the oldest due event has waited |
//! | `webhooks_inbox_in_flight` | gauge | | leased events |
//! | `webhooks_inbox_dead` | gauge | | dead letters |
//! | `webhooks_inbox_paused` | gauge | | 1 while processing is paused ([`Inbox::set_paused`]), else 0 |
//! | `webhooks_inbox_permits_denied_total` | counter | full | permits a [limit](crate::inbox::gates) refused: `concurrency` or `rate` (the event is deferred, its attempt not counted) |
//!
//! Pausing or resuming logs an `INFO` event (`inbox processing paused` /
//! `inbox processing resumed`, with `changed`), and sets the paused gauge
//! in the process that did it.
//!
//! The gauges are read from the store by [`spawn_gauges`] (one task per
//! inbox, not per worker). Labels are small enumerations: never ids or keys.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Inbox;

/// `webhooks_inbox_accepted_total`.
pub const ACCEPTED: &str = "webhooks_inbox_accepted_total";
/// `webhooks_inbox_attempts_total`.
pub const ATTEMPTS: &str = "webhooks_inbox_attempts_total";
/// `webhooks_inbox_handler_duration_seconds`.
pub const HANDLER_DURATION: &str = "webhooks_inbox_handler_duration_seconds";
/// `webhooks_inbox_depth`.
pub const DEPTH: &str = "webhooks_inbox_depth";
/// `webhooks_inbox_due`.
pub const DUE: &str = "webhooks_inbox_due";
/// `webhooks_inbox_oldest_due_age_seconds`.
pub const OLDEST_DUE_AGE: &str = "webhooks_inbox_oldest_due_age_seconds";
/// `webhooks_inbox_in_flight`.
pub const IN_FLIGHT: &str = "webhooks_inbox_in_flight";
/// `webhooks_inbox_dead`.
pub const DEAD: &str = "webhooks_inbox_dead";
/// `webhooks_inbox_paused`.
pub const PAUSED: &str = "webhooks_inbox_paused";
/// `webhooks_inbox_permits_denied_total`.
pub const PERMITS_DENIED: &str = "webhooks_inbox_permits_denied_total";

/// Logs a pause or resume (`changed`: the flag was not already so) and
/// sets the paused gauge.
#[cfg_attr(
    not(any(
        feature = "postgres",
        feature = "mysql",
        feature = "sqlite",
        feature = "redis"
    )),
    allow(dead_code, reason = "called by the backends, whose features are off")
)]
pub(crate) fn pause_set(paused: bool, changed: bool) {
    if paused {
        tracing::info!(changed, "inbox processing paused");
    } else {
        tracing::info!(changed, "inbox processing resumed");
    }
    #[cfg(feature = "metrics")]
    metrics::gauge!(PAUSED).set(if paused { 1.0 } else { 0.0 });
}

/// A selector paused or resumed (the selector is not logged as a label:
/// it is in the action log).
#[cfg_attr(
    not(any(
        feature = "postgres",
        feature = "mysql",
        feature = "sqlite",
        feature = "redis"
    )),
    allow(dead_code, reason = "called by the backends, whose features are off")
)]
pub(crate) fn gate_set(paused: bool, changed: bool) {
    if paused {
        tracing::info!(changed, "inbox events of a selector paused");
    } else {
        tracing::info!(changed, "inbox events of a selector resumed");
    }
}

/// Counts one permit refused, by what was full (`concurrency` or `rate`).
pub(crate) fn permit_denied(full: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(PERMITS_DENIED, "full" => full).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = full;
}

/// Counts one accept on `route` by its outcome.
pub(crate) fn accepted(route: &str, outcome: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(ACCEPTED, "route" => route.to_owned(), "outcome" => outcome).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (route, outcome);
}

/// Counts one settled attempt by its outcome.
pub(crate) fn attempt(outcome: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(ATTEMPTS, "outcome" => outcome).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = outcome;
}

/// Records one handler run.
pub(crate) fn handler_ran(started: Instant) {
    #[cfg(feature = "metrics")]
    metrics::histogram!(HANDLER_DURATION).record(started.elapsed());
    #[cfg(not(feature = "metrics"))]
    let _ = started;
}

/// A background task publishing the inbox gauges; dropping it stops it.
#[derive(Debug)]
#[must_use = "dropping the GaugeTask stops it"]
pub struct GaugeTask {
    handle: tokio::task::JoinHandle<()>,
}

impl Drop for GaugeTask {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

/// Reads [`Inbox::stats`] every `interval` and publishes the gauges above
/// (store errors are logged and skipped).
///
/// # Panics
///
/// Outside a Tokio runtime.
pub fn spawn_gauges(inbox: Arc<dyn Inbox>, interval: Duration) -> GaugeTask {
    let handle = tokio::spawn(async move {
        let mut ticks = tokio::time::interval(interval.max(Duration::from_millis(10)));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            match inbox.stats().await {
                Ok(stats) => {
                    #[cfg(feature = "metrics")]
                    {
                        #[allow(clippy::cast_precision_loss, reason = "gauges are f64")]
                        let count = |n: u64| n as f64;
                        metrics::gauge!(DEPTH).set(count(stats.pending));
                        metrics::gauge!(DUE).set(count(stats.due));
                        metrics::gauge!(IN_FLIGHT).set(count(stats.in_flight));
                        metrics::gauge!(DEAD).set(count(stats.dead));
                        metrics::gauge!(PAUSED).set(if stats.paused { 1.0 } else { 0.0 });
                        metrics::gauge!(OLDEST_DUE_AGE)
                            .set(stats.oldest_due_age.map_or(0.0, |age| age.as_secs_f64()));
                    }
                    #[cfg(not(feature = "metrics"))]
                    let _ = stats;
                }
                Err(error) => tracing::warn!(error = %error, "reading the inbox stats failed"),
            }
        }
    });
    GaugeTask { handle }
}
