//! The JSON answers for one dead letter or delivery: credential headers
//! and payload fields redacted for everyone ([`crate::redact`]), the body
//! only for callers allowed to see it.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::inbox::{DeadLetter, Delivery, EventMeta, to_ms};
use crate::redact::{DEFAULT_BODY_LIMIT, EventRedaction, Redaction, Surface};

/// One dead letter. `body`: `None` in a list (never a body), `Some(shown)`
/// for an item answer.
pub(super) fn dead_json(dead: &DeadLetter, redaction: &Redaction, body: Option<bool>) -> Value {
    let event = event(&dead.meta, redaction);
    let mut value = meta_json(&dead.meta, &event);
    value["attempts"] = json!(dead.attempts);
    value["last_error"] = json!(dead.last_error);
    value["dead_at_ms"] = json!(to_ms(dead.dead_at));
    add_body(&mut value, &dead.body, &event, body);
    value
}

/// One delivery in any state (see [`dead_json`] for `body`).
pub(super) fn delivery_json(one: &Delivery, redaction: &Redaction, body: Option<bool>) -> Value {
    let event = event(&one.meta, redaction);
    let mut value = meta_json(&one.meta, &event);
    value["state"] = json!(one.state.as_str());
    value["attempts"] = json!(one.attempts);
    value["last_error"] = json!(one.last_error);
    value["due_at_ms"] = json!(one.due_at.map(to_ms));
    value["lease_until_ms"] = json!(one.lease_until.map(to_ms));
    value["updated_at_ms"] = json!(to_ms(one.updated_at));
    add_body(&mut value, &one.body, &event, body);
    value
}

fn event<'a>(meta: &'a EventMeta, redaction: &'a Redaction) -> EventRedaction<'a> {
    redaction.event(Surface::AdminApi, &meta.scheme, meta.event_type.as_deref())
}

/// What every event shows: its metadata, the kept headers redacted.
fn meta_json(meta: &EventMeta, event: &EventRedaction<'_>) -> Value {
    json!({
        "key": meta.key,
        "scheme": meta.scheme,
        "delivery_id": meta.delivery_id,
        "event_type": meta.event_type,
        "matched_key": meta.matched_key,
        "headers": event.apply(&meta.headers),
        "received_at_ms": to_ms(meta.received_at),
        "signed_at": meta.signed_at,
    })
}

/// The body when shown, its fields redacted ([`ShownBody::json_members`](crate::redact::ShownBody::json_members):
/// a JSON body over [`DEFAULT_BODY_LIMIT`] is not parsed, so `"body": null`
/// and why); for a read-only caller's item answer, `"body": null` and why.
fn add_body(value: &mut Value, bytes: &Bytes, event: &EventRedaction<'_>, body: Option<bool>) {
    match body {
        None => {}
        Some(false) => {
            value["body"] = Value::Null;
            value["body_omitted"] = json!("read-only access");
        }
        Some(true) => {
            for (name, member) in event.body(bytes, DEFAULT_BODY_LIMIT).json_members(bytes) {
                value[name] = member;
            }
        }
    }
}
