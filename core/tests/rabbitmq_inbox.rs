//! What only the RabbitMQ inbox has (the shared scenarios are in
//! `inbox_suite.rs`): the message format other languages consume, publisher
//! confirms before the answer, the dedup store as the record of what was
//! accepted (across inbox instances, and past copies published twice), dead
//! letters through the dead-letter exchange and their replay, and a
//! consumer cut off and started again without loss.
//!
//! ```text
//! cargo test -p webhooks-core --features rabbitmq --test rabbitmq_inbox
//! ```
//!
//! RabbitMQ comes from `WEBHOOKS_RABBITMQ_URL` (default
//! `amqp://guest:guest@127.0.0.1:5672/%2f`); down, the tests skip, or fail
//! under `CI=true`. Each test works on queues of its own, deleted afterwards.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use lapin::options::{BasicGetOptions, BasicPublishOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use webhooks_core::dedup::{DedupStore, MemoryStore};
use webhooks_core::inbox::{
    Accepted, ClaimToken, DeadLetterFilter, Inbox, InboxError, NewEvent, RabbitMqInbox, Transition,
    inbox_from_url,
};

fn queue() -> String {
    format!("rmq-test-{}", support::unique_suffix())
}

async fn open(queue: &str, store: Arc<dyn DedupStore>) -> Option<(RabbitMqInbox, String)> {
    let url = support::rabbitmq_url().await?;
    let inbox = RabbitMqInbox::builder(&url, store)
        .queue(queue)
        .command_timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect("connect");
    Some((inbox, url))
}

fn event(n: u64) -> NewEvent {
    NewEvent::new(
        format!("webhooks:test:evt_{n}"),
        "test",
        format!("{{\"n\":{n}}}"),
    )
}

/// Leases until `want` events were leased or `patience` ran out.
async fn lease_all(
    inbox: &RabbitMqInbox,
    token: ClaimToken,
    want: usize,
    lease: Duration,
    patience: Duration,
) -> Vec<webhooks_core::inbox::LeasedEvent> {
    let deadline = tokio::time::Instant::now() + patience;
    let mut out = Vec::new();
    while out.len() < want && tokio::time::Instant::now() < deadline {
        let batch = inbox.lease(token, 50, lease, 5).await.unwrap();
        if batch.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        out.extend(batch);
    }
    out
}

/// A plain AMQP client sees what a Go or Python consumer would: a persistent
/// message in the queue, the key as message id, the event type as type, the
/// metadata as JSON in the `webhooks-meta` header, the exact body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_message_format_is_documented_and_plain() {
    let name = queue();
    let Some((inbox, url)) = open(&name, Arc::new(MemoryStore::new())).await else {
        return;
    };
    let mut event = NewEvent::new("webhooks:stripe:evt_1", "stripe", "{\"é\":1}")
        .with_event_type("invoice.paid");
    event.headers = vec![("x-request-id".into(), "r\u{e9}q".into())];
    event.delivery_id = Some("evt_1".into());
    assert_eq!(inbox.accept(&event).await.unwrap(), Accepted::Stored);

    let connection = Connection::connect(&url, ConnectionProperties::default())
        .await
        .unwrap();
    let channel = connection.create_channel().await.unwrap();
    let message = channel
        .basic_get(name.as_str().into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
        .expect("the delivery is in the queue");
    let delivery = &message.delivery;
    assert_eq!(delivery.data, "{\"é\":1}".as_bytes());
    let properties = &delivery.properties;
    assert_eq!(*properties.delivery_mode(), Some(2), "persistent");
    assert_eq!(
        properties.message_id().as_ref().unwrap().as_str(),
        "webhooks:stripe:evt_1"
    );
    assert_eq!(properties.kind().as_ref().unwrap().as_str(), "invoice.paid");
    let headers = properties.headers().as_ref().unwrap().inner();
    let Some(AMQPValue::LongString(meta)) = headers.get("webhooks-meta") else {
        panic!("no webhooks-meta header: {headers:?}");
    };
    let meta: serde_json::Value = serde_json::from_slice(meta.as_bytes()).unwrap();
    assert_eq!(meta["key"], "webhooks:stripe:evt_1");
    assert_eq!(meta["scheme"], "stripe");
    assert_eq!(meta["event_type"], "invoice.paid");
    assert_eq!(meta["delivery_id"], "evt_1");
    assert_eq!(meta["headers"][0][1], "r\u{e9}q");
    assert!(meta["received_at_ms"].as_i64().unwrap() > 0);
    assert!(matches!(
        headers.get("webhooks-attempts"),
        Some(AMQPValue::LongLongInt(0))
    ));
    inbox.delete().await.unwrap();
}

/// The answer waits for the publisher confirm: with the connection to the
/// broker frozen (the confirm never comes) or cut, accept is an error (the
/// route answers 503), never `Stored`; the key is not marked accepted, so
/// the sender's retry, once the broker is reachable, is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_confirm_no_acknowledgement() {
    let name = queue();
    let store: Arc<dyn DedupStore> = Arc::new(MemoryStore::new());
    let Some((direct, url)) = open(&name, Arc::clone(&store)).await else {
        return;
    };
    let proxy = support::FaultProxy::start(&support::authority(&url).unwrap()).await;
    let through = RabbitMqInbox::builder(
        &support::with_authority(&url, &proxy.authority()),
        Arc::clone(&store),
    )
    .queue(&name)
    .command_timeout(Duration::from_millis(800))
    .connect()
    .await
    .unwrap();
    assert_eq!(through.accept(&event(1)).await.unwrap(), Accepted::Stored);

    proxy.freeze();
    let frozen = through.accept(&event(2)).await;
    assert!(
        matches!(
            frozen,
            Err(InboxError::Timeout | InboxError::Unavailable(_))
        ),
        "{frozen:?}"
    );
    proxy.kill();
    let cut = through.accept(&event(3)).await;
    assert!(cut.is_err(), "{cut:?}");

    // Not marked accepted: the retries are stored, each once.
    assert_eq!(direct.accept(&event(2)).await.unwrap(), Accepted::Stored);
    assert_eq!(direct.accept(&event(3)).await.unwrap(), Accepted::Stored);
    assert_eq!(direct.accept(&event(1)).await.unwrap(), Accepted::Duplicate);
    // The frozen publish may have reached the broker before the freeze
    // took hold of the confirm: then its copy is a duplicate the workers
    // drop. Each key completes once.
    let token = ClaimToken::random();
    let leased = lease_all(
        &direct,
        token,
        3,
        Duration::from_secs(10),
        Duration::from_secs(5),
    )
    .await;
    let mut keys: Vec<_> = leased.iter().map(|e| e.meta.key.clone()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 3, "{keys:?}");
    for key in &keys {
        assert_eq!(
            direct.complete(key, token).await.unwrap(),
            Transition::Applied
        );
    }
    direct.delete().await.unwrap();
}

/// Two inbox instances (two connections, as two receiver processes) on one
/// dedup store: every delivery accepted by both at once is stored once and
/// answered `Duplicate` (or a retryable error while the other's accept is
/// under way) by the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dedup_across_two_inbox_instances() {
    let name = queue();
    let store: Arc<dyn DedupStore> = Arc::new(MemoryStore::new());
    let Some((one, _)) = open(&name, Arc::clone(&store)).await else {
        return;
    };
    let (two, _) = open(&name, Arc::clone(&store)).await.unwrap();
    let count = 100u64;
    let mut stored = 0;
    for n in 0..count {
        let e = event(n);
        let (a, b) = tokio::join!(one.accept(&e), two.accept(&e));
        // An accept that met the other's claim answered an error: the
        // sender retries it, and the retry is a duplicate.
        let b = match b {
            Err(InboxError::Unavailable(_)) => two.accept(&event(n)).await,
            other => other,
        };
        let a = match a {
            Err(InboxError::Unavailable(_)) => one.accept(&event(n)).await,
            other => other,
        };
        let answers = [a.unwrap(), b.unwrap()];
        stored += answers.iter().filter(|a| **a == Accepted::Stored).count();
        assert!(answers.contains(&Accepted::Duplicate), "{n}: {answers:?}");
    }
    assert_eq!(stored as u64, count);
    assert_eq!(one.stats().await.unwrap().pending, count);
    one.delete().await.unwrap();
}

/// A copy published twice (a receiver that died between the confirm and the
/// accepted mark, then the sender's retry) is completed once: the second
/// copy waits while the first is leased, and is dropped once it completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_published_twice_completes_once() {
    let name = queue();
    let Some((inbox, url)) = open(&name, Arc::new(MemoryStore::new())).await else {
        return;
    };
    assert_eq!(inbox.accept(&event(7)).await.unwrap(), Accepted::Stored);
    // The twin, as the retry would publish it.
    let connection = Connection::connect(&url, ConnectionProperties::default())
        .await
        .unwrap();
    let channel = connection.create_channel().await.unwrap();
    channel.confirm_select(Default::default()).await.unwrap();
    let original = channel
        .basic_get(name.as_str().into(), BasicGetOptions { no_ack: false })
        .await
        .unwrap()
        .unwrap();
    for _ in 0..2 {
        channel
            .basic_publish(
                "".into(),
                name.as_str().into(),
                BasicPublishOptions::default(),
                &original.delivery.data,
                original.delivery.properties.clone(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }
    original
        .delivery
        .acker
        .ack(Default::default())
        .await
        .unwrap();
    assert_eq!(inbox.stats().await.unwrap().pending, 2);

    let token = ClaimToken::random();
    let leased = lease_all(
        &inbox,
        token,
        1,
        Duration::from_secs(30),
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(leased.len(), 1, "the twin is not leased beside it");
    assert_eq!(
        inbox.complete(&leased[0].meta.key, token).await.unwrap(),
        Transition::Applied
    );
    // The twin comes back from its delay queue and is dropped as completed.
    let again = lease_all(
        &inbox,
        ClaimToken::random(),
        1,
        Duration::from_secs(30),
        Duration::from_secs(4),
    )
    .await;
    assert!(again.is_empty(), "completed twice: {again:?}");
    let stats = inbox.stats().await.unwrap();
    assert_eq!((stats.pending, stats.in_flight, stats.dead), (0, 0, 0));
    inbox.delete().await.unwrap();
}

/// Dead-lettering publishes through the `<Q>.dead` exchange into the dead
/// queue with the attempts and the error; listing puts the letters back;
/// a replay makes the event due again with a fresh attempt budget, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_and_replay() {
    let name = queue();
    let Some((inbox, _)) = open(&name, Arc::new(MemoryStore::new())).await else {
        return;
    };
    assert_eq!(inbox.accept(&event(1)).await.unwrap(), Accepted::Stored);
    let key = "webhooks:test:evt_1";
    let token = ClaimToken::random();
    let leased = lease_all(
        &inbox,
        token,
        1,
        Duration::from_secs(30),
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(leased[0].attempt, 1);
    assert_eq!(
        inbox
            .retry(key, token, Duration::from_millis(200), "first")
            .await
            .unwrap(),
        Transition::Applied
    );
    let token = ClaimToken::random();
    let leased = lease_all(
        &inbox,
        token,
        1,
        Duration::from_secs(30),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(leased[0].attempt, 2, "the retry counts an attempt");
    assert_eq!(
        inbox.dead_letter(key, token, "poison").await.unwrap(),
        Transition::Applied
    );
    for _ in 0..2 {
        // Listing reads without taking: twice the same.
        let page = inbox
            .dead_letters(&DeadLetterFilter::default())
            .await
            .unwrap();
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.items[0].meta.key, key);
        assert_eq!(page.items[0].attempts, 2);
        assert_eq!(page.items[0].last_error.as_deref(), Some("poison"));
    }
    let dead = inbox.dead_letter_get(key).await.unwrap().unwrap();
    assert_eq!(dead.body.as_ref(), b"{\"n\":1}");
    // A listing puts the letters back when its channel closes; the quorum
    // queue counts them as ready again a moment later.
    let mut dead_count = 0;
    for _ in 0..40 {
        dead_count = inbox.stats().await.unwrap().dead;
        if dead_count == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(dead_count, 1);

    let (a, b) = tokio::join!(inbox.replay(key), inbox.replay(key));
    let mut answers = [a.unwrap(), b.unwrap()];
    answers.sort_by_key(|t| *t == Transition::Stale);
    assert_eq!(answers, [Transition::Applied, Transition::Stale]);
    assert_eq!(inbox.stats().await.unwrap().dead, 0);
    let token = ClaimToken::random();
    let leased = lease_all(
        &inbox,
        token,
        1,
        Duration::from_secs(30),
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].attempt, 1, "a fresh attempt budget");
    assert_eq!(
        inbox.complete(key, token).await.unwrap(),
        Transition::Applied
    );
    assert_eq!(inbox.discard(key).await.unwrap(), Transition::Stale);
    inbox.delete().await.unwrap();
}

/// A consumer whose connection is cut while it holds leases (a receiver
/// killed, a network split): the broker hands its deliveries back, and the
/// next consumer completes every event, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_cut_off_loses_nothing() {
    let name = queue();
    let store: Arc<dyn DedupStore> = Arc::new(MemoryStore::new());
    let Some((direct, url)) = open(&name, Arc::clone(&store)).await else {
        return;
    };
    let count = 40u64;
    for n in 0..count {
        direct.accept(&event(n)).await.unwrap();
    }
    let proxy = support::FaultProxy::start(&support::authority(&url).unwrap()).await;
    let first = RabbitMqInbox::builder(
        &support::with_authority(&url, &proxy.authority()),
        Arc::clone(&store),
    )
    .queue(&name)
    // Calls on the dead connection fail fast, well within the lease.
    .command_timeout(Duration::from_millis(500))
    .connect()
    .await
    .unwrap();
    let token = ClaimToken::random();
    // The lease runs out soon after the cut: the process then drops its
    // connection, and the broker hands the deliveries back.
    let held = lease_all(
        &first,
        token,
        10,
        Duration::from_secs(3),
        Duration::from_secs(3),
    )
    .await;
    assert!(held.len() >= 10);
    // Two completed before the cut: they must not run again.
    for event in &held[..2] {
        assert_eq!(
            first.complete(&event.meta.key, token).await.unwrap(),
            Transition::Applied
        );
    }
    proxy.kill();
    // Completed after the cut: the record is in the dedup store (the
    // acknowledgement is lost with the connection), so the copy the broker
    // hands back is dropped, not run again.
    assert_eq!(
        first.complete(&held[2].meta.key, token).await.unwrap(),
        Transition::Applied,
    );
    // The others' leases went with the connection: no copy, so never
    // `Applied` (an error, or `Stale` once the lease ran out on a slow
    // machine).
    let retried = first
        .retry(&held[3].meta.key, token, Duration::ZERO, "x")
        .await;
    assert!(
        !matches!(retried, Ok(Transition::Applied)),
        "no connection, no copy: {retried:?}"
    );

    let mut completed: HashMap<String, u32> = HashMap::new();
    for event in &held[..3] {
        completed.insert(event.meta.key.clone(), 1);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while completed.len() < count as usize && tokio::time::Instant::now() < deadline {
        let token = ClaimToken::random();
        let batch = direct
            .lease(token, 50, Duration::from_secs(30), 5)
            .await
            .unwrap();
        if batch.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for event in batch {
            assert_eq!(
                direct.complete(&event.meta.key, token).await.unwrap(),
                Transition::Applied
            );
            *completed.entry(event.meta.key).or_default() += 1;
        }
    }
    assert_eq!(completed.len(), count as usize, "every event completed");
    assert!(completed.values().all(|n| *n == 1), "{completed:?}");
    direct.delete().await.unwrap();
}

/// Accepts abandoned at every await point (the request's future dropped),
/// then the sender's retries: each delivery is in the queue exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_accepts_are_stored_once() {
    let name = queue();
    let Some((inbox, _)) = open(&name, Arc::new(MemoryStore::new())).await else {
        return;
    };
    let count = 60u64;
    for n in 0..count {
        let budget = Duration::from_micros(n * 50);
        let _ = tokio::time::timeout(budget, inbox.accept(&event(n))).await;
    }
    for n in 0..count {
        // A retry that meets the abandoned accept still under way answers
        // an error (503): the sender retries again.
        let mut answer = inbox.accept(&event(n)).await;
        while matches!(answer, Err(InboxError::Unavailable(_))) {
            tokio::time::sleep(Duration::from_millis(20)).await;
            answer = inbox.accept(&event(n)).await;
        }
        answer.unwrap();
    }
    assert_eq!(inbox.stats().await.unwrap().pending, count, "each once");
    inbox.delete().await.unwrap();
}

/// Pausing is shared through the dedup store: a paused inbox leases nothing
/// (from any instance) and still accepts; resuming hands the events out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume() {
    let name = queue();
    let store: Arc<dyn DedupStore> = Arc::new(MemoryStore::new());
    let Some((one, _)) = open(&name, Arc::clone(&store)).await else {
        return;
    };
    let (two, _) = open(&name, store).await.unwrap();
    assert!(one.set_paused(true).await.unwrap());
    assert!(!two.set_paused(true).await.unwrap(), "already paused");
    assert!(two.paused().await.unwrap());
    assert_eq!(one.accept(&event(1)).await.unwrap(), Accepted::Stored);
    let token = ClaimToken::random();
    assert!(
        two.lease(token, 10, Duration::from_secs(30), 5)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(two.stats().await.unwrap().paused);
    assert!(two.set_paused(false).await.unwrap());
    assert!(!one.set_paused(false).await.unwrap(), "already running");
    let leased = lease_all(
        &two,
        token,
        1,
        Duration::from_secs(30),
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(leased.len(), 1);
    one.delete().await.unwrap();
}

/// `inbox_from_url` opens it with its dedup store; unknown parameters and a
/// missing store are refused; no error or `Debug` print shows the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_url_and_secrets() {
    let Some(url) = support::rabbitmq_url().await else {
        return;
    };
    let name = queue();
    let inbox = inbox_from_url(&format!("{url}?queue={name}&dedup=memory%3A%2F%2F"))
        .await
        .unwrap();
    assert_eq!(inbox.accept(&event(1)).await.unwrap(), Accepted::Stored);
    assert_eq!(inbox.accept(&event(1)).await.unwrap(), Accepted::Duplicate);
    assert_eq!(inbox.stats().await.unwrap().pending, 1);

    let secret = "amqp://guest:s3cr3t-pw@127.0.0.1:5672/%2f";
    for bad in [
        format!("{secret}?queue=x&dedup=memory%3A%2F%2F&table=t"),
        format!("{secret}?queue=x&dedup=memory%3A%2F%2F&bogus=1"),
        format!("{secret}?queue=x"),
        format!("{secret}?queue=x&dedup=memory%3A%2F%2F&delivery_limit=lots"),
        "amqp://guest:s3cr3t-pw@[::1/%2f?dedup=memory%3A%2F%2F".to_owned(),
    ] {
        let error = inbox_from_url(&bad).await.map(|_| ()).unwrap_err();
        let text = format!("{error} {error:?}");
        assert!(!text.contains("s3cr3t"), "{text}");
    }
    let builder = RabbitMqInbox::builder(secret, Arc::new(MemoryStore::new())).queue(&name);
    assert!(!format!("{builder:?}").contains("s3cr3t"));
    // A wrong password: refused by the broker, not shown.
    let refused = RabbitMqInbox::builder(
        &support::with_authority(secret, &support::authority(&url).unwrap()),
        Arc::new(MemoryStore::new()),
    )
    .queue(&name)
    .connect()
    .await
    .unwrap_err();
    let text = format!("{refused} {refused:?}");
    assert!(!text.contains("s3cr3t"), "{text}");

    let direct = RabbitMqInbox::builder(&url, Arc::new(MemoryStore::new()))
        .queue(&name)
        .connect()
        .await
        .unwrap();
    assert!(!format!("{direct:?}").contains("guest:guest"));
    direct.delete().await.unwrap();
}

/// A message without the inbox's headers (published by something else) is
/// dead-lettered, not looped on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_messages_are_dead_lettered() {
    let name = queue();
    let Some((inbox, url)) = open(&name, Arc::new(MemoryStore::new())).await else {
        return;
    };
    let connection = Connection::connect(&url, ConnectionProperties::default())
        .await
        .unwrap();
    let channel = connection.create_channel().await.unwrap();
    let mut headers = FieldTable::default();
    headers.insert(
        "other".into(),
        AMQPValue::LongString(LongString::from(b"x".to_vec())),
    );
    channel
        .basic_publish(
            "".into(),
            name.as_str().into(),
            BasicPublishOptions::default(),
            b"hello",
            BasicProperties::default().with_headers(headers),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    let leased = lease_all(
        &inbox,
        ClaimToken::random(),
        1,
        Duration::from_secs(30),
        Duration::from_secs(1),
    )
    .await;
    assert!(leased.is_empty());
    let page = inbox
        .dead_letters(&DeadLetterFilter::default())
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].meta.scheme, "unknown");
    inbox.delete().await.unwrap();
}

/// Two queues of one name in two virtual hosts are two queues, also on one
/// dedup store: a delivery accepted into one is stored, not taken for a
/// duplicate, by the other (a store shared by two virtual hosts once
/// answered `Duplicate`, a 2xx for a delivery no queue held).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_of_one_name_in_two_virtual_hosts_are_apart() {
    let name = queue();
    let store: Arc<dyn DedupStore> = Arc::new(MemoryStore::new());
    let Some((one, url)) = open(&name, Arc::clone(&store)).await else {
        return;
    };
    let vhost = match support::VirtualHost::create() {
        Ok(vhost) => vhost,
        Err(error) => {
            let _ = one.delete().await;
            assert!(!support::ci(), "{error}, and CI=true");
            eprintln!("SKIPPED: {error}");
            return;
        }
    };
    let (base, _) = url.rsplit_once('/').expect("amqp://host:port/vhost");
    let two = RabbitMqInbox::builder(&format!("{base}/{}", vhost.0), Arc::clone(&store))
        .queue(&name)
        .command_timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect("connect to the second virtual host");
    let e = event(1);
    assert_eq!(one.accept(&e).await.unwrap(), Accepted::Stored);
    assert_eq!(
        two.accept(&e).await.unwrap(),
        Accepted::Stored,
        "the other virtual host's queue does not hold it"
    );
    assert_eq!(two.accept(&e).await.unwrap(), Accepted::Duplicate);
    assert_eq!(two.stats().await.unwrap().pending, 1);
    // Pausing one pauses that one only.
    assert!(one.set_paused(true).await.unwrap());
    assert!(
        !two.paused().await.unwrap(),
        "the other queue is not paused"
    );
    one.delete().await.unwrap();
    two.delete().await.unwrap();
}
