//! What the console's integration tests share: an SQLite inbox with dead
//! letters, requests as an adapter translates them, forms and tokens.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test file uses a different part"
)]

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, Method};
use webhooks_core::console::{Access, Console, ConsoleRequest, ConsoleResponse};
use webhooks_core::inbox::{ClaimToken, Inbox, NewEvent, SqliteInbox, Transition};

pub const HOST: &str = "ops.example:8080";
pub const ORIGIN: &str = "http://ops.example:8080";
pub const XSS_ID: &str = "<script>alert('id')</script>";
pub const XSS_TYPE: &str = "\"><img src=x onerror=alert('type')>";
pub const XSS_BODY: &str =
    "{\"html\":\"<script>alert('body')</script>\",\"x\":\"\\\"><img src=x onerror=alert(1)>\"}";

pub fn admin() -> Option<Access> {
    Some(Access::Admin("alice".into()))
}

pub fn reader() -> Option<Access> {
    Some(Access::ReadOnly("bob".into()))
}

pub async fn inbox() -> Arc<dyn Inbox> {
    let inbox = SqliteInbox::connect("sqlite::memory:").await.unwrap();
    inbox.migrate().await.unwrap();
    Arc::new(inbox)
}

/// Stores and dead-letters one event.
pub async fn dead(inbox: &Arc<dyn Inbox>, key: &str, kind: &str, delivery: &str, body: &str) {
    let mut event = NewEvent::new(key, "test", body.to_owned()).with_event_type(kind);
    event.delivery_id = Some(delivery.to_owned());
    event.headers = vec![
        ("content-type".into(), "application/json".into()),
        ("webhook-signature".into(), "v1,SECRETSIGNATURE".into()),
        ("authorization".into(), "Bearer SECRETTOKEN".into()),
        ("x-note".into(), XSS_TYPE.into()),
    ];
    inbox.accept(&event).await.unwrap();
    let token = ClaimToken::random();
    let leased = inbox
        .lease(token, 1, Duration::from_secs(30), 1)
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    let error = format!("handler failed: {XSS_TYPE}");
    assert_eq!(
        inbox
            .dead_letter(&leased[0].meta.key, token, &error)
            .await
            .unwrap(),
        Transition::Applied
    );
}

pub async fn get(
    console: &Console,
    access: Option<Access>,
    path: &str,
    query: Option<&str>,
) -> ConsoleResponse {
    let mut headers = HeaderMap::new();
    headers.insert("host", HOST.parse().unwrap());
    console
        .handle(
            access,
            ConsoleRequest::new(&Method::GET, path, query, &headers, b"").base("/ops/webhooks"),
        )
        .await
}

pub async fn post(
    console: &Console,
    access: Option<Access>,
    path: &str,
    body: &str,
    extra: &[(&'static str, &str)],
) -> ConsoleResponse {
    let mut headers = HeaderMap::new();
    headers.insert("host", HOST.parse().unwrap());
    for (name, value) in extra {
        headers.insert(*name, value.parse().unwrap());
    }
    console
        .handle(
            access,
            ConsoleRequest::new(&Method::POST, path, None, &headers, body.as_bytes())
                .base("/ops/webhooks"),
        )
        .await
}

pub fn text(response: &ConsoleResponse) -> &str {
    std::str::from_utf8(&response.body).unwrap()
}

/// The CSRF token printed in a page's forms.
pub fn token(page: &str) -> String {
    let at = page
        .find("name=\"csrf\" value=\"")
        .expect("a form with a token")
        + 19;
    page[at..at + page[at..].find('"').unwrap()].to_owned()
}

pub fn form(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (name, value) in pairs {
        if !out.is_empty() {
            out.push('&');
        }
        out.push_str(name);
        out.push('=');
        for byte in value.bytes() {
            if byte.is_ascii_alphanumeric() {
                out.push(byte as char);
            } else {
                out.push_str(&format!("%{byte:02X}"));
            }
        }
    }
    out
}
