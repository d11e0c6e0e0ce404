//! `GenericHmac` reproduces the providers' published vectors by configuration
//! alone, then every rule one test at a time.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::{GenericHmac, SignatureEncoding};
use webhooks_core::{ConfigError, Identity, MatchedKey, Verifier, VerifyError};

/// docs.github.com, "Validating webhook deliveries" (as in `scheme_github.rs`).
const GITHUB_SECRET: &str = "It's a Secret to Everybody";
const GITHUB_BODY: &[u8] = b"Hello, World!";
const GITHUB_SIGNATURE: &str =
    "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

/// api.slack.com, "Verifying requests from Slack" (as in `scheme_slack.rs`).
const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const SLACK_TIMESTAMP: u64 = 1_531_420_618;
const SLACK_BODY: &[u8] = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
const SLACK_SIGNATURE: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

/// stripe/stripe-node `test/crypto/helpers.ts` (`createCryptoProviderTestSuite`):
/// hex HMAC-SHA256 with key `test_secret` of an empty payload, of
/// `JSON.stringify({obj1: 'hello', obj2: 'world'})`, and of U+1F600 in UTF-8.
const NODE_CRYPTO_SECRET: &str = "test_secret";
const NODE_CRYPTO_CASES: [(&str, &str); 3] = [
    (
        "",
        "f7f9bd47fb987337b5796fdc1fdb9ba221d0d5396814bfcaf9521f43fd8927fd",
    ),
    (
        r#"{"obj1":"hello","obj2":"world"}"#,
        "bebb1a643997f419b315ddba19e6f5411e1ce7f810ba6d3617ce72823092f363",
    ),
    (
        "\u{1F600}",
        "837da296d05c4fe31f61d5d7ead035099d9585a5bcde87de952012a78f0b0c43",
    ),
];

/// Shopify/shopify_app `test/shopify_app/controller_concerns/webhook_verification_test.rb`
/// (as in `scheme_shopify.rs`).
const SHOPIFY_SECRET: &str = "secret";
const SHOPIFY_BODY: &[u8] = b"foo=anything";
const SHOPIFY_HMAC: &str = "yCGX/RrK4fcuNtr3ztk5tQGsOBjcAzHpGLdMUrbV8yI=";

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

fn with(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in pairs {
        h.insert(*name, HeaderValue::from_str(value).unwrap());
    }
    h
}

fn github_like() -> GenericHmac {
    GenericHmac::builder("github-generic", "x-hub-signature-256")
        .secret(GITHUB_SECRET)
        .prefix("sha256=")
        .encoding(SignatureEncoding::Hex)
        .id_header("x-github-delivery")
        .event_type_header("x-github-event")
        .build()
        .unwrap()
}

fn slack_like() -> GenericHmac {
    GenericHmac::builder("slack-generic", "x-slack-signature")
        .secret(SLACK_SECRET)
        .prefix("v0=")
        .content_prefix("v0:")
        .signed_timestamp("x-slack-request-timestamp", ":")
        .build()
        .unwrap()
}

#[test]
fn reproduces_githubs_vector_by_configuration() {
    let github = github_like();
    assert_eq!(github.sign(0, GITHUB_BODY), GITHUB_SIGNATURE);
    let h = with(&[
        ("x-hub-signature-256", GITHUB_SIGNATURE),
        ("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
        ("x-github-event", "issues"),
    ]);
    let v = github.verify(&h, GITHUB_BODY, at(0)).unwrap();
    assert_eq!(v.scheme, "github-generic");
    assert_eq!(
        v.id.as_deref(),
        Some("72d3162e-cc78-11e3-81ab-4c9367dc0958")
    );
    assert_eq!(v.event_type.as_deref(), Some("issues"));
    assert_eq!(v.timestamp, None);
    assert_eq!(
        github.verify(&h, b"Hello, World?", at(0)),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn reproduces_slacks_vector_by_configuration() {
    let slack = slack_like();
    assert_eq!(slack.sign(SLACK_TIMESTAMP, SLACK_BODY), SLACK_SIGNATURE);
    let h = slack.sign_headers(SLACK_TIMESTAMP, SLACK_BODY).unwrap();
    assert_eq!(h["x-slack-signature"], SLACK_SIGNATURE);
    let v = slack.verify(&h, SLACK_BODY, at(SLACK_TIMESTAMP)).unwrap();
    assert_eq!(v.timestamp, Some(SLACK_TIMESTAMP));
}

#[test]
fn reproduces_shopifys_vector_by_configuration() {
    let shopify = GenericHmac::builder("shopify-generic", "x-shopify-hmac-sha256")
        .secret(SHOPIFY_SECRET)
        .encoding(SignatureEncoding::Base64)
        .build()
        .unwrap();
    assert_eq!(shopify.sign(0, SHOPIFY_BODY), SHOPIFY_HMAC);
    let h = with(&[("x-shopify-hmac-sha256", SHOPIFY_HMAC)]);
    assert!(shopify.verify(&h, SHOPIFY_BODY, at(0)).is_ok());
}

#[test]
fn stripe_node_crypto_provider_vectors() {
    let plain = GenericHmac::builder("plain", "x-signature")
        .secret(NODE_CRYPTO_SECRET)
        .build()
        .unwrap();
    for (payload, hex) in NODE_CRYPTO_CASES {
        assert_eq!(plain.sign(0, payload.as_bytes()), hex, "{payload:?}");
        let h = with(&[("x-signature", hex)]);
        assert!(plain.verify(&h, payload.as_bytes(), at(0)).is_ok());
    }
}

#[test]
fn missing_headers_are_400_never_skipped() {
    let slack = slack_like();
    let now = at(SLACK_TIMESTAMP);
    assert_eq!(
        slack.verify(&HeaderMap::new(), SLACK_BODY, now),
        Err(VerifyError::MissingHeader("x-slack-signature"))
    );
    let r = slack.verify(
        &with(&[("x-slack-signature", SLACK_SIGNATURE)]),
        SLACK_BODY,
        now,
    );
    assert_eq!(
        r,
        Err(VerifyError::MissingHeader("x-slack-request-timestamp"))
    );
    assert_eq!(r.unwrap_err().status(), 400);
}

#[test]
fn wrong_prefix_or_encoding_is_400() {
    let github = github_like();
    let hex = &GITHUB_SIGNATURE[7..];
    for bad in [
        hex.to_owned(),
        format!("sha1={hex}"),
        format!("sha256={}", &hex[..62]),
    ] {
        let r = github.verify(&with(&[("x-hub-signature-256", &bad)]), GITHUB_BODY, at(0));
        assert!(
            matches!(r, Err(VerifyError::MalformedHeader { .. })),
            "{bad}: {r:?}"
        );
    }
}

#[test]
fn stale_and_future_timestamps_are_refused() {
    let slack = slack_like();
    let h = slack.sign_headers(SLACK_TIMESTAMP, SLACK_BODY).unwrap();
    assert_eq!(
        slack.verify(&h, SLACK_BODY, at(SLACK_TIMESTAMP + 301)),
        Err(VerifyError::TimestampTooOld)
    );
    assert_eq!(
        slack.verify(&h, SLACK_BODY, at(SLACK_TIMESTAMP - 301)),
        Err(VerifyError::TimestampTooNew)
    );
    let strict = GenericHmac::builder("strict", "x-sig")
        .secret("k")
        .signed_timestamp("x-ts", ".")
        .tolerance(Duration::from_secs(5))
        .build()
        .unwrap();
    let h = strict.sign_headers(100, b"{}").unwrap();
    assert!(strict.verify(&h, b"{}", at(105)).is_ok());
    assert_eq!(
        strict.verify(&h, b"{}", at(106)),
        Err(VerifyError::TimestampTooOld)
    );
}

#[test]
fn rotation_reports_which_secret_matched() {
    let github = GenericHmac::builder("gh", "x-hub-signature-256")
        .secrets(["newer secret", GITHUB_SECRET])
        .prefix("sha256=")
        .build()
        .unwrap();
    let h = with(&[("x-hub-signature-256", GITHUB_SIGNATURE)]);
    assert_eq!(
        github.verify(&h, GITHUB_BODY, at(0)).unwrap().matched_key,
        MatchedKey::Secret(1)
    );
}

#[test]
fn configuration_errors_are_refused_at_build() {
    let base = || GenericHmac::builder("x", "x-sig").secret("k");
    assert_eq!(
        GenericHmac::builder("x", "x-sig").build().unwrap_err(),
        ConfigError::NoKeys
    );
    assert_eq!(
        GenericHmac::builder("x", "x-sig")
            .secret("")
            .build()
            .unwrap_err(),
        ConfigError::Empty("secret")
    );
    assert!(matches!(
        GenericHmac::builder("x", "bad header").secret("k").build(),
        Err(ConfigError::Setting(_))
    ));
    assert!(matches!(
        GenericHmac::builder("", "x-sig").secret("k").build(),
        Err(ConfigError::Setting(_))
    ));
    assert!(matches!(
        base().tolerance(Duration::from_secs(1)).build(),
        Err(ConfigError::Setting(_))
    ));
    assert!(matches!(
        base().id_header("not valid:").build(),
        Err(ConfigError::Setting(_))
    ));
}

#[test]
fn debug_never_prints_secrets() {
    let v = GenericHmac::builder("x", "x-sig")
        .secret("do-not-print-me")
        .build()
        .unwrap();
    let shown = format!(
        "{v:?} {:?}",
        GenericHmac::builder("x", "x-sig").secret("do-not-print-me")
    );
    assert!(!shown.contains("do-not-print"), "{shown}");
}

/// Issue 10, item 2: the id header is not signed, so deliveries are
/// identified by the body: the same bytes under a fresh id, or none, are the
/// same delivery; with a signed timestamp, so is a retry re-signed later.
#[test]
fn the_unsigned_id_never_identifies_the_delivery() {
    let github = github_like();
    let ids = [Some("d-1"), Some("d-replayed"), None];
    let dedup_ids: Vec<_> = ids
        .iter()
        .map(|id| {
            let mut h = with(&[("x-hub-signature-256", GITHUB_SIGNATURE)]);
            if let Some(id) = id {
                h.insert("x-github-delivery", HeaderValue::from_static(id));
            }
            let v = github.verify(&h, GITHUB_BODY, at(0)).unwrap();
            assert_eq!(v.identity, Identity::Content);
            assert_eq!(v.id.as_deref(), *id);
            v.dedup_id(GITHUB_BODY).unwrap()
        })
        .collect();
    assert!(
        dedup_ids.iter().all(|d| *d == dedup_ids[0]),
        "{dedup_ids:?}"
    );

    let slack = slack_like();
    let verified_at = |t: u64| {
        let h = slack.sign_headers(t, SLACK_BODY).unwrap();
        slack.verify(&h, SLACK_BODY, at(t)).unwrap()
    };
    let (first, retry) = (
        verified_at(SLACK_TIMESTAMP),
        verified_at(SLACK_TIMESTAMP + 60),
    );
    assert_eq!(first.dedup_id(SLACK_BODY), retry.dedup_id(SLACK_BODY));
}

/// Issue 35, item 9: the configured signature header is a credential
/// whatever its name, for the console and the admin API to redact.
#[test]
fn the_signature_header_is_a_credential_header() {
    use webhooks_core::redact::Redaction;

    let digest = GenericHmac::builder("acme", "X-Acme-Digest")
        .secret(GITHUB_SECRET)
        .build()
        .unwrap();
    assert_eq!(
        digest.credential_headers(),
        [http::HeaderName::from_static("x-acme-digest")]
    );
    assert!(!webhooks_core::redact::is_credential_header(
        "x-acme-digest"
    ));
    assert!(
        Redaction::new()
            .verifier(&digest)
            .is_redacted("X-Acme-Digest")
    );
    // Through `Arc<dyn RequestVerifier>`, as a receiver holds it.
    let shared: std::sync::Arc<dyn webhooks_core::RequestVerifier> = std::sync::Arc::new(digest);
    assert!(
        Redaction::new()
            .verifier(&*shared)
            .is_redacted("x-acme-digest")
    );
}
