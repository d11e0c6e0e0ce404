//! Per-minute activity: what [`Inbox::activity`](super::Inbox::activity)
//! answers, counted in the inbox's own store by every process that uses it.
//!
//! | kind | counted when |
//! |---|---|
//! | accepted | [`accept`](super::Inbox::accept) stored a new event (not a duplicate) |
//! | completed | a leased event was completed ([`complete`](super::Inbox::complete), [`complete_many`](super::Inbox::complete_many), a transactional completion that committed) |
//! | failed | an attempt ended in a [`retry`](super::Inbox::retry) or a dead letter ([`dead_letter`](super::Inbox::dead_letter), or a lease that expired on its last attempt) |
//!
//! A stale transition (a token that no longer holds the event) counts
//! nothing; a hand-back ([`release`](super::Inbox::release)), a replay or a
//! discard is no activity. The minute is the store's clock.
//!
//! | backend | where | cost per operation |
//! |---|---|---|
//! | SQL | `<table>_activity` (`minute`, `kind` 1 accepted / 2 completed / 3 failed, `slot`, `n`), upserted by row triggers on the inbox table, in the statement that changed the row | one upsert of a small row per transitioned row, in the same statement and transaction: no extra round trip |
//! | Redis | a hash per minute (`<prefix>m:<minute>`, fields `a`, `c`, `f`), kept 2 hours | one `HINCRBY` inside the operation's script (and an `EXPIRE` when a field is first written in a minute) |
//! | Redis Cluster | the same hash per partition (in the partition's slot), summed when read | as Redis |
#![cfg_attr(
    not(any(feature = "redis", feature = "_sql", feature = "nats")),
    allow(dead_code)
)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The most minutes [`Inbox::activity`](super::Inbox::activity) answers (and
/// the console charts): one hour.
pub const ACTIVITY_MINUTES: u32 = 60;

/// How long a minute's counters are kept in the store (Redis: the keys'
/// time to live; SQL: what [`Inbox::purge_completed`](super::Inbox::purge_completed)
/// keeps).
pub const ACTIVITY_RETENTION: Duration = Duration::from_secs(2 * 60 * 60);

/// One minute's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ActivityMinute {
    /// When the minute began (the store's clock, a whole minute since the epoch).
    pub start: SystemTime,
    /// New events stored.
    pub accepted: u64,
    /// Events completed.
    pub completed: u64,
    /// Attempts that ended in a retry or a dead letter.
    pub failed: u64,
}

/// Per-minute counts over the last minutes, oldest first: the last entry is
/// the current (unfinished) minute. Every minute is present, idle ones with
/// zeros.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Activity {
    /// One entry per minute, oldest first.
    pub minutes: Vec<ActivityMinute>,
}

impl Activity {
    /// The sums over every minute: (accepted, completed, failed).
    #[must_use]
    pub fn totals(&self) -> (u64, u64, u64) {
        self.minutes.iter().fold((0, 0, 0), |(a, c, f), m| {
            (a + m.accepted, c + m.completed, f + m.failed)
        })
    }

    /// The current (last) minute, if any.
    #[must_use]
    pub fn current(&self) -> Option<&ActivityMinute> {
        self.minutes.last()
    }

    /// The largest count of any kind in any minute (the chart's scale).
    #[must_use]
    pub fn peak(&self) -> u64 {
        self.minutes
            .iter()
            .map(|m| m.accepted.max(m.completed).max(m.failed))
            .max()
            .unwrap_or(0)
    }

    /// A zero-filled series of `minutes` minutes ending with `now_minute`
    /// (minutes since the epoch), with the `(minute, kind, count)` rows
    /// added (kind [`ACCEPTED`], [`COMPLETED`] or [`FAILED`]; other
    /// minutes and kinds are ignored).
    pub(crate) fn from_rows(
        now_minute: i64,
        minutes: u32,
        rows: impl IntoIterator<Item = (i64, i64, i64)>,
    ) -> Self {
        let minutes = clamp_minutes(minutes);
        let first = now_minute - i64::from(minutes) + 1;
        let mut out: Vec<ActivityMinute> = (first..=now_minute)
            .map(|m| ActivityMinute {
                start: UNIX_EPOCH
                    + Duration::from_secs(u64::try_from(m).unwrap_or(0).saturating_mul(60)),
                accepted: 0,
                completed: 0,
                failed: 0,
            })
            .collect();
        for (minute, kind, n) in rows {
            let Some(slot) = usize::try_from(minute - first)
                .ok()
                .and_then(|i| out.get_mut(i))
            else {
                continue;
            };
            let n = u64::try_from(n).unwrap_or(0);
            match kind {
                ACCEPTED => slot.accepted += n,
                COMPLETED => slot.completed += n,
                FAILED => slot.failed += n,
                _ => {}
            }
        }
        Self { minutes: out }
    }
}

/// The stored kind of an accepted event.
pub(crate) const ACCEPTED: i64 = 1;
/// The stored kind of a completion.
pub(crate) const COMPLETED: i64 = 2;
/// The stored kind of a failed attempt.
pub(crate) const FAILED: i64 = 3;

/// `minutes` within 1 ..= [`ACTIVITY_MINUTES`].
pub(crate) fn clamp_minutes(minutes: u32) -> u32 {
    minutes.clamp(1, ACTIVITY_MINUTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_is_zero_filled_and_ends_now() {
        let rows = vec![
            (1000, ACCEPTED, 3),
            (1000, COMPLETED, 2),
            (999, FAILED, 1),
            (900, ACCEPTED, 7),
            (1000, 0, 9),
        ];
        let activity = Activity::from_rows(1000, 60, rows);
        assert_eq!(activity.minutes.len(), 60);
        let now = activity.current().unwrap();
        assert_eq!((now.accepted, now.completed, now.failed), (3, 2, 0));
        assert_eq!(now.start, UNIX_EPOCH + Duration::from_secs(60_000));
        assert_eq!(activity.minutes[58].failed, 1);
        assert_eq!(activity.totals(), (3, 2, 1));
        assert_eq!(activity.peak(), 3);
        assert_eq!(Activity::from_rows(1000, 500, []).minutes.len(), 60);
        assert_eq!(Activity::from_rows(1000, 0, []).minutes.len(), 1);
    }
}
