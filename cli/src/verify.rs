//! `webhooks verify <scheme>`: explain, check by check, why a captured
//! request verifies or not. Every verdict is webhooks-core's own verifier's
//! (built by `scheme::registry::verifier`); the checks only call it again
//! with one thing changed (one secret, a wider tolerance, another URL, a
//! re-serialised body) to say which part is wrong.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use webhooks_core::scheme::registry::{self, SchemeInfo, SchemeOptions};
use webhooks_core::{MatchedKey, PublicUrl, Verified, Verifier, VerifyError};

use crate::capture::{self, Captured};
use crate::error::Failure;
use crate::output::{BAD, BOLD, DIM, HINT, OK, Out, paint};
use crate::secret::SecretArgs;

const EXAMPLES: &str = "\
Examples:
  webhooks verify stripe captured.http --secret whsec_...
  webhooks verify stripe captured.http --secret whsec_new --secret whsec_old --now 1700000000
  webhooks verify twilio captured.http --url https://hooks.example.com/sms
  webhooks verify github --headers headers.txt --body body.json --secret-file gh.secret
  webhooks verify hmac captured.http --hmac-spec-file acme.spec --secret-file acme.secret

A request file is the raw HTTP/1.1 request: the request line, the headers, a
blank line, the body (`webhooks sign --http` writes one).
Exit 0 only if the request verifies as captured; 1 if it does not.";

/// `webhooks verify`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub(crate) struct VerifyArgs {
    /// The signing scheme (see `webhooks schemes`; `hmac` with --hmac-spec
    /// for any other HMAC provider).
    scheme: String,
    #[command(flatten)]
    hmac: crate::signed::HmacSpecArgs,
    /// The raw HTTP/1.1 request file.
    #[arg(required_unless_present = "headers", conflicts_with = "headers")]
    request: Option<PathBuf>,
    /// A file of `Name: value` lines (instead of a request file).
    #[arg(long, requires = "body", value_name = "PATH")]
    headers: Option<PathBuf>,
    /// The body file, with --headers.
    #[arg(long, requires = "headers", value_name = "PATH")]
    body: Option<PathBuf>,
    #[command(flatten)]
    secret: SecretArgs,
    /// The URL the provider called (URL-signing schemes; default
    /// https://HOST plus the request target).
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// The time to check the timestamp against, Unix seconds (default: now).
    #[arg(long, value_name = "UNIX")]
    now: Option<u64>,
    /// The replay window, seconds (default: the scheme's).
    #[arg(long, value_name = "SECONDS")]
    tolerance: Option<u64>,
}

/// A window wide enough that any timestamp passes: to learn the signed
/// time, and whether the rest verifies, apart from freshness.
const WIDE: Duration = Duration::from_secs(20 * 365 * 86_400);

/// One check's result.
struct Check {
    name: &'static str,
    ok: Option<bool>,
    detail: String,
}

impl Check {
    fn new(name: &'static str, ok: Option<bool>, detail: impl Into<String>) -> Self {
        Self {
            name,
            ok,
            detail: detail.into(),
        }
    }
}

struct Context<'a> {
    info: &'a SchemeInfo,
    /// The options every verifier starts from (the `hmac` spec).
    base: &'a SchemeOptions,
    secrets: &'a [String],
    captured: &'a Captured,
    url: Option<String>,
    now: SystemTime,
    tolerance: Option<Duration>,
}

impl Context<'_> {
    fn options(
        &self,
        url: Option<&str>,
        tolerance: Option<Duration>,
    ) -> Result<SchemeOptions, Failure> {
        let mut options = self.base.clone();
        if let Some(url) = url {
            options = options.public_url(PublicUrl::exact(url)?);
        }
        if let Some(t) = tolerance.or(self.tolerance) {
            options = options.tolerance(t);
        }
        Ok(options)
    }

    fn verifier(
        &self,
        secrets: &[String],
        url: Option<&str>,
        tolerance: Option<Duration>,
    ) -> Result<Box<dyn Verifier>, Failure> {
        Ok(registry::verifier(
            self.info.name,
            secrets,
            &self.options(url, tolerance)?,
        )?)
    }

    /// The verifier's answer for `body` at `url`, within `tolerance`.
    fn verify(
        &self,
        url: Option<&str>,
        tolerance: Option<Duration>,
        body: &[u8],
    ) -> Result<Result<Verified, VerifyError>, Failure> {
        let verifier = self.verifier(self.secrets, url, tolerance)?;
        Ok(verifier.verify(&self.captured.headers, body, self.now))
    }
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

pub(crate) fn run(args: VerifyArgs, out: &Out) -> Result<(), Failure> {
    let found = crate::signed::find_verifiable(&args.scheme)?;
    let base = args.hmac.options(found, SchemeOptions::new())?;
    let info = &registry::describe(found.name, &base)?;
    let secrets = args.secret.all()?;
    let captured = match (&args.request, &args.headers, &args.body) {
        (Some(path), _, _) => capture::from_request_file(path)?,
        (None, Some(headers), Some(body)) => capture::from_parts(headers, body)?,
        _ => {
            return Err(Failure::usage(
                "give a request file, or --headers and --body",
            ));
        }
    };
    let now = match args.now {
        Some(unix) => UNIX_EPOCH + Duration::from_secs(unix),
        None => SystemTime::now(),
    };
    let mut checks = Vec::new();
    let mut hints = Vec::new();
    if let Some(spec) = &base.hmac_spec {
        checks.push(Check::new("spec", None, spec.to_string()));
    }

    // 1. Each secret on its own: the builder's own error for a bad format.
    let mut bad_format = 0;
    for (i, secret) in secrets.iter().enumerate() {
        if let Err(e) = registry::verifier(
            info.name,
            std::slice::from_ref(secret),
            &probe_options(info, &base)?,
        ) {
            bad_format += 1;
            checks.push(Check::new(
                "secret format",
                Some(false),
                format!("secret #{}: {e}", i + 1),
            ));
        }
    }
    if bad_format == 0 {
        checks.push(Check::new(
            "secret format",
            Some(true),
            format!(
                "{} secret{} accepted by the {} verifier",
                secrets.len(),
                plural(secrets.len()),
                info.name
            ),
        ));
    } else {
        report(out, info, &captured, &checks, &hints, None);
        return Err(Failure {
            reported: true,
            ..Failure::usage("a secret is in the wrong format")
        });
    }

    // The URL the provider called, for URL-signing schemes.
    let url = match (info.signs_url, &args.url) {
        (false, _) => None,
        (true, Some(url)) => Some(url.clone()),
        (true, None) => {
            let host = captured
                .headers
                .get(http::header::HOST)
                .and_then(|h| h.to_str().ok());
            match (host, &captured.target) {
                (Some(host), Some(target)) => Some(format!("https://{host}{target}")),
                _ => {
                    return Err(Failure::usage(format!(
                        "{} signs the URL it called: give --url (the capture has no Host and request line to rebuild it)",
                        info.name
                    )));
                }
            }
        }
    };
    if let Some(url) = &url {
        checks.push(Check::new("url", None, format!("checking against {url}")));
    }
    let context = Context {
        info,
        base: &base,
        secrets: &secrets,
        captured: &captured,
        url,
        now,
        tolerance: args.tolerance.map(Duration::from_secs),
    };
    let tolerance = context
        .tolerance
        .or(info.default_tolerance)
        .unwrap_or(Duration::ZERO);

    // 2. Headers present and well formed (freshness aside).
    let wide = context.verifier(&secrets, context.url.as_deref(), Some(WIDE))?;
    let head = wide.check_headers(&captured.headers, now);
    let wide_result = context.verify(context.url.as_deref(), Some(WIDE), &captured.body)?;
    match (&head, &wide_result) {
        (Err(e), _)
        | (
            Ok(()),
            Err(
                e @ (VerifyError::MissingHeader(_)
                | VerifyError::MalformedHeader { .. }
                | VerifyError::MissingField(_)
                | VerifyError::MalformedField { .. }),
            ),
        ) => {
            checks.push(Check::new(
                "headers",
                Some(false),
                format!("{e} ({})", e.status()),
            ));
        }
        _ => checks.push(Check::new(
            "headers",
            Some(true),
            match info.signature_header {
                Some(name) => format!("{name} present and well formed"),
                None => "signature fields present and well formed".to_owned(),
            },
        )),
    }
    if captured.trailing > 0 {
        hints.push(format!(
            "{} byte{} after Content-Length were not read as the body",
            captured.trailing,
            plural(captured.trailing)
        ));
    }

    // 3. The timestamp against the tolerance.
    if info.signs_timestamp {
        match &wide_result {
            Ok(verified) => match verified.timestamp {
                Some(ts) => {
                    let skew = i128::from(unix(now)) - i128::from(ts);
                    let within = skew.unsigned_abs() <= u128::from(tolerance.as_secs());
                    let days = match skew.unsigned_abs() / 86_400 {
                        0 => String::new(),
                        d => format!(", {d} days"),
                    };
                    let when = match skew {
                        0 => "signed now".to_owned(),
                        s if s > 0 => format!("signed {s} s before now{days}"),
                        s => format!("signed {} s after now{days}", -s),
                    };
                    checks.push(Check::new(
                        "timestamp",
                        Some(within),
                        format!("{when} ({}); tolerance ±{} s", ts, tolerance.as_secs()),
                    ));
                }
                None => checks.push(Check::new(
                    "timestamp",
                    None,
                    "not reported by the verifier",
                )),
            },
            Err(VerifyError::NoMatchingSignature) => checks.push(Check::new(
                "timestamp",
                None,
                "unchecked: the signature does not verify, so the signed time is unknown",
            )),
            Err(_) => checks.push(Check::new("timestamp", None, "unchecked")),
        }
    }

    // 4. The signature, and which secret matched.
    match &wide_result {
        Ok(verified) => {
            let which = match &verified.matched_key {
                MatchedKey::Secret(i) => format!("matches secret #{} of {}", i + 1, secrets.len()),
                MatchedKey::PublicKey(i) => {
                    format!("matches public key #{} of {}", i + 1, secrets.len())
                }
                other => format!("matches {other}"),
            };
            checks.push(Check::new("signature", Some(true), which));
        }
        Err(VerifyError::NoMatchingSignature) => {
            checks.push(Check::new(
                "signature",
                Some(false),
                match secrets.len() {
                    1 => "does not match the secret".to_owned(),
                    n => format!("matches none of the {n} secrets"),
                },
            ));
            diagnose(&context, &mut checks, &mut hints)?;
        }
        Err(e) => checks.push(Check::new("signature", None, format!("unchecked: {e}"))),
    }

    // The verdict: the library's verifier on the request as captured.
    let verdict = context.verify(context.url.as_deref(), None, &captured.body)?;
    report(out, info, &captured, &checks, &hints, Some(&verdict));
    match verdict {
        Ok(_) => Ok(()),
        Err(e) => Err(Failure::check_reported(e.to_string())),
    }
}

/// Options that let a URL-signing scheme be built, to check a secret alone.
fn probe_options(info: &SchemeInfo, base: &SchemeOptions) -> Result<SchemeOptions, Failure> {
    let mut options = base.clone();
    if info.signs_url {
        options = options.public_url(PublicUrl::exact("https://example.com/")?);
    }
    Ok(options)
}

/// The signature did not match: does it for another URL, or a body as it
/// was before a framework or proxy re-serialised it?
fn diagnose(
    context: &Context<'_>,
    checks: &mut Vec<Check>,
    hints: &mut Vec<String>,
) -> Result<(), Failure> {
    if let Some(url) = &context.url {
        let mut found = false;
        for (variant, change) in url_variants(url) {
            if context
                .verify(Some(&variant), Some(WIDE), &context.captured.body)?
                .is_ok()
            {
                checks.push(Check::new(
                    "url",
                    Some(false),
                    format!("the signature is for {variant} ({change}), not {url}"),
                ));
                hints.push(format!(
                    "set the verifier's PublicUrl so that it rebuilds {variant}"
                ));
                found = true;
                break;
            }
        }
        if !found {
            checks.push(Check::new("url", None, "no common variant of the URL (http/https, port, trailing slash, query order) matches either"));
        }
    }
    let mut found = false;
    for (variant, change) in body_variants(&context.captured.body) {
        if context
            .verify(context.url.as_deref(), Some(WIDE), &variant)?
            .is_ok()
        {
            checks.push(Check::new(
                "body",
                Some(false),
                format!("the signature matches the body {change}: your framework or proxy changed the body"),
            ));
            hints
                .push("verify the raw body bytes, before any parsing or re-serialising".to_owned());
            found = true;
            break;
        }
    }
    if !found && context.info.signs_body {
        checks.push(Check::new("body", None, "no common re-serialisation (minified/pretty JSON, CRLF/LF, trailing newline) matches either: a wrong secret, or another body"));
    }
    Ok(())
}

/// Common variants of `url` and what differs in each.
fn url_variants(url: &str) -> Vec<(String, String)> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Vec::new();
    };
    let (authority, path_query) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let (path, query) = match path_query.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path_query, None),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()) => (h, Some(p)),
        _ => (authority, None),
    };
    let other_scheme = if scheme == "https" { "http" } else { "https" };
    let mut out: Vec<(String, String)> = Vec::new();
    for (s, s_change) in [
        (scheme, None),
        (
            other_scheme,
            Some(format!("{other_scheme} instead of {scheme}")),
        ),
    ] {
        let default_port = if s == "https" { "443" } else { "80" };
        let ports: Vec<(Option<&str>, Option<String>)> = match port {
            Some(p) => vec![
                (Some(p), None),
                (None, Some(format!("without the port :{p}"))),
            ],
            None => vec![
                (None, None),
                (
                    Some(default_port),
                    Some(format!("with the port :{default_port}")),
                ),
            ],
        };
        for (p, p_change) in ports {
            let toggled = match path.strip_suffix('/') {
                Some(stripped) if !stripped.is_empty() => {
                    (stripped.to_owned(), "without the trailing slash")
                }
                _ => (format!("{}/", path), "with a trailing slash"),
            };
            for (pa, pa_change) in [
                (path.to_owned(), None),
                (toggled.0, Some(toggled.1.to_owned())),
            ] {
                let mut queries: Vec<(Option<String>, Option<String>)> =
                    vec![(query.map(str::to_owned), None)];
                if let Some(q) = query {
                    let mut pairs: Vec<&str> = q.split('&').collect();
                    pairs.sort_unstable();
                    let sorted = pairs.join("&");
                    if sorted != q {
                        queries.push((Some(sorted), Some("with the query sorted".to_owned())));
                    }
                    pairs.reverse();
                    let reversed = pairs.join("&");
                    if reversed != q {
                        queries.push((
                            Some(reversed),
                            Some("with the query in another order".to_owned()),
                        ));
                    }
                    queries.push((None, Some("without the query".to_owned())));
                }
                for (q, q_change) in queries {
                    let candidate = format!(
                        "{s}://{host}{}{pa}{}",
                        p.map(|p| format!(":{p}")).unwrap_or_default(),
                        q.map(|q| format!("?{q}")).unwrap_or_default()
                    );
                    let changes: Vec<String> = [
                        s_change.clone(),
                        p_change.clone(),
                        pa_change.clone(),
                        q_change,
                    ]
                    .into_iter()
                    .flatten()
                    .collect();
                    if changes.is_empty()
                        || candidate == url
                        || out.iter().any(|(c, _)| *c == candidate)
                    {
                        continue;
                    }
                    out.push((candidate, changes.join(", ")));
                }
            }
        }
    }
    // Fewest changes first.
    out.sort_by_key(|(_, change)| change.matches(", ").count());
    out
}

/// Common re-serialisations of `body` and what each is.
fn body_variants(body: &[u8]) -> Vec<(Vec<u8>, &'static str)> {
    // The smallest changes first: line endings, a final newline, then JSON layout.
    let mut out: Vec<(Vec<u8>, &'static str)> = Vec::new();
    let text = body.to_vec();
    if text.windows(2).any(|w| w == b"\r\n") {
        out.push((
            replace(&text, b"\r\n", b"\n"),
            "with LF line endings instead of CRLF",
        ));
    } else if text.contains(&b'\n') {
        out.push((
            replace(&text, b"\n", b"\r\n"),
            "with CRLF line endings instead of LF",
        ));
    }
    if let Some(stripped) = text
        .strip_suffix(b"\r\n")
        .or_else(|| text.strip_suffix(b"\n"))
    {
        out.push((stripped.to_vec(), "without its final newline"));
    } else {
        let mut with = text.clone();
        with.push(b'\n');
        out.push((with, "with a final newline"));
    }
    if serde_json::from_slice::<serde_json::Value>(body).is_ok() {
        // Token by token, so that the keys keep their order.
        let min = minify(body);
        let pretty = pretty(&min);
        out.push((min, "minified (JSON re-serialised compactly)"));
        out.push((pretty.clone(), "pretty-printed (2-space indent)"));
        let mut with_newline = pretty;
        with_newline.push(b'\n');
        out.push((with_newline, "pretty-printed with a final newline"));
    }
    out.retain(|(v, _)| v.as_slice() != body);
    out
}

/// JSON without the whitespace between tokens.
pub(crate) fn minify(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for &c in json {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if !c.is_ascii_whitespace() {
            in_string = c == b'"';
            out.push(c);
        }
    }
    out
}

/// Minified JSON laid out as `JSON.stringify(v, null, 2)` and serde_json's
/// pretty printer do.
pub(crate) fn pretty(min: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(min.len() * 2);
    let mut depth = 0usize;
    let (mut in_string, mut escaped) = (false, false);
    let newline = |out: &mut Vec<u8>, depth: usize| {
        out.push(b'\n');
        out.extend(std::iter::repeat_n(b' ', depth * 2));
    };
    let mut i = 0;
    while i < min.len() {
        let c = min[i];
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else {
            match c {
                b'"' => {
                    in_string = true;
                    out.push(c);
                }
                b'{' | b'[' if matches!(min.get(i + 1), Some(b'}' | b']')) => {
                    out.extend_from_slice(&min[i..i + 2]);
                    i += 1;
                }
                b'{' | b'[' => {
                    out.push(c);
                    depth += 1;
                    newline(&mut out, depth);
                }
                b'}' | b']' => {
                    depth = depth.saturating_sub(1);
                    newline(&mut out, depth);
                    out.push(c);
                }
                b',' => {
                    out.push(c);
                    newline(&mut out, depth);
                }
                b':' => out.extend_from_slice(b": "),
                _ => out.push(c),
            }
        }
        i += 1;
    }
    out
}

fn replace(text: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn report(
    out: &Out,
    info: &SchemeInfo,
    captured: &Captured,
    checks: &[Check],
    hints: &[String],
    verdict: Option<&Result<Verified, VerifyError>>,
) {
    if out.json {
        let checks: Vec<_> = checks
            .iter()
            .map(|c| serde_json::json!({"check": c.name, "ok": c.ok, "detail": c.detail}))
            .collect();
        let verdict = verdict.map(|v| match v {
            Ok(verified) => serde_json::json!({
                "ok": true,
                "status": 200,
                "id": verified.id,
                "event_type": verified.event_type,
                "timestamp": verified.timestamp,
                "matched_key": verified.matched_key.to_string(),
            }),
            Err(e) => serde_json::json!({
                "ok": false,
                "status": e.status().as_u16(),
                "kind": e.kind(),
                "reason": e.to_string(),
            }),
        });
        out.json(&serde_json::json!({
            "scheme": info.name,
            "target": captured.target,
            "body_bytes": captured.body.len(),
            "checks": checks,
            "hints": hints,
            "verdict": verdict,
        }));
        return;
    }
    out.line(format!(
        "{} {}  {}",
        paint(BOLD, "verify"),
        info.name,
        paint(
            DIM,
            format!(
                "{}{} headers, {} body bytes",
                captured
                    .target
                    .as_deref()
                    .map(|t| format!("POST {t}, "))
                    .unwrap_or_default(),
                captured.headers.len(),
                captured.body.len()
            )
        )
    ));
    for check in checks {
        let mark = match check.ok {
            Some(true) => paint(OK, "✓"),
            Some(false) => paint(BAD, "✗"),
            None => paint(DIM, "·"),
        };
        out.line(format!("  {mark} {:<15}{}", check.name, check.detail));
    }
    for hint in hints {
        out.line(format!("  {} {hint}", paint(HINT, "hint:")));
    }
    match verdict {
        Some(Ok(_)) => out.line(format!("{} verifies", paint(OK, "verdict:"))),
        Some(Err(e)) => out.line(format!(
            "{} refused with {}: {e}",
            paint(BAD, "verdict:"),
            e.status().as_u16()
        )),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_variants_cover_the_usual_suspects() {
        let variants = url_variants("http://hooks.example.com/sms?b=2&a=1");
        let urls: Vec<&str> = variants.iter().map(|(u, _)| u.as_str()).collect();
        assert!(urls.contains(&"https://hooks.example.com/sms?b=2&a=1"));
        assert!(urls.contains(&"http://hooks.example.com/sms/?b=2&a=1"));
        assert!(urls.contains(&"http://hooks.example.com:80/sms?b=2&a=1"));
        assert!(urls.contains(&"http://hooks.example.com/sms?a=1&b=2"));
        assert!(!urls.contains(&"http://hooks.example.com/sms?b=2&a=1"));
        let variants = url_variants("https://h.example:8443/x/");
        let urls: Vec<&str> = variants.iter().map(|(u, _)| u.as_str()).collect();
        assert!(urls.contains(&"https://h.example/x/"));
        assert!(urls.contains(&"https://h.example:8443/x"));
    }

    #[test]
    fn body_variants_undo_common_changes() {
        let variants = body_variants(b"{\n  \"a\": 1\n}\n");
        let texts: Vec<&[u8]> = variants.iter().map(|(b, _)| b.as_slice()).collect();
        assert!(texts.contains(&&b"{\"a\":1}"[..]));
        assert!(texts.contains(&&b"{\n  \"a\": 1\n}"[..]));
        assert!(texts.contains(&&b"{\r\n  \"a\": 1\r\n}\r\n"[..]));
        let json = br#"{"z":[1,{"b":"x\" ,y","a":[]}],"a":{}}"#;
        assert_eq!(minify(&pretty(json)), json);
        let pretty = String::from_utf8(pretty(br#"{"z":[1,{"b":"x","a":[]}],"a":{}}"#)).unwrap();
        assert_eq!(
            pretty,
            "{\n  \"z\": [\n    1,\n    {\n      \"b\": \"x\",\n      \"a\": []\n    }\n  ],\n  \"a\": {}\n}"
        );
    }
}
