//! The shipped alerting rules and Grafana dashboard (`docs/monitoring/`)
//! name only metrics and labels the library emits.
//!
//! What the library emits is read from a recording metrics recorder while
//! the library runs every path that registers a series (a delivery, a
//! forgery, the inbox's accept, worker and gauges, a pause, an admin API
//! action and a console action), never from a list copied by hand. Then every
//! metric, label matcher, `by (…)` label, legend and `$labels` annotation of
//! the rules and the dashboard is checked against it. `promtool check
//! rules` and `promtool test rules` (in `.ci/run`) check the PromQL and the
//! alerts' behaviour; this checks that they watch real series.

mod console_support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use console_support::{ORIGIN, admin, dead, form, inbox, post, text, token};
use metrics_util::MetricKind;
use metrics_util::debugging::DebuggingRecorder;
use webhooks_core::console::Console;
use webhooks_core::inbox::admin::{self as inbox_admin, Access, AdminConfig, AdminRequest};
use webhooks_core::inbox::{Inbox, Job, Worker, signals as inbox_signals};
use webhooks_core::scheme::StandardWebhooks;
use webhooks_core::{Receiver, Rejection, signals};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const RULES: &str = include_str!("../../docs/monitoring/webhooks.rules.yml");
const DASHBOARD: &str = include_str!("../../docs/monitoring/grafana-dashboard.json");
const GUIDE: &str = include_str!("../../docs/monitoring.md");

/// Labels Prometheus adds to every scraped series (not the library's).
const TARGET_LABELS: [&str; 2] = ["job", "instance"];

/// What the library emitted: each metric's label names, and which metrics
/// are histograms (exported as `_bucket{le}`, `_sum` and `_count`).
#[derive(Debug, Default)]
struct Emitted {
    labels: BTreeMap<String, BTreeSet<String>>,
    histograms: BTreeSet<String>,
}

impl Emitted {
    /// The exported series `name` as (the library's metric, extra labels):
    /// a histogram's `_bucket` adds `le`.
    fn resolve(&self, name: &str) -> Option<(&str, &'static [&'static str])> {
        if let Some((metric, _)) = self.labels.get_key_value(name) {
            return Some((metric, &[]));
        }
        for (suffix, extra) in [
            ("_bucket", &["le"][..]),
            ("_sum", &[][..]),
            ("_count", &[][..]),
        ] {
            if let Some(base) = name.strip_suffix(suffix)
                && let Some(metric) = self.histograms.get(base)
            {
                return Some((metric, extra));
            }
        }
        None
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn signed(id: &str, body: &[u8]) -> http::request::Parts {
    let signer = StandardWebhooks::new(SECRET).unwrap();
    let (mut parts, ()) = http::Request::post("/hook").body(()).unwrap().into_parts();
    parts.headers = signer.sign_headers(id, now(), body).unwrap();
    parts
}

/// Runs the library through every path that registers a series, with a
/// recorder of its own, and returns what it recorded.
fn emitted() -> Emitted {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(exercise());
    });
    let mut emitted = Emitted::default();
    for (key, _, _, _) in snapshotter.snapshot().into_vec() {
        let (kind, key) = key.into_parts();
        let name = key.name().to_owned();
        let labels = emitted.labels.entry(name.clone()).or_default();
        labels.extend(key.labels().map(|l| l.key().to_owned()));
        if kind == MetricKind::Histogram {
            emitted.histograms.insert(name);
        }
    }
    emitted
}

async fn exercise() {
    // Request mode: a delivery (every per-scheme series is registered on a
    // scheme's first delivery), then a forgery (a rejection reason).
    let receiver = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .namespace("monitoring")
        .build();
    let handler = |_, _| async { 204u16 };
    let ok = receiver
        .process(signed("m1", b"{}"), "{}".into(), handler, |s| *s)
        .await;
    assert_eq!(ok, Ok(204));
    let forged = receiver
        .process(signed("m2", b"{}"), "{\"x\":1}".into(), handler, |s| *s)
        .await;
    assert!(matches!(forged, Err(Rejection::Verify(_))), "{forged:?}");

    // Inbox mode: an accept, a worker's attempt, the gauges, a pause.
    let inbox: Arc<dyn Inbox> = inbox().await;
    let stored = Receiver::builder(StandardWebhooks::new(SECRET).unwrap())
        .inbox(Arc::clone(&inbox))
        .namespace("monitoring-inbox")
        .build();
    let answer = stored
        .process(signed("m3", b"{}"), "{}".into(), handler, |s| *s)
        .await;
    assert!(
        matches!(answer, Err(Rejection::Stored { .. })),
        "{answer:?}"
    );
    let report = Worker::builder(Arc::clone(&inbox))
        .poll_interval(Duration::from_millis(10))
        .handler(|_: Job<serde_json::Value>| async { Ok::<(), String>(()) })
        .run_until_idle()
        .await;
    assert_eq!(report.completed, 1);
    let gauges = inbox_signals::spawn_gauges(Arc::clone(&inbox), Duration::from_millis(10));
    tokio::time::sleep(Duration::from_millis(50)).await;
    drop(gauges);
    assert!(inbox.set_paused(true).await.unwrap());
    assert!(inbox.set_paused(false).await.unwrap());

    // The operators: an admin API action and a console action.
    for key in ["k1", "k2"] {
        dead(&inbox, key, "invoice.paid", key, "{}").await;
    }
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "content-type",
        http::HeaderValue::from_static("application/json"),
    );
    let replay = inbox_admin::handle(
        &*inbox,
        &AdminConfig::default(),
        Some(Access::Admin("ada".into())),
        AdminRequest::new(
            &http::Method::POST,
            "/dead-letters/k1/replay",
            None,
            &headers,
        ),
    )
    .await;
    assert_eq!(replay.status, 200);
    let console = Console::new(Arc::clone(&inbox));
    let page = console_support::get(&console, admin(), "/dead/item", Some("key=k2")).await;
    let csrf = token(text(&page));
    let one = form(&[("csrf", &csrf), ("key", "k2"), ("scope", "one")]);
    let answer = post(&console, admin(), "/replay", &one, &[("origin", ORIGIN)]).await;
    assert_eq!(answer.status, 303);
}

/// The metric names and labels one PromQL expression uses.
#[derive(Debug, Default)]
struct Query {
    /// Each vector selector: its metric and the labels it matches on.
    selectors: Vec<(String, Vec<String>)>,
    /// Labels of `by`, `without`, `on`, `ignoring`, `group_left`, `group_right`.
    grouping: Vec<String>,
}

const KEYWORDS: [&str; 11] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
];

/// Reads `expr`'s selectors and grouping labels. Strings, range and
/// subquery brackets (`[5m]`, `[$__rate_interval]`) and Grafana variables
/// are skipped; an identifier followed by `(` is a function; any other
/// identifier outside braces is a metric.
fn parse(expr: &str) -> Query {
    fn ident_start(c: u8) -> bool {
        c.is_ascii_alphabetic() || c == b'_' || c == b':'
    }
    fn ident_char(c: u8) -> bool {
        ident_start(c) || c.is_ascii_digit()
    }
    let b = expr.as_bytes();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    let ident = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && ident_char(b[*i]) {
            *i += 1;
        }
        expr[start..*i].to_owned()
    };
    let skip_string = |i: &mut usize| {
        let quote = b[*i];
        *i += 1;
        while *i < b.len() && b[*i] != quote {
            *i += if b[*i] == b'\\' { 2 } else { 1 };
        }
        *i += 1;
    };
    let mut query = Query::default();
    while i < b.len() {
        let c = b[i];
        if c == b'"' || c == b'\'' || c == b'`' {
            skip_string(&mut i);
        } else if c == b'[' {
            while i < b.len() && b[i] != b']' {
                i += 1;
            }
            i += 1;
        } else if c == b'$' {
            i += 1;
            ident(&mut i);
        } else if c.is_ascii_digit() || c == b'.' {
            // A number, with a unit or an exponent glued to it.
            while i < b.len() && (ident_char(b[i]) || b[i] == b'.') {
                i += 1;
            }
        } else if ident_start(c) {
            let word = ident(&mut i);
            let mut j = i;
            skip_ws(&mut j);
            let next = b.get(j).copied();
            if KEYWORDS.contains(&word.as_str()) {
                if next == Some(b'(') {
                    i = j + 1;
                    loop {
                        skip_ws(&mut i);
                        match b.get(i) {
                            Some(b')') | None => break,
                            Some(b',') => i += 1,
                            Some(_) => query.grouping.push(ident(&mut i)),
                        }
                    }
                    i += 1;
                }
            } else if next == Some(b'(')
                || expr[j..].starts_with("by")
                || expr[j..].starts_with("without")
            {
                // A function, or an aggregation (`sum by (…) (…)`).
            } else {
                let mut labels = Vec::new();
                if next == Some(b'{') {
                    i = j + 1;
                    loop {
                        skip_ws(&mut i);
                        match b.get(i) {
                            Some(b'}') | None => break,
                            Some(b',') => i += 1,
                            Some(b'"' | b'\'' | b'`') => skip_string(&mut i),
                            Some(b'=' | b'!' | b'~') => i += 1,
                            Some(_) => labels.push(ident(&mut i)),
                        }
                    }
                    i += 1;
                }
                query.selectors.push((word, labels));
            }
        } else {
            i += 1;
        }
    }
    query
}

/// Checks `expr` against what was emitted; returns the labels its result can
/// carry (its grouping labels when it aggregates).
fn check(emitted: &Emitted, expr: &str, what: &str) -> Result<BTreeSet<String>, String> {
    let query = parse(expr);
    if query.selectors.is_empty() {
        return Err(format!("{what}: no metric in `{expr}`"));
    }
    let mut available: BTreeSet<String> = TARGET_LABELS.iter().map(|l| (*l).to_owned()).collect();
    for (name, matched) in &query.selectors {
        let Some((metric, extra)) = emitted.resolve(name) else {
            return Err(format!(
                "{what}: `{name}` is not a metric the library emits"
            ));
        };
        let labels = &emitted.labels[metric];
        let known =
            |l: &str| labels.contains(l) || extra.contains(&l) || TARGET_LABELS.contains(&l);
        for label in matched {
            if !known(label) {
                return Err(format!(
                    "{what}: `{name}` has no label `{label}` (it has {labels:?})"
                ));
            }
        }
        available.extend(labels.iter().cloned());
        available.extend(extra.iter().map(|l| (*l).to_owned()));
    }
    for label in &query.grouping {
        if !available.contains(label) {
            return Err(format!(
                "{what}: groups by `{label}`, which none of its metrics carry"
            ));
        }
    }
    Ok(if query.grouping.is_empty() {
        available
    } else {
        query
            .grouping
            .into_iter()
            .chain(TARGET_LABELS.map(str::to_owned))
            .collect()
    })
}

/// The names in `{{ $labels.x }}` (rules) or `{{x}}` (legends).
fn template_labels(text: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("{{") {
        let end = rest[at..].find("}}").map_or(rest.len(), |e| at + e);
        let inner = rest[at + 2..end].trim();
        if let Some(name) = inner.strip_prefix(prefix) {
            let name: String = name
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
        rest = &rest[end.min(rest.len())..];
        if rest.len() >= 2 {
            rest = &rest[2..];
        } else {
            break;
        }
    }
    out
}

/// One alerting rule, read line by line (the rules file's own layout:
/// `expr:` on one line or as a `|` block).
#[derive(Debug, Default)]
struct Rule {
    alert: String,
    expr: String,
    annotations: Vec<String>,
}

fn rules() -> Vec<Rule> {
    let lines: Vec<&str> = RULES.lines().collect();
    let mut rules: Vec<Rule> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if let Some(name) = trimmed.strip_prefix("- alert:") {
            rules.push(Rule {
                alert: name.trim().to_owned(),
                ..Rule::default()
            });
        } else if let Some(rest) = trimmed.strip_prefix("expr:") {
            let rule = rules.last_mut().expect("an expr inside an alert");
            let rest = rest.trim();
            if rest.starts_with('|') || rest.starts_with('>') {
                let mut block = Vec::new();
                while i + 1 < lines.len() {
                    let next = lines[i + 1];
                    let next_indent = next.len() - next.trim_start().len();
                    if !next.trim().is_empty() && next_indent <= indent {
                        break;
                    }
                    block.push(next.trim());
                    i += 1;
                }
                rule.expr = block.join(" ");
            } else {
                rule.expr = rest.to_owned();
            }
        } else if let Some(text) = trimmed
            .strip_prefix("summary:")
            .or_else(|| trimmed.strip_prefix("description:"))
        {
            rules
                .last_mut()
                .expect("annotations inside an alert")
                .annotations
                .push(text.trim().to_owned());
        }
        i += 1;
    }
    rules
}

#[test]
fn the_rules_and_the_dashboard_name_only_emitted_metrics_and_labels() {
    let emitted = emitted();

    // The exercise reached every series the library declares, so a metric
    // the rules need cannot be missing from `emitted` for want of a path.
    let declared = [
        signals::RECEIVED,
        signals::VERIFIED,
        signals::REJECTED,
        signals::DUPLICATES,
        signals::STORE_ERRORS,
        signals::HANDLER,
        signals::LEASE_LOST,
        signals::BODY_SIZE,
        signals::VERIFY_DURATION,
        signals::CLAIM_DURATION,
        signals::HANDLER_DURATION,
        inbox_signals::ACCEPTED,
        inbox_signals::ATTEMPTS,
        inbox_signals::HANDLER_DURATION,
        inbox_signals::DEPTH,
        inbox_signals::DUE,
        inbox_signals::OLDEST_DUE_AGE,
        inbox_signals::IN_FLIGHT,
        inbox_signals::DEAD,
        inbox_signals::PAUSED,
        inbox_admin::ACTIONS,
        webhooks_core::console::ACTIONS,
    ];
    for name in declared {
        assert!(emitted.labels.contains_key(name), "{name} never recorded");
    }
    // Every emitted series is documented for operators.
    for name in emitted.labels.keys() {
        assert!(
            GUIDE.contains(&format!("`{name}`")),
            "{name} is emitted but not listed in docs/monitoring.md"
        );
    }

    // The rules.
    let rules = rules();
    let names: BTreeSet<&str> = rules.iter().map(|r| r.alert.as_str()).collect();
    for required in [
        "WebhooksDeadLettersRising",
        "WebhooksBacklogAging",
        "WebhooksUnauthorizedRateHigh",
        "WebhooksUnavailableRateHigh",
        "WebhooksLeaseLost",
        "WebhooksInboxLeaseLost",
    ] {
        assert!(names.contains(required), "no {required} rule");
    }
    assert_eq!(
        RULES.matches("- alert:").count(),
        rules.iter().filter(|r| !r.expr.is_empty()).count(),
        "every alert has an expression"
    );
    for rule in &rules {
        let what = format!("rule {}", rule.alert);
        let labels = check(&emitted, &rule.expr, &what).unwrap_or_else(|e| panic!("{e}"));
        for text in &rule.annotations {
            for label in template_labels(text, "$labels.") {
                assert!(
                    labels.contains(&label),
                    "{what}: annotation uses $labels.{label}, not in its result ({labels:?})"
                );
            }
        }
    }

    // The dashboard.
    let dashboard: serde_json::Value = serde_json::from_str(DASHBOARD).expect("dashboard JSON");
    let mut panels: Vec<&serde_json::Value> = Vec::new();
    let mut stack: Vec<&serde_json::Value> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .collect();
    while let Some(panel) = stack.pop() {
        if let Some(inner) = panel["panels"].as_array() {
            stack.extend(inner);
        }
        panels.push(panel);
    }
    let mut ids = BTreeSet::new();
    let mut queries = 0;
    for panel in &panels {
        let id = panel["id"].as_u64().expect("a numeric panel id");
        assert!(ids.insert(id), "panel id {id} used twice");
        assert!(panel["gridPos"].is_object(), "panel {id} has no gridPos");
        if panel["type"] == "row" {
            continue;
        }
        let title = panel["title"].as_str().expect("a title");
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{title}: the datasource variable"
        );
        let mut refs = BTreeSet::new();
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("an expr");
            let ref_id = target["refId"].as_str().expect("a refId");
            assert!(refs.insert(ref_id), "{title}: refId {ref_id} twice");
            let what = format!("panel {title:?}");
            let labels = check(&emitted, expr, &what).unwrap_or_else(|e| panic!("{e}"));
            let legend = target["legendFormat"].as_str().unwrap_or("");
            for label in template_labels(legend, "") {
                assert!(
                    labels.contains(&label),
                    "{what}: legend uses {{{{{label}}}}}, not in its result ({labels:?})"
                );
            }
            queries += 1;
        }
    }
    assert!(
        queries >= 20,
        "only {queries} queries: the dashboard lost panels"
    );
    for variable in dashboard["templating"]["list"]
        .as_array()
        .expect("variables")
    {
        let Some(definition) = variable["definition"].as_str() else {
            continue;
        };
        let inner = definition
            .strip_prefix("label_values(")
            .and_then(|d| d.strip_suffix(')'))
            .expect("label_values(selector, label)");
        let (selector, label) = inner.rsplit_once(',').expect("a label");
        let labels = check(&emitted, selector, "a variable").unwrap_or_else(|e| panic!("{e}"));
        assert!(
            labels.contains(label.trim()),
            "variable {}: no label {label}",
            variable["name"]
        );
    }
}

/// The checker itself: a typo in a metric or a label fails.
#[test]
fn the_checker_catches_typos() {
    let mut emitted = Emitted::default();
    emitted.labels.insert(
        "webhooks_received_total".into(),
        ["scheme", "route"].map(str::to_owned).into(),
    );
    emitted.labels.insert(
        "webhooks_handler_duration_seconds".into(),
        ["scheme", "route"].map(str::to_owned).into(),
    );
    emitted
        .histograms
        .insert("webhooks_handler_duration_seconds".into());
    let ok = |e: &str| check(&emitted, e, "t");
    assert!(ok("sum by (route) (rate(webhooks_received_total{scheme=\"x\"}[5m])) > 0.5").is_ok());
    assert!(
        ok("histogram_quantile(0.99, sum by (le) (rate(webhooks_handler_duration_seconds_bucket[$__rate_interval])))")
            .is_ok()
    );
    assert!(
        ok("rate(webhook_received_total[5m])").is_err(),
        "metric typo"
    );
    assert!(
        ok("rate(webhooks_received_total{schema=\"x\"}[5m])").is_err(),
        "label typo"
    );
    assert!(
        ok("sum by (reason) (rate(webhooks_received_total[5m]))").is_err(),
        "grouping typo"
    );
    assert!(
        ok("rate(webhooks_received_total_bucket[5m])").is_err(),
        "not a histogram"
    );
    assert!(ok("vector(1)").is_err(), "no metric at all");
    assert_eq!(
        template_labels(
            "{{ $labels.route }} ({{ $labels.scheme }}): {{ $value }}",
            "$labels."
        ),
        ["route", "scheme"]
    );
}
