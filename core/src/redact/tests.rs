use super::*;

/// Issue 35, item 9: every built-in scheme's credential header, and the
/// generic credentials, are redacted by name.
#[test]
fn credential_names() {
    for name in [
        "Authorization",
        "Proxy-Authorization",
        "Cookie",
        "Set-Cookie",
        "X-Api-Key",
        "X_API_KEY",
        "X-Auth-Token",
        // The built-in schemes' signature and token headers.
        "webhook-signature",
        "svix-signature",
        "paddle-signature",
        "x-slack-signature",
        "x-twilio-signature",
        "x-square-hmacsha256-signature",
        "linear-signature",
        "stripe-signature",
        "x-hubspot-signature-v3",
        "x-gitlab-token",
        "x-zm-signature",
        "x-signature-ed25519",
        "X-Hub-Signature-256",
        "x-hub-signature",
        "x-mandrill-signature",
        "X-Shopify-Hmac-Sha256",
        "typeform-signature",
        "x-twilio-email-event-webhook-signature",
        "x-webhook-secret",
    ] {
        assert!(is_credential_header(name), "{name}");
    }
    for name in [
        "content-type",
        "x-shopify-topic",
        "webhook-id",
        "x-github-event",
        "user-agent",
    ] {
        assert!(!is_credential_header(name), "{name}");
    }
}

#[test]
fn configured_names() {
    let redaction = Redaction::new()
        .header(HeaderName::from_static("x-digest"))
        .headers([HeaderName::from_static("x-digest")]);
    assert_eq!(redaction.extra.len(), 1);
    assert!(redaction.is_redacted("X-DIGEST"));
    assert!(redaction.is_configured("x-digest"));
    assert!(!redaction.is_configured("authorization"));
    assert!(redaction.is_redacted("authorization"));
    let shown = redaction.apply(&[
        ("x-digest".into(), "abc".into()),
        ("x-request-id".into(), "r1".into()),
    ]);
    assert_eq!(
        shown,
        [
            ("x-digest".to_owned(), "redacted (3 bytes)".to_owned()),
            ("x-request-id".to_owned(), "r1".to_owned()),
        ]
    );
}

fn shown(redaction: &Redaction, body: &str) -> ShownBody<'static> {
    let body: &'static str = Box::leak(body.to_owned().into_boxed_str());
    redaction
        .event(Surface::AdminApi, "stripe", Some("payment_intent.created"))
        .body(body.as_bytes(), DEFAULT_BODY_LIMIT)
}

fn json_text(shown: ShownBody<'_>) -> (String, usize) {
    match shown {
        ShownBody::Json { text, redacted } => (text.into_owned(), redacted),
        other => panic!("not JSON: {other:?}"),
    }
}

#[test]
fn credential_field_names() {
    for key in [
        "client_secret",
        "Client-Secret",
        "access_token",
        "refreshToken",
        "password",
        "API_KEY",
        "api-key",
        "apikey",
        "hmac",
        "signature",
        "credentials",
        "session_id",
        "Authorization",
    ] {
        assert!(is_credential_field(key), "{key}");
    }
    for key in ["author", "id", "email", "amount", "object", "customer"] {
        assert!(!is_credential_field(key), "{key}");
    }
}

/// A Stripe-like body: the credential-named member masked at any depth,
/// in arrays too, the rest as sent (key order, number spelling).
#[test]
fn credential_fields_masked_at_any_depth() {
    let body = r#"{ "id": "pi_1", "amount": 1.50e2, "client_secret": "pi_1_secret_xyz",
            "data": { "object": { "z": 1, "a": 2, "charges": [ { "api_key": 42 }, { "Session": { "k": "v" } } ] } } }"#;
    let (text, redacted) = json_text(shown(&Redaction::new(), body));
    assert_eq!(redacted, 3);
    assert_eq!(
        text,
        r#"{"id":"pi_1","amount":1.50e2,"client_secret":"redacted (string, 15 bytes)","data":{"object":{"z":1,"a":2,"charges":[{"api_key":"redacted (number, 2 bytes)"},{"Session":"redacted (object, 12 bytes)"}]}}}"#
    );
    assert!(!text.contains("xyz"));
}

/// Nothing to redact: the body exactly as sent, borrowed.
#[test]
fn untouched_json_is_exact() {
    let body = "{ \"id\" : 1,\n \"list\": [1, 2] }";
    assert_eq!(
        shown(&Redaction::new(), body),
        ShownBody::Json {
            text: Cow::Borrowed(body),
            redacted: 0
        }
    );
}

#[test]
fn configured_paths_step_through_arrays() {
    let redaction = Redaction::new()
        .field("data.object.customer.email")
        .field("data.items[].price");
    let body = r#"{"data":{"object":{"customer":{"email":"ada@example.com","name":"Ada"}},
            "items":[{"price":100,"sku":"a"},{"price":7}],"email":"kept@example.com"}}"#;
    let (text, redacted) = json_text(shown(&redaction, body));
    assert_eq!(redacted, 3);
    assert!(!text.contains("ada@example.com"), "{text}");
    assert!(
        text.contains(r#""email":"redacted (string, 15 bytes)","name":"Ada""#),
        "{text}"
    );
    assert!(
        text.contains(r#"{"price":"redacted (number, 3 bytes)","sku":"a"}"#),
        "{text}"
    );
    assert!(text.contains(r#""email":"kept@example.com""#), "{text}");
}

/// Escaped keys are matched decoded and printed as sent.
#[test]
fn escaped_keys() {
    let (text, redacted) = json_text(shown(&Redaction::new(), r#"{"pass\u0077ord":"hunter2"}"#));
    assert_eq!(redacted, 1);
    assert_eq!(text, r#"{"pass\u0077ord":"redacted (string, 7 bytes)"}"#);
}

#[test]
fn hook_hides_shows_and_sees_the_context() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let redaction = Redaction::new().hook(move |ctx| {
        log.lock().unwrap().push(format!(
            "{:?} {} {:?} {:?} {:?}",
            ctx.surface(),
            ctx.scheme(),
            ctx.event_type(),
            ctx.target(),
            ctx.default_decision()
        ));
        match (ctx.field_path(), ctx.header_name()) {
            (Some("customer.email"), _) => Decision::Hide,
            // An app that trusts this one.
            (Some("client_secret"), _) => Decision::Show,
            (_, Some("x-request-id")) => Decision::Hide,
            _ => ctx.default_decision(),
        }
    });
    let (text, redacted) = json_text(shown(
        &redaction,
        r#"{"customer":{"email":"a@b.c","id":"cus_1"},"client_secret":"s","token":"t"}"#,
    ));
    assert_eq!(redacted, 2);
    assert_eq!(
        text,
        r#"{"customer":{"id":"cus_1"},"client_secret":"s","token":"redacted (string, 1 bytes)"}"#
    );
    let log = seen.lock().unwrap().clone();
    assert!(
        log.contains(&r#"AdminApi stripe Some("payment_intent.created") Body Show"#.to_owned()),
        "{log:?}"
    );
    assert!(
        log.iter()
            .any(|l| l.contains(r#"Field { path: "customer.email", key: "email" } Show"#)),
        "{log:?}"
    );
    assert!(
        log.iter()
            .any(|l| l.contains(r#"Field { path: "token", key: "token" } Mask"#)),
        "{log:?}"
    );
    assert!(
        log.iter().all(|l| !l.contains("a@b.c")),
        "the hook never sees a value"
    );

    let headers = redaction.event(Surface::Console, "stripe", None).headers(&[
        ("x-request-id".into(), "r1".into()),
        ("stripe-signature".into(), "t=1,v1=ab".into()),
        ("content-type".into(), "application/json".into()),
    ]);
    assert_eq!(
        headers,
        [
            ShownHeader {
                name: "stripe-signature".into(),
                value: "redacted (9 bytes)".into(),
                masked: true
            },
            ShownHeader {
                name: "content-type".into(),
                value: "application/json".into(),
                masked: false
            },
        ]
    );
}

#[test]
fn hook_on_the_whole_body() {
    let redaction = Redaction::new().hook(|ctx| match (ctx.target(), ctx.scheme()) {
        (Target::Body, "slack") => Decision::Hide,
        (Target::Body, "twilio") => Decision::Mask,
        _ => ctx.default_decision(),
    });
    let body = b"token=abc&text=hi";
    let event = |scheme| redaction.event(Surface::Cli, scheme, None);
    assert_eq!(event("slack").body(body, 100), ShownBody::Hidden);
    assert_eq!(
        event("twilio").body(body, 100),
        ShownBody::Masked { len: 17 }
    );
    assert_eq!(
        event("github").body(body, 100),
        ShownBody::Text("token=abc&text=hi")
    );
    assert_eq!(
        event("github").body(&[0xff, 0], 100),
        ShownBody::Binary { len: 2 }
    );
}

/// Bounded work: a JSON body over the limit is not parsed and not
/// shown; one nested deeper than the walker goes is not shown either;
/// nor is one that starts like JSON but does not parse (truncated, it
/// may still hold a secret).
#[test]
fn bounded() {
    let big = format!(r#"{{"client_secret":"s","pad":"{}"}}"#, "x".repeat(200));
    let redaction = Redaction::new();
    let event = redaction.event(Surface::Console, "stripe", None);
    assert_eq!(
        event.body(big.as_bytes(), 100),
        ShownBody::NotParsed {
            len: big.len(),
            limit: 100
        }
    );
    assert!(
        event
            .body(big.as_bytes(), 100)
            .note()
            .unwrap()
            .contains("100-byte limit")
    );
    let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
    assert!(matches!(
        event.body(deep.as_bytes(), 1 << 20),
        ShownBody::NotParsed { .. }
    ));
    let deep_masked = format!(
        r#"{{"secret":{}{}}}"#,
        "[".repeat(MAX_DEPTH + 1),
        "]".repeat(MAX_DEPTH + 1)
    );
    assert!(matches!(
        event.body(deep_masked.as_bytes(), 1 << 20),
        ShownBody::NotParsed { .. }
    ));
    assert_eq!(
        event.body(br#"{"client_secret": "abc""#, 100),
        ShownBody::Malformed { len: 23 }
    );
}

#[test]
fn debug_shows_no_values() {
    let redaction = Redaction::new()
        .field("data.email")
        .hook(|ctx| ctx.default_decision());
    let debug = format!("{redaction:?}");
    assert!(
        debug.contains("data.email") && debug.contains("Fn"),
        "{debug}"
    );
    let clone = redaction.clone();
    assert!(clone.hook.is_some());
}
