//! Issue 34, item 5: pauses by selector and limits by selector, on every
//! database engine (see `webhooks_core::inbox::gates`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use webhooks_core::inbox::gates::{DEFER_BUSY, Limit, MAX_GATES, Permit, Selector};
use webhooks_core::inbox::{Accepted, ClaimToken, Inbox, Job, NewEvent, Shutdown, Worker};

use super::{Event, Target, body, key, wait_for};

fn selector(text: &str) -> Selector {
    text.parse().unwrap()
}

async fn accept_typed(inbox: &Arc<dyn Inbox>, n: u64, scheme: &str, event_type: &str) {
    let event = NewEvent::new(key(n), scheme, body(n, false)).with_event_type(event_type);
    assert_eq!(inbox.accept(&event).await.unwrap(), Accepted::Stored);
}

async fn lease_all(inbox: &Arc<dyn Inbox>, lease: Duration) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    loop {
        let leased = inbox
            .lease(ClaimToken::random(), 50, lease, 5)
            .await
            .unwrap();
        if leased.is_empty() {
            break;
        }
        for event in leased {
            out.push((event.meta.key.clone(), event.meta.event_type.clone()));
            let done = inbox.complete(&event.meta.key, event.token).await.unwrap();
            assert_eq!(done, webhooks_core::inbox::Transition::Applied);
        }
    }
    out.sort();
    out
}

/// A paused selector's events are not leased (nor taken over when their
/// lease expires) by any handle, while the others flow; accepts go on; a
/// resume lets them all through; a gate without a limit is forgotten when
/// resumed; at most `MAX_GATES` are kept.
pub(super) async fn gates_pause_one_selector(target: Target) {
    let inbox = target.open().await;
    let other = target.open().await;
    assert!(inbox.keeps_gates());
    assert_eq!(inbox.gates().await.unwrap(), []);
    // One invoice event leased before the pause, its lease left to expire.
    accept_typed(&inbox, 0, "stripe", "invoice.created").await;
    let early = inbox
        .lease(ClaimToken::random(), 1, Duration::from_millis(200), 5)
        .await
        .unwrap();
    assert_eq!(early.len(), 1);
    for (n, scheme, event_type) in [
        (1, "stripe", "invoice.paid"),
        (2, "stripe", "Invoice.Finalized"),
        (3, "stripe", "charge.succeeded"),
        (4, "stripe", "charge.refunded"),
        (5, "github", "push"),
        (6, "github", "pull_request"),
        (7, "shopify", "orders/create"),
    ] {
        accept_typed(&inbox, n, scheme, event_type).await;
    }
    let invoices = selector("stripe:invoice.*");
    assert!(other.set_gate_paused(&invoices, true).await.unwrap());
    assert!(
        !inbox.set_gate_paused(&invoices, true).await.unwrap(),
        "no change"
    );
    assert!(
        other
            .set_gate_paused(&selector("github"), true)
            .await
            .unwrap()
    );
    let gates = inbox.gates().await.unwrap();
    let names: Vec<String> = gates.iter().map(|g| g.selector.to_string()).collect();
    assert_eq!(names, ["github:*", "stripe:invoice.*"]);
    assert!(
        gates
            .iter()
            .all(|g| g.paused && g.limit.is_none() && g.running == 0)
    );
    // Accepted while paused.
    accept_typed(&inbox, 8, "stripe", "invoice.voided").await;
    accept_typed(&inbox, 9, "github", "issues").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let flowed = lease_all(&inbox, Duration::from_secs(5)).await;
    let types: Vec<Option<&str>> = flowed.iter().map(|(_, t)| t.as_deref()).collect();
    assert_eq!(
        types,
        [
            Some("charge.succeeded"),
            Some("charge.refunded"),
            Some("orders/create")
        ],
        "only the events no paused selector matches: {flowed:?}"
    );
    let stats = inbox.stats().await.unwrap();
    assert_eq!(stats.completed, 3);
    assert_eq!(stats.pending + stats.in_flight, 7, "{stats:?}");
    // Resumed one at a time, from the other handle.
    assert!(
        other
            .set_gate_paused(&selector("github:*"), false)
            .await
            .unwrap()
    );
    assert!(
        !other
            .set_gate_paused(&selector("github"), false)
            .await
            .unwrap()
    );
    let github = lease_all(&inbox, Duration::from_secs(5)).await;
    assert_eq!(github.len(), 3, "{github:?}");
    assert!(
        github
            .iter()
            .all(|(k, _)| [key(5), key(6), key(9)].contains(k))
    );
    assert!(inbox.set_gate_paused(&invoices, false).await.unwrap());
    let rest = lease_all(&inbox, Duration::from_secs(5)).await;
    let keys: Vec<&str> = rest.iter().map(|(k, _)| k.as_str()).collect();
    let mut want = [key(0), key(1), key(2), key(8)];
    want.sort();
    assert_eq!(keys, want, "every invoice event, the expired lease's too");
    assert_eq!(
        inbox.gates().await.unwrap(),
        [],
        "resumed gates are forgotten"
    );
    let stats = inbox.stats().await.unwrap();
    assert_eq!(
        (stats.completed, stats.pending, stats.in_flight),
        (10, 0, 0)
    );
    // At most MAX_GATES.
    for n in 0..MAX_GATES {
        let s = selector(&format!("s{n}:t"));
        assert!(inbox.set_gate_paused(&s, true).await.unwrap());
    }
    let refused = inbox.set_gate_paused(&selector("one:more"), true).await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(inbox.gates().await.unwrap().len(), MAX_GATES);
    target.cleanup().await;
}

/// Permits: a concurrency of one is held by one holder at a time, renewed
/// by its holder, freed by a release or when its hold ends; a rate of five
/// per second grants a burst of five, then one per 200 ms, a renewal
/// taking no token.
pub(super) async fn gates_permits(target: Target) {
    let inbox = target.open().await;
    let other = target.open().await;
    let one = selector("test:slow");
    let limit = Limit::concurrency(1);
    let hold = Duration::from_secs(5);
    assert_eq!(
        inbox.acquire_permit(&one, limit, "a", hold).await.unwrap(),
        Permit::Granted
    );
    assert_eq!(
        other.acquire_permit(&one, limit, "b", hold).await.unwrap(),
        Permit::Denied {
            retry_after: DEFER_BUSY
        }
    );
    assert_eq!(
        inbox.acquire_permit(&one, limit, "a", hold).await.unwrap(),
        Permit::Granted
    );
    let gate = inbox.gates().await.unwrap();
    assert_eq!(gate.len(), 1);
    assert_eq!(
        (gate[0].running, gate[0].limit, gate[0].paused),
        (1, Some(limit), false)
    );
    inbox.release_permit(&one, "a").await.unwrap();
    inbox.release_permit(&one, "a").await.unwrap();
    assert_eq!(
        other.acquire_permit(&one, limit, "b", hold).await.unwrap(),
        Permit::Granted
    );
    other.release_permit(&one, "b").await.unwrap();
    // A hold that ends frees the permit (a crashed holder).
    let short = Duration::from_millis(150);
    assert_eq!(
        inbox.acquire_permit(&one, limit, "c", short).await.unwrap(),
        Permit::Granted
    );
    assert!(matches!(
        other.acquire_permit(&one, limit, "d", hold).await.unwrap(),
        Permit::Denied { .. }
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        other.acquire_permit(&one, limit, "d", hold).await.unwrap(),
        Permit::Granted
    );
    assert_eq!(inbox.gates().await.unwrap()[0].running, 1);
    other.release_permit(&one, "d").await.unwrap();
    assert_eq!(inbox.gates().await.unwrap()[0].running, 0);

    let rated = selector("test:rated.*");
    let rate = Limit::per_second(5);
    for n in 0..5 {
        let holder = format!("r{n}");
        let answer = inbox
            .acquire_permit(&rated, rate, &holder, hold)
            .await
            .unwrap();
        assert_eq!(answer, Permit::Granted, "burst {n}");
    }
    // Each holder releases at once: the rate, not the concurrency, refuses.
    for n in 0..5 {
        inbox
            .release_permit(&rated, &format!("r{n}"))
            .await
            .unwrap();
    }
    let Permit::Denied { retry_after } = other
        .acquire_permit(&rated, rate, "r5", hold)
        .await
        .unwrap()
    else {
        panic!("a sixth start within the second");
    };
    assert!(retry_after > Duration::ZERO && retry_after <= Duration::from_millis(200));
    tokio::time::sleep(retry_after + Duration::from_millis(60)).await;
    assert_eq!(
        other
            .acquire_permit(&rated, rate, "r5", hold)
            .await
            .unwrap(),
        Permit::Granted
    );
    // A renewal takes no token.
    assert_eq!(
        other
            .acquire_permit(&rated, rate, "r5", hold)
            .await
            .unwrap(),
        Permit::Granted
    );
    let gates = inbox.gates().await.unwrap();
    let names: Vec<String> = gates.iter().map(|g| g.selector.to_string()).collect();
    assert_eq!(names, ["test:rated.*", "test:slow"]);
    assert_eq!(gates[0].limit, Some(rate));
    // Pausing a limited gate keeps its limit; resuming keeps the gate.
    assert!(inbox.set_gate_paused(&rated, true).await.unwrap());
    assert!(inbox.set_gate_paused(&rated, false).await.unwrap());
    assert_eq!(inbox.gates().await.unwrap().len(), 2);
    target.cleanup().await;
}

/// Two handles (as two processes would), three tasks each, under a limit of
/// two at a time for `slow.*`: never more than two slow events run at once
/// (and two do), the others are not held back, every event runs exactly
/// once, and a refused permit does not count an attempt (`max_attempts(1)`:
/// a counted deferral would dead-letter).
pub(super) async fn gates_limit_concurrency_across_workers(target: Target) {
    let inbox = target.open().await;
    let other = target.open().await;
    for n in 0..12 {
        accept_typed(&inbox, n, "test", "slow.report").await;
    }
    for n in 12..24 {
        accept_typed(&inbox, n, "test", "fast").await;
    }
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let runs = Arc::new(std::sync::Mutex::new(Vec::new()));
    let shutdown = Shutdown::new();
    let mut workers = Vec::new();
    for handle in [&inbox, &other] {
        let (running, most, runs) = (Arc::clone(&running), Arc::clone(&most), Arc::clone(&runs));
        let worker: Worker<Event> = Worker::builder(Arc::clone(handle))
            .concurrency(3)
            .batch(2)
            .max_attempts(1)
            .lease(Duration::from_secs(5))
            .poll_interval(Duration::from_millis(20))
            .limit(selector("test:slow.*"), Limit::concurrency(2))
            .handler(move |job: Job<Event>| {
                let (running, most, runs) =
                    (Arc::clone(&running), Arc::clone(&most), Arc::clone(&runs));
                async move {
                    runs.lock().unwrap().push(job.event.n);
                    if job.meta.event_type.as_deref() == Some("slow.report") {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(120)).await;
                        running.fetch_sub(1, Ordering::SeqCst);
                    }
                    Ok::<(), std::io::Error>(())
                }
            });
        workers.push(tokio::spawn(worker.run(shutdown.signal())));
    }
    wait_for(|| async { inbox.stats().await.unwrap().completed == 24 }).await;
    shutdown.trigger();
    for worker in workers {
        worker.await.unwrap();
    }
    assert_eq!(
        most.load(Ordering::SeqCst),
        2,
        "at most two slow events at once"
    );
    let mut ran = runs.lock().unwrap().clone();
    ran.sort_unstable();
    assert_eq!(ran, (0..24).collect::<Vec<u64>>(), "each event once");
    let stats = inbox.stats().await.unwrap();
    assert_eq!((stats.dead, stats.pending), (0, 0), "{stats:?}");
    let gates = inbox.gates().await.unwrap();
    assert_eq!(gates.len(), 1);
    assert_eq!(gates[0].limit, Some(Limit::concurrency(2)));
    assert_eq!(gates[0].running, 0, "every permit returned");
    target.cleanup().await;
}
