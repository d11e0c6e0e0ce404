//! The email senders through both frameworks: one route per family, each
//! behind its own layer on the apps' store.
//!
//! * `/sendgrid` — public-key signature over timestamp + body (SendGrid's
//!   ECDSA P-256), id from the batch's bytes;
//! * `/mailgun` — HMAC carried in the JSON body (Mailgun), the token as the
//!   replay guard;
//! * `/sns` — RSA over a canonical string with a fetched, cached certificate
//!   (Amazon SNS, and SES through it), `MessageId` as the id;
//! * `/postmark` — HTTP Basic credentials (Postmark), id from the body;
//! * Resend (Svix headers) on the Standard Webhooks `/hook` route.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use webhooks_core::scheme::sendgrid::Signer as SendGridSigner;
use webhooks_core::scheme::sns::{
    CertificateFetcher, FetchError, SignatureVersion, Signer as SnsSigner, Sns, SnsMessage,
};
use webhooks_core::scheme::{Mailgun, Postmark, SendGrid};
use webhooks_core::{Receiver, RequestVerifier};

use crate::apps::{RunningApp, Spec};
use crate::behaviour::EXPECT_EVENT_HEADER;
use crate::client::{self, Request, Response};
use crate::keys;
use crate::scenarios::{Env, Outcome};

/// The private scalar of the SendGrid test signer (its public key is configured).
pub const SENDGRID_KEY: [u8; 32] = [0x5e; 32];
/// Mailgun's signing key in the apps.
pub const MAILGUN_KEY: &str = "key-conformance-mailgun-signing";
/// Postmark's Basic credentials in the apps.
pub const POSTMARK_USER: &str = "postmark";
/// Postmark's password in the apps.
pub const POSTMARK_PASSWORD: &str = "conformance-password";
/// The SNS topic the apps accept.
pub const SNS_TOPIC: &str = "arn:aws:sns:eu-west-1:123456789012:ses-events";
/// Where the SNS test certificate is "served".
pub const SNS_CERT_URL: &str =
    "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-conformance.pem";
const SNS_CERT: &str = include_str!("../../core/tests/data/sns/test-cert.pem");
const SNS_KEY: &[u8] = include_bytes!("../../core/tests/data/sns/test-key.der");

/// Serves the test certificate at [`SNS_CERT_URL`] (nothing else) and counts
/// fetches.
#[derive(Debug, Default)]
pub struct TestCertificates {
    fetches: AtomicUsize,
}

#[async_trait::async_trait]
impl CertificateFetcher for TestCertificates {
    async fn fetch(&self, url: &str) -> Result<Vec<u8>, FetchError> {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        if url == SNS_CERT_URL {
            Ok(SNS_CERT.as_bytes().to_vec())
        } else {
            Err(FetchError::new("not found"))
        }
    }
}

/// The email routes and their pipelines, on the spec's store.
///
/// # Errors
///
/// When a verifier cannot be built.
pub fn receivers(spec: &Spec) -> Result<Vec<(&'static str, Receiver)>, String> {
    let e = |e: webhooks_core::ConfigError| e.to_string();
    let sendgrid_signer = SendGridSigner::from_bytes(&SENDGRID_KEY).map_err(e)?;
    let sendgrid = SendGrid::new(sendgrid_signer.public_key()).map_err(e)?;
    let mailgun = Mailgun::new(MAILGUN_KEY).map_err(e)?;
    let postmark = Postmark::new(POSTMARK_USER, POSTMARK_PASSWORD).map_err(e)?;
    let sns = Sns::builder(TestCertificates::default())
        .topic_arn(SNS_TOPIC)
        .build()
        .map_err(e)?;
    Ok(vec![
        ("/sendgrid", pipeline(spec, sendgrid)),
        ("/mailgun", pipeline(spec, mailgun)),
        ("/sns", pipeline(spec, sns)),
        ("/postmark", pipeline(spec, postmark)),
    ])
}

/// The spec's pipeline around `verifier`.
fn pipeline(spec: &Spec, verifier: impl RequestVerifier + 'static) -> Receiver {
    Receiver::builder(verifier)
        .body_limit(spec.body_limit)
        .lease(spec.lease)
        .shared_store(Arc::clone(&spec.store))
        .namespace(spec.namespace.clone())
        .build()
}

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

async fn send(app: &RunningApp, request: &Request) -> Result<Response, String> {
    client::send(app.addr, request).await
}

fn expect(response: &Response, status: u16, what: &str) -> Outcome {
    ensure!(
        response.status == status,
        "{what}: expected {status}, got {} ({:?})",
        response.status,
        response.text()
    );
    Ok(())
}

fn duplicate(response: &Response, what: &str) -> Outcome {
    expect(response, 200, what)?;
    ensure!(
        response.header("webhook-duplicate") == Some("true"),
        "{what}: duplicate marker, got {:?}",
        response.headers
    );
    Ok(())
}

/// SendGrid: a signed batch runs once; the same batch signed again later is
/// a duplicate; tampering, staleness and missing headers are refused.
pub async fn public_key_provider_sendgrid(env: Env) -> Outcome {
    let app = env.framework.start(&env.spec()).await?;
    let signer = SendGridSigner::from_bytes(&SENDGRID_KEY).map_err(|e| e.to_string())?;
    let body =
        br#"[{"email":"a@example.com","event":"delivered","sg_event_id":"ev-1","timestamp":1}]"#;
    let signed = |ts: u64, body: &[u8]| -> Result<Request, String> {
        let headers = signer.sign_headers(ts, body).map_err(|e| e.to_string())?;
        Ok(Request::post("/sendgrid", body.to_vec())
            .headers(&headers)
            .header(EXPECT_EVENT_HEADER, "delivered"))
    };
    let now = keys::now();
    expect(&send(&app, &signed(now, body)?).await?, 204, "signed batch")?;
    // SendGrid retries the batch, signed afresh: the same bytes, the same id.
    duplicate(&send(&app, &signed(now + 1, body)?).await?, "retried batch")?;
    let mut tampered = signed(now, body)?;
    tampered.body = String::from_utf8_lossy(body)
        .replace("delivered", "bounce")
        .into_bytes();
    expect(&send(&app, &tampered).await?, 401, "tampered batch")?;
    expect(&send(&app, &signed(now - 301, b"[]")?).await?, 401, "stale")?;
    let unsigned = Request::post("/sendgrid", body.to_vec())
        .header("x-twilio-email-event-webhook-timestamp", now.to_string());
    expect(&send(&app, &unsigned).await?, 400, "no signature header")?;
    let garbled = unsigned.header("x-twilio-email-event-webhook-signature", "%%%");
    expect(&send(&app, &garbled).await?, 400, "signature not base64")?;
    ensure!(app.behaviour.total() == 1, "only the genuine batch ran");
    Ok(())
}

/// Mailgun: the token is the id, so a captured signature sent again with
/// other event data is a duplicate, never a second run.
pub async fn body_signature_provider_mailgun(env: Env) -> Outcome {
    let spec = env.spec();
    let app = env.framework.start(&spec).await?;
    let mailgun = Mailgun::new(MAILGUN_KEY).map_err(|e| e.to_string())?;
    let now = keys::now();
    // Tokens are claimed under one namespace for every route (issue 25):
    // unique per run, as Mailgun's are per request.
    let token = &format!("token-{}", spec.namespace);
    let body = mailgun.sign_body(
        now,
        token,
        &serde_json::json!({"event": "delivered", "id": "e1"}),
    );
    let request =
        |body: Vec<u8>| Request::post("/mailgun", body).header("content-type", "application/json");
    expect(
        &send(
            &app,
            &request(body.clone()).header(EXPECT_EVENT_HEADER, "delivered"),
        )
        .await?,
        204,
        "signed event",
    )?;
    let replayed = mailgun.sign_body(
        now,
        token,
        &serde_json::json!({"event": "failed", "id": "e2"}),
    );
    duplicate(
        &send(
            &app,
            &request(replayed).header(EXPECT_EVENT_HEADER, "failed"),
        )
        .await?,
        "same token, other data",
    )?;
    ensure!(
        app.behaviour.calls(token) == 1,
        "handler ran once for the token"
    );
    let stranger = Mailgun::new("key-not-configured").map_err(|e| e.to_string())?;
    let forged = stranger.sign_body(
        now,
        "another-token",
        &serde_json::json!({"event": "delivered"}),
    );
    expect(
        &send(&app, &request(forged)).await?,
        401,
        "wrong signing key",
    )?;
    let stale = mailgun.sign_body(
        now - 301,
        "stale-token",
        &serde_json::json!({"event": "delivered"}),
    );
    expect(&send(&app, &request(stale)).await?, 401, "stale timestamp")?;
    let r = send(
        &app,
        &request(br#"{"event-data":{"event":"delivered"}}"#.to_vec()),
    )
    .await?;
    expect(&r, 400, "no signature object")?;
    ensure!(
        r.text().contains("signature"),
        "the reason names the field: {:?}",
        r.text()
    );
    ensure!(app.behaviour.total() == 1, "only the genuine event ran");
    Ok(())
}

/// Amazon SNS: the certificate is fetched once through the verifier's
/// fetcher; MessageId dedups SNS's retries; foreign topics and certificate
/// URLs are refused before any fetch.
pub async fn certificate_provider_sns(env: Env) -> Outcome {
    let app = env.framework.start(&env.spec()).await?;
    let e = |e: webhooks_core::ConfigError| e.to_string();
    let signer = SnsSigner::from_pkcs8_der(SNS_KEY, SNS_CERT_URL).map_err(e)?;
    let message = |id: &str, topic: &str| {
        SnsMessage::notification(
            id,
            topic,
            r#"{"eventType":"Bounce","mail":{"messageId":"0100018d"}}"#,
            "2026-01-02T03:04:05.678Z",
        )
    };
    let request = |body: Vec<u8>| {
        Request::post("/sns", body)
            .header("content-type", "text/plain; charset=UTF-8")
            .header("x-amz-sns-message-type", "Notification")
    };
    let body = signer
        .sign(message("sns-msg-1", SNS_TOPIC), SignatureVersion::V2)
        .map_err(e)?;
    expect(
        &send(
            &app,
            &request(body.clone()).header(EXPECT_EVENT_HEADER, "Notification"),
        )
        .await?,
        204,
        "signed notification",
    )?;
    duplicate(
        &send(&app, &request(body.clone())).await?,
        "SNS retry of the same MessageId",
    )?;
    let v1 = signer
        .sign(message("sns-msg-2", SNS_TOPIC), SignatureVersion::V1)
        .map_err(e)?;
    expect(&send(&app, &request(v1)).await?, 204, "SignatureVersion 1")?;
    let theirs = signer
        .sign(
            message("sns-msg-3", "arn:aws:sns:eu-west-1:999999999999:theirs"),
            SignatureVersion::V2,
        )
        .map_err(e)?;
    expect(
        &send(&app, &request(theirs)).await?,
        401,
        "topic not allowed",
    )?;
    let elsewhere = SnsSigner::from_pkcs8_der(
        SNS_KEY,
        "https://evil.example/SimpleNotificationService-x.pem",
    )
    .map_err(e)?
    .sign(message("sns-msg-4", SNS_TOPIC), SignatureVersion::V2)
    .map_err(e)?;
    expect(
        &send(&app, &request(elsewhere)).await?,
        401,
        "certificate URL not allowed",
    )?;
    let tampered = String::from_utf8_lossy(&body).replace("Bounce", "Delivery");
    expect(
        &send(&app, &request(tampered.into_bytes())).await?,
        401,
        "tampered message",
    )?;
    let r = send(&app, &request(br#"{"Type":"Notification"}"#.to_vec())).await?;
    expect(&r, 400, "fields missing")?;
    ensure!(
        app.behaviour.total() == 2,
        "two genuine notifications ran, got {}",
        app.behaviour.total()
    );
    Ok(())
}

/// Postmark: Basic credentials, id from the body; a retry is a duplicate.
pub async fn credentials_provider_postmark(env: Env) -> Outcome {
    let app = env.framework.start(&env.spec()).await?;
    let postmark = Postmark::new(POSTMARK_USER, POSTMARK_PASSWORD).map_err(|e| e.to_string())?;
    let body = br#"{"RecordType":"Bounce","ID":4323372036854775807,"MessageID":"883953f4-6105-42a2-a16a-77a8eac79483","BouncedAt":"2019-11-05T16:33:54.9070259Z","Email":"john@example.com"}"#;
    let headers = postmark.sign_headers().map_err(|e| e.to_string())?;
    let request = Request::post("/postmark", body.to_vec())
        .headers(&headers)
        .header(EXPECT_EVENT_HEADER, "Bounce");
    expect(&send(&app, &request).await?, 204, "Basic credentials")?;
    duplicate(&send(&app, &request).await?, "Postmark retry")?;
    let wrong = Postmark::new(POSTMARK_USER, "guess").map_err(|e| e.to_string())?;
    let forged = Request::post("/postmark", body.to_vec())
        .headers(&wrong.sign_headers().map_err(|e| e.to_string())?);
    expect(&send(&app, &forged).await?, 401, "wrong password")?;
    let anonymous = Request::post("/postmark", body.to_vec());
    expect(&send(&app, &anonymous).await?, 400, "no Authorization")?;
    ensure!(app.behaviour.total() == 1, "only the genuine event ran");
    Ok(())
}

/// Resend (Svix): the Standard Webhooks route under `svix-*` header names.
pub async fn svix_headers_provider_resend(env: Env) -> Outcome {
    let app = env.framework.start(&env.spec()).await?;
    let signer = keys::hmac(keys::NEW_SECRET).map_err(|e| e.to_string())?;
    let body = br#"{"type":"email.delivered","data":{"count":1}}"#;
    let headers =
        keys::signed(&signer, "msg_resend_1", keys::now(), body).map_err(|e| e.to_string())?;
    let mut request = Request::post("/hook", body.to_vec());
    for (name, value) in &headers {
        let name = name.as_str().replace("webhook-", "svix-");
        request = request.header(&name, value.to_str().map_err(|e| e.to_string())?);
    }
    ensure!(
        request
            .headers
            .iter()
            .all(|(n, _)| !n.starts_with("webhook-")),
        "only svix-* headers sent"
    );
    expect(&send(&app, &request).await?, 204, "Resend delivery")?;
    duplicate(&send(&app, &request).await?, "Resend retry")?;
    let mut tampered = request.clone();
    tampered.body = br#"{"type":"email.bounced","data":{"count":1}}"#.to_vec();
    expect(&send(&app, &tampered).await?, 401, "tampered body")?;
    ensure!(app.behaviour.calls("msg_resend_1") == 1, "handler ran once");
    Ok(())
}
