//! The Redis [`DedupStore`].

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Script};

use super::url::OpenError;
use super::{Claim, ClaimToken, DedupStore, StoreError, Transition};
use crate::ConfigError;

/// The server's clock in epoch milliseconds (`TIME`), and whether the value
/// `v` of a key is held by token `t`: an in-flight value is `{token}/{lease
/// deadline in epoch ms}` (or, written by an older version, the bare token),
/// a completed one `done`. Shared by every script.
const PRELUDE: &str = r"
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function held_by(v, t)
  return v and (v == t or string.sub(v, 1, #t + 1) == t .. '/')
end
local function in_flight(t, deadline)
  return t .. '/' .. string.format('%.0f', deadline)
end
";

/// Claims `KEYS[1]` for token `ARGV[1]`, lease `ARGV[2]` ms, keeping the key
/// `ARGV[3]` ms past the lease. Returns `{1, 0}` claimed, `{2, 0}`
/// completed, `{3, ms left}` in flight.
///
/// A value `{token}/+` was written by the plain-`SET` fast path
/// ([`FAST_CLAIM_SUFFIX`]): its deadline is the key's expiry less the grace
/// (`ARGV[3]`).
const CLAIM: &str = r"
local v = redis.call('GET', KEYS[1])
if v == 'done' then
  return {2, 0}
end
local now = now_ms()
if v then
  local deadline = tonumber(string.match(v, '^%x+/(%d+)$'))
  if not deadline then
    local pttl = redis.call('PTTL', KEYS[1])
    if not string.match(v, '^%x+/%+$') then
      return {3, pttl}
    end
    deadline = now + pttl - tonumber(ARGV[3])
  end
  if deadline > now then
    return {3, deadline - now}
  end
end
local lease = tonumber(ARGV[2])
redis.call('SET', KEYS[1], in_flight(ARGV[1], now + lease), 'PX', lease + tonumber(ARGV[3]))
return {1, 0}
";

/// Marks the key completed for `ARGV[2]` ms if `ARGV[1]` holds it (its lease
/// may have run out).
const COMPLETE: &str = r"
if held_by(redis.call('GET', KEYS[1]), ARGV[1]) then
  redis.call('SET', KEYS[1], 'done', 'PX', ARGV[2])
  return 1
end
return 0
";

/// Deletes the key if `ARGV[1]` holds it.
const RELEASE: &str = r"
if held_by(redis.call('GET', KEYS[1]), ARGV[1]) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
";

/// Gives `ARGV[1]`, if it holds the key (its lease may have run out), a new
/// lease of `ARGV[2]` ms, keeping the key `ARGV[3]` ms past it.
const EXTEND: &str = r"
if held_by(redis.call('GET', KEYS[1]), ARGV[1]) then
  local lease = tonumber(ARGV[2])
  redis.call('SET', KEYS[1], in_flight(ARGV[1], now_ms() + lease), 'PX', lease + tonumber(ARGV[3]))
  return 1
end
return 0
";

/// A [`DedupStore`] on Redis (or Valkey), shared by every instance that uses
/// the same server and key prefix.
///
/// Each delivery is one string key, `prefix + pipeline key`. While in flight
/// its value is the holder's [`ClaimToken`] in hex and the lease's deadline
/// (`{token}/{epoch ms}`, by the server's clock, or `{token}/+` when the
/// deadline is the key's expiry less the grace), and the key lives
/// [`EXPIRED_CLAIM_GRACE`](super::EXPIRED_CLAIM_GRACE) past that deadline;
/// once completed its value is `done` and it lives for the retention. Every
/// operation is one Lua script on that one key (atomic, and Redis Cluster
/// safe: no operation touches two keys, though this store itself talks to
/// one server, a primary or a cluster-aware proxy; `RedisClusterStore`, with
/// the `redis-cluster` feature, runs these scripts on a Redis Cluster):
///
/// - claim: first one plain `SET key token/+ NX GET PX lease+grace` (Redis
///   7.0 or later; no script): a missing key is claimed by it, and `done`
///   comes back as completed. Only a key in flight runs the claim script,
///   which reads the key: a live deadline is in flight (with the time left),
///   a passed one is taken over (`SET key token/deadline PX lease+grace`). A
///   `token/+` value's deadline is the key's expiry less the grace. Against
///   an older server the store runs the script for every claim;
/// - complete: if the token holds the key (its lease may have run out, as
///   long as nobody took over), `SET key done PX retention`. Well within the
///   lease ([`DedupStore::complete_in_lease`], as the pipeline completes),
///   where nobody can have taken over, one plain `SET key done XX GET PX
///   retention` (Redis 6.2 or later; no script), the old value telling
///   whether the token held it;
/// - release: if the token holds the key, `DEL key`;
/// - extend: if the token holds the key, a new deadline (this re-acquires a
///   lease that ran out without a takeover).
///
/// Scripts run by `EVALSHA`, loaded on first use. Deadlines use the server's
/// clock (`TIME`, Redis 5 or later), so the application servers' clocks do
/// not matter. (A key holding a bare token, written by an earlier version of
/// this store, is in flight until it expires.)
///
/// **Eviction.** The keys must never be evicted: an evicted completed key is
/// processed again on the sender's next retry, an evicted lease lets a second
/// attempt run concurrently. Run the server with
/// `maxmemory-policy noeviction` (writes then fail when memory is full, which
/// the pipeline answers with a 503 and the sender retries), or give it
/// memory to spare. Every key here has a time to live, so the `volatile-*`
/// policies (`volatile-ttl` first of all, which evicts the shortest-lived keys,
/// the leases) evict them just as the `allkeys-*` ones do. On connecting, the
/// store reads `maxmemory-policy` (when `CONFIG` is allowed) and logs a warning
/// unless it is `noeviction`.
///
/// **Durability.** A claim is only as durable as the server's persistence
/// (AOF, RDB) and replication (asynchronous: a failover can lose the last
/// writes, and so let a delivery run twice).
///
/// **Timeouts.** `connect_timeout` bounds each connection attempt (the
/// connection manager reconnects in the background, with one retry);
/// `command_timeout` bounds every operation, reconnection included. An expired
/// timeout is [`StoreError::Timeout`], a refused or broken connection
/// [`StoreError::Unavailable`]. A script that timed out may still have run:
/// a late claim then acts like an attempt that crashed (its lease expires).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use webhooks_core::dedup::RedisStore;
///
/// let store = RedisStore::builder("redis://cache.internal:6379/0")
///     .key_prefix("billing:dedup:")
///     .command_timeout(Duration::from_millis(500))
///     .connect()
///     .await?;
/// # let _ = store; Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    connection: ConnectionManager,
    prefix: Arc<str>,
    command_timeout: Duration,
    scripts: Arc<Scripts>,
    /// Whether the server takes the fast paths' `SET … GET` (`NX GET`:
    /// Redis 7.0 or later): cleared, for every clone, by the first reply
    /// saying it does not.
    set_get: Arc<AtomicBool>,
}

/// The four scripts, shared with the cluster store.
pub(super) struct Scripts {
    pub(super) claim: Script,
    pub(super) complete: Script,
    pub(super) release: Script,
    pub(super) extend: Script,
}

impl Scripts {
    pub(super) fn new() -> Self {
        let script = |body: &str| Script::new(&format!("{PRELUDE}{body}"));
        Self {
            claim: script(CLAIM),
            complete: script(COMPLETE),
            release: script(RELEASE),
            extend: script(EXTEND),
        }
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .field("command_timeout", &self.command_timeout)
            .finish_non_exhaustive()
    }
}

/// Builds a [`RedisStore`] from a URL; see [`RedisStore::builder`].
#[derive(Clone)]
#[must_use]
pub struct RedisStoreBuilder {
    url: String,
    prefix: String,
    connect_timeout: Duration,
    command_timeout: Duration,
}

impl fmt::Debug for RedisStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may hold a password: never printed.
        f.debug_struct("RedisStoreBuilder")
            .field("prefix", &self.prefix)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .finish_non_exhaustive()
    }
}

impl RedisStoreBuilder {
    /// The prefix put before every pipeline key (default
    /// [`RedisStore::DEFAULT_PREFIX`]).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long one connection attempt may take (default
    /// [`RedisStore::DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one store operation may take (default
    /// [`RedisStore::DEFAULT_COMMAND_TIMEOUT`]).
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Connects, checking that the server answers.
    ///
    /// # Errors
    ///
    /// [`OpenError::Config`] for a URL redis-rs does not accept (`rediss://`
    /// needs the `redis-tls` feature) or a `rediss://` URL whose server
    /// answers plain Redis, [`OpenError::Store`] when the server cannot be
    /// reached in time.
    pub async fn connect(self) -> Result<RedisStore, OpenError> {
        #[cfg(feature = "redis-tls")]
        crate::tls::use_ring();
        let client = redis::Client::open(self.url.as_str()).map_err(|_| ConfigError::Invalid {
            what: "redis URL",
            reason: "not a URL redis-rs accepts (redis://[user:password@]host[:port][/db]; \
                     rediss:// needs the `redis-tls` feature of the crate you depend on: \
                     tower-webhooks, actix-webhooks or webhooks-core)",
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
                    Ok(Err(error)) => store_error(error),
                    _ => StoreError::Timeout,
                }
                .into());
            }
        };
        let store = RedisStore::new(connection)
            .with_key_prefix(&self.prefix)
            .with_command_timeout(self.command_timeout);
        store.warn_unless_noeviction().await;
        Ok(store)
    }
}

impl RedisStore {
    /// Default of [`RedisStoreBuilder::key_prefix`]: `dedup:`, so that a
    /// pipeline key `webhooks:standard-webhooks:msg_1` is stored as
    /// `dedup:webhooks:standard-webhooks:msg_1`.
    pub const DEFAULT_PREFIX: &str = "dedup:";
    /// Default of [`RedisStoreBuilder::connect_timeout`]: 5 seconds.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
    /// Default of [`RedisStoreBuilder::command_timeout`]: 2 seconds.
    pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

    /// A builder for a store on the server at `url`
    /// (`redis://[user:password@]host[:port][/db]`, `redis+unix:///path`).
    pub fn builder(url: &str) -> RedisStoreBuilder {
        RedisStoreBuilder {
            url: url.to_owned(),
            prefix: Self::DEFAULT_PREFIX.to_owned(),
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            command_timeout: Self::DEFAULT_COMMAND_TIMEOUT,
        }
    }

    /// Connects with the defaults; see [`builder`](Self::builder).
    ///
    /// # Errors
    ///
    /// As [`RedisStoreBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self, OpenError> {
        Self::builder(url).connect().await
    }

    /// A store on an existing connection manager, with the default prefix and
    /// command timeout. The manager's own timeouts and retries apply too.
    #[must_use]
    pub fn new(connection: ConnectionManager) -> Self {
        Self {
            connection,
            prefix: Arc::from(Self::DEFAULT_PREFIX),
            command_timeout: Self::DEFAULT_COMMAND_TIMEOUT,
            scripts: Arc::new(Scripts::new()),
            set_get: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Uses `prefix` before every key instead.
    #[must_use]
    pub fn with_key_prefix(mut self, prefix: &str) -> Self {
        self.prefix = Arc::from(prefix);
        self
    }

    /// Bounds every operation by `timeout` instead.
    #[must_use]
    pub fn with_command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// The key prefix.
    #[must_use]
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// The connection manager.
    #[must_use]
    pub fn connection(&self) -> &ConnectionManager {
        &self.connection
    }

    /// Logs a warning when the server may evict keys. Silent when `CONFIG`
    /// is not allowed (managed services often disable it).
    async fn warn_unless_noeviction(&self) {
        let mut connection = self.connection.clone();
        let reply = tokio::time::timeout(
            self.command_timeout,
            redis::cmd("CONFIG")
                .arg("GET")
                .arg("maxmemory-policy")
                .query_async::<HashMap<String, String>>(&mut connection),
        )
        .await;
        match reply {
            Ok(Ok(config)) => match config.get("maxmemory-policy").map(String::as_str) {
                Some("noeviction") | None => {}
                Some(policy) => tracing::warn!(
                    policy,
                    "the Redis server may evict dedup keys (maxmemory-policy is not noeviction): \
                     an evicted key lets a delivery run twice"
                ),
            },
            Ok(Err(error)) => {
                tracing::debug!(error = %error, "could not read maxmemory-policy");
            }
            Err(_) => tracing::debug!("reading maxmemory-policy timed out"),
        }
    }

    async fn run<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        key: &str,
        token: ClaimToken,
        millis: &[u64],
    ) -> Result<T, StoreError> {
        let cmd = eval_cmd(script, &self.prefix, key, token, millis);
        let mut connection = self.connection.clone();
        run_script(&mut connection, script, &cmd, self.command_timeout).await
    }

    /// The claim's fast path: one plain `SET key {token}/+ NX GET PX
    /// lease+grace`, the cost of the hand-written `SET NX` it replaces. A
    /// missing key is claimed by it and a completed one answered `done`;
    /// `None` when the key is in flight or its lease ran out (the script
    /// decides, by the key's expiry: the deadline is the expiry less the
    /// grace) or when the server is older than Redis 7.0 (from then on this
    /// store runs the script only).
    async fn fast_claim(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Option<Result<Claim, StoreError>> {
        let reply = self
            .plain_set(fast_claim_cmd(&self.prefix, key, token, lease))
            .await?;
        match reply {
            Ok(None) => Some(Ok(Claim::Claimed)),
            Ok(Some(value)) if value == b"done" => Some(Ok(Claim::Completed)),
            Ok(Some(_)) => None,
            Err(error) => Some(Err(error)),
        }
    }

    /// Sends one of the fast paths' plain `SET … GET`s within the command
    /// timeout; its reply is the value the key held. `None` when the server
    /// is older than the syntax (then, for every clone of this store, the
    /// scripts run instead) or was found to be before.
    async fn plain_set(&self, cmd: redis::Cmd) -> Option<Result<Option<Vec<u8>>, StoreError>> {
        if !self.set_get.load(Ordering::Relaxed) {
            return None;
        }
        let mut connection = self.connection.clone();
        let reply = match tokio::time::timeout(
            self.command_timeout,
            cmd.query_async::<Option<Vec<u8>>>(&mut connection),
        )
        .await
        {
            Ok(reply) => reply,
            Err(_) => return Some(Err(StoreError::Timeout)),
        };
        match reply {
            Ok(old) => Some(Ok(old)),
            Err(error) if set_get_unsupported(&error) => {
                self.set_get.store(false, Ordering::Relaxed);
                tracing::debug!(
                    "the Redis server refuses SET … GET: claims and completions run a script"
                );
                None
            }
            Err(error) => Some(Err(store_error(error))),
        }
    }

    /// The completion's fast path: one plain `SET key done XX GET PX
    /// retention`, when `lease_left` is more than [`FAST_COMPLETE_MARGIN`]
    /// past the command timeout (the command may reach the server as late as
    /// that). `None`: run the script.
    async fn fast_complete(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
        lease_left: Duration,
    ) -> Option<Result<Transition, StoreError>> {
        if !fast_complete_allowed(lease_left, self.command_timeout) {
            return None;
        }
        let reply = self
            .plain_set(fast_complete_cmd(&self.prefix, key, retention))
            .await?;
        Some(reply.map(|old| fast_complete_answer(old.as_deref(), token)))
    }

    async fn token_script(
        &self,
        script: &Script,
        key: &str,
        token: ClaimToken,
        millis: &[u64],
    ) -> Result<Transition, StoreError> {
        Ok(transition(self.run(script, key, token, millis).await?))
    }
}

/// `EVALSHA` of `script` on the prefixed `key` with the token and `millis`,
/// built in one buffer: the prefixed key is formatted into it, the token
/// written as hex from the stack (no per-argument allocation, as
/// `Script::prepare_invoke` makes).
pub(super) fn eval_cmd(
    script: &Script,
    prefix: &str,
    key: &str,
    token: ClaimToken,
    millis: &[u64],
) -> redis::Cmd {
    let mut cmd = redis::Cmd::with_capacity(
        5 + millis.len(),
        7 + 40 + 1 + prefix.len() + key.len() + 32 + 20 * millis.len() + 8,
    );
    cmd.arg("EVALSHA")
        .arg(script.get_hash())
        .arg(1)
        .arg(PrefixedKey(prefix, key))
        .arg(&token.hex_digits()[..]);
    for millis in millis {
        cmd.arg(*millis);
    }
    cmd
}

/// The suffix after the token in a value written by the claim's fast path
/// (`SET key {token}/+ NX GET PX lease+grace`): the lease's deadline is the
/// key's expiry less [`EXPIRED_CLAIM_GRACE`](super::EXPIRED_CLAIM_GRACE).
const FAST_CLAIM_SUFFIX: &[u8] = b"/+";

/// `SET {prefix}{key} {token}/+ NX GET PX {lease + grace}` in one buffer.
fn fast_claim_cmd(prefix: &str, key: &str, token: ClaimToken, lease: Duration) -> redis::Cmd {
    let mut value = [0; 34];
    value[..32].copy_from_slice(&token.hex_digits());
    value[32..].copy_from_slice(FAST_CLAIM_SUFFIX);
    let mut cmd = redis::Cmd::with_capacity(7, 3 + prefix.len() + key.len() + 34 + 10 + 20);
    cmd.arg("SET")
        .arg(PrefixedKey(prefix, key))
        .arg(&value[..])
        .arg("NX")
        .arg("GET")
        .arg("PX")
        .arg(millis(lease).saturating_add(grace()));
    cmd
}

/// How much of the lease, beyond the command timeout, must be left for a
/// completion to be one plain `SET … XX GET` ([`DedupStore::complete_in_lease`]).
pub(super) const FAST_COMPLETE_MARGIN: Duration = Duration::from_secs(1);

/// Whether a completion with `lease_left` may skip the token check: the
/// command reaches the server within `command_timeout` (or counts as timed
/// out), and the lease then still has the margin to run.
pub(super) fn fast_complete_allowed(lease_left: Duration, command_timeout: Duration) -> bool {
    lease_left > command_timeout.saturating_add(FAST_COMPLETE_MARGIN)
}

/// `SET {prefix}{key} done XX GET PX {retention}` in one buffer.
pub(super) fn fast_complete_cmd(prefix: &str, key: &str, retention: Duration) -> redis::Cmd {
    let mut cmd = redis::Cmd::with_capacity(7, 3 + prefix.len() + key.len() + 4 + 2 + 3 + 2 + 20);
    cmd.arg("SET")
        .arg(PrefixedKey(prefix, key))
        .arg("done")
        .arg("XX")
        .arg("GET")
        .arg("PX")
        .arg(millis(retention));
    cmd
}

/// The fast completion's answer from the value it replaced: applied when
/// `token` held the key (`{token}/…`, or the bare token of an older
/// version). Anything else was not this token's: stale (a missing key was
/// not written, `XX`); a key another token held is now completed, which
/// only happens where the lease did not hold (see
/// [`DedupStore::complete_in_lease`]) and is logged.
pub(super) fn fast_complete_answer(old: Option<&[u8]>, token: ClaimToken) -> Transition {
    let Some(old) = old else {
        return Transition::Stale;
    };
    let hex = token.hex_digits();
    let held =
        old.starts_with(&hex[..]) && (old.len() == hex.len() || old.get(hex.len()) == Some(&b'/'));
    if held {
        Transition::Applied
    } else {
        if old != b"done" {
            tracing::warn!(
                "a completion past its lease marked completed a key another attempt held \
                 (the store's clock, a failover or a frozen process): the delivery was \
                 processed, and ran twice"
            );
        }
        Transition::Stale
    }
}

/// A server older than Redis 7.0 answers `SET … NX GET` with a syntax error.
fn set_get_unsupported(error: &RedisError) -> bool {
    error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError)
        && error.to_string().contains("syntax error")
}

/// Runs `cmd` (`script`'s `EVALSHA`) on `connection` within `timeout`; a
/// server that lost its scripts (restarted, `SCRIPT FLUSH`, a replica just
/// promoted) gets `script` loaded and runs it again, as
/// `Script::invoke_async` does.
pub(super) async fn run_script<C, T>(
    connection: &mut C,
    script: &Script,
    cmd: &redis::Cmd,
    timeout: Duration,
) -> Result<T, StoreError>
where
    C: redis::aio::ConnectionLike + Send,
    T: redis::FromRedisValue,
{
    let invoke = async {
        match cmd.query_async(connection).await {
            Err(error)
                if error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
            {
                script.load_async(connection).await?;
                cmd.query_async(connection).await
            }
            result => result,
        }
    };
    match tokio::time::timeout(timeout, invoke).await {
        Ok(result) => result.map_err(store_error),
        Err(_) => Err(StoreError::Timeout),
    }
}

/// The claim script's answer `(code, ms)` as a [`Claim`].
pub(super) fn claim_answer((code, ttl): (i64, i64)) -> Result<Claim, StoreError> {
    Ok(match code {
        1 => Claim::Claimed,
        2 => Claim::Completed,
        3 => Claim::InFlight {
            // From a bare-token key's PTTL: -1 (no expiry: a key not
            // written by this store) or -2 (gone): retry soon.
            retry_after: Duration::from_millis(u64::try_from(ttl).unwrap_or(1_000)),
        },
        other => {
            return Err(StoreError::Protocol(format!(
                "claim script returned {other}"
            )));
        }
    })
}

/// A token script's answer (1 applied, else stale) as a [`Transition`].
pub(super) fn transition(answer: i64) -> Transition {
    match answer {
        1 => Transition::Applied,
        _ => Transition::Stale,
    }
}

/// A pipeline key after the store's prefix, written into a command as one
/// argument without building it first.
pub(super) struct PrefixedKey<'a>(&'a str, &'a str);

impl fmt::Display for PrefixedKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)?;
        f.write_str(self.1)
    }
}

impl redis::ToRedisArgs for PrefixedKey<'_> {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        out.write_arg_fmt(self);
    }
}

/// The longest span given to a script: 100 years, so that the deadlines
/// the scripts compute stay exact in Lua's numbers (doubles).
const MAX_SPAN_MS: u64 = 100 * 365 * 86_400_000;

/// Milliseconds for `PX`: at least 1 (0 is an error in Redis), at most 100 years.
pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis())
        .unwrap_or(MAX_SPAN_MS)
        .clamp(1, MAX_SPAN_MS)
}

/// How long a claim's key outlives its lease.
pub(super) fn grace() -> u64 {
    millis(super::EXPIRED_CLAIM_GRACE)
}

/// Maps a redis-rs error into the store's error, keeping it as the source.
pub(super) fn store_error(error: RedisError) -> StoreError {
    if error.is_timeout() {
        StoreError::Timeout
    } else {
        StoreError::unavailable(error)
    }
}

#[async_trait::async_trait]
impl DedupStore for RedisStore {
    async fn claim(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        if let Some(claim) = self.fast_claim(key, token, lease).await {
            return claim;
        }
        let answer = self
            .run(&self.scripts.claim, key, token, &[millis(lease), grace()])
            .await?;
        claim_answer(answer)
    }

    async fn complete(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
    ) -> Result<Transition, StoreError> {
        self.token_script(&self.scripts.complete, key, token, &[millis(retention)])
            .await
    }

    async fn complete_in_lease(
        &self,
        key: &str,
        token: ClaimToken,
        retention: Duration,
        lease_left: Duration,
    ) -> Result<Transition, StoreError> {
        if let Some(answer) = self.fast_complete(key, token, retention, lease_left).await {
            return answer;
        }
        self.complete(key, token, retention).await
    }

    async fn release(&self, key: &str, token: ClaimToken) -> Result<Transition, StoreError> {
        self.token_script(&self.scripts.release, key, token, &[])
            .await
    }

    async fn extend(
        &self,
        key: &str,
        token: ClaimToken,
        lease: Duration,
    ) -> Result<Transition, StoreError> {
        self.token_script(&self.scripts.extend, key, token, &[millis(lease), grace()])
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_written_as_their_hex() {
        for token in [
            ClaimToken::from_u128(0),
            ClaimToken::from_u128(u128::MAX),
            ClaimToken::from_u128(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210),
            ClaimToken::random(),
        ] {
            assert_eq!(token.hex_digits(), token.to_hex().as_bytes());
            assert_eq!(token.to_hex(), format!("{:032x}", token.as_u128()));
        }
        assert_eq!(
            PrefixedKey("dedup:", "ns:s:id").to_string(),
            "dedup:ns:s:id"
        );
    }

    /// Redis before 7.0 answers `SET … NX GET` with `-ERR syntax error`
    /// (its `shared.syntaxerr`): recognised, and nothing else is.
    #[test]
    fn an_old_servers_refusal_is_recognised() {
        let error = |reply: &[u8]| {
            redis::parse_redis_value(reply)
                .unwrap()
                .extract_error()
                .unwrap_err()
        };
        assert!(set_get_unsupported(&error(b"-ERR syntax error\r\n")));
        for other in [
            &b"-ERR max number of clients reached\r\n"[..],
            b"-NOSCRIPT No matching script\r\n",
            b"-READONLY You can't write against a read only replica.\r\n",
            b"-OOM command not allowed when used memory > 'maxmemory'.\r\n",
        ] {
            assert!(!set_get_unsupported(&error(other)));
        }
        let cmd = fast_claim_cmd("p:", "k", ClaimToken::from_u128(1), Duration::from_secs(1));
        let packed = String::from_utf8(cmd.get_packed_command()).unwrap();
        assert!(packed.contains("p:k"), "{packed}");
        assert!(packed.contains(&format!("{:032x}/+", 1)), "{packed}");
        assert!(packed.contains(&(1_000 + grace()).to_string()), "{packed}");
    }

    #[test]
    fn the_fast_completion_reads_the_value_it_replaced() {
        let token = ClaimToken::from_u128(0xab);
        let hex = token.to_hex();
        let other = ClaimToken::from_u128(0xcd).to_hex();
        for (old, expected) in [
            (Some(format!("{hex}/+")), Transition::Applied),
            (Some(format!("{hex}/1700000000000")), Transition::Applied),
            (Some(hex.clone()), Transition::Applied),
            (Some(format!("{hex}0")), Transition::Stale),
            (Some(format!("{other}/+")), Transition::Stale),
            (Some("done".to_owned()), Transition::Stale),
            (Some(hex[..31].to_owned()), Transition::Stale),
            (None, Transition::Stale),
        ] {
            assert_eq!(
                fast_complete_answer(old.as_deref().map(str::as_bytes), token),
                expected,
                "{old:?}"
            );
        }
        let timeout = Duration::from_millis(500);
        assert!(fast_complete_allowed(Duration::from_secs(60), timeout));
        assert!(!fast_complete_allowed(
            Duration::from_millis(1_500),
            timeout
        ));
        assert!(fast_complete_allowed(Duration::from_millis(1_501), timeout));
        assert!(!fast_complete_allowed(Duration::ZERO, timeout));
        assert!(!fast_complete_allowed(Duration::MAX, Duration::MAX));
        let cmd = fast_complete_cmd("p:", "k", Duration::from_secs(7));
        let packed = String::from_utf8(cmd.get_packed_command()).unwrap();
        assert!(
            packed.contains("p:k") && packed.contains("done"),
            "{packed}"
        );
        assert!(packed.contains("XX") && packed.contains("GET") && packed.contains("7000"));
    }

    #[test]
    fn done_marker_is_never_a_token() {
        assert!(ClaimToken::from_hex("done").is_none());
        assert!(CLAIM.contains("'done'") && COMPLETE.contains("'done'"));
        assert_eq!(millis(Duration::ZERO), 1);
    }
}
