//! The [`Backoff`] between a failed attempt and the next.

use std::time::Duration;

/// Exponential backoff with full jitter: before attempt `n + 1`, wait a
/// uniformly random time between zero and `min(max, base × 2^(n-1))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first ceiling (default 1 s).
    pub base: Duration,
    /// The largest ceiling (default 1 h).
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            max: Duration::from_secs(3600),
        }
    }
}

impl Backoff {
    /// The ceiling after failed attempt `attempt` (from 1).
    #[must_use]
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32
            .checked_shl(attempt.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// A random delay within the ceiling (full jitter).
    #[must_use]
    pub fn delay(&self, attempt: u32) -> Duration {
        let ceiling = self.ceiling(attempt);
        let mut bytes = [0u8; 8];
        if getrandom::fill(&mut bytes).is_err() {
            return ceiling / 2;
        }
        let fraction = (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64;
        ceiling.mul_f64(fraction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_ceilings_double_up_to_the_max() {
        let backoff = Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        assert_eq!(backoff.ceiling(1), Duration::from_millis(100));
        assert_eq!(backoff.ceiling(2), Duration::from_millis(200));
        assert_eq!(backoff.ceiling(5), Duration::from_secs(1));
        assert_eq!(backoff.ceiling(200), Duration::from_secs(1));
        for attempt in 1..10 {
            assert!(backoff.delay(attempt) <= backoff.ceiling(attempt));
        }
    }
}
