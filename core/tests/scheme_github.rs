//! The GitHub scheme on GitHub's documented vector and Octokit's fixtures
//! (each cited above its constant), then every rule one test at a time.

use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::GitHub;
use webhooks_core::{
    ConfigError, Identity, MatchedKey, Receiver, Rejection, Verifier, VerifyError,
};

/// docs.github.com, "Validating webhook deliveries", section "Testing the
/// webhook payload validation": this secret and payload give this signature.
mod docs {
    pub(crate) const SECRET: &str = "It's a Secret to Everybody";
    pub(crate) const BODY: &[u8] = b"Hello, World!";
    pub(crate) const SIGNATURE: &str =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
}

/// octokit/webhooks-methods.js `test/verify.test.ts` (and `test/sign.test.ts`):
/// secret `mysecret` over `JSON.stringify({ foo: "bar" })`.
mod octokit {
    pub(crate) const SECRET: &str = "mysecret";
    pub(crate) const BODY: &[u8] = br#"{"foo":"bar"}"#;
    pub(crate) const SHA256: &str =
        "sha256=4864d2759938a15468b5df9ade20bf161da9b4f737ea61794142f3484236bda3";
    pub(crate) const SHA1: &str = "sha1=d03207e4b030cf234e3447bac4d93add4c6643d8";
}

fn now() -> SystemTime {
    SystemTime::now()
}

/// `pairs` as headers, after a default `x-github-delivery` (which the provider
/// always sends; `pairs` may replace it).
fn with(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = bare(&[("x-github-delivery", "test-delivery")]);
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

#[test]
fn docs_vector_verifies_and_signs() {
    let github = GitHub::new(docs::SECRET).unwrap();
    assert_eq!(github.sign(docs::BODY), docs::SIGNATURE);
    let h = with(&[
        ("x-hub-signature-256", docs::SIGNATURE),
        ("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
        ("x-github-event", "ping"),
    ]);
    let v = github.verify(&h, docs::BODY, now()).unwrap();
    assert_eq!(v.scheme, "github");
    assert_eq!(
        v.id.as_deref(),
        Some("72d3162e-cc78-11e3-81ab-4c9367dc0958")
    );
    assert_eq!(v.event_type.as_deref(), Some("ping"));
    assert_eq!(v.timestamp, None);
    assert_eq!(v.matched_key, MatchedKey::Secret(0));
}

#[test]
fn octokit_sha256_vector_verifies() {
    let github = GitHub::new(octokit::SECRET).unwrap();
    assert_eq!(github.sign(octokit::BODY), octokit::SHA256);
    let h = with(&[("x-hub-signature-256", octokit::SHA256)]);
    let v = github.verify(&h, octokit::BODY, now()).unwrap();
    assert_eq!(
        (v.id.as_deref(), v.event_type),
        (Some("test-delivery"), None)
    );
}

/// Issue 10, item 2: GitHub always sends `X-GitHub-Delivery`; without it (or
/// empty) the request is not GitHub's.
#[test]
fn missing_delivery_id_is_400() {
    let github = GitHub::new(docs::SECRET).unwrap();
    for h in [
        bare(&[("x-hub-signature-256", docs::SIGNATURE)]),
        with(&[
            ("x-hub-signature-256", docs::SIGNATURE),
            ("x-github-delivery", " "),
        ]),
    ] {
        assert_eq!(
            github.verify(&h, docs::BODY, now()),
            Err(VerifyError::MissingHeader("x-github-delivery"))
        );
    }
    // No signature at all still names the signature first.
    assert_eq!(
        github.verify(&HeaderMap::new(), docs::BODY, now()),
        Err(VerifyError::MissingHeader("x-hub-signature-256"))
    );
}

/// Issue 10, item 2: `X-GitHub-Delivery` is not signed, so the delivery is
/// identified by its body: the same bytes under a fresh id are the same delivery.
#[test]
fn deliveries_are_identified_by_the_body_not_the_unsigned_id() {
    let github = GitHub::new(docs::SECRET).unwrap();
    let verify = |id: &str| {
        let h = with(&[
            ("x-hub-signature-256", docs::SIGNATURE),
            ("x-github-delivery", id),
        ]);
        github.verify(&h, docs::BODY, now()).unwrap()
    };
    let (genuine, replay) = (verify("d-1"), verify("d-replayed"));
    assert_eq!(genuine.identity, Identity::Content);
    assert_eq!(genuine.id.as_deref(), Some("d-1"));
    assert_eq!(
        genuine.dedup_id(docs::BODY),
        replay.dedup_id(docs::BODY),
        "a fresh id does not make a new delivery"
    );
    assert_ne!(genuine.dedup_id(docs::BODY), genuine.dedup_id(b"other"));
}

/// Issue 10, item 2, through the pipeline: a replay under a fresh id is a
/// duplicate; the opt-out (`dedup_key` on the provider id) lets it run.
#[tokio::test]
async fn a_replay_under_a_fresh_id_is_a_duplicate_unless_opted_out() {
    let github = GitHub::new(docs::SECRET).unwrap();
    let deliver = |receiver: Receiver, id: &'static str| async move {
        let h = with(&[
            ("x-hub-signature-256", docs::SIGNATURE),
            ("x-github-delivery", id),
        ]);
        let (mut parts, ()) = http::Request::post("/github")
            .body(())
            .unwrap()
            .into_parts();
        parts.headers = h;
        let handler = |_, _| async { 204u16 };
        receiver
            .process(parts, Bytes::from_static(docs::BODY), handler, |s| *s)
            .await
    };
    let receiver = Receiver::new(github.clone());
    assert_eq!(deliver(receiver.clone(), "d-1").await, Ok(204));
    assert_eq!(
        deliver(receiver.clone(), "d-2").await,
        Err(Rejection::Duplicate)
    );
    let opted_out = Receiver::builder(github)
        .dedup_key(|verified, _| verified.id.clone())
        .build();
    assert_eq!(deliver(opted_out.clone(), "d-1").await, Ok(204));
    assert_eq!(
        deliver(opted_out.clone(), "d-1").await,
        Err(Rejection::Duplicate)
    );
    assert_eq!(deliver(opted_out, "d-2").await, Ok(204));
}

#[test]
fn sha1_is_refused_by_default() {
    let github = GitHub::new(octokit::SECRET).unwrap();
    let h = with(&[("x-hub-signature", octokit::SHA1)]);
    let r = github.verify(&h, octokit::BODY, now());
    assert_eq!(r, Err(VerifyError::MissingHeader("x-hub-signature-256")));
    assert_eq!(r.unwrap_err().status(), 400);
    assert_eq!(github.sign_sha1(octokit::BODY), None);
}

#[test]
fn sha1_octokit_vector_verifies_when_allowed() {
    let github = GitHub::builder()
        .secret(octokit::SECRET)
        .allow_sha1()
        .build()
        .unwrap();
    assert_eq!(
        github.sign_sha1(octokit::BODY).as_deref(),
        Some(octokit::SHA1)
    );
    let h = with(&[("x-hub-signature", octokit::SHA1)]);
    assert!(github.verify(&h, octokit::BODY, now()).is_ok());
    assert_eq!(
        github.verify(&h, b"{\"foo\":\"baz\"}", now()),
        Err(VerifyError::NoMatchingSignature)
    );
    let bad = with(&[("x-hub-signature", "sha1=abc")]);
    assert!(matches!(
        github.verify(&bad, octokit::BODY, now()),
        Err(VerifyError::MalformedHeader {
            header: "x-hub-signature",
            ..
        })
    ));
}

#[test]
fn sha1_is_ignored_when_sha256_is_present() {
    let github = GitHub::builder()
        .secret(octokit::SECRET)
        .allow_sha1()
        .build()
        .unwrap();
    // A valid SHA-1 cannot rescue a wrong SHA-256: no downgrade.
    let wrong256 = format!("sha256={}", "0".repeat(64));
    let h = with(&[
        ("x-hub-signature-256", &wrong256),
        ("x-hub-signature", octokit::SHA1),
    ]);
    assert_eq!(
        github.verify(&h, octokit::BODY, now()),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn missing_header_is_400_never_skipped() {
    let github = GitHub::new(docs::SECRET).unwrap();
    let r = github.verify(&with(&[("x-github-event", "push")]), docs::BODY, now());
    assert_eq!(r, Err(VerifyError::MissingHeader("x-hub-signature-256")));
}

#[test]
fn tampered_body_and_wrong_secret_are_401() {
    let github = GitHub::new(docs::SECRET).unwrap();
    let h = with(&[("x-hub-signature-256", docs::SIGNATURE)]);
    assert_eq!(
        github.verify(&h, b"Hello, World?", now()),
        Err(VerifyError::NoMatchingSignature)
    );
    let other = GitHub::new("It's a Secret to Nobody").unwrap();
    let r = other.verify(&h, docs::BODY, now());
    assert_eq!(r, Err(VerifyError::NoMatchingSignature));
    assert_eq!(r.unwrap_err().status(), 401);
}

#[test]
fn malformed_signatures_are_400() {
    let github = GitHub::new(docs::SECRET).unwrap();
    let hex = &docs::SIGNATURE[7..];
    for bad in [
        hex.to_owned(),
        format!("sha1={hex}"),
        format!("sha256={}", &hex[..63]),
        format!("sha256={hex}0"),
        format!("sha256={}z", &hex[..63]),
        "sha256=".to_owned(),
    ] {
        let r = github.verify(&with(&[("x-hub-signature-256", &bad)]), docs::BODY, now());
        assert!(
            matches!(
                r,
                Err(VerifyError::MalformedHeader {
                    header: "x-hub-signature-256",
                    ..
                })
            ),
            "{bad}: {r:?}"
        );
    }
}

#[test]
fn uppercase_hex_is_accepted() {
    let github = GitHub::new(docs::SECRET).unwrap();
    let upper = format!("sha256={}", docs::SIGNATURE[7..].to_ascii_uppercase());
    let h = with(&[("x-hub-signature-256", &upper)]);
    assert!(github.verify(&h, docs::BODY, now()).is_ok());
}

#[test]
fn rotation_reports_which_secret_matched() {
    let github = GitHub::builder()
        .secrets(["new secret", docs::SECRET])
        .build()
        .unwrap();
    let h = with(&[("x-hub-signature-256", docs::SIGNATURE)]);
    assert_eq!(
        github.verify(&h, docs::BODY, now()).unwrap().matched_key,
        MatchedKey::Secret(1)
    );
}

#[test]
fn sign_headers_round_trip() {
    let github = GitHub::new(docs::SECRET).unwrap();
    let h = github.sign_headers("d-1", "push", b"{}").unwrap();
    let v = github.verify(&h, b"{}", now()).unwrap();
    assert_eq!(v.id.as_deref(), Some("d-1"));
    assert_eq!(v.event_type.as_deref(), Some("push"));
}

#[test]
fn secrets_are_checked_at_build_and_never_printed() {
    assert_eq!(GitHub::new("").unwrap_err(), ConfigError::Empty("secret"));
    assert_eq!(GitHub::builder().build().unwrap_err(), ConfigError::NoKeys);
    let github = GitHub::builder()
        .secret("hunter2-secret")
        .allow_sha1()
        .build()
        .unwrap();
    let shown = format!(
        "{github:?} {:?}",
        GitHub::builder().secret("hunter2-secret")
    );
    assert!(!shown.contains("hunter2"), "{shown}");
}
