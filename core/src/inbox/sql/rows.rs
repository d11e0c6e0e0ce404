//! The rows the SQL inboxes read back, and their decoding into leased
//! events, dead letters and deliveries.

use super::{COMPLETED, LEASED, PENDING};
use crate::dedup::ClaimToken;
use crate::inbox::{
    DeadLetter, Delivery, DeliveryState, EventMeta, LeasedEvent, decode_headers, from_ms,
};

/// A leased row.
pub(crate) type LeaseRow = (
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    String,
    Vec<u8>,
    i64,
    Option<i64>,
    i64,
);

/// A dead-letter row.
pub(crate) type DeadRow = (
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    String,
    Vec<u8>,
    i64,
    Option<i64>,
    i64,
    Option<String>,
    i64,
);

/// The text columns every row starts with: key, scheme, delivery id, event
/// type, matched key, headers.
type Head = (
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    String,
);

fn meta(head: Head, received_at: i64, signed_at: Option<i64>) -> EventMeta {
    let (key, scheme, delivery_id, event_type, matched_key, headers) = head;
    EventMeta {
        key,
        scheme,
        delivery_id,
        event_type,
        matched_key,
        headers: decode_headers(&headers),
        received_at: from_ms(received_at),
        signed_at: signed_at.and_then(|s| u64::try_from(s).ok()),
    }
}

pub(crate) fn leased(row: LeaseRow, token: ClaimToken) -> LeasedEvent {
    let (key, scheme, delivery_id, event_type, matched_key, headers, body, received, signed, n) =
        row;
    LeasedEvent {
        meta: meta(
            (key, scheme, delivery_id, event_type, matched_key, headers),
            received,
            signed,
        ),
        body: body.into(),
        attempt: u32::try_from(n).unwrap_or(u32::MAX),
        token,
    }
}

pub(crate) fn dead(row: DeadRow) -> DeadLetter {
    let (
        key,
        scheme,
        delivery_id,
        event_type,
        matched_key,
        headers,
        body,
        received,
        signed,
        n,
        error,
        at,
    ) = row;
    DeadLetter {
        meta: meta(
            (key, scheme, delivery_id, event_type, matched_key, headers),
            received,
            signed,
        ),
        attempts: u32::try_from(n).unwrap_or(u32::MAX),
        last_error: error,
        dead_at: from_ms(at),
        body: body.into(),
    }
}

/// A delivery row: the head, the body, then [`DELIVERY_TAIL`](super::statements::DELIVERY_TAIL).
pub(crate) type DeliveryRow = (
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    String,
    Vec<u8>,
    i64,
    Option<i64>,
    i64,
    Option<String>,
    i64,
    i64,
    Option<i64>,
    Option<i64>,
    i64,
);

pub(crate) fn delivery(row: DeliveryRow) -> Delivery {
    let (
        key,
        scheme,
        delivery_id,
        event_type,
        matched_key,
        headers,
        body,
        received,
        signed,
        n,
        error,
        updated,
        state,
        due_at,
        lease_until,
        now,
    ) = row;
    let state = match state {
        PENDING if due_at.is_some_and(|at| at > now) => DeliveryState::Retrying,
        PENDING => DeliveryState::Due,
        LEASED => DeliveryState::InFlight,
        COMPLETED => DeliveryState::Completed,
        _ => DeliveryState::Dead,
    };
    Delivery {
        meta: meta(
            (key, scheme, delivery_id, event_type, matched_key, headers),
            received,
            signed,
        ),
        state,
        attempts: u32::try_from(n).unwrap_or(u32::MAX),
        last_error: error,
        due_at: due_at
            .filter(|_| matches!(state, DeliveryState::Due | DeliveryState::Retrying))
            .map(from_ms),
        lease_until: lease_until
            .filter(|_| state == DeliveryState::InFlight)
            .map(from_ms),
        updated_at: from_ms(updated),
        body: body.into(),
    }
}
