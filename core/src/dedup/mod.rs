//! Deduplication: the [`DedupStore`] trait and its backends.
//!
//! A delivery is processed at most once at a time and, once it succeeded, never
//! again. The receive pipeline drives the store through three atomic steps:
//!
//! 1. [`claim`](DedupStore::claim) the delivery's key with a random
//!    [`ClaimToken`] and a lease. Exactly one concurrent caller wins; the others
//!    learn that it is [in flight](Claim::InFlight) or already
//!    [completed](Claim::Completed).
//! 2. The handler runs.
//! 3. [`complete`](DedupStore::complete) (after a 2xx; remembered for the
//!    retention period) or [`release`](DedupStore::release) (after a failure, so
//!    the sender's retry may run it again). Both act only while the token still
//!    holds the claim: when the lease expired and another attempt took over, a
//!    late `complete` changes nothing and returns [`Transition::Stale`].
//!
//! A process that crashes while holding a claim simply stops renewing it: the
//! lease expires and the sender's next retry takes over.
//!
//! **A lease that ran out is not lost until someone takes over.** The lease
//! only says when another attempt *may* take the claim. Until one does, the
//! token still holds it: `complete` (a slow handler, or a complete retried
//! after a store outage), `release` and [`extend`](DedupStore::extend) still
//! apply, and `extend` then re-acquires the claim for a new lease. The shared
//! backends keep an expired claim's token for [`EXPIRED_CLAIM_GRACE`] past its
//! lease (the SQL purge spares it, Redis keeps the key), so that a late
//! `complete` finds it.
//!
//! | backend | feature | scope |
//! |---|---|---|
//! | [`MemoryStore`] (sharded hash map) | `memory` (default) | one process |
//! | `RedisStore` (redis-rs, `SET NX PX` + Lua) | `redis` | every instance sharing the Redis server |
//! | `RedisClusterStore` (redis-rs' cluster client, the same Lua) | `redis-cluster` | every instance sharing the Redis Cluster |
//! | `PostgresStore` (sqlx, `INSERT … ON CONFLICT … RETURNING`) | `postgres` | every instance sharing the table |
//! | `MySqlStore` (sqlx, `INSERT … ON DUPLICATE KEY UPDATE` + locking read) | `mysql` | every instance sharing the table (MySQL or MariaDB) |
//! | `SqliteStore` (sqlx, WAL, `INSERT … ON CONFLICT … RETURNING`) | `sqlite` | the processes of one host sharing the file |
//!
//! [`store_from_url`] picks one at run time (`memory://`, `redis://…`,
//! `postgres://…`, `mysql://…`, `sqlite://…`). The SQL table layout, clock and
//! timeouts are described in the `sql` module (with the `postgres`, `mysql` or `sqlite`
//! feature); Redis' in `RedisStore`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::time::Duration;
//! use webhooks_core::dedup::{Claim, ClaimToken, DedupStore, MemoryStore, Transition};
//!
//! let store = MemoryStore::new();
//! let first = ClaimToken::random();
//! let lease = Duration::from_secs(30);
//! assert_eq!(store.claim("msg_1", first, lease).await.unwrap(), Claim::Claimed);
//! // A concurrent retry of the same delivery:
//! let second = ClaimToken::random();
//! assert!(matches!(store.claim("msg_1", second, lease).await.unwrap(), Claim::InFlight { .. }));
//! // The first attempt succeeds and is remembered for a day:
//! let day = Duration::from_secs(86_400);
//! assert_eq!(store.complete("msg_1", first, day).await.unwrap(), Transition::Applied);
//! assert_eq!(store.claim("msg_1", second, lease).await.unwrap(), Claim::Completed);
//! # }
//! ```
#![cfg_attr(
    not(feature = "memory"),
    doc = "\n\n[`MemoryStore`]: https://docs.rs/webhooks-core/latest/webhooks_core/dedup/struct.MemoryStore.html"
)]

use std::fmt;
use std::time::Duration;

#[cfg(feature = "memory")]
mod memory;

#[cfg(feature = "memory")]
pub use memory::{DEFAULT_CAPACITY as DEFAULT_MEMORY_CAPACITY, MemoryStore};

#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "redis-cluster")]
pub(crate) mod redis_cluster;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub mod sql;
mod url;

#[cfg(feature = "redis")]
pub use self::redis::{RedisStore, RedisStoreBuilder};
#[cfg(feature = "redis-cluster")]
pub use self::redis_cluster::{RedisClusterStore, RedisClusterStoreBuilder};
#[cfg(feature = "mysql")]
pub use sql::{MySqlStore, MySqlStoreBuilder};
#[cfg(feature = "postgres")]
pub use sql::{PostgresStore, PostgresStoreBuilder};
#[cfg(feature = "sqlite")]
pub use sql::{SqliteStore, SqliteStoreBuilder};
pub use url::{OpenError, store_from_url};

/// How long the shared backends keep a claim whose lease ran out (and that
/// nobody took over) for its holder's late `complete`: one hour.
///
/// After that the SQL purge may delete the row and Redis lets the key expire;
/// a `complete` then finds nothing and is [`Transition::Stale`].
pub const EXPIRED_CLAIM_GRACE: Duration = Duration::from_secs(3_600);

/// A random value that identifies one attempt's claim on a delivery.
///
/// `complete` and `release` act only when the stored token is this one.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
// Two words, not a `u128`: 8-byte alignment keeps the futures that carry a
// claim free of 16-byte padding.
pub struct ClaimToken([u64; 2]);

impl ClaimToken {
    /// A fresh token, unique among the tokens this thread makes and
    /// unpredictable-looking across all 128 bits.
    ///
    /// Each thread seeds itself from the operating system's generator, then
    /// runs a counter through a bijective mixer (the SplitMix64 finalizer,
    /// <https://prng.di.unimi.it/splitmix64.c>). Two threads' or processes'
    /// tokens collide only if their 192 random seed bits line up; tokens
    /// only tell one attempt from another and are no secret.
    ///
    /// A thread reseeds when the process id changes: after `fork()`, parent
    /// and child would otherwise go on from the same copied state and emit
    /// the same tokens (two holders of one lease). The check costs one
    /// `getpid` per token.
    #[must_use]
    pub fn random() -> Self {
        use std::cell::Cell;
        thread_local! {
            static NEXT: Cell<Option<TokenState>> = const { Cell::new(None) };
        }
        NEXT.with(|next| {
            let mut state = next.get();
            let token = next_token(&mut state, std::process::id(), token_seed);
            next.set(state);
            token
        })
    }

    /// The token as a number.
    #[must_use]
    pub fn as_u128(self) -> u128 {
        (u128::from(self.0[0]) << 64) | u128::from(self.0[1])
    }

    /// A token from a number (for backends that store it).
    #[must_use]
    pub fn from_u128(value: u128) -> Self {
        Self([(value >> 64) as u64, value as u64])
    }

    /// The token as 32 lowercase hex digits, as the backends store it.
    #[must_use]
    pub fn to_hex(self) -> String {
        self.hex_digits().iter().map(|&d| char::from(d)).collect()
    }

    /// [`to_hex`](Self::to_hex)'s digits, on the stack (the Redis store
    /// writes them into its command buffer).
    pub(crate) fn hex_digits(self) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (i, pair) in out.chunks_exact_mut(2).enumerate() {
            let byte = self.0[i / 8].to_be_bytes()[i % 8];
            pair[0] = crate::scheme::HEX_DIGITS[usize::from(byte >> 4)];
            pair[1] = crate::scheme::HEX_DIGITS[usize::from(byte & 0x0f)];
        }
        out
    }

    /// Parses the 32-hex-digit form.
    #[must_use]
    pub fn from_hex(hex: &str) -> Option<Self> {
        if hex.len() != 32 {
            return None;
        }
        u128::from_str_radix(hex, 16).ok().map(Self::from_u128)
    }
}

impl fmt::Debug for ClaimToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClaimToken({:08x}…)", (self.0[0] >> 32) as u32)
    }
}

/// A thread's token generator: the process id it was seeded in, and its
/// keys and counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TokenState {
    pid: u32,
    keys_and_counter: [u64; 3],
}

/// The next token of `state`, seeded (with `seed`) when there is none yet or
/// when it was seeded in another process than `pid` (a forked child).
fn next_token(
    state: &mut Option<TokenState>,
    pid: u32,
    seed: impl FnOnce() -> [u64; 3],
) -> ClaimToken {
    let current = match *state {
        Some(s) if s.pid == pid => s.keys_and_counter,
        _ => seed(),
    };
    let [k_hi, k_lo, n] = current;
    *state = Some(TokenState {
        pid,
        keys_and_counter: [k_hi, k_lo, n.wrapping_add(1)],
    });
    // Both halves are bijections of the counter: distinct per call.
    let hi = splitmix64_mix(n ^ k_hi);
    let lo = splitmix64_mix(n.wrapping_add(k_lo));
    ClaimToken([hi, lo])
}

/// A thread's token keys and counter start, from the operating system's
/// generator (or, without one, std's per-process random hasher keys mixed
/// with a counter and the time).
fn token_seed() -> [u64; 3] {
    let mut bytes = [0u8; 24];
    if getrandom::fill(&mut bytes).is_ok() {
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[8 * i..8 * i + 8]);
            u64::from_le_bytes(w)
        };
        return [word(0), word(1), word(2)];
    }
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    let mut seed = [0u64; 3];
    for word in &mut seed {
        *word = h.finish();
        h.write_u64(*word);
    }
    seed
}

/// The SplitMix64 output function: a bijection on `u64` that spreads every
/// input bit over the output.
fn splitmix64_mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The answer to a [`claim`](DedupStore::claim).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Claim {
    /// This attempt holds the claim (a first delivery, or a takeover of an
    /// expired lease): run the handler.
    Claimed,
    /// Another attempt holds an unexpired claim; try again after `retry_after`.
    InFlight {
        /// Roughly how long the other attempt's lease has left.
        retry_after: Duration,
    },
    /// The delivery was processed successfully before.
    Completed,
}

/// Whether a token-checked [`complete`](DedupStore::complete) or
/// [`release`](DedupStore::release) changed anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Transition {
    /// The token held the claim; the state changed.
    Applied,
    /// The token no longer holds the claim (the lease expired and another
    /// attempt took over, or the key is gone): nothing changed.
    Stale,
}

/// Why a store operation failed.
///
/// At claim time the pipeline answers `503` with `Retry-After` (the delivery
/// was not processed and the sender should retry), except for
/// [`Permanent`](Self::Permanent), answered `400`: retrying cannot help.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store could not be reached or refused the operation.
    #[error("dedup store unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The store did not answer in time.
    #[error("dedup store timed out")]
    Timeout,
    /// The store answered something this backend does not understand.
    #[error("dedup store returned an unexpected answer: {0}")]
    Protocol(String),
    /// The store refused this key or value for good (a byte sequence it
    /// cannot store, a value out of range): retrying the same delivery fails
    /// the same way.
    #[error("dedup store refused the key")]
    Permanent(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl StoreError {
    /// Wraps a driver error as [`StoreError::Unavailable`], keeping it as the source.
    pub fn unavailable(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Unavailable(Box::new(error))
    }

    /// Wraps a driver error as [`StoreError::Permanent`], keeping it as the source.
    pub fn permanent(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Permanent(Box::new(error))
    }

    /// Whether retrying the same operation cannot succeed.
    #[must_use]
    pub fn is_permanent(&self) -> bool {
        matches!(self, Self::Permanent(_))
    }
}

/// An atomic claim / complete / release store that deduplicates deliveries.
///
/// Every operation must be one atomic step in the store (an insert on a unique
/// key, `SET NX PX`, a per-key compute), never a read followed by a write, so
/// that exactly one of any number of concurrent claimers wins, across every
/// process sharing the store.
///
/// Keys arrive already namespaced by the pipeline. Implementations are used as
/// `Arc<dyn DedupStore>`, so a deployment can choose its backend at run time.
#[async_trait::async_trait]
pub trait DedupStore: Send + Sync + 'static {
    /// Claims `key` for `lease` with `token`.
    ///
    /// Succeeds when the key is unknown, was released, or its lease or its
    /// retention has expired.
    ///
    /// # Errors
    ///
    /// [`StoreError`] when the store cannot answer.
    async fn claim(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Claim, StoreError>;

    /// Marks the claimed key as processed, remembered for `retention`, if
    /// `token` still holds the claim: the key is in flight with this token,
    /// even when its lease has run out (nobody took over). Stale when another
    /// token took over, the key completed, or it is gone.
    ///
    /// # Errors
    ///
    /// [`StoreError`] when the store cannot answer.
    async fn complete(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
    ) -> Result<Transition, StoreError>;

    /// Forgets the claim so that a retry may run, if `token` still holds it
    /// (its lease may have run out).
    ///
    /// # Errors
    ///
    /// [`StoreError`] when the store cannot answer.
    async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, StoreError>;

    /// Extends the lease to `lease` from now, if `token` still holds the claim.
    ///
    /// A lease that ran out without a takeover still belongs to `token`:
    /// extending it re-acquires the claim (nobody else can have run in the
    /// meantime, since a takeover replaces the token). Stale when another
    /// token took over, the key completed, or it is gone.
    ///
    /// # Errors
    ///
    /// [`StoreError`] when the store cannot answer.
    async fn extend(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Transition, StoreError>;

    /// [`claim`](Self::claim) answered at once, for a store that needs no
    /// I/O to answer (the in-process [`MemoryStore`]); `None`, the default,
    /// when only `claim` can tell. The pipeline asks here first, which
    /// spares it a boxed future per delivery. When `Some`, it must be what
    /// `claim` would have answered, with the same effect.
    ///
    /// ```
    /// use std::time::Duration;
    /// use webhooks_core::dedup::{Claim, ClaimToken, DedupStore, MemoryStore};
    ///
    /// let store = MemoryStore::new();
    /// let answer = store.claim_ready("ns:stripe:evt_1", ClaimToken::random(), Duration::from_secs(30));
    /// assert!(matches!(answer, Some(Ok(Claim::Claimed))));
    /// ```
    #[cfg_attr(
        not(feature = "memory"),
        doc = "\n\n[`MemoryStore`]: https://docs.rs/webhooks-core/latest/webhooks_core/dedup/struct.MemoryStore.html"
    )]
    fn claim_ready(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Option<Result<Claim, StoreError>> {
        let _ = (key, token, lease);
        None
    }

    /// [`complete`](Self::complete), told that this token's lease has at
    /// least `lease_left` to run, by the caller's monotonic clock measured
    /// from before its claim (or its last extension) was sent.
    ///
    /// Nobody can take a claim over before its lease runs out, so while
    /// well within it the key can only hold this token: a store may then
    /// mark it completed without checking the token first (Redis: one plain
    /// `SET … XX GET` instead of a script). The answer is the same as
    /// `complete`'s. Only where the lease did not hold after all (a store
    /// whose clock jumped ahead, a failover that lost the claim, a process
    /// frozen between reading its clock and sending) may such a store mark
    /// completed a key another token took over, answering
    /// [`Transition::Stale`]: the delivery was processed, so the key says
    /// so, and the other attempt's release no longer lets a third one run.
    ///
    /// The default calls `complete`.
    ///
    /// # Errors
    ///
    /// [`StoreError`] when the store cannot answer.
    async fn complete_in_lease(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
        lease_left: Duration,
    ) -> Result<Transition, StoreError> {
        let _ = lease_left;
        self.complete(key, token, retention).await
    }

    /// [`complete`](Self::complete) answered at once, as
    /// [`claim_ready`](Self::claim_ready) is for `claim`; `None` by default.
    fn complete_ready(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
    ) -> Option<Result<Transition, StoreError>> {
        let _ = (key, token, retention);
        None
    }
}

#[async_trait::async_trait]
impl<S: DedupStore + ?Sized> DedupStore for std::sync::Arc<S> {
    async fn claim(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        (**self).claim(key, token, lease).await
    }
    async fn complete(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
    ) -> Result<Transition, StoreError> {
        (**self).complete(key, token, retention).await
    }
    async fn complete_in_lease(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
        lease_left: Duration,
    ) -> Result<Transition, StoreError> {
        (**self)
            .complete_in_lease(key, token, retention, lease_left)
            .await
    }
    async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, StoreError> {
        (**self).release(key, token).await
    }
    async fn extend(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Transition, StoreError> {
        (**self).extend(key, token, lease).await
    }
    fn claim_ready(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Option<Result<Claim, StoreError>> {
        (**self).claim_ready(key, token, lease)
    }
    fn complete_ready(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
    ) -> Option<Result<Transition, StoreError>> {
        (**self).complete_ready(key, token, retention)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_distinct_and_round_trip_as_hex() {
        let a = ClaimToken::random();
        let b = ClaimToken::random();
        assert_ne!(a, b);
        assert_eq!(ClaimToken::from_hex(&a.to_hex()), Some(a));
        assert_eq!(ClaimToken::from_hex("xyz"), None);
        assert!(!format!("{a:?}").contains(&a.to_hex()));
    }

    #[test]
    fn tokens_differ_in_every_part() {
        // Tests and tools use a token's first hex digits as a unique name.
        let tokens: Vec<_> = (0..1000).map(|_| ClaimToken::random()).collect();
        let prefixes: std::collections::HashSet<_> =
            tokens.iter().map(|t| t.to_hex()[..12].to_owned()).collect();
        assert_eq!(prefixes.len(), tokens.len());
        let other = std::thread::spawn(ClaimToken::random).join().unwrap();
        assert!(!tokens.contains(&other));
    }

    /// Issue 25, item 7: `fork()` copies the generator's state; the child,
    /// seeing another process id, reseeds instead of repeating the parent's
    /// tokens. (`tests/claim_token_fork.rs` forks for real.)
    #[test]
    fn a_copied_state_reseeds_under_another_pid() {
        let seed = |k: u64| move || [k, k.wrapping_mul(31), k ^ 7];
        let mut parent = None;
        next_token(&mut parent, 100, seed(1));
        // What fork copies: without a pid change both go on alike.
        let mut same_pid = parent;
        assert_eq!(
            next_token(&mut same_pid, 100, seed(2)),
            next_token(&mut parent.clone(), 100, seed(3))
        );
        let mut child = parent;
        let from_parent = next_token(&mut parent, 100, seed(4));
        let from_child = next_token(&mut child, 101, seed(5));
        assert_ne!(from_parent, from_child);
        assert_eq!(child.map(|s| s.pid), Some(101));
        assert_eq!(from_child, next_token(&mut None, 101, seed(5)));
    }
}
