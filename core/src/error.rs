//! Why a delivery was refused, and why a verifier could not be built.

use http::StatusCode;

/// Why a request's signature did not verify.
///
/// Every variant maps to a status with [`VerifyError::status`]: a request the
/// scheme cannot even read (a header missing or malformed) is a `400`, a request
/// that is well-formed but not authentic or not fresh is a `401`.
///
/// The [`Display`](std::fmt::Display) text is the short public reason sent to the
/// sender. It never contains a secret, the body or the expected signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// A header the scheme needs is absent.
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    /// A header is present but cannot be read.
    #[error("malformed header {header}: {reason}")]
    MalformedHeader {
        /// The header's name.
        header: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A field the scheme reads from the body (a signature or timestamp
    /// carried in the payload, as Mailgun and Amazon SNS do) is absent, or
    /// the body is not the document the scheme expects.
    #[error("missing field {0}")]
    MissingField(&'static str),
    /// A field the scheme reads from the body is present but cannot be read.
    #[error("malformed field {field}: {reason}")]
    MalformedField {
        /// The field's name.
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The signed timestamp is older than the tolerance allows.
    #[error("timestamp too old")]
    TimestampTooOld,
    /// The signed timestamp is further in the future than the tolerance allows.
    #[error("timestamp too new")]
    TimestampTooNew,
    /// No signature in the request matches any configured secret or key.
    #[error("no matching signature")]
    NoMatchingSignature,
    /// The request names a tenant or key that is not known to the receiver.
    #[error("unknown signing key")]
    UnknownKey,
    /// The key lookup for this request failed (secret manager unreachable…).
    #[error("signing key lookup unavailable")]
    KeyLookupUnavailable,
}

impl VerifyError {
    /// The HTTP status this error answers with.
    ///
    /// ```
    /// use webhooks_core::VerifyError;
    /// assert_eq!(VerifyError::MissingHeader("webhook-id").status(), 400);
    /// assert_eq!(VerifyError::NoMatchingSignature.status(), 401);
    /// ```
    #[must_use]
    pub fn status(&self) -> StatusCode {
        match self {
            Self::MissingHeader(_)
            | Self::MalformedHeader { .. }
            | Self::MissingField(_)
            | Self::MalformedField { .. } => StatusCode::BAD_REQUEST,
            Self::TimestampTooOld
            | Self::TimestampTooNew
            | Self::NoMatchingSignature
            | Self::UnknownKey => StatusCode::UNAUTHORIZED,
            Self::KeyLookupUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// A short machine-friendly name of the kind of failure, for metrics and logs.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::MissingHeader(_) => "missing_header",
            Self::MalformedHeader { .. } => "malformed_header",
            Self::MissingField(_) => "missing_field",
            Self::MalformedField { .. } => "malformed_field",
            Self::TimestampTooOld => "timestamp_too_old",
            Self::TimestampTooNew => "timestamp_too_new",
            Self::NoMatchingSignature => "no_matching_signature",
            Self::UnknownKey => "unknown_key",
            Self::KeyLookupUnavailable => "key_lookup_unavailable",
        }
    }

    pub(crate) fn malformed(header: &'static str, reason: &'static str) -> Self {
        Self::MalformedHeader { header, reason }
    }

    pub(crate) fn malformed_field(field: &'static str, reason: &'static str) -> Self {
        Self::MalformedField { field, reason }
    }
}

/// Why a verifier or a store could not be configured.
///
/// Returned when building, never at request time: a receiver with an empty or
/// undecodable secret must not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A secret or key is empty.
    #[error("{0} is empty")]
    Empty(&'static str),
    /// A secret or key could not be decoded.
    #[error("{what} is invalid: {reason}")]
    Invalid {
        /// What was being decoded (`"secret"`, `"public key"`…).
        what: &'static str,
        /// Why it could not be used. Never contains the material itself.
        reason: &'static str,
    },
    /// The verifier has nothing to verify with.
    #[error("no secret or key configured")]
    NoKeys,
    /// A setting is out of range or inconsistent.
    #[error("invalid setting: {0}")]
    Setting(&'static str),
    /// A retention (of the dedup store's completed ids, or of the inbox's
    /// completed events) shorter than the provider's documented retry
    /// window plus [`RETRY_WINDOW_MARGIN`](crate::scheme::registry::RETRY_WINDOW_MARGIN):
    /// a retry arriving after the id was forgotten would run the handler
    /// again. Raise the retention, or override knowingly
    /// (`ReceiverBuilder::allow_retention_below_retry_window`, or the inbox
    /// URL's `short_retention=allow`).
    #[error(
        "the retention ({retention_secs} s) is shorter than {scheme}'s retry window plus a margin ({floor_secs} s): a late retry would run again; raise it or allow it explicitly"
    )]
    RetentionBelowRetryWindow {
        /// The scheme (`"stripe"`), or `"any"` for an inbox shared by all.
        scheme: &'static str,
        /// The retention configured, in seconds.
        retention_secs: u64,
        /// The shortest retention allowed without the override, in seconds.
        floor_secs: u64,
    },
}
