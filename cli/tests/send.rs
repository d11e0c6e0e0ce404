//! `webhooks send` against real receivers: every scheme, through axum
//! (tower-webhooks) and actix-web (actix-webhooks), is accepted when
//! genuine and refused, with the library's status, when tampered with.

mod support;

use support::{Framework, described, run_json, scheme_args, schemes, signing_key};

/// The tamper modes each scheme can be checked with, and the status the
/// library answers each with.
fn tampers(scheme: &webhooks_core::scheme::registry::SchemeInfo) -> Vec<(String, u16)> {
    let mut modes = vec![("signature".to_owned(), 401)];
    if scheme.signs_body {
        modes.push(("body".to_owned(), 401));
    }
    if scheme.signs_timestamp {
        modes.push(("timestamp=-400".to_owned(), 401));
        modes.push(("timestamp=400".to_owned(), 401));
    }
    if let Some(header) = scheme.signature_header {
        modes.push((format!("drop={header}"), 400));
    }
    modes
}

#[test]
fn every_scheme_is_accepted_and_every_tamper_refused_on_both_frameworks() {
    for framework in Framework::ALL {
        let app = framework.start();
        for scheme in schemes() {
            let url = app.url(scheme.name);
            let secret = signing_key(scheme.name);
            let what = format!("{framework:?} {}", scheme.name);
            // hmac: the receiver and the sender configured with the same spec.
            let send = [
                &["send", scheme.name, &url, "--secret", secret][..],
                &scheme_args(scheme.name),
            ]
            .concat();
            let (code, report) = run_json(&send);
            assert_eq!(code, 0, "{what}: {report}");
            assert_eq!(report["status"], 204, "{what}: {report}");
            assert_eq!(report["ok"], true);
            let info = described(scheme.name);
            for (tamper, status) in tampers(&info) {
                let (code, report) = run_json(&[&send[..], &["--tamper", &tamper]].concat());
                assert_eq!(
                    report["status"], status,
                    "{what} --tamper {tamper}: {report}"
                );
                assert_eq!(code, 0, "{what} --tamper {tamper}: {report}");
                assert_eq!(report["tamper"], tamper.as_str());
            }
        }
    }
}

#[test]
fn every_fixture_is_accepted() {
    let app = Framework::Axum.start();
    // hmac has no built-in events (its provider is anyone's): see below.
    for scheme in schemes().filter(|s| s.name != "hmac") {
        let (_, events) = run_json(&["events", scheme.name]);
        let events = events[scheme.name].as_array().unwrap().clone();
        assert!(
            events.len() >= 3,
            "{}: {} fixtures",
            scheme.name,
            events.len()
        );
        for event in events {
            let event = event["event"].as_str().unwrap();
            let (code, report) = run_json(&[
                "send",
                scheme.name,
                &app.url(scheme.name),
                "--secret",
                signing_key(scheme.name),
                "--event",
                event,
            ]);
            assert_eq!(code, 0, "{} {event}: {report}", scheme.name);
            // Provider handshakes (Discord's PING, Slack's URL verification)
            // are answered by the library with a 200.
            let status = report["status"].as_u64().unwrap();
            assert!(
                status == 204 || status == 200,
                "{} {event}: {report}",
                scheme.name
            );
        }
    }
}

#[test]
fn a_refused_delivery_exits_1_and_a_wrong_expectation_too() {
    let app = Framework::Axum.start();
    let url = app.url("github");
    // Signed with another secret: refused, exit 1.
    let (code, report) = run_json(&["send", "github", &url, "--secret", "another-secret"]);
    assert_eq!(
        (code, report["status"].as_u64()),
        (1, Some(401)),
        "{report}"
    );
    assert_eq!(report["ok"], false);
    assert!(
        report["response_body"]
            .as_str()
            .unwrap()
            .contains("signature"),
        "{report}"
    );
    // --expect: the status must be that one.
    let secret = signing_key("github");
    let (code, _) = run_json(&[
        "send", "github", &url, "--secret", secret, "--expect", "204",
    ]);
    assert_eq!(code, 0);
    let (code, _) = run_json(&[
        "send", "github", &url, "--secret", secret, "--expect", "401",
    ]);
    assert_eq!(code, 1);
}

#[test]
fn set_edits_the_fixture_and_the_same_id_is_a_duplicate() {
    let app = Framework::Axum.start();
    let url = app.url("stripe");
    let secret = signing_key("stripe");
    let (code, report) = run_json(&[
        "send",
        "stripe",
        &url,
        "--secret",
        secret,
        "--id",
        "evt_cli_same",
        "--set",
        "data.object.amount_paid=500",
    ]);
    assert_eq!(
        (code, report["status"].as_u64()),
        (0, Some(204)),
        "{report}"
    );
    // The same id again: the library answers the retry as a duplicate (200).
    let (code, report) = run_json(&[
        "send",
        "stripe",
        &url,
        "--secret",
        secret,
        "--id",
        "evt_cli_same",
    ]);
    assert_eq!(
        (code, report["status"].as_u64()),
        (0, Some(200)),
        "{report}"
    );
}

#[test]
fn repeat_counts_statuses() {
    let app = Framework::Actix.start();
    let url = app.url("standard-webhooks");
    let secret = signing_key("standard-webhooks");
    let (code, report) = run_json(&[
        "send",
        "standard-webhooks",
        &url,
        "--secret",
        secret,
        "--repeat",
        "200",
        "--concurrency",
        "8",
    ]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["statuses"]["204"], 200, "{report}");
    assert_eq!(report["errors"], 0);
    let p50 = report["latency_ms"]["p50"].as_f64().unwrap();
    let p99 = report["latency_ms"]["p99"].as_f64().unwrap();
    assert!(p50 > 0.0 && p50 <= p99, "{report}");
    assert!(report["requests_per_second"].as_f64().unwrap() > 0.0);
    // --same-id: one delivery and 49 duplicates.
    let (code, report) = run_json(&[
        "send",
        "standard-webhooks",
        &url,
        "--secret",
        secret,
        "--repeat",
        "50",
        "--same-id",
    ]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["statuses"]["204"], 1, "{report}");
    assert_eq!(report["statuses"]["200"], 49, "{report}");
    // Tampered, all refused: the check holds.
    let (code, report) = run_json(&[
        "send",
        "standard-webhooks",
        &url,
        "--secret",
        secret,
        "--repeat",
        "20",
        "-c",
        "4",
        "--tamper",
        "signature",
    ]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["statuses"]["401"], 20, "{report}");
}

#[test]
fn hmac_without_built_in_events_sends_a_default_body_with_the_event_header() {
    let (_, events) = run_json(&["events", "hmac"]);
    assert_eq!(events["hmac"], serde_json::json!([]));
    let app = Framework::Axum.start();
    let url = app.url("hmac");
    let secret = signing_key("hmac");
    let (code, report) = run_json(
        &[
            &[
                "send",
                "hmac",
                &url,
                "--secret",
                secret,
                "--event",
                "order.paid",
            ][..],
            &scheme_args("hmac"),
        ]
        .concat(),
    );
    assert_eq!(
        (code, report["status"].as_u64()),
        (0, Some(204)),
        "{report}"
    );
    // Another spec than the receiver's (another prefix): refused.
    let (code, report) = run_json(&[
        "send",
        "hmac",
        &url,
        "--secret",
        secret,
        "--hmac-spec",
        &support::HMAC_SPEC.replace("sha256=", "v1="),
    ]);
    assert_eq!(
        (code, report["status"].as_u64()),
        (1, Some(400)),
        "{report}"
    );
    // No spec, or a spec for another scheme: usage errors, before sending.
    let (code, report) = run_json(&["send", "hmac", &url, "--secret", secret]);
    assert_eq!(code, 2);
    assert!(
        report["error"].as_str().unwrap().contains("--hmac-spec"),
        "{report}"
    );
    let (code, report) = run_json(&[
        "send",
        "github",
        &url,
        "--secret",
        secret,
        "--hmac-spec",
        "header=x",
    ]);
    assert_eq!(code, 2);
    assert!(
        report["error"]
            .as_str()
            .unwrap()
            .contains("for the hmac scheme, not github"),
        "{report}"
    );
}

/// A raw HTTP/1.1 server on 127.0.0.1:0, a thread per connection: the
/// `n`th request it reads (counted across connections, from 0) is answered
/// with `answer(n)`'s bytes, and the connection closed after them when it
/// says so. Its URL.
fn raw_server(answer: impl Fn(usize) -> (Vec<u8>, bool) + Send + Sync + 'static) -> String {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hooks", listener.local_addr().unwrap());
    let answer = Arc::new(answer);
    let count = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (answer, count) = (answer.clone(), count.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    // The head, then the body by its Content-Length.
                    let mut length = 0;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let (bytes, close) = answer(count.fetch_add(1, Ordering::SeqCst));
                    if stream.write_all(&bytes).is_err() || close {
                        let _ = stream.shutdown(std::net::Shutdown::Both);
                        return;
                    }
                }
            });
        }
    });
    url
}

#[test]
fn chunked_answers_are_read_whole() {
    // Alternately 200 and 401, each with a chunked body (the 401's with a
    // chunk extension and a trailer), on kept-alive connections.
    let url = raw_server(|n| {
        let bytes: &[u8] = match n % 2 {
            0 => b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nyes\r\n0\r\n\r\n",
            _ => {
                b"HTTP/1.1 401 Unauthorized\r\nTransfer-Encoding: chunked\r\n\r\n\
                  a;why=sig\r\nsignature \r\n7\r\nrefused\r\n0\r\nx-trailer: 1\r\n\r\n"
            }
        };
        (bytes.to_vec(), false)
    });
    let secret = signing_key("stripe");
    let (code, report) = run_json(&[
        "send", "stripe", &url, "--secret", secret, "--repeat", "200", "-c", "4",
    ]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["statuses"]["200"], 100, "{report}");
    assert_eq!(report["statuses"]["401"], 100, "{report}");
    assert_eq!(report["errors"], 0, "{report}");
    assert_eq!(report["unexpected"], 100, "{report}");
    // One delivery at a time (the 201st, then the 202nd): the body is the
    // chunks' data.
    let (code, report) = run_json(&["send", "stripe", &url, "--secret", secret]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["response_body"], "yes", "{report}");
    let (code, report) = run_json(&["send", "stripe", &url, "--secret", secret]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["status"], 401, "{report}");
    assert_eq!(report["response_body"], "signature refused", "{report}");
}

#[test]
fn a_server_closing_connections_mid_run_still_answers_every_delivery() {
    // Every 7th answer says `Connection: close`, every 11th is HTTP/1.0
    // (closed without saying so), and the server closes after both.
    let url = raw_server(|n| match (n % 7, n % 11) {
        (6, _) => (
            b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n".to_vec(),
            true,
        ),
        (_, 10) => (b"HTTP/1.0 204 No Content\r\n\r\n".to_vec(), true),
        _ => (
            b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n".to_vec(),
            false,
        ),
    });
    let (code, report) = run_json(&[
        "send",
        "github",
        &url,
        "--secret",
        signing_key("github"),
        "--repeat",
        "500",
        "-c",
        "8",
    ]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["statuses"]["204"], 500, "{report}");
    assert_eq!(report["errors"], 0, "{report}");
}

#[test]
fn a_server_answering_garbage_is_an_error_not_a_panic() {
    let url = raw_server(|_| (b"this is not HTTP\r\n\r\n".to_vec(), false));
    let secret = signing_key("slack");
    let output = support::webhooks()
        .args(["--json", "send", "slack", &url, "--secret", secret])
        .args(["--repeat", "20", "-c", "2"])
        .output()
        .unwrap();
    let (code, stdout, stderr) = support::text(&output);
    assert_eq!(code, 2, "{stdout} {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["errors"], 20, "{report}");
    assert!(
        report["first_error"]
            .as_str()
            .unwrap()
            .contains("malformed response"),
        "{report}"
    );
    // One delivery, in text: the reason and the origin, exit 2.
    let output = support::webhooks()
        .args(["send", "slack", &url, "--secret", secret])
        .output()
        .unwrap();
    let (code, _, stderr) = support::text(&output);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("malformed response") && stderr.contains("http://127.0.0.1:"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    // A body cut short, then the connection closed: an error too.
    let url = raw_server(|_| {
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort".to_vec(),
            true,
        )
    });
    let (code, report) = run_json(&[
        "send", "slack", &url, "--secret", secret, "--repeat", "10", "-c", "2",
    ]);
    assert_eq!(code, 2, "{report}");
    assert_eq!(report["errors"], 10, "{report}");
    assert!(
        report["first_error"]
            .as_str()
            .unwrap()
            .contains("closed mid-answer"),
        "{report}"
    );
}
