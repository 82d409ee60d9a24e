//! ONE behavioural suite of the tournaments service's core, run on the memory store and on a real
//! `redis-server` (started by the test): two replicas sharing one store, the scheduler lease and its
//! fencing token, a replica that dies between recording a wave and creating its games (the next one
//! creates exactly those games, under the same ids), results applied once, forfeits, who may create
//! and the per-creator bound, an arena's end (no pairing after it, finished when the last game ends,
//! archived in SQLite). Games and Ratings are fakes here; the gRPC flow through the real
//! services is `services/draughtsd/tests/tournaments.rs`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use draughts_proto::contract::finished::{self, EndReason, FinishedV1, Player};
use draughts_proto::pb;
use draughts_runtime::upstream::UpstreamError;
use draughts_store::{Database, LiveStore};
use draughts_tournaments::ports::{GamesPort, NewGame, RatingsPort};
use draughts_tournaments::service::{Caller, Settings, TournamentsCore};
use draughts_tournaments::store::{Archive, State};
use draughts_tournaments::terms::{Limits, Terms};
use draughts_tournaments::{PlayerRef, TournamentsError, TournamentsResult};
use futures_util::StreamExt;

#[derive(Debug, Default)]
struct FakeGames {
    created: Mutex<Vec<NewGame>>,
    fail: Mutex<bool>,
}

#[async_trait]
impl GamesPort for FakeGames {
    async fn create_game(&self, _: &Terms, game: &NewGame) -> TournamentsResult<()> {
        if *self.fail.lock().unwrap() {
            return Err(UpstreamError::Unreachable("Games").into());
        }
        let mut created = self.created.lock().unwrap();
        if !created.iter().any(|g| g.game_id == game.game_id) {
            created.push(game.clone());
        }
        Ok(())
    }
}

#[derive(Debug, Default)]
struct FakeRatings;

#[async_trait]
impl RatingsPort for FakeRatings {
    async fn rating(&self, _: &str, _: &Terms) -> TournamentsResult<i32> {
        Ok(1500)
    }
}

struct World {
    live: Arc<dyn LiveStore>,
    db: Database,
    games: Arc<FakeGames>,
}

const LEASE: Duration = Duration::from_millis(300);

impl World {
    async fn new(live: Arc<dyn LiveStore>) -> World {
        World {
            live,
            db: Database::connect("sqlite::memory:").await.unwrap(),
            games: Arc::default(),
        }
    }

    async fn replica(&self, name: &str) -> TournamentsCore {
        TournamentsCore::new(
            self.live.clone(),
            Archive::new(self.db.clone()).await.unwrap(),
            self.games.clone(),
            Arc::new(FakeRatings),
            Settings {
                wave_interval: Duration::from_millis(1),
                tick: Duration::from_millis(10),
                lease_ttl: LEASE,
                max_open_per_creator: 3,
                max_open_total: 10_000,
                limits: Limits { min_arena_secs: 1 },
                finished_ttl: Duration::from_secs(60),
            },
            name.into(),
        )
    }
}

fn caller(id: &str, account: bool, admin: bool) -> Caller {
    Caller {
        player: Player {
            id: id.parse().expect("a player id"),
            name: id.into(),
            guest: id.starts_with("guest:"),
            computer: false,
            bot: false,
            berserk: false,
        },
        account,
        admin,
    }
}

fn arena_terms(seconds: u32) -> pb::TournamentTerms {
    pb::TournamentTerms {
        name: "Suite arena".into(),
        kind: pb::TournamentKind::Arena as i32,
        rules: Some(pb::RuleSet {
            variant: pb::Variant::English as i32,
            options: None,
        }),
        time_control: Some(pb::TimeControl {
            kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                base_ms: 60_000,
                increment_ms: 0,
            })),
        }),
        rated: true,
        start: None,
        arena_duration_seconds: seconds,
        ..Default::default()
    }
}

fn finished_event(
    id: &str,
    white: &str,
    black: &str,
    outcome: finished::Outcome,
    plies: u32,
) -> FinishedV1 {
    FinishedV1 {
        game_id: id.parse().unwrap(),
        variant: draughts_engine::Variant::English,
        options: String::new(),
        rated: true,
        white: Player::new(white.parse().expect("a player id")),
        black: Player::new(black.parse().expect("a player id")),
        outcome,
        reason: EndReason::Resignation,
        result: String::new(),
        time_control: None,
        plies,
        finished_at_ms: 0,
        pdn: String::new(),
        traceparent: None,
    }
}

/// A replica records a wave and dies before creating its games (Games unreachable, then its lease
/// lapses): the other replica takes the lease with a higher token, creates exactly the recorded games
/// under their ids, and the first one's late writes are refused.
async fn a_wave_half_made_is_finished_by_the_next_scheduler(world: World) {
    let (a, b) = (world.replica("a").await, world.replica("b").await);
    let admin = caller("key:admin", false, true);
    let t = a.create(&admin, Some(&arena_terms(60))).await.unwrap();
    for i in 0..4 {
        b.join(&caller(&format!("guest:p{i}"), false, false), &t.id, "")
            .await
            .unwrap();
    }
    *world.games.fail.lock().unwrap() = true;
    // The first turn starts the arena; the second runs its first wave.
    a.tick().await.unwrap();
    a.tick().await.unwrap();
    let (record, _) = a.load(&t.id).await.unwrap().unwrap();
    assert_eq!(record.state, State::Running);
    assert_eq!(record.ongoing.len(), 2, "the wave is recorded");
    assert!(record.ongoing.iter().all(|p| !p.created));
    assert!(world.games.created.lock().unwrap().is_empty());
    let stale_token = record.fence;
    let intents: HashSet<String> = record
        .ongoing
        .iter()
        .map(|p| p.game_id.to_string())
        .collect();

    // a is "dead": Games is back, but b must wait for a's lease to lapse.
    *world.games.fail.lock().unwrap() = false;
    assert_eq!(b.tick().await.unwrap(), 0, "a still holds the lease");
    tokio::time::sleep(LEASE + Duration::from_millis(50)).await;
    assert_eq!(b.tick().await.unwrap(), 1);
    let (record, _) = b.load(&t.id).await.unwrap().unwrap();
    assert!(record.fence > stale_token);
    assert!(record.ongoing.iter().all(|p| p.created));
    let created: HashSet<String> = world
        .games
        .created
        .lock()
        .unwrap()
        .iter()
        .map(|g| g.game_id.clone())
        .collect();
    assert_eq!(
        created, intents,
        "exactly the recorded games, under their ids"
    );
    let mut seen = HashSet::new();
    for p in &record.ongoing {
        assert!(
            seen.insert(p.white) && seen.insert(p.black),
            "one game per player"
        );
    }
    // a wakes up with its old token: refused.
    let late = a.step(&t.id, stale_token).await.unwrap_err();
    assert!(matches!(late, TournamentsError::Precondition(_)), "{late}");
}

/// A result delivered twice counts once; a player who made no first move forfeits and is paused, and
/// the next wave leaves them out.
async fn results_count_once_and_forfeits_pause(world: World) {
    let a = world.replica("a").await;
    let admin = caller("key:admin", false, true);
    let t = a.create(&admin, Some(&arena_terms(60))).await.unwrap();
    for i in 0..4 {
        a.join(&caller(&format!("guest:p{i}"), false, false), &t.id, "")
            .await
            .unwrap();
    }
    a.tick().await.unwrap();
    a.tick().await.unwrap();
    let (record, _) = a.load(&t.id).await.unwrap().unwrap();
    let [first, second] = [&record.ongoing[0], &record.ongoing[1]];
    let name = |p: PlayerRef| record.entrants[p.0 as usize].player.id.clone();
    let win = finished_event(
        &first.game_id,
        &name(first.white),
        &name(first.black),
        finished::Outcome::WhiteWins,
        30,
    );
    assert!(a.apply_finished(&win).await.unwrap());
    assert!(
        !a.apply_finished(&win).await.unwrap(),
        "a duplicate changes nothing"
    );
    let forfeit = finished_event(
        &second.game_id,
        &name(second.white),
        &name(second.black),
        finished::Outcome::Aborted,
        0,
    );
    assert!(a.apply_finished(&forfeit).await.unwrap());
    let (after, _) = a.load(&t.id).await.unwrap().unwrap();
    let entry = |p: PlayerRef| after.standings.entries[&p].clone();
    assert_eq!(entry(first.white).points, 2);
    assert_eq!(entry(first.white).games.len(), 1, "counted once");
    assert_eq!(entry(first.black).points, 0);
    assert!(entry(second.white).paused, "no first move: paused");
    assert_eq!(
        entry(second.black).points,
        2,
        "the opponent wins the forfeit"
    );
    assert!(after.ongoing.is_empty());
    // A game of no tournament is not ours.
    let other = finished_event("g123", "guest:x", "guest:y", finished::Outcome::Draw, 40);
    assert!(!a.apply_finished(&other).await.unwrap());
    // The next wave pairs the three others (one waits), never the paused player.
    a.tick().await.unwrap();
    let (next, _) = a.load(&t.id).await.unwrap().unwrap();
    assert_eq!(next.ongoing.len(), 1);
    let paused = second.white;
    assert!(
        next.ongoing
            .iter()
            .all(|p| p.white != paused && p.black != paused)
    );
}

/// Berserk (Games' word on the finished entry): a berserk win of at least 14 plies earns the extra
/// point (3), a shorter one does not (2); the result event names the berserk side. The arena's games
/// are created with berserk allowed; an arena created without it says so.
async fn berserk_wins_score_by_their_length(world: World) {
    let a = world.replica("a").await;
    let admin = caller("key:admin", false, true);
    let t = a.create(&admin, Some(&arena_terms(60))).await.unwrap();
    assert!(t.terms.berserk_allowed(), "on by default in an arena");
    let off = a
        .create(
            &admin,
            Some(&pb::TournamentTerms {
                berserk_allowed: Some(false),
                ..arena_terms(60)
            }),
        )
        .await
        .unwrap();
    assert!(!off.terms.berserk_allowed());
    for i in 0..4 {
        a.join(&caller(&format!("guest:p{i}"), false, false), &t.id, "")
            .await
            .unwrap();
    }
    a.tick().await.unwrap();
    a.tick().await.unwrap();
    let (record, _) = a.load(&t.id).await.unwrap().unwrap();
    let [first, second] = [&record.ongoing[0], &record.ongoing[1]];
    let name = |p: PlayerRef| record.entrants[p.0 as usize].player.id.clone();
    let mut events = world
        .live
        .subscribe(&draughts_proto::contract::tournaments::events_channel(
            &t.id,
        ))
        .await
        .unwrap();
    // White went berserk and won in 14 plies: 2 + 1.
    let mut long = finished_event(
        &first.game_id,
        &name(first.white),
        &name(first.black),
        finished::Outcome::WhiteWins,
        14,
    );
    long.white.berserk = true;
    assert!(a.apply_finished(&long).await.unwrap());
    // Black went berserk and won in 13 plies: too quick for the extra point.
    let mut quick = finished_event(
        &second.game_id,
        &name(second.white),
        &name(second.black),
        finished::Outcome::BlackWins,
        13,
    );
    quick.black.berserk = true;
    assert!(a.apply_finished(&quick).await.unwrap());
    let (after, _) = a.load(&t.id).await.unwrap().unwrap();
    let entry = |p: PlayerRef| after.standings.entries[&p].clone();
    assert_eq!(entry(first.white).points, 3, "a berserk win of 14 plies");
    assert_eq!(entry(first.black).points, 0);
    assert_eq!(entry(second.black).points, 2, "a berserk win of 13 plies");
    assert_eq!(entry(second.white).points, 0);
    // The result events say who went berserk.
    let mut results = Vec::new();
    while results.len() < 2 {
        let notice = tokio::time::timeout(Duration::from_secs(5), events.next())
            .await
            .expect("a result event")
            .expect("the subscription is open");
        if let draughts_store::Notice::Message(payload) = notice
            && let Ok(draughts_proto::contract::tournaments::Event::Result {
                game_id,
                white,
                black,
                ..
            }) = draughts_proto::contract::tournaments::decode_event(&payload)
        {
            results.push((game_id, white.berserk, black.berserk));
        }
    }
    assert_eq!(
        results,
        [
            (first.game_id.to_string(), true, false),
            (second.game_id.to_string(), false, true)
        ]
    );
}

/// Guests may not create; accounts up to their bound of open tournaments; admins beyond it.
async fn creators_are_bounded(world: World) {
    let a = world.replica("a").await;
    let guest = caller("guest:g", false, false);
    let e = a.create(&guest, Some(&arena_terms(60))).await.unwrap_err();
    assert!(matches!(e, TournamentsError::Denied(_)), "{e}");
    let ann = caller("user:ann", true, false);
    for _ in 0..3 {
        a.create(&ann, Some(&arena_terms(60))).await.unwrap();
    }
    let e = a.create(&ann, Some(&arena_terms(60))).await.unwrap_err();
    assert!(matches!(e, TournamentsError::Exhausted(_)), "{e}");
    let e = a.create(&ann, Some(&arena_terms(0))).await.unwrap_err();
    assert!(
        matches!(&e, TournamentsError::Invalid(m) if m.contains("arena_duration_seconds")),
        "{e}"
    );
    let admin = caller("key:admin", false, true);
    for _ in 0..4 {
        a.create(&admin, Some(&arena_terms(60))).await.unwrap();
    }
}

/// An arena whose time is up finishes when its last game ends: archived (listed with the finished
/// events, readable), unindexed, its lease key gone.
async fn an_arena_ends_and_is_archived(world: World) {
    let a = world.replica("a").await;
    let admin = caller("key:admin", false, true);
    let t = a.create(&admin, Some(&arena_terms(1))).await.unwrap();
    for i in 0..2 {
        a.join(&caller(&format!("guest:p{i}"), false, false), &t.id, "")
            .await
            .unwrap();
    }
    a.tick().await.unwrap();
    a.tick().await.unwrap();
    let (record, _) = a.load(&t.id).await.unwrap().unwrap();
    assert_eq!(record.ongoing.len(), 1);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    a.tick().await.unwrap();
    let (record, _) = a.load(&t.id).await.unwrap().unwrap();
    assert_eq!(record.state, State::Running, "a game is still in progress");
    let p = &record.ongoing[0];
    let name = |r: PlayerRef| record.entrants[r.0 as usize].player.id.clone();
    let draw = finished_event(
        &p.game_id,
        &name(p.white),
        &name(p.black),
        finished::Outcome::Draw,
        40,
    );
    assert!(a.apply_finished(&draw).await.unwrap());
    a.tick().await.unwrap();
    let done = a.get(&t.id).await.unwrap();
    assert_eq!(done.state, State::Finished);
    assert!(done.ongoing.is_empty());
    assert_eq!(done.next_game, 2, "no pairing after the end");
    let (finished, _) = a
        .list(draughts_tournaments::service::ListState::Finished, 10, "")
        .await
        .unwrap();
    assert_eq!(finished.len(), 1);
    assert_eq!(finished[0].id, t.id);
    assert_eq!(
        finished[0].standings, done.standings,
        "archived with its standings"
    );
    let (running, _) = a
        .list(draughts_tournaments::service::ListState::Running, 10, "")
        .await
        .unwrap();
    assert!(running.is_empty());
    assert!(
        world
            .live
            .get(&draughts_proto::contract::tournaments::lease_key(&t.id))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(a.tick().await.unwrap(), 0, "nothing left to schedule");
}

async fn memory() -> World {
    World::new(Arc::new(draughts_store::MemoryStore::new())).await
}

async fn redis(server: &draughts_testkit::RedisServer, prefix: &str) -> World {
    World::new(Arc::new(
        draughts_store::RedisStore::connect(&server.url(), prefix)
            .await
            .unwrap(),
    ))
    .await
}

#[tokio::test]
async fn memory_a_wave_half_made_is_finished_by_the_next_scheduler() {
    a_wave_half_made_is_finished_by_the_next_scheduler(memory().await).await;
}

#[tokio::test]
async fn memory_results_count_once_and_forfeits_pause() {
    results_count_once_and_forfeits_pause(memory().await).await;
}

#[tokio::test]
async fn memory_berserk_wins_score_by_their_length() {
    berserk_wins_score_by_their_length(memory().await).await;
}

#[tokio::test]
async fn memory_creators_are_bounded() {
    creators_are_bounded(memory().await).await;
}

#[tokio::test]
async fn memory_an_arena_ends_and_is_archived() {
    an_arena_ends_and_is_archived(memory().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_suite() {
    let server = draughts_testkit::RedisServer::start().expect("redis-server");
    a_wave_half_made_is_finished_by_the_next_scheduler(redis(&server, "t1:").await).await;
    results_count_once_and_forfeits_pause(redis(&server, "t2:").await).await;
    creators_are_bounded(redis(&server, "t3:").await).await;
    berserk_wins_score_by_their_length(redis(&server, "t5:").await).await;
    an_arena_ends_and_is_archived(redis(&server, "t4:").await).await;
}
