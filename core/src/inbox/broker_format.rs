//! The JSON the broker-backed inboxes (JetStream, RabbitMQ) carry in their
//! message headers: one format, so that a consumer in another language
//! reads both alike (docs/inbox.md).

use super::{EventMeta, from_ms};

/// The metadata kept with a delivery, as the `Webhooks-Meta` header
/// carries it.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Meta {
    pub(crate) key: String,
    pub(crate) scheme: String,
    #[serde(default)]
    pub(crate) delivery_id: Option<String>,
    #[serde(default)]
    pub(crate) event_type: Option<String>,
    #[serde(default)]
    pub(crate) matched_key: String,
    #[serde(default)]
    pub(crate) headers: Vec<(String, String)>,
    #[serde(default)]
    pub(crate) signed_at: Option<u64>,
    pub(crate) received_at_ms: i64,
}

/// What a dead letter adds, as the `Webhooks-Dead` header carries it.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Dead {
    pub(crate) attempts: u32,
    #[serde(default)]
    pub(crate) last_error: Option<String>,
    pub(crate) dead_at_ms: i64,
}

/// The delivery's metadata as the inbox API gives it.
pub(crate) fn event_meta(meta: &Meta) -> EventMeta {
    EventMeta {
        key: meta.key.clone(),
        scheme: meta.scheme.clone(),
        delivery_id: meta.delivery_id.clone(),
        event_type: meta.event_type.clone(),
        matched_key: meta.matched_key.clone(),
        headers: meta.headers.clone(),
        received_at: from_ms(meta.received_at_ms),
        signed_at: meta.signed_at,
    }
}
