//! Issue 37, "Done when", on RabbitMQ: a `RabbitMqInbox` (quorum queue,
//! publisher confirms, a Redis dedup store as the record of what was
//! accepted) never loses a delivery it acknowledged, never stores a forgery,
//! and a transactional handler commits each event's effect once, while
//! receiver processes are SIGKILLed and every connection to the broker is
//! cut (`rabbitmqctl close_all_connections`) again and again.
//!
//! Two receiver processes (this test binary, run as children) take signed
//! deliveries over HTTP/1.1 into the inbox (opened with `inbox_from_url`),
//! 32 in flight, each retried by its sender every 100 ms until a `2xx`, as
//! a provider does; one delivery in 25 is also sent forged (a bad
//! signature), once. A worker in this process drains the queue meanwhile,
//! with a transactional handler: the effect of delivery `n` is the file
//! `applied/<n>`, created with `create_new`. Throughout the sending, the
//! broker closes every connection of the test's virtual host again and
//! again (about once a second: the receivers' publishers waiting for their
//! confirms, and the worker holding leases), and in every round a receiver
//! is SIGKILLed and started again.
//!
//! At the end: every delivery was answered 2xx; every one answered 2xx was
//! applied, once; no forged delivery was answered 2xx or reached the
//! handler; nothing was dead-lettered.
//!
//! ```text
//! cargo test -p webhooks-core --features rabbitmq,redis-tls --test rabbitmq_inbox_chaos -- --nocapture
//! ```
//!
//! The test runs in a virtual host of its own (`webhooks_test_<unique>`, created and
//! deleted with `rabbitmqctl`), so that cutting its connections touches no
//! other client of the machine's broker, which is never stopped or
//! restarted. It needs RabbitMQ (`WEBHOOKS_RABBITMQ_URL`), Redis
//! (`WEBHOOKS_REDIS_URL`) and a `rabbitmqctl` allowed to manage the broker;
//! without them it skips, saying so, and under `CI=true` it fails.
//! `CHAOS_DELIVERIES` (default 2,000), `CHAOS_PACE_MS` (a new delivery every
//! 25 ms) and `CHAOS_KILLS` (default 6 rounds) change the run.

#[path = "support/chaos.rs"]
mod chaos;
mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chaos::{ReceiverProcess, Receivers, Runs, Senders, env_number};
use webhooks_core::inbox::inbox_from_url;

/// One delivery in this many is also sent forged.
const FORGE_EVERY: usize = 25;

/// Every character but letters and digits percent-encoded (a store URL in
/// a query parameter).
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The child side: a receiver on the inbox `inbox_from_url` opens.
/// Ignored: only run by `ReceiverProcess::start`.
#[test]
#[ignore = "run by the chaos test as a receiver process"]
fn receiver_process() {
    chaos::receiver_child(chaos::open_from_env);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_deliveries_survive_receiver_kills_and_cut_connections() {
    let Some(broker) = support::rabbitmq_url().await else {
        return;
    };
    let Some(redis) = support::redis_url().await else {
        return;
    };
    let vhost = match support::VirtualHost::create() {
        Ok(vhost) => vhost,
        Err(error) => {
            assert!(!support::ci(), "{error}, and CI=true");
            eprintln!("SKIPPED: {error}");
            return;
        }
    };
    let run_started = Instant::now();
    let deliveries = env_number("CHAOS_DELIVERIES", 2_000);
    let kills = env_number("CHAOS_KILLS", 6);
    let pace = Duration::from_millis(env_number("CHAOS_PACE_MS", 25) as u64);
    let (base, _) = broker
        .rsplit_once('/')
        .expect("an amqp://host:port/vhost URL");
    let inbox_url = format!("{base}/{}?queue=chaos&dedup={}", vhost.0, encode(&redis));
    let env = [(chaos::INBOX_URL, inbox_url.clone())];

    // The queues, declared once here; the receivers find them.
    let inbox = inbox_from_url(&inbox_url).await.expect("open the inbox");

    // The worker, in this process, from the start.
    let effects = chaos::Effects::new();
    let runs = Arc::new(Runs::default());
    let working = chaos::Working::start(Arc::clone(&inbox), &effects, &runs);

    let receivers: Receivers = Arc::new(Mutex::new(vec![
        ReceiverProcess::start(&env).await,
        ReceiverProcess::start(&env).await,
    ]));
    let mut senders = Senders::start(&receivers, deliveries, pace, Some(FORGE_EVERY));

    // The faults, while the senders run: the broker closes every connection
    // of the virtual host again and again (each `rabbitmqctl` takes about a
    // second), and a receiver dies and comes back every round.
    let cutting = Arc::new(AtomicBool::new(true));
    let cutter = {
        let (cutting, name) = (Arc::clone(&cutting), vhost.0.clone());
        std::thread::spawn(move || {
            let mut cuts = 0usize;
            while cutting.load(Ordering::SeqCst) {
                support::rabbitmqctl(&["close_all_connections", "-p", &name, "chaos test: cut"])
                    .expect("close the virtual host's connections");
                cuts += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            cuts
        })
    };
    let mut rounds = 0;
    for round in 0..kills {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        if senders.all_started() {
            eprintln!("all deliveries sent before round {round}");
            break;
        }
        chaos::replace_receiver(&receivers, round % 2, &env).await;
        eprintln!(
            "round {round} at {:?}: a receiver SIGKILLed, {} sent",
            senders.start.elapsed(),
            senders.started()
        );
        rounds += 1;
    }
    while !senders.all_started() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cutting.store(false, Ordering::SeqCst);
    let cuts = tokio::task::spawn_blocking(move || cutter.join())
        .await
        .unwrap()
        .expect("the cutter failed");

    senders.finish().await;
    let sent_in = senders.start.elapsed();
    receivers.lock().unwrap().clear();

    // The worker drains the queue: every acknowledged delivery applied.
    let outcome = &senders.outcome;
    let drain_started = Instant::now();
    chaos::drain(inbox.as_ref(), &runs, outcome.acknowledged().len()).await;
    working.stop().await;
    let stats = inbox.stats().await.expect("stats");

    let verdict = chaos::Verdict::new(outcome, &runs, &effects);
    outcome.print_answers();
    eprintln!(
        "{deliveries} deliveries, {} acknowledged, {} applied; lost {}, committed twice {}, \
         runs beyond the first {}; {rounds} rounds (a receiver SIGKILLed), {cuts} cuts of \
         every connection; sent in {sent_in:?}, drained after {:?}; stats: pending {} in flight {} \
         completed {} dead {}; run {:?}",
        verdict.acknowledged,
        verdict.applied,
        verdict.lost.len(),
        verdict.committed_twice.len(),
        verdict.redelivered,
        drain_started.elapsed(),
        stats.pending,
        stats.in_flight,
        stats.completed,
        stats.dead,
        run_started.elapsed(),
    );

    assert!(cuts >= 10, "only {cuts} cuts: the run proved little");
    assert!(
        rounds >= kills.min(3),
        "only {rounds} rounds of faults ran: slow the senders (CHAOS_PACE_MS)"
    );
    verdict.assert_once(deliveries, outcome, &runs);
    assert_eq!(stats.dead, 0, "nothing dead-lettered");
}
