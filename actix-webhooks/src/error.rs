//! The pipeline's and the extractors' failures as actix-web errors.

use std::fmt;

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use bytes::Bytes;
use webhooks_core::{
    DUPLICATE_HEADER, ExtractError, Receiver, Refusal, Rejection, ResponseParts, Verified,
};

/// A [`Rejection`] as an actix-web error: its status and response are the ones
/// core renders ([`Rejection::to_response`]), byte for byte.
///
/// The [`Webhooks`](crate::Webhooks) middleware answers rejections with a
/// response, not an error, except after a handler panic (the request went down
/// with the handler, so there is no request left to build a `ServiceResponse`
/// from): then the middleware returns this error, rendered with the
/// [`Receiver`](crate::Receiver)'s `on_reject` response if one is set.
/// Every response it renders carries the [`Rejection`] in its extensions.
///
/// ```
/// use actix_web::ResponseError;
/// use actix_webhooks::WebhookRejection;
/// use actix_webhooks::core::Rejection;
///
/// let error = WebhookRejection::new(Rejection::Duplicate);
/// assert_eq!(error.status_code(), 200);
/// assert_eq!(error.error_response().headers().get("webhook-duplicate").unwrap(), "true");
/// ```
pub struct WebhookRejection {
    rejection: Rejection,
    response: http::Response<Bytes>,
}

impl WebhookRejection {
    /// The error for `rejection`, answered with [`Rejection::to_response`].
    #[must_use]
    pub fn new(rejection: Rejection) -> Self {
        let response = rejection.to_response();
        Self::rendered(rejection, response)
    }

    /// The error for `rejection`, answered with `response` (the receiver's).
    pub(crate) fn rendered(rejection: Rejection, response: http::Response<Bytes>) -> Self {
        Self {
            rejection,
            response,
        }
    }

    /// Why the pipeline answered without running the handler.
    #[must_use]
    pub fn rejection(&self) -> &Rejection {
        &self.rejection
    }

    /// The rejection.
    #[must_use]
    pub fn into_rejection(self) -> Rejection {
        self.rejection
    }
}

impl From<Rejection> for WebhookRejection {
    fn from(rejection: Rejection) -> Self {
        Self::new(rejection)
    }
}

impl fmt::Debug for WebhookRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookRejection")
            .field("rejection", &self.rejection)
            .field("status", &self.response.status().as_u16())
            .finish_non_exhaustive()
    }
}

impl fmt::Display for WebhookRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.rejection, f)
    }
}

impl std::error::Error for WebhookRejection {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.rejection)
    }
}

impl ResponseError for WebhookRejection {
    fn status_code(&self) -> StatusCode {
        status(&self.response)
    }

    fn error_response(&self) -> HttpResponse {
        rejection_response(&self.rejection, &self.response)
    }
}

/// Why an extractor of this crate failed: `500` when the middleware is
/// missing, `422` when the JSON does not fit.
///
/// Its response is [`Rejection::Extract`] rendered by the middleware's
/// [`Receiver`] (so an `on_reject` hook shapes it like every other
/// rejection); without the middleware, [`ExtractError::to_response`].
#[derive(Debug, Clone)]
pub struct ExtractRejection {
    error: ExtractError,
    receiver: Option<Receiver>,
}

impl ExtractRejection {
    /// The rejection for `error`, rendered by `receiver` when there is one.
    pub(crate) fn new(error: ExtractError, receiver: Option<Receiver>) -> Self {
        Self { error, receiver }
    }

    /// What failed.
    #[must_use]
    pub fn error(&self) -> &ExtractError {
        &self.error
    }

    /// What failed.
    #[must_use]
    pub fn into_error(self) -> ExtractError {
        self.error
    }

    fn response(&self) -> http::Response<Bytes> {
        let rejection = Rejection::Extract(self.error.clone());
        match &self.receiver {
            Some(receiver) => receiver.rejection_response(&rejection),
            None => rejection.to_response(),
        }
    }
}

impl From<ExtractError> for ExtractRejection {
    fn from(error: ExtractError) -> Self {
        Self::new(error, None)
    }
}

impl fmt::Display for ExtractRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for ExtractRejection {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl ResponseError for ExtractRejection {
    fn status_code(&self) -> StatusCode {
        status(&self.response())
    }

    fn error_response(&self) -> HttpResponse {
        to_actix(&self.response())
    }
}

/// `response` as an actix response carrying `rejection` in its extensions.
pub(crate) fn rejection_response(
    rejection: &Rejection,
    response: &http::Response<Bytes>,
) -> HttpResponse {
    let mut response = to_actix(response);
    response.extensions_mut().insert(rejection.clone());
    response
}

/// The library's own rejection response ([`ResponseParts`]), built as
/// actix's directly, carrying `rejection` in its extensions.
pub(crate) fn parts_response(rejection: &Rejection, parts: ResponseParts) -> HttpResponse {
    let status =
        StatusCode::from_u16(parts.status.as_u16()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = HttpResponse::with_body(status, parts.body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(parts.content_type),
    );
    if let Some(secs) = parts.retry_after_secs {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    if parts.duplicate {
        headers.insert(
            HeaderName::from_static(DUPLICATE_HEADER),
            HeaderValue::from_static("true"),
        );
    }
    let mut response = response.map_into_boxed_body();
    response.extensions_mut().insert(rejection.clone());
    response
}

/// The status of an http 1.x response as actix's (http 0.2) status.
fn status(response: &http::Response<Bytes>) -> StatusCode {
    // Both types hold exactly the codes 100..=999, so this cannot fail.
    StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// Translates core's response (http 1.x) into actix's (http 0.2): the status,
/// every header value in order, and the body bytes.
fn to_actix(response: &http::Response<Bytes>) -> HttpResponse {
    let mut out = HttpResponse::with_body(status(response), response.body().clone());
    let headers = out.headers_mut();
    for (name, value) in response.headers() {
        // Valid in http 1.x is valid in http 0.2: the same grammar.
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_str().as_bytes()),
            HeaderValue::from_bytes(value.as_bytes()),
        ) {
            headers.append(name, value);
        }
    }
    out.map_into_boxed_body()
}

/// A handler's [`Refusal`] of a verified delivery, answered with the status
/// the delivery's provider reads as "stop retrying" (permanent) or "retry
/// later" (transient): see `webhooks_core::scheme::statuses`. An actix-web
/// error, so a handler returns it with `?` or `Err`.
///
/// ```
/// use actix_web::HttpResponse;
/// use actix_webhooks::{WebhookMeta, WebhookRefusal, core::Refusal};
///
/// async fn handler(WebhookMeta(meta): WebhookMeta) -> Result<HttpResponse, WebhookRefusal> {
///     let customer_known = false;
///     if !customer_known {
///         // Mailgun: 406; Stripe: 200 (it retries anything else); Slack: 400 + X-Slack-No-Retry.
///         return Err(WebhookRefusal::new(Refusal::permanent("unknown customer"), &meta));
///     }
///     Ok(HttpResponse::NoContent().finish())
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

impl fmt::Display for WebhookRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} refusal", self.refusal.kind().as_str())
    }
}

impl std::error::Error for WebhookRefusal {}

impl ResponseError for WebhookRefusal {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.refusal.status(self.scheme).as_u16())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        to_actix(&self.refusal.to_response(self.scheme))
    }
}
