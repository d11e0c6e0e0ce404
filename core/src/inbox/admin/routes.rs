//! The routes: each path and method to its inbox call and JSON answer.

use std::time::{Duration, UNIX_EPOCH};

use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::access::Caller;
use super::answers::{dead_json, delivery_json};
use super::query::{parse_delivery_query, parse_query, percent_decode, search_of};
use super::{AdminConfig, AdminResponse};
use crate::inbox::actions::{self, Action, ActionKind};
use crate::inbox::bulk::{self, BulkAction, DEFAULT_BULK_LIMIT};
use crate::inbox::gates::{MAX_GATES, Selector};
use crate::inbox::{DeadLetterCursor, DeadLetterFilter, Inbox, InboxError, Transition};

fn count(action: &'static str, n: u64) {
    #[cfg(feature = "metrics")]
    metrics::counter!(super::ACTIONS, "action" => action).increment(n);
    #[cfg(not(feature = "metrics"))]
    let _ = (action, n);
}

/// Records an action done through the API in the inbox's action log.
async fn log(inbox: &dyn Inbox, caller: &Caller, kind: ActionKind, target: String, n: u64) {
    let action = Action::new(kind, caller.who.as_str())
        .via("api")
        .target(target)
        .count(n);
    actions::record(inbox, action).await;
}

/// `GET /gates`: the gates the store holds.
async fn gates(inbox: &dyn Inbox) -> Result<AdminResponse, InboxError> {
    let gates: Vec<Value> = inbox
        .gates()
        .await?
        .into_iter()
        .map(|gate| {
            let limit = gate.limit.unwrap_or_default();
            json!({
                "selector": gate.selector.to_string(),
                "paused": gate.paused,
                "concurrency": limit.concurrency,
                "per_second": limit.per_second,
                "running": gate.running,
                "updated_at_ms": gate.updated_at,
            })
        })
        .collect();
    Ok(AdminResponse::new(
        StatusCode::OK,
        json!({ "gates": gates, "supported": inbox.keeps_gates() }),
    ))
}

/// `POST /pause?only=` and `POST /resume?only=`: one selector's events.
async fn pause_only(
    inbox: &dyn Inbox,
    caller: &Caller,
    only: &str,
    paused: bool,
) -> Result<AdminResponse, InboxError> {
    let selector: Selector = match only.parse() {
        Ok(selector) => selector,
        Err(error) => {
            return Ok(AdminResponse::error(
                StatusCode::BAD_REQUEST,
                &format!("only: {error}"),
            ));
        }
    };
    if !inbox.keeps_gates() {
        return Ok(AdminResponse::error(
            StatusCode::BAD_REQUEST,
            "this inbox does not pause by event type (a broker-backed inbox)",
        ));
    }
    if paused {
        // The gates full: the operator's to fix (`409`), not the store's.
        let held = inbox.gates().await?;
        if held.len() >= MAX_GATES && !held.iter().any(|g| g.selector == selector) {
            return Ok(AdminResponse::error(
                StatusCode::CONFLICT,
                &format!("the inbox holds {MAX_GATES} gates already: resume one first"),
            ));
        }
    }
    let changed = inbox.set_gate_paused(&selector, paused).await?;
    let (action, kind) = if paused {
        ("pause", ActionKind::Pause)
    } else {
        ("resume", ActionKind::Resume)
    };
    tracing::info!(who = %caller.who, action, changed, "inbox admin action on a selector");
    count(action, 1);
    log(
        inbox,
        caller,
        kind,
        selector.to_string(),
        u64::from(changed),
    )
    .await;
    Ok(AdminResponse::new(
        StatusCode::OK,
        json!({ "paused": paused, "changed": changed, "only": selector.to_string() }),
    ))
}

/// The dead-letter filter of a query: `scheme`, `event_type`, `from` /
/// `until` (Unix seconds), `q` (a search).
fn dead_filter<'q>(get: &impl Fn(&str) -> Option<&'q str>) -> Result<DeadLetterFilter, String> {
    let mut filter = DeadLetterFilter {
        scheme: get("scheme").map(str::to_owned),
        event_type: get("event_type").map(str::to_owned),
        search: search_of(get("q"))?,
        ..DeadLetterFilter::default()
    };
    for (name, slot) in [
        ("from", &mut filter.received_from),
        ("until", &mut filter.received_until),
    ] {
        if let Some(value) = get(name) {
            // A number of seconds past what a time can hold is refused
            // too (adding it would panic; found by the admin_api fuzz target).
            let time = value
                .parse::<u64>()
                .ok()
                .and_then(|secs| UNIX_EPOCH.checked_add(Duration::from_secs(secs)))
                .ok_or("from and until are Unix seconds")?;
            *slot = Some(time);
        }
    }
    Ok(filter)
}

/// `POST /bulk/replay` and `/bulk/discard`: every dead letter matching the
/// query's filter, at most `limit` (default [`DEFAULT_BULK_LIMIT`]); with
/// `dry_run=true` only the count.
async fn bulk_action<'q>(
    inbox: &dyn Inbox,
    caller: &Caller,
    action: BulkAction,
    get: &impl Fn(&str) -> Option<&'q str>,
) -> Result<AdminResponse, InboxError> {
    let filter = match dead_filter(get) {
        Ok(filter) => filter,
        Err(error) => return Ok(AdminResponse::error(StatusCode::BAD_REQUEST, &error)),
    };
    let limit = match get("limit").map(str::parse::<u32>) {
        None => DEFAULT_BULK_LIMIT,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            return Ok(AdminResponse::error(
                StatusCode::BAD_REQUEST,
                "limit is a number above 0",
            ));
        }
    };
    match get("dry_run") {
        None | Some("false") => {}
        Some("true") => {
            let (matched, more) = bulk::count(inbox, &filter, limit).await?;
            return Ok(AdminResponse::new(
                StatusCode::OK,
                json!({ "dry_run": true, "action": action.as_str(), "matched": matched, "more": more }),
            ));
        }
        Some(_) => {
            return Ok(AdminResponse::error(
                StatusCode::BAD_REQUEST,
                "dry_run is true or false",
            ));
        }
    }
    let done = bulk::run(inbox, action, &filter, limit, |_| {}).await?;
    let p = done.progress;
    tracing::info!(who = %caller.who, action = action.as_str(), scope = "filter", matched = p.matched, applied = p.applied, "inbox admin action");
    count(action.as_str(), p.applied);
    log(
        inbox,
        caller,
        action.kind(),
        bulk::filter_text(&filter),
        p.applied,
    )
    .await;
    Ok(AdminResponse::new(
        StatusCode::OK,
        json!({
            "action": action.as_str(),
            "matched": p.matched,
            "applied": p.applied,
            "skipped": p.skipped,
            "reached_limit": done.reached_limit,
        }),
    ))
}

/// `GET /actions[?before=id&limit=n]`: the action log, newest first.
async fn action_log(
    inbox: &dyn Inbox,
    method: &Method,
    before: Option<&str>,
    limit: Option<&str>,
) -> Result<AdminResponse, InboxError> {
    if method != Method::GET {
        return Ok(AdminResponse::error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed",
        ));
    }
    let before = match before.map(str::parse::<u64>) {
        None => None,
        Some(Ok(id)) => Some(id),
        Some(Err(_)) => {
            return Ok(AdminResponse::error(
                StatusCode::BAD_REQUEST,
                "`before` is an entry's id",
            ));
        }
    };
    let limit = match limit.map(str::parse::<u32>) {
        None => 50,
        Some(Ok(n)) if (1..=actions::MAX_ACTIONS_PAGE).contains(&n) => n,
        Some(_) => {
            return Ok(AdminResponse::error(
                StatusCode::BAD_REQUEST,
                "`limit` is a number from 1 to 500",
            ));
        }
    };
    let page = inbox.actions(before, limit).await?;
    Ok(AdminResponse::new(
        StatusCode::OK,
        actions::actions_json(&page),
    ))
}

/// `GET /activity[?minutes=n]`: the per-minute series ([`Inbox::activity`]).
async fn activity(
    inbox: &dyn Inbox,
    method: &Method,
    minutes: Option<&str>,
) -> Result<AdminResponse, InboxError> {
    if method != Method::GET {
        return Ok(AdminResponse::error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed",
        ));
    }
    let minutes = match minutes.map(str::parse::<u32>) {
        None => crate::inbox::ACTIVITY_MINUTES,
        Some(Ok(n)) if (1..=crate::inbox::ACTIVITY_MINUTES).contains(&n) => n,
        Some(_) => {
            return Ok(AdminResponse::error(
                StatusCode::BAD_REQUEST,
                "`minutes` is a number from 1 to 60",
            ));
        }
    };
    let activity = inbox.activity(minutes).await?;
    let (accepted, completed, failed) = activity.totals();
    let series: Vec<_> = activity
        .minutes
        .iter()
        .map(|m| {
            json!({
                "start": m.start.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
                "accepted": m.accepted,
                "completed": m.completed,
                "failed": m.failed,
            })
        })
        .collect();
    Ok(AdminResponse::new(
        StatusCode::OK,
        json!({
            "minutes": series,
            "totals": {"accepted": accepted, "completed": completed, "failed": failed},
        }),
    ))
}

pub(super) async fn route(
    inbox: &dyn Inbox,
    config: &AdminConfig,
    caller: &Caller,
    method: &Method,
    path: &str,
    query: &str,
) -> Result<AdminResponse, InboxError> {
    let params = parse_query(query);
    let get = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let not_allowed = || AdminResponse::error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    if path == "/stats" {
        if method != Method::GET {
            return Ok(not_allowed());
        }
        let stats = inbox.stats().await?;
        return Ok(AdminResponse::new(
            StatusCode::OK,
            json!({
                "pending": stats.pending,
                "due": stats.due,
                "oldest_due_age_ms": stats.oldest_due_age.map(|d| d.as_millis() as u64),
                "in_flight": stats.in_flight,
                "dead": stats.dead,
                "completed": stats.completed,
                "paused": stats.paused,
            }),
        ));
    }
    if path == "/activity" {
        return activity(inbox, method, get("minutes")).await;
    }
    if let Some(name) = path.strip_prefix("/bulk/") {
        let Some(action) = BulkAction::parse(name) else {
            return Ok(AdminResponse::error(
                StatusCode::NOT_FOUND,
                "no such admin route",
            ));
        };
        if method != Method::POST {
            return Ok(not_allowed());
        }
        return bulk_action(inbox, caller, action, &get).await;
    }
    if path == "/actions" {
        return action_log(inbox, method, get("before"), get("limit")).await;
    }
    if path == "/gates" {
        if method != Method::GET {
            return Ok(not_allowed());
        }
        return gates(inbox).await;
    }
    if path == "/pause" || path == "/resume" {
        if method != Method::POST {
            return Ok(not_allowed());
        }
        let (paused, action, kind) = if path == "/pause" {
            (true, "pause", ActionKind::Pause)
        } else {
            (false, "resume", ActionKind::Resume)
        };
        if let Some(only) = get("only") {
            return pause_only(inbox, caller, only, paused).await;
        }
        let changed = inbox.set_paused(paused).await?;
        tracing::info!(who = %caller.who, action, changed, "inbox admin action");
        count(action, 1);
        log(inbox, caller, kind, String::new(), u64::from(changed)).await;
        return Ok(AdminResponse::new(
            StatusCode::OK,
            json!({ "paused": paused, "changed": changed }),
        ));
    }
    if path == "/purge" {
        if method != Method::POST {
            return Ok(not_allowed());
        }
        let Some(secs) = get("older_than").and_then(|v| v.parse::<u64>().ok()) else {
            return Ok(AdminResponse::error(
                StatusCode::BAD_REQUEST,
                "older_than (seconds) is required",
            ));
        };
        let force = match get("force") {
            None | Some("false") => false,
            Some("true") => true,
            Some(_) => {
                return Ok(AdminResponse::error(
                    StatusCode::BAD_REQUEST,
                    "force is true or false",
                ));
            }
        };
        let minimum = crate::inbox::purge_floor(config.min_purge_age).as_secs();
        if secs < minimum && !force {
            return Ok(AdminResponse::new(
                StatusCode::BAD_REQUEST,
                json!({
                    "error": format!(
                        "older_than is below the minimum of {minimum} seconds (the inbox's retention, never under the longest provider retry window plus a day): the completed events are the inbox's memory of processed deliveries (a sender's retry of a purged one runs again); add force=true to purge anyway"
                    ),
                    "min_older_than": minimum,
                }),
            ));
        }
        let purged = inbox.purge_completed(Duration::from_secs(secs)).await?;
        tracing::info!(who = %caller.who, action = "purge", older_than_secs = secs, force, purged, "inbox admin action");
        count("purge", purged);
        let older_than = Duration::from_secs(secs);
        let target = actions::purge_target(older_than, force && secs < minimum);
        log(inbox, caller, ActionKind::Purge, target, purged).await;
        return Ok(AdminResponse::new(
            StatusCode::OK,
            json!({ "purged": purged }),
        ));
    }
    if path == "/deliveries" {
        if method != Method::GET {
            return Ok(not_allowed());
        }
        if let Err(error) = search_of(get("q")) {
            return Ok(AdminResponse::error(StatusCode::BAD_REQUEST, &error));
        }
        let filter = match parse_delivery_query(query) {
            Ok(filter) => filter,
            Err(error) => return Ok(AdminResponse::error(StatusCode::BAD_REQUEST, error)),
        };
        let page = inbox.deliveries(&filter).await?;
        let items: Vec<Value> = page
            .items
            .iter()
            .map(|d| delivery_json(d, &config.redaction, None))
            .collect();
        return Ok(AdminResponse::new(
            StatusCode::OK,
            json!({ "items": items, "next": page.next.map(|c| c.to_string()) }),
        ));
    }
    if let Some(key) = path.strip_prefix("/deliveries/") {
        if method != Method::GET {
            return Ok(not_allowed());
        }
        let key = percent_decode(key);
        return Ok(match inbox.delivery_get(&key).await? {
            Some(one) => {
                let mut value = delivery_json(&one, &config.redaction, Some(caller.bodies));
                let history = inbox.attempts(&key).await?;
                value["attempt_history"] = crate::inbox::attempts::attempts_json(&history);
                AdminResponse::new(StatusCode::OK, value)
            }
            None => AdminResponse::error(StatusCode::NOT_FOUND, "no such delivery"),
        });
    }
    if path == "/dead-letters" {
        if method != Method::GET {
            return Ok(not_allowed());
        }
        let mut filter = match dead_filter(&get) {
            Ok(filter) => filter,
            Err(error) => return Ok(AdminResponse::error(StatusCode::BAD_REQUEST, &error)),
        };
        if let Some(after) = get("after") {
            let Ok(cursor) = after.parse::<DeadLetterCursor>() else {
                return Ok(AdminResponse::error(
                    StatusCode::BAD_REQUEST,
                    "malformed cursor",
                ));
            };
            filter.after = Some(cursor);
        }
        if let Some(limit) = get("limit") {
            let Ok(limit) = limit.parse() else {
                return Ok(AdminResponse::error(
                    StatusCode::BAD_REQUEST,
                    "limit is a number",
                ));
            };
            filter.limit = Some(limit);
        }
        let page = inbox.dead_letters(&filter).await?;
        let items: Vec<Value> = page
            .items
            .iter()
            .map(|d| dead_json(d, &config.redaction, None))
            .collect();
        return Ok(AdminResponse::new(
            StatusCode::OK,
            json!({ "items": items, "next": page.next.map(|c| c.to_string()) }),
        ));
    }
    let Some(rest) = path.strip_prefix("/dead-letters/") else {
        return Ok(AdminResponse::error(
            StatusCode::NOT_FOUND,
            "no such admin route",
        ));
    };
    if let Some(key) = rest.strip_suffix("/replay") {
        if method != Method::POST {
            return Ok(not_allowed());
        }
        let key = percent_decode(key);
        let outcome = inbox.replay(&key).await?;
        let applied = outcome == Transition::Applied;
        tracing::info!(who = %caller.who, action = "replay", key = %key, applied, "inbox admin action");
        log(
            inbox,
            caller,
            ActionKind::Replay,
            key.clone(),
            u64::from(applied),
        )
        .await;
        return Ok(if applied {
            count("replay", 1);
            AdminResponse::new(StatusCode::OK, json!({ "replayed": true }))
        } else {
            AdminResponse::error(StatusCode::CONFLICT, "not a dead letter")
        });
    }
    let key = percent_decode(rest);
    if method == Method::GET {
        return Ok(match inbox.dead_letter_get(&key).await? {
            Some(dead) => AdminResponse::new(
                StatusCode::OK,
                dead_json(&dead, &config.redaction, Some(caller.bodies)),
            ),
            None => AdminResponse::error(StatusCode::NOT_FOUND, "no such dead letter"),
        });
    }
    if method == Method::DELETE {
        let outcome = inbox.discard(&key).await?;
        let applied = outcome == Transition::Applied;
        tracing::info!(who = %caller.who, action = "discard", key = %key, applied, "inbox admin action");
        log(
            inbox,
            caller,
            ActionKind::Discard,
            key.clone(),
            u64::from(applied),
        )
        .await;
        return Ok(if applied {
            count("discard", 1);
            AdminResponse::new(StatusCode::NO_CONTENT, Value::Null)
        } else {
            AdminResponse::error(StatusCode::NOT_FOUND, "no such dead letter")
        });
    }
    Ok(not_allowed())
}
