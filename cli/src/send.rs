//! `webhooks send <scheme> <url>`: sign a delivery as the provider would
//! and POST it; optionally spoiled (`--tamper`) or many times over
//! (`--repeat`, `--concurrency`) with a latency summary.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clap::Args;

use crate::error::Failure;
use crate::http_client::{Answer, Prepared, Sender};
use crate::output::{BAD, BOLD, DIM, HINT, OK, Out, paint};
use crate::signed::{Signing, SigningArgs};
use crate::tamper::Tamper;

const EXAMPLES: &str = "\
Examples:
  webhooks send stripe http://localhost:3000/webhooks --event invoice.paid
  webhooks send stripe http://localhost:3000/webhooks --set data.object.amount_paid=500
  webhooks send github http://localhost:3000/gh --body-file push.json --event push
  webhooks send twilio https://hooks.example.com/sms --signed-url https://public.example.com/sms
  webhooks send slack http://localhost:3000/slack --tamper timestamp=-400
  webhooks send stripe http://localhost:3000/webhooks --repeat 20000 --concurrency 64

Without --tamper or --expect, exit 0 when the receiver answers 2xx.
With --tamper, exit 0 when it refuses (400 or 401) and 1 when it accepts.";

/// `webhooks send`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub(crate) struct SendArgs {
    #[command(flatten)]
    signing: SigningArgs,
    /// The receiver's URL.
    url: String,
    /// Spoil the delivery after signing: body, signature, timestamp[=SECONDS]
    /// (signed that far from now, default -3600) or drop=HEADER.
    #[arg(long, value_name = "MODE")]
    tamper: Option<Tamper>,
    /// The status the receiver must answer (exit 1 otherwise).
    #[arg(long, value_name = "STATUS")]
    expect: Option<u16>,
    /// Send this many deliveries.
    #[arg(long, default_value_t = 1, value_name = "N")]
    repeat: usize,
    /// With --repeat: this many requests in flight at once.
    #[arg(long, short = 'c', default_value_t = 1, value_name = "C")]
    concurrency: usize,
    /// With --repeat: every delivery with the same id (a provider's retries).
    #[arg(long)]
    same_id: bool,
    /// Give up on a request after this many seconds.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    timeout: f64,
}

/// Whether `status` is what the command expects.
fn meets(expect: Option<u16>, tamper: bool, status: u16) -> bool {
    match (expect, tamper) {
        (Some(expected), _) => status == expected,
        (None, true) => matches!(status, 400 | 401),
        (None, false) => (200..300).contains(&status),
    }
}

pub(crate) async fn run(args: SendArgs, out: &Out) -> Result<(), Failure> {
    let url = reqwest::Url::parse(&args.url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| Failure::usage("the URL is not an http:// or https:// URL"))?;
    if args.repeat == 0 || args.concurrency == 0 {
        return Err(Failure::usage(
            "--repeat and --concurrency must be at least 1",
        ));
    }
    let timeout = Duration::try_from_secs_f64(args.timeout)
        .ok()
        .filter(|t| !t.is_zero())
        .ok_or_else(|| Failure::usage("--timeout must be a positive number of seconds"))?;
    let signing = Signing::new(&args.signing, Some(url.as_str()))?;
    if let Some(tamper) = &args.tamper {
        tamper.check(signing.info())?;
        // A missing header to drop fails here, before anything is sent.
        let mut probe = signing.sign(None, tamper.shift())?;
        tamper.apply(signing.info(), &mut probe)?;
    }
    let mut sender = Sender::new(&url, timeout)?;
    if args.repeat == 1 {
        return send_one(&args, &signing, &mut sender, &url, out).await;
    }
    repeat(args, signing, sender, url, out).await
}

async fn send_one(
    args: &SendArgs,
    signing: &Signing,
    sender: &mut Sender,
    url: &reqwest::Url,
    out: &Out,
) -> Result<(), Failure> {
    let info = signing.info();
    let shift = args.tamper.as_ref().map_or(0, Tamper::shift);
    let mut request = signing.sign(None, shift)?;
    if let Some(tamper) = &args.tamper {
        tamper.apply(info, &mut request)?;
    }
    let answer = sender
        .post(request.clone(), true)
        .await
        .map_err(|reason| Failure::usage(format!("{reason} ({})", origin(url))))?;
    let ok = meets(args.expect, args.tamper.is_some(), answer.status);
    let verdict = verdict(args, &answer, ok);
    if out.json {
        out.json(&serde_json::json!({
            "scheme": info.name,
            "url": redact(url),
            "event": signing.template.fixture.or(signing.template.header_event.as_deref()),
            "delivery_id": request.id,
            "timestamp": request.timestamp,
            "signed_url": request.signed_url,
            "tamper": args.tamper.as_ref().map(ToString::to_string),
            "status": answer.status,
            "latency_ms": ms(answer.latency),
            "response_body": answer.body,
            "expected": expectation(args),
            "ok": ok,
        }));
    } else {
        let event = signing
            .template
            .fixture
            .or(signing.template.header_event.as_deref())
            .unwrap_or("custom body");
        out.line(format!(
            "{} {}  {} {}  {}",
            paint(BOLD, "POST"),
            redact(url),
            info.name,
            event,
            paint(DIM, format!("id {}", request.id))
        ));
        if let Some(tamper) = &args.tamper {
            out.line(paint(HINT, format!("tampered: {tamper}")));
        }
        let reason = http::StatusCode::from_u16(answer.status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("");
        out.line(format!(
            "{} {reason} in {:.1} ms: {verdict}",
            paint(if ok { OK } else { BAD }, answer.status),
            ms(answer.latency)
        ));
        if !answer.body.trim().is_empty() {
            out.line(paint(DIM, format!("  {}", answer.body.trim())));
        }
    }
    match ok {
        true => Ok(()),
        false => Err(Failure::check_reported(verdict)),
    }
}

fn expectation(args: &SendArgs) -> String {
    match (args.expect, &args.tamper) {
        (Some(status), _) => status.to_string(),
        (None, Some(_)) => "400 or 401".to_owned(),
        (None, None) => "2xx".to_owned(),
    }
}

fn verdict(args: &SendArgs, answer: &Answer, ok: bool) -> String {
    match (ok, &args.tamper, args.expect) {
        (true, Some(_), None) => "refused, as it must".to_owned(),
        (true, _, Some(_)) => "as expected".to_owned(),
        (true, None, None) => "accepted".to_owned(),
        (false, Some(_), None) if (200..300).contains(&answer.status) => {
            "ACCEPTED a tampered delivery".to_owned()
        }
        (false, _, _) => format!("expected {}", expectation(args)),
    }
}

/// The URL without credentials.
fn redact(url: &reqwest::Url) -> String {
    let mut url = url.clone();
    let _ = url.set_password(None);
    let _ = url.set_username("");
    url.to_string()
}

/// `scheme://host:port`, for a connection error.
fn origin(url: &reqwest::Url) -> String {
    url.origin().ascii_serialization()
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// Deliveries signed per round of `--repeat`, before the round is sent.
const ROUND: usize = 50_000;

/// The running counts of a `--repeat`.
#[derive(Default)]
struct Tally {
    statuses: BTreeMap<u16, usize>,
    latencies: Vec<Duration>,
    errors: usize,
    first_error: Option<String>,
    missed: usize,
}

impl Tally {
    /// Adds a worker's counts.
    fn add(&mut self, part: Self) {
        for (status, n) in part.statuses {
            *self.statuses.entry(status).or_default() += n;
        }
        self.latencies.extend(part.latencies);
        self.errors += part.errors;
        self.missed += part.missed;
        if self.first_error.is_none() {
            self.first_error = part.first_error;
        }
    }
}

async fn repeat(
    args: SendArgs,
    signing: Signing,
    sender: Sender,
    url: reqwest::Url,
    out: &Out,
) -> Result<(), Failure> {
    let total = args.repeat;
    let concurrency = args.concurrency.min(total);
    let shift = args.tamper.as_ref().map_or(0, Tamper::shift);
    let same_id = match args.same_id {
        true => Some(signing.sign(None, shift)?.id),
        false => None,
    };
    let bar = match out.json {
        true => indicatif::ProgressBar::hidden(),
        false => indicatif::ProgressBar::new(total as u64).with_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {per_sec} eta {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        ),
    };
    let tamper = args.tamper.clone();
    let expect = args.expect;
    let refusing = tamper.is_some();
    let mut senders: Vec<Sender> = (0..concurrency).map(|_| sender.fork()).collect();
    let mut tally = Tally::default();
    let (mut signing_time, mut elapsed) = (Duration::ZERO, Duration::ZERO);
    let mut done = 0;
    while done < total {
        // Sign a round beforehand, off the clock: sending then costs the
        // sender no more than the HTTP exchange (the receiver's own share).
        let round = (total - done).min(ROUND);
        let signing_started = Instant::now();
        let mut queues: Vec<Vec<Prepared>> = (0..concurrency)
            .map(|_| Vec::with_capacity(round / concurrency + 1))
            .collect();
        for i in 0..round {
            let mut request = signing.sign(same_id.as_deref(), shift)?;
            if let Some(tamper) = &tamper {
                tamper.apply(signing.info(), &mut request)?;
            }
            queues[i % concurrency].push(sender.prepare(request));
        }
        signing_time += signing_started.elapsed();
        let started = Instant::now();
        let mut workers = tokio::task::JoinSet::new();
        for (mut sender, queue) in senders.drain(..).zip(queues) {
            let bar = bar.clone();
            workers.spawn(async move {
                let mut tally = Tally::default();
                for request in queue {
                    match sender.send(request, false).await {
                        Ok(answer) => {
                            *tally.statuses.entry(answer.status).or_default() += 1;
                            tally.latencies.push(answer.latency);
                            if !meets(expect, refusing, answer.status) {
                                tally.missed += 1;
                            }
                        }
                        Err(reason) => {
                            tally.errors += 1;
                            tally.first_error.get_or_insert(reason);
                        }
                    }
                    bar.inc(1);
                }
                (sender, tally)
            });
        }
        while let Some(joined) = workers.join_next().await {
            let (sender, part) =
                joined.map_err(|e| Failure::usage(format!("a sender task failed: {e}")))?;
            senders.push(sender);
            tally.add(part);
        }
        elapsed += started.elapsed();
        done += round;
    }
    bar.finish_and_clear();
    tally.latencies.sort_unstable();
    let percentile = |p: f64| -> f64 {
        match tally.latencies.len() {
            0 => 0.0,
            n => {
                #[allow(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    clippy::cast_precision_loss
                )]
                let at = ((n as f64 * p).ceil() as usize).clamp(1, n) - 1;
                ms(tally.latencies[at])
            }
        }
    };
    #[allow(clippy::cast_precision_loss)]
    let rate = total as f64 / elapsed.as_secs_f64().max(1e-9);
    let (p50, p99) = (percentile(0.50), percentile(0.99));
    let max = tally.latencies.last().map_or(0.0, |d| ms(*d));
    let ok = tally.errors == 0 && tally.missed == 0;
    if out.json {
        let statuses: serde_json::Map<String, serde_json::Value> = tally
            .statuses
            .iter()
            .map(|(s, n)| (s.to_string(), serde_json::json!(n)))
            .collect();
        out.json(&serde_json::json!({
            "scheme": signing.info().name,
            "url": redact(&url),
            "requests": total,
            "concurrency": concurrency,
            "same_id": args.same_id,
            "tamper": args.tamper.as_ref().map(ToString::to_string),
            "elapsed_s": (elapsed.as_secs_f64() * 1000.0).round() / 1000.0,
            "signing_s": (signing_time.as_secs_f64() * 1000.0).round() / 1000.0,
            "requests_per_second": rate.round(),
            "statuses": statuses,
            "errors": tally.errors,
            "first_error": tally.first_error,
            "latency_ms": {"p50": p50, "p99": p99, "max": max},
            "expected": expectation(&args),
            "unexpected": tally.missed,
            "ok": ok,
        }));
    } else {
        out.line(format!(
            "{total} requests in {:.2} s: {} requests/s, concurrency {concurrency} {}",
            elapsed.as_secs_f64(),
            paint(BOLD, format!("{rate:.0}")),
            paint(
                DIM,
                format!("(signed beforehand in {:.2} s)", signing_time.as_secs_f64())
            )
        ));
        let statuses: Vec<String> = tally
            .statuses
            .iter()
            .map(|(s, n)| {
                let style = if meets(args.expect, args.tamper.is_some(), *s) {
                    OK
                } else {
                    BAD
                };
                format!("{} ×{n}", paint(style, s))
            })
            .collect();
        out.line(format!("statuses: {}", statuses.join(", ")));
        if tally.errors > 0 {
            out.line(paint(
                BAD,
                format!(
                    "errors: {} ({})",
                    tally.errors,
                    tally.first_error.as_deref().unwrap_or("")
                ),
            ));
        }
        out.line(format!(
            "latency: p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms"
        ));
    }
    if tally.errors == total {
        return Err(Failure {
            reported: true,
            ..Failure::usage(tally.first_error.unwrap_or_default())
        });
    }
    match ok {
        true => Ok(()),
        false => Err(Failure::check_reported(format!(
            "{} answers not {}",
            tally.missed + tally.errors,
            expectation(&args)
        ))),
    }
}
