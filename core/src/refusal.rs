//! A handler's refusal of a verified delivery, answered with the status its
//! provider reads as "stop retrying" or "retry later".

use std::borrow::Cow;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Response, StatusCode, header};

use crate::scheme::statuses::{self, StatusAnswer};

/// The longest reason sent back, in bytes (cut at a character boundary).
pub const MAX_REASON_LEN: usize = 256;

/// Whether retrying a refused delivery can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalKind {
    /// Retrying cannot help (an unknown account, an event about something
    /// deleted): answered with what stops the provider's retries.
    Permanent,
    /// A dependency is down or busy: answered with what makes the provider
    /// retry.
    Transient,
}

impl RefusalKind {
    /// `permanent` or `transient`, for logs.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Permanent => "permanent",
            Self::Transient => "transient",
        }
    }
}

/// A handler's refusal of a verified delivery.
///
/// The status is the provider's, looked up by the scheme that verified the
/// delivery ([`scheme::statuses`](crate::scheme::statuses)): a permanent
/// refusal is answered with what stops that provider's retries (Mailgun's
/// `406`, Postmark's `403`, Slack's `X-Slack-No-Retry: 1`, and `200` for the
/// providers that retry every non-2xx, Stripe and Shopify among them), a
/// transient one with a `503` they retry. The pipeline settles the claim by
/// that status as for any answer: a `2xx` completes it (the provider's late
/// retries are duplicates, the handler does not run again), anything else
/// releases it (a retry, or a redelivery by hand, runs the handler again).
///
/// The body is the reason, cut to [`MAX_REASON_LEN`] bytes, as
/// `text/plain`: keep secrets and payload values out of it. The adapters
/// answer it directly (`tower_webhooks::WebhookRefusal`,
/// `actix_webhooks::WebhookRefusal`).
///
/// ```
/// use std::time::Duration;
/// use webhooks_core::Refusal;
///
/// let unknown = Refusal::permanent("unknown customer");
/// assert_eq!(unknown.to_response("mailgun").status(), 406);
/// assert_eq!(unknown.to_response("stripe").status(), 200);
/// let slack = unknown.to_response("slack");
/// assert_eq!(slack.status(), 400);
/// assert_eq!(slack.headers()["x-slack-no-retry"], "1");
///
/// let busy = Refusal::transient("ledger unavailable").retry_after(Duration::from_secs(30));
/// let response = busy.to_response("stripe");
/// assert_eq!(response.status(), 503);
/// assert_eq!(response.headers()["retry-after"], "30");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    kind: RefusalKind,
    reason: Cow<'static, str>,
    retry_after: Option<Duration>,
}

impl Refusal {
    /// A refusal that retrying cannot change.
    pub fn permanent(reason: impl Into<Cow<'static, str>>) -> Self {
        Self::new(RefusalKind::Permanent, reason)
    }

    /// A refusal the provider should retry.
    pub fn transient(reason: impl Into<Cow<'static, str>>) -> Self {
        Self::new(RefusalKind::Transient, reason)
    }

    fn new(kind: RefusalKind, reason: impl Into<Cow<'static, str>>) -> Self {
        let mut reason = reason.into();
        if reason.len() > MAX_REASON_LEN {
            let mut end = MAX_REASON_LEN;
            while !reason.is_char_boundary(end) {
                end -= 1;
            }
            reason.to_mut().truncate(end);
        }
        Self {
            kind,
            reason,
            retry_after: None,
        }
    }

    /// Asks the provider to wait `after` before retrying (`Retry-After`, in
    /// whole seconds, at least 1). Only a transient refusal sends it.
    #[must_use]
    pub fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// Permanent or transient.
    #[must_use]
    pub fn kind(&self) -> RefusalKind {
        self.kind
    }

    /// The reason sent back.
    #[must_use]
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The status and header the provider of `scheme` reads.
    #[must_use]
    pub fn answer(&self, scheme: &str) -> StatusAnswer {
        let provider = statuses::for_scheme(scheme);
        match self.kind {
            RefusalKind::Permanent => provider.permanent,
            RefusalKind::Transient => provider.transient,
        }
    }

    /// The status the provider of `scheme` is answered with.
    #[must_use]
    pub fn status(&self, scheme: &str) -> StatusCode {
        self.answer(scheme).status
    }

    /// The response for a delivery verified by `scheme`
    /// ([`Verified::scheme`](crate::Verified::scheme)): the provider's
    /// status and header, `Retry-After` for a transient refusal that set
    /// one, and the reason as `text/plain`.
    #[must_use]
    pub fn to_response(&self, scheme: &str) -> Response<Bytes> {
        let answer = self.answer(scheme);
        tracing::info!(
            scheme,
            refusal = self.kind.as_str(),
            status = answer.status.as_u16(),
            "webhook handler refused the delivery"
        );
        let mut response = Response::new(Bytes::from(self.reason.clone().into_owned()));
        *response.status_mut() = answer.status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        if let Some((name, value)) = answer.header {
            headers.insert(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        if let (RefusalKind::Transient, Some(after)) = (self.kind, self.retry_after) {
            let secs = (after.as_secs() + u64::from(after.subsec_nanos() > 0)).max(1);
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheme::statuses::PROVIDERS;

    #[test]
    fn every_provider_answers_its_own_statuses() {
        for provider in PROVIDERS {
            let permanent = Refusal::permanent("no such account").to_response(provider.scheme);
            assert_eq!(
                permanent.status(),
                provider.permanent.status,
                "{}",
                provider.scheme
            );
            if let Some((name, value)) = provider.permanent.header {
                assert_eq!(permanent.headers()[name], value, "{}", provider.scheme);
            }
            assert_eq!(permanent.body().as_ref(), b"no such account");
            let transient = Refusal::transient("busy").to_response(provider.scheme);
            assert_eq!(transient.status(), 503, "{}", provider.scheme);
            assert!(transient.headers().get("x-slack-no-retry").is_none());
            assert!(transient.headers().get(header::RETRY_AFTER).is_none());
        }
    }

    #[test]
    fn retry_after_only_on_transient_refusals_rounded_up() {
        let after = Duration::from_millis(1500);
        let transient = Refusal::transient("busy").retry_after(after);
        assert_eq!(
            transient.to_response("github").headers()[header::RETRY_AFTER],
            "2"
        );
        let zero = Refusal::transient("busy").retry_after(Duration::ZERO);
        assert_eq!(
            zero.to_response("github").headers()[header::RETRY_AFTER],
            "1"
        );
        let permanent = Refusal::permanent("gone").retry_after(after);
        assert!(
            permanent
                .to_response("github")
                .headers()
                .get(header::RETRY_AFTER)
                .is_none()
        );
    }

    #[test]
    fn long_reasons_are_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_REASON_LEN);
        let refusal = Refusal::permanent(long);
        assert!(refusal.reason().len() <= MAX_REASON_LEN);
        assert!(refusal.reason().len() >= MAX_REASON_LEN - 1);
        assert!(refusal.reason().chars().all(|c| c == 'é'));
    }
}
