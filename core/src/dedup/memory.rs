//! The in-process [`DedupStore`], backed by a moka cache.

use std::fmt;
use std::time::{Duration, Instant};

use moka::Expiry;
use moka::ops::compute::{CompResult, Op};
use moka::sync::Cache;

use super::{Claim, ClaimToken, DedupStore, StoreError, Transition};

/// Default number of keys kept before moka starts evicting.
/// (Re-exported as `DEFAULT_MEMORY_CAPACITY`.)
pub const DEFAULT_CAPACITY: u64 = 1_000_000;

#[derive(Clone, Copy, Debug)]
enum State {
    InFlight { token: ClaimToken, until: Instant },
    Completed { until: Instant },
}

impl State {
    fn until(self) -> Instant {
        match self {
            Self::InFlight { until, .. } | Self::Completed { until } => until,
        }
    }
}

/// Each entry lives exactly as long as its lease or its retention.
struct PerEntry;

impl Expiry<String, State> for PerEntry {
    fn expire_after_create(&self, _: &String, value: &State, now: Instant) -> Option<Duration> {
        Some(value.until().saturating_duration_since(now))
    }

    fn expire_after_update(
        &self,
        _: &String,
        value: &State,
        now: Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        Some(value.until().saturating_duration_since(now))
    }
}

/// An in-process [`DedupStore`] (moka): the default, and right for one process.
///
/// Each key expires on its own schedule (the lease while in flight, the
/// retention once completed), and every operation is an atomic per-key compute.
///
/// **Limits.** It deduplicates within one process only: two instances of a
/// service each have their own memory, so use a shared backend (Redis, SQL) as
/// soon as more than one instance receives webhooks. It holds at most
/// `capacity` keys (default [`DEFAULT_CAPACITY`]); under pressure moka evicts
/// entries, and an evicted completed key would be processed again if its
/// sender retried. A restart forgets everything.
///
/// **Memory.** About 550 bytes per remembered delivery with the pipeline's
/// keys (measured by `cargo run --release -p webhooks-core --example
/// memory_footprint`): 100,000 deliveries ≈ 59 MiB, the default capacity of
/// 1,000,000 ≈ 525 MiB at most. Size the capacity to the deliveries you
/// receive within the retention period.
///
/// ```
/// use webhooks_core::dedup::MemoryStore;
/// let store = MemoryStore::with_capacity(100_000);
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    cache: Cache<String, State>,
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("entries", &self.cache.entry_count())
            .finish()
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// A store holding up to [`DEFAULT_CAPACITY`] keys.
    #[must_use]
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }

    /// A store holding up to `capacity` keys.
    #[must_use]
    pub fn with_capacity(capacity: u64) -> Self {
        Self {
            cache: Cache::builder()
                .max_capacity(capacity)
                .expire_after(PerEntry)
                .build(),
        }
    }

    /// Replaces the key's live in-flight state held by `token` with `next()`
    /// (`None` removes it), atomically.
    fn token_update(
        &self,
        key: &str,
        token: ClaimToken,
        next: impl FnOnce() -> Option<State> + Send,
    ) -> Transition {
        let now = Instant::now();
        let result = self.cache.entry_by_ref(key).and_compute_with(|entry| {
            match entry.map(moka::Entry::into_value) {
                Some(State::InFlight { token: held, until }) if held == token && until > now => {
                    match next() {
                        Some(state) => Op::Put(state),
                        None => Op::Remove,
                    }
                }
                _ => Op::Nop,
            }
        });
        match result {
            CompResult::ReplacedWith(_) | CompResult::Removed(_) | CompResult::Inserted(_) => {
                Transition::Applied
            }
            CompResult::Unchanged(_) | CompResult::StillNone(_) => Transition::Stale,
        }
    }
}

#[async_trait::async_trait]
impl DedupStore for MemoryStore {
    async fn claim(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        let now = Instant::now();
        let result = self.cache.entry_by_ref(key).and_compute_with(|entry| {
            match entry.map(moka::Entry::into_value) {
                Some(state) if state.until() > now => Op::Nop,
                _ => Op::Put(State::InFlight {
                    token,
                    until: now + lease,
                }),
            }
        });
        Ok(match result {
            CompResult::Inserted(_) | CompResult::ReplacedWith(_) => Claim::Claimed,
            CompResult::Unchanged(entry) => match entry.into_value() {
                State::InFlight { until, .. } => Claim::InFlight {
                    retry_after: until.saturating_duration_since(now),
                },
                State::Completed { .. } => Claim::Completed,
            },
            CompResult::StillNone(_) | CompResult::Removed(_) => {
                return Err(StoreError::Protocol("claim left no entry".into()));
            }
        })
    }

    async fn complete(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
    ) -> Result<Transition, StoreError> {
        Ok(self.token_update(key, token, || {
            Some(State::Completed {
                until: Instant::now() + retention,
            })
        }))
    }

    async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, StoreError> {
        Ok(self.token_update(key, token, || None))
    }

    async fn extend(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Transition, StoreError> {
        Ok(self.token_update(key, token, || {
            Some(State::InFlight {
                token,
                until: Instant::now() + lease,
            })
        }))
    }
}
