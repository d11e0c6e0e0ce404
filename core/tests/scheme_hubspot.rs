//! HubSpot v3: the vector of HubSpot/hubspot-api-python
//! `tests/spec/utils/test_signature.py` (`test_get_signature__v3`), then the
//! window and the negatives.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::HubSpot;
use webhooks_core::{MatchedKey, PublicUrl, RequestHead, Verifier, VerifyError};

const SECRET: &str = "yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy";
const BODY: &[u8] = b"{'example_field':'example_value'}";
const URL: &str = "https://www.example.com/webhook_uri";
/// Milliseconds, as HubSpot sends them.
const TIMESTAMP_MS: u64 = 15_000_000;
const SIGNATURE: &str = "HPW73RUtKmcYoEDADG0s6MmGFWUzWJKAW07r8RDgcQw=";

fn hubspot(secrets: &[&str]) -> HubSpot {
    HubSpot::builder()
        .client_secrets(secrets)
        .public_url(PublicUrl::base("https://www.example.com").unwrap())
        .build()
        .unwrap()
}

fn headers(signature: &str, timestamp: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        "x-hubspot-signature-v3",
        HeaderValue::from_str(signature).unwrap(),
    );
    h.insert(
        "x-hubspot-request-timestamp",
        HeaderValue::from_str(timestamp).unwrap(),
    );
    h
}

/// The vector's own clock: 15 000 s after the epoch.
fn at_vector() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(TIMESTAMP_MS)
}

#[test]
fn sdk_vector_verifies_through_the_rebuilt_url() {
    let h = hubspot(&[SECRET]);
    let hs = headers(SIGNATURE, "15000000");
    let v = h
        .verify_head(RequestHead::new("/webhook_uri", &hs), BODY, at_vector())
        .unwrap();
    assert_eq!((v.scheme, v.timestamp), ("hubspot", Some(15_000)));
    assert_eq!(h.sign(URL, TIMESTAMP_MS, BODY), SIGNATURE);
}

#[test]
fn escapes_hubspot_decodes_are_decoded() {
    let h = hubspot(&[SECRET]);
    let encoded = "https://www.example.com/webhook_uri?a=%3A%40";
    let decoded = "https://www.example.com/webhook_uri?a=:@";
    let hs = h.sign_headers(decoded, TIMESTAMP_MS, BODY).unwrap();
    h.verify_url(encoded, &hs, BODY, at_vector()).unwrap();
}

#[test]
fn five_minute_window_either_side() {
    let h = hubspot(&[SECRET]);
    let hs = headers(SIGNATURE, "15000000");
    let late = at_vector() + Duration::from_secs(301);
    assert_eq!(
        h.verify_url(URL, &hs, BODY, late),
        Err(VerifyError::TimestampTooOld)
    );
    let early = at_vector() - Duration::from_secs(301);
    assert_eq!(
        h.verify_url(URL, &hs, BODY, early),
        Err(VerifyError::TimestampTooNew)
    );
    h.verify_url(URL, &hs, BODY, at_vector() + Duration::from_secs(300))
        .unwrap();
}

#[test]
fn tampering_wrong_secret_and_replayed_timestamp_are_401() {
    let h = hubspot(&[SECRET]);
    let now = at_vector();
    let hs = headers(SIGNATURE, "15000000");
    assert_eq!(
        h.verify_url(URL, &hs, b"{'example_field':'other'}", now),
        Err(VerifyError::NoMatchingSignature)
    );
    assert_eq!(
        hubspot(&["zzz"]).verify_url(URL, &hs, BODY, now),
        Err(VerifyError::NoMatchingSignature)
    );
    // A fresh timestamp on an old signature: the timestamp is signed.
    let moved = headers(SIGNATURE, "15000001");
    assert_eq!(
        h.verify_url(URL, &moved, BODY, now),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn rotation_and_redaction() {
    let h = hubspot(&["new", SECRET]);
    let v = h
        .verify_url(URL, &headers(SIGNATURE, "15000000"), BODY, at_vector())
        .unwrap();
    assert_eq!(v.matched_key, MatchedKey::Secret(1));
    assert!(!format!("{h:?}").contains("yyyy"));
}

#[test]
fn missing_and_malformed_are_400() {
    let h = hubspot(&[SECRET]);
    let now = at_vector();
    let mut only_sig = HeaderMap::new();
    only_sig.insert("x-hubspot-signature-v3", SIGNATURE.parse().unwrap());
    assert_eq!(
        h.verify_url(URL, &only_sig, BODY, now),
        Err(VerifyError::MissingHeader("x-hubspot-request-timestamp"))
    );
    assert_eq!(
        h.verify_url(URL, &HeaderMap::new(), BODY, now),
        Err(VerifyError::MissingHeader("x-hubspot-signature-v3"))
    );
    assert_eq!(
        h.verify_url(URL, &headers("nope!", "15000000"), BODY, now)
            .unwrap_err()
            .status(),
        400
    );
    assert_eq!(
        h.verify_url(URL, &headers(SIGNATURE, "15e6"), BODY, now)
            .unwrap_err()
            .status(),
        400
    );
}
