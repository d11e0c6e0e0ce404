//! `webhooks verify` on the captured requests under `tests/data/`: each
//! failure kind is named, with its reason, and the exit code is the
//! library verifier's verdict.

mod support;

use support::{run_json, text};

fn data(name: &str) -> String {
    format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The check called `name` in a report (the last one of that name).
fn check<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|c| c["check"] == name)
        .unwrap_or_else(|| panic!("no {name} check in {report}"))
}

#[test]
fn a_genuine_request_verifies_and_says_which_secret_matched() {
    let (code, report) = run_json(&[
        "verify",
        "stripe",
        &data("stripe.http"),
        "--secret",
        "whsec_old",
        "--secret",
        "whsec_cli_test_secret",
        "--now",
        "1700000010",
    ]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["verdict"]["ok"], true);
    assert_eq!(report["verdict"]["id"], "evt_captured_1");
    assert_eq!(
        check(&report, "signature")["detail"],
        "matches secret #2 of 2"
    );
    let timestamp = check(&report, "timestamp");
    assert_eq!(timestamp["ok"], true);
    assert!(
        timestamp["detail"]
            .as_str()
            .unwrap()
            .starts_with("signed 10 s before now"),
        "{report}"
    );
}

#[test]
fn a_stale_or_future_timestamp_gives_its_skew() {
    let (code, report) = run_json(&[
        "verify",
        "stripe",
        &data("stripe.http"),
        "--secret",
        "whsec_cli_test_secret",
        "--now",
        "1700003600",
    ]);
    assert_eq!(code, 1);
    assert_eq!(report["verdict"]["kind"], "timestamp_too_old");
    assert_eq!(report["verdict"]["status"], 401);
    let timestamp = check(&report, "timestamp");
    assert_eq!(timestamp["ok"], false);
    assert!(
        timestamp["detail"]
            .as_str()
            .unwrap()
            .contains("signed 3600 s before now"),
        "{report}"
    );
    assert!(
        timestamp["detail"]
            .as_str()
            .unwrap()
            .contains("tolerance ±300 s"),
        "{report}"
    );
    // The signature itself is right: it is the clock.
    assert_eq!(check(&report, "signature")["ok"], true);
    let (code, report) = run_json(&[
        "verify",
        "standard-webhooks",
        &data("standard-webhooks.http"),
        "--secret",
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "--now",
        "1699999000",
    ]);
    assert_eq!(code, 1);
    assert_eq!(report["verdict"]["kind"], "timestamp_too_new");
    assert!(
        check(&report, "timestamp")["detail"]
            .as_str()
            .unwrap()
            .contains("1000 s after now")
    );
    // A wider --tolerance accepts it.
    let (code, _) = run_json(&[
        "verify",
        "standard-webhooks",
        &data("standard-webhooks.http"),
        "--secret",
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "--now",
        "1699999000",
        "--tolerance",
        "1200",
    ]);
    assert_eq!(code, 0);
}

#[test]
fn a_changed_body_is_recognised() {
    let cases = [
        (
            "stripe",
            "stripe-reserialised.http",
            "whsec_cli_test_secret",
            "minified",
        ),
        (
            "github",
            "github-crlf.http",
            "cli-test-secret",
            "LF line endings instead of CRLF",
        ),
        (
            "github",
            "github-no-final-newline.http",
            "cli-test-secret",
            "with a final newline",
        ),
    ];
    for (scheme, file, secret, change) in cases {
        let (code, report) = run_json(&[
            "verify",
            scheme,
            &data(file),
            "--secret",
            secret,
            "--now",
            "1700000000",
        ]);
        assert_eq!(code, 1, "{file}: {report}");
        assert_eq!(report["verdict"]["kind"], "no_matching_signature");
        let body = check(&report, "body");
        assert_eq!(body["ok"], false, "{file}: {report}");
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains(change), "{file}: {detail}");
        assert!(
            detail.contains("your framework or proxy changed the body"),
            "{detail}"
        );
    }
    // A wrong secret is not mistaken for a changed body.
    let (code, report) = run_json(&[
        "verify",
        "github",
        &data("github-crlf.http"),
        "--secret",
        "wrong",
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        check(&report, "signature")["detail"],
        "does not match the secret"
    );
    assert_eq!(check(&report, "body")["ok"], serde_json::Value::Null);
}

#[test]
fn a_missing_header_is_named() {
    let (code, report) = run_json(&[
        "verify",
        "slack",
        &data("slack-no-timestamp.http"),
        "--secret",
        "cli-test-secret",
        "--now",
        "1700000000",
    ]);
    assert_eq!(code, 1);
    let headers = check(&report, "headers");
    assert_eq!(headers["ok"], false);
    assert_eq!(
        headers["detail"],
        "missing header x-slack-request-timestamp (400 Bad Request)"
    );
    assert_eq!(report["verdict"]["status"], 400);
}

#[test]
fn the_signed_url_is_found_among_its_variants() {
    let (code, report) = run_json(&[
        "verify",
        "twilio",
        &data("twilio.http"),
        "--secret",
        "cli-test-secret",
        "--url",
        "http://hooks.example.com/sms?a=1&b=2",
    ]);
    assert_eq!(code, 1, "{report}");
    let url = check(&report, "url");
    assert_eq!(url["ok"], false);
    let detail = url["detail"].as_str().unwrap();
    assert!(detail.starts_with("the signature is for https://hooks.example.com/sms?b=2&a=1 (https instead of http, with the query"), "{detail}");
    let (code, _) = run_json(&[
        "verify",
        "twilio",
        &data("twilio.http"),
        "--secret",
        "cli-test-secret",
        "--url",
        "https://hooks.example.com/sms?b=2&a=1",
    ]);
    assert_eq!(code, 0);
    // Without --url: rebuilt from Host and the request line, as https.
    let (code, report) = run_json(&[
        "verify",
        "twilio",
        &data("twilio.http"),
        "--secret",
        "cli-test-secret",
    ]);
    assert_eq!(code, 0, "{report}");
}

#[test]
fn a_secret_in_the_wrong_format_gets_the_library_error_and_exit_2() {
    let (code, report) = run_json(&[
        "verify",
        "postmark",
        &data("postmark.http"),
        "--secret",
        "nocolon",
    ]);
    assert_eq!(code, 2);
    let format = check(&report, "secret format");
    assert_eq!(
        format["detail"],
        "secret #1: Postmark credential is invalid: expected user:password"
    );
    let (code, report) = run_json(&[
        "verify",
        "postmark",
        &data("postmark.http"),
        "--secret",
        "hooks:cli-test-password",
    ]);
    assert_eq!(code, 0, "{report}");
    let (code, _, stderr) = text(&support::run(&[
        "verify",
        "stripe",
        &data("stripe.http"),
        "--secret",
        "sk_live_123",
    ]));
    assert_eq!(code, 2);
    assert!(!stderr.contains("sk_live_123"));
}

#[test]
fn headers_and_body_files_and_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    let raw = std::fs::read(data("stripe.http")).unwrap();
    let at = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let headers = dir.path().join("headers");
    let body = dir.path().join("body");
    std::fs::write(&headers, &raw[..at]).unwrap();
    std::fs::write(&body, &raw[at + 4..]).unwrap();
    let (code, report) = run_json(&[
        "verify",
        "stripe",
        "--headers",
        headers.to_str().unwrap(),
        "--body",
        body.to_str().unwrap(),
        "--secret",
        "whsec_cli_test_secret",
        "--now",
        "1700000000",
    ]);
    assert_eq!(code, 0, "{report}");
    let (code, _, stderr) = text(&support::run(&[
        "verify",
        "stripe",
        "/nonexistent.http",
        "--secret",
        "whsec_x",
    ]));
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with("error: cannot read the request file /nonexistent.http"),
        "{stderr}"
    );
}

#[test]
fn an_hmac_capture_verifies_by_its_spec_and_failures_are_explained() {
    let spec = data("acme.spec");
    let verify = |file: &str, extra: &[&str]| {
        let path = data(file);
        let args = [
            &[
                "verify",
                "hmac",
                &path,
                "--hmac-spec-file",
                &spec,
                "--secret",
                "cli-test-secret",
            ][..],
            extra,
        ]
        .concat();
        run_json(&args)
    };
    let (code, report) = verify("acme.http", &["--now", "1700000010"]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["scheme"], "hmac");
    assert_eq!(report["verdict"]["id"], "d-captured-1");
    assert_eq!(report["verdict"]["event_type"], "order.paid");
    assert_eq!(report["verdict"]["timestamp"], 1_700_000_000);
    // The spec, written back; the URL rebuilt from the Host and request line.
    assert_eq!(check(&report, "spec")["detail"], support::HMAC_SPEC);
    assert_eq!(
        check(&report, "url")["detail"],
        "checking against https://hooks.example.com/acme?tenant=7"
    );
    assert_eq!(
        check(&report, "headers")["detail"],
        "x-acme-signature present and well formed"
    );
    // The same capture with the spec inline, and a wrong secret: which part.
    let (code, report) = run_json(&[
        "verify",
        "hmac",
        &data("acme.http"),
        "--hmac-spec",
        support::HMAC_SPEC,
        "--secret",
        "another-secret",
        "--now",
        "1700000010",
    ]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(check(&report, "signature")["ok"], false);
    // Stale: the skew.
    let (code, report) = verify("acme.http", &["--now", "1700003600"]);
    assert_eq!(
        (code, &report["verdict"]["kind"]),
        (1, &"timestamp_too_old".into()),
        "{report}"
    );
    assert!(
        check(&report, "timestamp")["detail"]
            .as_str()
            .unwrap()
            .contains("signed 3600 s before now")
    );
    // Another URL: the one it was signed for.
    let (code, report) = verify(
        "acme.http",
        &[
            "--now",
            "1700000010",
            "--url",
            "http://hooks.example.com/acme?tenant=7",
        ],
    );
    assert_eq!(code, 1);
    let url = check(&report, "url")["detail"].as_str().unwrap().to_owned();
    assert!(url.contains("https instead of http"), "{report}");
    // A body re-serialised by a framework: named.
    let (code, report) = verify("acme-reserialised.http", &["--now", "1700000010"]);
    assert_eq!(code, 1);
    let body = check(&report, "body");
    assert_eq!(body["ok"], false, "{report}");
    assert!(
        body["detail"].as_str().unwrap().contains("minified"),
        "{report}"
    );
}
