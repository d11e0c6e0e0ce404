//! The console in a real browser: headless Chromium driven over WebDriver
//! (Debian's `chromium` and `chromium-driver`, installed by `.ci/run`), on
//! axum and on actix-web, over an SQLite inbox whose worker's handler fails.
//!
//! Without `/usr/bin/chromedriver` (or `CHROMEDRIVER`) the test skips with a
//! message, except under `CI=true`, where it fails. With
//! `WEBHOOKS_CONSOLE_SCREENSHOTS=<dir>` it saves the in-flight tab there
//! (the other `docs/console/*.png`, with realistic deliveries, come from
//! `console_operations.rs`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

mod browser;

use browser::*;
use fantoccini::{Client, Locator};
use serde_json::{Value, json};
use webhooks_core::inbox::{Inbox, Job, NewEvent, Shutdown, SqliteInbox, Worker};

const XSS_ID: &str = "<script>window.__xss='id'</script>";
const XSS_TYPE: &str = "\"><img src=x onerror=\"window.__xss='type'\">";

/// An SQLite inbox, a worker whose handler fails while `failing` is set
/// (one attempt: failures are dead letters at once), and three events.
struct Fixture {
    inbox: Arc<dyn Inbox>,
    failing: Arc<AtomicBool>,
    /// While set, the handler holds events whose body has `"hold": true`
    /// (they stay in flight).
    hold: Arc<AtomicBool>,
    shutdown: Shutdown,
    cleanup: Cleanup,
}

/// The inbox of `backend` (`sqlite`, or `postgres` with the feature and a
/// server: `WEBHOOKS_POSTGRES_URL`), in a table of its own.
async fn open(backend: &str, name: &str) -> Option<(Arc<dyn Inbox>, Cleanup)> {
    let table = format!("console_browser_{name}_{}", std::process::id());
    match backend {
        "sqlite" => {
            let path = std::env::temp_dir().join(format!("{table}.db"));
            let _ = std::fs::remove_file(&path);
            let inbox = SqliteInbox::connect(&format!("sqlite://{}?mode=rwc", path.display()))
                .await
                .unwrap();
            inbox.migrate().await.unwrap();
            Some((Arc::new(inbox), Cleanup::File(path)))
        }
        #[cfg(feature = "postgres")]
        "postgres" => {
            let url = std::env::var("WEBHOOKS_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
            let inbox = match webhooks_core::inbox::PostgresInbox::builder(&url)
                .table(&table)
                .connect()
                .await
            {
                Ok(inbox) => inbox,
                Err(error) => {
                    assert!(!ci(), "CI=true but PostgreSQL is unreachable: {error}");
                    eprintln!("skipping the console browser test on PostgreSQL: {error}");
                    return None;
                }
            };
            inbox.migrate().await.unwrap();
            Some((Arc::new(inbox.clone()), Cleanup::Postgres(inbox)))
        }
        _ => None,
    }
}

enum Cleanup {
    File(std::path::PathBuf),
    #[cfg(feature = "postgres")]
    Postgres(webhooks_core::inbox::PostgresInbox),
}

impl Cleanup {
    async fn run(self) {
        match self {
            Self::File(path) => {
                let _ = std::fs::remove_file(path);
            }
            #[cfg(feature = "postgres")]
            Self::Postgres(inbox) => {
                for table in [
                    inbox.table().to_owned(),
                    format!("{}_control", inbox.table()),
                ] {
                    let drop = format!("DROP TABLE IF EXISTS \"{table}\"");
                    let _ = webhooks_core::inbox::sqlx::query(&drop)
                        .execute(inbox.pool())
                        .await;
                }
            }
        }
    }
}

async fn fixture(backend: &str, name: &str) -> Option<Fixture> {
    let (inbox, cleanup) = open(backend, name).await?;
    let failing = Arc::new(AtomicBool::new(true));
    let shutdown = Shutdown::new();
    let flag = Arc::clone(&failing);
    let hold = Arc::new(AtomicBool::new(false));
    let held = Arc::clone(&hold);
    let worker = Worker::<Value>::builder(Arc::clone(&inbox))
        .max_attempts(1)
        .poll_interval(Duration::from_millis(50))
        .handler(move |job: Job<Value>| {
            let fail = flag.load(Ordering::SeqCst);
            let held = (job.event["hold"] == json!(true)).then(|| Arc::clone(&held));
            async move {
                while held.as_ref().is_some_and(|h| h.load(Ordering::SeqCst)) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                if fail {
                    Err("downstream answered 500".to_owned())
                } else {
                    Ok(())
                }
            }
        });
    tokio::spawn(worker.run(shutdown.signal()));
    let events = [
        (
            "webhooks:test:msg_paid",
            "msg_paid",
            "order.paid",
            r#"{"id":"msg_paid","amount":4200,"email":"ada@example.com"}"#.to_owned(),
        ),
        (
            "webhooks:test:msg_refund",
            "msg_refund",
            "order.refunded",
            r#"{"id":"msg_refund","amount":990}"#.to_owned(),
        ),
        (
            XSS_ID,
            XSS_ID,
            XSS_TYPE,
            json!({"note": "<script>window.__xss='body'</script>", "x": XSS_TYPE}).to_string(),
        ),
    ];
    for (key, delivery, kind, body) in events {
        let mut event = NewEvent::new(key, "test", body).with_event_type(kind);
        event.delivery_id = Some(delivery.to_owned());
        event.matched_key = "secret#0".into();
        event.signed_at = Some(1_796_140_000);
        event.headers = vec![
            ("content-type".into(), "application/json".into()),
            ("webhook-id".into(), delivery.into()),
            (
                "webhook-signature".into(),
                "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=".into(),
            ),
        ];
        inbox.accept(&event).await.unwrap();
    }
    wait_until("three dead letters", || async {
        inbox.stats().await.unwrap().dead == 3
    })
    .await;
    Some(Fixture {
        inbox,
        failing,
        hold,
        shutdown,
        cleanup,
    })
}

/// A page on another origin whose form posts to the console, with a valid
/// token copied in: only the Origin / Sec-Fetch-Site checks can refuse it.
async fn start_evil(target: String) -> SocketAddr {
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            let target = target.clone();
            async move { axum::response::Html(target) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

async fn journey(
    framework: &str,
    shots: bool,
    client: &Client,
    addr: SocketAddr,
    fixture: &Fixture,
) {
    let base = format!("http://{addr}{MOUNT}");
    let shots = std::env::var("WEBHOOKS_CONSOLE_SCREENSHOTS")
        .ok()
        .filter(|_| shots);

    // The overview counts the dead letters.
    client.goto(&format!("{base}/")).await.unwrap();
    assert_eq!(text(client, "div.card.bad div.n").await, "3", "{framework}");
    assert!(client.find(Locator::Css("svg.chart")).await.is_ok());

    // They appear in the list; filter by event type.
    client
        .find(Locator::LinkText("Dead letters"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(rows(client, 3).await, 3, "{framework}");
    let filter = client
        .find(Locator::Css("input[name=event_type]"))
        .await
        .unwrap();
    filter.send_keys("order.paid").await.unwrap();
    client
        .find(Locator::XPath("//button[text()='Filter']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(rows(client, 1).await, 1, "{framework}: filtered");
    assert_eq!(text(client, "tr.dead-letter td.type").await, "order.paid");

    // Open it: metadata, body, the signature redacted.
    client
        .find(Locator::Css("a.open"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let body = text(client, "pre#body").await;
    assert!(
        body.contains("\"amount\": 4200"),
        "{framework}: pretty-printed body: {body}"
    );
    let page = client.source().await.unwrap();
    assert!(
        !page.contains("K5oZfzN95Z9UVu1"),
        "{framework}: the signature is redacted"
    );

    // Replay it from the page: it completes and leaves the dead list.
    fixture.failing.store(false, Ordering::SeqCst);
    client
        .find(Locator::Id("replay"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(
        page_with(client, "1 replayed.")
            .await
            .contains("1 replayed."),
        "{framework}"
    );
    let inbox = &fixture.inbox;
    wait_until("the replayed event completes", || async {
        inbox.stats().await.unwrap().completed == 1
    })
    .await;
    client
        .goto(&format!("{base}/dead?event_type=order.paid"))
        .await
        .unwrap();
    assert_eq!(
        rows(client, 0).await,
        0,
        "{framework}: gone from the dead list"
    );

    // Replay everything matching a filter: the count first, then confirm.
    client
        .goto(&format!("{base}/dead?event_type=order.refunded"))
        .await
        .unwrap();
    client
        .find(Locator::XPath(
            "//a[contains(text(), 'Replay all matching')]",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let confirm = page_with(client, "1 dead letters match").await;
    assert!(
        confirm.contains("1 dead letters match"),
        "{framework}: {confirm}"
    );
    client
        .find(Locator::Id("confirm"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_until("the bulk-replayed event completes", || async {
        inbox.stats().await.unwrap().completed == 2
    })
    .await;

    // Pause from the overview: the worker stops starting events (a new one
    // stays pending while it polls every 50 ms); resume: it completes.
    client.goto(&format!("{base}/")).await.unwrap();
    assert_eq!(
        text(client, "#processing .badge").await,
        "Running",
        "{framework}"
    );
    client
        .find(Locator::Id("pause"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let paused = page_with(client, "Processing paused").await;
    assert!(
        paused.contains("Processing paused"),
        "{framework}: {paused}"
    );
    assert_eq!(
        text(client, "#processing .badge").await,
        "Paused",
        "{framework}"
    );
    assert!(inbox.paused().await.unwrap(), "{framework}");
    let event = NewEvent::new("webhooks:test:msg_while_paused", "test", "{}");
    inbox.accept(&event).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let stats = inbox.stats().await.unwrap();
    assert_eq!(
        (stats.completed, stats.pending, stats.in_flight),
        (2, 1, 0),
        "{framework}: nothing processed while paused"
    );
    // Reloaded, the overview shows the waiting event and still the state.
    client.goto(&format!("{base}/")).await.unwrap();
    assert_eq!(
        text(client, "#processing .badge").await,
        "Paused",
        "{framework}"
    );
    assert_eq!(
        text(client, "div.card div.n").await,
        "1",
        "{framework}: depth"
    );
    client
        .find(Locator::Id("resume"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let resumed = page_with(client, "Processing resumed.").await;
    assert!(
        resumed.contains("Processing resumed."),
        "{framework}: {resumed}"
    );
    assert_eq!(
        text(client, "#processing .badge").await,
        "Running",
        "{framework}"
    );
    wait_until("the event accepted while paused completes", || async {
        inbox.stats().await.unwrap().completed == 3
    })
    .await;

    // The overview refreshes itself (the console's default 5 s): a delivery
    // completed after the page loaded shows in the activity chart without a
    // reload (a marker set on the page survives).
    let attr = |name: &'static str| async move {
        client
            .execute(
                "return document.getElementById('activity').getAttribute(arguments[0]);",
                vec![json!(name)],
            )
            .await
            .unwrap()
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    client
        .execute("window.__loaded = 'once';", vec![])
        .await
        .unwrap();
    let event = NewEvent::new("webhooks:test:msg_after_load", "test", "{}");
    inbox.accept(&event).await.unwrap();
    wait_until("the event accepted after load completes", || async {
        inbox.stats().await.unwrap().completed == 4
    })
    .await;
    let (accepted, completed, failed) = inbox.activity(60).await.unwrap().totals();
    assert!(
        completed >= 4 && failed >= 1,
        "{framework}: {completed} {failed}"
    );
    let expected = completed.to_string();
    wait_until("the chart refreshes without a reload", || async {
        attr("data-completed").await == expected
    })
    .await;
    assert_eq!(
        attr("data-accepted").await,
        accepted.to_string(),
        "{framework}"
    );
    assert_eq!(attr("data-failed").await, failed.to_string(), "{framework}");
    assert_eq!(
        client
            .execute("return window.__loaded;", vec![])
            .await
            .unwrap(),
        json!("once"),
        "{framework}: refreshed in place, not reloaded"
    );
    let desc = client
        .execute(
            "return document.getElementById('activity-desc').textContent;",
            vec![],
        )
        .await
        .unwrap();
    let desc = desc.as_str().unwrap_or_default();
    assert!(
        desc.contains(&format!("{completed} completed")),
        "{framework}: {desc}"
    );
    if let Some(dir) = &shots {
        std::fs::write(
            format!("{dir}/overview-activity.png"),
            client.screenshot().await.unwrap(),
        )
        .unwrap();
    }

    // Issue 35, item 5: a refresh is skipped while the previous one is
    // still in flight. `fetch` is replaced by one that never answers and
    // counts its calls; showing the tab again asks for a refresh each time.
    let show_tab = "document.dispatchEvent(new Event('visibilitychange'));";
    client
        .execute(
            "window.__refreshes = 0;
             window.__realFetch = window.fetch;
             window.fetch = function () {
               window.__refreshes += 1;
               return new Promise(function (resolve) { window.__answer = resolve; });
             };",
            vec![],
        )
        .await
        .unwrap();
    for _ in 0..3 {
        client.execute(show_tab, vec![]).await.unwrap();
    }
    let refreshes = || async {
        client
            .execute("return window.__refreshes;", vec![])
            .await
            .unwrap()
    };
    assert_eq!(
        refreshes().await,
        json!(1),
        "{framework}: one refresh in flight at a time"
    );
    // Once it has answered (with an error page: nothing replaced), the next
    // refresh runs.
    client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             window.__answer(new Response('', {status: 500}));
             setTimeout(done, 0);",
            vec![],
        )
        .await
        .unwrap();
    client.execute(show_tab, vec![]).await.unwrap();
    assert_eq!(refreshes().await, json!(2), "{framework}: then the next");
    client
        .execute("window.fetch = window.__realFetch;", vec![])
        .await
        .unwrap();

    // Issue 35, item 4: the purge form has a "force" box; a purge younger
    // than the floor (the inbox's retention) without it is refused and
    // deletes nothing.
    client.goto(&format!("{base}/")).await.unwrap();
    assert!(
        client
            .find(Locator::Css(
                "form[action$='/purge'] input[type=checkbox][name=force]"
            ))
            .await
            .is_ok(),
        "{framework}: the force box"
    );
    if let Some(dir) = &shots {
        let form = client
            .find(Locator::Css("form[action$='/purge']"))
            .await
            .unwrap();
        std::fs::write(
            format!("{dir}/purge-form.png"),
            form.screenshot().await.unwrap(),
        )
        .unwrap();
    }
    let completed_before = inbox.stats().await.unwrap().completed;
    let older_than = client
        .find(Locator::Css(
            "form[action$='/purge'] input[name=older_than]",
        ))
        .await
        .unwrap();
    older_than.clear().await.unwrap();
    older_than.send_keys("0").await.unwrap();
    client
        .execute("window.confirm = function () { return true; };", vec![])
        .await
        .unwrap();
    client
        .find(Locator::Css("form[action$='/purge'] button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let refused = page_with(client, "Bad request").await;
    assert!(
        refused.contains("Bad request") && refused.contains("force"),
        "{framework}: {refused}"
    );
    assert_eq!(
        inbox.stats().await.unwrap().completed,
        completed_before,
        "{framework}: nothing purged"
    );

    // The <script> dead letter renders inert: its id and type are text.
    client.goto(&format!("{base}/dead")).await.unwrap();
    assert_eq!(rows(client, 1).await, 1, "{framework}");
    assert_eq!(text(client, "tr.dead-letter td.type").await, XSS_TYPE);
    client
        .find(Locator::Css("a.open"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(text(client, "code.key").await, XSS_ID);
    assert!(
        text(client, "pre#body")
            .await
            .contains("<script>window.__xss='body'</script>")
    );
    let ran = client
        .execute("return window.__xss === undefined;", vec![])
        .await
        .unwrap();
    assert_eq!(
        ran,
        json!(true),
        "{framework}: no sender-controlled script ran"
    );

    // A form on another origin, even with a valid token, is refused.
    client.goto(&format!("{base}/dead")).await.unwrap();
    let source = client.source().await.unwrap();
    let at = source.find("name=\"csrf\" value=\"").unwrap() + 19;
    let token = &source[at..at + source[at..].find('"').unwrap()];
    let evil = start_evil(format!(
        "<form method=post action='{base}/discard'><input name=csrf value='{token}'>\
         <input name=key value='{}'><button id=go>win a prize</button></form>",
        XSS_ID.replace('\'', "&#39;").replace('<', "&lt;")
    ))
    .await;
    client.goto(&format!("http://{evil}/")).await.unwrap();
    client
        .find(Locator::Id("go"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let refused = page_with(client, "refused").await;
    assert!(refused.contains("refused"), "{framework}: {refused}");
    assert!(
        inbox.dead_letter_get(XSS_ID).await.unwrap().is_some(),
        "{framework}: not discarded"
    );

    // A read-only user sees no buttons, and a forged POST answers 403.
    client.goto(&format!("{base}/dead")).await.unwrap();
    client
        .execute("document.cookie = 'role=reader; path=/';", vec![])
        .await
        .unwrap();
    client.goto(&format!("{base}/dead")).await.unwrap();
    assert_eq!(text(client, "span.who").await, "reader · read-only");
    assert!(
        client
            .find_all(Locator::Css(
                "button[type=submit][formaction], form[method=post], input[name=key]"
            ))
            .await
            .unwrap()
            .is_empty()
    );
    client
        .find(Locator::Css("a.open"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(
        client
            .find_all(Locator::Css("#replay, #discard"))
            .await
            .unwrap()
            .is_empty()
    );
    let status = client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch(arguments[0] + '/replay', {method: 'POST', headers: {'content-type': 'application/x-www-form-urlencoded'},
                   body: 'csrf=' + encodeURIComponent(arguments[1]) + '&key=' + encodeURIComponent(arguments[2])})
               .then(r => done(r.status), e => done(String(e)));",
            vec![json!(base), json!(token), json!(XSS_ID)],
        )
        .await
        .unwrap();
    assert_eq!(status, json!(403), "{framework}");
    assert!(
        inbox.dead_letter_get(XSS_ID).await.unwrap().is_some(),
        "{framework}: not replayed"
    );
    // The overview shows a reader the state, without the button; a forged
    // pause answers 403.
    client.goto(&format!("{base}/")).await.unwrap();
    assert_eq!(
        text(client, "#processing .badge").await,
        "Running",
        "{framework}"
    );
    assert!(
        client
            .find_all(Locator::Css("#pause, #resume, form[method=post]"))
            .await
            .unwrap()
            .is_empty(),
        "{framework}: no pause button for a reader"
    );
    let status = client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch(arguments[0] + '/pause', {method: 'POST', headers: {'content-type': 'application/x-www-form-urlencoded'},
                   body: 'csrf=' + encodeURIComponent(arguments[1])})
               .then(r => done(r.status), e => done(String(e)));",
            vec![json!(base), json!(token)],
        )
        .await
        .unwrap();
    assert_eq!(status, json!(403), "{framework}");
    assert!(!inbox.paused().await.unwrap(), "{framework}: not paused");
    client
        .execute("document.cookie = 'role=; path=/; max-age=0';", vec![])
        .await
        .unwrap();
    // Deliveries by state (issue 22): one event held by the handler and one
    // leased here are in flight; the operator opens Deliveries, switches to
    // In flight, then to Completed, and sees them newest first.
    let completed = inbox.stats().await.unwrap().completed;
    fixture.hold.store(true, Ordering::SeqCst);
    let slow = ["webhooks:test:msg_slow_1", "webhooks:test:msg_slow_2"];
    let accept_slow = |key: &'static str| async move {
        let mut event =
            NewEvent::new(key, "test", r#"{"hold":true}"#).with_event_type("order.slow");
        event.delivery_id = Some(key.rsplit(':').next().unwrap().to_owned());
        inbox.accept(&event).await.unwrap();
    };
    accept_slow(slow[0]).await;
    wait_until("the worker holds the first slow event", || async {
        inbox.stats().await.unwrap().in_flight == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    accept_slow(slow[1]).await;
    // The worker (one at a time) is busy: this lease takes the second.
    let token = webhooks_core::inbox::ClaimToken::random();
    let leased = inbox
        .lease(token, 1, Duration::from_secs(60), 5)
        .await
        .unwrap();
    assert_eq!(leased.len(), 1, "{framework}");
    assert_eq!(leased[0].meta.key, slow[1], "{framework}");
    client.goto(&format!("{base}/")).await.unwrap();
    client
        .find(Locator::LinkText("Deliveries"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    client
        .find(Locator::LinkText("In flight"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let newest_first = vec![slow[1].to_owned(), slow[0].to_owned()];
    assert_eq!(
        delivery_keys(client).await,
        newest_first,
        "{framework}: in flight"
    );
    assert_eq!(
        text(client, "#states a.here").await,
        "In flight",
        "{framework}"
    );
    if let Some(dir) = &shots {
        std::fs::write(
            format!("{dir}/deliveries-in-flight.png"),
            client.screenshot().await.unwrap(),
        )
        .unwrap();
    }
    assert_eq!(
        inbox.complete(slow[1], token).await.unwrap(),
        webhooks_core::inbox::Transition::Applied
    );
    fixture.hold.store(false, Ordering::SeqCst);
    wait_until("both slow events complete", || async {
        inbox.stats().await.unwrap().completed == completed + 2
    })
    .await;
    client
        .find(Locator::LinkText("Completed"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let keys = delivery_keys(client).await;
    assert_eq!(
        keys[..2],
        newest_first[..],
        "{framework}: completed, newest first"
    );
    assert!(
        keys.contains(&"webhooks:test:msg_paid".to_owned()),
        "{framework}: the replayed one too: {keys:?}"
    );
    assert_eq!(
        keys.len(),
        usize::try_from(completed).unwrap() + 2,
        "{framework}"
    );
    // One of them in detail: its state, its body (admin).
    client
        .find(Locator::Css("tr.delivery a.open"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(text(client, "#state").await, "Completed", "{framework}");
}

/// The keys of the deliveries page's rows, in page order.
async fn delivery_keys(client: &Client) -> Vec<String> {
    let mut keys = Vec::new();
    for row in client.find_all(Locator::Css("tr.delivery")).await.unwrap() {
        keys.push(row.attr("data-key").await.unwrap().unwrap_or_default());
    }
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_in_a_browser_on_axum_and_actix() {
    let Some(path) = chromedriver() else { return };
    let driver = start_driver(&path).await;
    let client = browser(&driver).await;
    for backend in ["sqlite", "postgres"] {
        if backend == "postgres" && !cfg!(feature = "postgres") {
            eprintln!("the console browser test runs on PostgreSQL with the `postgres` feature");
            continue;
        }
        for framework in ["axum", "actix"] {
            let Some(fixture) = fixture(backend, &format!("{backend}_{framework}")).await else {
                continue;
            };
            let addr = match framework {
                "axum" => start_axum(Arc::clone(&fixture.inbox)).await,
                _ => start_actix(Arc::clone(&fixture.inbox)),
            };
            let shots = backend == "sqlite" && framework == "axum";
            journey(
                &format!("{framework} on {backend}"),
                shots,
                &client,
                addr,
                &fixture,
            )
            .await;
            fixture.shutdown.trigger();
            fixture.cleanup.run().await;
        }
    }
    client.close().await.unwrap();
}
