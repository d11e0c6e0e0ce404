//! A handler's refusal as an axum response.

use axum_core::response::{IntoResponse, Response};
use webhooks_core::{Refusal, Verified};

/// A handler's [`Refusal`] of a verified delivery, answered with the status
/// the delivery's provider reads as "stop retrying" (permanent) or "retry
/// later" (transient): see `webhooks_core::scheme::statuses`.
///
/// ```
/// use axum::http::StatusCode;
/// use tower_webhooks::{WebhookMeta, WebhookRefusal, core::Refusal};
///
/// async fn handler(WebhookMeta(meta): WebhookMeta) -> Result<StatusCode, WebhookRefusal> {
///     let customer_known = false;
///     if !customer_known {
///         // Mailgun: 406; Stripe: 200 (it retries anything else); Slack: 400 + X-Slack-No-Retry.
///         return Err(WebhookRefusal::new(Refusal::permanent("unknown customer"), &meta));
///     }
///     Ok(StatusCode::NO_CONTENT)
/// }
/// ```
#[derive(Debug, Clone)]
pub struct WebhookRefusal {
    refusal: Refusal,
    scheme: &'static str,
}

impl WebhookRefusal {
    /// `refusal` of the delivery `meta` describes (its scheme picks the status).
    #[must_use]
    pub fn new(refusal: Refusal, meta: &Verified) -> Self {
        Self {
            refusal,
            scheme: meta.scheme,
        }
    }

    /// The refusal.
    #[must_use]
    pub fn refusal(&self) -> &Refusal {
        &self.refusal
    }
}

impl IntoResponse for WebhookRefusal {
    fn into_response(self) -> Response {
        self.refusal
            .to_response(self.scheme)
            .map(axum_core::body::Body::from)
    }
}
