//! [Amazon SNS](https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html)
//! HTTP(S) deliveries, and so Amazon SES events published through SNS.
//!
//! SNS signs each message with RSA (`SignatureVersion` `1`: SHA1withRSA,
//! `2`: SHA256withRSA) over a canonical string of the message's fields, and
//! names the signing certificate by URL (`SigningCertURL`). [`Sns`] checks that
//! the URL is `https` on an allowed `sns.<region>.amazonaws.com` host (and
//! looks like an SNS certificate path) **before** fetching anything, fetches
//! it through a [`CertificateFetcher`] (with the `sns-reqwest` feature,
//! [`ReqwestFetcher`] on reqwest + rustls), caches the parsed key, and
//! verifies.
//!
//! A valid signature proves that SNS sent the message, **not that the topic is
//! yours**: anyone can create a topic and subscribe your endpoint. So the
//! builder asks for the topic ARNs you accept ([`SnsBuilder::topic_arn`]), or an
//! explicit [`SnsBuilder::any_topic`].
//!
//! | situation | answer |
//! |---|---|
//! | body not an SNS JSON message, a field missing or unreadable | `400` |
//! | topic not allowed, certificate URL not `https` on an allowed host | `401` ([`VerifyError::UnknownKey`]), nothing fetched |
//! | signature does not verify | `401` |
//! | `Timestamp` older than [`max_age`](SnsBuilder::max_age), when set | `401` |
//! | `Signature` not the length of an RSA signature; `SignatureVersion` `1` with [`require_signature_version(2)`](SnsBuilder::require_signature_version) | `400`, nothing fetched |
//! | the certificate cannot be fetched or read | `503` ([`VerifyError::KeyLookupUnavailable`]): SNS retries |
//! | that certificate URL failed within [`failure_ttl`](SnsBuilder::failure_ttl), or the [fetch budget](SnsBuilder::fetch_rate) is spent | `503`, nothing fetched |
//!
//! Certificates are cached by path: letter case in the host, or another
//! allowed host, does not make another fetch once a certificate is cached.
//! A failure is remembered for its URL (lowercase host and path), so that a
//! made-up region cannot stop the real one. One fetch per URL runs at a
//! time; requests arriving meanwhile wait for its answer. Set the
//! topic's `SignatureVersion` to `2` and call
//! [`require_signature_version(2)`](SnsBuilder::require_signature_version).
//!
//! [`Verified::id`] is `MessageId` (SNS retries a delivery with the same one),
//! [`Verified::event_type`] is `Type`, [`Verified::timestamp`] is `Timestamp`.
//! An SES event is the JSON text in a notification's `Message` (its
//! `eventType` or `notificationType` says which).
//! Turn **raw message delivery off** on the subscription: raw messages are not
//! signed.
//!
//! # Subscription confirmation
//!
//! When you subscribe an HTTPS endpoint, SNS first sends a signed
//! `SubscriptionConfirmation` carrying a `SubscribeURL`. Nothing is fetched
//! for you: in your handler, read the verified body as an [`SnsMessage`]
//! and, when [`SnsMessage::is_subscription_confirmation`], call
//! [`Sns::confirm_subscription`] (a GET of the `SubscribeURL` through the same
//! fetcher, after checking that it is on an allowed host, for an allowed
//! topic), or confirm it yourself with the `Token` and the `ConfirmSubscription`
//! API. Answer 2xx once confirmed.
//!
//! Or let the receive pipeline answer it: with
//! [`SnsBuilder::on_subscription_confirmation`], each verified confirmation
//! is handed to your hook and answered `200` by the library, in both modes,
//! without being stored or reaching the handler (confirming stays your
//! outbound call).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::SystemTime;
//! use webhooks_core::scheme::sns::{CertificateFetcher, FetchError, Signer, SignatureVersion, Sns, SnsMessage};
//! use webhooks_core::{RequestHead, RequestVerifier};
//!
//! # let (key_der, cert_pem) = (
//! #     include_bytes!("../../tests/data/sns/test-key.der").as_slice(),
//! #     include_str!("../../tests/data/sns/test-cert.pem"),
//! # );
//! const CERT_URL: &str = "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-test.pem";
//! /// Serves one certificate (in production: `ReqwestFetcher`, feature `sns-reqwest`).
//! struct Fixed(String);
//! #[async_trait::async_trait]
//! impl CertificateFetcher for Fixed {
//!     async fn fetch(&self, url: &str) -> Result<Vec<u8>, FetchError> {
//!         assert_eq!(url, CERT_URL);
//!         Ok(self.0.clone().into_bytes())
//!     }
//! }
//!
//! const TOPIC: &str = "arn:aws:sns:eu-west-1:123456789012:ses-events";
//! let sns = Sns::builder(Fixed(cert_pem.into())).topic_arn(TOPIC).build()?;
//!
//! let signer = Signer::from_pkcs8_der(key_der, CERT_URL)?;
//! let message = SnsMessage::notification("msg-1", TOPIC, r#"{"eventType":"Delivery"}"#, "2026-01-02T03:04:05.678Z");
//! let body = signer.sign(message, SignatureVersion::V2)?;
//!
//! let headers = http::HeaderMap::new();
//! let verified = sns.verify_request(RequestHead::new("/sns", &headers), &body, SystemTime::now()).await?;
//! assert_eq!(verified.id.as_deref(), Some("msg-1"));
//! assert_eq!(verified.event_type.as_deref(), Some("Notification"));
//! # Ok(()) }
//! ```
#![cfg_attr(
    not(feature = "sns-reqwest"),
    doc = "\n\n[`ReqwestFetcher`]: https://docs.rs/webhooks-core/latest/webhooks_core/scheme/sns/struct.ReqwestFetcher.html"
)]

use std::borrow::Cow;
use std::collections::HashMap;
use std::error::Error;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use rsa::pkcs8::DecodePrivateKey as _;
use rsa::{Pkcs1v15Sign, PrivateKey, PublicKey};
use sha1::Sha1;
use sha2::{Digest as _, Sha256};
use x509_cert::Certificate;
use x509_cert::der::{Decode as _, DecodePem as _};

use super::{encode_base64, optional_header, unix_seconds};
use crate::{
    ConfigError, Identity, MatchedKey, RequestHead, RequestVerifier, Verified, VerifyError,
};

const SCHEME: &str = "sns";
const MESSAGE_TYPE: &str = "x-amz-sns-message-type";
/// The same name, parsed once.
static MESSAGE_TYPE_NAME: http::HeaderName = http::HeaderName::from_static(MESSAGE_TYPE);
/// How long a fetched certificate is kept by default. The URL names one
/// certificate (its file name carries a hash), so it does not change.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(24 * 3600);
/// How many certificates are kept by default (SNS uses a handful).
pub const DEFAULT_CACHE_CAPACITY: usize = 64;
/// The largest certificate [`ReqwestFetcher`] reads.
#[cfg_attr(
    not(feature = "sns-reqwest"),
    doc = "\n\n[`ReqwestFetcher`]: https://docs.rs/webhooks-core/latest/webhooks_core/scheme/sns/struct.ReqwestFetcher.html"
)]
pub const MAX_CERTIFICATE_LEN: usize = 64 * 1024;
/// The longest signature read: 4096-bit RSA is 512 bytes, 684 base64 characters.
const MAX_SIGNATURE_LEN: usize = 1024;
/// The lengths an RSA signature can have (1024- to 4096-bit keys): anything
/// else is refused before a certificate is fetched.
const RSA_SIGNATURE_LENS: [usize; 4] = [128, 256, 384, 512];
/// How long a failed certificate fetch is remembered by default: requests
/// naming that certificate are answered `503` without fetching again.
pub const DEFAULT_FAILURE_TTL: Duration = Duration::from_secs(30);
/// How many certificate fetches may start per [`DEFAULT_FETCH_WINDOW`] by
/// default; past that, requests needing a fetch are answered `503`.
pub const DEFAULT_MAX_FETCHES: u32 = 10;
/// The window of [`DEFAULT_MAX_FETCHES`].
pub const DEFAULT_FETCH_WINDOW: Duration = Duration::from_secs(60);
/// The longest `Message`/`MessageId`… is bounded by the body limit; ids
/// reach the dedup store and logs, so they are bounded here.
const MAX_ID_LEN: usize = 256;

/// Why a [`CertificateFetcher`] could not fetch (network, timeout, HTTP status…).
///
/// The delivery answers `503`, so that SNS retries later.
#[derive(Debug, thiserror::Error)]
#[error("certificate fetch failed")]
pub struct FetchError(#[source] Box<dyn Error + Send + Sync>);

impl FetchError {
    /// Wraps the client's error, keeping it as the [`source`](Error::source).
    pub fn new(source: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Self(source.into())
    }
}

/// Fetches the body at an `https` URL that [`Sns`] has already checked: the
/// signing certificate (PEM or DER), or a `SubscribeURL` when confirming.
///
/// Implement it over your own HTTP client, or enable the `sns-reqwest`
/// feature for [`ReqwestFetcher`]. Tests use a fake returning a test
/// certificate. Bound its time (the delivery waits for it) and do not follow
/// redirects (they would leave the checked host). A request dropped while it
/// fetches leaves nothing behind: the key is cached only once parsed.
/// Concurrent first requests for a certificate may each fetch it.
#[cfg_attr(
    not(feature = "sns-reqwest"),
    doc = "\n\n[`ReqwestFetcher`]: https://docs.rs/webhooks-core/latest/webhooks_core/scheme/sns/struct.ReqwestFetcher.html"
)]
#[async_trait::async_trait]
pub trait CertificateFetcher: Send + Sync + 'static {
    /// The response body of a GET of `url` (a 2xx answer; anything else is an error).
    ///
    /// # Errors
    ///
    /// A [`FetchError`] when the body cannot be had now.
    async fn fetch(&self, url: &str) -> Result<Vec<u8>, FetchError>;
}

#[async_trait::async_trait]
impl<F: CertificateFetcher + ?Sized> CertificateFetcher for Arc<F> {
    async fn fetch(&self, url: &str) -> Result<Vec<u8>, FetchError> {
        (**self).fetch(url).await
    }
}

/// The default [`CertificateFetcher`]: reqwest with rustls, `https` only, no
/// redirects, a 10 s timeout and at most [`MAX_CERTIFICATE_LEN`] bytes read.
#[cfg(feature = "sns-reqwest")]
#[derive(Debug, Clone)]
pub struct ReqwestFetcher {
    client: reqwest::Client,
}

#[cfg(feature = "sns-reqwest")]
impl ReqwestFetcher {
    /// A fetcher with its own client.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Setting`] when the TLS client cannot be built.
    pub fn new() -> Result<Self, ConfigError> {
        let client = Self::client_builder()
            .build()
            .map_err(|_| ConfigError::Setting("the HTTPS client cannot be built"))?;
        Ok(Self { client })
    }

    /// The client settings [`new`](Self::new) uses (`https` only, no
    /// redirects, a 10 s timeout), to add to before
    /// [`with_client`](Self::with_client): a proxy, other root certificates
    /// (`tls_certs_only`, as the tests do with their own CA), DNS overrides.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use webhooks_core::scheme::sns::ReqwestFetcher;
    /// let client = ReqwestFetcher::client_builder()
    ///     .timeout(std::time::Duration::from_secs(3))
    ///     .build()?;
    /// let fetcher = ReqwestFetcher::with_client(client);
    /// # let _ = fetcher; Ok(()) }
    /// ```
    pub fn client_builder() -> reqwest::ClientBuilder {
        // reqwest takes rustls' process default: ring, as every TLS feature.
        crate::tls::use_ring();
        reqwest::Client::builder()
            .https_only(true)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
    }

    /// A fetcher on your client (proxy, timeouts, roots). Start from
    /// [`client_builder`](Self::client_builder), or keep redirects off and
    /// `https_only` on yourself: a redirect would leave the host [`Sns`]
    /// checked.
    #[must_use]
    pub fn with_client(client: reqwest::Client) -> Self {
        Self { client }
    }
}

#[cfg(feature = "sns-reqwest")]
#[async_trait::async_trait]
impl CertificateFetcher for ReqwestFetcher {
    async fn fetch(&self, url: &str) -> Result<Vec<u8>, FetchError> {
        let mut response = self
            .client
            .get(url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(FetchError::new)?;
        if response
            .content_length()
            .is_some_and(|n| n > MAX_CERTIFICATE_LEN as u64)
        {
            return Err(FetchError::new("response too large"));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(FetchError::new)? {
            if body.len() + chunk.len() > MAX_CERTIFICATE_LEN {
                return Err(FetchError::new("response too large"));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// `SignatureVersion` `1` (SHA1withRSA) or `2` (SHA256withRSA).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureVersion {
    /// SHA1withRSA, the default of SNS topics.
    V1,
    /// SHA256withRSA (the topic's `SignatureVersion` attribute set to 2).
    V2,
}

impl SignatureVersion {
    fn as_str(self) -> &'static str {
        match self {
            Self::V1 => "1",
            Self::V2 => "2",
        }
    }

    /// The PKCS#1 v1.5 digest of the canonical string, and its padding.
    fn digest(self, canonical: &[u8]) -> (Vec<u8>, Pkcs1v15Sign) {
        match self {
            Self::V1 => (
                Sha1::digest(canonical).to_vec(),
                Pkcs1v15Sign::new::<Sha1>(),
            ),
            Self::V2 => (
                Sha256::digest(canonical).to_vec(),
                Pkcs1v15Sign::new::<Sha256>(),
            ),
        }
    }
}

/// An SNS message as delivered over HTTP(S): the JSON document, field by field.
///
/// Read a verified body as one (`VerifiedWebhook<SnsMessage>`) to see its
/// type and, for a `Notification`, its `Message` (for SES: the JSON of the
/// email event). Build one with [`notification`](Self::notification) or
/// [`subscription_confirmation`](Self::subscription_confirmation) and sign it
/// with a [`Signer`] in tests.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
#[non_exhaustive]
pub struct SnsMessage {
    /// `Notification`, `SubscriptionConfirmation` or `UnsubscribeConfirmation`.
    #[serde(rename = "Type")]
    pub kind: String,
    /// The message id; SNS retries a delivery with the same one.
    pub message_id: String,
    /// The topic the message was published to.
    pub topic_arn: String,
    /// The subject of a notification, if the publisher gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The message: the payload of a notification, a human-readable text for
    /// confirmations.
    pub message: String,
    /// When SNS published it (ISO 8601, UTC).
    pub timestamp: String,
    /// The confirmation token of a (un)subscription confirmation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The URL that confirms a subscription (see [`Sns::confirm_subscription`]).
    #[serde(
        default,
        rename = "SubscribeURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub subscribe_url: Option<String>,
    /// The URL that unsubscribes the endpoint, on notifications.
    #[serde(
        default,
        rename = "UnsubscribeURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub unsubscribe_url: Option<String>,
    /// `1` or `2`.
    #[serde(default)]
    pub signature_version: String,
    /// The base64 RSA signature.
    #[serde(default)]
    pub signature: String,
    /// Where the signing certificate is.
    #[serde(default, rename = "SigningCertURL")]
    pub signing_cert_url: String,
}

impl SnsMessage {
    /// An unsigned `Notification`.
    #[must_use]
    pub fn notification(
        message_id: impl Into<String>,
        topic_arn: impl Into<String>,
        message: impl Into<String>,
        timestamp: impl Into<String>,
    ) -> Self {
        Self {
            kind: "Notification".into(),
            message_id: message_id.into(),
            topic_arn: topic_arn.into(),
            subject: None,
            message: message.into(),
            timestamp: timestamp.into(),
            token: None,
            subscribe_url: None,
            unsubscribe_url: None,
            signature_version: String::new(),
            signature: String::new(),
            signing_cert_url: String::new(),
        }
    }

    /// An unsigned `SubscriptionConfirmation`.
    #[must_use]
    pub fn subscription_confirmation(
        message_id: impl Into<String>,
        topic_arn: impl Into<String>,
        token: impl Into<String>,
        subscribe_url: impl Into<String>,
        timestamp: impl Into<String>,
    ) -> Self {
        let topic_arn = topic_arn.into();
        Self {
            kind: "SubscriptionConfirmation".into(),
            message: format!(
                "You have chosen to subscribe to the topic {topic_arn}.\nTo confirm the subscription, visit the SubscribeURL included in this message."
            ),
            message_id: message_id.into(),
            topic_arn,
            subject: None,
            timestamp: timestamp.into(),
            token: Some(token.into()),
            subscribe_url: Some(subscribe_url.into()),
            unsubscribe_url: None,
            signature_version: String::new(),
            signature: String::new(),
            signing_cert_url: String::new(),
        }
    }

    /// The same message with a `Subject`.
    #[must_use]
    pub fn with_subject(mut self, subject: impl Into<String>) -> Self {
        self.subject = Some(subject.into());
        self
    }

    /// Whether SNS asks the endpoint to confirm a subscription.
    #[must_use]
    pub fn is_subscription_confirmation(&self) -> bool {
        self.kind == "SubscriptionConfirmation"
    }
}

/// The message types SNS signs, and the fields their canonical strings take,
/// in order (`Subject` only when present).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MessageType {
    Notification,
    SubscriptionConfirmation,
    UnsubscribeConfirmation,
}

impl MessageType {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "Notification" => Some(Self::Notification),
            "SubscriptionConfirmation" => Some(Self::SubscriptionConfirmation),
            "UnsubscribeConfirmation" => Some(Self::UnsubscribeConfirmation),
            _ => None,
        }
    }
}

/// The fields of a message, borrowed from the body where no unescaping is needed.
#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Fields<'a> {
    #[serde(borrow, default, rename = "Type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    topic_arn: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    subject: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    timestamp: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    token: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "SubscribeURL")]
    subscribe_url: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    signature_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    signature: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "SigningCertURL")]
    signing_cert_url: Option<Cow<'a, str>>,
}

fn required<'f>(
    field: &'f Option<Cow<'_, str>>,
    name: &'static str,
) -> Result<&'f str, VerifyError> {
    field.as_deref().ok_or(VerifyError::MissingField(name))
}

/// The canonical string SNS signs for a message of type `kind`.
fn canonical(kind: MessageType, fields: &Fields<'_>) -> Result<String, VerifyError> {
    let mut out = String::with_capacity(256 + fields.message.as_deref().map_or(0, str::len));
    let mut push = |name: &str, value: &str| {
        out.push_str(name);
        out.push('\n');
        out.push_str(value);
        out.push('\n');
    };
    push("Message", required(&fields.message, "Message")?);
    push("MessageId", required(&fields.message_id, "MessageId")?);
    match kind {
        MessageType::Notification => {
            if let Some(subject) = fields.subject.as_deref() {
                push("Subject", subject);
            }
        }
        MessageType::SubscriptionConfirmation | MessageType::UnsubscribeConfirmation => {
            push(
                "SubscribeURL",
                required(&fields.subscribe_url, "SubscribeURL")?,
            );
        }
    }
    push("Timestamp", required(&fields.timestamp, "Timestamp")?);
    if kind != MessageType::Notification {
        push("Token", required(&fields.token, "Token")?);
    }
    push("TopicArn", required(&fields.topic_arn, "TopicArn")?);
    push(
        "Type",
        match kind {
            MessageType::Notification => "Notification",
            MessageType::SubscriptionConfirmation => "SubscriptionConfirmation",
            MessageType::UnsubscribeConfirmation => "UnsubscribeConfirmation",
        },
    );
    Ok(out)
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fff]Z` (what SNS writes) into Unix seconds.
fn parse_timestamp(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<u64> {
        let digits = b.get(range)?;
        digits.iter().try_fold(0u64, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + u64::from(d - b'0'))
        })
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let rest = &b[19..];
    let rest = match rest.first() {
        Some(b'.') => {
            let digits = rest[1..].iter().take_while(|d| d.is_ascii_digit()).count();
            if digits == 0 {
                return None;
            }
            &rest[1 + digits..]
        }
        _ => rest,
    };
    if rest != b"Z" {
        return None;
    }
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm), for years >= 1970.
    if year < 1970 {
        return None;
    }
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Which hosts may serve certificates and confirmation URLs.
#[derive(Debug, Clone)]
struct HostPolicy {
    /// `None`: any region-shaped name.
    regions: Option<Vec<String>>,
    /// Exact hosts allowed besides (lowercase).
    hosts: Vec<String>,
}

impl HostPolicy {
    fn allows(&self, host: &str) -> bool {
        if self.hosts.iter().any(|h| h == host) {
            return true;
        }
        let Some(rest) = host.strip_prefix("sns.") else {
            return false;
        };
        let Some(region) = rest
            .strip_suffix(".amazonaws.com")
            .or_else(|| rest.strip_suffix(".amazonaws.com.cn"))
        else {
            return false;
        };
        match &self.regions {
            Some(regions) => regions.iter().any(|r| r == region),
            None => is_region(region),
        }
    }
}

/// `us-east-1`, `cn-north-1`, `us-gov-west-1`: lowercase words and a number,
/// joined by hyphens.
fn is_region(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() >= 3
        && s.len() <= 32
        && parts[..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts[parts.len() - 1].bytes().all(|b| b.is_ascii_digit())
        && !parts[parts.len() - 1].is_empty()
}

/// The lowercase host and the path-and-query of an `https` URL without user
/// info or port; `None` for anything else.
fn https_parts(url: &str) -> Option<(String, &str)> {
    let scheme_len = "https://".len();
    if url.len() < scheme_len || !url[..scheme_len].eq_ignore_ascii_case("https://") {
        return None;
    }
    let rest = &url[scheme_len..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (host, path) = rest.split_at(end);
    if host.is_empty()
        || !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
    {
        return None;
    }
    Some((host.to_ascii_lowercase(), path))
}

/// Whether `path` is what SNS certificates are served at:
/// `/SimpleNotificationService-<name>.pem`, nothing else.
fn is_certificate_path(path: &str) -> bool {
    path.strip_prefix("/SimpleNotificationService-")
        .and_then(|name| name.strip_suffix(".pem"))
        .is_some_and(|name| {
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// Parsed certificate keys by certificate path (the host is one of the
/// allowed SNS hosts, whose letter case and region do not name another
/// certificate); by normalised URL (lowercase host), the failures of the
/// last fetches and the fetches in flight (one per URL at a time); and the
/// fetch rate.
struct KeyCache {
    map: Mutex<HashMap<String, (Arc<PublicKey>, Instant)>>,
    ttl: Duration,
    capacity: usize,
    /// URLs whose last fetch failed, until when.
    failures: Mutex<HashMap<String, Instant>>,
    failure_ttl: Duration,
    /// One lock per URL being fetched: later requests wait for the first
    /// one's answer instead of fetching again.
    in_flight: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Fetches started in the current window, and when it began.
    rate: Mutex<(Instant, u32)>,
    max_fetches: u32,
    fetch_window: Duration,
}

impl KeyCache {
    fn new(ttl: Duration, capacity: usize, failure_ttl: Duration, rate: (u32, Duration)) -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            ttl,
            capacity,
            failures: Mutex::new(HashMap::new()),
            failure_ttl,
            in_flight: Mutex::new(HashMap::new()),
            rate: Mutex::new((Instant::now(), 0)),
            max_fetches: rate.0,
            fetch_window: rate.1,
        }
    }

    fn get(&self, path: &str) -> Option<Arc<PublicKey>> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let (key, expires) = map.get(path)?;
        if *expires > Instant::now() {
            return Some(Arc::clone(key));
        }
        map.remove(path);
        None
    }

    fn insert(&self, path: &str, key: Arc<PublicKey>) {
        if self.capacity == 0 || self.ttl.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let entry = (key, now + self.ttl);
        insert_bounded(&mut map, self.capacity, now, path, entry, |v| v.1);
    }

    /// Whether the last fetch of `path` failed recently.
    fn failed_recently(&self, path: &str) -> bool {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        match failures.get(path) {
            Some(until) if *until > Instant::now() => true,
            Some(_) => {
                failures.remove(path);
                false
            }
            None => false,
        }
    }

    fn failed(&self, path: &str) {
        if self.failure_ttl.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        // Bounded like the keys, but apart: failures never evict a key.
        let until = now + self.failure_ttl;
        insert_bounded(&mut failures, self.capacity.max(1), now, path, until, |v| {
            *v
        });
    }

    /// The lock that serialises the fetches of `path`.
    fn flight(&self, path: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(in_flight.entry(path.to_owned()).or_default())
    }

    /// Forgets the lock of `path` once nobody else holds or waits for it.
    fn landed(&self, path: &str, flight: Arc<tokio::sync::Mutex<()>>) {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        // The map's reference and this one: nobody else has it.
        if Arc::strong_count(&flight) <= 2 {
            in_flight.remove(path);
        }
    }

    /// Takes one fetch from the rate budget; `false` when it is spent.
    fn may_fetch(&self) -> bool {
        let now = Instant::now();
        let mut rate = self.rate.lock().unwrap_or_else(|e| e.into_inner());
        if now.duration_since(rate.0) >= self.fetch_window {
            *rate = (now, 0);
        }
        if rate.1 >= self.max_fetches {
            return false;
        }
        rate.1 += 1;
        true
    }

    fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Inserts into a map of at most `capacity` entries: when full, expired
/// entries go first, then the one expiring soonest.
fn insert_bounded<V>(
    map: &mut HashMap<String, V>,
    capacity: usize,
    now: Instant,
    key: &str,
    value: V,
    expires: impl Fn(&V) -> Instant,
) {
    if map.len() >= capacity && !map.contains_key(key) {
        map.retain(|_, v| expires(v) > now);
        if map.len() >= capacity
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, v)| expires(v))
                .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
    }
    map.insert(key.to_owned(), value);
}

/// The RSA key of a certificate, PEM or DER.
fn certificate_key(bytes: &[u8]) -> Option<PublicKey> {
    let certificate = if bytes.trim_ascii_start().starts_with(b"-----") {
        Certificate::from_pem(bytes).ok()?
    } else {
        Certificate::from_der(bytes).ok()?
    };
    let spki = certificate.tbs_certificate().subject_public_key_info();
    let der = x509_cert::der::Encode::to_der(spki).ok()?;
    let spki = x509_cert::spki::SubjectPublicKeyInfoRef::from_der(&der).ok()?;
    PublicKey::try_from(spki).ok()
}

/// Why [`Sns::confirm_subscription`] did not confirm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfirmError {
    /// The message is not a `SubscriptionConfirmation`.
    #[error("not a subscription confirmation")]
    NotAConfirmation,
    /// Its topic is not one the verifier accepts.
    #[error("topic not allowed")]
    TopicNotAllowed,
    /// Its `SubscribeURL` is missing, not `https`, or not on an allowed host.
    #[error("SubscribeURL not allowed")]
    UrlNotAllowed,
    /// The GET of the `SubscribeURL` failed; SNS will resend the confirmation.
    #[error(transparent)]
    Fetch(#[from] FetchError),
}

/// Verifies [Amazon SNS](https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html)
/// HTTP(S) deliveries. See the [module documentation](self) for the rules,
/// the statuses and the subscription flow.
///
/// It is a [`RequestVerifier`] (fetching a certificate is I/O), so it goes
/// into `Receiver::builder` and both adapters like any scheme.
pub struct Sns {
    fetcher: Arc<dyn CertificateFetcher>,
    hosts: HostPolicy,
    /// `None`: any topic.
    topics: Option<Vec<String>>,
    max_age: Option<Duration>,
    /// The lowest `SignatureVersion` accepted.
    min_version: SignatureVersion,
    cache: KeyCache,
    /// The hook verified `SubscriptionConfirmation`s go to, if any.
    on_confirmation: Option<ConfirmationHook>,
}

/// What [`SnsBuilder::on_subscription_confirmation`] calls.
type ConfirmationHook = Arc<dyn Fn(SnsMessage) + Send + Sync>;

impl fmt::Debug for Sns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sns")
            .field("regions", &self.hosts.regions)
            .field("hosts", &self.hosts.hosts)
            .field("topics", &self.topics.as_ref().map(Vec::len))
            .field("max_age", &self.max_age)
            .field("min_version", &self.min_version)
            .field("cached_certificates", &self.cache.len())
            .finish_non_exhaustive()
    }
}

impl Sns {
    /// A builder around the fetcher that gets certificates.
    pub fn builder(fetcher: impl CertificateFetcher) -> SnsBuilder {
        SnsBuilder {
            fetcher: Arc::new(fetcher),
            regions: None,
            hosts: Vec::new(),
            topics: Vec::new(),
            any_topic: false,
            max_age: None,
            cache_ttl: DEFAULT_CACHE_TTL,
            cache_capacity: DEFAULT_CACHE_CAPACITY,
            on_confirmation: None,
            failure_ttl: DEFAULT_FAILURE_TTL,
            fetch_rate: (DEFAULT_MAX_FETCHES, DEFAULT_FETCH_WINDOW),
            min_version: 1,
        }
    }

    /// Whether `url` is `https` on a host allowed to serve SNS certificates
    /// and confirmation URLs.
    #[must_use]
    pub fn allows_host_of(&self, url: &str) -> bool {
        https_parts(url).is_some_and(|(host, _)| self.hosts.allows(&host))
    }

    fn allows_topic(&self, topic: &str) -> bool {
        self.topics
            .as_ref()
            .is_none_or(|topics| topics.iter().any(|t| t == topic))
    }

    /// Confirms a subscription: GETs the verified message's `SubscribeURL`
    /// through the fetcher, after checking that the message is a
    /// `SubscriptionConfirmation` for an allowed topic and that the URL is
    /// `https` on an allowed host. Call it only with a message that this
    /// verifier verified.
    ///
    /// # Errors
    ///
    /// A [`ConfirmError`] saying which check failed, or the fetch error.
    pub async fn confirm_subscription(&self, message: &SnsMessage) -> Result<(), ConfirmError> {
        if !message.is_subscription_confirmation() {
            return Err(ConfirmError::NotAConfirmation);
        }
        if !self.allows_topic(&message.topic_arn) {
            return Err(ConfirmError::TopicNotAllowed);
        }
        let url = message
            .subscribe_url
            .as_deref()
            .filter(|url| self.allows_host_of(url))
            .ok_or(ConfirmError::UrlNotAllowed)?;
        self.fetcher.fetch(url).await?;
        Ok(())
    }

    /// The signing key of the certificate at `path` on `host` (an allowed
    /// host, lowercase), from the cache or fetched: one fetch per
    /// certificate at a time, none while its last failure is recent or the
    /// fetch budget is spent.
    async fn key(&self, host: &str, path: &str) -> Result<Arc<PublicKey>, VerifyError> {
        if let Some(key) = self.cache.get(path) {
            return Ok(key);
        }
        // Failures and fetches go by the normalised URL: a failure on one
        // host (a made-up region) must not stop the certificate's real host.
        let url = format!("https://{host}{path}");
        let flight = self.cache.flight(&url);
        let fetched = {
            let _only_fetch = flight.lock().await;
            self.fetch_key(&url, path).await
        };
        self.cache.landed(&url, flight);
        fetched
    }

    /// [`key`](Self::key) once this request holds the URL's lock.
    async fn fetch_key(&self, url: &str, path: &str) -> Result<Arc<PublicKey>, VerifyError> {
        // Another request may have fetched it (or failed) while this one waited.
        if let Some(key) = self.cache.get(path) {
            return Ok(key);
        }
        if self.cache.failed_recently(url) {
            return Err(VerifyError::KeyLookupUnavailable);
        }
        if !self.cache.may_fetch() {
            tracing::warn!("SNS certificate fetch budget spent; answering 503");
            return Err(VerifyError::KeyLookupUnavailable);
        }
        let bytes = match self.fetcher.fetch(url).await {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!(error = %e, source = ?Error::source(&e), "SNS signing certificate fetch failed");
                self.cache.failed(url);
                return Err(VerifyError::KeyLookupUnavailable);
            }
        };
        let Some(key) = certificate_key(&bytes) else {
            tracing::warn!("SNS signing certificate is not an X.509 certificate with an RSA key");
            self.cache.failed(url);
            return Err(VerifyError::KeyLookupUnavailable);
        };
        let key = Arc::new(key);
        self.cache.insert(path, Arc::clone(&key));
        Ok(key)
    }
}

#[async_trait::async_trait]
impl RequestVerifier for Sns {
    async fn verify_request(
        &self,
        head: RequestHead<'_>,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Verified, VerifyError> {
        let fields: Fields<'_> = serde_json::from_slice(body)
            .map_err(|_| VerifyError::malformed_field("body", "not an SNS JSON message"))?;
        let kind_text = required(&fields.kind, "Type")?;
        let kind = MessageType::parse(kind_text)
            .ok_or(VerifyError::malformed_field("Type", "unknown message type"))?;
        if let Some(header) = optional_header(head.headers, &MESSAGE_TYPE_NAME, MESSAGE_TYPE)?
            && header != kind_text
        {
            return Err(VerifyError::malformed(
                MESSAGE_TYPE,
                "differs from the body's Type",
            ));
        }
        let version = match required(&fields.signature_version, "SignatureVersion")? {
            "1" => SignatureVersion::V1,
            "2" => SignatureVersion::V2,
            _ => {
                return Err(VerifyError::malformed_field(
                    "SignatureVersion",
                    "expected 1 or 2",
                ));
            }
        };
        let signature = required(&fields.signature, "Signature")?;
        if signature.len() > MAX_SIGNATURE_LEN {
            return Err(VerifyError::malformed_field("Signature", "too long"));
        }
        let signature = B64
            .decode(signature)
            .map_err(|_| VerifyError::malformed_field("Signature", "not base64"))?;
        // Nothing is fetched for a signature no RSA key could have made.
        if !RSA_SIGNATURE_LENS.contains(&signature.len()) {
            return Err(VerifyError::malformed_field(
                "Signature",
                "not the length of an RSA signature",
            ));
        }
        if version == SignatureVersion::V1 && self.min_version == SignatureVersion::V2 {
            return Err(VerifyError::malformed_field(
                "SignatureVersion",
                "version 2 (SHA256withRSA) is required",
            ));
        }
        let message_id = required(&fields.message_id, "MessageId")?;
        if message_id.is_empty()
            || message_id.len() > MAX_ID_LEN
            || !message_id.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(VerifyError::malformed_field(
                "MessageId",
                "empty, too long or not visible ASCII",
            ));
        }
        let timestamp = parse_timestamp(required(&fields.timestamp, "Timestamp")?).ok_or(
            VerifyError::malformed_field("Timestamp", "not an ISO 8601 UTC time"),
        )?;
        let canonical = canonical(kind, &fields)?;
        let url = required(&fields.signing_cert_url, "SigningCertURL")?;

        // Nothing is fetched for a topic or a host that is not allowed.
        if !self.allows_topic(required(&fields.topic_arn, "TopicArn")?) {
            return Err(VerifyError::UnknownKey);
        }
        let Some((host, path)) = https_parts(url) else {
            return Err(VerifyError::UnknownKey);
        };
        if !self.hosts.allows(&host) || !is_certificate_path(path) {
            return Err(VerifyError::UnknownKey);
        }
        if let Some(max_age) = self.max_age {
            let age = i128::from(unix_seconds(now)) - i128::from(timestamp);
            if age > i128::from(max_age.as_secs()) {
                return Err(VerifyError::TimestampTooOld);
            }
            // SNS clocks are not ahead of ours by more than the same margin.
            if -age > i128::from(max_age.as_secs()) {
                return Err(VerifyError::TimestampTooNew);
            }
        }
        let key = self.key(&host, path).await?;
        let (digest, padding) = version.digest(canonical.as_bytes());
        key.verify(padding, &digest, &signature)
            .map_err(|_| VerifyError::NoMatchingSignature)?;
        let certificate = path.trim_start_matches('/');
        Ok(Verified {
            scheme: SCHEME,
            id: Some(message_id.to_owned()),
            timestamp: Some(timestamp),
            event_type: Some(kind_text.to_owned()),
            matched_key: MatchedKey::Lookup {
                key_id: certificate.into(),
                index: 0,
            },
            scope: None,
            identity: Identity::SignedId,
        })
    }

    fn handshake(&self, verified: &Verified, body: &[u8]) -> Option<crate::Handshake> {
        let hook = self.on_confirmation.as_ref()?;
        if verified.event_type.as_deref() != Some("SubscriptionConfirmation") {
            return None;
        }
        let message: SnsMessage = serde_json::from_slice(body).ok()?;
        if message
            .subscribe_url
            .as_deref()
            .is_some_and(|url| self.allows_host_of(url))
        {
            hook(message);
        } else {
            tracing::warn!(
                "SNS SubscriptionConfirmation whose SubscribeURL is not on an allowed host; not handed to the hook"
            );
        }
        Some(crate::Handshake::empty())
    }
}

/// Builds an [`Sns`] verifier.
#[must_use]
pub struct SnsBuilder {
    fetcher: Arc<dyn CertificateFetcher>,
    regions: Option<Vec<String>>,
    hosts: Vec<String>,
    topics: Vec<String>,
    any_topic: bool,
    max_age: Option<Duration>,
    cache_ttl: Duration,
    cache_capacity: usize,
    on_confirmation: Option<ConfirmationHook>,
    failure_ttl: Duration,
    fetch_rate: (u32, Duration),
    min_version: u8,
}

impl fmt::Debug for SnsBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnsBuilder")
            .field("regions", &self.regions)
            .field("hosts", &self.hosts)
            .field("topics", &self.topics.len())
            .field("any_topic", &self.any_topic)
            .field("max_age", &self.max_age)
            .finish_non_exhaustive()
    }
}

impl SnsBuilder {
    /// Accepts messages of this topic (call once per topic). At least one
    /// topic, or [`any_topic`](Self::any_topic), is required.
    pub fn topic_arn(mut self, topic_arn: impl Into<String>) -> Self {
        self.topics.push(topic_arn.into());
        self
    }

    /// Accepts messages of any topic: anyone with an AWS account could then
    /// have SNS deliver their own topic's messages to you. Prefer
    /// [`topic_arn`](Self::topic_arn).
    pub fn any_topic(mut self) -> Self {
        self.any_topic = true;
        self
    }

    /// Allows certificates only from `sns.<region>.amazonaws.com` (or `.com.cn`)
    /// for these regions (call once per region). By default any region-shaped
    /// name (`us-east-1`, `cn-north-1`, `us-gov-west-1`) is allowed.
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.regions
            .get_or_insert_with(Vec::new)
            .push(region.into().to_ascii_lowercase());
        self
    }

    /// Also allows this exact host (a partition with another domain, a
    /// VPC endpoint). Certificates still have to be `https` and at an SNS
    /// certificate path.
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.hosts.push(host.into().to_ascii_lowercase());
        self
    }

    /// Refuses messages whose `Timestamp` is further than this from now
    /// (either side). Off by default: SNS retries a delivery with its
    /// original timestamp for as long as the subscription's retry policy says
    /// (up to an hour and more), and `MessageId` dedup is the replay guard.
    pub fn max_age(mut self, max_age: Duration) -> Self {
        self.max_age = Some(max_age);
        self
    }

    /// How long a fetched certificate is kept (default 24 h); zero disables the cache.
    pub fn cache_ttl(mut self, ttl: Duration) -> Self {
        self.cache_ttl = ttl;
        self
    }

    /// How many certificates are kept (default 64).
    pub fn cache_capacity(mut self, capacity: usize) -> Self {
        self.cache_capacity = capacity;
        self
    }

    /// Hands each verified `SubscriptionConfirmation` to `hook`, and has a
    /// receive pipeline answer it `200` itself, in both modes, without
    /// storing it or running the handler (see
    /// [`Handshake`](crate::Handshake)). Confirming is an outbound call
    /// your application must allow: GET the message's `SubscribeURL` (the
    /// hook runs only when it is `https` on an allowed SNS host) or call
    /// `ConfirmSubscription` with its `Token`, from a task of yours (the
    /// hook must not block). Without a hook, confirmations reach the
    /// handler (or the inbox) like any message.
    pub fn on_subscription_confirmation(
        mut self,
        hook: impl Fn(SnsMessage) + Send + Sync + 'static,
    ) -> Self {
        self.on_confirmation = Some(Arc::new(hook));
        self
    }

    /// How long a failed certificate fetch (an error, or an answer that is
    /// not a certificate) is remembered: meanwhile messages naming that
    /// certificate are answered `503` without fetching (default 30 s; SNS
    /// retries later). Zero: every such message fetches again.
    pub fn failure_ttl(mut self, ttl: Duration) -> Self {
        self.failure_ttl = ttl;
        self
    }

    /// At most `max` certificate fetches start per `window` (default 10 per
    /// minute); past that, messages whose certificate is not cached are
    /// answered `503` without fetching. SNS uses a handful of certificates,
    /// so only forged messages naming many exhaust it.
    pub fn fetch_rate(mut self, max: u32, window: Duration) -> Self {
        self.fetch_rate = (max, window);
        self
    }

    /// Refuses messages signed with an older `SignatureVersion` (`400`):
    /// `2` accepts only SHA256withRSA, `1` (the default) also SHA1withRSA.
    /// Recommended: set the topic's `SignatureVersion` attribute to `2` and
    /// call `require_signature_version(2)`.
    pub fn require_signature_version(mut self, version: u8) -> Self {
        self.min_version = version;
        self
    }

    /// The verifier.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Setting`] when neither a topic nor `any_topic` was
    /// given, or a region or topic is empty.
    pub fn build(self) -> Result<Sns, ConfigError> {
        if self.topics.is_empty() && !self.any_topic {
            return Err(ConfigError::Setting(
                "name the accepted topic ARNs (topic_arn) or allow any_topic",
            ));
        }
        let min_version = match self.min_version {
            1 => SignatureVersion::V1,
            2 => SignatureVersion::V2,
            _ => {
                return Err(ConfigError::Setting(
                    "require_signature_version takes 1 or 2",
                ));
            }
        };
        if self.topics.iter().any(String::is_empty)
            || self.hosts.iter().any(String::is_empty)
            || self.regions.iter().flatten().any(String::is_empty)
        {
            return Err(ConfigError::Setting("empty topic, region or host"));
        }
        Ok(Sns {
            fetcher: self.fetcher,
            hosts: HostPolicy {
                regions: self.regions,
                hosts: self.hosts,
            },
            topics: (!self.any_topic).then_some(self.topics),
            max_age: self.max_age,
            on_confirmation: self.on_confirmation,
            min_version,
            cache: KeyCache::new(
                self.cache_ttl,
                self.cache_capacity,
                self.failure_ttl,
                self.fetch_rate,
            ),
        })
    }
}

/// Signs messages as SNS does, for tests and simulators: an RSA private key
/// whose certificate your test [`CertificateFetcher`] serves at `cert_url`.
///
/// `Debug` never shows the key.
#[derive(Clone)]
pub struct Signer {
    key: PrivateKey,
    cert_url: String,
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signer")
            .field("cert_url", &self.cert_url)
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// A signer from a PKCS#8 DER RSA private key, naming `cert_url` as its
    /// certificate.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when the key is not a PKCS#8 RSA key.
    pub fn from_pkcs8_der(der: &[u8], cert_url: impl Into<String>) -> Result<Self, ConfigError> {
        let key = PrivateKey::from_pkcs8_der(der).map_err(|_| ConfigError::Invalid {
            what: "private key",
            reason: "not a PKCS#8 RSA key",
        })?;
        Ok(Self {
            key,
            cert_url: cert_url.into(),
        })
    }

    /// Signs `message` (setting `SignatureVersion`, `Signature` and
    /// `SigningCertURL`) and returns the JSON body SNS would send.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when the message's type is not one SNS sends
    /// or it lacks a field its type needs (a confirmation without `Token` or
    /// `SubscribeURL`).
    pub fn sign(
        &self,
        mut message: SnsMessage,
        version: SignatureVersion,
    ) -> Result<Vec<u8>, ConfigError> {
        let invalid = |reason| ConfigError::Invalid {
            what: "SNS message",
            reason,
        };
        let kind = MessageType::parse(&message.kind).ok_or(invalid("unknown Type"))?;
        let fields = Fields {
            kind: Some(Cow::Borrowed(&message.kind)),
            message_id: Some(Cow::Borrowed(&message.message_id)),
            topic_arn: Some(Cow::Borrowed(&message.topic_arn)),
            subject: message.subject.as_deref().map(Cow::Borrowed),
            message: Some(Cow::Borrowed(&message.message)),
            timestamp: Some(Cow::Borrowed(&message.timestamp)),
            token: message.token.as_deref().map(Cow::Borrowed),
            subscribe_url: message.subscribe_url.as_deref().map(Cow::Borrowed),
            signature_version: None,
            signature: None,
            signing_cert_url: None,
        };
        let canonical =
            canonical(kind, &fields).map_err(|_| invalid("a field its Type needs is missing"))?;
        let (digest, padding) = version.digest(canonical.as_bytes());
        let signature = (self.key)
            .sign(padding, &digest)
            .map_err(|_| invalid("the key cannot sign"))?;
        message.signature_version = version.as_str().to_owned();
        message.signature = encode_base64(&signature);
        message.signing_cert_url.clone_from(&self.cert_url);
        serde_json::to_vec(&message).map_err(|_| invalid("not serializable"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_parse_as_sns_writes_them() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_timestamp("2022-07-28T21:23:58.317Z"),
            Some(1_659_043_438)
        );
        assert_eq!(parse_timestamp("2000-02-29T12:00:00Z"), Some(951_825_600));
        for bad in [
            "",
            "2022-07-28",
            "2022-07-28T21:23:58",
            "2022-07-28T21:23:58.Z",
            "2022-07-28T21:23:58+01:00",
            "2022-13-28T21:23:58Z",
            "2022-07-28 21:23:58Z",
            "1969-12-31T23:59:59Z",
            "２022-07-28T21:23:58Z",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn hosts_and_paths() {
        let any = HostPolicy {
            regions: None,
            hosts: vec![],
        };
        for ok in [
            "sns.us-east-1.amazonaws.com",
            "sns.cn-north-1.amazonaws.com.cn",
            "sns.us-gov-west-1.amazonaws.com",
        ] {
            assert!(any.allows(ok), "{ok}");
        }
        for bad in [
            "sns.us-east-1.amazonaws.com.evil.com",
            "evil.com",
            "sns.amazonaws.com",
            "sns..amazonaws.com",
            "sns.us-east-x.amazonaws.com",
            "sns.evil.com/x.amazonaws.com",
            "xsns.us-east-1.amazonaws.com",
            "sns.us-east-1.amazonaws.co",
        ] {
            assert!(!any.allows(bad), "{bad}");
        }
        let eu = HostPolicy {
            regions: Some(vec!["eu-west-1".into()]),
            hosts: vec!["sns.example.test".into()],
        };
        assert!(eu.allows("sns.eu-west-1.amazonaws.com"));
        assert!(!eu.allows("sns.us-east-1.amazonaws.com"));
        assert!(eu.allows("sns.example.test"));

        assert_eq!(
            https_parts("HTTPS://SNS.us-east-1.amazonaws.com/x.pem"),
            Some(("sns.us-east-1.amazonaws.com".into(), "/x.pem"))
        );
        for bad in [
            "http://sns.us-east-1.amazonaws.com/x.pem",
            "https://user@sns.us-east-1.amazonaws.com/x.pem",
            "https://sns.us-east-1.amazonaws.com:8443/x.pem",
            "https:///x.pem",
            "sns.us-east-1.amazonaws.com/x.pem",
        ] {
            assert_eq!(https_parts(bad), None, "{bad}");
        }
        assert!(is_certificate_path(
            "/SimpleNotificationService-7ff5318490ec183fbaddaa2a969abfda.pem"
        ));
        for bad in [
            "/SimpleNotificationService-.pem",
            "/SimpleNotificationService-a.pem?x=1",
            "/SimpleNotificationService-../a.pem",
            "/other.pem",
            "/SimpleNotificationService-a.crt",
            "",
        ] {
            assert!(!is_certificate_path(bad), "{bad}");
        }
    }

    #[test]
    fn canonical_strings_follow_the_type() {
        let fields: Fields<'_> = serde_json::from_str(
            r#"{"Type":"Notification","MessageId":"m","TopicArn":"t","Subject":"s","Message":"a\nb","Timestamp":"ts","UnsubscribeURL":"u"}"#,
        )
        .unwrap();
        assert_eq!(
            canonical(MessageType::Notification, &fields).unwrap(),
            "Message\na\nb\nMessageId\nm\nSubject\ns\nTimestamp\nts\nTopicArn\nt\nType\nNotification\n"
        );
        let fields: Fields<'_> = serde_json::from_str(
            r#"{"Type":"SubscriptionConfirmation","MessageId":"m","TopicArn":"t","Subject":"ignored","Message":"x","Timestamp":"ts","Token":"k","SubscribeURL":"u"}"#,
        )
        .unwrap();
        assert_eq!(
            canonical(MessageType::SubscriptionConfirmation, &fields).unwrap(),
            "Message\nx\nMessageId\nm\nSubscribeURL\nu\nTimestamp\nts\nToken\nk\nTopicArn\nt\nType\nSubscriptionConfirmation\n"
        );
        let missing: Fields<'_> =
            serde_json::from_str(r#"{"Type":"SubscriptionConfirmation","MessageId":"m","TopicArn":"t","Message":"x","Timestamp":"ts","SubscribeURL":"u"}"#).unwrap();
        assert_eq!(
            canonical(MessageType::SubscriptionConfirmation, &missing),
            Err(VerifyError::MissingField("Token"))
        );
    }

    #[test]
    fn regions_have_a_shape() {
        assert!(is_region("us-east-1"));
        assert!(is_region("ap-southeast-12"));
        assert!(!is_region("us-east"));
        assert!(!is_region("US-east-1"));
        assert!(!is_region("us--1"));
        assert!(!is_region("us-east-1a"));
    }
}
