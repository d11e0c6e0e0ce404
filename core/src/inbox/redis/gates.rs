//! The Redis inboxes' gates (see [`gates`](crate::inbox::gates)): pauses by
//! selector, and the permits of the workers' limits.
//!
//! In every partition (prefix `P`; the single server's inbox has one):
//!
//! | key | what |
//! |---|---|
//! | `P gates` | hash: each paused selector's text → its scheme and type patterns (lowercase, `*` wildcards), separated by a space |
//! | `P parked` | sorted set: the pending events a paused selector matches, set aside by the lease script, scored by their due time |
//!
//! The lease script ([`STOPS`], and `LEASE` in [`scripts`](super::scripts))
//! reads `P gates` and moves the due pending events a paused selector
//! matches (ASCII case-insensitive, on the event hash's `scheme` and
//! `event_type`, empty when none) from `pending` to `P parked`, keeping
//! their score, so that later leases do not scan them again; an expired
//! lease with attempts left that one matches becomes pending and parked
//! instead of being taken over. A parked event is pending (state 0): the
//! stats count it as pending, the listings show it due or retrying. A
//! resume deletes the selector from every partition's `P gates`, then
//! moves back to `pending` (with their scores) the parked events no
//! selector still paused matches, [`UNPARK_BUDGET`] per script, until the
//! whole parked set has been examined.
//!
//! The gates themselves and the permits live in the first partition (`H`,
//! its prefix: on a cluster its slot), so that every process reads and
//! writes the same ones:
//!
//! | key | what |
//! |---|---|
//! | `H gates:all` | sorted set of every gate's selector text (score 0: byte order), paused or limited; a pause that would add one past [`MAX_GATES`] is refused (a limit is recorded regardless, as on SQL) |
//! | `H gate:<selector>` | hash: `paused` (0 or 1), `concurrency` and `per_second` (the limit a worker last took a permit under; absent: none), `tokens` (the rate's bucket, in thousandths) and `refilled_at` (its last refill, ms), `updated_at` (ms) |
//! | `H permits:<selector>` | sorted set: each permit's holder (the event's key), scored by when its hold ends (ms) |
//!
//! A selector's text always holds a `:`, so `gate:<selector>` never names
//! `gates:all`. Taking a permit is one script (atomic against every other
//! taker), the algorithm of the SQL inboxes': record the limit, drop the
//! ended holds, renew the holder's own permit (no token), refuse a full
//! concurrency, refill the bucket and take a token, or refuse until the
//! next one. Every clock is the server's (`TIME`).

use std::time::Duration;

use futures_util::future::try_join_all;
use redis::Script;
use redis::aio::ConnectionLike;

use super::engine::Engine;
use super::replies::transition_of;
use super::scripts::{BYTE_ORDER, PRELUDE};
use crate::inbox::gates::{DEFER_BUSY, Gate, Limit, MAX_GATES, Permit, Selector, until_token};
use crate::inbox::{ClaimToken, InboxError, Transition, millis};

/// The partition that keeps the gates and the permits: the first.
const HOME: usize = 0;

/// The most parked events one resume script examines (kept or moved back).
pub(super) const UNPARK_BUDGET: u32 = 500;

/// Matching events against the paused selectors of the partition, for the
/// scripts that set events aside or move them back (after [`PRELUDE`]).
/// `load_stops()` reads `P gates` into `stops` (each selector's scheme and
/// type patterns, split at their stars); `stopped(h)` is whether one of
/// them matches the event hash `h`. The glob compares plain substrings
/// (`string.find` with `plain`): no selector text is ever a Lua pattern.
/// Lowercasing is ASCII only, as [`Selector::matches`] does.
pub(super) const STOPS: &str = r"
local stops = {}
local function pieces(pattern)
  local out, at = {}, 1
  while true do
    local star = string.find(pattern, '*', at, true)
    if not star then
      table.insert(out, string.sub(pattern, at))
      return out
    end
    table.insert(out, string.sub(pattern, at, star - 1))
    at = star + 1
  end
end
local function lower(s)
  return (string.gsub(s, '[A-Z]', function(c) return string.char(string.byte(c) + 32) end))
end
local function glob(p, text)
  local n = #p
  if n == 1 then return p[1] == text end
  local first, last = p[1], p[n]
  if #text < #first + #last or string.sub(text, 1, #first) ~= first then return false end
  local at = #first + 1
  for i = 2, n - 1 do
    local _, e = string.find(text, p[i], at, true)
    if not e then return false end
    at = e + 1
  end
  return #text - at + 1 >= #last and string.sub(text, #text - #last + 1) == last
end
local function load_stops()
  local all = redis.call('HGETALL', P .. 'gates')
  for i = 2, #all, 2 do
    local v = all[i]
    local space = string.find(v, ' ', 1, true)
    if space then
      table.insert(stops, {pieces(string.sub(v, 1, space - 1)), pieces(string.sub(v, space + 1))})
    end
  end
end
local function stopped(h)
  if #stops == 0 then return false end
  local f = redis.call('HMGET', h, 'scheme', 'event_type')
  local scheme, kind = lower(f[1] or ''), lower(f[2] or '')
  for _, s in ipairs(stops) do
    if glob(s[1], scheme) and glob(s[2], kind) then return true end
  end
  return false
end
";

/// On the first partition. ARGV: selector, its patterns, `1` to pause or
/// `0` to resume, the most gates. Pausing: `0` when already paused, `-1`
/// when a new gate would be one too many, else `1`; the gate is created if
/// new (an empty bucket) and the partition's `P gates` gets the selector.
/// Resuming: `0` unless paused, else `1`; the gate is forgotten unless
/// limited, and leaves `P gates`.
const PAUSE: &str = r"
local s = ARGV[2]
local g, all = P .. 'gate:' .. s, P .. 'gates:all'
if ARGV[4] == '1' then
  local was = redis.call('HGET', g, 'paused')
  if was == '1' then
    redis.call('HSET', P .. 'gates', s, ARGV[3])
    return 0
  end
  if not was then
    if redis.call('ZCARD', all) >= tonumber(ARGV[5]) then return -1 end
    redis.call('HSET', g, 'tokens', 0, 'refilled_at', now)
    redis.call('ZADD', all, 0, s)
  end
  redis.call('HSET', g, 'paused', 1, 'updated_at', now)
  redis.call('HSET', P .. 'gates', s, ARGV[3])
  return 1
end
redis.call('HDEL', P .. 'gates', s)
if redis.call('HGET', g, 'paused') ~= '1' then return 0 end
if redis.call('HEXISTS', g, 'concurrency') == 0 and redis.call('HEXISTS', g, 'per_second') == 0 then
  redis.call('DEL', g, P .. 'permits:' .. s)
  redis.call('ZREM', all, s)
else
  redis.call('HSET', g, 'paused', 0, 'updated_at', now)
end
return 1
";

/// On every other partition, after a pause. ARGV: selector, its patterns.
const COPY: &str = r"
redis.call('HSET', P .. 'gates', ARGV[2], ARGV[3])
return 1
";

/// On every partition, after a resume. ARGV: selector, cursor score (`''`:
/// from the start), cursor key, budget. Deletes the selector from `P gates`,
/// then examines at most `budget` parked events past the cursor (the last
/// one kept), moving back to `pending`, with its score, each that no
/// selector still paused matches. A cursor whose entry left the set (moved
/// back by another resume) is found again by its score and key, as the
/// dead-letter listing does. Replies `{done, score, key}`: `done` 1 once
/// the scan reached the end of the set, else the cursor to go on from.
/// Events parked meanwhile are ones a selector still paused matches: kept
/// wherever they fall.
const UNPARK: &str = r"
redis.call('HDEL', P .. 'gates', ARGV[2])
load_stops()
local parked = P .. 'parked'
local after, akey, budget = ARGV[3], ARGV[4], tonumber(ARGV[5])
local pos, skip = 0, false
if after ~= '' then
  local score = redis.call('ZSCORE', parked, akey)
  if score and tonumber(score) == tonumber(after) then
    pos = redis.call('ZRANK', parked, akey) + 1
  else
    pos = redis.call('ZCOUNT', parked, '-inf', '(' .. after)
    skip = true
  end
end
local examined, cursor = 0, {after, akey}
while examined < budget do
  local chunk = redis.call('ZRANGE', parked, pos, pos + math.min(100, budget - examined) - 1,
    'WITHSCORES')
  if #chunk == 0 then return {1, cursor[1], cursor[2]} end
  for i = 1, #chunk, 2 do
    local k, raw = chunk[i], chunk[i + 1]
    if skip and tonumber(raw) == tonumber(after) and not bytes_after(k, akey) then
      pos = pos + 1
    else
      skip = false
      examined = examined + 1
      if stopped(P .. 'e:' .. k) then
        pos = pos + 1
        cursor = {raw, k}
      else
        redis.call('ZREM', parked, k)
        redis.call('ZADD', pending, raw, k)
      end
    end
  end
end
return {0, cursor[1], cursor[2]}
";

/// On the first partition. Every gate in byte order of its selector:
/// `{selector, paused, concurrency (-1: none), per second (-1: none),
/// updated at, permits held now}`.
const LIST: &str = r"
local out = {}
for _, s in ipairs(redis.call('ZRANGE', P .. 'gates:all', 0, -1)) do
  local g = redis.call('HMGET', P .. 'gate:' .. s, 'paused', 'concurrency', 'per_second',
    'updated_at')
  table.insert(out, {s, tonumber(g[1] or '0') or 0, tonumber(g[2] or '-1') or -1,
    tonumber(g[3] or '-1') or -1, tonumber(g[4] or '0') or 0,
    redis.call('ZCOUNT', P .. 'permits:' .. s, '(' .. now, '+inf')})
end
return out
";

/// On the first partition. ARGV: selector, concurrency (`''`: none), per
/// second (`''`: none), holder, hold ms. Replies `{1, 0}` granted (new or
/// renewed), `{0, 0}` refused for the concurrency, `{2, tokens}` refused
/// for the rate (the bucket's thousandths of a token).
const ACQUIRE: &str = r"
local s = ARGV[2]
local g, held = P .. 'gate:' .. s, P .. 'permits:' .. s
local conc, rate, holder = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
if redis.call('EXISTS', g) == 0 then
  redis.call('HSET', g, 'paused', 0, 'tokens', (rate or 0) * 1000, 'refilled_at', now)
end
redis.call('ZADD', P .. 'gates:all', 0, s)
if conc then redis.call('HSET', g, 'concurrency', conc) else redis.call('HDEL', g, 'concurrency') end
if rate then redis.call('HSET', g, 'per_second', rate) else redis.call('HDEL', g, 'per_second') end
redis.call('HSET', g, 'updated_at', now)
local b = redis.call('HMGET', g, 'tokens', 'refilled_at')
local tokens, refilled = tonumber(b[1] or '0') or 0, tonumber(b[2] or '') or now
redis.call('ZREMRANGEBYSCORE', held, '-inf', now)
local till = now + tonumber(ARGV[6])
if redis.call('ZSCORE', held, holder) then
  redis.call('ZADD', held, till, holder)
  return {1, 0}
end
if conc and redis.call('ZCARD', held) >= conc then return {0, 0} end
local left = tokens
if rate then
  left = math.min(tokens + math.max(now - refilled, 0) * rate, rate * 1000)
  if left < 1000 then
    redis.call('HSET', g, 'tokens', left, 'refilled_at', now)
    return {2, left}
  end
  left = left - 1000
end
redis.call('ZADD', held, till, holder)
redis.call('HSET', g, 'tokens', left, 'refilled_at', now)
return {1, 0}
";

/// On the first partition. ARGV: selector, holder.
const RELEASE: &str = r"
return redis.call('ZREM', P .. 'permits:' .. ARGV[2], ARGV[3])
";

/// ARGV: key, token, delay ms. As the release (the attempt not counted),
/// due after the delay.
const DEFER: &str = r"
local h = KEYS[5]
if not held(h, ARGV[3]) then return 0 end
redis.call('HSET', h, 'state', 0, 'updated_at', now)
redis.call('HINCRBY', h, 'attempts', -1)
redis.call('HDEL', h, 'token', 'lease_until')
redis.call('ZREM', leased, ARGV[2])
redis.call('ZADD', pending, now + tonumber(ARGV[4]), ARGV[2])
return 1
";

/// The gates' scripts, loaded with the others.
pub(super) struct GateScripts {
    pause: Script,
    copy: Script,
    unpark: Script,
    list: Script,
    acquire: Script,
    release: Script,
    defer: Script,
}

impl GateScripts {
    pub(super) fn new() -> Self {
        let s = |body: &str| Script::new(&format!("{PRELUDE}{body}"));
        Self {
            pause: s(PAUSE),
            copy: s(COPY),
            unpark: Script::new(&format!("{PRELUDE}{BYTE_ORDER}{STOPS}{UNPARK}")),
            list: s(LIST),
            acquire: s(ACQUIRE),
            release: s(RELEASE),
            defer: s(DEFER),
        }
    }
}

/// A script argument as Redis would send it.
fn arg(value: impl ToString) -> Vec<u8> {
    value.to_string().into_bytes()
}

/// A row of [`LIST`].
type GateRow = (String, i64, i64, i64, i64, i64);

/// The gates read back, by selector; one whose selector no longer parses
/// (written by hand) is skipped.
fn gates(rows: Vec<GateRow>) -> Vec<Gate> {
    let mut out: Vec<Gate> = rows
        .into_iter()
        .filter_map(
            |(selector, paused, concurrency, per_second, updated_at, running)| {
                let selector: Selector = selector.parse().ok()?;
                let limit = (concurrency >= 0 || per_second >= 0).then(|| Limit {
                    concurrency: u32::try_from(concurrency).ok(),
                    per_second: u32::try_from(per_second).ok(),
                });
                Some(Gate {
                    selector,
                    paused: paused != 0,
                    limit,
                    running: u64::try_from(running).unwrap_or(0),
                    updated_at,
                })
            },
        )
        .collect();
    out.sort_by_key(|gate| gate.selector.to_string());
    out
}

impl<C> Engine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// One script on the first partition (the gate, and that partition's
    /// copy), then the other partitions side by side: a pause writes each
    /// one's copy, a resume [unparks](Self::unpark) each. Both are done
    /// whether or not the gate changed, so that calling it again repairs a
    /// call that failed part way (some partitions still paused, or events
    /// still parked).
    pub(in crate::inbox) async fn set_gate_paused(
        &self,
        selector: &Selector,
        paused: bool,
    ) -> Result<bool, InboxError> {
        let name = selector.to_string();
        let patterns = format!("{} {}", selector.scheme(), selector.event_type());
        let answer: i64 = self
            .run(
                HOME,
                None,
                &self.scripts.gates.pause,
                vec![
                    arg(&name),
                    arg(&patterns),
                    arg(u8::from(paused)),
                    arg(MAX_GATES),
                ],
            )
            .await?;
        if answer < 0 {
            return Err(InboxError::Protocol(format!(
                "the inbox holds {MAX_GATES} gates already: resume one first"
            )));
        }
        if paused {
            try_join_all(
                (0..self.partitions.len())
                    .filter(|&p| p != HOME)
                    .map(|part| {
                        self.run::<i64>(
                            part,
                            None,
                            &self.scripts.gates.copy,
                            vec![arg(&name), arg(&patterns)],
                        )
                    }),
            )
            .await?;
        } else {
            try_join_all((0..self.partitions.len()).map(|part| self.unpark(part, &name))).await?;
        }
        let changed = answer == 1;
        crate::inbox::signals::gate_set(paused, changed);
        Ok(changed)
    }

    /// Deletes `name` from partition `part`'s paused selectors, then moves
    /// back to `pending` the parked events no selector still paused
    /// matches: [`UNPARK_BUDGET`] examined per script, until the end of the
    /// parked set.
    async fn unpark(&self, part: usize, name: &str) -> Result<(), InboxError> {
        let (mut score, mut key) = (String::new(), String::new());
        loop {
            let (done, next_score, next_key): (i64, String, String) = self
                .run(
                    part,
                    None,
                    &self.scripts.gates.unpark,
                    vec![arg(name), arg(&score), arg(&key), arg(UNPARK_BUDGET)],
                )
                .await?;
            if done == 1 {
                return Ok(());
            }
            (score, key) = (next_score, next_key);
        }
    }

    /// One script on the first partition.
    pub(in crate::inbox) async fn gates(&self) -> Result<Vec<Gate>, InboxError> {
        let rows: Vec<GateRow> = self
            .run(HOME, None, &self.scripts.gates.list, Vec::new())
            .await?;
        Ok(gates(rows))
    }

    /// One script on the first partition.
    pub(in crate::inbox) async fn acquire_permit(
        &self,
        selector: &Selector,
        limit: Limit,
        holder: &str,
        hold: Duration,
    ) -> Result<Permit, InboxError> {
        let bound = |n: Option<u32>| n.map(arg).unwrap_or_default();
        let (code, tokens): (i64, i64) = self
            .run(
                HOME,
                None,
                &self.scripts.gates.acquire,
                vec![
                    arg(selector),
                    bound(limit.concurrency),
                    bound(limit.per_second),
                    arg(holder),
                    arg(millis(hold)),
                ],
            )
            .await?;
        Ok(match (code, limit.per_second) {
            (1, _) => Permit::Granted,
            (2, Some(rate)) => Permit::Denied {
                retry_after: until_token(tokens, rate),
            },
            _ => Permit::Denied {
                retry_after: DEFER_BUSY,
            },
        })
    }

    /// One script on the first partition.
    pub(in crate::inbox) async fn release_permit(
        &self,
        selector: &Selector,
        holder: &str,
    ) -> Result<(), InboxError> {
        self.run::<i64>(
            HOME,
            None,
            &self.scripts.gates.release,
            vec![arg(selector), arg(holder)],
        )
        .await?;
        Ok(())
    }

    /// One script on the event's partition.
    pub(in crate::inbox) async fn defer(
        &self,
        key: &str,
        token: ClaimToken,
        delay: Duration,
    ) -> Result<Transition, InboxError> {
        let answer: i64 = self
            .on_event(
                key,
                &self.scripts.gates.defer,
                vec![arg(token.to_hex()), arg(millis(delay))],
            )
            .await?;
        Ok(transition_of(answer))
    }
}
