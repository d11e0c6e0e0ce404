//! Sending: workers sharing one pooled HTTP/1.1 client (hyper-util), signing
//! each attempt, retrying with backon's exponential backoff and jitter.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use backon::{BackoffBuilder as _, ExponentialBuilder};
use bytes::Bytes;
use hdrhistogram::Histogram;
use http::{HeaderValue, Request, Uri, header};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tower_webhooks::core::DUPLICATE_HEADER;

use super::{
    Answer, Intent, Outcome, Plan, PlannedDelivery, STALE_BY, SimulatorConfig, SimulatorError,
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
    let target = target(&config.url)?;
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client = Client::builder(TokioExecutor::new()).build(connector);
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
            target: target.clone(),
            client: client.clone(),
            genuine: genuine.clone(),
            forger: forger.clone(),
            config: config.clone(),
            backoff: ExponentialBuilder::new()
                .with_min_delay(config.base_backoff)
                .with_max_delay(config.max_backoff)
                .with_factor(2.0)
                .with_jitter()
                .with_jitter_seed(config.seed ^ (0x9e37_79b9 * (w as u64 + 1)))
                .without_max_times(),
        };
        let deliveries = Arc::clone(&deliveries);
        let next = Arc::clone(&next);
        workers.spawn(worker.run(deliveries, next));
    }
    let mut outcomes: Vec<(usize, Outcome)> = Vec::with_capacity(deliveries.len());
    // Microseconds, 1 µs to an hour, three significant digits.
    let mut latencies = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)
        .map_err(|e| SimulatorError::Config(format!("latency histogram: {e}")))?;
    while let Some(done) = workers.join_next().await {
        let (mut o, l) = done.expect("simulator worker panicked");
        outcomes.append(&mut o);
        for latency in l {
            let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
            latencies.saturating_record(micros.max(1));
        }
    }
    outcomes.sort_by_key(|(i, _)| *i);
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

/// The target as an absolute `http://` URI (the client has no TLS).
fn target(url: &str) -> Result<Uri, SimulatorError> {
    let bad = |why: &str| SimulatorError::Config(format!("--url: {why}"));
    let uri: Uri = url.parse().map_err(|_| bad("not a URL"))?;
    if uri.scheme_str() != Some("http") {
        return Err(bad("only plain http://host:port/path URLs are supported"));
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    Ok(uri)
}

/// One in-flight delivery at a time: takes deliveries until none are left.
struct Worker {
    target: Uri,
    client: Client<HttpConnector, Full<Bytes>>,
    genuine: SchemeSigner,
    forger: SchemeSigner,
    config: SimulatorConfig,
    backoff: ExponentialBuilder,
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
        let mut backoff = self.backoff.build();
        loop {
            attempts += 1;
            let started = Instant::now();
            let result = tokio::time::timeout(self.config.request_timeout, self.attempt(delivery))
                .await
                .unwrap_or_else(|_| Err("timed out".to_owned()));
            latencies.push(started.elapsed());
            let retry_after = match &result {
                Ok(a) if a.status == 409 || a.status == 429 || a.status >= 500 => a.retry_after,
                _ => None,
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
            // backon: base × 2ⁿ up to the maximum, plus a random jitter of up
            // to the same again; and at least the `Retry-After` asked for.
            let jittered = backoff.next().unwrap_or(self.config.max_backoff);
            let asked = retry_after
                .unwrap_or_default()
                .min(self.config.max_retry_after);
            tokio::time::sleep(jittered.max(asked)).await;
        }
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
        let mut request = Request::post(self.target.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(delivery.body.clone()))
            .map_err(|e| e.to_string())?;
        request.headers_mut().extend(headers);

        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| short(&transport_error(&e)))?;
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
}

/// A client error's innermost cause (`connection refused`, not "client error (Connect)").
fn transport_error(error: &(dyn std::error::Error + 'static)) -> String {
    let mut inner = error;
    while let Some(source) = inner.source() {
        inner = source;
    }
    inner.to_string()
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
    fn only_plain_http_urls() {
        let t = target("http://127.0.0.1:8080/webhooks/email").unwrap();
        assert_eq!(t.authority().unwrap().as_str(), "127.0.0.1:8080");
        assert_eq!(t.path(), "/webhooks/email");
        assert!(target("http://localhost").is_ok());
        assert!(target("https://example.com/").is_err());
        assert!(target("/no/host").is_err());
    }
}
