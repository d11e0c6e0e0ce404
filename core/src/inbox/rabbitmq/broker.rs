//! The broker's side of [`RabbitMqInbox`](super::RabbitMqInbox): the
//! connection and its channels, declarations, publishes with their
//! confirms, and the dead-letter queue's reading.

#[allow(clippy::wildcard_imports, reason = "the parent's types, shared")]
use super::*;

/// The arguments of `<Q>`: a quorum queue whose dead letters (its delivery
/// limit) go, at least once, to `<Q>.dead`.
pub(super) fn main_arguments(name: &str, delivery_limit: u32) -> FieldTable {
    let mut arguments = quorum();
    arguments.insert(
        "x-dead-letter-exchange".into(),
        text(&format!("{name}.dead")),
    );
    if delivery_limit > 0 {
        arguments.insert(
            "x-delivery-limit".into(),
            AMQPValue::LongLongInt(delivery_limit.into()),
        );
    }
    arguments
}

/// A durable quorum queue that dead-letters at least once.
pub(super) fn quorum() -> FieldTable {
    let mut arguments = FieldTable::default();
    arguments.insert("x-queue-type".into(), text("quorum"));
    arguments.insert("x-dead-letter-strategy".into(), text("at-least-once"));
    arguments.insert("x-overflow".into(), text("reject-publish"));
    arguments
}

pub(super) fn text(value: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(value.as_bytes().to_vec()))
}

/// The queue's namespace on the dedup store: `rabbitmq:<vhost>/<queue>`,
/// the virtual host percent-encoded (no `/` or `:` left in it; a queue's
/// name has no `/`), so that no two queues share a record.
pub(super) fn namespace(vhost: &str, queue: &str) -> String {
    use std::fmt::Write as _;
    let mut space = String::from("rabbitmq:");
    for byte in vhost.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.') {
            space.push(char::from(byte));
        } else {
            let _ = write!(space, "%{byte:02X}");
        }
    }
    space.push('/');
    space.push_str(queue);
    space
}

/// The pause flag's token: the same in every process using the queue.
pub(super) fn pause_token(space: &str) -> ClaimToken {
    use sha2::{Digest as _, Sha256};
    let digest = Sha256::digest(format!("pause:{space}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    ClaimToken::from_u128(u128::from_be_bytes(bytes))
}

impl Shared {
    /// `future` within the command timeout, its error as [`InboxError::Unavailable`].
    pub(super) async fn timed<T, E, F>(&self, future: F) -> Result<T, InboxError>
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

    /// A record's key on the dedup store: the queue's namespace, then
    /// what the record is.
    pub(super) fn key(&self, kind: &str, key: &str) -> String {
        format!("{}/{kind}:{key}", self.space)
    }

    /// The completion record's key of `key` after `replays` replays.
    pub(super) fn done_key(&self, key: &str, replays: u32) -> String {
        if replays == 0 {
            self.key("done", key)
        } else {
            self.key("done", &format!("{key}#r{replays}"))
        }
    }

    /// The current connection, reconnected if it closed.
    pub(super) async fn link(&self) -> Result<Arc<Link>, InboxError> {
        let mut slot = self.link.lock().await;
        if let Some(link) = slot.as_ref()
            && link.publish.status().connected()
        {
            return Ok(Arc::clone(link));
        }
        *slot = None;
        let connect = async {
            let connection =
                Connection::connect_uri(self.uri.clone(), ConnectionProperties::default())
                    .await
                    .map_err(InboxError::unavailable)?;
            let publish = connection
                .create_channel()
                .await
                .map_err(InboxError::unavailable)?;
            publish
                .confirm_select(ConfirmSelectOptions::default())
                .await
                .map_err(InboxError::unavailable)?;
            Ok::<_, InboxError>((connection, publish))
        };
        let (connection, publish) = tokio::time::timeout(self.connect_timeout, connect)
            .await
            .map_err(|_| InboxError::Timeout)??;
        let link = Arc::new(Link {
            _connection: connection,
            publish,
            generation: self.generation.fetch_add(1, Ordering::Relaxed) + 1,
        });
        *slot = Some(Arc::clone(&link));
        Ok(link)
    }

    /// A fresh channel on the connection (listings, declarations).
    pub(super) async fn channel(&self) -> Result<Channel, InboxError> {
        let link = self.link().await?;
        self.timed(link._connection.create_channel()).await
    }

    /// Publishes `body` and waits for its confirm: `Ok` only once the broker
    /// has it (mandatory: an unroutable message is an error too).
    pub(super) async fn publish(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<(), InboxError> {
        let link = self.link().await?;
        let publish = async {
            let confirm = link
                .publish
                .basic_publish(
                    exchange.into(),
                    routing_key.into(),
                    BasicPublishOptions {
                        mandatory: true,
                        ..BasicPublishOptions::default()
                    },
                    body,
                    properties,
                )
                .await?;
            confirm.await
        };
        match tokio::time::timeout(self.timeout, publish).await {
            Ok(Ok(Confirmation::Ack(None))) => Ok(()),
            Ok(Ok(Confirmation::Ack(Some(_)))) => Err(InboxError::Protocol(format!(
                "the broker could not route the message to `{routing_key}` (is the queue deleted?)"
            ))),
            Ok(Ok(Confirmation::Nack(_))) => Err(InboxError::Protocol(
                "the broker refused the message (a negative publisher confirm)".to_owned(),
            )),
            Ok(Ok(Confirmation::NotRequested)) => Err(InboxError::Protocol(
                "publisher confirms are off on the publishing channel".to_owned(),
            )),
            Ok(Err(error)) => {
                self.drop_link(link.generation).await;
                Err(InboxError::unavailable(error))
            }
            Err(_) => {
                // The confirm may still come, or never: this channel's
                // state is unknown, start again on a new connection.
                self.drop_link(link.generation).await;
                Err(InboxError::Timeout)
            }
        }
    }

    pub(super) async fn drop_link(&self, generation: u64) {
        let mut slot = self.link.lock().await;
        if slot.as_ref().is_some_and(|l| l.generation == generation) {
            *slot = None;
        }
    }

    /// Declares `<Q>` (checks it: the same arguments) and the dead letters'
    /// exchange and queue; answers `<Q>`'s ready count and the dead count.
    pub(super) async fn declare(&self) -> Result<(u64, u64, u64), InboxError> {
        let channel = self.channel().await?;
        let result = async {
            let dead = format!("{}.dead", self.name);
            self.timed(channel.exchange_declare(
                dead.as_str().into(),
                ExchangeKind::Fanout,
                ExchangeDeclareOptions {
                    durable: true,
                    ..ExchangeDeclareOptions::default()
                },
                FieldTable::default(),
            ))
            .await?;
            let mut dead_arguments = FieldTable::default();
            dead_arguments.insert("x-queue-type".into(), text("quorum"));
            let dead_queue = self
                .timed(channel.queue_declare(
                    dead.as_str().into(),
                    QueueDeclareOptions::durable(),
                    dead_arguments,
                ))
                .await?;
            self.timed(channel.queue_bind(
                dead.as_str().into(),
                dead.as_str().into(),
                "".into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            ))
            .await?;
            let mut done_arguments = FieldTable::default();
            done_arguments.insert("x-queue-type".into(), text("quorum"));
            let done = self
                .timed(channel.queue_declare(
                    format!("{}.done", self.name).as_str().into(),
                    QueueDeclareOptions::durable(),
                    done_arguments,
                ))
                .await?;
            let main = self
                .timed(channel.queue_declare(
                    self.name.as_str().into(),
                    QueueDeclareOptions::durable(),
                    main_arguments(&self.name, self.delivery_limit),
                ))
                .await?;
            Ok((
                u64::from(main.message_count()),
                u64::from(dead_queue.message_count()),
                u64::from(done.message_count()),
            ))
        }
        .await;
        let _ = channel.close(200, "done".into()).await;
        result
    }

    /// Declares the delay queue of `delay` (again before each use: a
    /// declaration restarts its expiry) and answers its name.
    pub(super) async fn delay_queue(&self, delay: Duration) -> Result<String, InboxError> {
        let ms = delay_bucket(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX));
        let name = format!("{}.delay.{ms}", self.name);
        let mut arguments = quorum();
        arguments.insert("x-message-ttl".into(), AMQPValue::LongLongInt(ms as i64));
        arguments.insert("x-dead-letter-exchange".into(), text(""));
        arguments.insert("x-dead-letter-routing-key".into(), text(&self.name));
        arguments.insert(
            "x-expires".into(),
            AMQPValue::LongLongInt(ms.saturating_add(3_600_000) as i64),
        );
        let link = self.link().await?;
        let declared = self
            .timed(link.publish.queue_declare(
                name.as_str().into(),
                QueueDeclareOptions::durable(),
                arguments,
            ))
            .await;
        if declared.is_err() {
            self.drop_link(link.generation).await;
        }
        declared?;
        Ok(name)
    }

    /// Publishes a copy of `meta`'s delivery for a new attempt after
    /// `delay` (now: straight into `<Q>`).
    pub(super) async fn requeue(
        &self,
        meta: &Meta,
        body: &[u8],
        attempts: u32,
        replays: u32,
        delay: Duration,
    ) -> Result<(), InboxError> {
        let queue = if delay.is_zero() {
            self.name.clone()
        } else {
            self.delay_queue(delay).await?
        };
        self.publish("", &queue, body, properties(meta, attempts, replays, None))
            .await
    }

    /// Publishes the dead letter of `meta`/`body` into `<Q>.dead`.
    pub(super) async fn bury(
        &self,
        meta: &Meta,
        body: &[u8],
        attempts: u32,
        replays: u32,
        error: &str,
    ) -> Result<(), InboxError> {
        let dead = Dead {
            attempts,
            last_error: Some(crate::inbox::truncate_error(error).to_owned()),
            dead_at_ms: to_ms(SystemTime::now()),
        };
        let exchange = format!("{}.dead", self.name);
        self.publish(
            &exchange,
            "",
            body,
            properties(meta, attempts, replays, Some(&dead)),
        )
        .await
    }

    /// Acknowledges a delivery (settled: its copy or record is elsewhere).
    pub(super) async fn ack(&self, acker: &Acker) -> Result<(), InboxError> {
        self.timed(acker.ack(BasicAckOptions::default()))
            .await
            .map(|_| ())
    }

    /// The lease `key` holds for `token`, if this process holds it and its
    /// lease has not run out.
    pub(super) fn held(
        &self,
        key: &str,
        token: ClaimToken,
    ) -> Option<(Acker, u32, u32, Arc<Meta>, Bytes)> {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let entry = held.get(key)?;
        if entry.token != token || Instant::now() >= entry.until {
            return None;
        }
        Some((
            entry.acker.clone(),
            entry.attempt,
            entry.replays,
            Arc::clone(&entry.meta),
            entry.body.clone(),
        ))
    }

    pub(super) fn forget(&self, key: &str, token: ClaimToken) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.get(key).is_some_and(|h| h.token == token) {
            held.remove(key);
        }
    }

    pub(super) async fn is_paused(&self) -> Result<bool, InboxError> {
        let token = pause_token(&self.space);
        Ok(self
            .store
            .extend(&self.key("flag", "paused"), token, PAUSE_LEASE)
            .await?
            == Transition::Applied)
    }

    /// The next ready delivery of `<Q>` (a `basic.get` on this process's
    /// leasing channel, which its acknowledgements use too), if any.
    pub(super) async fn next_delivery(
        &self,
    ) -> Result<Option<lapin::message::Delivery>, InboxError> {
        let link = self.link().await?;
        let mut slot = self.leasing.lock().await;
        let current = slot
            .as_ref()
            .filter(|l| l.generation == link.generation && l.channel.status().connected())
            .map(|l| l.channel.clone());
        let channel = match current {
            Some(channel) => channel,
            None => {
                // Its channel closed: the broker handed its deliveries back.
                let channel = self.timed(link._connection.create_channel()).await?;
                *slot = Some(Leasing {
                    channel: channel.clone(),
                    generation: link.generation,
                });
                channel
            }
        };
        drop(slot);
        match self
            .timed(channel.basic_get(self.name.as_str().into(), BasicGetOptions { no_ack: false }))
            .await
        {
            Ok(message) => Ok(message.map(|m| m.delivery)),
            Err(error) => {
                *self.leasing.lock().await = None;
                self.drop_link(link.generation).await;
                Err(error)
            }
        }
    }

    /// Reads the dead-letter queue on a channel of its own, without
    /// acknowledging: closing the channel puts every message back.
    pub(super) async fn scan_dead(
        &self,
    ) -> Result<(Channel, Vec<lapin::message::BasicGetMessage>), InboxError> {
        let channel = self.channel().await?;
        let queue = format!("{}.dead", self.name);
        let mut out = Vec::new();
        while out.len() < DEAD_LETTER_SCAN_BUDGET {
            match self
                .timed(channel.basic_get(queue.as_str().into(), BasicGetOptions { no_ack: false }))
                .await
            {
                Ok(Some(message)) => out.push(message),
                Ok(None) => break,
                Err(error) => {
                    let _ = channel.close(200, "done".into()).await;
                    return Err(error);
                }
            }
        }
        Ok((channel, out))
    }

    /// The dead letter of `key` in the dead-letter queue, acknowledged
    /// (taken out) when `take` accepts it; every other message is put back.
    pub(super) async fn take_dead(
        &self,
        key: &str,
        take: impl AsyncFnOnce(&Meta, &Headers, &[u8]) -> Result<bool, InboxError>,
    ) -> Result<Transition, InboxError> {
        let (channel, messages) = self.scan_dead().await?;
        let mut outcome = Ok(Transition::Stale);
        for message in &messages {
            let headers = Headers::of(&message.delivery.properties);
            let Some(meta) = headers.meta.as_ref().filter(|m| m.key == key) else {
                continue;
            };
            outcome = match take(meta, &headers, &message.delivery.data).await {
                Ok(true) => self
                    .ack(&message.delivery.acker)
                    .await
                    .map(|()| Transition::Applied),
                Ok(false) => Ok(Transition::Stale),
                Err(error) => Err(error),
            };
            break;
        }
        let _ = channel.close(200, "done".into()).await;
        outcome
    }

    /// Every dead letter (at most [`DEAD_LETTER_SCAN_BUDGET`]), put back after reading.
    pub(super) async fn dead_letters(
        &self,
        with_body: bool,
    ) -> Result<Vec<DeadLetter>, InboxError> {
        let (channel, messages) = self.scan_dead().await?;
        let out = messages
            .iter()
            .filter_map(|m| {
                dead_letter_of(
                    &Headers::of(&m.delivery.properties),
                    &m.delivery.data,
                    with_body,
                )
            })
            .collect();
        let _ = channel.close(200, "done".into()).await;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::namespace;

    #[test]
    fn namespaces_keep_virtual_hosts_and_queues_apart() {
        assert_eq!(namespace("/", "webhooks"), "rabbitmq:%2F/webhooks");
        assert_eq!(namespace("prod", "a:b"), "rabbitmq:prod/a:b");
        // A `/` or `:` in a virtual host cannot make it pass for another
        // virtual host and queue.
        assert_ne!(namespace("a/b", "c"), namespace("a", "b/c"));
        assert_ne!(namespace("a:b", "c"), namespace("a", "b:c"));
        assert_ne!(namespace("/", "q"), namespace("%2F", "q"));
    }
}
