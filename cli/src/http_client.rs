//! The HTTP client: reqwest on rustls (ring, installed as the process's
//! provider), HTTP/1.1, keep-alive, no redirects followed (a webhook
//! sender does not follow them either), no proxy from the environment.

use std::time::{Duration, Instant};

use crate::error::Failure;
use crate::signed::SignedRequest;

/// What the receiver answered.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    /// The status.
    pub(crate) status: u16,
    /// The response body (the receiver's reason on a refusal).
    pub(crate) body: String,
    /// From sending to the end of the response body.
    pub(crate) latency: Duration,
}

/// A client for `send`.
pub(crate) fn client(timeout: Duration) -> Result<reqwest::Client, Failure> {
    // Another provider may already be installed: then it is used.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .tls_backend_rustls()
        .http1_only()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .pool_max_idle_per_host(1024)
        .build()
        .map_err(|e| Failure::usage(format!("cannot build the HTTP client: {}", e.without_url())))
}

/// POSTs `request` to `url`.
pub(crate) async fn post(
    client: &reqwest::Client,
    url: &reqwest::Url,
    request: &SignedRequest,
) -> Result<Answer, String> {
    let started = Instant::now();
    let response = client
        .post(url.clone())
        .headers(request.headers.clone())
        .body(request.body.clone())
        .send()
        .await
        .map_err(|e| describe(&e))?;
    let status = response.status().as_u16();
    let body = response.bytes().await.map_err(|e| describe(&e))?;
    let latency = started.elapsed();
    let mut body = String::from_utf8_lossy(&body).into_owned();
    if body.len() > 1000 {
        let mut end = 1000;
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        body.truncate(end);
        body.push('…');
    }
    Ok(Answer {
        status,
        body,
        latency,
    })
}

/// A one-line reason, without the URL (it may carry credentials).
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_connect() {
        "cannot connect"
    } else if e.is_timeout() {
        "timed out"
    } else {
        "request failed"
    };
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    let mut innermost = None;
    while let Some(s) = source {
        innermost = Some(s.to_string());
        source = s.source();
    }
    match innermost {
        Some(reason) => format!("{kind}: {reason}"),
        None => kind.to_owned(),
    }
}
