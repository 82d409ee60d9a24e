//! Pub/sub fan-out: every subscription of one [`RedisStore`](crate::RedisStore) shares ONE Redis
//! pub/sub connection, owned by one task and fanned out in-process.
//!
//! # How it works
//!
//! The task (see `PubSubHub`) owns the connection (a `redis::aio::PubSub` split into its sink, for
//! `SUBSCRIBE`/`UNSUBSCRIBE`/`PING`, and its message stream) and a map from channel name to a
//! `tokio::sync::broadcast` sender and a count of local subscribers. Subscribers talk to it through
//! one command queue, so subscriptions and unsubscriptions apply in order:
//!
//! - the first local subscriber of a channel makes the task `SUBSCRIBE` it (the subscriber's call
//!   returns once Redis has confirmed, so a message published after it returns is delivered);
//!   later subscribers of the channel only get a receiver of its broadcast;
//! - dropping a subscription sends an unsubscription; the last one makes the task `UNSUBSCRIBE`;
//! - a message from Redis goes to the channel's broadcast: one ring buffer per channel however
//!   many local subscribers it has ([`SUBSCRIBER_BUFFER`] messages; a subscriber that falls
//!   further behind gets a [`Notice::Gap`]).
//!
//! # Losing the connection
//!
//! When the message stream ends (the connection was closed or killed), or a `PING` (every
//! [`PING_EVERY`]) gets no answer within [`CALL_TIMEOUT`] (a half-open connection), the task drops
//! the connection and opens a new one after a backoff: [`BACKOFF_FIRST`] doubled per failed attempt
//! up to [`BACKOFF_MAX`], each wait drawn between half and all of that ("equal jitter", so that the
//! replicas of a deployment do not reconnect in step); a connection that lived
//! [`STABLE_AFTER`] resets the doubling. Once connected it subscribes every channel that has local
//! subscribers again and sends each of them ONE [`Notice::Gap`], after which they re-read their
//! source of truth. Nothing loops faster than the backoff, whatever the server does.
//! Subscribing while the connection is down does not fail: the subscriber is registered, and its
//! channel is subscribed (followed by a `Gap`) when the connection is back.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use redis::Client;
use redis::aio::{PubSubSink, PubSubStream};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::time::Instant;

use crate::error::StoreError;
use crate::live::{Notice, SUBSCRIBER_BUFFER, Subscription};

/// The first reconnection wait (before jitter).
pub const BACKOFF_FIRST: Duration = Duration::from_millis(100);
/// The longest reconnection wait (before jitter).
pub const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// A connection that lived this long resets the backoff to [`BACKOFF_FIRST`].
pub const STABLE_AFTER: Duration = Duration::from_secs(10);
/// How often the connection is checked with a `PING`.
pub const PING_EVERY: Duration = Duration::from_secs(15);
/// Timeout of connecting, of a `SUBSCRIBE`/`UNSUBSCRIBE` and of a `PING`.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Channels per `SUBSCRIBE` when re-subscribing after a reconnection.
const SUBSCRIBE_BATCH: usize = 512;

/// Counters of a store's pub/sub fan-out, for tests and metrics.
#[derive(Debug, Default)]
pub struct PubSubStats {
    connections_opened: AtomicU64,
    connections_lost: AtomicU64,
    channels: AtomicU64,
    subscribers: AtomicU64,
}

/// A snapshot of [`PubSubStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PubSubCounts {
    /// Pub/sub connections opened since the store was created (1 while nothing was lost).
    pub connections_opened: u64,
    /// Connections lost (closed by the server, killed, or unanswered pings).
    pub connections_lost: u64,
    /// Channels subscribed now (each with at least one local subscriber).
    pub channels: u64,
    /// Local subscribers now, over all channels.
    pub subscribers: u64,
}

impl PubSubStats {
    fn counts(&self) -> PubSubCounts {
        PubSubCounts {
            connections_opened: self.connections_opened.load(Ordering::Relaxed),
            connections_lost: self.connections_lost.load(Ordering::Relaxed),
            channels: self.channels.load(Ordering::Relaxed),
            subscribers: self.subscribers.load(Ordering::Relaxed),
        }
    }
}

/// Turns a broadcast receiver into a [`Subscription`]; `guard` lives as long as the stream (its drop
/// is the unsubscription).
pub(crate) fn notices<G: Send + Unpin + 'static>(
    receiver: broadcast::Receiver<Notice>,
    guard: G,
) -> Subscription {
    let stream =
        futures_util::stream::unfold((receiver, guard), |(mut receiver, guard)| async move {
            match receiver.recv().await {
                Ok(notice) => Some((notice, (receiver, guard))),
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    Some((Notice::Gap, (receiver, guard)))
                }
                Err(broadcast::error::RecvError::Closed) => None,
            }
        });
    Box::pin(stream)
}

enum Command {
    Subscribe {
        channel: String,
        reply: oneshot::Sender<broadcast::Receiver<Notice>>,
    },
    Unsubscribe {
        channel: String,
    },
}

/// Sends the unsubscription when a subscription is dropped.
struct Unsubscribe {
    channel: String,
    commands: mpsc::UnboundedSender<Command>,
}

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Unsubscribe {
            channel: std::mem::take(&mut self.channel),
        });
    }
}

/// The handle of a store's fan-out task. Cheap to clone; the task stops when every handle and
/// every subscription is gone.
#[derive(Clone, Debug)]
pub(crate) struct PubSubHub {
    commands: mpsc::UnboundedSender<Command>,
    stats: Arc<PubSubStats>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Subscribe { channel, .. } => write!(f, "Subscribe({channel})"),
            Command::Unsubscribe { channel } => write!(f, "Unsubscribe({channel})"),
        }
    }
}

impl PubSubHub {
    /// Starts the task (it connects on the first subscription). With several clients (the nodes of
    /// a Redis Cluster, which delivers every publication to every node) each reconnection attempt
    /// goes to the next one.
    pub(crate) fn start(clients: Vec<Client>) -> PubSubHub {
        let (commands, receiver) = mpsc::unbounded_channel();
        let stats = Arc::new(PubSubStats::default());
        let task = HubTask {
            clients,
            next_client: 0,
            channels: HashMap::new(),
            conn: None,
            attempt: 0,
            retry_at: Instant::now(),
            stats: stats.clone(),
        };
        tokio::spawn(task.run(receiver));
        PubSubHub { commands, stats }
    }

    /// Subscribes to the Redis channel `channel` (the full, prefixed name).
    pub(crate) async fn subscribe(&self, channel: String) -> Result<Subscription, StoreError> {
        let (reply, answer) = oneshot::channel();
        let gone = || StoreError::internal("redis", "the pub/sub task has stopped");
        self.commands
            .send(Command::Subscribe {
                channel: channel.clone(),
                reply,
            })
            .map_err(|_| gone())?;
        let receiver = answer.await.map_err(|_| gone())?;
        Ok(notices(
            receiver,
            Unsubscribe {
                channel,
                commands: self.commands.clone(),
            },
        ))
    }

    pub(crate) fn counts(&self) -> PubSubCounts {
        self.stats.counts()
    }
}

struct Local {
    sender: broadcast::Sender<Notice>,
    n_subscribers: usize,
}

struct Conn {
    sink: PubSubSink,
    stream: PubSubStream,
    since: Instant,
}

struct HubTask {
    clients: Vec<Client>,
    /// The client of the next connection attempt.
    next_client: usize,
    channels: HashMap<String, Local>,
    conn: Option<Conn>,
    /// Failed attempts since the last stable connection.
    attempt: u32,
    /// No connection is tried before this.
    retry_at: Instant,
    stats: Arc<PubSubStats>,
}

enum Event {
    Command(Option<Command>),
    Message(Option<redis::Msg>),
    Retry,
    Ping,
}

/// The next message of the connection, or never when there is none.
async fn next_message(conn: &mut Option<Conn>) -> Option<redis::Msg> {
    match conn {
        Some(conn) => conn.stream.next().await,
        None => std::future::pending().await,
    }
}

/// The wait before attempt `attempt` (1-based): doubled per attempt up to [`BACKOFF_MAX`], then a
/// uniform draw between half and all of it.
pub(crate) fn backoff(attempt: u32) -> Duration {
    let doubled = BACKOFF_FIRST.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    let ceiling = doubled.min(BACKOFF_MAX);
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let fraction = 0.5 + 0.5 * (random % 1_000_000) as f64 / 1_000_000.0;
    ceiling.mul_f64(fraction)
}

impl HubTask {
    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ping.reset();
        loop {
            let reconnect_due = self.conn.is_none() && !self.channels.is_empty();
            let event = tokio::select! {
                command = commands.recv() => Event::Command(command),
                message = next_message(&mut self.conn) => Event::Message(message),
                () = tokio::time::sleep_until(self.retry_at), if reconnect_due => Event::Retry,
                _ = ping.tick(), if self.conn.is_some() => Event::Ping,
            };
            match event {
                Event::Command(None) => return,
                Event::Command(Some(command)) => self.handle(command).await,
                Event::Message(Some(message)) => self.deliver(&message),
                Event::Message(None) => self.lost("the pub/sub connection closed"),
                Event::Retry => self.connect().await,
                Event::Ping => self.ping().await,
            }
            self.stats
                .channels
                .store(self.channels.len() as u64, Ordering::Relaxed);
        }
    }

    async fn handle(&mut self, command: Command) {
        match command {
            Command::Subscribe { channel, reply } => {
                if let Some(local) = self.channels.get_mut(&channel) {
                    let receiver = local.sender.subscribe();
                    local.n_subscribers += 1;
                    self.stats.subscribers.fetch_add(1, Ordering::Relaxed);
                    if reply.send(receiver).is_err() {
                        self.unsubscribe(channel).await;
                    }
                    return;
                }
                if self.conn.is_none() && Instant::now() >= self.retry_at {
                    self.connect().await;
                }
                if let Some(conn) = &mut self.conn {
                    let subscribed =
                        tokio::time::timeout(CALL_TIMEOUT, conn.sink.subscribe(&channel)).await;
                    if !matches!(subscribed, Ok(Ok(()))) {
                        // Re-established with every channel, this one included, then a Gap.
                        self.lost("SUBSCRIBE failed");
                    }
                }
                let (sender, receiver) = broadcast::channel(SUBSCRIBER_BUFFER);
                self.channels.insert(
                    channel.clone(),
                    Local {
                        sender,
                        n_subscribers: 1,
                    },
                );
                self.stats.subscribers.fetch_add(1, Ordering::Relaxed);
                if reply.send(receiver).is_err() {
                    self.unsubscribe(channel).await;
                }
            }
            Command::Unsubscribe { channel } => self.unsubscribe(channel).await,
        }
    }

    async fn unsubscribe(&mut self, channel: String) {
        let Some(local) = self.channels.get_mut(&channel) else {
            return;
        };
        local.n_subscribers -= 1;
        self.stats.subscribers.fetch_sub(1, Ordering::Relaxed);
        if local.n_subscribers > 0 {
            return;
        }
        self.channels.remove(&channel);
        if let Some(conn) = &mut self.conn {
            let done = tokio::time::timeout(CALL_TIMEOUT, conn.sink.unsubscribe(&channel)).await;
            if !matches!(done, Ok(Ok(()))) {
                self.lost("UNSUBSCRIBE failed");
            }
        }
    }

    fn deliver(&self, message: &redis::Msg) {
        if let Some(local) = self.channels.get(message.get_channel_name()) {
            let payload = bytes::Bytes::copy_from_slice(message.get_payload_bytes());
            let _ = local.sender.send(Notice::Message(payload));
        }
    }

    async fn ping(&mut self) {
        let Some(conn) = &mut self.conn else {
            return;
        };
        let answered = tokio::time::timeout(CALL_TIMEOUT, conn.sink.ping::<redis::Value>()).await;
        if !matches!(answered, Ok(Ok(_))) {
            self.lost("PING unanswered");
        }
    }

    /// Drops the connection; the next one is tried after the backoff.
    fn lost(&mut self, why: &str) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        self.stats.connections_lost.fetch_add(1, Ordering::Relaxed);
        if conn.since.elapsed() >= STABLE_AFTER {
            self.attempt = 0;
        }
        self.failed(why);
    }

    fn failed(&mut self, why: &str) {
        self.next_client = self.next_client.wrapping_add(1);
        self.attempt = self.attempt.saturating_add(1);
        let wait = backoff(self.attempt);
        self.retry_at = Instant::now() + wait;
        if self.attempt == 1 || self.attempt.is_multiple_of(10) {
            tracing::warn!(
                attempt = self.attempt,
                retry_in_ms = wait.as_millis() as u64,
                "redis pub/sub: {why}; reconnecting"
            );
        }
    }

    /// Opens a connection, subscribes every channel with local subscribers, and wakes each of
    /// them once with a [`Notice::Gap`].
    async fn connect(&mut self) {
        let Some(client) = self
            .clients
            .get(self.next_client % self.clients.len().max(1))
        else {
            self.failed("no node to connect to");
            return;
        };
        let opened = tokio::time::timeout(CALL_TIMEOUT, client.get_async_pubsub()).await;
        let Ok(Ok(pubsub)) = opened else {
            self.failed("cannot connect");
            return;
        };
        let (mut sink, stream) = pubsub.split();
        let names: Vec<&String> = self.channels.keys().collect();
        for batch in names.chunks(SUBSCRIBE_BATCH) {
            let subscribed = tokio::time::timeout(CALL_TIMEOUT, sink.subscribe(batch)).await;
            if !matches!(subscribed, Ok(Ok(()))) {
                self.failed("re-subscribing failed");
                return;
            }
        }
        self.stats
            .connections_opened
            .fetch_add(1, Ordering::Relaxed);
        self.conn = Some(Conn {
            sink,
            stream,
            since: Instant::now(),
        });
        for local in self.channels.values() {
            let _ = local.sender.send(Notice::Gap);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_ceiling_with_jitter() {
        for attempt in 1..40 {
            let ceiling = BACKOFF_FIRST
                .saturating_mul(1 << (attempt - 1).min(16))
                .min(BACKOFF_MAX);
            let wait = backoff(attempt);
            assert!(
                wait <= ceiling && wait >= ceiling / 2,
                "{attempt}: {wait:?}"
            );
        }
        assert!(backoff(1) >= Duration::from_millis(50));
        assert!(backoff(100) <= BACKOFF_MAX);
    }
}
