//! Intercom: the header and algorithm of
//! https://developers.intercom.com/docs/webhooks/webhook-notifications#signed-notifications
//! (`X-Hub-Signature: sha1=` hex HMAC-SHA1 of the body with the client
//! secret) and the shape of its `ping` notification. Intercom publishes no
//! signed example, so the expected value was computed independently with
//! Python's `hmac` module:
//! `hmac.new(b"intercom_client_secret", body, hashlib.sha1).hexdigest()`.

use std::time::SystemTime;

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::Intercom;
use webhooks_core::{MatchedKey, Verifier, VerifyError};

const SECRET: &str = "intercom_client_secret";
const BODY: &str = r#"{"type":"notification_event","app_id":"abc123","data":{"type":"notification_event_data","item":{"type":"ping","message":"something something interzen"}},"links":{},"id":"notif_123","topic":"ping","delivery_status":null,"delivery_attempts":1,"delivered_at":0,"first_sent_at":1700000000,"created_at":1700000000,"self":null}"#;
const SIGNATURE: &str = "sha1=7d4585674abada2e82e8e8ba044e3dd6a7c806de";

fn sig(value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("x-hub-signature", HeaderValue::from_str(value).unwrap());
    h
}

#[test]
fn vector_verifies_with_id_and_topic() {
    let i = Intercom::new(SECRET).unwrap();
    let v = i
        .verify(&sig(SIGNATURE), BODY.as_bytes(), SystemTime::now())
        .unwrap();
    assert_eq!(v.id.as_deref(), Some("notif_123"));
    assert_eq!(v.event_type.as_deref(), Some("ping"));
    assert_eq!((v.scheme, v.timestamp), ("intercom", None));
    assert_eq!(i.sign(BODY.as_bytes()), SIGNATURE);
}

#[test]
fn tampering_and_wrong_secret_are_401() {
    let i = Intercom::new(SECRET).unwrap();
    let now = SystemTime::now();
    assert_eq!(
        i.verify(
            &sig(SIGNATURE),
            BODY.replace("ping", "pong").as_bytes(),
            now
        ),
        Err(VerifyError::NoMatchingSignature)
    );
    assert_eq!(
        Intercom::new("other")
            .unwrap()
            .verify(&sig(SIGNATURE), BODY.as_bytes(), now),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn rotation_and_redaction() {
    let i = Intercom::builder()
        .secrets(["new", SECRET])
        .build()
        .unwrap();
    let v = i
        .verify(&sig(SIGNATURE), BODY.as_bytes(), SystemTime::now())
        .unwrap();
    assert_eq!(v.matched_key, MatchedKey::Secret(1));
    assert!(!format!("{i:?}").contains(SECRET));
}

#[test]
fn missing_and_malformed_are_400() {
    let i = Intercom::new(SECRET).unwrap();
    let now = SystemTime::now();
    assert_eq!(
        i.verify(&HeaderMap::new(), BODY.as_bytes(), now),
        Err(VerifyError::MissingHeader("x-hub-signature"))
    );
    for bad in [
        &SIGNATURE[5..],
        "sha256=7d4585674abada2e82e8e8ba044e3dd6a7c806de",
        "sha1=7d45",
    ] {
        assert_eq!(
            i.verify(&sig(bad), BODY.as_bytes(), now)
                .unwrap_err()
                .status(),
            400,
            "{bad}"
        );
    }
}
