//! The [`ClaimGuard`] on a claimed delivery and its settlement: completion
//! (retried in the background when the store fails) or release, finished
//! even when the request's future is dropped halfway.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::Inner;
use super::admission::Observer;
use super::detached::Detached;
use super::pending::PendingCompletions;
use super::renewal::{MIN_RENEWAL, Renewal, renew};
use crate::dedup::{ClaimToken, DedupStore, StoreError, Transition};
use crate::signals::StoreOp;

/// The first wait before a failed `complete` is tried again.
const FIRST_COMPLETE_RETRY: Duration = Duration::from_millis(100);
/// The longest wait between two tries of a failed `complete`.
const MAX_COMPLETE_RETRY: Duration = Duration::from_secs(10);

/// One attempt's claim on a delivery.
///
/// Once [started](Self::start_renewal) (by [`Admission::run`] when the
/// handler outlives a third of the lease), a background task renews the
/// lease every third of it ([`DedupStore::extend`]), so a slow handler keeps
/// its delivery; if a renewal finds that another attempt took over, it stops
/// and says so in the log (the later `complete` is then refused by the store).
///
/// [`complete`](Self::complete) or [`release`](Self::release) it. Both run in
/// the caller's task; if the caller's future is dropped before the
/// settlement finished, the rest of it runs as a task on the tokio runtime,
/// so it still finishes. A `complete` that
/// fails is retried in the background with backoff (see
/// [`ReceiverBuilder::complete_retry`]). When the guard is dropped unsettled
/// (the request future was dropped mid-handler), it releases the claim in
/// the background, best effort.
///
/// [`Admission::run`]: super::Admission::run
/// [`ReceiverBuilder::complete_retry`]: super::ReceiverBuilder::complete_retry
pub struct ClaimGuard {
    key: Arc<str>,
    token: ClaimToken,
    settle: Option<Settle>,
}

impl fmt::Debug for ClaimGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClaimGuard")
            .field("key", &self.key)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

/// What settling a claim needs; owned by the settling task once settled.
///
/// The receiver's settings (lease, retention, complete retry), its signals
/// and its pending completions are read through `receiver`: one reference
/// count instead of a copy of each, which keeps a guard small enough
/// (120 bytes) to be moved between the pipeline's steps without a `memcpy`
/// call.
struct Settle {
    store: Arc<dyn DedupStore>,
    key: Arc<str>,
    token: ClaimToken,
    /// The renewal task's handles, once it started (most claims settle
    /// before: they pay for neither).
    renewal: Option<Renewal>,
    /// When the claim was sent (read before it): the lease runs at most
    /// `lease` from then, by the store's clock as by this one.
    claimed_at: Instant,
    /// The receiver whose claim it is.
    receiver: Arc<Inner>,
}

impl ClaimGuard {
    /// A guard on a fresh claim, sent at `claimed_at`.
    pub(super) fn start(
        store: Arc<dyn DedupStore>,
        key: &str,
        token: ClaimToken,
        claimed_at: Instant,
        receiver: &Arc<Inner>,
    ) -> Self {
        let key: Arc<str> = Arc::from(key);
        Self {
            key: Arc::clone(&key),
            token,
            settle: Some(Settle {
                store,
                key,
                token,
                claimed_at,
                renewal: None,
                receiver: Arc::clone(receiver),
            }),
        }
    }

    /// The namespaced key the delivery was claimed under.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    /// How often the lease is renewed: a third of the lease (at least 10 ms).
    #[must_use]
    pub fn renewal_interval(&self) -> Duration {
        self.settle
            .as_ref()
            .map_or(MIN_RENEWAL, |s| (s.receiver.lease / 3).max(MIN_RENEWAL))
    }

    /// Starts renewing the lease in the background now, then every
    /// [`renewal_interval`](Self::renewal_interval), until the claim is
    /// settled or another attempt took over. [`Admission::run`] calls it
    /// when the handler is still running after one interval; call it
    /// yourself when you settle the guard without `run`. Idempotent.
    ///
    /// [`Admission::run`]: super::Admission::run
    pub fn start_renewal(&mut self) {
        if let Some(settle) = self.settle.as_mut() {
            settle.start_renewal();
        }
    }

    /// Marks the delivery processed. Returns whether the first try applied;
    /// a stale claim (another attempt took over) is logged and changes
    /// nothing, a store error is logged and the completion retried in the
    /// background.
    pub async fn complete(mut self) -> bool {
        if let Some(applied) = self.complete_ready() {
            return applied;
        }
        let Some(settle) = self.settle.take() else {
            return false;
        };
        if tokio::runtime::Handle::try_current().is_err() {
            // No runtime to retry on: one try, here (boxed: this rare path
            // must not grow every request's future).
            return Box::pin(settle.complete()).await;
        }
        // The first try runs here (or, if this future is dropped first, as
        // a runtime task); retries of a failed one run as a runtime task.
        Detached::new(settle.complete()).await.unwrap_or(false)
    }

    /// Whether the lease renewal runs.
    pub(super) fn renewing(&self) -> bool {
        self.settle.as_ref().is_some_and(|s| s.renewal.is_some())
    }

    /// Completes at once, when the store answers without I/O (the
    /// in-process one) and no renewal runs: then nothing awaits, so nothing
    /// can be dropped halfway, and neither a boxed future nor a detached
    /// settlement is needed. `None` when [`complete`](Self::complete) must
    /// be awaited.
    pub(super) fn complete_ready(&mut self) -> Option<bool> {
        let settle = self.settle.as_ref()?;
        if settle.renewal.is_some() {
            return None;
        }
        let result =
            settle
                .store
                .complete_ready(&settle.key, settle.token, settle.receiver.retention)?;
        let settle = self.settle.take()?;
        Some(settle.completed(result))
    }

    /// Forgets the claim so the sender's retry can run. Returns whether the
    /// claim still held.
    pub async fn release(mut self) -> bool {
        let Some(settle) = self.settle.take() else {
            return false;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(_) => Detached::new(settle.release()).await.unwrap_or(false),
            Err(_) => Box::pin(settle.release()).await,
        }
    }
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        let Some(settle) = self.settle.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(key = %self.key, "claim dropped outside a runtime; the lease will expire instead");
            return;
        };
        runtime.spawn(async move {
            let key = Arc::clone(&settle.key);
            if !settle.release().await {
                tracing::debug!(key = %key, "release after a dropped request changed nothing");
            }
        });
    }
}

impl Settle {
    /// Where this claim's store failures and lost leases are reported.
    fn observer(&self) -> Observer {
        Observer {
            signals: Arc::clone(&self.receiver.signals),
            scheme: self.receiver.verifier.scheme(),
        }
    }

    /// Starts the renewal task, unless it runs already or there is no runtime.
    fn start_renewal(&mut self) {
        if self.renewal.is_some() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (stop, stopped) = oneshot::channel();
        let settled = Arc::new(tokio::sync::Mutex::new(false));
        runtime.spawn(renew(
            Arc::clone(&self.store),
            Arc::clone(&self.key),
            self.token,
            self.receiver.lease,
            Arc::clone(&settled),
            stopped,
            self.observer(),
        ));
        self.renewal = Some(Renewal {
            settled,
            _stop: stop,
        });
    }

    /// One try at `complete`, with `settled` set as its outcome says under
    /// the renewal's lock (if a renewal runs).
    ///
    /// Before any renewal, the store is told how much of the lease is left
    /// ([`DedupStore::complete_in_lease`]: Redis then skips the token
    /// check); once renewals run, the lease moves and `complete` checks.
    async fn try_complete(&self) -> Result<Transition, StoreError> {
        let Some(renewal) = &self.renewal else {
            let lease_left = (self.receiver.lease).saturating_sub(self.claimed_at.elapsed());
            return (*self.store)
                .complete_in_lease(&self.key, self.token, self.receiver.retention, lease_left)
                .await;
        };
        let complete = (*self.store).complete(&self.key, self.token, self.receiver.retention);
        let mut settled = renewal.settled.lock().await;
        let result = complete.await;
        *settled = !matches!(&result, Err(e) if !e.is_permanent());
        result
    }

    /// Completes; returns whether the first try applied. A try that failed
    /// for a reason that may pass is retried with backoff for up to
    /// `complete_retry`, as a runtime task (when there is a runtime).
    async fn complete(self) -> bool {
        let result = self.try_complete().await;
        self.completed(result)
    }

    /// Handles the first try's `result`: logs a stale claim; counts, logs and
    /// (as a runtime task) retries a failure that may pass.
    fn completed(self, result: Result<Transition, StoreError>) -> bool {
        match result {
            Ok(Transition::Applied) => true,
            Ok(Transition::Stale) => {
                self.observer().lease_lost();
                tracing::warn!(key = %self.key, "complete refused: another attempt took over the claim");
                false
            }
            Err(error) => {
                self.complete_failed(&error);
                if !error.is_permanent() {
                    match tokio::runtime::Handle::try_current() {
                        Ok(runtime) => drop(runtime.spawn(self.retry_complete(error))),
                        Err(_) => {
                            tracing::error!(key = %self.key, error = %error, "complete failed after a 2xx and there is no runtime to retry on; a retry may run the handler again")
                        }
                    }
                }
                false
            }
        }
    }

    /// Counts and logs a failed `complete` (a permanent refusal is final).
    fn complete_failed(&self, error: &StoreError) {
        self.observer().store_error(StoreOp::Complete);
        if error.is_permanent() {
            tracing::error!(key = %self.key, error = %error, "complete refused for good by the store; a retry may run the handler again");
        }
    }

    /// Retries a `complete` whose first try failed with `error`, with
    /// backoff, for up to `complete_retry`, the lease renewed meanwhile.
    async fn retry_complete(mut self, mut error: StoreError) {
        // Registered while it retries: a redelivery to this process records
        // it first instead of taking the claim over (`pending_first`).
        let _registered =
            PendingCompletions::register(&self.receiver.pending, &self.key, self.token);
        let started = Instant::now();
        let mut delay = FIRST_COMPLETE_RETRY;
        let mut attempt: u32 = 1;
        loop {
            if started.elapsed() + delay > self.receiver.complete_retry {
                tracing::error!(key = %self.key, error = %error, attempt, "complete failed after a 2xx; giving up, a retry may run the handler again");
                return;
            }
            // Keep the claim while the completion is retried (idempotent).
            self.start_renewal();
            tracing::error!(key = %self.key, error = %error, attempt, retry_in_ms = delay.as_millis() as u64, "complete failed after a 2xx; retrying in the background");
            tokio::time::sleep(delay).await;
            if !self.receiver.pending.holds(&self.key, self.token) {
                tracing::info!(key = %self.key, "complete recorded by a redelivery to this process");
                return;
            }
            delay = (delay * 2).min(MAX_COMPLETE_RETRY);
            attempt += 1;
            match self.try_complete().await {
                Ok(Transition::Applied) => {
                    tracing::info!(key = %self.key, attempt, "complete succeeded on a retry");
                    return;
                }
                Ok(Transition::Stale) => {
                    self.observer().lease_lost();
                    tracing::warn!(key = %self.key, "complete refused: another attempt took over the claim");
                    return;
                }
                Err(next) => {
                    self.complete_failed(&next);
                    if next.is_permanent() {
                        return;
                    }
                    error = next;
                }
            }
        }
    }

    /// Releases once; a failure leaves the lease to expire.
    async fn release(self) -> bool {
        let _settled = match &self.renewal {
            Some(renewal) => {
                let mut settled = renewal.settled.lock().await;
                *settled = true;
                Some(settled)
            }
            None => None,
        };
        match (*self.store).release(&self.key, self.token).await {
            Ok(Transition::Applied) => true,
            Ok(Transition::Stale) => {
                self.observer().lease_lost();
                tracing::warn!(key = %self.key, "release refused: another attempt took over the claim");
                false
            }
            Err(error) => {
                self.observer().store_error(StoreOp::Release);
                tracing::error!(key = %self.key, error = %error, "release failed; the lease will expire instead");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A guard is moved at every step between the claim and the handler's
    /// end (into the admission, the running handler, its settlement): at
    /// 128 bytes or less the compiler moves it with a few vector stores
    /// instead of a `memcpy` call (it was 192 bytes with the receiver's
    /// settings copied in).
    #[test]
    fn a_guard_moves_without_a_memcpy_call() {
        let size = std::mem::size_of::<Option<ClaimGuard>>();
        assert!(size <= 128, "a claim guard is {size} bytes");
    }
}
