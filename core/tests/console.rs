//! The console (feature `console`) over an SQLite inbox, without a browser:
//! access, cross-site checks, read-only refusals, escaping, redaction, bulk
//! actions. The browser tests (both frameworks) are in the conformance crate.

mod console_support;

use std::sync::Arc;

use console_support::*;
use http::StatusCode;
use webhooks_core::console::{Access, Console};
use webhooks_core::inbox::NewEvent;

#[tokio::test]
async fn without_authorize_every_request_is_denied_with_how_to_configure_it() {
    let console = Console::new(inbox().await);
    for path in ["/", "/dead", "/dead/item"] {
        let page = get(&console, None, path, Some("key=x")).await;
        assert_eq!(page.status, StatusCode::FORBIDDEN);
        assert!(text(&page).contains("authorize"), "{}", text(&page));
    }
    let page = post(
        &console,
        None,
        "/purge",
        "older_than=0",
        &[("origin", ORIGIN)],
    )
    .await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    let denied = get(&console, Some(Access::Deny), "/", None).await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN);
    assert!(text(&denied).contains("Access denied"));
    // The stylesheet and script are served to anyone (the deny page uses them).
    let css = get(&console, None, "/assets/console.css", None).await;
    assert_eq!(css.status, StatusCode::OK);
    assert_eq!(css.headers["content-type"], "text/css; charset=utf-8");
}

#[tokio::test]
async fn every_page_carries_a_strict_csp_and_no_inline_script_or_style() {
    let inbox = inbox().await;
    dead(&inbox, "k1", "order.paid", "msg_1", "{}").await;
    let console = Console::new(inbox);
    for (path, query) in [
        ("/", None),
        ("/dead", None),
        ("/dead/item", Some("key=k1")),
        ("/dead/bulk", Some("action=replay")),
        ("/deliveries", Some("state=dead")),
        ("/deliveries/item", Some("key=k1")),
    ] {
        let page = get(&console, admin(), path, query).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        let csp = page.headers["content-security-policy"].to_str().unwrap();
        assert!(csp.starts_with("default-src 'self'"), "{csp}");
        assert!(!csp.contains("unsafe"), "{csp}");
        let html = text(&page);
        assert_eq!(
            html.matches("<script").count(),
            1,
            "{path}: only the external script"
        );
        assert!(html.contains("<script src=\"/ops/webhooks/assets/console.js\" defer></script>"));
        assert!(
            !html.contains("<style") && !html.contains(" style="),
            "{path}"
        );
        assert!(
            !html.contains(" onclick=") && !html.contains(" onload="),
            "{path}"
        );
    }
    let total = get(&console, admin(), "/assets/console.css", None)
        .await
        .body
        .len()
        + get(&console, admin(), "/assets/console.js", None)
            .await
            .body
            .len();
    assert!(total < 100 * 1024, "{total} bytes of assets");
}

#[tokio::test]
async fn sender_controlled_values_render_inert() {
    let inbox = inbox().await;
    dead(&inbox, XSS_ID, XSS_TYPE, XSS_ID, XSS_BODY).await;
    let console = Console::new(Arc::clone(&inbox));
    let list = get(&console, admin(), "/dead", None).await;
    let detail = get(
        &console,
        admin(),
        "/dead/item",
        Some(&form(&[("key", XSS_ID)])),
    )
    .await;
    let overview = get(&console, admin(), "/", None).await;
    assert_eq!(detail.status, StatusCode::OK, "{}", text(&detail));
    for page in [&list, &detail, &overview] {
        let html = text(page);
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(
            !html.contains("\"><img") && !html.contains("onerror=alert('type')>"),
            "{html}"
        );
    }
    assert!(text(&list).contains("&lt;script&gt;alert('id')&lt;/script&gt;"));
    assert!(text(&detail).contains("&quot;&gt;&lt;img src=x onerror=alert('type')&gt;"));
    assert!(
        text(&detail).contains("&lt;script&gt;alert('body')&lt;/script&gt;"),
        "the body is shown, escaped"
    );
}

#[tokio::test]
async fn detail_redacts_credentials_and_shows_bodies_to_admins_only() {
    let inbox = inbox().await;
    dead(
        &inbox,
        "k1",
        "order.paid",
        "msg_1",
        "{\"amount\":42,\"email\":\"a@example.com\"}",
    )
    .await;
    let console = Console::new(Arc::clone(&inbox));
    let page = get(&console, admin(), "/dead/item", Some("key=k1")).await;
    let html = text(&page);
    assert!(
        !html.contains("SECRETSIGNATURE") && !html.contains("SECRETTOKEN"),
        "{html}"
    );
    assert!(html.contains("redacted"));
    assert!(html.contains("application/json"), "other headers are shown");
    assert!(
        html.contains("&quot;amount&quot;: 42"),
        "pretty-printed JSON: {html}"
    );
    let raw = get(&console, admin(), "/dead/raw", Some("key=k1")).await;
    assert_eq!(raw.status, StatusCode::OK);
    assert_eq!(
        &raw.body[..],
        b"{\"amount\":42,\"email\":\"a@example.com\"}"
    );
    assert!(
        raw.headers["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment")
    );

    let page = get(&console, reader(), "/dead/item", Some("key=k1")).await;
    assert!(!text(&page).contains("a@example.com"));
    assert!(text(&page).contains("admins only"));
    assert_eq!(
        get(&console, reader(), "/dead/raw", Some("key=k1"))
            .await
            .status,
        StatusCode::FORBIDDEN
    );

    let open = Console::new(inbox).bodies_for_read_only(true);
    let page = get(&open, reader(), "/dead/item", Some("key=k1")).await;
    assert!(text(&page).contains("a@example.com"));
}

#[tokio::test]
async fn read_only_sees_no_controls_and_its_posts_answer_403() {
    let inbox = inbox().await;
    dead(&inbox, "k1", "order.paid", "msg_1", "{}").await;
    let console = Console::new(Arc::clone(&inbox));
    for (path, query) in [
        ("/", None),
        ("/dead", None),
        ("/dead/item", Some("key=k1")),
        ("/dead/bulk", Some("action=replay")),
    ] {
        let html = get(&console, reader(), path, query).await;
        let html = text(&html);
        assert!(
            !html.contains("<button type=\"submit\" formaction"),
            "{path}"
        );
        assert!(!html.contains("method=\"post\""), "{path}: {html}");
        assert!(!html.contains("name=\"csrf\""), "{path}");
    }
    // A token that an admin page printed for someone else does not help either.
    let admin_page = get(&console, admin(), "/dead", None).await;
    let stolen = token(text(&admin_page));
    for path in [
        "/replay", "/discard", "/bulk", "/purge", "/pause", "/resume",
    ] {
        let body = form(&[
            ("csrf", &stolen),
            ("key", "k1"),
            ("action", "discard"),
            ("older_than", "0"),
        ]);
        let answer = post(&console, reader(), path, &body, &[("origin", ORIGIN)]).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{path}");
    }
    assert!(
        inbox.dead_letter_get("k1").await.unwrap().is_some(),
        "still dead"
    );
    assert!(!inbox.paused().await.unwrap(), "still running");
}

/// Issue 22: the overview says whether processing runs; an admin pauses and
/// resumes it with a token-checked, same-origin `POST`; a read-only user
/// sees the state but no button; forged requests change nothing.
#[tokio::test]
async fn pause_and_resume_from_the_overview() {
    let inbox = inbox().await;
    let console = Console::new(Arc::clone(&inbox));
    let page = get(&console, reader(), "/", None).await;
    let html = text(&page);
    assert!(html.contains("Running"), "{html}");
    assert!(
        !html.contains("id=\"pause\""),
        "no button for read-only users"
    );
    let page = get(&console, admin(), "/", None).await;
    let html = text(&page);
    assert!(html.contains("Running"));
    assert!(html.contains("action=\"/ops/webhooks/pause\""), "{html}");
    assert!(html.contains("id=\"pause\""));
    assert!(!html.contains("id=\"resume\""));
    let csrf = token(html);
    let good = form(&[("csrf", &csrf)]);

    // Forged: no token, another origin, cross-site, a reader, another admin's token.
    type Forged<'a> = (
        &'a str,
        Option<Access>,
        String,
        Vec<(&'static str, &'a str)>,
    );
    let refused: [Forged<'_>; 5] = [
        ("no token", admin(), String::new(), vec![("origin", ORIGIN)]),
        (
            "another origin",
            admin(),
            good.clone(),
            vec![("origin", "http://evil.example")],
        ),
        (
            "cross-site",
            admin(),
            good.clone(),
            vec![("origin", ORIGIN), ("sec-fetch-site", "cross-site")],
        ),
        (
            "read-only",
            reader(),
            good.clone(),
            vec![("origin", ORIGIN)],
        ),
        (
            "someone else's token",
            Some(Access::Admin("mallory".into())),
            good.clone(),
            vec![("origin", ORIGIN)],
        ),
    ];
    for (what, access, body, headers) in &refused {
        let answer = post(&console, access.clone(), "/pause", body, headers).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{what}");
    }
    assert!(!inbox.paused().await.unwrap(), "nothing forged got through");
    assert_eq!(
        get(&console, admin(), "/pause", None).await.status,
        StatusCode::METHOD_NOT_ALLOWED
    );

    let answer = post(&console, admin(), "/pause", &good, &[("origin", ORIGIN)]).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", text(&answer));
    assert_eq!(answer.headers["location"], "/ops/webhooks/?done=pause&n=1");
    assert!(inbox.paused().await.unwrap());
    let again = post(&console, admin(), "/pause", &good, &[("origin", ORIGIN)]).await;
    assert_eq!(again.headers["location"], "/ops/webhooks/?done=pause&n=0");
    let page = get(&console, admin(), "/", Some("done=pause&n=1")).await;
    let html = text(&page);
    assert!(html.contains("Paused"), "{html}");
    assert!(html.contains("Processing paused"), "the notice");
    assert!(html.contains("id=\"resume\""));
    assert!(!html.contains("id=\"pause\""));
    let page = get(&console, reader(), "/", None).await;
    assert!(text(&page).contains("Paused"));
    assert!(!text(&page).contains("id=\"resume\""));
    let refused = post(&console, reader(), "/resume", &good, &[("origin", ORIGIN)]).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(inbox.paused().await.unwrap(), "a reader cannot resume");

    let answer = post(&console, admin(), "/resume", &good, &[("origin", ORIGIN)]).await;
    assert_eq!(answer.headers["location"], "/ops/webhooks/?done=resume&n=1");
    assert!(!inbox.paused().await.unwrap());
    let page = get(&console, admin(), "/", Some("done=resume&n=1")).await;
    assert!(text(&page).contains("Processing resumed."));
    assert!(text(&page).contains("Running"));
}

#[tokio::test]
async fn admin_posts_need_the_token_and_the_same_origin() {
    let inbox = inbox().await;
    dead(&inbox, "k1", "order.paid", "msg_1", "{}").await;
    let console = Console::new(Arc::clone(&inbox));
    let page = get(&console, admin(), "/dead/item", Some("key=k1")).await;
    assert!(
        text(&page).contains("id=\"replay\""),
        "admins see the buttons"
    );
    let csrf = token(text(&page));
    let good = form(&[("csrf", &csrf), ("key", "k1"), ("scope", "one")]);

    type Case<'a> = (&'a str, String, Vec<(&'static str, &'a str)>);
    let refused: [Case<'_>; 6] = [
        ("no token", form(&[("key", "k1")]), vec![("origin", ORIGIN)]),
        (
            "wrong token",
            form(&[("csrf", "1.00"), ("key", "k1")]),
            vec![("origin", ORIGIN)],
        ),
        (
            "another origin",
            good.clone(),
            vec![("origin", "http://evil.example")],
        ),
        (
            "cross-site fetch",
            good.clone(),
            vec![("origin", ORIGIN), ("sec-fetch-site", "cross-site")],
        ),
        (
            "same-site fetch",
            good.clone(),
            vec![("sec-fetch-site", "same-site")],
        ),
        ("no origin at all", good.clone(), vec![]),
    ];
    for (what, body, headers) in &refused {
        let answer = post(&console, admin(), "/replay", body, headers).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{what}");
    }
    // The token is bound to the identity.
    let answer = post(
        &console,
        Some(Access::Admin("mallory".into())),
        "/replay",
        &good,
        &[("origin", ORIGIN)],
    )
    .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert!(
        inbox.dead_letter_get("k1").await.unwrap().is_some(),
        "nothing replayed yet"
    );

    // GET on an action answers 405, never acts.
    assert_eq!(
        get(&console, admin(), "/replay", Some(&good)).await.status,
        StatusCode::METHOD_NOT_ALLOWED
    );

    let answer = post(
        &console,
        admin(),
        "/replay",
        &good,
        &[("origin", ORIGIN), ("sec-fetch-site", "same-origin")],
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", text(&answer));
    assert_eq!(
        answer.headers["location"],
        "/ops/webhooks/dead?done=replay&n=1"
    );
    assert!(
        inbox.dead_letter_get("k1").await.unwrap().is_none(),
        "replayed"
    );
    assert_eq!(inbox.stats().await.unwrap().due, 1);
    let list = get(&console, admin(), "/dead", Some("done=replay&n=1")).await;
    assert!(text(&list).contains("1 replayed."));
}

#[tokio::test]
async fn selected_and_filtered_bulk_actions() {
    let inbox = inbox().await;
    for n in 0..5 {
        dead(
            &inbox,
            &format!("paid{n}"),
            "order.paid",
            &format!("msg_p{n}"),
            "{}",
        )
        .await;
    }
    for n in 0..3 {
        dead(
            &inbox,
            &format!("refund{n}"),
            "order.refunded",
            &format!("msg_r{n}"),
            "{}",
        )
        .await;
    }
    let console = Console::new(Arc::clone(&inbox)).bulk_limit(4);
    let list = get(
        &console,
        admin(),
        "/dead",
        Some("event_type=order.refunded"),
    )
    .await;
    let html = text(&list);
    assert_eq!(
        html.matches("class=\"dead-letter\"").count(),
        3,
        "filtered by event type"
    );
    let csrf = token(html);

    // Discard two selected.
    let body = form(&[
        ("csrf", &csrf),
        ("key", "refund0"),
        ("key", "refund1"),
        ("back", "?event_type=order.refunded"),
    ]);
    let answer = post(&console, admin(), "/discard", &body, &[("origin", ORIGIN)]).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER);
    assert_eq!(
        answer.headers["location"],
        "/ops/webhooks/dead?event_type=order.refunded&done=discard&n=2"
    );
    assert_eq!(inbox.stats().await.unwrap().dead, 6);

    // All matching a filter: the count first, bounded.
    let confirm = get(
        &console,
        admin(),
        "/dead/bulk",
        Some("action=replay&event_type=order.paid"),
    )
    .await;
    assert!(text(&confirm).contains("More than 4"), "{}", text(&confirm));
    assert!(text(&confirm).contains("Replay 4 dead letters"));
    let body = form(&[
        ("csrf", &csrf),
        ("action", "replay"),
        ("event_type", "order.paid"),
        ("scheme", ""),
    ]);
    let answer = post(&console, admin(), "/bulk", &body, &[("origin", ORIGIN)]).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", text(&answer));
    let stats = inbox.stats().await.unwrap();
    assert_eq!(
        (stats.dead, stats.due),
        (2, 4),
        "4 of the 5 order.paid replayed"
    );
    let confirm = get(
        &console,
        admin(),
        "/dead/bulk",
        Some("action=replay&event_type=order.paid"),
    )
    .await;
    assert!(
        text(&confirm).contains("1 dead letters match"),
        "{}",
        text(&confirm)
    );

    // Delivery-id lookup.
    let found = get(&console, admin(), "/dead", Some("delivery_id=msg_r2")).await;
    assert_eq!(text(&found).matches("class=\"dead-letter\"").count(), 1);
    // Received between: every one was received after 2000 and before 9999.
    let all = get(&console, admin(), "/dead", Some("from=2000-01-01T00%3A00")).await;
    assert_eq!(text(&all).matches("class=\"dead-letter\"").count(), 2);
    let none = get(&console, admin(), "/dead", Some("until=2000-01-01")).await;
    assert_eq!(text(&none).matches("class=\"dead-letter\"").count(), 0);
    let confirm = get(
        &console,
        admin(),
        "/dead/bulk",
        Some("action=discard&until=2000-01-01"),
    )
    .await;
    assert!(
        text(&confirm).contains("0 dead letters match"),
        "{}",
        text(&confirm)
    );
    let body = form(&[
        ("csrf", &csrf),
        ("action", "discard"),
        ("until", "2000-01-01"),
    ]);
    let answer = post(&console, admin(), "/bulk", &body, &[("origin", ORIGIN)]).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER);
    assert_eq!(
        inbox.stats().await.unwrap().dead,
        2,
        "nothing received before 2000"
    );
    assert_eq!(
        get(&console, admin(), "/dead", Some("from=yesterday"))
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
    // Garbage parameters are a 400, never a panic.
    assert_eq!(
        get(&console, admin(), "/dead", Some("after=zzz"))
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        get(&console, admin(), "/dead/bulk", Some("action=explode"))
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
    let answer = post(
        &console,
        admin(),
        "/purge",
        &form(&[("csrf", &csrf), ("older_than", "soon")]),
        &[("origin", ORIGIN)],
    )
    .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    let answer = post(
        &console,
        admin(),
        "/purge",
        &form(&[("csrf", &csrf), ("older_than", "7d")]),
        &[("origin", ORIGIN)],
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER);
    assert_eq!(answer.headers["location"], "/ops/webhooks/?done=purge&n=0");
}

#[tokio::test]
async fn overview_counts_and_pagination() {
    let inbox = inbox().await;
    for n in 0..55 {
        dead(
            &inbox,
            &format!("k{n:02}"),
            if n % 2 == 0 { "a" } else { "b" },
            "m",
            "{}",
        )
        .await;
    }
    let console = Console::new(Arc::clone(&inbox));
    let overview = get(&console, reader(), "/", None).await;
    let html = text(&overview);
    assert!(html.contains("<svg"), "the chart");
    assert!(html.contains(">55</a>"), "dead count: {html}");
    assert!(
        html.contains("event_type=a\">28</a>") && html.contains("event_type=b\">27</a>"),
        "{html}"
    );
    let first = get(&console, reader(), "/dead", None).await;
    assert_eq!(text(&first).matches("class=\"dead-letter\"").count(), 50);
    let html = text(&first);
    let at = html.find("rel=\"next\" href=\"").unwrap() + 17;
    let next = &html[at..at + html[at..].find('"').unwrap()].replace("&amp;", "&");
    let query = next.split_once('?').unwrap().1;
    let second = get(&console, reader(), "/dead", Some(query)).await;
    assert_eq!(text(&second).matches("class=\"dead-letter\"").count(), 5);
}

/// The keys of a deliveries page's rows, in page order.
fn row_keys(html: &str) -> Vec<String> {
    html.split("<tr class=\"delivery\" data-key=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().to_owned())
        .collect()
}

/// Issue 22: the deliveries by state, newest first by default, oldest first
/// on request; a detail page for every state, the body for admins only; no
/// bulk actions outside the dead letters; sender values escaped.
#[tokio::test]
async fn deliveries_by_state_newest_first() {
    use std::time::Duration;
    use webhooks_core::inbox::{ClaimToken, NewEvent, Transition};
    let inbox = inbox().await;
    dead(&inbox, XSS_ID, XSS_TYPE, "msg_x", XSS_BODY).await;
    for key in ["c1", "c2", "f1", "f2", "d1"] {
        let event = NewEvent::new(key, "test", format!("{{\"n\":\"{key}-BODY\"}}"))
            .with_event_type("order.paid");
        inbox.accept(&event).await.unwrap();
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let token = ClaimToken::random();
    let done = inbox
        .lease(token, 2, Duration::from_secs(60), 5)
        .await
        .unwrap();
    for event in &done {
        assert_eq!(
            inbox.complete(&event.meta.key, token).await.unwrap(),
            Transition::Applied
        );
    }
    let flying = inbox
        .lease(token, 2, Duration::from_secs(60), 5)
        .await
        .unwrap();
    assert_eq!(flying.len(), 2);
    let console = Console::new(Arc::clone(&inbox));
    for (query, keys) in [
        (None, vec!["d1"]),
        (Some("state=due"), vec!["d1"]),
        (Some("state=completed"), vec!["c2", "c1"]),
        (Some("state=completed&order=oldest"), vec!["c1", "c2"]),
        (Some("state=in_flight"), vec!["f2", "f1"]),
        (Some("state=retrying"), vec![]),
        (Some("state=dead"), vec![XSS_ID]),
        (Some("state=completed&event_type=other"), vec![]),
    ] {
        for access in [admin(), reader()] {
            let page = get(&console, access, "/deliveries", query).await;
            assert_eq!(page.status, StatusCode::OK, "{query:?}");
            let html = text(&page);
            // maud escapes attribute values: compare with the escaped key.
            let expected: Vec<String> = keys
                .iter()
                .map(|k| {
                    k.replace('&', "&amp;")
                        .replace('<', "&lt;")
                        .replace('>', "&gt;")
                        .replace('"', "&quot;")
                })
                .collect();
            assert_eq!(row_keys(html), expected, "{query:?}");
            assert!(
                !html.contains("data-needs-selection"),
                "no bulk actions here"
            );
            assert!(
                !html.contains("<script>alert") && !html.contains("<img"),
                "{html}"
            );
            assert!(html.contains("id=\"states\""), "the state tabs");
        }
    }
    // Pages of 50 with a next link: 2 events, so none.
    let page = get(&console, admin(), "/deliveries", Some("state=completed")).await;
    assert!(!text(&page).contains("rel=\"next\""));
    // The detail of every state; the body for admins only.
    for (key, state) in [("c1", "completed"), ("f1", "in_flight"), ("d1", "due")] {
        let query = form(&[("key", key)]);
        let page = get(&console, admin(), "/deliveries/item", Some(&query)).await;
        assert_eq!(page.status, StatusCode::OK, "{key}");
        let html = text(&page);
        assert!(
            html.contains(&format!("data-state=\"{state}\"")),
            "{key}: {html}"
        );
        assert!(html.contains(&format!("{key}-BODY")), "admins see the body");
        let page = get(&console, reader(), "/deliveries/item", Some(&query)).await;
        let html = text(&page);
        assert!(!html.contains(&format!("{key}-BODY")), "readers do not");
        assert!(html.contains("Bodies are shown to admins only."));
    }
    let missing = get(&console, admin(), "/deliveries/item", Some("key=nope")).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    for bad in [
        "state=sleeping",
        "order=up",
        "after=x",
        "order=oldest&after=n.1.k",
    ] {
        let page = get(&console, admin(), "/deliveries", Some(bad)).await;
        assert_eq!(page.status, StatusCode::BAD_REQUEST, "{bad}");
    }
    let page = post(&console, admin(), "/deliveries", "", &[("origin", ORIGIN)]).await;
    assert_eq!(page.status, StatusCode::METHOD_NOT_ALLOWED);
}

/// Issue 22: the overview charts accepted / completed / failed per minute
/// over the last hour, with a summary and a table of the busy minutes.
#[tokio::test]
async fn overview_charts_the_last_hour_of_activity() {
    use std::time::Duration;
    use webhooks_core::inbox::{ClaimToken, NewEvent, Transition};

    let inbox = inbox().await;
    let console = Console::new(Arc::clone(&inbox));
    let idle = text(&get(&console, reader(), "/", None).await).to_owned();
    assert!(idle.contains("data-accepted=\"0\""), "{idle}");
    assert!(idle.contains("No activity in the last hour."));
    for n in 0..4 {
        let event = NewEvent::new(format!("a{n}"), "test", "{}");
        inbox.accept(&event).await.unwrap();
    }
    let token = ClaimToken::random();
    let leased = inbox
        .lease(token, 4, Duration::from_secs(30), 5)
        .await
        .unwrap();
    let applied = [
        inbox.complete(&leased[0].meta.key, token).await.unwrap(),
        inbox.complete(&leased[1].meta.key, token).await.unwrap(),
        inbox
            .retry(&leased[2].meta.key, token, Duration::from_secs(60), "e")
            .await
            .unwrap(),
        inbox
            .dead_letter(&leased[3].meta.key, token, "e")
            .await
            .unwrap(),
    ];
    assert_eq!(applied, [Transition::Applied; 4]);
    let page = get(&console, reader(), "/", None).await;
    let html = text(&page);
    for expected in [
        "data-accepted=\"4\"",
        "data-completed=\"2\"",
        "data-failed=\"2\"",
        "<title id=\"activity-title\">",
        "4 accepted, 2 completed, 2 failed",
        "data-series=\"accepted\" data-total=\"4\"",
        "data-series=\"failed\" data-total=\"2\"",
        "class=\"legend\"",
    ] {
        assert!(html.contains(expected), "{expected}: {html}");
    }
    // Sixty points per line, inside the live part that refreshes.
    let at = html.find("data-series=\"completed\"").unwrap();
    let line = &html[html[..at].rfind("<polyline").unwrap()..at];
    assert_eq!(line.matches(',').count(), 60, "{line}");
    assert!(html.find("id=\"live\"").unwrap() < html.find("id=\"activity\"").unwrap());
    let row = html
        .find("<tr data-minute=")
        .expect("the busy minute's row");
    if html.contains("(1 busy of 60)") {
        // (Unless a minute boundary fell between the operations.)
        assert!(
            html[row..].contains("<td>4</td><td>2</td><td>2</td>"),
            "{html}"
        );
    }
    assert!(!html.contains(" style="));
}

/// Issue 35, item 4: the completed events are the inbox's memory of
/// processed deliveries (a sender's retry of a purged one runs again), so a
/// console purge younger than the admin API's floor (the retention, 7 days
/// by default) is refused unless the form's "force" box is ticked.
#[tokio::test]
async fn purge_below_the_floor_needs_force() {
    let inbox = inbox().await;
    let event = webhooks_core::inbox::NewEvent::new("done_1", "test", "{}");
    inbox.accept(&event).await.unwrap();
    let claim = webhooks_core::inbox::ClaimToken::random();
    let leased = inbox
        .lease(claim, 1, std::time::Duration::from_secs(30), 1)
        .await
        .unwrap();
    assert_eq!(
        inbox.complete(&leased[0].meta.key, claim).await.unwrap(),
        webhooks_core::inbox::Transition::Applied
    );
    assert_eq!(inbox.stats().await.unwrap().completed, 1);
    let console = Console::new(Arc::clone(&inbox));
    let page = get(&console, admin(), "/", None).await;
    let html = text(&page);
    assert!(
        html.contains("type=\"checkbox\" name=\"force\""),
        "the purge form has a force box: {html}"
    );
    let csrf = token(html);
    for older_than in ["0", "0s", "1d", "6d"] {
        let answer = post(
            &console,
            admin(),
            "/purge",
            &form(&[("csrf", &csrf), ("older_than", older_than)]),
            &[("origin", ORIGIN)],
        )
        .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{older_than}");
        assert!(text(&answer).contains("force"), "{}", text(&answer));
        assert_eq!(inbox.stats().await.unwrap().completed, 1, "{older_than}");
    }
    // Ticked (a checkbox sends `on`), the same purge runs.
    let answer = post(
        &console,
        admin(),
        "/purge",
        &form(&[("csrf", &csrf), ("older_than", "0"), ("force", "on")]),
        &[("origin", ORIGIN)],
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", text(&answer));
    assert_eq!(answer.headers["location"], "/ops/webhooks/?done=purge&n=1");
    assert_eq!(inbox.stats().await.unwrap().completed, 0);

    // The floor follows the inbox's retention when configured: 14 days
    // here, so 15d needs no force and 10d still does; the form offers it.
    // Issue 34: never below the providers' retry windows plus a day (4
    // days, Stripe's 3 + 1): an hour configured is raised to it.
    let day = std::time::Duration::from_secs(86_400);
    for (minimum, shown, cases) in [
        (
            14 * day,
            "14d",
            [
                ("15d", StatusCode::SEE_OTHER),
                ("10d", StatusCode::BAD_REQUEST),
            ],
        ),
        (
            std::time::Duration::from_secs(3_600),
            "4d",
            [
                ("4d", StatusCode::SEE_OTHER),
                ("2h", StatusCode::BAD_REQUEST),
            ],
        ),
    ] {
        let console = Console::new(Arc::clone(&inbox)).min_purge_age(minimum);
        let page = get(&console, admin(), "/", None).await;
        assert!(
            text(&page).contains(&format!("name=\"older_than\" value=\"{shown}\"")),
            "{}",
            text(&page)
        );
        let csrf = token(text(&page));
        for (older_than, status) in cases {
            let answer = post(
                &console,
                admin(),
                "/purge",
                &form(&[("csrf", &csrf), ("older_than", older_than)]),
                &[("origin", ORIGIN)],
            )
            .await;
            assert_eq!(answer.status, status, "{older_than}: {}", text(&answer));
        }
    }
}

/// Issue 35, item 9: Shopify's `X-Shopify-Hmac-Sha256` (an HMAC, not named
/// a signature) is redacted too.
#[tokio::test]
async fn hmac_headers_are_redacted() {
    let inbox = inbox().await;
    let mut event = NewEvent::new("k1", "shopify", "{}");
    event.headers = vec![
        ("x-shopify-hmac-sha256".into(), "SECRETHMAC".into()),
        ("proxy-authorization".into(), "Basic SECRETPROXY".into()),
        ("set-cookie".into(), "session=SECRETCOOKIE".into()),
        ("x-shopify-topic".into(), "orders/create".into()),
    ];
    inbox.accept(&event).await.unwrap();
    let console = Console::new(inbox);
    let page = get(&console, admin(), "/deliveries/item", Some("key=k1")).await;
    let html = text(&page);
    assert_eq!(page.status, StatusCode::OK, "{html}");
    for secret in ["SECRETHMAC", "SECRETPROXY", "SECRETCOOKIE"] {
        assert!(!html.contains(secret), "{secret}: {html}");
    }
    assert!(html.contains("orders/create"), "other headers are shown");
}

/// Issue 35, item 9: headers named by the configuration (a verifier's
/// `credential_headers`) are redacted too.
#[tokio::test]
async fn configured_headers_are_redacted() {
    let inbox = inbox().await;
    let mut event = NewEvent::new("k1", "acme", "{}");
    event.headers = vec![
        ("x-acme-digest".into(), "SECRETDIGEST".into()),
        ("x-acme-topic".into(), "orders".into()),
    ];
    inbox.accept(&event).await.unwrap();
    let plain = Console::new(Arc::clone(&inbox));
    let page = get(&plain, admin(), "/deliveries/item", Some("key=k1")).await;
    assert!(
        text(&page).contains("SECRETDIGEST"),
        "not a credential by name"
    );
    let console =
        Console::new(inbox).redact_headers([http::HeaderName::from_static("x-acme-digest")]);
    let page = get(&console, admin(), "/deliveries/item", Some("key=k1")).await;
    let html = text(&page);
    assert!(!html.contains("SECRETDIGEST"), "{html}");
    assert!(html.contains("redacted (12 bytes)"), "{html}");
    assert!(html.contains("orders"), "other headers are shown");
}

#[test]
fn requests_leave_headers_and_bodies_out_of_debug() {
    let mut headers = http::HeaderMap::new();
    headers.insert("cookie", "session=SECRETCOOKIE".parse().unwrap());
    let method = http::Method::POST;
    let request = webhooks_core::console::ConsoleRequest::new(
        &method,
        "/replay",
        None,
        &headers,
        b"csrf=SECRETTOKEN",
    );
    let shown = format!("{request:?}");
    assert!(
        !shown.contains("SECRETCOOKIE") && !shown.contains("SECRETTOKEN"),
        "{shown}"
    );
}

/// Issue 34, item 6: a Stripe-like body's `client_secret` is masked at any
/// depth, a configured path too, a hook hides a field and a header; the
/// delivery page alike; the raw download stays the exact bytes, admins only.
#[tokio::test]
async fn payload_fields_are_redacted() {
    use webhooks_core::redact::{Decision, Redaction, Target};

    let inbox = inbox().await;
    let body = r#"{"id":"evt_1","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","client_secret":"pi_1_secret_SECRETCS","customer":{"email":"SECRETMAIL@example.com","name":"Ada"},"card":{"fingerprint":"SECRETFP","last4":"4242"}}}}"#;
    dead(&inbox, "k1", "payment_intent.succeeded", "evt_1", body).await;
    let redaction = Redaction::new()
        .field("data.object.customer.email")
        .hook(|ctx| match ctx.target() {
            Target::Field {
                key: "fingerprint", ..
            } if ctx
                .event_type()
                .is_some_and(|t| t.starts_with("payment_intent.")) =>
            {
                Decision::Hide
            }
            _ => ctx.default_decision(),
        });
    let console = Console::new(Arc::clone(&inbox))
        .redaction(redaction)
        .bodies_for_read_only(true);
    for (who, path) in [
        (admin(), "/dead/item"),
        (admin(), "/deliveries/item"),
        (reader(), "/dead/item"),
    ] {
        let page = get(&console, who, path, Some("key=k1")).await;
        let html = text(&page);
        assert_eq!(page.status, StatusCode::OK, "{html}");
        for secret in ["SECRETCS", "SECRETMAIL", "SECRETFP", "fingerprint"] {
            assert!(!html.contains(secret), "{path}: {secret}: {html}");
        }
        assert!(
            html.contains("&quot;client_secret&quot;: &quot;redacted (string, 20 bytes)&quot;"),
            "{path}: {html}"
        );
        assert!(
            html.contains("&quot;email&quot;: &quot;redacted (string, 22 bytes)&quot;"),
            "{path}: {html}"
        );
        assert!(
            html.contains("&quot;last4&quot;: &quot;4242&quot;"),
            "{html}"
        );
        assert!(html.contains("3 field(s) redacted"), "{html}");
    }
    // The raw download: the exact bytes, for admins only, even with
    // bodies for read-only users.
    let raw = get(&console, admin(), "/dead/raw", Some("key=k1")).await;
    assert_eq!(raw.status, StatusCode::OK);
    assert_eq!(&raw.body[..], body.as_bytes());
    let raw = get(&console, reader(), "/dead/raw", Some("key=k1")).await;
    assert_eq!(raw.status, StatusCode::FORBIDDEN);

    // A JSON body over the cap is not parsed, so not shown; the page says so.
    let small = Console::new(Arc::clone(&inbox)).body_cap(64);
    let page = get(&small, admin(), "/dead/item", Some("key=k1")).await;
    let html = text(&page);
    assert!(!html.contains("SECRETCS"), "{html}");
    assert!(html.contains("not-parsed"), "{html}");

    // A hook that hides the whole body hides it from the raw download too.
    let hidden = Console::new(inbox).redaction(Redaction::new().hook(|ctx| match ctx.target() {
        Target::Body => Decision::Hide,
        _ => ctx.default_decision(),
    }));
    let page = get(&hidden, admin(), "/dead/item", Some("key=k1")).await;
    let html = text(&page);
    assert!(
        !html.contains("evt_1\",") && !html.contains("Ada"),
        "{html}"
    );
    assert!(!html.contains("Download raw body"), "{html}");
    let raw = get(&hidden, admin(), "/dead/raw", Some("key=k1")).await;
    assert_eq!(raw.status, StatusCode::FORBIDDEN);
}

/// Issue 34, item 4: the console's actions are in the action log, with
/// the admin's identity and what they acted on; readers see the page, and
/// a key a sender chose renders inert there too.
#[tokio::test]
async fn actions_are_in_the_action_log() {
    let inbox = inbox().await;
    let odd = "<b>odd</b>";
    dead(&inbox, odd, "order.paid", "msg_odd", "{}").await;
    for n in 0..3 {
        dead(
            &inbox,
            &format!("paid{n}"),
            "order.paid",
            &format!("msg_p{n}"),
            "{}",
        )
        .await;
    }
    let console = Console::new(Arc::clone(&inbox));
    let empty = get(&console, reader(), "/actions", None).await;
    assert_eq!(empty.status, StatusCode::OK);
    assert!(text(&empty).contains("Nothing has been done yet."));
    let csrf = token(text(&get(&console, admin(), "/dead", None).await));
    let origin = [("origin", ORIGIN)];
    let one = form(&[("csrf", &csrf), ("key", odd), ("scope", "one")]);
    let answer = post(&console, admin(), "/discard", &one, &origin).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", text(&answer));
    let bulk = form(&[
        ("csrf", &csrf),
        ("action", "replay"),
        ("event_type", "order.paid"),
    ]);
    let answer = post(&console, admin(), "/bulk", &bulk, &origin).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", text(&answer));
    let answer = post(
        &console,
        admin(),
        "/pause",
        &form(&[("csrf", &csrf)]),
        &origin,
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", text(&answer));
    // A read-only caller's refused post is not an action.
    let refused = post(
        &console,
        reader(),
        "/resume",
        &form(&[("csrf", &csrf)]),
        &origin,
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);

    let page = get(&console, reader(), "/actions", None).await;
    assert_eq!(page.status, StatusCode::OK);
    let html = text(&page);
    let kinds: Vec<&str> = html
        .match_indices("data-action=\"")
        .map(|(at, m)| {
            let rest = &html[at + m.len()..];
            &rest[..rest.find('"').unwrap()]
        })
        .collect();
    assert_eq!(kinds, ["pause", "replay", "discard"], "newest first");
    assert!(html.contains("filter: event_type=order.paid"), "{html}");
    assert!(
        html.contains("&lt;b&gt;odd&lt;/b&gt;") && !html.contains(odd),
        "{html}"
    );
    assert_eq!(html.matches("<td>alice</td>").count(), 3, "{html}");
    assert_eq!(html.matches("<td>console</td>").count(), 3, "{html}");
    let entries = inbox.actions(None, 10).await.unwrap().actions;
    let counts: Vec<u64> = entries.iter().map(|a| a.count).collect();
    assert_eq!(counts, [1, 3, 1]);
    let bad = get(&console, reader(), "/actions", Some("before=x")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let post_page = post(
        &console,
        admin(),
        "/actions",
        &form(&[("csrf", &csrf)]),
        &origin,
    )
    .await;
    assert_eq!(post_page.status, StatusCode::METHOD_NOT_ALLOWED);
}

/// Issue 34, item 2: the dead-letter and delivery pages search payload
/// values and errors (`q`), a bulk action by filter keeps the search (and
/// the action log says so), and a malformed search is a 400 saying why.
#[tokio::test]
async fn pages_search_payloads_and_errors() {
    let inbox = inbox().await;
    dead(
        &inbox,
        "in_1",
        "invoice.paid",
        "msg_1",
        r#"{"data":{"object":{"customer":"cus_1"}}}"#,
    )
    .await;
    dead(
        &inbox,
        "in_2",
        "invoice.paid",
        "msg_2",
        r#"{"data":{"object":{"customer":"cus_2"}}}"#,
    )
    .await;
    dead(
        &inbox,
        "in_3",
        "invoice.paid",
        "msg_3",
        r#"{"data":{"object":{"customer":"cus_1"}}}"#,
    )
    .await;
    let console = Console::new(Arc::clone(&inbox));
    let q = "q=data.object.customer+%3D+cus_1";
    for (path, query) in [
        ("/dead", q.to_owned()),
        ("/deliveries", format!("state=dead&{q}")),
    ] {
        let page = get(&console, admin(), path, Some(&query)).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        let html = text(&page);
        assert!(
            html.contains("in_1") && html.contains("in_3"),
            "{path}: {html}"
        );
        assert!(!html.contains("in_2"), "{path}");
        assert!(
            html.contains("value=\"data.object.customer = cus_1\""),
            "{path}: the box keeps it"
        );
    }
    let bad = get(&console, admin(), "/dead", Some("q=data..x+%3D+1")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(text(&bad).contains("not a path"), "{}", text(&bad));
    let bad = get(&console, admin(), "/deliveries", Some("q=nothing")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(text(&bad).contains("no operator"), "{}", text(&bad));
    // The bulk confirmation counts the search's matches and carries it.
    let confirm = get(
        &console,
        admin(),
        "/dead/bulk",
        Some(&format!("action=discard&{q}")),
    )
    .await;
    let html = text(&confirm);
    assert!(html.contains("Discard 2 dead letters"), "{html}");
    assert!(
        html.contains("name=\"q\" value=\"data.object.customer = cus_1\""),
        "{html}"
    );
    let csrf = token(html);
    let bulk = form(&[
        ("csrf", &csrf),
        ("action", "discard"),
        ("q", "data.object.customer = cus_1"),
    ]);
    let answer = post(&console, admin(), "/bulk", &bulk, &[("origin", ORIGIN)]).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", text(&answer));
    let left: Vec<String> = inbox
        .dead_letters(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|d| d.meta.key)
        .collect();
    assert_eq!(left, ["in_2"]);
    let log = inbox.actions(None, 1).await.unwrap().actions;
    assert_eq!(log[0].target, "filter: where data.object.customer = cus_1");
    assert_eq!(log[0].count, 2);
}

/// Issue 34, item 5: the overview's Gates panel shows each selector paused
/// or limited (permits held / concurrency, rate), and an admin pauses and
/// resumes one selector's events with a token-checked `POST` carrying it
/// in `only`, logged like the whole inbox's pause; a malformed selector is
/// a `400` saying why, and a reader sees the gates but no button.
#[tokio::test]
async fn gates_pause_and_resume_one_selector() {
    use std::time::Duration;
    use webhooks_core::inbox::ActionKind;
    use webhooks_core::inbox::gates::{Limit, Selector};

    let inbox = inbox().await;
    let console = Console::new(Arc::clone(&inbox));
    let page = get(&console, admin(), "/", None).await;
    let html = text(&page);
    assert!(html.contains("id=\"gates\""), "{html}");
    assert!(
        html.contains("No event type is paused or limited"),
        "{html}"
    );
    assert!(html.contains("placeholder=\"stripe:invoice.*\""), "{html}");
    let csrf = token(html);
    let origin = [("origin", ORIGIN)];
    // A worker's limit, one permit held.
    let orders: Selector = "shopify:orders/*".parse().unwrap();
    let limit = Limit::concurrency(2).and_per_second(10);
    inbox
        .acquire_permit(&orders, limit, "evt_x", Duration::from_secs(30))
        .await
        .unwrap();

    // Forged: no token, another origin, a reader.
    let only = form(&[("csrf", &csrf), ("only", "Stripe:invoice.*")]);
    let no_token = form(&[("only", "stripe:invoice.*")]);
    for (access, body, headers) in [
        (admin(), &no_token, &origin[..]),
        (admin(), &only, &[("origin", "http://evil.example")][..]),
        (reader(), &only, &origin[..]),
    ] {
        let answer = post(&console, access, "/pause", body, headers).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{}", text(&answer));
    }
    assert_eq!(inbox.gates().await.unwrap().len(), 1, "only the limit");

    let answer = post(&console, admin(), "/pause", &only, &origin).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", text(&answer));
    let location = answer.headers["location"].to_str().unwrap();
    assert_eq!(
        location,
        "/ops/webhooks/?done=pause&n=1&only=stripe%3Ainvoice.*"
    );
    assert!(!inbox.paused().await.unwrap(), "the inbox as a whole runs");
    let again = post(&console, admin(), "/pause", &only, &origin).await;
    assert_eq!(
        again.headers["location"],
        "/ops/webhooks/?done=pause&n=0&only=stripe%3Ainvoice.*"
    );
    let gates = inbox.gates().await.unwrap();
    let state: Vec<(String, bool, u64)> = gates
        .iter()
        .map(|g| (g.selector.to_string(), g.paused, g.running))
        .collect();
    assert_eq!(
        state,
        [
            ("shopify:orders/*".to_owned(), false, 1),
            ("stripe:invoice.*".to_owned(), true, 0),
        ]
    );

    let query = location.split_once('?').unwrap().1;
    let page = get(&console, admin(), "/", Some(query)).await;
    let html = text(&page);
    assert!(
        html.contains("Events matching stripe:invoice.* paused"),
        "the notice: {html}"
    );
    assert!(
        html.contains("data-selector=\"stripe:invoice.*\" data-paused=\"true\""),
        "{html}"
    );
    assert!(
        html.contains("data-selector=\"shopify:orders/*\" data-paused=\"false\""),
        "{html}"
    );
    assert!(
        html.contains(">1 / 2<") && html.contains(">10/s<"),
        "{html}"
    );
    // One button per row, the selector in a field: Resume, Pause.
    assert!(
        html.contains("action=\"/ops/webhooks/resume\"")
            && html.contains("name=\"only\" value=\"stripe:invoice.*\""),
        "{html}"
    );
    assert!(
        html.contains("name=\"only\" value=\"shopify:orders/*\""),
        "{html}"
    );
    assert!(html.contains("id=\"pause\""), "the whole inbox still runs");
    // A crafted link's `only` is not echoed unless it is a selector.
    let page = get(
        &console,
        admin(),
        "/",
        Some("done=pause&n=1&only=you%20were%20hacked"),
    )
    .await;
    assert!(!text(&page).contains("hacked"));

    // A reader sees the gates, no button, no form.
    let page = get(&console, reader(), "/", None).await;
    let html = text(&page);
    assert!(
        html.contains("data-selector=\"stripe:invoice.*\""),
        "{html}"
    );
    assert!(html.contains(">Paused<"), "{html}");
    assert!(!html.contains("name=\"only\"") && !html.contains("method=\"post\""));
    let refused = post(&console, reader(), "/resume", &only, &origin).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);

    // Malformed selectors: 400 with the reason; nothing changes.
    for (bad, reason) in [
        ("", "needs a scheme pattern"),
        ("stripe:invoice paid", "printable ASCII without spaces"),
        ("*:*", "pause the whole inbox instead"),
        ("<b>x</b> y", "printable ASCII"),
    ] {
        let body = form(&[("csrf", &csrf), ("only", bad)]);
        let answer = post(&console, admin(), "/pause", &body, &origin).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{bad}");
        let html = text(&answer);
        assert!(html.contains(reason), "{bad}: {html}");
        assert!(!html.contains("<b>x"), "{html}");
    }
    assert!(
        !inbox.paused().await.unwrap(),
        "an empty `only` is not the whole inbox"
    );
    assert_eq!(inbox.gates().await.unwrap().len(), 2);

    let resume = form(&[("csrf", &csrf), ("only", "stripe:invoice.*")]);
    let answer = post(&console, admin(), "/resume", &resume, &origin).await;
    assert_eq!(
        answer.headers["location"],
        "/ops/webhooks/?done=resume&n=1&only=stripe%3Ainvoice.*"
    );
    let gates = inbox.gates().await.unwrap();
    assert_eq!(gates.len(), 1, "a resumed selector without a limit is gone");
    let page = get(
        &console,
        admin(),
        "/",
        Some("done=resume&n=1&only=stripe%3Ainvoice.*"),
    )
    .await;
    assert!(text(&page).contains("Events matching stripe:invoice.* resumed."));

    // The action log: as the whole inbox's pause, the selector the target.
    let entries = inbox.actions(None, 10).await.unwrap().actions;
    let logged: Vec<(ActionKind, &str, u64)> = entries
        .iter()
        .map(|a| (a.kind, a.target.as_str(), a.count))
        .collect();
    assert_eq!(
        logged,
        [
            (ActionKind::Resume, "stripe:invoice.*", 1),
            (ActionKind::Pause, "stripe:invoice.*", 0),
            (ActionKind::Pause, "stripe:invoice.*", 1),
        ]
    );
    assert!(
        entries
            .iter()
            .all(|a| a.who == "alice" && a.via == "console")
    );
    let page = get(&console, reader(), "/actions", None).await;
    assert!(text(&page).contains("<code>stripe:invoice.*</code>"));
}

/// An inbox that keeps no gates (a broker-backed one) shows no Gates
/// panel, and a selector's pause is a `400` saying so.
#[tokio::test]
async fn an_inbox_without_gates_shows_no_panel() {
    let inbox: Arc<dyn webhooks_core::inbox::Inbox> = Arc::new(NoGates(inbox().await));
    let console = Console::new(Arc::clone(&inbox));
    let page = get(&console, admin(), "/", None).await;
    let html = text(&page);
    assert_eq!(page.status, StatusCode::OK);
    assert!(!html.contains("id=\"gates\"") && !html.contains("name=\"only\""));
    assert!(
        html.contains("id=\"pause\""),
        "the whole inbox still pauses"
    );
    let body = form(&[("csrf", &token(html)), ("only", "stripe:invoice.*")]);
    let answer = post(&console, admin(), "/pause", &body, &[("origin", ORIGIN)]).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(text(&answer).contains("does not pause by event type"));
    assert!(!inbox.paused().await.unwrap());
}

/// The SQLite inbox with its gates hidden, as a broker-backed inbox has none.
struct NoGates(Arc<dyn webhooks_core::inbox::Inbox>);

mod no_gates {
    use std::time::Duration;

    use webhooks_core::inbox::*;

    #[async_trait::async_trait]
    impl Inbox for super::NoGates {
        async fn accept(&self, event: &NewEvent) -> Result<Accepted, InboxError> {
            self.0.accept(event).await
        }
        async fn lease(
            &self,
            token: ClaimToken,
            batch: u32,
            lease: Duration,
            max_attempts: u32,
        ) -> Result<Vec<LeasedEvent>, InboxError> {
            self.0.lease(token, batch, lease, max_attempts).await
        }
        async fn extend(
            &self,
            key: &str,
            token: ClaimToken,
            lease: Duration,
        ) -> Result<Transition, InboxError> {
            self.0.extend(key, token, lease).await
        }
        async fn complete(&self, key: &str, token: ClaimToken) -> Result<Transition, InboxError> {
            self.0.complete(key, token).await
        }
        async fn retry(
            &self,
            key: &str,
            token: ClaimToken,
            delay: Duration,
            error: &str,
        ) -> Result<Transition, InboxError> {
            self.0.retry(key, token, delay, error).await
        }
        async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, InboxError> {
            self.0.release(key, token).await
        }
        async fn dead_letter(
            &self,
            key: &str,
            token: ClaimToken,
            error: &str,
        ) -> Result<Transition, InboxError> {
            self.0.dead_letter(key, token, error).await
        }
        async fn dead_letters(
            &self,
            filter: &DeadLetterFilter,
        ) -> Result<DeadLetterPage, InboxError> {
            self.0.dead_letters(filter).await
        }
        async fn dead_letter_get(&self, key: &str) -> Result<Option<DeadLetter>, InboxError> {
            self.0.dead_letter_get(key).await
        }
        async fn replay(&self, key: &str) -> Result<Transition, InboxError> {
            self.0.replay(key).await
        }
        async fn discard(&self, key: &str) -> Result<Transition, InboxError> {
            self.0.discard(key).await
        }
        async fn purge_completed(&self, older_than: Duration) -> Result<u64, InboxError> {
            self.0.purge_completed(older_than).await
        }
        async fn stats(&self) -> Result<InboxStats, InboxError> {
            self.0.stats().await
        }
        async fn set_paused(&self, paused: bool) -> Result<bool, InboxError> {
            self.0.set_paused(paused).await
        }
        async fn paused(&self) -> Result<bool, InboxError> {
            self.0.paused().await
        }
        async fn deliveries(&self, filter: &DeliveryFilter) -> Result<DeliveryPage, InboxError> {
            self.0.deliveries(filter).await
        }
        async fn delivery_get(&self, key: &str) -> Result<Option<Delivery>, InboxError> {
            self.0.delivery_get(key).await
        }
        async fn activity(&self, minutes: u32) -> Result<Activity, InboxError> {
            self.0.activity(minutes).await
        }
    }
}
