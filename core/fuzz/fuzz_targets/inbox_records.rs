//! The inbox's stored-record decoding (issue 25, item 9): whatever a row of
//! the inbox table holds (written here with raw SQL, as a damaged or
//! hand-edited table could), reading it back through the public API (the
//! admin API's listing, its single dead letter and stats, and a worker's
//! lease) never panics, and what it shows is what is stored: the body
//! (UTF-8 as text, otherwise base64), the headers when they are the
//! encoding the inbox writes, nothing else. SQLite in memory, so each run is
//! slower than the pure-parser targets.

#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use arbitrary::Arbitrary;
use base64::Engine as _;
use http::Method;
use libfuzzer_sys::fuzz_target;
use webhooks_core::inbox::{ClaimToken, Inbox, SqliteInbox, admin, sqlx};
use webhooks_core::redact::Redaction;

#[derive(Arbitrary, Debug)]
struct Row {
    key: String,
    scheme: String,
    delivery_id: Option<String>,
    event_type: Option<String>,
    matched_key: String,
    /// Either pairs encoded as the inbox writes them, or any text.
    headers: Result<Vec<(String, String)>, String>,
    body: Vec<u8>,
    received_at: i64,
    signed_at: Option<i64>,
    /// 0 pending, 1 leased, 2 completed, 3 dead; anything else too.
    state: i8,
    attempts: i64,
    due_at: i64,
    token: Option<String>,
    lease_until: Option<i64>,
    last_error: Option<String>,
    updated_at: i64,
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    })
}

fn inbox() -> &'static SqliteInbox {
    static INBOX: OnceLock<SqliteInbox> = OnceLock::new();
    INBOX.get_or_init(|| {
        runtime().block_on(async {
            let inbox = SqliteInbox::connect("sqlite::memory:").await.unwrap();
            inbox.migrate().await.unwrap();
            inbox
        })
    })
}

/// Every byte outside the unreserved set as `%XX`.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fuzz_target!(|row: Row| {
    let inbox = inbox();
    runtime().block_on(async {
        let t = inbox.table().to_owned();
        sqlx::query(&format!("DELETE FROM {t}"))
            .execute(inbox.pool())
            .await
            .unwrap();
        let headers_text = match &row.headers {
            Ok(pairs) => serde_json::to_string(pairs).unwrap(),
            Err(text) => text.clone(),
        };
        let state = i64::from(row.state);
        sqlx::query(&format!(
            "INSERT INTO {t} (event_key, scheme, delivery_id, event_type, matched_key, headers, \
             body, received_at, signed_at, state, attempts, due_at, token, lease_until, \
             last_error, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        ))
        .bind(&row.key)
        .bind(&row.scheme)
        .bind(&row.delivery_id)
        .bind(&row.event_type)
        .bind(&row.matched_key)
        .bind(&headers_text)
        .bind(&row.body)
        .bind(row.received_at)
        .bind(row.signed_at)
        .bind(state)
        .bind(row.attempts)
        .bind(row.due_at)
        .bind(&row.token)
        .bind(row.lease_until)
        .bind(&row.last_error)
        .bind(row.updated_at)
        .execute(inbox.pool())
        .await
        .unwrap();

        let stats = get(inbox, "/stats", None).await;
        assert_eq!(stats.status, 200);

        let list = get(inbox, "/dead-letters", Some("limit=1000")).await;
        assert_eq!(list.status, 200);
        let items = list.body["items"].as_array().expect("items").len();
        assert_eq!(items, usize::from(state == 3), "{:?}", list.body);
        let _ = list.body_bytes();

        if !row.key.is_empty() {
            let path = format!("/dead-letters/{}", encode(&row.key));
            let one = get(inbox, &path, None).await;
            if state != 3 {
                assert_eq!(one.status, 404);
            } else {
                assert_eq!(one.status, 200, "{path}");
                let body = &one.body;
                assert_eq!(body["key"].as_str(), Some(row.key.as_str()));
                match std::str::from_utf8(&row.body) {
                    Ok(text) => assert_eq!(body["body"].as_str(), Some(text)),
                    Err(_) => {
                        let shown = body["body_base64"].as_str().expect("base64 body");
                        let decoded = base64::engine::general_purpose::STANDARD
                            .decode(shown)
                            .unwrap();
                        assert_eq!(decoded, row.body);
                    }
                }
                let headers: Vec<(String, String)> =
                    serde_json::from_value(body["headers"].clone()).unwrap();
                // As stored, credential headers redacted.
                let shown = |pairs: &[(String, String)]| Redaction::new().apply(pairs);
                match &row.headers {
                    Ok(pairs) => assert_eq!(headers, shown(pairs)),
                    Err(text) => {
                        let parsed: Result<Vec<(String, String)>, _> = serde_json::from_str(text);
                        assert_eq!(headers, shown(&parsed.unwrap_or_default()));
                    }
                }
                let _ = one.body_bytes();
            }
        }

        // A worker's lease decodes pending and expired rows the same way.
        let leased = inbox
            .lease(ClaimToken::random(), 10, Duration::from_secs(30), 5)
            .await
            .unwrap();
        assert!(leased.len() <= 1);
        for event in leased {
            assert_eq!(event.meta.key, row.key);
            assert_eq!(&event.body[..], &row.body[..]);
        }
    });
});

/// A `GET` to an admin API with the defaults and no `authorize` hook
/// (unauthenticated access allowed: an admin's view, bodies included).
async fn get(inbox: &SqliteInbox, path: &str, query: Option<&str>) -> admin::AdminResponse {
    let headers = http::HeaderMap::new();
    let request = admin::AdminRequest::new(&Method::GET, path, query, &headers);
    // No hook: served as an admin, so that every route is reached.
    let config = admin::AdminConfig::default().allow_unauthenticated();
    admin::handle(inbox, &config, None, request).await
}
