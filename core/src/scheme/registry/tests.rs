use std::time::{SystemTime, UNIX_EPOCH};

use super::*;
use crate::{MatchedKey, RequestHead, VerifyError};

/// A key each scheme accepts, and another of the same format.
fn keys(info: &SchemeInfo) -> [&'static str; 2] {
    match info.name {
        "standard-webhooks" => [
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
        ],
        "stripe" => ["whsec_one", "whsec_two"],
        "discord" | "sendgrid" => [
            "0707070707070707070707070707070707070707070707070707070707070707",
            "0909090909090909090909090909090909090909090909090909090909090909",
        ],
        "postmark" => ["user:one", "user:two"],
        _ => ["secret-one", "secret-two"],
    }
}

fn body(info: &SchemeInfo) -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    match info.content_type {
        FORM => "From=%2B15550001111&Body=hello".to_owned(),
        _ => format!(
            r#"{{"id":"evt_1","event_id":"e1","type":"hello","event":"hello","webhookTimestamp":{millis},"RecordType":"Delivery","MessageID":"m1","DeliveredAt":"2024-01-01T00:00:00Z"}}"#
        ),
    }
}

fn options() -> SchemeOptions {
    SchemeOptions::new().public_url(PublicUrl::base(TEST_ORIGIN).unwrap())
}

/// The verifier's keys for `key`: the public key of a key pair.
fn verifier_key(info: &SchemeInfo, key: &str) -> String {
    let signer = signer(info.name, key, &options()).unwrap();
    signer.public_key().unwrap_or(key).to_owned()
}

#[test]
fn every_scheme_signs_what_its_verifier_accepts() {
    let mut built = 0;
    for info in SCHEMES.iter().filter(|s| s.is_available()) {
        let [first, second] = keys(info);
        let signer = signer(info.name, second, &options()).unwrap();
        assert_eq!(signer.info().name, info.name);
        assert_eq!(signer.public_key().is_some(), info.key == KeyKind::KeyPair);
        let verifier_keys = [verifier_key(info, first), verifier_key(info, second)];
        let verifier = super::verifier(info.name, &verifier_keys, &options()).unwrap();
        assert_eq!(verifier.scheme(), info.name);
        let delivery = TestDelivery::new(body(info));
        let headers = signer.sign_test(&delivery).unwrap();
        if let Some(header) = info.signature_header {
            assert!(headers.contains_key(header), "{}: {header}", info.name);
        }
        let sent = signer.sign_test_body(&delivery).unwrap();
        let head = RequestHead::from_path_and_query("/webhooks", &headers);
        let verified = verifier
            .verify_head(head, &sent, SystemTime::now())
            .unwrap_or_else(|e| panic!("{}: {e}", info.name));
        let matched = match info.key {
            KeyKind::KeyPair => MatchedKey::PublicKey(1),
            KeyKind::Shared => MatchedKey::Secret(1),
        };
        assert_eq!(verified.matched_key, matched, "{}", info.name);
        // A verifier with the first key only refuses it.
        let other = super::verifier(info.name, &verifier_keys[..1], &options()).unwrap();
        let head = RequestHead::from_path_and_query("/webhooks", &headers);
        assert!(other.verify_head(head, &sent, SystemTime::now()).is_err());
        built += 1;
    }
    assert_eq!(
        built,
        SCHEMES.len() - usize::from(!cfg!(feature = "sendgrid"))
    );
}

#[test]
fn timestamped_schemes_refuse_a_stale_delivery() {
    for info in SCHEMES
        .iter()
        .filter(|s| s.is_available() && s.signs_timestamp)
    {
        if info.timestamp_field.is_some() {
            continue; // Linear: the body's timestamp, not the delivery's.
        }
        let key = keys(info)[0];
        let signer = signer(info.name, key, &options()).unwrap();
        let verifier = super::verifier(info.name, &[verifier_key(info, key)], &options()).unwrap();
        let stale = TestDelivery::new(body(info)).timestamp(1_000_000_000);
        let headers = signer.sign_test(&stale).unwrap();
        let sent = signer.sign_test_body(&stale).unwrap();
        let head = RequestHead::from_path_and_query("/webhooks", &headers);
        let err = verifier
            .verify_head(head, &sent, SystemTime::now())
            .unwrap_err();
        assert_eq!(err, VerifyError::TimestampTooOld, "{}", info.name);
    }
}

fn fails<T>(result: Result<T, RegistryError>) -> RegistryError {
    match result {
        Ok(_) => panic!("built"),
        Err(e) => e,
    }
}

#[test]
fn names_and_errors() {
    assert_eq!(find("standard").unwrap().name, "standard-webhooks");
    assert_eq!(find("Stripe").unwrap().name, "stripe");
    let err = find("whsec_secret_in_the_wrong_place").unwrap_err();
    assert!(!err.to_string().contains("whsec_secret"), "{err}");
    assert!(err.to_string().contains("stripe, github"), "{err}");
    let err = fails(verifier("stripe", &["sk_live_123"], &options()));
    let RegistryError::Config(config) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(err.to_string(), config.to_string());
    assert!(!err.to_string().contains("sk_live_123"));
    let err = fails(verifier("twilio", &["token"], &SchemeOptions::new()));
    assert!(err.to_string().contains("public URL"), "{err}");
    let err = fails(verifier("postmark", &["no-colon"], &options()));
    assert!(err.to_string().contains("user:password"), "{err}");
    let err = fails(signer("discord", "not-hex", &options()));
    assert!(err.to_string().contains("64 hex digits"), "{err}");
    let none: [&str; 0] = [];
    let err = fails(verifier("github", &none, &options()));
    assert_eq!(err, RegistryError::Config(ConfigError::NoKeys));
    let signer = signer("sendgrid", keys(&SCHEMES[0])[0], &options());
    if !cfg!(feature = "sendgrid") {
        assert!(matches!(signer, Err(RegistryError::Unavailable { .. })));
    }
}

#[test]
fn sns_signs_but_is_verified_by_its_own_builder() {
    assert_eq!(find("SNS").unwrap(), &SNS);
    assert!(!SCHEMES.contains(&SNS));
    assert!(find("nope").unwrap_err().to_string().ends_with(", sns"));
    if !cfg!(feature = "sns") {
        assert!(matches!(
            super::signer("sns", "key", &options()),
            Err(RegistryError::Unavailable { feature: "sns", .. })
        ));
        return;
    }
    let err = fails(verifier("sns", &["certificate"], &options()));
    assert_eq!(err, RegistryError::Asynchronous { scheme: "sns" });
    assert!(err.to_string().contains("scheme::Sns"), "{err}");
    let err = fails(super::signer("sns", "whsec_not_a_key", &options()));
    assert!(err.to_string().contains("PKCS#8 RSA"), "{err}");
    let der = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/sns/test-key.der"
    ))
    .unwrap();
    let key = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, der);
    let options = SchemeOptions::new()
        .certificate_url("https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-k.pem")
        .topic_arn("arn:aws:sns:eu-west-1:1:orders");
    let signer = super::signer("sns", &key, &options).unwrap();
    assert_eq!(signer.info().name, "sns");
    assert!(signer.public_key().is_none());
    let delivery = TestDelivery::new(r#"{"a":1}"#).id("m-7");
    let headers = signer.sign_test(&delivery).unwrap();
    assert_eq!(
        headers["x-amz-sns-topic-arn"],
        "arn:aws:sns:eu-west-1:1:orders"
    );
    assert_eq!(headers["content-type"], SNS.content_type);
    let body: serde_json::Value =
        serde_json::from_slice(&signer.sign_test_body(&delivery).unwrap()).unwrap();
    assert_eq!(body["MessageId"], "m-7");
    assert_eq!(body["Message"], r#"{"a":1}"#);
    assert_eq!(
        body["SigningCertURL"],
        "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-k.pem"
    );
}

#[test]
fn debug_hides_the_key() {
    let signer = signer("github", "github-secret-marker", &options()).unwrap();
    assert!(!format!("{signer:?}").contains("marker"));
}
