//! The action log's page.

use maud::{Markup, html};

use super::{View, layout, when};
use crate::inbox::ActionPage;

/// `/actions`: who did what, newest first, with a link to older entries.
pub(in crate::console) fn action_log(
    view: &View<'_>,
    page: &ActionPage,
    kept: bool,
    older: bool,
) -> Markup {
    let base = view.base;
    let content = html! {
        h1 { "Action log" }
        p.muted {
            "Every replay, discard, purge, pause and resume made in this console, through the admin API or with "
            code { "webhooks inbox" } ", newest first; entries are kept 90 days."
        }
        @if !kept {
            p.notice { "This inbox keeps no action log (the broker-backed inboxes do not)." }
        } @else if page.actions.is_empty() {
            p.muted { @if older { "No older entries." } @else { "Nothing has been done yet." } }
        } @else {
            table #actions {
                thead { tr { th { "when" } th { "who" } th { "via" } th { "action" } th { "on" } th.num { "events" } } }
                tbody {
                    @for action in &page.actions {
                        tr data-action=(action.kind.as_str()) {
                            td { (when(action.at)) }
                            td { (action.who) }
                            td { (action.via) }
                            td { span class={ "action " (action.kind.as_str()) } { (action.kind.as_str()) } }
                            td.target { code { (action.target) } }
                            td.num { (action.count) }
                        }
                    }
                }
            }
            @if let Some(next) = page.next {
                p { a.button href={ (base) "/actions?before=" (next) } { "Older entries →" } }
            }
        }
        @if older {
            p { a href={ (base) "/actions" } { "← Newest" } }
        }
    };
    layout(base, "Action log", Some((view, "actions")), 0, &content)
}
