//! The pages, as maud templates: every interpolated value is escaped, and
//! nothing in them is inline script or style.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::redact::{ShownBody, ShownHeader};
use maud::{DOCTYPE, Markup, html};

use crate::inbox::gates::Gate;
use crate::inbox::{
    Activity, Attempt, DeadLetter, DeadLetterCursor, Delivery, DeliveryFilter, DeliveryOrder,
    DeliveryPage, DeliveryState, InboxStats,
};

/// Who is looking, and what every page needs.
pub(super) struct View<'a> {
    pub(super) base: &'a str,
    pub(super) who: &'a str,
    pub(super) admin: bool,
    pub(super) csrf: String,
    pub(super) refresh_secs: u64,
    /// The youngest purge allowed without "force".
    pub(super) min_purge_age: Duration,
    /// How far back the inbox recognises duplicates: the configured
    /// minimum purge age (the inbox's retention).
    pub(super) recognised: Duration,
}

/// The list's filter, echoed in the form and in links.
pub(super) struct ListParams<'a> {
    pub(super) scheme: &'a str,
    pub(super) event_type: &'a str,
    pub(super) delivery_id: &'a str,
    pub(super) from: &'a str,
    pub(super) until: &'a str,
    /// The search (see [`crate::inbox::Search`]).
    pub(super) q: &'a str,
}

impl ListParams<'_> {
    /// `?scheme=…&event_type=…` (only the non-empty ones), form-encoded.
    fn query(&self) -> String {
        let mut out = form_urlencoded::Serializer::new(String::new());
        for (name, value) in [
            ("scheme", self.scheme),
            ("event_type", self.event_type),
            ("delivery_id", self.delivery_id),
            ("from", self.from),
            ("until", self.until),
            ("q", self.q),
        ] {
            if !value.is_empty() {
                out.append_pair(name, value);
            }
        }
        format!("?{}", out.finish())
    }

    fn filtered(&self) -> bool {
        !(self.scheme.is_empty()
            && self.event_type.is_empty()
            && self.from.is_empty()
            && self.until.is_empty()
            && self.q.trim().is_empty())
    }

    /// The filter for a bulk action (no delivery id, no cursor).
    fn bulk_query(&self, action: &str) -> String {
        encode(&[
            ("action", action),
            ("scheme", self.scheme),
            ("event_type", self.event_type),
            ("from", self.from),
            ("until", self.until),
            ("q", self.q),
        ])
    }
}

/// One page of the dead-letter list.
pub(super) struct ListPage {
    pub(super) items: Vec<DeadLetter>,
    pub(super) next: Option<DeadLetterCursor>,
    pub(super) scanned_all: bool,
}

fn encode(pairs: &[(&str, &str)]) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        out.append_pair(name, value);
    }
    out.finish()
}

fn layout(
    base: &str,
    title: &str,
    nav: Option<(&View<'_>, &str)>,
    refresh: u64,
    content: &Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="same-origin";
                title { (title) " · webhooks console" }
                link rel="stylesheet" href={ (base) "/assets/console.css" };
                script src={ (base) "/assets/console.js" } defer {}
            }
            body data-refresh=(refresh) {
                header {
                    a.brand href={ (base) "/" } { "webhooks console" }
                    @if let Some((view, here)) = nav {
                        a.here[here == "overview"] href={ (base) "/" } { "Overview" }
                        a.here[here == "dead"] href={ (base) "/dead" } { "Dead letters" }
                        a.here[here == "deliveries"] href={ (base) "/deliveries" } { "Deliveries" }
                        a.here[here == "actions"] href={ (base) "/actions" } { "Actions" }
                        span.who { (view.who) " · " @if view.admin { "admin" } @else { "read-only" } }
                    }
                }
                main { (content) }
            }
        }
    }
}

/// The page every request gets when no `authorize` hook is configured.
pub(super) fn not_configured(base: &str) -> Markup {
    layout(
        base,
        "Not configured",
        None,
        0,
        &html! {
            h1 { "The console is not configured" }
            div.warn { "Every request is denied until the application decides who may see this console." }
            p { "Add an " code { "authorize" } " hook where you mount it, returning "
                code { "Access::Admin(who)" } ", " code { "Access::ReadOnly(who)" } " or " code { "Access::Deny" }
                " for each request (from your session, your authentication layer's extension, a header set by your proxy):" }
            pre { "// axum\nRouter::new().nest_service(\n    \"/ops/webhooks\",\n    tower_webhooks::Console::new(inbox)\n        .authorize(|request: &http::request::Parts| match request.extensions.get::<User>() {\n            Some(user) if user.is_admin => Access::Admin(user.name.clone()),\n            Some(user) => Access::ReadOnly(user.name.clone()),\n            None => Access::Deny,\n        }),\n);\n\n// actix-web\nApp::new().service(actix_webhooks::console(\n    \"/ops/webhooks\",\n    actix_webhooks::Console::new(inbox).authorize(|request: &HttpRequest| /* … */ Access::Deny),\n));" }
        },
    )
}

/// A short page with a title and one sentence.
pub(super) fn message(base: &str, title: &str, text: &str) -> Markup {
    layout(
        base,
        title,
        None,
        0,
        &html! {
            h1 { (title) }
            p { (text) }
            p { a href={ (base) "/" } { "Back to the console" } }
        },
    )
}

fn notice_box(notice: Option<&str>) -> Markup {
    html! { @if let Some(text) = notice { div.notice role="status" { (text) } } }
}

fn csrf_field(view: &View<'_>) -> Markup {
    html! { input type="hidden" name="csrf" value=(view.csrf); }
}

/// The overview: whether processing runs, the gates (`None`: the inbox
/// keeps none), counts, a chart of them, the dead letters' breakdown.
pub(super) fn overview(
    view: &View<'_>,
    stats: &InboxStats,
    breakdown: &BTreeMap<(String, String), u64>,
    sample_cut: bool,
    notice: Option<&str>,
    activity: &Activity,
    gates: Option<&[Gate]>,
) -> Markup {
    let base = view.base;
    let bars: [(&str, u64, &str); 5] = [
        ("due", stats.due, "#2457c5"),
        (
            "waiting",
            stats.pending.saturating_sub(stats.due),
            "#7a8fb8",
        ),
        ("in flight", stats.in_flight, "#1a7f37"),
        ("dead", stats.dead, "#b42318"),
        ("completed", stats.completed, "#9aa4b2"),
    ];
    let top = bars.iter().map(|b| b.1).max().unwrap_or(0).max(1);
    let content = html! {
        div #live {
            h1 { "Overview" }
            (notice_box(notice))
            (gates::processing(view, stats.paused))
            @if let Some(gates) = gates { (gates::panel(view, gates)) }
            div.cards {
                div.card { div.n { (stats.pending) } div.l { "depth (pending)" } }
                div.card { div.n { (stats.due) } div.l { "due now" } }
                div.card { div.n { (stats.oldest_due_age.map_or_else(|| "—".to_owned(), age)) } div.l { "oldest due waits" } }
                div.card { div.n { (stats.in_flight) } div.l { "in flight" } }
                div.card.bad[stats.dead > 0] { div.n { a href={ (base) "/dead" } { (stats.dead) } } div.l { "dead letters" } }
                div.card { div.n { (stats.completed) } div.l { "completed (kept)" } }
            }
            h2 { "Events by state" }
            div.panel.chart-panel {
                svg.chart role="img" aria-label="events by state" viewBox="0 0 520 150" width="520" height="150" xmlns="http://www.w3.org/2000/svg" {
                    @for (i, (label, n, colour)) in bars.iter().enumerate() {
                        @let h = (*n as f64 / top as f64 * 100.0).round();
                        @let x = 20 + i * 100;
                        rect x=(x) y=(format!("{:.0}", 115.0 - h)) width="60" height=(format!("{h:.0}")) fill=(colour) {}
                        text x=(x + 30) y="132" text-anchor="middle" { (label) }
                        text x=(x + 30) y=(format!("{:.0}", 110.0 - h)) text-anchor="middle" { (n) }
                    }
                }
            }
            h2 { "Activity, last hour" }
            (activity_chart(activity))
            h2 { "Dead letters by scheme and event type" }
            @if breakdown.is_empty() {
                p.muted { "No dead letters." }
            } @else {
                table {
                    thead { tr { th { "scheme" } th { "event type" } th { "dead" } } }
                    tbody {
                        @for ((scheme, kind), n) in breakdown {
                            tr {
                                td { (scheme) }
                                td { @if kind.is_empty() { span.muted { "(none)" } } @else { (kind) } }
                                td { a href={ (base) "/dead?" (encode(&[("scheme", scheme), ("event_type", kind)])) } { (n) } }
                            }
                        }
                    }
                }
                @if sample_cut { p.muted { "Of the oldest 250 dead letters." } }
            }
        }
        (super::retention::duplicates(view.recognised))
        @if view.admin {
            h2 { "Purge completed events" }
            form.panel.filters method="post" action={ (base) "/purge" } {
                (csrf_field(view))
                label { "completed more than … ago" input type="text" name="older_than" value=(duration_text(view.min_purge_age)) required; }
                label.check {
                    input type="checkbox" name="force" value="on";
                    " force: also younger than " (duration_text(view.min_purge_age)) " (retries of purged deliveries run again)"
                }
                button.danger type="submit" data-confirm="Delete the completed events older than this? A sender's retry of a purged delivery is processed again." { "Purge" }
            }
        }
    };
    layout(
        base,
        "Overview",
        Some((view, "overview")),
        view.refresh_secs,
        &content,
    )
}

/// A series of [`activity_chart`]: class, label, count of a minute.
type Series = (
    &'static str,
    &'static str,
    fn(&crate::inbox::ActivityMinute) -> u64,
);

/// The series of [`activity_chart`].
const ACTIVITY_SERIES: [Series; 3] = [
    ("accepted", "accepted", |m| m.accepted),
    ("completed", "completed", |m| m.completed),
    ("failed", "failed (retried or dead-lettered)", |m| m.failed),
];

/// Accepted, completed and failed per minute as three lines (server-rendered
/// SVG, coloured by the stylesheet), with a legend, a `<title>`/`<desc>`
/// summary, and the busy minutes as a table for screen readers and tests
/// (`data-*` attributes carry the counts).
fn activity_chart(activity: &Activity) -> Markup {
    const LEFT: f64 = 44.0;
    const WIDTH: f64 = 566.0;
    const TOP: f64 = 10.0;
    const HEIGHT: f64 = 130.0;
    let peak = activity.peak().max(1);
    let n = activity.minutes.len();
    let step = if n > 1 { WIDTH / (n - 1) as f64 } else { 0.0 };
    let x = |i: usize| LEFT + i as f64 * step;
    let y = |count: u64| TOP + HEIGHT - count as f64 / peak as f64 * HEIGHT;
    let (accepted, completed, failed) = activity.totals();
    let summary = format!(
        "Over the last {n} minutes: {accepted} accepted, {completed} completed, {failed} failed; \
         at most {peak} in one minute."
    );
    let busy: Vec<(usize, &crate::inbox::ActivityMinute)> = activity
        .minutes
        .iter()
        .enumerate()
        .filter(|(_, m)| m.accepted + m.completed + m.failed > 0)
        .collect();
    html! {
        div.panel.chart-panel.activity-panel #activity data-accepted=(accepted) data-completed=(completed) data-failed=(failed) {
            ul.legend {
                @for (class, label, _) in ACTIVITY_SERIES {
                    li { span.swatch.(class) {} (label) }
                }
            }
            svg.chart.activity role="img" aria-labelledby="activity-title activity-desc" viewBox="0 0 620 170" width="620" height="170" xmlns="http://www.w3.org/2000/svg" {
                title #activity-title { "Accepted, completed and failed events per minute" }
                desc #activity-desc { (summary) }
                line.axis x1=(LEFT) y1=(TOP + HEIGHT) x2=(LEFT + WIDTH) y2=(TOP + HEIGHT) {}
                line.grid x1=(LEFT) y1=(TOP) x2=(LEFT + WIDTH) y2=(TOP) {}
                text.tick x=(LEFT - 6.0) y=(TOP + 4.0) text-anchor="end" { (peak) }
                text.tick x=(LEFT - 6.0) y=(TOP + HEIGHT + 4.0) text-anchor="end" { "0" }
                text.tick x=(LEFT) y=(TOP + HEIGHT + 18.0) text-anchor="start" { "−" (n) " min" }
                text.tick x=(LEFT + WIDTH) y=(TOP + HEIGHT + 18.0) text-anchor="end" { "now" }
                @for (class, _, count) in ACTIVITY_SERIES {
                    @let points = activity.minutes.iter().enumerate().map(|(i, m)| format!("{:.1},{:.1}", x(i), y(count(m)))).collect::<Vec<_>>().join(" ");
                    polyline.series.(class) points=(points) data-series=(class) data-total=(activity.minutes.iter().map(count).sum::<u64>()) {}
                }
            }
            details.activity-table #activity-minutes {
                summary { "Per minute (" (busy.len()) " busy of " (n) ")" }
                @if busy.is_empty() {
                    p.muted { "No activity in the last hour." }
                } @else {
                    table {
                        thead { tr { th { "minute (UTC)" } th { "accepted" } th { "completed" } th { "failed" } } }
                        tbody {
                            @for (_, m) in &busy {
                                tr data-minute=(m.start.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())) {
                                    td { (clock(m.start)) }
                                    td { (m.accepted) } td { (m.completed) } td { (m.failed) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `HH:MM` (UTC) of a time.
fn clock(at: SystemTime) -> String {
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format!("{:02}:{:02}", secs / 3600 % 24, secs / 60 % 60)
}

/// The dead-letter list with its filter, selection and actions.
pub(super) fn dead_list(
    view: &View<'_>,
    params: &ListParams<'_>,
    page: &ListPage,
    notice: Option<&str>,
) -> Markup {
    let base = view.base;
    let back = params.query();
    let content = html! {
        h1 { "Dead letters" }
        form.filters.panel method="get" action={ (base) "/dead" } {
            label { "scheme" input type="text" name="scheme" value=(params.scheme); }
            label { "event type" input type="text" name="event_type" value=(params.event_type); }
            label { "delivery id or key" input type="text" name="delivery_id" value=(params.delivery_id); }
            label { "received from (UTC)" input type="datetime-local" name="from" value=(params.from); }
            label { "until (UTC)" input type="datetime-local" name="until" value=(params.until); }
            label.search { "search " small.muted { "data.object.customer = cus_123 and error ~ 502" } input type="search" name="q" value=(params.q) placeholder="payload.path = value and error ~ text"; }
            button type="submit" { "Filter" }
            a.button.secondary href={ (base) "/dead" } { "Clear" }
        }
        @if view.admin && params.delivery_id.is_empty() {
            div.actions {
                a.button.secondary href={ (base) "/dead/bulk?" (params.bulk_query("replay")) } {
                    "Replay all " @if params.filtered() { "matching" } @else { "dead letters" } "…"
                }
                a.button.secondary href={ (base) "/dead/bulk?" (params.bulk_query("discard")) } {
                    "Discard all " @if params.filtered() { "matching" } @else { "dead letters" } "…"
                }
            }
        }
        div #live {
            (notice_box(notice))
            @if page.items.is_empty() {
                p.muted { "No dead letters" @if params.filtered() || !params.delivery_id.is_empty() { " match this filter" } "." }
            } @else {
                @let table = dead_table(view, page);
                @if view.admin {
                    form method="post" action={ (base) "/replay" } {
                        (csrf_field(view))
                        input type="hidden" name="back" value=(back);
                        div.actions {
                            button type="submit" formaction={ (base) "/replay" } data-needs-selection { "Replay selected (" span data-selected-count { "0" } ")" }
                            button.danger type="submit" formaction={ (base) "/discard" } data-needs-selection data-confirm="Discard the selected dead letters for good?" { "Discard selected" }
                        }
                        (table)
                    }
                } @else {
                    (table)
                }
            }
            @if !page.scanned_all { p.muted { "The search for this delivery id stopped after 10,000 dead letters (the most one page examines)." } }
            @if let Some(next) = &page.next {
                p { a.button.secondary rel="next" href={ (base) "/dead" (back) "&" (encode(&[("after", &next.to_string())])) } {
                    @if page.scanned_all { "Next page →" } @else { "Continue the search →" }
                } }
            }
            p.muted { "Oldest first (the store's order)." }
        }
    };
    // A delivery-id lookup scans up to 10,000 dead letters: not on a timer.
    let refresh = if params.delivery_id.is_empty() {
        view.refresh_secs
    } else {
        0
    };
    layout(
        base,
        "Dead letters",
        Some((view, "dead")),
        refresh,
        &content,
    )
}

fn dead_table(view: &View<'_>, page: &ListPage) -> Markup {
    let base = view.base;
    html! {
                    table #dead-letters {
                        thead { tr {
                            @if view.admin { th { input type="checkbox" data-select-all aria-label="select all"; } }
                            th { "received" } th { "scheme" } th { "event type" } th { "delivery id" } th { "attempts" } th { "last error" } th { "dead since" }
                        } }
                        tbody {
                            @for dead in &page.items {
                                tr.dead-letter {
                                    @if view.admin { td { input type="checkbox" name="key" value=(dead.meta.key) aria-label="select"; } }
                                    td { a.open href={ (base) "/dead/item?" (encode(&[("key", &dead.meta.key)])) } { (when(dead.meta.received_at)) } }
                                    td { (dead.meta.scheme) }
                                    td.type { (dead.meta.event_type.as_deref().unwrap_or("")) }
                                    td { code { (dead.meta.delivery_id.as_deref().unwrap_or("")) } }
                                    td { (dead.attempts) }
                                    td.err title=(dead.last_error.as_deref().unwrap_or("")) { (dead.last_error.as_deref().unwrap_or("")) }
                                    td { (ago(dead.dead_at)) }
                                }
                            }
                        }
                    }
    }
}

/// The body as shown: JSON (its fields redacted) re-indented, text, or a
/// note; capped at `cap` bytes (`true` when cut).
fn body_text(body: &ShownBody<'_>, cap: usize) -> (String, bool) {
    match body {
        ShownBody::Json { text, .. } => indent_json(text, cap),
        ShownBody::Text(text) => {
            let shown = &text[..floor_char_boundary(text, cap)];
            (shown.to_owned(), shown.len() < text.len())
        }
        ShownBody::Binary { len } => (
            format!("(binary, {len} bytes: admins can use the raw download)"),
            false,
        ),
        other => (format!("({})", other.note().unwrap_or_default()), false),
    }
}

/// The kept headers, as [`crate::redact`] lets them be shown.
fn headers_table(headers: &[ShownHeader]) -> Markup {
    html! {
        @if headers.is_empty() {
            p.muted { "No headers are shown (the receiver keeps the ones it was told to)." }
        } @else {
            table.headers {
                @for header in headers {
                    tr { th { (header.name) } td { @if header.masked { span.redacted { (header.value) } } @else { code { (header.value) } } } }
                }
            }
        }
    }
}

/// The body section: `None` when the viewer may not see bodies; the raw
/// download link when `raw`.
fn body_section(
    base: &str,
    len: usize,
    body: Option<&ShownBody<'_>>,
    cap: usize,
    raw: Option<String>,
) -> Markup {
    html! {
        h2 { "Body " span.muted { "(" (len) " bytes)" } }
        @if let Some(body) = body {
            @let (text, cut) = body_text(body, cap);
            @if cut { p.muted { "Cut at " (cap) " bytes." } }
            @if let ShownBody::Json { redacted, .. } = body {
                @if *redacted > 0 { p.muted #redacted-fields { (redacted) " field(s) redacted (masked or left out)." } }
            }
            @if let ShownBody::NotParsed { .. } = body {
                p.muted #not-parsed { "This JSON body is longer than the console parses to redact its fields (body_cap), so it is not shown here." }
            }
            pre #body { (text) }
            @if let Some(query) = raw {
                p { a.button.secondary href={ (base) "/dead/raw?" (query) } download { "Download raw body (exact bytes, not redacted; admins only)" } }
            }
        } @else {
            p.muted { "Bodies are shown to admins only." }
        }
    }
}

/// The largest character boundary of `text` at most `at`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut end = at.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// Re-indents valid JSON text as sent: keys keep their order, and strings
/// and numbers their exact spelling (a parse and re-print would sort keys
/// and normalise numbers). Stops once the output reaches `cap` bytes, cut
/// at a character boundary (`true`): indentation multiplies a deeply nested
/// document's size (a 1 MiB one 120 deep is 128 MB indented), so the work
/// and memory are bounded by the cap, not by the body.
fn indent_json(text: &str, cap: usize) -> (String, bool) {
    // The output passes the cap by at most one step (a character, `": "`,
    // or a newline's indent, which stops growing at the cap).
    let mut out = String::with_capacity(text.len().saturating_mul(2).min(cap.saturating_add(8)));
    let mut depth = 0_usize;
    let mut in_string = false;
    let mut escaped = false;
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            if out.len() > cap {
                break;
            }
            out.push_str("  ");
        }
    };
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if out.len() > cap {
            break;
        }
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                    chars.next();
                }
                if matches!(chars.peek(), Some('}' | ']')) {
                    continue;
                }
                depth += 1;
                newline(&mut out, depth);
            }
            '}' | ']' => {
                if !(out.ends_with('{') || out.ends_with('[')) {
                    depth = depth.saturating_sub(1);
                    newline(&mut out, depth);
                }
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_ascii_whitespace() => {}
            c => out.push(c),
        }
    }
    if out.len() > cap {
        out.truncate(floor_char_boundary(&out, cap));
        return (out, true);
    }
    (out, false)
}

/// One dead letter.
pub(super) fn detail(
    view: &View<'_>,
    dead: &DeadLetter,
    headers: &[ShownHeader],
    body: Option<&ShownBody<'_>>,
    raw: bool,
    cap: usize,
) -> Markup {
    let base = view.base;
    let meta = &dead.meta;
    let key_query = encode(&[("key", &meta.key)]);
    let content = html! {
        p { a href={ (base) "/dead" } { "← Dead letters" } }
        h1 { "Dead letter " code.key { (meta.key) } }
        @if view.admin {
            div.actions {
                form.inline method="post" action={ (base) "/replay" } {
                    (csrf_field(view))
                    input type="hidden" name="key" value=(meta.key);
                    input type="hidden" name="scope" value="one";
                    button #replay type="submit" { "Replay" }
                }
                form.inline method="post" action={ (base) "/discard" } {
                    (csrf_field(view))
                    input type="hidden" name="key" value=(meta.key);
                    input type="hidden" name="scope" value="one";
                    button.danger #discard type="submit" data-confirm="Discard this dead letter for good?" { "Discard" }
                }
            }
        }
        div.panel {
            dl {
                dt { "scheme" } dd { (meta.scheme) }
                dt { "event type" } dd.type { (meta.event_type.as_deref().unwrap_or("—")) }
                dt { "delivery id" } dd { code { (meta.delivery_id.as_deref().unwrap_or("—")) } }
                dt { "matched key" } dd { @if meta.matched_key.is_empty() { "—" } @else { (meta.matched_key) } }
                dt { "received" } dd { (when(meta.received_at)) " (" (ago(meta.received_at)) ")" }
                dt { "signed at" } dd { (signed(meta.signed_at)) }
                dt { "attempts" } dd { (dead.attempts) }
                dt { "dead since" } dd { (when(dead.dead_at)) " (" (ago(dead.dead_at)) ")" }
                dt { "next attempt" } dd { "none: dead letters wait for a replay" }
            }
        }
        h2 { "Last error" }
        pre.error { (dead.last_error.as_deref().unwrap_or("—")) }
        h2 { "Headers" }
        (headers_table(headers))
        (body_section(base, dead.body.len(), body, cap, raw.then_some(key_query)))
    };
    layout(base, "Dead letter", Some((view, "dead")), 0, &content)
}

/// A state's name on the tabs.
fn state_label(state: DeliveryState) -> &'static str {
    match state {
        DeliveryState::Due => "Due",
        DeliveryState::Retrying => "Retrying",
        DeliveryState::InFlight => "In flight",
        DeliveryState::Dead => "Dead",
        DeliveryState::Completed => "Completed",
    }
}

/// The deliveries in one state: tabs for the states, the filters, the
/// page, its order and the next page's link.
pub(super) fn deliveries(
    view: &View<'_>,
    params: &ListParams<'_>,
    filter: &DeliveryFilter,
    page: &DeliveryPage,
) -> Markup {
    let base = view.base;
    let state = filter.state.as_str();
    let order = filter.order.as_str();
    // The filters (without the cursor), then state and order.
    let filters = params.query();
    let link = |state: &str, order: &str| {
        format!(
            "{base}/deliveries{filters}{}{}",
            if filters.len() > 1 { "&" } else { "" },
            encode(&[("state", state), ("order", order)])
        )
    };
    let content = html! {
        h1 { "Deliveries" }
        nav.tabs #states aria-label="states" {
            @for tab in DeliveryState::ALL {
                a.tab.here[tab == filter.state] data-state=(tab.as_str())
                    href=(link(tab.as_str(), DeliveryOrder::NewestFirst.as_str()))
                    aria-current=[(tab == filter.state).then_some("page")] { (state_label(tab)) }
            }
        }
        form.filters.panel method="get" action={ (base) "/deliveries" } {
            input type="hidden" name="state" value=(state);
            input type="hidden" name="order" value=(order);
            label { "scheme" input type="text" name="scheme" value=(params.scheme); }
            label { "event type" input type="text" name="event_type" value=(params.event_type); }
            label { "delivery id" input type="text" name="delivery_id" value=(params.delivery_id); }
            label { "received from (UTC)" input type="datetime-local" name="from" value=(params.from); }
            label { "until (UTC)" input type="datetime-local" name="until" value=(params.until); }
            label.search { "search " small.muted { "data.object.customer = cus_123 and error ~ 502" } input type="search" name="q" value=(params.q) placeholder="payload.path = value and error ~ text"; }
            button type="submit" { "Filter" }
            a.button.secondary href=(link(state, order)) { "Clear" }
        }
        div #live {
            p.muted {
                @if filter.order == DeliveryOrder::NewestFirst {
                    "Newest first · " a #order href=(link(state, "oldest")) { "oldest first" }
                } @else {
                    "Oldest first · " a #order href=(link(state, "newest")) { "newest first" }
                }
                @if filter.state == DeliveryState::Dead {
                    " · replay or discard them on the " a href={ (base) "/dead" } { "dead letters" } " page"
                }
            }
            @if page.items.is_empty() {
                p.muted { "No " (state_label(filter.state).to_lowercase()) " deliveries" @if params.filtered() || !params.delivery_id.is_empty() { " match this filter" } "." }
            } @else {
                table #deliveries data-state=(state) {
                    thead { tr {
                        th { "received" } th { "scheme" } th { "event type" } th { "delivery id" } th { "attempts" } th { "last error" }
                        th { @match filter.state {
                            DeliveryState::Due | DeliveryState::Retrying => "due",
                            DeliveryState::InFlight => "lease ends",
                            DeliveryState::Dead => "dead since",
                            DeliveryState::Completed => "completed",
                        } }
                    } }
                    tbody {
                        @for one in &page.items {
                            tr.delivery data-key=(one.meta.key) {
                                td { a.open href={ (base) "/deliveries/item?" (encode(&[("key", &one.meta.key)])) } { (when(one.meta.received_at)) } }
                                td { (one.meta.scheme) }
                                td.type { (one.meta.event_type.as_deref().unwrap_or("")) }
                                td { code { (one.meta.delivery_id.as_deref().unwrap_or("")) } }
                                td { (one.attempts) }
                                td.err title=(one.last_error.as_deref().unwrap_or("")) { (one.last_error.as_deref().unwrap_or("")) }
                                td { (one.due_at.or(one.lease_until).map_or_else(|| ago(one.updated_at), when)) }
                            }
                        }
                    }
                }
            }
            @if let Some(next) = &page.next {
                p { a.button.secondary rel="next" href={ (link(state, order)) "&" (encode(&[("after", &next.to_string())])) } { "Next page →" } }
            }
        }
    };
    layout(
        base,
        "Deliveries",
        Some((view, "deliveries")),
        view.refresh_secs,
        &content,
    )
}

/// One delivery in any state; the body only with `show_body`.
pub(super) fn delivery(
    view: &View<'_>,
    one: &Delivery,
    history: &[Attempt],
    headers: &[ShownHeader],
    body: Option<&ShownBody<'_>>,
    cap: usize,
) -> Markup {
    let base = view.base;
    let meta = &one.meta;
    let back = format!(
        "{base}/deliveries?{}",
        encode(&[("state", one.state.as_str())])
    );
    let content = html! {
        p { a href=(back) { "← " (state_label(one.state)) " deliveries" } }
        h1 { "Delivery " code.key { (meta.key) } }
        @if one.state == DeliveryState::Dead {
            p { a.button.secondary href={ (base) "/dead/item?" (encode(&[("key", &meta.key)])) } { "Open as a dead letter (replay, discard)" } }
        }
        div.panel {
            dl {
                dt { "state" } dd #state data-state=(one.state.as_str()) { (state_label(one.state)) }
                dt { "scheme" } dd { (meta.scheme) }
                dt { "event type" } dd.type { (meta.event_type.as_deref().unwrap_or("—")) }
                dt { "delivery id" } dd { code { (meta.delivery_id.as_deref().unwrap_or("—")) } }
                dt { "matched key" } dd { @if meta.matched_key.is_empty() { "—" } @else { (meta.matched_key) } }
                dt { "received" } dd { (when(meta.received_at)) " (" (ago(meta.received_at)) ")" }
                dt { "signed at" } dd { (signed(meta.signed_at)) }
                dt { "attempts" } dd { (one.attempts) }
                @if let Some(due) = one.due_at { dt { "due" } dd { (when(due)) } }
                @if let Some(until) = one.lease_until { dt { "lease ends" } dd { (when(until)) } }
                dt { "last change" } dd { (when(one.updated_at)) " (" (ago(one.updated_at)) ")" }
            }
        }
        h2 { "Attempts" }
        (timeline(history))
        @if let Some(error) = one.last_error.as_deref() {
            h2 {
                "Last error"
                @if one.state == DeliveryState::Completed { " " small.muted { "(an earlier attempt's; the event completed since)" } }
            }
            pre.error { (error) }
        }
        h2 { "Headers" }
        (headers_table(headers))
        (body_section(base, one.body.len(), body, cap, None))
    };
    layout(base, "Delivery", Some((view, "deliveries")), 0, &content)
}

/// The attempt history, oldest first: one row per attempt, and one per
/// number missing between two kept ones (a worker that stopped, or whose
/// process died, without reporting).
fn timeline(history: &[Attempt]) -> Markup {
    html! {
        @if history.is_empty() {
            p.muted { "No attempt recorded yet (or the inbox keeps no history)." }
        } @else {
            table.attempts #attempts {
                thead { tr { th { "#" } th { "outcome" } th { "started" } th { "took" } th { "worker" } th { "error" } } }
                tbody {
                    @for (i, attempt) in history.iter().enumerate() {
                        @let previous = i.checked_sub(1).map(|p| history[p].number);
                        @if let Some(p) = previous.filter(|p| attempt.number > p + 1) {
                            tr.gap { td { (p + 1) @if attempt.number > p + 2 { "–" (attempt.number - 1) } } td colspan="5" { "no report: the worker stopped or its process died; the lease ran out and the event was leased again" } }
                        }
                        tr data-outcome=(attempt.outcome.as_str()) {
                            td { (attempt.number) }
                            td { span class={ "outcome " (attempt.outcome.as_str()) } { (attempt.outcome.as_str()) } }
                            td { (when(attempt.started_at)) }
                            td { (attempt.duration().as_millis()) " ms" }
                            td { code { (attempt.worker) } }
                            td.err title=(attempt.error.as_deref().unwrap_or("")) { (attempt.error.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        }
    }
}

/// How far the count before a bulk action got.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Counted {
    /// Every dead letter was examined.
    All,
    /// More than the bulk limit match.
    Limited,
    /// The search stopped after examining the oldest 10,000.
    Capped,
}

/// "Replay/discard all matching": the count first, then the button.
pub(super) fn bulk_confirm(
    view: &View<'_>,
    action: &str,
    params: &ListParams<'_>,
    count: usize,
    counted: Counted,
    limit: u32,
) -> Markup {
    let more = counted == Counted::Limited;
    let base = view.base;
    let content = html! {
        h1 { (if action == "replay" { "Replay" } else { "Discard" }) " dead letters" }
        div.panel {
            p {
                @if more { "More than " (limit) } @else { (count) }
                " dead letters match"
                @if !params.scheme.is_empty() { " scheme " code { (params.scheme) } }
                @if !params.event_type.is_empty() { " event type " code { (params.event_type) } }
                @if !params.from.is_empty() { " received from " code { (params.from) } }
                @if !params.until.is_empty() { " until " code { (params.until) } }
                @if !params.q.trim().is_empty() { " the search " code #search { (params.q) } }
                @if !params.filtered() { " (no filter: all of them)" }
                @if counted == Counted::Capped { " among the oldest 10,000 examined" }
                "."
            }
            @if more { p.warn { "One action affects at most " (limit) " (the oldest first): run it again for the rest." } }
            @if counted == Counted::Capped { p.warn { "The count stops after examining the oldest 10,000 dead letters; the action goes on past them, up to " (limit) "." } }
            @if count == 0 {
                p { a href={ (base) "/dead" (params.query()) } { "Back" } }
            } @else if view.admin {
                form method="post" action={ (base) "/bulk" } {
                    (csrf_field(view))
                    input type="hidden" name="action" value=(action);
                    input type="hidden" name="scheme" value=(params.scheme);
                    input type="hidden" name="event_type" value=(params.event_type);
                    input type="hidden" name="from" value=(params.from);
                    input type="hidden" name="until" value=(params.until);
                    input type="hidden" name="q" value=(params.q);
                    input type="hidden" name="back" value=(params.query());
                    div.actions {
                        button.danger[action == "discard"] #confirm type="submit" { (if action == "replay" { "Replay " } else { "Discard " }) (count) " dead letters" }
                        a.button.secondary href={ (base) "/dead" (params.query()) } { "Cancel" }
                    }
                }
            }
        }
    };
    layout(base, "Confirm", Some((view, "dead")), 0, &content)
}

/// A stored `signed_at` (epoch seconds, from the sender) as a time; "—"
/// when absent or beyond what the clock holds (the Redis inbox stores any
/// `u64`, and adding one above `i64::MAX` seconds to the epoch panics).
fn signed(at: Option<u64>) -> String {
    at.and_then(|secs| UNIX_EPOCH.checked_add(Duration::from_secs(secs)))
        .map_or_else(|| "—".to_owned(), when)
}

/// `2026-12-01 15:57:21 UTC`.
fn when(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rest = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60
    )
}

/// A duration in its largest whole unit, as the purge form reads it:
/// `7d`, `12h`, `30m`, `90s`.
pub(super) fn duration_text(d: Duration) -> String {
    crate::inbox::actions::duration_text(d)
}

/// `3 min ago`.
fn ago(time: SystemTime) -> String {
    match SystemTime::now().duration_since(time) {
        Ok(elapsed) => format!("{} ago", age(elapsed)),
        Err(_) => "just now".to_owned(),
    }
}

pub(super) fn age(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s} s"),
        60..3_600 => format!("{} min", s / 60),
        3_600..86_400 => format!("{} h {} min", s / 3_600, s % 3_600 / 60),
        _ => format!("{} d {} h", s / 86_400, s % 86_400 / 3_600),
    }
}

mod gates;
mod log;
pub(super) use log::action_log;

#[cfg(test)]
mod tests;
