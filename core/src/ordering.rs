//! Ordering events by when they happened, not by when they arrived.
//!
//! Senders retry, run in parallel and reorder: a `delivered` sent at 10:00:01
//! may arrive after the `bounced` sent at 10:00:05. Applying events in arrival
//! order then leaves the wrong state. This module decides from the event's own
//! timestamp instead, with *terminal* statuses that end a lifecycle:
//!
//! * among non-terminal statuses, the latest timestamp wins; at the same
//!   timestamp, the higher [`rank`](Status::rank) (the later lifecycle stage);
//! * a terminal status beats every non-terminal one, whatever their timestamps:
//!   nothing reverts it;
//! * among terminal statuses, the *first* one (earliest timestamp, then higher
//!   rank) wins: the lifecycle ended there, and a late-arriving earlier
//!   terminal event replaces a later one because it happened first.
//!
//! The rule is a maximum over a total order, so the final state does not depend
//! on the order events arrive in, and applying an event twice changes nothing.
//!
//! ```
//! use webhooks_core::ordering::{Decision, Status, StatusTracker};
//!
//! #[derive(Debug, Clone, Copy, PartialEq, Eq)]
//! enum Delivery { Sent, Delivered, Bounced }
//!
//! impl Status for Delivery {
//!     fn rank(&self) -> u8 { *self as u8 }
//!     fn is_terminal(&self) -> bool { matches!(self, Self::Bounced) }
//! }
//!
//! let mut tracker = StatusTracker::new();
//! assert_eq!(tracker.observe(Delivery::Sent, 100), Decision::Advance);
//! assert_eq!(tracker.observe(Delivery::Bounced, 105), Decision::Advance);
//! // A late `delivered` (its own timestamp is later, but bounced is terminal):
//! assert_eq!(tracker.observe(Delivery::Delivered, 110), Decision::Keep);
//! // A duplicate changes nothing either:
//! assert_eq!(tracker.observe(Delivery::Bounced, 105), Decision::Keep);
//! assert_eq!(tracker.status(), Some(Delivery::Bounced));
//! ```
//!
//! Store the current [`Timestamped`] status next to your record and call
//! [`Timestamped::supersedes`] (or [`decide`]) in the transaction that applies
//! an incoming event.

use std::cmp::Ordering;

/// A status with a place in a lifecycle.
pub trait Status {
    /// Breaks ties between events with the same timestamp: the later stage of
    /// the lifecycle has the higher rank (`sent` < `delivered`). Give distinct
    /// statuses distinct ranks so that the outcome never depends on arrival.
    fn rank(&self) -> u8;

    /// Whether this status ends the lifecycle (`bounced`, `complained`):
    /// no later event reverts it.
    fn is_terminal(&self) -> bool;
}

/// A status and the time its event happened (by the sender's clock).
///
/// `T` is any ordered timestamp: Unix seconds or milliseconds, a date-time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Timestamped<S, T = u64> {
    /// The status the event reports.
    pub status: S,
    /// When the event happened.
    pub at: T,
}

impl<S: Status, T: Ord> Timestamped<S, T> {
    /// A status observed at `at`.
    pub fn new(status: S, at: T) -> Self {
        Self { status, at }
    }

    /// Whether this (incoming) status should replace `current`.
    ///
    /// False for an exact duplicate, so re-applying an event is a no-op.
    ///
    /// ```
    /// # use webhooks_core::ordering::{Status, Timestamped};
    /// # #[derive(Clone, Copy)] struct S(u8, bool);
    /// # impl Status for S { fn rank(&self) -> u8 { self.0 } fn is_terminal(&self) -> bool { self.1 } }
    /// let delivered = Timestamped::new(S(2, false), 20);
    /// let deferred_earlier = Timestamped::new(S(1, false), 15);
    /// assert!(!deferred_earlier.supersedes(&delivered));
    /// assert!(delivered.supersedes(&deferred_earlier));
    /// ```
    pub fn supersedes(&self, current: &Self) -> bool {
        self.precedence(current) == Ordering::Greater
    }

    /// The total order the module documentation describes: `Greater` when
    /// `self` wins over `other`.
    fn precedence(&self, other: &Self) -> Ordering {
        match (self.status.is_terminal(), other.status.is_terminal()) {
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            // Both non-terminal: the latest event wins, then the later stage.
            (false, false) => self
                .at
                .cmp(&other.at)
                .then_with(|| self.status.rank().cmp(&other.status.rank())),
            // Both terminal: the first event wins, then the later stage.
            (true, true) => other
                .at
                .cmp(&self.at)
                .then_with(|| self.status.rank().cmp(&other.status.rank())),
        }
    }
}

/// What to do with an incoming status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Decision {
    /// The incoming status becomes the current one.
    Advance,
    /// The current status stays (the incoming event is older, a duplicate, or
    /// the current status is terminal).
    Keep,
}

/// Decides whether `incoming` replaces `current` (`None`: nothing seen yet).
pub fn decide<S: Status, T: Ord>(
    current: Option<&Timestamped<S, T>>,
    incoming: &Timestamped<S, T>,
) -> Decision {
    match current {
        Some(current) if !incoming.supersedes(current) => Decision::Keep,
        _ => Decision::Advance,
    }
}

/// The current status of one entity, fed events in any order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusTracker<S, T = u64> {
    current: Option<Timestamped<S, T>>,
}

impl<S, T> Default for StatusTracker<S, T> {
    fn default() -> Self {
        Self { current: None }
    }
}

impl<S: Status + Copy, T: Ord + Copy> StatusTracker<S, T> {
    /// A tracker that has seen nothing.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A tracker resumed from a stored state.
    #[must_use]
    pub fn from_current(current: Option<Timestamped<S, T>>) -> Self {
        Self { current }
    }

    /// Feeds one event; returns whether it became the current status.
    pub fn observe(&mut self, status: S, at: T) -> Decision {
        let incoming = Timestamped::new(status, at);
        let decision = decide(self.current.as_ref(), &incoming);
        if decision == Decision::Advance {
            self.current = Some(incoming);
        }
        decision
    }

    /// The current status and its timestamp.
    #[must_use]
    pub fn current(&self) -> Option<Timestamped<S, T>> {
        self.current
    }

    /// The current status.
    #[must_use]
    pub fn status(&self) -> Option<S> {
        self.current.map(|c| c.status)
    }

    /// Whether the current status is terminal.
    #[must_use]
    pub fn is_terminal(&self) -> bool {
        self.current.is_some_and(|c| c.status.is_terminal())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Mail {
        Sent,
        Deferred,
        Delivered,
        Bounced,
        Complained,
    }

    impl Status for Mail {
        fn rank(&self) -> u8 {
            *self as u8
        }
        fn is_terminal(&self) -> bool {
            matches!(self, Self::Bounced | Self::Complained)
        }
    }

    fn run(events: &[(Mail, u64)]) -> Option<Timestamped<Mail>> {
        let mut tracker = StatusTracker::new();
        for &(status, at) in events {
            let _ = tracker.observe(status, at);
        }
        tracker.current()
    }

    #[test]
    fn later_timestamp_wins_not_later_arrival() {
        let end = run(&[
            (Mail::Delivered, 20),
            (Mail::Deferred, 15),
            (Mail::Sent, 10),
        ]);
        assert_eq!(end, Some(Timestamped::new(Mail::Delivered, 20)));
    }

    #[test]
    fn rank_breaks_timestamp_ties() {
        assert_eq!(
            run(&[(Mail::Delivered, 10), (Mail::Sent, 10)]).map(|c| c.status),
            Some(Mail::Delivered)
        );
        assert_eq!(
            run(&[(Mail::Sent, 10), (Mail::Delivered, 10)]).map(|c| c.status),
            Some(Mail::Delivered)
        );
    }

    #[test]
    fn terminal_is_never_reverted() {
        let end = run(&[(Mail::Bounced, 10), (Mail::Delivered, 50), (Mail::Sent, 60)]);
        assert_eq!(end, Some(Timestamped::new(Mail::Bounced, 10)));
    }

    #[test]
    fn the_first_terminal_event_wins() {
        let a = run(&[(Mail::Complained, 30), (Mail::Bounced, 20)]);
        let b = run(&[(Mail::Bounced, 20), (Mail::Complained, 30)]);
        assert_eq!(a, Some(Timestamped::new(Mail::Bounced, 20)));
        assert_eq!(a, b);
        // Same instant: the higher rank.
        let c = run(&[(Mail::Complained, 20), (Mail::Bounced, 20)]);
        assert_eq!(c.map(|c| c.status), Some(Mail::Complained));
    }

    #[test]
    fn duplicates_are_kept_out() {
        let mut tracker = StatusTracker::new();
        assert_eq!(tracker.observe(Mail::Delivered, 5), Decision::Advance);
        assert_eq!(tracker.observe(Mail::Delivered, 5), Decision::Keep);
        assert!(!tracker.is_terminal());
    }

    #[test]
    fn every_order_of_a_set_ends_the_same() {
        let events = [
            (Mail::Sent, 1),
            (Mail::Deferred, 2),
            (Mail::Deferred, 4),
            (Mail::Delivered, 4),
            (Mail::Complained, 9),
            (Mail::Bounced, 9),
        ];
        let expected = run(&events);
        // All 720 permutations (Heap's algorithm).
        let mut a = events;
        let mut c = [0usize; 6];
        let mut i = 0;
        while i < a.len() {
            if c[i] < i {
                a.swap(if i % 2 == 0 { 0 } else { c[i] }, i);
                assert_eq!(run(&a), expected, "{a:?}");
                c[i] += 1;
                i = 0;
            } else {
                c[i] = 0;
                i += 1;
            }
        }
        assert_eq!(expected, Some(Timestamped::new(Mail::Complained, 9)));
    }
}
