//! A handler's refusals through both frameworks: each provider answered with
//! the status that stops its retries (permanent) or makes it retry
//! (transient), and the claim settled by that status.

use webhooks_core::scheme::{GitHub, Mailgun};

use crate::apps::RunningApp;
use crate::behaviour::{MODE_HEADER, REFUSAL_REASON, REFUSE_PERMANENT, REFUSE_TRANSIENT};
use crate::client::{self, Request, Response};
use crate::keys;
use crate::providers_email::MAILGUN_KEY;
use crate::scenarios::{Env, Outcome};

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

const BODY: &[u8] = br#"{"type":"invoice.paid","data":{"count":1}}"#;

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

/// A Standard Webhooks delivery `id` on `/hook`, signed now, in `mode`.
fn standard(id: &str, mode: &str) -> Result<Request, String> {
    let signer = keys::hmac(keys::NEW_SECRET).map_err(|e| e.to_string())?;
    let headers = keys::signed(&signer, id, keys::now(), BODY).map_err(|e| e.to_string())?;
    Ok(Request::post("/hook", BODY.to_vec())
        .headers(&headers)
        .header(MODE_HEADER, mode))
}

/// Permanent: Standard Webhooks (every non-2xx retried) gets a `200` and its
/// retry is a duplicate the handler never sees; GitHub (no automatic
/// retries) a `422`, and a redelivery by hand runs again; Mailgun its
/// documented `406`. Transient: a `503` with `Retry-After`, and the retry
/// runs the handler.
pub async fn handler_refusals_answer_each_providers_status(env: Env) -> Outcome {
    let spec = env.spec();
    let app = env.framework.start(&spec).await?;

    let refused = send(&app, &standard("msg_refused", REFUSE_PERMANENT)?).await?;
    expect(&refused, 200, "permanent refusal, Standard Webhooks")?;
    ensure!(
        refused.text() == REFUSAL_REASON,
        "the reason as the body, got {:?}",
        refused.text()
    );
    let retried = send(&app, &standard("msg_refused", "ok")?).await?;
    expect(
        &retried,
        200,
        "the sender's retry after a permanent refusal",
    )?;
    ensure!(
        retried.header("webhook-duplicate") == Some("true"),
        "acknowledged as a duplicate"
    );
    ensure!(
        app.behaviour.calls("msg_refused") == 1,
        "a permanent refusal is not run again, ran {}",
        app.behaviour.calls("msg_refused")
    );

    let busy = send(&app, &standard("msg_busy", REFUSE_TRANSIENT)?).await?;
    expect(&busy, 503, "transient refusal")?;
    ensure!(
        busy.header("retry-after") == Some("2"),
        "Retry-After, got {:?}",
        busy.header("retry-after")
    );
    ensure!(
        busy.header("x-slack-no-retry").is_none(),
        "no stop header on a transient refusal"
    );
    expect(
        &send(&app, &standard("msg_busy", "ok")?).await?,
        204,
        "the retry after a transient refusal runs",
    )?;
    ensure!(app.behaviour.calls("msg_busy") == 2, "ran twice");

    let github = GitHub::new(keys::GITHUB_SECRET).map_err(|e| e.to_string())?;
    let body = br#"{"action":"opened"}"#;
    let delivery = "5f2c1a3e-0000-4000-8000-00000000refu";
    let headers = github
        .sign_headers(delivery, "issues", body)
        .map_err(|e| e.to_string())?;
    let request = Request::post("/github", body.to_vec())
        .headers(&headers)
        .header(MODE_HEADER, REFUSE_PERMANENT);
    expect(
        &send(&app, &request).await?,
        422,
        "permanent refusal, GitHub",
    )?;
    expect(
        &send(&app, &request).await?,
        422,
        "a redelivery by hand runs again",
    )?;
    ensure!(app.behaviour.calls(delivery) == 2, "GitHub redelivery ran");

    let mailgun = Mailgun::new(MAILGUN_KEY).map_err(|e| e.to_string())?;
    let token = format!("token-refused-{}", spec.namespace);
    let body = mailgun.sign_body(
        keys::now(),
        &token,
        &serde_json::json!({"event": "delivered", "id": "e-refused"}),
    );
    let request = Request::post("/mailgun", body)
        .header("content-type", "application/json")
        .header(MODE_HEADER, REFUSE_PERMANENT);
    expect(
        &send(&app, &request).await?,
        406,
        "permanent refusal, Mailgun",
    )?;
    Ok(())
}
