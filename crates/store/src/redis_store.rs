//! [`RedisStore`]: the [`LiveStore`] backend shared by all replicas.
//!
//! Key names and the payload conventions are documented in [`crate::keys`].
//!
//! # Connections
//!
//! - Ordinary commands go through one [`ConnectionManager`] (a multiplexed connection that
//!   reconnects by itself), so they pipeline and never wait on each other.
//! - Blocking reads (`XREADGROUP`/`XREAD` with `BLOCK`) would stall every command queued
//!   behind them on a multiplexed connection, so each one borrows a dedicated connection
//!   from a small idle list (created on demand, dropped if the read fails or times out).
//! - Every [`subscribe`](LiveStore::subscribe) of the store (and of its clones) shares ONE pub/sub
//!   connection, fanned out in-process and re-established with backoff when lost (see
//!   [`crate::pubsub`]): a replica holds one pub/sub connection however many watchers it serves.
//!
//! # Atomicity
//!
//! Compare-and-set (with its effects, `put_with`), leases, `take_due` and rate counters are single Lua scripts, so they
//! are atomic on the server whatever the number of clients.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::streams::{StreamAutoClaimReply, StreamId, StreamRangeReply, StreamReadReply};
use redis::{AsyncConnectionConfig, Client, Script, Value};

use crate::error::StoreError;
use crate::keys::{KV_VALUE_FIELD, KV_VERSION_FIELD, Keys, STREAM_PAYLOAD_FIELD};
use crate::live::{
    Effect, Entry, EntryId, GroupInfo, LiveStore, ReadFrom, Subscription, Version, positive_max,
    positive_ms,
};
use crate::pubsub::{PubSubCounts, PubSubHub};

/// Timeout of ordinary (non-blocking) commands.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
/// Extra time a blocking read gets beyond its `BLOCK` before it counts as lost.
const BLOCKING_GRACE: Duration = Duration::from_secs(5);
/// Timeout of opening a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How many idle dedicated connections for blocking reads are kept.
const MAX_IDLE_BLOCKING: usize = 8;
/// Upper bound on `XAUTOCLAIM` round trips in one `claim_idle` call.
const MAX_CLAIM_ROUNDS: usize = 64;

/// Compare-and-set followed, if it wins, by effects. KEYS[1] = kv hash, KEYS[2..] = the schedule
/// sets of the schedule/cancel effects in order; ARGV[1] = value, ARGV[2] = expected version ('' =
/// must not exist), ARGV[3] = ttl in ms ('0' = none), then three arguments per effect: `s`, member, time (ZADD); `c`, member, ''
/// (ZREM); `p`, channel, payload (PUBLISH). Returns {1, new version} or {0, stored version or -1}.
fn put_with_script() -> Script {
    Script::new(&format!(
        r"
local current = redis.call('HGET', KEYS[1], '{version}')
if ARGV[2] == '' then
  if current then return {{0, tonumber(current)}} end
elseif current ~= ARGV[2] then
  if current then return {{0, tonumber(current)}} end
  return {{0, -1}}
end
local version = (current and tonumber(current) or 0) + 1
redis.call('HSET', KEYS[1], '{value}', ARGV[1], '{version}', tostring(version))
if ARGV[3] == '0' then
  redis.call('PERSIST', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
local k = 2
for i = 4, #ARGV, 3 do
  local kind = ARGV[i]
  if kind == 's' then
    redis.call('ZADD', KEYS[k], ARGV[i + 2], ARGV[i + 1])
    k = k + 1
  elseif kind == 'c' then
    redis.call('ZREM', KEYS[k], ARGV[i + 1])
    k = k + 1
  elseif kind == 'p' then
    redis.call('PUBLISH', ARGV[i + 1], ARGV[i + 2])
  end
end
return {{1, version}}
",
        version = KV_VERSION_FIELD,
        value = KV_VALUE_FIELD,
    ))
}

/// KEYS[1] = lease key; ARGV[1] = owner, ARGV[2] = ttl ms. Returns 1 if held by owner now.
const LEASE_SCRIPT: &str = r"
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if holder then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
";

/// KEYS[1] = lease key; ARGV[1] = owner. Returns 1 if it was released.
const RELEASE_SCRIPT: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
";

/// KEYS[1] = schedule zset; ARGV[1] = now (ms), ARGV[2] = max. Returns the removed members.
const TAKE_DUE_SCRIPT: &str = r"
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, member in ipairs(due) do
  redis.call('ZREM', KEYS[1], member)
end
return due
";

/// KEYS[1] = schedule zset; ARGV[1] = now (ms), ARGV[2] = max, ARGV[3] = retry time (ms). Returns
/// the due members, each moved to the retry time.
const CLAIM_DUE_SCRIPT: &str = r"
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, member in ipairs(due) do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[3], member)
end
return due
";

/// KEYS[1] = counter; ARGV[1] = window ms. Returns the count in the current window.
const HIT_SCRIPT: &str = r"
local count = redis.call('INCR', KEYS[1])
if redis.call('PTTL', KEYS[1]) < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return count
";

#[derive(Clone)]
struct Scripts {
    put_with: Script,
    lease: Script,
    release: Script,
    take_due: Script,
    claim_due: Script,
    hit: Script,
}

/// The Redis [`LiveStore`]. Cheap to clone (clones share connections).
#[derive(Clone)]
pub struct RedisStore {
    client: Client,
    manager: ConnectionManager,
    idle_blocking: Arc<Mutex<Vec<MultiplexedConnection>>>,
    pubsub: PubSubHub,
    keys: Keys,
    scripts: Arc<Scripts>,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.keys.prefix())
            .finish_non_exhaustive()
    }
}

fn timed_out(what: &str) -> StoreError {
    StoreError::Unavailable {
        backend: "redis",
        source: Box::new(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("{what} timed out"),
        )),
    }
}

/// `BLOCK` argument: Redis reads `0` as "forever", so round sub-millisecond waits up.
fn block_ms(block: Duration) -> u64 {
    u64::try_from(block.as_millis()).unwrap_or(u64::MAX).max(1)
}

fn parse_id(text: &str) -> Result<EntryId, StoreError> {
    text.parse()
        .map_err(|_| StoreError::internal("redis", format!("bad stream id {text:?}")))
}

fn to_entry(mut stream_id: StreamId) -> Result<Entry, StoreError> {
    let id = parse_id(&stream_id.id)?;
    let payload = match stream_id.map.remove(STREAM_PAYLOAD_FIELD) {
        Some(Value::BulkString(bytes)) => Bytes::from(bytes),
        Some(Value::SimpleString(text)) => Bytes::from(text.into_bytes()),
        _ => {
            // Written by something else than this crate: hand it over empty so the
            // reader's decoder rejects it (and acks it) instead of it blocking the group.
            tracing::warn!(%id, "stream entry without a payload field");
            Bytes::new()
        }
    };
    Ok(Entry { id, payload })
}

fn read_reply_entries(reply: Option<StreamReadReply>) -> Result<Vec<Entry>, StoreError> {
    let Some(reply) = reply else {
        return Ok(Vec::new());
    };
    reply
        .keys
        .into_iter()
        .flat_map(|key| key.ids)
        .map(to_entry)
        .collect()
}

fn is_server_error(err: &redis::RedisError) -> bool {
    err.code().is_some()
}

impl RedisStore {
    /// Connects to `url` (`redis://host:port/db`), naming every key under `prefix`
    /// (see [`crate::keys`]).
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, StoreError> {
        let client = Client::open(url).map_err(|err| {
            StoreError::InvalidArgument(format!("bad redis url: {}", err.detail().unwrap_or("")))
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(COMMAND_TIMEOUT))
            .set_number_of_retries(3);
        let manager = client.get_connection_manager_with_config(config).await?;
        Ok(RedisStore {
            pubsub: PubSubHub::start(client.clone()),
            client,
            manager,
            idle_blocking: Arc::new(Mutex::new(Vec::new())),
            keys: Keys::new(prefix),
            scripts: Arc::new(Scripts {
                put_with: put_with_script(),
                lease: Script::new(LEASE_SCRIPT),
                release: Script::new(RELEASE_SCRIPT),
                take_due: Script::new(TAKE_DUE_SCRIPT),
                claim_due: Script::new(CLAIM_DUE_SCRIPT),
                hit: Script::new(HIT_SCRIPT),
            }),
        })
    }

    /// The key names this store uses.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Counters of the shared pub/sub connection (connections opened and lost, channels and
    /// local subscribers now).
    pub fn pubsub_counts(&self) -> PubSubCounts {
        self.pubsub.counts()
    }

    async fn exists(&self, key: &str) -> Result<bool, StoreError> {
        let n: u64 = self.query(redis::cmd("EXISTS").arg(key)).await?;
        Ok(n > 0)
    }

    fn conn(&self) -> ConnectionManager {
        self.manager.clone()
    }

    async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, StoreError> {
        Ok(cmd.query_async(&mut self.conn()).await?)
    }

    async fn blocking_conn(&self) -> Result<MultiplexedConnection, StoreError> {
        let idle = self
            .idle_blocking
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop();
        if let Some(conn) = idle {
            return Ok(conn);
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(None);
        Ok(self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?)
    }

    fn return_blocking_conn(&self, conn: MultiplexedConnection) {
        let mut idle = self
            .idle_blocking
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if idle.len() < MAX_IDLE_BLOCKING {
            idle.push(conn);
        }
    }

    /// Runs a command that may block the connection for up to `block`, on a dedicated
    /// connection.
    async fn query_blocking<T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
        block: Duration,
    ) -> Result<T, StoreError> {
        let mut conn = self.blocking_conn().await?;
        match tokio::time::timeout(block + BLOCKING_GRACE, cmd.query_async::<T>(&mut conn)).await {
            Ok(Ok(value)) => {
                self.return_blocking_conn(conn);
                Ok(value)
            }
            Ok(Err(err)) => {
                if is_server_error(&err) {
                    self.return_blocking_conn(conn);
                }
                Err(err.into())
            }
            Err(_) => Err(timed_out("blocking stream read")),
        }
    }
}

#[async_trait]
impl LiveStore for RedisStore {
    async fn get(&self, key: &str) -> Result<Option<(Bytes, Version)>, StoreError> {
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(self.keys.kv(key))
            .arg(KV_VALUE_FIELD)
            .arg(KV_VERSION_FIELD);
        let (value, version): (Option<Vec<u8>>, Option<String>) = self.query(&cmd).await?;
        match (value, version) {
            (Some(value), Some(version)) => {
                let version = version.parse::<Version>().map_err(|_| {
                    StoreError::internal("redis", format!("bad version on key {key:?}"))
                })?;
                Ok(Some((Bytes::from(value), version)))
            }
            _ => Ok(None),
        }
    }

    async fn put_with(
        &self,
        key: &str,
        value: Bytes,
        expected: Option<Version>,
        ttl: Option<Duration>,
        effects: &[Effect],
    ) -> Result<Version, StoreError> {
        let ttl_ms = match ttl {
            Some(ttl) => positive_ms("ttl", ttl)?,
            None => 0,
        };
        let expected_arg = expected
            .map(|version| version.to_string())
            .unwrap_or_default();
        let mut invocation = self.scripts.put_with.key(self.keys.kv(key));
        invocation.arg(value.as_ref()).arg(expected_arg).arg(ttl_ms);
        for effect in effects {
            match effect {
                Effect::Schedule {
                    set,
                    member,
                    at_unix_ms,
                } => {
                    invocation
                        .key(self.keys.schedule(set))
                        .arg("s")
                        .arg(member.as_str())
                        .arg(*at_unix_ms);
                }
                Effect::Cancel { set, member } => {
                    invocation
                        .key(self.keys.schedule(set))
                        .arg("c")
                        .arg(member.as_str())
                        .arg("");
                }
                Effect::Publish { channel, payload } => {
                    invocation
                        .arg("p")
                        .arg(self.keys.channel(channel))
                        .arg(payload.as_ref());
                }
            }
        }
        let (won, version): (i64, i64) = invocation.invoke_async(&mut self.conn()).await?;
        if won == 1 {
            return Version::try_from(version)
                .map_err(|_| StoreError::internal("redis", "negative version"));
        }
        Err(StoreError::Conflict {
            key: key.to_owned(),
            expected,
            actual: Version::try_from(version).ok(),
        })
    }

    async fn delete(&self, key: &str) -> Result<bool, StoreError> {
        let n_deleted: u64 = self.query(redis::cmd("DEL").arg(self.keys.kv(key))).await?;
        Ok(n_deleted > 0)
    }

    async fn lease(&self, key: &str, owner: &str, ttl: Duration) -> Result<bool, StoreError> {
        let ttl_ms = positive_ms("lease ttl", ttl)?;
        let held: i64 = self
            .scripts
            .lease
            .key(self.keys.lease(key))
            .arg(owner)
            .arg(ttl_ms)
            .invoke_async(&mut self.conn())
            .await?;
        Ok(held == 1)
    }

    async fn release(&self, key: &str, owner: &str) -> Result<bool, StoreError> {
        let released: i64 = self
            .scripts
            .release
            .key(self.keys.lease(key))
            .arg(owner)
            .invoke_async(&mut self.conn())
            .await?;
        Ok(released == 1)
    }

    async fn append(&self, stream: &str, payload: Bytes) -> Result<EntryId, StoreError> {
        let mut cmd = redis::cmd("XADD");
        cmd.arg(self.keys.stream(stream))
            .arg("*")
            .arg(STREAM_PAYLOAD_FIELD)
            .arg(payload.as_ref());
        let id: String = self.query(&cmd).await?;
        parse_id(&id)
    }

    async fn ensure_group(&self, stream: &str, group: &str) -> Result<(), StoreError> {
        let mut cmd = redis::cmd("XGROUP");
        cmd.arg("CREATE")
            .arg(self.keys.stream(stream))
            .arg(group)
            .arg("0")
            .arg("MKSTREAM");
        match cmd.query_async::<()>(&mut self.conn()).await {
            Ok(()) => Ok(()),
            Err(err) if err.code() == Some("BUSYGROUP") => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    async fn read_group(
        &self,
        stream: &str,
        group: &str,
        consumer: &str,
        max: usize,
        block: Duration,
    ) -> Result<Vec<Entry>, StoreError> {
        positive_max(max)?;
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(group)
            .arg(consumer)
            .arg("COUNT")
            .arg(max);
        if !block.is_zero() {
            cmd.arg("BLOCK").arg(block_ms(block));
        }
        cmd.arg("STREAMS").arg(self.keys.stream(stream)).arg(">");
        let reply: Option<StreamReadReply> = if block.is_zero() {
            self.query(&cmd).await?
        } else {
            self.query_blocking(&cmd, block).await?
        };
        read_reply_entries(reply)
    }

    async fn ack(&self, stream: &str, group: &str, ids: &[EntryId]) -> Result<u64, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut cmd = redis::cmd("XACK");
        cmd.arg(self.keys.stream(stream)).arg(group);
        for id in ids {
            cmd.arg(id.to_string());
        }
        self.query(&cmd).await
    }

    async fn claim_idle(
        &self,
        stream: &str,
        group: &str,
        consumer: &str,
        min_idle: Duration,
        max: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        positive_max(max)?;
        let key = self.keys.stream(stream);
        let min_idle_ms = u64::try_from(min_idle.as_millis()).unwrap_or(u64::MAX);
        let mut cursor = "0-0".to_owned();
        let mut claimed = Vec::new();
        for _ in 0..MAX_CLAIM_ROUNDS {
            let mut cmd = redis::cmd("XAUTOCLAIM");
            cmd.arg(&key)
                .arg(group)
                .arg(consumer)
                .arg(min_idle_ms)
                .arg(&cursor)
                .arg("COUNT")
                .arg(max - claimed.len());
            let reply: StreamAutoClaimReply = self.query(&cmd).await?;
            for stream_id in reply.claimed {
                claimed.push(to_entry(stream_id)?);
            }
            cursor = reply.next_stream_id;
            if cursor == "0-0" || claimed.len() >= max {
                break;
            }
        }
        Ok(claimed)
    }

    async fn pending_count(&self, stream: &str, group: &str) -> Result<u64, StoreError> {
        let mut cmd = redis::cmd("XPENDING");
        cmd.arg(self.keys.stream(stream)).arg(group);
        let summary: Value = self.query(&cmd).await?;
        match summary {
            Value::Array(items) => match items.first() {
                Some(Value::Int(count)) => u64::try_from(*count)
                    .map_err(|_| StoreError::internal("redis", "negative pending count")),
                _ => Err(StoreError::internal("redis", "unexpected XPENDING reply")),
            },
            _ => Err(StoreError::internal("redis", "unexpected XPENDING reply")),
        }
    }

    async fn range(
        &self,
        stream: &str,
        after: Option<EntryId>,
        max: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        positive_max(max)?;
        let start = match after {
            None => "-".to_owned(),
            Some(id) => match id.successor() {
                Some(next) => next.to_string(),
                None => return Ok(Vec::new()),
            },
        };
        let mut cmd = redis::cmd("XRANGE");
        cmd.arg(self.keys.stream(stream))
            .arg(start)
            .arg("+")
            .arg("COUNT")
            .arg(max);
        let reply: StreamRangeReply = self.query(&cmd).await?;
        reply.ids.into_iter().map(to_entry).collect()
    }

    async fn read_after(
        &self,
        stream: &str,
        from: ReadFrom,
        max: usize,
        block: Duration,
    ) -> Result<Vec<Entry>, StoreError> {
        positive_max(max)?;
        let from_arg = match from {
            ReadFrom::Latest if block.is_zero() => return Ok(Vec::new()),
            ReadFrom::Latest => "$".to_owned(),
            ReadFrom::After(id) => id.to_string(),
        };
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT").arg(max);
        if !block.is_zero() {
            cmd.arg("BLOCK").arg(block_ms(block));
        }
        cmd.arg("STREAMS")
            .arg(self.keys.stream(stream))
            .arg(from_arg);
        let reply: Option<StreamReadReply> = if block.is_zero() {
            self.query(&cmd).await?
        } else {
            self.query_blocking(&cmd, block).await?
        };
        read_reply_entries(reply)
    }

    async fn len(&self, stream: &str) -> Result<u64, StoreError> {
        self.query(redis::cmd("XLEN").arg(self.keys.stream(stream)))
            .await
    }

    async fn trim(&self, stream: &str, keep_last: u64) -> Result<u64, StoreError> {
        let mut cmd = redis::cmd("XTRIM");
        cmd.arg(self.keys.stream(stream))
            .arg("MAXLEN")
            .arg(keep_last);
        self.query(&cmd).await
    }

    async fn trim_before(&self, stream: &str, min_id: EntryId) -> Result<u64, StoreError> {
        let mut cmd = redis::cmd("XTRIM");
        cmd.arg(self.keys.stream(stream))
            .arg("MINID")
            .arg(min_id.to_string());
        self.query(&cmd).await
    }

    async fn groups(&self, stream: &str) -> Result<Vec<GroupInfo>, StoreError> {
        let key = self.keys.stream(stream);
        let mut cmd = redis::cmd("XINFO");
        cmd.arg("GROUPS").arg(&key);
        let reply: Vec<HashMap<String, Value>> = match self.query(&cmd).await {
            Ok(reply) => reply,
            // XINFO on a missing key is an error ("no such key"), not an empty list.
            Err(StoreError::Internal { .. }) if !self.exists(&key).await? => return Ok(Vec::new()),
            Err(err) => return Err(err),
        };
        let mut groups = Vec::with_capacity(reply.len());
        for group in reply {
            let text = |field: &str| -> Option<String> {
                match group.get(field)? {
                    Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
                    Value::SimpleString(text) => Some(text.clone()),
                    _ => None,
                }
            };
            let int = |field: &str| -> Option<u64> {
                match group.get(field)? {
                    Value::Int(n) => u64::try_from(*n).ok(),
                    _ => None,
                }
            };
            let name = text("name")
                .ok_or_else(|| StoreError::internal("redis", "XINFO GROUPS without a name"))?;
            let last_delivered = parse_id(&text("last-delivered-id").unwrap_or_default())?;
            let pending = int("pending").unwrap_or(0);
            let first_pending = if pending == 0 {
                None
            } else {
                let mut cmd = redis::cmd("XPENDING");
                cmd.arg(&key).arg(&name);
                match self.query::<Value>(&cmd).await? {
                    Value::Array(items) => match items.get(1) {
                        Some(Value::BulkString(id)) => {
                            Some(parse_id(&String::from_utf8_lossy(id))?)
                        }
                        _ => None,
                    },
                    _ => None,
                }
            };
            groups.push(GroupInfo {
                name,
                pending,
                first_pending,
                last_delivered,
                lag: int("lag"),
            });
        }
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(groups)
    }

    async fn publish(&self, channel: &str, payload: Bytes) -> Result<u64, StoreError> {
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(self.keys.channel(channel)).arg(payload.as_ref());
        self.query(&cmd).await
    }

    async fn subscribe(&self, channel: &str) -> Result<Subscription, StoreError> {
        self.pubsub.subscribe(self.keys.channel(channel)).await
    }

    async fn schedule(&self, set: &str, member: &str, at_unix_ms: u64) -> Result<(), StoreError> {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg(self.keys.schedule(set)).arg(at_unix_ms).arg(member);
        self.query::<()>(&cmd).await
    }

    async fn cancel(&self, set: &str, member: &str) -> Result<bool, StoreError> {
        let mut cmd = redis::cmd("ZREM");
        cmd.arg(self.keys.schedule(set)).arg(member);
        let n_removed: u64 = self.query(&cmd).await?;
        Ok(n_removed > 0)
    }

    async fn take_due(
        &self,
        set: &str,
        now_unix_ms: u64,
        max: usize,
    ) -> Result<Vec<String>, StoreError> {
        positive_max(max)?;
        Ok(self
            .scripts
            .take_due
            .key(self.keys.schedule(set))
            .arg(now_unix_ms)
            .arg(max)
            .invoke_async(&mut self.conn())
            .await?)
    }

    async fn claim_due(
        &self,
        set: &str,
        now_unix_ms: u64,
        max: usize,
        retry_in: Duration,
    ) -> Result<Vec<String>, StoreError> {
        positive_max(max)?;
        let retry_at = now_unix_ms.saturating_add(positive_ms("retry_in", retry_in)?);
        Ok(self
            .scripts
            .claim_due
            .key(self.keys.schedule(set))
            .arg(now_unix_ms)
            .arg(max)
            .arg(retry_at)
            .invoke_async(&mut self.conn())
            .await?)
    }

    async fn next_due(&self, set: &str) -> Result<Option<(String, u64)>, StoreError> {
        let mut cmd = redis::cmd("ZRANGE");
        cmd.arg(self.keys.schedule(set))
            .arg(0)
            .arg(0)
            .arg("WITHSCORES");
        let first: Vec<(String, f64)> = self.query(&cmd).await?;
        Ok(first.into_iter().next().map(|(member, score)| {
            // Scores are the integers given to `schedule` (exact below 2^53).
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let at = score.max(0.0) as u64;
            (member, at)
        }))
    }

    async fn schedule_len(&self, set: &str) -> Result<u64, StoreError> {
        self.query(redis::cmd("ZCARD").arg(self.keys.schedule(set)))
            .await
    }

    async fn scheduled(&self, set: &str, max: usize) -> Result<Vec<(String, u64)>, StoreError> {
        let max = positive_max(max)?;
        let mut cmd = redis::cmd("ZRANGE");
        cmd.arg(self.keys.schedule(set))
            .arg(0)
            .arg(max.saturating_sub(1))
            .arg("WITHSCORES");
        let members: Vec<(String, f64)> = self.query(&cmd).await?;
        Ok(members
            .into_iter()
            .map(|(member, score)| {
                // Scores are the integers given to `schedule` (exact below 2^53).
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let at = score.max(0.0) as u64;
                (member, at)
            })
            .collect())
    }

    async fn hit(&self, key: &str, window: Duration) -> Result<u64, StoreError> {
        let window_ms = positive_ms("rate window", window)?;
        Ok(self
            .scripts
            .hit
            .key(self.keys.rate(key))
            .arg(window_ms)
            .invoke_async(&mut self.conn())
            .await?)
    }
}
