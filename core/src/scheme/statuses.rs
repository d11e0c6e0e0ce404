//! What each provider does with each status: the answer that stops its
//! retries and the one that makes it retry, per scheme, in one table.
//!
//! A handler that refuses a delivery says whether the refusal is
//! **permanent** (retrying cannot help: an unknown customer, an event for an
//! account that was deleted) or **transient** (a dependency is down, try
//! later) with a [`Refusal`](crate::Refusal); the answer is looked up here
//! by the scheme that verified the delivery ([`for_scheme`]).
//!
//! Most providers retry every non-2xx answer: for them the only answer that
//! stops retries is a 2xx, so a permanent refusal is acknowledged with `200`
//! (the dedup claim then completes, and a late retry is a duplicate). Those
//! that document a status meaning "rejected, do not retry" get that status:
//! Mailgun's `406`, Postmark's `403`, HubSpot's `400`, Amazon SNS's 4xx,
//! Slack's `X-Slack-No-Retry: 1`. Providers that never retry get a `422`,
//! shown as failed in their delivery log (and redeliverable by hand). A
//! transient refusal is a `503` for every provider: each retries it, or
//! (GitHub, GitLab, Twilio, Discord) retries nothing automatically.
//!
//! The table, with its sources, is in `docs/schemes.md` ("Statuses").
//!
//! ```
//! use webhooks_core::scheme::statuses;
//!
//! let mailgun = statuses::for_scheme("mailgun");
//! assert_eq!(mailgun.permanent.status, 406);
//! assert_eq!(mailgun.transient.status, 503);
//! // Stripe retries every non-2xx for three days: only a 2xx stops it.
//! assert_eq!(statuses::for_scheme("stripe").permanent.status, 200);
//! // Slack stops on its header, whatever the status.
//! let slack = statuses::for_scheme("slack").permanent;
//! assert_eq!(slack.header, Some(("x-slack-no-retry", "1")));
//! ```

use http::StatusCode;

/// One answer: a status and at most one header the provider reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatusAnswer {
    /// The status.
    pub status: StatusCode,
    /// A header the provider reads on the response (`(name, value)`,
    /// lowercase), such as Slack's `x-slack-no-retry: 1`.
    pub header: Option<(&'static str, &'static str)>,
}

impl StatusAnswer {
    const fn status(status: StatusCode) -> Self {
        Self {
            status,
            header: None,
        }
    }

    const fn with_header(status: StatusCode, name: &'static str, value: &'static str) -> Self {
        Self {
            status,
            header: Some((name, value)),
        }
    }
}

/// Whether a provider retries a failed delivery on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Retries {
    /// It retries failed deliveries on a schedule.
    Automatic,
    /// It does not: a failed delivery is redelivered by hand or through its API.
    Never,
}

/// What one provider does with the statuses it gets back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProviderStatuses {
    /// The scheme's name, as [`Verifier::scheme`](crate::Verifier::scheme) reports it.
    pub scheme: &'static str,
    /// Whether the provider retries on its own.
    pub retries: Retries,
    /// The answer to a permanent refusal: the provider does not retry it.
    pub permanent: StatusAnswer,
    /// The answer to a transient refusal: the provider retries it (when it retries at all).
    pub transient: StatusAnswer,
}

const OK: StatusAnswer = StatusAnswer::status(StatusCode::OK);
const UNPROCESSABLE: StatusAnswer = StatusAnswer::status(StatusCode::UNPROCESSABLE_ENTITY);
const BAD_REQUEST: StatusAnswer = StatusAnswer::status(StatusCode::BAD_REQUEST);
const UNAVAILABLE: StatusAnswer = StatusAnswer::status(StatusCode::SERVICE_UNAVAILABLE);

/// A provider that retries every non-2xx: only a 2xx stops it.
const fn retries_all(scheme: &'static str) -> ProviderStatuses {
    ProviderStatuses {
        scheme,
        retries: Retries::Automatic,
        permanent: OK,
        transient: UNAVAILABLE,
    }
}

/// A provider that retries but reads `permanent` as "do not retry".
const fn stops_on(scheme: &'static str, permanent: StatusAnswer) -> ProviderStatuses {
    ProviderStatuses {
        scheme,
        retries: Retries::Automatic,
        permanent,
        transient: UNAVAILABLE,
    }
}

/// A provider that never retries: a refusal is shown as failed there.
const fn never_retries(scheme: &'static str) -> ProviderStatuses {
    ProviderStatuses {
        scheme,
        retries: Retries::Never,
        permanent: UNPROCESSABLE,
        transient: UNAVAILABLE,
    }
}

/// Every scheme the library verifies, with what its provider does. The
/// sources are in `docs/schemes.md` ("Statuses").
pub const PROVIDERS: &[ProviderStatuses] = &[
    // Svix and the Standard Webhooks senders retry every non-2xx over ~28 h
    // and disable an endpoint after 5 days of failures.
    retries_all("standard-webhooks"),
    // Live mode: every non-2xx, for up to 3 days.
    retries_all("stripe"),
    // "GitHub does not automatically redeliver failed deliveries."
    never_retries("github"),
    // Non-2xx retried 3 times; X-Slack-No-Retry: 1 turns that off.
    stops_on(
        "slack",
        StatusAnswer::with_header(StatusCode::BAD_REQUEST, "x-slack-no-retry", "1"),
    ),
    // 8 retries over 4 hours; 8 consecutive failures can remove the subscription.
    retries_all("shopify"),
    // No retries unless the URL carries connection overrides (`#rc=`), which
    // retry 5xx only.
    never_retries("twilio"),
    // Non-2xx retried for up to 24 hours.
    retries_all("square"),
    retries_all("mandrill"),
    // 400, 401, 403, 404 and 405 are not retried; 5xx and 429 are.
    stops_on("hubspot", BAD_REQUEST),
    // Interactions are answered in the request; nothing is retried.
    never_retries("discord"),
    // No retries; 4 consecutive failures disable the hook for a while, so a
    // permanent refusal is acknowledged.
    ProviderStatuses {
        scheme: "gitlab",
        retries: Retries::Never,
        permanent: OK,
        transient: UNAVAILABLE,
    },
    retries_all("linear"),
    // Non-2xx retried 3 times (5, 20 and 60 minutes later).
    retries_all("zoom"),
    // Retried up to 60 times over 3 days.
    retries_all("paddle"),
    // 410 disables the whole subscription; other failures are retried once.
    retries_all("intercom"),
    // 404 and 410 disable the webhook; other failures are retried.
    retries_all("typeform"),
    retries_all("sendgrid"),
    // "406 (Not Acceptable): Mailgun will determine the POST is rejected and not retry."
    stops_on("mailgun", StatusAnswer::status(StatusCode::NOT_ACCEPTABLE)),
    // "If we receive a 403 Forbidden response, retries stop immediately."
    stops_on("postmark", StatusAnswer::status(StatusCode::FORBIDDEN)),
    // Statuses outside 200–499 are retried: a 4xx is delivered.
    stops_on("sns", BAD_REQUEST),
];

/// What a provider not in [`PROVIDERS`] (a [`GenericHmac`](super::GenericHmac)
/// scheme, a verifier of your own) is assumed to do: retry every non-2xx.
pub const UNKNOWN: ProviderStatuses = retries_all("unknown");

/// What the provider of `scheme` does with statuses; [`UNKNOWN`] for a
/// scheme not in [`PROVIDERS`].
#[must_use]
pub fn for_scheme(scheme: &str) -> &'static ProviderStatuses {
    PROVIDERS
        .iter()
        .find(|p| p.scheme == scheme)
        .unwrap_or(&UNKNOWN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_scheme_and_sns_has_a_row_once() {
        let mut names: Vec<&str> = super::super::registry::SCHEMES
            .iter()
            .map(|s| s.name)
            .collect();
        names.push("sns");
        for name in &names {
            let rows = PROVIDERS.iter().filter(|p| p.scheme == *name).count();
            assert_eq!(rows, 1, "{name} has {rows} rows");
        }
        assert_eq!(PROVIDERS.len(), names.len(), "a row for an unknown scheme");
    }

    #[test]
    fn permanent_and_transient_answers_differ_for_every_provider() {
        for p in PROVIDERS.iter().chain([&UNKNOWN]) {
            assert_ne!(p.permanent, p.transient, "{}", p.scheme);
            assert!(p.transient.status.is_server_error(), "{}", p.scheme);
            // A provider that retries must never be told "stop" with a status
            // it retries: either a 2xx, or a status documented as final.
            if p.retries == Retries::Automatic && !p.permanent.status.is_success() {
                assert!(
                    matches!(
                        p.scheme,
                        "mailgun" | "postmark" | "hubspot" | "sns" | "slack"
                    ),
                    "{}: a non-2xx stop status needs a documented source",
                    p.scheme
                );
            }
        }
    }

    #[test]
    fn documented_stop_statuses() {
        let permanent = |s: &str| for_scheme(s).permanent;
        assert_eq!(permanent("mailgun").status, 406);
        assert_eq!(permanent("postmark").status, 403);
        assert_eq!(permanent("hubspot").status, 400);
        assert_eq!(permanent("sns").status, 400);
        assert_eq!(permanent("slack").status, 400);
        assert_eq!(permanent("slack").header, Some(("x-slack-no-retry", "1")));
        for retries_everything in ["stripe", "shopify", "standard-webhooks", "paddle", "zoom"] {
            assert_eq!(permanent(retries_everything), OK, "{retries_everything}");
        }
        assert_eq!(permanent("github").status, 422);
        assert_eq!(for_scheme("github").retries, Retries::Never);
        assert_eq!(permanent("no-such-scheme"), OK);
        assert_eq!(for_scheme("no-such-scheme").transient.status, 503);
    }
}
