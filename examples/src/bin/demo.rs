//! Run with: cargo run -p examples --bin demo
//!
//! The whole story in one process: the axum receiver on 127.0.0.1:0 with
//! in-process dedup and SQLite in a temp directory, the provider simulator
//! against it with duplicates, reordering, forgeries (tampered bodies, a wrong
//! secret) and stale replays, then the summary, the final state of every
//! email, and a check of the invariants:
//!
//! * every genuine event applied exactly once (counted in the database's event log);
//! * every genuine delivery and sender retry acknowledged with a 2xx;
//! * every forgery and stale replay rejected with 401, and never applied;
//! * unknown event types acknowledged and not applied;
//! * each email's final state, and the suppression list, the ones its events
//!   imply (the same pure state machine folded over the events sorted by
//!   their own timestamps).
//!
//! Exits non-zero when an invariant fails. The simulator's options (see
//! `simulator --help`) change the run: `cargo run -p examples --bin demo --
//! --seed 3 --events 1000`.
//!
//! `--inbox` runs the same story in inbox mode: deliveries are stored in an
//! SQLite inbox (temp dir) and answered `202`, four `Worker`s apply them, and
//! the check waits for the inbox to drain (nothing pending, nothing leased,
//! no dead letter) before the same invariants.
//!
//! `--inbox --serve` then keeps the receiver running, with the operators'
//! console mounted at `/ops/webhooks` (every local request is an admin: a
//! demo on 127.0.0.1 only), and prints its URL; Ctrl-C stops it.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use examples::app::{self, WEBHOOK_PATH, router};
use examples::event::EmailEvent;
use examples::schemes::Scheme;
use examples::simulator::{Intent, Outcome, Plan, SimulatorArgs, SimulatorConfig, Summary, run};
use examples::state::{EmailState, Ledger};
use examples::store::EmailStore;
use tower_webhooks::core::console::Access;
use tower_webhooks::core::dedup::MemoryStore;
use tower_webhooks::core::inbox::{Inbox, Job, Shutdown, Worker, inbox_from_url};

/// The command line: `--inbox`, and the simulator's options.
#[derive(Parser)]
#[command(
    name = "demo",
    about = "The receiver and the provider simulator in one process, with an invariant check."
)]
struct DemoArgs {
    /// Store deliveries in an SQLite inbox and apply them with four workers.
    #[arg(long)]
    inbox: bool,
    /// With `--inbox`: keep the receiver and the console running after the
    /// demo and print the console's URL (Ctrl-C stops).
    #[arg(long, requires = "inbox")]
    serve: bool,
    #[command(flatten)]
    simulator: SimulatorArgs,
}

/// The secret from the Standard Webhooks specification's examples: public, for demos only.
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

#[tokio::main]
async fn main() -> ExitCode {
    match demo().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("demo: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn demo() -> Result<bool, Box<dyn std::error::Error>> {
    let args = DemoArgs::parse();
    let inbox_mode = args.inbox;
    let dir = tempfile::tempdir()?;
    let store = EmailStore::open_in(dir.path()).await?;
    let mut workers = None;
    let receiver = if inbox_mode {
        let url = format!("sqlite://{}", dir.path().join("inbox.db").display());
        let inbox = inbox_from_url(&url).await?;
        let worker = email_worker(&inbox, &store);
        let shutdown = Shutdown::new();
        workers = Some((
            Arc::clone(&inbox),
            shutdown.clone(),
            tokio::spawn(worker.run(shutdown.signal())),
        ));
        app::inbox_receiver(Scheme::Standard, SECRET, inbox)?
    } else {
        app::receiver(Scheme::Standard, SECRET, Arc::new(MemoryStore::new()))?
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut app = router(receiver, store.clone());
    if let Some((inbox, ..)) = &workers {
        // The console on the same server. A demo on 127.0.0.1: every request
        // is an admin's. In an app, decide from your session or auth layer.
        let console = tower_webhooks::Console::new(Arc::clone(inbox))
            .authorize(|_| Access::Admin("demo".to_owned()));
        app = app.nest_service("/ops/webhooks", console);
    }
    let server = tokio::spawn(
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .into_future(),
    );

    let config = args.simulator.apply(SimulatorConfig {
        url: format!("http://{address}{WEBHOOK_PATH}"),
        secret: SECRET.to_owned(),
        emails: 30,
        events: 400,
        concurrency: 16,
        duplicates: 0.15,
        reorder: 0.3,
        tampered: 0.04,
        wrong_secret_rate: 0.04,
        stale: 0.04,
        unknown: 0.02,
        seed: 7,
        // The 409 for a delivery in flight asks for the rest of the lease (a
        // minute); the attempt holding it ends in milliseconds.
        max_retry_after: std::time::Duration::from_secs(1),
        ..SimulatorConfig::default()
    });
    let plan = Plan::generate(&config)?;
    let planned: Vec<String> = plan
        .counts()
        .iter()
        .map(|(intent, n)| format!("{n} {intent}"))
        .collect();
    println!(
        "receiver  http://{address}{WEBHOOK_PATH}  (axum, {}, SQLite in a temp dir)",
        if inbox_mode {
            "durable inbox (SQLite) + 4 workers"
        } else {
            "in-process dedup"
        }
    );
    println!(
        "simulator {} emails, {} deliveries: {}  (seed {}, concurrency {})\n",
        config.emails,
        plan.deliveries.len(),
        planned.join(", "),
        config.seed,
        config.concurrency
    );

    let summary = run(&config, &plan).await?;
    println!("{summary}\n");
    let mut drained = true;
    let serving = workers
        .as_ref()
        .filter(|_| args.serve)
        .map(|(inbox, ..)| Arc::clone(inbox));
    if let Some((inbox, shutdown, running)) = workers {
        // Every accepted delivery is applied by the workers: wait for the
        // inbox to drain (or give up after a minute), then stop them.
        let started = std::time::Instant::now();
        let stats = loop {
            let stats = inbox.stats().await?;
            if (stats.pending == 0 && stats.in_flight == 0)
                || started.elapsed() > std::time::Duration::from_secs(60)
            {
                break stats;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        shutdown.trigger();
        let report = running.await?;
        drained = stats.pending == 0 && stats.in_flight == 0 && stats.dead == 0;
        println!(
            "[{}] inbox drained: {} completed by the workers, {} pending, {} leased, {} dead letters\n",
            if drained { " ok " } else { "FAIL" },
            report.completed,
            stats.pending,
            stats.in_flight,
            stats.dead
        );
    }

    let emails = store.emails().await?;
    let suppressions = store.suppressions().await?;
    let applications = store.applications().await?;
    print_table(&plan, &emails, suppressions.len());

    let ok = check(&plan, &summary, &emails, &suppressions, &applications) && drained;
    if let Some(inbox) = serving {
        // Keep receiving, with workers again (replays from the console run).
        let shutdown = Shutdown::new();
        let running = tokio::spawn(email_worker(&inbox, &store).run(shutdown.signal()));
        println!(
            "\nconsole   http://{address}/ops/webhooks/  (receiver still on http://{address}{WEBHOOK_PATH}; Ctrl-C stops)"
        );
        tokio::signal::ctrl_c().await?;
        shutdown.trigger();
        running.await?;
    }
    let _ = stop.send(());
    server.await??;
    store.close().await;
    Ok(ok)
}

/// Four workers applying the email events to `store`.
fn email_worker(inbox: &Arc<dyn Inbox>, store: &EmailStore) -> Worker<EmailEvent> {
    let apply = store.clone();
    Worker::builder(Arc::clone(inbox))
        .concurrency(4)
        .poll_interval(std::time::Duration::from_millis(20))
        .handler(move |job: Job<EmailEvent>| {
            let store = apply.clone();
            async move { store.apply(&job.event).await.map(drop) }
        })
}

fn print_table(plan: &Plan, emails: &[EmailState], suppressed: usize) {
    let origin = plan
        .genuine_events()
        .filter_map(|e| e.envelope().map(|e| e.occurred_at))
        .min()
        .unwrap_or(0);
    let secs = |t: Option<u64>| {
        t.map_or_else(
            || "-".to_owned(),
            |t| format!("+{:.3}s", (t - origin.min(t)) as f64 / 1000.0),
        )
    };
    println!(
        "{:<8} {:<20} {:<10} {:>9} {:>9} {:>9} {:>9}",
        "email", "recipient", "status", "at", "opened", "clicked", "unsub"
    );
    let mut tally: BTreeMap<&str, usize> = BTreeMap::new();
    for e in emails {
        let status = e.status.map_or("-", |s| s.as_str());
        *tally.entry(status).or_default() += 1;
        println!(
            "{:<8} {:<20} {:<10} {:>9} {:>9} {:>9} {:>9}",
            e.email_id,
            e.recipient,
            status,
            secs(e.status_at),
            secs(e.opened_at),
            secs(e.clicked_at),
            secs(e.unsubscribed_at)
        );
    }
    let tally: Vec<String> = tally.iter().map(|(s, n)| format!("{n} {s}")).collect();
    let opened = emails.iter().filter(|e| e.opened_at.is_some()).count();
    let clicked = emails.iter().filter(|e| e.clicked_at.is_some()).count();
    println!(
        "{} emails: {}; {opened} opened, {clicked} clicked; {suppressed} addresses suppressed\n",
        emails.len(),
        tally.join(", ")
    );
}

/// How many outcomes of the `wanted` intents pass, of how many.
fn tally(summary: &Summary, wanted: &[Intent], pass: impl Fn(&Outcome) -> bool) -> (usize, usize) {
    let of: Vec<&Outcome> = summary
        .outcomes
        .iter()
        .filter(|o| wanted.contains(&o.intent))
        .collect();
    (of.iter().filter(|o| pass(o)).count(), of.len())
}

/// Checks the invariants, printing one line each; true when all hold.
fn check(
    plan: &Plan,
    summary: &Summary,
    emails: &[EmailState],
    suppressions: &[examples::state::Suppression],
    applications: &BTreeMap<String, u64>,
) -> bool {
    let mut all = true;
    let mut verdict = |holds: bool, what: String| {
        println!("[{}] {what}", if holds { " ok " } else { "FAIL" });
        all &= holds;
    };

    let genuine: Vec<_> = plan.genuine_events().collect();
    let ids: BTreeMap<&str, ()> = genuine
        .iter()
        .filter_map(|e| e.envelope().map(|e| (e.id, ())))
        .collect();
    let once = ids
        .keys()
        .filter(|id| applications.get(**id) == Some(&1))
        .count();
    let twice = applications.values().filter(|n| **n > 1).count();
    let missing = ids
        .keys()
        .filter(|id| !applications.contains_key(**id))
        .count();
    let foreign = applications
        .keys()
        .filter(|id| !ids.contains_key(id.as_str()))
        .count();
    verdict(
        once == ids.len() && twice == 0 && foreign == 0,
        format!(
            "every genuine event applied exactly once: {once}/{} once, {twice} more than once, {missing} never, {foreign} not genuine",
            ids.len()
        ),
    );

    let (acked, sent) = tally(
        summary,
        &[Intent::Genuine, Intent::Duplicate],
        Outcome::succeeded,
    );
    verdict(
        acked == sent,
        format!("every genuine delivery and sender retry acknowledged (2xx): {acked}/{sent}"),
    );
    for intent in [Intent::Tampered, Intent::WrongSecret, Intent::Stale] {
        let (refused, total) = tally(summary, &[intent], |o| o.status() == Some(401));
        verdict(
            refused == total,
            format!("every {intent} delivery rejected with 401: {refused}/{total}"),
        );
    }
    let (unknown_acked, unknown) = tally(summary, &[Intent::Unknown], Outcome::succeeded);
    verdict(
        unknown_acked == unknown,
        format!("unknown event types acknowledged (2xx), not applied: {unknown_acked}/{unknown}"),
    );

    let mut sorted = genuine.clone();
    sorted.sort_by_key(|e| e.envelope().map(|e| e.occurred_at));
    let expected = Ledger::from_events(sorted);
    let stored: BTreeMap<&str, &EmailState> =
        emails.iter().map(|e| (e.email_id.as_str(), e)).collect();
    let matching = expected
        .emails
        .iter()
        .filter(|(id, state)| stored.get(id.as_str()) == Some(state))
        .count();
    verdict(
        matching == expected.emails.len() && stored.len() == expected.emails.len(),
        format!(
            "each email's final state is the one its events imply: {matching}/{} (stored {})",
            expected.emails.len(),
            stored.len()
        ),
    );
    let expected_suppressions: Vec<_> = expected.suppressions.into_values().collect();
    verdict(
        expected_suppressions == suppressions,
        format!(
            "the suppression list is the one the events imply: {} stored, {} expected",
            suppressions.len(),
            expected_suppressions.len()
        ),
    );
    if all {
        println!("\nall invariants hold");
    }
    all
}
