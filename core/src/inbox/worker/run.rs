//! A worker's loops: leasing batches, running the handler on each event,
//! and settling each (completions recorded several at a time by the flusher).

use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt as _;
use futures_util::future::Either;
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument as _;

use super::{Job, JobEvent, Ran, Settle, Shared, ShutdownSignal, WorkerReport};
use crate::inbox::{ClaimToken, InboxError, LeasedEvent, Transition};

/// A completion waiting for the flusher.
pub(super) struct Completion {
    key: String,
    token: ClaimToken,
    /// Completed without running the handler (a type it does not know).
    unknown_type: bool,
    /// The batch's held keys: the flusher takes `key` out once recorded (or
    /// given up), so that its lease is renewed until then.
    held: Arc<Mutex<Vec<String>>>,
    /// Dropped once recorded (or given up).
    recorded: oneshot::Sender<()>,
}

pub(super) async fn run_loop<T: JobEvent>(
    shared: Arc<Shared<T>>,
    mut signal: ShutdownSignal,
    completions: mpsc::UnboundedSender<Completion>,
) -> WorkerReport {
    let config = &shared.config;
    let mut report = WorkerReport::default();
    let mut failures = 0u32;
    while !signal.is_triggered() {
        let token = ClaimToken::random();
        let leased = shared
            .inbox
            .lease(token, config.batch, config.lease, config.max_attempts)
            .await;
        let events = match leased {
            Ok(events) => {
                failures = 0;
                events
            }
            Err(error) => {
                failures = failures.saturating_add(1);
                tracing::warn!(error = %error, "inbox lease failed; retrying");
                let wait = config.poll_interval.saturating_mul(failures.min(10));
                idle(&mut signal, wait).await;
                continue;
            }
        };
        if events.is_empty() {
            idle(&mut signal, config.poll_interval).await;
            continue;
        }
        report.add(run_batch(&shared, &signal, token, events, &completions).await);
    }
    report
}

/// Records the completions the loops send, several at a time: while one
/// [`Inbox::complete_many`] is on its way, the next completions gather, so
/// fast handlers share a round trip and a commit (across the worker's
/// loops), and a slow handler's completion is recorded as soon as it
/// finishes. Ends once every loop has ended and everything sent is recorded.
/// A batch waits for its completions before its loop leases again, and
/// renews their leases meanwhile.
pub(super) async fn flush_loop<T>(
    shared: Arc<Shared<T>>,
    mut flushing: mpsc::UnboundedReceiver<Completion>,
) -> WorkerReport {
    let mut report = WorkerReport::default();
    let mut done = Vec::new();
    while flushing.recv_many(&mut done, 1024).await > 0 {
        complete_all(&shared, &done, &mut report).await;
        for completion in done.drain(..) {
            completion
                .held
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|k| *k != completion.key);
            drop(completion.recorded);
        }
    }
    report
}

/// Sleeps for `wait`, or until shutdown.
async fn idle(signal: &mut ShutdownSignal, wait: Duration) {
    let sleep = pin!(tokio::time::sleep(wait));
    let stop = pin!(signal.triggered());
    futures_util::future::select(sleep, stop).await;
}

/// Runs a leased batch one event at a time, renewing the leases of every
/// event still held meanwhile. A succeeded event goes to the flusher
/// ([`flush_loop`]) and stays held (renewed) until its completion is
/// recorded; the batch ends once all are. One whose completion the flusher
/// cannot record stays leased, and is run again after its lease expires:
/// never marked done without its record.
async fn run_batch<T: JobEvent>(
    shared: &Shared<T>,
    signal: &ShutdownSignal,
    token: ClaimToken,
    events: Vec<LeasedEvent>,
    completions: &mpsc::UnboundedSender<Completion>,
) -> WorkerReport {
    let held: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(
        events.iter().map(|e| e.meta.key.clone()).collect(),
    ));
    let release = |key: &str| {
        held.lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|k| k != key);
    };
    let work = pin!(async {
        let mut report = WorkerReport::default();
        let mut flushing = Vec::new();
        for event in events {
            let key = event.meta.key.clone();
            let settle = if signal.is_triggered() {
                Settle::HandBack
            } else {
                run_one(shared, event).await
            };
            if matches!(settle, Settle::Complete | Settle::CompleteUnknown) {
                let (recorded, done) = oneshot::channel();
                let completion = Completion {
                    key: key.clone(),
                    token,
                    unknown_type: matches!(settle, Settle::CompleteUnknown),
                    held: Arc::clone(&held),
                    recorded,
                };
                if completions.send(completion).is_ok() {
                    flushing.push(done);
                    continue;
                }
            }
            settle_one(shared, &key, token, settle, &mut report).await;
            release(&key);
        }
        for done in flushing {
            // `Err`: the flusher is gone; the lease will expire.
            let _ = done.await;
        }
        report
    });
    let renew = pin!(async {
        let every = shared.config.lease / 3;
        loop {
            tokio::time::sleep(every).await;
            let keys = held.lock().unwrap_or_else(|e| e.into_inner()).clone();
            for key in keys {
                match shared.inbox.extend(&key, token, shared.config.lease).await {
                    Ok(Transition::Applied) => {}
                    Ok(Transition::Stale) => {
                        tracing::warn!(key = %key, "inbox lease lost (expired and taken over); this attempt's outcome will be refused");
                    }
                    Err(error) => {
                        tracing::warn!(key = %key, error = %error, "renewing an inbox lease failed");
                    }
                }
            }
        }
    });
    match futures_util::future::select(work, renew).await {
        Either::Left((report, _)) => report,
        Either::Right(((), _)) => unreachable!("the renewal loop never ends"),
    }
}

/// Runs the handler for one event: decode, timeout, panic catching.
async fn run_one<T: JobEvent>(shared: &Shared<T>, event: LeasedEvent) -> Settle {
    let config = &shared.config;
    let attempt = event.attempt;
    let span = tracing::info_span!(
        "inbox_job",
        key = %event.meta.key,
        scheme = %event.meta.scheme,
        attempt,
    );
    let token = event.token;
    let outcome = async {
        let typed = T::decode(event.meta.event_type.as_deref(), &event.body)
            .map_err(|e| format!("the body does not fit the handler's type: {e}"))?;
        if let Some(event_type) = typed.unknown_type() {
            tracing::info!(
                event_type,
                "inbox event of a type the handler does not know; completed without running it"
            );
            return Ok(Ran::UnknownType);
        }
        let job = Job {
            event: typed,
            attempt,
            received_at: event.meta.received_at,
            meta: event.meta,
            body: event.body,
        };
        let handle = Arc::clone(&shared.handle);
        let run = AssertUnwindSafe(async move { handle(job, token).await }).catch_unwind();
        let started = std::time::Instant::now();
        let ran = tokio::time::timeout(config.timeout, run).await;
        crate::inbox::signals::handler_ran(started);
        match ran {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err("handler panicked".to_owned()),
            Err(_) => Err(format!(
                "handler timed out after {} ms",
                config.timeout.as_millis()
            )),
        }
    }
    .instrument(span.clone())
    .await;
    let _enter = span.enter();
    match outcome {
        Ok(Ran::Succeeded) => Settle::Complete,
        Ok(Ran::UnknownType) => Settle::CompleteUnknown,
        Ok(Ran::Recorded(transition)) => Settle::Recorded(transition),
        Err(error) if attempt >= config.max_attempts => {
            tracing::warn!(error = %error, "inbox event failed its last attempt; dead-lettering");
            Settle::DeadLetter(error)
        }
        Err(error) => {
            tracing::info!(error = %error, "inbox event failed; retrying");
            Settle::Retry(config.backoff.delay(attempt), error)
        }
    }
}

/// Records `completions` with one [`Inbox::complete_many`], retrying store
/// errors a few times within the lease.
async fn complete_all<T>(
    shared: &Shared<T>,
    completions: &[Completion],
    report: &mut WorkerReport,
) {
    let done: Vec<(&str, ClaimToken)> = completions
        .iter()
        .map(|c| (c.key.as_str(), c.token))
        .collect();
    let mut wait = Duration::from_millis(50);
    for _ in 0..4 {
        match shared.inbox.complete_many(&done).await {
            Ok(transitions) => {
                for (completion, transition) in completions.iter().zip(transitions) {
                    let key = &completion.key;
                    match transition {
                        Transition::Applied if completion.unknown_type => {
                            report.unknown_type += 1;
                            crate::inbox::signals::attempt("unknown_type");
                        }
                        Transition::Applied => {
                            report.completed += 1;
                            crate::inbox::signals::attempt("completed");
                        }
                        Transition::Stale => {
                            tracing::warn!(key = %key, "inbox outcome refused: the lease was taken over");
                            crate::inbox::signals::attempt("stale");
                            report.stale += 1;
                        }
                    }
                }
                return;
            }
            Err(error) => {
                tracing::warn!(events = done.len(), error = %error, "recording inbox completions failed; retrying");
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
    }
    tracing::error!(
        events = done.len(),
        "could not record inbox completions; the leases will expire and the events run again"
    );
}

/// Records an outcome, retrying store errors a few times within the lease.
async fn settle_one<T>(
    shared: &Shared<T>,
    key: &str,
    token: ClaimToken,
    settle: Settle,
    report: &mut WorkerReport,
) {
    let inbox = &shared.inbox;
    let mut wait = Duration::from_millis(50);
    for _ in 0..4 {
        let result: Result<Transition, InboxError> = match &settle {
            Settle::Complete | Settle::CompleteUnknown => inbox.complete(key, token).await,
            Settle::Retry(delay, error) => inbox.retry(key, token, *delay, error).await,
            Settle::DeadLetter(error) => inbox.dead_letter(key, token, error).await,
            Settle::HandBack => inbox.release(key, token).await,
            Settle::Recorded(transition) => Ok(*transition),
        };
        match result {
            Ok(Transition::Applied) => {
                let outcome = match settle {
                    Settle::Complete => {
                        report.completed += 1;
                        "completed"
                    }
                    Settle::CompleteUnknown => {
                        report.unknown_type += 1;
                        "unknown_type"
                    }
                    Settle::Retry(..) => {
                        report.retried += 1;
                        "retried"
                    }
                    Settle::DeadLetter(_) => {
                        report.dead_lettered += 1;
                        "dead_lettered"
                    }
                    Settle::HandBack => {
                        report.handed_back += 1;
                        "handed_back"
                    }
                    Settle::Recorded(_) => {
                        report.completed += 1;
                        "completed"
                    }
                };
                crate::inbox::signals::attempt(outcome);
                return;
            }
            Ok(Transition::Stale) => {
                tracing::warn!(key = %key, "inbox outcome refused: the lease was taken over");
                crate::inbox::signals::attempt("stale");
                report.stale += 1;
                return;
            }
            Err(error) => {
                tracing::warn!(key = %key, error = %error, "recording an inbox outcome failed; retrying");
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
    }
    tracing::error!(key = %key, "could not record an inbox outcome; the lease will expire and the event run again");
}
