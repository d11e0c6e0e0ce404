//! The dead-letter admin API, framework-free: a method, a path relative to
//! where it is mounted and a query string in; a status and a JSON body out.
//! `tower-webhooks` (feature `inbox-admin`) and `actix-webhooks` (same
//! feature) only translate their requests to [`handle`] and back, so both
//! answer the same. **Mount it behind your own authentication**: it shows
//! bodies and replays deliveries.
//!
//! | method | path | answer |
//! |---|---|---|
//! | `GET` | `/dead-letters?scheme=&event_type=&from=&until=&after=&limit=` | `200 {"items": [...], "next": cursor or null}` (`from`/`until`: Unix seconds; bodies left out) |
//! | `GET` | `/dead-letters/{key}` | `200` the dead letter with `body` (UTF-8) or `body_base64`; `404` |
//! | `POST` | `/dead-letters/{key}/replay` | `200 {"replayed": true}`; `409` when not (or no longer) dead — of concurrent replays one wins |
//! | `DELETE` | `/dead-letters/{key}` | `204`; `404` |
//! | `GET` | `/stats` | `200 {"pending", "due", "oldest_due_age_ms", "in_flight", "dead", "completed"}` |
//! | `POST` | `/purge?older_than=<seconds>` | `200 {"purged": n}` (completed events only) |
//!
//! Keys in paths are percent-encoded. A store failure is `503`; a malformed
//! parameter `400`; an unknown path `404`; a wrong method `405`.
//!
//! ```
//! # #[cfg(feature = "sqlite")]
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use webhooks_core::inbox::{SqliteInbox, admin};
//!
//! let inbox = SqliteInbox::connect("sqlite::memory:").await?;
//! inbox.migrate().await?;
//! let answer = admin::handle(&inbox, &http::Method::GET, "/stats", None).await;
//! assert_eq!(answer.status, 200);
//! assert_eq!(answer.body["pending"], 0);
//! # Ok(()) }
//! # #[cfg(not(feature = "sqlite"))] fn main() {}
//! ```

use std::time::{Duration, UNIX_EPOCH};

use base64::Engine as _;
use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::{DeadLetter, DeadLetterCursor, DeadLetterFilter, Inbox, Transition, to_ms};

/// What the admin API answers.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AdminResponse {
    /// The status.
    pub status: StatusCode,
    /// The JSON body (`null` for `204`).
    pub body: Value,
}

impl AdminResponse {
    fn new(status: StatusCode, body: Value) -> Self {
        Self { status, body }
    }

    fn error(status: StatusCode, reason: &str) -> Self {
        Self::new(status, json!({ "error": reason }))
    }

    /// The body as bytes (`application/json`), empty for `204`.
    #[must_use]
    pub fn body_bytes(&self) -> Vec<u8> {
        if self.body.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(&self.body).unwrap_or_default()
        }
    }
}

/// Answers one admin request: `path` relative to the mount point, `query`
/// without the `?`.
pub async fn handle(
    inbox: &dyn Inbox,
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> AdminResponse {
    match route(
        inbox,
        method,
        path.trim_end_matches('/'),
        query.unwrap_or(""),
    )
    .await
    {
        Ok(response) => response,
        Err(error) => {
            tracing::warn!(error = %error, "inbox admin: store failed");
            AdminResponse::error(StatusCode::SERVICE_UNAVAILABLE, "inbox store unavailable")
        }
    }
}

async fn route(
    inbox: &dyn Inbox,
    method: &Method,
    path: &str,
    query: &str,
) -> Result<AdminResponse, super::InboxError> {
    let params = parse_query(query);
    let get = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let not_allowed = || AdminResponse::error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    if path == "/stats" {
        if method != Method::GET {
            return Ok(not_allowed());
        }
        let stats = inbox.stats().await?;
        return Ok(AdminResponse::new(
            StatusCode::OK,
            json!({
                "pending": stats.pending,
                "due": stats.due,
                "oldest_due_age_ms": stats.oldest_due_age.map(|d| d.as_millis() as u64),
                "in_flight": stats.in_flight,
                "dead": stats.dead,
                "completed": stats.completed,
            }),
        ));
    }
    if path == "/purge" {
        if method != Method::POST {
            return Ok(not_allowed());
        }
        let Some(secs) = get("older_than").and_then(|v| v.parse::<u64>().ok()) else {
            return Ok(AdminResponse::error(
                StatusCode::BAD_REQUEST,
                "older_than (seconds) is required",
            ));
        };
        let purged = inbox.purge_completed(Duration::from_secs(secs)).await?;
        return Ok(AdminResponse::new(
            StatusCode::OK,
            json!({ "purged": purged }),
        ));
    }
    if path == "/dead-letters" {
        if method != Method::GET {
            return Ok(not_allowed());
        }
        let mut filter = DeadLetterFilter {
            scheme: get("scheme").map(str::to_owned),
            event_type: get("event_type").map(str::to_owned),
            ..DeadLetterFilter::default()
        };
        for (name, slot) in [
            ("from", &mut filter.received_from),
            ("until", &mut filter.received_until),
        ] {
            if let Some(value) = get(name) {
                let Ok(secs) = value.parse::<u64>() else {
                    return Ok(AdminResponse::error(
                        StatusCode::BAD_REQUEST,
                        "from and until are Unix seconds",
                    ));
                };
                *slot = Some(UNIX_EPOCH + Duration::from_secs(secs));
            }
        }
        if let Some(after) = get("after") {
            let Ok(cursor) = after.parse::<DeadLetterCursor>() else {
                return Ok(AdminResponse::error(
                    StatusCode::BAD_REQUEST,
                    "malformed cursor",
                ));
            };
            filter.after = Some(cursor);
        }
        if let Some(limit) = get("limit") {
            let Ok(limit) = limit.parse() else {
                return Ok(AdminResponse::error(
                    StatusCode::BAD_REQUEST,
                    "limit is a number",
                ));
            };
            filter.limit = Some(limit);
        }
        let page = inbox.dead_letters(&filter).await?;
        let items: Vec<Value> = page.items.iter().map(|d| dead_json(d, false)).collect();
        return Ok(AdminResponse::new(
            StatusCode::OK,
            json!({ "items": items, "next": page.next.map(|c| c.to_string()) }),
        ));
    }
    let Some(rest) = path.strip_prefix("/dead-letters/") else {
        return Ok(AdminResponse::error(
            StatusCode::NOT_FOUND,
            "no such admin route",
        ));
    };
    if let Some(key) = rest.strip_suffix("/replay") {
        if method != Method::POST {
            return Ok(not_allowed());
        }
        return Ok(match inbox.replay(&percent_decode(key)).await? {
            Transition::Applied => AdminResponse::new(StatusCode::OK, json!({ "replayed": true })),
            Transition::Stale => AdminResponse::error(StatusCode::CONFLICT, "not a dead letter"),
        });
    }
    let key = percent_decode(rest);
    if method == Method::GET {
        return Ok(match inbox.dead_letter_get(&key).await? {
            Some(dead) => AdminResponse::new(StatusCode::OK, dead_json(&dead, true)),
            None => AdminResponse::error(StatusCode::NOT_FOUND, "no such dead letter"),
        });
    }
    if method == Method::DELETE {
        return Ok(match inbox.discard(&key).await? {
            Transition::Applied => AdminResponse::new(StatusCode::NO_CONTENT, Value::Null),
            Transition::Stale => AdminResponse::error(StatusCode::NOT_FOUND, "no such dead letter"),
        });
    }
    Ok(not_allowed())
}

fn dead_json(dead: &DeadLetter, with_body: bool) -> Value {
    let meta = &dead.meta;
    let mut value = json!({
        "key": meta.key,
        "scheme": meta.scheme,
        "delivery_id": meta.delivery_id,
        "event_type": meta.event_type,
        "matched_key": meta.matched_key,
        "headers": meta.headers,
        "received_at_ms": to_ms(meta.received_at),
        "signed_at": meta.signed_at,
        "attempts": dead.attempts,
        "last_error": dead.last_error,
        "dead_at_ms": to_ms(dead.dead_at),
    });
    if with_body {
        match std::str::from_utf8(&dead.body) {
            Ok(text) => value["body"] = Value::String(text.to_owned()),
            Err(_) => {
                value["body_base64"] =
                    Value::String(base64::engine::general_purpose::STANDARD.encode(&dead.body));
            }
        }
    }
    value
}

fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (
                percent_decode(name),
                percent_decode(&value.replace('+', " ")),
            )
        })
        .collect()
}

/// Decodes `%XX` escapes (invalid ones are kept as is).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = text.get(i + 1..i + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_and_keys_are_percent_decoded() {
        assert_eq!(
            percent_decode("webhooks%3Atest%3Amsg_1"),
            "webhooks:test:msg_1"
        );
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(
            parse_query("scheme=stripe&event_type=a%2Eb+c&x"),
            [
                ("scheme".to_owned(), "stripe".to_owned()),
                ("event_type".to_owned(), "a.b c".to_owned()),
                ("x".to_owned(), String::new())
            ]
        );
    }
}
