//! Sending: workers over HTTP/1.1 connections, signing each attempt, retrying.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{HeaderValue, Request, header};
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use webhooks_core::DUPLICATE_HEADER;

use super::{
    Answer, Intent, Outcome, Plan, PlannedDelivery, Rng, STALE_BY, SimulatorConfig, SimulatorError,
    Summary, unix_millis,
};
use crate::schemes::SchemeSigner;

/// Sends the plan to `config.url` and waits for every delivery to end.
///
/// # Errors
///
/// [`SimulatorError`] when the URL or a secret is unusable. Failed deliveries
/// are outcomes, not errors.
pub async fn run(config: &SimulatorConfig, plan: &Plan) -> Result<Summary, SimulatorError> {
    config.check()?;
    let target = Arc::new(Target::parse(&config.url)?);
    let genuine = config
        .scheme
        .signer(&config.secret)
        .map_err(SimulatorError::Secret)?;
    let forger = config
        .scheme
        .signer(&config.wrong_secret)
        .map_err(SimulatorError::Secret)?;
    let deliveries = Arc::new(plan.deliveries.clone());
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for w in 0..config.concurrency {
        let worker = Worker {
            target: Arc::clone(&target),
            genuine: genuine.clone(),
            forger: forger.clone(),
            config: config.clone(),
            rng: Rng::new(config.seed ^ (0x9e37_79b9 * (w as u64 + 1))),
            sender: None,
        };
        let deliveries = Arc::clone(&deliveries);
        let next = Arc::clone(&next);
        workers.spawn(worker.run(deliveries, next));
    }
    let mut outcomes: Vec<(usize, Outcome)> = Vec::with_capacity(deliveries.len());
    let mut latencies = Vec::new();
    while let Some(done) = workers.join_next().await {
        let (mut o, mut l) = done.expect("simulator worker panicked");
        outcomes.append(&mut o);
        latencies.append(&mut l);
    }
    outcomes.sort_by_key(|(i, _)| *i);
    latencies.sort();
    let outcomes: Vec<Outcome> = outcomes.into_iter().map(|(_, o)| o).collect();
    let retries = outcomes
        .iter()
        .map(|o| u64::from(o.attempts.saturating_sub(1)))
        .sum();
    Ok(Summary {
        outcomes,
        retries,
        latencies,
        elapsed: started.elapsed(),
    })
}

/// `http://authority/path`, split.
#[derive(Debug)]
struct Target {
    authority: String,
    path: String,
}

impl Target {
    fn parse(url: &str) -> Result<Self, SimulatorError> {
        let bad = |why: &str| SimulatorError::Config(format!("--url: {why}"));
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("only plain http://host:port/path URLs are supported"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() {
            return Err(bad("no host"));
        }
        let authority = if authority.contains(':') && !authority.ends_with(']') {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        Ok(Self {
            authority,
            path: path.to_owned(),
        })
    }
}

/// One connection's worth of sending: takes deliveries until none are left.
struct Worker {
    target: Arc<Target>,
    genuine: SchemeSigner,
    forger: SchemeSigner,
    config: SimulatorConfig,
    rng: Rng,
    sender: Option<SendRequest<Full<Bytes>>>,
}

/// The answer to one attempt.
struct Attempt {
    status: u16,
    duplicate: bool,
    retry_after: Option<Duration>,
    reason: String,
}

impl Worker {
    async fn run(
        mut self,
        deliveries: Arc<Vec<PlannedDelivery>>,
        next: Arc<AtomicUsize>,
    ) -> (Vec<(usize, Outcome)>, Vec<Duration>) {
        let mut outcomes = Vec::new();
        let mut latencies = Vec::new();
        loop {
            let index = next.fetch_add(1, Ordering::Relaxed);
            let Some(delivery) = deliveries.get(index) else {
                break;
            };
            let outcome = self.deliver(delivery, &mut latencies).await;
            outcomes.push((index, outcome));
        }
        (outcomes, latencies)
    }

    async fn deliver(
        &mut self,
        delivery: &PlannedDelivery,
        latencies: &mut Vec<Duration>,
    ) -> Outcome {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let started = Instant::now();
            let result = tokio::time::timeout(self.config.request_timeout, self.attempt(delivery))
                .await
                .unwrap_or_else(|_| Err("timed out".to_owned()));
            latencies.push(started.elapsed());
            let retry_after = match &result {
                Ok(a) if a.status == 409 || a.status == 429 || a.status >= 500 => a.retry_after,
                Ok(_) => None,
                Err(_) => {
                    self.sender = None;
                    None
                }
            };
            let retryable = match &result {
                Ok(a) => a.status == 409 || a.status == 429 || a.status >= 500,
                Err(_) => true,
            };
            if !retryable || attempts >= self.config.max_attempts {
                let answer = match result {
                    Ok(a) => Answer::Status {
                        status: a.status,
                        duplicate: a.duplicate,
                        reason: a.reason,
                    },
                    Err(e) => Answer::Transport(e),
                };
                return Outcome {
                    id: delivery.id.clone(),
                    intent: delivery.intent,
                    attempts,
                    answer,
                };
            }
            tokio::time::sleep(self.backoff(attempts, retry_after)).await;
        }
    }

    /// Exponential backoff with equal jitter, and at least `Retry-After`.
    fn backoff(&mut self, attempts: u32, retry_after: Option<Duration>) -> Duration {
        let exp = self
            .config
            .base_backoff
            .saturating_mul(1 << attempts.saturating_sub(1).min(16))
            .min(self.config.max_backoff);
        let half = exp / 2;
        let jittered = half + half.mul_f64(self.rng.unit());
        let asked = retry_after
            .unwrap_or_default()
            .min(self.config.max_retry_after);
        jittered.max(asked)
    }

    async fn attempt(&mut self, delivery: &PlannedDelivery) -> Result<Attempt, String> {
        let now = SystemTime::now();
        let signed_at = match delivery.intent {
            Intent::Stale => now - STALE_BY,
            _ => now,
        };
        let signer = match delivery.intent {
            Intent::WrongSecret => &self.forger,
            _ => &self.genuine,
        };
        let signed_body = delivery.signed_body.as_ref().unwrap_or(&delivery.body);
        let headers = signer
            .headers(
                &delivery.id,
                delivery.event_type,
                unix_millis(signed_at) / 1000,
                signed_body,
            )
            .map_err(|e| e.to_string())?;
        let mut request = Request::post(&self.target.path)
            .header(header::HOST, &self.target.authority)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(delivery.body.clone()))
            .map_err(|e| e.to_string())?;
        request.headers_mut().extend(headers);

        let sender = self.sender().await?;
        let response = sender.send_request(request).await.map_err(|e| {
            self.sender = None;
            short(&e.to_string())
        })?;
        let status = response.status().as_u16();
        let header_text = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
                .map(str::to_owned)
        };
        let duplicate = header_text(DUPLICATE_HEADER).is_some_and(|v| v == "true");
        let retry_after = header_text(header::RETRY_AFTER.as_str())
            .and_then(|v| v.trim().parse().ok())
            .map(Duration::from_secs);
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| short(&e.to_string()))?
            .to_bytes();
        let reason = if (200..300).contains(&status) {
            String::new()
        } else {
            short(&String::from_utf8_lossy(&body))
        };
        Ok(Attempt {
            status,
            duplicate,
            retry_after,
            reason,
        })
    }

    /// The open connection, or a new one.
    async fn sender(&mut self) -> Result<&mut SendRequest<Full<Bytes>>, String> {
        if let Some(sender) = &mut self.sender
            && sender.ready().await.is_err()
        {
            self.sender = None;
        }
        if self.sender.is_none() {
            let stream = TcpStream::connect(&self.target.authority)
                .await
                .map_err(|e| format!("connect: {}", e.kind()))?;
            let _ = stream.set_nodelay(true);
            let (sender, connection) = http1::handshake(TokioIo::new(stream))
                .await
                .map_err(|e| short(&e.to_string()))?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            self.sender = Some(sender);
        }
        self.sender
            .as_mut()
            .ok_or_else(|| "no connection".to_owned())
    }
}

/// The first line of a message, printable ASCII only, at most 40 characters.
fn short(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(40)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_split() {
        let t = Target::parse("http://127.0.0.1:8080/webhooks/email").unwrap();
        assert_eq!(
            (t.authority.as_str(), t.path.as_str()),
            ("127.0.0.1:8080", "/webhooks/email")
        );
        assert_eq!(
            Target::parse("http://localhost").unwrap().authority,
            "localhost:80"
        );
        assert!(Target::parse("https://example.com/").is_err());
    }
}
