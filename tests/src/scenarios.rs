//! The one scenario list: requests in; status, headers and handler-call
//! counts out. Every scenario runs on every framework × every backend.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use webhooks_core::scheme::standard::Signer;
use webhooks_core::testing::expect_panics;

use crate::apps::{Framework, RunningApp, Spec};
use crate::backends::{Backend, Faulty};
use crate::behaviour::{MODE_HEADER, PANIC_ON_PURPOSE};
use crate::client::{self, Framing, Request, Response};
use crate::gates::inbox_admin_pauses_one_event_type;
use crate::keys;
use crate::providers::{
    timestamp_hmac_provider_paddle, token_provider_gitlab, url_signing_provider_twilio,
};
use crate::providers_email::{
    body_signature_provider_mailgun, certificate_provider_sns, credentials_provider_postmark,
    public_key_provider_sendgrid, svix_headers_provider_resend,
};
use crate::refusals::handler_refusals_answer_each_providers_status;

/// A scenario's result: `Err` says what differed.
pub type Outcome = Result<(), String>;
/// One scenario: an async function of its environment.
pub type ScenarioFn = fn(Env) -> Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// The body limit of the test apps.
pub const LIMIT: usize = 16 * 1024;

/// Fails the scenario with a message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

/// Where a scenario runs: one framework on one backend.
#[derive(Clone)]
pub struct Env {
    /// The framework.
    pub framework: Framework,
    /// The backend.
    pub backend: Backend,
    store: Arc<dyn webhooks_core::dedup::DedupStore>,
    scenario: &'static str,
}

static RUN: AtomicU64 = AtomicU64::new(0);

impl Env {
    /// An environment for `scenario` with a store of `backend`.
    pub fn new(
        framework: Framework,
        backend: Backend,
        store: Arc<dyn webhooks_core::dedup::DedupStore>,
        scenario: &'static str,
    ) -> Self {
        Self {
            framework,
            backend,
            store,
            scenario,
        }
    }

    /// The default spec: 16 KiB limit, 30 s lease, a namespace of its own.
    pub fn spec(&self) -> Spec {
        let run = RUN.fetch_add(1, Ordering::Relaxed);
        Spec {
            lease: Duration::from_secs(30),
            body_limit: LIMIT,
            store: Arc::clone(&self.store),
            body_timeout: Duration::from_secs(30),
            custom_rejections: false,
            inbox: None,
            budget: None,
            namespace: format!(
                "conf-{}-{}-{}-{}-{run}",
                std::process::id(),
                self.framework.name(),
                self.backend.name(),
                self.scenario
            ),
        }
    }

    /// Starts the app with the default spec.
    async fn app(&self) -> Result<RunningApp, String> {
        self.framework.start(&self.spec()).await
    }
}

fn signer() -> Result<Signer, String> {
    keys::hmac(keys::NEW_SECRET).map_err(|e| e.to_string())
}

/// A signed POST of `body` to `path` with delivery `id`, signed now.
pub(crate) fn delivery(path: &str, id: &str, body: &[u8]) -> Result<Request, String> {
    signed_with(&signer()?, path, id, keys::now(), body)
}

fn signed_with(
    signer: &Signer,
    path: &str,
    id: &str,
    timestamp: u64,
    body: &[u8],
) -> Result<Request, String> {
    let headers = keys::signed(signer, id, timestamp, body).map_err(|e| e.to_string())?;
    Ok(Request::post(path, body.to_vec()).headers(&headers))
}

pub(crate) async fn send(app: &RunningApp, request: &Request) -> Result<Response, String> {
    client::send(app.addr, request).await
}

/// Waits (up to 10 s) until the handler has started `n` runs for `id`, so that
/// timing-sensitive scenarios measure from the handler's start, not from
/// when the request was sent.
async fn handler_started(app: &RunningApp, id: &str, n: u32) -> Outcome {
    for _ in 0..1000 {
        if app.behaviour.calls(id) >= n {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err(format!("the handler never started run {n} of {id}"))
}

pub(crate) fn expect(response: &Response, status: u16, what: &str) -> Outcome {
    ensure!(
        response.status == status,
        "{what}: expected {status}, got {} ({:?})",
        response.status,
        response.text()
    );
    Ok(())
}

const BODY: &[u8] = br#"{"type":"email.sent","data":{"count":1}}"#;

async fn first_delivery_runs_handler(env: Env) -> Outcome {
    let app = env.app().await?;
    let r = send(&app, &delivery("/hook", "msg_first", BODY)?).await?;
    expect(&r, 204, "first delivery")?;
    ensure!(r.header("webhook-duplicate").is_none(), "not a duplicate");
    ensure!(app.behaviour.calls("msg_first") == 1, "handler ran once");
    Ok(())
}

async fn completed_duplicate_is_acknowledged(env: Env) -> Outcome {
    let app = env.app().await?;
    let request = delivery("/hook", "msg_dup", BODY)?;
    expect(&send(&app, &request).await?, 204, "first")?;
    let again = send(&app, &request).await?;
    expect(&again, 200, "duplicate")?;
    ensure!(
        again.header("webhook-duplicate") == Some("true"),
        "duplicate marker, got {:?}",
        again.headers
    );
    ensure!(app.behaviour.calls("msg_dup") == 1, "handler ran once");
    Ok(())
}

async fn in_flight_duplicate_gets_409(env: Env) -> Outcome {
    let app = env.app().await?;
    let slow = delivery("/hook", "msg_inflight", BODY)?.header(MODE_HEADER, "sleep:1500");
    let addr = app.addr;
    let first = tokio::spawn(async move { client::send(addr, &slow).await });
    handler_started(&app, "msg_inflight", 1).await?;
    let second = send(&app, &delivery("/hook", "msg_inflight", BODY)?).await?;
    expect(&second, 409, "concurrent retry")?;
    let retry_after: u64 = second
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .ok_or("Retry-After missing")?;
    ensure!(
        (1..=5).contains(&retry_after),
        "Retry-After within 1..=5 s (default cap), got {retry_after}"
    );
    let first = first.await.map_err(|e| e.to_string())??;
    expect(&first, 204, "first attempt")?;
    ensure!(app.behaviour.calls("msg_inflight") == 1, "handler ran once");
    Ok(())
}

async fn content_length_over_limit_is_413(env: Env) -> Outcome {
    let app = env.app().await?;
    // Announces more than the limit and sends nothing: the answer must come
    // before any of the body is read.
    let request =
        delivery("/hook", "msg_big", b"")?.header("content-length", (LIMIT + 1).to_string());
    let r = send(&app, &request).await?;
    expect(&r, 413, "Content-Length above the limit")?;
    ensure!(app.behaviour.total() == 0, "handler not run");
    Ok(())
}

async fn chunked_body_over_limit_is_413(env: Env) -> Outcome {
    let app = env.app().await?;
    let body = vec![b'a'; LIMIT + 1];
    let request = delivery("/hook", "msg_chunked", &body)?.framing(Framing::Chunked(4096));
    expect(
        &send(&app, &request).await?,
        413,
        "chunked body above the limit",
    )?;
    ensure!(app.behaviour.total() == 0, "handler not run");
    Ok(())
}

async fn body_at_limit_is_accepted(env: Env) -> Outcome {
    let app = env.app().await?;
    let body = vec![b'a'; LIMIT];
    let chunked = delivery("/hook", "msg_limit_chunked", &body)?.framing(Framing::Chunked(1000));
    expect(
        &send(&app, &chunked).await?,
        204,
        "chunked body at the limit",
    )?;
    let plain = delivery("/hook", "msg_limit", &body)?;
    expect(&send(&app, &plain).await?, 204, "body at the limit")?;
    Ok(())
}

async fn missing_signature_headers_are_400(env: Env) -> Outcome {
    let app = env.app().await?;
    let r = send(&app, &Request::post("/hook", BODY.to_vec())).await?;
    expect(&r, 400, "no signature headers")?;
    ensure!(
        r.text().contains("missing"),
        "reason names what is missing: {:?}",
        r.text()
    );
    let r = send(
        &app,
        &Request::post("/hook", BODY.to_vec())
            .header("webhook-id", "msg_x")
            .header("webhook-timestamp", keys::now().to_string()),
    )
    .await?;
    expect(&r, 400, "no webhook-signature")?;
    ensure!(app.behaviour.total() == 0, "handler not run");
    Ok(())
}

async fn malformed_headers_are_400(env: Env) -> Outcome {
    let app = env.app().await?;
    for timestamp in ["abc", "-5", "99999999999999999999999", "1.5"] {
        let request = Request::post("/hook", BODY.to_vec())
            .header("webhook-id", "msg_malformed")
            .header("webhook-timestamp", timestamp)
            .header("webhook-signature", "v1,AAAA");
        expect(
            &send(&app, &request).await?,
            400,
            &format!("timestamp {timestamp:?}"),
        )?;
    }
    ensure!(app.behaviour.total() == 0, "handler not run");
    Ok(())
}

async fn bad_signature_is_401(env: Env) -> Outcome {
    let app = env.app().await?;
    let foreign = keys::hmac(keys::FOREIGN_SECRET).map_err(|e| e.to_string())?;
    let r = send(
        &app,
        &signed_with(&foreign, "/hook", "msg_forged", keys::now(), BODY)?,
    )
    .await?;
    expect(&r, 401, "unknown secret")?;
    ensure!(
        !r.text().contains("v1,"),
        "reason never reveals a signature"
    );
    // A tampered body under a genuine signature.
    let mut tampered = delivery("/hook", "msg_forged", BODY)?;
    tampered.body = br#"{"type":"email.sent","data":{"count":2}}"#.to_vec();
    expect(&send(&app, &tampered).await?, 401, "tampered body")?;
    // A forgery must not claim the real id: the genuine delivery still runs.
    expect(
        &send(&app, &delivery("/hook", "msg_forged", BODY)?).await?,
        204,
        "genuine after forgery",
    )?;
    ensure!(
        app.behaviour.calls("msg_forged") == 1,
        "only the genuine delivery ran"
    );
    Ok(())
}

async fn stale_and_future_timestamps_are_401(env: Env) -> Outcome {
    let app = env.app().await?;
    let signer = signer()?;
    // Each timestamp is taken just before its send, 10 s past the 300 s
    // tolerance: a loaded machine can spend seconds between signing and
    // verifying, which must not move a timestamp back inside the window.
    let stale = signed_with(&signer, "/hook", "msg_stale", keys::now() - 310, BODY)?;
    expect(&send(&app, &stale).await?, 401, "timestamp 310 s old")?;
    let future = signed_with(&signer, "/hook", "msg_future", keys::now() + 310, BODY)?;
    expect(&send(&app, &future).await?, 401, "timestamp 310 s ahead")?;
    let edge = signed_with(&signer, "/hook", "msg_edge", keys::now() - 280, BODY)?;
    expect(&send(&app, &edge).await?, 204, "timestamp within tolerance")?;
    Ok(())
}

async fn rotation_accepts_both_secrets(env: Env) -> Outcome {
    let app = env.app().await?;
    let old = keys::hmac(keys::OLD_SECRET).map_err(|e| e.to_string())?;
    expect(
        &send(
            &app,
            &signed_with(&old, "/hook", "msg_old", keys::now(), BODY)?,
        )
        .await?,
        204,
        "old secret",
    )?;
    expect(
        &send(&app, &delivery("/hook", "msg_new", BODY)?).await?,
        204,
        "new secret",
    )?;
    // A header carrying a foreign signature and a valid one passes.
    let mut both = delivery("/hook", "msg_both", BODY)?;
    let foreign = keys::hmac(keys::FOREIGN_SECRET).map_err(|e| e.to_string())?;
    let extra = foreign.sign("msg_both", keys::now(), BODY);
    for (name, value) in &mut both.headers {
        if name == "webhook-signature" {
            *value = format!("{extra} v2,ignored {value}");
        }
    }
    expect(
        &send(&app, &both).await?,
        204,
        "several signatures, one valid",
    )?;
    Ok(())
}

async fn v1a_signatures_from_trusted_keys(env: Env) -> Outcome {
    let app = env.app().await?;
    let trusted = Signer::ed25519(keys::SIGNING_KEY).map_err(|e| e.to_string())?;
    let untrusted = Signer::ed25519(keys::UNTRUSTED_KEY).map_err(|e| e.to_string())?;
    expect(
        &send(
            &app,
            &signed_with(&untrusted, "/hook", "msg_v1a", keys::now(), BODY)?,
        )
        .await?,
        401,
        "untrusted v1a key",
    )?;
    expect(
        &send(
            &app,
            &signed_with(&trusted, "/hook", "msg_v1a", keys::now(), BODY)?,
        )
        .await?,
        204,
        "trusted v1a key",
    )?;
    Ok(())
}

async fn handler_failure_then_retry(env: Env) -> Outcome {
    let app = env.app().await?;
    let request = delivery("/hook", "msg_fail", BODY)?.header(MODE_HEADER, "fail-once");
    expect(&send(&app, &request).await?, 500, "first attempt fails")?;
    expect(&send(&app, &request).await?, 204, "retry is processed")?;
    let third = send(&app, &request).await?;
    expect(&third, 200, "then it is a duplicate")?;
    ensure!(
        app.behaviour.calls("msg_fail") == 2,
        "handler ran twice, processed once"
    );
    Ok(())
}

async fn panic_then_retry(env: Env) -> Outcome {
    let _quiet = expect_panics(PANIC_ON_PURPOSE);
    let app = env.app().await?;
    let request = delivery("/hook", "msg_panic", BODY)?.header(MODE_HEADER, "panic-once");
    expect(&send(&app, &request).await?, 500, "panicking handler")?;
    expect(&send(&app, &request).await?, 204, "retry is processed")?;
    expect(&send(&app, &request).await?, 200, "then it is a duplicate")?;
    ensure!(app.behaviour.calls("msg_panic") == 2, "handler ran twice");
    Ok(())
}

async fn typed_json(env: Env) -> Outcome {
    let app = env.app().await?;
    expect(
        &send(&app, &delivery("/typed", "msg_typed", BODY)?).await?,
        204,
        "typed event",
    )?;
    let misfit = br#"{"type":"email.sent","data":{"count":"many"}}"#;
    let r = send(&app, &delivery("/typed", "msg_misfit", misfit)?).await?;
    expect(&r, 422, "JSON that does not fit")?;
    ensure!(
        r.text().contains("data.count"),
        "422 names the field: {:?}",
        r.text()
    );
    ensure!(
        !r.text().contains("many"),
        "422 does not echo the body: {:?}",
        r.text()
    );
    // The claim was released: the same delivery is processed by a route that accepts it.
    expect(
        &send(&app, &delivery("/hook", "msg_misfit", misfit)?).await?,
        204,
        "released after 422",
    )?;
    Ok(())
}

async fn extractor_without_layer_is_500(env: Env) -> Outcome {
    let app = env.app().await?;
    let r = send(&app, &delivery("/unguarded", "msg_unguarded", BODY)?).await?;
    expect(&r, 500, "extractor without the layer")?;
    ensure!(
        r.text().contains("installed"),
        "says the layer is missing: {:?}",
        r.text()
    );
    Ok(())
}

async fn concurrency_storm_runs_once(env: Env) -> Outcome {
    let app = env.app().await?;
    let request = delivery("/hook", "msg_storm", BODY)?.header(MODE_HEADER, "sleep:300");
    let mut tasks = Vec::new();
    for _ in 0..200 {
        let request = request.clone();
        let addr = app.addr;
        tasks.push(tokio::spawn(
            async move { client::send(addr, &request).await },
        ));
    }
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for task in tasks {
        let r = task.await.map_err(|e| e.to_string())??;
        *statuses.entry(r.status).or_default() += 1;
    }
    ensure!(
        app.behaviour.calls("msg_storm") == 1,
        "handler ran {} times",
        app.behaviour.calls("msg_storm")
    );
    ensure!(statuses.get(&204) == Some(&1), "one 204: {statuses:?}");
    ensure!(
        statuses.keys().all(|s| [200, 204, 409].contains(s)),
        "only 200/204/409: {statuses:?}"
    );
    Ok(())
}

async fn lease_expiry_takeover(env: Env) -> Outcome {
    let mut spec = env.spec();
    spec.lease = Duration::from_secs(1);
    // The first holder's lease renewals never reach the store (a frozen or
    // partitioned holder), so its lease runs out while it works.
    spec.store = Arc::new(Faulty::new(spec.store).failing_extends());
    let app = env.framework.start(&spec).await?;
    let addr = app.addr;
    let slow = delivery("/hook", "msg_lease", BODY)?.header(MODE_HEADER, "sleep:3000");
    let first = tokio::spawn(async move { client::send(addr, &slow).await });
    // The claim was taken just before the handler started: 1.3 s later the
    // 1 s lease has expired and the first holder is still running (3 s).
    handler_started(&app, "msg_lease", 1).await?;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    // Two retries after the lease expired: exactly one takes over (and fails).
    let retry = delivery("/hook", "msg_lease", BODY)?.header(MODE_HEADER, "sleep-fail:300");
    let (a, b) = tokio::join!(client::send(addr, &retry), client::send(addr, &retry));
    let mut pair = [a?.status, b?.status];
    pair.sort_unstable();
    ensure!(pair == [409, 500], "one takeover, one in-flight: {pair:?}");
    // The first holder finishes: its late complete must be refused.
    expect(
        &first.await.map_err(|e| e.to_string())??,
        204,
        "first holder",
    )?;
    let after = send(&app, &delivery("/hook", "msg_lease", BODY)?).await?;
    expect(
        &after,
        204,
        "processed again: the stale complete changed nothing",
    )?;
    expect(
        &send(&app, &delivery("/hook", "msg_lease", BODY)?).await?,
        200,
        "then duplicate",
    )?;
    ensure!(
        app.behaviour.calls("msg_lease") == 3,
        "runs: {}",
        app.behaviour.calls("msg_lease")
    );
    Ok(())
}

async fn store_unreachable_is_503(env: Env) -> Outcome {
    let mut spec = env.spec();
    spec.store = env.backend.unreachable().await?;
    let app = env.framework.start(&spec).await?;
    let r = send(&app, &delivery("/hook", "msg_down", BODY)?).await?;
    expect(&r, 503, "store unreachable")?;
    ensure!(r.header("retry-after").is_some(), "Retry-After on 503");
    ensure!(app.behaviour.total() == 0, "handler not run (fail closed)");
    Ok(())
}

async fn github_scheme_through_the_same_pipeline(env: Env) -> Outcome {
    let app = env.app().await?;
    let github =
        webhooks_core::scheme::GitHub::new(keys::GITHUB_SECRET).map_err(|e| e.to_string())?;
    let body = br#"{"ref":"refs/heads/main"}"#;
    let headers = github
        .sign_headers("72d3162e-cc78-11e3-81ab-4c9367dc0958", "push", body)
        .map_err(|e| e.to_string())?;
    let request = Request::post("/github", body.to_vec())
        .headers(&headers)
        .header(crate::behaviour::EXPECT_EVENT_HEADER, "push");
    expect(&send(&app, &request).await?, 204, "signed GitHub delivery")?;
    let again = send(&app, &request).await?;
    expect(&again, 200, "redelivery of the same X-GitHub-Delivery")?;
    ensure!(
        again.header("webhook-duplicate") == Some("true"),
        "duplicate marker"
    );
    // No X-Hub-Signature-256 is a 400, never "skip verification"; SHA-1 alone is refused.
    let unsigned = Request::post("/github", body.to_vec())
        .header("x-github-delivery", "d-unsigned")
        .header(
            "x-hub-signature",
            "sha1=0000000000000000000000000000000000000000",
        );
    expect(&send(&app, &unsigned).await?, 400, "no SHA-256 signature")?;
    let mut tampered = Request::post("/github", b"{}".to_vec()).headers(&headers);
    tampered.headers.retain(|(n, _)| n != "x-github-delivery");
    tampered = tampered.header("x-github-delivery", "d-tampered");
    expect(
        &send(&app, &tampered).await?,
        401,
        "body not the signed one",
    )?;
    ensure!(
        app.behaviour.calls("72d3162e-cc78-11e3-81ab-4c9367dc0958") == 1,
        "handler ran once"
    );
    ensure!(app.behaviour.total() == 1, "only the genuine delivery ran");
    Ok(())
}

/// Issue 10, item 1: with per-tenant secrets, tenant B's delivery must not
/// suppress tenant A's delivery of the same id.
async fn tenants_do_not_share_delivery_ids(env: Env) -> Outcome {
    let app = env.app().await?;
    let tenant = |secret: &str| keys::hmac(secret).map_err(|e| e.to_string());
    let (a, b) = (
        tenant(keys::TENANT_A_SECRET)?,
        tenant(keys::TENANT_B_SECRET)?,
    );
    let id = "msg_tenant_42";
    let from_b = signed_with(&b, "/tenants/globex/hook", id, keys::now(), BODY)?;
    expect(&send(&app, &from_b).await?, 204, "tenant B's delivery")?;
    let from_a = signed_with(&a, "/tenants/acme/hook", id, keys::now(), BODY)?;
    let r = send(&app, &from_a).await?;
    expect(&r, 204, "tenant A's delivery of the same id runs")?;
    ensure!(
        r.header("webhook-duplicate").is_none(),
        "A is not a duplicate"
    );
    // Each tenant's own retry is still a duplicate.
    expect(&send(&app, &from_a).await?, 200, "tenant A's retry")?;
    expect(&send(&app, &from_b).await?, 200, "tenant B's retry")?;
    // B's secret on A's path is a forgery.
    let forged = signed_with(&b, "/tenants/acme/hook", "msg_tenant_43", keys::now(), BODY)?;
    expect(&send(&app, &forged).await?, 401, "B's secret on A's route")?;
    ensure!(
        app.behaviour.calls(id) == 2,
        "each tenant's delivery ran once: {}",
        app.behaviour.calls(id)
    );
    Ok(())
}

/// A captured delivery of a scheme whose id header is not signed, replayed
/// with a fresh id or none (issue 10, item 2).
async fn unsigned_id_replay(
    env: &Env,
    path: &str,
    id_header: &str,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Outcome {
    let app = env.app().await?;
    let genuine = Request::post(path, body.to_vec()).headers(headers);
    let id = genuine
        .headers
        .iter()
        .find(|(n, _)| n == id_header)
        .map(|(_, v)| v.clone())
        .ok_or("the genuine delivery has an id")?;
    expect(&send(&app, &genuine).await?, 204, "genuine delivery")?;
    let mut fresh = genuine.clone();
    fresh.headers.retain(|(n, _)| n != id_header);
    let none = fresh.clone();
    fresh = fresh.header(id_header, "replayed-with-a-fresh-id");
    let r = send(&app, &fresh).await?;
    expect(&r, 200, "replay with a fresh id")?;
    ensure!(
        r.header("webhook-duplicate") == Some("true"),
        "replay is a duplicate: {:?}",
        r.headers
    );
    let r = send(&app, &none).await?;
    expect(&r, 400, "replay without an id")?;
    ensure!(
        r.text().contains(id_header),
        "400 names {id_header}: {:?}",
        r.text()
    );
    ensure!(app.behaviour.calls(&id) == 1, "genuine ran once");
    ensure!(
        app.behaviour.total() == 1,
        "only the genuine delivery ran, {} runs",
        app.behaviour.total()
    );
    Ok(())
}

async fn github_replay_with_a_fresh_id_does_not_run(env: Env) -> Outcome {
    let github =
        webhooks_core::scheme::GitHub::new(keys::GITHUB_SECRET).map_err(|e| e.to_string())?;
    let body = br#"{"action":"opened","number":7}"#;
    let headers = github
        .sign_headers("0f6c9a10-cc78-11e3-81ab-4c9367dc0958", "pull_request", body)
        .map_err(|e| e.to_string())?;
    unsigned_id_replay(&env, "/github", "x-github-delivery", &headers, body).await
}

async fn shopify_replay_with_a_fresh_id_does_not_run(env: Env) -> Outcome {
    let shopify =
        webhooks_core::scheme::Shopify::new(keys::SHOPIFY_SECRET).map_err(|e| e.to_string())?;
    let body = br#"{"id":820982911946154508,"total_price":"10.00"}"#;
    let headers = shopify
        .sign_headers(
            "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
            "orders/create",
            body,
        )
        .map_err(|e| e.to_string())?;
    unsigned_id_replay(&env, "/shopify", "x-shopify-webhook-id", &headers, body).await
}

async fn slow_handler_keeps_its_lease(env: Env) -> Outcome {
    let mut spec = env.spec();
    spec.lease = Duration::from_secs(1);
    let app = env.framework.start(&spec).await?;
    let addr = app.addr;
    let slow = delivery("/hook", "msg_renewed", BODY)?.header(MODE_HEADER, "sleep:2500");
    let first = tokio::spawn(async move { client::send(addr, &slow).await });
    handler_started(&app, "msg_renewed", 1).await?;
    // Well past the 1 s lease: the holder renewed it, so a retry is refused.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let retry = send(&app, &delivery("/hook", "msg_renewed", BODY)?).await?;
    expect(&retry, 409, "retry while the slow holder renews its lease")?;
    expect(
        &first.await.map_err(|e| e.to_string())??,
        204,
        "slow handler",
    )?;
    let after = send(&app, &delivery("/hook", "msg_renewed", BODY)?).await?;
    expect(&after, 200, "its completion held: a duplicate")?;
    ensure!(
        app.behaviour.calls("msg_renewed") == 1,
        "runs: {}",
        app.behaviour.calls("msg_renewed")
    );
    Ok(())
}

async fn client_gone_during_complete_still_completes(env: Env) -> Outcome {
    let mut spec = env.spec();
    let slow = Duration::from_millis(600);
    spec.store = Arc::new(Faulty::new(spec.store).slow_complete(slow));
    let app = env.framework.start(&spec).await?;
    let request = delivery("/hook", "msg_gone", BODY)?;
    // The handler answers at once; the client leaves 300 ms later, while the
    // 600 ms complete is still under way.
    client::send_and_drop(app.addr, &request, Duration::from_millis(300)).await;
    ensure!(app.behaviour.calls("msg_gone") == 1, "handler ran");
    tokio::time::sleep(Duration::from_millis(900)).await;
    let retry = send(&app, &request).await?;
    expect(&retry, 200, "retry after the client left: completed")?;
    ensure!(
        retry.header("webhook-duplicate") == Some("true"),
        "duplicate marker"
    );
    ensure!(app.behaviour.calls("msg_gone") == 1, "handler ran once");
    Ok(())
}

async fn failed_complete_is_retried(env: Env) -> Outcome {
    let mut spec = env.spec();
    spec.store = Arc::new(Faulty::new(spec.store).failing_completes(2));
    let app = env.framework.start(&spec).await?;
    let request = delivery("/hook", "msg_recomplete", BODY)?;
    expect(&send(&app, &request).await?, 204, "handler succeeded")?;
    // Two failed completes, retried after 100 ms and 200 ms.
    let mut last = None;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let r = send(&app, &request).await?;
        if r.status == 200 {
            last = Some(r);
            break;
        }
        ensure!(r.status == 409, "while completing: 409, got {}", r.status);
    }
    let Some(r) = last else {
        return Err("the completion was never retried".into());
    };
    ensure!(
        r.header("webhook-duplicate") == Some("true"),
        "duplicate marker"
    );
    ensure!(
        app.behaviour.calls("msg_recomplete") == 1,
        "runs: {}",
        app.behaviour.calls("msg_recomplete")
    );
    Ok(())
}

async fn on_reject_shapes_only_the_body(env: Env) -> Outcome {
    let mut spec = env.spec();
    spec.custom_rejections = true;
    let app = env.framework.start(&spec).await?;
    let r = send(&app, &Request::post("/hook", BODY.to_vec())).await?;
    expect(&r, 400, "missing signature through the hook")?;
    ensure!(
        r.text() == r#"{"error":"missing_header"}"#,
        "the hook's body: {:?}",
        r.text()
    );
    ensure!(
        r.header("retry-after").is_none() && r.header("webhook-duplicate").is_none(),
        "no protocol headers of the hook's: {:?}",
        r.headers
    );
    let request = delivery("/hook", "msg_hooked", BODY)?;
    expect(&send(&app, &request).await?, 204, "first")?;
    let dup = send(&app, &request).await?;
    expect(&dup, 200, "duplicate through the hook")?;
    ensure!(
        dup.header("webhook-duplicate") == Some("true"),
        "the library's duplicate marker: {:?}",
        dup.headers
    );
    let slow = delivery("/hook", "msg_hooked_busy", BODY)?.header(MODE_HEADER, "sleep:1000");
    let addr = app.addr;
    let first = tokio::spawn(async move { client::send(addr, &slow).await });
    handler_started(&app, "msg_hooked_busy", 1).await?;
    let busy = send(&app, &delivery("/hook", "msg_hooked_busy", BODY)?).await?;
    expect(&busy, 409, "in flight through the hook")?;
    let after: u64 = busy
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .ok_or("Retry-After missing")?;
    ensure!(
        (1..=5).contains(&after),
        "the library's Retry-After: {after}"
    );
    expect(
        &first.await.map_err(|e| e.to_string())??,
        204,
        "busy holder",
    )?;
    let misfit = br#"{"type":"email.sent","data":{"count":"many"}}"#;
    let r = send(&app, &delivery("/typed", "msg_hooked_misfit", misfit)?).await?;
    expect(&r, 422, "the extractor's 422 through the hook")?;
    ensure!(
        r.text() == r#"{"error":"invalid_json"}"#,
        "the hook's body: {:?}",
        r.text()
    );
    Ok(())
}

async fn large_body_reaches_byte_extractors(env: Env) -> Outcome {
    let mut spec = env.spec();
    spec.body_limit = 3 * 1024 * 1024;
    let app = env.framework.start(&spec).await?;
    // Above actix's 256 KiB default for `web::Bytes` and `String`, within
    // the receiver's limit.
    let body = vec![b'a'; 300 * 1024];
    let r = send(&app, &delivery("/hook", "msg_large", &body)?).await?;
    expect(&r, 204, "300 KiB body read again as bytes")?;
    ensure!(app.behaviour.calls("msg_large") == 1, "handler ran once");
    let r = send(&app, &delivery("/text", "msg_large_text", &body)?).await?;
    expect(&r, 204, "300 KiB body read again as a String")?;
    // Above actix's 2 MiB `JsonConfig` default.
    let pad = "a".repeat(2 * 1024 * 1024 + 512 * 1024);
    let json = format!(r#"{{"type":"email.sent","data":{{"pad":"{pad}"}}}}"#);
    let json = delivery("/json", "msg_large_json", json.as_bytes())?
        .header("content-type", "application/json");
    let r = send(&app, &json).await?;
    expect(&r, 204, "2.5 MiB body read again as JSON")?;
    // Above actix's 16 KiB `FormConfig` default (form-encoded senders:
    // Mailgun, Twilio, Mandrill).
    let form: String = (0..2000).map(|i| format!("field{i}=value{i}&")).collect();
    let form = delivery("/form", "msg_large_form", form.as_bytes())?
        .header("content-type", "application/x-www-form-urlencoded");
    expect(&send(&app, &form).await?, 204, "30 KiB form read again")?;
    for id in ["msg_large_text", "msg_large_json", "msg_large_form"] {
        ensure!(app.behaviour.calls(id) == 1, "{id}: handler ran once");
    }
    Ok(())
}

async fn stalled_body_is_408(env: Env) -> Outcome {
    let mut spec = env.spec();
    spec.body_timeout = Duration::from_secs(1);
    let app = env.framework.start(&spec).await?;
    // Announces 100 bytes, sends 10, then waits.
    let short = delivery("/hook", "msg_short", b"0123456789")?.header("content-length", "100");
    let r = send(&app, &short).await?;
    expect(&r, 408, "Content-Length larger than what is sent")?;
    // 40 bytes, one every 100 ms: 4 s for the whole body.
    let body = br#"{"type":"email.sent","data":{"count":42}}"#;
    let trickled = delivery("/hook", "msg_trickle", body)?;
    let r = client::send_trickled(app.addr, &trickled, 1, Duration::from_millis(100)).await?;
    expect(&r, 408, "trickled body")?;
    ensure!(app.behaviour.total() == 0, "handler not run");
    // The same delivery sent at once is processed: nothing was claimed.
    expect(&send(&app, &trickled).await?, 204, "then sent at once")?;
    Ok(())
}

async fn metrics_count_each_outcome(env: Env) -> Outcome {
    let spec = env.spec();
    let route = spec.namespace.clone();
    let app = env.framework.start(&spec).await?;
    expect(
        &send(&app, &delivery("/hook", "msg_m1", BODY)?).await?,
        204,
        "first",
    )?;
    expect(
        &send(&app, &delivery("/hook", "msg_m1", BODY)?).await?,
        200,
        "duplicate",
    )?;
    let old = keys::hmac(keys::OLD_SECRET).map_err(|e| e.to_string())?;
    let rotated =
        signed_with(&old, "/hook", "msg_m2", keys::now(), BODY)?.header(MODE_HEADER, "fail");
    expect(
        &send(&app, &rotated).await?,
        500,
        "handler failure, rotated secret",
    )?;
    let _quiet = expect_panics(PANIC_ON_PURPOSE);
    let panics = delivery("/hook", "msg_m3", BODY)?.header(MODE_HEADER, "panic-once");
    expect(&send(&app, &panics).await?, 500, "handler panic")?;
    let foreign = keys::hmac(keys::FOREIGN_SECRET).map_err(|e| e.to_string())?;
    let forged = signed_with(&foreign, "/hook", "msg_m4", keys::now(), BODY)?;
    expect(&send(&app, &forged).await?, 401, "forgery")?;
    let stale = signed_with(&signer()?, "/hook", "msg_m5", keys::now() - 301, BODY)?;
    expect(&send(&app, &stale).await?, 401, "stale")?;
    expect(
        &send(&app, &Request::post("/hook", BODY.to_vec())).await?,
        400,
        "unsigned",
    )?;
    let big = delivery("/hook", "msg_m6", b"")?.header("content-length", (LIMIT + 1).to_string());
    expect(&send(&app, &big).await?, 413, "too large")?;
    // A tenant's delivery: its key comes from a lookup.
    let tenant = keys::hmac(keys::TENANT_A_SECRET).map_err(|e| e.to_string())?;
    let from_tenant = signed_with(&tenant, "/tenants/acme/hook", "msg_m7", keys::now(), BODY)?;
    expect(&send(&app, &from_tenant).await?, 204, "a tenant's delivery")?;
    let s = "standard-webhooks";
    let t = "tenant";
    let want: std::collections::BTreeMap<String, u64> = [
        // The unsigned and the stale request are refused from their head,
        // before a body is read (issue 25): 5 bodies read, not 7.
        (format!("webhooks_body_size_bytes{{scheme={s}}}"), 5),
        (format!("webhooks_claim_duration_seconds{{scheme={s}}}"), 4),
        (
            format!("webhooks_duplicates_total{{scheme={s},state=completed}}"),
            1,
        ),
        (
            format!("webhooks_handler_duration_seconds{{scheme={s}}}"),
            3,
        ),
        (format!("webhooks_handler_total{{scheme={s},class=2xx}}"), 1),
        (format!("webhooks_handler_total{{scheme={s},class=5xx}}"), 1),
        (
            format!("webhooks_handler_total{{scheme={s},class=panic}}"),
            1,
        ),
        (format!("webhooks_received_total{{scheme={s}}}"), 8),
        (
            format!("webhooks_rejected_total{{scheme={s},reason=missing_header}}"),
            1,
        ),
        (
            format!("webhooks_rejected_total{{scheme={s},reason=no_matching_signature}}"),
            1,
        ),
        (
            format!("webhooks_rejected_total{{scheme={s},reason=payload_too_large}}"),
            1,
        ),
        (
            format!("webhooks_rejected_total{{scheme={s},reason=timestamp_too_old}}"),
            1,
        ),
        (
            format!("webhooks_verified_total{{scheme={s},key=primary}}"),
            3,
        ),
        (
            format!("webhooks_verified_total{{scheme={s},key=rotated}}"),
            1,
        ),
        (format!("webhooks_verify_duration_seconds{{scheme={s}}}"), 7),
        (format!("webhooks_body_size_bytes{{scheme={t}}}"), 1),
        (format!("webhooks_claim_duration_seconds{{scheme={t}}}"), 1),
        (
            format!("webhooks_handler_duration_seconds{{scheme={t}}}"),
            1,
        ),
        (format!("webhooks_handler_total{{scheme={t},class=2xx}}"), 1),
        (format!("webhooks_received_total{{scheme={t}}}"), 1),
        (
            format!("webhooks_verified_total{{scheme={t},key=lookup}}"),
            1,
        ),
        (format!("webhooks_verify_duration_seconds{{scheme={t}}}"), 1),
    ]
    .into_iter()
    .collect();
    let got = crate::signals::series(&route);
    ensure!(
        got == want,
        "metrics of {route}:\n got {got:#?}\nwant {want:#?}"
    );
    Ok(())
}

async fn metrics_count_store_failures(env: Env) -> Outcome {
    let mut spec = env.spec();
    spec.store = env.backend.unreachable().await?;
    let route = spec.namespace.clone();
    let app = env.framework.start(&spec).await?;
    expect(
        &send(&app, &delivery("/hook", "msg_down", BODY)?).await?,
        503,
        "store down",
    )?;
    let got = crate::signals::series(&route);
    let s = "standard-webhooks";
    for (name, n) in [
        (
            format!("webhooks_store_errors_total{{scheme={s},operation=claim}}"),
            1,
        ),
        (
            format!("webhooks_rejected_total{{scheme={s},reason=store_unavailable}}"),
            1,
        ),
    ] {
        ensure!(got.get(&name) == Some(&n), "{name} = {n}, got {got:#?}");
    }
    ensure!(app.behaviour.total() == 0, "handler not run");
    Ok(())
}

/// An inbox on `env`'s engine, or `None` (said on stderr) when there is none.
pub(crate) async fn inbox_of(
    env: &Env,
) -> Result<Option<Arc<dyn webhooks_core::inbox::Inbox>>, String> {
    let inbox = env.backend.inbox().await?;
    if inbox.is_none() {
        eprintln!(
            "skipped: no inbox engine for the {} backend (server missing, or the in-process backend without `sqlite`)",
            env.backend.name()
        );
    }
    Ok(inbox)
}

/// Inbox mode: a verified delivery is stored and answered `202`, the route's
/// handler never runs (workers do), and the sender's retry is a duplicate.
async fn inbox_stores_then_acknowledges_duplicates(env: Env) -> Outcome {
    let Some(inbox) = inbox_of(&env).await? else {
        return Ok(());
    };
    let mut spec = env.spec();
    spec.inbox = Some(Arc::clone(&inbox));
    let app = env.framework.start(&spec).await?;
    expect(
        &send(&app, &delivery("/inbox", "msg_inbox_1", BODY)?).await?,
        202,
        "stored",
    )?;
    let again = send(&app, &delivery("/inbox", "msg_inbox_1", BODY)?).await?;
    expect(&again, 200, "the retry of a stored delivery")?;
    ensure!(
        again.header("webhook-duplicate") == Some("true"),
        "webhook-duplicate header"
    );
    let forged = signed_with(
        &keys::hmac(keys::FOREIGN_SECRET).map_err(|e| e.to_string())?,
        "/inbox",
        "msg_inbox_2",
        keys::now(),
        BODY,
    )?;
    expect(&send(&app, &forged).await?, 401, "a forgery is not stored")?;
    ensure!(
        app.behaviour.total() == 0,
        "workers run the handler, not the route"
    );
    let stats = inbox.stats().await.map_err(|e| e.to_string())?;
    ensure!(stats.pending == 1, "one event stored: {stats:?}");
    Ok(())
}

/// Issue 34, item 8: with a response budget, a handler that answers in
/// time answers itself and nothing is stored; one that does not is stored
/// in the inbox and answered `202` while it runs on, and the worker
/// claiming on the route's dedup store completes the event without running
/// it again; a handler that fails past the budget is run by the worker,
/// once. The sender's retries are duplicates.
async fn response_budget_hands_late_handlers_to_the_inbox(env: Env) -> Outcome {
    use webhooks_core::inbox::{Job, Worker};

    let Some(inbox) = inbox_of(&env).await? else {
        return Ok(());
    };
    let mut spec = env.spec();
    spec.budget = Some((Arc::clone(&inbox), Duration::from_millis(300)));
    let app = env.framework.start(&spec).await?;
    let e = |e: webhooks_core::inbox::InboxError| e.to_string();
    let fast = delivery("/hook", "msg_budget_fast", BODY)?.header(MODE_HEADER, "ok");
    expect(
        &send(&app, &fast).await?,
        204,
        "in time: the handler's answer",
    )?;
    ensure!(
        inbox.stats().await.map_err(e)?.pending == 0,
        "nothing stored for a handler in time"
    );
    let slow = delivery("/hook", "msg_budget_slow", BODY)?.header(MODE_HEADER, "sleep:1200");
    expect(&send(&app, &slow).await?, 202, "late: stored and answered")?;
    let failing = delivery("/hook", "msg_budget_fail", BODY)?.header(MODE_HEADER, "sleep-fail:600");
    expect(&send(&app, &failing).await?, 202, "late, then failing")?;
    ensure!(
        inbox.stats().await.map_err(e)?.pending == 2,
        "both handed over"
    );
    // The worker waits for the inline runs: the slow one succeeds (the
    // worker completes its event without running it), the failing one
    // releases its claim (the worker runs it).
    let ran = Arc::new(std::sync::Mutex::new(Vec::new()));
    let worker_ran = Arc::clone(&ran);
    let worker = Worker::builder(Arc::clone(&inbox))
        .claim_on(Arc::clone(&spec.store), Duration::from_secs(7 * 86_400))
        .poll_interval(Duration::from_millis(20))
        .timeout(Duration::from_secs(10))
        .concurrency(2)
        .handler(move |job: Job<serde_json::Value>| {
            let ran = Arc::clone(&worker_ran);
            async move {
                ran.lock()
                    .map_err(|_| "poisoned".to_owned())?
                    .push(job.meta.delivery_id.unwrap_or_default());
                Ok::<(), String>(())
            }
        });
    let report = tokio::time::timeout(Duration::from_secs(30), worker.run_until_idle())
        .await
        .map_err(|_| "the worker did not become idle".to_owned())?;
    ensure!(report.completed == 2, "report: {report:?}");
    let ran = ran.lock().map_err(|_| "poisoned".to_owned())?.clone();
    ensure!(
        ran == ["msg_budget_fail"],
        "the worker ran the failed delivery only: {ran:?}"
    );
    ensure!(
        app.behaviour.calls("msg_budget_slow") == 1,
        "the slow handler ran once, inline"
    );
    for id in ["msg_budget_fast", "msg_budget_slow", "msg_budget_fail"] {
        let again = send(&app, &delivery("/hook", id, BODY)?).await?;
        expect(&again, 200, id)?;
        ensure!(
            again.header("webhook-duplicate") == Some("true"),
            "{id}: a duplicate"
        );
    }
    Ok(())
}

/// The dead-letter admin API (JSON, mounted under `/admin/inbox`): list
/// without bodies, inspect with the body, replay once (the second replay
/// is a 409), and the protocol's 404/405/400 answers.
async fn inbox_admin_lists_inspects_and_replays_once(env: Env) -> Outcome {
    use webhooks_core::inbox::{ClaimToken, NewEvent, Transition};

    let Some(inbox) = inbox_of(&env).await? else {
        return Ok(());
    };
    let e = |e: webhooks_core::inbox::InboxError| e.to_string();
    inbox
        .accept(&NewEvent::new("webhooks:test:a/1", "test", "{\"n\":1}"))
        .await
        .map_err(e)?;
    let token = ClaimToken::random();
    let leased = inbox
        .lease(token, 1, Duration::from_secs(30), 3)
        .await
        .map_err(e)?;
    ensure!(leased.len() == 1, "leased {} events", leased.len());
    let dead = inbox
        .dead_letter(&leased[0].meta.key, token, "boom")
        .await
        .map_err(e)?;
    ensure!(dead == Transition::Applied, "dead-lettered: {dead:?}");

    let mut spec = env.spec();
    spec.inbox = Some(Arc::clone(&inbox));
    let app = env.framework.start(&spec).await?;
    // An API client: state-changing requests carry the JSON content type.
    let call = |method: &'static str, path: &str| {
        let request = Request::method(method, path).header("content-type", "application/json");
        admin_call(app.addr, request)
    };
    let key = "/admin/inbox/dead-letters/webhooks%3Atest%3Aa%2F1";
    let (status, list) = call("GET", "/admin/inbox/dead-letters?scheme=test").await?;
    ensure!(status == 200, "list: {status}");
    ensure!(list["items"][0]["last_error"] == "boom", "list: {list}");
    ensure!(
        list["items"][0].get("body").is_none(),
        "no body in the list"
    );
    let (status, one) = call("GET", key).await?;
    ensure!(status == 200, "inspect: {status}");
    ensure!(one["body"] == "{\"n\":1}", "inspect: {one}");
    let replay = format!("{key}/replay");
    ensure!(call("POST", &replay).await?.0 == 200, "first replay");
    ensure!(call("POST", &replay).await?.0 == 409, "second replay");
    ensure!(
        call("DELETE", key).await?.0 == 404,
        "no longer a dead letter"
    );
    let (status, stats) = call("GET", "/admin/inbox/stats").await?;
    ensure!(
        (status, stats["pending"].as_u64()) == (200, Some(1)),
        "stats: {status} {stats}"
    );
    ensure!(
        call("PUT", "/admin/inbox/stats").await?.0 == 405,
        "PUT stats"
    );
    ensure!(
        call("GET", "/admin/inbox/nothing").await?.0 == 404,
        "unknown path"
    );
    ensure!(
        call("POST", "/admin/inbox/purge").await?.0 == 400,
        "purge without a bound"
    );
    Ok(())
}

/// Issue 34 through both adapters: the admin API searches payload values
/// (`q=`), counts then replays every match (`/bulk/replay`), records it in
/// the action log (`/actions`), and answers a delivery with its attempt
/// history; a malformed search is a 400.
async fn inbox_admin_searches_bulk_replays_and_logs(env: Env) -> Outcome {
    use webhooks_core::inbox::{ClaimToken, NewEvent, Transition};

    let Some(inbox) = inbox_of(&env).await? else {
        return Ok(());
    };
    let e = |e: webhooks_core::inbox::InboxError| e.to_string();
    for (key, customer) in [("c/1", "cus_1"), ("c/2", "cus_2"), ("c/3", "cus_1")] {
        let body = format!(r#"{{"data":{{"object":{{"customer":"{customer}"}}}}}}"#);
        inbox
            .accept(&NewEvent::new(format!("webhooks:test:{key}"), "test", body))
            .await
            .map_err(e)?;
    }
    let token = ClaimToken::random();
    let leased = inbox
        .lease(token, 3, Duration::from_secs(30), 3)
        .await
        .map_err(e)?;
    ensure!(leased.len() == 3, "leased {} events", leased.len());
    for event in &leased {
        let dead = inbox
            .dead_letter(&event.meta.key, token, "billing API answered 503")
            .await
            .map_err(e)?;
        ensure!(dead == Transition::Applied, "dead-lettered: {dead:?}");
    }

    let mut spec = env.spec();
    spec.inbox = Some(Arc::clone(&inbox));
    let app = env.framework.start(&spec).await?;
    let call = |method: &'static str, path: &str| {
        let request = Request::method(method, path).header("content-type", "application/json");
        admin_call(app.addr, request)
    };
    let q = "q=data.object.customer+%3D+cus_1";
    let (status, list) = call("GET", &format!("/admin/inbox/dead-letters?{q}")).await?;
    ensure!(status == 200, "search: {status} {list}");
    ensure!(
        list["items"].as_array().map(Vec::len) == Some(2),
        "two of cus_1: {list}"
    );
    let (status, bad) = call("GET", "/admin/inbox/dead-letters?q=data..x+%3D+1").await?;
    ensure!(
        status == 400
            && bad["error"]
                .as_str()
                .is_some_and(|r| r.contains("not a path")),
        "malformed search: {status} {bad}"
    );
    let (status, count) = call(
        "POST",
        &format!("/admin/inbox/bulk/replay?{q}&dry_run=true"),
    )
    .await?;
    ensure!(
        (status, count["matched"].as_u64()) == (200, Some(2)),
        "count: {status} {count}"
    );
    let (status, done) = call("POST", &format!("/admin/inbox/bulk/replay?{q}")).await?;
    ensure!(
        (status, done["applied"].as_u64()) == (200, Some(2)),
        "bulk replay: {status} {done}"
    );
    let (status, stats) = call("GET", "/admin/inbox/stats").await?;
    ensure!(
        (status, stats["dead"].as_u64(), stats["pending"].as_u64()) == (200, Some(1), Some(2)),
        "stats: {stats}"
    );
    let (status, log) = call("GET", "/admin/inbox/actions").await?;
    ensure!(status == 200, "actions: {status}");
    if inbox.keeps_actions() {
        let first = &log["actions"][0];
        ensure!(
            first["action"] == "replay"
                && first["via"] == "api"
                && first["count"] == 2
                && first["target"] == "filter: where data.object.customer = cus_1",
            "the log: {log}"
        );
    }
    let (status, one) = call("GET", "/admin/inbox/deliveries/webhooks%3Atest%3Ac%2F2").await?;
    ensure!(
        status == 200 && one["attempt_history"].is_array(),
        "a delivery with its attempt history: {status} {one}"
    );
    Ok(())
}

/// One request to an admin API: its status and JSON body.
pub(crate) async fn admin_call(
    addr: std::net::SocketAddr,
    request: Request,
) -> Result<(u16, serde_json::Value), String> {
    let r = client::send(addr, &request).await?;
    let json = serde_json::from_str::<serde_json::Value>(&r.text()).unwrap_or_default();
    Ok((r.status, json))
}

/// The admin API's guards (issue 22), proven through both adapters (they
/// pass the headers, the `authorize` hook and the configuration to core):
/// a state-changing request without `Content-Type: application/json`, or
/// that the browser marks cross-site (`Origin`, `Sec-Fetch-Site`), is a
/// 403 and changes nothing; a purge below the retention is a 400 unless
/// forced; under `/admin/guarded` (hook: `x-test-access`, minimum 60 s)
/// a denied request is a 403, a read-only user may only `GET`. Pause and
/// resume answer the same guards.
async fn inbox_admin_refuses_cross_site_and_guards(env: Env) -> Outcome {
    use webhooks_core::inbox::{ClaimToken, NewEvent, Transition};

    let Some(inbox) = inbox_of(&env).await? else {
        return Ok(());
    };
    let e = |e: webhooks_core::inbox::InboxError| e.to_string();
    inbox
        .accept(&NewEvent::new("webhooks:test:done/1", "test", "{}"))
        .await
        .map_err(e)?;
    let token = ClaimToken::random();
    let leased = inbox
        .lease(token, 1, Duration::from_secs(30), 3)
        .await
        .map_err(e)?;
    ensure!(leased.len() == 1, "leased {} events", leased.len());
    let done = inbox
        .complete(&leased[0].meta.key, token)
        .await
        .map_err(e)?;
    ensure!(done == Transition::Applied, "completed: {done:?}");
    let completed = || {
        let inbox = Arc::clone(&inbox);
        async move { Ok::<_, String>(inbox.stats().await.map_err(e)?.completed) }
    };

    let mut spec = env.spec();
    spec.inbox = Some(Arc::clone(&inbox));
    let app = env.framework.start(&spec).await?;
    let same_origin = format!("http://{}", app.addr);
    let send = |method: &'static str, path: &str, headers: &[(&str, &str)]| {
        let request = headers
            .iter()
            .fold(Request::method(method, path), |r, (name, value)| {
                r.header(name, *value)
            });
        admin_call(app.addr, request)
    };
    const JSON: (&str, &str) = ("content-type", "application/json");
    let purge = "/admin/inbox/purge?older_than=0&force=true";
    let refused: [&[(&str, &str)]; 4] = [
        &[],
        &[("content-type", "application/x-www-form-urlencoded")],
        &[JSON, ("origin", "http://evil.example")],
        &[JSON, ("sec-fetch-site", "cross-site")],
    ];
    for headers in refused {
        let (status, body) = send("POST", purge, headers).await?;
        ensure!(status == 403, "purge with {headers:?}: {status} {body}");
        ensure!(body["error"].is_string(), "a reason: {body}");
        let (status, _) = send("DELETE", "/admin/inbox/dead-letters/k", headers).await?;
        ensure!(status == 403, "DELETE with {headers:?}: {status}");
    }
    ensure!(
        completed().await? == 1,
        "nothing purged by a refused request"
    );
    let (status, body) = send(
        "GET",
        "/admin/inbox/stats",
        &[("sec-fetch-site", "cross-site")],
    )
    .await?;
    ensure!(status == 200, "GETs stay as they are: {status} {body}");

    let (status, body) = send("POST", "/admin/inbox/purge?older_than=60", &[JSON]).await?;
    ensure!(status == 400, "purge below the retention: {status} {body}");
    ensure!(
        body["min_older_than"] == 604_800,
        "the minimum named: {body}"
    );
    ensure!(completed().await? == 1, "nothing purged below the minimum");
    let (status, body) = send(
        "POST",
        purge,
        &[
            JSON,
            ("origin", same_origin.as_str()),
            ("sec-fetch-site", "same-origin"),
        ],
    )
    .await?;
    ensure!(
        (status, body["purged"].as_u64()) == (200, Some(1)),
        "a forced same-origin purge: {status} {body}"
    );

    // The hook and the configured minimum, through the adapter.
    let guarded = "/admin/guarded/purge?older_than=432000";
    let (status, _) = send("GET", "/admin/guarded/stats", &[]).await?;
    ensure!(status == 403, "no identity is denied, GET too: {status}");
    let reader = ("x-test-access", "read:rita");
    let (status, _) = send("GET", "/admin/guarded/stats", &[reader]).await?;
    ensure!(status == 200, "a reader GETs: {status}");
    let (status, _) = send("POST", guarded, &[JSON, reader]).await?;
    ensure!(status == 403, "a reader may not purge: {status}");
    let admin = ("x-test-access", "admin:ada");
    let (status, body) = send("POST", guarded, &[JSON, admin]).await?;
    ensure!(
        status == 200,
        "5 days is this API's minimum: {status} {body}"
    );
    let (status, body) = send(
        "POST",
        "/admin/guarded/purge?older_than=431999",
        &[JSON, admin],
    )
    .await?;
    ensure!(
        (status, &body["min_older_than"]) == (400, &serde_json::json!(432_000)),
        "below the configured minimum: {status} {body}"
    );

    // Pause and resume (issue 22), with the same guards.
    for headers in refused {
        let (status, body) = send("POST", "/admin/inbox/pause", headers).await?;
        ensure!(status == 403, "pause with {headers:?}: {status} {body}");
    }
    let (status, _) = send("POST", "/admin/guarded/pause", &[JSON, reader]).await?;
    ensure!(status == 403, "a reader may not pause: {status}");
    ensure!(
        !inbox.paused().await.map_err(e)?,
        "refused pauses changed nothing"
    );
    let (status, body) = send("POST", "/admin/guarded/pause", &[JSON, admin]).await?;
    ensure!(
        (status, &body) == (200, &serde_json::json!({"paused": true, "changed": true})),
        "an admin pauses: {status} {body}"
    );
    let (status, body) = send("GET", "/admin/inbox/stats", &[]).await?;
    ensure!(
        (status, &body["paused"]) == (200, &serde_json::json!(true)),
        "stats report the pause: {status} {body}"
    );
    let (status, body) = send("POST", "/admin/inbox/resume", &[JSON]).await?;
    ensure!(
        (status, &body) == (200, &serde_json::json!({"paused": false, "changed": true})),
        "resumed: {status} {body}"
    );
    ensure!(!inbox.paused().await.map_err(e)?, "running again");
    Ok(())
}

/// The admin API's answers (issue 35, item 2), through both adapters: a
/// reader gets no body, nobody sees a credential header's value, every
/// answer (refusals included) carries `Cache-Control: no-store` and
/// `X-Content-Type-Options: nosniff`; without a hook (`/admin/nohook`)
/// every request is denied; an `Origin` of another scheme than the one the
/// proxy reports is refused (item 9).
async fn inbox_admin_hides_bodies_and_credentials(env: Env) -> Outcome {
    use webhooks_core::inbox::{ClaimToken, NewEvent, Transition};

    let Some(inbox) = inbox_of(&env).await? else {
        return Ok(());
    };
    let e = |e: webhooks_core::inbox::InboxError| e.to_string();
    let mut event = NewEvent::new(
        "webhooks:test:secret/1",
        "shopify",
        "{\"email\":\"a@example.com\"}",
    );
    event.headers = vec![
        ("x-shopify-hmac-sha256".into(), "SECRETHMAC".into()),
        ("authorization".into(), "Bearer SECRETTOKEN".into()),
        ("x-request-id".into(), "req-1".into()),
    ];
    inbox.accept(&event).await.map_err(e)?;
    let token = ClaimToken::random();
    let leased = inbox
        .lease(token, 1, Duration::from_secs(30), 1)
        .await
        .map_err(e)?;
    ensure!(leased.len() == 1, "leased {} events", leased.len());
    let dead = inbox
        .dead_letter(&leased[0].meta.key, token, "boom")
        .await
        .map_err(e)?;
    ensure!(dead == Transition::Applied, "dead-lettered: {dead:?}");

    let mut spec = env.spec();
    spec.inbox = Some(Arc::clone(&inbox));
    let app = env.framework.start(&spec).await?;
    let send = |method: &'static str, path: &str, headers: &[(&str, &str)]| {
        let request = headers
            .iter()
            .fold(Request::method(method, path), |r, (name, value)| {
                r.header(name, *value)
            });
        let addr = app.addr;
        async move { client::send(addr, &request).await }
    };
    let hardened = |r: &client::Response, what: &str| {
        ensure!(
            r.header("cache-control") == Some("no-store"),
            "{what}: Cache-Control {:?}",
            r.header("cache-control")
        );
        ensure!(
            r.header("x-content-type-options") == Some("nosniff"),
            "{what}: X-Content-Type-Options {:?}",
            r.header("x-content-type-options")
        );
        Ok(())
    };
    let item = "/admin/guarded/dead-letters/webhooks%3Atest%3Asecret%2F1";
    let reader = ("x-test-access", "read:rita");
    let admin = ("x-test-access", "admin:ada");
    for (who, path) in [
        (reader, item),
        (reader, "/admin/guarded/dead-letters?scheme=shopify"),
        (admin, item),
    ] {
        let r = send("GET", path, &[who]).await?;
        let text = r.text();
        ensure!(r.status == 200, "{who:?} {path}: {} {text}", r.status);
        hardened(&r, path)?;
        ensure!(
            !text.contains("SECRETHMAC") && !text.contains("SECRETTOKEN"),
            "{who:?} {path}: credentials shown: {text}"
        );
        ensure!(
            text.contains("req-1"),
            "{who:?} {path}: other headers: {text}"
        );
        let shows_body = who == admin && path == item;
        ensure!(
            text.contains("a@example.com") == shows_body,
            "{who:?} {path}: the body for admins' item answers only: {text}"
        );
    }
    for (method, path, headers) in [
        ("GET", "/admin/nohook/stats", &[][..]),
        ("GET", "/admin/nohook/dead-letters", &[admin][..]),
        (
            "POST",
            "/admin/nohook/pause",
            &[("content-type", "application/json")][..],
        ),
        ("GET", "/admin/guarded/stats", &[][..]),
        ("POST", "/admin/guarded/pause", &[reader][..]),
    ] {
        let r = send(method, path, headers).await?;
        ensure!(
            r.status == 403,
            "{method} {path}: {} {}",
            r.status,
            r.text()
        );
        hardened(&r, path)?;
    }
    ensure!(!inbox.paused().await.map_err(e)?, "nothing paused");
    let r = send("GET", "/admin/inbox/nothing", &[]).await?;
    ensure!(r.status == 404, "unknown path: {}", r.status);
    hardened(&r, "404")?;
    let r = send(
        "PUT",
        "/admin/inbox/stats",
        &[("content-type", "application/json")],
    )
    .await?;
    ensure!(r.status == 405, "PUT stats: {}", r.status);
    hardened(&r, "405")?;

    // Item 9: the proxy says https, the page was http (and the converse).
    let json = ("content-type", "application/json");
    let http_origin = format!("http://{}", app.addr);
    let https_origin = format!("https://{}", app.addr);
    for (origin, proto) in [(&http_origin, "https"), (&https_origin, "http")] {
        let headers = [
            json,
            ("origin", origin.as_str()),
            ("x-forwarded-proto", proto),
        ];
        let r = send("POST", "/admin/inbox/pause", &headers).await?;
        ensure!(
            r.status == 403,
            "{origin} over {proto}: {} {}",
            r.status,
            r.text()
        );
    }
    ensure!(
        !inbox.paused().await.map_err(e)?,
        "refused pauses changed nothing"
    );
    let headers = [
        json,
        ("origin", https_origin.as_str()),
        ("x-forwarded-proto", "https"),
    ];
    let r = send("POST", "/admin/inbox/pause", &headers).await?;
    ensure!(r.status == 200, "same scheme: {} {}", r.status, r.text());
    hardened(&r, "200 POST")?;
    let r = send("POST", "/admin/inbox/resume", &[json]).await?;
    ensure!(r.status == 200, "resumed: {}", r.status);
    Ok(())
}

// ------------------------------------------------ inbox operations (issue 21)

/// A Slack request to `path` signed with the Slack routes' secret at `timestamp`.
fn slack_request(path: &str, body: &[u8], timestamp: u64) -> Result<Request, String> {
    let slack = webhooks_core::scheme::Slack::new(crate::apps::INBOX_SLACK_SECRET)
        .map_err(|e| e.to_string())?;
    let headers = slack
        .sign_headers(timestamp, body)
        .map_err(|e| e.to_string())?;
    Ok(Request::post(path, body.to_vec()).headers(&headers))
}

/// The events of the typed-dispatch scenario: `email.clicked` is not listed.
#[derive(Debug, serde::Deserialize)]
#[serde(tag = "type", content = "data")]
enum InboxEmail {
    #[serde(rename = "email.sent")]
    Sent { count: u32 },
    #[serde(rename = "email.bounced")]
    Bounced {
        #[allow(dead_code, reason = "only its type is checked")]
        reason: String,
    },
}

/// Workers dispatch like the request path (`Job<Event<E>>`): a known type
/// runs the handler; a type the enum does not list is completed at once,
/// never run nor dead-lettered; a known type whose data does not fit is a
/// failed attempt whose error names the field, never the value. The stored
/// event type of a Standard Webhooks delivery is the body's `type`.
async fn inbox_worker_dispatches_on_the_event_type(env: Env) -> Outcome {
    use webhooks_core::event::Event;
    use webhooks_core::inbox::{DeadLetterFilter, Job, Worker};

    let Some(inbox) = inbox_of(&env).await? else {
        return Ok(());
    };
    let mut spec = env.spec();
    spec.inbox = Some(Arc::clone(&inbox));
    let app = env.framework.start(&spec).await?;
    let bodies: [(&str, &[u8]); 3] = [
        ("msg_sent", br#"{"type":"email.sent","data":{"count":3}}"#),
        (
            "msg_new",
            br#"{"type":"email.clicked","data":{"link":"x"}}"#,
        ),
        (
            "msg_bad",
            br#"{"type":"email.bounced","data":{"reason":987654321}}"#,
        ),
    ];
    for (id, body) in bodies {
        expect(&send(&app, &delivery("/inbox", id, body)?).await?, 202, id)?;
    }
    let counts = Arc::new(AtomicU64::new(0));
    let ran = Arc::clone(&counts);
    let worker = Worker::builder(Arc::clone(&inbox))
        .max_attempts(1)
        .poll_interval(Duration::from_millis(20))
        .handler(move |job: Job<Event<InboxEmail>>| {
            let ran = Arc::clone(&ran);
            async move {
                match job.event {
                    Event::Known(InboxEmail::Sent { count: 3 }) => {
                        ran.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    }
                    other => Err(format!("unexpected event {other:?}")),
                }
            }
        });
    let report = tokio::time::timeout(Duration::from_secs(30), worker.run_until_idle())
        .await
        .map_err(|_| "the worker did not become idle".to_owned())?;
    ensure!(counts.load(Ordering::SeqCst) == 1, "the handler ran once");
    ensure!(
        (report.completed, report.unknown_type, report.dead_lettered) == (1, 1, 1),
        "report: {report:?}"
    );
    let dead = inbox
        .dead_letters(&DeadLetterFilter::default())
        .await
        .map_err(|e| e.to_string())?;
    ensure!(dead.items.len() == 1, "one dead letter: {dead:?}");
    let letter = &dead.items[0];
    ensure!(
        letter.meta.event_type.as_deref() == Some("email.bounced"),
        "event type recorded: {:?}",
        letter.meta.event_type
    );
    let error = letter.last_error.clone().unwrap_or_default();
    ensure!(
        error.contains("data.reason") && !error.contains("987654321"),
        "the error names the field, not the value: {error}"
    );
    let stats = inbox.stats().await.map_err(|e| e.to_string())?;
    ensure!(
        (stats.completed, stats.pending, stats.dead) == (2, 0, 1),
        "stats: {stats:?}"
    );
    Ok(())
}

/// A sender's retry is a duplicate for schemes without a delivery id
/// header: a Slack Events API retry (same `event_id`, new signature) and a
/// re-sent slash command (same body, keyed on its SHA-256) are answered
/// as duplicates; another event is stored.
async fn inbox_idless_retries_are_duplicates(env: Env) -> Outcome {
    let Some(inbox) = inbox_of(&env).await? else {
        return Ok(());
    };
    let mut spec = env.spec();
    spec.inbox = Some(Arc::clone(&inbox));
    let app = env.framework.start(&spec).await?;
    let now = keys::now();
    let event = |id: &str, text: &str| {
        format!(
            r#"{{"token":"t","team_id":"T1","type":"event_callback","event_id":"{id}","event":{{"type":"message","text":"{text}"}}}}"#
        )
    };
    let first = event("Ev01", "hello");
    expect(
        &send(&app, &slack_request("/inbox/slack", first.as_bytes(), now)?).await?,
        202,
        "first Slack event",
    )?;
    // Slack's retry: the same event id, signed again later (the retry
    // headers differ, and so may the body's volatile fields).
    let retry = event("Ev01", "hello again");
    let again = send(
        &app,
        &slack_request("/inbox/slack", retry.as_bytes(), now + 5)?,
    )
    .await?;
    expect(&again, 200, "the retry of a Slack event")?;
    ensure!(
        again.header("webhook-duplicate") == Some("true"),
        "webhook-duplicate header"
    );
    let command = b"command=%2Fdeploy&text=prod&trigger_id=398738663015.4744";
    expect(
        &send(&app, &slack_request("/inbox/slack", command, now)?).await?,
        202,
        "a slash command",
    )?;
    expect(
        &send(&app, &slack_request("/inbox/slack", command, now + 1)?).await?,
        200,
        "the same slash command body again",
    )?;
    let other = event("Ev02", "hello");
    expect(
        &send(&app, &slack_request("/inbox/slack", other.as_bytes(), now)?).await?,
        202,
        "another Slack event",
    )?;
    let stats = inbox.stats().await.map_err(|e| e.to_string())?;
    ensure!(stats.pending == 3, "three events stored: {stats:?}");
    Ok(())
}

/// Provider handshakes are answered by the library once verified, in both
/// modes (`/handshake/…` in request mode, `/inbox/…` in inbox mode): Zoom's
/// `endpoint.url_validation` (the token's HMAC), Discord's PING (a PONG),
/// Slack's `url_verification` (the challenge), and SNS's
/// `SubscriptionConfirmation` (handed to the hook). Never stored, never
/// deduplicated (asked again, answered again), never run by the handler;
/// a forged challenge is a 401 and gets no answer.
async fn handshakes_are_answered_in_both_modes(env: Env) -> Outcome {
    use webhooks_core::scheme::sns::{SignatureVersion, Signer as SnsSigner, SnsMessage};
    use webhooks_core::scheme::{Discord, Zoom};

    let Some(inbox) = inbox_of(&env).await? else {
        return Ok(());
    };
    let mut spec = env.spec();
    spec.inbox = Some(Arc::clone(&inbox));
    let app = env.framework.start(&spec).await?;
    let e = |e: webhooks_core::ConfigError| e.to_string();
    let now = keys::now();
    let zoom = Zoom::new(crate::apps::HANDSHAKE_ZOOM_SECRET).map_err(e)?;
    let challenge = br#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#;
    let zoom_headers = zoom.sign_headers(now, challenge).map_err(e)?;
    let expected_zoom = zoom
        .url_validation_response(&zoom_headers, challenge, std::time::SystemTime::now())
        .map_err(|e| e.to_string())?
        .ok_or("no Zoom answer")?;
    let ping = br#"{"id":"787053080478613555","application_id":"1","type":1,"version":1}"#;
    let discord_headers =
        Discord::sign_headers(&crate::apps::HANDSHAKE_DISCORD_SEED, now, ping).map_err(e)?;
    let slack_body = br#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let sns_signer = SnsSigner::from_pkcs8_der(
        include_bytes!("../../core/tests/data/sns/test-key.der"),
        crate::providers_email::SNS_CERT_URL,
    )
    .map_err(e)?;
    for mode in ["/handshake", "/inbox"] {
        let zoom_request =
            Request::post(&format!("{mode}/zoom"), challenge.to_vec()).headers(&zoom_headers);
        for round in ["first", "again"] {
            let r = send(&app, &zoom_request).await?;
            expect(&r, 200, &format!("{mode} Zoom challenge, {round}"))?;
            ensure!(
                r.text() == expected_zoom,
                "{mode} Zoom answer: {}",
                r.text()
            );
            ensure!(
                r.header("content-type") == Some("application/json"),
                "{mode} Zoom content type"
            );
        }
        let forger = Zoom::new("not-the-secret").map_err(e)?;
        let forged = Request::post(&format!("{mode}/zoom"), challenge.to_vec())
            .headers(&forger.sign_headers(now, challenge).map_err(e)?);
        let r = send(&app, &forged).await?;
        expect(&r, 401, &format!("{mode} forged Zoom challenge"))?;
        ensure!(
            !r.text().contains("encryptedToken"),
            "a forged challenge gets no answer"
        );

        let r = send(
            &app,
            &Request::post(&format!("{mode}/discord"), ping.to_vec()).headers(&discord_headers),
        )
        .await?;
        expect(&r, 200, &format!("{mode} Discord PING"))?;
        ensure!(r.text() == Discord::PONG, "{mode} PONG: {}", r.text());

        let r = send(
            &app,
            &slack_request(&format!("{mode}/slack"), slack_body, now)?,
        )
        .await?;
        expect(&r, 200, &format!("{mode} Slack url_verification"))?;
        ensure!(
            r.text() == "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
            "{mode} Slack challenge: {}",
            r.text()
        );

        let message_id = format!("{}-{}-{mode}", spec.namespace, env.backend.name());
        let confirmation = SnsMessage::subscription_confirmation(
            message_id.clone(),
            crate::providers_email::SNS_TOPIC,
            "token-1",
            "https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription&Token=token-1",
            "2026-01-02T03:04:05.678Z",
        );
        let body = sns_signer
            .sign(confirmation, SignatureVersion::V2)
            .map_err(e)?;
        let r = send(
            &app,
            &Request::post(&format!("{mode}/sns"), body)
                .header("content-type", "text/plain; charset=UTF-8")
                .header("x-amz-sns-message-type", "SubscriptionConfirmation"),
        )
        .await?;
        expect(&r, 200, &format!("{mode} SNS SubscriptionConfirmation"))?;
        let confirmed = crate::apps::SNS_CONFIRMATIONS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|id| **id == message_id)
            .count();
        ensure!(confirmed == 1, "{mode} SNS hook called {confirmed} times");
    }
    ensure!(app.behaviour.total() == 0, "no handler ran");
    let stats = inbox.stats().await.map_err(|e| e.to_string())?;
    ensure!(stats.pending == 0, "nothing stored: {stats:?}");
    // Answered, not refused: only the forged challenges count as rejected.
    let rejected: Vec<_> = crate::signals::series(&spec.namespace)
        .into_iter()
        .filter(|(name, _)| name.starts_with("webhooks_rejected_total"))
        .collect();
    ensure!(
        rejected
            == vec![(
                "webhooks_rejected_total{scheme=zoom,reason=no_matching_signature}".to_owned(),
                2
            )],
        "rejections: {rejected:?}"
    );
    // A real Zoom event still goes to the inbox.
    let event = br#"{"event":"meeting.started","payload":{"object":{"id":"1"}},"event_ts":1}"#;
    let r = send(
        &app,
        &Request::post("/inbox/zoom", event.to_vec())
            .headers(&zoom.sign_headers(now, event).map_err(e)?),
    )
    .await?;
    expect(&r, 202, "a Zoom event is stored")?;
    Ok(())
}

// ---------------------------------------------------------------------------
// Issue 25 (third hardening pass)
// ---------------------------------------------------------------------------

/// Issue 25, item 3: a request whose head already fails (no signature
/// headers; a signed timestamp outside the tolerance) is answered at once,
/// before its body is sent, instead of after the body timeout; a genuine
/// delivery whose body trickles in is still waited for and processed.
async fn head_checks_answer_before_the_body(env: Env) -> Outcome {
    let mut spec = env.spec();
    spec.body_timeout = Duration::from_secs(20);
    let app = env.framework.start(&spec).await?;
    // Announced by Content-Length, never sent: the first byte would come after a minute.
    let body = vec![b'x'; LIMIT];
    let unsigned = Request::post("/hook", body.clone());
    let stale = signed_with(
        &signer()?,
        "/hook",
        "msg_head_stale",
        keys::now() - 3600,
        &body,
    )?;
    for (request, status, what) in [
        (unsigned, 400, "no signature headers"),
        (stale, 401, "timestamp an hour old"),
    ] {
        let answer = tokio::time::timeout(
            Duration::from_secs(5),
            client::send_trickled(app.addr, &request, 1, Duration::from_secs(60)),
        )
        .await
        .map_err(|_| format!("{what}: not answered before the body was sent"))??;
        expect(&answer, status, what)?;
    }
    ensure!(app.behaviour.total() == 0, "no handler ran");
    let trickled = delivery("/hook", "msg_head_ok", BODY)?;
    let r = client::send_trickled(app.addr, &trickled, 4, Duration::from_millis(20)).await?;
    expect(&r, 204, "a genuine delivery trickled in")?;
    ensure!(app.behaviour.calls("msg_head_ok") == 1, "handler ran once");
    Ok(())
}

/// A completion pending in this process wins over a takeover in this
/// process: the store fails `complete` after the handler's 2xx (and the
/// lease renewals) until after the lease ran out; a redelivery arriving
/// before the background retry succeeds records the pending completion
/// first and is answered as a duplicate: the handler ran once.
async fn pending_completion_wins_over_a_takeover(env: Env) -> Outcome {
    let mut spec = env.spec();
    spec.lease = Duration::from_secs(1);
    // The first try and the retries after 0.1, 0.3, 0.7 and 1.5 s fail;
    // the next (3.1 s) would succeed.
    spec.store = Arc::new(
        Faulty::new(spec.store)
            .failing_completes(5)
            .failing_extends(),
    );
    let app = env.framework.start(&spec).await?;
    let request = delivery("/hook", "msg_pending_complete", BODY)?;
    let started = std::time::Instant::now();
    expect(&send(&app, &request).await?, 204, "handler succeeded")?;
    // Past the lease (1 s), before the retry at 3.1 s.
    tokio::time::sleep(Duration::from_millis(1_800).saturating_sub(started.elapsed())).await;
    let again = send(&app, &request).await?;
    expect(
        &again,
        200,
        "the redelivery while the completion is pending",
    )?;
    ensure!(
        again.header("webhook-duplicate") == Some("true"),
        "duplicate marker"
    );
    let later = send(&app, &request).await?;
    expect(&later, 200, "a later redelivery")?;
    ensure!(
        app.behaviour.calls("msg_pending_complete") == 1,
        "runs: {}",
        app.behaviour.calls("msg_pending_complete")
    );
    Ok(())
}

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        /// Every scenario, by name.
        pub const SCENARIOS: &[(&str, ScenarioFn)] = &[
            $((stringify!($name), |env| Box::pin($name(env)))),*
        ];
    };
}

scenarios![
    first_delivery_runs_handler,
    completed_duplicate_is_acknowledged,
    in_flight_duplicate_gets_409,
    content_length_over_limit_is_413,
    chunked_body_over_limit_is_413,
    body_at_limit_is_accepted,
    missing_signature_headers_are_400,
    malformed_headers_are_400,
    bad_signature_is_401,
    stale_and_future_timestamps_are_401,
    rotation_accepts_both_secrets,
    v1a_signatures_from_trusted_keys,
    handler_failure_then_retry,
    panic_then_retry,
    typed_json,
    extractor_without_layer_is_500,
    concurrency_storm_runs_once,
    lease_expiry_takeover,
    store_unreachable_is_503,
    github_scheme_through_the_same_pipeline,
    tenants_do_not_share_delivery_ids,
    github_replay_with_a_fresh_id_does_not_run,
    shopify_replay_with_a_fresh_id_does_not_run,
    slow_handler_keeps_its_lease,
    client_gone_during_complete_still_completes,
    failed_complete_is_retried,
    on_reject_shapes_only_the_body,
    large_body_reaches_byte_extractors,
    stalled_body_is_408,
    metrics_count_each_outcome,
    metrics_count_store_failures,
    public_key_provider_sendgrid,
    body_signature_provider_mailgun,
    certificate_provider_sns,
    credentials_provider_postmark,
    svix_headers_provider_resend,
    url_signing_provider_twilio,
    timestamp_hmac_provider_paddle,
    token_provider_gitlab,
    inbox_stores_then_acknowledges_duplicates,
    inbox_admin_lists_inspects_and_replays_once,
    inbox_admin_searches_bulk_replays_and_logs,
    inbox_admin_pauses_one_event_type,
    inbox_admin_refuses_cross_site_and_guards,
    inbox_admin_hides_bodies_and_credentials,
    inbox_worker_dispatches_on_the_event_type,
    inbox_idless_retries_are_duplicates,
    handshakes_are_answered_in_both_modes,
    head_checks_answer_before_the_body,
    pending_completion_wins_over_a_takeover,
    handler_refusals_answer_each_providers_status,
    response_budget_hands_late_handlers_to_the_inbox,
];
