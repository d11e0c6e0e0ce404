//! The Redis inbox's action log: a sorted set in the first partition
//! (`P .. 'log'`, scored by the entry's number from `INCR P .. 'log:n'`),
//! each member `'<number> <time ms> <entry>'` with the entry a JSON array
//! `[who, via, kind, target, count]`. Recording trims entries past
//! [`ACTION_LOG_RETENTION`](crate::inbox::ACTION_LOG_RETENTION) and beyond [`ACTIONS_KEPT`] in the same script.

use redis::aio::ConnectionLike;

use super::engine::Engine;
use crate::inbox::actions;
use crate::inbox::{Action, ActionPage, InboxError};

/// The most entries the log keeps whatever their age (a script flooding
/// the log cannot grow it without bound).
pub(crate) const ACTIONS_KEPT: u64 = 100_000;

/// One entry as stored after its number and time.
type Entry = (String, String, String, String, u64);

fn encode(action: &Action) -> Vec<u8> {
    let entry: Entry = (
        action.who.clone(),
        action.via.clone(),
        action.kind.as_str().to_owned(),
        action.target.clone(),
        action.count,
    );
    serde_json::to_vec(&entry).unwrap_or_default()
}

fn decode(raw: &[u8]) -> Result<Action, InboxError> {
    let bad = |what: &str| InboxError::Protocol(format!("an action log entry {what}"));
    let text = std::str::from_utf8(raw).map_err(|_| bad("is not UTF-8"))?;
    let mut parts = text.splitn(3, ' ');
    let id: i64 = parts
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| bad("has no number"))?;
    let at: i64 = parts
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| bad("has no time"))?;
    let (who, via, kind, target, count): Entry =
        serde_json::from_str(parts.next().unwrap_or("")).map_err(|_| bad("does not decode"))?;
    Ok(actions::read(
        id,
        at,
        who,
        via,
        &kind,
        target,
        i64::try_from(count).unwrap_or(i64::MAX),
    ))
}

impl<C> Engine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// One script on the first partition.
    pub(in crate::inbox) async fn record_action(&self, action: &Action) -> Result<(), InboxError> {
        let args = vec![
            actions::at_ms(action).to_string().into_bytes(),
            encode(action),
            actions::cutoff_ms(action).to_string().into_bytes(),
            ACTIONS_KEPT.to_string().into_bytes(),
        ];
        self.run::<i64>(0, None, &self.scripts.record_action, args)
            .await?;
        Ok(())
    }

    /// A page, newest first.
    pub(in crate::inbox) async fn actions(
        &self,
        before: Option<u64>,
        limit: u32,
    ) -> Result<ActionPage, InboxError> {
        let limit = actions::page_size(limit);
        let before = before.map_or_else(|| "+inf".to_owned(), |id| id.to_string());
        let raw: Vec<Vec<u8>> = self
            .run(
                0,
                None,
                &self.scripts.actions,
                vec![before.into_bytes(), (limit + 1).to_string().into_bytes()],
            )
            .await?;
        let rows = raw
            .iter()
            .map(|entry| decode(entry))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ActionPage::of(rows, limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbox::ActionKind;

    #[test]
    fn entries_round_trip() {
        let at =
            std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_123);
        let mut action = Action::new(ActionKind::Replay, "ops@example.com")
            .via("console")
            .target("filter: scheme=stripe event_type=invoice.* (a space)")
            .count(7)
            .at(at);
        let stored = format!("42 {} ", actions::at_ms(&action)).into_bytes();
        let stored = [stored, encode(&action)].concat();
        action.id = 42;
        assert_eq!(decode(&stored).ok(), Some(action));
        assert!(decode(b"42 17 [1]").is_err());
        assert!(decode(b"x").is_err());
    }
}
