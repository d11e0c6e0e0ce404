//! Signed test deliveries: what a provider would send, for your handler tests.
//!
//! A [`TestDelivery`] is a body plus what the sender would put around it (a
//! delivery id, an event type, a timestamp: now by default, and the URL it
//! calls, for the schemes that sign it). Signed with a verifier of your app
//! ([`SignTest`]), it gives the headers (and, for Mailgun, the body) the
//! provider would send. The framework adapters turn it into their own test
//! request: `tower_webhooks::testing::signed_request` (an axum
//! `Request<Body>` for `oneshot`) and `actix_webhooks::testing::signed_request`
//! (an actix `TestRequest`).
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
//!
//! # Which schemes sign
//!
//! Every scheme that can sign with its public API implements [`SignTest`]:
//! [`StandardWebhooks`] and its [`Signer`], [`Stripe`], [`GitHub`],
//! [`Slack`], [`Shopify`], [`GenericHmac`] (signature and timestamp in
//! headers), [`Twilio`], [`Square`], [`Mandrill`], [`HubSpot`], [`GitLab`],
//! [`Linear`], [`Zoom`], [`Paddle`], [`Intercom`], [`Typeform`],
//! [`Postmark`], [`Mailgun`], Discord through [`DiscordSigner`] (feature
//! `ed25519`) and SendGrid through `sendgrid::Signer` (feature `sendgrid`).
//!
//! * **URL-signing schemes** (Twilio, Square, Mandrill, HubSpot, a
//!   `GenericHmac` whose content has `{url}`) sign the delivery's
//!   [`url`](TestDelivery::url), [`TEST_URL`] unless set. The adapters'
//!   `signed_request(scheme, uri, …)` sign [`TEST_ORIGIN`] followed by `uri`
//!   instead (unless a URL is set), so a verifier built with
//!   `PublicUrl::base(TEST_ORIGIN)` accepts the request.
//! * **Mailgun signs in the body**: the delivery's body is the event data
//!   (`event-data`), and [`TestDelivery::signed_body`] wraps it with the
//!   `signature` object, the delivery id as the token. The adapters send that
//!   body.
//! * **Amazon SNS** is left out: its signer signs a whole `SnsMessage` (topic,
//!   message id, ISO timestamp) and the verifier fetches a certificate. Sign
//!   the message with `sns::Signer::sign` and send the result as the body
//!   with [`TestDelivery::signed_with`] and an empty header map.
//! * **Linear** keeps its timestamp in the body (`webhookTimestamp`, Unix
//!   milliseconds): put a fresh one in the body you sign.
#![cfg_attr(
    not(feature = "ed25519"),
    doc = "\n\n[`DiscordSigner`]: https://docs.rs/webhooks-core/latest/webhooks_core/testing/struct.DiscordSigner.html"
)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::ConfigError;
use crate::dedup::ClaimToken;
use crate::scheme::standard::Signer;
use crate::scheme::{
    GenericHmac, GitHub, GitLab, HubSpot, Intercom, Linear, Mailgun, Mandrill, Paddle, Postmark,
    Shopify, Slack, Square, StandardWebhooks, Stripe, Twilio, Typeform, Zoom,
};

/// The origin the adapters' `signed_request` put before the request URI to
/// make the URL a URL-signing scheme signs (unless the delivery has its own
/// [`url`](TestDelivery::url)): build the verifier with
/// `PublicUrl::base(TEST_ORIGIN)` in tests.
pub const TEST_ORIGIN: &str = "https://example.com";

/// The URL URL-signing schemes sign for a [`TestDelivery`] without its own
/// [`url`](TestDelivery::url), when signed directly with
/// [`TestDelivery::signed_headers`] (the adapters use [`TEST_ORIGIN`] and the
/// request URI instead).
pub const TEST_URL: &str = "https://example.com/webhooks";

/// A scheme that can sign a [`TestDelivery`] the way its provider would.
///
/// Implemented by every scheme that can sign with its public API (see the
/// [module docs](self)). For any other scheme, sign the headers yourself and
/// use [`TestDelivery::signed_with`].
pub trait SignTest {
    /// The headers the provider would send for `delivery`.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the scheme cannot sign (a verifier with public
    /// keys only) or the id or event type cannot be a header value.
    fn sign_test(&self, delivery: &TestDelivery) -> Result<HeaderMap, ConfigError>;

    /// The body the provider would send for `delivery`: the delivery's body,
    /// unless the scheme signs in the body (Mailgun wraps it with its
    /// `signature` object).
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the body cannot be signed (Mailgun: not JSON).
    fn sign_test_body(&self, delivery: &TestDelivery) -> Result<Bytes, ConfigError> {
        Ok(delivery.body().clone())
    }
}

/// A delivery to sign for a test: a body, a delivery id (random unless set),
/// an event type (for schemes that send it in a header), a timestamp (now
/// unless set) and a URL (for the schemes that sign it).
///
/// Each `TestDelivery` gets its own random id, so for the schemes that
/// deduplicate on a signed id (Standard Webhooks, Stripe, Slack, Paddle…)
/// two of them are two deliveries to the dedup store; clone one (or set the
/// same [`id`](Self::id)) to send a retry of the same delivery.
///
/// **Same body, same delivery.** The schemes whose id travels in a header
/// the signature does not cover deduplicate on the body's SHA-256 instead
/// ([`Identity::Content`](crate::Identity::Content)): GitHub, Shopify,
/// GitLab, Linear, Twilio, Zoom, HubSpot, Mandrill and `GenericHmac` (unless
/// it reads a signed id). For them two deliveries with the same body are one
/// delivery, whatever their ids: the second is answered as a duplicate and
/// the handler does not run. To send distinct deliveries, vary the body, or
/// write each delivery's id into it with [`id_in_body`](Self::id_in_body).
#[derive(Clone)]
#[must_use]
pub struct TestDelivery {
    body: Bytes,
    id: String,
    event_type: Option<String>,
    timestamp: Option<u64>,
    url: Option<String>,
    headers: Option<HeaderMap>,
    content_type: Option<String>,
}

impl std::fmt::Debug for TestDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestDelivery")
            .field("body_len", &self.body.len())
            .field("id", &self.id)
            .field("event_type", &self.event_type)
            .field("timestamp", &self.timestamp)
            .field("url", &self.url)
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
            url: None,
            headers: None,
            content_type: None,
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

    /// Sets the delivery id (to send the same delivery twice). Mailgun uses
    /// it as the token.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Writes the delivery's id into the JSON body's top-level `field`, so
    /// that two deliveries with otherwise equal bodies are two deliveries for
    /// the schemes that deduplicate on the body (GitHub, Shopify,
    /// `GenericHmac`…; see [`TestDelivery`]). Call it after
    /// [`id`](Self::id) when you set one.
    ///
    /// ```
    /// use webhooks_core::testing::TestDelivery;
    ///
    /// let a = TestDelivery::new(r#"{"action":"opened"}"#).id_in_body("test_delivery");
    /// let b = TestDelivery::new(r#"{"action":"opened"}"#).id_in_body("test_delivery");
    /// assert_ne!(a.body(), b.body());
    /// let body: serde_json::Value = serde_json::from_slice(a.body())?;
    /// assert_eq!(body["test_delivery"], a.delivery_id());
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    ///
    /// # Panics
    ///
    /// When the body is not a JSON object: a bug in the test.
    pub fn id_in_body(mut self, field: &str) -> Self {
        let mut body: serde_json::Map<String, serde_json::Value> =
            match serde_json::from_slice(&self.body) {
                Ok(object) => object,
                Err(e) => panic!("TestDelivery::id_in_body needs a JSON object body: {e}"),
            };
        body.insert(field.to_owned(), serde_json::Value::String(self.id.clone()));
        #[allow(clippy::expect_used)]
        let body = serde_json::to_vec(&body).expect("a JSON map serializes");
        self.body = body.into();
        self
    }

    /// Sets the event type, for schemes that send it in a header (GitHub's
    /// `X-GitHub-Event`, default `ping`; Shopify's topic, default
    /// `app/uninstalled`; GitLab's `X-Gitlab-Event`, default `Push Hook`;
    /// Linear's `Linear-Event`, default `Issue`; a [`GenericHmac`] event type
    /// header, sent only when set). Stripe, Standard Webhooks and the
    /// body-typed schemes carry it in the body.
    pub fn event_type(mut self, event_type: impl Into<String>) -> Self {
        self.event_type = Some(event_type.into());
        self
    }

    /// Sets the signed timestamp, in Unix seconds (default: now), to test
    /// stale or future deliveries. HubSpot and millisecond `GenericHmac`
    /// timestamps get it in milliseconds.
    pub fn timestamp(mut self, unix_seconds: u64) -> Self {
        self.timestamp = Some(unix_seconds);
        self
    }

    /// Sets the full URL the provider calls (`https://hooks.example.com/twilio?x=1`),
    /// signed by the URL-signing schemes (Twilio, Square, Mandrill, HubSpot,
    /// a `GenericHmac` signing `{url}`). Default: [`TEST_URL`], or in the
    /// adapters [`TEST_ORIGIN`] followed by the request URI.
    ///
    /// Set it when your verifier's `PublicUrl` is not
    /// `PublicUrl::base(TEST_ORIGIN)`: the URL your `PublicUrl` rebuilds for
    /// the test request (for `PublicUrl::base("https://hooks.example.com")`
    /// and a request to `/twilio`, `https://hooks.example.com/twilio`).
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// The `Content-Type` the adapters' `signed_request` send (default
    /// `application/json`): e.g. `application/x-www-form-urlencoded` for
    /// the form bodies Twilio, Mandrill and Mailgun's legacy format send.
    pub fn content_type(mut self, content_type: impl Into<String>) -> Self {
        self.content_type = Some(content_type.into());
        self
    }

    /// The `Content-Type` to send: the one set, or `application/json`.
    #[must_use]
    pub fn content_type_or_json(&self) -> &str {
        self.content_type.as_deref().unwrap_or("application/json")
    }

    /// Sets the URL to [`TEST_ORIGIN`] followed by `path_and_query`, unless
    /// one is set: what the adapters' `signed_request` do with their request
    /// URI. An absolute URI (`https://…`) is taken as it is.
    pub fn url_or_test_origin(mut self, path_and_query: &str) -> Self {
        if self.url.is_none() {
            self.url = Some(match path_and_query.contains("://") {
                true => path_and_query.to_owned(),
                false => format!("{TEST_ORIGIN}{path_and_query}"),
            });
        }
        self
    }

    /// Uses `headers`, signed by you, instead of signing with a [`SignTest`]
    /// scheme: for schemes that do not implement it. The body is sent as it is.
    pub fn signed_with(mut self, headers: HeaderMap) -> Self {
        self.headers = Some(headers);
        self
    }

    /// The body as given (see [`signed_body`](Self::signed_body) for the
    /// one sent).
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
    pub fn event_type_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.event_type.as_deref().unwrap_or(default)
    }

    /// The URL a URL-signing scheme signs: the one set, or [`TEST_URL`].
    #[must_use]
    pub fn signed_url(&self) -> &str {
        self.url.as_deref().unwrap_or(TEST_URL)
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

    /// The body the provider would send, as `scheme` signs it: the body as
    /// given, except for schemes that sign in the body (Mailgun), and
    /// always the body as given after [`signed_with`](Self::signed_with).
    ///
    /// # Errors
    ///
    /// [`ConfigError`] from [`SignTest::sign_test_body`].
    pub fn signed_body(&self, scheme: &impl SignTest) -> Result<Bytes, ConfigError> {
        match &self.headers {
            Some(_) => Ok(self.body.clone()),
            None => scheme.sign_test_body(self),
        }
    }
}

/// Any string slice, copied: `signed_request(&v, uri, body.as_str())`.
impl From<&str> for TestDelivery {
    fn from(body: &str) -> Self {
        Self::new(Bytes::copy_from_slice(body.as_bytes()))
    }
}

impl From<&String> for TestDelivery {
    fn from(body: &String) -> Self {
        Self::from(body.as_str())
    }
}

/// Any byte slice, copied.
impl From<&[u8]> for TestDelivery {
    fn from(body: &[u8]) -> Self {
        Self::new(Bytes::copy_from_slice(body))
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

/// Adds a header a scheme's `sign_headers` leaves to the caller.
fn with_header(
    mut headers: HeaderMap,
    name: &'static str,
    value: &str,
    what: &'static str,
) -> Result<HeaderMap, ConfigError> {
    let value = HeaderValue::from_str(value).map_err(|_| ConfigError::Invalid {
        what,
        reason: "not a valid header value",
    })?;
    headers.insert(HeaderName::from_static(name), value);
    Ok(headers)
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

/// The id header (when configured), the event type header (when configured
/// and set on the delivery), the timestamp header in the configured unit and
/// the signature header. A signature or timestamp in a JSON field is a
/// [`ConfigError::Setting`]: sign that body yourself with
/// [`GenericHmac::sign_for`].
impl SignTest for GenericHmac {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.sign_test_headers(
            d.signed_url(),
            d.unix_timestamp(),
            &d.id,
            d.event_type.as_deref(),
            &d.body,
        )
    }
}

/// Signs the delivery's [URL](TestDelivery::url); a form body is signed as
/// sorted fields, or put the body's digest in the URL (`bodySHA256`, see
/// [`Twilio::body_sha256_hex`]) for a JSON body. The delivery id is sent as
/// `I-Twilio-Idempotency-Token`.
impl SignTest for Twilio {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        let headers = self.sign_headers(d.signed_url(), &d.body)?;
        with_header(headers, "i-twilio-idempotency-token", &d.id, "delivery id")
    }
}

/// Signs the delivery's [URL](TestDelivery::url) (Square's notification URL)
/// and body.
impl SignTest for Square {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.sign_headers(d.signed_url(), &d.body)
    }
}

/// Signs the delivery's [URL](TestDelivery::url) and its form body.
impl SignTest for Mandrill {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.sign_headers(d.signed_url(), &d.body)
    }
}

/// Signs `POST`, the delivery's [URL](TestDelivery::url), the body and the
/// timestamp in milliseconds.
impl SignTest for HubSpot {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        let millis = d.unix_timestamp().saturating_mul(1000);
        self.sign_headers(d.signed_url(), millis, &d.body)
    }
}

/// The token, the event type (default `Push Hook`) and the delivery id.
impl SignTest for GitLab {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.sign_headers(d.event_type_or("Push Hook"), &d.id)
    }
}

/// The signature, `Linear-Delivery` (the delivery id) and `Linear-Event`
/// (default `Issue`). The timestamp is the body's `webhookTimestamp`: put a
/// fresh one in the body.
impl SignTest for Linear {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        let headers = self.sign_headers(&d.body)?;
        let headers = with_header(headers, "linear-delivery", &d.id, "delivery id")?;
        with_header(
            headers,
            "linear-event",
            d.event_type_or("Issue"),
            "event type",
        )
    }
}

impl SignTest for Zoom {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.sign_headers(d.unix_timestamp(), &d.body)
    }
}

impl SignTest for Paddle {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.sign_headers(d.unix_timestamp(), &d.body)
    }
}

impl SignTest for Intercom {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.sign_headers(&d.body)
    }
}

impl SignTest for Typeform {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.sign_headers(&d.body)
    }
}

/// The `Authorization` header of the first credential (Postmark signs
/// nothing).
impl SignTest for Postmark {
    fn sign_test(&self, _: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.sign_headers()
    }
}

/// Mailgun signs in the body: no headers, and
/// [`sign_test_body`](SignTest::sign_test_body) wraps the delivery's body (a
/// JSON event, sent as `event-data`) with the `signature` object for the
/// delivery's timestamp, its id as the token.
impl SignTest for Mailgun {
    fn sign_test(&self, _: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        Ok(HeaderMap::new())
    }

    fn sign_test_body(&self, d: &TestDelivery) -> Result<Bytes, ConfigError> {
        let event_data: serde_json::Value =
            serde_json::from_slice(&d.body).map_err(|_| ConfigError::Invalid {
                what: "Mailgun test body",
                reason: "the event data is not JSON",
            })?;
        Ok(self
            .sign_body(d.unix_timestamp(), &d.id, &event_data)
            .into())
    }
}

/// SendGrid signs with a private key only SendGrid holds: its test signer.
#[cfg(feature = "sendgrid")]
impl SignTest for crate::scheme::sendgrid::Signer {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.sign_headers(d.unix_timestamp(), &d.body)
    }
}

/// A Discord test signer: Discord signs with its own ed25519 key, so tests
/// sign with a key of their own and build the [`Discord`](crate::scheme::Discord)
/// verifier with its [`public_key_hex`](Self::public_key_hex).
///
/// `Debug` never shows the private key.
#[cfg(feature = "ed25519")]
#[cfg_attr(docsrs, doc(cfg(feature = "ed25519")))]
#[derive(Clone)]
pub struct DiscordSigner {
    seed: [u8; 32],
}

#[cfg(feature = "ed25519")]
impl std::fmt::Debug for DiscordSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordSigner")
            .field("public_key", &self.public_key_hex())
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "ed25519")]
impl DiscordSigner {
    /// A signer with the ed25519 private key `seed`.
    #[must_use]
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Self { seed }
    }

    /// The hex public key to build the `Discord` verifier with.
    #[must_use]
    pub fn public_key_hex(&self) -> String {
        crate::scheme::Discord::public_key_hex(&self.seed)
    }
}

#[cfg(feature = "ed25519")]
impl SignTest for DiscordSigner {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        crate::scheme::Discord::sign_headers(&self.seed, d.unix_timestamp(), &d.body)
    }
}

impl<T: SignTest + ?Sized> SignTest for &T {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        (**self).sign_test(d)
    }

    fn sign_test_body(&self, d: &TestDelivery) -> Result<Bytes, ConfigError> {
        (**self).sign_test_body(d)
    }
}

impl<T: SignTest + ?Sized> SignTest for std::sync::Arc<T> {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        (**self).sign_test(d)
    }

    fn sign_test_body(&self, d: &TestDelivery) -> Result<Bytes, ConfigError> {
        (**self).sign_test_body(d)
    }
}

/// The panic messages expected now, each with the id of its guard.
static EXPECTED_PANICS: Mutex<Vec<(u64, &'static str)>> = Mutex::new(Vec::new());

/// Keeps quiet, while the guard lives, the panics a test causes on purpose
/// (a handler that panics to test the `500` and the retry): a panic whose
/// message contains `message` prints nothing, on any thread; every other
/// panic prints as before (through the hook that was installed), so a real
/// failure stands out.
///
/// The first call installs a process-wide panic hook that wraps the one in
/// place; it stays, and does nothing while no guard lives.
///
/// ```
/// use webhooks_core::testing::expect_panics;
///
/// let _quiet = expect_panics("handler panicked on purpose");
/// let result = std::thread::spawn(|| panic!("handler panicked on purpose")).join();
/// assert!(result.is_err()); // and nothing was printed
/// ```
#[must_use = "the panics are quiet only while the guard lives"]
pub fn expect_panics(message: &'static str) -> ExpectedPanics {
    static INSTALL: Once = Once::new();
    static NEXT_ID: AtomicU64 = AtomicU64::new(0);
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let text = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
            let expected = text.is_some_and(|text| {
                lock_expected()
                    .iter()
                    .any(|(_, message)| text.contains(message))
            });
            if !expected {
                previous(info);
            }
        }));
    });
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    lock_expected().push((id, message));
    ExpectedPanics { id }
}

fn lock_expected() -> std::sync::MutexGuard<'static, Vec<(u64, &'static str)>> {
    EXPECTED_PANICS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The guard [`expect_panics`] returns: the message is expected until it drops.
#[derive(Debug)]
pub struct ExpectedPanics {
    id: u64,
}

impl Drop for ExpectedPanics {
    fn drop(&mut self) {
        lock_expected().retain(|(id, _)| *id != self.id);
    }
}

/// `2024-05-01T12:00:00Z`: a Unix time in ISO 8601 (UTC, seconds), as
/// providers write times in their payloads.
///
/// ```
/// assert_eq!(webhooks_core::testing::iso8601(1_714_564_800), "2024-05-01T12:00:00Z");
/// ```
#[must_use]
pub fn iso8601(unix: u64) -> String {
    let days = i64::try_from(unix / 86_400).unwrap_or(0);
    let secs = unix % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests;
