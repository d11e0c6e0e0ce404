//! The Redis [`Inbox`](super::Inbox): a hash per event plus sorted sets, every
//! operation one Lua script.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::try_join_all;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Script, Value};
use sha2::{Digest as _, Sha256};

use super::{
    Accepted, ClaimToken, DeadLetter, DeadLetterCursor, DeadLetterFilter, DeadLetterPage, Delivery,
    DeliveryCursor, DeliveryFilter, DeliveryOrder, DeliveryPage, DeliveryState, EventMeta,
    InboxError, InboxStats, LeasedEvent, NewEvent, OpenError, Transition, decode_headers,
    encode_headers, from_ms, millis, to_ms, truncate_error,
};
use crate::ConfigError;

/// Shared by every script: the clock (the server's `TIME`, in ms), the keys,
/// and the token check. Every script works on one partition (the single
/// server's inbox is one partition, the cluster's has several), whose keys
/// all start with its prefix `P`: `KEYS` are its pending, leased, dead and
/// done sets, then, for the scripts on one event, that event's hash
/// (`P .. 'e:' .. key`); `ARGV[1]` is `P`, from which the scripts on many
/// events (lease, batch completion, purge, listing) derive their hashes'
/// names. On a cluster `P` carries a hash tag (`{…}`), so that every key a
/// script touches, declared or derived, is in the slot of its `KEYS`.
/// `count` adds to this minute's activity hash (`P .. 'm:' .. minute`,
/// fields `a`, `c`, `f`, and `d` for duplicates; see
/// [`activity`](super::activity)), setting its
/// time to live when it creates a field.
const PRELUDE: &str = r"
local P = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local pending, leased, dead, done = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local function held(h, tok)
  return redis.call('HGET', h, 'state') == '1' and redis.call('HGET', h, 'token') == tok
end
local function count(kind, n)
  local m = P .. 'm:' .. math.floor(now / 60000)
  if redis.call('HINCRBY', m, kind, n) == n then redis.call('EXPIRE', m, 7200) end
end
local function fields(k, h, body)
  local f = redis.call('HMGET', h, 'scheme', 'delivery_id', 'event_type', 'matched_key',
    'headers', body, 'received_at', 'signed_at', 'attempts', 'last_error', 'updated_at')
  return {k, f[1], f[2], f[3], f[4], f[5], f[6] or '', f[7], f[8], f[9], f[10] or '', f[11]}
end
";

/// A duplicate is counted (field `d` of the minute's activity hash): besides
/// the count, that write is what a `WAIT` after the accept waits for (a
/// script that writes nothing leaves its connection's replication offset
/// where it was, and the `WAIT` would say nothing about the stored event).
const ACCEPT: &str = r"
local h = KEYS[5]
if redis.call('EXISTS', h) == 1 then
  count('d', 1)
  return 0
end
redis.call('HSET', h, 'scheme', ARGV[3], 'delivery_id', ARGV[4], 'event_type', ARGV[5],
  'matched_key', ARGV[6], 'headers', ARGV[7], 'body', ARGV[8], 'signed_at', ARGV[9],
  'received_at', now, 'state', 0, 'attempts', 0, 'updated_at', now)
redis.call('ZADD', pending, now, ARGV[2])
redis.call('ZADD', P .. 'received', now, ARGV[2])
count('a', 1)
return 1
";

/// ARGV: token, lease ms, max attempts, batch, the expired-on-last-attempt
/// error. While the partition's pause flag (`P .. 'paused'`) is set, nothing
/// is leased (leases expired on their last attempt are still reaped).
const LEASE: &str = r"
local tok, lease, max, batch = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if redis.call('EXISTS', P .. 'paused') == 1 then batch = 0 end
local take, reaped = {}, 0
for _, k in ipairs(redis.call('ZRANGEBYSCORE', leased, '-inf', now, 'LIMIT', 0, 100)) do
  local h = P .. 'e:' .. k
  if tonumber(redis.call('HGET', h, 'attempts') or '0') >= max then
    redis.call('HSET', h, 'state', 3, 'last_error', ARGV[6], 'updated_at', now)
    redis.call('HDEL', h, 'token', 'lease_until')
    redis.call('ZREM', leased, k)
    redis.call('ZADD', dead, redis.call('HGET', h, 'received_at'), k)
    reaped = reaped + 1
  elseif #take < batch then
    table.insert(take, k)
  end
end
if reaped > 0 then count('f', reaped) end
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
local h = KEYS[5]
if not held(h, ARGV[3]) then return 0 end
redis.call('HSET', h, 'lease_until', now + tonumber(ARGV[4]))
redis.call('ZADD', leased, now + tonumber(ARGV[4]), ARGV[2])
return 1
";

/// ARGV: key, token.
const COMPLETE: &str = r"
local h = KEYS[5]
if not held(h, ARGV[3]) then return 0 end
redis.call('HSET', h, 'state', 2, 'updated_at', now)
redis.call('HDEL', h, 'token', 'lease_until')
redis.call('ZREM', leased, ARGV[2])
redis.call('ZADD', done, now, ARGV[2])
count('c', 1)
return 1
";

/// ARGV: key, token, key, token, …; one 1 (applied) or 0 (stale) per pair.
const COMPLETE_MANY: &str = r"
local out, n = {}, 0
for i = 2, #ARGV, 2 do
  local k = ARGV[i]
  local h = P .. 'e:' .. k
  if held(h, ARGV[i + 1]) then
    redis.call('HSET', h, 'state', 2, 'updated_at', now)
    redis.call('HDEL', h, 'token', 'lease_until')
    redis.call('ZREM', leased, k)
    redis.call('ZADD', done, now, k)
    table.insert(out, 1)
    n = n + 1
  else
    table.insert(out, 0)
  end
end
if n > 0 then count('c', n) end
return out
";

/// ARGV: key, token, delay ms, error.
const RETRY: &str = r"
local h = KEYS[5]
if not held(h, ARGV[3]) then return 0 end
redis.call('HSET', h, 'state', 0, 'last_error', ARGV[5], 'updated_at', now)
redis.call('HDEL', h, 'token', 'lease_until')
redis.call('ZREM', leased, ARGV[2])
redis.call('ZADD', pending, now + tonumber(ARGV[4]), ARGV[2])
count('f', 1)
return 1
";

/// ARGV: key, token.
const RELEASE: &str = r"
local h = KEYS[5]
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
local h = KEYS[5]
if not held(h, ARGV[3]) then return 0 end
redis.call('HSET', h, 'state', 3, 'last_error', ARGV[4], 'updated_at', now)
redis.call('HDEL', h, 'token', 'lease_until')
redis.call('ZREM', leased, ARGV[2])
redis.call('ZADD', dead, redis.call('HGET', h, 'received_at'), ARGV[2])
count('f', 1)
return 1
";

/// ARGV: key.
const REPLAY: &str = r"
local h = KEYS[5]
if redis.call('HGET', h, 'state') ~= '3' then return 0 end
redis.call('HSET', h, 'state', 0, 'attempts', 0, 'updated_at', now)
redis.call('ZREM', dead, ARGV[2])
redis.call('ZADD', pending, now, ARGV[2])
return 1
";

/// ARGV: key.
const DISCARD: &str = r"
local h = KEYS[5]
if redis.call('HGET', h, 'state') ~= '3' then return 0 end
redis.call('DEL', h)
redis.call('ZREM', dead, ARGV[2])
redis.call('ZREM', P .. 'received', ARGV[2])
return 1
";

/// ARGV: age ms, limit.
const PURGE: &str = r"
local ks = redis.call('ZRANGEBYSCORE', done, '-inf', now - tonumber(ARGV[2]), 'LIMIT', 0, tonumber(ARGV[3]))
for _, k in ipairs(ks) do
  redis.call('DEL', P .. 'e:' .. k)
  redis.call('ZREM', done, k)
  redis.call('ZREM', P .. 'received', k)
end
return #ks
";

/// ARGV: the number of minutes. The current minute, then each minute's
/// `a`, `c`, `f` (oldest first).
const ACTIVITY: &str = r"
local minute = math.floor(now / 60000)
local out = {minute}
for m = minute - tonumber(ARGV[2]) + 1, minute do
  local f = redis.call('HMGET', P .. 'm:' .. m, 'a', 'c', 'f')
  table.insert(out, tonumber(f[1] or '0'))
  table.insert(out, tonumber(f[2] or '0'))
  table.insert(out, tonumber(f[3] or '0'))
end
return out
";

const STATS: &str = r"
local oldest = redis.call('ZRANGEBYSCORE', pending, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1)
local at = -1
if #oldest > 0 then at = tonumber(oldest[2]) end
return {now, redis.call('ZCARD', pending), redis.call('ZCOUNT', pending, '-inf', now), at,
  redis.call('ZCARD', leased), redis.call('ZCARD', dead), redis.call('ZCARD', done),
  redis.call('EXISTS', P .. 'paused')}
";

/// ARGV: key.
const GET: &str = r"
local h = KEYS[5]
if redis.call('HGET', h, 'state') ~= '3' then return {} end
return fields(ARGV[2], h, 'body')
";

/// ARGV: received from (ms), until (exclusive, ms), cursor ms (or -1), cursor
/// key, scheme (or ''), event type (or ''), limit, budget.
///
/// Keyset pagination over the dead set (score: receipt ms; equal scores in
/// key order): the scan starts just past the cursor — at its rank when the
/// cursor's entry is still dead, else at the first entry of its score, the
/// entries up to its key skipped — and examines at most `budget` entries,
/// so that one call stays short however many dead letters a filter skips.
/// Replies `{rows, cursor, examined}`: the cursor (`{score, key}` of the
/// last entry examined) whenever the scan stopped before the end (page full
/// or budget spent), `{}` at the end; `examined` the entries looked at.
/// Keys of equal scores compare byte-wise ([`BYTE_ORDER`]), as the set
/// orders them.
const LIST: &str = r"
local upto, after, akey = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local scheme, kind, limit, budget = ARGV[6], ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9])
local pos = redis.call('ZCOUNT', dead, '-inf', '(' .. ARGV[2])
local skip = false
if after >= 0 then
  local rank
  local score = redis.call('ZSCORE', dead, akey)
  if score and tonumber(score) == after then
    rank = redis.call('ZRANK', dead, akey) + 1
  else
    rank = redis.call('ZCOUNT', dead, '-inf', '(' .. ARGV[4])
    skip = true
  end
  if rank > pos then pos = rank end
end
local out, examined, last = {}, 0, {}
while examined < budget do
  local n = math.min(200, budget - examined)
  local chunk = redis.call('ZRANGE', dead, pos, pos + n - 1, 'WITHSCORES')
  if #chunk == 0 then return {out, {}, examined} end
  for i = 1, #chunk, 2 do
    local k, raw = chunk[i], chunk[i + 1]
    local score = tonumber(raw)
    if score >= upto then return {out, {}, examined} end
    examined, pos, last = examined + 1, pos + 1, {raw, k}
    if not skip or score ~= after or bytes_after(k, akey) then
      local h = P .. 'e:' .. k
      local f = redis.call('HMGET', h, 'scheme', 'event_type')
      if (scheme == '' or f[1] == scheme) and (kind == '' or f[2] == kind) then
        table.insert(out, fields(k, h, 'no-body'))
        if #out >= limit then return {out, last, examined} end
      end
    end
  end
end
return {out, last, examined}
";

/// The most dead-set entries one listing call examines (matched or not),
/// per partition: it returns a cursor after that many, so that a filter
/// matching few of many dead letters never holds the server for long.
pub const DEAD_LETTER_SCAN_BUDGET: u32 = 500;

/// Whether key `a` sorts after key `b` in a sorted set's order for equal
/// scores: byte by byte, a prefix first. Lua's `<` and `>` on strings
/// collate by the server's locale (`strcoll`: under `en_US.UTF-8`, `key_a`
/// is before `key_B`), which would skip or repeat keys past a cursor.
const BYTE_ORDER: &str = r"
local function bytes_after(a, b)
  if a == b then return false end
  local n, i = math.min(#a, #b), 1
  while i <= n and string.byte(a, i) == string.byte(b, i) do i = i + 1 end
  if i > n then return #a > #b end
  return string.byte(a, i) > string.byte(b, i)
end
";

/// What a delivery row adds to [`PRELUDE`]'s `fields`: the hash's state,
/// the due time (the pending set's score, or `''`), the lease end, the clock.
const DELIVERY_PRELUDE: &str = r"
local function extra(k, h)
  local g = redis.call('HMGET', h, 'state', 'lease_until')
  return {g[1] or '', redis.call('ZSCORE', pending, k) or '', g[2] or '', now}
end
";

/// ARGV: state (`due`, `retrying`, `in_flight`, `dead`, `completed`),
/// newest first (`1`) or oldest first (`0`), received from (ms), until
/// (exclusive, ms), cursor ms (or -1), cursor key, scheme, event type,
/// delivery id (each `''` for any), limit, budget.
///
/// Keyset pagination over the receipt index (`P .. 'received'`, every
/// stored event scored by its receipt ms; for dead letters the dead set,
/// scored the same way), in either direction, as [`LIST`] does: the scan
/// starts just past the cursor and examines at most `budget` entries,
/// keeping those in the wanted state (a pending event is due when its
/// pending score is at most now, retrying otherwise) that match the
/// filters. Replies `{rows, cursor}`, each row `{fields, extra}`. Keys of
/// equal scores compare byte-wise ([`BYTE_ORDER`]), as the index orders them.
const DELIVERIES: &str = r"
local want, desc = ARGV[2], ARGV[3] == '1'
local from, upto = tonumber(ARGV[4]), tonumber(ARGV[5])
local after, akey = tonumber(ARGV[6]), ARGV[7]
local scheme, kind, did = ARGV[8], ARGV[9], ARGV[10]
local limit, budget = tonumber(ARGV[11]), tonumber(ARGV[12])
local code = ({due = '0', retrying = '0', in_flight = '1', completed = '2', dead = '3'})[want]
local index = P .. 'received'
if want == 'dead' then index = dead end
local function matches(k, f)
  if f[1] ~= code then return false end
  if (scheme ~= '' and f[2] ~= scheme) or (kind ~= '' and f[3] ~= kind)
    or (did ~= '' and f[4] ~= did) then return false end
  if code == '0' then
    local due = redis.call('ZSCORE', pending, k)
    if not due then return false end
    if (want == 'due') ~= (tonumber(due) <= now) then return false end
  end
  return true
end
local pos, skip = 0, false
if desc then
  pos = redis.call('ZCOUNT', index, ARGV[5], '+inf')
else
  pos = redis.call('ZCOUNT', index, '-inf', '(' .. ARGV[4])
end
if after >= 0 then
  local rank
  local score = redis.call('ZSCORE', index, akey)
  if score and tonumber(score) == after then
    if desc then rank = redis.call('ZREVRANK', index, akey) + 1
    else rank = redis.call('ZRANK', index, akey) + 1 end
  else
    if desc then rank = redis.call('ZCOUNT', index, '(' .. ARGV[6], '+inf')
    else rank = redis.call('ZCOUNT', index, '-inf', '(' .. ARGV[6]) end
    skip = true
  end
  if rank > pos then pos = rank end
end
local out, examined, last = {}, 0, {}
while examined < budget do
  local n = math.min(200, budget - examined)
  local chunk
  if desc then chunk = redis.call('ZREVRANGE', index, pos, pos + n - 1, 'WITHSCORES')
  else chunk = redis.call('ZRANGE', index, pos, pos + n - 1, 'WITHSCORES') end
  if #chunk == 0 then return {out, {}} end
  for i = 1, #chunk, 2 do
    local k, raw = chunk[i], chunk[i + 1]
    local score = tonumber(raw)
    if (desc and score < from) or (not desc and score >= upto) then return {out, {}} end
    examined, pos, last = examined + 1, pos + 1, {raw, k}
    if not skip or score ~= after or (desc and bytes_after(akey, k))
      or (not desc and bytes_after(k, akey)) then
      local h = P .. 'e:' .. k
      if matches(k, redis.call('HMGET', h, 'state', 'scheme', 'event_type', 'delivery_id')) then
        table.insert(out, {fields(k, h, 'no-body'), extra(k, h)})
        if #out >= limit then return {out, last} end
      end
    end
  end
end
return {out, last}
";

/// ARGV: key. `{}` when the event is not stored, else `{fields, extra}`.
const DELIVERY_GET: &str = r"
local h = KEYS[5]
if redis.call('EXISTS', h) == 0 then return {} end
return {fields(ARGV[2], h, 'body'), extra(ARGV[2], h)}
";

/// The most receipt-index entries one [`Inbox::deliveries`](super::Inbox::deliveries)
/// call examines (matched or not), per partition: it returns a cursor after
/// that many, so that a state or filter matching few of many events never
/// holds the server for long (a page may then be short, even empty).
pub const DELIVERY_SCAN_BUDGET: u32 = 500;

/// The scripts, loaded once per inbox (and again by a server that lost them).
pub(super) struct Scripts {
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
    activity: Script,
    get: Script,
    list: Script,
    deliveries: Script,
    delivery_get: Script,
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
            activity: s(ACTIVITY),
            get: s(GET),
            list: Script::new(&format!("{PRELUDE}{BYTE_ORDER}{LIST}")),
            deliveries: Script::new(&format!(
                "{PRELUDE}{BYTE_ORDER}{DELIVERY_PRELUDE}{DELIVERIES}"
            )),
            delivery_get: Script::new(&format!("{PRELUDE}{DELIVERY_PRELUDE}{DELIVERY_GET}")),
        }
    }
}

/// One partition's key names, all starting with its prefix.
pub(super) struct Partition {
    prefix: String,
    /// pending, leased, dead, done.
    sets: [String; 4],
}

impl Partition {
    pub(super) fn new(prefix: String) -> Self {
        let sets = ["pending", "leased", "dead", "done"].map(|set| format!("{prefix}{set}"));
        Self { prefix, sets }
    }

    /// The prefix of this partition's keys.
    #[cfg(feature = "redis-cluster")]
    pub(super) fn prefix(&self) -> &str {
        &self.prefix
    }
}

/// Which of `partitions` stores `key` (a stored key): the first eight bytes
/// of its SHA-256, big-endian, modulo `partitions`. Stable across processes,
/// versions and platforms.
pub(super) fn partition_of(key: &str, partitions: usize) -> usize {
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
/// any number of partitions: what [`RedisInbox`] (one partition, the keys
/// as they always were) and the cluster inbox (several, hash-tagged) share.
pub(super) struct Engine<C> {
    connection: C,
    partitions: Arc<[Partition]>,
    command_timeout: Duration,
    scripts: Arc<Scripts>,
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

/// The accept script's reply: 1 stored, 0 a duplicate.
pub(super) fn accepted(reply: i64) -> Accepted {
    if reply == 1 {
        Accepted::Stored
    } else {
        Accepted::Duplicate
    }
}

pub(super) fn inbox_error(error: RedisError) -> InboxError {
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

/// What a delivery row adds to a [`Row`]: the hash's state, the due time
/// (`''` unless pending), the lease end (`''` unless leased), the clock.
type Extra = (String, String, String, i64);

/// One partition's delivery listing: its rows (with their receipt ms) and
/// where its scan stopped (`None`: at the end).
type DeliveryPartitionPage = (Vec<(i64, Delivery)>, Option<DeliveryCursor>);

fn delivery(mut row: Row, extra: Extra) -> Delivery {
    let (state, due, lease_until, now) = extra;
    let due: Option<i64> = due.parse().ok();
    let state = match state.as_str() {
        "0" if due.is_some_and(|at| at > now) => DeliveryState::Retrying,
        "0" => DeliveryState::Due,
        "1" => DeliveryState::InFlight,
        "2" => DeliveryState::Completed,
        _ => DeliveryState::Dead,
    };
    Delivery {
        meta: meta(&mut row),
        state,
        attempts: u32::try_from(row.9).unwrap_or(u32::MAX),
        last_error: some(std::mem::take(&mut row.10)),
        due_at: due
            .filter(|_| matches!(state, DeliveryState::Due | DeliveryState::Retrying))
            .map(from_ms),
        lease_until: lease_until
            .parse()
            .ok()
            .filter(|_| state == DeliveryState::InFlight)
            .map(from_ms),
        updated_at: from_ms(row.11),
        body: std::mem::take(&mut row.6).into(),
    }
}

fn transition_of(answer: i64) -> Transition {
    if answer == 1 {
        Transition::Applied
    } else {
        Transition::Stale
    }
}

/// One partition's listing: its rows (with their receipt ms) and where its
/// scan stopped (`None`: at the end).
type PartitionPage = (Vec<(i64, DeadLetter)>, Option<DeadLetterCursor>, u64);

impl<C> Engine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// An engine over `partitions` (at least one).
    pub(super) fn new(
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
    pub(super) fn partitions(&self) -> &[Partition] {
        &self.partitions
    }

    /// The connection.
    pub(super) fn connection(&self) -> &C {
        &self.connection
    }

    /// The command timeout.
    pub(super) fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// `script` on partition `part`; with `event`, that event's hash is
    /// declared as `KEYS[5]`.
    async fn run<T: redis::FromRedisValue>(
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
    async fn on_event<T: redis::FromRedisValue>(
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

    pub(super) async fn accept(&self, event: &NewEvent) -> Result<Accepted, InboxError> {
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
    pub(super) fn accept_cmd(&self, event: &NewEvent) -> (redis::Cmd, &Script) {
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
    pub(super) async fn lease(
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
                        &super::EXPIRED_ON_LAST_ATTEMPT,
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

    pub(super) async fn extend(
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

    pub(super) async fn complete(
        &self,
        key: &str,
        token: ClaimToken,
    ) -> Result<Transition, InboxError> {
        self.transition(key, &self.scripts.complete, args![&token.to_hex()])
            .await
    }

    /// One script per partition the entries fall in (one in all on a
    /// single partition), run side by side.
    pub(super) async fn complete_many(
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

    pub(super) async fn retry(
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

    pub(super) async fn release(
        &self,
        key: &str,
        token: ClaimToken,
    ) -> Result<Transition, InboxError> {
        self.transition(key, &self.scripts.release, args![&token.to_hex()])
            .await
    }

    pub(super) async fn dead_letter(
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
    pub(super) async fn dead_letters(
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

    pub(super) async fn dead_letter_get(
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

    pub(super) async fn replay(&self, key: &str) -> Result<Transition, InboxError> {
        self.transition(key, &self.scripts.replay, Vec::new()).await
    }

    pub(super) async fn discard(&self, key: &str) -> Result<Transition, InboxError> {
        self.transition(key, &self.scripts.discard, Vec::new())
            .await
    }

    /// Partition after partition, 1,000 events per script.
    pub(super) async fn purge_completed(&self, older_than: Duration) -> Result<u64, InboxError> {
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
    pub(super) async fn set_paused(&self, paused: bool) -> Result<bool, InboxError> {
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
        super::signals::pause_set(paused, changed);
        Ok(changed)
    }

    /// Whether any partition's flag is set.
    pub(super) async fn paused(&self) -> Result<bool, InboxError> {
        Ok(self
            .on_pause_flags::<i64>("EXISTS", &[])
            .await?
            .iter()
            .any(|&n| n > 0))
    }

    /// Every partition's counts (side by side), summed; the oldest due age
    /// is the largest.
    pub(super) async fn stats(&self) -> Result<InboxStats, InboxError> {
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
    pub(super) async fn deliveries(
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

    pub(super) async fn delivery_get(&self, key: &str) -> Result<Option<Delivery>, InboxError> {
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
    pub(super) async fn activity(&self, minutes: u32) -> Result<super::Activity, InboxError> {
        let minutes = super::activity::clamp_minutes(minutes);
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
        Ok(super::Activity::from_rows(now, minutes, rows))
    }
}

/// Implements [`Inbox`](super::Inbox) for a type whose `engine` field is an
/// [`Engine`]; `accept` goes through the type's own `accept_event`.
macro_rules! inbox_over_engine {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl $crate::inbox::Inbox for $ty {
            async fn accept(
                &self,
                event: &$crate::inbox::NewEvent,
            ) -> Result<$crate::inbox::Accepted, $crate::inbox::InboxError> {
                self.accept_event(event).await
            }

            async fn lease(
                &self,
                token: $crate::inbox::ClaimToken,
                batch: u32,
                lease: std::time::Duration,
                max_attempts: u32,
            ) -> Result<Vec<$crate::inbox::LeasedEvent>, $crate::inbox::InboxError> {
                self.engine.lease(token, batch, lease, max_attempts).await
            }

            async fn extend(
                &self,
                key: &str,
                token: $crate::inbox::ClaimToken,
                lease: std::time::Duration,
            ) -> Result<$crate::inbox::Transition, $crate::inbox::InboxError> {
                self.engine.extend(key, token, lease).await
            }

            async fn complete(
                &self,
                key: &str,
                token: $crate::inbox::ClaimToken,
            ) -> Result<$crate::inbox::Transition, $crate::inbox::InboxError> {
                self.engine.complete(key, token).await
            }

            async fn complete_many(
                &self,
                done: &[(&str, $crate::inbox::ClaimToken)],
            ) -> Result<Vec<$crate::inbox::Transition>, $crate::inbox::InboxError> {
                self.engine.complete_many(done).await
            }

            async fn retry(
                &self,
                key: &str,
                token: $crate::inbox::ClaimToken,
                delay: std::time::Duration,
                error: &str,
            ) -> Result<$crate::inbox::Transition, $crate::inbox::InboxError> {
                self.engine.retry(key, token, delay, error).await
            }

            async fn release(
                &self,
                key: &str,
                token: $crate::inbox::ClaimToken,
            ) -> Result<$crate::inbox::Transition, $crate::inbox::InboxError> {
                self.engine.release(key, token).await
            }

            async fn dead_letter(
                &self,
                key: &str,
                token: $crate::inbox::ClaimToken,
                error: &str,
            ) -> Result<$crate::inbox::Transition, $crate::inbox::InboxError> {
                self.engine.dead_letter(key, token, error).await
            }

            async fn dead_letters(
                &self,
                filter: &$crate::inbox::DeadLetterFilter,
            ) -> Result<$crate::inbox::DeadLetterPage, $crate::inbox::InboxError> {
                self.engine.dead_letters(filter).await
            }

            async fn dead_letter_get(
                &self,
                key: &str,
            ) -> Result<Option<$crate::inbox::DeadLetter>, $crate::inbox::InboxError> {
                self.engine.dead_letter_get(key).await
            }

            async fn replay(
                &self,
                key: &str,
            ) -> Result<$crate::inbox::Transition, $crate::inbox::InboxError> {
                self.engine.replay(key).await
            }

            async fn discard(
                &self,
                key: &str,
            ) -> Result<$crate::inbox::Transition, $crate::inbox::InboxError> {
                self.engine.discard(key).await
            }

            async fn purge_completed(
                &self,
                older_than: std::time::Duration,
            ) -> Result<u64, $crate::inbox::InboxError> {
                self.engine.purge_completed(older_than).await
            }

            async fn stats(&self) -> Result<$crate::inbox::InboxStats, $crate::inbox::InboxError> {
                self.engine.stats().await
            }

            async fn set_paused(&self, paused: bool) -> Result<bool, $crate::inbox::InboxError> {
                self.engine.set_paused(paused).await
            }

            async fn paused(&self) -> Result<bool, $crate::inbox::InboxError> {
                self.engine.paused().await
            }

            async fn deliveries(
                &self,
                filter: &$crate::inbox::DeliveryFilter,
            ) -> Result<$crate::inbox::DeliveryPage, $crate::inbox::InboxError> {
                self.engine.deliveries(filter).await
            }

            async fn delivery_get(
                &self,
                key: &str,
            ) -> Result<Option<$crate::inbox::Delivery>, $crate::inbox::InboxError> {
                self.engine.delivery_get(key).await
            }

            async fn activity(
                &self,
                minutes: u32,
            ) -> Result<$crate::inbox::Activity, $crate::inbox::InboxError> {
                self.engine.activity(minutes).await
            }
        }
    };
}
#[cfg(feature = "redis-cluster")]
pub(super) use inbox_over_engine;

/// An [`Inbox`](super::Inbox) on Redis (or Valkey).
///
/// Each event is a hash (`prefix + "e:" + key`); four sorted sets index them:
/// pending by due time, leased by lease end, dead by receipt, completed by
/// completion (`prefix + "pending"`, `"leased"`, `"dead"`, `"done"`); the
/// key `prefix + "paused"` exists while processing is paused. Every
/// operation is one Lua script reading the server's clock (`TIME`), so it
/// is atomic against every other worker and receiver. For a Redis Cluster,
/// see `RedisClusterInbox` (feature `redis-cluster`): the same scripts over
/// hash-tagged partitions.
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
    engine: Engine<ConnectionManager>,
    prefix: Arc<str>,
}

inbox_over_engine!(RedisInbox);

impl fmt::Debug for RedisInbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisInbox")
            .field("prefix", &self.prefix)
            .field("command_timeout", &self.engine.command_timeout())
            .finish_non_exhaustive()
    }
}

/// Builds a [`RedisInbox`]; see [`RedisInbox::builder`].
///
/// **Retention.** An inbox built here keeps its completed events until
/// something purges them (under `noeviction`, a full Redis answers every
/// accept with an error): start a [`PurgeTask`](super::PurgeTask) (what
/// [`inbox_from_url`](super::inbox_from_url) does, with
/// [`DEFAULT_RETENTION`](super::DEFAULT_RETENTION)), or call
/// [`purge_completed`](super::Inbox::purge_completed) from a job of yours.
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
        #[cfg(feature = "redis-tls")]
        crate::tls::use_ring();
        let client = redis::Client::open(self.url.as_str()).map_err(|_| ConfigError::Invalid {
            what: "redis URL",
            reason: "not a URL redis-rs accepts (redis://[user:password@]host[:port][/db])",
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.command_timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(200));
        #[cfg(feature = "redis-tls")]
        let probe = client.clone();
        let connection = match tokio::time::timeout(
            self.connect_timeout,
            ConnectionManager::new_with_config(client, config),
        )
        .await
        {
            Ok(Ok(connection)) => connection,
            failed => {
                #[cfg(feature = "redis-tls")]
                if crate::tls::answers_plain_redis(&probe).await {
                    return Err(crate::tls::PLAIN_REDIS.into());
                }
                return Err(match failed {
                    Ok(Err(error)) => inbox_error(error),
                    _ => InboxError::Timeout,
                }
                .into());
            }
        };
        // One partition whose prefix is the key prefix: the keys every
        // earlier version wrote.
        let inbox = RedisInbox {
            engine: Engine::new(
                connection,
                vec![Partition::new(self.prefix.clone())],
                self.command_timeout,
            ),
            prefix: Arc::from(self.prefix.as_str()),
        };
        inbox.warn_unless_durable().await;
        Ok(inbox)
    }
}

/// The warning of an inbox whose server may lose acknowledged deliveries,
/// from its `appendonly` and `appendfsync` settings (`None`: unreadable).
pub(super) fn warn_unless_durable(appendonly: Option<&str>, appendfsync: Option<&str>) {
    match (appendonly, appendfsync) {
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

impl RedisInbox {
    async fn accept_event(&self, event: &NewEvent) -> Result<Accepted, InboxError> {
        self.engine.accept(event).await
    }

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
        warn_unless_durable(appendonly.as_deref(), appendfsync.as_deref());
    }

    /// One `CONFIG GET` value, if the server allows it.
    async fn config_get(&self, name: &str) -> Option<String> {
        let mut connection = self.engine.connection().clone();
        let reply = tokio::time::timeout(
            self.engine.command_timeout(),
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
