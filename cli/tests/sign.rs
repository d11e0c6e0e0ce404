//! `webhooks sign`: its headers and body verify with webhooks-core's own
//! verifier, for every scheme; bad input is one line and exit 2.

mod support;

use http::{HeaderMap, HeaderName, HeaderValue};
use support::{run, run_json, scheme_args, schemes, signing_key, text, verify};
use webhooks_core::scheme::registry::SchemeOptions;
use webhooks_core::{PublicUrl, RequestHead};

const URL: &str = "https://hooks.example.com/webhooks?tenant=7";

#[test]
fn signed_output_verifies_with_the_library_for_every_scheme() {
    for scheme in schemes() {
        let args = [
            "sign",
            scheme.name,
            "--secret",
            signing_key(scheme.name),
            "--url",
            URL,
        ];
        let (code, report) = run_json(&[&args[..], &scheme_args(scheme.name)].concat());
        assert_eq!(code, 0, "{}: {report}", scheme.name);
        let mut headers = HeaderMap::new();
        for (name, value) in report["headers"].as_object().unwrap() {
            headers.insert(
                HeaderName::try_from(name.as_str()).unwrap(),
                HeaderValue::try_from(value.as_str().unwrap()).unwrap(),
            );
        }
        let body = report["body"].as_str().unwrap().as_bytes();
        let options =
            SchemeOptions::new().public_url(PublicUrl::base("https://hooks.example.com").unwrap());
        let head = RequestHead::from_path_and_query("/webhooks?tenant=7", &headers);
        let verified = verify(scheme.name, &options, head, body);
        assert!(verified.is_ok(), "{}: {verified:?}", scheme.name);
        // One byte of a signed body changed: refused.
        if scheme.signs_body {
            let mut spoiled = body.to_vec();
            let at = spoiled.len() / 2;
            spoiled[at] ^= 1;
            let head = RequestHead::from_path_and_query("/webhooks?tenant=7", &headers);
            assert!(verify(scheme.name, &options, head, &spoiled).is_err());
        }
        assert_eq!(
            report["public_key"].is_string(),
            scheme.name == "discord" || scheme.name == "sendgrid"
        );
        assert_eq!(report["hmac_spec"].is_string(), scheme.name == "hmac");
    }
}

#[test]
fn text_curl_and_http_outputs() {
    let secret = [
        "--secret",
        "gh-secret",
        "--body",
        "{\"zen\":\"it's\"}",
        "--event",
        "ping",
    ];
    let (code, out, _) = text(&run(&[&["sign", "github"][..], &secret].concat()));
    assert_eq!(code, 0);
    assert!(out.contains("x-hub-signature-256: sha256="), "{out}");
    assert!(out.contains("x-github-event: ping"), "{out}");
    assert!(!out.contains("gh-secret"));
    let (_, out, _) = text(&run(&[&["sign", "github", "--curl"][..], &secret].concat()));
    assert!(
        out.starts_with("curl -sS -X POST 'http://localhost:3000/webhooks'"),
        "{out}"
    );
    assert!(
        out.contains(r#"--data-binary '{"zen":"it'\''s"}'"#),
        "{out}"
    );
    let (_, out, _) = text(&run(&[&["sign", "github", "--http"][..], &secret].concat()));
    assert!(
        out.starts_with("POST /webhooks HTTP/1.1\r\nhost: localhost:3000\r\n"),
        "{out}"
    );
    assert!(
        out.contains("content-length: 14\r\n\r\n{\"zen\":\"it's\"}"),
        "{out:?}"
    );
}

/// Runs `args` and checks it fails with exit 2 and one line holding `reason`.
fn fails_with(args: &[&str], reason: &str) {
    let (code, stdout, stderr) = text(&run(args));
    assert_eq!(code, 2, "{args:?}: {stdout} {stderr}");
    assert!(stderr.contains(reason), "{args:?}: {stderr:?}");
    // One line (clap adds its usual "For more information, try '--help'.").
    let lines = stderr
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"));
    assert_eq!(lines.count(), 1, "{args:?}: {stderr:?}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{stderr}"
    );
}

#[test]
fn sns_keys_are_taken_whole_and_never_echoed() {
    // A PEM key on the command line starts with dashes: a value, not a flag.
    let bad = "-----BEGIN PRIVATE KEY-----\nSECRETMARKERAAAA\n-----END PRIVATE KEY-----";
    let (code, stdout, stderr) = text(&run(&["sign", "sns", "--secret", bad]));
    assert_eq!(code, 2, "{stdout} {stderr}");
    assert!(stderr.contains("PKCS#8 RSA"), "{stderr}");
    assert!(!stderr.contains("SECRETMARKER") && !stdout.contains("SECRETMARKER"));
    // A PEM file is one key, not one per line.
    let key = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sns/test-key.pem");
    let (code, report) = run_json(&[
        "sign",
        "sns",
        "--secret-file",
        key,
        "--topic-arn",
        "arn:aws:sns:eu-west-1:1:orders",
    ]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(
        report["headers"]["x-amz-sns-topic-arn"],
        "arn:aws:sns:eu-west-1:1:orders"
    );
    assert_eq!(
        report["headers"]["content-type"],
        "text/plain; charset=UTF-8"
    );
    // The options of SNS are refused elsewhere; verify and listen say why
    // they do not check SNS.
    fails_with(
        &[
            "sign",
            "github",
            "--secret",
            "s",
            "--topic-arn",
            "arn:aws:sns:eu-west-1:1:t",
        ],
        "--certificate-url and --topic-arn are for sns, not github",
    );
    for args in [
        &["verify", "sns", "--secret", "x", "request.http"][..],
        &["listen", "sns", "--secret", "x"],
    ] {
        fails_with(args, "sns: verify and listen do not check SNS messages");
    }
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    fails_with(
        &["sign", "nosuchscheme", "--secret", "s"],
        "unknown scheme; known schemes: standard-webhooks, stripe",
    );
    fails_with(
        &["sign", "github"],
        "no secret: give --secret, --secret-file or WEBHOOKS_SECRET",
    );
    fails_with(
        &["sign", "stripe", "--secret", "sk_live_abc", "--set", "a=1"],
        "not a webhook secret",
    );
    fails_with(
        &[
            "sign",
            "stripe",
            "--secret",
            "whsec_x",
            "--set",
            "data.nope.amount=1",
        ],
        "--set: no field \"nope\" in data",
    );
    fails_with(
        &["sign", "stripe", "--secret", "whsec_x", "--set", "novalue"],
        "--set needs PATH=VALUE",
    );
    fails_with(
        &["sign", "stripe", "--secret", "whsec_x", "--event", "nope"],
        "no built-in stripe event of that name",
    );
    fails_with(
        &["sign", "twilio", "--secret", "t"],
        "twilio signs the URL it calls: give --url",
    );
    fails_with(
        &["sign", "discord", "--secret", "zz"],
        "private key is invalid: expected 64 hex digits",
    );
    fails_with(
        &["sign", "postmark", "--secret", "nocolon"],
        "expected user:password",
    );
    fails_with(
        &["send", "github", "http://127.0.0.1:9/hook", "--secret", "s"],
        "cannot connect",
    );
    fails_with(
        &["send", "github", "not a url", "--secret", "s"],
        "not an http:// or https:// URL",
    );
    fails_with(
        &[
            "send",
            "github",
            "http://127.0.0.1:9/",
            "--secret",
            "s",
            "--tamper",
            "timestamp",
        ],
        "github signs no timestamp",
    );
    fails_with(
        &[
            "send",
            "gitlab",
            "http://127.0.0.1:9/",
            "--secret",
            "s",
            "--tamper",
            "body",
        ],
        "gitlab does not sign the body",
    );
    fails_with(
        &[
            "send",
            "github",
            "http://127.0.0.1:9/",
            "--secret",
            "s",
            "--tamper",
            "drop=x-nope",
        ],
        "no such header",
    );
    fails_with(
        &[
            "send",
            "github",
            "http://127.0.0.1:9/",
            "--secret",
            "s",
            "--tamper",
            "sideways",
        ],
        "expected body, signature",
    );
    fails_with(
        &["sign", "github", "--secret", "s", "--header", "novalue"],
        "--header needs NAME:VALUE",
    );
    fails_with(
        &["sign", "hmac", "--secret", "s"],
        "hmac needs --hmac-spec SPEC",
    );
    fails_with(
        &[
            "sign",
            "hmac",
            "--secret",
            "s",
            "--hmac-spec",
            "header=X-Sig;header=X-Other",
        ],
        "hmac spec key `header` is invalid: given twice",
    );
    fails_with(
        &[
            "sign",
            "hmac",
            "--secret",
            "s",
            "--hmac-spec",
            "header=x;content={url}{body}",
        ],
        "hmac signs the URL it calls: give --url",
    );
    fails_with(
        &[
            "sign",
            "hmac",
            "--secret",
            "s",
            "--hmac-spec-file",
            "/nonexistent/acme.spec",
        ],
        "cannot read --hmac-spec-file",
    );
    // A secret is never echoed, even in the scheme's place.
    let (_, _, stderr) = text(&run(&[
        "sign",
        "whsec_secret_material",
        "--secret",
        "whsec_secret_material",
    ]));
    assert!(!stderr.contains("secret_material"), "{stderr}");
    // JSON mode: the error as JSON on stdout.
    let (code, report) = run_json(&["sign", "github"]);
    assert_eq!(code, 2);
    assert_eq!(report["exit_code"], 2);
    assert!(report["error"].as_str().unwrap().contains("no secret"));
}

#[test]
fn the_secret_comes_from_a_file_or_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secret");
    std::fs::write(&path, "gh-secret\n").unwrap();
    let from_file = text(&run(&[
        "sign",
        "github",
        "--secret-file",
        path.to_str().unwrap(),
        "--body",
        "{}",
        "--id",
        "d1",
    ]))
    .1;
    let from_flag = text(&run(&[
        "sign",
        "github",
        "--secret",
        "gh-secret",
        "--body",
        "{}",
        "--id",
        "d1",
    ]))
    .1;
    let from_env = support::webhooks()
        .env("WEBHOOKS_SECRET", "gh-secret")
        .args(["sign", "github", "--body", "{}", "--id", "d1"])
        .output()
        .unwrap();
    assert_eq!(from_file, from_flag);
    assert_eq!(String::from_utf8_lossy(&from_env.stdout), from_flag);
    assert!(from_flag.contains("x-github-delivery: d1"));
}

#[test]
fn stdin_bodies_and_completions() {
    use std::io::Write as _;
    let mut child = support::webhooks()
        .args([
            "--json",
            "sign",
            "standard-webhooks",
            "--secret",
            support::signing_key("standard-webhooks"),
            "--body-file",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"type\":\"from.stdin\"}")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["body"], "{\"type\":\"from.stdin\"}");
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, _) = text(&run(&["completions", shell]));
        assert_eq!(code, 0);
        assert!(
            out.contains("webhooks") && out.contains("tamper"),
            "{shell}"
        );
    }
}
