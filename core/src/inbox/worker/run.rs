//! A worker's loops: leasing batches, running the handler on each event,
//! and settling each (completions recorded several at a time by the flusher).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt as _;
use futures_util::future::Either;
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument as _;

use super::{Job, JobEvent, Ran, Settle, Shared, ShutdownSignal, Tried, WorkerReport};
use crate::inbox::gates::{DEFER_BUSY, Limit, Permit, Selector, limit_for};
use crate::inbox::{Attempt, AttemptOutcome, ClaimToken, InboxError, LeasedEvent, Transition};

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
    /// The attempt, for the history.
    tried: Tried,
}

pub(super) async fn run_loop<T: JobEvent>(
    shared: Arc<Shared<T>>,
    mut signal: ShutdownSignal,
    completions: mpsc::UnboundedSender<Completion>,
) -> WorkerReport {
    let config = &shared.config;
    let mut report = WorkerReport::default();
    let mut failures = 0u32;
    // The previous batch's completions on their way to the store: the next
    // lease is asked for meanwhile (one round trip and commit off each
    // batch's path), and the batch after it starts once they are recorded.
    let mut recording: Option<Pin<Box<dyn Future<Output = ()> + Send + '_>>> = None;
    while !signal.is_triggered() {
        let token = ClaimToken::random();
        let lease = shared
            .inbox
            .lease(token, config.batch, config.lease, config.max_attempts);
        let leased = match recording.take() {
            Some(previous) => lease_beside(&shared, token, lease, previous).await,
            None => lease.await,
        };
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
        let leased = events.len() as u64;
        let (ran, unrecorded) = run_batch(&shared, &signal, token, events, &completions).await;
        report.add(ran);
        if let Some((held, flushing)) = unrecorded {
            recording = Some(Box::pin(await_recorded(&shared, token, held, flushing)));
        }
        if ran.deferred == leased {
            // Every event waits for a permit: no hurry to lease them again.
            idle(&mut signal, config.poll_interval).await;
        }
    }
    if let Some(recorded) = recording.take() {
        recorded.await;
    }
    report
}

/// The next lease, asked for while the previous batch's completions are
/// recorded (`previous`); answers once both are done. Events leased before
/// then are renewed while they wait: another worker must not take them
/// over before this loop runs them.
async fn lease_beside<T>(
    shared: &Shared<T>,
    token: ClaimToken,
    lease: impl Future<Output = Result<Vec<LeasedEvent>, InboxError>>,
    mut previous: Pin<Box<dyn Future<Output = ()> + Send + '_>>,
) -> Result<Vec<LeasedEvent>, InboxError> {
    let lease = pin!(lease);
    let leased = match futures_util::future::select(lease, previous.as_mut()).await {
        Either::Left((leased, _)) => leased,
        Either::Right(((), lease)) => return lease.await,
    };
    let waiting: Vec<String> = leased
        .as_ref()
        .map(|events| events.iter().map(|e| e.meta.key.clone()).collect())
        .unwrap_or_default();
    if waiting.is_empty() {
        previous.await;
    } else {
        while_renewing(shared, token, &Mutex::new(waiting), None, previous).await;
    }
    leased
}

/// Waits until the flusher has recorded (or given up on) a batch's
/// completions, renewing their leases meanwhile: an event is never left
/// unrenewed before its completion is recorded.
async fn await_recorded<T>(
    shared: &Shared<T>,
    token: ClaimToken,
    held: Arc<Mutex<Vec<String>>>,
    flushing: Vec<oneshot::Receiver<()>>,
) {
    let recorded = async {
        for done in flushing {
            // `Err`: the flusher is gone; the lease will expire.
            let _ = done.await;
        }
    };
    while_renewing(shared, token, &held, None, recorded).await;
}

/// Records the completions the loops send, several at a time: while one
/// [`Inbox::complete_many`] is on its way, the next completions gather, so
/// fast handlers share a round trip and a commit (across the worker's
/// loops), and a slow handler's completion is recorded as soon as it
/// finishes. Ends once every loop has ended and everything sent is recorded.
/// A batch's completions are recorded before its loop runs the next batch
/// (whose lease is asked for meanwhile), and their leases renewed until
/// then.
pub(super) async fn flush_loop<T>(
    shared: Arc<Shared<T>>,
    mut flushing: mpsc::UnboundedReceiver<Completion>,
) -> WorkerReport {
    let mut report = WorkerReport::default();
    let mut done = Vec::new();
    let recording = shared.config.history && shared.inbox.keeps_attempts();
    while flushing.recv_many(&mut done, 1024).await > 0 {
        // The attempts as they are recorded if their completions apply:
        // with them where the inbox records both in one commit.
        let ended = std::time::SystemTime::now();
        let entries = recording.then(|| {
            done.iter()
                .map(|c| {
                    let outcome = completed_outcome(c.unknown_type);
                    let attempt = attempt_of(&shared, c.tried, outcome, None, ended);
                    (c.key.as_str(), c.token, attempt)
                })
                .collect()
        });
        let completed = complete_all(&shared, &done, entries, &mut report).await;
        let mut history = Vec::new();
        for (i, completion) in done.drain(..).enumerate() {
            completion
                .held
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|k| *k != completion.key);
            drop(completion.recorded);
            let Some((transitions, recorded)) = &completed else {
                continue;
            };
            match transitions.get(i) {
                Some(Transition::Stale) => {
                    history.push((
                        completion.key,
                        completion.tried,
                        AttemptOutcome::LeaseLost,
                        None,
                    ));
                }
                Some(Transition::Applied) if !recorded => {
                    let outcome = completed_outcome(completion.unknown_type);
                    history.push((completion.key, completion.tried, outcome, None));
                }
                _ => {}
            }
        }
        record(&shared, history).await;
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
) -> (WorkerReport, Option<Unrecorded>) {
    let held: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(
        events.iter().map(|e| e.meta.key.clone()).collect(),
    ));
    let release = |key: &str| {
        held.lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|k| k != key);
    };
    // The permit the running event holds, renewed with the leases.
    let permit: HeldPermit = Mutex::new(None);
    let work = async {
        let mut report = WorkerReport::default();
        let mut flushing = Vec::new();
        // Selectors refused a permit in this batch, and for how long.
        let mut refused: Vec<(Selector, Duration)> = Vec::new();
        for event in events {
            let key = event.meta.key.clone();
            if signal.is_triggered() {
                settle_one(shared, &key, token, &Settle::HandBack, &mut report).await;
                release(&key);
                continue;
            }
            let gate = limit_for(
                &shared.config.limits,
                &event.meta.scheme,
                event.meta.event_type.as_deref(),
            )
            .cloned();
            if let Some((selector, limit)) = &gate {
                let wait = match refused.iter().find(|(s, _)| s == selector) {
                    Some((_, wait)) => Some(*wait),
                    None => take_permit(shared, selector, *limit, &key).await,
                };
                if let Some(wait) = wait {
                    if !refused.iter().any(|(s, _)| s == selector) {
                        refused.push((selector.clone(), wait));
                    }
                    defer(shared, &key, token, wait, &mut report).await;
                    release(&key);
                    continue;
                }
                *permit.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((selector.clone(), *limit, key.clone()));
            }
            let (settle, tried) = run_one(shared, event).await;
            if let Some((selector, _)) = &gate {
                permit.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Err(error) = shared.inbox.release_permit(selector, &key).await {
                    tracing::warn!(key = %key, error = %error, "returning an inbox permit failed; it frees itself when its hold ends");
                }
            }
            let tried = Some(tried);
            if let (Settle::Complete | Settle::CompleteUnknown, Some(tried)) = (&settle, tried) {
                let (recorded, done) = oneshot::channel();
                let completion = Completion {
                    key: key.clone(),
                    token,
                    unknown_type: matches!(settle, Settle::CompleteUnknown),
                    held: Arc::clone(&held),
                    recorded,
                    tried,
                };
                if completions.send(completion).is_ok() {
                    flushing.push(done);
                    continue;
                }
            }
            let settled = settle_one(shared, &key, token, &settle, &mut report).await;
            release(&key);
            if let Some(tried) = tried {
                let (outcome, error) = attempt_outcome(&settle, tried, settled);
                record(shared, vec![(key, tried, outcome, error)]).await;
            }
        }
        (report, flushing)
    };
    let (report, flushing) = while_renewing(shared, token, &held, Some(&permit), work).await;
    let unrecorded = (!flushing.is_empty()).then(|| (Arc::clone(&held), flushing));
    (report, unrecorded)
}

/// A batch's completions sent to the flusher and not yet recorded: the
/// keys still held (renewed until then), and one receiver per completion.
type Unrecorded = (Arc<Mutex<Vec<String>>>, Vec<oneshot::Receiver<()>>);

/// The permit the running event of a batch holds: its selector, limit and
/// holder.
type HeldPermit = Mutex<Option<(Selector, Limit, String)>>;

/// Runs `work` while renewing, every third of the lease, the leases of the
/// `held` keys (as they are at each renewal) and the `permit`, if any;
/// answers `work`'s output.
async fn while_renewing<T, F: Future>(
    shared: &Shared<T>,
    token: ClaimToken,
    held: &Mutex<Vec<String>>,
    permit: Option<&HeldPermit>,
    work: F,
) -> F::Output {
    let work = pin!(work);
    let renew = pin!(renew_leases(shared, token, held, permit));
    match futures_util::future::select(work, renew).await {
        Either::Left((output, _)) => output,
        Either::Right((never, _)) => match never {},
    }
}

/// Renews, every third of the lease, the leases of the `held` keys and the
/// permit, if any. Never ends.
async fn renew_leases<T>(
    shared: &Shared<T>,
    token: ClaimToken,
    held: &Mutex<Vec<String>>,
    permit: Option<&HeldPermit>,
) -> std::convert::Infallible {
    let every = shared.config.lease / 3;
    loop {
        tokio::time::sleep(every).await;
        let keys = held.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let running = permit.and_then(|p| p.lock().unwrap_or_else(|e| e.into_inner()).clone());
        if let Some((selector, limit, holder)) = running {
            // A renewal by the holder: granted while the permit is held.
            let renewed = shared
                .inbox
                .acquire_permit(&selector, limit, &holder, shared.config.lease)
                .await;
            if let Err(error) = renewed {
                tracing::warn!(key = %holder, error = %error, "renewing an inbox permit failed");
            }
        }
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
}

/// Takes a permit for `key` under `limit`: `None` when granted, else how
/// long to defer the event (a store error defers it too: the limit may
/// protect something the handler calls).
async fn take_permit<T>(
    shared: &Shared<T>,
    selector: &Selector,
    limit: Limit,
    key: &str,
) -> Option<Duration> {
    match shared
        .inbox
        .acquire_permit(selector, limit, key, shared.config.lease)
        .await
    {
        Ok(Permit::Granted) => None,
        Ok(Permit::Denied { retry_after }) => {
            let full = if retry_after == DEFER_BUSY {
                "concurrency"
            } else {
                "rate"
            };
            crate::inbox::signals::permit_denied(full);
            Some(retry_after)
        }
        Err(error) => {
            tracing::warn!(key = %key, error = %error, "taking an inbox permit failed; deferring the event");
            Some(DEFER_BUSY)
        }
    }
}

/// Hands an event its limit refused back unstarted, due after `wait`
/// (within 10 ms and 5 s).
async fn defer<T>(
    shared: &Shared<T>,
    key: &str,
    token: ClaimToken,
    wait: Duration,
    report: &mut WorkerReport,
) {
    let wait = wait.clamp(Duration::from_millis(10), Duration::from_secs(5));
    match shared.inbox.defer(key, token, wait).await {
        Ok(Transition::Applied) => report.deferred += 1,
        Ok(Transition::Stale) => {
            tracing::warn!(key = %key, "inbox deferral refused: the lease was taken over");
            report.stale += 1;
        }
        Err(error) => {
            // The lease expires and the event is due again then.
            tracing::warn!(key = %key, error = %error, "deferring an inbox event failed");
            report.deferred += 1;
        }
    }
}

/// Runs the handler for one event: decode, timeout, panic catching.
async fn run_one<T: JobEvent>(shared: &Shared<T>, event: LeasedEvent) -> (Settle, Tried) {
    let config = &shared.config;
    let attempt = event.attempt;
    let mut tried = Tried {
        number: attempt,
        started_at: std::time::SystemTime::now(),
        failure: None,
    };
    let span = tracing::info_span!(
        "inbox_job",
        key = %event.meta.key,
        scheme = %event.meta.scheme,
        attempt,
    );
    let token = event.token;
    let outcome = async {
        let typed = T::decode(event.meta.event_type.as_deref(), &event.body).map_err(|e| {
            (
                AttemptOutcome::Failed,
                format!("the body does not fit the handler's type: {e}"),
            )
        })?;
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
            Ok(Ok(result)) => result.map_err(|e| (AttemptOutcome::Failed, e)),
            Ok(Err(_)) => Err((AttemptOutcome::Panicked, "handler panicked".to_owned())),
            Err(_) => Err((
                AttemptOutcome::TimedOut,
                format!("handler timed out after {} ms", config.timeout.as_millis()),
            )),
        }
    }
    .instrument(span.clone())
    .await;
    let _enter = span.enter();
    let settle = match outcome {
        Ok(Ran::Succeeded) => Settle::Complete,
        Ok(Ran::UnknownType) => Settle::CompleteUnknown,
        Ok(Ran::Recorded(transition)) => Settle::Recorded(transition),
        Err((kind, error)) => {
            tried.failure = Some(kind);
            if attempt >= config.max_attempts {
                tracing::warn!(error = %error, "inbox event failed its last attempt; dead-lettering");
                Settle::DeadLetter(error)
            } else {
                tracing::info!(error = %error, "inbox event failed; retrying");
                Settle::Retry(config.backoff.delay(attempt), error)
            }
        }
    };
    (settle, tried)
}

/// What the history records of a settled attempt: the handler's outcome,
/// or [`AttemptOutcome::LeaseLost`] when the settlement was refused (the
/// lease had been taken over).
fn attempt_outcome(
    settle: &Settle,
    tried: Tried,
    settled: Option<Transition>,
) -> (AttemptOutcome, Option<String>) {
    let error = match settle {
        Settle::Retry(_, error) | Settle::DeadLetter(error) => Some(error.clone()),
        _ => None,
    };
    let refused = matches!(settled, Some(Transition::Stale))
        || matches!(settle, Settle::Recorded(Transition::Stale));
    if refused {
        let why = "outcome refused: the lease had run out and another attempt took the event over";
        let error = match error {
            Some(error) => format!("{why} (the handler's outcome: {error})"),
            None => format!("{why} (the handler succeeded)"),
        };
        return (AttemptOutcome::LeaseLost, Some(error));
    }
    match settle {
        Settle::CompleteUnknown => (AttemptOutcome::UnknownType, None),
        _ => (tried.failure.unwrap_or(AttemptOutcome::Succeeded), error),
    }
}

/// Appends finished attempts to the inbox's history in one call; a store
/// error loses the entries (a diagnostic), never the events.
async fn record<T>(
    shared: &Shared<T>,
    history: Vec<(String, Tried, AttemptOutcome, Option<String>)>,
) {
    if !shared.config.history || history.is_empty() || !shared.inbox.keeps_attempts() {
        return;
    }
    let ended = std::time::SystemTime::now();
    let attempts: Vec<(String, Attempt)> = history
        .into_iter()
        .map(|(key, tried, outcome, error)| (key, attempt_of(shared, tried, outcome, error, ended)))
        .collect();
    let entries: Vec<(&str, Attempt)> = attempts
        .iter()
        .map(|(key, attempt)| (key.as_str(), attempt.clone()))
        .collect();
    if let Err(error) = shared.inbox.record_attempts(&entries).await {
        tracing::warn!(events = entries.len(), error = %error, "recording inbox attempts failed; their history misses them");
    }
}

/// The history entry of a finished attempt, ended at `ended`.
fn attempt_of<T>(
    shared: &Shared<T>,
    tried: Tried,
    outcome: AttemptOutcome,
    error: Option<String>,
    ended: std::time::SystemTime,
) -> Attempt {
    let attempt = Attempt::new(tried.number, tried.started_at, ended, outcome)
        .with_worker(&*shared.config.name);
    match error {
        Some(error) => attempt.with_error(error),
        None => attempt,
    }
}

/// What the history records of a completion that applied.
fn completed_outcome(unknown_type: bool) -> AttemptOutcome {
    if unknown_type {
        AttemptOutcome::UnknownType
    } else {
        AttemptOutcome::Succeeded
    }
}

/// Records `completions` with one [`Inbox::complete_many`], retrying store
/// errors a few times within the lease; with `recorded` (the completions
/// with their attempts), the first try is [`Inbox::complete_many_recorded`],
/// which records the attempts of those that apply with them. Answers the
/// transitions, and whether the applied ones' attempts are recorded.
async fn complete_all<T>(
    shared: &Shared<T>,
    completions: &[Completion],
    mut recorded: Option<Vec<(&str, ClaimToken, Attempt)>>,
    report: &mut WorkerReport,
) -> Option<(Vec<Transition>, bool)> {
    let done: Vec<(&str, ClaimToken)> = completions
        .iter()
        .map(|c| (c.key.as_str(), c.token))
        .collect();
    let mut wait = Duration::from_millis(50);
    for _ in 0..4 {
        // Recorded on the first try only: a retry completes alone, so that
        // a store refusing the history cannot hold the completions back.
        let entries = recorded.take();
        let result = match &entries {
            Some(entries) => shared.inbox.complete_many_recorded(entries).await,
            None => shared.inbox.complete_many(&done).await,
        };
        match result {
            Ok(transitions) => {
                for (completion, transition) in completions.iter().zip(transitions.iter().copied())
                {
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
                return Some((transitions, entries.is_some()));
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
    None
}

/// Records an outcome, retrying store errors a few times within the lease.
async fn settle_one<T>(
    shared: &Shared<T>,
    key: &str,
    token: ClaimToken,
    settle: &Settle,
    report: &mut WorkerReport,
) -> Option<Transition> {
    let inbox = &shared.inbox;
    let mut wait = Duration::from_millis(50);
    for _ in 0..4 {
        let result: Result<Transition, InboxError> = match settle {
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
                return Some(Transition::Applied);
            }
            Ok(Transition::Stale) => {
                tracing::warn!(key = %key, "inbox outcome refused: the lease was taken over");
                crate::inbox::signals::attempt("stale");
                report.stale += 1;
                return Some(Transition::Stale);
            }
            Err(error) => {
                tracing::warn!(key = %key, error = %error, "recording an inbox outcome failed; retrying");
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
    }
    tracing::error!(key = %key, "could not record an inbox outcome; the lease will expire and the event run again");
    None
}
