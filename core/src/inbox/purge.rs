//! The retention of completed events: a task purging them on a schedule.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::Inbox;

/// How long completed events are kept by default: 7 days, as the dedup
/// store keeps completed ids (senders retry for up to 3). A sender's retry
/// of a purged delivery is stored and processed again.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The youngest age a purge of completed events (console, admin API, CLI)
/// accepts without being forced: the `configured` minimum, never below
/// the longest retry window a provider documents plus a margin
/// ([`registry::longest_retention_floor`](crate::scheme::registry::longest_retention_floor),
/// 4 days: Stripe's and Square's 3 days plus one). A purge deletes every
/// scheme's completed events at once, and a completed event is the
/// inbox's memory of a processed delivery: a provider's retry of a purged
/// one would be stored and run again.
///
/// ```
/// use std::time::Duration;
/// use webhooks_core::inbox::purge_floor;
///
/// let day = Duration::from_secs(86_400);
/// assert_eq!(purge_floor(Duration::ZERO), 4 * day);
/// assert_eq!(purge_floor(14 * day), 14 * day);
/// ```
#[must_use]
pub fn purge_floor(configured: Duration) -> Duration {
    configured.max(crate::scheme::registry::longest_retention_floor())
}

/// How often the task [`inbox_from_url`](super::inbox_from_url) starts
/// purges: every hour (and once at start).
pub const DEFAULT_PURGE_INTERVAL: Duration = Duration::from_secs(3_600);

/// A task deleting the inbox's events completed more than the retention
/// ago ([`Inbox::purge_completed`]): at once, then every interval. It stops
/// when the handle is dropped (or [`stop`](Self::stop)ped), and by itself
/// once every handle on the inbox is gone.
///
/// [`inbox_from_url`](super::inbox_from_url) starts one (retention
/// [`DEFAULT_RETENTION`], or the URL's `retention`); an inbox built with a
/// builder purges only when told to: keep a handle from
/// [`spawn_purge`](Self::spawn) for as long as the inbox runs.
///
/// ```no_run
/// # #[cfg(feature = "postgres")]
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use webhooks_core::inbox::{DEFAULT_PURGE_INTERVAL, Inbox, PostgresInbox, PurgeTask};
///
/// let inbox = PostgresInbox::builder("postgres://app@db.internal/app").table("orders_inbox").connect().await?;
/// inbox.migrate().await?;
/// let inbox: Arc<dyn Inbox> = Arc::new(inbox);
/// let retention = std::time::Duration::from_secs(14 * 24 * 3600);
/// let purge = PurgeTask::spawn(&inbox, retention, DEFAULT_PURGE_INTERVAL);
/// # drop(purge); Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "dropping the PurgeTask stops the purge"]
pub struct PurgeTask {
    handle: Option<tokio::task::JoinHandle<()>>,
}

impl PurgeTask {
    /// Starts purging `inbox`'s events completed more than `retention` ago,
    /// now and then every `interval`. Failures are logged and retried at
    /// the next interval.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime.
    pub fn spawn(inbox: &Arc<dyn Inbox>, retention: Duration, interval: Duration) -> Self {
        let inbox: Weak<dyn Inbox> = Arc::downgrade(inbox);
        let handle = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval.max(Duration::from_millis(1)));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(inbox) = inbox.upgrade() else {
                    return;
                };
                match inbox.purge_completed(retention).await {
                    Ok(0) => {}
                    Ok(events) => tracing::debug!(events, "purged completed inbox events"),
                    Err(error) => {
                        tracing::warn!(error = %error, "purging completed inbox events failed");
                    }
                }
            }
        });
        Self {
            handle: Some(handle),
        }
    }

    /// Stops the task (an ongoing purge is abandoned: the store rolls it
    /// back or finishes it, both harmless).
    pub fn stop(self) {
        // Drop aborts.
    }

    /// Whether the task has stopped: told to, or every handle on the inbox
    /// is gone.
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.handle.as_ref().is_none_or(|h| h.is_finished())
    }

    /// Lets the task run on without this handle, until every handle on the
    /// inbox is gone (what [`inbox_from_url`](super::inbox_from_url) does).
    pub(crate) fn detach(mut self) {
        self.handle = None;
    }
}

impl Drop for PurgeTask {
    fn drop(&mut self) {
        if let Some(handle) = &self.handle {
            handle.abort();
        }
    }
}

/// The `retention` of an inbox URL: `off`, or a number with a unit
/// (`s`, `m`, `h`, `d`; seconds without one).
pub(crate) fn parse_retention(text: &str) -> Option<Option<Duration>> {
    if text.eq_ignore_ascii_case("off") {
        return Some(None);
    }
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = digits.parse().ok()?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return None,
    };
    let retention = Duration::from_secs(n.checked_mul(seconds)?);
    (!retention.is_zero()).then_some(Some(retention))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retentions_parse() {
        assert_eq!(parse_retention("off"), Some(None));
        assert_eq!(
            parse_retention("14d"),
            Some(Some(Duration::from_secs(14 * 86_400)))
        );
        assert_eq!(parse_retention("90"), Some(Some(Duration::from_secs(90))));
        assert_eq!(
            parse_retention("12h"),
            Some(Some(Duration::from_secs(43_200)))
        );
        for bad in ["", "0", "0d", "7w", "d", "-1d", "1.5d"] {
            assert_eq!(parse_retention(bad), None, "{bad}");
        }
    }
}
