//! `GenericHmac` beyond SHA-256 over the body: other digests, base64,
//! signatures in the body, signed-content templates with the URL, owned
//! names. Published vectors it reproduces by configuration alone:
//!
//! * RFC 4231 section 4.3, test case 2 (HMAC-SHA-512, key `Jefe`);
//! * HubSpot/hubspot-api-python `tests/spec/utils/test_signature.py`
//!   (`test_get_signature__v3`: `POST{url}{body}{timestamp}`);
//! * developer.squareup.com/docs/webhooks/step3validate (`{url}{body}`).

use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::{GenericHmac, HmacAlgorithm, SignatureEncoding, TimestampUnit};
use webhooks_core::{ConfigError, PublicUrl, RequestHead, Verifier, VerifyError};

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

#[test]
fn sha512_hex_reproduces_rfc_4231() {
    let expected = "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737";
    // Names built at run time: no `&'static str` needed.
    let (scheme, header) = (String::from("rfc4231"), format!("x-{}-sig", "rfc"));
    let g = GenericHmac::builder(scheme, header)
        .secret("Jefe")
        .algorithm(HmacAlgorithm::Sha512)
        .build()
        .unwrap();
    let body = b"what do ya want for nothing?";
    let v = g
        .verify(&with(&[("x-rfc-sig", expected)]), body, at(0))
        .unwrap();
    assert_eq!(v.scheme, "rfc4231");
    assert_eq!(g.sign(0, body), expected);
    // A SHA-256-length signature is malformed for SHA-512.
    let err = g
        .verify(&with(&[("x-rfc-sig", &expected[..64])]), body, at(0))
        .unwrap_err();
    assert_eq!(err.status(), 400);
    assert!(matches!(
        err,
        VerifyError::MalformedHeader {
            header: "x-rfc-sig",
            ..
        }
    ));
}

#[test]
fn hubspot_v3_by_configuration() {
    let g = GenericHmac::builder("hubspot-generic", "x-hubspot-signature-v3")
        .secret("yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy")
        .encoding(SignatureEncoding::Base64)
        .timestamp_header("x-hubspot-request-timestamp", TimestampUnit::Milliseconds)
        .signed_content("POST{url}{body}{timestamp}")
        .unwrap()
        .public_url(PublicUrl::base("https://www.example.com").unwrap())
        .build()
        .unwrap();
    let headers = with(&[
        (
            "x-hubspot-signature-v3",
            "HPW73RUtKmcYoEDADG0s6MmGFWUzWJKAW07r8RDgcQw=",
        ),
        ("x-hubspot-request-timestamp", "15000000"),
    ]);
    let body = b"{'example_field':'example_value'}";
    let head = RequestHead::new("/webhook_uri", &headers);
    let v = g.verify_head(head, body, at(15_000)).unwrap();
    assert_eq!(v.timestamp, Some(15_000));
    assert_eq!(
        g.verify_head(head, body, at(15_301)),
        Err(VerifyError::TimestampTooOld)
    );
    let elsewhere = RequestHead::new("/other", &headers);
    assert_eq!(
        g.verify_head(elsewhere, body, at(15_000)),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn square_by_configuration_with_an_exact_url() {
    let g = GenericHmac::builder("square-generic", "x-square-hmacsha256-signature")
        .secret("asdf1234")
        .encoding(SignatureEncoding::Base64)
        .signed_content("{url}{body}")
        .unwrap()
        .public_url(PublicUrl::exact("https://example.com/webhook").unwrap())
        .build()
        .unwrap();
    let headers = with(&[(
        "x-square-hmacsha256-signature",
        "2kRE5qRU2tR+tBGlDwMEw2avJ7QM4ikPYD/PJ3bd9Og=",
    )]);
    g.verify(&headers, br#"{"hello":"world"}"#, at(0)).unwrap();
    assert_eq!(
        g.verify(&headers, br#"{"hello":"world!"}"#, at(0)),
        Err(VerifyError::NoMatchingSignature)
    );
}

/// A Mailgun-like body carrying its own signature; the expected value was
/// computed with Python's `hmac` (`hmac.new(b"mailgun-like-key",
/// b"1529006854a8ce…de0", hashlib.sha256).hexdigest()`).
#[test]
fn signature_and_timestamp_inside_a_json_body() {
    let g = GenericHmac::builder("body-signed", "unused")
        .secret("mailgun-like-key")
        .signature_json_field("signature")
        .timestamp_json_field("timestamp", TimestampUnit::Seconds)
        .signed_content("{json:timestamp}{json:token}")
        .unwrap()
        .build()
        .unwrap();
    let body = br#"{"timestamp":"1529006854","token":"a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0","signature":"b4d0df612ce9dd2c28e9acdb5776f75ffe4bbda64c11246560bc44ebf6a32109","event":"delivered"}"#;
    let v = g
        .verify(&HeaderMap::new(), body, at(1_529_006_854))
        .unwrap();
    assert_eq!(v.timestamp, Some(1_529_006_854));
    assert_eq!(
        g.verify(&HeaderMap::new(), body, at(1_529_007_200)),
        Err(VerifyError::TimestampTooOld)
    );
    let other_token = String::from_utf8_lossy(body).replace("a8ce", "a8cf");
    assert_eq!(
        g.verify(&HeaderMap::new(), other_token.as_bytes(), at(1_529_006_854)),
        Err(VerifyError::NoMatchingSignature)
    );
    let missing = br#"{"timestamp":"1529006854","token":"t"}"#;
    assert_eq!(
        g.verify(&HeaderMap::new(), missing, at(1_529_006_854)),
        Err(VerifyError::MissingHeader("signature"))
    );
    assert_eq!(
        g.verify(&HeaderMap::new(), b"not json", at(0))
            .unwrap_err()
            .status(),
        400
    );
}

#[test]
fn sha1_base64_with_a_header_in_the_template() {
    let g = GenericHmac::builder("sha1-generic", "x-sig")
        .secret("k")
        .algorithm(HmacAlgorithm::Sha1)
        .encoding(SignatureEncoding::Base64)
        .signed_content("{header:X-Account}|{body}")
        .unwrap()
        .build()
        .unwrap();
    let mut headers = g.sign_headers(0, b"body").unwrap();
    // Signed without the account header: an empty value was signed.
    g.verify(&headers, b"body", at(0)).unwrap();
    headers.insert("x-account", "acct_1".parse().unwrap());
    assert_eq!(
        g.verify(&headers, b"body", at(0)),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn template_and_consistency_errors_at_build() {
    let b = || GenericHmac::builder("x", "x-sig").secret("k");
    for bad in ["{nope}", "{body", "}", "{header:bad name}", "{json:}"] {
        assert!(b().signed_content(bad).is_err(), "{bad}");
    }
    let needs_ts = b().signed_content("{timestamp}{body}").unwrap().build();
    assert!(matches!(needs_ts, Err(ConfigError::Setting(_))));
    let needs_url = b().signed_content("{url}{body}").unwrap().build();
    assert!(matches!(needs_url, Err(ConfigError::Setting(_))));
    let body_in_body = b().signature_json_field("sig").build();
    assert!(matches!(body_in_body, Err(ConfigError::Setting(_))));
    let both = b()
        .content_prefix("v0:")
        .signed_content("{body}")
        .unwrap()
        .build();
    assert!(matches!(both, Err(ConfigError::Setting(_))));
    let shown = format!(
        "{:?}",
        b().signed_content("v0:{body}").unwrap().build().unwrap()
    );
    assert!(
        shown.contains("v0:{body}") && !shown.contains("\"k\""),
        "{shown}"
    );
}
