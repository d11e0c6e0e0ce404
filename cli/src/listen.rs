//! `webhooks listen <scheme>`: a local receiver on the library's own tower
//! layer (tower-webhooks' `WebhookLayer` on axum), printing each delivery as
//! verified or refused with the reason, and its body; optionally forwarding
//! each verified delivery, headers and body unchanged, to `--forward`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use clap::Args;
use tower_webhooks::{RawWebhook, WebhookLayer};
use webhooks_core::scheme::registry::{self, SchemeOptions};
use webhooks_core::{PublicUrl, Receiver, Rejection};

use crate::error::Failure;
use crate::output::{BAD, BOLD, DIM, OK, Out, paint};
use crate::secret::SecretArgs;

const EXAMPLES: &str = "\
Examples:
  webhooks listen github --secret-file gh.secret --port 4000
  webhooks listen stripe --port 3000 --forward http://localhost:8080/webhooks
  webhooks listen twilio --public-url https://abc.ngrok.app
  webhooks listen discord --secret <application public key>
  webhooks listen hmac --hmac-spec 'name=acme;header=X-Acme-Signature;prefix=sha256='

For Discord and SendGrid, --secret is the public key. Every path is served.
With --json, one JSON document per line: the address, then each delivery.";

/// `webhooks listen`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub(crate) struct ListenArgs {
    /// The signing scheme (see `webhooks schemes`; `hmac` with --hmac-spec
    /// for any other HMAC provider).
    scheme: String,
    #[command(flatten)]
    secret: SecretArgs,
    #[command(flatten)]
    hmac: crate::signed::HmacSpecArgs,
    /// The port (0: any free port).
    #[arg(long, short = 'p', default_value_t = 3000)]
    port: u16,
    /// The address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
    /// The public origin the provider calls, for the URL-signing schemes
    /// (default: http://BIND:PORT).
    #[arg(long, value_name = "URL")]
    public_url: Option<String>,
    /// The replay window, seconds (default: the scheme's).
    #[arg(long, value_name = "SECONDS")]
    tolerance: Option<u64>,
    /// Forward each verified delivery (headers and body unchanged) to this
    /// URL, and answer with its status.
    #[arg(long, value_name = "URL")]
    forward: Option<String>,
}

struct Shared {
    out: Out,
    forward: Option<(reqwest::Client, reqwest::Url)>,
}

pub(crate) async fn run(args: ListenArgs, out: &Out) -> Result<(), Failure> {
    let found = crate::signed::find_verifiable(&args.scheme)?;
    let mut options = args.hmac.options(found, SchemeOptions::new())?;
    let info = registry::describe(found.name, &options)?;
    let secrets = args.secret.all()?;
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(args.bind, args.port))
        .await
        .map_err(|e| {
            Failure::usage(format!("cannot listen on {}:{}: {e}", args.bind, args.port))
        })?;
    let addr = listener
        .local_addr()
        .map_err(|e| Failure::usage(format!("cannot read the bound address: {e}")))?;
    if info.signs_url {
        let base = args
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{addr}"));
        options = options.public_url(PublicUrl::base(base)?);
    }
    if let Some(seconds) = args.tolerance {
        options = options.tolerance(Duration::from_secs(seconds));
    }
    let verifier = registry::verifier(info.name, &secrets, &options)?;
    let forward = match &args.forward {
        Some(url) => {
            let url = reqwest::Url::parse(url)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https"))
                .ok_or_else(|| Failure::usage("--forward is not an http:// or https:// URL"))?;
            Some((crate::http_client::client(Duration::from_secs(30))?, url))
        }
        None => None,
    };
    let shared = Arc::new(Shared { out: *out, forward });
    let reject_out = *out;
    let receiver = Receiver::builder(verifier)
        .on_reject(move |rejection| {
            refused(&reject_out, rejection);
            rejection.to_response()
        })
        .build();
    let app = axum::Router::new()
        .fallback(delivered)
        .layer(WebhookLayer::from_receiver(receiver))
        .with_state(shared);
    if out.json {
        out.line(serde_json::json!({
            "listening": format!("http://{addr}"),
            "scheme": info.name,
            "hmac_spec": options.hmac_spec.as_ref().map(ToString::to_string),
        }));
    } else {
        out.line(format!(
            "listening on {} for {} deliveries {}",
            paint(BOLD, format!("http://{addr}")),
            info.name,
            paint(DIM, "(Ctrl-C to stop)")
        ));
        if let Some(spec) = &options.hmac_spec {
            out.line(paint(DIM, format!("  spec {spec}")));
        }
    }
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| Failure::usage(format!("the server stopped: {e}")))
}

fn refused(out: &Out, rejection: &Rejection) {
    let status = rejection.status().as_u16();
    let duplicate = matches!(rejection, Rejection::Duplicate);
    if out.json {
        out.line(serde_json::json!({
            "verified": duplicate,
            "outcome": rejection.kind(),
            "status": status,
            "reason": rejection.to_string(),
        }));
    } else if duplicate {
        out.line(format!(
            "{} duplicate delivery, answered {status}",
            paint(DIM, "=")
        ));
    } else {
        out.line(format!(
            "{} refused {status}: {}",
            paint(BAD, "✗"),
            rejection
        ));
    }
}

async fn delivered(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    raw: RawWebhook,
) -> (StatusCode, String) {
    let meta = &raw.meta;
    let forwarded = match &shared.forward {
        Some((client, url)) => Some(
            client
                .post(url.clone())
                .headers(headers)
                .body(raw.body.clone())
                .send()
                .await
                .map(|r| r.status().as_u16())
                .map_err(|e| e.without_url().to_string()),
        ),
        None => None,
    };
    let out = &shared.out;
    if out.json {
        let body: serde_json::Value = serde_json::from_slice(&raw.body).unwrap_or_else(|_| {
            serde_json::Value::String(String::from_utf8_lossy(&raw.body).into_owned())
        });
        out.line(serde_json::json!({
            "verified": true,
            "outcome": "verified",
            "id": meta.id,
            "event_type": meta.event_type,
            "timestamp": meta.timestamp,
            "matched_key": meta.matched_key.to_string(),
            "body": body,
            "forwarded": forwarded.as_ref().map(|f| match f {
                Ok(status) => serde_json::json!({"status": status}),
                Err(e) => serde_json::json!({"error": e}),
            }),
        }));
    } else {
        out.line(format!(
            "{} verified {}  {}",
            paint(OK, "✓"),
            meta.event_type.as_deref().unwrap_or(meta.scheme),
            paint(
                DIM,
                format!(
                    "id {} · {}",
                    meta.id.as_deref().unwrap_or("-"),
                    meta.matched_key
                )
            )
        ));
        out.line(indent(&pretty_body(&raw.body)));
        match &forwarded {
            Some(Ok(status)) => out.line(format!("  forwarded: {status}")),
            Some(Err(e)) => out.line(paint(BAD, format!("  forward failed: {e}"))),
            None => {}
        }
    }
    match forwarded {
        Some(Ok(status)) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
            String::new(),
        ),
        Some(Err(_)) => (StatusCode::BAD_GATEWAY, "forward failed".to_owned()),
        None => (StatusCode::NO_CONTENT, String::new()),
    }
}

/// The body, laid out when it is JSON (its keys in their order), cut
/// after 4 KiB.
fn pretty_body(body: &Bytes) -> String {
    let text = match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(_) => String::from_utf8_lossy(&crate::verify::pretty(&crate::verify::minify(body)))
            .into_owned(),
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    };
    if text.len() <= 4096 {
        return text;
    }
    let mut end = 4096;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], body.len())
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
