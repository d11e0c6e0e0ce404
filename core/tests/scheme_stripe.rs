//! The Stripe scheme on the fixtures of Stripe's own libraries (each cited
//! above its constant), then every rule one test at a time.

use std::time::{Duration, SystemTime};

use hmac::{KeyInit as _, Mac as _};
use http::{HeaderMap, HeaderValue};
use webhooks_core::scheme::Stripe;
use webhooks_core::{ConfigError, MatchedKey, Verifier, VerifyError};

/// stripe/stripe-dotnet `src/StripeTests/Services/Events/EventUtilityTest.cs`:
/// secret `webhook_secret`, timestamp 1533204620, the header below, over
/// `src/StripeTests/Resources/event_test_signature.json` (with its final
/// newline; the test notes it was computed with
/// `(echo -n "1533204620." && cat event_test_signature.json) | openssl sha256 -hmac "webhook_secret"`).
/// `ConstructEvent` accepts it 100 s later; `RejectOutdatedTimestamp` refuses
/// it 400 s later with a 300 s tolerance; `RejectIncorrectSignature` refuses
/// the body with `this_changes_the_json` appended.
mod dotnet {
    pub(crate) const SECRET: &str = "webhook_secret";
    pub(crate) const TIMESTAMP: u64 = 1_533_204_620;
    pub(crate) const HEADER: &str = "t=1533204620,v1=2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7,v0=63f3a72374a733066c4be69ed7f8e5ac85c22c9f0a6a612ab9a025a9e4ee7eef";
    pub(crate) const BODY: &str = r#"{
  "id": "evt_123",
  "object": "event",
  "account": "acct_123",
  "api_version": "2017-05-25",
  "created": 1533204620,
  "data": {
    "object": {
      "id": "cus_123",
      "object": "customer",
      "created": 123456789,
      "email": "test@stripe.com",
      "livemode": false,
      "metadata": {}
    }
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {
    "id": "req_123",
    "idempotency_key": "idempotency-key-123"
  },
  "type": "customer.created"
}
"#;
    /// `ValidateSignatureHandlesIncorrectHeaderValues`: every one must be refused.
    pub(crate) const BAD_HEADERS: [&str; 7] = [
        "t=,v1=2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7,v0=63f3a72374a733066c4be69ed7f8e5ac85c22c9f0a6a612ab9a025a9e4ee7eef",
        "t,v1=,v0=",
        "t,v1=,v0",
        "t,v1=,",
        "t,,",
        ",,",
        "t",
    ];
}

/// The .NET fixture's secret is not an endpoint secret (`whsec_…`), which
/// `Stripe::new` refuses: built through the escape hatch.
fn dotnet_verifier() -> Stripe {
    Stripe::builder()
        .secret_without_format_check(dotnet::SECRET)
        .build()
        .unwrap()
}

/// stripe/stripe-python `tests/test_webhook.py`, stripe/stripe-go
/// `webhook/client_test.go` and stripe/stripe-node `test/Webhook.spec.ts` all
/// use this endpoint secret and key the HMAC with its bytes as given (their
/// `_compute_signature` / `ComputeSignature` / `generateTestHeaderString`).
const SDK_SECRET: &str = "whsec_test_secret";
/// stripe/stripe-python `tests/test_webhook.py` (`DUMMY_WEBHOOK_PAYLOAD`).
const SDK_PAYLOAD: &str = r#"{
  "id": "evt_test_webhook",
  "object": "event",
  "data": { "object": { "id": "rdr_123", "object": "terminal.reader" } }
}"#;

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

fn headers(value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("stripe-signature", HeaderValue::from_str(value).unwrap());
    h
}

/// An independent HMAC over `{t}.{body}`, keyed with the secret's bytes.
fn reference_v1(secret: &str, t: u64, body: &str) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.{body}").as_bytes());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn malformed(r: Result<webhooks_core::Verified, VerifyError>) -> bool {
    matches!(
        r,
        Err(VerifyError::MalformedHeader {
            header: "stripe-signature",
            ..
        })
    )
}

// ---------------------------------------------------------------------------
// Published fixtures
// ---------------------------------------------------------------------------

#[test]
fn dotnet_fixture_verifies_and_reads_the_event() {
    let stripe = dotnet_verifier();
    let v = stripe
        .verify(
            &headers(dotnet::HEADER),
            dotnet::BODY.as_bytes(),
            at(dotnet::TIMESTAMP + 100),
        )
        .unwrap();
    assert_eq!(v.scheme, "stripe");
    assert_eq!(v.id.as_deref(), Some("evt_123"));
    assert_eq!(v.event_type.as_deref(), Some("customer.created"));
    assert_eq!(v.timestamp, Some(dotnet::TIMESTAMP));
    assert_eq!(v.matched_key, MatchedKey::Secret(0));
}

#[test]
fn dotnet_fixture_sign_reproduces_the_v1_signature() {
    let stripe = dotnet_verifier();
    let signed = stripe.sign(dotnet::TIMESTAMP, dotnet::BODY.as_bytes());
    assert!(dotnet::HEADER.starts_with(&signed), "{signed}");
}

#[test]
fn dotnet_fixture_outdated_timestamp_is_refused() {
    let stripe = dotnet_verifier();
    let r = stripe.verify(
        &headers(dotnet::HEADER),
        dotnet::BODY.as_bytes(),
        at(dotnet::TIMESTAMP + 300 + 100),
    );
    assert_eq!(r, Err(VerifyError::TimestampTooOld));
    assert_eq!(VerifyError::TimestampTooOld.status(), 401);
}

#[test]
fn dotnet_fixture_changed_body_is_refused() {
    let stripe = dotnet_verifier();
    let body = format!("{}this_changes_the_json", dotnet::BODY);
    let r = stripe.verify(
        &headers(dotnet::HEADER),
        body.as_bytes(),
        at(dotnet::TIMESTAMP),
    );
    assert_eq!(r, Err(VerifyError::NoMatchingSignature));
}

#[test]
fn dotnet_incorrect_header_values_are_400() {
    let stripe = dotnet_verifier();
    for bad in dotnet::BAD_HEADERS {
        let r = stripe.verify(&headers(bad), b"{}", at(dotnet::TIMESTAMP));
        assert!(malformed(r.clone()), "{bad:?}: {r:?}");
        assert_eq!(r.unwrap_err().status(), 400);
    }
}

#[test]
fn whsec_secret_is_used_as_given_not_base64_decoded() {
    let stripe = Stripe::new(SDK_SECRET).unwrap();
    let t = 1_700_000_000;
    let expected = format!("t={t},v1={}", reference_v1(SDK_SECRET, t, SDK_PAYLOAD));
    assert_eq!(stripe.sign(t, SDK_PAYLOAD.as_bytes()), expected);
    let v = stripe
        .verify(&headers(&expected), SDK_PAYLOAD.as_bytes(), at(t))
        .unwrap();
    assert_eq!(v.id.as_deref(), Some("evt_test_webhook"));
    assert_eq!(v.event_type, None, "the payload has no type");
}

/// stripe-python `test_header_contains_valid_signature`, stripe-go
/// `TestTokenNew` (",v1=bad_signature should be ignored"), stripe-node
/// "at least one valid signature" (",v1=potato").
#[test]
fn an_unreadable_extra_signature_is_ignored() {
    let stripe = Stripe::new(SDK_SECRET).unwrap();
    let t = 1_700_000_000;
    for extra in [",v1=bad_signature", ",v1=potato", ",v1=deadbeef"] {
        let value = stripe.sign(t, SDK_PAYLOAD.as_bytes()) + extra;
        assert!(
            stripe
                .verify(&headers(&value), SDK_PAYLOAD.as_bytes(), at(t))
                .is_ok(),
            "{value}"
        );
    }
}

/// stripe-python `test_raise_on_no_signatures_with_expected_scheme`, stripe-go
/// `TestTokenNew` (scheme `v0`): a correct MAC under `v0` is not a `v1`.
#[test]
fn v0_only_is_not_enough() {
    let stripe = Stripe::new(SDK_SECRET).unwrap();
    let t = 1_700_000_000;
    let value = format!("t={t},v0={}", reference_v1(SDK_SECRET, t, SDK_PAYLOAD));
    let r = stripe.verify(&headers(&value), SDK_PAYLOAD.as_bytes(), at(t));
    assert_eq!(r, Err(VerifyError::NoMatchingSignature));
}

/// stripe-python `test_raise_on_malformed_header`, stripe-node "bad_header".
#[test]
fn sdk_malformed_headers_are_400() {
    let stripe = Stripe::new(SDK_SECRET).unwrap();
    for bad in ["i'm not even a real signature header", "bad_header"] {
        assert!(
            malformed(stripe.verify(&headers(bad), b"{}", at(0))),
            "{bad}"
        );
    }
}

/// stripe-go `TestTokenNew`: a header carrying signatures by the old and the
/// rolled secret verifies with either.
#[test]
fn rolled_secret_header_verifies_with_either_secret() {
    let t = 1_700_000_000;
    let rolled = format!("{SDK_SECRET}_rolled_key");
    let value = format!(
        "t={t},v1={},v1={}",
        reference_v1(SDK_SECRET, t, SDK_PAYLOAD),
        reference_v1(&rolled, t, SDK_PAYLOAD)
    );
    for secret in [SDK_SECRET, rolled.as_str()] {
        let stripe = Stripe::new(secret).unwrap();
        assert!(
            stripe
                .verify(&headers(&value), SDK_PAYLOAD.as_bytes(), at(t))
                .is_ok()
        );
    }
}

// ---------------------------------------------------------------------------
// Rules
// ---------------------------------------------------------------------------

#[test]
fn missing_header_is_400_never_skipped() {
    let stripe = Stripe::new(SDK_SECRET).unwrap();
    let r = stripe.verify(&HeaderMap::new(), b"{}", at(0));
    assert_eq!(r, Err(VerifyError::MissingHeader("stripe-signature")));
    assert_eq!(r.unwrap_err().status(), 400);
}

#[test]
fn duplicate_timestamp_is_malformed() {
    let stripe = Stripe::new(SDK_SECRET).unwrap();
    let t = 1_700_000_000;
    let signed = stripe.sign(t, b"{}");
    for value in [
        format!("{signed},t={t}"),
        format!("t={t},{signed}"),
        format!("t=1,{signed}"),
    ] {
        assert!(
            malformed(stripe.verify(&headers(&value), b"{}", at(t))),
            "{value}"
        );
    }
}

#[test]
fn stale_and_future_timestamps_are_refused_at_the_edge() {
    let stripe = Stripe::new(SDK_SECRET).unwrap();
    let t = 1_700_000_000;
    let h = stripe.sign_headers(t, b"{}").unwrap();
    assert!(stripe.verify(&h, b"{}", at(t + 300)).is_ok());
    assert!(stripe.verify(&h, b"{}", at(t - 300)).is_ok());
    assert_eq!(
        stripe.verify(&h, b"{}", at(t + 301)),
        Err(VerifyError::TimestampTooOld)
    );
    assert_eq!(
        stripe.verify(&h, b"{}", at(t - 301)),
        Err(VerifyError::TimestampTooNew)
    );
}

#[test]
fn custom_tolerance_applies() {
    let stripe = Stripe::builder()
        .secret(SDK_SECRET)
        .tolerance(Duration::from_secs(10))
        .build()
        .unwrap();
    let h = stripe.sign_headers(1000, b"{}").unwrap();
    assert!(stripe.verify(&h, b"{}", at(1010)).is_ok());
    assert_eq!(
        stripe.verify(&h, b"{}", at(1015)),
        Err(VerifyError::TimestampTooOld)
    );
}

#[test]
fn tampered_body_and_wrong_secret_are_401() {
    let stripe = Stripe::new(SDK_SECRET).unwrap();
    let h = stripe.sign_headers(1000, b"{\"a\":1}").unwrap();
    let r = stripe.verify(&h, b"{\"a\":2}", at(1000));
    assert_eq!(r, Err(VerifyError::NoMatchingSignature));
    assert_eq!(r.unwrap_err().status(), 401);
    let other = Stripe::new("whsec_other").unwrap();
    assert_eq!(
        other.verify(&h, b"{\"a\":1}", at(1000)),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn rotation_reports_which_secret_matched() {
    let stripe = Stripe::builder()
        .secrets(["whsec_new", "whsec_old"])
        .build()
        .unwrap();
    let by_old = Stripe::new("whsec_old")
        .unwrap()
        .sign_headers(5, b"{}")
        .unwrap();
    let by_new = Stripe::new("whsec_new")
        .unwrap()
        .sign_headers(5, b"{}")
        .unwrap();
    assert_eq!(
        stripe.verify(&by_old, b"{}", at(5)).unwrap().matched_key,
        MatchedKey::Secret(1)
    );
    assert_eq!(
        stripe.verify(&by_new, b"{}", at(5)).unwrap().matched_key,
        MatchedKey::Secret(0)
    );
}

#[test]
fn body_without_an_id_gives_none() {
    let stripe = Stripe::new(SDK_SECRET).unwrap();
    for body in [&b"{}"[..], b"not json", br#"{"id":42,"type":"x"}"#, b""] {
        let h = stripe.sign_headers(5, body).unwrap();
        let v = stripe.verify(&h, body, at(5)).unwrap();
        assert_eq!(v.id, None, "{body:?}");
    }
}

#[test]
fn secrets_are_checked_at_build() {
    assert_eq!(Stripe::new("").unwrap_err(), ConfigError::Empty("secret"));
    assert!(matches!(
        Stripe::new("whsec_abc\n"),
        Err(ConfigError::Invalid { .. })
    ));
    assert_eq!(Stripe::builder().build().unwrap_err(), ConfigError::NoKeys);
    // The .NET fixture's secret is refused by `new`: not `whsec_…`.
    assert!(matches!(
        Stripe::new(dotnet::SECRET),
        Err(ConfigError::Invalid { .. })
    ));
    // An API key in place of the endpoint secret: refused, naming the one to use.
    let err = Stripe::new("sk_live_51H8xyz").unwrap_err().to_string();
    assert!(err.contains("API key") && err.contains("whsec_"), "{err}");
}

#[test]
fn debug_never_prints_secrets() {
    let stripe = Stripe::builder().secret("whsec_topsecret").build().unwrap();
    let shown = format!(
        "{stripe:?} {:?}",
        Stripe::builder().secret("whsec_topsecret")
    );
    assert!(!shown.contains("topsecret"), "{shown}");
}

#[test]
fn many_signatures_cost_is_bounded() {
    let stripe = Stripe::new(SDK_SECRET).unwrap();
    let mut value = String::from("t=5");
    for _ in 0..1000 {
        value.push_str(",v1=");
        value.push_str(&"0".repeat(64));
    }
    value.push(',');
    value.push_str(&stripe.sign(5, b"{}")[4..]);
    // The valid signature is past the entries looked at: refused, cheaply.
    assert_eq!(
        stripe.verify(&headers(&value), b"{}", at(5)),
        Err(VerifyError::NoMatchingSignature)
    );
}
