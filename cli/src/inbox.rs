//! `webhooks inbox`: operate a durable inbox over webhooks-core's
//! `inbox_from_url` and the `Inbox` trait: counts, listings, one delivery,
//! replay and discard of dead letters (one, or every one matching a filter,
//! after confirmation), purge, pause and resume (the whole inbox, or the
//! events one selector matches, and the gates: module `gates`), a live tail,
//! migrations, and the action log (each change made here is recorded in
//! it, as `--as` or `$USER@host`, through `cli`).
//!
//! The store URL comes from `--url` or `WEBHOOKS_INBOX_URL`; it may hold a
//! password, so it is never printed.

use std::io::IsTerminal as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand};
use webhooks_core::inbox::bulk::{self, BulkAction};
use webhooks_core::inbox::{
    Action as LoggedAction, ActionKind, ActionPage, DeadLetterFilter, Delivery, DeliveryFilter,
    DeliveryState, Inbox, InboxStats, Search, Transition, inbox_from_url,
};

use webhooks_core::redact::{DEFAULT_BODY_LIMIT, EventRedaction, Redaction, ShownBody, Surface};

use crate::error::Failure;
use crate::output::{BAD, BOLD, DIM, HINT, OK, Out, paint};

mod gates;

const EXAMPLES: &str = "\
Examples:
  export WEBHOOKS_INBOX_URL=postgres://app@db/app
  webhooks inbox stats
  webhooks inbox ls --state dead --scheme stripe
  webhooks inbox ls --where 'data.object.customer = cus_123 and error ~ 502'
  webhooks inbox show 'ns:stripe:evt_123'
  webhooks inbox replay --all --scheme stripe --dry-run
  webhooks inbox replay --all --scheme stripe --yes
  webhooks inbox purge --older-than 14d --yes
  webhooks inbox pause --only 'stripe:invoice.*'
  webhooks inbox gates
  webhooks inbox actions --limit 20
  webhooks inbox --url sqlite://inbox.db tail";

/// `webhooks inbox`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub(crate) struct InboxArgs {
    /// The inbox's store URL (postgres://, mysql://, sqlite://, redis://, nats://…;
    /// see inbox_from_url). Never printed.
    #[arg(
        long,
        env = "WEBHOOKS_INBOX_URL",
        hide_env_values = true,
        global = true
    )]
    url: Option<String>,
    /// Who the action log records for replay, discard, purge, pause and
    /// resume (default: `$USER@host`).
    #[arg(long = "as", value_name = "WHO", env = "WEBHOOKS_ACTOR", global = true)]
    actor: Option<String>,
    #[command(subcommand)]
    action: Action,
}

/// What to select, for `ls` and the bulk actions.
#[derive(Debug, Clone, Args)]
struct Filter {
    /// Only this scheme (`stripe`…).
    #[arg(long)]
    scheme: Option<String>,
    /// Only this event type.
    #[arg(long)]
    event_type: Option<String>,
    /// Only deliveries received at most this long ago (`30m`, `12h`, `7d`).
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    since: Option<Duration>,
    /// Only those matching a search: payload values and the last error,
    /// terms joined by `and` (`data.object.customer = cus_123`, `!=`, `^=`
    /// for a prefix, `error ~ timed out`).
    #[arg(long = "where", value_name = "SEARCH", value_parser = parse_search)]
    search: Option<Search>,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Queue depth, oldest due age, in-flight, dead and completed counts.
    Stats,
    /// List deliveries in one state (dead letters by default), newest first.
    Ls {
        /// due, retrying, in_flight, dead, completed.
        #[arg(long, default_value = "dead")]
        state: DeliveryState,
        #[command(flatten)]
        filter: Filter,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// One delivery: its metadata, headers and body, redacted as the
    /// console and the admin API redact them (credential-named headers and
    /// JSON fields masked; JSON bodies over 64 KiB not shown).
    Show {
        /// The delivery's key (from `ls`).
        key: String,
        /// Mask this JSON field too: keys from the root joined by `.`
        /// (`data.object.customer.email`; arrays stepped through). Repeatable.
        #[arg(long, value_name = "PATH")]
        redact_field: Vec<String>,
        /// Mask this header too (your verifier's signature header, say). Repeatable.
        #[arg(long, value_name = "NAME", value_parser = parse_header_name)]
        redact_header: Vec<http::HeaderName>,
    },
    /// Make dead letters pending again, with a fresh attempt budget.
    Replay(Bulk),
    /// Delete dead letters.
    Discard(Bulk),
    /// Delete the events completed more than --older-than ago.
    Purge {
        /// `7d`, `12h`, `30m`, or seconds; at least 4d (the longest provider
        /// retry window plus a day) unless --force.
        #[arg(long, value_parser = parse_age)]
        older_than: Duration,
        /// Say what would happen, change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Do it without asking.
        #[arg(long)]
        yes: bool,
        /// Purge younger than the providers' retry windows too (a provider's
        /// retry of a purged delivery is stored and runs again).
        #[arg(long)]
        force: bool,
    },
    /// Stop every worker from starting new attempts (deliveries are still
    /// received); with --only, only on the events a selector matches.
    Pause {
        /// Only the events this selector matches: `scheme:type` with `*`
        /// wildcards (`stripe:invoice.*`, `*:invoice.*`, `shopify`); the
        /// others flow as before.
        #[arg(long, value_name = "SELECTOR")]
        only: Option<String>,
    },
    /// Let the workers run again; with --only, on the events of a selector
    /// paused with `pause --only`.
    Resume {
        /// Only the events this selector matches (as `pause --only` took it).
        #[arg(long, value_name = "SELECTOR")]
        only: Option<String>,
    },
    /// The gates: the selectors paused (`pause --only`) or limited (the
    /// workers' limits), with the permits held now and the limits.
    Gates,
    /// Print the counts, and each new dead letter, until Ctrl-C.
    Tail {
        /// Seconds between polls.
        #[arg(long, default_value_t = 2)]
        interval: u64,
    },
    /// Create the store's tables if missing (opening does it), and report.
    Migrate,
    /// The action log, newest first: who replayed, discarded, purged,
    /// paused or resumed what, when, through what, and how many events.
    Actions {
        /// At most this many (1 to 500).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=500))]
        limit: u32,
        /// Entries older than this one (the `next` a previous page printed).
        #[arg(long, value_name = "ID")]
        before: Option<u64>,
    },
}

/// Keys, or every dead letter matching a filter.
#[derive(Debug, Args)]
struct Bulk {
    /// The dead letters' keys.
    keys: Vec<String>,
    /// Every dead letter matching the filter instead.
    #[arg(long, conflicts_with = "keys")]
    all: bool,
    #[command(flatten)]
    filter: Filter,
    /// Say what would happen, change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Do it without asking.
    #[arg(long)]
    yes: bool,
    /// With --all: change at most this many (the oldest first; run again
    /// for the rest).
    #[arg(long, default_value_t = bulk::DEFAULT_BULK_LIMIT, requires = "all")]
    limit: u32,
}

fn parse_header_name(s: &str) -> Result<http::HeaderName, String> {
    http::HeaderName::from_bytes(s.as_bytes()).map_err(|_| format!("not a header name: {s:?}"))
}

fn parse_search(s: &str) -> Result<Search, String> {
    s.parse()
        .map_err(|e: webhooks_core::inbox::SearchError| e.to_string())
}

fn parse_age(s: &str) -> Result<Duration, String> {
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?}: expected a number and d, h, m or s"))?;
    let seconds = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{s:?}: expected a number and d, h, m or s")),
    };
    Ok(Duration::from_secs(n.saturating_mul(seconds)))
}

fn store_error(e: impl std::fmt::Display) -> Failure {
    Failure::usage(format!("inbox store: {e}"))
}

pub(crate) async fn run(args: InboxArgs, out: &Out) -> Result<(), Failure> {
    let url = args
        .url
        .ok_or_else(|| Failure::usage("no inbox URL: give --url or WEBHOOKS_INBOX_URL"))?;
    let inbox = inbox_from_url(&url)
        .await
        .map_err(|e| Failure::usage(format!("cannot open the inbox: {e}")))?;
    let who = args.actor.unwrap_or_else(default_actor);
    let log = Log {
        inbox: &inbox,
        who: &who,
        out,
    };
    match args.action {
        Action::Stats => stats(&inbox, out).await,
        Action::Ls {
            state,
            filter,
            limit,
        } => ls(&inbox, state, &filter, limit, out).await,
        Action::Show {
            key,
            redact_field,
            redact_header,
        } => {
            let redaction = Redaction::new().headers(redact_header).fields(redact_field);
            show(&inbox, &key, &redaction, out).await
        }
        Action::Replay(bulk) => bulk_action(&inbox, bulk, Op::Replay, &log).await,
        Action::Discard(bulk) => bulk_action(&inbox, bulk, Op::Discard, &log).await,
        Action::Purge {
            older_than,
            dry_run,
            yes,
            force,
        } => purge(&inbox, older_than, dry_run, yes, force, &log).await,
        Action::Pause { only: None } => pause(&inbox, true, &log).await,
        Action::Resume { only: None } => pause(&inbox, false, &log).await,
        Action::Pause { only: Some(only) } => gates::pause_only(&inbox, &only, true, &log).await,
        Action::Resume { only: Some(only) } => gates::pause_only(&inbox, &only, false, &log).await,
        Action::Gates => gates::list(&inbox, out).await,
        Action::Actions { limit, before } => actions(&inbox, before, limit, out).await,
        Action::Tail { interval } => tail(&inbox, Duration::from_secs(interval.max(1)), out).await,
        Action::Migrate => {
            // inbox_from_url created the tables when missing.
            match out.json {
                true => out.json(&serde_json::json!({"migrated": true})),
                false => out.line(format!(
                    "{} the inbox's tables are in place",
                    paint(OK, "✓")
                )),
            }
            Ok(())
        }
    }
}

fn stats_json(s: &InboxStats) -> serde_json::Value {
    serde_json::json!({
        "pending": s.pending,
        "due": s.due,
        "oldest_due_age_s": s.oldest_due_age.map(|d| d.as_secs()),
        "in_flight": s.in_flight,
        "dead": s.dead,
        "completed": s.completed,
        "paused": s.paused,
    })
}

fn stats_line(s: &InboxStats) -> String {
    let oldest = s
        .oldest_due_age
        .map(|d| format!(" (oldest {} s)", d.as_secs()))
        .unwrap_or_default();
    format!(
        "pending {} · due {}{oldest} · in flight {} · {} · completed {}{}",
        s.pending,
        s.due,
        s.in_flight,
        paint(
            if s.dead > 0 { BAD } else { OK },
            format!("dead {}", s.dead)
        ),
        s.completed,
        if s.paused {
            paint(HINT, " · PAUSED")
        } else {
            String::new()
        }
    )
}

async fn stats(inbox: &Arc<dyn Inbox>, out: &Out) -> Result<(), Failure> {
    let s = inbox.stats().await.map_err(store_error)?;
    match out.json {
        true => out.json(&stats_json(&s)),
        false => out.line(stats_line(&s)),
    }
    Ok(())
}

fn unix_ms(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis())
}

/// One delivery; with `shown`, its headers and body as `redaction` shows
/// them (the admin API's members: `body`, `body_redacted`, `body_base64`,
/// `body_omitted`).
fn delivery_json(d: &Delivery, shown: Option<&Redaction>) -> serde_json::Value {
    let mut value = serde_json::json!({
        "key": d.meta.key,
        "state": d.state.as_str(),
        "scheme": d.meta.scheme,
        "delivery_id": d.meta.delivery_id,
        "event_type": d.meta.event_type,
        "matched_key": d.meta.matched_key,
        "received_at": webhooks_core::testing::iso8601(u64::try_from(unix_ms(d.meta.received_at) / 1000).unwrap_or(0)),
        "signed_at": d.meta.signed_at,
        "attempts": d.attempts,
        "last_error": d.last_error,
    });
    if let Some(redaction) = shown {
        let event = event(redaction, d);
        value["headers"] = serde_json::json!(event.apply(&d.meta.headers));
        for (name, member) in event
            .body(&d.body, DEFAULT_BODY_LIMIT)
            .json_members(&d.body)
        {
            value[name] = member;
        }
    }
    value
}

fn event<'a>(redaction: &'a Redaction, d: &'a Delivery) -> EventRedaction<'a> {
    redaction.event(Surface::Cli, &d.meta.scheme, d.meta.event_type.as_deref())
}

/// Every delivery in `state` matching `filter`, at most `limit`.
async fn select(
    inbox: &Arc<dyn Inbox>,
    state: DeliveryState,
    filter: &Filter,
    limit: usize,
) -> Result<Vec<Delivery>, Failure> {
    let mut query = DeliveryFilter::state(state);
    query.scheme.clone_from(&filter.scheme);
    query.event_type.clone_from(&filter.event_type);
    query.received_from = filter.since.map(|age| SystemTime::now() - age);
    query.search.clone_from(&filter.search);
    let mut found = Vec::new();
    loop {
        query.limit = Some(u32::try_from((limit - found.len()).min(1000)).unwrap_or(1000));
        let page = inbox.deliveries(&query).await.map_err(store_error)?;
        found.extend(page.items);
        match page.next {
            Some(next) if found.len() < limit => query.after = Some(next),
            _ => break,
        }
    }
    found.truncate(limit);
    Ok(found)
}

async fn ls(
    inbox: &Arc<dyn Inbox>,
    state: DeliveryState,
    filter: &Filter,
    limit: usize,
    out: &Out,
) -> Result<(), Failure> {
    let found = select(inbox, state, filter, limit).await?;
    if out.json {
        out.json(&serde_json::Value::Array(
            found.iter().map(|d| delivery_json(d, None)).collect(),
        ));
        return Ok(());
    }
    if found.is_empty() {
        out.line(paint(DIM, format!("no {state} deliveries")));
    }
    for d in &found {
        let received = webhooks_core::testing::iso8601(
            u64::try_from(unix_ms(d.meta.received_at) / 1000).unwrap_or(0),
        );
        out.line(format!(
            "{}  {} {}  {}{}",
            paint(BOLD, &d.meta.key),
            d.meta.scheme,
            d.meta.event_type.as_deref().unwrap_or("-"),
            paint(DIM, format!("{received} · {} attempts", d.attempts)),
            d.last_error
                .as_deref()
                .map(|e| format!("  {}", paint(BAD, e)))
                .unwrap_or_default()
        ));
    }
    Ok(())
}

async fn show(
    inbox: &Arc<dyn Inbox>,
    key: &str,
    redaction: &Redaction,
    out: &Out,
) -> Result<(), Failure> {
    let delivery = inbox
        .delivery_get(key)
        .await
        .map_err(store_error)?
        .ok_or_else(|| Failure::usage("no delivery with that key"))?;
    let history = inbox.attempts(key).await.map_err(store_error)?;
    if out.json {
        let mut value = delivery_json(&delivery, Some(redaction));
        value["attempt_history"] = webhooks_core::inbox::attempts::attempts_json(&history);
        out.json(&value);
        return Ok(());
    }
    let value = delivery_json(&delivery, None);
    if let Some(map) = value.as_object() {
        for (k, v) in map {
            let v = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            out.line(format!("{:<13}{v}", paint(DIM, k)));
        }
    }
    for attempt in &history {
        let started = attempt
            .started_at
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        out.line(format!(
            "{}#{:<3} {:<12} {:>7} ms  started {started} ms  {}{}",
            paint(DIM, "attempt      "),
            attempt.number,
            attempt.outcome.as_str(),
            attempt.duration().as_millis(),
            attempt.worker,
            attempt
                .error
                .as_deref()
                .map(|e| format!("  {e}"))
                .unwrap_or_default()
        ));
    }
    let event = event(redaction, &delivery);
    for header in event.headers(&delivery.meta.headers) {
        out.line(format!(
            "{}{}: {}",
            paint(DIM, "header       "),
            header.name,
            header.value
        ));
    }
    out.line("");
    let body = event.body(&delivery.body, DEFAULT_BODY_LIMIT);
    match &body {
        ShownBody::Json { text, redacted } => {
            if *redacted > 0 {
                out.line(paint(DIM, format!("({redacted} field(s) redacted)")));
            }
            out.line(text.as_ref());
        }
        ShownBody::Text(text) => out.line(*text),
        other => out.line(paint(
            DIM,
            format!("({})", other.note().unwrap_or_default()),
        )),
    }
    Ok(())
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Replay,
    Discard,
}

impl Op {
    fn verb(self) -> &'static str {
        match self {
            Self::Replay => "replay",
            Self::Discard => "discard",
        }
    }
}

/// Asks before changing `n` events, unless `--yes`; without a terminal to
/// ask on, refuses.
fn confirm(question: &str, yes: bool) -> Result<bool, Failure> {
    if yes {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        return Err(Failure::usage(format!(
            "{question}: refusing without --yes (no terminal to ask on)"
        )));
    }
    eprint!("{question} [y/N] ");
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|e| Failure::usage(format!("cannot read the answer: {e}")))?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// Records the changes made here in the inbox's action log.
struct Log<'a> {
    inbox: &'a Arc<dyn Inbox>,
    who: &'a str,
    out: &'a Out,
}

impl Log<'_> {
    /// Records one action; a store that cannot is reported on stderr (the
    /// action stands).
    async fn record(&self, kind: ActionKind, target: String, count: u64) {
        let action = LoggedAction::new(kind, self.who)
            .via("cli")
            .target(target)
            .count(count);
        if !self.inbox.keeps_actions() {
            return;
        }
        if let Err(e) = self.inbox.record_action(&action).await {
            self.out.warn(format!(
                "the action was done but could not be recorded in the action log: {e}"
            ));
        }
    }
}

/// `$USER@host` (`LOGNAME`, then `USER`; the host from `HOSTNAME` or the
/// kernel), or `cli` when neither is known.
fn default_actor() -> String {
    let user = std::env::var("LOGNAME")
        .or_else(|_| std::env::var("USER"))
        .ok()
        .filter(|u| !u.is_empty());
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty());
    match (user, host) {
        (Some(user), Some(host)) => format!("{user}@{host}"),
        (Some(user), None) => user,
        (None, Some(host)) => format!("cli@{host}"),
        (None, None) => "cli".to_owned(),
    }
}

async fn actions(
    inbox: &Arc<dyn Inbox>,
    before: Option<u64>,
    limit: u32,
    out: &Out,
) -> Result<(), Failure> {
    let page: ActionPage = inbox.actions(before, limit).await.map_err(store_error)?;
    if out.json {
        out.json(&webhooks_core::inbox::actions::actions_json(&page));
        return Ok(());
    }
    if !inbox.keeps_actions() {
        out.line(paint(
            DIM,
            "this inbox keeps no action log (the broker-backed inboxes do not)",
        ));
        return Ok(());
    }
    if page.actions.is_empty() {
        out.line(paint(DIM, "no actions recorded"));
    }
    for a in &page.actions {
        let target = if a.target.is_empty() {
            String::new()
        } else {
            format!(" {}", a.target)
        };
        let at = webhooks_core::testing::iso8601(u64::try_from(unix_ms(a.at) / 1000).unwrap_or(0));
        out.line(format!(
            "{:>6}  {}  {}{target}  {} event{}  {} via {}",
            a.id,
            paint(DIM, at),
            paint(BOLD, a.kind.as_str()),
            a.count,
            if a.count == 1 { "" } else { "s" },
            a.who,
            a.via,
        ));
    }
    if let Some(next) = page.next {
        out.line(paint(
            HINT,
            format!("older: webhooks inbox actions --before {next}"),
        ));
    }
    Ok(())
}

/// The dead-letter filter of `--scheme`, `--event-type`, `--since`,
/// `--where`.
fn dead_filter(filter: &Filter) -> DeadLetterFilter {
    let mut query = DeadLetterFilter::default();
    query.scheme.clone_from(&filter.scheme);
    query.event_type.clone_from(&filter.event_type);
    query.received_from = filter.since.map(|age| SystemTime::now() - age);
    query.search.clone_from(&filter.search);
    query
}

/// `--all`: the count first, then webhooks-core's bulk action in batches,
/// its progress on stderr.
async fn bulk_all(
    inbox: &Arc<dyn Inbox>,
    bulk: &Bulk,
    op: Op,
    log: &Log<'_>,
) -> Result<(), Failure> {
    let out = log.out;
    let action = match op {
        Op::Replay => BulkAction::Replay,
        Op::Discard => BulkAction::Discard,
    };
    let query = dead_filter(&bulk.filter);
    let (matched, more) = bulk::count(inbox.as_ref(), &query, bulk.limit)
        .await
        .map_err(store_error)?;
    let question = format!(
        "{} {matched}{} dead letter{}",
        op.verb(),
        if more {
            " (the oldest; more match)"
        } else {
            ""
        },
        if matched == 1 { "" } else { "s" }
    );
    if bulk.dry_run {
        // The keys too, as far as a page of them goes.
        let mut page_filter = query.clone();
        page_filter.limit = Some(u32::try_from(matched).unwrap_or(1).clamp(1, 1_000));
        let keys: Vec<String> = match matched {
            0 => Vec::new(),
            _ => inbox
                .dead_letters(&page_filter)
                .await
                .map_err(store_error)?
                .items
                .into_iter()
                .map(|d| d.meta.key)
                .collect(),
        };
        match out.json {
            true => out.json(&serde_json::json!({"dry_run": true, "action": op.verb(), "matched": matched, "more": more, "keys": keys})),
            false => {
                out.line(format!("{} would {question}:", paint(HINT, "dry run:")));
                for key in &keys {
                    out.line(format!("  {key}"));
                }
            }
        }
        return Ok(());
    }
    if matched == 0 {
        match out.json {
            true => out.json(&serde_json::json!({"action": op.verb(), "matched": 0, "applied": 0, "skipped": 0, "reached_limit": false})),
            false => out.line(paint(DIM, "no dead letters match")),
        }
        return Ok(());
    }
    if !confirm(&question, bulk.yes)? {
        return Err(Failure::usage("cancelled"));
    }
    let done = bulk::run(inbox.as_ref(), action, &query, bulk.limit, |p| {
        if !out.json {
            out.warn(format!("{} {} of {matched}", op.verb(), p.applied));
        }
    })
    .await
    .map_err(store_error)?;
    let p = done.progress;
    log.record(action.kind(), bulk::filter_text(&query), p.applied)
        .await;
    match out.json {
        true => out.json(&serde_json::json!({
            "action": op.verb(),
            "matched": p.matched,
            "applied": p.applied,
            "skipped": p.skipped,
            "reached_limit": done.reached_limit,
        })),
        false => out.line(format!(
            "{} {} {} dead letters{}{}",
            paint(OK, "✓"),
            op.verb(),
            p.applied,
            if p.skipped > 0 {
                format!(" ({} no longer dead)", p.skipped)
            } else {
                String::new()
            },
            if done.reached_limit {
                " — the limit was reached: run it again for the rest"
            } else {
                ""
            }
        )),
    }
    Ok(())
}

async fn bulk_action(
    inbox: &Arc<dyn Inbox>,
    bulk: Bulk,
    op: Op,
    log: &Log<'_>,
) -> Result<(), Failure> {
    let out = log.out;
    if bulk.all {
        return bulk_all(inbox, &bulk, op, log).await;
    }
    let keys: Vec<String> = match bulk.keys.is_empty() {
        false => bulk.keys.clone(),
        true => {
            return Err(Failure::usage(format!(
                "{}: give dead letters' keys, or --all with an optional filter",
                op.verb()
            )));
        }
    };
    let question = format!(
        "{} {} dead letter{}",
        op.verb(),
        keys.len(),
        if keys.len() == 1 { "" } else { "s" }
    );
    if bulk.dry_run {
        match out.json {
            true => {
                out.json(&serde_json::json!({"dry_run": true, "action": op.verb(), "keys": keys}))
            }
            false => {
                out.line(format!("{} would {question}:", paint(HINT, "dry run:")));
                for key in &keys {
                    out.line(format!("  {key}"));
                }
            }
        }
        return Ok(());
    }
    if keys.is_empty() {
        match out.json {
            true => {
                out.json(&serde_json::json!({"action": op.verb(), "applied": [], "skipped": []}))
            }
            false => out.line(paint(DIM, "no dead letters match")),
        }
        return Ok(());
    }
    // Keys given by hand are the operator's explicit choice; a filter asks.
    let (mut applied, mut skipped) = (Vec::new(), Vec::new());
    for key in keys {
        let transition = match op {
            Op::Replay => inbox.replay(&key).await,
            Op::Discard => inbox.discard(&key).await,
        }
        .map_err(store_error)?;
        match transition {
            Transition::Applied => applied.push(key),
            _ => skipped.push(key),
        }
    }
    let target = match bulk.keys.as_slice() {
        [one] => one.clone(),
        keys => format!("{} given", keys.len()),
    };
    let kind = match op {
        Op::Replay => ActionKind::Replay,
        Op::Discard => ActionKind::Discard,
    };
    log.record(kind, target, applied.len() as u64).await;
    if out.json {
        out.json(&serde_json::json!({"action": op.verb(), "applied": applied, "skipped": skipped}));
    } else {
        for key in &applied {
            out.line(format!("{} {} {key}", paint(OK, "✓"), op.verb()));
        }
        for key in &skipped {
            out.line(format!(
                "{} {key}: not a dead letter (any more)",
                paint(DIM, "·")
            ));
        }
    }
    match skipped.is_empty() {
        true => Ok(()),
        false => Err(Failure::check_reported(format!(
            "{} not dead letters",
            skipped.len()
        ))),
    }
}

async fn purge(
    inbox: &Arc<dyn Inbox>,
    older_than: Duration,
    dry_run: bool,
    yes: bool,
    force: bool,
    log: &Log<'_>,
) -> Result<(), Failure> {
    let out = log.out;
    let floor = webhooks_core::inbox::purge_floor(Duration::ZERO);
    if older_than < floor && !force {
        return Err(Failure::usage(format!(
            "--older-than is below {} s, the longest provider retry window plus a day: a \
             provider's retry of a purged delivery is stored and runs again; add --force to \
             purge anyway",
            floor.as_secs()
        )));
    }
    let question = format!(
        "purge the events completed more than {} s ago",
        older_than.as_secs()
    );
    if dry_run {
        let completed = inbox.stats().await.map_err(store_error)?.completed;
        match out.json {
            true => out.json(&serde_json::json!({"dry_run": true, "older_than_s": older_than.as_secs(), "completed": completed})),
            false => out.line(format!("{} would {question} (of {completed} completed)", paint(HINT, "dry run:"))),
        }
        return Ok(());
    }
    if !confirm(&question, yes)? {
        return Err(Failure::usage("cancelled"));
    }
    let purged = inbox
        .purge_completed(older_than)
        .await
        .map_err(store_error)?;
    let target = webhooks_core::inbox::actions::purge_target(older_than, older_than < floor);
    log.record(ActionKind::Purge, target, purged).await;
    match out.json {
        true => out.json(&serde_json::json!({"purged": purged})),
        false => out.line(format!(
            "{} purged {purged} completed events",
            paint(OK, "✓")
        )),
    }
    Ok(())
}

async fn pause(inbox: &Arc<dyn Inbox>, paused: bool, log: &Log<'_>) -> Result<(), Failure> {
    let out = log.out;
    let changed = inbox.set_paused(paused).await.map_err(store_error)?;
    let kind = if paused {
        ActionKind::Pause
    } else {
        ActionKind::Resume
    };
    log.record(kind, String::new(), u64::from(changed)).await;
    let state = if paused { "paused" } else { "running" };
    match out.json {
        true => out.json(&serde_json::json!({"paused": paused, "changed": changed})),
        false => out.line(match changed {
            true => format!("{} the inbox is {state}", paint(OK, "✓")),
            false => format!("{} the inbox was already {state}", paint(DIM, "·")),
        }),
    }
    Ok(())
}

async fn tail(inbox: &Arc<dyn Inbox>, interval: Duration, out: &Out) -> Result<(), Failure> {
    let mut seen_dead: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut first = true;
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    loop {
        let s = inbox.stats().await.map_err(store_error)?;
        let dead = select(
            inbox,
            DeliveryState::Dead,
            &Filter {
                scheme: None,
                event_type: None,
                since: None,
                search: None,
            },
            200,
        )
        .await?;
        let new: Vec<&Delivery> = dead
            .iter()
            .filter(|d| !seen_dead.contains(&d.meta.key))
            .collect();
        if out.json {
            out.line(serde_json::json!({
                "stats": stats_json(&s),
                "new_dead": new.iter().map(|d| delivery_json(d, None)).collect::<Vec<_>>(),
            }));
        } else {
            out.line(format!(
                "{} {}",
                paint(
                    DIM,
                    webhooks_core::testing::iso8601(
                        u64::try_from(unix_ms(SystemTime::now()) / 1000).unwrap_or(0)
                    )
                ),
                stats_line(&s)
            ));
            if !first {
                for d in &new {
                    out.line(format!(
                        "  {} dead: {} {} {}",
                        paint(BAD, "✗"),
                        d.meta.key,
                        d.meta.event_type.as_deref().unwrap_or("-"),
                        d.last_error.as_deref().unwrap_or("")
                    ));
                }
            }
        }
        seen_dead.extend(dead.into_iter().map(|d| d.meta.key));
        first = false;
        tokio::select! {
            _ = &mut stop => return Ok(()),
            () = tokio::time::sleep(interval) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse() {
        assert_eq!(parse_age("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_age("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_age("30m"), Ok(Duration::from_secs(1800)));
        assert!(parse_age("3w").is_err());
        assert!(parse_age("h").is_err());
    }
}
