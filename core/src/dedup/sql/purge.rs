//! The SQL stores' background purge ([`PurgeTask`]) and the store with its
//! purge task that [`store_from_url`](crate::dedup::store_from_url) returns.

use std::future::Future;
use std::time::Duration;

use crate::dedup::{Claim, StoreError};

/// A background task that purges expired rows; see `spawn_purge` on the SQL
/// stores.
///
/// Dropping the handle (or calling [`stop`](Self::stop)) stops the task.
#[derive(Debug)]
#[must_use = "dropping the PurgeTask stops the purge"]
pub struct PurgeTask {
    handle: tokio::task::JoinHandle<()>,
}

impl PurgeTask {
    /// Spawns `purge` every `interval`, logging its failures.
    pub(crate) fn spawn<F, Fut>(interval: Duration, backend: &'static str, mut purge: F) -> Self
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Result<u64, StoreError>> + Send + 'static,
    {
        let handle = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval.max(Duration::from_millis(1)));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                match purge().await {
                    Ok(0) => {}
                    Ok(rows) => tracing::debug!(backend, rows, "purged expired dedup rows"),
                    Err(error) => {
                        tracing::warn!(backend, error = %error, "purging expired dedup rows failed");
                    }
                }
            }
        });
        Self { handle }
    }

    /// Stops the task (an ongoing purge statement is abandoned; the database
    /// rolls it back or finishes it, both harmless).
    pub fn stop(self) {
        // Drop aborts.
    }

    /// Whether the task has stopped (it only stops when told to, or if the
    /// runtime shuts down).
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

impl Drop for PurgeTask {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

/// How often the stores opened by [`store_from_url`](crate::dedup::store_from_url) purge.
pub const URL_PURGE_INTERVAL: Duration = Duration::from_secs(3_600);

/// A store with its purge task: the task stops when the last handle on the
/// store is dropped. What [`store_from_url`](crate::dedup::store_from_url)
/// returns for the SQL backends.
pub(crate) struct Purging<S> {
    store: S,
    _purge: PurgeTask,
}

impl<S> Purging<S> {
    pub(crate) fn new(store: S, purge: PurgeTask) -> Self {
        Self {
            store,
            _purge: purge,
        }
    }
}

#[async_trait::async_trait]
impl<S: crate::dedup::DedupStore> crate::dedup::DedupStore for Purging<S> {
    async fn claim(
        &self,
        key: &str,
        token: crate::dedup::ClaimToken,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        self.store.claim(key, token, lease).await
    }
    async fn complete(
        &self,
        key: &str,
        token: crate::dedup::ClaimToken,
        retention: Duration,
    ) -> Result<crate::dedup::Transition, StoreError> {
        self.store.complete(key, token, retention).await
    }
    async fn complete_in_lease(
        &self,
        key: &str,
        token: crate::dedup::ClaimToken,
        retention: Duration,
        lease_left: Duration,
    ) -> Result<crate::dedup::Transition, StoreError> {
        self.store
            .complete_in_lease(key, token, retention, lease_left)
            .await
    }
    async fn release(
        &self,
        key: &str,
        token: crate::dedup::ClaimToken,
    ) -> Result<crate::dedup::Transition, StoreError> {
        self.store.release(key, token).await
    }
    async fn extend(
        &self,
        key: &str,
        token: crate::dedup::ClaimToken,
        lease: Duration,
    ) -> Result<crate::dedup::Transition, StoreError> {
        self.store.extend(key, token, lease).await
    }
}
