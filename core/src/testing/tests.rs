use std::time::Duration;

use super::*;
use crate::{Verifier as _, VerifyError};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

#[test]
fn iso_dates() {
    assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
    assert_eq!(iso8601(1_700_000_000), "2023-11-14T22:13:20Z");
    assert_eq!(iso8601(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(iso8601(4_107_542_399), "2100-02-28T23:59:59Z");
}

#[test]
fn signs_now_with_fresh_ids() {
    let v = StandardWebhooks::new(SECRET).unwrap();
    let a = TestDelivery::new("{}");
    let b = TestDelivery::new("{}");
    assert_ne!(a.delivery_id(), b.delivery_id());
    let headers = a.signed_headers(&v).unwrap();
    assert!(v.verify(&headers, a.body(), SystemTime::now()).is_ok());
}

#[test]
fn borrowed_bodies_are_copied() {
    let body = String::from(r#"{"a":1}"#);
    let from_str = TestDelivery::from(body.as_str());
    let from_string = TestDelivery::from(&body);
    let from_bytes = TestDelivery::from(body.as_bytes());
    drop(body);
    for d in [from_str, from_string, from_bytes] {
        assert_eq!(d.body().as_ref(), br#"{"a":1}"#);
    }
}

#[test]
fn ids_in_the_body_make_body_digest_deliveries_distinct() {
    let same = [TestDelivery::new("{}"), TestDelivery::new("{}")];
    assert_eq!(same[0].body(), same[1].body());
    let distinct = [
        TestDelivery::new(r#"{"a":1}"#).id_in_body("test_id"),
        TestDelivery::new(r#"{"a":1}"#).id_in_body("test_id"),
    ];
    assert_ne!(distinct[0].body(), distinct[1].body());
    let body: serde_json::Value = serde_json::from_slice(distinct[0].body()).unwrap();
    assert_eq!(body["a"], 1);
    assert_eq!(body["test_id"], distinct[0].delivery_id());
}

#[test]
fn a_set_timestamp_is_signed() {
    let v = StandardWebhooks::new(SECRET).unwrap();
    let d = TestDelivery::new("{}").timestamp(1_000).id("msg_1");
    let headers = d.signed_headers(&v).unwrap();
    assert_eq!(headers["webhook-timestamp"], "1000");
    assert_eq!(headers["webhook-id"], "msg_1");
    let err = v.verify(&headers, d.body(), SystemTime::now()).unwrap_err();
    assert_eq!(err, VerifyError::TimestampTooOld);
    let then = UNIX_EPOCH + Duration::from_secs(1_000);
    assert!(v.verify(&headers, d.body(), then).is_ok());
}

#[test]
fn header_schemes_get_their_event_type() {
    let github = GitHub::new("gh-secret").unwrap();
    let d = TestDelivery::new("{}").event_type("issues");
    let verified = github
        .verify(
            &d.signed_headers(&github).unwrap(),
            d.body(),
            SystemTime::now(),
        )
        .unwrap();
    assert_eq!(verified.event_type.as_deref(), Some("issues"));
    assert_eq!(verified.id.as_deref(), Some(d.delivery_id()));
    let shopify = Shopify::new("shp-secret").unwrap();
    let d = TestDelivery::new("{}");
    let verified = shopify
        .verify(
            &d.signed_headers(&shopify).unwrap(),
            d.body(),
            SystemTime::now(),
        )
        .unwrap();
    assert_eq!(verified.event_type.as_deref(), Some("app/uninstalled"));
}

/// Signs `d` with `scheme`, verifies it as a request to `TEST_URL`
/// (through `verify_head`, so URL-signing schemes built with
/// `PublicUrl::base(TEST_ORIGIN)` rebuild it), then checks that the body
/// with `from` replaced by `to` is refused.
fn round_trip(
    scheme: &(impl SignTest + crate::Verifier),
    d: &TestDelivery,
    from: &str,
    to: &str,
) -> crate::Verified {
    let headers = d.signed_headers(scheme).unwrap();
    let body = d.signed_body(scheme).unwrap();
    let head = |h| crate::RequestHead::from_path_and_query("/webhooks", h);
    let now = SystemTime::now();
    let verified = scheme.verify_head(head(&headers), &body, now).unwrap();
    let text = std::str::from_utf8(&body).unwrap();
    assert!(text.contains(from), "{from:?} not in the body {text:?}");
    let tampered = text.replacen(from, to, 1);
    assert!(
        scheme
            .verify_head(head(&headers), tampered.as_bytes(), now)
            .is_err(),
        "a tampered body verified"
    );
    verified
}

fn test_url() -> crate::PublicUrl {
    crate::PublicUrl::base(TEST_ORIGIN).unwrap()
}

#[test]
fn generic_hmac_signs_its_headers_url_and_timestamp_unit() {
    let v = GenericHmac::builder("acme", "x-acme-signature")
        .secret("acme-secret")
        .prefix("sha256=")
        .timestamp_header(
            "x-acme-timestamp",
            crate::scheme::TimestampUnit::Milliseconds,
        )
        .id_header("x-acme-id")
        .event_type_header("x-acme-event")
        .signed_content("{timestamp}.{url}.{header:x-acme-id}.{body}")
        .unwrap()
        .public_url(test_url())
        .build()
        .unwrap();
    let d = TestDelivery::new(r#"{"hello":1}"#).event_type("thing.created");
    let verified = round_trip(&v, &d, "hello", "hellp");
    assert_eq!(verified.id.as_deref(), Some(d.delivery_id()));
    assert_eq!(verified.event_type.as_deref(), Some("thing.created"));
    assert_eq!(verified.timestamp, Some(d.unix_timestamp()));
    // Another URL is another signature.
    let elsewhere = d.clone().url("https://example.com/other");
    let headers = elsewhere.signed_headers(&v).unwrap();
    let head = crate::RequestHead::from_path_and_query("/webhooks", &headers);
    assert!(v.verify_head(head, d.body(), SystemTime::now()).is_err());
}

#[test]
fn generic_hmac_with_a_json_signature_is_refused() {
    let v = GenericHmac::builder("acme", "x-acme-signature")
        .secret("acme-secret")
        .signature_json_field("sig")
        .signed_content("{json:event}")
        .unwrap()
        .build()
        .unwrap();
    let err = TestDelivery::new("{}").signed_headers(&v).unwrap_err();
    assert!(matches!(err, ConfigError::Setting(_)), "{err:?}");
}

#[test]
fn twilio_signs_the_url_and_form_fields() {
    let v = Twilio::builder()
        .auth_token("twilio-token")
        .public_url(test_url())
        .build()
        .unwrap();
    let d = TestDelivery::new("From=%2B15550001111&Body=hello");
    let verified = round_trip(&v, &d, "hello", "hellp");
    assert_eq!(verified.id.as_deref(), Some(d.delivery_id()));
    // Signed for another URL: refused at TEST_URL.
    let d = d.url("https://example.com/elsewhere");
    let headers = d.signed_headers(&v).unwrap();
    let head = crate::RequestHead::from_path_and_query("/webhooks", &headers);
    assert!(v.verify_head(head, d.body(), SystemTime::now()).is_err());
}

#[test]
fn square_signs_the_url_and_body() {
    let v = Square::builder()
        .signature_key("square-key")
        .public_url(test_url())
        .build()
        .unwrap();
    let d = TestDelivery::new(r#"{"event_id":"e1","type":"payment.hello"}"#);
    let verified = round_trip(&v, &d, "hello", "hellp");
    assert_eq!(verified.event_type.as_deref(), Some("payment.hello"));
}

#[test]
fn mandrill_signs_the_url_and_form_fields() {
    let v = Mandrill::builder()
        .webhook_key("mandrill-key")
        .public_url(test_url())
        .build()
        .unwrap();
    let d = TestDelivery::new("mandrill_events=%5B%7B%22event%22%3A%22hello%22%7D%5D");
    round_trip(&v, &d, "hello", "hellp");
}

#[test]
fn hubspot_signs_the_url_body_and_milliseconds() {
    let v = HubSpot::builder()
        .client_secret("hubspot-secret")
        .public_url(test_url())
        .build()
        .unwrap();
    let d = TestDelivery::new(r#"[{"subscriptionType":"contact.hello"}]"#);
    let headers = d.signed_headers(&v).unwrap();
    let millis: u64 = headers["x-hubspot-request-timestamp"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(millis, d.unix_timestamp() * 1000);
    round_trip(&v, &d, "hello", "hellp");
}

#[test]
fn gitlab_sends_its_token_event_and_id() {
    let v = GitLab::new("gitlab-token").unwrap();
    let d = TestDelivery::new(r#"{"object_kind":"push"}"#);
    let headers = d.signed_headers(&v).unwrap();
    let verified = v.verify(&headers, d.body(), SystemTime::now()).unwrap();
    assert_eq!(verified.id.as_deref(), Some(d.delivery_id()));
    assert_eq!(verified.event_type.as_deref(), Some("Push Hook"));
    // GitLab signs nothing: the token is what is checked.
    let other = GitLab::new("another-token").unwrap();
    assert!(other.verify(&headers, d.body(), SystemTime::now()).is_err());
}

#[test]
fn linear_sends_signature_delivery_and_event() {
    let v = Linear::new("linear-secret").unwrap();
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let d = TestDelivery::new(format!(
        r#"{{"action":"hello","webhookTimestamp":{millis}}}"#
    ))
    .event_type("Comment");
    let verified = round_trip(&v, &d, "hello", "hellp");
    assert_eq!(verified.id.as_deref(), Some(d.delivery_id()));
    assert_eq!(verified.event_type.as_deref(), Some("Comment"));
}

#[test]
fn zoom_paddle_intercom_typeform_round_trip() {
    let d = TestDelivery::new(
        r#"{"event":"meeting.hello","event_id":"e1","event_type":"hello","id":"i1","topic":"hello"}"#,
    );
    round_trip(&Zoom::new("zoom-secret").unwrap(), &d, "hello", "hellp");
    round_trip(&Paddle::new("paddle-secret").unwrap(), &d, "hello", "hellp");
    round_trip(
        &Intercom::new("intercom-secret").unwrap(),
        &d,
        "hello",
        "hellp",
    );
    round_trip(
        &Typeform::new("typeform-secret").unwrap(),
        &d,
        "hello",
        "hellp",
    );
}

#[test]
fn postmark_sends_its_credential() {
    let v = Postmark::new("postmark-user", "postmark-password").unwrap();
    let d = TestDelivery::new(
        r#"{"RecordType":"Delivery","MessageID":"m1","DeliveredAt":"2024-01-01T00:00:00Z"}"#,
    );
    let headers = d.signed_headers(&v).unwrap();
    assert!(v.verify(&headers, d.body(), SystemTime::now()).is_ok());
    // Postmark signs nothing: the credential is what is checked.
    let other = Postmark::new("postmark-user", "another-password").unwrap();
    assert!(other.verify(&headers, d.body(), SystemTime::now()).is_err());
}

#[test]
fn mailgun_signs_in_the_body_with_the_id_as_token() {
    let v = Mailgun::new("mailgun-key").unwrap();
    let d = TestDelivery::new(r#"{"event":"delivered","id":"hello"}"#);
    assert!(d.signed_headers(&v).unwrap().is_empty());
    // The signature covers the timestamp and the token (the delivery id).
    let verified = round_trip(&v, &d, "msg_", "msh_");
    assert_eq!(verified.id.as_deref(), Some(d.delivery_id()));
    assert_eq!(verified.event_type.as_deref(), Some("delivered"));
    let err = TestDelivery::new("not json").signed_body(&v).unwrap_err();
    assert!(matches!(err, ConfigError::Invalid { .. }), "{err:?}");
    // Headers given by hand: the body is sent as it is.
    let by_hand = TestDelivery::new("raw").signed_with(HeaderMap::new());
    assert_eq!(by_hand.signed_body(&v).unwrap(), "raw");
}

#[cfg(feature = "ed25519")]
#[test]
fn discord_signer_round_trip() {
    let signer = DiscordSigner::from_seed([7; 32]);
    let v = crate::scheme::Discord::new(&signer.public_key_hex()).unwrap();
    let d = TestDelivery::new(r#"{"id":"1","type":2,"data":"hello"}"#);
    round_trip(&Pair(&v, &signer), &d, "hello", "hellp");
    assert!(!format!("{signer:?}").contains("0707"));
}

#[cfg(feature = "sendgrid")]
#[test]
fn sendgrid_signer_round_trip() {
    let signer = crate::scheme::sendgrid::Signer::from_bytes(&[9; 32]).unwrap();
    let v = crate::scheme::SendGrid::new(signer.public_key()).unwrap();
    let d = TestDelivery::new(r#"[{"event":"delivered","email":"hello@example.com"}]"#);
    round_trip(&Pair(&v, &signer), &d, "hello", "hellp");
}

/// A verifier and the signer of its provider, as one scheme for `round_trip`.
#[cfg_attr(
    not(any(feature = "ed25519", feature = "sendgrid")),
    allow(dead_code, reason = "used by the signers of optional schemes")
)]
struct Pair<'a, V, S>(&'a V, &'a S);

impl<V, S: SignTest> SignTest for Pair<'_, V, S> {
    fn sign_test(&self, d: &TestDelivery) -> Result<HeaderMap, ConfigError> {
        self.1.sign_test(d)
    }
}

impl<V: crate::Verifier, S: Send + Sync> crate::Verifier for Pair<'_, V, S> {
    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<crate::Verified, VerifyError> {
        self.0.verify(headers, body, now)
    }
}

#[test]
fn debug_does_not_show_the_body() {
    let d = TestDelivery::new("body-marker");
    assert!(!format!("{d:?}").contains("body-marker"));
}
