//! Mailchimp Transactional (Mandrill): the algorithm of
//! https://mailchimp.com/developer/transactional/guides/track-respond-activity-webhooks/#authenticating-webhook-requests
//! (base64 HMAC-SHA1 of the webhook URL, then each POST field sorted by
//! name as name and value) and its `mandrill_events` form field. Mailchimp
//! publishes no signed example, so the expected value was computed
//! independently with Python's `hmac` module:
//! `base64.b64encode(hmac.new(b"mandrill_webhook_key", url + "mandrill_events" + events, hashlib.sha1).digest())`.

use std::time::SystemTime;

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::Mandrill;
use webhooks_core::{MatchedKey, PublicUrl, RequestHead, Verifier, VerifyError};

const KEY: &str = "mandrill_webhook_key";
const URL: &str = "https://hooks.example.com/mandrill";
const BODY: &[u8] = b"mandrill_events=%5B%7B%22event%22%3A%22send%22%2C%22_id%22%3A%22exampleaaaaaaaaaaaaaaaaaaaaaaaaa%22%2C%22ts%22%3A1365109999%7D%5D";
const SIGNATURE: &str = "6zVcAxnGsi+yT5zb7OPqXPB560A=";

fn mandrill(keys: &[&str]) -> Mandrill {
    Mandrill::builder()
        .webhook_keys(keys)
        .public_url(PublicUrl::base("https://hooks.example.com").unwrap())
        .build()
        .unwrap()
}

fn sig(value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        "x-mandrill-signature",
        HeaderValue::from_str(value).unwrap(),
    );
    h
}

#[test]
fn vector_verifies_through_the_rebuilt_url() {
    let m = mandrill(&[KEY]);
    let headers = sig(SIGNATURE);
    let v = m
        .verify_head(
            RequestHead::new("/mandrill", &headers),
            BODY,
            SystemTime::now(),
        )
        .unwrap();
    assert_eq!((v.scheme, v.id), ("mandrill", None));
    assert_eq!(m.sign(URL, BODY).unwrap(), SIGNATURE);
    // Field order in the body does not matter: they are sorted.
    let two = b"b=2&a=1";
    let swapped = b"a=1&b=2";
    assert_eq!(m.sign(URL, two).unwrap(), m.sign(URL, swapped).unwrap());
}

#[test]
fn tampering_wrong_key_and_wrong_path_are_401() {
    let m = mandrill(&[KEY]);
    let now = SystemTime::now();
    let headers = sig(SIGNATURE);
    assert_eq!(
        m.verify_url(URL, &headers, b"mandrill_events=%5B%5D", now),
        Err(VerifyError::NoMatchingSignature)
    );
    assert_eq!(
        mandrill(&["other"]).verify_url(URL, &headers, BODY, now),
        Err(VerifyError::NoMatchingSignature)
    );
    assert_eq!(
        m.verify_head(RequestHead::new("/other", &headers), BODY, now),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn rotation_and_redaction() {
    let m = mandrill(&["new", KEY]);
    let v = m
        .verify_url(URL, &sig(SIGNATURE), BODY, SystemTime::now())
        .unwrap();
    assert_eq!(v.matched_key, MatchedKey::Secret(1));
    assert!(!format!("{m:?}").contains(KEY));
}

#[test]
fn missing_and_malformed_are_400() {
    let m = mandrill(&[KEY]);
    let now = SystemTime::now();
    assert_eq!(
        m.verify_url(URL, &HeaderMap::new(), BODY, now),
        Err(VerifyError::MissingHeader("x-mandrill-signature"))
    );
    assert_eq!(
        m.verify_url(URL, &sig("AAAA"), BODY, now)
            .unwrap_err()
            .status(),
        400
    );
    assert_eq!(
        m.verify_url(URL, &sig(SIGNATURE), b"a=%zz", now)
            .unwrap_err()
            .status(),
        400
    );
}
