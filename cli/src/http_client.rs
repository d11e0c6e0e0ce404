//! The HTTP clients. `send` talks HTTP/1.1 over one kept-alive connection
//! per concurrent sender ([`Sender`]): for `http://`, requests serialised
//! beforehand and written raw, answers read by [`crate::raw_http`]'s own
//! reader, so that the sender stays cheaper per request than the receiver
//! it loads; reqwest on rustls (ring, installed as the process's provider)
//! for `https://` and for `listen --forward`. Neither follows redirects (a
//! webhook sender does not) nor takes a proxy from the environment.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use crate::error::Failure;
use crate::raw_http::{self, Connection};
use crate::signed::SignedRequest;

/// Where a [`Sender`] posts.
#[derive(Clone)]
enum Target {
    /// `http://`: the resolved addresses, the `Host` header, the path and
    /// query to request.
    Plain {
        addrs: Arc<[SocketAddr]>,
        host: Arc<str>,
        path: Arc<str>,
    },
    /// `https://`: through reqwest.
    Tls {
        client: reqwest::Client,
        url: reqwest::Url,
    },
}

/// A signed request, ready to send.
pub(crate) enum Prepared {
    /// For `http://`: the whole request, serialised.
    Plain(Vec<u8>),
    /// For `https://`: sent through reqwest.
    Tls(SignedRequest),
}

/// Posts deliveries to one URL over one kept-alive HTTP/1.1 connection,
/// opened on first use and again after the server closes it. One per
/// concurrent sender: [`Sender::fork`] makes another for the same URL.
pub(crate) struct Sender {
    target: Target,
    timeout: Duration,
    connection: Option<Connection<TcpStream>>,
    /// When the connection last answered.
    answered: Instant,
}

/// How long a connection idles before a request checks that the server has
/// not closed it (a server closes an idle kept-alive connection after
/// seconds; one answering without keeping it says `Connection: close`).
/// Sooner than that, the request goes straight out: the check is a read
/// the kernel answers `EAGAIN`, as costly as the exchange's own write.
const IDLE_CHECK: Duration = Duration::from_millis(1);

impl Sender {
    /// A sender for `url` (`http://` or `https://`), each request given up
    /// after `timeout`. Resolves the host once, here.
    pub(crate) fn new(url: &reqwest::Url, timeout: Duration) -> Result<Self, Failure> {
        let target = match url.scheme() {
            "http" => {
                let addrs: Vec<SocketAddr> = url
                    .socket_addrs(|| Some(80))
                    .map_err(|e| Failure::usage(format!("cannot resolve the host: {e}")))?;
                let host = match (url.host_str(), url.port()) {
                    (Some(host), Some(port)) => format!("{host}:{port}"),
                    (Some(host), None) => host.to_owned(),
                    (None, _) => return Err(Failure::usage("the URL has no host")),
                };
                if http::HeaderValue::try_from(host.as_str()).is_err() {
                    return Err(Failure::usage("the URL's host is not a valid Host header"));
                }
                let path = match url.query() {
                    Some(query) => format!("{}?{query}", url.path()),
                    None => url.path().to_owned(),
                };
                if http::Uri::try_from(path.as_str()).is_err() {
                    return Err(Failure::usage(
                        "the URL's path is not a valid request target",
                    ));
                }
                Target::Plain {
                    addrs: addrs.into(),
                    host: host.into(),
                    path: path.into(),
                }
            }
            _ => Target::Tls {
                client: client(timeout)?,
                url: url.clone(),
            },
        };
        Ok(Self {
            target,
            timeout,
            connection: None,
            answered: Instant::now(),
        })
    }

    /// Another sender for the same URL, with a connection of its own.
    pub(crate) fn fork(&self) -> Self {
        Self {
            target: self.target.clone(),
            timeout: self.timeout,
            connection: None,
            answered: self.answered,
        }
    }

    /// `request` ready to send: for `http://`, the HTTP request itself, one
    /// buffer (built before `send --repeat` starts its clock).
    pub(crate) fn prepare(&self, request: SignedRequest) -> Prepared {
        match &self.target {
            Target::Tls { .. } => Prepared::Tls(request),
            Target::Plain { host, path, .. } => Prepared::Plain(raw_http::serialize(
                host.as_bytes(),
                path.as_bytes(),
                &request.headers,
                &request.body,
            )),
        }
    }

    /// POSTs `request`; the answer's body is read, and kept (up to 1,000
    /// bytes) when `keep_body`.
    pub(crate) async fn post(
        &mut self,
        request: SignedRequest,
        keep_body: bool,
    ) -> Result<Answer, String> {
        let prepared = self.prepare(request);
        self.send(prepared, keep_body).await
    }

    /// Sends a [`prepare`](Self::prepare)d request.
    pub(crate) async fn send(
        &mut self,
        request: Prepared,
        keep_body: bool,
    ) -> Result<Answer, String> {
        let (outgoing, addrs) = match (request, &self.target) {
            (Prepared::Tls(request), Target::Tls { client, url }) => {
                return post(client, url, &request).await;
            }
            (Prepared::Plain(outgoing), Target::Plain { addrs, .. }) => (outgoing, addrs.clone()),
            _ => return Err("request failed: prepared for another URL".to_owned()),
        };
        let started = Instant::now();
        let idle = started.saturating_duration_since(self.answered) >= IDLE_CHECK;
        let connection = &mut self.connection;
        let exchange = async {
            // Closed by the server since the last answer: nothing was sent
            // on it, so nothing is sent twice.
            if idle && connection.as_ref().is_some_and(Connection::is_closed) {
                *connection = None;
            }
            let open = match connection {
                Some(open) => open,
                None => connection.insert(Connection::open(&addrs).await?),
            };
            open.exchange(&outgoing, keep_body).await
        };
        let response = match tokio::time::timeout(self.timeout, exchange).await {
            Ok(Ok(response)) => response,
            Ok(Err(reason)) => {
                self.connection = None;
                return Err(reason);
            }
            Err(_) => {
                self.connection = None;
                return Err("timed out".to_owned());
            }
        };
        let answered = Instant::now();
        self.answered = answered;
        let latency = answered.saturating_duration_since(started);
        if response.close {
            self.connection = None;
        }
        Ok(Answer {
            status: response.status,
            body: match keep_body {
                true => shorten(&response.body),
                false => String::new(),
            },
            latency,
        })
    }
}

/// The response body as text, cut at 1,000 bytes.
fn shorten(body: &[u8]) -> String {
    let mut body = String::from_utf8_lossy(body).into_owned();
    if body.len() > 1000 {
        let mut end = 1000;
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        body.truncate(end);
        body.push('…');
    }
    body
}

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
    Ok(Answer {
        status,
        body: shorten(&body),
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
