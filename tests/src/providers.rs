//! Provider families through both frameworks: one route per family, each
//! behind its own layer on the apps' store.
//!
//! * `/twilio` — URL signing (Twilio): the URL rebuilt from a public base
//!   and the request's path **and query**, as each adapter passes them;
//! * `/paddle` — timestamped HMAC (Paddle Billing): replay window, id and
//!   event type from the body;
//! * `/gitlab` — secret token (GitLab): constant-time token, id from
//!   `Idempotency-Key`.

use std::sync::Arc;
use std::time::Duration;

use webhooks_core::scheme::{GitLab, Paddle, Twilio};
use webhooks_core::{PublicUrl, Receiver};

use crate::apps::{RunningApp, Spec};
use crate::behaviour::EXPECT_EVENT_HEADER;
use crate::client::{self, Request, Response};
use crate::keys;
use crate::scenarios::{Env, Outcome};

/// Twilio's auth token in the apps.
pub const TWILIO_TOKEN: &str = "twilio-auth-token-for-tests";
/// The public origin Twilio is told to call (not the loopback address the
/// apps listen on: the URL comes from configuration, never from `Host`).
pub const TWILIO_PUBLIC: &str = "https://hooks.example.test";
/// Paddle's destination secret in the apps.
pub const PADDLE_SECRET: &str = "pdl_ntf_01conformance_secret";
/// GitLab's token in the apps.
pub const GITLAB_TOKEN: &str = "gitlab-token-for-tests";

/// The provider routes and their pipelines, on the spec's store.
///
/// # Errors
///
/// When a verifier cannot be built.
pub fn receivers(spec: &Spec) -> Result<Vec<(&'static str, Receiver)>, String> {
    let e = |e: webhooks_core::ConfigError| e.to_string();
    let twilio = Twilio::builder()
        .auth_token(TWILIO_TOKEN)
        .public_url(PublicUrl::base(TWILIO_PUBLIC).map_err(e)?)
        .build()
        .map_err(e)?;
    // Wider than Paddle's 5 s, so that a loaded CI machine does not flake.
    let paddle = Paddle::builder()
        .secret(PADDLE_SECRET)
        .tolerance(Duration::from_secs(60))
        .build()
        .map_err(e)?;
    let gitlab = GitLab::new(GITLAB_TOKEN).map_err(e)?;
    let pipeline = |verifier: Box<dyn webhooks_core::Verifier>| {
        Receiver::builder(verifier)
            .body_limit(spec.body_limit)
            .lease(spec.lease)
            .shared_store(Arc::clone(&spec.store))
            .namespace(spec.namespace.clone())
            .build()
    };
    Ok(vec![
        ("/twilio", pipeline(Box::new(twilio))),
        ("/paddle", pipeline(Box::new(paddle))),
        ("/gitlab", pipeline(Box::new(gitlab))),
    ])
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

/// Twilio: the URL with its query is signed; the adapters pass the query.
pub async fn url_signing_provider_twilio(env: Env) -> Outcome {
    let app = env.framework.start(&env.spec()).await?;
    let twilio = Twilio::builder()
        .auth_token(TWILIO_TOKEN)
        .public_url(PublicUrl::base(TWILIO_PUBLIC).map_err(|e| e.to_string())?)
        .build()
        .map_err(|e| e.to_string())?;
    let body = b"AccountSid=AC1&Body=Hello+there&From=%2B14158675309&MessageSid=SM1".to_vec();
    let url = format!("{TWILIO_PUBLIC}/twilio?tenant=7&x=a%20b");
    let headers = twilio
        .sign_headers(&url, &body)
        .map_err(|e| e.to_string())?;
    let signed = |path: &str, body: Vec<u8>| {
        Request::post(path, body)
            .headers(&headers)
            .header("i-twilio-idempotency-token", "idem-twilio-1")
    };
    let first = send(&app, &signed("/twilio?tenant=7&x=a%20b", body.clone())).await?;
    expect(&first, 204, "signed Twilio request")?;
    let again = send(&app, &signed("/twilio?tenant=7&x=a%20b", body.clone())).await?;
    expect(&again, 200, "Twilio retry with the same idempotency token")?;
    // The same signature for another query: the query is part of what is signed.
    let other_query = send(&app, &signed("/twilio?tenant=8&x=a%20b", body.clone())).await?;
    expect(&other_query, 401, "another query string")?;
    // Whatever the Host or X-Forwarded-Host says, the configured URL is used.
    let spoofed =
        signed("/twilio?tenant=9", body.clone()).header("x-forwarded-host", "hooks.example.test");
    expect(
        &send(&app, &spoofed).await?,
        401,
        "forwarded headers not trusted",
    )?;
    let tampered = send(
        &app,
        &signed("/twilio?tenant=7&x=a%20b", b"AccountSid=AC2".to_vec()),
    )
    .await?;
    expect(&tampered, 401, "tampered form")?;
    let unsigned = Request::post("/twilio?tenant=7", body);
    expect(&send(&app, &unsigned).await?, 400, "no X-Twilio-Signature")?;
    ensure!(
        app.behaviour.calls("idem-twilio-1") == 1,
        "handler ran once"
    );
    ensure!(app.behaviour.total() == 1, "only the genuine request ran");
    Ok(())
}

/// Paddle: a timestamped HMAC header, id and type from the body.
pub async fn timestamp_hmac_provider_paddle(env: Env) -> Outcome {
    let app = env.framework.start(&env.spec()).await?;
    let paddle = Paddle::new(PADDLE_SECRET).map_err(|e| e.to_string())?;
    let body =
        br#"{"event_id":"evt_conf_1","event_type":"transaction.completed","data":{"id":"txn_1"}}"#;
    let signed = |ts: u64| -> Result<Request, String> {
        let headers = paddle.sign_headers(ts, body).map_err(|e| e.to_string())?;
        Ok(Request::post("/paddle", body.to_vec())
            .headers(&headers)
            .header(EXPECT_EVENT_HEADER, "transaction.completed"))
    };
    expect(
        &send(&app, &signed(keys::now())?).await?,
        204,
        "signed Paddle event",
    )?;
    expect(
        &send(&app, &signed(keys::now())?).await?,
        200,
        "the same event_id again",
    )?;
    expect(
        &send(&app, &signed(keys::now() - 600)?).await?,
        401,
        "stale ts",
    )?;
    let malformed = Request::post("/paddle", body.to_vec()).header("paddle-signature", "garbage");
    expect(
        &send(&app, &malformed).await?,
        400,
        "malformed Paddle-Signature",
    )?;
    let missing = Request::post("/paddle", body.to_vec());
    expect(&send(&app, &missing).await?, 400, "no Paddle-Signature")?;
    let headers = paddle
        .sign_headers(keys::now(), body)
        .map_err(|e| e.to_string())?;
    let tampered = Request::post("/paddle", b"{}".to_vec()).headers(&headers);
    expect(&send(&app, &tampered).await?, 401, "tampered body")?;
    ensure!(app.behaviour.calls("evt_conf_1") == 1, "handler ran once");
    ensure!(app.behaviour.total() == 1, "only the genuine event ran");
    Ok(())
}

/// GitLab: a secret token, the id from `Idempotency-Key`.
pub async fn token_provider_gitlab(env: Env) -> Outcome {
    let app = env.framework.start(&env.spec()).await?;
    let gitlab = GitLab::new(GITLAB_TOKEN).map_err(|e| e.to_string())?;
    let headers = gitlab
        .sign_headers("Push Hook", "0198f11a-conformance")
        .map_err(|e| e.to_string())?;
    let body = br#"{"object_kind":"push"}"#;
    let request = Request::post("/gitlab", body.to_vec())
        .headers(&headers)
        .header(EXPECT_EVENT_HEADER, "Push Hook");
    expect(&send(&app, &request).await?, 204, "GitLab delivery")?;
    expect(
        &send(&app, &request).await?,
        200,
        "the same Idempotency-Key again",
    )?;
    let wrong = Request::post("/gitlab", body.to_vec())
        .header("x-gitlab-token", "gitlab-token-for-test")
        .header("idempotency-key", "other");
    expect(&send(&app, &wrong).await?, 401, "wrong token")?;
    let missing = Request::post("/gitlab", body.to_vec()).header("idempotency-key", "other");
    expect(&send(&app, &missing).await?, 400, "no X-Gitlab-Token")?;
    ensure!(
        app.behaviour.calls("0198f11a-conformance") == 1,
        "handler ran once"
    );
    ensure!(app.behaviour.total() == 1, "only the genuine delivery ran");
    Ok(())
}
