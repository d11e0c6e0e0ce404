//! `webhooks listen`: the library's own layer answers `send`, prints each
//! delivery verified or refused with the reason, and forwards verified ones.

mod support;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Stdio};

use support::{Framework, run_json, signing_key};

/// A running `webhooks --json listen …` and the first line it printed.
struct Listener {
    child: Child,
    url: String,
}

impl Listener {
    fn start(args: &[&str]) -> (Self, BufReader<std::process::ChildStdout>) {
        let mut child = support::webhooks()
            .arg("--json")
            .arg("listen")
            .args(args)
            .args(["--port", "0"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        let first: serde_json::Value = serde_json::from_str(&first).unwrap();
        let url = first["listening"].as_str().unwrap().to_owned();
        (Self { child, url }, stdout)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn next_line(stdout: &mut BufReader<std::process::ChildStdout>) -> serde_json::Value {
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

#[test]
fn deliveries_are_printed_verified_or_refused_with_the_reason() {
    let secret = signing_key("stripe");
    let (listener, mut stdout) = Listener::start(&["stripe", "--secret", secret]);
    let url = format!("{}/any/path", listener.url);
    let (code, report) = run_json(&[
        "send",
        "stripe",
        &url,
        "--secret",
        secret,
        "--event",
        "invoice.paid",
        "--id",
        "evt_listen_1",
    ]);
    assert_eq!(
        (code, report["status"].as_u64()),
        (0, Some(204)),
        "{report}"
    );
    let line = next_line(&mut stdout);
    assert_eq!(line["outcome"], "verified", "{line}");
    assert_eq!(line["id"], "evt_listen_1");
    assert_eq!(line["event_type"], "invoice.paid");
    assert_eq!(line["body"]["data"]["object"]["object"], "invoice");
    let (code, _) = run_json(&[
        "send",
        "stripe",
        &url,
        "--secret",
        secret,
        "--tamper",
        "timestamp=-400",
    ]);
    assert_eq!(code, 0);
    let line = next_line(&mut stdout);
    assert_eq!(
        (line["outcome"].as_str(), line["status"].as_u64()),
        (Some("timestamp_too_old"), Some(401)),
        "{line}"
    );
    assert_eq!(line["reason"], "timestamp too old");
    let (code, _) = run_json(&[
        "send",
        "stripe",
        &url,
        "--secret",
        secret,
        "--tamper",
        "drop=stripe-signature",
    ]);
    assert_eq!(code, 0);
    let line = next_line(&mut stdout);
    assert_eq!(line["reason"], "missing header stripe-signature", "{line}");
    // The same delivery again: a duplicate.
    let (code, report) = run_json(&[
        "send",
        "stripe",
        &url,
        "--secret",
        secret,
        "--event",
        "invoice.paid",
        "--id",
        "evt_listen_1",
    ]);
    assert_eq!(
        (code, report["status"].as_u64()),
        (0, Some(200)),
        "{report}"
    );
    assert_eq!(next_line(&mut stdout)["outcome"], "duplicate");
}

#[test]
fn verified_deliveries_are_forwarded_unchanged() {
    // The app behind: its own layer verifies the forwarded request again.
    let app = Framework::Axum.start();
    let secret = signing_key("github");
    let forward = app.url("github");
    let (listener, mut stdout) =
        Listener::start(&["github", "--secret", secret, "--forward", &forward]);
    let (code, report) = run_json(&["send", "github", &listener.url, "--secret", secret]);
    assert_eq!(
        (code, report["status"].as_u64()),
        (0, Some(204)),
        "{report}"
    );
    let line = next_line(&mut stdout);
    assert_eq!(line["forwarded"]["status"], 204, "{line}");
    // Forwarded to a route that refuses it: that status is the answer.
    drop(listener);
    let wrong_route = app.url("stripe");
    let (listener, mut stdout) =
        Listener::start(&["github", "--secret", secret, "--forward", &wrong_route]);
    let (code, report) = run_json(&["send", "github", &listener.url, "--secret", secret]);
    assert_eq!(
        (code, report["status"].as_u64()),
        (1, Some(400)),
        "{report}"
    );
    assert_eq!(next_line(&mut stdout)["forwarded"]["status"], 400);
}

#[test]
fn url_signing_schemes_use_the_listen_address_and_a_busy_port_is_exit_2() {
    let secret = signing_key("twilio");
    let (listener, mut stdout) = Listener::start(&["twilio", "--secret", secret]);
    let url = format!("{}/sms?a=1", listener.url);
    let (code, report) = run_json(&["send", "twilio", &url, "--secret", secret]);
    assert_eq!(
        (code, report["status"].as_u64()),
        (0, Some(204)),
        "{report}"
    );
    assert_eq!(next_line(&mut stdout)["outcome"], "verified");
    let port = listener.url.rsplit(':').next().unwrap().to_owned();
    let output = support::run(&["listen", "twilio", "--secret", secret, "--port", &port]);
    let (code, _, stderr) = support::text(&output);
    assert_eq!(code, 2);
    assert!(
        stderr.contains(&format!("cannot listen on 127.0.0.1:{port}")),
        "{stderr}"
    );
}

#[test]
fn hmac_listens_by_its_spec() {
    let secret = signing_key("hmac");
    let spec = support::HMAC_SPEC;
    let (listener, mut stdout) =
        Listener::start(&["hmac", "--secret", secret, "--hmac-spec", spec]);
    // The spec signs {url}: the listen address is the public URL.
    let url = format!("{}/acme?tenant=7", listener.url);
    let send = [
        "send",
        "hmac",
        &url,
        "--secret",
        secret,
        "--hmac-spec",
        spec,
    ];
    let (code, report) =
        run_json(&[&send[..], &["--event", "order.paid", "--id", "d-listen-1"]].concat());
    assert_eq!(
        (code, report["status"].as_u64()),
        (0, Some(204)),
        "{report}"
    );
    let line = next_line(&mut stdout);
    assert_eq!(line["outcome"], "verified", "{line}");
    assert_eq!(
        (line["id"].as_str(), line["event_type"].as_str()),
        (Some("d-listen-1"), Some("order.paid"))
    );
    assert_eq!(line["body"]["type"], "order.paid");
    let (code, _) = run_json(&[&send[..], &["--tamper", "body"]].concat());
    assert_eq!(code, 0);
    let line = next_line(&mut stdout);
    assert_eq!(
        (line["outcome"].as_str(), line["status"].as_u64()),
        (Some("no_matching_signature"), Some(401)),
        "{line}"
    );
    drop(listener);
    let (code, _, stderr) = support::text(&support::run(&[
        "listen", "hmac", "--secret", secret, "--port", "0",
    ]));
    assert_eq!(code, 2);
    assert!(stderr.contains("hmac needs --hmac-spec"), "{stderr}");
}
