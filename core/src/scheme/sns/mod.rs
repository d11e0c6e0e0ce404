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
//! | the certificate cannot be fetched or read, and no last good key of it is kept | `503` ([`VerifyError::KeyLookupUnavailable`]): SNS retries |
//! | that certificate URL failed within [`failure_ttl`](SnsBuilder::failure_ttl), or its [fetch budget](SnsBuilder::fetch_rate) is spent, and no last good key of it is kept | `503`, nothing fetched |
//!
//! Certificates are cached by path: letter case in the host, or another
//! allowed host, does not make another fetch once a certificate is cached.
//! A failure is remembered for its URL (lowercase host and path), so that a
//! made-up region cannot stop the real one. One fetch per URL runs at a
//! time; requests arriving meanwhile wait for its answer. Set the
//! topic's `SignatureVersion` to `2` and call
//! [`require_signature_version(2)`](SnsBuilder::require_signature_version).
//!
//! **Forged messages cannot keep your certificate out.** Anyone can post
//! messages naming made-up certificates on the real SNS host; each costs a
//! fetch, so fetches are budgeted. There are two budgets: certificate paths
//! that are *known* (a message verified with their key, or given to
//! [`certificate`](SnsBuilder::certificate) or
//! [`known_certificate_url`](SnsBuilder::known_certificate_url)) are fetched
//! from [`known_fetch_rate`](SnsBuilder::known_fetch_rate) (10 a minute by
//! default), always from the URL they were fetched from; every other path
//! from [`fetch_rate`](SnsBuilder::fetch_rate) (5 a minute), which forged
//! messages can spend, and only that one. Past its
//! [`cache_ttl`](SnsBuilder::cache_ttl) a key is refreshed when next needed,
//! and its last good key is used while the refresh fails or waits for its
//! budget, for up to [`stale_ttl`](SnsBuilder::stale_ttl) (7 days). At most
//! [`cache_capacity`](SnsBuilder::cache_capacity) keys are kept, fresh or
//! stale; when full, paths that never verified are evicted first. A
//! certificate never seen, at start or when AWS moves to a new one, is the
//! one case junk can delay: pin yours at build time with
//! [`certificate`](SnsBuilder::certificate) (the PEM served at the
//! `SigningCertURL` of your messages), or declare its URL with
//! [`known_certificate_url`](SnsBuilder::known_certificate_url).
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
//! #     include_bytes!("../../../tests/data/sns/test-key.der").as_slice(),
//! #     include_str!("../../../tests/data/sns/test-cert.pem"),
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

mod builder;
mod cache;
mod fetch;
mod host;
mod message;
mod test_signer;

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use rsa::PublicKey;

pub use builder::SnsBuilder;
#[cfg(feature = "sns-reqwest")]
pub use fetch::ReqwestFetcher;
pub use fetch::{CertificateFetcher, FetchError};
pub use message::{SignatureVersion, Signer, SnsMessage};
pub use test_signer::{TEST_CERTIFICATE_URL, TEST_TOPIC_ARN, TestSigner};

use super::{optional_header, unix_seconds};
use crate::{Identity, MatchedKey, RequestHead, RequestVerifier, Verified, VerifyError};
use cache::{KeyCache, Lookup};
use fetch::certificate_key;
use host::{HostPolicy, https_parts, is_certificate_path};
use message::{Fields, MessageType, canonical, parse_timestamp, required};

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
/// How many fetches of certificates whose path is not known may start per
/// [`DEFAULT_FETCH_WINDOW`] by default; past that, requests needing such a
/// fetch are answered `503` (see [`SnsBuilder::fetch_rate`]).
pub const DEFAULT_MAX_FETCHES: u32 = 5;
/// How many fetches of known certificates may start per
/// [`DEFAULT_FETCH_WINDOW`] by default (see [`SnsBuilder::known_fetch_rate`]).
pub const DEFAULT_MAX_KNOWN_FETCHES: u32 = 10;
/// How long past its TTL the last good key of a certificate is used by
/// default while it cannot be fetched again (see [`SnsBuilder::stale_ttl`]).
pub const DEFAULT_STALE_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// The window of [`DEFAULT_MAX_FETCHES`] and [`DEFAULT_MAX_KNOWN_FETCHES`].
pub const DEFAULT_FETCH_WINDOW: Duration = Duration::from_secs(60);
/// The longest `Message`/`MessageId`… is bounded by the body limit; ids
/// reach the dedup store and logs, so they are bounded here.
const MAX_ID_LEN: usize = 256;

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
            .field("cached_certificates", &self.cache.len().0)
            .field("pinned_certificates", &self.cache.len().1)
            .finish_non_exhaustive()
    }
}

impl Sns {
    /// A builder around the fetcher that gets certificates.
    pub fn builder(fetcher: impl CertificateFetcher) -> SnsBuilder {
        SnsBuilder::new(Arc::new(fetcher))
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
    /// host, lowercase), and whether the path is known: pinned, fetched
    /// within the TTL, or fetched (one fetch per URL at a time, none while
    /// its last failure is recent or its budget is spent), or else the last
    /// good key of the path.
    async fn key(&self, host: &str, path: &str) -> Result<(Arc<PublicKey>, bool), VerifyError> {
        let (known, url) = match self.cache.lookup(path, Instant::now()) {
            Lookup::Ready { key, known } => return Ok((key, known)),
            Lookup::Fetch { known, url, .. } => (known, url),
        };
        // Failures and fetches go by the normalised URL: a failure on one
        // host (a made-up region) must not stop the certificate's real host.
        // A known path is fetched from where it was, whatever host the
        // message names.
        let url = url.unwrap_or_else(|| format!("https://{host}{path}"));
        let flight = self.cache.flight(&url);
        let fetched = {
            let _only_fetch = flight.lock().await;
            self.fetch_key(&url, path).await
        };
        self.cache.landed(&url, flight);
        fetched.map(|key| (key, known))
    }

    /// [`key`](Self::key) once this request holds the URL's lock.
    async fn fetch_key(&self, url: &str, path: &str) -> Result<Arc<PublicKey>, VerifyError> {
        let now = Instant::now();
        // Another request may have fetched it (or failed) while this one waited.
        let (stale, known) = match self.cache.lookup(path, now) {
            Lookup::Ready { key, .. } => return Ok(key),
            Lookup::Fetch { stale, known, .. } => (stale, known),
        };
        let unavailable = |why: &'static str| match &stale {
            Some(key) => {
                tracing::debug!(
                    why,
                    "SNS certificate not refreshed; using its last good key"
                );
                Ok(Arc::clone(key))
            }
            None => Err(VerifyError::KeyLookupUnavailable),
        };
        if self.cache.failed_recently(url, now) {
            return unavailable("its last fetch failed recently");
        }
        if !self.cache.may_fetch(known, now) {
            if stale.is_none() {
                tracing::warn!(known, "SNS certificate fetch budget spent; answering 503");
            }
            return unavailable("the fetch budget is spent");
        }
        let bytes = match self.fetcher.fetch(url).await {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!(error = %e, source = ?Error::source(&e), "SNS signing certificate fetch failed");
                self.cache.failed(url, Instant::now());
                return unavailable("the fetch failed");
            }
        };
        let Some(key) = certificate_key(&bytes) else {
            tracing::warn!("SNS signing certificate is not an X.509 certificate with an RSA key");
            self.cache.failed(url, Instant::now());
            return unavailable("the answer is not a certificate");
        };
        let key = Arc::new(key);
        self.cache
            .insert(path, url, Arc::clone(&key), Instant::now());
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
        let (key, known) = self.key(&host, path).await?;
        let (digest, padding) = version.digest(canonical.as_bytes());
        key.verify(padding, &digest, &signature)
            .map_err(|_| VerifyError::NoMatchingSignature)?;
        if !known {
            // A message verified with it: the path is known from now on.
            self.cache.verified(path, &key);
        }
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
