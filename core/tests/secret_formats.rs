//! Each provider refuses, when built, the credentials it documents that are
//! not its webhook secret, with a reason naming the secret to use; its own
//! secrets are still accepted.

use webhooks_core::ConfigError;
use webhooks_core::PublicUrl;
use webhooks_core::scheme::{GitHub, Paddle, Shopify, Slack, Stripe, Twilio};

/// The reason of an `Invalid` secret, which must never repeat the value.
fn reason(result: Result<(), ConfigError>, value: &str) -> String {
    match result {
        Err(e @ ConfigError::Invalid { what: "secret", .. }) => {
            let text = e.to_string();
            assert!(!text.contains(value), "the error repeats the value: {text}");
            text
        }
        other => panic!("{value}: expected an invalid secret, got {other:?}"),
    }
}

fn twilio(token: &str) -> Result<(), ConfigError> {
    Twilio::builder()
        .auth_token(token)
        .public_url(PublicUrl::exact("https://example.com/sms").unwrap())
        .build()
        .map(drop)
}

#[test]
fn stripe_takes_only_endpoint_secrets() {
    let text = reason(Stripe::new("sk_live_51Habc").map(drop), "sk_live_51Habc");
    assert!(
        text.contains("API key") && text.contains("whsec_"),
        "{text}"
    );
    let text = reason(Stripe::new("rk_test_51Habc").map(drop), "rk_test_51Habc");
    assert!(text.contains("API key"), "{text}");
    let text = reason(Stripe::new("pk_live_51Habc").map(drop), "pk_live_51Habc");
    assert!(text.contains("publishable key"), "{text}");
    let text = reason(Stripe::new("shh").map(drop), "shh");
    assert!(text.contains("whsec_"), "{text}");
    // Rotation: one bad secret among good ones fails the whole build.
    assert!(
        Stripe::builder()
            .secrets(["whsec_a", "sk_live_b"])
            .build()
            .is_err()
    );
    assert!(Stripe::new("whsec_abc").is_ok());
}

#[test]
fn github_refuses_tokens() {
    for token in [
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        "github_pat_11ABC",
        "ghs_abc",
    ] {
        let text = reason(GitHub::new(token).map(drop), token);
        assert!(
            text.contains("GitHub token") && text.contains("webhook"),
            "{text}"
        );
    }
    assert!(GitHub::new("It's a Secret to Everybody").is_ok());
}

#[test]
fn slack_refuses_tokens() {
    for token in ["xoxb-1234-5678-abc", "xoxp-1234-abc", "xapp-1-A0-abc"] {
        let text = reason(Slack::new(token).map(drop), token);
        assert!(text.contains("Signing Secret"), "{text}");
    }
    assert!(Slack::new("8f742231b10e8888abcd99yyyzzz85a5").is_ok());
}

#[test]
fn twilio_refuses_sids() {
    let account = format!("AC{}", "0123456789abcdef".repeat(2));
    let text = reason(twilio(&account), &account);
    assert!(
        text.contains("Account SID") && text.contains("Auth Token"),
        "{text}"
    );
    let key = format!("SK{}", "0123456789ABCDEF".repeat(2));
    let text = reason(twilio(&key), &key);
    assert!(text.contains("API key SID"), "{text}");
    // An auth token is 32 hex digits; anything not shaped as a SID passes.
    assert!(twilio("12345").is_ok());
    assert!(twilio(&"0123456789abcdef".repeat(2)).is_ok());
    assert!(twilio(&format!("AC{}", "z".repeat(32))).is_ok());
}

#[test]
fn paddle_refuses_api_keys() {
    let key = "pdl_live_apikey_01gtgztp8f4kek3yd4g1wrksa3_q6TGTJyvoIz7LDtXT65bX7_AQO";
    let text = reason(Paddle::new(key).map(drop), key);
    assert!(text.contains("notification destination"), "{text}");
    let key = "pdl_sdbx_apikey_01gtgztp8f4kek3yd4g1wrksa3_abc";
    reason(Paddle::new(key).map(drop), key);
    assert!(
        Paddle::new("pdl_ntfset_01gkpjp8bkm3tm53kdgkx6sms7_6h3qd3uFSi9YCD3OLYAShQI90XTI5vEI")
            .is_ok()
    );
}

#[test]
fn shopify_refuses_access_tokens() {
    let token = "shpat_0123456789abcdef0123456789abcdef";
    let text = reason(Shopify::new(token).map(drop), token);
    assert!(text.contains("client secret"), "{text}");
    assert!(Shopify::new("shpss_0123456789abcdef").is_ok());
}
