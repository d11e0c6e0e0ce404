use super::*;

#[test]
fn signed_times_beyond_the_clock_are_a_dash() {
    assert_eq!(signed(None), "—");
    assert_eq!(signed(Some(0)), "1970-01-01 00:00:00 UTC");
    assert_eq!(signed(Some(u64::MAX)), "—");
    assert_eq!(signed(Some(i64::MAX as u64 + 1)), "—");
}

#[test]
fn dates() {
    assert_eq!(when(UNIX_EPOCH), "1970-01-01 00:00:00 UTC");
    assert_eq!(
        when(UNIX_EPOCH + Duration::from_secs(1_796_140_641)),
        "2026-12-01 15:57:21 UTC"
    );
    assert_eq!(
        when(UNIX_EPOCH + Duration::from_secs(951_782_400)),
        "2000-02-29 00:00:00 UTC"
    );
}

#[test]
fn bodies_capped() {
    let shown = |body: &'static [u8]| {
        crate::redact::Redaction::new()
            .event(crate::redact::Surface::Console, "s", None)
            .body(body, 100)
    };
    assert_eq!(
        body_text(&shown(br#"{"a":1}"#), 100),
        ("{\n  \"a\": 1\n}".to_owned(), false)
    );
    assert_eq!(
        body_text(&shown("ééé".as_bytes()), 3),
        ("é".to_owned(), true)
    );
    assert!(
        body_text(&shown(&[0xff, 0xfe]), 100)
            .0
            .starts_with("(binary")
    );
}

/// Issue 35, item 3: a 1 MiB body nested 120 deep re-indented whole was
/// about 128 MB (each of its 500,000 values on a line indented 240
/// spaces) before the 64 KiB cap cut it. The indenter stops at the cap:
/// what it builds is bounded by the cap, not by the body's shape.
#[test]
fn indenting_stops_at_the_cap() {
    const CAP: usize = 64 * 1024;
    let depth = 120;
    let mut body = "[".repeat(depth);
    while body.len() < 1024 * 1024 {
        body.push_str("1,");
    }
    body.push('1');
    body.push_str(&"]".repeat(depth));
    assert!(serde_json::from_str::<serde::de::IgnoredAny>(&body).is_ok());
    let (text, cut) = indent_json(&body, CAP);
    assert!(cut);
    assert!(text.len() <= CAP, "{} bytes built", text.len());
    assert!(
        text.capacity() <= CAP + 1024,
        "{} bytes reserved",
        text.capacity()
    );
    assert!(text.starts_with("[\n  [\n    ["), "{}", &text[..40]);
    let (shown, cut) = body_text(
        &ShownBody::Json {
            text: body.as_str().into(),
            redacted: 0,
        },
        CAP,
    );
    assert!(cut && shown.len() <= CAP && shown == text);
    // A short document is indented whole, and not marked cut.
    assert_eq!(
        indent_json("[[1,2],{}]", CAP),
        ("[\n  [\n    1,\n    2\n  ],\n  {}\n]".to_owned(), false)
    );
    // The cut falls on a character boundary.
    let (text, cut) = indent_json("[\"ééééé\"]", 8);
    assert!(
        cut && text.len() <= 8 && text.is_char_boundary(text.len()),
        "{text:?}"
    );
}
