//! Square: the example of developer.squareup.com/docs/webhooks/step3validate
//! (signature key `asdf1234`, URL `https://example.com/webhook`, body
//! `{"hello":"world"}`), then the negatives.

use std::time::SystemTime;

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::Square;
use webhooks_core::{MatchedKey, PublicUrl, RequestHead, Verifier, VerifyError};

const KEY: &str = "asdf1234";
const URL: &str = "https://example.com/webhook";
const BODY: &[u8] = br#"{"hello":"world"}"#;
const SIGNATURE: &str = "2kRE5qRU2tR+tBGlDwMEw2avJ7QM4ikPYD/PJ3bd9Og=";

fn square(keys: &[&str]) -> Square {
    Square::builder()
        .signature_keys(keys)
        .public_url(PublicUrl::exact(URL).unwrap())
        .build()
        .unwrap()
}

fn sig(value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        "x-square-hmacsha256-signature",
        HeaderValue::from_str(value).unwrap(),
    );
    h
}

#[test]
fn documented_example_verifies() {
    let s = square(&[KEY]);
    let v = s.verify(&sig(SIGNATURE), BODY, SystemTime::now()).unwrap();
    assert_eq!((v.scheme, v.id, v.timestamp), ("square", None, None));
    assert_eq!(s.sign(URL, BODY), SIGNATURE);
    // With a base URL the request path completes it.
    let based = Square::builder()
        .signature_key(KEY)
        .public_url(PublicUrl::base("https://example.com").unwrap())
        .build()
        .unwrap();
    let headers = sig(SIGNATURE);
    let head = RequestHead::new("/webhook", &headers);
    based.verify_head(head, BODY, SystemTime::now()).unwrap();
}

#[test]
fn event_id_and_type_come_from_the_body() {
    let s = square(&[KEY]);
    let body = br#"{"merchant_id":"6SSW7HV8K2ST5","type":"payment.created","event_id":"13b867cf-db3d-4b1c-90b6-2f32a9d78124","data":{}}"#;
    let v = s
        .verify(&s.sign_headers(URL, body).unwrap(), body, SystemTime::now())
        .unwrap();
    assert_eq!(
        v.id.as_deref(),
        Some("13b867cf-db3d-4b1c-90b6-2f32a9d78124")
    );
    assert_eq!(v.event_type.as_deref(), Some("payment.created"));
}

#[test]
fn tampering_wrong_key_and_wrong_url_are_401() {
    let s = square(&[KEY]);
    let now = SystemTime::now();
    assert_eq!(
        s.verify(&sig(SIGNATURE), br#"{"hello":"world "}"#, now),
        Err(VerifyError::NoMatchingSignature)
    );
    assert_eq!(
        square(&["other"]).verify(&sig(SIGNATURE), BODY, now),
        Err(VerifyError::NoMatchingSignature)
    );
    assert_eq!(
        s.verify_url("https://example.com/webhook2", &sig(SIGNATURE), BODY, now),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn rotation_and_redaction() {
    let s = square(&["new-key", KEY]);
    let v = s.verify(&sig(SIGNATURE), BODY, SystemTime::now()).unwrap();
    assert_eq!(v.matched_key, MatchedKey::Secret(1));
    assert!(!format!("{s:?}").contains(KEY));
}

#[test]
fn missing_and_malformed_are_400() {
    let s = square(&[KEY]);
    let now = SystemTime::now();
    assert_eq!(
        s.verify(&HeaderMap::new(), BODY, now),
        Err(VerifyError::MissingHeader("x-square-hmacsha256-signature"))
    );
    for bad in ["%%%", "AAAA", "2kRE5qRU2tR+tBGlDwMEw2avJ7QM4ikPYD/PJ3bd9Og"] {
        assert_eq!(
            s.verify(&sig(bad), BODY, now).unwrap_err().status(),
            400,
            "{bad}"
        );
    }
}
