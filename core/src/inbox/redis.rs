//! The Redis [`Inbox`](super::Inbox): a hash per event plus sorted sets, every
//! operation one Lua script.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Script, Value};

use super::{
    Accepted, ClaimToken, DeadLetter, DeadLetterCursor, DeadLetterFilter, DeadLetterPage,
    EventMeta, Inbox, InboxError, InboxStats, LeasedEvent, NewEvent, OpenError, Transition,
    decode_headers, encode_headers, from_ms, millis, to_ms, truncate_error,
};
use crate::ConfigError;

/// Shared by every script: the clock (the server's `TIME`, in ms), the keys,
/// and the token check. `KEYS`: pending, leased, dead, done; `ARGV[1]`: the
/// event hashes' prefix.
const PRELUDE: &str = r"
local P = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local pending, leased, dead, done = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local function held(h, tok)
  return redis.call('HGET', h, 'state') == '1' and redis.call('HGET', h, 'token') == tok
end
local function fields(k, h, body)
  local f = redis.call('HMGET', h, 'scheme', 'delivery_id', 'event_type', 'matched_key',
    'headers', body, 'received_at', 'signed_at', 'attempts', 'last_error', 'updated_at')
  return {k, f[1], f[2], f[3], f[4], f[5], f[6] or '', f[7], f[8], f[9], f[10] or '', f[11]}
end
";

const ACCEPT: &str = r"
local h = P .. 'e:' .. ARGV[2]
if redis.call('EXISTS', h) == 1 then return 0 end
redis.call('HSET', h, 'scheme', ARGV[3], 'delivery_id', ARGV[4], 'event_type', ARGV[5],
  'matched_key', ARGV[6], 'headers', ARGV[7], 'body', ARGV[8], 'signed_at', ARGV[9],
  'received_at', now, 'state', 0, 'attempts', 0, 'updated_at', now)
redis.call('ZADD', pending, now, ARGV[2])
return 1
";

/// ARGV: token, lease ms, max attempts, batch, the expired-on-last-attempt error.
const LEASE: &str = r"
local tok, lease, max, batch = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local take = {}
for _, k in ipairs(redis.call('ZRANGEBYSCORE', leased, '-inf', now, 'LIMIT', 0, 100)) do
  local h = P .. 'e:' .. k
  if tonumber(redis.call('HGET', h, 'attempts') or '0') >= max then
    redis.call('HSET', h, 'state', 3, 'last_error', ARGV[6], 'updated_at', now)
    redis.call('HDEL', h, 'token', 'lease_until')
    redis.call('ZREM', leased, k)
    redis.call('ZADD', dead, redis.call('HGET', h, 'received_at'), k)
  elseif #take < batch then
    table.insert(take, k)
  end
end
if #take < batch then
  for _, k in ipairs(redis.call('ZRANGEBYSCORE', pending, '-inf', now, 'LIMIT', 0, batch - #take)) do
    table.insert(take, k)
  end
end
local out = {}
for _, k in ipairs(take) do
  local h = P .. 'e:' .. k
  redis.call('HINCRBY', h, 'attempts', 1)
  redis.call('HSET', h, 'state', 1, 'token', tok, 'lease_until', now + lease, 'updated_at', now)
  redis.call('ZREM', pending, k)
  redis.call('ZADD', leased, now + lease, k)
  table.insert(out, fields(k, h, 'body'))
end
return out
";

/// ARGV: key, token, lease ms.
const EXTEND: &str = r"
local h = P .. 'e:' .. ARGV[2]
if not held(h, ARGV[3]) then return 0 end
redis.call('HSET', h, 'lease_until', now + tonumber(ARGV[4]))
redis.call('ZADD', leased, now + tonumber(ARGV[4]), ARGV[2])
return 1
";

/// ARGV: key, token.
const COMPLETE: &str = r"
local h = P .. 'e:' .. ARGV[2]
if not held(h, ARGV[3]) then return 0 end
redis.call('HSET', h, 'state', 2, 'updated_at', now)
redis.call('HDEL', h, 'token', 'lease_until')
redis.call('ZREM', leased, ARGV[2])
redis.call('ZADD', done, now, ARGV[2])
return 1
";

/// ARGV: key, token, key, token, …; one 1 (applied) or 0 (stale) per pair.
const COMPLETE_MANY: &str = r"
local out = {}
for i = 2, #ARGV, 2 do
  local k = ARGV[i]
  local h = P .. 'e:' .. k
  if held(h, ARGV[i + 1]) then
    redis.call('HSET', h, 'state', 2, 'updated_at', now)
    redis.call('HDEL', h, 'token', 'lease_until')
    redis.call('ZREM', leased, k)
    redis.call('ZADD', done, now, k)
    table.insert(out, 1)
  else
    table.insert(out, 0)
  end
end
return out
";

/// ARGV: key, token, delay ms, error.
const RETRY: &str = r"
local h = P .. 'e:' .. ARGV[2]
if not held(h, ARGV[3]) then return 0 end
redis.call('HSET', h, 'state', 0, 'last_error', ARGV[5], 'updated_at', now)
redis.call('HDEL', h, 'token', 'lease_until')
redis.call('ZREM', leased, ARGV[2])
redis.call('ZADD', pending, now + tonumber(ARGV[4]), ARGV[2])
return 1
";

/// ARGV: key, token.
const RELEASE: &str = r"
local h = P .. 'e:' .. ARGV[2]
if not held(h, ARGV[3]) then return 0 end
redis.call('HSET', h, 'state', 0, 'updated_at', now)
redis.call('HINCRBY', h, 'attempts', -1)
redis.call('HDEL', h, 'token', 'lease_until')
redis.call('ZREM', leased, ARGV[2])
redis.call('ZADD', pending, now, ARGV[2])
return 1
";

/// ARGV: key, token, error.
const DEAD_LETTER: &str = r"
local h = P .. 'e:' .. ARGV[2]
if not held(h, ARGV[3]) then return 0 end
redis.call('HSET', h, 'state', 3, 'last_error', ARGV[4], 'updated_at', now)
redis.call('HDEL', h, 'token', 'lease_until')
redis.call('ZREM', leased, ARGV[2])
redis.call('ZADD', dead, redis.call('HGET', h, 'received_at'), ARGV[2])
return 1
";

/// ARGV: key.
const REPLAY: &str = r"
local h = P .. 'e:' .. ARGV[2]
if redis.call('HGET', h, 'state') ~= '3' then return 0 end
redis.call('HSET', h, 'state', 0, 'attempts', 0, 'updated_at', now)
redis.call('ZREM', dead, ARGV[2])
redis.call('ZADD', pending, now, ARGV[2])
return 1
";

/// ARGV: key.
const DISCARD: &str = r"
local h = P .. 'e:' .. ARGV[2]
if redis.call('HGET', h, 'state') ~= '3' then return 0 end
redis.call('DEL', h)
redis.call('ZREM', dead, ARGV[2])
return 1
";

/// ARGV: age ms, limit.
const PURGE: &str = r"
local ks = redis.call('ZRANGEBYSCORE', done, '-inf', now - tonumber(ARGV[2]), 'LIMIT', 0, tonumber(ARGV[3]))
for _, k in ipairs(ks) do
  redis.call('DEL', P .. 'e:' .. k)
  redis.call('ZREM', done, k)
end
return #ks
";

const STATS: &str = r"
local oldest = redis.call('ZRANGEBYSCORE', pending, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1)
local at = -1
if #oldest > 0 then at = tonumber(oldest[2]) end
return {now, redis.call('ZCARD', pending), redis.call('ZCOUNT', pending, '-inf', now), at,
  redis.call('ZCARD', leased), redis.call('ZCARD', dead), redis.call('ZCARD', done)}
";

/// ARGV: key.
const GET: &str = r"
local h = P .. 'e:' .. ARGV[2]
if redis.call('HGET', h, 'state') ~= '3' then return {} end
return fields(ARGV[2], h, 'body')
";

/// ARGV: received from (ms), until (exclusive, ms), cursor ms (or -1), cursor
/// key, scheme (or ''), event type (or ''), limit.
const LIST: &str = r"
local from, upto, after, akey = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local scheme, kind, limit = ARGV[6], ARGV[7], tonumber(ARGV[8])
if after >= 0 and after > tonumber(from) then from = tostring(after) end
local out, offset = {}, 0
while #out < limit do
  local chunk = redis.call('ZRANGEBYSCORE', dead, from, '(' .. upto, 'WITHSCORES', 'LIMIT', offset, 200)
  if #chunk == 0 then break end
  for i = 1, #chunk, 2 do
    local k, score = chunk[i], tonumber(chunk[i + 1])
    local past = after < 0 or score > after or (score == after and k > akey)
    if past and #out < limit then
      local h = P .. 'e:' .. k
      local f = redis.call('HMGET', h, 'scheme', 'event_type')
      if (scheme == '' or f[1] == scheme) and (kind == '' or f[2] == kind) then
        table.insert(out, fields(k, h, 'no-body'))
      end
    end
  end
  offset = offset + 200
end
return out
";

struct Scripts {
    accept: Script,
    lease: Script,
    extend: Script,
    complete: Script,
    complete_many: Script,
    retry: Script,
    release: Script,
    dead_letter: Script,
    replay: Script,
    discard: Script,
    purge: Script,
    stats: Script,
    get: Script,
    list: Script,
}

impl Scripts {
    fn new() -> Self {
        let s = |body: &str| Script::new(&format!("{PRELUDE}{body}"));
        Self {
            accept: s(ACCEPT),
            lease: s(LEASE),
            extend: s(EXTEND),
            complete: s(COMPLETE),
            complete_many: s(COMPLETE_MANY),
            retry: s(RETRY),
            release: s(RELEASE),
            dead_letter: s(DEAD_LETTER),
            replay: s(REPLAY),
            discard: s(DISCARD),
            purge: s(PURGE),
            stats: s(STATS),
            get: s(GET),
            list: s(LIST),
        }
    }
}

/// An [`Inbox`](super::Inbox) on Redis (or Valkey).
///
/// Each event is a hash (`prefix + "e:" + key`); four sorted sets index them:
/// pending by due time, leased by lease end, dead by receipt, completed by
/// completion. Every operation is one Lua script reading the server's clock
/// (`TIME`), so it is atomic against every other worker and receiver.
///
/// **Durability.** Redis answers before its disk has the write unless the
/// append-only file is fsynced on every write: a `2xx` for a stored delivery
/// is only as durable as `appendonly yes` with `appendfsync always` (or a
/// `WAITAOF` after the write, Redis 7.2+). With `appendfsync everysec` (the
/// default when AOF is on) a crash of the Redis host loses up to a second of
/// acknowledged deliveries; with AOF off, everything since the last snapshot.
/// [`connect`](RedisInboxBuilder::connect) reads both settings and logs a
/// warning unless they are `yes` and `always`. Also set `maxmemory-policy
/// noeviction`: an evicted event is lost.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use webhooks_core::inbox::RedisInbox;
///
/// let inbox = RedisInbox::builder("redis://127.0.0.1:6379").key_prefix("inbox:").connect().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisInbox {
    connection: ConnectionManager,
    prefix: Arc<str>,
    keys: Arc<[String; 4]>,
    command_timeout: Duration,
    scripts: Arc<Scripts>,
}

impl fmt::Debug for RedisInbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisInbox")
            .field("prefix", &self.prefix)
            .field("command_timeout", &self.command_timeout)
            .finish_non_exhaustive()
    }
}

/// Builds a [`RedisInbox`]; see [`RedisInbox::builder`].
#[derive(Clone)]
#[must_use]
pub struct RedisInboxBuilder {
    url: String,
    prefix: String,
    connect_timeout: Duration,
    command_timeout: Duration,
}

impl fmt::Debug for RedisInboxBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may hold a password.
        f.debug_struct("RedisInboxBuilder")
            .field("prefix", &self.prefix)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .finish_non_exhaustive()
    }
}

impl RedisInboxBuilder {
    /// The prefix of every key (default `inbox:`).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long connecting may take (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one operation may take (default 2 s).
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Connects, then warns (a `tracing` warning) unless the server fsyncs
    /// every write (`appendonly yes`, `appendfsync always`).
    ///
    /// # Errors
    ///
    /// [`OpenError::Config`] for a URL redis-rs does not accept,
    /// [`OpenError::Store`] when the server cannot be reached in time.
    pub async fn connect(self) -> Result<RedisInbox, OpenError> {
        let client = redis::Client::open(self.url.as_str()).map_err(|_| ConfigError::Invalid {
            what: "redis URL",
            reason: "not a URL redis-rs accepts (redis://[user:password@]host[:port][/db])",
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.command_timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(200));
        let connection = match tokio::time::timeout(
            self.connect_timeout,
            ConnectionManager::new_with_config(client, config),
        )
        .await
        {
            Ok(connection) => connection.map_err(inbox_error)?,
            Err(_) => return Err(InboxError::Timeout.into()),
        };
        let p = &self.prefix;
        let inbox = RedisInbox {
            connection,
            keys: Arc::new([
                format!("{p}pending"),
                format!("{p}leased"),
                format!("{p}dead"),
                format!("{p}done"),
            ]),
            prefix: Arc::from(self.prefix.as_str()),
            command_timeout: self.command_timeout,
            scripts: Arc::new(Scripts::new()),
        };
        inbox.warn_unless_durable().await;
        Ok(inbox)
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

fn inbox_error(error: RedisError) -> InboxError {
    if error.is_timeout() {
        InboxError::Timeout
    } else {
        InboxError::unavailable(error)
    }
}

/// A script's reply row: key, scheme, delivery id, event type, matched key,
/// headers, body, received at, signed at, attempts, last error, updated at.
type Row = (
    String,
    String,
    String,
    String,
    String,
    String,
    Vec<u8>,
    i64,
    String,
    i64,
    String,
    i64,
);

fn some(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

fn meta(row: &mut Row) -> EventMeta {
    EventMeta {
        key: std::mem::take(&mut row.0),
        scheme: std::mem::take(&mut row.1),
        delivery_id: some(std::mem::take(&mut row.2)),
        event_type: some(std::mem::take(&mut row.3)),
        matched_key: std::mem::take(&mut row.4),
        headers: decode_headers(&row.5),
        received_at: from_ms(row.7),
        signed_at: row.8.parse().ok(),
    }
}

fn dead(mut row: Row) -> DeadLetter {
    DeadLetter {
        meta: meta(&mut row),
        attempts: u32::try_from(row.9).unwrap_or(u32::MAX),
        last_error: some(std::mem::take(&mut row.10)),
        dead_at: from_ms(row.11),
        body: std::mem::take(&mut row.6).into(),
    }
}

impl RedisInbox {
    /// A builder for an inbox on the server at `url`.
    pub fn builder(url: &str) -> RedisInboxBuilder {
        RedisInboxBuilder {
            url: url.to_owned(),
            prefix: "inbox:".to_owned(),
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(2),
        }
    }

    /// Connects with the defaults; see [`builder`](Self::builder).
    ///
    /// # Errors
    ///
    /// As [`RedisInboxBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self, OpenError> {
        Self::builder(url).connect().await
    }

    /// The key prefix.
    #[must_use]
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// Logs a warning unless every write is fsynced before Redis answers.
    /// Silent when `CONFIG` is not allowed (managed services often disable it).
    async fn warn_unless_durable(&self) {
        let appendonly = self.config_get("appendonly").await;
        let appendfsync = self.config_get("appendfsync").await;
        match (appendonly.as_deref(), appendfsync.as_deref()) {
            (Some("yes"), Some("always")) => {}
            (Some(appendonly), Some(appendfsync)) => tracing::warn!(
                appendonly,
                appendfsync,
                "the Redis server does not fsync every write (appendonly yes, appendfsync always): \
                 a delivery answered 2xx can be lost if the Redis host crashes"
            ),
            _ => tracing::debug!("could not read the Redis AOF settings"),
        }
    }

    /// One `CONFIG GET` value, if the server allows it.
    async fn config_get(&self, name: &str) -> Option<String> {
        let mut connection = self.connection.clone();
        let reply = tokio::time::timeout(
            self.command_timeout,
            redis::cmd("CONFIG")
                .arg("GET")
                .arg(name)
                .query_async::<HashMap<String, String>>(&mut connection),
        )
        .await;
        match reply {
            Ok(Ok(mut config)) => config.remove(name),
            _ => None,
        }
    }

    async fn run<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        args: Vec<Vec<u8>>,
    ) -> Result<T, InboxError> {
        let mut invocation = script.prepare_invoke();
        for key in self.keys.iter() {
            invocation.key(key);
        }
        invocation.arg(&*self.prefix);
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

    async fn transition(
        &self,
        script: &Script,
        args: Vec<Vec<u8>>,
    ) -> Result<Transition, InboxError> {
        Ok(match self.run::<i64>(script, args).await? {
            1 => Transition::Applied,
            _ => Transition::Stale,
        })
    }
}

#[async_trait::async_trait]
impl Inbox for RedisInbox {
    async fn accept(&self, event: &NewEvent) -> Result<Accepted, InboxError> {
        let signed = event.signed_at.map(|s| s.to_string()).unwrap_or_default();
        let stored: i64 = self
            .run(
                &self.scripts.accept,
                args![
                    &event.stored_key(),
                    &event.scheme,
                    &event.delivery_id.clone().unwrap_or_default(),
                    &event.event_type.clone().unwrap_or_default(),
                    &event.matched_key,
                    &encode_headers(&event.headers),
                    &event.body.as_ref(),
                    &signed,
                ],
            )
            .await?;
        Ok(if stored == 1 {
            Accepted::Stored
        } else {
            Accepted::Duplicate
        })
    }

    async fn lease(
        &self,
        token: ClaimToken,
        batch: u32,
        lease: Duration,
        max_attempts: u32,
    ) -> Result<Vec<LeasedEvent>, InboxError> {
        let rows: Vec<Row> = self
            .run(
                &self.scripts.lease,
                args![
                    &token.to_hex(),
                    &millis(lease),
                    &max_attempts.max(1),
                    &batch.max(1),
                    &super::EXPIRED_ON_LAST_ATTEMPT,
                ],
            )
            .await?;
        Ok(rows
            .into_iter()
            .map(|mut row| LeasedEvent {
                meta: meta(&mut row),
                body: std::mem::take(&mut row.6).into(),
                attempt: u32::try_from(row.9).unwrap_or(u32::MAX),
                token,
            })
            .collect())
    }

    async fn extend(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Transition, InboxError> {
        self.transition(
            &self.scripts.extend,
            args![&key, &token.to_hex(), &millis(lease)],
        )
        .await
    }

    async fn complete(&self, key: &str, token: ClaimToken) -> Result<Transition, InboxError> {
        self.transition(&self.scripts.complete, args![&key, &token.to_hex()])
            .await
    }

    async fn complete_many(
        &self,
        done: &[(&str, ClaimToken)],
    ) -> Result<Vec<Transition>, InboxError> {
        if done.is_empty() {
            return Ok(Vec::new());
        }
        let mut args = Vec::with_capacity(done.len() * 2);
        for (key, token) in done {
            args.push(key.as_bytes().to_vec());
            args.push(token.to_hex().into_bytes());
        }
        let applied: Vec<i64> = self.run(&self.scripts.complete_many, args).await?;
        if applied.len() != done.len() {
            return Err(InboxError::Protocol(format!(
                "batch completion answered {} results for {} events",
                applied.len(),
                done.len()
            )));
        }
        Ok(applied
            .into_iter()
            .map(|one| {
                if one == 1 {
                    Transition::Applied
                } else {
                    Transition::Stale
                }
            })
            .collect())
    }

    async fn retry(
        &self,
        key: &str,
        token: ClaimToken,
        delay: Duration,
        error: &str,
    ) -> Result<Transition, InboxError> {
        self.transition(
            &self.scripts.retry,
            args![
                &key,
                &token.to_hex(),
                &millis(delay),
                &truncate_error(error)
            ],
        )
        .await
    }

    async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, InboxError> {
        self.transition(&self.scripts.release, args![&key, &token.to_hex()])
            .await
    }

    async fn dead_letter(
        &self,
        key: &str,
        token: ClaimToken,
        error: &str,
    ) -> Result<Transition, InboxError> {
        self.transition(
            &self.scripts.dead_letter,
            args![&key, &token.to_hex(), &truncate_error(error)],
        )
        .await
    }

    async fn dead_letters(&self, filter: &DeadLetterFilter) -> Result<DeadLetterPage, InboxError> {
        let from = filter.received_from.map_or(0, to_ms);
        let until = filter.received_until.map_or(i64::MAX / 2, to_ms);
        let (after_ms, after_key) = filter
            .after
            .as_ref()
            .map_or((-1, String::new()), |c| (c.received_at_ms, c.key.clone()));
        let limit = filter.page_size();
        let rows: Vec<Row> = self
            .run(
                &self.scripts.list,
                args![
                    &from,
                    &until,
                    &after_ms,
                    &after_key,
                    &filter.scheme.clone().unwrap_or_default(),
                    &filter.event_type.clone().unwrap_or_default(),
                    &limit,
                ],
            )
            .await?;
        let items: Vec<DeadLetter> = rows.into_iter().map(dead).collect();
        let full = items.len() >= limit as usize;
        let next = items.last().filter(|_| full).map(|last| DeadLetterCursor {
            received_at_ms: to_ms(last.meta.received_at),
            key: last.meta.key.clone(),
        });
        Ok(DeadLetterPage { items, next })
    }

    async fn dead_letter_get(&self, key: &str) -> Result<Option<DeadLetter>, InboxError> {
        let reply: Value = self.run(&self.scripts.get, args![&key]).await?;
        if matches!(&reply, Value::Array(items) if items.is_empty()) {
            return Ok(None);
        }
        let row: Row = redis::from_redis_value(reply)
            .map_err(|error| InboxError::Protocol(error.to_string()))?;
        Ok(Some(dead(row)))
    }

    async fn replay(&self, key: &str) -> Result<Transition, InboxError> {
        self.transition(&self.scripts.replay, args![&key]).await
    }

    async fn discard(&self, key: &str) -> Result<Transition, InboxError> {
        self.transition(&self.scripts.discard, args![&key]).await
    }

    async fn purge_completed(&self, older_than: Duration) -> Result<u64, InboxError> {
        let mut total = 0u64;
        loop {
            let purged: i64 = self
                .run(&self.scripts.purge, args![&millis(older_than), &1000])
                .await?;
            total += u64::try_from(purged).unwrap_or(0);
            if purged < 1000 {
                return Ok(total);
            }
        }
    }

    async fn stats(&self) -> Result<InboxStats, InboxError> {
        let (now, pending, due, oldest, in_flight, dead, done): (
            i64,
            i64,
            i64,
            i64,
            i64,
            i64,
            i64,
        ) = self.run(&self.scripts.stats, Vec::new()).await?;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(InboxStats {
            pending: count(pending),
            due: count(due),
            oldest_due_age: (oldest >= 0)
                .then(|| Duration::from_millis(u64::try_from(now - oldest).unwrap_or(0))),
            in_flight: count(in_flight),
            dead: count(dead),
            completed: count(done),
        })
    }
}
