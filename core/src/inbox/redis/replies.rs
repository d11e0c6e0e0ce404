//! The Redis inbox's script replies as the inbox's types: the accept
//! answer, the rows of the listings and lookups, and the driver's errors.

use redis::RedisError;

use crate::inbox::{
    Accepted, DeadLetter, DeadLetterCursor, Delivery, DeliveryCursor, DeliveryState, EventMeta,
    InboxError, Transition, decode_headers, from_ms,
};

/// The accept script's reply: 1 stored, 0 a duplicate.
pub(in crate::inbox) fn accepted(reply: i64) -> Accepted {
    if reply == 1 {
        Accepted::Stored
    } else {
        Accepted::Duplicate
    }
}

pub(in crate::inbox) fn inbox_error(error: RedisError) -> InboxError {
    if error.is_timeout() {
        InboxError::Timeout
    } else {
        InboxError::unavailable(error)
    }
}

/// A script's reply row: key, scheme, delivery id, event type, matched key,
/// headers, body, received at, signed at, attempts, last error, updated at.
pub(super) type Row = (
    String,
    String,
    String,
    String,
    String,
    String,
    Vec<u8>,
    i64,
    String,
    i64,
    String,
    i64,
);

pub(super) fn some(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

pub(super) fn meta(row: &mut Row) -> EventMeta {
    EventMeta {
        key: std::mem::take(&mut row.0),
        scheme: std::mem::take(&mut row.1),
        delivery_id: some(std::mem::take(&mut row.2)),
        event_type: some(std::mem::take(&mut row.3)),
        matched_key: std::mem::take(&mut row.4),
        headers: decode_headers(&row.5),
        received_at: from_ms(row.7),
        signed_at: row.8.parse().ok(),
    }
}

pub(super) fn dead(mut row: Row) -> DeadLetter {
    DeadLetter {
        meta: meta(&mut row),
        attempts: u32::try_from(row.9).unwrap_or(u32::MAX),
        last_error: some(std::mem::take(&mut row.10)),
        dead_at: from_ms(row.11),
        body: std::mem::take(&mut row.6).into(),
    }
}

/// What a delivery row adds to a [`Row`]: the hash's state, the due time
/// (`''` unless pending), the lease end (`''` unless leased), the clock.
pub(super) type Extra = (String, String, String, i64);

/// One partition's delivery listing: its rows (with their receipt ms) and
/// where its scan stopped (`None`: at the end).
pub(super) type DeliveryPartitionPage = (Vec<(i64, Delivery)>, Option<DeliveryCursor>);

pub(super) fn delivery(mut row: Row, extra: Extra) -> Delivery {
    let (state, due, lease_until, now) = extra;
    let due: Option<i64> = due.parse().ok();
    let state = match state.as_str() {
        "0" if due.is_some_and(|at| at > now) => DeliveryState::Retrying,
        "0" => DeliveryState::Due,
        "1" => DeliveryState::InFlight,
        "2" => DeliveryState::Completed,
        _ => DeliveryState::Dead,
    };
    Delivery {
        meta: meta(&mut row),
        state,
        attempts: u32::try_from(row.9).unwrap_or(u32::MAX),
        last_error: some(std::mem::take(&mut row.10)),
        due_at: due
            .filter(|_| matches!(state, DeliveryState::Due | DeliveryState::Retrying))
            .map(from_ms),
        lease_until: lease_until
            .parse()
            .ok()
            .filter(|_| state == DeliveryState::InFlight)
            .map(from_ms),
        updated_at: from_ms(row.11),
        body: std::mem::take(&mut row.6).into(),
    }
}

pub(super) fn transition_of(answer: i64) -> Transition {
    if answer == 1 {
        Transition::Applied
    } else {
        Transition::Stale
    }
}

/// One partition's listing: its rows (with their receipt ms) and where its
/// scan stopped (`None`: at the end).
pub(super) type PartitionPage = (Vec<(i64, DeadLetter)>, Option<DeadLetterCursor>, u64);
