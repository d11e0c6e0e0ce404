//! The in-process [`DedupStore`]: a sharded hash map with explicit eviction order.

use std::collections::VecDeque;
use std::fmt;
use std::hash::BuildHasher as _;
use std::num::NonZeroU64;

use foldhash::quality::RandomState;
use std::collections::HashMap;
use std::panic::Location;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use hashbrown::HashTable;
use std::time::{Duration, Instant};

use super::{Claim, ClaimToken, DedupStore, StoreError, Transition};

/// Default number of keys kept (re-exported as `DEFAULT_MEMORY_CAPACITY`).
pub const DEFAULT_CAPACITY: u64 = 1_000_000;

/// How long an in-flight claim is kept after its lease ran out (at least):
/// meanwhile another attempt may take it over, and the holder may still
/// complete or extend it as long as nobody did. Leases longer than this keep
/// their claims for one more lease.
const IN_FLIGHT_GRACE: Duration = Duration::from_secs(600);

/// Shards for large capacities (a power of two), so that threads rarely wait
/// for one another and a shard's hash table grows in small steps.
const MAX_SHARDS: usize = 64;
/// Keys per shard below which fewer shards are used: a small store keeps
/// exact capacity semantics in one shard.
const KEYS_PER_SHARD: u64 = 4096;

/// Milliseconds since the store was created: deadlines in 8 bytes.
type Ms = u64;

#[derive(Clone, Copy, Debug)]
enum State {
    /// Claimed by `token`; takeover-able from `lease_end`, dropped at
    /// `keep_until` (never zero: at least [`IN_FLIGHT_GRACE`] after the
    /// epoch; the compiler keeps the variant's tag in that zero, and a
    /// state takes 32 bytes instead of 40).
    InFlight {
        token: [u64; 2],
        lease_end: Ms,
        keep_until: NonZeroU64,
    },
    /// Processed; remembered until `until`.
    Completed { until: Ms },
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    state: State,
    /// Which entry of the shard's queues is this slot's current one: older
    /// queue entries for the same key are stale and skipped.
    stamp: u64,
}

/// What the store keeps of a key: two 64-bit hashes under the store's own
/// random seeds, foldhash's (the table's buckets and the shard) and
/// SipHash-1-3's (std's keyed hash, a pseudo-random function of the key
/// while its seed is secret). Two keys are one only if both agree: for
/// distinct keys, SipHash's alone collide with a probability of about
/// 2^-64 a pair, about 3 in 100 million over a full store of a million
/// keys, and foldhash's must collide too. The key itself is not kept: no
/// allocation per key, 16 bytes in place of a pointer, a length, a
/// reference count and the text.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Digest {
    hash: u64,
    check: u64,
}

/// A key in a shard's table.
struct Entry {
    digest: Digest,
    slot: Slot,
}

/// A key's place in one of a shard's queues, with the deadline its state had
/// when queued (so that a sweep finds nothing to do without a lookup).
struct Queued {
    digest: Digest,
    stamp: u64,
    deadline: Ms,
}

/// Sets `entry` (found by the caller's one lookup) to `state` under a fresh
/// stamp from `next_stamp`: what [`Shard::enqueue`] then takes (the key, the
/// new slot, the former one).
fn restamp(next_stamp: &mut u64, entry: &mut Entry, state: State) -> (Slot, Slot) {
    let previous = entry.slot;
    *next_stamp += 1;
    entry.slot = Slot {
        state,
        stamp: *next_stamp,
    };
    (entry.slot, previous)
}

/// One shard: the map, and two queues of its keys in the order they will be
/// dropped.
///
/// * `in_flight`: claims in the order they were made (or extended); the front
///   is dropped once past its `keep_until`.
/// * `completed`: completed keys, least recently completed or seen again
///   (a duplicate) first; the front is dropped once past its retention, or
///   first when the shard is full.
///
/// Each state change pushes the key with a fresh stamp; queue entries whose
/// stamp no longer matches the slot are skipped when they reach the front,
/// and a queue is compacted when stale entries outnumber live ones.
#[derive(Default)]
struct Shard {
    table: HashTable<Entry>,
    in_flight: VecDeque<Queued>,
    completed: VecDeque<Queued>,
    live_in_flight: usize,
    live_completed: usize,
    next_stamp: u64,
}

/// What a queue holds, to tell live entries from stale ones.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    InFlight,
    Completed,
}

impl State {
    fn kind(self) -> Kind {
        match self {
            Self::InFlight { .. } => Kind::InFlight,
            Self::Completed { .. } => Kind::Completed,
        }
    }

    /// When the state may be dropped.
    fn deadline(self) -> Ms {
        match self {
            Self::InFlight { keep_until, .. } => keep_until.get(),
            Self::Completed { until } => until,
        }
    }
}

/// Keys each shard has room for from the start (at most its capacity): the
/// store's first deliveries (32,768 with 64 shards) then cost no growth of
/// its tables and queues. Each growth reallocates and copies a shard's
/// table or queue; on glibc a block past 1 KiB also consolidates the
/// allocator's small free chunks first, which a per-request measure showed
/// to be about 1,000 instructions a delivery while the store filled. The
/// room is reserved, not written: about 90 bytes a key of address space,
/// resident only as keys arrive (the table's one control byte a key
/// excepted).
const INITIAL_KEYS_PER_SHARD: usize = 512;

impl Shard {
    /// A shard with room for its first keys (see [`INITIAL_KEYS_PER_SHARD`]).
    fn with_room(capacity: usize) -> Self {
        let room = capacity.min(INITIAL_KEYS_PER_SHARD);
        Self {
            table: HashTable::with_capacity(room),
            completed: VecDeque::with_capacity(room),
            ..Self::default()
        }
    }

    fn get(&self, digest: Digest) -> Option<&Entry> {
        self.table.find(digest.hash, |e| e.digest == digest)
    }

    /// Whether `entry` is the current queue entry of a live `kind` slot.
    fn is_current(&self, entry: &Queued, kind: Kind) -> bool {
        self.get(entry.digest)
            .is_some_and(|e| e.slot.stamp == entry.stamp && e.slot.state.kind() == kind)
    }

    fn queue(&mut self, kind: Kind) -> &mut VecDeque<Queued> {
        match kind {
            Kind::InFlight => &mut self.in_flight,
            Kind::Completed => &mut self.completed,
        }
    }

    fn live_mut(&mut self, kind: Kind) -> &mut usize {
        match kind {
            Kind::InFlight => &mut self.live_in_flight,
            Kind::Completed => &mut self.live_completed,
        }
    }

    /// Drops `previous`'s queue entry when it is its queue's last one (a
    /// claim completed, extended or released before any other claim of its
    /// shard, as most are): it would only be skipped as stale later, and
    /// the in-flight queue of a store whose claims complete in turn then
    /// never grows. An entry further in stays, skipped when it reaches the
    /// front or dropped when the queue is compacted.
    fn unqueue_last(&mut self, previous: Slot) {
        let queue = self.queue(previous.state.kind());
        if queue
            .back()
            .is_some_and(|last| last.stamp == previous.stamp)
        {
            queue.pop_back();
        }
    }

    /// Queues the key of `digest` (its table entry set to `slot` already)
    /// last in its state's queue, keeping the live counts right; `previous`
    /// is the entry's former slot, if it had one.
    fn enqueue(&mut self, digest: Digest, slot: Slot, previous: Option<Slot>) {
        if let Some(previous) = previous {
            *self.live_mut(previous.state.kind()) -= 1;
            self.unqueue_last(previous);
        }
        let kind = slot.state.kind();
        *self.live_mut(kind) += 1;
        self.queue(kind).push_back(Queued {
            digest,
            stamp: slot.stamp,
            deadline: slot.state.deadline(),
        });
        self.compact(kind);
    }

    /// Adds the key of `digest`, absent from the table, in `state`, and
    /// queues it.
    fn insert(&mut self, digest: Digest, state: State) {
        self.next_stamp += 1;
        let slot = Slot {
            state,
            stamp: self.next_stamp,
        };
        self.table
            .insert_unique(digest.hash, Entry { digest, slot }, |e| e.digest.hash);
        self.enqueue(digest, slot, None);
    }

    fn remove(&mut self, digest: Digest) {
        if let Ok(found) = self.table.find_entry(digest.hash, |e| e.digest == digest) {
            let (entry, _) = found.remove();
            *self.live_mut(entry.slot.state.kind()) -= 1;
            self.unqueue_last(entry.slot);
        }
    }

    /// Drops stale queue entries when they outnumber live ones (amortized
    /// O(1) per operation), so that a long-lived entry at a queue's front
    /// cannot make the queue grow without bound.
    fn compact(&mut self, kind: Kind) {
        let live = match kind {
            Kind::InFlight => self.live_in_flight,
            Kind::Completed => self.live_completed,
        };
        if self.queue(kind).len() <= 2 * live + 1024 {
            return;
        }
        let mut queue = std::mem::take(self.queue(kind));
        queue.retain(|entry| self.is_current(entry, kind));
        *self.queue(kind) = queue;
    }

    /// Drops what is past its time at the queues' fronts, and stale entries
    /// found there. Costs no lookup while the fronts' deadlines are ahead.
    fn sweep(&mut self, now: Ms) {
        for kind in [Kind::InFlight, Kind::Completed] {
            // Queued deadlines are the states' own; a queue is (nearly) in
            // deadline order, so stop at the first one ahead.
            loop {
                match self.queue(kind).front() {
                    Some(front) if front.deadline <= now => {}
                    _ => break,
                }
                let Some(front) = self.queue(kind).pop_front() else {
                    break;
                };
                if self.is_current(&front, kind) {
                    self.remove(front.digest);
                }
            }
        }
    }

    /// Makes room for one new key in a full shard: forgets the least recently
    /// completed (or seen) delivery, else a claim whose lease ran out. Never
    /// an unexpired claim: returns `false` when only those are left.
    fn evict_one(&mut self, now: Ms) -> bool {
        while let Some(front) = self.completed.pop_front() {
            if self.is_current(&front, Kind::Completed) {
                self.remove(front.digest);
                return true;
            }
        }
        let position = self.in_flight.iter().position(|queued| {
            self.get(queued.digest).is_some_and(|e| {
                e.slot.stamp == queued.stamp
                    && matches!(e.slot.state,
                        State::InFlight { lease_end, .. } if lease_end <= now)
            })
        });
        match position.and_then(|i| self.in_flight.remove(i)) {
            Some(queued) => {
                self.remove(queued.digest);
                true
            }
            None => false,
        }
    }
}

/// The in-process [`DedupStore`]: the default, and right for one process.
///
/// Every operation is one step under the lock of the key's shard, so exactly
/// one of any number of concurrent claimers wins.
///
/// **Scope.** It deduplicates within one process only: two instances of a
/// service each have their own memory, so use a shared backend (Redis, SQL)
/// as soon as more than one instance receives webhooks. A restart forgets
/// everything.
///
/// **Lifetimes.** A completed delivery is remembered for the retention the
/// pipeline passes (7 days by default). An in-flight claim may be taken over
/// once its lease runs out, but it is kept 10 minutes longer (a lease longer
/// than that: one more lease): until
/// somebody takes it over, its holder's `complete`, `extend` and `release`
/// still apply.
///
/// **Capacity** is the number of keys held at most, in flight and completed
/// (default [`DEFAULT_CAPACITY`]; spread over up to 64 shards, each holding
/// its share). When a shard is full, a new claim makes room by forgetting the
/// delivery completed (or last seen as a duplicate) longest ago, then a claim
/// whose lease ran out; it never drops an unexpired claim or a newer
/// completion in their place. When a shard holds nothing but unexpired
/// claims, the new claim fails with [`StoreError::Unavailable`] (the pipeline
/// answers 503, the sender retries) instead of forgetting one. A forgotten
/// completion would run again if its sender retried it, so size the capacity
/// above the deliveries received within the retention period: at the default
/// 7 days, 1,000,000 keys cover 1.65 deliveries/s sustained.
///
/// **Memory.** About 120–155 bytes per remembered delivery, whatever the
/// key's length (measured by `cargo run --release -p webhooks-core
/// --example memory_footprint`): 100,000 deliveries ≈ 12 MiB, the default
/// capacity of 1,000,000 ≈ 150 MiB at most. A key is kept as a 128-bit
/// digest under the store's own random seeds, not as text: two distinct
/// keys are taken for one with a probability of about 2^-64 a pair at
/// worst (SipHash-1-3's half alone), and the text of a key cannot be read
/// back from the store.
///
/// ```
/// use webhooks_core::dedup::MemoryStore;
/// let store = MemoryStore::with_capacity(100_000);
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

struct Inner {
    shards: Box<[Mutex<Shard>]>,
    /// Keys per shard.
    shard_capacity: usize,
    /// foldhash, seeded at random per store: the table's hash (a few times
    /// faster than std's SipHash on these short keys, and only verified
    /// deliveries, from senders holding the secret, choose keys).
    hasher: RandomState,
    /// std's SipHash-1-3, seeded at random per store: the second half of
    /// each key's [`Digest`].
    check: std::hash::RandomState,
    epoch: Instant,
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("entries", &self.len())
            .field("shards", &self.inner.shards.len())
            .finish()
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

/// A duration in whole milliseconds, rounded up (a lease never ends early).
fn millis(d: Duration) -> Ms {
    u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

/// The shard table is full of unexpired claims.
#[derive(Debug, thiserror::Error)]
#[error("in-process dedup store full of in-flight claims")]
struct Full;

impl MemoryStore {
    /// A store holding up to [`DEFAULT_CAPACITY`] keys.
    #[must_use]
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }

    /// A store holding up to `capacity` keys (at least one).
    #[must_use]
    pub fn with_capacity(capacity: u64) -> Self {
        let capacity = capacity.max(1);
        let wanted = usize::try_from(capacity / KEYS_PER_SHARD).unwrap_or(MAX_SHARDS);
        let shards = match wanted.clamp(1, MAX_SHARDS) {
            n if n.is_power_of_two() => n,
            n => n.next_power_of_two() / 2,
        };
        let shard_capacity =
            usize::try_from(capacity.div_ceil(shards as u64)).unwrap_or(usize::MAX);
        Self {
            inner: Arc::new(Inner {
                shards: (0..shards)
                    .map(|_| Mutex::new(Shard::with_room(shard_capacity)))
                    .collect(),
                shard_capacity,
                hasher: RandomState::default(),
                check: std::hash::RandomState::new(),
                epoch: Instant::now(),
            }),
        }
    }

    /// How many keys are held (in flight or completed, including any past
    /// their time that were not dropped yet).
    #[must_use]
    pub fn len(&self) -> usize {
        self.inner.shards.iter().map(|s| lock(s).table.len()).sum()
    }

    /// Whether no key is held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn now(&self) -> Ms {
        millis(self.inner.epoch.elapsed())
    }

    /// The key's digest, and its shard, locked.
    fn shard(&self, key: &str) -> (Digest, MutexGuard<'_, Shard>) {
        let (hash, shard) = self.shard_of(key);
        let digest = Digest {
            hash,
            check: self.inner.check.hash_one(key),
        };
        (digest, shard)
    }

    /// The key's table hash (the first half of its digest), and its shard,
    /// locked.
    fn shard_of(&self, key: &str) -> (u64, MutexGuard<'_, Shard>) {
        let shards = &self.inner.shards;
        // Bits 32 and up pick the shard; the table inside uses the lowest
        // bits for its buckets and the top 7 as tags.
        let hash = self.inner.hasher.hash_one(key);
        let index = (hash >> 32) as usize & (shards.len() - 1);
        (hash, lock(&shards[index]))
    }

    /// Applies `next` to the key's in-flight state if `token` holds it, even
    /// past its lease (nobody took over while it is still there). `next`
    /// returns the new state, or `None` to remove the key.
    fn token_update(
        &self,
        key: &str,
        token: ClaimToken,
        next: impl FnOnce(Ms) -> Option<State>,
    ) -> Transition {
        let now = self.now();
        // The table hash and the token find the entry: the token (128
        // random bits) is held by one claim's entry only, so the digest's
        // second half (SipHash, the costlier) is not needed to tell this
        // key's entry from another key's with the same table hash.
        let (hash, mut guard) = self.shard_of(key);
        let shard = &mut *guard;
        let token = split(token);
        let Some(entry) = shard.table.find_mut(hash, |e| {
            e.digest.hash == hash
                && matches!(e.slot.state, State::InFlight { token: t, .. } if t == token)
        }) else {
            return Transition::Stale;
        };
        let digest = entry.digest;
        let held = matches!(entry.slot.state,
            State::InFlight { keep_until, .. } if keep_until.get() > now);
        if !held {
            return Transition::Stale;
        }
        match next(now) {
            Some(state) => {
                let (slot, previous) = restamp(&mut shard.next_stamp, entry, state);
                shard.enqueue(digest, slot, Some(previous));
            }
            None => shard.remove(digest),
        }
        Transition::Applied
    }
}

/// Where a receiver is built: the namespace, the place in the source and the
/// sharing group.
type Site = (String, &'static Location<'static>, u64);

/// The in-process default store of each receiver site, while a receiver holds it.
static PROCESS_DEFAULTS: Mutex<Option<HashMap<Site, Weak<Inner>>>> = Mutex::new(None);

impl MemoryStore {
    /// The store the receivers of this process built without a store of
    /// their own share when they are built at the same `site` in the source
    /// with the same `namespace` and `group`
    /// (`ReceiverBuilder::share_default_store`): the same `MemoryStore` while
    /// one of them lives, a new one after.
    ///
    /// actix-web builds the app once per worker thread
    /// (`HttpServer::new(|| App::new().wrap(Webhooks::new(v)))`): with a store
    /// per receiver, two retries of one delivery reaching two workers would
    /// both run. Receivers built at two places (two routes) or in two groups
    /// (two servers, two tests) keep apart.
    pub(crate) fn process_default(
        namespace: &str,
        site: &'static Location<'static>,
        group: u64,
    ) -> Self {
        let mut guard = PROCESS_DEFAULTS
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let defaults = guard.get_or_insert_with(HashMap::new);
        let key = (namespace.to_owned(), site, group);
        if let Some(inner) = defaults.get(&key).and_then(Weak::upgrade) {
            return Self { inner };
        }
        // Forget the namespaces whose receivers are all gone.
        defaults.retain(|_, store| store.strong_count() > 0);
        let store = Self::new();
        defaults.insert(key, Arc::downgrade(&store.inner));
        store
    }

    /// Whether `self` and `other` are the same store (clones of one another).
    #[cfg(test)]
    pub(crate) fn same_as(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    // Nothing panics while a shard is locked, but a poisoned lock still
    // holds consistent data: keep going.
    shard.lock().unwrap_or_else(PoisonError::into_inner)
}

fn split(token: ClaimToken) -> [u64; 2] {
    let v = token.as_u128();
    [(v >> 64) as u64, v as u64]
}

/// The state of a fresh claim at `now`.
fn in_flight(token: ClaimToken, lease: Duration, now: Ms) -> State {
    let lease = millis(lease);
    let lease_end = now.saturating_add(lease);
    State::InFlight {
        token: split(token),
        lease_end,
        keep_until: NonZeroU64::new(lease_end.saturating_add(lease.max(millis(IN_FLIGHT_GRACE))))
            .unwrap_or(NonZeroU64::MAX),
    }
}

impl MemoryStore {
    fn claim_now(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        let now = self.now();
        let (digest, mut guard) = self.shard(key);
        let shard = &mut *guard;
        shard.sweep(now);
        if let Some(entry) = shard.table.find_mut(digest.hash, |e| e.digest == digest) {
            let (state, stamp) = (entry.slot.state, entry.slot.stamp);
            return match state {
                State::InFlight { lease_end, .. } if lease_end > now => Ok(Claim::InFlight {
                    retry_after: Duration::from_millis(lease_end - now),
                }),
                State::Completed { until } if until > now => {
                    // Seen again: the sender still retries it, so it is the
                    // last completion to forget when the shard is full.
                    if shard
                        .completed
                        .back()
                        .is_none_or(|last| last.stamp != stamp)
                    {
                        let (slot, previous) = restamp(&mut shard.next_stamp, entry, state);
                        shard.enqueue(digest, slot, Some(previous));
                    }
                    Ok(Claim::Completed)
                }
                // A lease that ran out (takeover) or a retention that did.
                _ => {
                    let claimed = in_flight(token, lease, now);
                    let (slot, previous) = restamp(&mut shard.next_stamp, entry, claimed);
                    shard.enqueue(digest, slot, Some(previous));
                    Ok(Claim::Claimed)
                }
            };
        }
        if shard.table.len() >= self.inner.shard_capacity && !shard.evict_one(now) {
            return Err(StoreError::unavailable(Full));
        }
        shard.insert(digest, in_flight(token, lease, now));
        Ok(Claim::Claimed)
    }

    fn complete_now(&self, key: &str, token: ClaimToken, retention: Duration) -> Transition {
        self.token_update(key, token, |now| {
            Some(State::Completed {
                until: now.saturating_add(millis(retention)),
            })
        })
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
        self.claim_now(key, token, lease)
    }

    async fn complete(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
    ) -> Result<Transition, StoreError> {
        Ok(self.complete_now(key, token, retention))
    }

    fn claim_ready(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Option<Result<Claim, StoreError>> {
        Some(self.claim_now(key, token, lease))
    }

    fn complete_ready(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
    ) -> Option<Result<Transition, StoreError>> {
        Some(Ok(self.complete_now(key, token, retention)))
    }

    async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, StoreError> {
        Ok(self.token_update(key, token, |_| None))
    }

    async fn extend(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Transition, StoreError> {
        Ok(self.token_update(key, token, |now| Some(in_flight(token, lease, now))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The queue entries a store holds, in flight and completed.
    fn queued(store: &MemoryStore) -> (usize, usize) {
        store.inner.shards.iter().fold((0, 0), |(f, c), shard| {
            let shard = lock(shard);
            (f + shard.in_flight.len(), c + shard.completed.len())
        })
    }

    /// Claims completed (or released) in turn leave nothing queued in
    /// flight: each claim's entry is dropped when it settles. It was kept,
    /// stale, until the queue held 1,024 more than its live claims.
    #[test]
    fn settled_claims_leave_no_in_flight_entries() {
        let store = MemoryStore::with_capacity(10_000);
        let (lease, retention) = (Duration::from_secs(30), Duration::from_secs(3_600));
        for i in 0..3_000 {
            let (key, token) = (format!("k{i}"), ClaimToken::random());
            assert!(matches!(
                store.claim_now(&key, token, lease),
                Ok(Claim::Claimed)
            ));
            let settled = if i % 3 == 0 {
                store.token_update(&key, token, |_| None)
            } else {
                store.complete_now(&key, token, retention)
            };
            assert_eq!(settled, Transition::Applied);
        }
        assert_eq!(queued(&store), (0, 2_000));
        // Interleaved claims keep their entries until they reach the
        // front, and still settle.
        let (a, b) = (ClaimToken::random(), ClaimToken::random());
        assert!(matches!(store.claim_now("a", a, lease), Ok(Claim::Claimed)));
        assert!(matches!(store.claim_now("b", b, lease), Ok(Claim::Claimed)));
        assert_eq!(store.complete_now("a", a, retention), Transition::Applied);
        assert_eq!(store.complete_now("b", b, retention), Transition::Applied);
        let (in_flight, completed) = queued(&store);
        assert!(in_flight <= 1, "{in_flight}");
        assert_eq!(completed, 2_002);
        assert!(matches!(
            store.claim_now("a", a, lease),
            Ok(Claim::Completed)
        ));
        assert!(matches!(
            store.claim_now("b", b, lease),
            Ok(Claim::Completed)
        ));
    }

    #[test]
    fn process_default_is_shared_per_namespace_and_site_while_held() {
        let site = Location::caller();
        let a = MemoryStore::process_default("memory-test-shared", site, 1);
        let b = MemoryStore::process_default("memory-test-shared", site, 1);
        let other = MemoryStore::process_default("memory-test-other", site, 1);
        let elsewhere = MemoryStore::process_default("memory-test-shared", Location::caller(), 1);
        let other_group = MemoryStore::process_default("memory-test-shared", site, 2);
        assert!(a.same_as(&b));
        assert!(!a.same_as(&other));
        assert!(!a.same_as(&elsewhere));
        assert!(!a.same_as(&other_group));
        let probe = Arc::downgrade(&a.inner);
        drop((a, b, other_group));
        // Nobody holds it: the next receiver gets a new store.
        assert!(probe.upgrade().is_none());
        let c = MemoryStore::process_default("memory-test-shared", site, 1);
        assert_eq!(c.len(), 0);
    }
}
