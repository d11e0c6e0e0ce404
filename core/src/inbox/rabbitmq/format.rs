//! The RabbitMQ inbox's message format: the headers a delivery carries, the
//! dead letter's header, and the dedup store's keys.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};

pub(super) use super::super::broker_format::{Dead, Meta, event_meta};
use super::super::{DeadLetter, from_ms};
use super::{ATTEMPTS_HEADER, DEAD_HEADER, META_HEADER, REPLAY_HEADER};

/// What the inbox reads back from a message's headers.
pub(super) struct Headers {
    pub(super) meta: Option<Meta>,
    /// Attempts made before this copy was published.
    pub(super) attempts: u32,
    /// How many times the broker handed this copy back (`x-delivery-count`).
    pub(super) redeliveries: u32,
    /// How many times the event was replayed from the dead letters.
    pub(super) replays: u32,
    pub(super) dead: Option<Dead>,
    /// The broker dead-lettered it itself (`x-death`: its delivery limit).
    pub(super) broker_dead: bool,
}

impl Headers {
    pub(super) fn of(properties: &BasicProperties) -> Self {
        let table = properties.headers().as_ref();
        let get = |name: &str| table.and_then(|t| t.inner().get(name));
        Self {
            meta: get(META_HEADER).and_then(json),
            attempts: get(ATTEMPTS_HEADER).and_then(number).unwrap_or(0),
            redeliveries: get("x-delivery-count").and_then(number).unwrap_or(0),
            replays: get(REPLAY_HEADER).and_then(number).unwrap_or(0),
            dead: get(DEAD_HEADER).and_then(json),
            broker_dead: get("x-death").is_some(),
        }
    }
}

fn json<T: serde::de::DeserializeOwned>(value: &AMQPValue) -> Option<T> {
    match value {
        AMQPValue::LongString(text) => serde_json::from_slice(text.as_bytes()).ok(),
        AMQPValue::ShortString(text) => serde_json::from_str(text.as_str()).ok(),
        _ => None,
    }
}

fn number(value: &AMQPValue) -> Option<u32> {
    let n: i128 = match value {
        AMQPValue::ShortShortInt(n) => (*n).into(),
        AMQPValue::ShortShortUInt(n) => (*n).into(),
        AMQPValue::ShortInt(n) => (*n).into(),
        AMQPValue::ShortUInt(n) => (*n).into(),
        AMQPValue::LongInt(n) => (*n).into(),
        AMQPValue::LongUInt(n) => (*n).into(),
        AMQPValue::LongLongInt(n) => (*n).into(),
        _ => return None,
    };
    u32::try_from(n).ok()
}

/// The properties of a copy of `meta`'s delivery: persistent, the key as
/// message id, the event type as type, and the inbox's headers.
pub(super) fn properties(
    meta: &Meta,
    attempts: u32,
    replays: u32,
    dead: Option<&Dead>,
) -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert(META_HEADER.into(), text_value(&json_text(meta)));
    headers.insert(
        ATTEMPTS_HEADER.into(),
        AMQPValue::LongLongInt(attempts.into()),
    );
    if replays > 0 {
        headers.insert(REPLAY_HEADER.into(), AMQPValue::LongLongInt(replays.into()));
    }
    if let Some(dead) = dead {
        headers.insert(DEAD_HEADER.into(), text_value(&json_text(dead)));
    }
    let mut properties = BasicProperties::default()
        .with_delivery_mode(2)
        .with_content_type(ShortString::from("application/octet-stream"))
        .with_timestamp(u64::try_from(meta.received_at_ms / 1000).unwrap_or(0))
        .with_headers(headers);
    if let Ok(id) = ShortString::try_new(meta.key.clone()) {
        properties = properties.with_message_id(id);
    }
    if let Some(kind) = meta
        .event_type
        .as_ref()
        .and_then(|t| ShortString::try_new(t.clone()).ok())
    {
        properties = properties.with_type(kind);
    }
    properties
}

fn text_value(text: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(text.as_bytes().to_vec()))
}

pub(super) fn json_text<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "{}".to_owned())
}

/// The dead letter a message of the dead-letter queue holds; `None` when it
/// carries no `webhooks-meta` header.
pub(super) fn dead_letter_of(
    headers: &Headers,
    body: &[u8],
    with_body: bool,
) -> Option<DeadLetter> {
    let meta = headers.meta.as_ref()?;
    let (attempts, last_error, dead_at_ms) = match &headers.dead {
        Some(dead) => (dead.attempts, dead.last_error.clone(), dead.dead_at_ms),
        // Dead-lettered by the broker (its delivery limit: the workers
        // holding it died again and again).
        None => (
            headers.attempts + headers.redeliveries,
            headers
                .broker_dead
                .then(|| "the queue's delivery limit was reached".to_owned()),
            meta.received_at_ms,
        ),
    };
    Some(DeadLetter {
        meta: event_meta(meta),
        attempts,
        last_error,
        dead_at: from_ms(dead_at_ms),
        body: if with_body {
            bytes::Bytes::copy_from_slice(body)
        } else {
            bytes::Bytes::new()
        },
    })
}

/// A retry delay rounded up to two significant digits of milliseconds (at
/// least 10 ms): one delay queue per value, so a few dozen at most for a
/// backoff, each with one TTL (no message waits behind a longer one).
pub(super) fn delay_bucket(ms: u64) -> u64 {
    let ms = ms.max(10);
    let mut scale = 1;
    while ms / scale >= 100 {
        scale *= 10;
    }
    ms.div_ceil(scale) * scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_round_up_to_two_digits() {
        assert_eq!(delay_bucket(0), 10);
        assert_eq!(delay_bucket(99), 99);
        assert_eq!(delay_bucket(101), 110);
        assert_eq!(delay_bucket(1_234), 1_300);
        assert_eq!(delay_bucket(60_000), 60_000);
        assert_eq!(delay_bucket(60_001), 61_000);
    }

    #[test]
    fn headers_round_trip() {
        let meta = Meta {
            key: "webhooks:stripe:evt_1".into(),
            scheme: "stripe".into(),
            delivery_id: Some("evt_1".into()),
            event_type: Some("invoice.paid".into()),
            matched_key: String::new(),
            headers: vec![("x-a".into(), "é".into())],
            signed_at: None,
            received_at_ms: 5,
        };
        let dead = Dead {
            attempts: 3,
            last_error: Some("boom".into()),
            dead_at_ms: 9,
        };
        let properties = properties(&meta, 2, 1, Some(&dead));
        let back = Headers::of(&properties);
        assert_eq!(back.meta.unwrap().headers[0].1, "é");
        assert_eq!((back.attempts, back.replays, back.redeliveries), (2, 1, 0));
        assert_eq!(back.dead.unwrap().attempts, 3);
        assert_eq!(
            properties.message_id().as_ref().unwrap().as_str(),
            "webhooks:stripe:evt_1"
        );
    }
}
