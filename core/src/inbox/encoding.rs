//! How the backends store values: times and durations as milliseconds,
//! errors cut to [`MAX_ERROR_LEN`](super::MAX_ERROR_LEN), headers as JSON.

#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "redis",
    feature = "nats",
    feature = "rabbitmq"
))]
use std::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};

#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "redis",
    feature = "nats",
    feature = "rabbitmq"
))]
use super::MAX_ERROR_LEN;

#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "redis",
    feature = "nats",
    feature = "rabbitmq"
))]
/// Epoch milliseconds as a time.
pub(crate) fn from_ms(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// A time as epoch milliseconds.
pub(crate) fn to_ms(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "redis"
))]
/// A duration as milliseconds, saturating.
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "redis",
    feature = "nats",
    feature = "rabbitmq"
))]
/// `error` cut to [`MAX_ERROR_LEN`] bytes at a character boundary.
pub(crate) fn truncate_error(error: &str) -> &str {
    if error.len() <= MAX_ERROR_LEN {
        return error;
    }
    let mut end = MAX_ERROR_LEN;
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    &error[..end]
}

#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "redis"
))]
/// The headers as stored: a JSON array of `[name, value]` pairs.
pub(crate) fn encode_headers(headers: &[(String, String)]) -> String {
    serde_json::to_string(headers).unwrap_or_else(|_| "[]".to_owned())
}

#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "redis"
))]
/// The stored headers back.
pub(crate) fn decode_headers(text: &str) -> Vec<(String, String)> {
    serde_json::from_str(text).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(any(
        feature = "postgres",
        feature = "mysql",
        feature = "sqlite",
        feature = "redis"
    ))]
    #[test]
    fn errors_are_truncated_at_char_boundaries() {
        let text = "é".repeat(MAX_ERROR_LEN);
        let cut = truncate_error(&text);
        assert!(cut.len() <= MAX_ERROR_LEN);
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
