//! A Swiss event whose rounds start at a fixed interval (SWISS_ROUND_START_FIXED_INTERVAL), through
//! the service's core on the memory store and on a real `redis-server` (Games and Ratings faked): the
//! rule as docs/tournaments.md states it, "`round_interval_seconds` after the previous round started,
//! or when its last game ends if later". A round whose interval has passed while a game of the previous
//! round is still going does not start: that game counts when it ends, and the next round starts on
//! the scheduler's next turn, so no player is ever in two games at once and the round is paired with
//! every result known; a round whose games all end early waits for its interval.
//!
//! The interval is at least 60 s; instead of waiting, the test moves the round's start back in the
//! stored record (as if the time had passed).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use draughts_proto::contract::finished::{self, EndReason, FinishedV1, Player};
use draughts_proto::contract::tournaments as contract;
use draughts_proto::pb;
use draughts_store::{Bytes, Database, LiveStore};
use draughts_tournaments::ports::{GamesPort, NewGame, RatingsPort};
use draughts_tournaments::service::{Caller, Settings, TournamentsCore};
use draughts_tournaments::store::{Archive, Pairing, Record, State};
use draughts_tournaments::terms::{Limits, Terms};
use draughts_tournaments::{PlayerRef, TournamentsResult};

#[derive(Debug, Default)]
struct Games {
    created: Mutex<Vec<NewGame>>,
}

#[async_trait]
impl GamesPort for Games {
    async fn create_game(&self, _: &Terms, game: &NewGame) -> TournamentsResult<()> {
        let mut created = self.created.lock().unwrap();
        if !created.iter().any(|g| g.game_id == game.game_id) {
            created.push(game.clone());
        }
        Ok(())
    }
}

#[derive(Debug)]
struct Ratings;

#[async_trait]
impl RatingsPort for Ratings {
    async fn rating(&self, _: &str, _: &Terms) -> TournamentsResult<i32> {
        Ok(1500)
    }
}

const INTERVAL_SECS: u32 = 60;

async fn core(live: Arc<dyn LiveStore>, games: Arc<Games>) -> TournamentsCore {
    TournamentsCore::new(
        live,
        Archive::new(Database::connect("sqlite::memory:").await.unwrap())
            .await
            .unwrap(),
        games,
        Arc::new(Ratings),
        Settings {
            wave_interval: Duration::from_millis(1),
            tick: Duration::from_millis(10),
            lease_ttl: Duration::from_secs(5),
            max_open_per_creator: 3,
            max_open_total: 10_000,
            limits: Limits { min_arena_secs: 1 },
            finished_ttl: Duration::from_secs(60),
        },
        "a".into(),
    )
}

fn caller(id: &str, admin: bool) -> Caller {
    Caller {
        player: Player {
            name: id.into(),
            ..Player::new(id.parse().expect("a player id"))
        },
        account: true,
        admin,
    }
}

fn terms() -> pb::TournamentTerms {
    pb::TournamentTerms {
        name: "Interval Swiss".into(),
        kind: pb::TournamentKind::Swiss as i32,
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
        rated: false,
        start: Some(pb::tournament_terms::Start::StartInSeconds(3600)),
        swiss_rounds: 3,
        round_start: pb::SwissRoundStart::FixedInterval as i32,
        round_interval_seconds: INTERVAL_SECS,
        ..Default::default()
    }
}

/// White wins `pairing`.
async fn finish(core: &TournamentsCore, record: &Record, pairing: &Pairing) {
    let id = |p: PlayerRef| Player::new(record.entrants[p.0 as usize].player.id.clone());
    let event = FinishedV1 {
        game_id: pairing.game_id.parse().unwrap(),
        variant: draughts_engine::Variant::English,
        options: String::new(),
        rated: false,
        white: id(pairing.white),
        black: id(pairing.black),
        outcome: finished::Outcome::WhiteWins,
        reason: EndReason::Resignation,
        result: String::new(),
        time_control: None,
        plies: 30,
        finished_at_ms: 0,
        pdn: String::new(),
        traceparent: None,
    };
    assert!(core.apply_finished(&event).await.unwrap(), "applied");
}

/// The time passes: the current round started `INTERVAL_SECS` + 1 s ago.
async fn interval_passes(live: &dyn LiveStore, core: &TournamentsCore, id: &str) {
    let (mut record, version) = core.load(id).await.unwrap().unwrap();
    record.round_started_at_ms -= u64::from(INTERVAL_SECS) * 1000 + 1000;
    live.put(
        &contract::record_key(id),
        Bytes::from(record.encode()),
        Some(version),
        None,
    )
    .await
    .unwrap();
}

async fn rounds_wait_for_the_interval_and_for_the_last_game(live: Arc<dyn LiveStore>) {
    let games = Arc::new(Games::default());
    let a = core(live.clone(), games.clone()).await;
    let admin = caller("key:admin", true);
    let t = a.create(&admin, Some(&terms())).await.unwrap();
    for i in 0..4 {
        a.join(&caller(&format!("player:p{i}"), false), &t.id, "")
            .await
            .unwrap();
    }
    a.start(&admin, &t.id).await.unwrap();
    a.tick().await.unwrap(); // started
    a.tick().await.unwrap(); // round 1
    let (r1, _) = a.load(&t.id).await.unwrap().unwrap();
    assert_eq!(r1.state, State::Running);
    assert_eq!(r1.standings.round, 1);
    assert_eq!(r1.ongoing.len(), 2);
    let (done, going) = (&r1.ongoing[0], &r1.ongoing[1]);

    // One game of round 1 ends; the other goes on past the interval: no round 2 yet.
    finish(&a, &r1, done).await;
    a.tick().await.unwrap();
    interval_passes(&*live, &a, &t.id).await;
    for _ in 0..3 {
        a.tick().await.unwrap();
    }
    let (still, _) = a.load(&t.id).await.unwrap().unwrap();
    assert_eq!(
        still.standings.round, 1,
        "round 2 waits for the last game of round 1"
    );
    assert_eq!(still.ongoing.len(), 1);
    assert_eq!(still.ongoing[0].game_id, going.game_id);
    assert_eq!(
        games.created.lock().unwrap().len(),
        2,
        "nobody paired again"
    );

    // It ends: it counts, and round 2 starts on the next turn (its interval is over).
    finish(&a, &still, going).await;
    a.tick().await.unwrap();
    let (r2, _) = a.load(&t.id).await.unwrap().unwrap();
    assert_eq!(
        r2.standings.round, 2,
        "round 2 follows the last game at once"
    );
    assert_eq!(r2.ongoing.len(), 2);
    let played =
        |r: &Record| -> usize { r.standings.entries.values().map(|e| e.games.len()).sum() };
    assert_eq!(played(&r2), 4, "both games of round 1 counted, once");
    assert!(r2.standings.applied.contains(&going.game_id));
    let met = |p: &Pairing| {
        let mut pair = [p.white, p.black];
        pair.sort();
        pair
    };
    for p in &r2.ongoing {
        assert!(
            r1.ongoing.iter().all(|q| met(q) != met(p)),
            "no pair meets twice"
        );
    }

    // Round 2 ends at once: round 3 waits for its interval.
    for p in r2.ongoing.clone() {
        finish(&a, &r2, &p).await;
    }
    for _ in 0..3 {
        a.tick().await.unwrap();
    }
    let (early, _) = a.load(&t.id).await.unwrap().unwrap();
    assert_eq!(early.standings.round, 2, "round 3 waits for its interval");
    assert!(early.ongoing.is_empty());
    interval_passes(&*live, &a, &t.id).await;
    a.tick().await.unwrap();
    let (r3, _) = a.load(&t.id).await.unwrap().unwrap();
    assert_eq!(r3.standings.round, 3, "round 3 at its interval");
    assert_eq!(r3.ongoing.len(), 2);
    assert_eq!(played(&r3), 8);
    assert_eq!(games.created.lock().unwrap().len(), 6);
}

#[tokio::test]
async fn memory_rounds_wait_for_the_interval_and_for_the_last_game() {
    rounds_wait_for_the_interval_and_for_the_last_game(
        Arc::new(draughts_store::MemoryStore::new()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_rounds_wait_for_the_interval_and_for_the_last_game() {
    let server = draughts_testkit::RedisServer::start().expect("redis-server");
    let live = draughts_store::RedisStore::connect(&server.url(), "si:")
        .await
        .unwrap();
    rounds_wait_for_the_interval_and_for_the_last_game(Arc::new(live)).await;
}
