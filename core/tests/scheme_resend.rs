//! Resend (and Clerk, and every other sender that signs with Svix) verified
//! with [`StandardWebhooks`]: Resend documents the `svix-id`,
//! `svix-timestamp` and `svix-signature` headers and a `whsec_` signing
//! secret (<https://resend.com/docs/dashboard/webhooks/verify-webhooks-requests>;
//! Clerk the same: <https://clerk.com/docs/webhooks/sync-data>), which is the
//! Standard Webhooks `v1` scheme under Svix's header names.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::StandardWebhooks;
use webhooks_core::{MatchedKey, Verifier, VerifyError};

/// The vector Svix's own libraries sign in their tests: svix/svix-webhooks
/// `python/tests/test_webhooks.py` (`test_sign_function`), also in
/// standard-webhooks/standard-webhooks `libraries/python/tests/test_webhooks.py`.
mod svix {
    pub(crate) const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    pub(crate) const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    pub(crate) const TIMESTAMP: &str = "1614265330";
    pub(crate) const BODY: &[u8] = br#"{"test": 2432232314}"#;
    pub(crate) const SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
}

/// A Resend `email.delivered` event body, shaped as Resend's event docs show it.
const RESEND_BODY: &[u8] = br#"{"type":"email.delivered","created_at":"2024-02-22T23:41:12.126Z","data":{"email_id":"56761188-7520-42d8-8898-ff6fc54ce618","to":["delivered@resend.dev"]}}"#;

fn at(ts: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(ts)
}

/// The request as Resend sends it: only `svix-*` headers.
fn resend_headers(id: &str, timestamp: &str, signature: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("svix-id", HeaderValue::from_str(id).unwrap());
    h.insert("svix-timestamp", HeaderValue::from_str(timestamp).unwrap());
    h.insert("svix-signature", HeaderValue::from_str(signature).unwrap());
    h
}

#[test]
fn svix_vector_under_resend_header_names() {
    let resend = StandardWebhooks::new(svix::SECRET).unwrap();
    let h = resend_headers(svix::ID, svix::TIMESTAMP, svix::SIGNATURE);
    let v = resend.verify(&h, svix::BODY, at(1_614_265_330)).unwrap();
    assert_eq!(v.id.as_deref(), Some(svix::ID));
    assert_eq!(v.timestamp, Some(1_614_265_330));
    assert_eq!(v.matched_key, MatchedKey::Secret(0));
}

#[test]
fn rotation_tampering_wrong_secret_and_staleness() {
    let old = StandardWebhooks::new("whsec_b2xkLXNlY3JldC1iZWluZy1yb3RhdGVkLW91dA==").unwrap();
    let resend = StandardWebhooks::builder()
        .secret(svix::SECRET)
        .secret("whsec_b2xkLXNlY3JldC1iZWluZy1yb3RhdGVkLW91dA==")
        .build()
        .unwrap();
    let now = 1_708_645_272;
    let signature = old.sign("msg_2cxnRnd6", now, RESEND_BODY).unwrap();
    let h = resend_headers("msg_2cxnRnd6", &now.to_string(), &signature);
    let v = resend.verify(&h, RESEND_BODY, at(now)).unwrap();
    assert_eq!(v.matched_key, MatchedKey::Secret(1));

    let mut tampered = RESEND_BODY.to_vec();
    tampered[10] = b'X';
    let err = resend.verify(&h, &tampered, at(now)).unwrap_err();
    assert_eq!(
        (err.clone(), err.status().as_u16()),
        (VerifyError::NoMatchingSignature, 401)
    );

    let stranger = StandardWebhooks::new("whsec_Zm9yZWlnbi1zZWNyZXQtbm90LWNvbmZpZ3VyZWQ=").unwrap();
    let forged = stranger.sign("msg_2cxnRnd6", now, RESEND_BODY).unwrap();
    let h2 = resend_headers("msg_2cxnRnd6", &now.to_string(), &forged);
    assert_eq!(
        resend.verify(&h2, RESEND_BODY, at(now)),
        Err(VerifyError::NoMatchingSignature)
    );

    let err = resend.verify(&h, RESEND_BODY, at(now + 301)).unwrap_err();
    assert_eq!(
        (err.clone(), err.status().as_u16()),
        (VerifyError::TimestampTooOld, 401)
    );
}

#[test]
fn missing_and_malformed_svix_headers_are_400() {
    let resend = StandardWebhooks::new(svix::SECRET).unwrap();
    let now = at(1_614_265_330);
    for name in ["svix-id", "svix-timestamp", "svix-signature"] {
        let mut h = resend_headers(svix::ID, svix::TIMESTAMP, svix::SIGNATURE);
        h.remove(name);
        let err = resend.verify(&h, svix::BODY, now).unwrap_err();
        assert!(
            matches!(err, VerifyError::MissingHeader(_)),
            "{name}: {err:?}"
        );
        assert_eq!(err.status(), 400);
    }
    let h = resend_headers(svix::ID, "yesterday", svix::SIGNATURE);
    let err = resend.verify(&h, svix::BODY, now).unwrap_err();
    assert!(
        matches!(err, VerifyError::MalformedHeader { .. }),
        "{err:?}"
    );
    assert_eq!(err.status(), 400);
}
