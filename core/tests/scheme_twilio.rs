//! Twilio: the vectors of twilio/twilio-python `tests/unit/test_request_validator.py`,
//! through the URL the receive pipeline rebuilds, then the negatives.

use std::time::SystemTime;

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::Twilio;
use webhooks_core::{ConfigError, MatchedKey, PublicUrl, RequestHead, Verifier, VerifyError};

// twilio/twilio-python tests/unit/test_request_validator.py (`setUp`).
const TOKEN: &str = "12345";
const URL: &str = "https://mycompany.com/myapp.php?foo=1&bar=2";
/// `self.params`, form-encoded as Twilio POSTs them.
const FORM: &[u8] = b"CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&To=%2B18005551212";
const EXPECTED: &str = "RSOYDt4T1cUTdK1PDd93/VVr8B8=";
/// `test_compute_signature_duplicate_query_dict`.
const DUPLICATES: &[u8] = b"Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234";
const DUPLICATES_EXPECTED: &str = "IK+Dwps556ElfBT0I3Rgjkr1wJU=";
/// `test_validation_of_body_succeeds` and `test_compute_hash_unicode`.
const JSON_BODY: &[u8] = br#"{"property": "value", "boolean": true}"#;
const BODY_HASH: &str = "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620";
const JSON_EXPECTED: &str = "a9nBmqA0ju/hNViExpshrM61xv4=";

fn twilio(base: &str) -> Twilio {
    Twilio::builder()
        .auth_token(TOKEN)
        .public_url(PublicUrl::base(base).unwrap())
        .build()
        .unwrap()
}

fn sig(value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("x-twilio-signature", HeaderValue::from_str(value).unwrap());
    h
}

fn now() -> SystemTime {
    SystemTime::now()
}

#[test]
fn published_vectors_verify_through_the_rebuilt_url() {
    let t = twilio("https://mycompany.com");
    let headers = sig(EXPECTED);
    let head = RequestHead::from_path_and_query("/myapp.php?foo=1&bar=2", &headers);
    let v = t.verify_head(head, FORM, now()).unwrap();
    assert_eq!((v.scheme, v.matched_key), ("twilio", MatchedKey::Secret(0)));
    assert_eq!(t.sign(URL, FORM).unwrap(), EXPECTED);
    // Repeated names sorted by value, as the SDK's MultiDict/QueryDict cases.
    assert_eq!(t.sign(URL, DUPLICATES).unwrap(), DUPLICATES_EXPECTED);
    t.verify_url(URL, &sig(DUPLICATES_EXPECTED), DUPLICATES, now())
        .unwrap();
}

#[test]
fn ports_are_added_and_removed_as_the_sdk_does() {
    let t = twilio("https://mycompany.com");
    // test_validation_removes_port_on_https
    let with_port = URL.replace(".com", ".com:1234");
    t.verify_url(&with_port, &sig(EXPECTED), FORM, now())
        .unwrap();
    // test_validation_removes_port_on_http: signed with the port kept.
    let http_port = with_port.replace("https", "http");
    t.verify_url(
        &http_port,
        &sig("Zmvh+3yNM1Phv2jhDCwEM3q5ebU="),
        FORM,
        now(),
    )
    .unwrap();
    // test_validation_adds_port_on_https / _on_http
    t.verify_url(URL, &sig("kvajT1Ptam85bY51eRf/AJRuM3w="), FORM, now())
        .unwrap();
    let http = URL.replace("https", "http");
    t.verify_url(&http, &sig("0ZXoZLH/DfblKGATFgpif+LLRf4="), FORM, now())
        .unwrap();
}

#[test]
fn json_bodies_are_bound_by_body_sha256() {
    let t = twilio("https://mycompany.com");
    assert_eq!(Twilio::body_sha256_hex(JSON_BODY), BODY_HASH);
    let url = format!("{URL}&bodySHA256={BODY_HASH}");
    t.verify_url(&url, &sig(JSON_EXPECTED), JSON_BODY, now())
        .unwrap();
    // The URL is authentic but the body is not the one hashed into it.
    assert_eq!(
        t.verify_url(
            &url,
            &sig(JSON_EXPECTED),
            br#"{"property": "other"}"#,
            now()
        ),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn tampering_and_wrong_tokens_are_401() {
    let t = twilio("https://mycompany.com");
    let tampered = b"CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=9999&From=%2B14158675309&To=%2B18005551212";
    assert_eq!(
        t.verify_url(URL, &sig(EXPECTED), tampered, now()),
        Err(VerifyError::NoMatchingSignature)
    );
    let other_url = URL.replace("foo=1", "foo=3");
    assert_eq!(
        t.verify_url(&other_url, &sig(EXPECTED), FORM, now()),
        Err(VerifyError::NoMatchingSignature)
    );
    let wrong = Twilio::builder()
        .auth_token("54321")
        .public_url(PublicUrl::base("https://mycompany.com").unwrap())
        .build()
        .unwrap();
    assert_eq!(
        wrong.verify_url(URL, &sig(EXPECTED), FORM, now()),
        Err(VerifyError::NoMatchingSignature)
    );
    // The host a proxy forwarded is not the one Twilio signed.
    let internal = twilio("http://internal:8080");
    let headers = sig(EXPECTED);
    let head = RequestHead::from_path_and_query("/myapp.php?foo=1&bar=2", &headers);
    assert_eq!(
        internal
            .verify_head(head, FORM, now())
            .unwrap_err()
            .status(),
        401
    );
}

#[test]
fn rotation_accepts_the_secondary_token() {
    let t = Twilio::builder()
        .auth_tokens(["new-token", TOKEN])
        .public_url(PublicUrl::exact(URL).unwrap())
        .build()
        .unwrap();
    let v = t.verify(&sig(EXPECTED), FORM, now()).unwrap();
    assert_eq!(v.matched_key, MatchedKey::Secret(1));
}

#[test]
fn missing_and_malformed_are_400() {
    let t = twilio("https://mycompany.com");
    let err = t
        .verify_url(URL, &HeaderMap::new(), FORM, now())
        .unwrap_err();
    assert_eq!(err, VerifyError::MissingHeader("x-twilio-signature"));
    assert_eq!(err.status(), 400);
    for bad in ["not base64!", "AAAA", "RSOYDt4T1cUTdK1PDd93/VVr8B8=AAAA"] {
        let err = t.verify_url(URL, &sig(bad), FORM, now()).unwrap_err();
        assert_eq!(err.status(), 400, "{bad}");
    }
    let err = t
        .verify_url(URL, &sig(EXPECTED), b"a=%zz", now())
        .unwrap_err();
    assert_eq!(err.status(), 400);
}

#[test]
fn the_idempotency_token_is_the_id_and_debug_is_redacted() {
    let t = twilio("https://mycompany.com");
    let mut headers = t.sign_headers(URL, FORM).unwrap();
    headers.insert("i-twilio-idempotency-token", "idem-1".parse().unwrap());
    let v = t.verify_url(URL, &headers, FORM, now()).unwrap();
    assert_eq!(v.id.as_deref(), Some("idem-1"));
    let shown = format!("{t:?}");
    assert!(!shown.contains(TOKEN), "{shown}");
    assert_eq!(
        Twilio::builder().auth_token(TOKEN).build().unwrap_err(),
        ConfigError::Setting("public_url is required: Twilio signs the URL it called")
    );
}

/// Issue 25, item 5: webhook URLs with HTTP Basic credentials. Vectors from
/// twilio/twilio-node `spec/validation.spec.js` (commit 45d3d65a):
/// "should validate urls with credentials" (signed as given), "should
/// validate urls with just username", and "should validate urls with
/// credentials by adding port" (signed over the `:443` form: the colon in
/// `user:pass` is not a port separator). Through `verify_url` and through a
/// `PublicUrl` configured with the credentials.
#[test]
fn urls_with_credentials_verify_as_the_sdk_does() {
    let with_creds = "https://user:pass@mycompany.com/myapp.php?foo=1&bar=2";
    let just_user = "https://user@mycompany.com/myapp.php?foo=1&bar=2";
    let cases = [
        (
            "https://user:pass@mycompany.com",
            with_creds,
            "CukzLTc1tT5dXEDIHm/tKBanW10=",
        ),
        (
            "https://user@mycompany.com",
            just_user,
            "2YRLlVAflCqxaNicjMpJcSTgzSs=",
        ),
        (
            "https://user:pass@mycompany.com",
            with_creds,
            "ZQFR1PTIZXF2MXB8ZnKCvnnA+rI=",
        ),
    ];
    for (base, url, signature) in cases {
        let t = twilio(base);
        t.verify_url(url, &sig(signature), FORM, now())
            .unwrap_or_else(|e| panic!("{url} {signature}: {e}"));
        let headers = sig(signature);
        let head = RequestHead::from_path_and_query("/myapp.php?foo=1&bar=2", &headers);
        t.verify_head(head, FORM, now())
            .unwrap_or_else(|e| panic!("{base} {signature}: {e}"));
        // Other credentials are another URL.
        let other = url.replace("user", "admin");
        assert_eq!(
            t.verify_url(&other, &sig(signature), FORM, now()),
            Err(VerifyError::NoMatchingSignature)
        );
    }
    // The `:443` form is what the adding-port vector signs.
    let t = twilio("https://user:pass@mycompany.com");
    assert_eq!(
        t.sign(
            "https://user:pass@mycompany.com:443/myapp.php?foo=1&bar=2",
            FORM
        )
        .unwrap(),
        "ZQFR1PTIZXF2MXB8ZnKCvnnA+rI="
    );
    assert!(!format!("{t:?}").contains("pass"));
}
