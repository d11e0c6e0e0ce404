//! Typeform: the header and algorithm of
//! https://www.typeform.com/developers/webhooks/secure-your-webhooks/
//! (`Typeform-Signature: sha256=` base64 HMAC-SHA256 of the body). Typeform
//! publishes no signed example, so the expected value was computed
//! independently with Python's `hmac` module:
//! `base64.b64encode(hmac.new(b"test_secret", body, hashlib.sha256).digest())`.

use std::time::SystemTime;

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::Typeform;
use webhooks_core::{MatchedKey, Verifier, VerifyError};

const SECRET: &str = "test_secret";
const BODY: &str = r#"{"event_id":"01ARZ3NDEKTSV4RRFFQ69G5FAV","event_type":"form_response","form_response":{"form_id":"lT4Z3j"}}"#;
const SIGNATURE: &str = "sha256=TqLtw/h970pirs8CtFVuPdWVlEmPXSiT0eCI/u2ReNk=";

fn sig(value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("typeform-signature", HeaderValue::from_str(value).unwrap());
    h
}

#[test]
fn vector_verifies_with_event_id_and_type() {
    let t = Typeform::new(SECRET).unwrap();
    let v = t
        .verify(&sig(SIGNATURE), BODY.as_bytes(), SystemTime::now())
        .unwrap();
    assert_eq!(v.id.as_deref(), Some("01ARZ3NDEKTSV4RRFFQ69G5FAV"));
    assert_eq!(v.event_type.as_deref(), Some("form_response"));
    assert_eq!(t.sign(BODY.as_bytes()), SIGNATURE);
}

#[test]
fn tampering_and_wrong_secret_are_401() {
    let t = Typeform::new(SECRET).unwrap();
    let now = SystemTime::now();
    assert_eq!(
        t.verify(
            &sig(SIGNATURE),
            BODY.replace("lT4Z3j", "xxxxxx").as_bytes(),
            now
        ),
        Err(VerifyError::NoMatchingSignature)
    );
    assert_eq!(
        Typeform::new("other")
            .unwrap()
            .verify(&sig(SIGNATURE), BODY.as_bytes(), now),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn rotation_and_redaction() {
    let t = Typeform::builder()
        .secrets(["new", SECRET])
        .build()
        .unwrap();
    let v = t
        .verify(&sig(SIGNATURE), BODY.as_bytes(), SystemTime::now())
        .unwrap();
    assert_eq!(v.matched_key, MatchedKey::Secret(1));
    assert!(!format!("{t:?}").contains(SECRET));
}

#[test]
fn missing_and_malformed_are_400() {
    let t = Typeform::new(SECRET).unwrap();
    let now = SystemTime::now();
    assert_eq!(
        t.verify(&HeaderMap::new(), BODY.as_bytes(), now),
        Err(VerifyError::MissingHeader("typeform-signature"))
    );
    for bad in [&SIGNATURE[7..], "sha256=!!!", "sha256=AAAA"] {
        assert_eq!(
            t.verify(&sig(bad), BODY.as_bytes(), now)
                .unwrap_err()
                .status(),
            400,
            "{bad}"
        );
    }
}
