//! Pausing and resuming the events one selector matches (`POST /pause`
//! and `POST /resume` with a form field `only`), logged as the whole
//! inbox's pause is: kind `pause` / `resume`, the selector as the target,
//! 1 if it changed.

use http::StatusCode;

use super::{Console, ConsoleResponse, bad_request, render};
use crate::inbox::InboxError;
use crate::inbox::actions::ActionKind;
use crate::inbox::gates::{MAX_GATES, Selector};

impl Console {
    /// Pauses (or resumes) the events `only` matches; `400` with the
    /// reason for a malformed selector or an inbox that keeps no gates,
    /// `409` when the inbox holds [`MAX_GATES`] already.
    pub(super) async fn pause_only(
        &self,
        view: &render::View<'_>,
        only: &str,
        paused: bool,
    ) -> Result<ConsoleResponse, InboxError> {
        let selector: Selector = match only.parse() {
            Ok(selector) => selector,
            Err(error) => {
                return Ok(bad_request(
                    view.base,
                    &format!("The selector is not valid: {error}."),
                ));
            }
        };
        let inbox = &self.inner.inbox;
        if !inbox.keeps_gates() {
            return Ok(bad_request(
                view.base,
                "This inbox does not pause by event type (a broker-backed inbox): pause it as a whole.",
            ));
        }
        if paused {
            let held = inbox.gates().await?;
            if held.len() >= MAX_GATES && !held.iter().any(|g| g.selector == selector) {
                return Ok(ConsoleResponse::html(
                    StatusCode::CONFLICT,
                    render::message(
                        view.base,
                        "Too many gates",
                        &format!("The inbox holds {MAX_GATES} gates already: resume one first."),
                    ),
                ));
            }
        }
        let changed = inbox.set_gate_paused(&selector, paused).await?;
        let (action, kind) = if paused {
            ("pause", ActionKind::Pause)
        } else {
            ("resume", ActionKind::Resume)
        };
        let text = selector.to_string();
        tracing::info!(target: "webhooks_core::console", who = %view.who, action, only = %text, changed, "console action");
        super::actions::count(action, "selector", 1);
        self.log(view, kind, text.clone(), u64::from(changed)).await;
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("done", action)
            .append_pair("n", if changed { "1" } else { "0" })
            .append_pair("only", &text)
            .finish();
        Ok(ConsoleResponse::see_other(&format!(
            "{}/?{query}",
            view.base
        )))
    }
}

/// The notice after a selector's pause or resume redirected back; `None`
/// when `only` is not a selector (a link's text is not echoed as it is).
pub(super) fn notice(done: &str, changed: bool, only: &str) -> Option<String> {
    let selector: Selector = only.parse().ok()?;
    Some(match (done, changed) {
        ("pause", true) => format!(
            "Events matching {selector} paused: workers start none of them until they are resumed; the others flow as before."
        ),
        ("pause", false) => format!("Events matching {selector} were already paused."),
        ("resume", true) => format!("Events matching {selector} resumed."),
        ("resume", false) => format!("Events matching {selector} were not paused."),
        _ => return None,
    })
}
