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
//!
//! # Redis Cluster
//!
//! [`RedisStore::connect_cluster`] (URL `redis+cluster://host:port,host:port/`) talks to a Redis
//! Cluster through the `redis` crate's cluster client, which routes each command to the primary of
//! its key's slot and follows MOVED/ASK redirections. The key layout is [`Keys::clustered`]: every
//! multi-key script touches the names of one group only, which are in one slot, so each script runs
//! whole on one primary. A spread schedule is one sorted set per bucket: `schedule`/`cancel` touch
//! the member's shard; the reads of the whole schedule (`take_due`, `claim_due`, `next_due`,
//! `schedule_len`, `scheduled`) query every shard at once and merge, and `take_due`/`claim_due` then
//! take the earliest members with one script per shard that removes (or moves) a member only if it
//! is still due, so each due member still goes to exactly one caller. Blocking reads get dedicated
//! cluster connections; pub/sub uses one plain connection to a node (a cluster delivers every
//! publication to every node), moving to the next seed node when it is lost.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::future::{join_all, try_join_all};
use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::streams::{StreamAutoClaimReply, StreamId, StreamRangeReply, StreamReadReply};
use redis::{AsyncConnectionConfig, Client, Cmd, Pipeline, RedisFuture, Script, Value};

use crate::error::StoreError;
use crate::keys::{KV_VALUE_FIELD, KV_VERSION_FIELD, Keys, STREAM_PAYLOAD_FIELD};
use crate::live::{
    Effect, Entry, EntryId, GroupInfo, LiveStore, ReadFrom, Subscription, Version,
    check_effect_groups, check_one_group, positive_max, positive_ms,
};
use crate::pubsub::{PubSubCounts, PubSubHub};

/// Timeout of ordinary (non-blocking) commands.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
/// Extra time a blocking read gets beyond its `BLOCK` before it counts as lost.
const BLOCKING_GRACE: Duration = Duration::from_secs(5);
/// Timeout of opening a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How many idle dedicated connections for blocking reads are kept (one per idle analysis worker
/// slot, each blocked reading its queue, and one per referee or feed tailing a stream).
const MAX_IDLE_BLOCKING: usize = 32;
/// Upper bound on `XAUTOCLAIM` round trips in one `claim_idle` call.
const MAX_CLAIM_ROUNDS: usize = 64;
/// Most rounds of a spread schedule's `take_due`/`claim_due` (a round is repeated when some of
/// its picks went to other callers).
const MAX_TAKE_ROUNDS: usize = 8;
/// Response timeout of the cluster connections of blocking reads: longer than any `BLOCK`
/// (`query_blocking` bounds each read by its own `BLOCK` plus [`BLOCKING_GRACE`]).
const BLOCKING_RESPONSE_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

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

/// A spread schedule's second step: KEYS[1] = one shard; ARGV[1] = now (ms), ARGV[2] = '' to remove
/// the members, else the retry time to move them to; ARGV[3..] = members picked from the shard.
/// Returns the picked members that were still due (each handed to this caller only).
const TAKE_PICKED_SCRIPT: &str = r"
local taken = {}
for i = 3, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) <= tonumber(ARGV[1]) then
    if ARGV[2] == '' then
      redis.call('ZREM', KEYS[1], ARGV[i])
    else
      redis.call('ZADD', KEYS[1], 'XX', ARGV[2], ARGV[i])
    end
    taken[#taken + 1] = ARGV[i]
  end
end
return taken
";

/// KEYS[1] = stream; ARGV[1] = group, ARGV[2] = most entries waiting (never delivered to the group),
/// ARGV[3] = payload field, ARGV[4] = payload. Appends unless that many wait: returns the new entry's
/// id, 0 when full, -1 when the stream or the group does not exist. The group's lag is Redis' own
/// count; when Redis cannot tell it (entries deleted), the entries after the last delivered one are
/// counted, at most ARGV[2] of them.
const APPEND_BOUNDED_SCRIPT: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local max = tonumber(ARGV[2])
local found, lag, last = false, false, nil
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local info = {}
  for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
  if info['name'] == ARGV[1] then
    found, lag, last = true, info['lag'], info['last-delivered-id']
  end
end
if not found then return -1 end
if max <= 0 then return 0 end
if type(lag) ~= 'number' then
  lag = #redis.call('XRANGE', KEYS[1], '(' .. last, '+', 'COUNT', max)
end
if lag >= max then return 0 end
return redis.call('XADD', KEYS[1], '*', ARGV[3], ARGV[4])
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
    take_picked: Script,
    hit: Script,
    append_bounded: Script,
}

/// A connection of either kind; commands and scripts run on it the same way.
#[derive(Clone)]
enum Conn {
    /// One server, through the reconnecting manager.
    Manager(ConnectionManager),
    /// One server, a dedicated connection (blocking reads).
    Single(MultiplexedConnection),
    /// A Redis Cluster: a connection to every primary, commands routed by slot.
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Manager(conn) => conn.req_packed_command(cmd),
            Conn::Single(conn) => conn.req_packed_command(cmd),
            Conn::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Manager(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Manager(conn) => conn.get_db(),
            Conn::Single(conn) => conn.get_db(),
            Conn::Cluster(conn) => conn.get_db(),
        }
    }
}

/// Where dedicated connections for blocking reads come from.
#[derive(Clone)]
enum Dialer {
    Single(Client),
    Cluster(Box<ClusterClient>),
}

impl Dialer {
    async fn dial(&self) -> Result<Conn, StoreError> {
        match self {
            Dialer::Single(client) => {
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(CONNECT_TIMEOUT))
                    .set_response_timeout(None);
                Ok(Conn::Single(
                    client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await?,
                ))
            }
            Dialer::Cluster(client) => Ok(Conn::Cluster(client.get_async_connection().await?)),
        }
    }
}

/// The Redis [`LiveStore`]. Cheap to clone (clones share connections).
#[derive(Clone)]
pub struct RedisStore {
    dialer: Dialer,
    conn: Conn,
    /// On a cluster: a connection to the first node, where this store's pub/sub connection is while
    /// that node is up, for `publish` (see there). None on one server.
    publisher: Option<ConnectionManager>,
    idle_blocking: Arc<Mutex<Vec<Conn>>>,
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

/// A schedule score as the integer milliseconds given to `schedule` (exact below 2^53).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn score_ms(score: f64) -> u64 {
    score.max(0.0) as u64
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
        Ok(RedisStore::assemble(
            Dialer::Single(client.clone()),
            Conn::Manager(manager),
            None,
            PubSubHub::start(vec![client]),
            Keys::new(prefix),
        ))
    }

    /// Connects to the Redis Cluster that `nodes` (`redis://host:port/`, one or more of its
    /// primaries: the client discovers the others) belong to, naming every key under `prefix` in the
    /// clustered layout ([`Keys::clustered`]).
    pub async fn connect_cluster(nodes: &[String], prefix: &str) -> Result<Self, StoreError> {
        let keys = Keys::clustered(prefix).map_err(StoreError::InvalidArgument)?;
        if nodes.is_empty() {
            return Err(StoreError::InvalidArgument(
                "a redis cluster url names at least one node".to_owned(),
            ));
        }
        let bad_url = |err: redis::RedisError| {
            StoreError::InvalidArgument(format!(
                "bad redis cluster url: {}",
                err.detail().unwrap_or("")
            ))
        };
        let client = ClusterClient::builder(nodes.iter().map(String::as_str))
            .connection_timeout(CONNECT_TIMEOUT)
            .response_timeout(COMMAND_TIMEOUT)
            .retries(3)
            .build()
            .map_err(bad_url)?;
        // Blocking reads wait up to their BLOCK (bounded by `query_blocking`'s own timeout).
        let blocking = ClusterClient::builder(nodes.iter().map(String::as_str))
            .connection_timeout(CONNECT_TIMEOUT)
            .response_timeout(BLOCKING_RESPONSE_TIMEOUT)
            .retries(1)
            .build()
            .map_err(bad_url)?;
        let conn = client.get_async_connection().await?;
        let pubsub_clients = nodes
            .iter()
            .map(|node| Client::open(node.as_str()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad_url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(COMMAND_TIMEOUT))
            .set_number_of_retries(1);
        // Without the first node now, publications go through the cluster connection.
        let publisher = pubsub_clients[0]
            .get_connection_manager_with_config(config)
            .await
            .ok();
        Ok(RedisStore::assemble(
            Dialer::Cluster(Box::new(blocking)),
            Conn::Cluster(conn),
            publisher,
            PubSubHub::start(pubsub_clients),
            keys,
        ))
    }

    fn assemble(
        dialer: Dialer,
        conn: Conn,
        publisher: Option<ConnectionManager>,
        pubsub: PubSubHub,
        keys: Keys,
    ) -> Self {
        RedisStore {
            dialer,
            conn,
            publisher,
            idle_blocking: Arc::new(Mutex::new(Vec::new())),
            pubsub,
            keys,
            scripts: Arc::new(Scripts {
                put_with: put_with_script(),
                lease: Script::new(LEASE_SCRIPT),
                release: Script::new(RELEASE_SCRIPT),
                take_due: Script::new(TAKE_DUE_SCRIPT),
                claim_due: Script::new(CLAIM_DUE_SCRIPT),
                take_picked: Script::new(TAKE_PICKED_SCRIPT),
                hit: Script::new(HIT_SCRIPT),
                append_bounded: Script::new(APPEND_BOUNDED_SCRIPT),
            }),
        }
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

    fn conn(&self) -> Conn {
        self.conn.clone()
    }

    async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, StoreError> {
        Ok(cmd.query_async(&mut self.conn()).await?)
    }

    async fn blocking_conn(&self) -> Result<Conn, StoreError> {
        let idle = self
            .idle_blocking
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop();
        if let Some(conn) = idle {
            return Ok(conn);
        }
        self.dialer.dial().await
    }

    fn return_blocking_conn(&self, conn: Conn) {
        let mut idle = self
            .idle_blocking
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if idle.len() < MAX_IDLE_BLOCKING {
            idle.push(conn);
        }
    }

    /// The first `max` members of every shard of schedule `set` with their times, merged: the
    /// first `max` of the whole schedule, earliest first (ties by member, as Redis orders them).
    async fn range_shards(&self, set: &str, max: usize) -> Result<Vec<(String, u64)>, StoreError> {
        let shards = try_join_all(
            self.keys
                .schedule_keys(set)
                .into_iter()
                .map(|key| async move {
                    let mut cmd = redis::cmd("ZRANGE");
                    cmd.arg(key)
                        .arg(0)
                        .arg(max.saturating_sub(1))
                        .arg("WITHSCORES");
                    self.query::<Vec<(String, f64)>>(&cmd).await
                }),
        )
        .await?;
        let mut members: Vec<(String, u64)> = shards
            .into_iter()
            .flatten()
            .map(|(member, score)| (member, score_ms(score)))
            .collect();
        members.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        members.truncate(max);
        Ok(members)
    }

    /// `take_due` (`retry_at` None) or `claim_due` over the shards of a spread schedule: the due
    /// members of every shard are read at once, the earliest `max` of them picked, then taken with
    /// one script per shard that skips any member another caller took or moved meanwhile.
    async fn take_from_shards(
        &self,
        shards: &[String],
        now_unix_ms: u64,
        max: usize,
        retry_at: Option<u64>,
    ) -> Result<Vec<String>, StoreError> {
        // Picks that went to other callers are made up for by another round (bounded), so that, as
        // with one sorted set, a caller gets `max` members whenever that many are due and fewer
        // only when no more are.
        let mut got: Vec<String> = Vec::new();
        for _ in 0..MAX_TAKE_ROUNDS {
            let wanted = max - got.len();
            let (n_picked, taken) = match self
                .take_round(shards, now_unix_ms, wanted, retry_at)
                .await
            {
                Ok(round) => round,
                // Members already taken are this caller's: they are handed out, not lost.
                Err(err) if !got.is_empty() => {
                    tracing::warn!(error = %err, "a later schedule round failed; handing out what was taken");
                    return Ok(got);
                }
                Err(err) => return Err(err),
            };
            let all_taken = taken.len() == n_picked;
            got.extend(taken);
            if n_picked == 0 || all_taken || got.len() >= max {
                break;
            }
        }
        Ok(got)
    }

    /// One round of [`take_from_shards`](Self::take_from_shards): how many members were picked,
    /// and those this caller got.
    async fn take_round(
        &self,
        shards: &[String],
        now_unix_ms: u64,
        max: usize,
        retry_at: Option<u64>,
    ) -> Result<(usize, Vec<String>), StoreError> {
        let due = try_join_all(shards.iter().map(|key| async move {
            let mut cmd = redis::cmd("ZRANGEBYSCORE");
            cmd.arg(key)
                .arg("-inf")
                .arg(now_unix_ms)
                .arg("WITHSCORES")
                .arg("LIMIT")
                .arg(0)
                .arg(max);
            self.query::<Vec<(String, f64)>>(&cmd).await
        }))
        .await?;
        let mut picked: Vec<(u64, String, usize)> = due
            .into_iter()
            .enumerate()
            .flat_map(|(shard, members)| {
                members
                    .into_iter()
                    .map(move |(member, score)| (score_ms(score), member, shard))
            })
            .collect();
        if picked.is_empty() {
            return Ok((0, Vec::new()));
        }
        picked.sort();
        picked.truncate(max);
        let mut per_shard: Vec<Vec<&str>> = vec![Vec::new(); shards.len()];
        for (_, member, shard) in &picked {
            per_shard[*shard].push(member);
        }
        let retry_arg = retry_at.map(|at| at.to_string()).unwrap_or_default();
        // Not `try_join_all`: members a shard's script took are this caller's even if another
        // shard's failed, and must be handed out (take_due removed them).
        let results = join_all(
            per_shard
                .iter()
                .enumerate()
                .filter(|(_, members)| !members.is_empty())
                .map(|(shard, members)| {
                    let mut invocation = self.scripts.take_picked.key(&shards[shard]);
                    invocation.arg(now_unix_ms).arg(&retry_arg);
                    for member in members {
                        invocation.arg(*member);
                    }
                    async move {
                        let taken: Vec<String> = invocation.invoke_async(&mut self.conn()).await?;
                        Ok::<_, StoreError>(taken)
                    }
                }),
        )
        .await;
        let mut taken = std::collections::HashSet::new();
        let mut failure = None;
        for result in results {
            match result {
                Ok(members) => taken.extend(members),
                Err(err) => failure = Some(err),
            }
        }
        if let Some(err) = failure {
            if taken.is_empty() {
                return Err(err);
            }
            tracing::warn!(error = %err, "a schedule shard failed; handing out what the others gave");
        }
        let n_picked = picked.len();
        Ok((
            n_picked,
            picked
                .into_iter()
                .map(|(_, member, _)| member)
                .filter(|member| taken.contains(member))
                .collect(),
        ))
    }

    /// `XREADGROUP` of new entries (`>`) of the streams named (full key names), blocking up to
    /// `block` (zero: not at all) on a dedicated connection.
    async fn xreadgroup(
        &self,
        names: &[String],
        group: &str,
        consumer: &str,
        max: usize,
        block: Duration,
    ) -> Result<Option<StreamReadReply>, StoreError> {
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(group)
            .arg(consumer)
            .arg("COUNT")
            .arg(max);
        if !block.is_zero() {
            cmd.arg("BLOCK").arg(block_ms(block));
        }
        cmd.arg("STREAMS").arg(names);
        for _ in names {
            cmd.arg(">");
        }
        if block.is_zero() {
            self.query(&cmd).await
        } else {
            self.query_blocking(&cmd, block).await
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
        check_effect_groups(key, effects)?;
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
                        .key(self.keys.schedule(set, member))
                        .arg("s")
                        .arg(member.as_str())
                        .arg(*at_unix_ms);
                }
                Effect::Cancel { set, member } => {
                    invocation
                        .key(self.keys.schedule(set, member))
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

    async fn append_bounded(
        &self,
        stream: &str,
        group: &str,
        max_waiting: u64,
        payload: Bytes,
    ) -> Result<Option<EntryId>, StoreError> {
        let reply: Value = self
            .scripts
            .append_bounded
            .key(self.keys.stream(stream))
            .arg(group)
            .arg(max_waiting)
            .arg(STREAM_PAYLOAD_FIELD)
            .arg(payload.as_ref())
            .invoke_async(&mut self.conn())
            .await?;
        match reply {
            Value::Int(0) => Ok(None),
            Value::Int(_) => Err(StoreError::not_found(format!(
                "consumer group {group:?} of stream {stream:?}"
            ))),
            Value::BulkString(id) => parse_id(&String::from_utf8_lossy(&id)).map(Some),
            Value::SimpleString(id) => parse_id(&id).map(Some),
            other => Err(StoreError::internal(
                "redis",
                format!("bounded append answered {other:?}"),
            )),
        }
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
        let names = [self.keys.stream(stream)];
        let reply = self.xreadgroup(&names, group, consumer, max, block).await?;
        read_reply_entries(reply)
    }

    async fn read_groups(
        &self,
        streams: &[&str],
        group: &str,
        consumer: &str,
        max: usize,
        block: Duration,
    ) -> Result<Vec<(usize, Entry)>, StoreError> {
        positive_max(max)?;
        check_one_group(streams)?;
        let names: Vec<String> = streams.iter().map(|s| self.keys.stream(s)).collect();
        let Some(reply) = self.xreadgroup(&names, group, consumer, max, block).await? else {
            return Ok(Vec::new());
        };
        let mut delivered = Vec::new();
        for key in reply.keys {
            let Some(index) = names.iter().position(|name| *name == key.key) else {
                return Err(StoreError::internal(
                    "redis",
                    format!(
                        "XREADGROUP answered for a stream not asked for: {}",
                        key.key
                    ),
                ));
            };
            for id in key.ids {
                delivered.push((index, to_entry(id)?));
            }
        }
        Ok(delivered)
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

    /// On a cluster, a publication reaches the subscribers of every node (the cluster bus carries it),
    /// but its count is of the subscribers connected to the node that took it; it goes to the first
    /// node of the URL, where every store's pub/sub connection is while that node is up, so the count
    /// means what it means on one server. If that node is unreachable, it goes through the cluster
    /// connection (delivered all the same; the count may then be low).
    async fn publish(&self, channel: &str, payload: Bytes) -> Result<u64, StoreError> {
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(self.keys.channel(channel)).arg(payload.as_ref());
        if let Some(publisher) = &self.publisher
            && let Ok(count) = cmd.query_async::<u64>(&mut publisher.clone()).await
        {
            return Ok(count);
        }
        self.query(&cmd).await
    }

    async fn subscribe(&self, channel: &str) -> Result<Subscription, StoreError> {
        self.pubsub.subscribe(self.keys.channel(channel)).await
    }

    async fn schedule(&self, set: &str, member: &str, at_unix_ms: u64) -> Result<(), StoreError> {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg(self.keys.schedule(set, member))
            .arg(at_unix_ms)
            .arg(member);
        self.query::<()>(&cmd).await
    }

    async fn cancel(&self, set: &str, member: &str) -> Result<bool, StoreError> {
        let mut cmd = redis::cmd("ZREM");
        cmd.arg(self.keys.schedule(set, member)).arg(member);
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
        let shards = self.keys.schedule_keys(set);
        if let [key] = shards.as_slice() {
            return Ok(self
                .scripts
                .take_due
                .key(key)
                .arg(now_unix_ms)
                .arg(max)
                .invoke_async(&mut self.conn())
                .await?);
        }
        self.take_from_shards(&shards, now_unix_ms, max, None).await
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
        let shards = self.keys.schedule_keys(set);
        if let [key] = shards.as_slice() {
            return Ok(self
                .scripts
                .claim_due
                .key(key)
                .arg(now_unix_ms)
                .arg(max)
                .arg(retry_at)
                .invoke_async(&mut self.conn())
                .await?);
        }
        self.take_from_shards(&shards, now_unix_ms, max, Some(retry_at))
            .await
    }

    async fn next_due(&self, set: &str) -> Result<Option<(String, u64)>, StoreError> {
        let firsts = self.range_shards(set, 1).await?;
        Ok(firsts.into_iter().next())
    }

    async fn schedule_len(&self, set: &str) -> Result<u64, StoreError> {
        let counts = try_join_all(
            self.keys
                .schedule_keys(set)
                .into_iter()
                .map(|key| async move { self.query::<u64>(redis::cmd("ZCARD").arg(key)).await }),
        )
        .await?;
        Ok(counts.into_iter().sum())
    }

    async fn scheduled(&self, set: &str, max: usize) -> Result<Vec<(String, u64)>, StoreError> {
        let max = positive_max(max)?;
        self.range_shards(set, max).await
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
