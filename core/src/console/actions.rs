//! Carrying out the console's actions (replay, discard, bulk by filter,
//! purge, pause, resume; a selector's pause in `gates`), recording each in the inbox's action log, and
//! the log's page (`/actions`).

use super::params::{bulk_request, field, parse_duration};
use super::{Console, ConsoleResponse, bad_request, render};
use crate::inbox::actions::{self, Action, ActionKind};
use crate::inbox::bulk::{self, BulkAction};
use crate::inbox::{InboxError, Transition};

impl Console {
    pub(super) async fn act(
        &self,
        view: &render::View<'_>,
        action: &str,
        form: &[(String, String)],
    ) -> Result<ConsoleResponse, InboxError> {
        let inbox = &self.inner.inbox;
        let who = view.who;
        if action == "pause" || action == "resume" {
            // `only`, even empty: one selector's events, never the whole inbox.
            if let Some(only) = field(form, "only") {
                return self.pause_only(view, only, action == "pause").await;
            }
            let action: &'static str = if action == "pause" { "pause" } else { "resume" };
            let changed = inbox.set_paused(action == "pause").await?;
            tracing::info!(target: "webhooks_core::console", who = %who, action, changed, "console action");
            count(action, "inbox", 1);
            let kind = if action == "pause" {
                ActionKind::Pause
            } else {
                ActionKind::Resume
            };
            self.log(view, kind, String::new(), u64::from(changed))
                .await;
            return Ok(ConsoleResponse::see_other(&format!(
                "{}/?done={action}&n={}",
                view.base,
                u8::from(changed)
            )));
        }
        if action == "purge" {
            let Some(older_than) = field(form, "older_than").and_then(parse_duration) else {
                return Ok(bad_request(
                    view.base,
                    "older_than is a duration: 90s, 30m, 12h or 7d",
                ));
            };
            let force = matches!(field(form, "force"), Some("on" | "true" | "1"));
            let minimum = crate::inbox::purge_floor(self.inner.min_purge_age);
            if older_than < minimum && !force {
                return Ok(bad_request(
                    view.base,
                    &format!(
                        "older_than is below the minimum of {}: the completed events are the \
                         inbox's memory of processed deliveries (a sender's retry of a purged \
                         one runs again). Tick \"force\" to purge them anyway.",
                        render::duration_text(minimum)
                    ),
                ));
            }
            let purged = inbox.purge_completed(older_than).await?;
            tracing::info!(target: "webhooks_core::console", who = %who, action = "purge", older_than_secs = older_than.as_secs(), force, purged, "console action");
            count("purge", "completed", purged);
            let target = actions::purge_target(older_than, force && older_than < minimum);
            self.log(view, ActionKind::Purge, target, purged).await;
            return Ok(ConsoleResponse::see_other(&format!(
                "{}/?done=purge&n={purged}",
                view.base
            )));
        }
        if action == "bulk" {
            let (action, filter) = match bulk_request(form) {
                Ok(request) => request,
                Err(reason) => return Ok(bad_request(view.base, &reason)),
            };
            let done = bulk::run(
                inbox.as_ref(),
                action,
                &filter,
                self.inner.bulk_limit,
                |_| {},
            )
            .await?;
            let p = done.progress;
            tracing::info!(target: "webhooks_core::console", who = %who, action = action.as_str(), scope = "filter", requested = p.matched, applied = p.applied, "console action");
            let named = bulk::filter_text(&filter);
            return Ok(self
                .acted(view, form, action, "filter", named, p.applied)
                .await);
        }
        let Some(action) = BulkAction::parse(action) else {
            return Ok(bad_request(view.base, "no such action"));
        };
        let keys: Vec<String> = form
            .iter()
            .filter(|(name, _)| name == "key")
            .map(|(_, key)| key.clone())
            .take(self.inner.bulk_limit as usize)
            .collect();
        if keys.is_empty() {
            return Ok(bad_request(view.base, "select at least one dead letter"));
        }
        let scope = if keys.len() == 1 && field(form, "scope") == Some("one") {
            "one"
        } else {
            "selected"
        };
        let mut applied = 0_u64;
        for key in &keys {
            if action.apply(inbox.as_ref(), key).await? == Transition::Applied {
                applied += 1;
            }
        }
        let target = if scope == "one" {
            tracing::info!(target: "webhooks_core::console", who = %who, action = action.as_str(), scope, key = %keys[0], applied, "console action");
            keys[0].clone()
        } else {
            tracing::info!(target: "webhooks_core::console", who = %who, action = action.as_str(), scope, requested = keys.len(), applied, "console action");
            format!("{} selected", keys.len())
        };
        Ok(self.acted(view, form, action, scope, target, applied).await)
    }

    /// After a replay or discard: counted, logged, and back to the list
    /// with a notice.
    async fn acted(
        &self,
        view: &render::View<'_>,
        form: &[(String, String)],
        action: BulkAction,
        scope: &'static str,
        target: String,
        applied: u64,
    ) -> ConsoleResponse {
        count(action.as_str(), scope, applied);
        self.log(view, action.kind(), target, applied).await;
        let back = field(form, "back")
            .filter(|b| b.starts_with("?") && !b.contains(['\r', '\n']))
            .unwrap_or("?");
        let sep = if back == "?" { "" } else { "&" };
        ConsoleResponse::see_other(&format!(
            "{}/dead{back}{sep}done={}&n={applied}",
            view.base,
            action.as_str()
        ))
    }

    /// Records an action done in the console in the inbox's action log.
    pub(super) async fn log(
        &self,
        view: &render::View<'_>,
        kind: ActionKind,
        target: String,
        n: u64,
    ) {
        let action = Action::new(kind, view.who)
            .via("console")
            .target(target)
            .count(n);
        actions::record(self.inner.inbox.as_ref(), action).await;
    }

    /// `GET /actions[?before=id]`: the action log, newest first, 50 a page.
    pub(super) async fn action_log(
        &self,
        view: &render::View<'_>,
        query: &[(String, String)],
    ) -> Result<ConsoleResponse, InboxError> {
        let before = match field(query, "before").map(str::parse::<u64>) {
            None => None,
            Some(Ok(id)) => Some(id),
            Some(Err(_)) => return Ok(bad_request(view.base, "before is an entry's number")),
        };
        let inbox = self.inner.inbox.as_ref();
        let page = inbox.actions(before, ACTION_PAGE).await?;
        Ok(ConsoleResponse::html(
            http::StatusCode::OK,
            render::action_log(view, &page, inbox.keeps_actions(), before.is_some()),
        ))
    }
}

/// Entries per page of `/actions`.
const ACTION_PAGE: u32 = 50;

pub(super) fn count(action: &'static str, scope: &'static str, n: u64) {
    #[cfg(feature = "metrics")]
    metrics::counter!(super::ACTIONS, "action" => action, "scope" => scope).increment(n);
    #[cfg(not(feature = "metrics"))]
    let _ = (action, scope, n);
}
