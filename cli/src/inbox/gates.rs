//! `webhooks inbox pause --only <SELECTOR>`, `resume --only <SELECTOR>` and
//! `gates`: the events one selector matches paused or resumed (webhooks-core's
//! `inbox::gates`; logged as the whole inbox's pause is, the selector as the
//! target), and the gates listed (selectors paused or limited, permits held
//! now, limits).

use std::sync::Arc;

use webhooks_core::inbox::gates::{Gate, MAX_GATES, Selector};
use webhooks_core::inbox::{ActionKind, Inbox};

use super::{Log, store_error};
use crate::error::Failure;
use crate::output::{BOLD, DIM, HINT, OK, Out, paint};

/// `--only`'s selector; a malformed one is bad input (exit 2) saying why.
fn selector(only: &str) -> Result<Selector, Failure> {
    only.parse().map_err(|e| {
        Failure::usage(format!(
            "--only {only:?} is not a selector: {e} (e.g. `stripe:invoice.*`, `*:invoice.*`, \
             `shopify`)"
        ))
    })
}

/// Refuses an inbox that keeps no gates.
fn supported(inbox: &Arc<dyn Inbox>) -> Result<(), Failure> {
    match inbox.keeps_gates() {
        true => Ok(()),
        false => Err(Failure::usage(
            "this inbox does not pause by event type (a broker-backed inbox): pause it as a \
             whole, without --only",
        )),
    }
}

/// `pause --only` (`paused`) and `resume --only`.
pub(super) async fn pause_only(
    inbox: &Arc<dyn Inbox>,
    only: &str,
    paused: bool,
    log: &Log<'_>,
) -> Result<(), Failure> {
    let out = log.out;
    let selector = selector(only)?;
    supported(inbox)?;
    if paused {
        let held = inbox.gates().await.map_err(store_error)?;
        if held.len() >= MAX_GATES && !held.iter().any(|g| g.selector == selector) {
            return Err(Failure::usage(format!(
                "the inbox holds {MAX_GATES} gates already: resume one first (webhooks inbox gates)"
            )));
        }
    }
    let changed = inbox
        .set_gate_paused(&selector, paused)
        .await
        .map_err(store_error)?;
    let kind = if paused {
        ActionKind::Pause
    } else {
        ActionKind::Resume
    };
    log.record(kind, selector.to_string(), u64::from(changed))
        .await;
    if out.json {
        out.json(&serde_json::json!({
            "paused": paused,
            "changed": changed,
            "only": selector.to_string(),
        }));
        return Ok(());
    }
    out.line(match (paused, changed) {
        (true, true) => format!(
            "{} the events matching {} are paused (the others flow as before)",
            paint(OK, "✓"),
            paint(BOLD, &selector)
        ),
        (true, false) => format!(
            "{} the events matching {} were already paused",
            paint(DIM, "·"),
            paint(BOLD, &selector)
        ),
        (false, true) => format!(
            "{} the events matching {} run again",
            paint(OK, "✓"),
            paint(BOLD, &selector)
        ),
        (false, false) => format!(
            "{} the events matching {} were not paused",
            paint(DIM, "·"),
            paint(BOLD, &selector)
        ),
    });
    Ok(())
}

/// One gate as the admin API's `GET /gates` answers it.
fn gate_json(gate: &Gate) -> serde_json::Value {
    let limit = gate.limit.unwrap_or_default();
    serde_json::json!({
        "selector": gate.selector.to_string(),
        "paused": gate.paused,
        "concurrency": limit.concurrency,
        "per_second": limit.per_second,
        "running": gate.running,
        "updated_at_ms": gate.updated_at,
    })
}

/// "running now / concurrency" (`1 / 2`); without a concurrency, what runs
/// under the rate alone, or `—`.
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

/// The table's rows, padded (before painting: styles take no columns).
fn table(gates: &[Gate]) -> Vec<String> {
    let header = ["SELECTOR", "STATE", "RUNNING", "RATE", "UPDATED"];
    let rows: Vec<[String; 5]> = gates
        .iter()
        .map(|g| {
            let updated = u64::try_from(g.updated_at / 1000).unwrap_or(0);
            [
                g.selector.to_string(),
                if g.paused { "paused" } else { "running" }.to_owned(),
                running(g),
                rate(g),
                webhooks_core::testing::iso8601(updated),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let pad = |cell: &str, width: usize| {
        let fill = width.saturating_sub(cell.chars().count());
        format!("{cell}{}", " ".repeat(fill))
    };
    let mut lines = vec![paint(
        DIM,
        header
            .iter()
            .zip(widths)
            .map(|(h, w)| pad(h, w))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end(),
    )];
    for (row, gate) in rows.iter().zip(gates) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(i, (cell, w))| match i {
                0 => paint(BOLD, pad(cell, w)),
                1 if gate.paused => paint(HINT, pad(cell, w)),
                4 => paint(DIM, cell),
                _ => pad(cell, w),
            })
            .collect();
        lines.push(cells.join("  "));
    }
    lines
}

/// `gates`: one row per gate (`--json`: the admin API's `GET /gates`).
pub(super) async fn list(inbox: &Arc<dyn Inbox>, out: &Out) -> Result<(), Failure> {
    let gates = match inbox.keeps_gates() {
        true => inbox.gates().await.map_err(store_error)?,
        false => Vec::new(),
    };
    if out.json {
        out.json(&serde_json::json!({
            "gates": gates.iter().map(gate_json).collect::<Vec<_>>(),
            "supported": inbox.keeps_gates(),
        }));
        return Ok(());
    }
    if !inbox.keeps_gates() {
        out.line(paint(
            DIM,
            "this inbox does not pause or limit by event type (a broker-backed inbox)",
        ));
    } else if gates.is_empty() {
        out.line(paint(
            DIM,
            "no gates: no event type is paused or limited (webhooks inbox pause --only SELECTOR)",
        ));
    } else {
        for line in table(&gates) {
            out.line(line);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use webhooks_core::inbox::gates::Limit;

    #[test]
    fn selectors_and_the_table() {
        assert_eq!(
            selector("Stripe:invoice.*").unwrap().to_string(),
            "stripe:invoice.*"
        );
        for bad in ["", "a b", "*:*", "é"] {
            let failure = selector(bad).unwrap_err();
            assert_eq!(failure.code, 2, "{bad}");
            assert!(failure.message.contains("is not a selector"), "{bad}");
        }
        let gate = |text: &str, paused, limit, running| Gate {
            selector: text.parse().unwrap(),
            paused,
            limit,
            running,
            updated_at: 1_796_140_641_000,
        };
        let gates = [
            gate(
                "shopify:orders/*",
                false,
                Some(Limit::concurrency(2).and_per_second(10)),
                1,
            ),
            gate("stripe:invoice.*", true, None, 0),
        ];
        let lines = table(&gates);
        let plain: Vec<String> = lines
            .iter()
            .map(|l| {
                // The styles' escapes out (anstream strips them off a terminal).
                let mut out = String::new();
                let mut skipping = false;
                for c in l.chars() {
                    match (skipping, c) {
                        (_, '\u{1b}') => skipping = true,
                        (true, 'm') => skipping = false,
                        (true, _) => {}
                        (false, c) => out.push(c),
                    }
                }
                out
            })
            .collect();
        assert_eq!(
            plain,
            [
                "SELECTOR          STATE    RUNNING  RATE  UPDATED",
                "shopify:orders/*  running  1 / 2    10/s  2026-12-01T15:57:21Z",
                "stripe:invoice.*  paused   —        —     2026-12-01T15:57:21Z",
            ]
        );
    }
}
