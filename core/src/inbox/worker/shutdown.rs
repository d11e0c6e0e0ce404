//! Stopping workers: [`Shutdown`] and the [`ShutdownSignal`] they watch.

use std::sync::Arc;

use tokio::sync::watch;

/// Tells workers to stop: each finishes the event it is running and hands
/// the rest of its batch back. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Shutdown {
    sender: Arc<watch::Sender<bool>>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    /// A shutdown not triggered yet.
    #[must_use]
    pub fn new() -> Self {
        Self {
            sender: Arc::new(watch::channel(false).0),
        }
    }

    /// Triggers it.
    pub fn trigger(&self) {
        self.sender.send_replace(true);
    }

    /// What workers watch.
    #[must_use]
    pub fn signal(&self) -> ShutdownSignal {
        ShutdownSignal {
            receiver: self.sender.subscribe(),
        }
    }
}

/// The watching side of a [`Shutdown`].
#[derive(Debug, Clone)]
pub struct ShutdownSignal {
    receiver: watch::Receiver<bool>,
}

impl ShutdownSignal {
    /// Whether shutdown was triggered (or its `Shutdown` is gone: nothing
    /// can stop the worker any more, so it stops).
    #[must_use]
    pub fn is_triggered(&self) -> bool {
        *self.receiver.borrow() || self.receiver.has_changed().is_err()
    }

    /// Resolves once shutdown is triggered (or its `Shutdown` is gone).
    pub async fn triggered(&mut self) {
        let _ = self.receiver.wait_for(|stop| *stop).await;
    }
}
