//! Bulk actions on dead letters: replay or discard every one matching a
//! filter (scheme, event type, receipt time, [search](crate::inbox::search)),
//! at most a limit, in batches, with progress. The admin API
//! (`POST /dead-letters/bulk`), `webhooks inbox replay|discard --all` and the
//! console's "all matching" act through it.
//!
//! A bulk action is a series of small transitions, each committed as it is
//! made: a store failure, a restart or a dropped request stops it between
//! two of them, and running it again with the same filter continues with
//! what is left (replayed and discarded events are no longer dead
//! letters). Each transition is the store's own ([`Inbox::replay`],
//! [`Inbox::discard`]), so accepts and workers go on beside it.
//!
//! ```
//! use webhooks_core::inbox::DeadLetterFilter;
//! use webhooks_core::inbox::bulk::{self, BulkAction};
//!
//! # #[cfg(feature = "sqlite")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let inbox = webhooks_core::inbox::SqliteInbox::connect("sqlite::memory:").await?;
//! # inbox.migrate().await?;
//! let mut filter = DeadLetterFilter::default();
//! filter.search = Some("data.object.customer = cus_123".parse()?);
//! let (matched, more) = bulk::count(&inbox, &filter, 10_000).await?;
//! let done = bulk::run(&inbox, BulkAction::Replay, &filter, 10_000, |p| {
//!     eprintln!("{} of {matched} replayed", p.applied);
//! })
//! .await?;
//! assert_eq!((matched, more, done.progress.applied), (0, false, 0));
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "sqlite"))] fn main() {}
//! ```

use super::{ActionKind, DeadLetterFilter, Inbox, InboxError, Transition};

/// The most dead letters one bulk action changes unless configured.
pub const DEFAULT_BULK_LIMIT: u32 = 10_000;

/// The dead letters listed per batch.
pub const BULK_BATCH: u32 = 500;

/// What a bulk action does to each dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BulkAction {
    /// [`Inbox::replay`]: pending again, with a fresh attempt budget.
    Replay,
    /// [`Inbox::discard`]: deleted.
    Discard,
}

impl BulkAction {
    /// `replay` or `discard`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Replay => "replay",
            Self::Discard => "discard",
        }
    }

    /// The action of `replay` or `discard`.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "replay" => Some(Self::Replay),
            "discard" => Some(Self::Discard),
            _ => None,
        }
    }

    /// Its kind in the action log.
    #[must_use]
    pub const fn kind(self) -> ActionKind {
        match self {
            Self::Replay => ActionKind::Replay,
            Self::Discard => ActionKind::Discard,
        }
    }

    /// Carries it out on one dead letter.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the store cannot answer.
    pub async fn apply(self, inbox: &dyn Inbox, key: &str) -> Result<Transition, InboxError> {
        match self {
            Self::Replay => inbox.replay(key).await,
            Self::Discard => inbox.discard(key).await,
        }
    }
}

/// How far a bulk action got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BulkProgress {
    /// Matching dead letters reached.
    pub matched: u64,
    /// Of those, changed.
    pub applied: u64,
    /// Of those, no longer dead letters when reached (another action got
    /// there first).
    pub skipped: u64,
}

/// What a bulk action did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BulkOutcome {
    /// The counts.
    pub progress: BulkProgress,
    /// Whether it stopped at the limit with more matching dead letters
    /// left (run it again for them).
    pub reached_limit: bool,
}

/// How many dead letters match `filter`, at most `limit`, and whether more
/// do.
///
/// # Errors
///
/// [`InboxError`] when the store cannot answer.
pub async fn count(
    inbox: &dyn Inbox,
    filter: &DeadLetterFilter,
    limit: u32,
) -> Result<(u64, bool), InboxError> {
    let mut filter = DeadLetterFilter {
        after: None,
        limit: Some(BULK_BATCH),
        ..filter.clone()
    };
    let mut matched = 0_u64;
    loop {
        let page = inbox.dead_letters(&filter).await?;
        matched += page.items.len() as u64;
        if matched > u64::from(limit) {
            return Ok((u64::from(limit), true));
        }
        match page.next {
            Some(next) => filter.after = Some(next),
            None => return Ok((matched, false)),
        }
    }
}

/// Replays or discards the dead letters matching `filter`, oldest first, at
/// most `limit`, listing [`BULK_BATCH`] at a time; `progress` hears after
/// each batch.
///
/// # Errors
///
/// [`InboxError`] when the store cannot answer: what was done so far stays
/// done (run it again to continue).
pub async fn run(
    inbox: &dyn Inbox,
    action: BulkAction,
    filter: &DeadLetterFilter,
    limit: u32,
    mut progress: impl FnMut(&BulkProgress),
) -> Result<BulkOutcome, InboxError> {
    let mut filter = DeadLetterFilter {
        after: None,
        limit: Some(BULK_BATCH),
        ..filter.clone()
    };
    let mut outcome = BulkOutcome::default();
    loop {
        let page = inbox.dead_letters(&filter).await?;
        for dead in &page.items {
            if outcome.progress.matched == u64::from(limit) {
                outcome.reached_limit = true;
                progress(&outcome.progress);
                return Ok(outcome);
            }
            outcome.progress.matched += 1;
            match action.apply(inbox, &dead.meta.key).await? {
                Transition::Applied => outcome.progress.applied += 1,
                _ => outcome.progress.skipped += 1,
            }
        }
        progress(&outcome.progress);
        match page.next {
            Some(next) => filter.after = Some(next),
            None => return Ok(outcome),
        }
    }
}

/// A filter as the action log names it: `filter: scheme=stripe
/// event_type=invoice.paid where data.object.customer = cus_123` (what it
/// holds; `every dead letter` when nothing).
#[must_use]
pub fn filter_text(filter: &DeadLetterFilter) -> String {
    let mut text = String::from("filter:");
    let start = text.len();
    if let Some(scheme) = &filter.scheme {
        text.push_str(&format!(" scheme={scheme}"));
    }
    if let Some(kind) = &filter.event_type {
        text.push_str(&format!(" event_type={kind}"));
    }
    for (name, at) in [
        ("from", filter.received_from),
        ("until", filter.received_until),
    ] {
        if let Some(at) = at {
            text.push_str(&format!(" {name}={}", super::to_ms(at) / 1_000));
        }
    }
    if let Some(search) = &filter.search {
        text.push_str(&format!(" where {search}"));
    }
    if text.len() == start {
        text.push_str(" every dead letter");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_named() {
        let mut filter = DeadLetterFilter::default();
        assert_eq!(filter_text(&filter), "filter: every dead letter");
        filter.scheme = Some("stripe".into());
        filter.search = Some(
            "error ~ timed out"
                .parse()
                .unwrap_or_else(|e| panic!("{e}")),
        );
        assert_eq!(
            filter_text(&filter),
            "filter: scheme=stripe where error ~ \"timed out\""
        );
        assert_eq!(BulkAction::parse("discard"), Some(BulkAction::Discard));
        assert_eq!(BulkAction::Replay.kind(), ActionKind::Replay);
    }
}
