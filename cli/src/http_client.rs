//! The HTTP clients. `send` talks HTTP/1.1 over one kept-alive connection
//! per concurrent sender ([`Sender`]): hyper's connection-level client for
//! `http://`, so that the sender stays cheaper per request than the
//! receiver it loads; reqwest on rustls (ring, installed as the process's
//! provider) for `https://` and for `listen --forward`. Neither follows
//! redirects (a webhook sender does not) nor takes a proxy from the
//! environment.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use std::future::Future as _;
use std::pin::Pin;

use hyper::client::conn::http1::{Connection, SendRequest};
use hyper_util::rt::TokioIo;

use crate::error::Failure;
use crate::signed::SignedRequest;

/// Where a [`Sender`] posts.
#[derive(Clone)]
enum Target {
    /// `http://`: the resolved addresses, the `Host` header, the path and
    /// query to request.
    Plain {
        addrs: std::sync::Arc<[SocketAddr]>,
        host: http::HeaderValue,
        path: http::Uri,
    },
    /// `https://`: through reqwest.
    Tls {
        client: reqwest::Client,
        url: reqwest::Url,
    },
}

/// A signed request, ready to send.
pub(crate) enum Prepared {
    /// For `http://`: the request hyper sends.
    Plain(http::Request<Full<Bytes>>),
    /// For `https://`: sent through reqwest.
    Tls(SignedRequest),
}

/// Posts deliveries to one URL over one kept-alive HTTP/1.1 connection,
/// opened on first use and again after the server closes it. One per
/// concurrent sender: [`Sender::fork`] makes another for the same URL.
pub(crate) struct Sender {
    target: Target,
    timeout: Duration,
    connection: Option<Open>,
}

impl Sender {
    /// A sender for `url` (`http://` or `https://`), each request given up
    /// after `timeout`. Resolves the host once, here.
    pub(crate) fn new(url: &reqwest::Url, timeout: Duration) -> Result<Self, Failure> {
        let target = match url.scheme() {
            "http" => {
                let addrs: Vec<SocketAddr> = url
                    .socket_addrs(|| Some(80))
                    .map_err(|e| Failure::usage(format!("cannot resolve the host: {e}")))?;
                let authority = match (url.host_str(), url.port()) {
                    (Some(host), Some(port)) => format!("{host}:{port}"),
                    (Some(host), None) => host.to_owned(),
                    (None, _) => return Err(Failure::usage("the URL has no host")),
                };
                let host = http::HeaderValue::try_from(authority)
                    .map_err(|_| Failure::usage("the URL's host is not a valid Host header"))?;
                let path = match url.query() {
                    Some(query) => format!("{}?{query}", url.path()),
                    None => url.path().to_owned(),
                };
                let path = http::Uri::try_from(path)
                    .map_err(|_| Failure::usage("the URL's path is not a valid request target"))?;
                Target::Plain {
                    addrs: addrs.into(),
                    host,
                    path,
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
        })
    }

    /// Another sender for the same URL, with a connection of its own.
    pub(crate) fn fork(&self) -> Self {
        Self {
            target: self.target.clone(),
            timeout: self.timeout,
            connection: None,
        }
    }

    /// `request` ready to send: for `http://`, the HTTP request itself
    /// (built before `send --repeat` starts its clock).
    pub(crate) fn prepare(&self, request: SignedRequest) -> Result<Prepared, String> {
        match &self.target {
            Target::Tls { .. } => Ok(Prepared::Tls(request)),
            Target::Plain { host, path, .. } => {
                let mut builder =
                    http::Request::post(path.clone()).header(http::header::HOST, host.clone());
                if let Some(headers) = builder.headers_mut() {
                    headers.reserve(request.headers.len());
                    headers.extend(request.headers);
                }
                builder
                    .body(Full::new(request.body))
                    .map(Prepared::Plain)
                    .map_err(|e| format!("request failed: {e}"))
            }
        }
    }

    /// POSTs `request`; the answer's body is read, and kept (up to 1,000
    /// bytes) when `keep_body`.
    pub(crate) async fn post(
        &mut self,
        request: SignedRequest,
        keep_body: bool,
    ) -> Result<Answer, String> {
        let prepared = self.prepare(request)?;
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
        let timeout = self.timeout;
        let exchange = async {
            let Open { requests, driver } = self.open(&addrs).await?;
            // The connection is driven here, in the sender's own task, not
            // in a task of its own: no wake-up crosses tasks per request.
            let exchange = async {
                requests.ready().await.map_err(|e| hyper_reason(&e))?;
                let response = requests
                    .send_request(outgoing)
                    .await
                    .map_err(|e| hyper_reason(&e))?;
                let status = response.status().as_u16();
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .map_err(|e| hyper_reason(&e))?
                    .to_bytes();
                Ok::<_, String>((status, body))
            };
            tokio::pin!(exchange);
            tokio::select! {
                biased;
                answer = &mut exchange => answer.map(|answer| (answer, false)),
                closed = driver.as_mut() => match closed {
                    // Closed after answering (`Connection: close`, or a
                    // refusal the server closes on): the answer is in. The
                    // driver is done, so this cannot wait.
                    Ok(()) => exchange.await.map(|answer| (answer, true)),
                    Err(e) => Err(hyper_reason(&e)),
                },
            }
        };
        let outcome = tokio::time::timeout(timeout, exchange).await;
        let (status, body) = match outcome {
            Ok(Ok((answer, closed))) => {
                if closed {
                    self.connection = None;
                }
                answer
            }
            Ok(Err(reason)) => {
                self.connection = None;
                return Err(reason);
            }
            Err(_) => {
                self.connection = None;
                return Err("timed out".to_owned());
            }
        };
        let latency = started.elapsed();
        Ok(Answer {
            status,
            body: match keep_body {
                true => shorten(&body),
                false => String::new(),
            },
            latency,
        })
    }

    /// The open connection; a new one when there is none or the server
    /// closed it (nothing was sent on it yet, so nothing is sent twice).
    async fn open(&mut self, addrs: &[SocketAddr]) -> Result<&mut Open, String> {
        if let Some(open) = &mut self.connection {
            let closed = std::future::poll_fn(|cx| {
                std::task::Poll::Ready(open.driver.as_mut().poll(cx).is_ready())
            })
            .await;
            if closed {
                self.connection = None;
            }
        }
        if self.connection.is_none() {
            self.connection = Some(connect(addrs).await?);
        }
        self.connection
            .as_mut()
            .ok_or_else(|| "cannot connect".to_owned())
    }
}

/// An open HTTP/1.1 connection: where requests go in, and the future that
/// drives the connection (polled while a request is in flight).
struct Open {
    requests: SendRequest<Full<Bytes>>,
    driver: Pin<Box<Connection<TokioIo<tokio::net::TcpStream>, Full<Bytes>>>>,
}

/// A new HTTP/1.1 connection to the first address that answers.
async fn connect(addrs: &[SocketAddr]) -> Result<Open, String> {
    let mut last = None;
    for addr in addrs {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                let (requests, driver) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream))
                        .await
                        .map_err(|e| hyper_reason(&e))?;
                return Ok(Open {
                    requests,
                    driver: Box::pin(driver),
                });
            }
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => format!("cannot connect: {e}"),
        None => "cannot connect: the host has no address".to_owned(),
    })
}

/// A one-line reason for a failed exchange.
fn hyper_reason(e: &hyper::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_closed() || e.is_incomplete_message() {
        "the connection was closed"
    } else {
        "request failed"
    };
    match std::error::Error::source(e) {
        Some(source) => format!("{kind}: {source}"),
        None => format!("{kind}: {e}"),
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
