//! The JetStream inbox's message format: the metadata header, the dead
//! letter's header, subject tokens, digests and times.

use std::time::{Duration, SystemTime};

use async_nats::HeaderMap;
use async_nats::jetstream::message::StreamMessage;
use bytes::Bytes;
use sha2::{Digest as _, Sha256};

pub(super) use super::super::broker_format::{Dead, Meta, event_meta};
use super::super::{DeadLetter, to_ms};
use super::{DEAD_HEADER, META_HEADER};

pub(super) fn dead_letter_of(message: &StreamMessage, with_body: bool) -> Option<DeadLetter> {
    let meta = header_json::<Meta>(&message.headers, META_HEADER)?;
    let dead = header_json::<Dead>(&message.headers, DEAD_HEADER)?;
    Some(DeadLetter {
        meta: event_meta(&meta),
        attempts: dead.attempts,
        last_error: dead.last_error,
        dead_at: super::super::from_ms(dead.dead_at_ms),
        body: if with_body {
            message.payload.clone()
        } else {
            Bytes::new()
        },
    })
}

pub(super) fn header_json<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    name: &str,
) -> Option<T> {
    serde_json::from_str(headers.get(name)?.as_str()).ok()
}

/// When a completion record was written (its payload: epoch milliseconds).
pub(super) fn completed_at(record: &StreamMessage) -> SystemTime {
    let ms = std::str::from_utf8(&record.payload)
        .ok()
        .and_then(|text| text.parse::<i64>().ok())
        .unwrap_or_else(|| to_ms(time_of(record.time.unix_timestamp_nanos())));
    super::super::from_ms(ms)
}

/// A server time (nanoseconds since the epoch) as a time.
pub(super) fn time_of(nanos: i128) -> SystemTime {
    let ms = nanos.div_euclid(1_000_000);
    super::super::from_ms(i64::try_from(ms).unwrap_or(0))
}

pub(super) fn ms_u64(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The first 32 hex digits of the key's SHA-256: a subject token and a
/// key-value key whatever the key holds.
pub(super) fn digest(key: &str) -> String {
    crate::scheme::encode_hex(&Sha256::digest(key.as_bytes())[..16])
}

/// `text` as one subject token: `A-Z a-z 0-9 _ -` kept, anything else `_`,
/// at most 64 characters; `_` when empty.
pub(super) fn token(text: &str) -> String {
    let out: String = text
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() { "_".to_owned() } else { out }
}

/// `value` as JSON with every non-ASCII character escaped (`\uXXXX`): a
/// NATS header value is one line of ASCII.
pub(super) fn ascii_json<T: serde::Serialize>(value: &T) -> String {
    let text = serde_json::to_string(value).unwrap_or_else(|_| "{}".to_owned());
    if text.is_ascii() {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::JetStreamInbox;
    use super::*;

    #[test]
    fn tokens_and_json_are_header_safe() {
        assert_eq!(token("invoice.paid"), "invoice_paid");
        assert_eq!(token(""), "_");
        assert_eq!(token("a b*>"), "a_b__");
        let json = ascii_json(&("é\r\n", 1));
        assert!(json.is_ascii() && !json.contains('\n'), "{json}");
        let back: (String, u32) = serde_json::from_str(&json).unwrap();
        assert_eq!(back.0, "é\r\n");
        assert_eq!(digest("k").len(), 32);
    }

    #[test]
    fn urls_name_the_stream_and_settings() {
        let b = JetStreamInbox::builder_from_url(
            "nats://127.0.0.1:4222/ORDERS?replicas=3&duplicate_window=1h",
        )
        .unwrap();
        assert_eq!((b.stream.as_str(), b.replicas), ("ORDERS", 3));
        assert_eq!(b.duplicate_window, Duration::from_secs(3600));
        assert_eq!(b.url, "nats://127.0.0.1:4222");
        assert!(JetStreamInbox::builder_from_url("nats://h?table=x").is_err());
        assert!(JetStreamInbox::builder_from_url("nats://h?replicas=x").is_err());
    }

    #[test]
    fn urls_name_the_servers_of_a_cluster() {
        let b = JetStreamInbox::builder_from_url(
            "nats://127.0.0.1:4231,nats://127.0.0.1:4232,127.0.0.1:4233/CHAOS?replicas=3",
        )
        .unwrap();
        assert_eq!(
            b.url,
            "nats://127.0.0.1:4231,nats://127.0.0.1:4232,nats://127.0.0.1:4233"
        );
        assert_eq!((b.stream.as_str(), b.replicas), ("CHAOS", 3));
        let b = JetStreamInbox::builder_from_url("jetstream://u:p@a:1,b:2").unwrap();
        assert_eq!(
            (b.url.as_str(), b.stream.as_str()),
            ("nats://u:p@a:1,nats://b:2", "WEBHOOKS")
        );
        // The stream after the last server only; no empty server.
        assert!(JetStreamInbox::builder_from_url("nats://a:1/S,nats://b:2").is_err());
        assert!(JetStreamInbox::builder_from_url("nats://a:1,,b:2").is_err());
        // Each server parses as the client's address.
        for server in b.url.split(',') {
            assert!(server.parse::<async_nats::ServerAddr>().is_ok(), "{server}");
        }
    }
}
