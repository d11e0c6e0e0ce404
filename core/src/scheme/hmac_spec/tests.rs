//! The spec's unit tests: every key, every error, the round trip, and the
//! registry's `hmac`.

use std::time::{Duration, SystemTime};

use ::hmac::{KeyInit, Mac};
use http::HeaderMap;

use super::*;
use crate::scheme::registry::{self, SchemeOptions};
use crate::testing::{SignTest, TestDelivery};
use crate::{MatchedKey, Verifier, VerifyError};

const T: u64 = 1_700_000_000;

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
}

fn parse(text: &str) -> GenericHmacSpec {
    text.parse()
        .unwrap_or_else(|e| panic!("{text:?} does not parse: {e}"))
}

fn error(text: &str) -> String {
    match text.parse::<GenericHmacSpec>() {
        Ok(spec) => panic!("{text:?} parsed: {spec}"),
        Err(e) => e.to_string(),
    }
}

fn url() -> PublicUrl {
    PublicUrl::exact("https://hooks.example.com/acme?x=1").unwrap()
}

/// Specs and the builders they stand for, covering every key.
fn pairs() -> Vec<(&'static str, GenericHmacBuilder)> {
    vec![
        (
            "name=acme;header=X-Acme-Signature;prefix=sha256=;encoding=hex;algorithm=sha256;\
             content={timestamp}.{body};timestamp-header=X-Acme-Timestamp;timestamp-unit=s;\
             tolerance=120;id-header=X-Acme-Id;event-type-header=X-Acme-Event",
            GenericHmac::builder("acme", "X-Acme-Signature")
                .prefix("sha256=")
                .encoding(SignatureEncoding::Hex)
                .algorithm(HmacAlgorithm::Sha256)
                .signed_content("{timestamp}.{body}")
                .unwrap()
                .timestamp_header("X-Acme-Timestamp", TimestampUnit::Seconds)
                .tolerance(Duration::from_secs(120))
                .id_header("X-Acme-Id")
                .event_type_header("X-Acme-Event"),
        ),
        (
            " name = globex ;\n header = x-globex-signature\n algorithm = SHA-512 ; \
             encoding = base64;timestamp-header=x-globex-time;timestamp_unit=ms;\
             CONTENT=\"{timestamp}\\n{url}\\n{header:x-globex-id}\\n{body}\";\n",
            GenericHmac::builder("globex", "x-globex-signature")
                .algorithm(HmacAlgorithm::Sha512)
                .encoding(SignatureEncoding::Base64)
                .timestamp_header("x-globex-time", TimestampUnit::Milliseconds)
                .signed_content("{timestamp}\n{url}\n{header:x-globex-id}\n{body}")
                .unwrap(),
        ),
        (
            "header=x-slackish-signature;algorithm=sha1;prefix=v0\\;=;content-prefix=v0:;\
             timestamp-header=x-slackish-timestamp;separator=:",
            GenericHmac::builder("hmac", "x-slackish-signature")
                .algorithm(HmacAlgorithm::Sha1)
                .prefix("v0;=")
                .content_prefix("v0:")
                .signed_timestamp("x-slackish-timestamp", ":"),
        ),
        (
            "name=initech;header=x-initech-signature;prefix=\"t=1, v1, \"",
            GenericHmac::builder("initech", "x-initech-signature").prefix("t=1, v1, "),
        ),
    ]
}

fn built(b: GenericHmacBuilder, secret: &str) -> GenericHmac {
    b.secret(secret).public_url(url()).build().unwrap()
}

#[test]
fn every_key_maps_onto_the_builder() {
    for (text, builder) in pairs() {
        let spec = parse(text);
        let from_spec = built(spec.builder().unwrap(), "s3cret");
        let by_hand = built(builder, "s3cret");
        // The whole configuration, as Debug shows it, is the same.
        assert_eq!(format!("{from_spec:?}"), format!("{by_hand:?}"), "{text}");
        // What the builder-built one signs, the spec-built one verifies.
        let target = "https://hooks.example.com/acme?x=1";
        let stamp = match text.contains("ms") {
            true => T * 1000,
            false => T,
        };
        let mut headers = by_hand.sign_headers_for(target, stamp, b"{}").unwrap();
        if let Some(id) = spec.id_header {
            headers.insert(
                HeaderName::from_bytes(id.as_bytes()).unwrap(),
                "d-1".parse().unwrap(),
            );
        }
        let verified = from_spec
            .verify_url(target, &headers, b"{}", at(T + 10))
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(verified.scheme, from_spec.scheme());
        assert!(
            from_spec
                .verify_url(target, &headers, b"{ }", at(T + 10))
                .is_err()
        );
    }
}

#[test]
fn accessors() {
    let specs: Vec<_> = pairs().into_iter().map(|(t, _)| parse(t)).collect();
    let [acme, globex, slackish, initech] = <[_; 4]>::try_from(specs).unwrap();
    assert_eq!(acme.name(), "acme");
    assert_eq!(acme.signature_header(), Some("X-Acme-Signature"));
    assert_eq!(acme.timestamp_header(), Some("X-Acme-Timestamp"));
    assert_eq!(acme.tolerance(), Some(Duration::from_secs(120)));
    assert!(acme.signs_timestamp() && acme.signs_body() && !acme.signs_url());
    assert!(globex.signs_url() && globex.signs_body());
    assert!(slackish.signs_timestamp() && slackish.signs_body());
    assert_eq!(slackish.name(), "hmac");
    assert!(!initech.signs_timestamp() && initech.signature_json_field().is_none());
    let json = parse("json-field=sig;content={json:ts}.{{{json:data}}}");
    assert_eq!(
        (json.signature_header(), json.signature_json_field()),
        (None, Some("sig"))
    );
    assert!(!json.signs_body() && !json.signs_url());
}

#[test]
fn json_fields_map_onto_the_builder() {
    let text =
        "name=json;json-field=signature;timestamp-json-field=ts;content={json:ts}.{json:data}";
    let spec = parse(text);
    let from_spec = built(spec.builder().unwrap(), "s3cret");
    let by_hand = built(
        GenericHmac::builder("json", "x-unused")
            .signature_json_field("signature")
            .timestamp_json_field("ts", TimestampUnit::Seconds)
            .signed_content("{json:ts}.{json:data}")
            .unwrap(),
        "s3cret",
    );
    let mut mac = <super::super::HmacSha256 as KeyInit>::new_from_slice(b"s3cret").unwrap();
    mac.update(format!("{T}.payload").as_bytes());
    let signature = super::super::encode_hex(&mac.finalize().into_bytes());
    let body = format!(r#"{{"ts":"{T}","data":"payload","signature":"{signature}"}}"#);
    let headers = HeaderMap::new();
    for v in [&from_spec, &by_hand] {
        assert!(v.verify(&headers, body.as_bytes(), at(T)).is_ok(), "{v:?}");
        let spoiled = body.replace("payload", "payloaD");
        assert_eq!(
            v.verify(&headers, spoiled.as_bytes(), at(T)),
            Err(VerifyError::NoMatchingSignature)
        );
    }
}

#[test]
fn display_round_trips() {
    let mut specs: Vec<&str> = pairs().iter().map(|(t, _)| *t).collect();
    specs.extend([
        "header=x;prefix=a\\\\b\\\"c\\td",
        "json-field=sig;content=\"{json:a}; {json:b} \"",
        "header=x;content={{literal}}{body};timestamp-json-field=ts;timestamp-unit=ms;tolerance=5s",
    ]);
    for text in specs {
        let spec = parse(text);
        let shown = spec.to_string();
        assert_eq!(parse(&shown), spec, "{text} -> {shown}");
        assert_eq!(parse(&shown).to_string(), shown);
    }
    assert_eq!(
        parse(" header = X-Sig ; algorithm=SHA1;prefix=\"a;b \";tolerance=9s;timestamp-header=t")
            .to_string(),
        "header=X-Sig;algorithm=sha1;prefix=\"a;b \";timestamp-header=t;tolerance=9"
    );
    assert_eq!(
        parse("content=\"{timestamp}\\n{body}\";header=s;timestamp-header=t").to_string(),
        "header=s;content={timestamp}\\n{body};timestamp-header=t"
    );
    assert_eq!(
        parse("header=s;prefix=a\\;b").to_string(),
        "header=s;prefix=a\\;b"
    );
}

#[test]
fn every_mistake_names_its_key() {
    let key = |k: &str, reason: &str| format!("hmac spec key `{k}` is invalid: {reason}");
    let spec = |reason: &str| format!("hmac spec is invalid: {reason}");
    let cases = [
        (
            "header=x;secret=whsec_abc",
            spec("unknown key; the keys are name, header"),
        ),
        ("header=x;header=y", key("header", "given twice")),
        ("header=x;Header=y", key("header", "given twice")),
        ("header", key("header", "no value (expected key=value)")),
        ("header=x;oops", spec("an entry is not key=value")),
        (
            "header=x;prefix=",
            key("prefix", "empty value (leave the key out)"),
        ),
        (
            "header=x;prefix=\"\"",
            key("prefix", "empty value (leave the key out)"),
        ),
        (
            "name=acme",
            spec("no signature location: give header=NAME (or json-field=FIELD)"),
        ),
        ("", spec("no signature location")),
        (
            "header=x;json-field=s",
            key("json-field", "excludes header"),
        ),
        ("header=bad name", key("header", "not a header name")),
        (
            "header=x;algorithm=md5",
            key("algorithm", "expected sha1, sha256 or sha512"),
        ),
        (
            "header=x;encoding=base32",
            key("encoding", "expected hex or base64"),
        ),
        (
            "header=x;content={nope}",
            key("content", "unknown placeholder"),
        ),
        (
            "header=x;prefix=\" v1=\"",
            key("prefix", "starts with whitespace"),
        ),
        (
            "header=x;content={body",
            key("content", "unclosed { in signed content"),
        ),
        (
            "header=x;content={body};content-prefix=v0:",
            key("content-prefix", "excludes content"),
        ),
        (
            "header=x;timestamp-header=t;timestamp-json-field=ts",
            key("timestamp-json-field", "excludes timestamp-header"),
        ),
        (
            "header=x;timestamp-header=bad name",
            key("timestamp-header", "not a header name"),
        ),
        (
            "header=x;timestamp-header=t;timestamp-unit=h",
            key("timestamp-unit", "expected s or ms"),
        ),
        (
            "header=x;timestamp-unit=s",
            key("timestamp-unit", "needs timestamp-header"),
        ),
        (
            "header=x;separator=.",
            key("separator", "needs timestamp-header"),
        ),
        (
            "header=x;timestamp-json-field=ts;separator=.",
            key("separator", "needs timestamp-header"),
        ),
        (
            "header=x;timestamp-header=t;separator=.;content={body}",
            key("separator", "excludes content"),
        ),
        (
            "header=x;timestamp-header=t;separator=.;timestamp-unit=ms",
            key("separator", "signs a timestamp in seconds"),
        ),
        (
            "header=x;timestamp-header=t;tolerance=5m",
            key("tolerance", "expected whole seconds"),
        ),
        (
            "header=x;tolerance=5",
            key("tolerance", "needs timestamp-header"),
        ),
        (
            "header=x;id-header=a b",
            key("id-header", "not a header name"),
        ),
        (
            "header=x;event-type-header=a:b",
            key("event-type-header", "not a header name"),
        ),
        (
            "header=x;content={timestamp}.{body}",
            key("content", "{timestamp} needs a timestamp source"),
        ),
        (
            "json-field=sig",
            key(
                "json-field",
                "a signature inside the body cannot sign {body}",
            ),
        ),
        (
            "json-field=sig;content=\"{json:a}{body}\"",
            key("json-field", "a signature inside the body"),
        ),
        (
            "header=x;prefix=\"abc",
            key("prefix", "unterminated quoted value"),
        ),
        (
            "header=x;prefix=\"abc\" d",
            key("prefix", "text after the closing quote"),
        ),
        ("header=x;prefix=a\\x", key("prefix", "unknown escape")),
        ("header=x;prefix=a\\", key("prefix", "unknown escape")),
    ];
    for (text, want) in cases {
        let got = error(text);
        assert!(got.starts_with(&want), "{text:?}: {got:?}, want {want:?}");
    }
    // An unknown key (perhaps a secret typed in the wrong place) is not repeated.
    assert!(!error("header=x;whsec_abc=1").contains("whsec"));
}

#[test]
fn no_input_panics() {
    let text = "name=acme;header=X-Acme-Signature;prefix=\"sha256=\\;\";content={timestamp}.\
                {header:x-a}{{;timestamp-header=t\\";
    let mut inputs: Vec<String> = text
        .char_indices()
        .map(|(i, _)| text[..i].to_owned())
        .collect();
    inputs.extend(text.char_indices().map(|(i, _)| text[i..].to_owned()));
    inputs.extend(
        [
            "=",
            ";;;",
            "\"",
            "=\"",
            "\\",
            "a=\\",
            "\n\n",
            "é=é",
            "header=é",
        ]
        .map(String::from),
    );
    for input in inputs {
        if let Ok(spec) = input.parse::<GenericHmacSpec>() {
            assert_eq!(parse(&spec.to_string()), spec, "{input:?}");
        }
    }
}

fn options(spec: &str) -> SchemeOptions {
    SchemeOptions::new().hmac_spec(parse(spec))
}

#[test]
fn the_registry_builds_hmac_from_a_spec() {
    let spec = "name=acme;header=X-Acme-Signature;prefix=sha256=;content={timestamp}.{body};\
                timestamp-header=X-Acme-Timestamp;id-header=X-Acme-Id;event-type-header=X-Acme-Event";
    let options = options(spec);
    let signer = registry::signer("hmac", "second", &options).unwrap();
    assert_eq!(signer.info().name, "hmac");
    let verifier = registry::verifier("HMAC", &["first", "second"], &options).unwrap();
    assert_eq!(verifier.scheme(), "acme");
    let delivery = TestDelivery::new(r#"{"a":1}"#)
        .id("d-7")
        .event_type("order.paid");
    let headers = signer.sign_test(&delivery).unwrap();
    assert_eq!(headers["x-acme-id"], "d-7");
    let verified = verifier
        .verify(&headers, delivery.body(), SystemTime::now())
        .unwrap();
    assert_eq!(verified.matched_key, MatchedKey::Secret(1));
    assert_eq!(verified.event_type.as_deref(), Some("order.paid"));
    assert!(
        verifier
            .verify(&headers, b"{\"a\":2}", SystemTime::now())
            .is_err()
    );
    // A stale delivery: refused within the default window, accepted in a wider one.
    let stale = TestDelivery::new("{}").timestamp(1_000_000_000);
    let headers = signer.sign_test(&stale).unwrap();
    assert_eq!(
        verifier.verify(&headers, b"{}", SystemTime::now()),
        Err(VerifyError::TimestampTooOld)
    );
    let wide = options
        .clone()
        .tolerance(Duration::from_secs(u64::from(u32::MAX)));
    let verifier = registry::verifier("hmac", &["second"], &wide).unwrap();
    assert!(verifier.verify(&headers, b"{}", SystemTime::now()).is_ok());

    let info = registry::describe("hmac", &options).unwrap();
    assert_eq!(info.signature_header, Some("x-acme-signature"));
    assert!(info.signs_timestamp && info.signs_body && !info.signs_url);
    assert_eq!(
        info.default_tolerance,
        Some(crate::scheme::DEFAULT_TOLERANCE)
    );
    assert_eq!(
        registry::describe("hmac", &SchemeOptions::new()).unwrap(),
        registry::HMAC
    );
    assert_eq!(
        registry::describe("stripe", &options).unwrap().name,
        "stripe"
    );
    assert!(
        registry::find("nope")
            .unwrap_err()
            .to_string()
            .contains("hmac, sns")
    );
}

#[test]
fn the_registry_needs_a_spec_and_a_url_for_url() {
    let err = registry::verifier("hmac", &["k"], &SchemeOptions::new())
        .err()
        .unwrap();
    assert!(err.to_string().contains("needs a spec"), "{err}");
    let err = registry::signer("hmac", "k", &SchemeOptions::new())
        .err()
        .unwrap();
    assert!(err.to_string().contains("needs a spec"), "{err}");
    // A spec without a timestamp takes a tolerance option without complaint.
    let plain = options("header=x-sig").tolerance(Duration::from_secs(9));
    assert!(registry::verifier("hmac", &["k"], &plain).is_ok());
    // {url}: the verifier needs the public URL, the signer signs the delivery's.
    let url_spec = options("header=x-sig;content={url}{body}");
    let err = registry::verifier("hmac", &["k"], &url_spec).err().unwrap();
    assert!(err.to_string().contains("public URL"), "{err}");
    let signer = registry::signer("hmac", "k", &url_spec).unwrap();
    let delivery = TestDelivery::new("{}").url("https://hooks.example.com/acme?x=1");
    let headers = signer.sign_test(&delivery).unwrap();
    let verifier = registry::verifier("hmac", &["k"], &url_spec.clone().public_url(url())).unwrap();
    assert!(verifier.verify(&headers, b"{}", SystemTime::now()).is_ok());
    assert!(registry::describe("hmac", &url_spec).unwrap().signs_url);
}
