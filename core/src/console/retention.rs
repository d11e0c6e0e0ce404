//! The overview's table of how far back duplicates are recognised, per
//! scheme, against each provider's documented retry window (issue 34): the
//! completed events are the inbox's memory of processed deliveries, and a
//! provider's retry of a purged one runs again.

use std::time::Duration;

use maud::{Markup, html};

use super::render::age;
use crate::scheme::registry::{RETRY_WINDOW_MARGIN, SCHEMES};

/// One row per scheme whose provider documents a retry window: how long it
/// retries, how long the inbox recognises its duplicates (`recognised`, the
/// console's [`min_purge_age`](super::Console::min_purge_age): the inbox's
/// retention), and whether that covers the window plus
/// [`RETRY_WINDOW_MARGIN`].
pub(super) fn duplicates(recognised: Duration) -> Markup {
    html! {
        h2 { "Duplicates recognised, per scheme" }
        table {
            thead { tr { th { "provider" } th { "retries for" } th { "duplicates recognised for" } th { "" } } }
            tbody {
                @for (provider, window) in SCHEMES.iter().filter_map(|s| Some((s.provider, s.retry_window?))) {
                    tr {
                        td { (provider) }
                        td { @if window.is_zero() { "no automatic retry" } @else { (age(window)) } }
                        td { (age(recognised)) }
                        td {
                            @if recognised >= window + RETRY_WINDOW_MARGIN {
                                span.muted { "covered" }
                            } @else {
                                span.warn { "too short: a late retry runs again" }
                            }
                        }
                    }
                }
            }
        }
        p.muted { "The completed events are the inbox's memory of processed deliveries; a provider's retry of a purged one runs again. Set the console's min_purge_age to the inbox's retention." }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_retentions_are_flagged_per_provider() {
        let day = Duration::from_secs(86_400);
        let week = duplicates(7 * day).into_string();
        assert!(
            week.contains("Stripe") && week.contains("3 d 0 h"),
            "{week}"
        );
        assert!(!week.contains("too short"), "{week}");
        // Two days: Stripe's 3 days (plus a day) are not covered, Shopify's
        // 4 hours are.
        let short = duplicates(2 * day).into_string();
        let stripe = short
            .split("<tr>")
            .find(|row| row.contains("Stripe"))
            .unwrap_or("");
        assert!(stripe.contains("too short"), "{stripe}");
        let shopify = short
            .split("<tr>")
            .find(|row| row.contains("Shopify"))
            .unwrap_or("");
        assert!(shopify.contains("covered"), "{shopify}");
    }
}
