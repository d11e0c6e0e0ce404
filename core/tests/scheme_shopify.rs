//! The Shopify scheme on the fixtures of Shopify's own Rails library (cited
//! above the constants), then every rule one test at a time.

use std::time::SystemTime;

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::Shopify;
use webhooks_core::{ConfigError, Identity, MatchedKey, Verifier, VerifyError};

/// Shopify/shopify_app `test/shopify_app/controller_concerns/webhook_verification_test.rb`:
/// with `config.secret = 'secret'` and `config.old_secret = 'old_secret'`, a
/// POST of `{ foo: 'anything' }` (form-encoded: `foo=anything`) is authorized
/// with either HMAC ("Valid hmac using the new secret" / "… the old secret").
mod shopify_app {
    pub(crate) const SECRET: &str = "secret";
    pub(crate) const OLD_SECRET: &str = "old_secret";
    pub(crate) const BODY: &[u8] = b"foo=anything";
    pub(crate) const HMAC_NEW: &str = "yCGX/RrK4fcuNtr3ztk5tQGsOBjcAzHpGLdMUrbV8yI=";
    pub(crate) const HMAC_OLD: &str = "XqRcjrSv57VACn6apEO9znyu/wkN1VC7QxdSPwK3Hzs=";
}

fn now() -> SystemTime {
    SystemTime::now()
}

/// `pairs` as headers, after a default `x-shopify-webhook-id` (which the provider
/// always sends; `pairs` may replace it).
fn with(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = bare(&[("x-shopify-webhook-id", "test-webhook-id")]);
    h.extend(bare(pairs));
    h
}

fn bare(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in pairs {
        h.insert(*name, HeaderValue::from_str(value).unwrap());
    }
    h
}

fn rotating() -> Shopify {
    Shopify::builder()
        .secret(shopify_app::SECRET)
        .secret(shopify_app::OLD_SECRET)
        .build()
        .unwrap()
}

#[test]
fn shopify_app_vectors_verify_with_new_and_old_secret() {
    let shopify = rotating();
    let by_new = with(&[("x-shopify-hmac-sha256", shopify_app::HMAC_NEW)]);
    let by_old = with(&[("x-shopify-hmac-sha256", shopify_app::HMAC_OLD)]);
    let v = shopify.verify(&by_new, shopify_app::BODY, now()).unwrap();
    assert_eq!(
        (v.scheme, v.matched_key),
        ("shopify", MatchedKey::Secret(0))
    );
    let v = shopify.verify(&by_old, shopify_app::BODY, now()).unwrap();
    assert_eq!(v.matched_key, MatchedKey::Secret(1));
}

#[test]
fn sign_reproduces_the_vectors() {
    assert_eq!(
        Shopify::new(shopify_app::SECRET)
            .unwrap()
            .sign(shopify_app::BODY),
        shopify_app::HMAC_NEW
    );
    assert_eq!(
        Shopify::new(shopify_app::OLD_SECRET)
            .unwrap()
            .sign(shopify_app::BODY),
        shopify_app::HMAC_OLD
    );
}

/// shopify_app "un-verified request returns unauthorized": `invalid_hmac` is
/// not base64 of 32 bytes here, so the request cannot even be read (400);
/// a well-formed wrong HMAC is the 401.
#[test]
fn invalid_and_wrong_hmacs_are_refused() {
    let shopify = rotating();
    let r = shopify.verify(
        &with(&[("x-shopify-hmac-sha256", "invalid_hmac")]),
        shopify_app::BODY,
        now(),
    );
    assert!(matches!(
        r,
        Err(VerifyError::MalformedHeader {
            header: "x-shopify-hmac-sha256",
            ..
        })
    ));
    let only_new = Shopify::new(shopify_app::SECRET).unwrap();
    let r = only_new.verify(
        &with(&[("x-shopify-hmac-sha256", shopify_app::HMAC_OLD)]),
        shopify_app::BODY,
        now(),
    );
    assert_eq!(r, Err(VerifyError::NoMatchingSignature));
    assert_eq!(r.unwrap_err().status(), 401);
}

#[test]
fn tampered_body_is_401() {
    let h = with(&[("x-shopify-hmac-sha256", shopify_app::HMAC_NEW)]);
    assert_eq!(
        rotating().verify(&h, b"foo=anythinG", now()),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn missing_header_is_400_never_skipped() {
    let r = rotating().verify(&with(&[("x-shopify-topic", "orders/create")]), b"{}", now());
    assert_eq!(r, Err(VerifyError::MissingHeader("x-shopify-hmac-sha256")));
    assert_eq!(r.unwrap_err().status(), 400);
}

#[test]
fn malformed_base64_is_400() {
    let shopify = rotating();
    let good = shopify_app::HMAC_NEW;
    for bad in [
        &good[..40],
        "yCGX/RrK4fcuNtr3ztk5tQGsOBjcAzHpGLdMUrbV8yI=yCGX",
        "yCGX_RrK4fcuNtr3ztk5tQGsOBjcAzHpGLdMUrbV8yI=",
        "",
    ] {
        let r = shopify.verify(
            &with(&[("x-shopify-hmac-sha256", bad)]),
            shopify_app::BODY,
            now(),
        );
        assert!(
            matches!(r, Err(VerifyError::MalformedHeader { .. })),
            "{bad}: {r:?}"
        );
    }
}

#[test]
fn webhook_id_and_topic_are_exposed() {
    let shopify = Shopify::new("shpss_secret").unwrap();
    let h = shopify
        .sign_headers(
            "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
            "orders/create",
            b"{}",
        )
        .unwrap();
    let v = shopify.verify(&h, b"{}", now()).unwrap();
    assert_eq!(
        v.id.as_deref(),
        Some("b54557e4-bdd9-4b37-8a5f-bf7d70bcd043")
    );
    assert_eq!(v.event_type.as_deref(), Some("orders/create"));
    assert_eq!(v.timestamp, None);
}

/// Issue 10, item 2: Shopify always sends `X-Shopify-Webhook-Id`; without it
/// the request is not Shopify's.
#[test]
fn missing_webhook_id_is_400() {
    let shopify = rotating();
    let h = bare(&[("x-shopify-hmac-sha256", shopify_app::HMAC_NEW)]);
    assert_eq!(
        shopify.verify(&h, shopify_app::BODY, now()),
        Err(VerifyError::MissingHeader("x-shopify-webhook-id"))
    );
}

/// Issue 10, item 2: the webhook id is not signed, so the delivery is
/// identified by its body: the same bytes under a fresh id are the same delivery.
#[test]
fn deliveries_are_identified_by_the_body_not_the_unsigned_id() {
    let shopify = rotating();
    let verify = |id: &str| {
        let h = with(&[
            ("x-shopify-hmac-sha256", shopify_app::HMAC_NEW),
            ("x-shopify-webhook-id", id),
        ]);
        shopify.verify(&h, shopify_app::BODY, now()).unwrap()
    };
    let (genuine, replay) = (verify("w-1"), verify("w-replayed"));
    assert_eq!(genuine.identity, Identity::Content);
    assert_eq!(
        genuine.dedup_id(shopify_app::BODY),
        replay.dedup_id(shopify_app::BODY)
    );
    assert_ne!(
        genuine.dedup_id(shopify_app::BODY),
        genuine.dedup_id(b"foo=other")
    );
}

#[test]
fn secrets_are_checked_at_build_and_never_printed() {
    assert_eq!(Shopify::new("").unwrap_err(), ConfigError::Empty("secret"));
    assert_eq!(Shopify::builder().build().unwrap_err(), ConfigError::NoKeys);
    let shown = format!(
        "{:?} {:?}",
        Shopify::new("shpss_hidden").unwrap(),
        Shopify::builder().secret("shpss_hidden")
    );
    assert!(!shown.contains("hidden"), "{shown}");
}
