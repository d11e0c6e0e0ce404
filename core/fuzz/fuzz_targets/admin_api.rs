//! The dead-letter admin API's inputs (issue 25, item 9), through its public
//! entry point `inbox::admin::handle`: any method, path and query; keys in
//! paths and query values percent-encoded; cursors; limits and times.
//!
//! The inbox behind it is a recording fake, so the target runs fast and can
//! check what the API asked for: a key percent-encoded into a path reaches
//! the inbox exactly; a listing's parameters reach the filter as given; the
//! `next` cursor the API answers parses back to the inbox's; a
//! state-changing request without `Content-Type: application/json`, or
//! marked cross-site by `Origin` / `Sec-Fetch-Site`, is a 403 that never
//! reaches the inbox (issue 22). Never a panic, never a status outside the
//! documented set.

#![no_main]

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use arbitrary::Arbitrary;
use http::{Method, StatusCode};
use libfuzzer_sys::fuzz_target;
use webhooks_core::inbox::{
    Accepted, Activity, ClaimToken, DeadLetter, DeadLetterCursor, DeadLetterFilter, DeadLetterPage, Delivery,
    DeliveryFilter, DeliveryPage, Inbox,
    InboxError, InboxStats, LeasedEvent, NewEvent, Transition, admin,
};

/// Records the last key or filter asked for; answers from the input.
struct Fake {
    key: Mutex<Option<String>>,
    filter: Mutex<Option<DeadLetterFilter>>,
    /// The last delivery listing's filter.
    deliveries: Mutex<Option<DeliveryFilter>>,
    next: Mutex<Option<DeadLetterCursor>>,
    /// Empty pages to answer listings with (made before the run starts).
    pages: &'static Pages,
    applied: bool,
    down: bool,
    /// Whether a replay, discard or purge reached the inbox.
    changed: AtomicBool,
}

impl Fake {
    fn saw_key(&self, key: &str) -> Result<(), InboxError> {
        *self.key.lock().unwrap() = Some(key.to_owned());
        if self.down {
            return Err(InboxError::Timeout);
        }
        Ok(())
    }
    fn transition(&self) -> Transition {
        if self.applied {
            Transition::Applied
        } else {
            Transition::Stale
        }
    }
}

#[async_trait::async_trait]
impl Inbox for Fake {
    async fn accept(&self, _: &NewEvent) -> Result<Accepted, InboxError> {
        unreachable!("the admin API never accepts")
    }
    async fn lease(
        &self,
        _: ClaimToken,
        _: u32,
        _: Duration,
        _: u32,
    ) -> Result<Vec<LeasedEvent>, InboxError> {
        unreachable!("the admin API never leases")
    }
    async fn extend(&self, _: &str, _: ClaimToken, _: Duration) -> Result<Transition, InboxError> {
        unreachable!()
    }
    async fn complete(&self, _: &str, _: ClaimToken) -> Result<Transition, InboxError> {
        unreachable!()
    }
    async fn retry(
        &self,
        _: &str,
        _: ClaimToken,
        _: Duration,
        _: &str,
    ) -> Result<Transition, InboxError> {
        unreachable!()
    }
    async fn release(&self, _: &str, _: ClaimToken) -> Result<Transition, InboxError> {
        unreachable!()
    }
    async fn dead_letter(&self, _: &str, _: ClaimToken, _: &str) -> Result<Transition, InboxError> {
        unreachable!()
    }
    async fn dead_letters(&self, filter: &DeadLetterFilter) -> Result<DeadLetterPage, InboxError> {
        *self.filter.lock().unwrap() = Some(filter.clone());
        if self.down {
            return Err(InboxError::Timeout);
        }
        let mut page = self.pages.dead.clone();
        page.next = self.next.lock().unwrap().clone();
        Ok(page)
    }
    async fn dead_letter_get(&self, key: &str) -> Result<Option<DeadLetter>, InboxError> {
        self.saw_key(key)?;
        Ok(None)
    }
    async fn replay(&self, key: &str) -> Result<Transition, InboxError> {
        self.changed.store(true, Ordering::SeqCst);
        self.saw_key(key)?;
        Ok(self.transition())
    }
    async fn discard(&self, key: &str) -> Result<Transition, InboxError> {
        self.changed.store(true, Ordering::SeqCst);
        self.saw_key(key)?;
        Ok(self.transition())
    }
    async fn purge_completed(&self, _: Duration) -> Result<u64, InboxError> {
        self.changed.store(true, Ordering::SeqCst);
        if self.down {
            return Err(InboxError::Timeout);
        }
        Ok(7)
    }
    async fn stats(&self) -> Result<InboxStats, InboxError> {
        if self.down {
            return Err(InboxError::Timeout);
        }
        Ok(InboxStats::default())
    }
    async fn set_paused(&self, _: bool) -> Result<bool, InboxError> {
        self.changed.store(true, Ordering::SeqCst);
        if self.down {
            return Err(InboxError::Timeout);
        }
        Ok(self.applied)
    }
    async fn deliveries(&self, filter: &DeliveryFilter) -> Result<DeliveryPage, InboxError> {
        // What `/deliveries` asked for is what the public parser makes of
        // the same query (checked in the target's body).
        *self.deliveries.lock().unwrap() = Some(filter.clone());
        if self.down {
            return Err(InboxError::Timeout);
        }
        Ok(self.pages.deliveries.clone())
    }
    async fn delivery_get(&self, key: &str) -> Result<Option<Delivery>, InboxError> {
        self.saw_key(key)?;
        Ok(None)
    }
    async fn paused(&self) -> Result<bool, InboxError> {
        if self.down {
            return Err(InboxError::Timeout);
        }
        Ok(false)
    }
    async fn activity(&self, _: u32) -> Result<Activity, InboxError> {
        if self.down {
            return Err(InboxError::Timeout);
        }
        Ok(Activity::default())
    }
}

/// Empty pages, made the way a caller outside the crate can (the structs
/// are non-exhaustive): by asking an empty SQLite inbox, once, before any
/// request runs. Never from inside the fake's methods: they run on the
/// runtime, and a `block_on` there would nest a runtime (the panic
/// "Cannot start a runtime from within a runtime" that stopped this
/// target within seconds).
struct Pages {
    dead: DeadLetterPage,
    deliveries: DeliveryPage,
}

fn pages() -> &'static Pages {
    static PAGES: std::sync::OnceLock<Pages> = std::sync::OnceLock::new();
    PAGES.get_or_init(|| {
        runtime().block_on(async {
            let inbox = webhooks_core::inbox::SqliteInbox::connect("sqlite::memory:")
                .await
                .unwrap();
            inbox.migrate().await.unwrap();
            Pages {
                dead: inbox.dead_letters(&DeadLetterFilter::default()).await.unwrap(),
                deliveries: inbox.deliveries(&DeliveryFilter::default()).await.unwrap(),
            }
        })
    })
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    })
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// Anything at all; `route` (when some) replaces the path with one of
    /// the API's routes, so that every route is reached from an empty
    /// corpus, and `path` is appended to it.
    Raw {
        method: u8,
        route: Option<u8>,
        path: String,
        query: Option<String>,
        /// Bit 0: `Content-Type: application/json`; bit 1: a foreign
        /// `Origin`; bit 2: `Sec-Fetch-Site: cross-site`.
        headers: u8,
    },
    /// A key, percent-encoded into a path, for one of the keyed routes.
    Keyed { key: String, route: u8 },
    /// A listing with parameters, each percent-encoded.
    List {
        scheme: Option<String>,
        event_type: Option<String>,
        from: Option<u64>,
        until: Option<u64>,
        cursor: Option<(i64, String)>,
        limit: Option<u32>,
        next: Option<(i64, String)>,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    op: Op,
    applied: bool,
    down: bool,
}

/// The API's routes (a keyed route's key follows from the input's path).
const ROUTES: [&str; 11] = [
    "/stats",
    "/activity",
    "/pause",
    "/resume",
    "/purge",
    "/deliveries",
    "/deliveries/",
    "/dead-letters",
    "/dead-letters/",
    "/dead-letters/k/replay",
    "",
];

const METHODS: [Method; 5] = [
    Method::GET,
    Method::POST,
    Method::DELETE,
    Method::PUT,
    Method::PATCH,
];

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

fn allowed(status: StatusCode) -> bool {
    matches!(
        status.as_u16(),
        200 | 204 | 400 | 403 | 404 | 405 | 409 | 503
    )
}

/// One request, as an API client sends it (`Content-Type: application/json`
/// unless `headers` says otherwise), to an admin API with the defaults and
/// no `authorize` hook.
async fn call(
    inbox: &dyn Inbox,
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: u8,
) -> admin::AdminResponse {
    let mut map = http::HeaderMap::new();
    map.insert(http::header::HOST, http::HeaderValue::from_static("ops.example"));
    if headers & 1 != 0 {
        map.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
    }
    if headers & 2 != 0 {
        map.insert(http::header::ORIGIN, http::HeaderValue::from_static("https://evil.example"));
    }
    if headers & 4 != 0 {
        map.insert("sec-fetch-site", http::HeaderValue::from_static("cross-site"));
    }
    let request = admin::AdminRequest::new(method, path, query, &map);
    // No hook: served as an admin, so that every route is reached.
    let config = admin::AdminConfig::default().allow_unauthenticated();
    admin::handle(inbox, &config, None, request).await
}

const CLIENT: u8 = 1;

fuzz_target!(|input: Input| {
    let fake = Fake {
        key: Mutex::new(None),
        filter: Mutex::new(None),
        deliveries: Mutex::new(None),
        next: Mutex::new(None),
        pages: pages(),
        applied: input.applied,
        down: input.down,
        changed: AtomicBool::new(false),
    };
    runtime().block_on(async {
        match input.op {
            Op::Raw {
                method,
                route,
                path,
                query,
                headers,
            } => {
                let method = &METHODS[usize::from(method) % METHODS.len()];
                let path = match route {
                    Some(route) => format!("{}{path}", ROUTES[usize::from(route) % ROUTES.len()]),
                    None => path,
                };
                let answer = call(&fake, method, &path, query.as_deref(), headers).await;
                assert!(allowed(answer.status), "{:?}", answer.status);
                if !method.is_safe() && headers & 0b111 != CLIENT {
                    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{method} {headers:b}");
                    assert!(!fake.changed.load(Ordering::SeqCst), "reached the inbox");
                }
                if method == Method::GET && path == "/deliveries" && !input.down {
                    // The route hands the inbox what the public parser makes
                    // of the query, or answers 400 when it refuses it.
                    match admin::parse_delivery_query(query.as_deref().unwrap_or("")) {
                        Ok(filter) => {
                            assert_eq!(answer.status, StatusCode::OK);
                            assert_eq!(fake.deliveries.lock().unwrap().as_ref(), Some(&filter));
                        }
                        Err(_) => assert_eq!(answer.status, StatusCode::BAD_REQUEST),
                    }
                }
                let _ = answer.body_bytes();
            }
            Op::Keyed { key, route } => {
                let encoded = encode(&key);
                let (method, path) = match route % 3 {
                    0 => (Method::GET, format!("/dead-letters/{encoded}")),
                    1 => (Method::DELETE, format!("/dead-letters/{encoded}")),
                    _ => (Method::POST, format!("/dead-letters/{encoded}/replay")),
                };
                let answer = call(&fake, &method, &path, None, CLIENT).await;
                assert!(allowed(answer.status), "{:?}", answer.status);
                // An empty key is the listing route, not a keyed one.
                if !key.is_empty() {
                    let seen = fake.key.lock().unwrap().clone();
                    assert_eq!(seen.as_deref(), Some(key.as_str()), "{path}");
                    let expected = match (input.down, route % 3, input.applied) {
                        (true, _, _) => 503,
                        (false, 0, _) => 404,
                        (false, 1, true) => 204,
                        (false, _, true) => 200,
                        (false, 1, false) => 404,
                        (false, _, false) => 409,
                    };
                    assert_eq!(answer.status.as_u16(), expected, "{path}");
                }
            }
            Op::List {
                scheme,
                event_type,
                from,
                until,
                cursor,
                limit,
                next,
            } => {
                let cursor = cursor.map(|(ms, key)| DeadLetterCursor {
                    received_at_ms: ms,
                    key,
                });
                *fake.next.lock().unwrap() = next.map(|(ms, key)| DeadLetterCursor {
                    received_at_ms: ms,
                    key,
                });
                let mut params = Vec::new();
                if let Some(s) = &scheme {
                    params.push(format!("scheme={}", encode(s)));
                }
                if let Some(e) = &event_type {
                    params.push(format!("event_type={}", encode(e)));
                }
                if let Some(f) = from {
                    params.push(format!("from={f}"));
                }
                if let Some(u) = until {
                    params.push(format!("until={u}"));
                }
                if let Some(c) = &cursor {
                    params.push(format!("after={}", encode(&c.to_string())));
                }
                if let Some(l) = limit {
                    params.push(format!("limit={l}"));
                }
                let query = params.join("&");
                let answer = call(&fake, &Method::GET, "/dead-letters", Some(&query), CLIENT).await;
                let time = |secs: u64| UNIX_EPOCH.checked_add(Duration::from_secs(secs));
                let out_of_range = from.is_some_and(|s| time(s).is_none())
                    || until.is_some_and(|s| time(s).is_none());
                if out_of_range {
                    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{query}");
                    assert!(fake.filter.lock().unwrap().is_none(), "listed anyway");
                    return;
                }
                let filter = fake.filter.lock().unwrap().clone().expect("listed");
                assert_eq!(filter.scheme, scheme, "{query}");
                assert_eq!(filter.event_type, event_type, "{query}");
                assert_eq!(filter.received_from, from.and_then(time));
                assert_eq!(filter.received_until, until.and_then(time));
                assert_eq!(filter.after, cursor, "{query}");
                assert_eq!(filter.limit, limit);
                assert!((1..=1000).contains(&filter.page_size()));
                if input.down {
                    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
                } else {
                    assert_eq!(answer.status, StatusCode::OK);
                    let expected = fake.next.lock().unwrap().clone();
                    let next = answer.body["next"].as_str().map(|n| n.parse::<DeadLetterCursor>());
                    match (expected, next) {
                        (None, None) => {}
                        (Some(c), Some(Ok(parsed))) => assert_eq!(parsed, c),
                        (e, n) => panic!("next cursor {e:?} answered as {n:?}"),
                    }
                }
            }
        }
    });
});
