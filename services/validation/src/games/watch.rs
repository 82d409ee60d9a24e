//! `Games.WatchGame`: every watcher of a game on one replica shares ONE feed of that game.
//!
//! Spectators (watchers who are not the game's players) are counted per feed; the feed publishes its
//! count in the game's `game-spectators:{id}` schedule (member `<replica>=<count>`, renewed at least
//! every 20 s while there are any, lapsing 90 s after the last renewal), and GetGame sums the members.
//!
//! - A feed is one task per watched game and replica: it subscribes to the game's events channel
//!   (through the live store, whose subscriptions all share one Redis pub/sub connection), reads the
//!   record (the source of truth) once per wake-up, turns it into the game's event list once, and
//!   publishes that snapshot on a `tokio::sync::watch` channel. 10,000 watchers of a game cost one
//!   subscription, one read and one conversion per move, not 10,000.
//! - Each watcher's stream (no task of its own) sends the events of the latest snapshot it has not
//!   sent yet, so a slow watcher skips snapshots, never events, and holds no queue.
//! - A feed re-reads on every notice: a message, or a `Gap` (the store's connection was
//!   re-established, or the feed fell behind), and every [`SAFETY_REREAD`] (jittered) in case a
//!   wake-up was lost without a `Gap`. A failed read is retried after a growing pause
//!   ([`RETRY_FIRST`] doubled to [`RETRY_MAX`]). Nothing loops without waiting.
//! - The feed ends when the game is over (after its last snapshot), when its last watcher leaves,
//!   or on an error that a retry cannot fix (no such game).
//! - Caps: open streams per caller (player or API key; client IP address for anonymous watchers)
//!   and per replica ([`GamesLimits`]), refused with RESOURCE_EXHAUSTED. `draughts_watchers_open`
//!   is the gauge of open streams on this replica.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use draughts_proto::{ServiceError, pb};
use draughts_runtime::admission::{Admission, Permit, Refused};
use draughts_store::Notice;
use futures_util::{Stream, StreamExt};
use tokio::sync::watch;
use tonic::Status;

use super::grpc::events_after;
use super::limits::GamesLimits;
use super::service::{GamesCore, GamesError, GamesResult, keys};

/// The stream answered to `WatchGame`.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::GameEvent, Status>> + Send>>;

/// A feed re-reads its game at least this often (plus up to half of it, jittered).
pub const SAFETY_REREAD: Duration = Duration::from_secs(30);
/// First pause after a failed read.
pub const RETRY_FIRST: Duration = Duration::from_millis(200);
/// Longest pause between failed reads.
pub const RETRY_MAX: Duration = Duration::from_secs(10);

/// The game's events as of one read, shared by every watcher of the feed.
#[derive(Debug)]
struct FeedState {
    events: Vec<pb::GameEvent>,
    over: bool,
}

/// `None` until the first read; an error ends every watcher.
type Snapshot = Option<Result<Arc<FeedState>, Arc<GamesError>>>;

#[derive(Debug)]
struct Feed {
    sender: Arc<watch::Sender<Snapshot>>,
    generation: u64,
    spectators: Arc<Spectators>,
}

/// The open spectator streams of one feed (watchers who are not the game's players), told to the
/// feed's task when they change so that it publishes the count.
#[derive(Debug, Default)]
struct Spectators {
    open: std::sync::atomic::AtomicUsize,
    changed: tokio::sync::Notify,
}

/// One spectator stream counted while it lives.
struct Spectating(Arc<Spectators>);

impl Spectating {
    fn new(spectators: Arc<Spectators>) -> Spectating {
        spectators
            .open
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        spectators.changed.notify_one();
        Spectating(spectators)
    }
}

impl Drop for Spectating {
    fn drop(&mut self) {
        self.0
            .open
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        self.0.changed.notify_one();
    }
}

/// A replica's published count of a game's spectators lapses after this unless renewed.
const SPECTATORS_LAPSE: Duration = Duration::from_secs(90);
/// A feed renews its published count at least this often (when its task wakes).
const SPECTATORS_RENEW: Duration = Duration::from_secs(20);

/// The spectators of game `id` on every replica (best effort: 0 when the store cannot say). One
/// read: a member that lapsed (its replica died) is left out here and removed by the next feed
/// that publishes, never by a reader.
pub async fn spectators(core: &GamesCore, id: &str) -> u32 {
    let now = core.now();
    let Ok(members) = core.live().scheduled(&keys::spectators(id), 64).await else {
        return 0;
    };
    members
        .iter()
        .filter(|(_, lapses_at)| *lapses_at > now)
        .filter_map(|(m, _)| m.rsplit_once('=').and_then(|(_, n)| n.parse::<u32>().ok()))
        .fold(0u32, u32::saturating_add)
}

#[derive(Debug, Default)]
struct State {
    feeds: HashMap<String, Feed>,
    generations: u64,
}

/// The watchers of one replica: caps and the feed of each watched game. Shared by every clone of
/// [`GamesCore`].
#[derive(Debug)]
pub struct Watchers {
    state: Mutex<State>,
    admission: Arc<Admission>,
    /// This replica's name in the games' spectator counts.
    replica: String,
}

impl Watchers {
    pub fn new(limits: &GamesLimits) -> Watchers {
        Watchers {
            state: Mutex::new(State::default()),
            admission: Admission::new(
                limits.max_watchers_per_caller,
                limits.max_watchers,
                Some("draughts_watchers_open"),
            ),
            replica: format!("{:016x}", rand::random::<u64>()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Open streams on this replica.
    pub fn open(&self) -> u32 {
        self.admission.open()
    }

    /// Games with a feed on this replica.
    pub fn feeds(&self) -> usize {
        self.lock().feeds.len()
    }

    pub(crate) fn admit(&self, caller: &str) -> GamesResult<Permit> {
        self.admission
            .admit(caller)
            .map_err(|refused| match refused {
                Refused::Total { open } => GamesError::Exhausted(format!(
                    "this server has {open} open game watches, its limit; try again later"
                )),
                Refused::PerKey { open } => GamesError::Exhausted(format!(
                    "you have {open} open game watches on this server, the limit; close one first"
                )),
            })
    }
}

pub use draughts_runtime::admission::caller_key;

/// Opens a watch of game `id` for `caller` (see [`caller_key`]): the whole history first, then
/// every event as it happens; the stream ends after the game's end.
pub async fn watch(core: &GamesCore, caller: &str, id: &str) -> Result<WatchStream, Status> {
    draughts_proto::ids::GameId::parse(id)
        .map_err(|e| GamesError::Invalid(e.to_string()).to_status())?;
    let watchers = core.watchers().clone();
    let admitted = watchers.admit(caller).map_err(|e| e.to_status())?;
    let (mut receiver, spectators) = feed(core, &watchers, id);
    let first = receiver
        .wait_for(Option::is_some)
        .await
        .map(|snapshot| snapshot.clone())
        .map_err(|_| GamesError::ShuttingDown.to_status())?;
    let spectating = match &first {
        Some(Err(e)) => return Err(e.to_status()),
        // Anyone but the game's two players (the first event is the game as created).
        Some(Ok(state)) => {
            let players = state.events.first().and_then(|e| match &e.kind {
                Some(pb::game_event::Kind::Created(view)) => Some(view),
                _ => None,
            });
            let player = players.is_some_and(|v| {
                [&v.white, &v.black]
                    .into_iter()
                    .flatten()
                    .any(|p| p.id == caller)
            });
            (!player && !state.over).then(|| Spectating::new(spectators))
        }
        None => None,
    };
    let watcher = Watcher {
        receiver,
        sent: 0,
        queue: VecDeque::new(),
        finished: false,
        _admitted: admitted,
        _spectating: spectating,
    };
    Ok(Box::pin(futures_util::stream::unfold(
        watcher,
        Watcher::next,
    )))
}

/// The receiver of game `id`'s feed and its spectator count, starting the feed if it has none on
/// this replica.
fn feed(
    core: &GamesCore,
    watchers: &Arc<Watchers>,
    id: &str,
) -> (watch::Receiver<Snapshot>, Arc<Spectators>) {
    let mut state = watchers.lock();
    if let Some(feed) = state.feeds.get(id) {
        return (feed.sender.subscribe(), feed.spectators.clone());
    }
    state.generations += 1;
    let generation = state.generations;
    let (sender, receiver) = watch::channel(None);
    let sender = Arc::new(sender);
    let spectators = Arc::new(Spectators::default());
    state.feeds.insert(
        id.to_owned(),
        Feed {
            sender: sender.clone(),
            generation,
            spectators: spectators.clone(),
        },
    );
    tokio::spawn(run_feed(
        core.clone(),
        watchers.clone(),
        id.to_owned(),
        sender,
        generation,
        spectators.clone(),
    ));
    (receiver, spectators)
}

/// What a feed last published of its spectator count: the member and when.
#[derive(Default)]
struct Published {
    member: Option<String>,
    at: Option<tokio::time::Instant>,
}

impl Published {
    /// Publishes `open` spectators of game `id` from `replica` if it changed or is due for renewal
    /// (0: the member is removed). Best effort: a failure is tried again at the next wake.
    async fn update(&mut self, core: &GamesCore, replica: &str, id: &str, open: usize) {
        let set = keys::spectators(id);
        let member = (open > 0).then(|| format!("{replica}={open}"));
        let due = self.at.is_none_or(|at| at.elapsed() >= SPECTATORS_RENEW);
        if member == self.member && !due {
            return;
        }
        let live = core.live();
        // Members of replicas that died lapse; the writers clear them.
        let _ = live.take_due(&set, core.now(), 64).await;
        if let Some(old) = &self.member
            && Some(old) != member.as_ref()
            && live.cancel(&set, old).await.is_err()
        {
            return;
        }
        if let Some(m) = &member {
            let until = core.now() + SPECTATORS_LAPSE.as_millis() as u64;
            if live.schedule(&set, m, until).await.is_err() {
                self.member = None;
                return;
            }
        }
        self.member = member;
        self.at = Some(tokio::time::Instant::now());
    }
}

fn jittered(base: Duration) -> Duration {
    use rand::Rng;
    base + base.mul_f64(rand::rng().random::<f64>() * 0.5)
}

/// Whether a failed read is worth retrying (the backend is down), or ends the watchers.
fn retryable(e: &GamesError) -> bool {
    matches!(
        e.kind(),
        draughts_proto::ErrorKind::Unavailable | draughts_proto::ErrorKind::Internal
    ) && !matches!(e, GamesError::Corrupt(_))
}

async fn run_feed(
    core: GamesCore,
    watchers: Arc<Watchers>,
    id: String,
    sender: Arc<watch::Sender<Snapshot>>,
    generation: u64,
    spectators: Arc<Spectators>,
) {
    let mut retry = RETRY_FIRST;
    let mut subscription = None;
    let mut revision = None;
    let mut published = Published::default();
    loop {
        let open = spectators.open.load(std::sync::atomic::Ordering::Relaxed);
        published.update(&core, &watchers.replica, &id, open).await;
        // Subscribe first, then read: a change between the two still wakes the feed.
        if subscription.is_none() {
            match core.live().subscribe(&keys::events(&id)).await {
                Ok(s) => subscription = Some(s),
                Err(e) => tracing::warn!(game_id = %id, error = %e, "watch: subscribing failed"),
            }
        }
        let mut wait = jittered(SAFETY_REREAD);
        if subscription.is_some() {
            match core.load(&id).await {
                Ok((record, _)) => {
                    retry = RETRY_FIRST;
                    if revision != Some(record.last_seq()) {
                        revision = Some(record.last_seq());
                        let snapshot = events_after(&record, 0, core.now()).map(|events| {
                            Arc::new(FeedState {
                                events,
                                over: record.is_over(),
                            })
                        });
                        let failed = snapshot.is_err();
                        sender.send_replace(Some(snapshot.map_err(Arc::new)));
                        if failed || record.is_over() {
                            break;
                        }
                    }
                }
                Err(e) if retryable(&e) => {
                    tracing::warn!(game_id = %id, error = %e, "watch: reading the game failed; retrying");
                    wait = retry;
                    retry = (retry * 2).min(RETRY_MAX);
                }
                Err(e) => {
                    if e.kind() == draughts_proto::ErrorKind::Internal {
                        tracing::error!(game_id = %id, error = %e, "watch: the game cannot be read");
                    }
                    sender.send_replace(Some(Err(Arc::new(e))));
                    break;
                }
            }
        } else {
            wait = retry;
            retry = (retry * 2).min(RETRY_MAX);
        }
        let woken = async {
            match subscription.as_mut() {
                Some(s) => s.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = sender.closed() => {
                // Every watcher left; unless one arrives right now, the feed ends.
                if remove_if_unwatched(&watchers, &id, generation, &sender) {
                    published.update(&core, &watchers.replica, &id, 0).await;
                    return;
                }
            }
            notice = woken => match notice {
                Some(Notice::Message(_) | Notice::Gap) => {}
                // The store is shutting down.
                None => break,
            },
            () = spectators.changed.notified() => {}
            () = tokio::time::sleep(if published.member.is_some() { wait.min(SPECTATORS_RENEW) } else { wait }) => {}
        }
    }
    published.update(&core, &watchers.replica, &id, 0).await;
    let mut state = watchers.lock();
    if state
        .feeds
        .get(&id)
        .is_some_and(|feed| feed.generation == generation)
    {
        state.feeds.remove(&id);
    }
}

/// Removes the feed if nobody watches it (checked under the lock new watchers take).
fn remove_if_unwatched(
    watchers: &Watchers,
    id: &str,
    generation: u64,
    sender: &watch::Sender<Snapshot>,
) -> bool {
    let mut state = watchers.lock();
    if sender.receiver_count() > 0 {
        return false;
    }
    if state
        .feeds
        .get(id)
        .is_some_and(|feed| feed.generation == generation)
    {
        state.feeds.remove(id);
    }
    true
}

/// One watcher's stream state.
struct Watcher {
    receiver: watch::Receiver<Snapshot>,
    /// The seq of the last event sent.
    sent: u64,
    queue: VecDeque<pb::GameEvent>,
    /// Nothing more after the queue.
    finished: bool,
    _admitted: Permit,
    /// Counted among the game's spectators while the stream lives (not for its players).
    _spectating: Option<Spectating>,
}

impl Watcher {
    /// Queues the events of the current snapshot not sent yet; returns an error to send, if any.
    fn take_snapshot(&mut self) -> Option<Status> {
        let snapshot = self.receiver.borrow_and_update().clone();
        match snapshot {
            None => None,
            Some(Err(e)) => {
                self.finished = true;
                Some(e.to_status())
            }
            Some(Ok(state)) => {
                let after = self.queue.back().map_or(self.sent, |e| e.seq);
                self.queue
                    .extend(state.events.iter().filter(|e| e.seq > after).cloned());
                if state.over {
                    self.finished = true;
                }
                None
            }
        }
    }

    async fn next(mut self) -> Option<(Result<pb::GameEvent, Status>, Watcher)> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                self.sent = event.seq;
                return Some((Ok(event), self));
            }
            if self.finished {
                return None;
            }
            if let Some(status) = self.take_snapshot() {
                return Some((Err(status), self));
            }
            if !self.queue.is_empty() || self.finished {
                continue;
            }
            if self.receiver.changed().await.is_err() {
                // The feed is gone: what it published last is all there is.
                let error = self.take_snapshot();
                self.finished = true;
                if let Some(status) = error {
                    return Some((Err(status), self));
                }
            }
        }
    }
}
