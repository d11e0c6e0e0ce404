//! Attempt history: what happened on each attempt at an event.
//!
//! The [`Worker`](super::Worker) records every attempt it runs to its end:
//! when it started and ended, how it ended ([`AttemptOutcome`]), the error
//! (cut to [`MAX_ATTEMPT_ERROR_LEN`] bytes, never the body) and the
//! worker's name ([`WorkerBuilder::name`](super::WorkerBuilder::name)).
//! An inbox keeps the last [`ATTEMPTS_KEPT`] of each event and deletes
//! them with the event (discard, purge). A process killed mid-attempt
//! records nothing: [`Inbox::attempts`](super::Inbox::attempts) then shows
//! a gap in the numbers, and the console marks it as an attempt whose
//! worker stopped without a report.
//!
//! Recording is a diagnostic, never a transition: it happens after the
//! outcome is settled, completions of a flush share one round trip, and a
//! store error loses the entry, never the event.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use webhooks_core::inbox::{Attempt, AttemptOutcome};
//!
//! let started = SystemTime::now();
//! let attempt = Attempt::new(1, started, started + Duration::from_millis(40), AttemptOutcome::Failed)
//!     .with_error("upstream answered 502")
//!     .with_worker("web-1");
//! assert_eq!(attempt.outcome.as_str(), "failed");
//! assert_eq!(AttemptOutcome::parse("timed_out"), Some(AttemptOutcome::TimedOut));
//! assert_eq!(attempt.duration(), Duration::from_millis(40));
//! ```

use std::fmt;
use std::time::{Duration, SystemTime};

/// How many attempts an inbox keeps per event (the newest).
pub const ATTEMPTS_KEPT: usize = 25;

/// The longest error text an attempt keeps, in bytes (cut at a character
/// boundary).
pub const MAX_ATTEMPT_ERROR_LEN: usize = 2_048;

/// The longest worker name an attempt keeps, in bytes.
pub const MAX_WORKER_NAME_LEN: usize = 64;

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AttemptOutcome {
    /// The handler succeeded and the completion was recorded.
    Succeeded,
    /// The handler returned an error.
    Failed,
    /// The handler panicked.
    Panicked,
    /// The handler ran past the worker's timeout.
    TimedOut,
    /// The lease ran out and another attempt took the event over: this
    /// attempt's outcome was refused.
    LeaseLost,
    /// The event's type is not one the handler knows: completed without
    /// running it.
    UnknownType,
}

impl AttemptOutcome {
    /// Every outcome, in declaration order.
    pub const ALL: [Self; 6] = [
        Self::Succeeded,
        Self::Failed,
        Self::Panicked,
        Self::TimedOut,
        Self::LeaseLost,
        Self::UnknownType,
    ];

    /// The outcome's stored name (`ok`, `failed`, `panicked`, `timed_out`,
    /// `lease_lost`, `unknown_type`).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "ok",
            Self::Failed => "failed",
            Self::Panicked => "panicked",
            Self::TimedOut => "timed_out",
            Self::LeaseLost => "lease_lost",
            Self::UnknownType => "unknown_type",
        }
    }

    /// The outcome of a stored name; `None` for a name this version does not know.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == name)
    }

    /// Whether the attempt settled the event (succeeded or completed unrun).
    #[must_use]
    pub const fn is_success(self) -> bool {
        matches!(self, Self::Succeeded | Self::UnknownType)
    }
}

impl fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One attempt at an event.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Attempt {
    /// The attempt's number (1 for the first; counting restarts after a replay).
    pub number: u32,
    /// When the handler started.
    pub started_at: SystemTime,
    /// When the attempt's outcome was known.
    pub ended_at: SystemTime,
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// The error, cut to [`MAX_ATTEMPT_ERROR_LEN`]; `None` on success.
    pub error: Option<String>,
    /// The worker that ran it, cut to [`MAX_WORKER_NAME_LEN`].
    pub worker: String,
}

impl Attempt {
    /// An attempt with no error and no worker name.
    #[must_use]
    pub fn new(
        number: u32,
        started_at: SystemTime,
        ended_at: SystemTime,
        outcome: AttemptOutcome,
    ) -> Self {
        Self {
            number,
            started_at,
            ended_at,
            outcome,
            error: None,
            worker: String::new(),
        }
    }

    /// With the error text (cut to [`MAX_ATTEMPT_ERROR_LEN`]).
    #[must_use]
    pub fn with_error(mut self, error: impl Into<String>) -> Self {
        self.error = Some(cut(error.into(), MAX_ATTEMPT_ERROR_LEN));
        self
    }

    /// With the worker's name (cut to [`MAX_WORKER_NAME_LEN`]).
    #[must_use]
    pub fn with_worker(mut self, worker: impl Into<String>) -> Self {
        self.worker = cut(worker.into(), MAX_WORKER_NAME_LEN);
        self
    }

    /// How long it ran (zero if the clock stepped back).
    #[must_use]
    pub fn duration(&self) -> Duration {
        self.ended_at
            .duration_since(self.started_at)
            .unwrap_or_default()
    }
}

/// The attempts as a JSON array, oldest first: `number`, `started_at_ms`,
/// `ended_at_ms`, `duration_ms`, `outcome`, `error`, `worker` — what the
/// admin API's item answers (`attempt_history`) and `webhooks inbox show
/// --json` carry.
#[must_use]
pub fn attempts_json(attempts: &[Attempt]) -> serde_json::Value {
    serde_json::Value::Array(
        attempts
            .iter()
            .map(|a| {
                serde_json::json!({
                    "number": a.number,
                    "started_at_ms": super::to_ms(a.started_at),
                    "ended_at_ms": super::to_ms(a.ended_at),
                    "duration_ms": u64::try_from(a.duration().as_millis()).unwrap_or(u64::MAX),
                    "outcome": a.outcome.as_str(),
                    "error": a.error,
                    "worker": a.worker,
                })
            })
            .collect(),
    )
}

/// `text` cut to at most `max` bytes at a character boundary.
pub(crate) fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// The default worker name: the host's name and the process id
/// (`HOSTNAME`, else `/proc/sys/kernel/hostname`, else `worker`).
pub(crate) fn default_worker_name() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "worker".to_owned());
    cut(
        format!("{host}:{}", std::process::id()),
        MAX_WORKER_NAME_LEN,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_round_trip_their_names() {
        for outcome in AttemptOutcome::ALL {
            assert_eq!(AttemptOutcome::parse(outcome.as_str()), Some(outcome));
        }
        assert_eq!(AttemptOutcome::parse("exploded"), None);
    }

    #[test]
    fn long_errors_and_names_are_cut_at_a_character() {
        let now = SystemTime::now();
        let attempt = Attempt::new(1, now, now, AttemptOutcome::Failed)
            .with_error("é".repeat(MAX_ATTEMPT_ERROR_LEN))
            .with_worker("ü".repeat(MAX_WORKER_NAME_LEN));
        let error = attempt.error.unwrap_or_default();
        assert!(error.len() <= MAX_ATTEMPT_ERROR_LEN && error.len() > MAX_ATTEMPT_ERROR_LEN - 2);
        assert!(attempt.worker.len() <= MAX_WORKER_NAME_LEN);
    }

    #[test]
    fn the_default_worker_name_is_bounded_and_names_the_process() {
        let name = default_worker_name();
        assert!(name.len() <= MAX_WORKER_NAME_LEN);
        assert!(
            name.ends_with(&format!(":{}", std::process::id()))
                || name.len() == MAX_WORKER_NAME_LEN
        );
    }
}
