//! Provider handshakes the library answers itself, after verification.

use std::fmt;

use bytes::Bytes;

/// The answer to a provider's handshake: a request the provider sends to
/// check the endpoint, whose answer its protocol fixes. The receive
/// pipeline answers it once the request verified, in both modes, with
/// `200`; it is never deduplicated, stored in an inbox, or handed to the
/// handler ([`Rejection::Handshake`](crate::Rejection::Handshake)).
///
/// | provider | handshake | answer |
/// |---|---|---|
/// | Zoom | `endpoint.url_validation` | `{"plainToken", "encryptedToken"}` |
/// | Discord | `PING` (type 1) | `{"type":1}` |
/// | Slack | `url_verification` | the `challenge`, as text |
/// | Amazon SNS | `SubscriptionConfirmation`, with a hook set | empty; the hook confirms |
///
/// Verifiers report one through [`Verifier::handshake`](crate::Verifier::handshake).
#[derive(Clone, PartialEq, Eq)]
pub struct Handshake {
    content_type: &'static str,
    body: Bytes,
}

impl fmt::Debug for Handshake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handshake")
            .field("content_type", &self.content_type)
            .field("body_len", &self.body.len())
            .finish()
    }
}

impl Handshake {
    /// A JSON answer.
    #[must_use]
    pub fn json(body: impl Into<Bytes>) -> Self {
        Self {
            content_type: "application/json",
            body: body.into(),
        }
    }

    /// A plain-text answer.
    #[must_use]
    pub fn text(body: impl Into<Bytes>) -> Self {
        Self {
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
        }
    }

    /// An empty answer.
    #[must_use]
    pub fn empty() -> Self {
        Self::text(Bytes::new())
    }

    /// The answer's `Content-Type`.
    #[must_use]
    pub fn content_type(&self) -> &'static str {
        self.content_type
    }

    /// The answer's body.
    #[must_use]
    pub fn body(&self) -> &Bytes {
        &self.body
    }
}
