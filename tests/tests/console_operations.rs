//! The console's operations pages in a real browser (issue 34), on axum and
//! on actix-web, over an SQLite inbox holding realistic deliveries (Stripe
//! invoices, GitHub pushes and pull requests, Shopify orders) that a worker
//! processed with retries: the delivery page's attempt timeline, search by
//! a payload value and by error text, replay of every match after its
//! count, the action log, and one event type paused from the overview's
//! Gates panel beside a worker's limit.
//!
//! Without `/usr/bin/chromedriver` (or `CHROMEDRIVER`) the test skips with a
//! message, except under `CI=true`, where it fails. With
//! `WEBHOOKS_CONSOLE_SCREENSHOTS=<dir>` it saves the pages there (how
//! `docs/console/*.png` are made).

mod browser;

use std::sync::Arc;
use std::time::Duration;

use browser::*;
use fantoccini::{Client, Locator};
use serde_json::{Value, json};
use webhooks_core::inbox::gates::{Limit, Selector};
use webhooks_core::inbox::{
    Action, ActionKind, Inbox, Job, NewEvent, Shutdown, SqliteInbox, Worker, actions,
};

/// One delivery as a provider sends it: scheme, key, delivery id, event
/// type, signature header, body.
struct Sent {
    scheme: &'static str,
    key: &'static str,
    delivery: &'static str,
    kind: &'static str,
    signature: (&'static str, &'static str),
    body: Value,
}

fn stripe(id: &'static str, kind: &'static str, customer: &str, amount: u64) -> Sent {
    Sent {
        scheme: "stripe",
        key: id,
        delivery: id,
        kind,
        signature: (
            "stripe-signature",
            "t=1796140000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd",
        ),
        body: json!({
            "id": id, "object": "event", "type": kind, "livemode": false,
            "data": {"object": {"id": format!("in_{}", &id[4..]), "object": "invoice",
                "customer": customer, "amount_due": amount, "currency": "eur",
                "status": if kind == "invoice.paid" { "paid" } else { "open" }}},
        }),
    }
}

fn shopify(key: &'static str, kind: &'static str, order: u64, total: &str) -> Sent {
    Sent {
        scheme: "shopify",
        key,
        delivery: key,
        kind,
        signature: (
            "x-shopify-hmac-sha256",
            "XWmrwMey6OsLMeiZKwP4FppHH3cmAiiJJAweH5Jo4bM=",
        ),
        body: json!({"id": order, "name": format!("#{order}"), "total_price": total,
            "currency": "EUR", "email": "sam@example.com",
            "line_items": [{"sku": "TSHIRT-L-BLK", "quantity": 2}]}),
    }
}

fn deliveries() -> Vec<Sent> {
    vec![
        stripe(
            "evt_1QbLq2CZ6qsJgndJ",
            "invoice.payment_failed",
            "cus_Q2blocked",
            4_900,
        ),
        stripe(
            "evt_1QbLr8CZ6qsJgndJ",
            "invoice.paid",
            "cus_Q2blocked",
            4_900,
        ),
        stripe(
            "evt_1QbLs1CZ6qsJgndJ",
            "invoice.paid",
            "cus_NffrFeUfNV2Hib",
            12_000,
        ),
        stripe(
            "evt_1QbLt7CZ6qsJgndJ",
            "invoice.paid",
            "cus_Ol4mQ8zZbGq1",
            2_500,
        ),
        Sent {
            scheme: "github",
            key: "6f3c0a2e-1b7d-11f0-8a5e-3c1f2d9a7b10",
            delivery: "6f3c0a2e-1b7d-11f0-8a5e-3c1f2d9a7b10",
            kind: "push",
            signature: (
                "x-hub-signature-256",
                "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
            ),
            body: json!({"ref": "refs/heads/main", "repository": {"full_name": "acme/api"},
                "pusher": {"name": "octocat"}, "head_commit": {"id": "7fd1a60b01f91b314f59955a4e4d4e80d8edf11d"}}),
        },
        Sent {
            scheme: "github",
            key: "8a91d4f0-1b7d-11f0-9c2b-2a6e5b1c0d33",
            delivery: "8a91d4f0-1b7d-11f0-9c2b-2a6e5b1c0d33",
            kind: "pull_request",
            signature: (
                "x-hub-signature-256",
                "sha256=0d5a6a1f2b8b9fe0b8b64b37b2a1e3c5f5a1e2d3c4b5a6978877665544332211",
            ),
            body: json!({"action": "opened", "number": 1347,
                "pull_request": {"title": "Retry webhook deliveries with backoff"},
                "repository": {"full_name": "acme/api"}}),
        },
        shopify(
            "shopify-5012-orders-create",
            "orders/create",
            5_012,
            "58.00",
        ),
        shopify(
            "shopify-5013-orders-create",
            "orders/create",
            5_013,
            "19.90",
        ),
        shopify("shopify-5011-orders-paid", "orders/paid", 5_011, "112.50"),
    ]
}

/// The handler: the billing API refuses one customer, the inventory
/// service times out on new orders, GitHub's API rate-limits the first
/// attempt at the pull request; the rest succeed.
async fn handle(job: Job<Value>) -> Result<(), String> {
    let event = &job.event;
    if event["data"]["object"]["customer"] == "cus_Q2blocked" {
        return Err("billing API answered 503 Service Unavailable".to_owned());
    }
    if event["line_items"].is_array() && event["total_price"] != "112.50" {
        return Err("inventory service timed out after 10 s".to_owned());
    }
    if event["action"] == "opened" && job.attempt == 1 {
        return Err("GitHub API answered 403: secondary rate limit".to_owned());
    }
    Ok(())
}

struct Fixture {
    inbox: Arc<dyn Inbox>,
    shutdown: Shutdown,
    path: std::path::PathBuf,
}

async fn fixture(name: &str) -> Fixture {
    let path = std::env::temp_dir().join(format!(
        "console_operations_{name}_{}.db",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    let inbox = SqliteInbox::connect(&format!("sqlite://{}?mode=rwc", path.display()))
        .await
        .unwrap();
    inbox.migrate().await.unwrap();
    let inbox: Arc<dyn Inbox> = Arc::new(inbox);
    for sent in deliveries() {
        let mut event =
            NewEvent::new(sent.key, sent.scheme, sent.body.to_string()).with_event_type(sent.kind);
        event.delivery_id = Some(sent.delivery.to_owned());
        event.matched_key = "secret#0".into();
        event.headers = vec![
            ("content-type".into(), "application/json".into()),
            (sent.signature.0.into(), sent.signature.1.into()),
            ("user-agent".into(), format!("{}-webhooks/1.0", sent.scheme)),
        ];
        inbox.accept(&event).await.unwrap();
    }
    let shutdown = Shutdown::new();
    let worker = Worker::<Value>::builder(Arc::clone(&inbox))
        .name("web-7f9c:4121")
        .max_attempts(3)
        .poll_interval(Duration::from_millis(20))
        .backoff(webhooks_core::inbox::Backoff {
            base: Duration::from_millis(40),
            max: Duration::from_millis(200),
        })
        .handler(handle);
    tokio::spawn(worker.run(shutdown.signal()));
    wait_until("4 dead letters and 5 completed", || async {
        let stats = inbox.stats().await.unwrap();
        stats.dead == 4 && stats.completed == 5
    })
    .await;
    // What a deploy script did earlier, as `webhooks inbox` records it.
    for (kind, ago) in [(ActionKind::Pause, 3_600), (ActionKind::Resume, 3_300)] {
        let at = std::time::SystemTime::now() - Duration::from_secs(ago);
        let action = Action::new(kind, "deploy-bot@ci-runner-7")
            .via("cli")
            .count(1)
            .at(at);
        actions::record(inbox.as_ref(), action).await;
    }
    Fixture {
        inbox,
        shutdown,
        path,
    }
}

async fn shoot(client: &Client, dir: Option<&String>, name: &str) {
    if let Some(dir) = dir {
        std::fs::write(
            format!("{dir}/{name}.png"),
            client.screenshot().await.unwrap(),
        )
        .unwrap();
    }
}

/// The rows' `data-outcome` of the attempt timeline.
async fn outcomes(client: &Client) -> Vec<String> {
    let mut out = Vec::new();
    for row in client
        .find_all(Locator::Css("#attempts tbody tr[data-outcome]"))
        .await
        .unwrap()
    {
        out.push(row.attr("data-outcome").await.unwrap().unwrap_or_default());
    }
    out
}

async fn journey(
    framework: &str,
    shots: Option<&String>,
    client: &Client,
    fixture: &Fixture,
    addr: std::net::SocketAddr,
) {
    let base = format!("http://{addr}{MOUNT}");

    client.goto(&format!("{base}/")).await.unwrap();
    assert_eq!(text(client, "div.card.bad div.n").await, "4", "{framework}");
    shoot(client, shots, "overview").await;

    // Search by a payload value: the blocked customer's two invoices.
    client
        .goto(&format!(
            "{base}/dead?q=data.object.customer+%3D+cus_Q2blocked"
        ))
        .await
        .unwrap();
    assert_eq!(
        rows(client, 2).await,
        2,
        "{framework}: searched by customer"
    );
    shoot(client, shots, "dead-letters").await;

    // By error text, typed in the search box.
    let search = client.find(Locator::Css("input[name=q]")).await.unwrap();
    search.clear().await.unwrap();
    search.send_keys("error ~ timed out").await.unwrap();
    click(client, Locator::XPath("//button[text()='Filter']")).await;
    // The new page (the previous one had two rows too).
    page_with(client, "inventory service timed out").await;
    assert_eq!(rows(client, 2).await, 2, "{framework}: searched by error");
    let page = client.source().await.unwrap();
    assert!(
        page.contains("shopify-5012") && !page.contains("evt_1QbLq2"),
        "{framework}"
    );

    // Replay every match: the count first.
    click(client, Locator::Css("a[href*='dead/bulk?action=replay']")).await;
    assert_eq!(
        text(client, "#confirm").await,
        "Replay 2 dead letters",
        "{framework}"
    );
    assert_eq!(
        text(client, "code#search").await,
        "error ~ timed out",
        "{framework}"
    );
    shoot(client, shots, "bulk-confirm").await;
    click(client, Locator::Css("#confirm")).await;
    assert!(
        page_with(client, "2 replayed.")
            .await
            .contains("2 replayed."),
        "{framework}"
    );

    // The pull request's timeline: rate-limited, then done.
    client
        .goto(&format!(
            "{base}/deliveries/item?key=8a91d4f0-1b7d-11f0-9c2b-2a6e5b1c0d33"
        ))
        .await
        .unwrap();
    text(client, "#attempts").await;
    assert_eq!(outcomes(client).await, ["failed", "ok"], "{framework}");
    let timeline = text(client, "#attempts").await;
    assert!(
        timeline.contains("secondary rate limit") && timeline.contains("web-7f9c:4121"),
        "{framework}: {timeline}"
    );
    let page = client.source().await.unwrap();
    assert!(
        page.contains("an earlier attempt's; the event completed since"),
        "{framework}: a completed event's last error is marked as an earlier attempt's"
    );
    shoot(client, shots, "delivery-timeline").await;

    // A dead letter's page: the signature redacted, the three attempts.
    client
        .goto(&format!("{base}/deliveries/item?key=evt_1QbLq2CZ6qsJgndJ"))
        .await
        .unwrap();
    text(client, "#attempts").await;
    assert_eq!(
        outcomes(client).await,
        ["failed", "failed", "failed"],
        "{framework}"
    );
    let page = client.source().await.unwrap();
    assert!(
        !page.contains("5257a869e7ecebeda32a"),
        "{framework}: the signature is redacted"
    );
    shoot(client, shots, "detail").await;

    // The replayed orders fail again: dead letters once more, six attempts each.
    let inbox = &fixture.inbox;
    wait_until("the replayed orders are dead again", || async {
        inbox.stats().await.unwrap().dead == 4
    })
    .await;

    // The action log: the replay by filter, newest first, then the script's.
    client.goto(&format!("{base}/actions")).await.unwrap();
    text(client, "#actions").await;
    let mut kinds = Vec::new();
    for row in client
        .find_all(Locator::Css("#actions tbody tr"))
        .await
        .unwrap()
    {
        kinds.push(row.attr("data-action").await.unwrap().unwrap_or_default());
    }
    assert_eq!(kinds, ["replay", "resume", "pause"], "{framework}");
    let first = text(client, "#actions tbody tr").await;
    assert!(
        first.contains("ada@ops")
            && first.contains("console")
            && first.contains("where error ~ \"timed out\""),
        "{framework}: {first}"
    );
    shoot(client, shots, "actions").await;

    // The completed deliveries, newest first.
    client
        .goto(&format!("{base}/deliveries?state=completed"))
        .await
        .unwrap();
    assert_eq!(
        client
            .find_all(Locator::Css("tr.delivery"))
            .await
            .unwrap()
            .len(),
        5,
        "{framework}"
    );
    shoot(client, shots, "deliveries-completed").await;

    // Paused from the overview, then resumed; both in the log.
    client.goto(&format!("{base}/")).await.unwrap();
    click(client, Locator::Id("pause")).await;
    page_with(client, "Processing paused").await;
    assert_eq!(
        text(client, "#processing .badge").await,
        "Paused",
        "{framework}"
    );
    client.goto(&format!("{base}/")).await.unwrap();
    shoot(client, shots, "overview-paused").await;
    click(client, Locator::Id("resume")).await;
    page_with(client, "Processing resumed").await;
    let log = fixture.inbox.actions(None, 2).await.unwrap().actions;
    let kinds: Vec<ActionKind> = log.iter().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        [ActionKind::Resume, ActionKind::Pause],
        "{framework}"
    );
    assert!(log.iter().all(|a| a.who == "ada@ops" && a.via == "console"));

    // Issue 34, item 5: Stripe's invoices paused through the Gates panel's
    // form while the rest flows; a worker's limit on Shopify orders shows
    // its permit held; then the invoices resumed from their row.
    let orders: Selector = "shopify:orders/*".parse().unwrap();
    let limit = Limit::concurrency(2).and_per_second(10);
    inbox
        .acquire_permit(&orders, limit, "shopify-5012-orders-create", HOLD)
        .await
        .unwrap();
    client.goto(&format!("{base}/")).await.unwrap();
    let only = client.find(Locator::Id("only")).await.unwrap();
    only.send_keys("stripe:invoice.*").await.unwrap();
    click(client, Locator::Id("pause-only")).await;
    let page = page_with(client, "Events matching stripe:invoice.* paused").await;
    assert!(
        page.contains("Events matching stripe:invoice.* paused"),
        "{framework}: {page}"
    );
    let invoices = "#gates tr[data-selector='stripe:invoice.*']";
    assert_eq!(
        text(client, &format!("{invoices} .pill")).await,
        "Paused",
        "{framework}"
    );
    let shopify = "#gates tr[data-selector='shopify:orders/*']";
    assert_eq!(
        text(client, &format!("{shopify} td.running")).await,
        "1 / 2",
        "{framework}"
    );
    assert_eq!(
        text(client, &format!("{shopify} td.rate")).await,
        "10/s",
        "{framework}"
    );
    assert_eq!(
        text(client, "#processing .badge").await,
        "Running",
        "{framework}: the rest flows"
    );
    let gates = inbox.gates().await.unwrap();
    assert!(
        gates
            .iter()
            .any(|g| g.selector.to_string() == "stripe:invoice.*" && g.paused),
        "{framework}: {gates:?}"
    );
    client.goto(&format!("{base}/")).await.unwrap();
    text(client, invoices).await;
    shoot(client, shots, "overview-gates").await;
    click(client, Locator::Css(&format!("{invoices} button"))).await;
    page_with(client, "Events matching stripe:invoice.* resumed").await;
    assert!(
        !inbox.gates().await.unwrap().iter().any(|g| g.paused),
        "{framework}"
    );
    let log = inbox.actions(None, 2).await.unwrap().actions;
    let logged: Vec<(ActionKind, &str, u64)> = log
        .iter()
        .map(|a| (a.kind, a.target.as_str(), a.count))
        .collect();
    assert_eq!(
        logged,
        [
            (ActionKind::Resume, "stripe:invoice.*", 1),
            (ActionKind::Pause, "stripe:invoice.*", 1),
        ],
        "{framework}"
    );
    inbox
        .release_permit(&orders, "shopify-5012-orders-create")
        .await
        .unwrap();
}

/// How long the Shopify permit of the gates' part is held.
const HOLD: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_pages_on_axum_and_actix() {
    let Some(path) = chromedriver() else { return };
    let driver = start_driver(&path).await;
    let client = browser(&driver).await;
    let shots = std::env::var("WEBHOOKS_CONSOLE_SCREENSHOTS").ok();
    for framework in ["axum", "actix"] {
        let fixture = fixture(framework).await;
        let addr = match framework {
            "axum" => start_axum(Arc::clone(&fixture.inbox)).await,
            _ => start_actix(Arc::clone(&fixture.inbox)),
        };
        let shots = shots.as_ref().filter(|_| framework == "axum");
        journey(framework, shots, &client, &fixture, addr).await;
        fixture.shutdown.trigger();
        let _ = std::fs::remove_file(&fixture.path);
    }
    client.close().await.unwrap();
}
