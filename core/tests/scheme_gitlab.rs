//! GitLab: the headers of
//! https://docs.gitlab.com/user/project/integrations/webhooks/ (secret
//! token in `X-Gitlab-Token`, `X-Gitlab-Event`, `X-Gitlab-Event-UUID`,
//! `Idempotency-Key`) with the documentation's example values. A token is
//! compared, not computed, so there is no signature vector.

use std::time::SystemTime;

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::GitLab;
use webhooks_core::{ConfigError, MatchedKey, Verifier, VerifyError};

const TOKEN: &str = "my-webhook-secret-token";
const UUID: &str = "13792a34-cac6-4fda-95a8-c58e00a3954e";

fn request(token: Option<&str>) -> HeaderMap {
    let mut h = HeaderMap::new();
    if let Some(t) = token {
        h.insert("x-gitlab-token", HeaderValue::from_str(t).unwrap());
    }
    h.insert("x-gitlab-event", "Push Hook".parse().unwrap());
    h.insert("x-gitlab-event-uuid", UUID.parse().unwrap());
    h
}

#[test]
fn the_token_verifies_with_event_and_uuid() {
    let g = GitLab::new(TOKEN).unwrap();
    let v = g
        .verify(&request(Some(TOKEN)), b"{}", SystemTime::now())
        .unwrap();
    assert_eq!(v.event_type.as_deref(), Some("Push Hook"));
    assert_eq!(v.id.as_deref(), Some(UUID));
    assert_eq!((v.scheme, v.timestamp), ("gitlab", None));
    // Idempotency-Key, stable across retries, wins over the UUID.
    let mut h = request(Some(TOKEN));
    h.insert("idempotency-key", "retry-stable-key".parse().unwrap());
    let v = g.verify(&h, b"{}", SystemTime::now()).unwrap();
    assert_eq!(v.id.as_deref(), Some("retry-stable-key"));
    let signed = g.sign_headers("Push Hook", UUID).unwrap();
    g.verify(&signed, b"{}", SystemTime::now()).unwrap();
}

#[test]
fn a_wrong_token_is_401_whatever_its_length() {
    let g = GitLab::new(TOKEN).unwrap();
    for wrong in [
        "my-webhook-secret-tokeN",
        "my-webhook-secret-token-",
        "m",
        "x",
    ] {
        assert_eq!(
            g.verify(&request(Some(wrong)), b"{}", SystemTime::now()),
            Err(VerifyError::NoMatchingSignature),
            "{wrong}"
        );
    }
}

#[test]
fn rotation_and_redaction() {
    let g = GitLab::builder()
        .tokens(["new-token", TOKEN])
        .build()
        .unwrap();
    let v = g
        .verify(&request(Some(TOKEN)), b"{}", SystemTime::now())
        .unwrap();
    assert_eq!(v.matched_key, MatchedKey::Secret(1));
    assert!(!format!("{g:?}").contains("token\""));
    assert!(!format!("{g:?}").contains(TOKEN));
    assert_eq!(GitLab::new("").unwrap_err(), ConfigError::Empty("token"));
    assert_eq!(GitLab::builder().build().unwrap_err(), ConfigError::NoKeys);
    assert!(GitLab::new(" padded ").is_err());
}

#[test]
fn missing_and_malformed_are_400() {
    let g = GitLab::new(TOKEN).unwrap();
    let err = g
        .verify(&request(None), b"{}", SystemTime::now())
        .unwrap_err();
    assert_eq!(err, VerifyError::MissingHeader("x-gitlab-token"));
    assert_eq!(err.status(), 400);
    let mut h = request(None);
    h.insert(
        "x-gitlab-token",
        HeaderValue::from_bytes(b"\xfftoken").unwrap(),
    );
    assert_eq!(
        g.verify(&h, b"{}", SystemTime::now()).unwrap_err().status(),
        400
    );
}
