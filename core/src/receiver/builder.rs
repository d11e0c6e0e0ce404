//! [`ReceiverBuilder`]: the receiver's configuration, and the warning when
//! two routes share a store and a namespace.

use std::fmt;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::Response;

use super::{
    DEFAULT_BODY_LIMIT, DEFAULT_BODY_TIMEOUT, DEFAULT_COMPLETE_RETRY,
    DEFAULT_IN_FLIGHT_RETRY_AFTER, DEFAULT_LEASE, DEFAULT_NAMESPACE, DEFAULT_RETENTION,
    DEFAULT_STORE_RETRY_AFTER, Inner, Receiver, StoreFailure,
};
use crate::dedup::DedupStore;
use crate::key::json_pointer_id;
use crate::signals::Signals;
use crate::{Rejection, RequestVerifier, Verified};

/// Configures a [`Receiver`].
#[must_use]
pub struct ReceiverBuilder {
    inner: Inner,
    /// `inbox_status` / `inbox_keep_headers`, applied at build whatever the
    /// order of the calls.
    inbox_settings: crate::inbox::accept::InboxSettings,
    /// No store was chosen: [`build`](ReceiverBuilder::build) gives the
    /// receiver an in-process store (feature `memory`).
    default_store: bool,
    /// Where in the source the receiver is built (`Receiver::new`/`builder`,
    /// or actix's `Webhooks::new`, which track their caller). Read only by
    /// the in-process store's sharing (feature `memory`).
    #[cfg_attr(not(feature = "memory"), allow(dead_code))]
    site: &'static std::panic::Location<'static>,
    /// Set by [`share_default_store`](ReceiverBuilder::share_default_store).
    share_group: Option<u64>,
    /// Set by [`route_label`](ReceiverBuilder::route_label).
    route_label: Option<String>,
    /// Set by [`allow_retention_below_retry_window`](ReceiverBuilder::allow_retention_below_retry_window).
    short_retention: bool,
    /// Set by [`response_budget`](ReceiverBuilder::response_budget), resolved at build.
    budget: Option<super::ResponseBudget>,
}

impl fmt::Debug for ReceiverBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReceiverBuilder").finish_non_exhaustive()
    }
}

impl ReceiverBuilder {
    pub(super) fn new(
        verifier: Arc<dyn RequestVerifier>,
        site: &'static std::panic::Location<'static>,
    ) -> Self {
        Self {
            default_store: true,
            site,
            share_group: None,
            route_label: None,
            short_retention: false,
            budget: None,
            inner: Inner {
                verifier,
                store: None,
                body_limit: DEFAULT_BODY_LIMIT,
                body_timeout: DEFAULT_BODY_TIMEOUT,
                lease: DEFAULT_LEASE,
                retention: DEFAULT_RETENTION,
                namespace: DEFAULT_NAMESPACE.to_owned(),
                key_fn: None,
                store_failure: StoreFailure::Closed,
                store_retry_after: DEFAULT_STORE_RETRY_AFTER,
                in_flight_retry_after: DEFAULT_IN_FLIGHT_RETRY_AFTER,
                complete_retry: DEFAULT_COMPLETE_RETRY,
                on_reject: None,
                clock: Arc::new(SystemTime::now),
                inbox: None,
                budget: None,
                signals: Arc::new(Signals::new(DEFAULT_NAMESPACE)),
                pending: Arc::default(),
            },
            inbox_settings: crate::inbox::accept::InboxSettings::default(),
        }
    }

    /// The largest body accepted, in bytes (default 1 MiB).
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.inner.body_limit = bytes;
        self
    }

    /// The longest time reading the body may take (default 30 s); a body
    /// that has not fully arrived by then (a stalled or trickled upload, a
    /// `Content-Length` larger than what is sent) is answered `408`.
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.inner.body_timeout = timeout;
        self
    }

    /// The dedup store (default: an in-process [`MemoryStore`] of the
    /// receiver's own, or shared with its copies, see
    /// [`share_default_store`](Self::share_default_store); none without the
    /// `memory` feature).
    #[cfg_attr(
        feature = "memory",
        doc = "\n\n[`MemoryStore`]: crate::dedup::MemoryStore"
    )]
    #[cfg_attr(
        not(feature = "memory"),
        doc = "\n\n[`MemoryStore`]: https://docs.rs/webhooks-core/latest/webhooks_core/dedup/struct.MemoryStore.html"
    )]
    pub fn store(mut self, store: impl DedupStore) -> Self {
        self.inner.store = Some(Arc::new(store));
        self.default_store = false;
        self
    }

    /// The dedup store, chosen at run time.
    pub fn shared_store(mut self, store: Arc<dyn DedupStore>) -> Self {
        self.inner.store = Some(store);
        self.default_store = false;
        self
    }

    /// Shares the default in-process store (when no store is set) with the
    /// other receivers of this process built at the same place in the source
    /// (the same `Receiver::builder` or `Receiver::new` call), with the same
    /// [`namespace`](Self::namespace) and the same `group`, while one of them
    /// lives.
    ///
    /// For frameworks that build the app once per worker thread: actix-web
    /// runs `HttpServer::new`'s factory on each worker, and a store per
    /// receiver would let two retries of one delivery on two workers both
    /// run. actix-webhooks' `Webhooks::new` does this with the actix
    /// `System`'s id as the group (the workers of one server; two tests, two
    /// systems, keep apart); call it yourself when you build the receiver
    /// inside the factory, or build it once outside and clone it in.
    ///
    /// ```
    /// use webhooks_core::{Receiver, scheme::StandardWebhooks};
    ///
    /// let verifier = StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
    /// // What a factory run on each of 4 workers builds: one store between them.
    /// let workers: Vec<Receiver> = (0..4)
    ///     .map(|_| Receiver::builder(verifier.clone()).share_default_store(1).build())
    ///     .collect();
    /// # Ok::<(), webhooks_core::ConfigError>(())
    /// ```
    pub fn share_default_store(mut self, group: u64) -> Self {
        self.share_group = Some(group);
        self
    }

    /// No deduplication: every verified delivery runs the handler.
    pub fn no_dedup(mut self) -> Self {
        self.inner.store = None;
        self.default_store = false;
        self
    }

    /// How long one attempt holds a delivery before a retry may take over
    /// when it stops renewing (default 60 s). While the handler runs the
    /// lease is renewed every third of it, so a slow handler keeps its
    /// delivery; the lease bounds how long a crashed process blocks retries.
    /// A handler that never returns keeps its delivery: bound handlers with a
    /// timeout (dropping the request future releases the claim).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.inner.lease = lease;
        self
    }

    /// How long a completed id is remembered (default 7 days).
    ///
    /// It must outlast the provider's retry window: a retry arriving after
    /// its id was forgotten runs the handler again. A retention shorter than
    /// the scheme's documented window plus a day
    /// ([`registry::retention_floor`](crate::scheme::registry::retention_floor):
    /// 4 days for Stripe) is refused when the receiver is built, unless
    /// [`allow_retention_below_retry_window`](Self::allow_retention_below_retry_window).
    pub fn retention(mut self, retention: Duration) -> Self {
        self.inner.retention = retention;
        self
    }

    /// Builds the receiver even when its [`retention`](Self::retention) is
    /// shorter than its provider's retry window plus a margin. For tests,
    /// and for deployments that know their provider retries for less than
    /// documented (a late retry of a forgotten id runs the handler again).
    pub fn allow_retention_below_retry_window(mut self) -> Self {
        self.short_retention = true;
        self
    }

    /// The prefix of every dedup key (default `webhooks`); give each route that
    /// shares a store its own. Deliveries identified by a
    /// [replay token](crate::Identity::ReplayToken) (Mailgun) are claimed
    /// under [`REPLAY_NAMESPACE`] instead, so that a token seen on one route
    /// is refused on every other: use one shared store for all the routes of
    /// a Mailgun account.
    /// Two receivers that share both the store and
    /// the namespace, but not the scheme or the
    /// [`route_label`](Self::route_label), are logged at `warn` when built:
    /// the deliveries of one can be taken for duplicates of the other's.
    ///
    /// [`REPLAY_NAMESPACE`]: super::REPLAY_NAMESPACE
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.inner.namespace = namespace.into();
        self
    }

    /// The `route` label of the receiver's metrics (default: the
    /// [`namespace`](Self::namespace)). Set it when routes are told apart by
    /// something else than their namespace (a namespace shared on purpose,
    /// or a longer one than you want in a label); keep it bounded: one value
    /// per route you configure, never an id.
    pub fn route_label(mut self, label: impl Into<String>) -> Self {
        self.route_label = Some(label.into());
        self
    }

    /// Derives the dedup id from the verified delivery (for schemes without an
    /// id, or to deduplicate on an event id in the body). `None` means: do not
    /// deduplicate this delivery. Not used for deliveries identified by a
    /// [replay token](crate::Identity::ReplayToken) (Mailgun): their token is
    /// claimed under [`REPLAY_NAMESPACE`] whatever this function says.
    ///
    /// [`REPLAY_NAMESPACE`]: super::REPLAY_NAMESPACE
    pub fn dedup_key(
        mut self,
        f: impl Fn(&Verified, &[u8]) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.inner.key_fn = Some(Arc::new(f));
        self
    }

    /// Deduplicates on a JSON field of the body, named by a JSON pointer
    /// (`"/id"`, `"/data/event_id"`); strings and numbers are used as is.
    pub fn dedup_key_json_pointer(self, pointer: impl Into<String>) -> Self {
        let pointer = pointer.into();
        self.dedup_key(move |_, body| json_pointer_id(body, &pointer))
    }

    /// What to do when the store is unreachable at claim (default: fail
    /// closed, 503). Deliveries identified by a
    /// [replay token](crate::Identity::ReplayToken) (Mailgun) always fail
    /// closed: the token is their only replay guard.
    pub fn on_store_failure(mut self, policy: StoreFailure) -> Self {
        self.inner.store_failure = policy;
        self
    }

    /// The `Retry-After` sent with a 503 when the store is unreachable (default 5 s).
    pub fn store_retry_after(mut self, after: Duration) -> Self {
        self.inner.store_retry_after = after;
        self
    }

    /// The longest `Retry-After` sent with a 409 while another attempt holds
    /// the delivery (default 5 s; the remaining lease when that is shorter;
    /// never under 1 s).
    pub fn in_flight_retry_after(mut self, after: Duration) -> Self {
        self.inner.in_flight_retry_after = after;
        self
    }

    /// How long a `complete` that failed after the handler's 2xx is retried
    /// in the background, with backoff from 100 ms doubling up to 10 s
    /// (default 5 minutes; zero: one try only).
    pub fn complete_retry(mut self, window: Duration) -> Self {
        self.inner.complete_retry = window;
        self
    }

    /// Shapes the body and headers of every rejection's response, including
    /// the extractors' 422/500. The status, `Retry-After` and
    /// `webhook-duplicate` stay the library's: they are set after `f` runs,
    /// whatever it returned.
    pub fn on_reject(
        mut self,
        f: impl Fn(&Rejection) -> Response<Bytes> + Send + Sync + 'static,
    ) -> Self {
        self.inner.on_reject = Some(Arc::new(f));
        self
    }

    /// The clock used for timestamp tolerance (default `SystemTime::now`).
    pub fn clock(mut self, clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.inner.clock = Arc::new(clock);
        self
    }

    /// Inbox mode: each verified delivery is stored in `inbox` (its dedup
    /// key unique: a stored delivery's retry is answered as a duplicate), the
    /// sender answered `202` once it is stored, and [`Worker`](crate::inbox::Worker)s
    /// run the handler; the route's own handler is not called. Store down:
    /// `503` + `Retry-After` ([`store_retry_after`](Self::store_retry_after)),
    /// never fail-open. The dedup store is not used.
    pub fn inbox(mut self, inbox: Arc<dyn crate::inbox::Inbox>) -> Self {
        self.inner.inbox = Some(crate::inbox::accept::InboxAccept::new(inbox));
        self
    }

    /// A response budget (issue 34): the handler runs inline, and a delivery
    /// whose handler has not answered by the provider's deadline minus a
    /// margin is stored in the budget's inbox and answered `2xx`, the
    /// handler running on; if it fails, or its process dies, a
    /// [`Worker`](crate::inbox::Worker) built with
    /// [`claim_on`](crate::inbox::WorkerBuilder::claim_on) this receiver's
    /// dedup store runs it. The dedup claim decides who runs it, so it runs
    /// to success once (see [`ResponseBudget`](super::ResponseBudget)).
    ///
    /// Needs a dedup store shared by the receiver and the workers, that
    /// outlives the process (Redis, SQL; an explicit
    /// [`store`](Self::store) — the default in-process store is refused,
    /// since a dead process would take its claims with it), and no
    /// [`inbox`](Self::inbox) mode. Call the handler through
    /// [`Receiver::process_within_budget`](super::Receiver::process_within_budget)
    /// or [`Admission::run_within_budget`](super::Admission::run_within_budget).
    pub fn response_budget(mut self, budget: super::ResponseBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The status answered once a delivery is stored in the inbox (default
    /// `202 Accepted`). Needs [`inbox`](Self::inbox), called before or after.
    pub fn inbox_status(mut self, status: http::StatusCode) -> Self {
        self.inbox_settings.status = Some(status);
        self
    }

    /// Request headers stored with each inbox event and handed to the worker
    /// (default none). Needs [`inbox`](Self::inbox), called before or after.
    pub fn inbox_keep_headers(mut self, names: impl IntoIterator<Item = http::HeaderName>) -> Self {
        self.inbox_settings.keep_headers = Some(names.into_iter().collect());
        self
    }

    /// The pipeline.
    ///
    /// # Panics
    ///
    /// When [`inbox_status`](Self::inbox_status) or
    /// [`inbox_keep_headers`](Self::inbox_keep_headers) was set without an
    /// [`inbox`](Self::inbox): a configuration that would silently do
    /// nothing; and on every error of [`try_build`](Self::try_build).
    #[track_caller]
    pub fn build(self) -> Receiver {
        match self.try_build() {
            Ok(receiver) => receiver,
            Err(error) => panic!("ReceiverBuilder: {error}"),
        }
    }

    /// The pipeline, or why this configuration must not run.
    ///
    /// ```
    /// use std::time::Duration;
    /// use webhooks_core::{ConfigError, Receiver, scheme::Stripe};
    ///
    /// let stripe = Stripe::new("whsec_test_secret")?;
    /// // Stripe retries for 3 days: a day of dedup memory would run a late retry again.
    /// let short = Receiver::builder(stripe.clone()).retention(Duration::from_secs(86_400));
    /// assert!(matches!(short.try_build(), Err(ConfigError::RetentionBelowRetryWindow { .. })));
    /// let known = Receiver::builder(stripe)
    ///     .retention(Duration::from_secs(86_400))
    ///     .allow_retention_below_retry_window();
    /// assert!(known.try_build().is_ok());
    /// # Ok::<(), ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`ConfigError::RetentionBelowRetryWindow`](crate::ConfigError::RetentionBelowRetryWindow) when the dedup
    /// [`retention`](Self::retention) is shorter than the scheme's
    /// [`retention_floor`](crate::scheme::registry::retention_floor),
    /// without [`allow_retention_below_retry_window`](Self::allow_retention_below_retry_window).
    ///
    /// # Panics
    ///
    /// As [`build`](Self::build), for an inbox setting without an inbox.
    pub fn try_build(mut self) -> Result<Receiver, crate::ConfigError> {
        let scheme = self.inner.verifier.scheme();
        // The dedup store's retention (in inbox mode the inbox keeps the
        // completed events: its own retention, checked where it is set).
        let deduplicated =
            self.inner.inbox.is_none() && (self.inner.store.is_some() || self.default_store);
        if deduplicated
            && !self.short_retention
            && let Some(floor) = crate::scheme::registry::retention_floor(scheme)
            && self.inner.retention < floor
        {
            return Err(crate::ConfigError::RetentionBelowRetryWindow {
                scheme,
                retention_secs: self.inner.retention.as_secs(),
                floor_secs: floor.as_secs(),
            });
        }
        match &mut self.inner.inbox {
            Some(inbox) => self.inbox_settings.apply(inbox),
            None => assert!(
                self.inbox_settings.is_empty(),
                "ReceiverBuilder: inbox_status / inbox_keep_headers need an inbox (ReceiverBuilder::inbox)"
            ),
        }
        if self.default_store {
            // Without the `memory` feature there is no default store: no dedup.
            #[cfg(feature = "memory")]
            {
                let store = match self.share_group {
                    Some(group) => crate::dedup::MemoryStore::process_default(
                        &self.inner.namespace,
                        self.site,
                        group,
                    ),
                    None => crate::dedup::MemoryStore::new(),
                };
                self.inner.store = Some(Arc::new(store));
            }
        }
        let route = self.route_label.as_deref().unwrap_or(&self.inner.namespace);
        if let Some(budget) = self.budget.take() {
            if self.inner.inbox.is_some() {
                return Err(crate::ConfigError::Setting(
                    "response_budget: not in inbox mode (there, no handler runs inline)",
                ));
            }
            if self.default_store || self.inner.store.is_none() {
                return Err(crate::ConfigError::Setting(
                    "response_budget: needs a dedup store shared with the workers (ReceiverBuilder::store)",
                ));
            }
            self.inner.budget = Some(budget.resolve(scheme, &self.inner.namespace)?);
        }
        if let Some(store) = &self.inner.store {
            let scheme = self.inner.verifier.scheme();
            if let Some(other) = note_store_user(store, &self.inner.namespace, scheme, route) {
                tracing::warn!(
                    namespace = %self.inner.namespace,
                    scheme,
                    route,
                    other_scheme = other.0,
                    other_route = %other.1,
                    "two receivers share the dedup store and the namespace: a delivery to one \
                     can be taken for a duplicate of the other's; give each route its own \
                     namespace (ReceiverBuilder::namespace)"
                );
            }
        }
        self.inner.signals = Arc::new(Signals::new(route));
        Ok(Receiver {
            inner: Arc::new(self.inner),
        })
    }
}

/// The receivers built with each explicit store, while the store lives: its
/// address, the namespace, the scheme and the route label.
type StoreUser = (Weak<dyn DedupStore>, String, &'static str, String);
static STORE_USERS: std::sync::Mutex<Vec<StoreUser>> = std::sync::Mutex::new(Vec::new());

/// Records a receiver built on `store`; returns the scheme and route of a
/// live receiver already on the same store and namespace whose scheme or
/// route differ (the same scheme and route are copies of one route: actix
/// workers, tests).
fn note_store_user(
    store: &Arc<dyn DedupStore>,
    namespace: &str,
    scheme: &'static str,
    route: &str,
) -> Option<(&'static str, String)> {
    let mut users = STORE_USERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    users.retain(|(store, ..)| store.strong_count() > 0);
    let clash = users
        .iter()
        .find(|(other, ns, other_scheme, other_route)| {
            std::ptr::addr_eq(other.as_ptr(), Arc::as_ptr(store))
                && ns == namespace
                && (*other_scheme != scheme || other_route != route)
        })
        .map(|(_, _, other_scheme, other_route)| (*other_scheme, other_route.clone()));
    users.push((
        Arc::downgrade(store),
        namespace.to_owned(),
        scheme,
        route.to_owned(),
    ));
    clash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharing_a_store_and_namespace_across_routes_is_noted() {
        let store: Arc<dyn DedupStore> = Arc::new(crate::dedup::MemoryStore::new());
        let other_store: Arc<dyn DedupStore> = Arc::new(crate::dedup::MemoryStore::new());
        assert_eq!(
            note_store_user(&store, "ns-note", "stripe", "ns-note"),
            None
        );
        // A copy of the same route (an actix worker, a test): nothing to say.
        assert_eq!(
            note_store_user(&store, "ns-note", "stripe", "ns-note"),
            None
        );
        // Another scheme, or another route label, on the same store and namespace.
        assert_eq!(
            note_store_user(&store, "ns-note", "github", "ns-note"),
            Some(("stripe", "ns-note".to_owned()))
        );
        assert!(note_store_user(&store, "ns-note", "stripe", "payments").is_some());
        // Another namespace or another store is fine.
        assert_eq!(note_store_user(&store, "ns-note-2", "github", "x"), None);
        assert_eq!(
            note_store_user(&other_store, "ns-note", "github", "y"),
            None
        );
        // A store that is gone is forgotten.
        drop(store);
        let again: Arc<dyn DedupStore> = Arc::new(crate::dedup::MemoryStore::new());
        assert_eq!(note_store_user(&again, "ns-note", "github", "z"), None);
    }
}
