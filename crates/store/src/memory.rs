//! [`MemoryStore`]: the in-process backend of the embedded (one-process) mode.
//!
//! All state sits behind one `std::sync::Mutex` (critical sections are short and never
//! await). Blocking stream reads wait on a per-stream `tokio::sync::Notify` that every
//! append wakes; pub/sub uses one `tokio::sync::broadcast` channel per channel name (a subscriber
//! that falls [`SUBSCRIBER_BUFFER`] messages behind gets a [`Notice::Gap`], as on Redis).
//! Expiry (TTLs, leases, rate windows) is checked lazily when a key is touched.
//! Nothing is persisted: a restart loses everything, as with a Redis without persistence.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::{Notify, broadcast};

use crate::error::StoreError;
use crate::live::{
    Effect, Entry, EntryId, GroupInfo, LiveStore, Notice, ReadFrom, SUBSCRIBER_BUFFER,
    Subscription, Version, check_effect_groups, check_one_group, now_unix_ms, positive_max,
    positive_ms,
};

/// The in-process [`LiveStore`]. Cheap to clone (clones share the state).
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    kv: HashMap<String, KvValue>,
    leases: HashMap<String, (String, Instant)>,
    streams: HashMap<String, StreamState>,
    channels: HashMap<String, broadcast::Sender<Notice>>,
    schedules: HashMap<String, Schedule>,
    rates: HashMap<String, (u64, Instant)>,
    /// Writes since expired keys, leases and rate counters were last swept away.
    writes_since_sweep: u32,
}

/// Every this many writes, expired entries are removed (they are otherwise only removed
/// when touched), so keys written once and never read again do not pile up.
const SWEEP_EVERY: u32 = 4096;

impl State {
    fn count_write(&mut self, now: Instant) {
        self.writes_since_sweep += 1;
        if self.writes_since_sweep < SWEEP_EVERY {
            return;
        }
        self.writes_since_sweep = 0;
        self.kv.retain(|_, found| !expired(found.expires_at, now));
        self.leases.retain(|_, (_, until)| *until > now);
        self.rates.retain(|_, (_, window_end)| *window_end > now);
    }
}

#[derive(Debug)]
struct KvValue {
    value: Bytes,
    version: Version,
    expires_at: Option<Instant>,
}

#[derive(Debug, Default)]
struct StreamState {
    entries: BTreeMap<EntryId, Bytes>,
    last_id: EntryId,
    groups: HashMap<String, Group>,
    appended: Arc<Notify>,
}

#[derive(Debug, Default)]
struct Group {
    last_delivered: EntryId,
    /// Delivered but not acknowledged: id -> (consumer, delivery time).
    pending: BTreeMap<EntryId, (String, Instant)>,
}

#[derive(Debug, Default)]
struct Schedule {
    by_time: BTreeSet<(u64, String)>,
    by_member: HashMap<String, u64>,
}

fn expired(expires_at: Option<Instant>, now: Instant) -> bool {
    expires_at.is_some_and(|at| at <= now)
}

fn entries_after(stream: Option<&StreamState>, after: Option<EntryId>, max: usize) -> Vec<Entry> {
    let Some(stream) = stream else {
        return Vec::new();
    };
    let start = match after {
        None => Some(EntryId::ZERO),
        Some(id) => id.successor(),
    };
    let Some(start) = start else {
        return Vec::new();
    };
    stream
        .entries
        .range(start..)
        .take(max)
        .map(|(id, payload)| Entry {
            id: *id,
            payload: payload.clone(),
        })
        .collect()
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps half-updated in a way that
        // breaks an invariant worse than the panic itself; keep serving.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn notifier(&self, stream: &str) -> Arc<Notify> {
        let mut state = self.lock();
        state
            .streams
            .entry(stream.to_owned())
            .or_default()
            .appended
            .clone()
    }

    /// Runs `attempt` until it yields entries or `block` has passed, waking on appends to any of
    /// `streams`. The waiters are registered before each attempt, so an append between the
    /// attempt and the wait is not missed.
    async fn blocking<T, F>(
        &self,
        streams: &[&str],
        block: Duration,
        mut attempt: F,
    ) -> Result<Vec<T>, StoreError>
    where
        F: FnMut(&mut State) -> Result<Vec<T>, StoreError>,
    {
        let deadline = tokio::time::Instant::now() + block;
        loop {
            let notifiers: Vec<Arc<Notify>> =
                streams.iter().map(|stream| self.notifier(stream)).collect();
            let mut waits: Vec<_> = notifiers
                .iter()
                .map(|notify| Box::pin(notify.notified()))
                .collect();
            for wait in &mut waits {
                wait.as_mut().enable();
            }
            let entries = attempt(&mut self.lock())?;
            if !entries.is_empty() || block.is_zero() {
                return Ok(entries);
            }
            let woken = futures_util::future::select_all(waits);
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                return attempt(&mut self.lock());
            }
        }
    }
}

impl State {
    fn schedule(&mut self, set: &str, member: &str, at_unix_ms: u64) {
        let schedule = self.schedules.entry(set.to_owned()).or_default();
        if let Some(previous) = schedule.by_member.insert(member.to_owned(), at_unix_ms) {
            schedule.by_time.remove(&(previous, member.to_owned()));
        }
        schedule.by_time.insert((at_unix_ms, member.to_owned()));
    }

    fn cancel(&mut self, set: &str, member: &str) -> bool {
        let Some(schedule) = self.schedules.get_mut(set) else {
            return false;
        };
        match schedule.by_member.remove(member) {
            Some(at) => {
                schedule.by_time.remove(&(at, member.to_owned()));
                true
            }
            None => false,
        }
    }

    /// Sends to the channel's subscribers; returns 1 if there is any (this process is the one
    /// subscribed process, as a Redis replica counts once however many local subscribers it has).
    fn publish(&mut self, channel: &str, payload: Bytes) -> u64 {
        let Some(sender) = self.channels.get(channel) else {
            return 0;
        };
        match sender.send(Notice::Message(payload)) {
            Ok(n_receivers) => u64::from(n_receivers > 0),
            Err(_) => {
                // Every subscriber has gone: forget the channel.
                self.channels.remove(channel);
                0
            }
        }
    }
}

fn group_mut<'a>(
    state: &'a mut State,
    stream: &str,
    group: &str,
) -> Result<&'a mut StreamState, StoreError> {
    match state.streams.get_mut(stream) {
        Some(stream_state) if stream_state.groups.contains_key(group) => Ok(stream_state),
        _ => Err(StoreError::not_found(format!(
            "consumer group {group:?} of stream {stream:?}"
        ))),
    }
}

/// Appends `payload` to a stream (under the store's lock); the notify wakes its blocked readers
/// once the lock is released.
fn append_to(
    stream_state: &mut StreamState,
    payload: Bytes,
) -> Result<(EntryId, Arc<Notify>), StoreError> {
    let now_ms = now_unix_ms();
    let last = stream_state.last_id;
    let id = if now_ms > last.ms {
        EntryId::new(now_ms, 0)
    } else {
        last.successor()
            .ok_or_else(|| StoreError::internal("memory", "stream id space exhausted"))?
    };
    stream_state.entries.insert(id, payload);
    stream_state.last_id = id;
    Ok((id, stream_state.appended.clone()))
}

fn deliver_new(
    state: &mut State,
    stream: &str,
    group: &str,
    consumer: &str,
    max: usize,
) -> Result<Vec<Entry>, StoreError> {
    let stream_state = group_mut(state, stream, group)?;
    let StreamState {
        entries, groups, ..
    } = stream_state;
    let Some(group_state) = groups.get_mut(group) else {
        return Err(StoreError::internal("memory", "group vanished"));
    };
    let Some(start) = group_state.last_delivered.successor() else {
        return Ok(Vec::new());
    };
    let now = Instant::now();
    let mut delivered = Vec::new();
    for (id, payload) in entries.range(start..).take(max) {
        group_state.pending.insert(*id, (consumer.to_owned(), now));
        group_state.last_delivered = *id;
        delivered.push(Entry {
            id: *id,
            payload: payload.clone(),
        });
    }
    Ok(delivered)
}

#[async_trait]
impl LiveStore for MemoryStore {
    async fn get(&self, key: &str) -> Result<Option<(Bytes, Version)>, StoreError> {
        let mut state = self.lock();
        let now = Instant::now();
        match state.kv.get(key) {
            Some(found) if !expired(found.expires_at, now) => {
                Ok(Some((found.value.clone(), found.version)))
            }
            Some(_) => {
                state.kv.remove(key);
                Ok(None)
            }
            None => Ok(None),
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
        if let Some(ttl) = ttl {
            positive_ms("ttl", ttl)?;
        }
        check_effect_groups(key, effects)?;
        let now = Instant::now();
        let mut state = self.lock();
        state.count_write(now);
        let actual = state
            .kv
            .get(key)
            .filter(|found| !expired(found.expires_at, now))
            .map(|found| found.version);
        if actual != expected {
            return Err(StoreError::Conflict {
                key: key.to_owned(),
                expected,
                actual,
            });
        }
        let version = actual.unwrap_or(0) + 1;
        state.kv.insert(
            key.to_owned(),
            KvValue {
                value,
                version,
                expires_at: ttl.map(|ttl| now + ttl),
            },
        );
        for effect in effects {
            match effect {
                Effect::Schedule {
                    set,
                    member,
                    at_unix_ms,
                } => state.schedule(set, member, *at_unix_ms),
                Effect::Cancel { set, member } => {
                    state.cancel(set, member);
                }
                Effect::Publish { channel, payload } => {
                    state.publish(channel, payload.clone());
                }
            }
        }
        Ok(version)
    }

    async fn delete(&self, key: &str) -> Result<bool, StoreError> {
        let now = Instant::now();
        Ok(self
            .lock()
            .kv
            .remove(key)
            .is_some_and(|found| !expired(found.expires_at, now)))
    }

    async fn lease(&self, key: &str, owner: &str, ttl: Duration) -> Result<bool, StoreError> {
        positive_ms("lease ttl", ttl)?;
        let now = Instant::now();
        let mut state = self.lock();
        state.count_write(now);
        match state.leases.get(key) {
            Some((holder, until)) if *until > now && holder != owner => Ok(false),
            _ => {
                state
                    .leases
                    .insert(key.to_owned(), (owner.to_owned(), now + ttl));
                Ok(true)
            }
        }
    }

    async fn release(&self, key: &str, owner: &str) -> Result<bool, StoreError> {
        let now = Instant::now();
        let mut state = self.lock();
        match state.leases.get(key) {
            Some((holder, until)) if holder == owner && *until > now => {
                state.leases.remove(key);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn append(&self, stream: &str, payload: Bytes) -> Result<EntryId, StoreError> {
        let (id, notify) = {
            let mut state = self.lock();
            append_to(state.streams.entry(stream.to_owned()).or_default(), payload)?
        };
        notify.notify_waiters();
        Ok(id)
    }

    async fn append_bounded(
        &self,
        stream: &str,
        group: &str,
        max_waiting: u64,
        payload: Bytes,
    ) -> Result<Option<EntryId>, StoreError> {
        let (id, notify) = {
            let mut state = self.lock();
            let stream_state = group_mut(&mut state, stream, group)?;
            let waiting = stream_state.groups[group]
                .last_delivered
                .successor()
                .map_or(0, |next| {
                    stream_state
                        .entries
                        .range(next..)
                        .take(usize::try_from(max_waiting).unwrap_or(usize::MAX))
                        .count()
                });
            if u64::try_from(waiting).unwrap_or(u64::MAX) >= max_waiting {
                return Ok(None);
            }
            append_to(stream_state, payload)?
        };
        notify.notify_waiters();
        Ok(Some(id))
    }

    async fn ensure_group(&self, stream: &str, group: &str) -> Result<(), StoreError> {
        let mut state = self.lock();
        state
            .streams
            .entry(stream.to_owned())
            .or_default()
            .groups
            .entry(group.to_owned())
            .or_default();
        Ok(())
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
        self.blocking(&[stream], block, |state| {
            deliver_new(state, stream, group, consumer, max)
        })
        .await
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
        self.blocking(streams, block, |state| {
            let mut delivered = Vec::new();
            for (index, stream) in streams.iter().enumerate() {
                for entry in deliver_new(state, stream, group, consumer, max)? {
                    delivered.push((index, entry));
                }
            }
            Ok(delivered)
        })
        .await
    }

    async fn ack(&self, stream: &str, group: &str, ids: &[EntryId]) -> Result<u64, StoreError> {
        let mut state = self.lock();
        let Some(group_state) = state
            .streams
            .get_mut(stream)
            .and_then(|stream_state| stream_state.groups.get_mut(group))
        else {
            // Like XACK: acknowledging in a missing group acknowledges nothing.
            return Ok(0);
        };
        let mut n_acked = 0;
        for id in ids {
            if group_state.pending.remove(id).is_some() {
                n_acked += 1;
            }
        }
        Ok(n_acked)
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
        let mut state = self.lock();
        let stream_state = group_mut(&mut state, stream, group)?;
        let StreamState {
            entries, groups, ..
        } = stream_state;
        let Some(group_state) = groups.get_mut(group) else {
            return Err(StoreError::internal("memory", "group vanished"));
        };
        let now = Instant::now();
        let mut claimed = Vec::new();
        let mut vanished = Vec::new();
        for (id, (owner, delivered_at)) in group_state.pending.iter_mut() {
            if claimed.len() >= max {
                break;
            }
            if now.saturating_duration_since(*delivered_at) < min_idle {
                continue;
            }
            match entries.get(id) {
                Some(payload) => {
                    consumer.clone_into(owner);
                    *delivered_at = now;
                    claimed.push(Entry {
                        id: *id,
                        payload: payload.clone(),
                    });
                }
                None => vanished.push(*id),
            }
        }
        for id in vanished {
            group_state.pending.remove(&id);
        }
        Ok(claimed)
    }

    async fn pending_count(&self, stream: &str, group: &str) -> Result<u64, StoreError> {
        let mut state = self.lock();
        let stream_state = group_mut(&mut state, stream, group)?;
        let pending = stream_state
            .groups
            .get(group)
            .map_or(0, |group_state| group_state.pending.len());
        Ok(u64::try_from(pending).unwrap_or(u64::MAX))
    }

    async fn range(
        &self,
        stream: &str,
        after: Option<EntryId>,
        max: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        positive_max(max)?;
        Ok(entries_after(self.lock().streams.get(stream), after, max))
    }

    async fn read_after(
        &self,
        stream: &str,
        from: ReadFrom,
        max: usize,
        block: Duration,
    ) -> Result<Vec<Entry>, StoreError> {
        positive_max(max)?;
        let after = match from {
            ReadFrom::After(id) => id,
            ReadFrom::Latest => {
                if block.is_zero() {
                    return Ok(Vec::new());
                }
                self.lock()
                    .streams
                    .get(stream)
                    .map_or(EntryId::ZERO, |stream_state| stream_state.last_id)
            }
        };
        self.blocking(&[stream], block, |state| {
            Ok(entries_after(state.streams.get(stream), Some(after), max))
        })
        .await
    }

    async fn len(&self, stream: &str) -> Result<u64, StoreError> {
        let n_entries = self
            .lock()
            .streams
            .get(stream)
            .map_or(0, |stream_state| stream_state.entries.len());
        Ok(u64::try_from(n_entries).unwrap_or(u64::MAX))
    }

    async fn trim(&self, stream: &str, keep_last: u64) -> Result<u64, StoreError> {
        let mut state = self.lock();
        let Some(stream_state) = state.streams.get_mut(stream) else {
            return Ok(0);
        };
        let keep_last = usize::try_from(keep_last).unwrap_or(usize::MAX);
        let n_removed = stream_state.entries.len().saturating_sub(keep_last);
        for _ in 0..n_removed {
            stream_state.entries.pop_first();
        }
        Ok(u64::try_from(n_removed).unwrap_or(u64::MAX))
    }

    async fn trim_before(&self, stream: &str, min_id: EntryId) -> Result<u64, StoreError> {
        let mut state = self.lock();
        let Some(stream_state) = state.streams.get_mut(stream) else {
            return Ok(0);
        };
        let kept = stream_state.entries.split_off(&min_id);
        let n_removed = stream_state.entries.len();
        stream_state.entries = kept;
        Ok(u64::try_from(n_removed).unwrap_or(u64::MAX))
    }

    async fn groups(&self, stream: &str) -> Result<Vec<GroupInfo>, StoreError> {
        let state = self.lock();
        let Some(stream_state) = state.streams.get(stream) else {
            return Ok(Vec::new());
        };
        let mut groups: Vec<GroupInfo> = stream_state
            .groups
            .iter()
            .map(|(name, group)| {
                let lag = group
                    .last_delivered
                    .successor()
                    .map_or(0, |next| stream_state.entries.range(next..).count());
                GroupInfo {
                    name: name.clone(),
                    pending: u64::try_from(group.pending.len()).unwrap_or(u64::MAX),
                    first_pending: group.pending.keys().next().copied(),
                    last_delivered: group.last_delivered,
                    lag: Some(u64::try_from(lag).unwrap_or(u64::MAX)),
                }
            })
            .collect();
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(groups)
    }

    async fn publish(&self, channel: &str, payload: Bytes) -> Result<u64, StoreError> {
        Ok(self.lock().publish(channel, payload))
    }

    async fn subscribe(&self, channel: &str) -> Result<Subscription, StoreError> {
        let receiver = self
            .lock()
            .channels
            .entry(channel.to_owned())
            .or_insert_with(|| broadcast::channel(SUBSCRIBER_BUFFER).0)
            .subscribe();
        Ok(crate::pubsub::notices(receiver, ()))
    }

    async fn schedule(&self, set: &str, member: &str, at_unix_ms: u64) -> Result<(), StoreError> {
        self.lock().schedule(set, member, at_unix_ms);
        Ok(())
    }

    async fn cancel(&self, set: &str, member: &str) -> Result<bool, StoreError> {
        Ok(self.lock().cancel(set, member))
    }

    async fn take_due(
        &self,
        set: &str,
        now_unix_ms: u64,
        max: usize,
    ) -> Result<Vec<String>, StoreError> {
        positive_max(max)?;
        let mut state = self.lock();
        let Some(schedule) = state.schedules.get_mut(set) else {
            return Ok(Vec::new());
        };
        let mut due = Vec::new();
        while due.len() < max {
            match schedule.by_time.first() {
                Some((at, _)) if *at <= now_unix_ms => {}
                _ => break,
            }
            if let Some((_, member)) = schedule.by_time.pop_first() {
                schedule.by_member.remove(&member);
                due.push(member);
            }
        }
        Ok(due)
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
        let mut state = self.lock();
        let Some(schedule) = state.schedules.get(set) else {
            return Ok(Vec::new());
        };
        let due: Vec<String> = schedule
            .by_time
            .iter()
            .take_while(|(at, _)| *at <= now_unix_ms)
            .take(max)
            .map(|(_, member)| member.clone())
            .collect();
        for member in &due {
            state.schedule(set, member, retry_at);
        }
        Ok(due)
    }

    async fn next_due(&self, set: &str) -> Result<Option<(String, u64)>, StoreError> {
        Ok(self.lock().schedules.get(set).and_then(|schedule| {
            schedule
                .by_time
                .first()
                .map(|(at, member)| (member.clone(), *at))
        }))
    }

    async fn schedule_len(&self, set: &str) -> Result<u64, StoreError> {
        Ok(self.lock().schedules.get(set).map_or(0, |schedule| {
            u64::try_from(schedule.by_member.len()).unwrap_or(u64::MAX)
        }))
    }

    async fn scheduled(&self, set: &str, max: usize) -> Result<Vec<(String, u64)>, StoreError> {
        let max = positive_max(max)?;
        Ok(self
            .lock()
            .schedules
            .get(set)
            .map_or_else(Vec::new, |schedule| {
                schedule
                    .by_time
                    .iter()
                    .take(max)
                    .map(|(at, member)| (member.clone(), *at))
                    .collect()
            }))
    }

    async fn hit(&self, key: &str, window: Duration) -> Result<u64, StoreError> {
        positive_ms("rate window", window)?;
        let now = Instant::now();
        let mut state = self.lock();
        state.count_write(now);
        let counter = state
            .rates
            .entry(key.to_owned())
            .or_insert((0, now + window));
        if counter.1 <= now {
            *counter = (0, now + window);
        }
        counter.0 += 1;
        Ok(counter.0)
    }
}
