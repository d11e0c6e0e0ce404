//! [`Detached`]: settlement work that runs in the request's task, and as a
//! runtime task once that task drops it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Work that runs in the task that polls it, until that task drops it:
/// then whatever is left runs to its end as a task on the tokio runtime.
///
/// Settling a claim this way costs one allocation where a spawned task costs
/// a task, a scheduling round and a wake-up, yet survives the request's
/// future being dropped halfway, like a spawned task.
pub(super) struct Detached<T: Send + 'static> {
    work: Option<Pin<Box<dyn Future<Output = T> + Send>>>,
}

impl<T: Send + 'static> Detached<T> {
    pub(super) fn new(work: impl Future<Output = T> + Send + 'static) -> Self {
        Self {
            work: Some(Box::pin(work)),
        }
    }
}

impl<T: Send + 'static> Future for Detached<T> {
    /// `None` once finished (polled again after its output was taken).
    type Output = Option<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let Some(work) = self.work.as_mut() else {
            return Poll::Ready(None);
        };
        let output = std::task::ready!(work.as_mut().poll(cx));
        self.work = None;
        Poll::Ready(Some(output))
    }
}

impl<T: Send + 'static> Drop for Detached<T> {
    fn drop(&mut self) {
        if let Some(work) = self.work.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn(work)),
                Err(_) => tracing::warn!(
                    "a claim's settlement was dropped outside a runtime; its lease will expire instead"
                ),
            }
        }
    }
}
