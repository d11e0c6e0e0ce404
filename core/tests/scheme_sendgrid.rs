//! The SendGrid scheme on the vectors of SendGrid's own libraries (cited
//! above the constants), then every rule one test at a time.
#![cfg(feature = "sendgrid")]

use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::SendGrid;
use webhooks_core::scheme::sendgrid::Signer;
use webhooks_core::{ConfigError, MatchedKey, Verifier, VerifyError};

const SIGNATURE: &str = "x-twilio-email-event-webhook-signature";
const TIMESTAMP: &str = "x-twilio-email-event-webhook-timestamp";

/// sendgrid/sendgrid-nodejs `packages/eventwebhook/src/eventwebhook.spec.js`:
/// `PAYLOAD` is `JSON.stringify({category: 'example_payload', event:
/// 'test_event', message_id: 'message_id'})`.
mod nodejs {
    pub(crate) const PUBLIC_KEY: &str = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA==";
    pub(crate) const SIGNATURE: &str = "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0=";
    /// "should reject for bad signature": one digit changed.
    pub(crate) const BAD_SIGNATURE: &str = "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH3j/0=";
    /// "should reject for invalid key".
    pub(crate) const OTHER_KEY: &str = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEqTxd43gyp8IOEto2LdIfjRQrIbsd4SXZkLW6jDutdhXSJCWHw8REntlo7aNDthvj+y7GjUuFDb/R1NGe1OPzpA==";
    pub(crate) const TIMESTAMP: &str = "1588788367";
    pub(crate) const PAYLOAD: &[u8] =
        br#"{"category":"example_payload","event":"test_event","message_id":"message_id"}"#;
}

/// sendgrid/sendgrid-python `test/unit/test_eventwebhook.py`: `PAYLOAD` is
/// `json.dumps([...], sort_keys=True, separators=(',', ':')) + '\r\n'`.
mod python {
    pub(crate) const PUBLIC_KEY: &str = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g==";
    pub(crate) const SIGNATURE: &str = "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM=";
    pub(crate) const TIMESTAMP: &str = "1600112502";
    pub(crate) const PAYLOAD: &[u8] = b"[{\"email\":\"hello@world.com\",\"event\":\"dropped\",\"reason\":\"Bounced Address\",\"sg_event_id\":\"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA\",\"sg_message_id\":\"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0\",\"smtp-id\":\"<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>\",\"timestamp\":1600112492}]\r\n";
}

fn at(ts: &str) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(ts.parse().unwrap())
}

fn headers(signature: &str, timestamp: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(SIGNATURE, HeaderValue::from_str(signature).unwrap());
    h.insert(TIMESTAMP, HeaderValue::from_str(timestamp).unwrap());
    h
}

fn rotating() -> SendGrid {
    SendGrid::builder()
        .public_key(python::PUBLIC_KEY)
        .public_key(nodejs::PUBLIC_KEY)
        .build()
        .unwrap()
}

#[test]
fn sdk_vectors_verify_with_either_key() {
    let sendgrid = rotating();
    let node = headers(nodejs::SIGNATURE, nodejs::TIMESTAMP);
    let v = sendgrid
        .verify(&node, nodejs::PAYLOAD, at(nodejs::TIMESTAMP))
        .unwrap();
    assert_eq!(
        (v.scheme, v.matched_key, v.timestamp),
        ("sendgrid", MatchedKey::PublicKey(1), Some(1_588_788_367))
    );
    // A single object, not a batch: no common event type.
    assert_eq!(v.event_type, None);
    let py = headers(python::SIGNATURE, python::TIMESTAMP);
    let v = sendgrid
        .verify(&py, python::PAYLOAD, at(python::TIMESTAMP))
        .unwrap();
    assert_eq!(v.matched_key, MatchedKey::PublicKey(0));
    assert_eq!(v.event_type.as_deref(), Some("dropped"));
    let id = v.id.unwrap();
    assert!(id.starts_with("sha256:") && id.len() == 7 + 64, "{id}");
}

#[test]
fn sdk_negatives_are_refused() {
    let sendgrid = SendGrid::new(nodejs::PUBLIC_KEY).unwrap();
    let now = at(nodejs::TIMESTAMP);
    // "should reject for bad payload".
    let h = headers(nodejs::SIGNATURE, nodejs::TIMESTAMP);
    assert_eq!(
        sendgrid.verify(&h, b"payload", now),
        Err(VerifyError::NoMatchingSignature)
    );
    // "should reject for bad signature".
    let h = headers(nodejs::BAD_SIGNATURE, nodejs::TIMESTAMP);
    assert_eq!(
        sendgrid.verify(&h, nodejs::PAYLOAD, now),
        Err(VerifyError::NoMatchingSignature)
    );
    // "should reject for invalid key".
    let other = SendGrid::new(nodejs::OTHER_KEY).unwrap();
    let h = headers(nodejs::SIGNATURE, nodejs::TIMESTAMP);
    let err = other.verify(&h, nodejs::PAYLOAD, now).unwrap_err();
    assert_eq!(
        (err.clone(), err.status().as_u16()),
        (VerifyError::NoMatchingSignature, 401)
    );
    // "should reject for bad timestamp": not even a number here, so a 400.
    let h = headers(nodejs::SIGNATURE, "timestamp");
    let err = sendgrid.verify(&h, nodejs::PAYLOAD, now).unwrap_err();
    assert_eq!(err.status(), 400, "{err}");
    // A different, well-formed timestamp under the same signature.
    let h = headers(nodejs::SIGNATURE, "1588788368");
    assert_eq!(
        sendgrid.verify(&h, nodejs::PAYLOAD, now),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn stale_and_future_timestamps_are_401() {
    let sendgrid = SendGrid::new(nodejs::PUBLIC_KEY).unwrap();
    let h = headers(nodejs::SIGNATURE, nodejs::TIMESTAMP);
    let ts = at(nodejs::TIMESTAMP);
    let edge = Duration::from_secs(300);
    assert!(sendgrid.verify(&h, nodejs::PAYLOAD, ts + edge).is_ok());
    assert!(sendgrid.verify(&h, nodejs::PAYLOAD, ts - edge).is_ok());
    let err = sendgrid
        .verify(&h, nodejs::PAYLOAD, ts + edge + Duration::from_secs(1))
        .unwrap_err();
    assert_eq!(
        (err.clone(), err.status().as_u16()),
        (VerifyError::TimestampTooOld, 401)
    );
    assert_eq!(
        sendgrid.verify(&h, nodejs::PAYLOAD, ts - edge - Duration::from_secs(1)),
        Err(VerifyError::TimestampTooNew)
    );
    let wide = SendGrid::builder()
        .public_key(nodejs::PUBLIC_KEY)
        .tolerance(Duration::from_secs(3600))
        .build()
        .unwrap();
    assert!(
        wide.verify(&h, nodejs::PAYLOAD, ts + Duration::from_secs(3600))
            .is_ok()
    );
}

#[test]
fn missing_headers_are_400() {
    let sendgrid = SendGrid::new(nodejs::PUBLIC_KEY).unwrap();
    let now = at(nodejs::TIMESTAMP);
    let mut h = headers(nodejs::SIGNATURE, nodejs::TIMESTAMP);
    h.remove(SIGNATURE);
    let err = sendgrid.verify(&h, nodejs::PAYLOAD, now).unwrap_err();
    assert_eq!(err, VerifyError::MissingHeader(SIGNATURE));
    assert_eq!(err.status(), 400);
    let mut h = headers(nodejs::SIGNATURE, nodejs::TIMESTAMP);
    h.remove(TIMESTAMP);
    assert_eq!(
        sendgrid.verify(&h, nodejs::PAYLOAD, now),
        Err(VerifyError::MissingHeader(TIMESTAMP))
    );
}

#[test]
fn malformed_headers_are_400() {
    let sendgrid = SendGrid::new(nodejs::PUBLIC_KEY).unwrap();
    let now = at(nodejs::TIMESTAMP);
    for (signature, timestamp) in [
        ("not base64!", nodejs::TIMESTAMP),
        // Base64, but not a DER signature.
        ("AAAA", nodejs::TIMESTAMP),
        (&"A".repeat(200), nodejs::TIMESTAMP),
        (nodejs::SIGNATURE, "-1"),
        (nodejs::SIGNATURE, "1.5"),
        (nodejs::SIGNATURE, "99999999999999999999999"),
    ] {
        let err = sendgrid
            .verify(&headers(signature, timestamp), nodejs::PAYLOAD, now)
            .unwrap_err();
        assert!(
            matches!(err, VerifyError::MalformedHeader { .. }),
            "{signature:?} {timestamp:?}: {err:?}"
        );
        assert_eq!(err.status(), 400);
    }
}

#[test]
fn signer_round_trips_and_tampering_is_caught() {
    let signer = Signer::from_bytes(&[0x42; 32]).unwrap();
    let sendgrid = SendGrid::builder()
        .public_key(nodejs::PUBLIC_KEY)
        .public_key(signer.public_key())
        .build()
        .unwrap();
    let body = br#"[{"event":"open","sg_event_id":"a"},{"event":"open","sg_event_id":"b"}]"#;
    let h = signer.sign_headers(1_700_000_000, body).unwrap();
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let v = sendgrid.verify(&h, body, now).unwrap();
    assert_eq!(v.matched_key, MatchedKey::PublicKey(1));
    assert_eq!(v.event_type.as_deref(), Some("open"));
    // The same batch again has the same id (a retry is deduplicated).
    let again = signer.sign_headers(1_700_000_010, body).unwrap();
    assert_eq!(sendgrid.verify(&again, body, now).unwrap().id, v.id);
    let mut tampered = body.to_vec();
    tampered[10] ^= 1;
    assert_eq!(
        sendgrid.verify(&h, &tampered, now),
        Err(VerifyError::NoMatchingSignature)
    );
    // Signed by a key that is not configured.
    let stranger = Signer::from_bytes(&[0x24; 32]).unwrap();
    let h = stranger.sign_headers(1_700_000_000, body).unwrap();
    assert_eq!(
        sendgrid.verify(&h, body, now),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn configuration_errors_and_redacted_debug() {
    assert_eq!(
        SendGrid::builder().build().unwrap_err(),
        ConfigError::NoKeys
    );
    assert_eq!(
        SendGrid::new("").unwrap_err(),
        ConfigError::Empty("public key")
    );
    assert!(matches!(
        SendGrid::new("bm90IGEga2V5").unwrap_err(),
        ConfigError::Invalid { .. }
    ));
    // The first error is kept even after a good key.
    assert!(
        SendGrid::builder()
            .public_key("!!")
            .public_key(nodejs::PUBLIC_KEY)
            .build()
            .is_err()
    );
    let shown = format!("{:?}", rotating());
    assert_eq!(shown, "SendGrid { public_keys: 2, tolerance: 300s }");
    let signer = Signer::from_bytes(&[0x42; 32]).unwrap();
    assert_eq!(format!("{signer:?}"), "Signer([redacted])");
    assert!(Signer::from_bytes(&[0; 32]).is_err());
}
