//! Signed test deliveries: what a provider would send, for your handler tests.
//!
//! A [`TestDelivery`] is a body plus what the sender would put around it (a
//! delivery id, an event type, a timestamp: now by default). Signed with a
//! verifier of your app ([`SignTest`]), it gives the headers the provider
//! would send. The framework adapters turn it into their own test request:
//! `tower_webhooks::testing::signed_request` (an axum `Request<Body>` for
//! `oneshot`) and `actix_webhooks::testing::signed_request` (an actix
//! `TestRequest`).
//!
//! ```
//! use std::time::SystemTime;
//! use webhooks_core::{Verifier, scheme::StandardWebhooks, testing::TestDelivery};
//!
//! let verifier = StandardWebhooks::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
//! let delivery = TestDelivery::new(r#"{"type":"email.sent"}"#);
//! let headers = delivery.signed_headers(&verifier)?;
//! // Signed now, with a fresh id: it verifies against the real clock.
//! let verified = verifier.verify(&headers, delivery.body(), SystemTime::now())?;
//! assert!(verified.id.unwrap().starts_with("msg_"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::HeaderMap;

use crate::ConfigError;
use crate::dedup::ClaimToken;
use crate::scheme::standard::Signer;
use crate::scheme::{GitHub, Shopify, Slack, StandardWebhooks, Stripe};

/// A scheme that can sign a [`TestDelivery`] the way its provider would.
///
/// Implemented by the verifiers that can sign ([`StandardWebhooks`],
/// [`Stripe`], [`GitHub`], [`Slack`], [`Shopify`]) and by the Standard
/// Webhooks [`Signer`] (`v1` or `v1a`). For any other scheme, sign the
/// headers yourself and use [`TestDelivery::signed_with`].
pub trait SignTest {
    /// The headers the provider would send for `delivery`.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the scheme cannot sign (a verifier with public
    /// keys only) or the id or event type cannot be a header value.
    fn sign_test(&self, delivery: &TestDelivery) -> Result<HeaderMap, ConfigError>;
}

/// A delivery to sign for a test: a body, a delivery id (random unless set),
/// an event type (for schemes that send it in a header) and a timestamp (now
/// unless set).
///
/// Each `TestDelivery` gets its own random id, so two of them are two
/// deliveries to the dedup store; clone one (or set the same
/// [`id`](Self::id)) to send a retry of the same delivery.
#[derive(Clone)]
#[must_use]
pub struct TestDelivery {
    body: Bytes,
    id: String,
    event_type: Option<String>,
    timestamp: Option<u64>,
    headers: Option<HeaderMap>,
}

impl std::fmt::Debug for TestDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestDelivery")
            .field("body_len", &self.body.len())
            .field("id", &self.id)
            .field("event_type", &self.event_type)
            .field("timestamp", &self.timestamp)
            .finish_non_exhaustive()
    }
}

impl TestDelivery {
    /// A delivery of `body`, with a random id (`msg_` and 32 hex digits) and
    /// the current time.
    pub fn new(body: impl Into<Bytes>) -> Self {
        Self {
            body: body.into(),
            id: format!("msg_{}", ClaimToken::random().to_hex()),
            event_type: None,
            timestamp: None,
            headers: None,
        }
    }

    /// A delivery whose body is `value` as JSON.
    ///
    /// # Panics
    ///
    /// When `value` cannot be serialized to JSON (a map with non-string
    /// keys): a bug in the test.
    pub fn json(value: &impl serde::Serialize) -> Self {
        #[allow(clippy::expect_used)]
        let body = serde_json::to_vec(value).expect("test delivery body serializes to JSON");
        Self::new(body)
    }

    /// Sets the delivery id (to send the same delivery twice).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Sets the event type, for schemes that send it in a header (GitHub's
    /// `X-GitHub-Event`, default `ping`; Shopify's topic, default
    /// `app/uninstalled`). Stripe and Standard Webhooks carry it in the body.
    pub fn event_type(mut self, event_type: impl Into<String>) -> Self {
        self.event_type = Some(event_type.into());
        self
    }

    /// Sets the signed timestamp, in Unix seconds (default: now), to test
    /// stale or future deliveries.
    pub fn timestamp(mut self, unix_seconds: u64) -> Self {
        self.timestamp = Some(unix_seconds);
        self
    }

    /// Uses `headers`, signed by you, instead of signing with a [`SignTest`]
    /// scheme: for schemes that do not implement it.
    pub fn signed_with(mut self, headers: HeaderMap) -> Self {
        self.headers = Some(headers);
        self
    }

    /// The body.
    #[must_use]
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The delivery id.
    #[must_use]
    pub fn delivery_id(&self) -> &str {
        &self.id
    }

    /// The event type set with [`event_type`](Self::event_type), or `default`.
    #[must_use]
    pub fn event_type_or(&self, default: &'static str) -> &str {
        self.event_type.as_deref().unwrap_or(default)
    }

    /// The timestamp to sign: the one set, or now.
    #[must_use]
    pub fn unix_timestamp(&self) -> u64 {
        self.timestamp.unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        })
    }

    /// The headers the provider would send, signed by `scheme` (or the ones
    /// given to [`signed_with`](Self::signed_with)).
    ///
    /// # Errors
    ///
    /// [`ConfigError`] from [`SignTest::sign_test`].
    pub fn signed_headers(&self, scheme: &impl SignTest) -> Result<HeaderMap, ConfigError> {
        match &self.headers {
            Some(headers) => Ok(headers.clone()),
            None => scheme.sign_test(self),
        }
    }
}

impl From<&'static str> for TestDelivery {
    fn from(body: &'static str) -> Self {
        Self::new(body)
    }
}

impl From<String> for TestDelivery {
    fn from(body: String) -> Self {
        Self::new(body)
    }
}

impl From<Vec<u8>> for TestDelivery {
    fn from(body: Vec<u8>) -> Self {
        Self::new(body)
    }
}

impl From<Bytes> for TestDelivery {
    fn from(body: Bytes) -> Self {
        Self::new(body)
    }
}

impl From<serde_json::Value> for TestDelivery {
    fn from(body: serde_json::Value) -> Self {
        Self::json(&body)
    }
}

impl SignTest for StandardWebhooks {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.sign_headers(&d.id, d.unix_timestamp(), &d.body)
    }
}

impl SignTest for Signer {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.headers(&d.id, d.unix_timestamp(), &d.body)
    }
}

impl SignTest for Stripe {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.sign_headers(d.unix_timestamp(), &d.body)
    }
}

impl SignTest for Slack {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.sign_headers(d.unix_timestamp(), &d.body)
    }
}

impl SignTest for GitHub {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.sign_headers(&d.id, d.event_type_or("ping"), &d.body)
    }
}

impl SignTest for Shopify {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.sign_headers(&d.id, d.event_type_or("app/uninstalled"), &d.body)
    }
}

impl<T: SignTest + ?Sized> SignTest for &T {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        (**self).sign_test(d)
    }
}

impl<T: SignTest + ?Sized> SignTest for std::sync::Arc<T> {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        (**self).sign_test(d)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Verifier as _, VerifyError};

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    #[test]
    fn signs_now_with_fresh_ids() {
        let v = StandardWebhooks::new(SECRET).unwrap();
        let a = TestDelivery::new("{}");
        let b = TestDelivery::new("{}");
        assert_ne!(a.delivery_id(), b.delivery_id());
        let headers = a.signed_headers(&v).unwrap();
        assert!(v.verify(&headers, a.body(), SystemTime::now()).is_ok());
    }

    #[test]
    fn a_set_timestamp_is_signed() {
        let v = StandardWebhooks::new(SECRET).unwrap();
        let d = TestDelivery::new("{}").timestamp(1_000).id("msg_1");
        let headers = d.signed_headers(&v).unwrap();
        assert_eq!(headers["webhook-timestamp"], "1000");
        assert_eq!(headers["webhook-id"], "msg_1");
        let err = v.verify(&headers, d.body(), SystemTime::now()).unwrap_err();
        assert_eq!(err, VerifyError::TimestampTooOld);
        let then = UNIX_EPOCH + Duration::from_secs(1_000);
        assert!(v.verify(&headers, d.body(), then).is_ok());
    }

    #[test]
    fn header_schemes_get_their_event_type() {
        let github = GitHub::new("gh-secret").unwrap();
        let d = TestDelivery::new("{}").event_type("issues");
        let verified = github
            .verify(
                &d.signed_headers(&github).unwrap(),
                d.body(),
                SystemTime::now(),
            )
            .unwrap();
        assert_eq!(verified.event_type.as_deref(), Some("issues"));
        assert_eq!(verified.id.as_deref(), Some(d.delivery_id()));
        let shopify = Shopify::new("shp-secret").unwrap();
        let d = TestDelivery::new("{}");
        let verified = shopify
            .verify(
                &d.signed_headers(&shopify).unwrap(),
                d.body(),
                SystemTime::now(),
            )
            .unwrap();
        assert_eq!(verified.event_type.as_deref(), Some("app/uninstalled"));
    }

    #[test]
    fn debug_does_not_show_the_body() {
        let d = TestDelivery::new("body-marker");
        assert!(!format!("{d:?}").contains("body-marker"));
    }
}
