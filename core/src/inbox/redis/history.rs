//! The Redis inbox's attempt history: a list per event
//! (`P .. 'a:' .. key`, in the event's partition), each entry a JSON array
//! `[number, started ms, ended ms, outcome, error or null, worker]`, the
//! newest [`ATTEMPTS_KEPT`] kept (`RPUSH` + `LTRIM` in one script, which
//! drops an attempt of an event no longer stored). Discard and purge delete
//! the list with the event.

use std::time::{Duration, SystemTime};

use futures_util::future::try_join_all;
use redis::aio::ConnectionLike;

use super::engine::{Engine, partition_of};
use crate::inbox::{ATTEMPTS_KEPT, Attempt, AttemptOutcome, InboxError, to_ms};

/// One entry as stored.
type Entry = (u32, i64, i64, String, Option<String>, String);

fn encode(attempt: &Attempt) -> Vec<u8> {
    let entry: Entry = (
        attempt.number,
        to_ms(attempt.started_at),
        to_ms(attempt.ended_at),
        attempt.outcome.as_str().to_owned(),
        attempt.error.clone(),
        attempt.worker.clone(),
    );
    serde_json::to_vec(&entry).unwrap_or_default()
}

fn decode(raw: &[u8]) -> Result<Attempt, InboxError> {
    let (number, started, ended, outcome, error, worker): Entry = serde_json::from_slice(raw)
        .map_err(|e| InboxError::Protocol(format!("an attempt entry does not decode: {e}")))?;
    let at =
        |ms: i64| SystemTime::UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    let mut attempt = Attempt::new(
        number,
        at(started),
        at(ended),
        AttemptOutcome::parse(&outcome).unwrap_or(AttemptOutcome::Failed),
    )
    .with_worker(worker);
    attempt.error = error;
    Ok(attempt)
}

impl<C> Engine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// One script per partition the entries fall in, side by side.
    pub(in crate::inbox) async fn record_attempts(
        &self,
        attempts: &[(&str, Attempt)],
    ) -> Result<(), InboxError> {
        if attempts.is_empty() {
            return Ok(());
        }
        let n = self.partitions.len();
        let mut groups: Vec<(usize, Vec<Vec<u8>>)> = Vec::new();
        for (key, attempt) in attempts {
            let part = partition_of(key, n);
            let at = match groups.iter().position(|(p, _)| *p == part) {
                Some(at) => at,
                None => {
                    groups.push((part, vec![ATTEMPTS_KEPT.to_string().into_bytes()]));
                    groups.len() - 1
                }
            };
            groups[at].1.push(key.as_bytes().to_vec());
            groups[at].1.push(encode(attempt));
        }
        try_join_all(groups.into_iter().map(|(part, args)| async move {
            self.run::<i64>(part, None, &self.scripts.record_attempts, args)
                .await
        }))
        .await?;
        Ok(())
    }

    /// The event's list, oldest first.
    pub(in crate::inbox) async fn attempts(&self, key: &str) -> Result<Vec<Attempt>, InboxError> {
        let raw: Vec<Vec<u8>> = self
            .on_event(key, &self.scripts.attempts, Vec::new())
            .await?;
        raw.iter().map(|entry| decode(entry)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip() {
        let started = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let attempt = Attempt::new(
            3,
            started,
            started + Duration::from_millis(250),
            AttemptOutcome::TimedOut,
        )
        .with_error("handler timed out after 30000 ms")
        .with_worker("web-1:42");
        assert_eq!(decode(&encode(&attempt)).ok(), Some(attempt));
        assert!(decode(b"[1,2]").is_err());
    }
}
