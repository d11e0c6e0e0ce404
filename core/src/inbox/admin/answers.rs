//! The JSON answers for one dead letter or delivery: credential headers
//! redacted for everyone, the body only for callers allowed to see it.

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Value, json};

use crate::inbox::{DeadLetter, Delivery, EventMeta, to_ms};
use crate::redact::Redaction;

/// One dead letter. `body`: `None` in a list (never a body), `Some(shown)`
/// for an item answer.
pub(super) fn dead_json(dead: &DeadLetter, redaction: &Redaction, body: Option<bool>) -> Value {
    let mut value = meta_json(&dead.meta, redaction);
    value["attempts"] = json!(dead.attempts);
    value["last_error"] = json!(dead.last_error);
    value["dead_at_ms"] = json!(to_ms(dead.dead_at));
    add_body(&mut value, &dead.body, body);
    value
}

/// One delivery in any state (see [`dead_json`] for `body`).
pub(super) fn delivery_json(one: &Delivery, redaction: &Redaction, body: Option<bool>) -> Value {
    let mut value = meta_json(&one.meta, redaction);
    value["state"] = json!(one.state.as_str());
    value["attempts"] = json!(one.attempts);
    value["last_error"] = json!(one.last_error);
    value["due_at_ms"] = json!(one.due_at.map(to_ms));
    value["lease_until_ms"] = json!(one.lease_until.map(to_ms));
    value["updated_at_ms"] = json!(to_ms(one.updated_at));
    add_body(&mut value, &one.body, body);
    value
}

/// What every event shows: its metadata, the kept headers redacted.
fn meta_json(meta: &EventMeta, redaction: &Redaction) -> Value {
    json!({
        "key": meta.key,
        "scheme": meta.scheme,
        "delivery_id": meta.delivery_id,
        "event_type": meta.event_type,
        "matched_key": meta.matched_key,
        "headers": redaction.apply(&meta.headers),
        "received_at_ms": to_ms(meta.received_at),
        "signed_at": meta.signed_at,
    })
}

/// The body (UTF-8 as `body`, else `body_base64`) when shown; for a
/// read-only caller's item answer, `"body": null` and why.
fn add_body(value: &mut Value, bytes: &Bytes, body: Option<bool>) {
    match body {
        None => {}
        Some(false) => {
            value["body"] = Value::Null;
            value["body_omitted"] = json!("read-only access");
        }
        Some(true) => match std::str::from_utf8(bytes) {
            Ok(text) => value["body"] = Value::String(text.to_owned()),
            Err(_) => {
                value["body_base64"] =
                    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes));
            }
        },
    }
}
