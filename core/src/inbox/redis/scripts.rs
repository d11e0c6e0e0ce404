//! The Lua scripts of the Redis inbox: one per operation, each run whole on
//! one partition, and the handle that loads them. The gates' scripts (and
//! the selector matching the lease script uses) are in
//! [`gates`](super::gates).

use redis::Script;

use super::gates::{GateScripts, STOPS};

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
/// [`activity`](crate::inbox::activity)), setting its
/// time to live when it creates a field.
pub(super) const PRELUDE: &str = r"
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
///
/// While a selector is paused (`P .. 'gates'`, read by [`STOPS`]), the
/// events it matches are set aside instead of leased: a due pending one
/// moves from `pending` to `P .. 'parked'` with its score (its due time),
/// so that later leases do not scan it again, and the scan goes on (at
/// most `batch + 256` due entries per call) to fill the batch; an expired
/// lease with attempts left becomes pending and parked (due now) rather
/// than taken over. A resume moves them back ([`gates`](super::gates)).
const LEASE: &str = r"
local tok, lease, max, batch = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if redis.call('EXISTS', P .. 'paused') == 1 then batch = 0 end
load_stops()
local parked = P .. 'parked'
local take, reaped = {}, 0
for _, k in ipairs(redis.call('ZRANGEBYSCORE', leased, '-inf', now, 'LIMIT', 0, 100)) do
  local h = P .. 'e:' .. k
  if tonumber(redis.call('HGET', h, 'attempts') or '0') >= max then
    redis.call('HSET', h, 'state', 3, 'last_error', ARGV[6], 'updated_at', now)
    redis.call('HDEL', h, 'token', 'lease_until')
    redis.call('ZREM', leased, k)
    redis.call('ZADD', dead, redis.call('HGET', h, 'received_at'), k)
    reaped = reaped + 1
  elseif stopped(h) then
    redis.call('HSET', h, 'state', 0, 'updated_at', now)
    redis.call('HDEL', h, 'token', 'lease_until')
    redis.call('ZREM', leased, k)
    redis.call('ZADD', parked, now, k)
  elseif #take < batch then
    table.insert(take, k)
  end
end
if reaped > 0 then count('f', reaped) end
if #take < batch then
  if #stops == 0 then
    for _, k in ipairs(redis.call('ZRANGEBYSCORE', pending, '-inf', now, 'LIMIT', 0, batch - #take)) do
      table.insert(take, k)
    end
  else
    local due = redis.call('ZRANGEBYSCORE', pending, '-inf', now, 'WITHSCORES', 'LIMIT', 0,
      batch - #take + 256)
    for i = 1, #due, 2 do
      local k = due[i]
      if stopped(P .. 'e:' .. k) then
        redis.call('ZREM', pending, k)
        redis.call('ZADD', parked, due[i + 1], k)
      else
        table.insert(take, k)
        if #take >= batch then break end
      end
    end
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
redis.call('DEL', P .. 'a:' .. ARGV[2])
redis.call('ZREM', dead, ARGV[2])
redis.call('ZREM', P .. 'received', ARGV[2])
return 1
";

/// ARGV: age ms, limit.
const PURGE: &str = r"
local ks = redis.call('ZRANGEBYSCORE', done, '-inf', now - tonumber(ARGV[2]), 'LIMIT', 0, tonumber(ARGV[3]))
for _, k in ipairs(ks) do
  redis.call('DEL', P .. 'e:' .. k)
  redis.call('DEL', P .. 'a:' .. k)
  redis.call('ZREM', done, k)
  redis.call('ZREM', P .. 'received', k)
end
return #ks
";

/// ARGV: the number to keep, then (key, entry) pairs. Appends each entry to its event's
/// attempt list (`P .. 'a:' .. key`) if the event is stored, keeping the
/// newest `ARGV[2]`; returns how many were kept (an attempt of an event
/// no longer stored is dropped).
const RECORD_ATTEMPTS: &str = r"
local keep = tonumber(ARGV[2])
local n = 0
for i = 3, #ARGV, 2 do
  local k = ARGV[i]
  if redis.call('EXISTS', P .. 'e:' .. k) == 1 then
    local l = P .. 'a:' .. k
    redis.call('RPUSH', l, ARGV[i + 1])
    redis.call('LTRIM', l, -keep, -1)
    n = n + 1
  end
end
return n
";

/// ARGV: key. The event's attempt entries, oldest first.
const ATTEMPTS: &str = r"
return redis.call('LRANGE', P .. 'a:' .. ARGV[2], 0, -1)
";

/// ARGV: the entry's time (ms), the entry (JSON), the oldest time kept
/// (ms), the most entries kept. Adds the entry to the action log
/// (`P .. 'log'`, a sorted set scored by the entry's number, each member
/// `'<number> <time ms> <entry>'`), then deletes the oldest entries past
/// the count or older than the time (at most 100 per call); returns the
/// entry's number.
const RECORD_ACTION: &str = r"
local log = P .. 'log'
local id = redis.call('INCR', P .. 'log:n')
redis.call('ZADD', log, id, id .. ' ' .. ARGV[2] .. ' ' .. ARGV[3])
redis.call('ZREMRANGEBYRANK', log, 0, -tonumber(ARGV[5]) - 1)
local cutoff = tonumber(ARGV[4])
local oldest = redis.call('ZRANGE', log, 0, 99)
for _, m in ipairs(oldest) do
  local at = tonumber(string.match(m, '^%d+ (%d+) '))
  if at == nil or at >= cutoff then break end
  redis.call('ZREM', log, m)
end
return id
";

/// ARGV: the number below which to read (exclusive; `+inf`: the newest),
/// the most entries. The log's members, newest first.
const ACTIONS: &str = r"
return redis.call('ZREVRANGEBYSCORE', P .. 'log', '(' .. ARGV[2], '-inf', 'LIMIT', 0, tonumber(ARGV[3]))
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

/// The parked events (set aside while a selector is paused) count as
/// pending, and as due once their due time is past, as the SQL inboxes
/// count theirs.
const STATS: &str = r"
local parked = P .. 'parked'
local at = -1
for _, set in ipairs({pending, parked}) do
  local oldest = redis.call('ZRANGEBYSCORE', set, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1)
  if #oldest > 0 and (at < 0 or tonumber(oldest[2]) < at) then at = tonumber(oldest[2]) end
end
return {now, redis.call('ZCARD', pending) + redis.call('ZCARD', parked),
  redis.call('ZCOUNT', pending, '-inf', now) + redis.call('ZCOUNT', parked, '-inf', now), at,
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
load_search(ARGV[10])
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
      if (scheme == '' or f[1] == scheme) and (kind == '' or f[2] == kind) and searched(h) then
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
pub(super) const BYTE_ORDER: &str = r"
local function bytes_after(a, b)
  if a == b then return false end
  local n, i = math.min(#a, #b), 1
  while i <= n and string.byte(a, i) == string.byte(b, i) do i = i + 1 end
  if i > n then return #a > #b end
  return string.byte(a, i) > string.byte(b, i)
end
";

/// The listing scripts' search (see [`search`](crate::inbox::search)):
/// `searched(h)` is whether the event's hash matches every term of
/// `spec` (decoded from a JSON argument, `nil` for none): `err` finds the
/// text in `last_error`; the others compare the scalar at the path in the
/// decoded body (numbers as doubles: integers exact up to 2^53).
const SEARCH: &str = r"
local spec = nil
local function load_search(arg)
  if arg ~= nil and arg ~= '' then spec = cjson.decode(arg) end
end
local function scalar_text(v)
  local t = type(v)
  if t == 'string' then return v end
  if t == 'boolean' then return tostring(v) end
  if t == 'number' then
    if v == math.floor(v) and math.abs(v) < 9007199254740992 then
      return string.format('%d', v)
    end
    return tostring(v)
  end
  return nil
end
local function searched(h)
  if spec == nil then return true end
  local doc, decoded = nil, false
  for _, term in ipairs(spec) do
    local op, path, value = term[1], term[2], term[3]
    if op == 'err' then
      local e = redis.call('HGET', h, 'last_error')
      if not e or not string.find(e, value, 1, true) then return false end
    else
      if not decoded then
        decoded = true
        local ok, v = pcall(cjson.decode, redis.call('HGET', h, 'body') or '')
        if ok then doc = v end
      end
      local at = doc
      for _, seg in ipairs(path) do
        if type(at) ~= 'table' then at = nil break end
        if type(seg) == 'number' then
          at = at[seg + 1]
        else
          at = at[seg]
        end
        if at == nil then break end
      end
      local s = scalar_text(at)
      if s == nil then return false end
      if op == 'eq' and s ~= value then return false end
      if op == 'ne' and s == value then return false end
      if op == 'pre' and string.sub(s, 1, #value) ~= value then return false end
    end
  end
  return true
end
";

/// What a delivery row adds to [`PRELUDE`]'s `fields`: the hash's state,
/// the due time (the pending set's score, or the parked set's for an event
/// a paused selector set aside, or `''`), the lease end, the clock.
/// `due_of(k)` is that due time (`nil` unless pending).
const DELIVERY_PRELUDE: &str = r"
local function due_of(k)
  return redis.call('ZSCORE', pending, k) or redis.call('ZSCORE', P .. 'parked', k)
end
local function extra(k, h)
  local g = redis.call('HMGET', h, 'state', 'lease_until')
  return {g[1] or '', due_of(k) or '', g[2] or '', now}
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
/// keeping those in the wanted state (a pending event — parked ones
/// included — is due when its due time is at most now, retrying otherwise) that match the
/// filters. Replies `{rows, cursor}`, each row `{fields, extra}`. Keys of
/// equal scores compare byte-wise ([`BYTE_ORDER`]), as the index orders them.
const DELIVERIES: &str = r"
local want, desc = ARGV[2], ARGV[3] == '1'
local from, upto = tonumber(ARGV[4]), tonumber(ARGV[5])
local after, akey = tonumber(ARGV[6]), ARGV[7]
local scheme, kind, did = ARGV[8], ARGV[9], ARGV[10]
local limit, budget = tonumber(ARGV[11]), tonumber(ARGV[12])
load_search(ARGV[13])
local code = ({due = '0', retrying = '0', in_flight = '1', completed = '2', dead = '3'})[want]
local index = P .. 'received'
if want == 'dead' then index = dead end
local function matches(k, f)
  if f[1] ~= code then return false end
  if (scheme ~= '' and f[2] ~= scheme) or (kind ~= '' and f[3] ~= kind)
    or (did ~= '' and f[4] ~= did) then return false end
  if code == '0' then
    local due = due_of(k)
    if not due then return false end
    if (want == 'due') ~= (tonumber(due) <= now) then return false end
  end
  return searched(P .. 'e:' .. k)
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

/// The most receipt-index entries one [`Inbox::deliveries`](crate::inbox::Inbox::deliveries)
/// call examines (matched or not), per partition: it returns a cursor after
/// that many, so that a state or filter matching few of many events never
/// holds the server for long (a page may then be short, even empty).
pub const DELIVERY_SCAN_BUDGET: u32 = 500;

/// The scripts, loaded once per inbox (and again by a server that lost them).
pub(super) struct Scripts {
    pub(super) accept: Script,
    pub(super) lease: Script,
    pub(super) extend: Script,
    pub(super) complete: Script,
    pub(super) complete_many: Script,
    pub(super) retry: Script,
    pub(super) release: Script,
    pub(super) dead_letter: Script,
    pub(super) replay: Script,
    pub(super) discard: Script,
    pub(super) purge: Script,
    pub(super) stats: Script,
    pub(super) activity: Script,
    pub(super) get: Script,
    pub(super) list: Script,
    pub(super) deliveries: Script,
    pub(super) delivery_get: Script,
    pub(super) record_attempts: Script,
    pub(super) attempts: Script,
    pub(super) record_action: Script,
    pub(super) actions: Script,
    /// The gates' scripts.
    pub(super) gates: GateScripts,
}

impl Scripts {
    pub(super) fn new() -> Self {
        let s = |body: &str| Script::new(&format!("{PRELUDE}{body}"));
        Self {
            accept: s(ACCEPT),
            lease: Script::new(&format!("{PRELUDE}{STOPS}{LEASE}")),
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
            list: Script::new(&format!("{PRELUDE}{BYTE_ORDER}{SEARCH}{LIST}")),
            deliveries: Script::new(&format!(
                "{PRELUDE}{BYTE_ORDER}{SEARCH}{DELIVERY_PRELUDE}{DELIVERIES}"
            )),
            delivery_get: Script::new(&format!("{PRELUDE}{DELIVERY_PRELUDE}{DELIVERY_GET}")),
            record_attempts: s(RECORD_ATTEMPTS),
            attempts: s(ATTEMPTS),
            record_action: s(RECORD_ACTION),
            actions: s(ACTIONS),
            gates: GateScripts::new(),
        }
    }
}
