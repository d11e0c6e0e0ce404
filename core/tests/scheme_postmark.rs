//! The Postmark scheme: HTTP Basic credentials, checked on RFC 7617's own
//! example, with the body fields Postmark's webhook documentation names
//! (<https://postmarkapp.com/developer/webhooks/webhooks-overview>, the
//! delivery, bounce and open webhook pages), then every rule one at a time.
//!
//! Postmark signs nothing and sends no timestamp: there is no stale-request
//! case to test; a replay is refused by deduplication on the id.

use std::time::SystemTime;

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::Postmark;
use webhooks_core::{ConfigError, MatchedKey, Verifier, VerifyError};

/// RFC 7617 section 2: user `Aladdin`, password `open sesame`.
const RFC7617_USER: &str = "Aladdin";
const RFC7617_PASSWORD: &str = "open sesame";
const RFC7617_AUTHORIZATION: &str = "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==";

/// A delivery webhook body with the fields Postmark documents.
const DELIVERY: &[u8] = br#"{"RecordType":"Delivery","ServerID":23,"MessageStream":"outbound","MessageID":"883953f4-6105-42a2-a16a-77a8eac79483","Recipient":"john@example.com","Tag":"welcome-email","DeliveredAt":"2019-11-05T16:33:54.9070259Z","Details":"Test delivery webhook details","Metadata":{"a_key":"a_value"}}"#;

fn auth(value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("authorization", HeaderValue::from_str(value).unwrap());
    h
}

fn rotating() -> Postmark {
    Postmark::builder()
        .credential("postmark-hooks", "a-new-long-random-password")
        .credential(RFC7617_USER, RFC7617_PASSWORD)
        .build()
        .unwrap()
}

#[test]
fn rfc7617_credentials_verify_and_sign() {
    let v = rotating()
        .verify(&auth(RFC7617_AUTHORIZATION), DELIVERY, SystemTime::now())
        .unwrap();
    assert_eq!(v.scheme, "postmark");
    assert_eq!(v.matched_key, MatchedKey::Secret(1));
    assert_eq!(v.event_type.as_deref(), Some("Delivery"));
    assert_eq!(
        v.id.as_deref(),
        Some("Delivery:883953f4-6105-42a2-a16a-77a8eac79483:2019-11-05T16:33:54.9070259Z")
    );
    assert_eq!(v.timestamp, None);
    let single = Postmark::new(RFC7617_USER, RFC7617_PASSWORD).unwrap();
    assert_eq!(single.sign(), RFC7617_AUTHORIZATION);
    assert_eq!(
        single.sign_headers().unwrap().get("authorization").unwrap(),
        RFC7617_AUTHORIZATION
    );
}

#[test]
fn wrong_user_or_password_is_401() {
    let postmark = rotating();
    for (user, password) in [
        ("Aladdin", "open sesame!"),
        ("aladdin", "open sesame"),
        ("Aladdin", ""),
        ("", "open sesame"),
        // The user of one credential with the password of the other.
        ("postmark-hooks", "open sesame"),
    ] {
        let header = format!("Basic {}", base64_of(&format!("{user}:{password}")));
        let err = postmark
            .verify(&auth(&header), DELIVERY, SystemTime::now())
            .unwrap_err();
        assert_eq!(err, VerifyError::NoMatchingSignature, "{user}:{password}");
        assert_eq!(err.status(), 401);
    }
}

fn base64_of(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn missing_and_malformed_authorization_is_400() {
    let postmark = rotating();
    let err = postmark
        .verify(&HeaderMap::new(), DELIVERY, SystemTime::now())
        .unwrap_err();
    assert_eq!(err, VerifyError::MissingHeader("authorization"));
    assert_eq!(err.status(), 400);
    for bad in [
        "Bearer QWxhZGRpbjpvcGVuIHNlc2FtZQ==",
        "Basic",
        "Basic not-base64!",
        // base64 of "no colon here".
        "Basic bm8gY29sb24gaGVyZQ==",
    ] {
        let err = postmark
            .verify(&auth(bad), DELIVERY, SystemTime::now())
            .unwrap_err();
        assert!(
            matches!(err, VerifyError::MalformedHeader { .. }),
            "{bad}: {err:?}"
        );
        assert_eq!(err.status(), 400);
    }
}

#[test]
fn the_body_is_not_authenticated_but_gives_the_id() {
    // Basic credentials cover no content: any body passes with them, and
    // only dedup on the id stops a replay.
    let postmark = rotating();
    let open = br#"{"RecordType":"Open","MessageID":"m-1","ReceivedAt":"2024-01-01T00:00:01Z","FirstOpen":false}"#;
    let v = postmark
        .verify(&auth(RFC7617_AUTHORIZATION), open, SystemTime::now())
        .unwrap();
    assert_eq!(v.id.as_deref(), Some("Open:m-1:2024-01-01T00:00:01Z"));
    let v = postmark
        .verify(&auth(RFC7617_AUTHORIZATION), b"not json", SystemTime::now())
        .unwrap();
    assert_eq!((v.id, v.event_type), (None, None));
}

#[test]
fn configuration_errors_and_redacted_debug() {
    assert_eq!(
        Postmark::builder().build().unwrap_err(),
        ConfigError::NoKeys
    );
    assert_eq!(
        Postmark::new("", "p").unwrap_err(),
        ConfigError::Empty("user")
    );
    assert_eq!(
        Postmark::new("u", "").unwrap_err(),
        ConfigError::Empty("password")
    );
    assert!(matches!(
        Postmark::new("a:b", "p").unwrap_err(),
        ConfigError::Invalid { .. }
    ));
    let shown = format!("{:?}", rotating());
    assert_eq!(shown, "Postmark { credentials: 2 }");
    let builder = format!(
        "{:?}",
        Postmark::builder().credential("user", "secret-pass")
    );
    assert!(
        !builder.contains("secret-pass") && !builder.contains("user\""),
        "{builder}"
    );
}
