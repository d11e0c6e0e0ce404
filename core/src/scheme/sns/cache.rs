//! The certificate key cache, the failures remembered, the fetches in
//! flight and the two fetch budgets.
//!
//! Time is tokio's [`Instant`]: the same as the standard one in production,
//! and one that a test can move (`tokio::time::pause` and `advance`) to
//! age the cache without waiting.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rsa::PublicKey;
use tokio::time::Instant;

/// What [`KeyCache`] is built from (the builder's settings).
pub(super) struct CacheSettings {
    /// How long a fetched key is fresh.
    pub(super) ttl: Duration,
    /// How long past `ttl` a key is still used when no refresh can be had.
    pub(super) stale_ttl: Duration,
    /// How many fetched keys are kept, fresh or stale.
    pub(super) capacity: usize,
    /// How long a failed fetch of a URL is remembered.
    pub(super) failure_ttl: Duration,
    /// The budget of fetches for paths that never verified: count per window.
    pub(super) new_rate: (u32, Duration),
    /// The budget of fetches for known paths.
    pub(super) known_rate: (u32, Duration),
    /// Keys given at build time, by certificate path: never fetched.
    pub(super) pinned: HashMap<String, Arc<PublicKey>>,
    /// Paths declared known at build time, and the URL each is fetched from.
    pub(super) declared: HashMap<String, String>,
}

/// A fetched key.
struct Entry {
    key: Arc<PublicKey>,
    /// The URL it was fetched from (lowercase host): a known path is
    /// refreshed from there, whatever host a message names.
    url: String,
    /// When it was fetched.
    fetched: Instant,
    /// Whether a message verified with it: its path is then known.
    verified: bool,
}

/// What the cache has for a certificate path.
pub(super) enum Lookup {
    /// A key to verify with: pinned, or fetched within the TTL.
    Ready {
        /// The key.
        key: Arc<PublicKey>,
        /// Whether the path is known (pinned, declared, or verified before).
        known: bool,
    },
    /// A fetch is needed.
    Fetch {
        /// The last good key, past its TTL but within the stale window: used
        /// when the fetch cannot be had.
        stale: Option<Arc<PublicKey>>,
        /// Whether the path is known: its fetch is charged to the known
        /// paths' budget, and made from `url`.
        known: bool,
        /// Where a known path is fetched from; `None`: the message's URL.
        url: Option<String>,
    },
}

/// A fixed window of fetches.
struct Budget {
    max: u32,
    window: Duration,
    /// When the current window began, and the fetches started in it.
    state: Mutex<(Instant, u32)>,
}

impl Budget {
    fn new((max, window): (u32, Duration)) -> Self {
        Self {
            max,
            window,
            state: Mutex::new((Instant::now(), 0)),
        }
    }

    /// Takes one fetch; `false` when the window's fetches are spent.
    fn take(&self, now: Instant) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if now.saturating_duration_since(state.0) >= self.window {
            *state = (now, 0);
        }
        if state.1 >= self.max {
            return false;
        }
        state.1 += 1;
        true
    }
}

/// Certificate keys by certificate path (the host is one of the allowed
/// SNS hosts, whose letter case and region do not name another
/// certificate), kept past their TTL as the last good key; by normalised
/// URL (lowercase host), the failures of the last fetches and the fetches
/// in flight (one per URL at a time); and the two fetch budgets, one for
/// known paths and one for the others, so that messages naming made-up
/// paths never spend what a known path's refresh needs.
pub(super) struct KeyCache {
    map: Mutex<HashMap<String, Entry>>,
    ttl: Duration,
    stale_ttl: Duration,
    capacity: usize,
    pinned: HashMap<String, Arc<PublicKey>>,
    declared: HashMap<String, String>,
    /// URLs whose last fetch failed, and when.
    failures: Mutex<HashMap<String, Instant>>,
    failure_ttl: Duration,
    /// One lock per URL being fetched: later requests wait for the first
    /// one's answer instead of fetching again.
    in_flight: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    new_budget: Budget,
    known_budget: Budget,
}

impl KeyCache {
    pub(super) fn new(settings: CacheSettings) -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            ttl: settings.ttl,
            stale_ttl: settings.stale_ttl,
            capacity: settings.capacity,
            pinned: settings.pinned,
            declared: settings.declared,
            failures: Mutex::new(HashMap::new()),
            failure_ttl: settings.failure_ttl,
            in_flight: Mutex::new(HashMap::new()),
            new_budget: Budget::new(settings.new_rate),
            known_budget: Budget::new(settings.known_rate),
        }
    }

    /// Whether keys are kept at all (a zero TTL or capacity: no).
    fn enabled(&self) -> bool {
        self.capacity > 0 && !self.ttl.is_zero()
    }

    /// What is there for `path`. A key past the stale window is dropped.
    pub(super) fn lookup(&self, path: &str, now: Instant) -> Lookup {
        if let Some(key) = self.pinned.get(path) {
            return Lookup::Ready {
                key: Arc::clone(key),
                known: true,
            };
        }
        let declared = self.declared.get(path);
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = map.get(path) else {
            return Lookup::Fetch {
                stale: None,
                known: declared.is_some(),
                url: declared.cloned(),
            };
        };
        let age = now.saturating_duration_since(entry.fetched);
        let known = entry.verified || declared.is_some();
        if age < self.ttl {
            return Lookup::Ready {
                key: Arc::clone(&entry.key),
                known,
            };
        }
        let url = if entry.verified {
            Some(entry.url.clone())
        } else {
            declared.cloned()
        };
        if age < self.ttl.saturating_add(self.stale_ttl) {
            return Lookup::Fetch {
                stale: Some(Arc::clone(&entry.key)),
                known,
                url,
            };
        }
        map.remove(path);
        Lookup::Fetch {
            stale: None,
            known,
            url,
        }
    }

    /// Keeps the key fetched from `url` for `path`. A path that verified
    /// before stays known. When full: keys past the stale window go first,
    /// then those of paths that never verified, oldest first, and only then
    /// the oldest of the known paths.
    pub(super) fn insert(&self, path: &str, url: &str, key: Arc<PublicKey>, now: Instant) {
        if !self.enabled() {
            return;
        }
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = map.get_mut(path) {
            entry.key = key;
            entry.url = url.to_owned();
            entry.fetched = now;
            return;
        }
        if map.len() >= self.capacity {
            let kept = self.ttl.saturating_add(self.stale_ttl);
            map.retain(|_, e| now.saturating_duration_since(e.fetched) < kept);
        }
        if map.len() >= self.capacity
            && let Some(evicted) = map
                .iter()
                .min_by_key(|(_, e)| (e.verified, e.fetched))
                .map(|(path, _)| path.clone())
        {
            map.remove(&evicted);
        }
        map.insert(
            path.to_owned(),
            Entry {
                key,
                url: url.to_owned(),
                fetched: now,
                verified: false,
            },
        );
    }

    /// Marks `path` known: a message verified with `key`, its key.
    pub(super) fn verified(&self, path: &str, key: &Arc<PublicKey>) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = map.get_mut(path)
            && Arc::ptr_eq(&entry.key, key)
        {
            entry.verified = true;
        }
    }

    /// Whether the last fetch of `url` failed recently.
    pub(super) fn failed_recently(&self, url: &str, now: Instant) -> bool {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        match failures.get(url) {
            Some(at) if now.saturating_duration_since(*at) < self.failure_ttl => true,
            Some(_) => {
                failures.remove(url);
                false
            }
            None => false,
        }
    }

    /// Remembers that the fetch of `url` failed. Bounded like the keys, but
    /// apart: failures never evict a key.
    pub(super) fn failed(&self, url: &str, now: Instant) {
        if self.failure_ttl.is_zero() {
            return;
        }
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.len() >= self.capacity.max(1) && !failures.contains_key(url) {
            failures.retain(|_, at| now.saturating_duration_since(*at) < self.failure_ttl);
            if failures.len() >= self.capacity.max(1)
                && let Some(oldest) = failures
                    .iter()
                    .min_by_key(|(_, at)| **at)
                    .map(|(url, _)| url.clone())
            {
                failures.remove(&oldest);
            }
        }
        failures.insert(url.to_owned(), now);
    }

    /// The lock that serialises the fetches of `url`.
    pub(super) fn flight(&self, url: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(in_flight.entry(url.to_owned()).or_default())
    }

    /// Forgets the lock of `url` once nobody else holds or waits for it.
    pub(super) fn landed(&self, url: &str, flight: Arc<tokio::sync::Mutex<()>>) {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        // The map's reference and this one: nobody else has it.
        if Arc::strong_count(&flight) <= 2 {
            in_flight.remove(url);
        }
    }

    /// Takes one fetch from the known paths' budget, or from the others';
    /// `false` when it is spent.
    pub(super) fn may_fetch(&self, known: bool, now: Instant) -> bool {
        if known {
            self.known_budget.take(now)
        } else {
            self.new_budget.take(now)
        }
    }

    /// How many keys are held, fetched and pinned.
    pub(super) fn len(&self) -> (usize, usize) {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        (map.len(), self.pinned.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Arc<PublicKey> {
        let pem = include_str!("../../../tests/data/sns/test-cert.pem");
        Arc::new(super::super::fetch::certificate_key(pem.as_bytes()).unwrap())
    }

    fn cache(capacity: usize) -> KeyCache {
        KeyCache::new(CacheSettings {
            ttl: Duration::from_secs(60),
            stale_ttl: Duration::from_secs(60),
            capacity,
            failure_ttl: Duration::from_secs(30),
            new_rate: (1, Duration::from_secs(60)),
            known_rate: (1, Duration::from_secs(60)),
            pinned: HashMap::new(),
            declared: HashMap::new(),
        })
    }

    fn is_ready(lookup: Lookup) -> bool {
        matches!(lookup, Lookup::Ready { .. })
    }

    /// When full, a path that never verified goes before a known one,
    /// though the known one is older; keys past the stale window go first.
    #[test]
    fn eviction_keeps_known_paths() {
        let cache = cache(2);
        let now = Instant::now();
        let known = key();
        cache.insert("/known", "https://h/known", Arc::clone(&known), now);
        cache.verified("/known", &known);
        cache.insert(
            "/junk",
            "https://h/junk",
            key(),
            now + Duration::from_secs(1),
        );
        cache.insert("/new", "https://h/new", key(), now + Duration::from_secs(2));
        let later = now + Duration::from_secs(3);
        assert!(is_ready(cache.lookup("/known", later)));
        assert!(is_ready(cache.lookup("/new", later)));
        assert!(matches!(
            cache.lookup("/junk", later),
            Lookup::Fetch {
                stale: None,
                known: false,
                url: None
            }
        ));
        // Past the TTL: stale, known, refreshed from where it was fetched.
        let stale = now + Duration::from_secs(90);
        let Lookup::Fetch {
            stale: Some(_),
            known: true,
            url,
        } = cache.lookup("/known", stale)
        else {
            panic!("a stale known key");
        };
        assert_eq!(url.as_deref(), Some("https://h/known"));
        // Past the stale window: gone.
        let gone = now + Duration::from_secs(121);
        assert!(matches!(
            cache.lookup("/known", gone),
            Lookup::Fetch { stale: None, .. }
        ));
        assert_eq!(cache.len(), (1, 0));
    }

    /// The two budgets are apart: spending one leaves the other.
    #[test]
    fn budgets_are_apart() {
        let cache = cache(2);
        let now = Instant::now();
        assert!(cache.may_fetch(false, now));
        assert!(!cache.may_fetch(false, now));
        assert!(cache.may_fetch(true, now));
        assert!(!cache.may_fetch(true, now));
        let next = now + Duration::from_secs(60);
        assert!(cache.may_fetch(false, next));
    }
}
