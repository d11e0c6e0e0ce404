//! The NATS JetStream [`Inbox`](super::Inbox): deliveries handed to a
//! stream, worked from a durable pull consumer.
//!
//! | what | where |
//! |---|---|
//! | deliveries | stream `<S>` (work-queue retention, file storage), subject `<S>.in.<scheme>.<event type>`, `Nats-Msg-Id` = the inbox key |
//! | the record of what was accepted | stream `<S>_KEYS`, subject `<S>_KEYS.<key digest>`, one message per key, kept for the retention |
//! | workers' leases | the durable pull consumer `workers` (explicit acks, `ack_wait` = the lease, unlimited redeliveries) |
//! | dead letters | stream `<S>_DEAD`, subject `<S>_DEAD.<key digest>`, one message per key |
//! | completions | stream `<S>_DONE`, subject `<S>_DONE.<key digest>`, one message per key, kept for the retention |
//! | activity | stream `<S>_ACT`, subjects `<S>_ACT.<minute>.<kind>` (`a`, `c` or `f`), kept two hours |
//! | the pause flag | stream `<S>_CTL`, subject `<S>_CTL.paused` (set over the last sequence read) |
//!
//! **Accept.** A delivery is answered only once the stream's publish
//! acknowledgement arrived (and the accepted-key record was written): a
//! publish error or timeout is an [`InboxError`], so the pipeline answers
//! `503` and nothing acknowledged is lost. A publish the stream recognises
//! as a duplicate (same `Nats-Msg-Id` within the stream's duplicate window)
//! is a [`Duplicate`](super::Accepted::Duplicate); past the window the
//! `<S>_KEYS` record answers it, for as long as the retention.
//!
//! **Leases** are the consumer's: a lease is a fetch, [`extend`](super::Inbox::extend)
//! an in-progress acknowledgement, [`complete`](super::Inbox::complete) an
//! acknowledgement the server confirms (a double ack), [`retry`](super::Inbox::retry)
//! a negative acknowledgement with the backoff's delay,
//! [`dead_letter`](super::Inbox::dead_letter) a publish to `<S>_DEAD` then a
//! terminate. The message handles live in the process that leased them: a
//! token this process does not hold (another process's lease, a restart, a
//! lease past its end) is [`Stale`](super::Transition::Stale).
//!
//! See `docs/inbox.md` (JetStream) for the message format other languages
//! consume, and for what the engine cannot answer the way the databases do.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_nats::HeaderMap;
use async_nats::jetstream::message::StreamMessage;
use async_nats::jetstream::{self, AckKind, Context, consumer, stream};
use bytes::Bytes;
use futures_util::StreamExt as _;

use super::{
    Accepted, Activity, ClaimToken, DeadLetter, DeadLetterCursor, DeadLetterFilter, DeadLetterPage,
    Delivery, DeliveryFilter, DeliveryPage, DeliveryState, EXPIRED_ON_LAST_ATTEMPT, InboxError,
    InboxStats, LeasedEvent, NewEvent, OpenError, Transition, to_ms,
};

mod builder;
mod format;

pub use builder::JetStreamInboxBuilder;
use format::{
    Dead, Meta, ascii_json, completed_at, dead_letter_of, digest, event_meta, header_json, ms_u64,
    time_of, token,
};

/// The header holding a delivery's metadata (JSON, ASCII only).
pub const META_HEADER: &str = "Webhooks-Meta";
/// The header of a dead letter holding its attempts, last error and time (JSON, ASCII only).
pub const DEAD_HEADER: &str = "Webhooks-Dead";
/// The durable pull consumer's name.
pub const CONSUMER: &str = "workers";
/// The most messages a listing of dead letters or completions reads.
pub const LISTING_SCAN_BUDGET: u64 = 10_000;

/// A message this process leased.
struct Held {
    token: ClaimToken,
    message: Arc<jetstream::Message>,
    /// When the lease ends at the latest, by this process's clock (from the
    /// fetch's start: never later than the server's own deadline).
    until: Instant,
    attempt: u32,
    meta: Arc<Meta>,
    body: Bytes,
}

struct Shared {
    context: Context,
    name: String,
    main: stream::Stream,
    dead: stream::Stream,
    done: stream::Stream,
    activity: stream::Stream,
    keys: stream::Stream,
    control: stream::Stream,
    consumer: Mutex<consumer::PullConsumer>,
    consumer_config: consumer::pull::Config,
    /// The consumer's `ack_wait`, in milliseconds.
    ack_wait_ms: AtomicU64,
    held: Mutex<HashMap<String, Held>>,
    timeout: Duration,
}

/// The durable inbox on NATS JetStream (feature `nats`).
///
/// ```no_run
/// # async fn run() -> Result<(), webhooks_core::inbox::OpenError> {
/// use std::time::Duration;
/// use webhooks_core::inbox::JetStreamInbox;
///
/// let inbox = JetStreamInbox::builder("nats://127.0.0.1:4222")
///     .stream("ORDERS")
///     .replicas(3)
///     .duplicate_window(Duration::from_secs(3600))
///     .connect()
///     .await?;
/// # let _ = inbox; Ok(()) }
/// ```
#[derive(Clone)]
pub struct JetStreamInbox {
    shared: Arc<Shared>,
}

impl fmt::Debug for JetStreamInbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JetStreamInbox")
            .field("stream", &self.shared.name)
            .finish_non_exhaustive()
    }
}

impl JetStreamInbox {
    /// Connects with the defaults (stream `WEBHOOKS`).
    ///
    /// # Errors
    ///
    /// As [`JetStreamInboxBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self, OpenError> {
        Self::builder(url).connect().await
    }

    /// The stream's name.
    #[must_use]
    pub fn stream_name(&self) -> &str {
        &self.shared.name
    }

    /// Deletes every stream and bucket of this inbox (tests, teardown).
    ///
    /// # Errors
    ///
    /// [`InboxError`] when the server cannot answer.
    pub async fn delete(&self) -> Result<(), InboxError> {
        let s = &self.shared;
        let _ = s.context.delete_stream(&s.name).await;
        for suffix in ["DEAD", "DONE", "ACT", "KEYS", "CTL"] {
            let _ = s
                .context
                .delete_stream(format!("{}_{suffix}", s.name))
                .await;
        }
        Ok(())
    }
}

impl Shared {
    /// `future` within the command timeout, its error as [`InboxError::Unavailable`].
    async fn timed<T, E, F>(&self, future: F) -> Result<T, InboxError>
    where
        F: IntoFuture<Output = Result<T, E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        match tokio::time::timeout(self.timeout, future.into_future()).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(InboxError::Unavailable(error.into())),
            Err(_) => Err(InboxError::Timeout),
        }
    }

    fn subject(&self, suffix: &str, key: &str) -> String {
        format!("{}_{suffix}.{}", self.name, digest(key))
    }

    /// Counts one transition in this minute's activity subject (a plain
    /// publish: counting never delays or fails an operation).
    async fn count(&self, kind: &str) {
        let minute = to_ms(SystemTime::now()) / 60_000;
        let subject = format!("{}_ACT.{minute}.{kind}", self.name);
        let _ = self.context.client().publish(subject, Bytes::new()).await;
    }

    /// The lease `key` holds for `token`, if this process holds it and its
    /// lease has not run out (then it is forgotten: the server redelivers it).
    fn held(
        &self,
        key: &str,
        token: ClaimToken,
    ) -> Option<(Arc<jetstream::Message>, u32, Arc<Meta>, Bytes)> {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let entry = held.get(key)?;
        if entry.token != token {
            return None;
        }
        if Instant::now() >= entry.until {
            // Run out: the reaper hands it back to the server.
            return None;
        }
        Some((
            Arc::clone(&entry.message),
            entry.attempt,
            Arc::clone(&entry.meta),
            entry.body.clone(),
        ))
    }

    fn forget(&self, key: &str, token: ClaimToken) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.get(key).is_some_and(|h| h.token == token) {
            held.remove(key);
        }
    }

    /// Publishes the dead letter of `meta`/`body` (idempotent per stream
    /// sequence), then terminates the message.
    async fn bury(
        &self,
        message: &jetstream::Message,
        meta: &Meta,
        body: Bytes,
        attempts: u32,
        error: &str,
    ) -> Result<(), InboxError> {
        let info = message.info().map_err(InboxError::Unavailable)?;
        let mut headers = HeaderMap::new();
        headers.insert(
            "Nats-Msg-Id",
            format!("{}:{}", digest(&meta.key), info.stream_sequence).as_str(),
        );
        headers.insert(META_HEADER, ascii_json(meta).as_str());
        let dead = Dead {
            attempts,
            last_error: Some(super::truncate_error(error).to_owned()),
            dead_at_ms: to_ms(SystemTime::now()),
        };
        headers.insert(DEAD_HEADER, ascii_json(&dead).as_str());
        let subject = self.subject("DEAD", &meta.key);
        let ack = self
            .timed(self.context.publish_with_headers(subject, headers, body))
            .await?;
        self.timed(ack).await?;
        self.timed(message.ack_with(AckKind::Term)).await?;
        self.count("f").await;
        Ok(())
    }

    async fn consumer(&self, lease: Duration) -> Result<consumer::PullConsumer, InboxError> {
        // Only ever raised: a shorter lease is ended by this process (the
        // reaper), a longer one must not be redelivered under its worker.
        let wanted = ms_u64(lease);
        if self.ack_wait_ms.load(Ordering::Relaxed) < wanted {
            let config = consumer::pull::Config {
                ack_wait: lease,
                ..self.consumer_config.clone()
            };
            let updated = self.timed(self.main.create_consumer(config)).await?;
            self.ack_wait_ms.store(wanted, Ordering::Relaxed);
            *self.consumer.lock().unwrap_or_else(|e| e.into_inner()) = updated;
        }
        Ok(self
            .consumer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone())
    }

    async fn is_paused(&self) -> Result<bool, InboxError> {
        Ok(self.pause_flag().await?.is_some_and(|(_, paused)| paused))
    }

    /// The pause flag's message: its sequence and value, if ever set.
    async fn pause_flag(&self) -> Result<Option<(u64, bool)>, InboxError> {
        let subject = format!("{}_CTL.paused", self.name);
        Ok(last_for(self, &self.control, subject)
            .await?
            .map(|m| (m.sequence, m.payload.as_ref() == b"1")))
    }

    /// Every message of `stream` (at most [`LISTING_SCAN_BUDGET`]), oldest first.
    async fn scan(
        &self,
        stream: &stream::Stream,
        suffix: &str,
    ) -> Result<Vec<StreamMessage>, InboxError> {
        let subject = format!("{}_{suffix}.>", self.name);
        let mut out = Vec::new();
        let mut sequence = 1;
        while (out.len() as u64) < LISTING_SCAN_BUDGET {
            let next = stream
                .raw_message_builder()
                .next_by_subject(subject.clone())
                .sequence(sequence)
                .send();
            match tokio::time::timeout(self.timeout, next).await {
                Ok(Ok(message)) => {
                    sequence = message.sequence + 1;
                    out.push(message);
                }
                Ok(Err(error))
                    if matches!(error.kind(), stream::RawMessageErrorKind::NoMessageFound) =>
                {
                    break;
                }
                Ok(Err(error)) => return Err(InboxError::unavailable(error)),
                Err(_) => return Err(InboxError::Timeout),
            }
        }
        Ok(out)
    }
}

impl Shared {
    /// One fetch of up to `count` messages into `out`; how many were
    /// dead-lettered instead.
    #[allow(clippy::too_many_arguments, reason = "the lease's own parameters")]
    async fn fetch(
        &self,
        consumer: &consumer::PullConsumer,
        token: ClaimToken,
        started: Instant,
        lease: Duration,
        max_attempts: u32,
        count: usize,
        out: &mut Vec<LeasedEvent>,
        inbox: &JetStreamInbox,
    ) -> Result<usize, InboxError> {
        let s = self;
        let mut buried = 0;
        let mut fetched = Vec::new();
        let mut messages = s
            .timed(consumer.fetch().max_messages(count).messages())
            .await?;
        while let Some(message) = tokio::time::timeout(s.timeout, messages.next())
            .await
            .map_err(|_| InboxError::Timeout)?
        {
            let message = message.map_err(InboxError::Unavailable)?;
            let info = message.info().map_err(InboxError::Unavailable)?;
            let attempt = u32::try_from(info.delivered).unwrap_or(u32::MAX);
            let body = message.payload.clone();
            let meta = match message
                .headers
                .as_ref()
                .and_then(|h| h.get(META_HEADER))
                .and_then(|v| serde_json::from_str::<Meta>(v.as_str()).ok())
            {
                Some(meta) => meta,
                None => {
                    // Not ours (published by something else): dead-letter it
                    // under its sequence, so that it is seen, not looped on.
                    let meta = Meta {
                        key: format!("nats:{}:{}", s.name, info.stream_sequence),
                        scheme: "unknown".to_owned(),
                        delivery_id: None,
                        event_type: None,
                        matched_key: String::new(),
                        headers: Vec::new(),
                        signed_at: None,
                        received_at_ms: to_ms(time_of(info.published.unix_timestamp_nanos())),
                    };
                    s.bury(&message, &meta, body, attempt, "no Webhooks-Meta header")
                        .await?;
                    buried += 1;
                    continue;
                }
            };
            if attempt > max_attempts {
                // Its lease ran out on the last attempt: the worker crashed,
                // was killed or stalled.
                s.bury(&message, &meta, body, attempt - 1, EXPIRED_ON_LAST_ATTEMPT)
                    .await?;
                buried += 1;
                continue;
            }
            fetched.push((message, attempt, meta, body));
        }
        // A copy of a completed delivery (a re-publish the duplicate window
        // missed across a leader change, or a process that died between the
        // completion's record and its acknowledgement) is acknowledged and
        // dropped: each key is completed once. One lookup per message, all
        // at once. A lookup that fails hands the message out (at least once).
        let completed = futures_util::future::join_all(
            fetched
                .iter()
                .map(|(_, _, meta, _)| last_for(s, &s.done, s.subject("DONE", &meta.key))),
        )
        .await;
        for ((message, attempt, meta, body), completed) in fetched.into_iter().zip(completed) {
            if matches!(completed, Ok(Some(_))) {
                s.timed(message.double_ack()).await?;
                continue;
            }
            let meta = Arc::new(meta);
            out.push(LeasedEvent {
                meta: event_meta(&meta),
                body: body.clone(),
                attempt,
                token,
            });
            let key = meta.key.clone();
            s.held.lock().unwrap_or_else(|e| e.into_inner()).insert(
                key.clone(),
                Held {
                    token,
                    message: Arc::new(message),
                    until: started + lease,
                    attempt,
                    meta,
                    body,
                },
            );
            tokio::spawn(reap(Arc::downgrade(&inbox.shared), key, token));
        }
        Ok(buried)
    }
}

#[async_trait::async_trait]
impl super::Inbox for JetStreamInbox {
    async fn accept(&self, event: &NewEvent) -> Result<Accepted, InboxError> {
        let s = &self.shared;
        let key = event.stored_key();
        if last_for(s, &s.keys, s.subject("KEYS", &key))
            .await?
            .is_some()
        {
            return Ok(Accepted::Duplicate);
        }
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
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", key.as_str());
        headers.insert(META_HEADER, ascii_json(&meta).as_str());
        let subject = format!(
            "{}.in.{}.{}",
            s.name,
            token(&event.scheme),
            token(event.event_type.as_deref().unwrap_or(""))
        );
        // The publish and the accepted-key record run in a task of their
        // own: a caller that stops waiting (the sender hung up, the request
        // future dropped) cannot leave a published delivery without its
        // record, which would let a retry past the duplicate window publish
        // it again.
        let shared = Arc::clone(&self.shared);
        let body = event.body.clone();
        let stored = tokio::spawn(async move {
            let s = &shared;
            let ack = s
                .timed(s.context.publish_with_headers(subject, headers, body))
                .await?;
            let ack = s.timed(ack).await?;
            // The record, so that a retry past the duplicate window is still
            // a duplicate; written before the answer (a lost write answers
            // 503, and the sender's retry, a duplicate of the stream, writes
            // it).
            let value = Bytes::from(ack.sequence.to_string());
            let record = s
                .timed(s.context.publish(s.subject("KEYS", &key), value))
                .await?;
            s.timed(record).await?;
            if ack.duplicate {
                return Ok(Accepted::Duplicate);
            }
            s.count("a").await;
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
        let consumer = s.consumer(lease).await?;
        let started = Instant::now();
        let wanted = usize::try_from(batch).unwrap_or(usize::MAX);
        let mut out = Vec::new();
        // Dead-lettered messages do not fill the batch: fetch again (a few
        // rounds at most) while some were.
        for _ in 0..4 {
            let buried = s
                .fetch(
                    &consumer,
                    token,
                    started,
                    lease,
                    max_attempts,
                    wanted - out.len(),
                    &mut out,
                    self,
                )
                .await?;
            if buried == 0 || out.len() >= wanted {
                break;
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
        let Some((message, ..)) = s.held(key, token) else {
            return Ok(Transition::Stale);
        };
        let sent = Instant::now();
        s.timed(message.ack_with(AckKind::Progress)).await?;
        // The server restarts its `ack_wait` on receipt, after `sent`.
        // The server's `ack_wait` (never shorter than a lease) restarts at
        // receipt, after `sent`; raise it first if this lease is longer.
        s.consumer(lease).await?;
        let mut held = s.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = held.get_mut(key).filter(|h| h.token == token) {
            entry.until = sent + lease;
        }
        Ok(Transition::Applied)
    }

    async fn complete(&self, key: &str, token: ClaimToken) -> Result<Transition, InboxError> {
        let s = &self.shared;
        let Some((message, _, meta, _)) = s.held(key, token) else {
            return Ok(Transition::Stale);
        };
        // The completion's record (stats, listings, `delivery_get`) first,
        // then the acknowledgement the server confirms: a process that dies
        // between the two leaves a record whose event is redelivered and
        // completed again (one record per key), never a completion without
        // its record. A failed acknowledgement takes the record back.
        let mut headers = HeaderMap::new();
        headers.insert(META_HEADER, ascii_json(&*meta).as_str());
        let now = Bytes::from(to_ms(SystemTime::now()).to_string());
        let record = s
            .timed(
                s.context
                    .publish_with_headers(s.subject("DONE", key), headers, now),
            )
            .await?;
        let record = s.timed(record).await?;
        if let Err(error) = s.timed(message.double_ack()).await {
            let _ = s.timed(s.done.delete_message(record.sequence)).await;
            return Err(error);
        }
        s.forget(key, token);
        s.count("c").await;
        Ok(Transition::Applied)
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
        let s = &self.shared;
        let Some((message, ..)) = s.held(key, token) else {
            return Ok(Transition::Stale);
        };
        let delay = (!delay.is_zero()).then_some(delay);
        s.timed(message.ack_with(AckKind::Nak(delay))).await?;
        s.forget(key, token);
        s.count("f").await;
        Ok(Transition::Applied)
    }

    async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, InboxError> {
        let s = &self.shared;
        let Some((message, ..)) = s.held(key, token) else {
            return Ok(Transition::Stale);
        };
        s.timed(message.ack_with(AckKind::Nak(None))).await?;
        s.forget(key, token);
        Ok(Transition::Applied)
    }

    async fn dead_letter(
        &self,
        key: &str,
        token: ClaimToken,
        error: &str,
    ) -> Result<Transition, InboxError> {
        let s = &self.shared;
        let Some((message, attempt, meta, body)) = s.held(key, token) else {
            return Ok(Transition::Stale);
        };
        s.bury(&message, &meta, body, attempt, error).await?;
        s.forget(key, token);
        Ok(Transition::Applied)
    }

    async fn dead_letters(&self, filter: &DeadLetterFilter) -> Result<DeadLetterPage, InboxError> {
        super::search::refuse_in_broker(filter.search.as_ref(), "JetStream")?;
        let s = &self.shared;
        let messages = s.scan(&s.dead, "DEAD").await?;
        let examined = messages.len() as u64;
        let mut items: Vec<DeadLetter> = messages
            .into_iter()
            .filter_map(|m| dead_letter_of(&m, false))
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
        let s = &self.shared;
        Ok(last_for(s, &s.dead, s.subject("DEAD", key))
            .await?
            .and_then(|m| dead_letter_of(&m, true))
            .filter(|d| d.meta.key == key))
    }

    async fn replay(&self, key: &str) -> Result<Transition, InboxError> {
        let s = &self.shared;
        let Some(message) = last_for(s, &s.dead, s.subject("DEAD", key)).await? else {
            return Ok(Transition::Stale);
        };
        let Some(meta) = header_json::<Meta>(&message.headers, META_HEADER) else {
            return Ok(Transition::Stale);
        };
        // Published under an id of this dead letter: two replays of it
        // publish once (the other is the stream's duplicate), and a replay
        // that died before deleting the dead letter is not published twice.
        let mut headers = HeaderMap::new();
        headers.insert(
            "Nats-Msg-Id",
            format!("replay:{}:{}", message.sequence, meta.key).as_str(),
        );
        headers.insert(META_HEADER, ascii_json(&meta).as_str());
        let subject = format!(
            "{}.in.{}.{}",
            s.name,
            token(&meta.scheme),
            token(meta.event_type.as_deref().unwrap_or(""))
        );
        let ack = s
            .timed(
                s.context
                    .publish_with_headers(subject, headers, message.payload.clone()),
            )
            .await?;
        let ack = s.timed(ack).await?;
        let _ = s.timed(s.dead.delete_message(message.sequence)).await;
        Ok(if ack.duplicate {
            Transition::Stale
        } else {
            Transition::Applied
        })
    }

    async fn discard(&self, key: &str) -> Result<Transition, InboxError> {
        let s = &self.shared;
        let Some(message) = last_for(s, &s.dead, s.subject("DEAD", key)).await? else {
            return Ok(Transition::Stale);
        };
        Ok(match s.dead.delete_message(message.sequence).await {
            Ok(true) => Transition::Applied,
            _ => Transition::Stale,
        })
    }

    async fn purge_completed(&self, older_than: Duration) -> Result<u64, InboxError> {
        let s = &self.shared;
        let cutoff = SystemTime::now()
            .checked_sub(older_than)
            .unwrap_or(UNIX_EPOCH);
        let messages = s.scan(&s.done, "DONE").await?;
        // In sequence order, which is completion order.
        let Some(first_kept) = messages.iter().find(|m| completed_at(m) >= cutoff) else {
            let purged = s.timed(s.done.purge()).await?;
            return Ok(purged.purged);
        };
        if messages
            .first()
            .is_some_and(|m| m.sequence == first_kept.sequence)
        {
            return Ok(0);
        }
        let purged = s
            .timed(s.done.purge().sequence(first_kept.sequence))
            .await?;
        Ok(purged.purged)
    }

    async fn stats(&self) -> Result<InboxStats, InboxError> {
        let s = &self.shared;
        let mut consumer = s.consumer.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let info = s.timed(consumer.info()).await?.clone();
        let mut dead = s.dead.clone();
        let dead = s.timed(dead.info()).await?.state.messages;
        let mut done = s.done.clone();
        let completed = s.timed(done.info()).await?.state.messages;
        Ok(InboxStats {
            pending: info.num_pending,
            due: info.num_pending,
            oldest_due_age: None,
            in_flight: info.num_ack_pending as u64,
            dead,
            completed,
            paused: s.is_paused().await?,
        })
    }

    async fn set_paused(&self, paused: bool) -> Result<bool, InboxError> {
        let s = &self.shared;
        let wanted: &'static [u8] = if paused { b"1" } else { b"0" };
        let current = s.pause_flag().await?;
        if current.is_some_and(|(_, flag)| flag) == paused {
            return Ok(false);
        }
        // Only over the flag as read: of two handles changing it at once,
        // one applies; the other finds it changed and answers `false`.
        let mut headers = HeaderMap::new();
        let expected = current.map_or(0, |(sequence, _)| sequence);
        headers.insert(
            "Nats-Expected-Last-Subject-Sequence",
            expected.to_string().as_str(),
        );
        let subject = format!("{}_CTL.paused", s.name);
        let ack = s
            .timed(
                s.context
                    .publish_with_headers(subject, headers, Bytes::from_static(wanted)),
            )
            .await?;
        match s.timed(ack).await {
            Ok(_) => Ok(true),
            Err(_) if s.is_paused().await? == paused => Ok(false),
            Err(error) => Err(error),
        }
    }

    async fn paused(&self) -> Result<bool, InboxError> {
        self.shared.is_paused().await
    }

    async fn deliveries(&self, filter: &DeliveryFilter) -> Result<DeliveryPage, InboxError> {
        super::search::refuse_in_broker(filter.search.as_ref(), "JetStream")?;
        let s = &self.shared;
        let items: Vec<Delivery> = match filter.state {
            DeliveryState::Dead => s
                .scan(&s.dead, "DEAD")
                .await?
                .iter()
                .filter_map(|m| dead_letter_of(m, false))
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
            DeliveryState::Completed => s
                .scan(&s.done, "DONE")
                .await?
                .iter()
                .filter_map(|m| {
                    let meta = header_json::<Meta>(&m.headers, META_HEADER)?;
                    Some(Delivery {
                        meta: event_meta(&meta),
                        state: DeliveryState::Completed,
                        attempts: 0,
                        last_error: None,
                        due_at: None,
                        lease_until: None,
                        updated_at: completed_at(m),
                        body: Bytes::new(),
                    })
                })
                .collect(),
            _ => {
                return Err(InboxError::Protocol(
                    "the JetStream inbox lists dead and completed deliveries only: pending and \
                     in-flight ones are the consumer's (see docs/inbox.md)"
                        .to_owned(),
                ));
            }
        };
        Ok(super::page_in_memory(items, filter))
    }

    async fn delivery_get(&self, key: &str) -> Result<Option<Delivery>, InboxError> {
        let s = &self.shared;
        if let Some(dead) = self.dead_letter_get(key).await? {
            return Ok(Some(Delivery {
                state: DeliveryState::Dead,
                attempts: dead.attempts,
                last_error: dead.last_error,
                due_at: None,
                lease_until: None,
                updated_at: dead.dead_at,
                body: dead.body,
                meta: dead.meta,
            }));
        }
        if let Some(done) = last_for(s, &s.done, s.subject("DONE", key)).await?
            && let Some(meta) = header_json::<Meta>(&done.headers, META_HEADER)
            && meta.key == key
        {
            return Ok(Some(Delivery {
                meta: event_meta(&meta),
                state: DeliveryState::Completed,
                attempts: 0,
                last_error: None,
                due_at: None,
                lease_until: None,
                updated_at: completed_at(&done),
                body: Bytes::new(),
            }));
        }
        // Pending or in flight: the stream sequence the accept recorded.
        let Some(sequence) = last_for(s, &s.keys, s.subject("KEYS", key))
            .await?
            .and_then(|m| std::str::from_utf8(&m.payload).ok()?.parse::<u64>().ok())
        else {
            return Ok(None);
        };
        let Ok(message) = s.main.get_raw_message(sequence).await else {
            return Ok(None);
        };
        let Some(meta) = header_json::<Meta>(&message.headers, META_HEADER) else {
            return Ok(None);
        };
        Ok(Some(Delivery {
            meta: event_meta(&meta),
            state: DeliveryState::Due,
            attempts: 0,
            last_error: None,
            due_at: Some(time_of(message.time.unix_timestamp_nanos())),
            lease_until: None,
            updated_at: time_of(message.time.unix_timestamp_nanos()),
            body: message.payload,
        }))
    }

    async fn activity(&self, minutes: u32) -> Result<Activity, InboxError> {
        let s = &self.shared;
        let now_minute = to_ms(SystemTime::now()) / 60_000;
        let mut rows = Vec::new();
        let subjects = s
            .timed(s.activity.info_with_subjects(format!("{}_ACT.>", s.name)))
            .await?;
        let pairs: Vec<_> = tokio::time::timeout(s.timeout, subjects.collect::<Vec<_>>())
            .await
            .map_err(|_| InboxError::Timeout)?;
        for pair in pairs {
            let (subject, n) = pair.map_err(InboxError::unavailable)?;
            let mut parts = subject.rsplit('.');
            let (Some(kind), Some(minute)) = (parts.next(), parts.next()) else {
                continue;
            };
            let kind = match kind {
                "a" => super::activity::ACCEPTED,
                "c" => super::activity::COMPLETED,
                "f" => super::activity::FAILED,
                _ => continue,
            };
            if let Ok(minute) = minute.parse::<i64>() {
                rows.push((minute, kind, i64::try_from(n).unwrap_or(i64::MAX)));
            }
        }
        Ok(Activity::from_rows(now_minute, minutes, rows))
    }
}

/// Ends the lease of `key` held by `token` once it runs out unsettled (a
/// stuck handler): the message is handed back to the server (a negative
/// acknowledgement), which redelivers it at once to the next lease. A
/// process that died ends its leases through the consumer's `ack_wait`.
async fn reap(shared: std::sync::Weak<Shared>, key: String, token: ClaimToken) {
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
        let message = {
            let mut held = s.held.lock().unwrap_or_else(|e| e.into_inner());
            match held.get(&key) {
                Some(h) if h.token == token && h.until <= Instant::now() => {
                    held.remove(&key).map(|h| h.message)
                }
                Some(h) if h.token == token => continue,
                _ => return,
            }
        };
        if let Some(message) = message {
            let _ = s.timed(message.ack_with(AckKind::Nak(None))).await;
        }
        return;
    }
}

async fn last_for(
    s: &Shared,
    stream: &stream::Stream,
    subject: String,
) -> Result<Option<StreamMessage>, InboxError> {
    match tokio::time::timeout(s.timeout, stream.get_last_raw_message_by_subject(&subject)).await {
        Ok(Ok(message)) => Ok(Some(message)),
        Ok(Err(error)) if error.kind() == stream::LastRawMessageErrorKind::NoMessageFound => {
            Ok(None)
        }
        Ok(Err(error)) => Err(InboxError::unavailable(error)),
        Err(_) => Err(InboxError::Timeout),
    }
}
