//! [`TestSigner`]: an SNS `Notification` around a [`TestDelivery`], signed
//! as SNS signs it, for `SignTest` users (the scheme registry, the
//! `webhooks` command).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue};

use super::message::{SignatureVersion, Signer, SnsMessage};
use crate::ConfigError;
use crate::testing::{SignTest, TestDelivery, iso8601};

/// The certificate URL a [`TestSigner`] names unless told otherwise: on
/// SNS's own host for `us-east-1`, so that a verifier with its default
/// host policy accepts it once the certificate is
/// [pinned](super::SnsBuilder::certificate) there.
pub const TEST_CERTIFICATE_URL: &str =
    "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-webhooks-test.pem";

/// The topic a [`TestSigner`] publishes to unless told otherwise.
pub const TEST_TOPIC_ARN: &str = "arn:aws:sns:us-east-1:123456789012:webhooks-test";

/// Signs [`TestDelivery`]s as SNS delivers them over HTTP(S): the body is
/// the `Notification` (the delivery's body as its `Message`, its id as
/// `MessageId`, its time as `Timestamp`), signed with an RSA private key
/// whose certificate the receiver pins (or fetches) at the certificate URL;
/// the headers are SNS's `x-amz-sns-*` and `Content-Type: text/plain`.
///
/// ```
/// # #[cfg(feature = "sns")] {
/// use webhooks_core::scheme::sns::TestSigner;
/// use webhooks_core::testing::{SignTest, TestDelivery};
///
/// let der = std::fs::read("tests/data/sns/test-key.der")?;
/// let signer = TestSigner::from_pkcs8_der(&der)?;
/// let delivery = TestDelivery::new(r#"{"notificationType":"Bounce"}"#).id("m-1");
/// let headers = signer.sign_test(&delivery)?;
/// assert_eq!(headers["x-amz-sns-message-type"], "Notification");
/// let body = signer.sign_test_body(&delivery)?;
/// assert!(std::str::from_utf8(&body)?.contains(r#""MessageId":"m-1""#));
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// `Debug` never shows the key.
#[derive(Debug, Clone)]
pub struct TestSigner {
    signer: Signer,
    topic_arn: String,
    version: SignatureVersion,
}

impl TestSigner {
    /// A signer from a PKCS#8 DER RSA private key, naming
    /// [`TEST_CERTIFICATE_URL`] and publishing to [`TEST_TOPIC_ARN`] with
    /// `SignatureVersion` 1 (SNS's default).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when the key is not a PKCS#8 RSA key.
    pub fn from_pkcs8_der(der: &[u8]) -> Result<Self, ConfigError> {
        Ok(Self {
            signer: Signer::from_pkcs8_der(der, TEST_CERTIFICATE_URL)?,
            topic_arn: TEST_TOPIC_ARN.to_owned(),
            version: SignatureVersion::V1,
        })
    }

    /// A signer from a PKCS#8 RSA private key as text: PEM (`-----BEGIN
    /// PRIVATE KEY-----`) or the DER in base64.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] when it is neither, or not an RSA key.
    pub fn from_pkcs8_text(text: &str) -> Result<Self, ConfigError> {
        let invalid = ConfigError::Invalid {
            what: "private key",
            reason: "expected a PKCS#8 RSA key: PEM (-----BEGIN PRIVATE KEY-----) or base64 DER",
        };
        if text.contains("-----BEGIN RSA PRIVATE KEY-----") {
            return Err(ConfigError::Invalid {
                what: "private key",
                reason: "this is a PKCS#1 key: convert it with `openssl pkcs8 -topk8 -nocrypt`",
            });
        }
        let base64: String = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.starts_with("-----"))
            .collect();
        let der = B64.decode(base64.as_bytes()).map_err(|_| invalid.clone())?;
        Self::from_pkcs8_der(&der).map_err(|_| invalid)
    }

    /// Names `url` as the signing certificate's URL (`SigningCertURL`).
    #[must_use]
    pub fn certificate_url(mut self, url: impl Into<String>) -> Self {
        self.signer = self.signer.with_cert_url(url);
        self
    }

    /// Publishes to `topic_arn`.
    #[must_use]
    pub fn topic_arn(mut self, topic_arn: impl Into<String>) -> Self {
        self.topic_arn = topic_arn.into();
        self
    }

    /// Signs with `version` (`SignatureVersion::V2`: SHA256withRSA).
    #[must_use]
    pub fn signature_version(mut self, version: SignatureVersion) -> Self {
        self.version = version;
        self
    }

    fn message(&self, delivery: &TestDelivery) -> Result<SnsMessage, ConfigError> {
        let text = std::str::from_utf8(delivery.body()).map_err(|_| ConfigError::Invalid {
            what: "SNS message",
            reason: "the Message must be UTF-8 text",
        })?;
        let timestamp = iso8601(delivery.unix_timestamp());
        // SNS writes milliseconds: `2022-07-28T21:23:58.317Z`.
        let timestamp = format!("{}.000Z", timestamp.trim_end_matches('Z'));
        Ok(SnsMessage::notification(
            delivery.delivery_id(),
            self.topic_arn.as_str(),
            text,
            timestamp,
        ))
    }
}

impl SignTest for TestSigner {
    fn sign_test(&self, delivery: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        let value = |v: &str| {
            HeaderValue::try_from(v).map_err(|_| ConfigError::Invalid {
                what: "SNS message",
                reason: "the id or topic is not a valid header value",
            })
        };
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-amz-sns-message-type",
            HeaderValue::from_static("Notification"),
        );
        headers.insert("x-amz-sns-message-id", value(delivery.delivery_id())?);
        headers.insert("x-amz-sns-topic-arn", value(&self.topic_arn)?);
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=UTF-8"),
        );
        headers.insert(
            http::header::USER_AGENT,
            HeaderValue::from_static("Amazon Simple Notification Service Agent"),
        );
        Ok(headers)
    }

    fn sign_test_body(&self, delivery: &TestDelivery) -> Result<Bytes, ConfigError> {
        let message = self.message(delivery)?;
        self.signer.sign(message, self.version).map(Bytes::from)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::scheme::sns::{CertificateFetcher, FetchError, Sns};
    use crate::{RequestHead, RequestVerifier as _, VerifyError};

    struct NoNetwork;

    #[async_trait::async_trait]
    impl CertificateFetcher for NoNetwork {
        async fn fetch(&self, _: &str) -> Result<Vec<u8>, FetchError> {
            Err(FetchError::new("no network in this test"))
        }
    }

    fn data(name: &str) -> Vec<u8> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sns/");
        std::fs::read(format!("{path}{name}")).unwrap()
    }

    fn verifier(certificate_url: &str) -> Sns {
        Sns::builder(NoNetwork)
            .any_topic()
            .max_age(Duration::from_secs(3600))
            .certificate(certificate_url, data("test-cert.pem"))
            .build()
            .unwrap()
    }

    #[test]
    fn timestamps_are_what_the_verifier_parses() {
        for unix in [0, 951_782_400, 1_700_000_000, 4_107_542_399] {
            let written = format!("{}.000Z", iso8601(unix).trim_end_matches('Z'));
            assert_eq!(super::super::message::parse_timestamp(&written), Some(unix));
        }
    }

    #[tokio::test]
    async fn signs_what_the_verifier_accepts() {
        let b64 = B64.encode(data("test-key.der"));
        let pem = format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n");
        for (signer, url) in [
            (
                TestSigner::from_pkcs8_der(&data("test-key.der")).unwrap(),
                TEST_CERTIFICATE_URL,
            ),
            (
                TestSigner::from_pkcs8_text(&pem)
                    .unwrap()
                    .certificate_url(
                        "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-x.pem",
                    )
                    .topic_arn("arn:aws:sns:eu-west-1:1:t")
                    .signature_version(SignatureVersion::V2),
                "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-x.pem",
            ),
        ] {
            let delivery = TestDelivery::new(r#"{"notificationType":"Delivery"}"#);
            let headers = signer.sign_test(&delivery).unwrap();
            let body = signer.sign_test_body(&delivery).unwrap();
            let head = RequestHead::from_path_and_query("/sns", &headers);
            let verified = verifier(url)
                .verify_request(head, &body, SystemTime::now())
                .await
                .unwrap();
            assert_eq!(verified.id.as_deref(), Some(delivery.delivery_id()));
            // An hour and more old: refused by the verifier's max age.
            let stale = TestDelivery::new("{}").timestamp(delivery.unix_timestamp() - 7200);
            let body = signer.sign_test_body(&stale).unwrap();
            let head = RequestHead::from_path_and_query("/sns", &headers);
            let err = verifier(url)
                .verify_request(head, &body, SystemTime::now())
                .await
                .unwrap_err();
            assert_eq!(err, VerifyError::TimestampTooOld);
        }
    }

    #[test]
    fn keys_in_the_wrong_format_say_what_is_expected() {
        for text in [
            "",
            "not a key",
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----",
        ] {
            let err = TestSigner::from_pkcs8_text(text).unwrap_err().to_string();
            assert!(err.contains("PKCS#8 RSA"), "{err}");
        }
        let err = TestSigner::from_pkcs8_text("-----BEGIN RSA PRIVATE KEY-----\nAAAA")
            .unwrap_err()
            .to_string();
        assert!(err.contains("openssl pkcs8 -topk8"), "{err}");
        // Debug shows no key material.
        let signer = TestSigner::from_pkcs8_der(&data("test-key.der")).unwrap();
        let debug = format!("{signer:?}");
        assert!(!debug.contains("MII") && debug.len() < 400, "{debug}");
    }
}
