//! `webhooks sign <scheme>`: the signed headers for a body, a ready `curl`
//! command (`--curl`), or the raw HTTP/1.1 request (`--http`, what
//! `webhooks verify` reads).

use clap::Args;

use crate::error::Failure;
use crate::output::{DIM, Out, paint};
use crate::signed::{SignedRequest, Signing, SigningArgs};

const EXAMPLES: &str = "\
Examples:
  webhooks sign stripe --event invoice.paid
  webhooks sign github --body-file push.json --event push --curl --url http://localhost:3000/gh
  echo '{\"type\":\"ping\"}' | webhooks sign standard-webhooks --body-file - --json
  webhooks sign twilio --url https://hooks.example.com/sms --http > captured.http
  webhooks sign hmac --hmac-spec 'header=X-Acme-Signature;prefix=sha256=' --body '{\"a\":1}'";

/// `webhooks sign`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub(crate) struct SignArgs {
    #[command(flatten)]
    signing: SigningArgs,
    /// The URL the request goes to (signed by the URL-signing schemes; used
    /// by --curl and --http).
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// Print a curl command that sends the signed request.
    #[arg(long, conflicts_with = "http")]
    curl: bool,
    /// Print the raw HTTP/1.1 request.
    #[arg(long)]
    http: bool,
}

const DEFAULT_URL: &str = "http://localhost:3000/webhooks";

pub(crate) fn run(args: SignArgs, out: &Out) -> Result<(), Failure> {
    let signing = Signing::new(&args.signing, args.url.as_deref())?;
    let request = signing.sign(None, 0)?;
    let url = args.url.as_deref().unwrap_or(DEFAULT_URL);
    if out.json {
        let headers: serde_json::Map<String, serde_json::Value> = request
            .headers
            .iter()
            .map(|(k, v)| {
                let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
                (k.as_str().to_owned(), serde_json::Value::String(v))
            })
            .collect();
        out.json(&serde_json::json!({
            "scheme": signing.info().name,
            "delivery_id": request.id,
            "timestamp": request.timestamp,
            "url": url,
            "signed_url": request.signed_url,
            "headers": headers,
            "body": String::from_utf8_lossy(&request.body),
            "public_key": signing.public_key(),
            "hmac_spec": signing.hmac_spec,
            "curl": curl(url, &request),
        }));
        return Ok(());
    }
    if args.curl {
        out.line(curl(url, &request));
    } else if args.http {
        out.raw(&raw_http(url, &request)?);
    } else {
        for (name, value) in &request.headers {
            out.line(format!(
                "{name}: {}",
                String::from_utf8_lossy(value.as_bytes())
            ));
        }
    }
    if let Some(key) = signing.public_key() {
        let mut stderr = anstream::stderr().lock();
        let _ = std::io::Write::write_fmt(
            &mut stderr,
            format_args!(
                "{}\n",
                paint(DIM, format!("verify with the public key {key}"))
            ),
        );
    }
    Ok(())
}

/// `text` in single quotes for a POSIX shell.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

fn curl(url: &str, request: &SignedRequest) -> String {
    let mut command = format!("curl -sS -X POST {}", quote(url));
    for (name, value) in &request.headers {
        let header = format!("{name}: {}", String::from_utf8_lossy(value.as_bytes()));
        command.push_str(&format!(" \\\n  -H {}", quote(&header)));
    }
    command.push_str(&format!(
        " \\\n  --data-binary {}",
        quote(&String::from_utf8_lossy(&request.body))
    ));
    command
}

fn raw_http(url: &str, request: &SignedRequest) -> Result<String, Failure> {
    let parsed = reqwest::Url::parse(url).map_err(|_| Failure::usage("--url is not a URL"))?;
    let target = match parsed.query() {
        Some(query) => format!("{}?{query}", parsed.path()),
        None => parsed.path().to_owned(),
    };
    let host = match parsed.port() {
        Some(port) => format!("{}:{port}", parsed.host_str().unwrap_or_default()),
        None => parsed.host_str().unwrap_or_default().to_owned(),
    };
    let mut text = format!("POST {target} HTTP/1.1\r\nhost: {host}\r\n");
    for (name, value) in &request.headers {
        text.push_str(&format!(
            "{name}: {}\r\n",
            String::from_utf8_lossy(value.as_bytes())
        ));
    }
    text.push_str(&format!("content-length: {}\r\n\r\n", request.body.len()));
    text.push_str(&String::from_utf8_lossy(&request.body));
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quoting() {
        assert_eq!(quote("it's"), r"'it'\''s'");
    }
}
