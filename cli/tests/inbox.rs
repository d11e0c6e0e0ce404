//! `webhooks inbox` over a real inbox: SQLite always; PostgreSQL, MariaDB
//! Redis and Redis Cluster when their servers answer (URLs from
//! `WEBHOOKS_POSTGRES_URL`, `WEBHOOKS_MYSQL_URL`, `WEBHOOKS_REDIS_URL`,
//! `WEBHOOKS_REDIS_CLUSTER_URL`; under `CI=true` a missing server fails the
//! test instead of skipping it).

mod support;

use std::time::Duration;

use support::{run_json, text};
use webhooks_core::inbox::{ClaimToken, NewEvent, inbox_from_url};

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// `base` from `var` (or `default`) if its server accepts a connection.
fn service(name: &str, var: &str, default: &str) -> Option<String> {
    let url = std::env::var(var).unwrap_or_else(|_| default.to_owned());
    let authority = url.split("://").nth(1)?.split('/').next()?;
    let host_port = authority.rsplit('@').next()?;
    let reachable = std::net::ToSocketAddrs::to_socket_addrs(host_port)
        .ok()
        .and_then(|mut addrs| addrs.next())
        .is_some_and(|addr| {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok()
        });
    if reachable {
        return Some(url);
    }
    assert!(
        !ci(),
        "{name} is not reachable at {var} and CI=true: a CI run must not skip it"
    );
    eprintln!("skipping the {name} inbox: nothing answers at {host_port} (set {var})");
    None
}

fn unique() -> String {
    let hex = webhooks_core::testing::TestDelivery::new("")
        .delivery_id()
        .to_owned();
    hex.trim_start_matches("msg_")[..12].to_owned()
}

/// Seeds the inbox at `url`: two Stripe events and a GitHub one, leased;
/// the first Stripe one and the GitHub one dead-lettered, the other
/// completed. Returns the three keys.
async fn seed(url: &str) -> [String; 3] {
    let inbox = inbox_from_url(url).await.unwrap();
    let events = [
        NewEvent::new(
            "cli:stripe:evt_1",
            "stripe",
            r#"{"id":"evt_1","type":"invoice.paid"}"#,
        )
        .with_event_type("invoice.paid"),
        NewEvent::new(
            "cli:stripe:evt_2",
            "stripe",
            r#"{"id":"evt_2","type":"invoice.paid"}"#,
        )
        .with_event_type("invoice.paid"),
        NewEvent::new(
            "cli:github:d3",
            "github",
            r#"{"zen":"Keep it logically awesome."}"#,
        )
        .with_event_type("ping"),
    ];
    let mut keys = Vec::new();
    for event in &events {
        inbox.accept(event).await.unwrap();
        keys.push(event.stored_key());
    }
    let token = ClaimToken::random();
    let leased = inbox
        .lease(token, 10, Duration::from_secs(60), 5)
        .await
        .unwrap();
    assert_eq!(leased.len(), 3);
    use webhooks_core::inbox::Transition::Applied;
    let dead = inbox
        .dead_letter(&keys[0], token, "handler failed: boom")
        .await;
    assert_eq!(dead.unwrap(), Applied);
    assert_eq!(inbox.complete(&keys[1], token).await.unwrap(), Applied);
    let dead = inbox
        .dead_letter(&keys[2], token, "handler failed: bad")
        .await;
    assert_eq!(dead.unwrap(), Applied);
    [keys[0].clone(), keys[1].clone(), keys[2].clone()]
}

fn inbox(url: &str, args: &[&str]) -> (i32, serde_json::Value) {
    run_json(&[&["inbox", "--url", url][..], args].concat())
}

async fn exercise(url: &str) {
    let [dead_stripe, done, dead_github] = seed(url).await;
    let (code, stats) = inbox(url, &["stats"]);
    assert_eq!(code, 0, "{stats}");
    assert_eq!(
        (
            stats["dead"].as_u64(),
            stats["pending"].as_u64(),
            stats["paused"].as_bool()
        ),
        (Some(2), Some(0), Some(false)),
        "{stats}"
    );
    let (_, listed) = inbox(url, &["ls"]);
    let keys: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys.len(), 2, "{listed}");
    assert!(keys.contains(&dead_stripe.as_str()) && keys.contains(&dead_github.as_str()));
    let (_, listed) = inbox(url, &["ls", "--state", "dead", "--scheme", "stripe"]);
    assert_eq!(listed[0]["key"], dead_stripe.as_str());
    assert_eq!(listed[0]["last_error"], "handler failed: boom");
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let (_, listed) = inbox(url, &["ls", "--state", "completed"]);
    assert_eq!(listed[0]["key"], done.as_str());
    // Issue 34, item 2: --where searches payload values and errors.
    let (code, found) = inbox(url, &["ls", "--where", "zen ^= Keep it"]);
    assert_eq!(
        (code, &found[0]["key"]),
        (0, &serde_json::json!(dead_github)),
        "{found}"
    );
    assert_eq!(found.as_array().unwrap().len(), 1, "{found}");
    let (_, found) = inbox(url, &["ls", "--where", "id = evt_1 and error ~ boom"]);
    assert_eq!(found[0]["key"], dead_stripe.as_str(), "{found}");
    let (_, found) = inbox(url, &["ls", "--where", "error ~ handler failed"]);
    assert_eq!(found.as_array().unwrap().len(), 2, "{found}");
    let (_, found) = inbox(url, &["ls", "--where", "id = evt_2"]);
    assert_eq!(found, serde_json::json!([]), "evt_2 completed, not dead");
    let output = support::webhooks()
        .args(["inbox", "--url", url, "ls", "--where", "data..x = 1"])
        .output()
        .unwrap();
    let (code, _, stderr) = text(&output);
    assert_eq!(code, 2);
    assert!(stderr.contains("is not a path"), "{stderr}");
    let (code, shown) = inbox(url, &["show", &dead_stripe]);
    assert_eq!(code, 0);
    assert_eq!(shown["body"], r#"{"id":"evt_1","type":"invoice.paid"}"#);
    assert_eq!(shown["event_type"], "invoice.paid");
    // A dry run changes nothing.
    let (code, dry) = inbox(url, &["replay", "--all", "--scheme", "stripe", "--dry-run"]);
    assert_eq!((code, &dry["keys"]), (0, &serde_json::json!([dead_stripe])));
    assert_eq!(inbox(url, &["stats"]).1["dead"], 2);
    // A filter without --yes and no terminal to ask on: refused.
    let output = support::webhooks()
        .args([
            "inbox", "--url", url, "replay", "--all", "--scheme", "stripe",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let (code, _, stderr) = text(&output);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("replay 1 dead letter: refusing without --yes"),
        "{stderr}"
    );
    let (code, replayed) = inbox(url, &["replay", "--all", "--scheme", "stripe", "--yes"]);
    assert_eq!(
        (code, &replayed["applied"], &replayed["matched"]),
        (0, &serde_json::json!(1), &serde_json::json!(1)),
        "{replayed}"
    );
    let stats = inbox(url, &["stats"]).1;
    assert_eq!(
        (stats["dead"].as_u64(), stats["pending"].as_u64()),
        (Some(1), Some(1)),
        "{stats}"
    );
    let (code, discarded) = inbox(url, &["discard", &dead_github]);
    assert_eq!(
        (code, &discarded["applied"]),
        (0, &serde_json::json!([dead_github]))
    );
    // Again: no longer a dead letter, exit 1.
    let (code, again) = inbox(url, &["discard", &dead_github]);
    assert_eq!(
        (code, &again["skipped"]),
        (1, &serde_json::json!([dead_github]))
    );
    assert_eq!(inbox(url, &["pause"]).1["changed"], true);
    assert_eq!(inbox(url, &["stats"]).1["paused"], true);
    assert_eq!(inbox(url, &["pause"]).1["changed"], false);
    assert_eq!(inbox(url, &["resume"]).1["changed"], true);
    let (code, purged) = inbox(url, &["purge", "--older-than", "30d", "--yes"]);
    assert_eq!((code, purged["purged"].as_u64()), (0, Some(0)), "{purged}");
    // Issue 34: younger than the longest provider retry window plus a day
    // (Stripe's 3 days + 1) only with --force.
    let (code, refused) = inbox(url, &["purge", "--older-than", "3d", "--yes"]);
    let reason = refused["error"].as_str().unwrap_or_default();
    assert_eq!(code, 2, "{refused}");
    assert!(
        reason.contains("345600 s") && reason.contains("--force"),
        "{reason}"
    );
    let (code, forced) = inbox(
        url,
        &[
            "purge",
            "--older-than",
            "3d",
            "--yes",
            "--force",
            "--as",
            "ops@example.com",
        ],
    );
    assert_eq!((code, forced["purged"].as_u64()), (0, Some(0)), "{forced}");
    // Issue 34, item 4: every change above is in the action log, newest
    // first, with who did it and through what.
    let (code, log) = inbox(url, &["actions", "--limit", "3"]);
    assert_eq!(code, 0, "{log}");
    let seen = |log: &serde_json::Value| -> Vec<(String, String, u64)> {
        log["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                assert_eq!(a["via"], "cli", "{a}");
                (
                    a["action"].as_str().unwrap().to_owned(),
                    a["target"].as_str().unwrap().to_owned(),
                    a["count"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let owned = |rows: &[(&str, &str, u64)]| -> Vec<(String, String, u64)> {
        rows.iter()
            .map(|(a, t, n)| ((*a).to_owned(), (*t).to_owned(), *n))
            .collect()
    };
    assert_eq!(
        seen(&log),
        owned(&[
            ("purge", "completed, older than 3d, forced", 0),
            ("purge", "completed, older than 30d", 0),
            ("resume", "", 1),
        ]),
        "{log}"
    );
    assert_eq!(log["actions"][0]["who"], "ops@example.com");
    assert_ne!(log["actions"][1]["who"], "ops@example.com");
    let next = log["next"].as_u64().expect("an older page").to_string();
    let (_, older) = inbox(url, &["actions", "--before", &next]);
    assert_eq!(
        seen(&older),
        owned(&[
            ("pause", "", 0),
            ("pause", "", 1),
            ("discard", dead_github.as_str(), 0),
            ("discard", dead_github.as_str(), 1),
            ("replay", "filter: scheme=stripe", 1),
        ]),
        "{older}"
    );
    assert_eq!(older["next"], serde_json::Value::Null);
    let (code, missing) = inbox(url, &["show", "cli:nope"]);
    assert_eq!(
        (code, missing["error"].as_str()),
        (2, Some("no delivery with that key"))
    );
    let (code, migrated) = inbox(url, &["migrate"]);
    assert_eq!((code, migrated["migrated"].as_bool()), (0, Some(true)));
    gates(url).await;
}

/// Issue 34, item 5: `pause --only` and `resume --only` pause one
/// selector's events (logged as the whole inbox's pause, the selector as
/// the target), `gates` lists them with the workers' limits, and a
/// malformed selector is bad input (exit 2) saying why.
async fn gates(url: &str) {
    use webhooks_core::inbox::gates::Limit;

    let (code, listed) = inbox(url, &["gates"]);
    assert_eq!(code, 0, "{listed}");
    assert_eq!(
        listed,
        serde_json::json!({"gates": [], "supported": true}),
        "{listed}"
    );
    // A worker's limit, one permit held.
    let store = inbox_from_url(url).await.unwrap();
    let orders = "shopify:orders/*".parse().unwrap();
    let limit = Limit::concurrency(2).and_per_second(10);
    store
        .acquire_permit(&orders, limit, "evt_x", Duration::from_secs(30))
        .await
        .unwrap();
    let (code, paused) = inbox(url, &["pause", "--only", "Stripe:invoice.*"]);
    assert_eq!(code, 0, "{paused}");
    assert_eq!(
        paused,
        serde_json::json!({"paused": true, "changed": true, "only": "stripe:invoice.*"})
    );
    let (_, again) = inbox(url, &["pause", "--only", "stripe:invoice.*"]);
    assert_eq!(again["changed"], false, "{again}");
    assert_eq!(
        inbox(url, &["stats"]).1["paused"],
        false,
        "the inbox as a whole runs"
    );
    let (_, listed) = inbox(url, &["gates"]);
    let rows: Vec<_> = listed["gates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["selector"].as_str().unwrap().to_owned(),
                g["paused"].as_bool().unwrap(),
                g["running"].as_u64().unwrap(),
                g["concurrency"].as_u64(),
                g["per_second"].as_u64(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("shopify:orders/*".to_owned(), false, 1, Some(2), Some(10)),
            ("stripe:invoice.*".to_owned(), true, 0, None, None),
        ],
        "{listed}"
    );
    let (code, table, stderr) = text(&support::run(&["inbox", "--url", url, "gates"]));
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(lines[0].starts_with("SELECTOR"), "{table}");
    assert!(
        lines[1].starts_with("shopify:orders/*  running  1 / 2    10/s"),
        "{table}"
    );
    assert!(
        lines[2].starts_with("stripe:invoice.*  paused   —        —"),
        "{table}"
    );
    for (bad, reason) in [
        ("", "needs a scheme pattern"),
        ("stripe:invoice paid", "without spaces"),
        ("*:*", "pause the whole inbox instead"),
    ] {
        let (code, refused) = inbox(url, &["pause", "--only", bad]);
        let error = refused["error"].as_str().unwrap_or_default();
        assert_eq!(code, 2, "{bad}: {refused}");
        assert!(
            error.contains("is not a selector") && error.contains(reason),
            "{bad}: {error}"
        );
    }
    assert_eq!(
        inbox(url, &["stats"]).1["paused"],
        false,
        "an empty --only is not the whole inbox"
    );
    let (code, resumed) = inbox(
        url,
        &[
            "resume",
            "--only",
            "stripe:invoice.*",
            "--as",
            "ops@example.com",
        ],
    );
    assert_eq!((code, &resumed["changed"]), (0, &serde_json::json!(true)));
    let (_, listed) = inbox(url, &["gates"]);
    assert_eq!(listed["gates"].as_array().unwrap().len(), 1, "{listed}");
    let (_, log) = inbox(url, &["actions", "--limit", "3"]);
    let entries: Vec<_> = log["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["action"].as_str().unwrap().to_owned(),
                a["target"].as_str().unwrap().to_owned(),
                a["count"].as_u64().unwrap(),
                a["via"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let row = |action: &str, count| {
        (
            action.to_owned(),
            "stripe:invoice.*".to_owned(),
            count,
            "cli".to_owned(),
        )
    };
    assert_eq!(
        entries,
        [row("resume", 1), row("pause", 0), row("pause", 1)],
        "{log}"
    );
    assert_eq!(log["actions"][0]["who"], "ops@example.com");
}

/// Issue 34, item 6: `inbox show` redacts as the console and the admin API
/// do, through webhooks-core's redaction: credential-named headers and JSON
/// fields masked, configured fields and headers too.
#[tokio::test]
async fn show_redacts_headers_and_payload_fields() {
    use support::run;

    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("inbox.db").display());
    let store = inbox_from_url(&url).await.unwrap();
    let mut event = NewEvent::new(
        "cli:stripe:pi",
        "stripe",
        r#"{"id":"evt_9","data":{"object":{"client_secret":"pi_secret_SECRETCS","customer":{"email":"SECRETMAIL@example.com"}}}}"#,
    )
    .with_event_type("payment_intent.created");
    event.headers = vec![
        ("stripe-signature".into(), "t=1,v1=SECRETSIG".into()),
        ("x-digest".into(), "SECRETDIGEST".into()),
        ("content-type".into(), "application/json".into()),
    ];
    store.accept(&event).await.unwrap();
    let key = event.stored_key();
    let args = [
        "inbox",
        "--url",
        &url,
        "show",
        &key,
        "--redact-field",
        "data.object.customer.email",
        "--redact-header",
        "x-digest",
    ];
    let (code, shown) = run_json(&args);
    assert_eq!(code, 0, "{shown}");
    let text = shown.to_string();
    for secret in ["SECRETCS", "SECRETMAIL", "SECRETSIG", "SECRETDIGEST"] {
        assert!(!text.contains(secret), "{secret}: {text}");
    }
    assert_eq!(
        shown["body"],
        r#"{"id":"evt_9","data":{"object":{"client_secret":"redacted (string, 18 bytes)","customer":{"email":"redacted (string, 22 bytes)"}}}}"#
    );
    assert_eq!(shown["body_redacted"], 2);
    assert!(text.contains("application/json"), "{text}");
    let (code, stdout, stderr) = support::text(&run(&args));
    assert_eq!(code, 0, "{stderr}");
    for secret in ["SECRETCS", "SECRETMAIL", "SECRETSIG", "SECRETDIGEST"] {
        assert!(!stdout.contains(secret), "{secret}: {stdout}");
    }
    assert!(stdout.contains("redacted (string, 18 bytes)"), "{stdout}");
    assert!(stdout.contains("2 field(s) redacted"), "{stdout}");
    // Without the flags, only the names that say credential.
    let (_, plain) = run_json(&args[..5]);
    let text = plain.to_string();
    assert!(
        text.contains("SECRETMAIL") && text.contains("SECRETDIGEST"),
        "{text}"
    );
    assert!(
        !text.contains("SECRETCS") && !text.contains("SECRETSIG"),
        "{text}"
    );
}

#[tokio::test]
async fn sqlite_inbox() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("inbox.db").display());
    exercise(&url).await;
}

#[tokio::test]
async fn postgres_inbox() {
    if let Some(base) = service(
        "PostgreSQL",
        "WEBHOOKS_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    ) {
        exercise(&format!("{base}?table=cli_inbox_{}", unique())).await;
    }
}

#[tokio::test]
async fn mariadb_inbox() {
    if let Some(base) = service(
        "MariaDB",
        "WEBHOOKS_MYSQL_URL",
        "mysql://root@127.0.0.1:3306/test",
    ) {
        exercise(&format!("{base}?table=cli_inbox_{}", unique())).await;
    }
}

#[tokio::test]
async fn redis_inbox() {
    if let Some(base) = service("Redis", "WEBHOOKS_REDIS_URL", "redis://127.0.0.1:6379") {
        exercise(&format!("{base}?prefix=cli-inbox-{}:", unique())).await;
    }
}

#[tokio::test]
async fn redis_cluster_inbox() {
    // The cluster of `.ci/redis-cluster` (CI starts it); `redis://` seed
    // URL as the other cluster tests take it, opened as `redis-cluster://`.
    if let Some(base) = service(
        "Redis Cluster",
        "WEBHOOKS_REDIS_CLUSTER_URL",
        "redis://127.0.0.1:7000",
    ) {
        let base = match base.split_once("://") {
            Some(("rediss", rest)) => format!("rediss-cluster://{rest}"),
            Some((_, rest)) => format!("redis-cluster://{rest}"),
            None => base,
        };
        exercise(&format!("{base}?prefix=cli-inbox-{}:", unique())).await;
    }
}

#[test]
fn bad_urls_are_exit_2_and_never_echoed() {
    let (code, report) = run_json(&["inbox", "stats"]);
    assert_eq!(code, 2);
    assert!(report["error"].as_str().unwrap().contains("no inbox URL"));
    let (code, report) = run_json(&[
        "inbox",
        "--url",
        "ftp://user:hunter2@example.com/x",
        "stats",
    ]);
    assert_eq!(code, 2);
    let error = report["error"].as_str().unwrap();
    assert!(error.starts_with("cannot open the inbox"), "{error}");
    assert!(!error.contains("hunter2"), "{error}");
    let (code, report) = run_json(&[
        "inbox",
        "--url",
        "postgres://u:hunter2@127.0.0.1:9/db",
        "stats",
    ]);
    assert_eq!(code, 2);
    assert!(
        !report["error"].as_str().unwrap().contains("hunter2"),
        "{report}"
    );
}
