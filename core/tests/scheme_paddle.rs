//! Paddle Billing: the vector of PaddleHQ/paddle-python-sdk
//! `tests/Unit/Notification/test_Verifier.py`
//! (`test_validate_paddle_signature_header_integrity`: three secrets, the
//! third matches; a `h1=dummy` is skipped), then the window and negatives.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::Paddle;
use webhooks_core::{MatchedKey, Verifier, VerifyError};

const HEADER: &str =
    "ts=1696195954;h1=dummy;h1=d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02";
const BODY: &[u8] = b"hello-world";
const SECRETS: [&str; 3] = [
    "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_TjIG2BXbm83HPXqNfziwe506sBEdqL/4",
    "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_vB/yIOnTOCWIvpBadM5jzBZPHc7OmdSo",
    "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_WvRO0eL4Bj9rgYYIBZY6wZhG4EHy9jzh",
];
const TS: u64 = 1_696_195_954;

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

fn sig(value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("paddle-signature", HeaderValue::from_str(value).unwrap());
    h
}

fn paddle() -> Paddle {
    Paddle::builder().secrets(SECRETS).build().unwrap()
}

#[test]
fn sdk_vector_verifies_with_the_third_secret() {
    let v = paddle().verify(&sig(HEADER), BODY, at(TS)).unwrap();
    assert_eq!(v.matched_key, MatchedKey::Secret(2));
    assert_eq!((v.scheme, v.timestamp), ("paddle", Some(TS)));
    let only = Paddle::new(SECRETS[2]).unwrap();
    assert_eq!(
        only.sign(TS, BODY),
        "ts=1696195954;h1=d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02"
    );
}

#[test]
fn five_second_default_window() {
    let p = paddle();
    p.verify(&sig(HEADER), BODY, at(TS + 5)).unwrap();
    assert_eq!(
        p.verify(&sig(HEADER), BODY, at(TS + 6)),
        Err(VerifyError::TimestampTooOld)
    );
    assert_eq!(
        p.verify(&sig(HEADER), BODY, at(TS - 6)),
        Err(VerifyError::TimestampTooNew)
    );
    let wide = Paddle::builder()
        .secret(SECRETS[2])
        .tolerance(Duration::from_secs(60))
        .build()
        .unwrap();
    wide.verify(&sig(HEADER), BODY, at(TS + 60)).unwrap();
}

#[test]
fn tampering_wrong_secret_and_moved_timestamp_are_401() {
    let p = paddle();
    assert_eq!(
        p.verify(&sig(HEADER), b"hello-world!", at(TS)),
        Err(VerifyError::NoMatchingSignature)
    );
    let wrong = Paddle::builder().secrets(&SECRETS[..2]).build().unwrap();
    assert_eq!(
        wrong.verify(&sig(HEADER), BODY, at(TS)),
        Err(VerifyError::NoMatchingSignature)
    );
    let moved = HEADER.replace("1696195954", "1696195955");
    assert_eq!(
        p.verify(&sig(&moved), BODY, at(TS)),
        Err(VerifyError::NoMatchingSignature)
    );
    // Only undecodable h1: nothing can match.
    assert_eq!(
        p.verify(&sig("ts=1696195954;h1=dummy"), BODY, at(TS)),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn event_id_and_type_come_from_the_body() {
    let p = Paddle::new(SECRETS[0]).unwrap();
    let body = br#"{"event_id":"evt_01hv8x2acma2gz","event_type":"subscription.created","occurred_at":"2024-04-12T10:18:49Z","data":{}}"#;
    let v = p
        .verify(&p.sign_headers(TS, body).unwrap(), body, at(TS))
        .unwrap();
    assert_eq!(v.id.as_deref(), Some("evt_01hv8x2acma2gz"));
    assert_eq!(v.event_type.as_deref(), Some("subscription.created"));
    assert!(!format!("{p:?}").contains("pdl_ntf"));
}

#[test]
fn missing_and_malformed_are_400() {
    let p = paddle();
    assert_eq!(
        p.verify(&HeaderMap::new(), BODY, at(TS)),
        Err(VerifyError::MissingHeader("paddle-signature"))
    );
    for bad in [
        "h1=d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02",
        "ts=1696195954",
        "ts=soon;h1=aa",
        "ts=1;ts=2;h1=aa",
        "garbage",
    ] {
        assert_eq!(
            p.verify(&sig(bad), BODY, at(TS)).unwrap_err().status(),
            400,
            "{bad}"
        );
    }
}
