//! Issue 34, item 5 through both adapters: the admin API pauses one event
//! type (`POST /pause?only=`), the inbox keeps accepting it, no lease hands
//! it out while the other types flow, `GET /gates` lists it, and a resume
//! lets it through; a selector that does not parse is a `400`.

use std::sync::Arc;
use std::time::Duration;

use webhooks_core::inbox::{ClaimToken, Inbox, InboxError, Transition};

use crate::client::Request;
use crate::scenarios::{Env, Outcome, admin_call, delivery, expect, inbox_of, send};

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

/// Leases and completes every due event: their types, sorted.
async fn drain(inbox: &Arc<dyn Inbox>) -> Result<Vec<String>, String> {
    let e = |e: InboxError| e.to_string();
    let mut types = Vec::new();
    loop {
        let token = ClaimToken::random();
        let leased = inbox
            .lease(token, 10, Duration::from_secs(30), 3)
            .await
            .map_err(e)?;
        if leased.is_empty() {
            break;
        }
        for event in leased {
            types.push(event.meta.event_type.clone().unwrap_or_default());
            let done = inbox.complete(&event.meta.key, token).await.map_err(e)?;
            ensure!(done == Transition::Applied, "completed: {done:?}");
        }
    }
    types.sort();
    Ok(types)
}

/// See the module.
pub async fn inbox_admin_pauses_one_event_type(env: Env) -> Outcome {
    let Some(inbox) = inbox_of(&env).await? else {
        return Ok(());
    };
    let mut spec = env.spec();
    spec.inbox = Some(Arc::clone(&inbox));
    let app = env.framework.start(&spec).await?;
    let call = |method: &'static str, path: &str| {
        let request = Request::method(method, path).header("content-type", "application/json");
        admin_call(app.addr, request)
    };
    let (status, paused) = call("POST", "/admin/inbox/pause?only=*%3Ainvoice.*").await?;
    if !inbox.keeps_gates() {
        ensure!(status == 400, "an inbox without gates: {status} {paused}");
        return Ok(());
    }
    ensure!(
        status == 200 && paused["changed"] == true && paused["only"] == "*:invoice.*",
        "pause: {status} {paused}"
    );
    let (status, bad) = call("POST", "/admin/inbox/pause?only=a%20b").await?;
    ensure!(status == 400, "a bad selector: {status} {bad}");
    for (id, event_type) in [
        ("msg_gate_1", "invoice.paid"),
        ("msg_gate_2", "charge.succeeded"),
        ("msg_gate_3", "invoice.finalized"),
    ] {
        let body = format!(r#"{{"type":"{event_type}","data":{{"n":1}}}}"#);
        let request = delivery("/inbox", id, body.as_bytes())?;
        expect(&send(&app, &request).await?, 202, "stored while paused")?;
    }
    let flowed = drain(&inbox).await?;
    ensure!(
        flowed == ["charge.succeeded"],
        "only the other type: {flowed:?}"
    );
    let (status, gates) = call("GET", "/admin/inbox/gates").await?;
    ensure!(
        status == 200
            && gates["gates"][0]["selector"] == "*:invoice.*"
            && gates["gates"][0]["paused"] == true,
        "gates: {status} {gates}"
    );
    let (status, stats) = call("GET", "/admin/inbox/stats").await?;
    ensure!(
        status == 200 && stats["pending"] == 2 && stats["paused"] == false,
        "stats: {status} {stats}"
    );
    let (status, resumed) = call("POST", "/admin/inbox/resume?only=*:invoice.*").await?;
    ensure!(
        status == 200 && resumed["changed"] == true,
        "resume: {status} {resumed}"
    );
    let rest = drain(&inbox).await?;
    ensure!(
        rest == ["invoice.finalized", "invoice.paid"],
        "the paused type after the resume: {rest:?}"
    );
    if inbox.keeps_actions() {
        let (_, log) = call("GET", "/admin/inbox/actions").await?;
        ensure!(
            log["actions"][0]["action"] == "resume" && log["actions"][0]["target"] == "*:invoice.*",
            "the log: {log}"
        );
    }
    Ok(())
}
