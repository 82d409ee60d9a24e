//! The live-state and queue interface shared by every backend.

use std::fmt;
use std::pin::Pin;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::Stream;

use crate::error::StoreError;

/// A version of a key in the versioned key-value space. Versions of one key start at 1
/// and grow by one on every successful [`LiveStore::put`].
pub type Version = u64;

/// A stream of pub/sub notices, as returned by [`LiveStore::subscribe`]. It ends only when the
/// store is dropped, never because a backend connection was lost (see [`Notice::Gap`]).
pub type Subscription = Pin<Box<dyn Stream<Item = Notice> + Send + 'static>>;

/// What a [`Subscription`] yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A payload published on the channel, unchanged, in publication order.
    Message(Bytes),
    /// Messages may have been missed since the previous notice: the backend connection was lost and
    /// has been re-established (and the channel subscribed again), or this subscriber fell more than
    /// [`SUBSCRIBER_BUFFER`] messages behind. Later messages are delivered again. A subscriber
    /// re-reads its source of truth (the record the messages are about); pub/sub never carries state
    /// that cannot be read back.
    Gap,
}

/// How many pub/sub messages one subscriber may fall behind before it gets a [`Notice::Gap`]
/// instead of the oldest of them (both backends).
pub const SUBSCRIBER_BUFFER: usize = 256;

/// One consumer group of a stream, as reported by [`LiveStore::groups`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    /// The group's name.
    pub name: String,
    /// Entries delivered to the group's consumers and not acknowledged yet.
    pub pending: u64,
    /// The smallest pending id, if any entry is pending.
    pub first_pending: Option<EntryId>,
    /// The id of the last entry delivered to the group ([`EntryId::ZERO`]: none yet).
    pub last_delivered: EntryId,
    /// Entries in the stream not yet delivered to the group, when the backend knows it (Redis 7
    /// reports it as long as no entry after the last delivered one was deleted).
    pub lag: Option<u64>,
}

impl GroupInfo {
    /// The oldest entry this group still needs: its first pending entry, else the entry after the
    /// last one delivered. Every entry before it has been delivered to the group and acknowledged.
    pub fn needs_from(&self) -> EntryId {
        match self.first_pending {
            Some(id) => id,
            None => self
                .last_delivered
                .successor()
                .unwrap_or(self.last_delivered),
        }
    }
}

/// Bounds on a stream's size for [`LiveStore::trim_consumed`], beyond which entries are removed even
/// if a consumer group still needs them (a group that stopped reading must not make the stream grow
/// without bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamCaps {
    /// At most this many entries are kept.
    pub max_len: u64,
    /// Entries older than this (by their id's time) are removed.
    pub max_age: Duration,
}

/// What [`LiveStore::trim_consumed`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Trimmed {
    /// Entries every consumer group had been given and had acknowledged.
    pub consumed: u64,
    /// Entries removed by the caps although some group still needed them.
    pub capped: u64,
}

/// The id of a stream entry: milliseconds since the Unix epoch and a sequence number
/// within that millisecond, exactly like a Redis stream id (`"1700000000000-3"`).
///
/// Ids of one stream are strictly increasing in append order, and compare in that order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntryId {
    /// Milliseconds since the Unix epoch at append time (never decreasing within a stream).
    pub ms: u64,
    /// Sequence number within `ms`, from 0.
    pub seq: u64,
}

impl EntryId {
    /// The smallest id; every entry comes after it.
    pub const ZERO: EntryId = EntryId { ms: 0, seq: 0 };

    /// Builds an id from its two parts.
    pub const fn new(ms: u64, seq: u64) -> Self {
        EntryId { ms, seq }
    }

    /// The smallest id greater than `self` (used for exclusive ranges).
    pub fn successor(self) -> Option<EntryId> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(EntryId { ms: self.ms, seq }),
            None => self.ms.checked_add(1).map(|ms| EntryId { ms, seq: 0 }),
        }
    }
}

impl fmt::Display for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// The text was not an entry id of the form `MS-SEQ`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a stream entry id (expected MS-SEQ): {0:?}")]
pub struct ParseEntryIdError(pub String);

impl FromStr for EntryId {
    type Err = ParseEntryIdError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let fail = || ParseEntryIdError(text.to_owned());
        let (ms, seq) = text.split_once('-').ok_or_else(fail)?;
        Ok(EntryId {
            ms: ms.parse().map_err(|_| fail())?,
            seq: seq.parse().map_err(|_| fail())?,
        })
    }
}

impl From<EntryId> for String {
    fn from(id: EntryId) -> String {
        id.to_string()
    }
}

/// One stream entry: its id and the opaque payload given to [`LiveStore::append`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Where the entry sits in its stream.
    pub id: EntryId,
    /// The payload bytes, unchanged.
    pub payload: Bytes,
}

/// A side effect of a winning compare-and-set ([`LiveStore::put_with`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Sets `member`'s time in schedule `set`, as [`LiveStore::schedule`].
    Schedule {
        set: String,
        member: String,
        at_unix_ms: u64,
    },
    /// Removes `member` from schedule `set`, as [`LiveStore::cancel`].
    Cancel { set: String, member: String },
    /// Publishes `payload` on `channel`, as [`LiveStore::publish`].
    Publish { channel: String, payload: Bytes },
}

/// What a consumer group has not been handed yet ([`LiveStore::backlog`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Entries after the group's last delivered one: never delivered to the group.
    pub waiting: u64,
    /// The oldest of them, if any (its `ms` is its append time, so `now - ms` is how long it waited).
    pub oldest: Option<EntryId>,
}

/// Where [`LiveStore::read_after`] starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFrom {
    /// Only entries appended after the call started (Redis `$`). Use it once to start
    /// tailing, then continue with `After(last id seen)` so nothing is missed in between.
    Latest,
    /// Entries with an id strictly greater than this one.
    After(EntryId),
}

/// Live state and queues: a versioned key-value space, leases, streams with consumer
/// groups, pub/sub, deadline schedules and rate counters.
///
/// Used as `Arc<dyn LiveStore>`; every replica of a service sees the same state when the
/// backend is Redis. All names (`key`, `stream`, `channel`, `set`) are free text chosen by
/// the caller; each kind lives in its own namespace (a stream and a key may share a name).
/// Payloads are opaque bytes: their schema (with a version field) is the caller's business.
#[async_trait]
pub trait LiveStore: Send + Sync + fmt::Debug {
    // ---- versioned key-value ----

    /// The value stored under `key` and its version, or `None` if absent or expired.
    async fn get(&self, key: &str) -> Result<Option<(Bytes, Version)>, StoreError>;

    /// Compare-and-set: stores `value` if the current version is `expected`
    /// (`None`: the key must not exist yet) and returns the new version.
    /// Otherwise fails with [`StoreError::Conflict`] and stores nothing.
    /// Of several writers racing with the same `expected`, exactly one wins.
    ///
    /// `ttl`: the key expires after this long (`None`: it never expires; a previous TTL is
    /// removed). A zero TTL is an [`StoreError::InvalidArgument`].
    async fn put(
        &self,
        key: &str,
        value: Bytes,
        expected: Option<Version>,
        ttl: Option<Duration>,
    ) -> Result<Version, StoreError> {
        self.put_with(key, value, expected, ttl, &[]).await
    }

    /// [`put`](LiveStore::put) and, only if the compare-and-set wins, `effects` in the same atomic
    /// step (one Lua script on Redis, one critical section in memory): no other client sees the new
    /// value without the effects, and a lost race or an error applies none of them. Effects apply in
    /// order; publications are delivered after the write. This is one round trip where `put`
    /// followed by `schedule`/`cancel`/`publish` would be four.
    ///
    /// Every schedule effect must be in `key`'s group ([`crate::keys`]: the set's hash tag for a
    /// pinned set, else the member's group), so that the step stays in one hash slot of a Redis
    /// Cluster: `put_with("game:{g7}", ..)` may schedule member `g7` of `game-deadlines`. Others are
    /// refused with [`StoreError::InvalidArgument`] on every backend, and nothing is written.
    async fn put_with(
        &self,
        key: &str,
        value: Bytes,
        expected: Option<Version>,
        ttl: Option<Duration>,
        effects: &[Effect],
    ) -> Result<Version, StoreError>;

    /// Removes `key`; returns whether it existed. A later `put(key, _, None, _)` starts
    /// again at version 1.
    async fn delete(&self, key: &str) -> Result<bool, StoreError>;

    /// Takes or renews the lease `key` for `owner` for `ttl`: returns `true` if the lease
    /// was free (or expired) or already held by `owner` (its TTL is then reset), `false`
    /// if another owner holds it.
    async fn lease(&self, key: &str, owner: &str, ttl: Duration) -> Result<bool, StoreError>;

    /// Releases the lease `key` if `owner` holds it; returns whether it did.
    async fn release(&self, key: &str, owner: &str) -> Result<bool, StoreError>;

    // ---- streams and consumer groups ----

    /// Appends `payload` to `stream` (creating it) and returns the new entry's id.
    async fn append(&self, stream: &str, payload: Bytes) -> Result<EntryId, StoreError>;

    /// Appends `payload` to `stream` unless `group` already has `max_waiting` entries it was never
    /// handed (the `waiting` of [`backlog`](LiveStore::backlog)): the new entry's id, or `None` when
    /// the queue is full and nothing was appended. The count and the append are one atomic step
    /// (one script on Redis, one critical section in memory), so a work queue's capacity check
    /// costs no round trip of its own and concurrent writers cannot pass the bound together. Fails
    /// with NotFound if the group does not exist.
    async fn append_bounded(
        &self,
        stream: &str,
        group: &str,
        max_waiting: u64,
        payload: Bytes,
    ) -> Result<Option<EntryId>, StoreError>;

    /// Creates consumer group `group` on `stream` (creating the stream), starting at the
    /// beginning of the stream. Idempotent: an existing group is left as it is.
    async fn ensure_group(&self, stream: &str, group: &str) -> Result<(), StoreError>;

    /// Delivers up to `max` entries never delivered to `group` before, to `consumer`
    /// (they become pending for it until acked). If none is available, waits up to `block`
    /// for one (`Duration::ZERO`: do not wait). Fails with NotFound if the group does not exist.
    async fn read_group(
        &self,
        stream: &str,
        group: &str,
        consumer: &str,
        max: usize,
        block: Duration,
    ) -> Result<Vec<Entry>, StoreError>;

    /// [`read_group`](LiveStore::read_group) over several streams in one call (one `XREADGROUP`):
    /// delivers up to `max` new entries of EACH listed stream that has some, tagged with the
    /// stream's index in `streams`; if none has any, waits up to `block` for an append to any of
    /// them. How a consumer of several queues waits for all of them at once, woken by the append
    /// itself. The streams must share one group ([`crate::keys`]: one hash tag, so that the call
    /// stays in one hash slot of a Redis Cluster); others are refused with
    /// [`StoreError::InvalidArgument`] on every backend.
    async fn read_groups(
        &self,
        streams: &[&str],
        group: &str,
        consumer: &str,
        max: usize,
        block: Duration,
    ) -> Result<Vec<(usize, Entry)>, StoreError>;

    /// Acknowledges entries of `group`; returns how many were pending.
    async fn ack(&self, stream: &str, group: &str, ids: &[EntryId]) -> Result<u64, StoreError>;

    /// Moves up to `max` entries of `group` that have been pending (with any consumer) for
    /// at least `min_idle` to `consumer` and returns them: how the work of a crashed
    /// consumer is taken over. Claimed entries count as freshly delivered.
    async fn claim_idle(
        &self,
        stream: &str,
        group: &str,
        consumer: &str,
        min_idle: Duration,
        max: usize,
    ) -> Result<Vec<Entry>, StoreError>;

    /// How many entries of `group` are delivered but not acknowledged.
    async fn pending_count(&self, stream: &str, group: &str) -> Result<u64, StoreError>;

    /// How many entries of `stream` were never delivered to `group`, and the oldest of them: a
    /// work queue's depth and oldest wait. Fails with NotFound if the group does not exist. Built on
    /// [`groups`](LiveStore::groups) and [`range`](LiveStore::range): the group's lag when the backend
    /// knows it, else the entries after its last delivered one are counted (a work queue's backlog is
    /// bounded by its writer).
    async fn backlog(&self, stream: &str, group: &str) -> Result<Backlog, StoreError> {
        let groups = self.groups(stream).await?;
        let Some(info) = groups.into_iter().find(|g| g.name == group) else {
            return Err(StoreError::not_found(format!(
                "consumer group {group:?} of stream {stream:?}"
            )));
        };
        let oldest = self
            .range(stream, Some(info.last_delivered), 1)
            .await?
            .first()
            .map(|entry| entry.id);
        let Some(first) = oldest else {
            return Ok(Backlog::default());
        };
        let waiting = match info.lag {
            Some(lag) => lag,
            None => {
                let mut count = 0u64;
                let mut after = Some(info.last_delivered);
                loop {
                    let page = self.range(stream, after, 1000).await?;
                    count += page.len() as u64;
                    match page.last() {
                        Some(last) if page.len() == 1000 => after = Some(last.id),
                        _ => break,
                    }
                }
                count
            }
        };
        Ok(Backlog {
            waiting,
            oldest: Some(first),
        })
    }

    /// Up to `max` entries with an id greater than `after` (`None`: from the start), in
    /// order. Does not wait. For history and catch-up.
    async fn range(
        &self,
        stream: &str,
        after: Option<EntryId>,
        max: usize,
    ) -> Result<Vec<Entry>, StoreError>;

    /// Tails `stream` without a consumer group: up to `max` entries after `from`, waiting
    /// up to `block` if there are none yet (`Duration::ZERO`: do not wait).
    async fn read_after(
        &self,
        stream: &str,
        from: ReadFrom,
        max: usize,
        block: Duration,
    ) -> Result<Vec<Entry>, StoreError>;

    /// The number of entries in `stream` (0 if it does not exist).
    async fn len(&self, stream: &str) -> Result<u64, StoreError>;

    /// Removes the oldest entries so that at most `keep_last` remain; returns how many
    /// were removed. Pending entries removed this way are dropped from their groups'
    /// pending lists by a later [`claim_idle`](LiveStore::claim_idle) that reaches them.
    async fn trim(&self, stream: &str, keep_last: u64) -> Result<u64, StoreError>;

    /// Removes every entry with an id smaller than `min_id`; returns how many were removed.
    /// Pending entries removed this way behave as with [`trim`](LiveStore::trim).
    async fn trim_before(&self, stream: &str, min_id: EntryId) -> Result<u64, StoreError>;

    /// The consumer groups of `stream`, by name (empty if the stream does not exist).
    async fn groups(&self, stream: &str) -> Result<Vec<GroupInfo>, StoreError>;

    /// Removes the entries that every consumer group of `stream` has been given and has
    /// acknowledged, then whatever exceeds `caps` (oldest first). A stream without groups is trimmed
    /// by the caps only (a group created later starts at the oldest entry kept). Not atomic across
    /// groups: a group created during the call may find fewer old entries, never a wrong one.
    async fn trim_consumed(&self, stream: &str, caps: StreamCaps) -> Result<Trimmed, StoreError> {
        let groups = self.groups(stream).await?;
        let consumed = match groups.iter().map(GroupInfo::needs_from).min() {
            Some(needed) if !groups.is_empty() => self.trim_before(stream, needed).await?,
            _ => 0,
        };
        let max_age_ms = u64::try_from(caps.max_age.as_millis()).unwrap_or(u64::MAX);
        let oldest_kept = EntryId::new(now_unix_ms().saturating_sub(max_age_ms), 0);
        let mut capped = self.trim_before(stream, oldest_kept).await?;
        capped += self.trim(stream, caps.max_len).await?;
        Ok(Trimmed { consumed, capped })
    }

    // ---- pub/sub ----

    /// Sends `payload` to every current subscriber of `channel` (fire and forget: a
    /// subscriber that is not listening now never sees it). Returns how many subscribed
    /// processes received it (each process shares one subscription per channel among its local
    /// subscribers): 0 means nobody listens.
    async fn publish(&self, channel: &str, payload: Bytes) -> Result<u64, StoreError>;

    /// Subscribes to `channel`. Every message published after this returns is delivered in
    /// order as a [`Notice::Message`], unless a [`Notice::Gap`] comes first (the connection was
    /// lost and re-established, or the subscriber fell behind): then re-read the source of truth.
    ///
    /// All subscriptions of one store (one process) share its backend resources: on Redis ONE
    /// pub/sub connection, fanned out in-process; a channel is subscribed on Redis while it has at
    /// least one local subscriber. A lost connection is re-established with a bounded, jittered
    /// exponential backoff and every channel subscribed again, then each subscriber gets one
    /// `Gap`. The stream does not end when the connection is lost; dropping it unsubscribes.
    async fn subscribe(&self, channel: &str) -> Result<Subscription, StoreError>;

    // ---- deadline schedule ----

    /// Schedules `member` of `set` at `at_unix_ms` (replacing an earlier schedule of it).
    async fn schedule(&self, set: &str, member: &str, at_unix_ms: u64) -> Result<(), StoreError>;

    /// Unschedules `member`; returns whether it was scheduled.
    async fn cancel(&self, set: &str, member: &str) -> Result<bool, StoreError>;

    /// Removes and returns up to `max` members due at or before `now_unix_ms`, earliest
    /// first. Each due member is handed to exactly one caller, however many call at once.
    async fn take_due(
        &self,
        set: &str,
        now_unix_ms: u64,
        max: usize,
    ) -> Result<Vec<String>, StoreError>;

    /// Like [`take_due`](LiveStore::take_due), but the members handed out stay scheduled, moved to
    /// `now_unix_ms + retry_in`: a caller that dies before it has dealt with a member (and
    /// rescheduled or cancelled it) does not lose it, it comes due again. Each due member is
    /// handed to exactly one caller until then.
    async fn claim_due(
        &self,
        set: &str,
        now_unix_ms: u64,
        max: usize,
        retry_in: Duration,
    ) -> Result<Vec<String>, StoreError>;

    /// The earliest scheduled member and its time, without removing it (to know how long
    /// to sleep).
    async fn next_due(&self, set: &str) -> Result<Option<(String, u64)>, StoreError>;

    /// How many members schedule `set` holds (due or not).
    async fn schedule_len(&self, set: &str) -> Result<u64, StoreError>;

    /// Up to `max` members of schedule `set` with their times, earliest first (ties by member), without
    /// removing them: how a small index (a matchmaking pool's seekers) is read in one round trip.
    async fn scheduled(&self, set: &str, max: usize) -> Result<Vec<(String, u64)>, StoreError>;

    // ---- rate limiting ----

    /// Counts one hit on `key` and returns the number of hits in the current fixed window
    /// (the window starts at the first hit and lasts `window`).
    async fn hit(&self, key: &str, window: Duration) -> Result<u64, StoreError>;
}

/// Rejects a zero TTL or window (Redis refuses `PX 0`; memory would expire instantly).
pub(crate) fn positive_ms(what: &str, duration: Duration) -> Result<u64, StoreError> {
    let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 {
        return Err(StoreError::InvalidArgument(format!(
            "{what} must be at least 1 ms"
        )));
    }
    Ok(ms)
}

/// Rejects a schedule effect of `put_with` outside the key's group (see [`crate::keys`]): on a Redis
/// Cluster it would be in another slot, so every backend refuses it.
pub(crate) fn check_effect_groups(key: &str, effects: &[Effect]) -> Result<(), StoreError> {
    let key_group = crate::keys::group(key);
    for effect in effects {
        let (set, member) = match effect {
            Effect::Schedule { set, member, .. } | Effect::Cancel { set, member } => (set, member),
            Effect::Publish { .. } => continue,
        };
        let effect_group = crate::keys::effect_group(set, member);
        if effect_group != key_group {
            return Err(StoreError::InvalidArgument(format!(
                "schedule {set:?} member {member:?} is in group {effect_group:?}, not in the group of key {key:?} ({key_group:?}): put_with writes one group"
            )));
        }
    }
    Ok(())
}

/// Checks that `streams` (at least one) share one group, as [`LiveStore::read_groups`] requires.
pub(crate) fn check_one_group(streams: &[&str]) -> Result<(), StoreError> {
    let Some(first) = streams.first() else {
        return Err(StoreError::InvalidArgument(
            "read_groups needs at least one stream".to_owned(),
        ));
    };
    let first_group = crate::keys::group(first);
    if let Some(other) = streams
        .iter()
        .find(|stream| crate::keys::group(stream) != first_group)
    {
        return Err(StoreError::InvalidArgument(format!(
            "streams {first:?} and {other:?} are in different groups: read_groups reads one group (give them one hash tag)"
        )));
    }
    Ok(())
}

/// Rejects `max == 0` reads (Redis treats COUNT 0 as "no limit").
pub(crate) fn positive_max(max: usize) -> Result<usize, StoreError> {
    if max == 0 {
        return Err(StoreError::InvalidArgument(
            "max must be at least 1".to_owned(),
        ));
    }
    Ok(max)
}

/// The current time in milliseconds since the Unix epoch.
pub fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
