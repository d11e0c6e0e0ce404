//! The per-email state machine, pure: no I/O, so the receiver, the tests and
//! the demo's expectations all run the same code.
//!
//! * The delivery status follows [`tower_webhooks::core::ordering`]: by the event's
//!   own timestamp, not arrival; `bounced` and `complained` are terminal, so a
//!   late `delivered` never overwrites a `bounced`.
//! * `opened`, `clicked` and `unsubscribed` are tracked apart from the status
//!   (as the earliest time each happened): an `opened` that arrives before the
//!   `delivered` still counts, and never moves the status.
//! * `bounced`, `complained` and `unsubscribed` suppress the recipient. The
//!   suppression list keeps the earliest reason per address, so suppressing
//!   twice, or in any order, ends the same.
//!
//! Every step is a maximum or a minimum, so any order of the same events ends
//! in the same state, and applying an event twice changes nothing.
//!
//! ```
//! use examples::event::{EmailEvent, EventKind::*};
//! use examples::state::{DeliveryStatus, EmailState};
//!
//! let ev = |kind, at| EmailEvent::new(kind, format!("evt_{at}"), at, "em_1", "ada@example.com");
//! let mut state = EmailState::new("em_1", "ada@example.com");
//! // Arrival order: the bounce, then an open, then a delivered that happened later.
//! state.apply(&ev(Bounced, 2_000));
//! state.apply(&ev(Opened, 1_500));
//! state.apply(&ev(Delivered, 3_000));
//! assert_eq!(state.status, Some(DeliveryStatus::Bounced));
//! assert_eq!(state.opened_at, Some(1_500));
//! ```

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use tower_webhooks::core::ordering::{Decision, Status, StatusTracker, Timestamped};

use crate::event::{EmailEvent, EventKind};

/// Where an email is in its delivery lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    /// Accepted by the provider.
    Sent,
    /// Delayed; the provider keeps trying.
    Deferred,
    /// Accepted by the receiving server.
    Delivered,
    /// Refused for good (terminal).
    Bounced,
    /// Marked as spam by the recipient (terminal).
    Complained,
}

impl Status for DeliveryStatus {
    fn rank(&self) -> u8 {
        *self as u8
    }

    fn is_terminal(&self) -> bool {
        matches!(self, Self::Bounced | Self::Complained)
    }
}

impl DeliveryStatus {
    /// The status an event kind reports, if it reports one.
    #[must_use]
    pub fn of(kind: EventKind) -> Option<Self> {
        match kind {
            EventKind::Sent => Some(Self::Sent),
            EventKind::Deferred => Some(Self::Deferred),
            EventKind::Delivered => Some(Self::Delivered),
            EventKind::Bounced => Some(Self::Bounced),
            EventKind::Complained => Some(Self::Complained),
            _ => None,
        }
    }

    /// The stored name (`delivered`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sent => "sent",
            Self::Deferred => "deferred",
            Self::Delivered => "delivered",
            Self::Bounced => "bounced",
            Self::Complained => "complained",
        }
    }

    /// Parses a stored name.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::Sent,
            Self::Deferred,
            Self::Delivered,
            Self::Bounced,
            Self::Complained,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }
}

impl fmt::Display for DeliveryStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What is known about one email.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EmailState {
    /// The provider's id of the email.
    pub email_id: String,
    /// The address it was sent to.
    pub recipient: String,
    /// The delivery status, `None` until an event reports one.
    pub status: Option<DeliveryStatus>,
    /// When the event behind `status` happened (Unix ms).
    pub status_at: Option<u64>,
    /// When it was first opened (Unix ms).
    pub opened_at: Option<u64>,
    /// When a link was first clicked (Unix ms).
    pub clicked_at: Option<u64>,
    /// When the recipient unsubscribed through it (Unix ms).
    pub unsubscribed_at: Option<u64>,
}

/// Why a recipient is suppressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SuppressionReason {
    /// An email to the address bounced.
    Bounced,
    /// The recipient marked an email as spam.
    Complained,
    /// The recipient unsubscribed.
    Unsubscribed,
}

impl SuppressionReason {
    /// The stored name (`bounced`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bounced => "bounced",
            Self::Complained => "complained",
            Self::Unsubscribed => "unsubscribed",
        }
    }

    /// Parses a stored name.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Bounced, Self::Complained, Self::Unsubscribed]
            .into_iter()
            .find(|s| s.as_str() == name)
    }
}

/// A recipient no email should be sent to again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Suppression {
    /// The suppressed address.
    pub recipient: String,
    /// Why.
    pub reason: SuppressionReason,
    /// When the event that suppressed it happened (Unix ms).
    pub since: u64,
    /// The email whose event suppressed it.
    pub email_id: String,
}

impl Suppression {
    /// Whether this entry should replace `current` for the same recipient:
    /// the earliest event wins (then the reason, then the email id), so the
    /// list does not depend on arrival order and a repeat changes nothing.
    #[must_use]
    pub fn supersedes(&self, current: &Self) -> bool {
        (self.since, self.reason, &self.email_id)
            < (current.since, current.reason, &current.email_id)
    }
}

/// What applying one event changed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[must_use]
pub struct Applied {
    /// Whether the email's state changed.
    pub changed: bool,
    /// The suppression the event asks for, if any (offer it to the list).
    pub suppression: Option<Suppression>,
}

impl EmailState {
    /// An email nothing is known about yet.
    #[must_use]
    pub fn new(email_id: impl Into<String>, recipient: impl Into<String>) -> Self {
        Self {
            email_id: email_id.into(),
            recipient: recipient.into(),
            status: None,
            status_at: None,
            opened_at: None,
            clicked_at: None,
            unsubscribed_at: None,
        }
    }

    /// The delivery status with its timestamp.
    #[must_use]
    pub fn current(&self) -> Option<Timestamped<DeliveryStatus>> {
        Some(Timestamped::new(self.status?, self.status_at?))
    }

    /// Applies one event about this email (events about another email, and
    /// unknown ones, change nothing).
    pub fn apply(&mut self, event: &EmailEvent) -> Applied {
        let Some(envelope) = event.envelope() else {
            return Applied::default();
        };
        if envelope.email_id != self.email_id {
            return Applied::default();
        }
        let at = envelope.occurred_at;
        let kind = event.kind();
        let mut changed = false;
        if let Some(status) = DeliveryStatus::of(kind) {
            let mut tracker = StatusTracker::from_current(self.current());
            if tracker.observe(status, at) == Decision::Advance {
                self.status = Some(status);
                self.status_at = Some(at);
                changed = true;
            }
        }
        let earliest = |slot: &mut Option<u64>| {
            if slot.is_none_or(|t| at < t) {
                *slot = Some(at);
                true
            } else {
                false
            }
        };
        changed |= match kind {
            EventKind::Opened => earliest(&mut self.opened_at),
            EventKind::Clicked => earliest(&mut self.clicked_at),
            EventKind::Unsubscribed => earliest(&mut self.unsubscribed_at),
            _ => false,
        };
        let reason = match kind {
            EventKind::Bounced => Some(SuppressionReason::Bounced),
            EventKind::Complained => Some(SuppressionReason::Complained),
            EventKind::Unsubscribed => Some(SuppressionReason::Unsubscribed),
            _ => None,
        };
        Applied {
            changed,
            suppression: reason.map(|reason| Suppression {
                recipient: self.recipient.clone(),
                reason,
                since: at,
                email_id: self.email_id.clone(),
            }),
        }
    }
}

/// Every email's state and the suppression list, folded from events in the
/// order given: what the receiver's database should hold after them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    /// The emails, by id.
    pub emails: BTreeMap<String, EmailState>,
    /// The suppression list, by recipient.
    pub suppressions: BTreeMap<String, Suppression>,
}

impl Ledger {
    /// Applies one event.
    pub fn apply(&mut self, event: &EmailEvent) {
        let Some(envelope) = event.envelope() else {
            return;
        };
        let state = self
            .emails
            .entry(envelope.email_id.to_owned())
            .or_insert_with(|| EmailState::new(envelope.email_id, envelope.recipient));
        if let Some(s) = state.apply(event).suppression {
            offer(&mut self.suppressions, s);
        }
    }

    /// The ledger after `events`, folded in order.
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a EmailEvent>) -> Self {
        let mut ledger = Self::default();
        for event in events {
            ledger.apply(event);
        }
        ledger
    }
}

/// Adds `s` to a suppression list unless an entry that wins is already there.
fn offer(list: &mut BTreeMap<String, Suppression>, s: Suppression) {
    match list.get(&s.recipient) {
        Some(current) if !s.supersedes(current) => {}
        _ => {
            list.insert(s.recipient.clone(), s);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::event::EventKind::{self, *};

    fn ev(kind: EventKind, at: u64) -> EmailEvent {
        EmailEvent::new(
            kind,
            format!("evt_{at}_{kind}"),
            at,
            "em_1",
            "a@example.com",
        )
    }

    fn fold(events: &[EmailEvent]) -> Ledger {
        Ledger::from_events(events)
    }

    #[test]
    fn a_late_delivered_never_overwrites_a_bounce() {
        let ledger = fold(&[ev(Sent, 1), ev(Bounced, 3), ev(Delivered, 5)]);
        let state = &ledger.emails["em_1"];
        assert_eq!(state.status, Some(DeliveryStatus::Bounced));
        assert_eq!(state.status_at, Some(3));
        assert_eq!(
            ledger.suppressions["a@example.com"].reason,
            SuppressionReason::Bounced
        );
    }

    #[test]
    fn an_early_open_counts_and_leaves_the_status_alone() {
        let ledger = fold(&[ev(Opened, 9), ev(Clicked, 10), ev(Sent, 1)]);
        let state = &ledger.emails["em_1"];
        assert_eq!(state.status, Some(DeliveryStatus::Sent));
        assert_eq!((state.opened_at, state.clicked_at), (Some(9), Some(10)));
    }

    #[test]
    fn an_older_deferred_does_not_move_delivered_back() {
        let state = &fold(&[ev(Delivered, 8), ev(Deferred, 4)]).emails["em_1"];
        assert_eq!(state.status, Some(DeliveryStatus::Delivered));
    }

    #[test]
    fn applying_twice_changes_nothing() {
        let mut state = EmailState::new("em_1", "a@example.com");
        for kind in EventKind::KNOWN {
            let _ = state.apply(&ev(kind, 5));
            let before = state.clone();
            assert!(!state.apply(&ev(kind, 5)).changed, "{kind}");
            assert_eq!(state, before);
        }
    }

    #[test]
    fn unsubscribing_suppresses_without_touching_the_status() {
        let ledger = fold(&[ev(Delivered, 2), ev(Unsubscribed, 7), ev(Unsubscribed, 6)]);
        let state = &ledger.emails["em_1"];
        assert_eq!(state.status, Some(DeliveryStatus::Delivered));
        assert_eq!(state.unsubscribed_at, Some(6));
        let s = &ledger.suppressions["a@example.com"];
        assert_eq!((s.reason, s.since), (SuppressionReason::Unsubscribed, 6));
    }

    #[test]
    fn status_names_round_trip() {
        for s in [
            DeliveryStatus::Sent,
            DeliveryStatus::Deferred,
            DeliveryStatus::Delivered,
            DeliveryStatus::Bounced,
            DeliveryStatus::Complained,
        ] {
            assert_eq!(DeliveryStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(DeliveryStatus::parse("opened"), None);
    }

    /// Up to 12 events of one email, with timestamps in a small range so that
    /// ties (same millisecond) are common.
    fn one_email_events() -> impl Strategy<Value = Vec<EmailEvent>> {
        prop::collection::vec(
            (prop::sample::select(EventKind::KNOWN.to_vec()), 0u64..20),
            1..12,
        )
        .prop_map(|events| {
            events
                .into_iter()
                .enumerate()
                .map(|(i, (kind, at))| {
                    EmailEvent::new(kind, format!("evt_{i}"), at, "em_1", "a@example.com")
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn any_permutation_ends_in_the_same_state(
            (events, shuffled) in one_email_events()
                .prop_flat_map(|events| (Just(events.clone()), Just(events).prop_shuffle()))
        ) {
            let mut sorted = events.clone();
            sorted.sort_by_key(|e| e.envelope().map(|e| e.occurred_at));
            prop_assert_eq!(fold(&shuffled), fold(&sorted));
            prop_assert_eq!(fold(&events), fold(&sorted));
        }

        #[test]
        fn duplicates_anywhere_change_nothing(
            (events, extra) in one_email_events()
                .prop_flat_map(|events| {
                    let n = events.len();
                    (Just(events), prop::collection::vec(0..n, 0..6))
                })
        ) {
            let mut with_dups = events.clone();
            for i in extra {
                with_dups.push(events[i].clone());
            }
            prop_assert_eq!(fold(&with_dups), fold(&events));
        }
    }
}
