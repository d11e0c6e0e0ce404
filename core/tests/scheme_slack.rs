//! The Slack scheme on Slack's documented example, then every rule one test at a time.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::Slack;
use webhooks_core::{ConfigError, MatchedKey, Verifier, VerifyError};

/// api.slack.com, "Verifying requests from Slack" (the slash-command example;
/// also the fixture of slackapi/python-slack-sdk's signature verifier tests).
mod docs {
    pub(crate) const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    pub(crate) const TIMESTAMP: u64 = 1_531_420_618;
    pub(crate) const BODY: &[u8] = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    pub(crate) const SIGNATURE: &str =
        "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
}

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

fn with(signature: Option<&str>, timestamp: Option<&str>) -> HeaderMap {
    let mut h = HeaderMap::new();
    if let Some(s) = signature {
        h.insert("x-slack-signature", HeaderValue::from_str(s).unwrap());
    }
    if let Some(t) = timestamp {
        h.insert(
            "x-slack-request-timestamp",
            HeaderValue::from_str(t).unwrap(),
        );
    }
    h
}

fn docs_headers() -> HeaderMap {
    with(Some(docs::SIGNATURE), Some(&docs::TIMESTAMP.to_string()))
}

#[test]
fn docs_vector_verifies_and_signs() {
    let slack = Slack::new(docs::SECRET).unwrap();
    assert_eq!(slack.sign(docs::TIMESTAMP, docs::BODY), docs::SIGNATURE);
    let v = slack
        .verify(&docs_headers(), docs::BODY, at(docs::TIMESTAMP + 60))
        .unwrap();
    assert_eq!(v.scheme, "slack");
    assert_eq!(v.timestamp, Some(docs::TIMESTAMP));
    assert_eq!((v.id, v.event_type), (None, None));
    assert_eq!(v.matched_key, MatchedKey::Secret(0));
}

#[test]
fn stale_and_future_timestamps_are_refused() {
    let slack = Slack::new(docs::SECRET).unwrap();
    let h = docs_headers();
    assert!(
        slack
            .verify(&h, docs::BODY, at(docs::TIMESTAMP + 300))
            .is_ok()
    );
    assert!(
        slack
            .verify(&h, docs::BODY, at(docs::TIMESTAMP - 300))
            .is_ok()
    );
    assert_eq!(
        slack.verify(&h, docs::BODY, at(docs::TIMESTAMP + 301)),
        Err(VerifyError::TimestampTooOld)
    );
    assert_eq!(
        slack.verify(&h, docs::BODY, at(docs::TIMESTAMP - 301)),
        Err(VerifyError::TimestampTooNew)
    );
}

#[test]
fn missing_headers_are_400_never_skipped() {
    let slack = Slack::new(docs::SECRET).unwrap();
    let now = at(docs::TIMESTAMP);
    assert_eq!(
        slack.verify(&with(None, Some("1531420618")), docs::BODY, now),
        Err(VerifyError::MissingHeader("x-slack-signature"))
    );
    assert_eq!(
        slack.verify(&with(Some(docs::SIGNATURE), None), docs::BODY, now),
        Err(VerifyError::MissingHeader("x-slack-request-timestamp"))
    );
}

#[test]
fn malformed_headers_are_400() {
    let slack = Slack::new(docs::SECRET).unwrap();
    let now = at(docs::TIMESTAMP);
    let hex = &docs::SIGNATURE[3..];
    for (sig, ts) in [
        (hex.to_owned(), "1531420618"),
        (format!("v1={hex}"), "1531420618"),
        (format!("v0={}", &hex[..10]), "1531420618"),
        (docs::SIGNATURE.to_owned(), "soon"),
        (docs::SIGNATURE.to_owned(), "-1531420618"),
        (docs::SIGNATURE.to_owned(), "1531420618.5"),
    ] {
        let r = slack.verify(&with(Some(&sig), Some(ts)), docs::BODY, now);
        assert!(
            matches!(r, Err(VerifyError::MalformedHeader { .. })),
            "{sig} {ts}: {r:?}"
        );
        assert_eq!(r.unwrap_err().status(), 400);
    }
}

#[test]
fn tampered_body_timestamp_and_wrong_secret_are_401() {
    let slack = Slack::new(docs::SECRET).unwrap();
    let now = at(docs::TIMESTAMP);
    let mut body = docs::BODY.to_vec();
    body[0] ^= 1;
    assert_eq!(
        slack.verify(&docs_headers(), &body, now),
        Err(VerifyError::NoMatchingSignature)
    );
    // The timestamp is signed: moving it (within the window) breaks the MAC.
    let moved = with(Some(docs::SIGNATURE), Some("1531420619"));
    assert_eq!(
        slack.verify(&moved, docs::BODY, now),
        Err(VerifyError::NoMatchingSignature)
    );
    let other = Slack::new("another-signing-secret").unwrap();
    assert_eq!(
        other.verify(&docs_headers(), docs::BODY, now),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn rotation_reports_which_secret_matched() {
    let slack = Slack::builder()
        .secret("new-signing-secret")
        .secret(docs::SECRET)
        .tolerance(Duration::from_secs(60))
        .build()
        .unwrap();
    let v = slack
        .verify(&docs_headers(), docs::BODY, at(docs::TIMESTAMP))
        .unwrap();
    assert_eq!(v.matched_key, MatchedKey::Secret(1));
    assert_eq!(
        slack.verify(&docs_headers(), docs::BODY, at(docs::TIMESTAMP + 61)),
        Err(VerifyError::TimestampTooOld)
    );
}

#[test]
fn sign_headers_round_trip() {
    let slack = Slack::new(docs::SECRET).unwrap();
    let h = slack.sign_headers(docs::TIMESTAMP, docs::BODY).unwrap();
    assert_eq!(h, docs_headers());
}

#[test]
fn secrets_are_checked_at_build_and_never_printed() {
    assert_eq!(Slack::new("").unwrap_err(), ConfigError::Empty("secret"));
    assert_eq!(Slack::builder().build().unwrap_err(), ConfigError::NoKeys);
    let slack = Slack::new(docs::SECRET).unwrap();
    let shown = format!("{slack:?} {:?}", Slack::builder().secret(docs::SECRET));
    assert!(!shown.contains("8f742231"), "{shown}");
}
