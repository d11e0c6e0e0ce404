//! The one scenario list: requests in; status, headers and handler-call
//! counts out. Every scenario runs on every framework × every backend.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use webhooks_core::scheme::standard::Signer;

use crate::apps::{Framework, RunningApp, Spec};
use crate::backends::Backend;
use crate::behaviour::MODE_HEADER;
use crate::client::{self, Framing, Request, Response};
use crate::keys;
use crate::providers::{
    timestamp_hmac_provider_paddle, token_provider_gitlab, url_signing_provider_twilio,
};

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
fn delivery(path: &str, id: &str, body: &[u8]) -> Result<Request, String> {
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

async fn send(app: &RunningApp, request: &Request) -> Result<Response, String> {
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

fn expect(response: &Response, status: u16, what: &str) -> Outcome {
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
    let now = keys::now();
    let stale = signed_with(&signer, "/hook", "msg_stale", now - 301, BODY)?;
    expect(&send(&app, &stale).await?, 401, "timestamp 301 s old")?;
    let future = signed_with(&signer, "/hook", "msg_future", now + 301, BODY)?;
    expect(&send(&app, &future).await?, 401, "timestamp 301 s ahead")?;
    let edge = signed_with(&signer, "/hook", "msg_edge", now - 290, BODY)?;
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
    url_signing_provider_twilio,
    timestamp_hmac_provider_paddle,
    token_provider_gitlab,
];
