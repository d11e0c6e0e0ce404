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

/// Issue 25, item 10: a GitLab webhook with a signing token sends the
/// Standard Webhooks headers (gitlab-org/gitlab merge request 230944:
/// `webhook-id` = `Idempotency-Key`, `webhook-timestamp`, `webhook-signature:
/// v1,<base64 HMAC-SHA256 of {id}.{timestamp}.{body}>`, the token as
/// `whsec_<base64 of 32 bytes>`; the example token is the merge request's).
/// The signature is computed here independently (hmac crate) and verified
/// by `StandardWebhooks` alongside GitLab's own headers; a replay with
/// another body, or past the window, is refused, where the secret token
/// alone would accept it forever.
#[test]
fn a_signing_token_delivery_verifies_with_standard_webhooks() {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD as B64;
    use hmac::{KeyInit as _, Mac as _};
    use std::time::Duration;
    use webhooks_core::scheme::StandardWebhooks;

    let signing_token = "whsec_dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0dGVzdHRlc3Q=";
    let key = B64.decode(&signing_token[6..]).unwrap();
    assert_eq!(key.len(), 32);
    let (id, ts, body) = (
        "b7e5d8d8-3c1e-4a52-9e1f-0f3c0a7d2e11",
        1_767_000_000u64,
        br#"{"object_kind":"push"}"#,
    );
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(body);
    let signature = format!("v1,{}", B64.encode(mac.finalize().into_bytes()));

    let mut h = request(Some(TOKEN));
    h.insert("idempotency-key", id.parse().unwrap());
    h.insert("webhook-id", id.parse().unwrap());
    h.insert("webhook-timestamp", ts.to_string().parse().unwrap());
    h.insert("webhook-signature", signature.parse().unwrap());
    let at = |secs: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
    let verifier = StandardWebhooks::new(signing_token).unwrap();
    let v = verifier.verify(&h, body, at(ts + 5)).unwrap();
    assert_eq!(v.id.as_deref(), Some(id));
    assert_eq!(v.timestamp, Some(ts));
    assert_eq!(
        verifier.verify(&h, br#"{"object_kind":"tag_push"}"#, at(ts)),
        Err(VerifyError::NoMatchingSignature)
    );
    assert_eq!(
        verifier.verify(&h, body, at(ts + 301)),
        Err(VerifyError::TimestampTooOld)
    );
    // The token-only scheme accepts the same headers with any body, any time.
    let token_only = GitLab::new(TOKEN).unwrap();
    assert!(
        token_only
            .verify(&h, b"anything", at(ts + 86_400 * 365))
            .is_ok()
    );
}
