//! What a run did.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;

use super::Intent;

/// How one delivery ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The final HTTP answer.
    Status {
        /// The status code.
        status: u16,
        /// Whether the receiver marked it an acknowledged duplicate.
        duplicate: bool,
        /// The start of a non-2xx answer's text (the receiver's short reason).
        reason: String,
    },
    /// No HTTP answer after every attempt.
    Transport(String),
}

/// One delivery's outcome.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The delivery id.
    pub id: String,
    /// Why it was sent.
    pub intent: Intent,
    /// How many attempts were made.
    pub attempts: u32,
    /// How it ended.
    pub answer: Answer,
}

impl Outcome {
    /// The final status, if there was an HTTP answer.
    #[must_use]
    pub fn status(&self) -> Option<u16> {
        match self.answer {
            Answer::Status { status, .. } => Some(status),
            Answer::Transport(_) => None,
        }
    }

    /// Whether it ended in a 2xx.
    #[must_use]
    pub fn succeeded(&self) -> bool {
        self.status().is_some_and(|s| (200..300).contains(&s))
    }
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Every delivery's outcome, in plan order.
    pub outcomes: Vec<Outcome>,
    /// Attempts beyond the first, in all.
    pub retries: u64,
    /// Every attempt's latency, in microseconds (hdrhistogram, three
    /// significant digits).
    pub latencies: Histogram<u64>,
    /// Wall time of the run.
    pub elapsed: Duration,
}

impl Summary {
    /// Deliveries answered 2xx and processed.
    #[must_use]
    pub fn accepted(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| {
                matches!(
                    o.answer,
                    Answer::Status {
                        status: 200..=299,
                        duplicate: false,
                        ..
                    }
                )
            })
            .count()
    }

    /// Deliveries acknowledged as duplicates (`200` + `webhook-duplicate: true`).
    #[must_use]
    pub fn duplicates(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| {
                matches!(
                    o.answer,
                    Answer::Status {
                        duplicate: true,
                        ..
                    }
                )
            })
            .count()
    }

    /// Deliveries that ended otherwise, by `status reason` (or transport error).
    #[must_use]
    pub fn rejected(&self) -> BTreeMap<String, usize> {
        let mut rejected = BTreeMap::new();
        for o in &self.outcomes {
            let key = match &o.answer {
                Answer::Status {
                    status: 200..=299, ..
                } => continue,
                Answer::Status { status, reason, .. } => format!("{status} {reason}"),
                Answer::Transport(e) => format!("transport: {e}"),
            };
            *rejected.entry(key).or_default() += 1;
        }
        rejected
    }

    /// The latency below which `p` (0–1) of the attempts fall.
    #[must_use]
    pub fn percentile(&self, p: f64) -> Option<Duration> {
        (!self.latencies.is_empty())
            .then(|| Duration::from_micros(self.latencies.value_at_quantile(p)))
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Option<Duration>| d.map_or(0.0, |d| d.as_secs_f64() * 1000.0);
        writeln!(
            f,
            "deliveries {} in {:.2}s ({} attempts, {} retries)",
            self.outcomes.len(),
            self.elapsed.as_secs_f64(),
            self.latencies.len(),
            self.retries
        )?;
        writeln!(f, "  accepted                 {}", self.accepted())?;
        writeln!(f, "  acknowledged duplicates  {}", self.duplicates())?;
        for (reason, n) in self.rejected() {
            writeln!(f, "  rejected {reason:<32} {n}")?;
        }
        write!(
            f,
            "  latency p50 {:.1} ms, p99 {:.1} ms",
            ms(self.percentile(0.5)),
            ms(self.percentile(0.99))
        )
    }
}
