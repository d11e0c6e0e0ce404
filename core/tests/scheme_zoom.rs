//! Zoom: the request format and the URL-validation example body of
//! https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events and
//! #validate-your-webhook-endpoint. Zoom publishes no signature for its
//! examples, so the expected values were computed independently with
//! Python's `hmac` module:
//! `"v0=" + hmac.new(b"zoom_secret_token", b"v0:1658940994:" + body, hashlib.sha256).hexdigest()`
//! and, for the challenge, `hmac.new(b"secretValueTest", b"qgg8vlvZRS6UYooatFL8Aw", hashlib.sha256).hexdigest()`.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::Zoom;
use webhooks_core::{MatchedKey, Verifier, VerifyError};

const SECRET: &str = "zoom_secret_token";
const TS: u64 = 1_658_940_994;
const BODY: &str = r#"{"event":"meeting.started","payload":{"account_id":"AAAAAABBBB","object":{"id":"1234567890"}},"event_ts":1658940994000}"#;
const SIGNATURE: &str = "v0=df004c7f187f5f03bbde1c9230279f6c07d9269128ad086c1cae7e9946ec5483";
/// The docs' example challenge body.
const CHALLENGE: &str = r#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#;
const ENCRYPTED: &str = "70c1f2e2e6ca2d39297490d1f9142c7d701415ea8e6151f6562a08fa657a40ff";

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

fn headers(signature: &str, ts: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("x-zm-signature", HeaderValue::from_str(signature).unwrap());
    h.insert("x-zm-request-timestamp", HeaderValue::from_str(ts).unwrap());
    h
}

#[test]
fn vector_verifies_with_the_event_type() {
    let z = Zoom::new(SECRET).unwrap();
    let v = z
        .verify(&headers(SIGNATURE, "1658940994"), BODY.as_bytes(), at(TS))
        .unwrap();
    assert_eq!(v.event_type.as_deref(), Some("meeting.started"));
    assert_eq!((v.scheme, v.timestamp, v.id), ("zoom", Some(TS), None));
    assert_eq!(z.sign(TS, BODY.as_bytes()), SIGNATURE);
}

#[test]
fn url_validation_challenge_is_answered() {
    let z = Zoom::new("secretValueTest").unwrap();
    let signed = |body: &[u8]| z.sign_headers(TS, body).unwrap();
    let h = signed(CHALLENGE.as_bytes());
    let answer = z
        .url_validation_response(&h, CHALLENGE.as_bytes(), at(TS))
        .unwrap()
        .unwrap();
    assert_eq!(
        answer,
        format!(r#"{{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"{ENCRYPTED}"}}"#)
    );
    let h = signed(BODY.as_bytes());
    assert_eq!(
        z.url_validation_response(&h, BODY.as_bytes(), at(TS)),
        Ok(None)
    );
    let h = signed(b"not json");
    assert_eq!(z.url_validation_response(&h, b"not json", at(TS)), Ok(None));
}

/// An unverified challenge gets no answer: the answer is the secret's HMAC
/// of a token the sender chose, which would let a forger learn signatures.
#[test]
fn forged_url_validation_is_not_answered() {
    let z = Zoom::new("secretValueTest").unwrap();
    let forged = headers(SIGNATURE, &TS.to_string());
    assert_eq!(
        z.url_validation_response(&forged, CHALLENGE.as_bytes(), at(TS)),
        Err(VerifyError::NoMatchingSignature)
    );
    assert!(
        z.url_validation_response(&HeaderMap::new(), CHALLENGE.as_bytes(), at(TS))
            .is_err()
    );
}

#[test]
fn stale_tampered_and_wrong_secret_are_401() {
    let z = Zoom::new(SECRET).unwrap();
    let h = headers(SIGNATURE, "1658940994");
    assert_eq!(
        z.verify(&h, BODY.as_bytes(), at(TS + 301)),
        Err(VerifyError::TimestampTooOld)
    );
    assert_eq!(
        z.verify(&h, BODY.as_bytes(), at(TS - 301)),
        Err(VerifyError::TimestampTooNew)
    );
    assert_eq!(
        z.verify(&h, BODY.replace("started", "ended").as_bytes(), at(TS)),
        Err(VerifyError::NoMatchingSignature)
    );
    assert_eq!(
        Zoom::new("other")
            .unwrap()
            .verify(&h, BODY.as_bytes(), at(TS)),
        Err(VerifyError::NoMatchingSignature)
    );
    let moved = headers(SIGNATURE, "1658940995");
    assert_eq!(
        z.verify(&moved, BODY.as_bytes(), at(TS)),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn rotation_and_redaction() {
    let z = Zoom::builder().secrets(["new", SECRET]).build().unwrap();
    let v = z
        .verify(&headers(SIGNATURE, "1658940994"), BODY.as_bytes(), at(TS))
        .unwrap();
    assert_eq!(v.matched_key, MatchedKey::Secret(1));
    assert!(!format!("{z:?}").contains(SECRET));
}

#[test]
fn missing_and_malformed_are_400() {
    let z = Zoom::new(SECRET).unwrap();
    assert_eq!(
        z.verify(&HeaderMap::new(), BODY.as_bytes(), at(TS)),
        Err(VerifyError::MissingHeader("x-zm-signature"))
    );
    let mut no_ts = HeaderMap::new();
    no_ts.insert("x-zm-signature", SIGNATURE.parse().unwrap());
    assert_eq!(
        z.verify(&no_ts, BODY.as_bytes(), at(TS)),
        Err(VerifyError::MissingHeader("x-zm-request-timestamp"))
    );
    for (sig, ts) in [
        ("df00", "1658940994"),
        (&SIGNATURE[3..], "1658940994"),
        (SIGNATURE, "soon"),
    ] {
        assert_eq!(
            z.verify(&headers(sig, ts), BODY.as_bytes(), at(TS))
                .unwrap_err()
                .status(),
            400
        );
    }
}
