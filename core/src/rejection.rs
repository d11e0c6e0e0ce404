//! Every way the pipeline can answer without running the handler, as one type.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};

use crate::VerifyError;

/// The header that marks an acknowledged duplicate (`200`, handler not run).
pub const DUPLICATE_HEADER: &str = "webhook-duplicate";

/// Why the pipeline answered without running the handler.
///
/// Each variant has one status, one short public reason, and (where the sender
/// should come back) a `Retry-After`. [`Rejection::to_response`] builds the
/// response both framework adapters send, so axum and actix answer the same.
///
/// | variant | status | headers |
/// |---|---|---|
/// | [`PayloadTooLarge`](Self::PayloadTooLarge) | 413 | |
/// | [`BodyRead`](Self::BodyRead) | 400 | |
/// | [`BodyTimeout`](Self::BodyTimeout) | 408 | |
/// | [`Verify`](Self::Verify) | 400 (missing/malformed) or 401 | |
/// | [`InFlight`](Self::InFlight) | 409 | `Retry-After` |
/// | [`Duplicate`](Self::Duplicate) | 200 | `webhook-duplicate: true` |
/// | [`IdRefused`](Self::IdRefused) | 400 | |
/// | [`StoreUnavailable`](Self::StoreUnavailable) | 503 | `Retry-After` |
/// | [`HandlerPanicked`](Self::HandlerPanicked) | 500 | |
/// | [`Extract`](Self::Extract) | 422 (JSON does not fit) or 500 (no layer) | |
/// | [`Stored`](Self::Stored) | 202 (configurable) | |
/// | [`Handshake`](Self::Handshake) | 200, the provider's answer | |
///
/// A receiver's `on_reject` hook shapes the body and headers of these
/// responses, never the protocol: the status, `Retry-After` and
/// `webhook-duplicate` are always the ones above.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// The body is larger than the configured limit.
    #[error("payload too large (limit {limit} bytes)")]
    PayloadTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The body could not be read (the client went away, a malformed
    /// `Content-Length`).
    #[error("could not read body")]
    BodyRead,
    /// The body did not arrive within the receiver's body timeout (a stalled
    /// or trickled upload, a `Content-Length` larger than what was sent).
    #[error("body not received in time")]
    BodyTimeout,
    /// The signature did not verify.
    #[error(transparent)]
    Verify(#[from] VerifyError),
    /// Another attempt of the same delivery is being processed right now.
    #[error("delivery in progress")]
    InFlight {
        /// When the sender should try again.
        retry_after: Duration,
    },
    /// The delivery was processed before: acknowledged without running the handler.
    #[error("duplicate delivery")]
    Duplicate,
    /// The dedup store refused this delivery's key for good (an error that
    /// retrying cannot fix), so the delivery was not processed.
    #[error("delivery id not accepted")]
    IdRefused,
    /// The dedup store could not be reached, so the delivery was not processed.
    #[error("temporarily unavailable")]
    StoreUnavailable {
        /// When the sender should try again.
        retry_after: Duration,
    },
    /// The handler panicked; the claim was released so a retry can run.
    #[error("internal error")]
    HandlerPanicked,
    /// A handler's extractor refused the verified delivery (JSON that does
    /// not fit the handler's type, or no webhook layer on the route). The
    /// handler did not run; the claim was released.
    #[error(transparent)]
    Extract(ExtractError),
    /// The delivery was stored durably in the inbox; a worker will process
    /// it (not a failure: the sender is told it was received).
    #[error("accepted")]
    Stored {
        /// The status answered (default 202).
        status: StatusCode,
    },
    /// A verified provider handshake, answered by the library (`200` with
    /// the answer the provider's protocol fixes): neither stored nor
    /// handed to the handler, in either mode. (Boxed: handshakes are rare,
    /// and every request's future carries a `Rejection`.)
    #[error("handshake answered")]
    Handshake(Box<crate::Handshake>),
}

impl Rejection {
    /// The status this rejection answers with.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        match self {
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BodyRead | Self::IdRefused => StatusCode::BAD_REQUEST,
            Self::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::Verify(e) => e.status(),
            Self::InFlight { .. } => StatusCode::CONFLICT,
            Self::Duplicate => StatusCode::OK,
            Self::StoreUnavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::HandlerPanicked => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Extract(e) => e.status(),
            Self::Stored { status } => *status,
            Self::Handshake(_) => StatusCode::OK,
        }
    }

    /// A short name of the outcome, for logs and metrics.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::BodyRead => "body_read",
            Self::BodyTimeout => "body_timeout",
            Self::Verify(e) => e.kind(),
            Self::InFlight { .. } => "in_flight",
            Self::Duplicate => "duplicate",
            Self::IdRefused => "id_refused",
            Self::StoreUnavailable { .. } => "store_unavailable",
            Self::HandlerPanicked => "handler_panicked",
            Self::Extract(e) => e.kind(),
            Self::Stored { .. } => "stored",
            Self::Handshake(_) => "handshake",
        }
    }

    /// `Retry-After`, when the sender should come back.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::InFlight { retry_after } | Self::StoreUnavailable { retry_after } => {
                Some(*retry_after)
            }
            _ => None,
        }
    }

    /// The response: status, `text/plain` reason, `Retry-After` in whole
    /// seconds (at least 1) and the duplicate marker.
    ///
    /// ```
    /// use std::time::Duration;
    /// use webhooks_core::Rejection;
    ///
    /// let response = Rejection::InFlight { retry_after: Duration::from_millis(200) }.to_response();
    /// assert_eq!(response.status(), 409);
    /// assert_eq!(response.headers()["retry-after"], "1");
    /// ```
    #[must_use]
    pub fn to_response(&self) -> Response<Bytes> {
        let parts = self.response_parts();
        let mut response = Response::new(parts.body);
        *response.status_mut() = parts.status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(parts.content_type),
        );
        if let Some(secs) = parts.retry_after_secs {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if parts.duplicate {
            headers.insert(DUPLICATE_HEADER, HeaderValue::from_static("true"));
        }
        response
    }

    /// What [`to_response`](Self::to_response) answers, in parts, for an
    /// adapter to build its framework's response directly (actix-web's)
    /// instead of translating an [`http::Response`].
    ///
    /// ```
    /// use webhooks_core::Rejection;
    ///
    /// let parts = Rejection::Duplicate.response_parts();
    /// assert_eq!((parts.status.as_u16(), parts.duplicate), (200, true));
    /// ```
    #[must_use]
    pub fn response_parts(&self) -> ResponseParts {
        let (body, content_type) = match self {
            Self::Handshake(answer) => (answer.body().clone(), answer.content_type()),
            _ => (Bytes::from(self.to_string()), "text/plain; charset=utf-8"),
        };
        ResponseParts {
            status: self.status(),
            content_type,
            retry_after_secs: self.retry_after_secs(),
            duplicate: matches!(self, Self::Duplicate),
            body,
        }
    }

    /// `Retry-After` in whole seconds, rounded up, at least 1.
    fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after()
            .map(|after| (after.as_secs() + u64::from(after.subsec_nanos() > 0)).max(1))
    }

    /// Sets what the sender's retry logic reads, whatever a custom response
    /// said: the status, `Retry-After` (set or removed) and the duplicate
    /// marker (set or removed).
    pub(crate) fn apply_protocol<B>(&self, response: &mut Response<B>) {
        *response.status_mut() = self.status();
        let headers = response.headers_mut();
        match self.retry_after_secs() {
            Some(secs) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
            }
            None => {
                headers.remove(header::RETRY_AFTER);
            }
        }
        if matches!(self, Self::Duplicate) {
            headers.insert(DUPLICATE_HEADER, HeaderValue::from_static("true"));
        } else {
            headers.remove(DUPLICATE_HEADER);
        }
    }
}

/// A rejection's response in parts ([`Rejection::response_parts`]): what
/// [`Rejection::to_response`] sends, for an adapter to build its framework's
/// response from directly.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ResponseParts {
    /// The status.
    pub status: StatusCode,
    /// The `Content-Type`.
    pub content_type: &'static str,
    /// `Retry-After`, in whole seconds, when the sender should come back.
    pub retry_after_secs: Option<u64>,
    /// Whether the response carries `webhook-duplicate: true`.
    pub duplicate: bool,
    /// The body: the short public reason, or a handshake's answer.
    pub body: Bytes,
}

/// Why a handler's `VerifiedWebhook<T>` extractor failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExtractError {
    /// No verified delivery in the request: the webhook layer or middleware is
    /// not installed on this route.
    #[error(
        "no verified webhook in this request: is the webhooks layer/middleware installed on this route?"
    )]
    MissingLayer,
    /// The body is not JSON of the expected shape.
    #[error("invalid JSON at `{path}`: {message}")]
    Json {
        /// The path of the failing field (`data.email_id`), `.` for the root.
        path: String,
        /// What serde said, without the body.
        message: String,
    },
}

impl ExtractError {
    /// `500` when the layer is missing (a server bug), `422` for JSON that does not fit.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        match self {
            Self::MissingLayer => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Json { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        }
    }

    /// A short name of the failure, for logs and metrics.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::MissingLayer => "missing_layer",
            Self::Json { .. } => "invalid_json",
        }
    }

    /// The response both adapters send.
    #[must_use]
    pub fn to_response(&self) -> Response<Bytes> {
        let mut response = Response::new(Bytes::from(self.to_string()));
        *response.status_mut() = self.status();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        response
    }
}

/// A verified body that an event model's own constructor refused, as the
/// `422` [`ExtractError::Json`] that `VerifiedWebhook<T>` answers: for
/// models built from more than the body, such as octocrab's GitHub
/// `WebhookEvent::try_from_header_and_body(event_type, body)`, which a
/// handler calls with [`Verified::event_type`](crate::Verified::event_type)
/// (docs/typed-events.md). The path is `.` (such constructors do not track
/// one); the message is serde's without the body's values, and the failure is
/// logged at WARN like the extractors' (the sender retries a `422`).
///
/// ```
/// use webhooks_core::ExtractError;
///
/// let error = serde_json::from_str::<u32>(r#""hunter2""#).unwrap_err();
/// let ExtractError::Json { path, message } = ExtractError::from(error) else { panic!() };
/// assert_eq!(path, ".");
/// assert!(message.starts_with("invalid type, expected u32"), "{message}");
/// assert!(!message.contains("hunter2"));
/// ```
impl From<serde_json::Error> for ExtractError {
    fn from(error: serde_json::Error) -> Self {
        let message = crate::delivery::scrub(&error.to_string());
        tracing::warn!(
            path = ".",
            error = %message,
            "webhook body does not fit the handler's type; answering 422"
        );
        Self::Json {
            path: ".".into(),
            message,
        }
    }
}
