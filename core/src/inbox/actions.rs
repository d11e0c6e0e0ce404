//! The action log: every state change a person or a script made to the
//! inbox (replay, discard, purge, pause, resume, one at a time or in bulk),
//! with who, when, through what, on what and how many.
//!
//! The console, the admin API and `webhooks inbox` record an entry after
//! each action they carry out ([`record`]); [`Inbox::actions`] pages
//! through them, newest first. Entries older than
//! [`ACTION_LOG_RETENTION`] are deleted as new ones are recorded. An entry
//! holds no body and no secret: the target is a key, a filter or an age.
//!
//! Recording follows the action: a store that fails then loses the entry
//! (logged as a warning), never the action's effect.
//!
//! ```
//! use webhooks_core::inbox::{Action, ActionKind};
//!
//! let action = Action::new(ActionKind::Replay, "ops@example.com")
//!     .via("cli")
//!     .target("filter: scheme=stripe type=invoice.*")
//!     .count(42);
//! assert_eq!(action.kind.as_str(), "replay");
//! assert_eq!(ActionKind::parse("purge"), Some(ActionKind::Purge));
//! assert_eq!(action.count, 42);
//! ```

use std::fmt;
use std::time::{Duration, SystemTime};

use super::{Inbox, attempts::cut};

/// How long an inbox keeps an action log entry: 90 days.
pub const ACTION_LOG_RETENTION: Duration = Duration::from_secs(90 * 86_400);

/// The longest identity an entry keeps, in bytes.
pub const MAX_ACTOR_LEN: usize = 128;

/// The longest target an entry keeps, in bytes.
pub const MAX_ACTION_TARGET_LEN: usize = 512;

/// The longest channel name (`console`, `api`, `cli`) an entry keeps.
pub const MAX_ACTION_VIA_LEN: usize = 32;

/// The most entries one [`Inbox::actions`] call returns.
pub const MAX_ACTIONS_PAGE: u32 = 500;

/// What was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ActionKind {
    /// Dead letters (or events) made pending again.
    Replay,
    /// Dead letters deleted.
    Discard,
    /// Completed events deleted by age.
    Purge,
    /// Processing paused.
    Pause,
    /// Processing resumed.
    Resume,
    /// An entry a newer version wrote, of a kind this one does not know.
    Unknown,
}

impl ActionKind {
    /// Every kind a caller records, in declaration order.
    pub const ALL: [Self; 5] = [
        Self::Replay,
        Self::Discard,
        Self::Purge,
        Self::Pause,
        Self::Resume,
    ];

    /// The stored name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Replay => "replay",
            Self::Discard => "discard",
            Self::Purge => "purge",
            Self::Pause => "pause",
            Self::Resume => "resume",
            Self::Unknown => "unknown",
        }
    }

    /// The kind of a stored name; `None` for one this version does not know.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The kind of a stored name read back: [`Unknown`](Self::Unknown) for
    /// one this version does not know.
    #[cfg_attr(not(any(feature = "_sql", feature = "redis")), allow(dead_code))]
    pub(crate) fn read(name: &str) -> Self {
        Self::parse(name).unwrap_or(Self::Unknown)
    }
}

impl fmt::Display for ActionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of the action log.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Action {
    /// The entry's number, assigned by the store (increasing); `0` in an
    /// entry not yet recorded.
    pub id: u64,
    /// When it was done (the recording process's clock).
    pub at: SystemTime,
    /// Who did it: the identity the `authorize` hook gave, or the shell
    /// user for the command line; at most [`MAX_ACTOR_LEN`] bytes.
    pub who: String,
    /// Through what: `console`, `api`, `cli`, or an application's own
    /// name; at most [`MAX_ACTION_VIA_LEN`] bytes.
    pub via: String,
    /// What was done.
    pub kind: ActionKind,
    /// On what: an event's key, `N selected`, a filter, an age; at most
    /// [`MAX_ACTION_TARGET_LEN`] bytes.
    pub target: String,
    /// How many events it changed (pause and resume: 1 if the state
    /// changed, else 0).
    pub count: u64,
}

impl Action {
    /// An entry done now by `who`, with no channel, target or count.
    #[must_use]
    pub fn new(kind: ActionKind, who: impl Into<String>) -> Self {
        Self {
            id: 0,
            at: SystemTime::now(),
            who: cut(who.into(), MAX_ACTOR_LEN),
            via: String::new(),
            kind,
            target: String::new(),
            count: 0,
        }
    }

    /// Through what it was done (cut to [`MAX_ACTION_VIA_LEN`]).
    #[must_use]
    pub fn via(mut self, via: impl Into<String>) -> Self {
        self.via = cut(via.into(), MAX_ACTION_VIA_LEN);
        self
    }

    /// On what (cut to [`MAX_ACTION_TARGET_LEN`]).
    #[must_use]
    pub fn target(mut self, target: impl Into<String>) -> Self {
        self.target = cut(target.into(), MAX_ACTION_TARGET_LEN);
        self
    }

    /// How many events it changed.
    #[must_use]
    pub fn count(mut self, count: u64) -> Self {
        self.count = count;
        self
    }

    /// When it was done (default: when it was built).
    #[must_use]
    pub fn at(mut self, at: SystemTime) -> Self {
        self.at = at;
        self
    }
}

/// One page of the action log, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ActionPage {
    /// The entries, newest first.
    pub actions: Vec<Action>,
    /// The `before` of the next (older) page; `None` on the last.
    pub next: Option<u64>,
}

impl ActionPage {
    /// A page of `rows` read with `limit`: at most `limit` entries, and the
    /// cursor when the store had more (it is asked for `limit + 1`).
    #[cfg_attr(not(any(feature = "_sql", feature = "redis")), allow(dead_code))]
    pub(crate) fn of(mut rows: Vec<Action>, limit: u32) -> Self {
        let limit = limit as usize;
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next = if more {
            rows.last().map(|a| a.id)
        } else {
            None
        };
        Self {
            actions: rows,
            next,
        }
    }
}

/// The page size a caller asked for, within `1..=`[`MAX_ACTIONS_PAGE`].
#[cfg_attr(not(any(feature = "_sql", feature = "redis")), allow(dead_code))]
pub(crate) fn page_size(limit: u32) -> u32 {
    limit.clamp(1, MAX_ACTIONS_PAGE)
}

/// Records `action` in `inbox`'s log after the action was carried out; a
/// store error is logged (the entry is lost, the action stands).
pub async fn record(inbox: &dyn Inbox, action: Action) {
    if !inbox.keeps_actions() {
        return;
    }
    if let Err(error) = inbox.record_action(&action).await {
        tracing::warn!(
            target: "webhooks_core::inbox",
            %error,
            action = action.kind.as_str(),
            via = %action.via,
            "could not record an action in the action log"
        );
    }
}

/// A page as the admin API and `webhooks inbox actions --json` answer it:
/// `{"actions": [{"id", "at_ms", "who", "via", "action", "target",
/// "count"}, ...], "next": id or null}`.
#[must_use]
pub fn actions_json(page: &ActionPage) -> serde_json::Value {
    let actions: Vec<serde_json::Value> = page
        .actions
        .iter()
        .map(|a| {
            serde_json::json!({
                "id": a.id,
                "at_ms": at_ms(a),
                "who": a.who,
                "via": a.via,
                "action": a.kind.as_str(),
                "target": a.target,
                "count": a.count,
            })
        })
        .collect();
    serde_json::json!({ "actions": actions, "next": page.next })
}

/// The target of a purge: `completed, older than 7d` (`, forced` when
/// under the floor).
#[must_use]
pub fn purge_target(older_than: Duration, forced: bool) -> String {
    format!(
        "completed, older than {}{}",
        duration_text(older_than),
        if forced { ", forced" } else { "" }
    )
}

/// A duration in its largest whole unit: `7d`, `12h`, `30m`, `90s`.
pub(crate) fn duration_text(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => "0s".to_owned(),
        _ if s.is_multiple_of(86_400) => format!("{}d", s / 86_400),
        _ if s.is_multiple_of(3_600) => format!("{}h", s / 3_600),
        _ if s.is_multiple_of(60) => format!("{}m", s / 60),
        _ => format!("{s}s"),
    }
}

/// Milliseconds since the epoch of an entry's time, for storing.
pub(crate) fn at_ms(action: &Action) -> i64 {
    super::to_ms(action.at)
}

/// The time of stored milliseconds.
#[cfg_attr(not(any(feature = "_sql", feature = "redis")), allow(dead_code))]
pub(crate) fn from_ms(ms: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// The oldest time kept when recording at `at`, in ms.
#[cfg_attr(not(any(feature = "_sql", feature = "redis")), allow(dead_code))]
pub(crate) fn cutoff_ms(action: &Action) -> i64 {
    let retention = i64::try_from(ACTION_LOG_RETENTION.as_millis()).unwrap_or(i64::MAX);
    at_ms(action).saturating_sub(retention)
}

/// An entry read back from its stored columns.
#[cfg_attr(not(any(feature = "_sql", feature = "redis")), allow(dead_code))]
pub(crate) fn read(
    id: i64,
    at: i64,
    who: String,
    via: String,
    kind: &str,
    target: String,
    count: i64,
) -> Action {
    Action {
        id: u64::try_from(id).unwrap_or(0),
        at: from_ms(at),
        who,
        via,
        kind: ActionKind::read(kind),
        target,
        count: u64::try_from(count).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_fields_are_cut() {
        let action = Action::new(ActionKind::Discard, "x".repeat(1_000))
            .via("y".repeat(100))
            .target("é".repeat(1_000));
        assert_eq!(action.who.len(), MAX_ACTOR_LEN);
        assert_eq!(action.via.len(), MAX_ACTION_VIA_LEN);
        assert!(action.target.len() <= MAX_ACTION_TARGET_LEN);
        assert!(action.target.chars().all(|c| c == 'é'));
    }

    #[test]
    fn kinds_round_trip_and_unknown_names_are_kept_as_unknown() {
        for kind in ActionKind::ALL {
            assert_eq!(ActionKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(ActionKind::parse("unknown"), None);
        assert_eq!(ActionKind::read("pause_type"), ActionKind::Unknown);
    }

    #[test]
    fn a_page_says_whether_there_is_more() {
        let rows = |n: u64| {
            (0..n)
                .map(|i| {
                    let mut a = Action::new(ActionKind::Pause, "a");
                    a.id = 100 - i;
                    a
                })
                .collect::<Vec<_>>()
        };
        let page = ActionPage::of(rows(3), 2);
        assert_eq!(page.actions.len(), 2);
        assert_eq!(page.next, Some(99));
        assert_eq!(ActionPage::of(rows(2), 2).next, None);
        assert_eq!(page_size(0), 1);
        assert_eq!(page_size(10_000), MAX_ACTIONS_PAGE);
    }
}
