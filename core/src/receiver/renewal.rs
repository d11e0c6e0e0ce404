//! The lease renewal task of a claim whose handler runs long.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::Either;
use tokio::sync::oneshot;

use super::admission::Observer;
use crate::dedup::{ClaimToken, DedupStore, Transition};
use crate::signals::StoreOp;

/// The shortest interval between two lease renewals.
pub(super) const MIN_RENEWAL: Duration = Duration::from_millis(10);

/// A running renewal task's handles.
pub(super) struct Renewal {
    /// `true` once settled. The renewal holds it while it calls `extend`, so
    /// a renewal never races a settlement into a misleading "taken over".
    pub(super) settled: Arc<tokio::sync::Mutex<bool>>,
    /// Dropped (with the settlement) to stop the renewal task.
    pub(super) _stop: oneshot::Sender<()>,
}

/// Renews the lease every third of it until stopped, settled, or taken over.
pub(super) async fn renew(
    store: Arc<dyn DedupStore>,
    key: Arc<str>,
    token: ClaimToken,
    lease: Duration,
    settled: Arc<tokio::sync::Mutex<bool>>,
    mut stop: oneshot::Receiver<()>,
    observer: Observer,
) {
    let every = (lease / 3).max(MIN_RENEWAL);
    let mut first = true;
    loop {
        // Started one interval after the claim: renew at once, then every interval.
        if !std::mem::take(&mut first) {
            let beat = std::pin::pin!(tokio::time::sleep(every));
            if let Either::Left(_) = futures_util::future::select(&mut stop, beat).await {
                return;
            }
        }
        let settled = settled.lock().await;
        if *settled {
            return;
        }
        match (*store).extend(&key, token, lease).await {
            Ok(Transition::Applied) => tracing::trace!(key = %key, "lease renewed"),
            Ok(Transition::Stale) => {
                tracing::warn!(key = %key, "lease renewal refused: the lease ran out and another attempt took over; this attempt's completion will be refused");
                return;
            }
            Err(error) => {
                observer.store_error(StoreOp::Extend);
                tracing::error!(key = %key, error = %error, "lease renewal failed; trying again at the next renewal");
            }
        }
    }
}
