//! The Redis inbox's engine: every operation over a connection (one server,
//! or a cluster) and its partitions, each one script.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::try_join_all;
use redis::aio::ConnectionLike;
use redis::{Script, Value};
use sha2::{Digest as _, Sha256};

use super::replies::{
    DeliveryPartitionPage, Extra, PartitionPage, Row, accepted, dead, delivery, inbox_error, meta,
    transition_of,
};
use super::scripts::{DEAD_LETTER_SCAN_BUDGET, DELIVERY_SCAN_BUDGET, Scripts};
use crate::inbox::{
    Accepted, ClaimToken, DeadLetter, DeadLetterCursor, DeadLetterFilter, DeadLetterPage, Delivery,
    DeliveryCursor, DeliveryFilter, DeliveryOrder, DeliveryPage, InboxError, InboxStats,
    LeasedEvent, NewEvent, Transition, encode_headers, millis, to_ms, truncate_error,
};

/// One partition's key names, all starting with its prefix.
pub(in crate::inbox) struct Partition {
    prefix: String,
    /// pending, leased, dead, done.
    sets: [String; 4],
}

impl Partition {
    pub(in crate::inbox) fn new(prefix: String) -> Self {
        let sets = ["pending", "leased", "dead", "done"].map(|set| format!("{prefix}{set}"));
        Self { prefix, sets }
    }

    /// The prefix of this partition's keys.
    #[cfg(feature = "redis-cluster")]
    pub(in crate::inbox) fn prefix(&self) -> &str {
        &self.prefix
    }
}

/// Which of `partitions` stores `key` (a stored key): the first eight bytes
/// of its SHA-256, big-endian, modulo `partitions`. Stable across processes,
/// versions and platforms.
pub(in crate::inbox) fn partition_of(key: &str, partitions: usize) -> usize {
    if partitions <= 1 {
        return 0;
    }
    let digest = Sha256::digest(key.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let n = u64::try_from(partitions).unwrap_or(u64::MAX);
    usize::try_from(u64::from_be_bytes(first) % n).unwrap_or(0)
}

/// The inbox on Redis, over any connection (one server, or a cluster) and
/// any number of partitions: what [`RedisInbox`](super::RedisInbox) (one partition, the keys
/// as they always were) and the cluster inbox (several, hash-tagged) share.
pub(in crate::inbox) struct Engine<C> {
    connection: C,
    pub(super) partitions: Arc<[Partition]>,
    command_timeout: Duration,
    pub(super) scripts: Arc<Scripts>,
    /// Where the next lease starts visiting partitions (round robin).
    next: Arc<AtomicUsize>,
}

impl<C: Clone> Clone for Engine<C> {
    fn clone(&self) -> Self {
        Self {
            connection: self.connection.clone(),
            partitions: Arc::clone(&self.partitions),
            command_timeout: self.command_timeout,
            scripts: Arc::clone(&self.scripts),
            next: Arc::clone(&self.next),
        }
    }
}

/// Script arguments, each as Redis would send it.
macro_rules! args {
    ($($arg:expr),* $(,)?) => {{
        let mut all: Vec<Vec<u8>> = Vec::new();
        $( all.extend(redis::ToRedisArgs::to_redis_args($arg)); )*
        all
    }};
}

/// The accept script's arguments after the event's key.
fn accept_args(event: &NewEvent) -> Vec<Vec<u8>> {
    let signed = event.signed_at.map(|s| s.to_string()).unwrap_or_default();
    args![
        &event.scheme,
        &event.delivery_id.clone().unwrap_or_default(),
        &event.event_type.clone().unwrap_or_default(),
        &event.matched_key,
        &encode_headers(&event.headers),
        &event.body.as_ref(),
        &signed,
    ]
}

impl<C> Engine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// An engine over `partitions` (at least one).
    pub(in crate::inbox) fn new(
        connection: C,
        partitions: Vec<Partition>,
        command_timeout: Duration,
    ) -> Self {
        Self {
            connection,
            partitions: partitions.into(),
            command_timeout,
            scripts: Arc::new(Scripts::new()),
            next: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The partitions.
    #[cfg(feature = "redis-cluster")]
    pub(in crate::inbox) fn partitions(&self) -> &[Partition] {
        &self.partitions
    }

    /// The connection.
    pub(in crate::inbox) fn connection(&self) -> &C {
        &self.connection
    }

    /// The command timeout.
    pub(in crate::inbox) fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// `script` on partition `part`; with `event`, that event's hash is
    /// declared as `KEYS[5]`.
    pub(super) async fn run<T: redis::FromRedisValue>(
        &self,
        part: usize,
        event: Option<&str>,
        script: &Script,
        args: Vec<Vec<u8>>,
    ) -> Result<T, InboxError> {
        let partition = &self.partitions[part];
        let mut invocation = script.prepare_invoke();
        for key in &partition.sets {
            invocation.key(key);
        }
        if let Some(key) = event {
            invocation.key(format!("{}e:{key}", partition.prefix));
        }
        invocation.arg(&partition.prefix);
        for arg in args {
            invocation.arg(arg);
        }
        let mut connection = self.connection.clone();
        match tokio::time::timeout(
            self.command_timeout,
            invocation.invoke_async(&mut connection),
        )
        .await
        {
            Ok(result) => result.map_err(inbox_error),
            Err(_) => Err(InboxError::Timeout),
        }
    }

    /// `script` on the event `key`, in its partition; `ARGV[2]` is the key,
    /// then `rest`.
    pub(super) async fn on_event<T: redis::FromRedisValue>(
        &self,
        key: &str,
        script: &Script,
        rest: Vec<Vec<u8>>,
    ) -> Result<T, InboxError> {
        let part = partition_of(key, self.partitions.len());
        let mut args = args![&key];
        args.extend(rest);
        self.run(part, Some(key), script, args).await
    }

    async fn transition(
        &self,
        key: &str,
        script: &Script,
        rest: Vec<Vec<u8>>,
    ) -> Result<Transition, InboxError> {
        Ok(transition_of(
            self.on_event::<i64>(key, script, rest).await?,
        ))
    }

    pub(in crate::inbox) async fn accept(&self, event: &NewEvent) -> Result<Accepted, InboxError> {
        let stored: i64 = self
            .on_event(
                &event.stored_key(),
                &self.scripts.accept,
                accept_args(event),
            )
            .await?;
        Ok(accepted(stored))
    }

    /// The accept script's call for `event` as one `EVALSHA` command, and
    /// the script (to load it where it is missing): for the cluster inbox,
    /// which sends it in a pipeline with its `WAIT`. Its reply reads with
    /// [`accepted`].
    #[cfg(feature = "redis-cluster")]
    pub(in crate::inbox) fn accept_cmd(&self, event: &NewEvent) -> (redis::Cmd, &Script) {
        let key = event.stored_key();
        let partition = &self.partitions[partition_of(&key, self.partitions.len())];
        let script = &self.scripts.accept;
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.get_hash()).arg(partition.sets.len() + 1);
        for set in &partition.sets {
            cmd.arg(set);
        }
        cmd.arg(format!("{}e:{key}", partition.prefix))
            .arg(&partition.prefix)
            .arg(&key);
        for arg in accept_args(event) {
            cmd.arg(arg);
        }
        (cmd, script)
    }

    /// Visits the partitions from a round-robin start, each with what the
    /// batch still lacks, until the batch is full: at most one script per
    /// partition. A partition that fails is passed over: the events leased
    /// from the others are returned (so that no lease is left unused), an
    /// error only when none were.
    ///
    /// Each partition's script reads the pause flag itself (its copy in the
    /// partition: no extra round trip, and no partition leases once
    /// [`set_paused`](Self::set_paused) has returned).
    pub(in crate::inbox) async fn lease(
        &self,
        token: ClaimToken,
        batch: u32,
        lease: Duration,
        max_attempts: u32,
    ) -> Result<Vec<LeasedEvent>, InboxError> {
        let n = self.partitions.len();
        let batch = batch.max(1);
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        let mut out: Vec<LeasedEvent> = Vec::new();
        let mut failed = None;
        for step in 0..n {
            let want = batch.saturating_sub(u32::try_from(out.len()).unwrap_or(u32::MAX));
            if want == 0 {
                break;
            }
            let rows: Vec<Row> = match self
                .run(
                    (start + step) % n,
                    None,
                    &self.scripts.lease,
                    args![
                        &token.to_hex(),
                        &millis(lease),
                        &max_attempts.max(1),
                        &want,
                        &crate::inbox::EXPIRED_ON_LAST_ATTEMPT,
                    ],
                )
                .await
            {
                Ok(rows) => rows,
                Err(error) => {
                    if n > 1 {
                        tracing::debug!(error = %error, "an inbox partition failed at lease; trying the others");
                    }
                    failed.get_or_insert(error);
                    continue;
                }
            };
            out.extend(rows.into_iter().map(|mut row| LeasedEvent {
                meta: meta(&mut row),
                body: std::mem::take(&mut row.6).into(),
                attempt: u32::try_from(row.9).unwrap_or(u32::MAX),
                token,
            }));
        }
        match failed {
            Some(error) if out.is_empty() => Err(error),
            _ => Ok(out),
        }
    }

    pub(in crate::inbox) async fn extend(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Transition, InboxError> {
        self.transition(
            key,
            &self.scripts.extend,
            args![&token.to_hex(), &millis(lease)],
        )
        .await
    }

    pub(in crate::inbox) async fn complete(
        &self,
        key: &str,
        token: ClaimToken,
    ) -> Result<Transition, InboxError> {
        self.transition(key, &self.scripts.complete, args![&token.to_hex()])
            .await
    }

    /// One script per partition the entries fall in (one in all on a
    /// single partition), run side by side.
    pub(in crate::inbox) async fn complete_many(
        &self,
        done: &[(&str, ClaimToken)],
    ) -> Result<Vec<Transition>, InboxError> {
        if done.is_empty() {
            return Ok(Vec::new());
        }
        let n = self.partitions.len();
        let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
        for (at, (key, _)) in done.iter().enumerate() {
            let part = partition_of(key, n);
            match groups.iter_mut().find(|(p, _)| *p == part) {
                Some((_, entries)) => entries.push(at),
                None => groups.push((part, vec![at])),
            }
        }
        let answers = try_join_all(groups.iter().map(|(part, entries)| async move {
            let mut args = Vec::with_capacity(entries.len() * 2);
            for &at in entries {
                let (key, token) = done[at];
                args.push(key.as_bytes().to_vec());
                args.push(token.to_hex().into_bytes());
            }
            let applied: Vec<i64> = self
                .run(*part, None, &self.scripts.complete_many, args)
                .await?;
            if applied.len() != entries.len() {
                return Err(InboxError::Protocol(format!(
                    "batch completion answered {} results for {} events",
                    applied.len(),
                    entries.len()
                )));
            }
            Ok(applied)
        }))
        .await?;
        let mut out = vec![Transition::Stale; done.len()];
        for ((_, entries), applied) in groups.iter().zip(answers) {
            for (&at, one) in entries.iter().zip(applied) {
                out[at] = transition_of(one);
            }
        }
        Ok(out)
    }

    pub(in crate::inbox) async fn retry(
        &self,
        key: &str,
        token: ClaimToken,
        delay: Duration,
        error: &str,
    ) -> Result<Transition, InboxError> {
        self.transition(
            key,
            &self.scripts.retry,
            args![&token.to_hex(), &millis(delay), &truncate_error(error)],
        )
        .await
    }

    pub(in crate::inbox) async fn release(
        &self,
        key: &str,
        token: ClaimToken,
    ) -> Result<Transition, InboxError> {
        self.transition(key, &self.scripts.release, args![&token.to_hex()])
            .await
    }

    pub(in crate::inbox) async fn dead_letter(
        &self,
        key: &str,
        token: ClaimToken,
        error: &str,
    ) -> Result<Transition, InboxError> {
        self.transition(
            key,
            &self.scripts.dead_letter,
            args![&token.to_hex(), &truncate_error(error)],
        )
        .await
    }

    /// One partition's page: at most `limit` rows after the cursor, at most
    /// [`DEAD_LETTER_SCAN_BUDGET`] entries examined.
    async fn list_partition(
        &self,
        part: usize,
        filter: &DeadLetterFilter,
    ) -> Result<PartitionPage, InboxError> {
        let from = filter.received_from.map_or(0, to_ms);
        let until = filter.received_until.map_or(i64::MAX / 2, to_ms);
        let (after_ms, after_key) = filter
            .after
            .as_ref()
            .map_or((-1, String::new()), |c| (c.received_at_ms, c.key.clone()));
        let (rows, cursor, examined): (Vec<Row>, Vec<String>, u64) = self
            .run(
                part,
                None,
                &self.scripts.list,
                args![
                    &from,
                    &until,
                    &after_ms,
                    &after_key,
                    &filter.scheme.clone().unwrap_or_default(),
                    &filter.event_type.clone().unwrap_or_default(),
                    &filter.page_size(),
                    &DEAD_LETTER_SCAN_BUDGET,
                    &filter
                        .search
                        .as_ref()
                        .map(crate::inbox::search::script_spec)
                        .unwrap_or_default(),
                ],
            )
            .await?;
        let items = rows.into_iter().map(|row| (row.7, dead(row))).collect();
        let next = match <[String; 2]>::try_from(cursor) {
            Ok([score, key]) => Some(DeadLetterCursor {
                received_at_ms: score.parse().map_err(|_| {
                    InboxError::Protocol(format!("dead-letter cursor score {score:?}"))
                })?,
                key,
            }),
            Err(rest) if rest.is_empty() => None,
            Err(_) => return Err(InboxError::Protocol("dead-letter cursor".into())),
        };
        Ok((items, next, examined))
    }

    /// Every partition's page after the same cursor (side by side), merged
    /// in (receipt, key) order — the order of each dead set. A partition
    /// whose scan stopped early has examined everything up to its cursor
    /// only: the merged page ends at the smallest such cursor, so that no
    /// dead letter is skipped. Each call examines at most
    /// [`DEAD_LETTER_SCAN_BUDGET`] entries per partition.
    pub(in crate::inbox) async fn dead_letters(
        &self,
        filter: &DeadLetterFilter,
    ) -> Result<DeadLetterPage, InboxError> {
        if self.partitions.len() == 1 {
            let (items, next, examined) = self.list_partition(0, filter).await?;
            return Ok(DeadLetterPage {
                items: items.into_iter().map(|(_, item)| item).collect(),
                next,
                examined,
            });
        }
        let pages =
            try_join_all((0..self.partitions.len()).map(|part| self.list_partition(part, filter)))
                .await?;
        let order = |c: &DeadLetterCursor| (c.received_at_ms, c.key.clone().into_bytes());
        let bound = pages
            .iter()
            .filter_map(|(_, next, _)| next.as_ref())
            .min_by_key(|c| order(c))
            .cloned();
        let examined = pages.iter().map(|(_, _, n)| n).sum();
        let mut rows: Vec<(i64, DeadLetter)> = pages
            .into_iter()
            .flat_map(|(items, _, _)| items)
            .filter(|(ms, item)| {
                bound.as_ref().is_none_or(|b| {
                    (*ms, item.meta.key.as_bytes()) <= (b.received_at_ms, b.key.as_bytes())
                })
            })
            .collect();
        rows.sort_by(|(a, x), (b, y)| (a, x.meta.key.as_bytes()).cmp(&(b, y.meta.key.as_bytes())));
        let limit = usize::try_from(filter.page_size()).unwrap_or(usize::MAX);
        rows.truncate(limit);
        let next = match rows.last() {
            Some((ms, item)) if rows.len() == limit => Some(DeadLetterCursor {
                received_at_ms: *ms,
                key: item.meta.key.clone(),
            }),
            _ => bound,
        };
        Ok(DeadLetterPage {
            items: rows.into_iter().map(|(_, item)| item).collect(),
            next,
            examined,
        })
    }

    pub(in crate::inbox) async fn dead_letter_get(
        &self,
        key: &str,
    ) -> Result<Option<DeadLetter>, InboxError> {
        let reply: Value = self.on_event(key, &self.scripts.get, Vec::new()).await?;
        if matches!(&reply, Value::Array(items) if items.is_empty()) {
            return Ok(None);
        }
        let row: Row = redis::from_redis_value(reply)
            .map_err(|error| InboxError::Protocol(error.to_string()))?;
        Ok(Some(dead(row)))
    }

    pub(in crate::inbox) async fn replay(&self, key: &str) -> Result<Transition, InboxError> {
        self.transition(key, &self.scripts.replay, Vec::new()).await
    }

    pub(in crate::inbox) async fn discard(&self, key: &str) -> Result<Transition, InboxError> {
        self.transition(key, &self.scripts.discard, Vec::new())
            .await
    }

    /// Partition after partition, 1,000 events per script.
    pub(in crate::inbox) async fn purge_completed(
        &self,
        older_than: Duration,
    ) -> Result<u64, InboxError> {
        const CHUNK: i64 = 1000;
        let mut total = 0u64;
        for part in 0..self.partitions.len() {
            loop {
                let purged: i64 = self
                    .run(
                        part,
                        None,
                        &self.scripts.purge,
                        args![&millis(older_than), &CHUNK],
                    )
                    .await?;
                total += u64::try_from(purged).unwrap_or(0);
                if purged < CHUNK {
                    break;
                }
            }
        }
        Ok(total)
    }

    /// `command` on each partition's pause flag (`P .. 'paused'`, in the
    /// partition's slot), side by side; the answers in partition order.
    async fn on_pause_flags<T: redis::FromRedisValue>(
        &self,
        command: &str,
        extra: &[&str],
    ) -> Result<Vec<T>, InboxError> {
        try_join_all(self.partitions.iter().map(|partition| async move {
            let mut cmd = redis::cmd(command);
            cmd.arg(format!("{}paused", partition.prefix));
            for arg in extra {
                cmd.arg(*arg);
            }
            let mut connection = self.connection.clone();
            match tokio::time::timeout(self.command_timeout, cmd.query_async(&mut connection)).await
            {
                Ok(result) => result.map_err(inbox_error),
                Err(_) => Err(InboxError::Timeout),
            }
        }))
        .await
    }

    /// `SET … 1 NX` or `DEL …` on every partition's flag (one key on a
    /// single server): changed when any answered `OK` or `1`. A failure
    /// part way leaves some partitions paused, which `stats` and `paused`
    /// report as paused: call it again.
    pub(in crate::inbox) async fn set_paused(&self, paused: bool) -> Result<bool, InboxError> {
        let changed = if paused {
            self.on_pause_flags::<Option<String>>("SET", &["1", "NX"])
                .await?
                .iter()
                .any(Option::is_some)
        } else {
            self.on_pause_flags::<i64>("DEL", &[])
                .await?
                .iter()
                .any(|&n| n > 0)
        };
        crate::inbox::signals::pause_set(paused, changed);
        Ok(changed)
    }

    /// Whether any partition's flag is set.
    pub(in crate::inbox) async fn paused(&self) -> Result<bool, InboxError> {
        Ok(self
            .on_pause_flags::<i64>("EXISTS", &[])
            .await?
            .iter()
            .any(|&n| n > 0))
    }

    /// Every partition's counts (side by side), summed; the oldest due age
    /// is the largest.
    pub(in crate::inbox) async fn stats(&self) -> Result<InboxStats, InboxError> {
        type Counts = (i64, i64, i64, i64, i64, i64, i64, i64);
        let all: Vec<Counts> = try_join_all(
            (0..self.partitions.len())
                .map(|part| self.run(part, None, &self.scripts.stats, Vec::new())),
        )
        .await?;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        let mut stats = InboxStats::default();
        for (now, pending, due, oldest, in_flight, dead, done, paused) in all {
            stats.paused |= paused > 0;
            stats.pending += count(pending);
            stats.due += count(due);
            stats.in_flight += count(in_flight);
            stats.dead += count(dead);
            stats.completed += count(done);
            if oldest >= 0 {
                let age = Duration::from_millis(count(now - oldest));
                stats.oldest_due_age = Some(stats.oldest_due_age.map_or(age, |a| a.max(age)));
            }
        }
        Ok(stats)
    }

    /// One partition's delivery page: at most `limit` rows past the cursor,
    /// at most [`DELIVERY_SCAN_BUDGET`] entries examined.
    async fn deliveries_partition(
        &self,
        part: usize,
        filter: &DeliveryFilter,
    ) -> Result<DeliveryPartitionPage, InboxError> {
        let from = filter.received_from.map_or(0, to_ms);
        let until = filter.received_until.map_or(i64::MAX / 2, to_ms);
        let (after_ms, after_key) = filter
            .after
            .as_ref()
            .map_or((-1, String::new()), |c| (c.received_at_ms, c.key.clone()));
        let newest = filter.order == DeliveryOrder::NewestFirst;
        let (rows, cursor): (Vec<(Row, Extra)>, Vec<String>) = self
            .run(
                part,
                None,
                &self.scripts.deliveries,
                args![
                    &filter.state.as_str(),
                    &if newest { "1" } else { "0" },
                    &from,
                    &until,
                    &after_ms,
                    &after_key,
                    &filter.scheme.clone().unwrap_or_default(),
                    &filter.event_type.clone().unwrap_or_default(),
                    &filter.delivery_id.clone().unwrap_or_default(),
                    &filter.page_size(),
                    &DELIVERY_SCAN_BUDGET,
                    &filter
                        .search
                        .as_ref()
                        .map(crate::inbox::search::script_spec)
                        .unwrap_or_default(),
                ],
            )
            .await?;
        let items = rows
            .into_iter()
            .map(|(row, extra)| (row.7, delivery(row, extra)))
            .collect();
        let next = match <[String; 2]>::try_from(cursor) {
            Ok([score, key]) => Some(DeliveryCursor {
                order: filter.order,
                received_at_ms: score.parse().map_err(|_| {
                    InboxError::Protocol(format!("delivery cursor score {score:?}"))
                })?,
                key,
            }),
            Err(rest) if rest.is_empty() => None,
            Err(_) => return Err(InboxError::Protocol("delivery cursor".into())),
        };
        Ok((items, next))
    }

    /// Every partition's page past the same cursor (side by side), merged
    /// in the filter's order. A partition whose scan stopped early has
    /// examined everything up to its cursor only: the merged page ends at
    /// the least advanced such cursor, so that no delivery is skipped.
    /// Each call examines at most [`DELIVERY_SCAN_BUDGET`] entries per
    /// partition.
    pub(in crate::inbox) async fn deliveries(
        &self,
        filter: &DeliveryFilter,
    ) -> Result<DeliveryPage, InboxError> {
        if self.partitions.len() == 1 {
            let (items, next) = self.deliveries_partition(0, filter).await?;
            return Ok(DeliveryPage {
                items: items.into_iter().map(|(_, item)| item).collect(),
                next,
            });
        }
        let pages = try_join_all(
            (0..self.partitions.len()).map(|part| self.deliveries_partition(part, filter)),
        )
        .await?;
        let newest = filter.order == DeliveryOrder::NewestFirst;
        // Compares two positions in the listing's order (`Less`: first).
        let cmp = |a: (i64, &str), b: (i64, &str)| {
            let ascending = (a.0, a.1.as_bytes()).cmp(&(b.0, b.1.as_bytes()));
            if newest {
                ascending.reverse()
            } else {
                ascending
            }
        };
        let bound = pages
            .iter()
            .filter_map(|(_, next)| next.as_ref())
            .min_by(|x, y| cmp((x.received_at_ms, &x.key), (y.received_at_ms, &y.key)))
            .cloned();
        let mut rows: Vec<(i64, Delivery)> = pages
            .into_iter()
            .flat_map(|(items, _)| items)
            .filter(|(ms, item)| {
                bound
                    .as_ref()
                    .is_none_or(|b| cmp((*ms, &item.meta.key), (b.received_at_ms, &b.key)).is_le())
            })
            .collect();
        rows.sort_by(|(a, x), (b, y)| cmp((*a, &x.meta.key), (*b, &y.meta.key)));
        let limit = usize::try_from(filter.page_size()).unwrap_or(usize::MAX);
        rows.truncate(limit);
        let next = match rows.last() {
            Some((ms, item)) if rows.len() == limit => Some(DeliveryCursor {
                order: filter.order,
                received_at_ms: *ms,
                key: item.meta.key.clone(),
            }),
            _ => bound,
        };
        Ok(DeliveryPage {
            items: rows.into_iter().map(|(_, item)| item).collect(),
            next,
        })
    }

    pub(in crate::inbox) async fn delivery_get(
        &self,
        key: &str,
    ) -> Result<Option<Delivery>, InboxError> {
        let reply: Value = self
            .on_event(key, &self.scripts.delivery_get, Vec::new())
            .await?;
        if matches!(&reply, Value::Array(items) if items.is_empty()) {
            return Ok(None);
        }
        let (row, extra): (Row, Extra) = redis::from_redis_value(reply)
            .map_err(|error| InboxError::Protocol(error.to_string()))?;
        Ok(Some(delivery(row, extra)))
    }
}

impl<C> Engine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Every partition's minutes (one script each, side by side), summed;
    /// the clock is the first partition's server's.
    pub(in crate::inbox) async fn activity(
        &self,
        minutes: u32,
    ) -> Result<crate::inbox::Activity, InboxError> {
        let minutes = crate::inbox::activity::clamp_minutes(minutes);
        let all: Vec<Vec<i64>> = try_join_all(
            (0..self.partitions.len())
                .map(|part| self.run(part, None, &self.scripts.activity, args![&minutes])),
        )
        .await?;
        let now = all
            .first()
            .and_then(|counts| counts.first().copied())
            .ok_or_else(|| InboxError::Protocol("the activity script returned nothing".into()))?;
        let mut rows = Vec::new();
        for counts in &all {
            let (Some(&minute), Some(rest)) = (counts.first(), counts.get(1..)) else {
                continue;
            };
            let first = minute - i64::from(minutes) + 1;
            for (i, triple) in (0i64..).zip(rest.chunks(3)) {
                for (kind, n) in (1i64..).zip(triple) {
                    if *n > 0 {
                        rows.push((first + i, kind, *n));
                    }
                }
            }
        }
        Ok(crate::inbox::Activity::from_rows(now, minutes, rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_stable_and_spread() {
        assert_eq!(partition_of("anything", 1), 0);
        // Fixed: a change would move stored events to other partitions.
        let first: Vec<usize> = (0..8)
            .map(|i| partition_of(&format!("webhooks:test:evt_{i}"), 16))
            .collect();
        let again: Vec<usize> = (0..8)
            .map(|i| partition_of(&format!("webhooks:test:evt_{i}"), 16))
            .collect();
        assert_eq!(first, again);
        let mut seen = [0u32; 16];
        for i in 0..1600 {
            seen[partition_of(&format!("webhooks:test:evt_{i}"), 16)] += 1;
        }
        assert!(seen.iter().all(|&n| (50..=150).contains(&n)), "{seen:?}");
    }
}
