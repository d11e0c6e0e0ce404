//! The overview's pauses: whether the workers process at all, and the
//! gates (pauses and limits by event type, [`crate::inbox::gates`]).

use std::time::{Duration, UNIX_EPOCH};

use maud::{Markup, html};

use super::{View, ago, csrf_field, when};
use crate::inbox::gates::{Gate, MAX_GATES};

/// Whether workers are processing, and for admins the button that pauses
/// or resumes them.
pub(in crate::console) fn processing(view: &View<'_>, paused: bool) -> Markup {
    html! {
        div.state.paused[paused].running[!paused] #processing {
            span.badge { @if paused { "Paused" } @else { "Running" } }
            span.l {
                @if paused {
                    "Processing is paused: no worker starts an event until it is resumed. Deliveries are still received and stored."
                } @else {
                    "Workers are processing events."
                }
            }
            @if view.admin {
                @if paused {
                    form method="post" action={ (view.base) "/resume" } {
                        (csrf_field(view))
                        button #resume type="submit" { "Resume" }
                    }
                } @else {
                    form method="post" action={ (view.base) "/pause" } {
                        (csrf_field(view))
                        button.secondary #pause type="submit" { "Pause" }
                    }
                }
            }
        }
    }
}

/// "running now / concurrency": `1 / 2`; without a concurrency, what
/// runs under the rate alone, or `—`.
fn running(gate: &Gate) -> String {
    match gate.limit.and_then(|l| l.concurrency) {
        Some(concurrency) => format!("{} / {concurrency}", gate.running),
        None if gate.running > 0 => gate.running.to_string(),
        None => "—".to_owned(),
    }
}

/// `10/s`, or `—` without a rate.
fn rate(gate: &Gate) -> String {
    gate.limit
        .and_then(|l| l.per_second)
        .map_or_else(|| "—".to_owned(), |n| format!("{n}/s"))
}

/// The gates, one row each (admins: a Pause or Resume button per row, and
/// a form pausing the events a new selector matches). Each form carries
/// the selector in a field (`only`), never in its URL.
pub(in crate::console) fn panel(view: &View<'_>, gates: &[Gate]) -> Markup {
    let base = view.base;
    html! {
        section.panel.gates #gates {
            h2 { "Gates" span.muted { " · pauses and limits by event type" } }
            @if gates.is_empty() {
                p.muted { "No event type is paused or limited." }
            } @else {
                table {
                    thead { tr {
                        th { "events matching" } th { "state" } th.num { "running / concurrency" }
                        th.num { "rate" } th { "updated" }
                        @if view.admin { th {} }
                    } }
                    tbody {
                        @for gate in gates {
                            @let selector = gate.selector.to_string();
                            @let updated = UNIX_EPOCH + Duration::from_millis(u64::try_from(gate.updated_at).unwrap_or(0));
                            tr.gate data-selector=(selector) data-paused=(gate.paused) {
                                td { code { (selector) } }
                                td { @if gate.paused { span.pill.paused { "Paused" } } @else { span.pill.running { "Running" } } }
                                td.num.running { (running(gate)) }
                                td.num.rate { (rate(gate)) }
                                td.muted { span title=(when(updated)) { (ago(updated)) } }
                                @if view.admin {
                                    td.act {
                                        @let (to, label) = if gate.paused { ("/resume", "Resume") } else { ("/pause", "Pause") };
                                        form.inline method="post" action={ (base) (to) } {
                                            (csrf_field(view))
                                            input type="hidden" name="only" value=(selector);
                                            button.secondary[!gate.paused] type="submit" { (label) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if view.admin {
                form.filters.pause-only method="post" action={ (base) "/pause" } {
                    (csrf_field(view))
                    label {
                        "Pause events matching"
                        input #only type="text" name="only" placeholder="stripe:invoice.*" required maxlength="200" autocomplete="off" spellcheck="false";
                    }
                    button.secondary #pause-only type="submit" { "Pause" }
                    span.muted.hint {
                        code { "scheme:type" } " with " code { "*" } " wildcards: " code { "*:invoice.*" } ", "
                        code { "shopify" } " (every Shopify event). The others flow as before; deliveries are still received. At most " (MAX_GATES) " gates."
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbox::gates::Limit;

    #[test]
    fn running_and_rate_cells() {
        let gate = |limit: Option<Limit>, running: u64| Gate {
            selector: "shopify:orders/*".parse().unwrap(),
            paused: false,
            limit,
            running,
            updated_at: 0,
        };
        let both = gate(Some(Limit::concurrency(2).and_per_second(10)), 1);
        assert_eq!(
            (running(&both), rate(&both)),
            ("1 / 2".into(), "10/s".into())
        );
        let paused_only = gate(None, 0);
        assert_eq!(
            (running(&paused_only), rate(&paused_only)),
            ("—".into(), "—".into())
        );
        let rate_only = gate(Some(Limit::per_second(5)), 3);
        assert_eq!(
            (running(&rate_only), rate(&rate_only)),
            ("3".into(), "5/s".into())
        );
    }
}
