//! The RabbitMQ [`Inbox`](super::Inbox): deliveries handed to a quorum
//! queue with publisher confirms, worked by consumers with manual
//! acknowledgements; a [`DedupStore`] keeps the record of what was accepted
//! and completed.
//!
//! | what | where |
//! |---|---|
//! | deliveries | quorum queue `<Q>` (durable), published through the default exchange, message id = the inbox key |
//! | retries | quorum queues `<Q>.delay.<ms>`, one per delay (`x-message-ttl`), dead-lettered back into `<Q>` when the delay is over; each expires an hour after its last use |
//! | completions' count | quorum queue `<Q>.done`, one small message per completion (its time), taken by [`purge_completed`](super::Inbox::purge_completed) |
//! | dead letters | fanout exchange `<Q>.dead` into the quorum queue `<Q>.dead`; also `<Q>`'s own dead-letter exchange (its `x-delivery-limit`) |
//! | the record of what was accepted | the dedup store: key `rabbitmq:<V>/<Q>/accepted:<key>` (`<V>`: the virtual host, percent-encoded: `%2F` for `/`), completed for the retention |
//! | completions (one per key) | the dedup store: key `rabbitmq:<V>/<Q>/done:<key>`, claimed for a lease, completed for the retention |
//! | the pause flag | the dedup store: key `rabbitmq:<V>/<Q>/flag:paused`, claimed by a token derived from `<V>/<Q>` |
//!
//! **Accept.** The inbox key is claimed on the dedup store, the delivery
//! published (persistent, mandatory) and its publisher confirm awaited,
//! then the key is marked accepted: only then does accept answer
//! [`Stored`](super::Accepted::Stored). A nack, an unroutable message, a
//! timeout or a closed channel is an [`InboxError`] (`503`), and nothing
//! acknowledged is lost. The three steps run in a task of their own, so a
//! request future dropped half way (the sender hung up) does not stop
//! them. A key already marked is a [`Duplicate`](super::Accepted::Duplicate);
//! one whose accept is under way elsewhere answers an error (`503`: the
//! sender retries).
//!
//! **Duplicates in the queue.** A process that dies between the confirm
//! and the mark leaves the key claimed, not accepted: after the claim's
//! lease the sender's retry publishes the delivery again. The workers'
//! side dedups it: a lease claims the key's completion record, a copy of a
//! completed (or dead-lettered) delivery is acknowledged and dropped, and a
//! copy whose twin another worker holds is put back, delayed, until that
//! one is settled. Each key is completed once.
//!
//! **Leases** are unacknowledged deliveries taken by `basic.get` (manual
//! acknowledgements), one channel per process. Not `basic.consume` with a
//! prefetch: prefetched deliveries are unacknowledged too, and a process
//! that dies hands them back with their `x-delivery-count` raised, counting
//! attempts that never started (and they would be neither pending nor
//! leased meanwhile). `basic.get` leases exactly what a worker takes. [`complete`](super::Inbox::complete)
//! marks the completion record then acknowledges, [`retry`](super::Inbox::retry)
//! publishes a copy into the delay queue then acknowledges,
//! [`dead_letter`](super::Inbox::dead_letter) publishes into the dead-letter
//! exchange then acknowledges. A lease that runs out is handed back to the
//! broker (a `basic.nack` with requeue); a process that dies has its
//! deliveries handed back by the broker when its connection closes.
//!
//! See `docs/inbox.md` (RabbitMQ) for the message format other languages
//! consume, and for what the broker cannot answer the way the databases do.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use lapin::options::{
    BasicAckOptions, BasicGetOptions, BasicNackOptions, BasicPublishOptions, ConfirmSelectOptions,
    ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::uri::AMQPUri;
use lapin::{
    Acker, BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, ExchangeKind,
};

use super::{
    Accepted, Activity, ClaimToken, DeadLetter, DeadLetterCursor, DeadLetterFilter, DeadLetterPage,
    Delivery, DeliveryFilter, DeliveryPage, DeliveryState, EXPIRED_ON_LAST_ATTEMPT, InboxError,
    InboxStats, LeasedEvent, NewEvent, Transition, to_ms,
};
use crate::dedup::{Claim, DedupStore};

mod broker;
mod builder;
mod format;

use broker::pause_token;
pub use builder::RabbitMqInboxBuilder;
use format::{Dead, Headers, Meta, dead_letter_of, delay_bucket, event_meta, properties};

const META_HEADER: &str = RabbitMqInbox::META_HEADER;
const ATTEMPTS_HEADER: &str = RabbitMqInbox::ATTEMPTS_HEADER;
const DEAD_HEADER: &str = RabbitMqInbox::DEAD_HEADER;
const REPLAY_HEADER: &str = RabbitMqInbox::REPLAY_HEADER;
const DEAD_LETTER_SCAN_BUDGET: usize = RabbitMqInbox::DEAD_LETTER_SCAN_BUDGET;

/// How long the pause flag's claim lasts (it is released to resume).
const PAUSE_LEASE: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// The connection and its publishing channel (publisher confirms on).
struct Link {
    _connection: Connection,
    publish: Channel,
    generation: u64,
}

/// This process's leasing channel on `<Q>`.
struct Leasing {
    channel: Channel,
    generation: u64,
}

/// A delivery this process leased.
struct Held {
    token: ClaimToken,
    acker: Acker,
    /// When the lease ends, by this process's clock.
    until: Instant,
    attempt: u32,
    replays: u32,
    meta: Arc<Meta>,
    body: Bytes,
}

struct Shared {
    uri: AMQPUri,
    name: String,
    /// The queue's namespace on the dedup store: `rabbitmq:<vhost>/<Q>`,
    /// the virtual host percent-encoded (two queues of one name in two
    /// virtual hosts are two queues).
    space: String,
    store: Arc<dyn DedupStore>,
    link: tokio::sync::Mutex<Option<Arc<Link>>>,
    leasing: tokio::sync::Mutex<Option<Leasing>>,
    generation: AtomicU64,
    held: Mutex<HashMap<String, Held>>,
    delivery_limit: u32,
    retention: Duration,
    connect_timeout: Duration,
    timeout: Duration,
}

/// The durable inbox on RabbitMQ (feature `rabbitmq`).
///
/// ```no_run
/// # async fn run() -> Result<(), webhooks_core::inbox::OpenError> {
/// use webhooks_core::dedup::store_from_url;
/// use webhooks_core::inbox::RabbitMqInbox;
///
/// let store = store_from_url("redis://127.0.0.1:6379").await?;
/// let inbox = RabbitMqInbox::builder("amqp://guest:guest@127.0.0.1:5672/%2f", store)
///     .queue("orders")
///     .connect()
///     .await?;
/// # let _ = inbox; Ok(()) }
/// ```
#[derive(Clone)]
pub struct RabbitMqInbox {
    shared: Arc<Shared>,
}

impl fmt::Debug for RabbitMqInbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the URI: it holds the password.
        f.debug_struct("RabbitMqInbox")
            .field("queue", &self.shared.name)
            .finish_non_exhaustive()
    }
}

impl RabbitMqInbox {
    /// The header holding a delivery's metadata (JSON, UTF-8).
    pub const META_HEADER: &str = "webhooks-meta";
    /// The header holding how many attempts were made before this copy was published.
    pub const ATTEMPTS_HEADER: &str = "webhooks-attempts";
    /// The header of a dead letter holding its attempts, last error and time (JSON).
    pub const DEAD_HEADER: &str = "webhooks-dead";
    /// The header counting a delivery's replays from the dead letters.
    pub const REPLAY_HEADER: &str = "webhooks-replays";
    /// The most messages a listing of dead letters reads.
    pub const DEAD_LETTER_SCAN_BUDGET: usize = 10_000;

    /// The queue's name.
    #[must_use]
    pub fn queue_name(&self) -> &str {
        &self.shared.name
    }

    /// Deletes the queues and the exchange of this inbox (tests, teardown);
    /// the delay queues expire by themselves. The dedup store's keys stay
    /// until their retention.
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the broker cannot answer.
    pub async fn delete(&self) -> Result<(), InboxError> {
        let s = &self.shared;
        *s.leasing.lock().await = None;
        s.held.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let channel = s.channel().await?;
        for queue in [
            s.name.clone(),
            format!("{}.dead", s.name),
            format!("{}.done", s.name),
        ] {
            s.timed(channel.queue_delete(queue.as_str().into(), Default::default()))
                .await?;
        }
        s.timed(channel.exchange_delete(format!("{}.dead", s.name).into(), Default::default()))
            .await?;
        let _ = channel.close(200, "done".into()).await;
        Ok(())
    }
}

impl Shared {
    /// Takes one delivery of the consumer as a lease for `token`; `None`
    /// when it was settled instead (a duplicate, a dead letter).
    async fn take(
        self: &Arc<Self>,
        delivery: lapin::message::Delivery,
        token: ClaimToken,
        started: Instant,
        lease: Duration,
        max_attempts: u32,
    ) -> Result<Option<LeasedEvent>, InboxError> {
        let s = self;
        let headers = Headers::of(&delivery.properties);
        let attempt = headers
            .attempts
            .saturating_add(headers.redeliveries)
            .saturating_add(1);
        let Some(meta) = headers.meta.clone() else {
            // Not ours (published by something else): dead-letter it, so
            // that it is seen, not looped on.
            let meta = Meta {
                key: format!(
                    "rabbitmq:{}:{}",
                    s.name,
                    delivery
                        .properties
                        .message_id()
                        .as_ref()
                        .map_or("unknown", |id| id.as_str())
                ),
                scheme: "unknown".to_owned(),
                delivery_id: None,
                event_type: None,
                matched_key: String::new(),
                headers: Vec::new(),
                signed_at: None,
                received_at_ms: to_ms(SystemTime::now()),
            };
            s.bury(&meta, &delivery.data, attempt, 0, "no webhooks-meta header")
                .await?;
            s.ack(&delivery.acker).await?;
            return Ok(None);
        };
        let done_key = s.done_key(&meta.key, headers.replays);
        match s.store.claim(&done_key, token, lease).await? {
            Claim::Completed => {
                // A copy of a delivery completed (or dead-lettered) already.
                s.ack(&delivery.acker).await?;
                return Ok(None);
            }
            Claim::InFlight { retry_after } => {
                // Its twin is leased elsewhere: back in line once that
                // lease is over (this copy's attempts unchanged).
                let delay = retry_after.max(Duration::from_millis(100));
                s.requeue(&meta, &delivery.data, attempt - 1, headers.replays, delay)
                    .await?;
                s.ack(&delivery.acker).await?;
                return Ok(None);
            }
            Claim::Claimed => {}
        }
        if attempt > max_attempts {
            // Its lease ran out on the last attempt: the worker crashed, was
            // killed or stalled.
            s.bury(
                &meta,
                &delivery.data,
                attempt - 1,
                headers.replays,
                EXPIRED_ON_LAST_ATTEMPT,
            )
            .await?;
            let _ = s.store.complete(&done_key, token, s.retention).await?;
            s.ack(&delivery.acker).await?;
            return Ok(None);
        }
        let meta = Arc::new(meta);
        let body = Bytes::from(delivery.data);
        let key = meta.key.clone();
        s.held.lock().unwrap_or_else(|e| e.into_inner()).insert(
            key.clone(),
            Held {
                token,
                acker: delivery.acker,
                until: started + lease,
                attempt,
                replays: headers.replays,
                meta: Arc::clone(&meta),
                body: body.clone(),
            },
        );
        tokio::spawn(reap(Arc::downgrade(s), key, token, done_key));
        Ok(Some(LeasedEvent {
            meta: event_meta(&meta),
            body,
            attempt,
            token,
        }))
    }

    /// Settles `key`'s lease: the completion record (`complete`: marked;
    /// otherwise released) after `copy` ran, then the acknowledgement.
    async fn settle(
        &self,
        key: &str,
        token: ClaimToken,
        mark_done: bool,
        count: bool,
        copy: impl AsyncFnOnce(&Self, &Meta, &Bytes, u32, u32) -> Result<(), InboxError>,
    ) -> Result<Transition, InboxError> {
        let Some((acker, attempt, replays, meta, body)) = self.held(key, token) else {
            return Ok(Transition::Stale);
        };
        let done_key = self.done_key(key, replays);
        if !mark_done {
            // Released first, so that the copy is not put aside as the twin
            // of a leased delivery; this delivery, unacknowledged, still
            // stands for the event until the copy is confirmed.
            let _ = self.store.release(&done_key, token).await?;
        }
        copy(self, &meta, &body, attempt, replays).await?;
        let record = if mark_done {
            self.store
                .complete(&done_key, token, self.retention)
                .await?
        } else {
            Transition::Applied
        };
        if count && record == Transition::Applied {
            // The completions' count and listing (stats, purge): a record
            // lost here (the broker gone, the process killed) only
            // undercounts; the dedup store's record is the one that counts.
            let done = format!("{}.done", self.name);
            let now = to_ms(SystemTime::now()).to_string();
            let _ = self
                .publish(
                    "",
                    &done,
                    now.as_bytes(),
                    properties(&meta, attempt, replays, None),
                )
                .await;
        }
        let acked = self.ack(&acker).await;
        self.forget(key, token);
        match acked {
            // The channel closed: the broker hands the delivery back, and
            // its completion record (or its copy) settles it.
            Err(_) if mark_done && record == Transition::Applied => Ok(Transition::Applied),
            Err(_) => Ok(Transition::Stale),
            Ok(()) => Ok(record),
        }
    }
}

#[async_trait::async_trait]
impl super::Inbox for RabbitMqInbox {
    async fn accept(&self, event: &NewEvent) -> Result<Accepted, InboxError> {
        let key = event.stored_key();
        let meta = Meta {
            key: key.clone(),
            scheme: event.scheme.clone(),
            delivery_id: event.delivery_id.clone(),
            event_type: event.event_type.clone(),
            matched_key: event.matched_key.clone(),
            headers: event.headers.clone(),
            signed_at: event.signed_at,
            received_at_ms: to_ms(SystemTime::now()),
        };
        // In a task of its own: a caller that stops waiting cannot leave a
        // confirmed delivery without its accepted mark half way.
        let shared = Arc::clone(&self.shared);
        let body = event.body.clone();
        let stored = tokio::spawn(async move {
            let s = &shared;
            let accepted = s.key("accepted", &key);
            let token = ClaimToken::random();
            // The claim covers the publish and its confirm.
            let lease = s.timeout.saturating_mul(3);
            match s.store.claim(&accepted, token, lease).await? {
                Claim::Completed => return Ok(Accepted::Duplicate),
                Claim::InFlight { .. } => {
                    return Err(InboxError::Unavailable(
                        "another accept of this delivery is under way".into(),
                    ));
                }
                Claim::Claimed => {}
            }
            if let Err(error) = s
                .publish("", &s.name, &body, properties(&meta, 0, 0, None))
                .await
            {
                // Not confirmed: the sender's retry may publish it (again).
                let _ = s.store.release(&accepted, token).await;
                return Err(error);
            }
            // Stale: the claim ran out and another accept took it over; this
            // delivery is in the queue all the same (the workers dedup).
            let _ = s.store.complete(&accepted, token, s.retention).await?;
            Ok(Accepted::Stored)
        });
        stored.await.map_err(InboxError::unavailable)?
    }

    async fn lease(
        &self,
        token: ClaimToken,
        batch: u32,
        lease: Duration,
        max_attempts: u32,
    ) -> Result<Vec<LeasedEvent>, InboxError> {
        let s = &self.shared;
        if batch == 0 || s.is_paused().await? {
            return Ok(Vec::new());
        }
        let started = Instant::now();
        let wanted = usize::try_from(batch).unwrap_or(usize::MAX);
        let mut out = Vec::new();
        while out.len() < wanted {
            let Some(delivery) = s.next_delivery().await? else {
                break;
            };
            let acker = delivery.acker.clone();
            match s.take(delivery, token, started, lease, max_attempts).await {
                Ok(Some(event)) => out.push(event),
                Ok(None) => {}
                Err(error) => {
                    // Not leased (the store or the broker failed on the
                    // way): handed back at once rather than left
                    // unacknowledged on this channel.
                    let _ = s
                        .timed(acker.nack(BasicNackOptions {
                            requeue: true,
                            ..BasicNackOptions::default()
                        }))
                        .await;
                    if out.is_empty() {
                        return Err(error);
                    }
                    break;
                }
            }
        }
        Ok(out)
    }

    async fn extend(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Transition, InboxError> {
        let s = &self.shared;
        let Some((_, _, replays, ..)) = s.held(key, token) else {
            return Ok(Transition::Stale);
        };
        let now = Instant::now();
        if s.store
            .extend(&s.done_key(key, replays), token, lease)
            .await?
            == Transition::Stale
        {
            return Ok(Transition::Stale);
        }
        let mut held = s.held.lock().unwrap_or_else(|e| e.into_inner());
        match held.get_mut(key).filter(|h| h.token == token) {
            Some(entry) => {
                entry.until = now + lease;
                Ok(Transition::Applied)
            }
            None => Ok(Transition::Stale),
        }
    }

    async fn complete(&self, key: &str, token: ClaimToken) -> Result<Transition, InboxError> {
        let s = &self.shared;
        let transition = s
            .settle(key, token, true, true, async |_, _, _, _, _| Ok(()))
            .await?;
        Ok(transition)
    }

    async fn complete_many(
        &self,
        done: &[(&str, ClaimToken)],
    ) -> Result<Vec<Transition>, InboxError> {
        let all = futures_util::future::join_all(
            done.iter().map(|(key, token)| self.complete(key, *token)),
        )
        .await;
        all.into_iter().collect()
    }

    async fn retry(
        &self,
        key: &str,
        token: ClaimToken,
        delay: Duration,
        _error: &str,
    ) -> Result<Transition, InboxError> {
        self.shared
            .settle(
                key,
                token,
                false,
                false,
                async |s, meta, body, attempt, replays| {
                    s.requeue(meta, body, attempt, replays, delay).await
                },
            )
            .await
    }

    async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, InboxError> {
        self.shared
            .settle(
                key,
                token,
                false,
                false,
                async |s, meta, body, attempt, replays| {
                    // This attempt not counted.
                    s.requeue(meta, body, attempt - 1, replays, Duration::ZERO)
                        .await
                },
            )
            .await
    }

    async fn dead_letter(
        &self,
        key: &str,
        token: ClaimToken,
        error: &str,
    ) -> Result<Transition, InboxError> {
        self.shared
            .settle(
                key,
                token,
                true,
                false,
                async |s, meta, body, attempt, replays| {
                    s.bury(meta, body, attempt, replays, error).await
                },
            )
            .await
    }

    async fn dead_letters(&self, filter: &DeadLetterFilter) -> Result<DeadLetterPage, InboxError> {
        super::search::refuse_in_broker(filter.search.as_ref(), "RabbitMQ")?;
        let s = &self.shared;
        let all = s.dead_letters(false).await?;
        let examined = all.len() as u64;
        let mut items: Vec<DeadLetter> = all
            .into_iter()
            .filter(|d| {
                filter.scheme.as_ref().is_none_or(|x| *x == d.meta.scheme)
                    && filter
                        .event_type
                        .as_ref()
                        .is_none_or(|x| Some(x) == d.meta.event_type.as_ref())
                    && filter.received_from.is_none_or(|t| d.meta.received_at >= t)
                    && filter.received_until.is_none_or(|t| d.meta.received_at < t)
            })
            .collect();
        items.sort_by(|a, b| {
            (to_ms(a.meta.received_at), &a.meta.key).cmp(&(to_ms(b.meta.received_at), &b.meta.key))
        });
        items.dedup_by(|a, b| a.meta.key == b.meta.key);
        if let Some(after) = &filter.after {
            items.retain(|d| {
                (to_ms(d.meta.received_at), &d.meta.key) > (after.received_at_ms, &after.key)
            });
        }
        let size = filter.page_size() as usize;
        let next = (items.len() > size).then(|| {
            let last = &items[size - 1];
            DeadLetterCursor {
                received_at_ms: to_ms(last.meta.received_at),
                key: last.meta.key.clone(),
            }
        });
        items.truncate(size);
        Ok(DeadLetterPage {
            items,
            next,
            examined,
        })
    }

    async fn dead_letter_get(&self, key: &str) -> Result<Option<DeadLetter>, InboxError> {
        Ok(self
            .shared
            .dead_letters(true)
            .await?
            .into_iter()
            .find(|d| d.meta.key == key))
    }

    async fn replay(&self, key: &str) -> Result<Transition, InboxError> {
        let s = &self.shared;
        s.take_dead(key, async |meta, headers, body| {
            // A fresh attempt budget and a fresh completion record.
            s.requeue(meta, body, 0, headers.replays + 1, Duration::ZERO)
                .await?;
            Ok(true)
        })
        .await
    }

    async fn discard(&self, key: &str) -> Result<Transition, InboxError> {
        self.shared.take_dead(key, async |_, _, _| Ok(true)).await
    }

    async fn purge_completed(&self, older_than: Duration) -> Result<u64, InboxError> {
        // The completion records, oldest first: taken while older than the
        // cutoff, the first newer one and the rest put back. (The dedup
        // store expires its own records after the retention.)
        let s = &self.shared;
        let cutoff = to_ms(SystemTime::now())
            .saturating_sub(i64::try_from(older_than.as_millis()).unwrap_or(i64::MAX));
        let channel = s.channel().await?;
        let queue = format!("{}.done", s.name);
        let mut purged = 0;
        let outcome = loop {
            let message = match s
                .timed(channel.basic_get(queue.as_str().into(), BasicGetOptions { no_ack: false }))
                .await
            {
                Ok(Some(message)) => message,
                Ok(None) => break Ok(purged),
                Err(error) => break Err(error),
            };
            let completed_at = std::str::from_utf8(&message.delivery.data)
                .ok()
                .and_then(|t| t.parse::<i64>().ok())
                .unwrap_or(0);
            if completed_at > cutoff {
                break Ok(purged);
            }
            if let Err(error) = s.ack(&message.delivery.acker).await {
                break Err(error);
            }
            purged += 1;
        };
        let _ = channel.close(200, "done".into()).await;
        outcome
    }

    async fn stats(&self) -> Result<InboxStats, InboxError> {
        let s = &self.shared;
        let (ready, dead, completed) = s.declare().await?;
        let in_flight = s.held.lock().unwrap_or_else(|e| e.into_inner()).len() as u64;
        Ok(InboxStats {
            pending: ready,
            due: ready,
            oldest_due_age: None,
            in_flight,
            dead,
            completed,
            paused: s.is_paused().await?,
        })
    }

    async fn set_paused(&self, paused: bool) -> Result<bool, InboxError> {
        let s = &self.shared;
        let key = s.key("flag", "paused");
        let token = pause_token(&s.space);
        if paused {
            Ok(matches!(
                s.store.claim(&key, token, PAUSE_LEASE).await?,
                Claim::Claimed
            ))
        } else {
            Ok(s.store.release(&key, token).await? == Transition::Applied)
        }
    }

    async fn paused(&self) -> Result<bool, InboxError> {
        self.shared.is_paused().await
    }

    async fn deliveries(&self, filter: &DeliveryFilter) -> Result<DeliveryPage, InboxError> {
        super::search::refuse_in_broker(filter.search.as_ref(), "RabbitMQ")?;
        let s = &self.shared;
        let items: Vec<Delivery> = match filter.state {
            DeliveryState::Dead => s
                .dead_letters(false)
                .await?
                .into_iter()
                .map(|d| Delivery {
                    state: DeliveryState::Dead,
                    attempts: d.attempts,
                    last_error: d.last_error,
                    due_at: None,
                    lease_until: None,
                    updated_at: d.dead_at,
                    body: Bytes::new(),
                    meta: d.meta,
                })
                .collect(),
            _ => {
                return Err(InboxError::Protocol(
                    "the RabbitMQ inbox lists dead letters only: the broker does not show the \
                     messages of a queue without delivering them (see docs/inbox.md)"
                        .to_owned(),
                ));
            }
        };
        Ok(super::page_in_memory(items, filter))
    }

    async fn delivery_get(&self, key: &str) -> Result<Option<Delivery>, InboxError> {
        let s = &self.shared;
        let leased = {
            let held = s.held.lock().unwrap_or_else(|e| e.into_inner());
            held.get(key).map(|h| Delivery {
                meta: event_meta(&h.meta),
                state: DeliveryState::InFlight,
                attempts: h.attempt,
                last_error: None,
                due_at: None,
                lease_until: None,
                updated_at: SystemTime::now(),
                body: h.body.clone(),
            })
        };
        if leased.is_some() {
            return Ok(leased);
        }
        Ok(self.dead_letter_get(key).await?.map(|dead| Delivery {
            state: DeliveryState::Dead,
            attempts: dead.attempts,
            last_error: dead.last_error,
            due_at: None,
            lease_until: None,
            updated_at: dead.dead_at,
            body: dead.body,
            meta: dead.meta,
        }))
    }

    async fn activity(&self, _minutes: u32) -> Result<Activity, InboxError> {
        Err(InboxError::Protocol(
            "the RabbitMQ inbox keeps no per-minute activity: use the broker's own \
             metrics (see docs/inbox.md)"
                .to_owned(),
        ))
    }
}

/// Ends the lease of `key` held by `token` once it runs out unsettled (a
/// stuck handler): its completion claim is released and the delivery handed
/// back to the broker (a negative acknowledgement with requeue), which
/// delivers it again, one more attempt counted (`x-delivery-count`). A
/// process that died has its deliveries handed back when its connection
/// closes.
async fn reap(shared: std::sync::Weak<Shared>, key: String, token: ClaimToken, done_key: String) {
    loop {
        let until = {
            let Some(s) = shared.upgrade() else { return };
            let held = s.held.lock().unwrap_or_else(|e| e.into_inner());
            match held.get(&key) {
                Some(h) if h.token == token => h.until,
                _ => return,
            }
        };
        tokio::time::sleep_until(until.into()).await;
        let Some(s) = shared.upgrade() else { return };
        let acker = {
            let mut held = s.held.lock().unwrap_or_else(|e| e.into_inner());
            match held.get(&key) {
                Some(h) if h.token == token && h.until <= Instant::now() => {
                    held.remove(&key).map(|h| h.acker)
                }
                Some(h) if h.token == token => continue,
                _ => return,
            }
        };
        if let Some(acker) = acker {
            let _ = s.store.release(&done_key, token).await;
            let _ = s
                .timed(acker.nack(BasicNackOptions {
                    requeue: true,
                    ..BasicNackOptions::default()
                }))
                .await;
        }
        return;
    }
}
