//! The admin API's unit tests, through [`handle`](super::handle).

use std::time::{Duration, UNIX_EPOCH};

use super::query::{parse_query, percent_decode};
use super::*;
use crate::inbox::{ActionKind, DeadLetterFilter, DeliveryFilter, Transition};

/// A request with `headers` (name, value pairs) and the `Host` the
/// `Origin` checks compare with.
async fn call(
    inbox: &dyn Inbox,
    config: &AdminConfig,
    access: Option<Access>,
    method: Method,
    target: &str,
    headers: &[(&'static str, &'static str)],
) -> AdminResponse {
    let mut map = HeaderMap::new();
    map.insert(header::HOST, "ops.example:8080".parse().unwrap());
    for (name, value) in headers {
        map.append(*name, value.parse().unwrap());
    }
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (target, None),
    };
    handle(
        inbox,
        config,
        access,
        AdminRequest::new(&method, path, query, &map),
    )
    .await
}

const JSON: (&str, &str) = ("content-type", "application/json");

/// An admin, for the tests of everything but access.
fn ops() -> Option<Access> {
    Some(Access::Admin("ops".into()))
}

#[cfg(feature = "sqlite")]
async fn inbox() -> crate::inbox::SqliteInbox {
    let inbox = crate::inbox::SqliteInbox::connect("sqlite::memory:")
        .await
        .unwrap();
    inbox.migrate().await.unwrap();
    inbox
}

/// Found by the `admin_api` fuzz target (issue 25, item 9): a `from`
/// past what a `SystemTime` holds panicked; it is a 400.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn times_past_the_clock_s_range_are_400() {
    let inbox = inbox().await;
    let config = AdminConfig::default();
    for query in ["from=12321478040788926463", "until=18446744073709551615"] {
        let target = format!("/dead-letters?{query}");
        let answer = call(&inbox, &config, ops(), Method::GET, &target, &[]).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{query}");
    }
    let fine = call(
        &inbox,
        &config,
        ops(),
        Method::GET,
        "/dead-letters?from=0",
        &[],
    )
    .await;
    assert_eq!(fine.status, StatusCode::OK);
}

/// Issue 22: a state-changing request a browser could send from another
/// site is refused before it reaches the inbox.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn cross_site_state_changes_are_403() {
    let inbox = inbox().await;
    let config = AdminConfig::default();
    let purge = "/purge?older_than=604800";
    let refused: [&[(&str, &str)]; 6] = [
        // A simple request: no header at all, or a form's content type.
        &[],
        &[("content-type", "application/x-www-form-urlencoded")],
        &[("content-type", "text/plain")],
        &[JSON, ("origin", "http://evil.example")],
        &[JSON, ("origin", "null")],
        &[JSON, ("sec-fetch-site", "cross-site")],
    ];
    for headers in refused {
        for (method, target) in [
            (Method::POST, purge),
            (Method::POST, "/dead-letters/k/replay"),
            (Method::DELETE, "/dead-letters/k"),
            (Method::POST, "/pause"),
            (Method::POST, "/resume"),
        ] {
            let answer = call(&inbox, &config, ops(), method.clone(), target, headers).await;
            assert_eq!(
                answer.status,
                StatusCode::FORBIDDEN,
                "{method} {target} {headers:?}"
            );
            assert!(answer.body["error"].is_string(), "{}", answer.body);
        }
    }
    let same_site = call(
        &inbox,
        &config,
        ops(),
        Method::POST,
        purge,
        &[JSON, ("sec-fetch-site", "same-site")],
    )
    .await;
    assert_eq!(same_site.status, StatusCode::FORBIDDEN);
    let missing = call(&inbox, &config, ops(), Method::POST, purge, &[]).await;
    assert!(
        missing.body["error"]
            .as_str()
            .unwrap()
            .contains("Content-Type: application/json"),
        "{}",
        missing.body
    );
    let allowed: [&[(&str, &str)]; 5] = [
        &[JSON],
        &[("content-type", "Application/JSON; charset=utf-8")],
        &[JSON, ("origin", "http://ops.example:8080")],
        &[
            JSON,
            ("sec-fetch-site", "same-origin"),
            ("origin", "http://ops.example:8080"),
        ],
        &[JSON, ("sec-fetch-site", "none")],
    ];
    for headers in allowed {
        let answer = call(&inbox, &config, ops(), Method::POST, purge, headers).await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "{headers:?}: {}",
            answer.body
        );
        assert_eq!(answer.body["purged"], 0);
    }
    // GETs stay as they are, whatever the browser says.
    let get = call(
        &inbox,
        &config,
        ops(),
        Method::GET,
        "/stats",
        &[
            ("sec-fetch-site", "cross-site"),
            ("origin", "http://evil.example"),
        ],
    )
    .await;
    assert_eq!(get.status, StatusCode::OK);
    // An allowed origin (a proxy rewriting Host) passes.
    let behind_proxy = AdminConfig::new().allow_origin("https://ops.example.com");
    let answer = call(
        &inbox,
        &behind_proxy,
        ops(),
        Method::POST,
        purge,
        &[JSON, ("origin", "https://ops.example.com")],
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
}

/// Issue 22: a purge below the retention is refused (the completed
/// events are the dedup memory) unless forced.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn purges_below_the_minimum_need_force() {
    use crate::inbox::{ClaimToken, NewEvent};

    let inbox = inbox().await;
    inbox
        .accept(&NewEvent::new("webhooks:test:done", "test", "{}"))
        .await
        .unwrap();
    let token = ClaimToken::random();
    let leased = inbox
        .lease(token, 1, Duration::from_secs(30), 3)
        .await
        .unwrap();
    let done = inbox.complete(&leased[0].meta.key, token).await.unwrap();
    assert_eq!(done, Transition::Applied);

    let config = AdminConfig::default();
    let below = call(
        &inbox,
        &config,
        ops(),
        Method::POST,
        "/purge?older_than=60",
        &[JSON],
    )
    .await;
    assert_eq!(below.status, StatusCode::BAD_REQUEST);
    let reason = below.body["error"].as_str().unwrap();
    assert!(reason.contains("604800"), "{reason}");
    assert!(
        reason.contains("memory of processed deliveries"),
        "{reason}"
    );
    assert_eq!(below.body["min_older_than"], 604_800);
    assert_eq!(inbox.stats().await.unwrap().completed, 1, "nothing purged");
    let bad_force = call(
        &inbox,
        &config,
        ops(),
        Method::POST,
        "/purge?older_than=60&force=yes",
        &[JSON],
    )
    .await;
    assert_eq!(bad_force.status, StatusCode::BAD_REQUEST);
    let at_minimum = call(
        &inbox,
        &config,
        ops(),
        Method::POST,
        "/purge?older_than=604800",
        &[JSON],
    )
    .await;
    assert_eq!(
        (at_minimum.status, &at_minimum.body["purged"]),
        (StatusCode::OK, &json!(0))
    );

    // A configured minimum replaces the retention, above the providers'
    // retry windows (issue 34: Stripe retries for 3 days, plus a day)…
    let long = AdminConfig::new().min_purge_age(Duration::from_secs(14 * 86_400));
    let refused = call(
        &inbox,
        &long,
        ops(),
        Method::POST,
        "/purge?older_than=604800",
        &[JSON],
    )
    .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(refused.body["min_older_than"], 14 * 86_400);
    // …never below them: a shorter one is raised to the floor.
    let short = AdminConfig::new().min_purge_age(Duration::from_secs(1));
    for older_than in [0, 86_400, 4 * 86_400 - 1] {
        let refused = call(
            &inbox,
            &short,
            ops(),
            Method::POST,
            &format!("/purge?older_than={older_than}"),
            &[JSON],
        )
        .await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{older_than}");
        assert_eq!(refused.body["min_older_than"], 4 * 86_400);
    }
    assert_eq!(inbox.stats().await.unwrap().completed, 1, "nothing purged");

    let forced = call(
        &inbox,
        &config,
        ops(),
        Method::POST,
        "/purge?older_than=0&force=true",
        &[JSON],
    )
    .await;
    assert_eq!(forced.status, StatusCode::OK, "{}", forced.body);
    assert_eq!(forced.body["purged"], 1);
    assert_eq!(inbox.stats().await.unwrap().completed, 0);
}

/// Issue 22: the `authorize` hook's decision, as in the console.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn access_is_the_hook_s_decision() {
    let inbox = inbox().await;
    let config = AdminConfig::default();
    let purge = "/purge?older_than=604800";
    let reader = || Some(Access::ReadOnly("rita".into()));
    let admin = || Some(Access::Admin("ada".into()));
    for (access, method, target, status) in [
        (
            Some(Access::Deny),
            Method::GET,
            "/stats",
            StatusCode::FORBIDDEN,
        ),
        (
            Some(Access::Deny),
            Method::POST,
            purge,
            StatusCode::FORBIDDEN,
        ),
        (reader(), Method::GET, "/stats", StatusCode::OK),
        (reader(), Method::GET, "/dead-letters", StatusCode::OK),
        (
            reader(),
            Method::GET,
            "/deliveries?state=completed&order=oldest",
            StatusCode::OK,
        ),
        (
            reader(),
            Method::GET,
            "/deliveries?state=sleeping",
            StatusCode::BAD_REQUEST,
        ),
        (
            reader(),
            Method::GET,
            "/deliveries/k",
            StatusCode::NOT_FOUND,
        ),
        (
            admin(),
            Method::POST,
            "/deliveries",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (reader(), Method::POST, purge, StatusCode::FORBIDDEN),
        (
            reader(),
            Method::POST,
            "/dead-letters/k/replay",
            StatusCode::FORBIDDEN,
        ),
        (
            reader(),
            Method::DELETE,
            "/dead-letters/k",
            StatusCode::FORBIDDEN,
        ),
        (admin(), Method::GET, "/stats", StatusCode::OK),
        (admin(), Method::POST, purge, StatusCode::OK),
        (
            admin(),
            Method::POST,
            "/dead-letters/k/replay",
            StatusCode::CONFLICT,
        ),
        (
            admin(),
            Method::DELETE,
            "/dead-letters/k",
            StatusCode::NOT_FOUND,
        ),
        (None, Method::POST, purge, StatusCode::FORBIDDEN),
        (reader(), Method::POST, "/pause", StatusCode::FORBIDDEN),
        (reader(), Method::POST, "/resume", StatusCode::FORBIDDEN),
        (
            Some(Access::Deny),
            Method::POST,
            "/pause",
            StatusCode::FORBIDDEN,
        ),
        (
            admin(),
            Method::GET,
            "/pause",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
    ] {
        let label = format!("{access:?} {method} {target}");
        let answer = call(&inbox, &config, access, method, target, &[JSON]).await;
        assert_eq!(answer.status, status, "{label}: {}", answer.body);
    }
    // An admin's request is still checked for being cross-site.
    let cross = call(
        &inbox,
        &config,
        admin(),
        Method::POST,
        purge,
        &[JSON, ("sec-fetch-site", "cross-site")],
    )
    .await;
    assert_eq!(cross.status, StatusCode::FORBIDDEN);
}

/// Issue 22: pause and resume through the API; refused requests leave
/// the flag as it was.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn pause_and_resume() {
    let inbox = inbox().await;
    let config = AdminConfig::default();
    let admin = || Some(Access::Admin("ada".into()));
    let stats = call(&inbox, &config, ops(), Method::GET, "/stats", &[]).await;
    assert_eq!(stats.body["paused"], false);
    // Refused: read-only, cross-site, no JSON content type.
    let reader = Some(Access::ReadOnly("rita".into()));
    let refused = call(&inbox, &config, reader, Method::POST, "/pause", &[JSON]).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let cross = [JSON, ("sec-fetch-site", "cross-site")];
    let refused = call(&inbox, &config, admin(), Method::POST, "/pause", &cross).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let refused = call(&inbox, &config, admin(), Method::POST, "/pause", &[]).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(
        !inbox.paused().await.unwrap(),
        "refused requests changed nothing"
    );

    let paused = call(&inbox, &config, admin(), Method::POST, "/pause", &[JSON]).await;
    assert_eq!(paused.status, StatusCode::OK, "{}", paused.body);
    assert_eq!(paused.body, json!({"paused": true, "changed": true}));
    let again = call(&inbox, &config, admin(), Method::POST, "/pause/", &[JSON]).await;
    assert_eq!(again.body, json!({"paused": true, "changed": false}));
    assert!(inbox.paused().await.unwrap());
    let stats = call(&inbox, &config, ops(), Method::GET, "/stats", &[]).await;
    assert_eq!(stats.body["paused"], true);
    let resumed = call(&inbox, &config, admin(), Method::POST, "/resume", &[JSON]).await;
    assert_eq!(resumed.body, json!({"paused": false, "changed": true}));
    assert!(!inbox.paused().await.unwrap());
}

/// Issue 34, item 4: every state change through the API is in the action
/// log with the caller's identity; refused ones are not; the log pages.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn actions_are_logged_with_the_caller() {
    let inbox = inbox().await;
    dead_with_credentials(&inbox).await;
    let config = AdminConfig::default();
    let admin = || Some(Access::Admin("ada@example.com".into()));
    let reader = || Some(Access::ReadOnly("rita".into()));
    let refused = call(&inbox, &config, reader(), Method::POST, "/pause", &[JSON]).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    for (method, target) in [
        (Method::POST, "/pause"),
        (Method::POST, "/dead-letters/k1/replay"),
        (Method::POST, "/dead-letters/k1/replay"),
        (Method::POST, "/purge?older_than=60&force=true"),
        (Method::POST, "/resume"),
    ] {
        let done = call(&inbox, &config, admin(), method, target, &[JSON]).await;
        assert!(
            done.status.is_success() || done.status == StatusCode::CONFLICT,
            "{target}: {}",
            done.body
        );
    }
    // Readers may read the log.
    let log = call(
        &inbox,
        &config,
        reader(),
        Method::GET,
        "/actions?limit=2",
        &[],
    )
    .await;
    assert_eq!(log.status, StatusCode::OK, "{}", log.body);
    let row = |a: &Value| {
        (
            a["action"].as_str().unwrap_or("").to_owned(),
            a["target"].as_str().unwrap_or("").to_owned(),
            a["count"].as_u64().unwrap_or(99),
            a["who"].as_str().unwrap_or("").to_owned(),
            a["via"].as_str().unwrap_or("").to_owned(),
        )
    };
    let ada = || "ada@example.com".to_owned();
    let api = || "api".to_owned();
    let first: Vec<_> = log.body["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(row)
        .collect();
    assert_eq!(
        first,
        [
            ("resume".to_owned(), String::new(), 1, ada(), api()),
            (
                "purge".to_owned(),
                "completed, older than 1m, forced".to_owned(),
                0,
                ada(),
                api()
            ),
        ]
    );
    let next = log.body["next"].as_u64().expect("a next page");
    let older = call(
        &inbox,
        &config,
        ops(),
        Method::GET,
        &format!("/actions?before={next}"),
        &[],
    )
    .await;
    let rest: Vec<_> = older.body["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(row)
        .collect();
    assert_eq!(
        rest,
        [
            ("replay".to_owned(), "k1".to_owned(), 0, ada(), api()),
            ("replay".to_owned(), "k1".to_owned(), 1, ada(), api()),
            ("pause".to_owned(), String::new(), 1, ada(), api()),
        ]
    );
    assert_eq!(older.body["next"], Value::Null);
    for bad in [
        "/actions?limit=0",
        "/actions?limit=501",
        "/actions?before=x",
    ] {
        let answer = call(&inbox, &config, ops(), Method::GET, bad, &[]).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{bad}");
    }
    let post = call(&inbox, &config, admin(), Method::POST, "/actions", &[JSON]).await;
    assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED);
}

/// Dead letters of Stripe-like bodies: (key, customer, last error).
#[cfg(feature = "sqlite")]
async fn dead_customers(inbox: &crate::inbox::SqliteInbox, events: &[(&str, &str, &str)]) {
    use crate::inbox::{ClaimToken, NewEvent};

    for (key, customer, _) in events {
        let body = format!(r#"{{"data":{{"object":{{"customer":"{customer}"}}}}}}"#);
        inbox
            .accept(&NewEvent::new(*key, "stripe", body))
            .await
            .unwrap();
    }
    let token = ClaimToken::random();
    let leased = inbox
        .lease(
            token,
            u32::try_from(events.len()).unwrap(),
            Duration::from_secs(30),
            5,
        )
        .await
        .unwrap();
    assert_eq!(leased.len(), events.len());
    for (key, _, error) in events {
        assert_eq!(
            inbox.dead_letter(key, token, error).await.unwrap(),
            Transition::Applied
        );
    }
}

/// Issue 34, item 2: `q` searches payload values and the last error, on
/// both listings; a malformed one is a 400 saying what is wrong.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn listings_search_with_q() {
    let inbox = inbox().await;
    dead_customers(
        &inbox,
        &[
            ("a", "cus_1", "upstream said 502"),
            ("b", "cus_2", "upstream said 502"),
            ("c", "cus_1", "timed out"),
        ],
    )
    .await;
    let config = AdminConfig::default();
    let keys = |answer: &AdminResponse| -> Vec<String> {
        answer.body["items"]
            .as_array()
            .unwrap_or(&Vec::new())
            .iter()
            .map(|item| item["key"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    let q = "q=data.object.customer+%3D+cus_1+and+error+~+502";
    let dead = call(
        &inbox,
        &config,
        ops(),
        Method::GET,
        &format!("/dead-letters?{q}"),
        &[],
    )
    .await;
    assert_eq!(dead.status, StatusCode::OK, "{}", dead.body);
    assert_eq!(keys(&dead), ["a"]);
    let listed = call(
        &inbox,
        &config,
        ops(),
        Method::GET,
        "/deliveries?state=dead&order=oldest&q=data.object.customer+%3D+cus_1",
        &[],
    )
    .await;
    assert_eq!(keys(&listed), ["a", "c"]);
    for target in [
        "/dead-letters?q=data..x+%3D+1",
        "/deliveries?state=dead&q=data..x+%3D+1",
    ] {
        let bad = call(&inbox, &config, ops(), Method::GET, target, &[]).await;
        assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{target}");
        let reason = bad.body["error"].as_str().unwrap_or("");
        assert!(reason.contains("not a path"), "{target}: {reason}");
    }
    // Blank is no search.
    let all = call(
        &inbox,
        &config,
        ops(),
        Method::GET,
        "/dead-letters?q=+",
        &[],
    )
    .await;
    assert_eq!(keys(&all).len(), 3);
}

/// Issue 34, item 3: replay or discard every dead letter matching a
/// filter, the count first (`dry_run`), at most `limit`, recorded in the
/// action log; refused to readers, on `GET` and for an unknown action.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn bulk_by_filter() {
    let inbox = inbox().await;
    dead_customers(
        &inbox,
        &[
            ("a", "cus_1", "boom"),
            ("b", "cus_2", "boom"),
            ("c", "cus_1", "boom"),
            ("d", "cus_1", "boom"),
        ],
    )
    .await;
    let config = AdminConfig::default();
    let q = "q=data.object.customer+%3D+cus_1";
    let dry = call(
        &inbox,
        &config,
        ops(),
        Method::POST,
        &format!("/bulk/replay?{q}&dry_run=true"),
        &[JSON],
    )
    .await;
    assert_eq!(dry.status, StatusCode::OK, "{}", dry.body);
    assert_eq!(
        dry.body,
        json!({"dry_run": true, "action": "replay", "matched": 3, "more": false})
    );
    let dry = call(
        &inbox,
        &config,
        ops(),
        Method::POST,
        &format!("/bulk/replay?{q}&dry_run=true&limit=2"),
        &[JSON],
    )
    .await;
    assert_eq!(
        (dry.body["matched"].as_u64(), dry.body["more"].as_bool()),
        (Some(2), Some(true))
    );
    assert_eq!(
        inbox.stats().await.unwrap().dead,
        4,
        "a dry run changes nothing"
    );
    let some = call(
        &inbox,
        &config,
        ops(),
        Method::POST,
        &format!("/bulk/replay?{q}&limit=2"),
        &[JSON],
    )
    .await;
    assert_eq!(
        some.body,
        json!({"action": "replay", "matched": 2, "applied": 2, "skipped": 0, "reached_limit": true})
    );
    let rest = call(
        &inbox,
        &config,
        ops(),
        Method::POST,
        &format!("/bulk/discard?{q}"),
        &[JSON],
    )
    .await;
    assert_eq!(
        rest.body,
        json!({"action": "discard", "matched": 1, "applied": 1, "skipped": 0, "reached_limit": false})
    );
    let dead: Vec<String> = inbox
        .dead_letters(&DeadLetterFilter::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|d| d.meta.key)
        .collect();
    assert_eq!(dead, ["b"]);
    let log = inbox.actions(None, 2).await.unwrap().actions;
    let seen: Vec<(ActionKind, &str, u64)> = log
        .iter()
        .map(|a| (a.kind, a.target.as_str(), a.count))
        .collect();
    assert_eq!(
        seen,
        [
            (
                ActionKind::Discard,
                "filter: where data.object.customer = cus_1",
                1
            ),
            (
                ActionKind::Replay,
                "filter: where data.object.customer = cus_1",
                2
            ),
        ]
    );
    let reader = Some(Access::ReadOnly("rita".into()));
    let refused = call(
        &inbox,
        &config,
        reader,
        Method::POST,
        "/bulk/replay",
        &[JSON],
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let get = call(&inbox, &config, ops(), Method::GET, "/bulk/replay", &[]).await;
    assert_eq!(get.status, StatusCode::METHOD_NOT_ALLOWED);
    let unknown = call(&inbox, &config, ops(), Method::POST, "/bulk/purge", &[JSON]).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    for bad in [
        "/bulk/replay?limit=0",
        "/bulk/replay?dry_run=yes",
        "/bulk/replay?q=x",
    ] {
        let answer = call(&inbox, &config, ops(), Method::POST, bad, &[JSON]).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{bad}");
    }
}

/// Issue 22: the per-minute series, for read-only callers too.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn activity_series() {
    let inbox = inbox().await;
    inbox
        .accept(&crate::inbox::NewEvent::new("k:1", "test", "{}"))
        .await
        .unwrap();
    let config = AdminConfig::default();
    let reader = || Some(Access::ReadOnly("rita".into()));
    let answer = call(&inbox, &config, reader(), Method::GET, "/activity", &[]).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let minutes = answer.body["minutes"].as_array().unwrap();
    assert_eq!(minutes.len(), 60);
    assert_eq!(minutes[59]["start"].as_u64().unwrap() % 60, 0);
    assert_eq!(
        answer.body["totals"],
        json!({"accepted": 1, "completed": 0, "failed": 0})
    );
    let short = call(
        &inbox,
        &config,
        reader(),
        Method::GET,
        "/activity?minutes=5",
        &[],
    )
    .await;
    assert_eq!(short.body["minutes"].as_array().unwrap().len(), 5);
    for bad in [
        "/activity?minutes=0",
        "/activity?minutes=61",
        "/activity?minutes=x",
    ] {
        let answer = call(&inbox, &config, reader(), Method::GET, bad, &[]).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{bad}");
    }
    let post = call(&inbox, &config, ops(), Method::POST, "/activity", &[JSON]).await;
    assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[test]
fn requests_leave_their_headers_out_of_debug() {
    let mut headers = HeaderMap::new();
    headers.insert(header::AUTHORIZATION, "Bearer hunter2".parse().unwrap());
    let request = AdminRequest::new(&Method::GET, "/stats", None, &headers);
    assert!(!format!("{request:?}").contains("hunter2"));
}

#[test]
fn delivery_queries_parse() {
    let filter = parse_delivery_query("").unwrap();
    assert_eq!(filter, DeliveryFilter::default());
    let filter = parse_delivery_query(
        "state=in_flight&order=oldest&scheme=stripe&event_type=&delivery_id=msg%201\
         &from=10&until=20&after=o.5.k.1&limit=7",
    )
    .unwrap();
    assert_eq!(filter.state, crate::inbox::DeliveryState::InFlight);
    assert_eq!(filter.order, crate::inbox::DeliveryOrder::OldestFirst);
    assert_eq!(filter.scheme.as_deref(), Some("stripe"));
    assert_eq!(filter.event_type, None);
    assert_eq!(filter.delivery_id.as_deref(), Some("msg 1"));
    assert_eq!(
        filter.received_from,
        Some(UNIX_EPOCH + Duration::from_secs(10))
    );
    let after = filter.after.unwrap();
    assert_eq!((after.received_at_ms, after.key.as_str()), (5, "k.1"));
    assert_eq!(filter.limit, Some(7));
    for bad in [
        "state=x",
        "order=up",
        "from=-1",
        "until=99999999999999999999",
        "after=5.k",
        "after=o.5.k",
        "limit=many",
    ] {
        assert!(parse_delivery_query(bad).is_err(), "{bad}");
    }
}

#[test]
fn queries_and_keys_are_percent_decoded() {
    assert_eq!(
        percent_decode("webhooks%3Atest%3Amsg_1"),
        "webhooks:test:msg_1"
    );
    assert_eq!(percent_decode("100%"), "100%");
    // A path keeps its `+`; a bad escape stays as it is.
    assert_eq!(percent_decode("a+b%2Bc%zz%+1"), "a+b+c%zz%+1");
    assert_eq!(
        parse_query("scheme=stripe&event_type=a%2Eb+c&x"),
        [
            ("scheme".to_owned(), "stripe".to_owned()),
            ("event_type".to_owned(), "a.b c".to_owned()),
            ("x".to_owned(), String::new())
        ]
    );
}

/// Stores `k1` with credential headers and dead-letters it.
#[cfg(feature = "sqlite")]
async fn dead_with_credentials(inbox: &crate::inbox::SqliteInbox) {
    use crate::inbox::{ClaimToken, NewEvent};

    let mut event = NewEvent::new("k1", "shopify", "{\"email\":\"a@example.com\"}");
    event.headers = vec![
        ("content-type".into(), "application/json".into()),
        ("x-shopify-hmac-sha256".into(), "SECRETHMAC".into()),
        ("authorization".into(), "Bearer SECRETTOKEN".into()),
        ("x-request-id".into(), "req-1".into()),
    ];
    inbox.accept(&event).await.unwrap();
    let token = ClaimToken::random();
    let leased = inbox
        .lease(token, 1, Duration::from_secs(30), 1)
        .await
        .unwrap();
    let dead = inbox.dead_letter("k1", token, "boom").await.unwrap();
    assert_eq!((leased.len(), dead), (1, Transition::Applied));
}

/// Issue 35, item 2: a read-only caller gets no body, and nobody sees a
/// credential header's value, in item and list answers alike.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn read_only_gets_no_body_and_credentials_are_redacted() {
    let inbox = inbox().await;
    dead_with_credentials(&inbox).await;
    let config = AdminConfig::default();
    let reader = || Some(Access::ReadOnly("rita".into()));
    let admin = || Some(Access::Admin("ada".into()));
    for target in [
        "/dead-letters/k1",
        "/deliveries/k1",
        "/dead-letters",
        "/deliveries?state=dead",
    ] {
        for (access, body) in [(reader(), false), (admin(), true)] {
            let label = format!("{access:?} {target}");
            let answer = call(&inbox, &config, access, Method::GET, target, &[]).await;
            assert_eq!(answer.status, StatusCode::OK, "{label}: {}", answer.body);
            let text = answer.body.to_string();
            assert!(
                !text.contains("SECRETHMAC") && !text.contains("SECRETTOKEN"),
                "{label}: {text}"
            );
            assert!(text.contains("req-1"), "other headers are shown: {text}");
            let item = if target.contains("/k1") {
                &answer.body
            } else {
                &answer.body["items"][0]
            };
            let listed = !target.contains("/k1");
            assert_eq!(
                text.contains("a@example.com"),
                body && !listed,
                "{label}: {text}"
            );
            assert!(item.get("body_base64").is_none(), "{label}");
            if !body && !listed {
                assert_eq!(item["body"], Value::Null, "{label}");
                assert_eq!(item["body_omitted"], "read-only access", "{label}");
            }
        }
    }
}

/// Issue 35, item 2: no `authorize` hook means deny, GETs included.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn without_a_hook_every_request_is_denied() {
    let inbox = inbox().await;
    let config = AdminConfig::default();
    for (method, target) in [
        (Method::GET, "/stats"),
        (Method::GET, "/dead-letters"),
        (Method::POST, "/purge?older_than=604800"),
        (Method::POST, "/pause"),
    ] {
        let answer = call(&inbox, &config, None, method.clone(), target, &[JSON]).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{method} {target}");
        let reason = answer.body["error"].as_str().unwrap();
        assert!(reason.contains("allow_unauthenticated"), "{reason}");
    }
    assert!(!inbox.paused().await.unwrap());
}

/// Issue 35, item 9: an `Origin` of the request's host but another scheme
/// is another origin.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn the_origin_s_scheme_must_be_the_request_s() {
    let inbox = inbox().await;
    let config = AdminConfig::default();
    let admin = || Some(Access::Admin("ada".into()));
    let purge = "/purge?older_than=604800";
    let refused: [&[(&str, &str)]; 3] = [
        &[
            JSON,
            ("origin", "http://ops.example:8080"),
            ("x-forwarded-proto", "https"),
        ],
        &[
            JSON,
            ("origin", "https://ops.example:8080"),
            ("x-forwarded-proto", "http"),
        ],
        &[
            JSON,
            ("origin", "http://ops.example:8080"),
            (
                "forwarded",
                "for=10.0.0.1;proto=https;host=ops.example:8080",
            ),
        ],
    ];
    for headers in refused {
        let answer = call(&inbox, &config, admin(), Method::POST, purge, headers).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{headers:?}");
    }
    let allowed: [&[(&str, &str)]; 3] = [
        &[
            JSON,
            ("origin", "https://ops.example:8080"),
            ("x-forwarded-proto", "https"),
        ],
        &[
            JSON,
            ("origin", "HTTP://ops.example:8080"),
            ("x-forwarded-proto", "http"),
        ],
        // Unknown scheme (plain HTTP/1, no proxy header): host and port only.
        &[JSON, ("origin", "https://ops.example:8080")],
    ];
    for headers in allowed {
        let answer = call(&inbox, &config, admin(), Method::POST, purge, headers).await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "{headers:?}: {}",
            answer.body
        );
    }
}

/// Issue 35, item 2: `allow_unauthenticated` serves requests without a
/// hook as an admin's.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn allow_unauthenticated_serves_without_a_hook() {
    let inbox = inbox().await;
    dead_with_credentials(&inbox).await;
    let open = AdminConfig::new().allow_unauthenticated();
    let stats = call(&inbox, &open, None, Method::GET, "/stats", &[]).await;
    assert_eq!(stats.status, StatusCode::OK);
    let one = call(&inbox, &open, None, Method::GET, "/dead-letters/k1", &[]).await;
    assert!(one.body["body"].as_str().unwrap().contains("a@example.com"));
    let paused = call(&inbox, &open, None, Method::POST, "/pause", &[JSON]).await;
    assert_eq!(paused.status, StatusCode::OK, "{}", paused.body);
    // A hook's decision still applies.
    let denied = call(
        &inbox,
        &open,
        Some(Access::Deny),
        Method::GET,
        "/stats",
        &[],
    )
    .await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN);
}

/// Issue 35, item 2: the bodies for read-only callers when configured, and
/// the headers a configuration names redacted.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn bodies_for_read_only_and_configured_redaction() {
    let inbox = inbox().await;
    dead_with_credentials(&inbox).await;
    let config = AdminConfig::new()
        .bodies_for_read_only(true)
        .redact_headers([http::HeaderName::from_static("x-request-id")]);
    let reader = Some(Access::ReadOnly("rita".into()));
    let one = call(
        &inbox,
        &config,
        reader,
        Method::GET,
        "/dead-letters/k1",
        &[],
    )
    .await;
    assert!(one.body["body"].as_str().unwrap().contains("a@example.com"));
    assert!(one.body.get("body_omitted").is_none());
    let text = one.body.to_string();
    assert!(!text.contains("req-1"), "{text}");
    assert!(text.contains("redacted (5 bytes)"), "{text}");
}

/// Issue 35, item 2: every answer, refusals included, is not to be cached
/// or sniffed.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn every_answer_is_no_store_and_nosniff() {
    let inbox = inbox().await;
    dead_with_credentials(&inbox).await;
    let config = AdminConfig::default();
    let reader = || Some(Access::ReadOnly("rita".into()));
    for (access, method, target, status) in [
        (ops(), Method::GET, "/stats", StatusCode::OK),
        (ops(), Method::GET, "/dead-letters/k1", StatusCode::OK),
        (reader(), Method::GET, "/deliveries", StatusCode::OK),
        (ops(), Method::GET, "/nothing", StatusCode::NOT_FOUND),
        (ops(), Method::PUT, "/stats", StatusCode::METHOD_NOT_ALLOWED),
        (
            ops(),
            Method::GET,
            "/activity?minutes=0",
            StatusCode::BAD_REQUEST,
        ),
        (None, Method::GET, "/stats", StatusCode::FORBIDDEN),
        (
            Some(Access::Deny),
            Method::GET,
            "/stats",
            StatusCode::FORBIDDEN,
        ),
        (reader(), Method::POST, "/pause", StatusCode::FORBIDDEN),
        (
            ops(),
            Method::DELETE,
            "/dead-letters/k1",
            StatusCode::NO_CONTENT,
        ),
    ] {
        let label = format!("{access:?} {method} {target}");
        let answer = call(&inbox, &config, access, method, target, &[JSON]).await;
        assert_eq!(answer.status, status, "{label}: {}", answer.body);
        assert_eq!(answer.headers["cache-control"], "no-store", "{label}");
        assert_eq!(
            answer.headers["x-content-type-options"], "nosniff",
            "{label}"
        );
        assert_eq!(
            answer.headers.get("content-type").is_some(),
            status != StatusCode::NO_CONTENT,
            "{label}"
        );
    }
}

/// Issue 34, item 6: a Stripe-like body's `client_secret` is masked, a
/// configured path too, and a hook hides a field and a header, in item
/// answers for deliveries and dead letters; a JSON body over the limit is
/// answered `null` with why.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn payload_fields_are_redacted() {
    use crate::inbox::{ClaimToken, NewEvent};
    use crate::redact::{Decision, Redaction, Surface, Target};

    let inbox = inbox().await;
    let body = r#"{"id":"evt_1","data":{"object":{"client_secret":"pi_1_secret_SECRETCS","receipt_email":"SECRETMAIL@example.com","metadata":{"internal_note":"SECRETNOTE"},"amount":2000}}}"#;
    let mut event = NewEvent::new("k1", "stripe", body).with_event_type("payment_intent.created");
    event.headers = vec![
        ("stripe-signature".into(), "t=1,v1=SECRETSIG".into()),
        ("x-request-id".into(), "SECRETREQ".into()),
        ("content-type".into(), "application/json".into()),
    ];
    inbox.accept(&event).await.unwrap();
    let token = ClaimToken::random();
    let leased = inbox
        .lease(token, 1, Duration::from_secs(30), 1)
        .await
        .unwrap();
    let dead = inbox.dead_letter("k1", token, "boom").await.unwrap();
    assert_eq!((leased.len(), dead), (1, Transition::Applied));
    let big = format!(
        r#"{{"client_secret":"SECRETBIG","pad":"{}"}}"#,
        "x".repeat(70 * 1024)
    );
    inbox
        .accept(&NewEvent::new("k2", "stripe", big))
        .await
        .unwrap();

    let config =
        AdminConfig::new().redaction(Redaction::new().field("data.object.receipt_email").hook(
            |ctx| {
                assert_eq!(ctx.surface(), Surface::AdminApi);
                match ctx.target() {
                    Target::Field { path, .. } if path.starts_with("data.object.metadata.") => {
                        Decision::Hide
                    }
                    Target::Header("x-request-id") => Decision::Hide,
                    _ => ctx.default_decision(),
                }
            },
        ));
    let admin = || Some(Access::Admin("ada".into()));
    for target in ["/dead-letters/k1", "/deliveries/k1"] {
        let answer = call(&inbox, &config, admin(), Method::GET, target, &[]).await;
        assert_eq!(answer.status, StatusCode::OK, "{target}: {}", answer.body);
        let text = answer.body.to_string();
        for secret in [
            "SECRETCS",
            "SECRETMAIL",
            "SECRETNOTE",
            "SECRETSIG",
            "SECRETREQ",
            "x-request-id",
        ] {
            assert!(!text.contains(secret), "{target}: {secret}: {text}");
        }
        let shown: Value = serde_json::from_str(answer.body["body"].as_str().unwrap()).unwrap();
        assert_eq!(
            shown,
            serde_json::json!({"id": "evt_1", "data": {"object": {
                "client_secret": "redacted (string, 20 bytes)",
                "receipt_email": "redacted (string, 22 bytes)",
                "metadata": {},
                "amount": 2000,
            }}}),
            "{target}"
        );
        assert_eq!(answer.body["body_redacted"], 3, "{target}");
        assert_eq!(
            answer.body["headers"].as_array().unwrap().len(),
            2,
            "{text}"
        );
    }
    let answer = call(&inbox, &config, admin(), Method::GET, "/deliveries/k2", &[]).await;
    let text = answer.body.to_string();
    assert!(!text.contains("SECRETBIG"), "{text}");
    assert_eq!(answer.body["body"], Value::Null);
    assert!(
        answer.body["body_omitted"]
            .as_str()
            .unwrap()
            .contains("65536-byte limit"),
        "{text}"
    );
}

/// Issue 34, item 5: one selector paused and resumed through the API,
/// listed under `/gates`, logged with the caller; a bad selector is `400`.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn pause_one_selector() {
    use crate::inbox::gates::{Limit, Selector};
    let inbox = inbox().await;
    let config = AdminConfig::default();
    let admin = || Some(Access::Admin("ada".into()));
    let empty = call(&inbox, &config, ops(), Method::GET, "/gates", &[]).await;
    assert_eq!(empty.body, json!({"gates": [], "supported": true}));
    let paused = call(
        &inbox,
        &config,
        admin(),
        Method::POST,
        "/pause?only=stripe%3Ainvoice.*",
        &[JSON],
    )
    .await;
    assert_eq!(paused.status, StatusCode::OK, "{}", paused.body);
    assert_eq!(
        paused.body,
        json!({"paused": true, "changed": true, "only": "stripe:invoice.*"})
    );
    assert!(!inbox.paused().await.unwrap(), "the inbox itself runs");
    let reader = Some(Access::ReadOnly("rita".into()));
    let refused = call(
        &inbox,
        &config,
        reader,
        Method::POST,
        "/resume?only=stripe",
        &[JSON],
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    for bad in ["/pause?only=", "/pause?only=a%20b", "/pause?only=*:*"] {
        let answer = call(&inbox, &config, admin(), Method::POST, bad, &[JSON]).await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{bad}: {}",
            answer.body
        );
    }
    let selector: Selector = "shopify:orders/*".parse().unwrap();
    inbox
        .acquire_permit(
            &selector,
            Limit::concurrency(2),
            "k",
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    let listed = call(&inbox, &config, ops(), Method::GET, "/gates", &[]).await;
    let gates = listed.body["gates"].as_array().unwrap();
    assert_eq!(gates.len(), 2, "{}", listed.body);
    assert_eq!(gates[0]["selector"], "shopify:orders/*");
    assert_eq!(
        (
            &gates[0]["concurrency"],
            &gates[0]["running"],
            &gates[0]["paused"]
        ),
        (&json!(2), &json!(1), &json!(false))
    );
    assert_eq!(gates[1]["selector"], "stripe:invoice.*");
    assert_eq!(
        (&gates[1]["paused"], &gates[1]["concurrency"]),
        (&json!(true), &json!(null))
    );
    let resumed = call(
        &inbox,
        &config,
        admin(),
        Method::POST,
        "/resume?only=stripe:invoice.*",
        &[JSON],
    )
    .await;
    assert_eq!(resumed.body["changed"], true, "{}", resumed.body);
    let log = inbox.actions(None, 10).await.unwrap().actions;
    let entries: Vec<(&str, &str, u64)> = log
        .iter()
        .map(|a| (a.kind.as_str(), a.target.as_str(), a.count))
        .collect();
    assert_eq!(
        entries,
        [
            ("resume", "stripe:invoice.*", 1),
            ("pause", "stripe:invoice.*", 1)
        ]
    );
    assert!(log.iter().all(|a| a.who == "ada" && a.via == "api"));
}
