//! Planning a run: the genuine lifecycles, their duplicates, forgeries and replays.

use std::collections::BTreeMap;
use std::fmt;
use std::time::SystemTime;

use bytes::Bytes;

use super::{Rng, SimulatorConfig, SimulatorError, unix_millis};
use crate::event::{EmailEvent, EventKind};

/// Why a delivery is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Intent {
    /// A genuine event, first sending.
    Genuine,
    /// A genuine event sent again (a sender retry).
    Duplicate,
    /// A genuine signature over a changed body.
    Tampered,
    /// An event signed with the wrong secret.
    WrongSecret,
    /// A genuine event with an hour-old signature.
    Stale,
    /// A correctly signed event of an unknown type.
    Unknown,
}

impl Intent {
    /// A short name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Genuine => "genuine",
            Self::Duplicate => "duplicate",
            Self::Tampered => "tampered",
            Self::WrongSecret => "wrong secret",
            Self::Stale => "stale replay",
            Self::Unknown => "unknown type",
        }
    }

    /// Whether a correct receiver must refuse it (`401`).
    #[must_use]
    pub fn is_forgery(self) -> bool {
        matches!(self, Self::Tampered | Self::WrongSecret | Self::Stale)
    }
}

impl fmt::Display for Intent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One delivery the simulator will send. `Debug` shows no body.
#[derive(Clone)]
pub struct PlannedDelivery {
    /// The delivery id (the event id, also for duplicates and replays).
    pub id: String,
    /// The event type, for the schemes that send it in a header.
    pub event_type: &'static str,
    /// Why it is sent.
    pub intent: Intent,
    /// The genuine event, for genuine deliveries and their duplicates.
    pub event: Option<EmailEvent>,
    /// The body sent.
    pub body: Bytes,
    /// The body signed, when it differs from `body` (tampering).
    pub signed_body: Option<Bytes>,
}

impl fmt::Debug for PlannedDelivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlannedDelivery")
            .field("id", &self.id)
            .field("event_type", &self.event_type)
            .field("intent", &self.intent)
            .field("body_len", &self.body.len())
            .finish_non_exhaustive()
    }
}

/// The deliveries of one run, in sending order.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The deliveries, in the order they are handed to the workers.
    pub deliveries: Vec<PlannedDelivery>,
}

impl Plan {
    /// Plans a run from the settings (deterministic for a seed and a start time).
    ///
    /// # Errors
    ///
    /// [`SimulatorError::Config`] when the settings do not make sense.
    pub fn generate(config: &SimulatorConfig) -> Result<Self, SimulatorError> {
        config.check()?;
        let mut rng = Rng::with_seed(config.seed);
        let start = unix_millis(SystemTime::now()).saturating_sub(10 * 60 * 1000);
        // Some emails share a recipient, so the suppression list sees
        // several events per address.
        let recipients = (config.emails * 2 / 3).max(1);
        let mut genuine: Vec<EmailEvent> = Vec::with_capacity(config.events);
        for i in 0..config.emails {
            let budget =
                config.events / config.emails + usize::from(i < config.events % config.emails);
            let email_id = format!("em_{i:04}");
            let recipient = format!("user{}@example.com", i % recipients);
            let mut at = start + rng.u64(..60_000);
            for (j, kind) in lifecycle(&mut rng, budget).into_iter().enumerate() {
                let id = format!("evt_{i:04}_{j:03}");
                genuine.push(EmailEvent::new(kind, id, at, &email_id, &recipient));
                // One step in ten shares the millisecond: ties are real.
                at += if rng.f64() < 0.1 {
                    0
                } else {
                    1 + rng.u64(..3_000)
                };
            }
        }
        // A sender emits in timestamp order; the network and retries do not keep it.
        genuine.sort_by_key(|e| e.envelope().map(|e| (e.occurred_at, e.id.to_owned())));
        for i in 0..genuine.len() {
            if rng.f64() < config.reorder {
                let j = (i + 1 + rng.u64(..32) as usize).min(genuine.len() - 1);
                genuine.swap(i, j);
            }
        }

        // Sort keys: genuine deliveries at their index, extras near or anywhere.
        let mut keyed: Vec<(f64, PlannedDelivery)> = Vec::new();
        let n = genuine.len() as f64;
        for (i, event) in genuine.iter().enumerate() {
            let position = i as f64;
            let original = genuine_delivery(event);
            if rng.f64() < config.duplicates {
                // Often close enough to be in flight together (a 409 first).
                let later = position + rng.u64(..8) as f64 + 0.5;
                let mut copy = original.clone();
                copy.intent = Intent::Duplicate;
                keyed.push((later, copy));
            }
            if rng.f64() < config.tampered {
                keyed.push((rng.f64() * n, tampered(&original, &mut rng)));
            }
            if rng.f64() < config.wrong_secret_rate {
                keyed.push((rng.f64() * n, wrong_secret(event, keyed.len())));
            }
            if rng.f64() < config.stale {
                let mut replay = original.clone();
                replay.intent = Intent::Stale;
                keyed.push((rng.f64() * n, replay));
            }
            if rng.f64() < config.unknown {
                keyed.push((rng.f64() * n, unknown_type(event, keyed.len())));
            }
            keyed.push((position, original));
        }
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
        Ok(Self {
            deliveries: keyed.into_iter().map(|(_, d)| d).collect(),
        })
    }

    /// The genuine events (each once), in sending order.
    pub fn genuine_events(&self) -> impl Iterator<Item = &EmailEvent> {
        self.deliveries
            .iter()
            .filter(|d| d.intent == Intent::Genuine)
            .filter_map(|d| d.event.as_ref())
    }

    /// How many deliveries of each intent.
    #[must_use]
    pub fn counts(&self) -> BTreeMap<Intent, usize> {
        let mut counts = BTreeMap::new();
        for d in &self.deliveries {
            *counts.entry(d.intent).or_default() += 1;
        }
        counts
    }
}

/// The kinds of one email's events, in the order they happen, exactly `budget` long.
fn lifecycle(rng: &mut Rng, budget: usize) -> Vec<EventKind> {
    use EventKind::*;
    let mut kinds = vec![Sent];
    if budget == 1 {
        return kinds;
    }
    let roll = rng.f64();
    if roll < 0.2 {
        // Bounced outright, after some deferrals.
        kinds.extend(std::iter::repeat_n(Deferred, budget - 2));
        kinds.push(Bounced);
    } else if roll < 0.3 && budget >= 3 {
        // Accepted, then bounced asynchronously.
        kinds.extend(std::iter::repeat_n(Deferred, budget - 3));
        kinds.extend([Delivered, Bounced]);
    } else {
        let deferred = rng.u64(..3).min(budget as u64 - 2) as usize;
        kinds.extend(std::iter::repeat_n(Deferred, deferred));
        kinds.push(Delivered);
        while kinds.len() < budget {
            let last = kinds.len() + 1 == budget;
            let next = if last && rng.f64() < 0.15 {
                Unsubscribed
            } else if last && rng.f64() < 0.05 {
                Complained
            } else if rng.f64() < 0.6 {
                Opened
            } else {
                Clicked
            };
            kinds.push(next);
        }
    }
    kinds
}

fn genuine_delivery(event: &EmailEvent) -> PlannedDelivery {
    let id = event
        .envelope()
        .map_or_else(String::new, |e| e.id.to_owned());
    PlannedDelivery {
        id,
        event_type: event.kind().as_str(),
        intent: Intent::Genuine,
        event: Some(event.clone()),
        body: to_body(event),
        signed_body: None,
    }
}

/// The genuine headers over a body whose event says something else.
fn tampered(original: &PlannedDelivery, rng: &mut Rng) -> PlannedDelivery {
    let mut value: serde_json::Value = serde_json::from_slice(&original.body).unwrap_or_default();
    if rng.f64() < 0.5 {
        value["type"] = "email.delivered".into();
    } else {
        value["data"]["recipient"] = "attacker@example.net".into();
    }
    PlannedDelivery {
        intent: Intent::Tampered,
        event: None,
        body: Bytes::from(value.to_string()),
        signed_body: Some(original.body.clone()),
        ..original.clone()
    }
}

/// A `delivered` for the same email, made up and signed with the wrong secret.
fn wrong_secret(event: &EmailEvent, n: usize) -> PlannedDelivery {
    let envelope = event.envelope().expect("genuine events are known");
    let id = format!("evt_forged_{n:05}");
    let forged = EmailEvent::new(
        EventKind::Delivered,
        &id,
        envelope.occurred_at + 1,
        envelope.email_id,
        envelope.recipient,
    );
    PlannedDelivery {
        id,
        event_type: EventKind::Delivered.as_str(),
        intent: Intent::WrongSecret,
        event: None,
        body: to_body(&forged),
        signed_body: None,
    }
}

/// A correctly signed event of a type the receiver does not know.
fn unknown_type(event: &EmailEvent, n: usize) -> PlannedDelivery {
    let envelope = event.envelope().expect("genuine events are known");
    let id = format!("evt_unknown_{n:05}");
    let body = serde_json::json!({
        "type": "email.scheduled",
        "id": id,
        "occurred_at": envelope.occurred_at,
        "data": { "email_id": envelope.email_id, "send_at": envelope.occurred_at + 60_000 },
    });
    PlannedDelivery {
        id,
        event_type: "email.scheduled",
        intent: Intent::Unknown,
        event: None,
        body: Bytes::from(body.to_string()),
        signed_body: None,
    }
}

fn to_body(event: &EmailEvent) -> Bytes {
    Bytes::from(serde_json::to_vec(event).expect("events serialize"))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::simulator::tests::config;

    #[test]
    fn a_plan_has_every_genuine_event_once() {
        let plan = Plan::generate(&config()).unwrap();
        let genuine: Vec<_> = plan.genuine_events().collect();
        assert_eq!(genuine.len(), 57);
        let mut ids: Vec<_> = genuine.iter().map(|e| e.envelope().unwrap().id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 57);
        let counts = plan.counts();
        assert!(counts[&Intent::Duplicate] > 0, "{counts:?}");
        // Every email starts with `sent` and gets at least five events.
        for i in 0..10 {
            let id = format!("em_{i:04}");
            assert!(genuine.iter().filter(|e| e.email_id() == Some(&id)).count() >= 5);
        }
    }

    #[test]
    fn lifecycles_have_the_budgeted_length() {
        let mut rng = Rng::with_seed(7);
        for budget in 1..20 {
            for _ in 0..50 {
                let kinds = lifecycle(&mut rng, budget);
                assert_eq!(kinds.len(), budget);
                assert_eq!(kinds[0], EventKind::Sent);
            }
        }
    }
}
