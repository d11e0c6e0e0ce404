//! The operators' console (feature `console`) through its public entry point
//! `Console::handle` (issue 35, item 10): any method, path, query, form body,
//! access level (none, denied, read-only, admin, under any identity),
//! `Origin` / `Sec-Fetch-Site` and base path, over an SQLite inbox holding
//! a dead letter whose every sender-controlled field comes from the input,
//! beside a pending, a leased and a completed event.
//!
//! Checks, on every answer:
//! - never a panic;
//! - the security headers: a CSP with `default-src 'self'` and
//!   `frame-ancestors 'none'`, `X-Frame-Options: DENY`,
//!   `X-Content-Type-Options: nosniff`, `Cache-Control: no-store`,
//!   `Referrer-Policy: same-origin`;
//! - an HTML answer holds only the tags and attributes the console's
//!   templates (`core/src/console/render.rs`) emit, every `<` opens one of
//!   them, exactly one `<script>` (the console's own, by `src`, empty), and
//!   every link, form target and script source is a path under the base;
//! - a redirect's `Location` is a path under the base;
//! - the inbox's rows and pause flag change only for a `POST` to an action
//!   by an admin, with that admin's valid form token, from the same origin
//!   (`Origin` the request's host or the allowed origin, `Sec-Fetch-Site`
//!   absent or `same-origin`, one of them present).
//!
//! The allow-list below is what the templates emit today: a template that
//! adds a tag or attribute adds it here too.

#![no_main]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use arbitrary::Arbitrary;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use libfuzzer_sys::fuzz_target;
use webhooks_core::console::{Access, Console, ConsoleRequest};
use webhooks_core::inbox::{SqliteInbox, sqlx};

/// The request's host, and an origin the console is told to allow.
const HOST: &str = "ops.example:8080";
const ALLOWED_ORIGIN: &str = "https://console.example";

/// The tags the templates emit (HTML and the charts' SVG).
const TAGS: &[&str] = &[
    "html", "head", "meta", "title", "link", "script", "body", "header", "a", "span", "main", "h1",
    "h2", "p", "code", "pre", "div", "svg", "rect", "text", "ul", "li", "line", "polyline", "desc",
    "details", "summary", "table", "thead", "tbody", "tr", "th", "td", "form", "label", "input",
    "button", "dl", "dt", "dd", "nav",
];

/// The attributes the templates emit.
const ATTRIBUTES: &[&str] = &[
    "lang",
    "charset",
    "name",
    "content",
    "rel",
    "href",
    "src",
    "defer",
    "class",
    "id",
    "role",
    "aria-label",
    "aria-labelledby",
    "aria-current",
    "viewbox",
    "width",
    "height",
    "xmlns",
    "x",
    "y",
    "x1",
    "y1",
    "x2",
    "y2",
    "fill",
    "text-anchor",
    "points",
    "method",
    "action",
    "type",
    "value",
    "required",
    "title",
    "download",
    "formaction",
    "data-refresh",
    "data-series",
    "data-total",
    "data-accepted",
    "data-completed",
    "data-failed",
    "data-minute",
    "data-confirm",
    "data-needs-selection",
    "data-selected-count",
    "data-select-all",
    "data-state",
    "data-key",
];

/// Attributes holding a URL: each must be a path under the base.
const URL_ATTRIBUTES: &[&str] = &["href", "src", "action", "formaction"];

/// The sender-controlled fields of the stored dead letter.
#[derive(Arbitrary, Debug)]
struct Row {
    key: String,
    scheme: String,
    delivery_id: Option<String>,
    event_type: Option<String>,
    matched_key: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    last_error: Option<String>,
    paused: bool,
}

#[derive(Arbitrary, Debug)]
enum Who {
    Alice,
    Bob,
    Other(String),
}

#[derive(Arbitrary, Debug)]
enum AccessIn {
    /// No `authorize` hook.
    Unconfigured,
    Deny,
    ReadOnly(Who),
    Admin(Who),
}

#[derive(Arbitrary, Debug)]
enum Text<T> {
    Known(T),
    Any(String),
}

#[derive(Arbitrary, Debug)]
enum OriginIn {
    None,
    Same,
    SameHttps,
    Allowed,
    Foreign,
    Null,
}

#[derive(Arbitrary, Debug)]
enum SiteIn {
    None,
    SameOrigin,
    SameSite,
    CrossSite,
    UserStarted,
}

#[derive(Arbitrary, Debug)]
enum BaseIn {
    Root,
    Mounted,
    MountedSlash,
}

#[derive(Arbitrary, Debug)]
enum Token {
    None,
    /// The requester's own valid token.
    Valid,
    /// A valid token of another identity.
    Alices,
    Any(String),
}

#[derive(Arbitrary, Debug)]
struct Input {
    row: Row,
    access: AccessIn,
    method: u8,
    /// One of the console's routes (followed by `suffix`), or any path.
    path: Text<u8>,
    suffix: String,
    query: Option<String>,
    /// Adds `key=<the dead letter's key>` to the query.
    query_key: bool,
    token: Token,
    /// Adds `key=<the dead letter's key>` to the form.
    form_key: bool,
    /// The rest of the form body, after the token and key.
    form: Vec<u8>,
    origin: Text<OriginIn>,
    site: Text<SiteIn>,
    base: Text<BaseIn>,
}

const METHODS: [Method; 7] = [
    Method::GET,
    Method::POST,
    Method::HEAD,
    Method::PUT,
    Method::DELETE,
    Method::PATCH,
    Method::OPTIONS,
];

const ROUTES: &[&str] = &[
    "/",
    "",
    "/dead",
    "/dead/item",
    "/dead/raw",
    "/dead/bulk",
    "/deliveries",
    "/deliveries/item",
    "/replay",
    "/discard",
    "/bulk",
    "/purge",
    "/pause",
    "/resume",
    "/assets/console.css",
    "/assets/console.js",
];

/// The routes that change state.
const ACTIONS: &[&str] = &[
    "/replay", "/discard", "/bulk", "/purge", "/pause", "/resume",
];

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    })
}

/// One inbox and its console for the whole run, made before any request
/// (never inside the runtime); the rows are reset before every input.
fn fixture() -> &'static (SqliteInbox, Console) {
    static FIXTURE: OnceLock<(SqliteInbox, Console)> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        runtime().block_on(async {
            let inbox = SqliteInbox::connect("sqlite::memory:").await.unwrap();
            inbox.migrate().await.unwrap();
            let console = Console::new(Arc::new(inbox.clone()))
                .csrf_key([7; 32])
                .allow_origin(ALLOWED_ORIGIN);
            (inbox, console)
        })
    })
}

/// The stored rows: the input's dead letter, and a pending, a leased and a
/// completed event.
async fn reset(inbox: &SqliteInbox, row: &Row) {
    let t = inbox.table();
    let pool = inbox.pool();
    sqlx::query(&format!("DELETE FROM \"{t}\""))
        .execute(pool)
        .await
        .unwrap();
    sqlx::query(&format!("UPDATE \"{t}_control\" SET paused = ?1"))
        .bind(i64::from(row.paused))
        .execute(pool)
        .await
        .unwrap();
    let insert = format!(
        "INSERT OR REPLACE INTO \"{t}\" (event_key, scheme, delivery_id, event_type, matched_key, \
         headers, body, received_at, signed_at, state, attempts, due_at, token, lease_until, \
         last_error, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1700000000000, 1700000000, \
         ?8, ?9, 0, ?10, ?11, ?12, 1700000000000)"
    );
    let headers = serde_json::to_string(&row.headers).unwrap();
    let rows: [(&str, &str, i64, Option<&str>, Option<i64>); 4] = [
        (&row.key, &row.scheme, 3, None, None),
        ("pending <b>1</b>", "standard-webhooks", 0, None, None),
        (
            "leased \"1\"",
            "stripe",
            1,
            Some("00112233445566778899aabbccddeeff"),
            Some(i64::MAX / 2),
        ),
        ("done '1'", "github", 2, None, None),
    ];
    for (key, scheme, state, token, lease_until) in rows {
        sqlx::query(&insert)
            .bind(key)
            .bind(scheme)
            .bind(row.delivery_id.as_deref())
            .bind(row.event_type.as_deref())
            .bind(&row.matched_key)
            .bind(&headers)
            .bind(row.body.as_slice())
            .bind(state)
            .bind(5_i64)
            .bind(token)
            .bind(lease_until)
            .bind(row.last_error.as_deref())
            .execute(pool)
            .await
            .unwrap();
    }
}

/// Everything an action may change: each row's state, attempts, due time
/// and lease, and the pause flag.
async fn snapshot(inbox: &SqliteInbox) -> (Vec<(String, i64, i64, i64, Option<String>)>, i64) {
    let t = inbox.table();
    let rows = sqlx::query_as(&format!(
        "SELECT event_key, state, attempts, due_at, token FROM \"{t}\" ORDER BY event_key"
    ))
    .fetch_all(inbox.pool())
    .await
    .unwrap();
    let (paused,): (i64,) = sqlx::query_as(&format!("SELECT paused FROM \"{t}_control\""))
        .fetch_one(inbox.pool())
        .await
        .unwrap();
    (rows, paused)
}

/// `text` with every byte outside the unreserved set as `%XX`.
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

/// The form token the console hands `who` (from its overview page, as a
/// browser gets it), cached per identity.
async fn token_of(console: &Console, who: &str) -> String {
    static TOKENS: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    let tokens = TOKENS.get_or_init(Default::default);
    if let Some(token) = tokens.lock().unwrap().get(who) {
        return token.clone();
    }
    let headers = HeaderMap::new();
    let request = ConsoleRequest::new(&Method::GET, "/", None, &headers, b"");
    let page = console
        .handle(Some(Access::Admin(who.to_owned())), request)
        .await;
    let html = std::str::from_utf8(&page.body).unwrap();
    let start = html
        .find("name=\"csrf\" value=\"")
        .expect("the overview has a form token")
        + "name=\"csrf\" value=\"".len();
    let end = start + html[start..].find('"').unwrap();
    let token = html[start..end].replace("&amp;", "&");
    let mut tokens = tokens.lock().unwrap();
    if tokens.len() < 64 {
        tokens.insert(who.to_owned(), token.clone());
    }
    token
}

/// A path under `base` (the console's links start with the base it was
/// given when that is a plain path, with nothing otherwise).
fn under_base(url: &str, base: Option<&str>) -> bool {
    let path_only = url.starts_with('/') && !url.starts_with("//") && !url.starts_with("/\\");
    match base {
        Some(base) => path_only && url.starts_with(&format!("{base}/")),
        None => path_only,
    }
}

/// Checks an HTML page against the allow-list; panics with what is wrong.
fn check_html(html: &str, base: Option<&str>) {
    let mut scripts = 0;
    let mut rest = html;
    while let Some(at) = rest.find('<') {
        rest = &rest[at + 1..];
        if let Some(doctype) = rest.strip_prefix("!DOCTYPE html>") {
            rest = doctype;
            continue;
        }
        let closing = rest.starts_with('/');
        if closing {
            rest = &rest[1..];
        }
        let name_end = rest
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(rest.len());
        let name = rest[..name_end].to_ascii_lowercase();
        assert!(TAGS.contains(&name.as_str()), "tag {name:?} in {html}");
        rest = &rest[name_end..];
        if name == "script" && !closing {
            scripts += 1;
        }
        // The attributes, up to `>`; values are double-quoted and escaped.
        loop {
            rest = rest.trim_start_matches([' ', '\n', '\t']);
            if let Some(after) = rest.strip_prefix('>') {
                rest = after;
                break;
            }
            assert!(!closing, "a closing tag {name:?} with attributes in {html}");
            let attr_end = rest
                .find(|c: char| c == '=' || c == '>' || c == ' ')
                .expect("a tag's end");
            let attribute = rest[..attr_end].to_ascii_lowercase();
            assert!(
                ATTRIBUTES.contains(&attribute.as_str()),
                "attribute {attribute:?} on {name:?} in {html}"
            );
            rest = &rest[attr_end..];
            if let Some(value) = rest.strip_prefix("=\"") {
                let end = value.find('"').expect("a closed value");
                let text = &value[..end];
                assert!(
                    !text.contains('<') && !text.contains('>'),
                    "unescaped {text:?}"
                );
                if URL_ATTRIBUTES.contains(&attribute.as_str()) {
                    let url = text.replace("&amp;", "&");
                    assert!(
                        under_base(&url, base),
                        "{attribute}={url:?} not under {base:?}"
                    );
                }
                if name == "script" {
                    assert!(attribute == "src", "script attribute {attribute:?}");
                }
                rest = &value[end + 1..];
            } else if name == "script" {
                assert_eq!(attribute, "defer", "script attribute {attribute:?}");
            }
        }
        if name == "script" && !closing {
            assert!(
                rest.starts_with("</script>"),
                "a script with content in {html}"
            );
        }
    }
    assert_eq!(scripts, 1, "{scripts} scripts in {html}");
}

fn check_headers(status: StatusCode, headers: &HeaderMap, base: Option<&str>) {
    let get = |name: header::HeaderName| {
        headers
            .get(&name)
            .unwrap_or_else(|| panic!("{status}: no {name}"))
            .to_str()
            .unwrap()
            .to_owned()
    };
    let csp = get(header::CONTENT_SECURITY_POLICY);
    assert!(csp.starts_with("default-src 'self'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(get(header::X_FRAME_OPTIONS), "DENY");
    assert_eq!(get(header::X_CONTENT_TYPE_OPTIONS), "nosniff");
    assert_eq!(get(header::CACHE_CONTROL), "no-store");
    assert_eq!(get(header::REFERRER_POLICY), "same-origin");
    if status.is_redirection() {
        let location = get(header::LOCATION);
        assert!(
            under_base(&location, base),
            "Location {location:?} not under {base:?}"
        );
    }
}

/// Once per run: the oracle's two sides on one request each. An admin's
/// `POST /pause` with its token from the same origin pauses; the same from
/// another origin, or with another admin's token, changes nothing. (A
/// harness whose token or origin were always wrong would otherwise check
/// nothing.)
async fn self_test(inbox: &SqliteInbox, console: &Console) {
    let row = Row {
        key: "k".into(),
        scheme: "s".into(),
        delivery_id: None,
        event_type: None,
        matched_key: String::new(),
        headers: Vec::new(),
        body: Vec::new(),
        last_error: None,
        paused: false,
    };
    let alice = token_of(console, "alice").await;
    for (origin, who, pauses) in [
        ("https://evil.example", "alice", false),
        ("http://ops.example:8080", "bob", false),
        ("http://ops.example:8080", "alice", true),
    ] {
        reset(inbox, &row).await;
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static(HOST));
        headers.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        let form = format!("csrf={}", encode(&alice));
        let request = ConsoleRequest::new(&Method::POST, "/pause", None, &headers, form.as_bytes());
        let answer = console
            .handle(Some(Access::Admin(who.to_owned())), request)
            .await;
        let (_, paused) = snapshot(inbox).await;
        assert_eq!(paused == 1, pauses, "{origin} {who}: {}", answer.status);
    }
}

fuzz_target!(|input: Input| {
    let (inbox, console) = fixture();
    runtime().block_on(async {
        static SELF_TEST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !SELF_TEST.swap(true, std::sync::atomic::Ordering::SeqCst) {
            self_test(inbox, console).await;
        }
        reset(inbox, &input.row).await;
        let before = snapshot(inbox).await;

        let who = |who: &Who| match who {
            Who::Alice => "alice".to_owned(),
            Who::Bob => "bob".to_owned(),
            Who::Other(name) => name.clone(),
        };
        let (access, admin) = match &input.access {
            AccessIn::Unconfigured => (None, None),
            AccessIn::Deny => (Some(Access::Deny), None),
            AccessIn::ReadOnly(w) => (Some(Access::ReadOnly(who(w))), None),
            AccessIn::Admin(w) => (Some(Access::Admin(who(w))), Some(who(w))),
        };
        let method = &METHODS[usize::from(input.method) % METHODS.len()];
        let path = match &input.path {
            Text::Known(i) => format!("{}{}", ROUTES[usize::from(*i) % ROUTES.len()], input.suffix),
            Text::Any(path) => path.clone(),
        };
        let mut query = input.query.clone();
        if input.query_key {
            let key = format!("key={}", encode(&input.row.key));
            query = Some(match query {
                Some(q) => format!("{key}&{q}"),
                None => key,
            });
        }
        // The form: the token first (the console reads the first), the key,
        // then anything.
        let (mut form, token_valid) = match (&input.token, &admin) {
            (Token::None, _) => (Vec::new(), false),
            (Token::Valid, Some(who)) => {
                (format!("csrf={}", encode(&token_of(console, who).await)).into_bytes(), true)
            }
            (Token::Valid, None) | (Token::Alices, _) => {
                let alice = token_of(console, "alice").await;
                let valid = admin.as_deref() == Some("alice");
                (format!("csrf={}", encode(&alice)).into_bytes(), valid)
            }
            (Token::Any(text), _) => (format!("csrf={}", encode(text)).into_bytes(), false),
        };
        if input.form_key {
            form.extend_from_slice(format!("&key={}", encode(&input.row.key)).as_bytes());
        }
        if !input.form.is_empty() {
            form.push(b'&');
            form.extend_from_slice(&input.form);
        }

        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static(HOST));
        let origin = match &input.origin {
            Text::Known(OriginIn::None) => None,
            Text::Known(OriginIn::Same) => Some(format!("http://{HOST}")),
            Text::Known(OriginIn::SameHttps) => Some(format!("https://{HOST}")),
            Text::Known(OriginIn::Allowed) => Some(ALLOWED_ORIGIN.to_owned()),
            Text::Known(OriginIn::Foreign) => Some("https://evil.example".to_owned()),
            Text::Known(OriginIn::Null) => Some("null".to_owned()),
            Text::Any(text) => Some(text.clone()),
        };
        let origin = origin.and_then(|o| HeaderValue::from_str(&o).ok());
        if let Some(value) = &origin {
            headers.insert(header::ORIGIN, value.clone());
        }
        let site = match &input.site {
            Text::Known(SiteIn::None) => None,
            Text::Known(SiteIn::SameOrigin) => Some("same-origin".to_owned()),
            Text::Known(SiteIn::SameSite) => Some("same-site".to_owned()),
            Text::Known(SiteIn::CrossSite) => Some("cross-site".to_owned()),
            Text::Known(SiteIn::UserStarted) => Some("none".to_owned()),
            Text::Any(text) => Some(text.clone()),
        };
        let site = site.and_then(|s| HeaderValue::from_str(&s).ok());
        if let Some(value) = &site {
            headers.insert("sec-fetch-site", value.clone());
        }
        // The base, and the prefix every link must then have (`None`: any
        // path, for a base the console must refuse to echo).
        let (base, expected_base) = match &input.base {
            Text::Known(BaseIn::Root) => (String::new(), Some(String::new())),
            Text::Known(BaseIn::Mounted) => ("/ops/webhooks".to_owned(), Some("/ops/webhooks".to_owned())),
            Text::Known(BaseIn::MountedSlash) => {
                ("/ops/webhooks/".to_owned(), Some("/ops/webhooks".to_owned()))
            }
            Text::Any(text) => (text.clone(), None),
        };

        let request = ConsoleRequest::new(method, &path, query.as_deref(), &headers, &form)
            .base(&base);
        let answer = console.handle(access, request).await;

        let base_prefix = expected_base.as_deref();
        check_headers(answer.status, &answer.headers, base_prefix);
        let content_type = answer
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        if content_type.starts_with("text/html") {
            let html = std::str::from_utf8(&answer.body).expect("UTF-8 HTML");
            check_html(html, base_prefix);
        } else if content_type == "application/octet-stream" {
            let disposition = answer.headers.get(header::CONTENT_DISPOSITION).expect("a download");
            assert!(disposition.to_str().unwrap().starts_with("attachment"));
        } else {
            assert!(
                content_type.starts_with("text/css")
                    || content_type.starts_with("text/javascript")
                    || content_type.starts_with("text/plain"),
                "{content_type}"
            );
        }

        // The same-origin rule, as the console documents it.
        let origin_text = origin.as_ref().and_then(|o| o.to_str().ok());
        let site_text = site.as_ref().map(|s| s.as_bytes());
        let origin_ok = match origin_text {
            Some(o) => {
                o.eq_ignore_ascii_case(ALLOWED_ORIGIN)
                    || o.split_once("://").is_some_and(|(_, host)| host.eq_ignore_ascii_case(HOST))
            }
            None => origin.is_none() && site.is_some(),
        };
        let same_origin = site_text.is_none_or(|s| s == b"same-origin") && origin_ok;
        let action = ACTIONS.contains(&path.trim_end_matches('/'));
        let may_change = method == Method::POST && action && admin.is_some() && token_valid && same_origin;
        let after = snapshot(inbox).await;
        if !may_change {
            assert_eq!(
                before, after,
                "state changed by {method} {path:?} (admin {admin:?}, token {token_valid}, same origin {same_origin})"
            );
        }
        if method == Method::POST && action && admin.is_none() {
            assert_eq!(answer.status, StatusCode::FORBIDDEN);
        }
    });
});
