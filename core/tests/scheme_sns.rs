//! The Amazon SNS scheme on real messages signed by SNS (SignatureVersion 1
//! and 2) with Amazon's certificate, as published by AWS's own validator
//! (cited below), then every rule one test at a time with a test key
//! (`tests/data/sns/README.md` says how it was made) and a fake fetcher.
#![cfg(feature = "sns")]

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use http::HeaderMap;
use serde_json::json;
use webhooks_core::scheme::sns::{
    CertificateFetcher, ConfirmError, FetchError, SignatureVersion, Signer, Sns, SnsMessage,
};
use webhooks_core::{ConfigError, MatchedKey, RequestHead, RequestVerifier, VerifyError};

/// Amazon's certificate and four messages SNS signed with it, from
/// aws/aws-php-sns-message-validator `tests/FunctionalValidationsTest.php`
/// (`$certificate` and `getHttpFixtures`).
mod aws {
    pub(crate) const CERT_URL: &str = "https://sns.us-east-2.amazonaws.com/SimpleNotificationService-7ff5318490ec183fbaddaa2a969abfda.pem";
    pub(crate) const CERT: &str =
        include_str!("data/sns/aws-SimpleNotificationService-7ff5318490ec183fbaddaa2a969abfda.pem");
    /// `(MessageId, topic suffix, Subject, Timestamp, SignatureVersion, Signature)`.
    pub(crate) type Fixture = (
        &'static str,
        &'static str,
        Option<&'static str>,
        &'static str,
        &'static str,
        &'static str,
    );
    pub(crate) const MESSAGES: [Fixture; 4] = [
        (
            "792cda85-518f-5dd3-9163-81d851212f3a",
            "892f85fe-4836-424d-8188-ab85bef0f362",
            None,
            "2022-07-28T21:23:58.317Z",
            "1",
            "ghtf+deOBAzHJJZ6s6CdRLfTQAlcGzq9naoFM1wi0CJiq//uVRuZnamrkWNF0fhouMFvuLVRwcz8PZLUMSfnmd5VpdTKpTyiKmy1qJAZXma0w+yi7G+I33hD1Jyk1Nbym2n0kqp3fVu2aoooiN2ZeLAT2bH0/BtjLSfN1yAOKNoprco4qV9gGUZinXJdj9a1YdNhDR2jKi33ldlsVtEXAtiaDklGEk7DgRKX38GerBPiLg3FdtgY6KC7cdeGpU/dGK+4hjc83Ive1HoFkAwqhpgInM2sMytBosoiXfCmOKmU4xeGD0gHDNZTlJUJQDlzw8Eag0H9f/5zXF9d3uy0YQ==",
        ),
        (
            "17dea24b-55c2-540b-8362-f916557af765",
            "62674b1d-4295-426b-88e7-5fb75652a04e",
            None,
            "2022-07-28T21:24:08.324Z",
            "2",
            "CXVqp9PfZAL+4JHS3Zxo1PFbQsvnOjvmYhtIf17TWpwc+iIVas8kZ8GopuzVzVMdatE7rCl/O4P91Zp05Dwz8lk8dLhfp8gSu3Njlzxlyrmzo9x3va3Jb7zFnedgS2GKnZWHGBdwTXho+TosNUE+3e10OMSlwN5XGDwX7+R3WL+rn+AXmFAqp3alg27sYa55h1dLE9cGszGPjScPdtF3BmZsUDMx9wSdNKsCk+vSvE8yBjnCmUl7laSFj3LzPVrlSwgNYCF3kYnNAkah7NplK4SFhJYLwS0HCVCQJKa8rVbQLf9cBTu60U402mrgy0bN8xWoyimzbYbrOMJjalqkUg==",
        ),
        (
            "11405cc3-9ac7-56d5-b45d-079e8f7a8edf",
            "6e11fed2-fcdf-4c52-9dc4-36ef43f37f84",
            Some("Hello world"),
            "2022-07-28T22:53:49.654Z",
            "1",
            "AItkS26d8yvnIKJevdirIPW7eM/yKbZy3/CF2EreCHmXWB3etWaV5Fb7SYpGABMpugpDZzNyGY1wCVWaopDoQ+7Q/kI2TpDu8bw1eExbi8U3kduvc/2m2fIrI4gDEY8/v3nzoLcr8pPodqMzrX6SzQou4klfaqbNK+rFmH0LVf2Q1VyOROODoSXmo4jg2Yu12jfxccBl96Drr/ihq4MJ4OcrWh6UzXXlVYjJHx2Ui4anNwNEb+Z4C2CAF1DjQUbhDtaoajDBPY+4d9C1OwbqwQpXsd6tyVcI9nFyEsVK8lfnAV+/3GZQcdXHbIUYBRGcBa4X5TlWJku5nDH2ERtHHw==",
        ),
        (
            "4504e649-d933-5aa9-8199-bd14ccf05f0b",
            "530b26da-0687-4fe4-9f71-780bad3181e2",
            Some("Hello world"),
            "2022-07-28T22:53:55.086Z",
            "2",
            "cETcSvmmkt+My05qCLKexyl0+RyG83mSryKPqTfS+tYcxDJWVcjPJAr+qdpElzVaBl1aTGYVWMY64i9JqZ/JES8pylNj8LGvdhuNQKO59/WCoIimZAsNhn0xEgOeeDU+W/0BU4sdpCGMNjo0S/FuIiWaRe4E0YWRVrxeQevaQ70euDdfWgd5v1eCKQz8b367b9XBmMztL/CWUFI6YaKK/MV21eyvJe3Y7CtVYiOKEYiAZnAEkynK7gUGO5TsgDjGNYhj6U3xYsWgI03bmioSl7kdFSUj+AZ7ugas5fghqxgoDsdfqsjMYKRm5KKHQWsgzI619yIzpNKUiSMHxdZXpQ==",
        ),
    ];
    pub(crate) const TOPIC_PREFIX: &str = "arn:aws:sns:us-east-2:295079676684:publish-and-verify-";
}

const TEST_CERT_URL: &str =
    "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-0123456789abcdef.pem";
const TEST_CERT: &str = include_str!("data/sns/test-cert.pem");
const TEST_KEY: &[u8] = include_bytes!("data/sns/test-key.der");
const TOPIC: &str = "arn:aws:sns:eu-west-1:123456789012:ses-events";

/// Serves fixed bodies by URL, counts the fetches, and fails on request.
#[derive(Default)]
struct FakeFetcher {
    bodies: HashMap<String, Vec<u8>>,
    fetched: Mutex<Vec<String>>,
    fail_next: Mutex<bool>,
}

impl FakeFetcher {
    fn serving(pairs: &[(&str, &[u8])]) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self {
            bodies: pairs
                .iter()
                .map(|(url, body)| ((*url).to_owned(), body.to_vec()))
                .collect(),
            ..Self::default()
        })
    }

    fn fetched(&self) -> Vec<String> {
        self.fetched.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl CertificateFetcher for FakeFetcher {
    async fn fetch(&self, url: &str) -> Result<Vec<u8>, FetchError> {
        self.fetched.lock().unwrap().push(url.to_owned());
        if std::mem::take(&mut *self.fail_next.lock().unwrap()) {
            return Err(FetchError::new("connection reset"));
        }
        self.bodies
            .get(url)
            .cloned()
            .ok_or_else(|| FetchError::new("404"))
    }
}

fn aws_body(i: usize) -> Vec<u8> {
    let (id, topic, subject, timestamp, version, signature) = aws::MESSAGES[i];
    let topic = format!("{}{topic}", aws::TOPIC_PREFIX);
    let mut message = json!({
        "Type": "Notification",
        "MessageId": id,
        "TopicArn": topic,
        "Message": "Hello world",
        "Timestamp": timestamp,
        "SignatureVersion": version,
        "Signature": signature,
        "SigningCertURL": aws::CERT_URL,
        "UnsubscribeURL": "https://sns.us-east-2.amazonaws.com/?Action=Unsubscribe",
    });
    if let Some(subject) = subject {
        message["Subject"] = json!(subject);
    }
    message.to_string().into_bytes()
}

fn aws_verifier(fetcher: std::sync::Arc<FakeFetcher>) -> Sns {
    aws::MESSAGES
        .iter()
        .fold(Sns::builder(fetcher), |b, m| {
            b.topic_arn(format!("{}{}", aws::TOPIC_PREFIX, m.1))
        })
        .build()
        .unwrap()
}

async fn verify(sns: &Sns, body: &[u8]) -> Result<webhooks_core::Verified, VerifyError> {
    verify_at(sns, body, SystemTime::now()).await
}

async fn verify_at(
    sns: &Sns,
    body: &[u8],
    now: SystemTime,
) -> Result<webhooks_core::Verified, VerifyError> {
    let headers = HeaderMap::new();
    sns.verify_request(RequestHead::new("/sns", &headers), body, now)
        .await
}

fn signer() -> Signer {
    Signer::from_pkcs8_der(TEST_KEY, TEST_CERT_URL).unwrap()
}

fn test_verifier() -> (Sns, std::sync::Arc<FakeFetcher>) {
    let fetcher = FakeFetcher::serving(&[(TEST_CERT_URL, TEST_CERT.as_bytes())]);
    let sns = Sns::builder(std::sync::Arc::clone(&fetcher))
        .topic_arn(TOPIC)
        .build()
        .unwrap();
    (sns, fetcher)
}

fn notification(id: &str) -> SnsMessage {
    SnsMessage::notification(
        id,
        TOPIC,
        r#"{"eventType":"Delivery","mail":{"messageId":"0100018"}}"#,
        "2026-01-02T03:04:05.678Z",
    )
}

#[tokio::test]
async fn aws_signed_messages_verify_v1_and_v2() {
    let fetcher = FakeFetcher::serving(&[(aws::CERT_URL, aws::CERT.as_bytes())]);
    let sns = aws_verifier(std::sync::Arc::clone(&fetcher));
    for (i, message) in aws::MESSAGES.iter().enumerate() {
        let v = verify(&sns, &aws_body(i))
            .await
            .unwrap_or_else(|e| panic!("message {i}: {e:?}"));
        assert_eq!(v.scheme, "sns");
        assert_eq!(v.id.as_deref(), Some(message.0));
        assert_eq!(v.event_type.as_deref(), Some("Notification"));
        assert_eq!(
            v.matched_key,
            MatchedKey::Lookup {
                key_id: "SimpleNotificationService-7ff5318490ec183fbaddaa2a969abfda.pem".into(),
                index: 0
            }
        );
    }
    assert_eq!(v_timestamp(&sns).await, Some(1_659_043_438));
    // Four messages, one certificate: fetched once, then cached.
    assert_eq!(fetcher.fetched(), vec![aws::CERT_URL.to_owned()]);
}

async fn v_timestamp(sns: &Sns) -> Option<u64> {
    verify(sns, &aws_body(0)).await.unwrap().timestamp
}

#[tokio::test]
async fn aws_messages_tampered_are_401() {
    let fetcher = FakeFetcher::serving(&[(aws::CERT_URL, aws::CERT.as_bytes())]);
    let sns = aws_verifier(fetcher);
    for (i, (field, value)) in [
        ("Message", "Hello world!"),
        ("MessageId", "792cda85-518f-5dd3-9163-81d851212f3b"),
        ("Timestamp", "2022-07-28T21:23:59.317Z"),
        ("Subject", "Hello world"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut message: serde_json::Value = serde_json::from_slice(&aws_body(0)).unwrap();
        message[field] = json!(value);
        let err = verify(&sns, message.to_string().as_bytes())
            .await
            .unwrap_err();
        assert_eq!(err, VerifyError::NoMatchingSignature, "case {i}: {field}");
        assert_eq!(err.status(), 401);
    }
    // The v2 signature presented as v1 (wrong digest).
    let mut message: serde_json::Value = serde_json::from_slice(&aws_body(1)).unwrap();
    message["SignatureVersion"] = json!("1");
    assert_eq!(
        verify(&sns, message.to_string().as_bytes()).await,
        Err(VerifyError::NoMatchingSignature)
    );
}

#[tokio::test]
async fn a_certificate_that_did_not_sign_is_401() {
    // Our test certificate served where Amazon's should be.
    let fetcher = FakeFetcher::serving(&[(aws::CERT_URL, TEST_CERT.as_bytes())]);
    let sns = aws_verifier(fetcher);
    assert_eq!(
        verify(&sns, &aws_body(1)).await,
        Err(VerifyError::NoMatchingSignature)
    );
}

#[tokio::test]
async fn test_signer_round_trips_both_versions() {
    let (sns, fetcher) = test_verifier();
    for (i, version) in [SignatureVersion::V1, SignatureVersion::V2]
        .into_iter()
        .enumerate()
    {
        let id = format!("msg-{i}");
        let body = signer()
            .sign(notification(&id).with_subject("SES"), version)
            .unwrap();
        let v = verify(&sns, &body).await.unwrap();
        assert_eq!(v.id.as_deref(), Some(id.as_str()));
        assert_eq!(v.timestamp, Some(1_767_323_045));
        let message: SnsMessage = serde_json::from_slice(&body).unwrap();
        assert_eq!(message.signature_version, if i == 0 { "1" } else { "2" });
        assert_eq!(message.subject.as_deref(), Some("SES"));
    }
    assert_eq!(fetcher.fetched().len(), 1, "cached after the first");
}

#[tokio::test]
async fn subscription_confirmation_is_verified_and_confirmed_on_request() {
    let subscribe = "https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=arn:aws:sns:eu-west-1:123456789012:ses-events&Token=2336412f37";
    let fetcher = FakeFetcher::serving(&[
        (TEST_CERT_URL, TEST_CERT.as_bytes()),
        (subscribe, b"<ConfirmSubscriptionResponse/>"),
    ]);
    let sns = Sns::builder(std::sync::Arc::clone(&fetcher))
        .topic_arn(TOPIC)
        .build()
        .unwrap();
    let confirmation = SnsMessage::subscription_confirmation(
        "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
        TOPIC,
        "2336412f37",
        subscribe,
        "2026-01-02T03:04:05.678Z",
    );
    let body = signer().sign(confirmation, SignatureVersion::V1).unwrap();
    let v = verify(&sns, &body).await.unwrap();
    assert_eq!(v.event_type.as_deref(), Some("SubscriptionConfirmation"));
    // Verifying fetched the certificate only: nothing confirms by itself.
    assert_eq!(fetcher.fetched(), vec![TEST_CERT_URL.to_owned()]);

    let message: SnsMessage = serde_json::from_slice(&body).unwrap();
    assert!(message.is_subscription_confirmation());
    sns.confirm_subscription(&message).await.unwrap();
    assert_eq!(
        fetcher.fetched().last().map(String::as_str),
        Some(subscribe)
    );

    // A SubscribeURL elsewhere is never fetched.
    for url in [
        "https://evil.example/?Action=ConfirmSubscription",
        "http://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription",
        "https://sns.eu-west-1.amazonaws.com.evil.example/",
    ] {
        let mut forged = message.clone();
        forged.subscribe_url = Some(url.into());
        assert!(matches!(
            sns.confirm_subscription(&forged).await,
            Err(ConfirmError::UrlNotAllowed)
        ));
    }
    let mut other_topic = message.clone();
    other_topic.topic_arn = "arn:aws:sns:eu-west-1:999999999999:theirs".into();
    assert!(matches!(
        sns.confirm_subscription(&other_topic).await,
        Err(ConfirmError::TopicNotAllowed)
    ));
    let notification: SnsMessage = serde_json::from_slice(
        &signer()
            .sign(notification("n"), SignatureVersion::V2)
            .unwrap(),
    )
    .unwrap();
    assert!(matches!(
        sns.confirm_subscription(&notification).await,
        Err(ConfirmError::NotAConfirmation)
    ));
    assert_eq!(
        fetcher.fetched().len(),
        2,
        "only the allowed URL was fetched"
    );
}

#[tokio::test]
async fn foreign_topics_and_certificate_urls_are_401_without_a_fetch() {
    let (sns, fetcher) = test_verifier();
    let theirs = SnsMessage::notification(
        "m1",
        "arn:aws:sns:eu-west-1:999999999999:theirs",
        "x",
        "2026-01-02T03:04:05Z",
    );
    let body = signer().sign(theirs, SignatureVersion::V2).unwrap();
    let err = verify(&sns, &body).await.unwrap_err();
    assert_eq!(
        (err.clone(), err.status().as_u16()),
        (VerifyError::UnknownKey, 401)
    );
    for url in [
        "http://sns.eu-west-1.amazonaws.com/SimpleNotificationService-0123456789abcdef.pem",
        "https://sns.eu-west-1.amazonaws.com.evil.example/SimpleNotificationService-0123456789abcdef.pem",
        "https://evil.example/SimpleNotificationService-0123456789abcdef.pem",
        "https://sns.eu-west-1.amazonaws.com/other.pem",
        "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-0123456789abcdef.pem?x=1",
        "https://user@sns.eu-west-1.amazonaws.com/SimpleNotificationService-0123456789abcdef.pem",
        "https://sns.eu-west-1.amazonaws.com:444/SimpleNotificationService-0123456789abcdef.pem",
    ] {
        let forged = Signer::from_pkcs8_der(TEST_KEY, url).unwrap();
        let body = forged
            .sign(notification("m2"), SignatureVersion::V2)
            .unwrap();
        assert_eq!(
            verify(&sns, &body).await,
            Err(VerifyError::UnknownKey),
            "{url}"
        );
    }
    assert!(fetcher.fetched().is_empty(), "{:?}", fetcher.fetched());

    // Restricted to other regions: eu-west-1 is refused too.
    let us_only = Sns::builder(FakeFetcher::serving(&[]))
        .topic_arn(TOPIC)
        .region("us-east-1")
        .build()
        .unwrap();
    let body = signer()
        .sign(notification("m3"), SignatureVersion::V2)
        .unwrap();
    assert_eq!(verify(&us_only, &body).await, Err(VerifyError::UnknownKey));
    assert!(!us_only.allows_host_of(TEST_CERT_URL));
    assert!(us_only.allows_host_of("https://sns.us-east-1.amazonaws.com/x"));
}

#[tokio::test]
async fn fetch_failures_are_503_and_remembered_for_a_while() {
    let fetcher = FakeFetcher::serving(&[(TEST_CERT_URL, TEST_CERT.as_bytes())]);
    let sns = Sns::builder(std::sync::Arc::clone(&fetcher))
        .topic_arn(TOPIC)
        .failure_ttl(Duration::from_millis(300))
        .build()
        .unwrap();
    *fetcher.fail_next.lock().unwrap() = true;
    let body = signer()
        .sign(notification("m"), SignatureVersion::V1)
        .unwrap();
    let err = verify(&sns, &body).await.unwrap_err();
    assert_eq!(
        (err.clone(), err.status().as_u16()),
        (VerifyError::KeyLookupUnavailable, 503)
    );
    // An immediate retry is answered from the remembered failure.
    assert_eq!(
        verify(&sns, &body).await,
        Err(VerifyError::KeyLookupUnavailable)
    );
    assert_eq!(fetcher.fetched().len(), 1);
    // SNS retries later: this time the certificate comes.
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert!(verify(&sns, &body).await.is_ok());
    assert_eq!(fetcher.fetched().len(), 2);

    // Something that is not a certificate at the URL: 503 as well.
    let garbage = FakeFetcher::serving(&[(TEST_CERT_URL, b"<html>not found</html>")]);
    let sns = Sns::builder(garbage).any_topic().build().unwrap();
    assert_eq!(
        verify(&sns, &body).await,
        Err(VerifyError::KeyLookupUnavailable)
    );
}

#[tokio::test]
async fn max_age_when_set_refuses_old_messages() {
    let fetcher = FakeFetcher::serving(&[(TEST_CERT_URL, TEST_CERT.as_bytes())]);
    let sns = Sns::builder(fetcher)
        .topic_arn(TOPIC)
        .max_age(Duration::from_secs(3600))
        .build()
        .unwrap();
    let body = signer()
        .sign(notification("m"), SignatureVersion::V2)
        .unwrap();
    let published = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_323_045);
    assert!(
        verify_at(&sns, &body, published + Duration::from_secs(3600))
            .await
            .is_ok()
    );
    let err = verify_at(&sns, &body, published + Duration::from_secs(3601))
        .await
        .unwrap_err();
    assert_eq!(
        (err.clone(), err.status().as_u16()),
        (VerifyError::TimestampTooOld, 401)
    );
    assert_eq!(
        verify_at(&sns, &body, published - Duration::from_secs(3601)).await,
        Err(VerifyError::TimestampTooNew)
    );
    // Without max_age, a years-old message (the AWS vectors) is still checked
    // by signature only: MessageId dedup is the replay guard.
}

#[tokio::test]
async fn missing_and_malformed_fields_are_400() {
    let (sns, fetcher) = test_verifier();
    let good: serde_json::Value = serde_json::from_slice(
        &signer()
            .sign(notification("m"), SignatureVersion::V2)
            .unwrap(),
    )
    .unwrap();
    for field in [
        "Type",
        "MessageId",
        "Message",
        "Timestamp",
        "TopicArn",
        "SignatureVersion",
        "Signature",
        "SigningCertURL",
    ] {
        let mut message = good.clone();
        message.as_object_mut().unwrap().remove(field);
        let err = verify(&sns, message.to_string().as_bytes())
            .await
            .unwrap_err();
        assert_eq!(err, VerifyError::MissingField(field), "{field}");
        assert_eq!(err.status(), 400);
    }
    for (field, value) in [
        ("Type", json!("Nonsense")),
        ("SignatureVersion", json!("3")),
        ("Signature", json!("not base64!")),
        ("Signature", json!("A".repeat(2000))),
        ("Timestamp", json!("yesterday")),
        ("MessageId", json!("")),
        ("MessageId", json!("has space")),
        ("Message", json!(7)),
    ] {
        let mut message = good.clone();
        message[field] = value;
        let err = verify(&sns, message.to_string().as_bytes())
            .await
            .unwrap_err();
        assert_eq!(err.status(), 400, "{field}: {err:?}");
    }
    for body in [&b"not json"[..], b""] {
        let err = verify(&sns, body).await.unwrap_err();
        assert!(matches!(err, VerifyError::MalformedField { .. }), "{err:?}");
    }
    assert_eq!(verify(&sns, b"[]").await.unwrap_err().status(), 400);
    // The header SNS sends must agree with the body.
    let mut headers = HeaderMap::new();
    headers.insert(
        "x-amz-sns-message-type",
        "SubscriptionConfirmation".parse().unwrap(),
    );
    let err = sns
        .verify_request(
            RequestHead::new("/sns", &headers),
            good.to_string().as_bytes(),
            SystemTime::now(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, VerifyError::MalformedHeader { .. }),
        "{err:?}"
    );
    assert!(
        fetcher.fetched().is_empty(),
        "nothing fetched for a bad request"
    );
}

#[test]
fn configuration_and_redacted_debug() {
    let fetcher = FakeFetcher::serving(&[]);
    assert!(matches!(
        Sns::builder(std::sync::Arc::clone(&fetcher)).build(),
        Err(ConfigError::Setting(_))
    ));
    assert!(
        Sns::builder(std::sync::Arc::clone(&fetcher))
            .topic_arn("")
            .build()
            .is_err()
    );
    let sns = Sns::builder(fetcher)
        .topic_arn(TOPIC)
        .region("eu-west-1")
        .build()
        .unwrap();
    let shown = format!("{sns:?}");
    assert!(
        shown.contains("topics: Some(1)") && !shown.contains("123456789012"),
        "{shown}"
    );
    let shown = format!("{:?}", signer());
    assert!(
        shown.starts_with("Signer { cert_url:") && !shown.contains("key:"),
        "{shown}"
    );
    assert!(Signer::from_pkcs8_der(b"nope", TEST_CERT_URL).is_err());
    let mut broken = notification("m");
    broken.kind = "Other".into();
    assert!(signer().sign(broken, SignatureVersion::V1).is_err());
}

/// The default fetcher refuses plain HTTP before connecting, and a server
/// that is not there is a fetch error (so a 503), never a panic.
#[cfg(feature = "sns-reqwest")]
#[tokio::test]
async fn reqwest_fetcher_is_https_only() {
    use webhooks_core::scheme::sns::ReqwestFetcher;
    let fetcher = ReqwestFetcher::new().unwrap();
    assert!(fetcher.fetch("http://127.0.0.1:9/cert.pem").await.is_err());
    // Nothing listens on the discard port of loopback.
    assert!(fetcher.fetch("https://127.0.0.1:9/cert.pem").await.is_err());
}

/// Issue 25, item 2: concurrent messages naming an uncached certificate
/// make one fetch (the others wait for its answer); certificates past the
/// fetch budget are not fetched; `require_signature_version(2)` refuses
/// SHA1withRSA before fetching.
#[tokio::test]
async fn fetches_are_single_flight_rate_limited_and_v2_can_be_required() {
    /// A fetcher that takes its time, so that requests overlap.
    struct Slow(std::sync::Arc<FakeFetcher>);
    #[async_trait::async_trait]
    impl CertificateFetcher for Slow {
        async fn fetch(&self, url: &str) -> Result<Vec<u8>, FetchError> {
            tokio::time::sleep(Duration::from_millis(50)).await;
            self.0.fetch(url).await
        }
    }
    let fetcher = FakeFetcher::serving(&[(TEST_CERT_URL, TEST_CERT.as_bytes())]);
    let sns = std::sync::Arc::new(
        Sns::builder(Slow(std::sync::Arc::clone(&fetcher)))
            .topic_arn(TOPIC)
            .fetch_rate(3, Duration::from_secs(3600))
            .build()
            .unwrap(),
    );
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let sns = std::sync::Arc::clone(&sns);
            tokio::spawn(async move {
                let body = signer()
                    .sign(notification(&format!("m{i}")), SignatureVersion::V2)
                    .unwrap();
                verify(&sns, &body).await
            })
        })
        .collect();
    for task in tasks {
        assert!(task.await.unwrap().is_ok());
    }
    assert_eq!(fetcher.fetched(), [TEST_CERT_URL]);

    // Other certificate paths on an allowed host: 2 fetches left in the budget.
    let other = |i: usize| {
        let cert =
            format!("https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-other{i}.pem");
        Signer::from_pkcs8_der(TEST_KEY, cert)
            .unwrap()
            .sign(notification("x"), SignatureVersion::V2)
            .unwrap()
    };
    for i in 0..10 {
        assert_eq!(
            verify(&sns, &other(i)).await,
            Err(VerifyError::KeyLookupUnavailable)
        );
    }
    assert_eq!(fetcher.fetched().len(), 3, "{:?}", fetcher.fetched());

    let (_, fresh) = test_verifier();
    let v2_only = Sns::builder(std::sync::Arc::clone(&fresh))
        .topic_arn(TOPIC)
        .require_signature_version(2)
        .build()
        .unwrap();
    let v1 = signer()
        .sign(notification("v1"), SignatureVersion::V1)
        .unwrap();
    let err = verify(&v2_only, &v1).await.unwrap_err();
    assert_eq!(err.status().as_u16(), 400);
    assert!(fresh.fetched().is_empty());
    let v2 = signer()
        .sign(notification("v2"), SignatureVersion::V2)
        .unwrap();
    assert!(verify(&v2_only, &v2).await.is_ok());
    assert!(matches!(
        Sns::builder(fresh)
            .any_topic()
            .require_signature_version(3)
            .build(),
        Err(webhooks_core::ConfigError::Setting(_))
    ));
}

/// Issue 25, item 2: a failure is remembered for its URL, not its path: a
/// message naming the genuine certificate's path on a made-up region (which
/// cannot be fetched) does not stop the genuine host; and once the
/// certificate is cached, the same path on any allowed host, in any letter
/// case, is the same key, fetched once.
#[tokio::test]
async fn a_made_up_region_cannot_block_the_genuine_certificate() {
    let (sns, fetcher) = test_verifier();
    let path = TEST_CERT_URL.split_once(".com").unwrap().1;
    let fake = format!("https://sns.zz-nowhere-9.amazonaws.com{path}");
    let forged = Signer::from_pkcs8_der(TEST_KEY, fake.as_str())
        .unwrap()
        .sign(notification("forged"), SignatureVersion::V2)
        .unwrap();
    for _ in 0..3 {
        assert_eq!(
            verify(&sns, &forged).await,
            Err(VerifyError::KeyLookupUnavailable)
        );
    }
    assert_eq!(
        fetcher.fetched(),
        [fake.as_str()],
        "one fetch, then remembered"
    );
    let genuine = signer()
        .sign(notification("genuine"), SignatureVersion::V2)
        .unwrap();
    assert!(verify(&sns, &genuine).await.is_ok());
    let shouted = TEST_CERT_URL
        .replace("sns.", "SNS.")
        .replace(".amazonaws", ".AmazonAWS");
    let cased = Signer::from_pkcs8_der(TEST_KEY, shouted.as_str())
        .unwrap()
        .sign(notification("cased"), SignatureVersion::V2)
        .unwrap();
    assert!(verify(&sns, &cased).await.is_ok());
    assert_eq!(fetcher.fetched().len(), 2, "{:?}", fetcher.fetched());
}

/// Pinned and declared certificates are checked at build time: an URL that
/// is not `https` on an allowed host at an SNS certificate path, or bytes
/// that are not a certificate, are a `ConfigError`; `Debug` counts the
/// pinned certificates and shows none.
#[test]
fn pinned_and_declared_certificates_are_checked_when_built() {
    let builder = || {
        Sns::builder(FakeFetcher::serving(&[]))
            .topic_arn(TOPIC)
            .region("eu-west-1")
    };
    for url in [
        "http://sns.eu-west-1.amazonaws.com/SimpleNotificationService-0123456789abcdef.pem",
        "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0123456789abcdef.pem",
        "https://evil.example.com/SimpleNotificationService-0123456789abcdef.pem",
        "https://sns.eu-west-1.amazonaws.com/cert.pem",
    ] {
        assert!(
            matches!(
                builder().certificate(url, TEST_CERT).build(),
                Err(ConfigError::Setting(_))
            ),
            "{url}"
        );
        assert!(
            matches!(
                builder().known_certificate_url(url).build(),
                Err(ConfigError::Setting(_))
            ),
            "{url}"
        );
    }
    assert!(matches!(
        builder()
            .certificate(TEST_CERT_URL, "not a certificate")
            .build(),
        Err(ConfigError::Invalid { .. })
    ));
    let sns = builder()
        .certificate(TEST_CERT_URL, TEST_CERT)
        .known_certificate_url(TEST_CERT_URL)
        .build()
        .unwrap();
    let shown = format!("{sns:?}");
    assert!(
        shown.contains("pinned_certificates: 1") && !shown.contains("BEGIN"),
        "{shown}"
    );
}

/// A pinned certificate verifies whatever allowed host or letter case the
/// message names, without a fetch.
#[tokio::test]
async fn a_pinned_certificate_is_never_fetched() {
    let fetcher = FakeFetcher::serving(&[]);
    let sns = Sns::builder(std::sync::Arc::clone(&fetcher))
        .topic_arn(TOPIC)
        .certificate(TEST_CERT_URL, TEST_CERT)
        .build()
        .unwrap();
    let shouted = TEST_CERT_URL.replace("sns.eu-west-1", "SNS.us-east-2");
    for cert_url in [TEST_CERT_URL, shouted.as_str()] {
        let body = Signer::from_pkcs8_der(TEST_KEY, cert_url)
            .unwrap()
            .sign(notification("m"), SignatureVersion::V1)
            .unwrap();
        assert!(verify(&sns, &body).await.is_ok(), "{cert_url}");
    }
    assert!(fetcher.fetched().is_empty());
}
