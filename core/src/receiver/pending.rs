//! [`PendingCompletions`]: the completions this process retries in the
//! background, so that a redelivery records one instead of running the
//! handler again.

use std::sync::Arc;

use crate::dedup::ClaimToken;

/// The completions this process failed to record and retries in the
/// background, by key (see
/// [`Receiver::pending_first`](super::Receiver::pending_first)). Per
/// receiver: across processes the lease rule stands.
#[derive(Default)]
pub(super) struct PendingCompletions {
    /// How many are registered: the claim path looks no further at zero.
    count: std::sync::atomic::AtomicUsize,
    keys: std::sync::Mutex<std::collections::HashMap<Arc<str>, ClaimToken>>,
}

impl PendingCompletions {
    fn keys(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<Arc<str>, ClaimToken>> {
        self.keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers `key`'s completion with `token` until the guard is dropped.
    pub(super) fn register(
        self: &Arc<Self>,
        key: &Arc<str>,
        token: ClaimToken,
    ) -> PendingRegistration {
        if self.keys().insert(Arc::clone(key), token).is_none() {
            self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        PendingRegistration {
            pending: Arc::clone(self),
            key: Arc::clone(key),
            token,
        }
    }

    /// The token of `key`'s pending completion, if any.
    pub(super) fn token(&self, key: &str) -> Option<ClaimToken> {
        if self.count.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            return None;
        }
        self.keys().get(key).copied()
    }

    /// Whether `key`'s completion with `token` is still pending.
    pub(super) fn holds(&self, key: &str, token: ClaimToken) -> bool {
        self.token(key) == Some(token)
    }

    /// Unregisters `key`'s completion with `token` (not a later one's).
    pub(super) fn remove(&self, key: &str, token: ClaimToken) {
        let mut keys = self.keys();
        if keys.get(key) == Some(&token) {
            keys.remove(key);
            self.count.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// Unregisters a pending completion when its background retry ends.
pub(super) struct PendingRegistration {
    pending: Arc<PendingCompletions>,
    key: Arc<str>,
    token: ClaimToken,
}

impl Drop for PendingRegistration {
    fn drop(&mut self) {
        self.pending.remove(&self.key, self.token);
    }
}
