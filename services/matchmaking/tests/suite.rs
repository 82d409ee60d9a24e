//! ONE behavioural suite of quick pairing, run on the memory store and on a real `redis-server`
//! (started by the test): seeks, waves, fair play, several replicas sharing one store, a replica that
//! dies in the middle of a wave. Games and Ratings are fakes here (the gRPC flow through the real
//! services is `services/draughtsd/tests/matchmaking.rs`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use draughts_auth::Identities;
use draughts_matchmaking::MatchmakingResult;
use draughts_matchmaking::core::{Caller, Matchmaker, Settings};
use draughts_matchmaking::pairing::Rules;
use draughts_matchmaking::pools::{Pool, pools};
use draughts_matchmaking::ports::{AgreedGame, GamesPort, PairingRating, PlayerState, RatingsPort};
use draughts_proto::contract::matchmaking::{self as mm, TicketState};
use draughts_proto::ids::PlayerId;
use draughts_proto::pb;
use draughts_store::LiveStore;

/// Games as the suite needs it: records created games; players may be marked as in a game or as
/// aborters; `create_game` may be made to fail (a replica dying before it).
#[derive(Debug, Default)]
struct FakeGames {
    created: Mutex<Vec<AgreedGame>>,
    busy: Mutex<HashSet<String>>,
    aborters: Mutex<HashSet<String>>,
    fail_creation: Mutex<bool>,
}

#[async_trait]
impl GamesPort for FakeGames {
    async fn create_game(&self, game: &AgreedGame) -> MatchmakingResult<()> {
        if *self.fail_creation.lock().unwrap() {
            return Err(draughts_matchmaking::MatchmakingError::Unreachable("Games"));
        }
        let mut created = self.created.lock().unwrap();
        if !created.iter().any(|g| g.game_id == game.game_id) {
            created.push(game.clone());
        }
        Ok(())
    }
    async fn player_state(&self, player: &str) -> MatchmakingResult<PlayerState> {
        let mut live_games: Vec<String> = self
            .created
            .lock()
            .unwrap()
            .iter()
            .filter(|g| g.white == player || g.black == player)
            .map(|g| g.game_id.clone())
            .collect();
        if self.busy.lock().unwrap().contains(player) {
            live_games.push("elsewhere".into());
        }
        Ok(PlayerState {
            live_games,
            recent_aborts: if self.aborters.lock().unwrap().contains(player) {
                4
            } else {
                0
            },
        })
    }
    async fn invite(
        &self,
        _: &str,
        _: pb::CreateInvitationRequest,
    ) -> MatchmakingResult<pb::Invitation> {
        unreachable!("not used by the suite")
    }
    async fn rematch(&self, _: &str, _: &str) -> MatchmakingResult<pb::Invitation> {
        unreachable!("not used by the suite")
    }
    async fn accept(&self, _: &str, _: &str, _: &str) -> MatchmakingResult<pb::GameView> {
        unreachable!("not used by the suite")
    }
    async fn decline(&self, _: &str, _: &str, _: i32) -> MatchmakingResult<pb::Invitation> {
        unreachable!("not used by the suite")
    }
    async fn cancel(&self, _: &str, _: &str) -> MatchmakingResult<pb::Invitation> {
        unreachable!("not used by the suite")
    }
}

#[derive(Debug, Default)]
struct FakeRatings {
    ratings: Mutex<HashMap<String, i32>>,
}

#[async_trait]
impl RatingsPort for FakeRatings {
    async fn rating(&self, player: &str, _: &Pool) -> MatchmakingResult<PairingRating> {
        Ok(PairingRating {
            rating: *self.ratings.lock().unwrap().get(player).unwrap_or(&1500),
            provisional: false,
        })
    }
}

struct World {
    live: Arc<dyn LiveStore>,
    games: Arc<FakeGames>,
    ratings: Arc<FakeRatings>,
    identities: Identities,
}

const POOL: &str = "english-3+2-rated";

impl World {
    fn new(live: Arc<dyn LiveStore>) -> World {
        World {
            identities: Identities::new(live.clone()),
            live,
            games: Arc::default(),
            ratings: Arc::default(),
        }
    }

    fn replica(&self, name: &str) -> Matchmaker {
        Matchmaker {
            live: self.live.clone(),
            pools: Arc::new(
                pools(
                    &["english".into(), "international".into()],
                    &["3+2".into(), "corr3".into()],
                )
                .unwrap(),
            ),
            settings: Settings {
                wave_interval: Duration::from_millis(100),
                seek_ttl: Duration::from_secs(5),
                lease_ttl: Duration::from_millis(300),
                rules: Rules {
                    base_gap: 100,
                    widen_per_wave: 50,
                    max_gap: 500,
                    provisional_extra: 200,
                    aborter_waves: 3,
                },
                max_pools_per_seek: 8,
                commit_retry: Duration::from_millis(200),
            },
            games: self.games.clone(),
            ratings: self.ratings.clone(),
            identities: self.identities.clone(),
            replica: name.into(),
        }
    }

    async fn player(&self, name: &str, rating: i32) -> Caller {
        let id = format!("player:{name}");
        self.identities
            .record(&PlayerId::parse(&id).unwrap(), name, None)
            .await
            .unwrap();
        self.ratings.lock_set(&id, rating);
        Caller {
            player: id,
            name: name.into(),
            guest: false,
        }
    }
}

trait LockSet {
    fn lock_set(&self, id: &str, rating: i32);
}
impl LockSet for Arc<FakeRatings> {
    fn lock_set(&self, id: &str, rating: i32) {
        self.ratings.lock().unwrap().insert(id.into(), rating);
    }
}

async fn state(m: &Matchmaker, ticket: &str) -> TicketState {
    m.load(ticket).await.unwrap().unwrap().0.state
}

fn game_of(state: &TicketState) -> Option<&str> {
    match state {
        TicketState::Paired { game_id, .. } => Some(game_id),
        _ => None,
    }
}

fn pools_of(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

async fn two_seekers_are_paired_once_across_replicas(world: World) {
    let (a, b) = (world.replica("a"), world.replica("b"));
    let ann = world.player("ann", 1500).await;
    let bob = world.player("bob", 1560).await;
    let t1 = a.seek(&ann, &pools_of(&[POOL]), None).await.unwrap();
    let t2 = b.seek(&bob, &pools_of(&[POOL]), None).await.unwrap();
    let pool = a.pool(POOL).unwrap().clone();
    // Both replicas run the wave at once: one holds the lease, the other does nothing.
    let (ra, rb) = tokio::join!(a.wave(&pool), b.wave(&pool));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert!(ra.ran != rb.ran, "exactly one replica runs the pool's wave");
    assert_eq!(ra.paired + rb.paired, 1);
    let (s1, s2) = (state(&a, &t1.id).await, state(&b, &t2.id).await);
    assert_eq!(game_of(&s1), game_of(&s2));
    assert!(game_of(&s1).is_some());
    let created = world.games.created.lock().unwrap().clone();
    assert_eq!(created.len(), 1);
    assert_ne!(created[0].white, created[0].black);
    assert_eq!(
        world.live.schedule_len(&mm::pool_set(POOL)).await.unwrap(),
        0
    );
    // A player in a game is not paired again: the same seek opened again is told of its pairing
    // (a stream that broke at that moment); any other seek is refused.
    let reopened = a.seek(&ann, &pools_of(&[POOL]), None).await.unwrap();
    assert_eq!(reopened.id, t1.id);
    assert_eq!(game_of(&reopened.state), game_of(&s1));
    assert_eq!(world.games.created.lock().unwrap().len(), 1);
    let again = a
        .seek(&ann, &pools_of(&["international-3+2-rated"]), None)
        .await;
    assert!(
        matches!(
            again,
            Err(draughts_matchmaking::MatchmakingError::Precondition(_))
        ),
        "{again:?}"
    );
}

async fn gaps_widen_with_missed_waves_and_ranges_hold(world: World) {
    let m = world.replica("a");
    let pool = m.pool(POOL).unwrap().clone();
    let cy = world.player("cy", 1500).await;
    let di = world.player("di", 1700).await;
    let t1 = m.seek(&cy, &pools_of(&[POOL]), None).await.unwrap();
    let t2 = m.seek(&di, &pools_of(&[POOL]), None).await.unwrap();
    m.wave(&pool).await.unwrap();
    assert_eq!(
        state(&m, &t1.id).await,
        TicketState::Waiting,
        "200 apart: not yet"
    );
    // Two missed waves (100 ms each) widen both allowances to 200.
    tokio::time::sleep(Duration::from_millis(230)).await;
    m.wave(&pool).await.unwrap();
    assert!(game_of(&state(&m, &t1.id).await).is_some());
    assert!(game_of(&state(&m, &t2.id).await).is_some());
    // An explicit range is never widened.
    let ed = world.player("ed", 1500).await;
    let fy = world.player("fy", 1520).await;
    let t3 = m
        .seek(&ed, &pools_of(&[POOL]), Some((1600, 2000)))
        .await
        .unwrap();
    m.seek(&fy, &pools_of(&[POOL]), None).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    m.wave(&pool).await.unwrap();
    assert_eq!(state(&m, &t3.id).await, TicketState::Waiting);
}

async fn fair_play_rules(world: World) {
    let m = world.replica("a");
    let pool = m.pool(POOL).unwrap().clone();
    // An aborter waits `aborter_waves` before meeting a non-aborter.
    let ab = world.player("ab", 1500).await;
    world
        .games
        .aborters
        .lock()
        .unwrap()
        .insert(ab.player.clone());
    let ok = world.player("ok", 1500).await;
    let t1 = m.seek(&ab, &pools_of(&[POOL]), None).await.unwrap();
    let t2 = m.seek(&ok, &pools_of(&[POOL]), None).await.unwrap();
    assert!(m.load(&t1.id).await.unwrap().unwrap().0.aborter);
    m.wave(&pool).await.unwrap();
    assert_eq!(state(&m, &t1.id).await, TicketState::Waiting);
    tokio::time::sleep(Duration::from_millis(330)).await;
    m.wave(&pool).await.unwrap();
    assert!(game_of(&state(&m, &t2.id).await).is_some(), "after 3 waves");
    // A player who started a game meanwhile (an accepted challenge) is not paired: the seek ends.
    let gi = world.player("gi", 1500).await;
    let ho = world.player("ho", 1500).await;
    let t3 = m.seek(&gi, &pools_of(&[POOL]), None).await.unwrap();
    let t4 = m.seek(&ho, &pools_of(&[POOL]), None).await.unwrap();
    world.games.busy.lock().unwrap().insert(gi.player.clone());
    m.wave(&pool).await.unwrap();
    assert!(
        matches!(state(&m, &t3.id).await, TicketState::Ended { reason, .. } if reason == "in_game")
    );
    assert_eq!(
        state(&m, &t4.id).await,
        TicketState::Waiting,
        "the other waits on"
    );
    // An identity Auth does not know (a guest whose token expired) is never given a game.
    let ghost = Caller {
        player: "guest:ghost".into(),
        name: "Ghost".into(),
        guest: false,
    };
    let t5 = m.seek(&ghost, &pools_of(&[POOL]), None).await.unwrap();
    m.wave(&pool).await.unwrap();
    assert!(
        matches!(state(&m, &t5.id).await, TicketState::Ended { reason, .. } if reason == "unknown_player")
    );
    assert_eq!(state(&m, &t4.id).await, TicketState::Waiting);
    let before = world.games.created.lock().unwrap().len();
    assert!(
        world
            .games
            .created
            .lock()
            .unwrap()
            .iter()
            .all(|g| g.white != "guest:ghost" && g.black != "guest:ghost")
    );
    assert_eq!(before, 1);
}

async fn several_pools_first_pairing_wins_and_reconnects_join(world: World) {
    let (a, b) = (world.replica("a"), world.replica("b"));
    let corr = "english-corr3-rated";
    let intl = "international-3+2-rated";
    let ivy = world.player("ivy", 1500).await;
    let t = a
        .seek(&ivy, &pools_of(&[POOL, corr, intl]), None)
        .await
        .unwrap();
    // A reconnect to another replica with the same pools joins the same seek.
    let again = b
        .seek(&ivy, &pools_of(&[intl, POOL, corr]), None)
        .await
        .unwrap();
    assert_eq!(again.id, t.id);
    for p in [POOL, corr, intl] {
        assert_eq!(
            world.live.schedule_len(&mm::pool_set(p)).await.unwrap(),
            1,
            "{p}"
        );
    }
    let jo = world.player("jo", 1510).await;
    let jo_ticket = b.seek(&jo, &pools_of(&[corr]), None).await.unwrap();
    b.wave(a.pool(corr).unwrap()).await.unwrap();
    assert!(matches!(state(&a, &t.id).await, TicketState::Paired { pool, .. } if pool == corr));
    // Jo's stream broke at the moment of the pairing: opened again, it is told of the pairing (the
    // same ticket, paired, the same game), not given a second seek.
    let reopened = a.seek(&jo, &pools_of(&[corr]), None).await.unwrap();
    assert_eq!(reopened.id, jo_ticket.id);
    assert_eq!(
        game_of(&reopened.state),
        game_of(&state(&a, &t.id).await),
        "the pairing's game"
    );
    assert!(matches!(reopened.state, TicketState::Paired { .. }));
    for p in [POOL, corr, intl] {
        assert_eq!(
            world.live.schedule_len(&mm::pool_set(p)).await.unwrap(),
            0,
            "{p} left"
        );
    }
    // Seeking other pools replaces a waiting seek.
    let ka = world.player("ka", 1500).await;
    let first = a.seek(&ka, &pools_of(&[POOL]), None).await.unwrap();
    let second = a.seek(&ka, &pools_of(&[intl]), None).await.unwrap();
    assert_ne!(first.id, second.id);
    assert!(
        matches!(state(&a, &first.id).await, TicketState::Ended { reason, .. } if reason == "cancelled")
    );
    assert_eq!(
        world.live.schedule_len(&mm::pool_set(POOL)).await.unwrap(),
        0
    );
    // A seek nobody renews lapses (its replica died and nobody reconnected).
    let mut short = a.clone();
    short.settings.seek_ttl = Duration::from_millis(50);
    let lo = world.player("lo", 2900).await;
    let lapsing = short.seek(&lo, &pools_of(&[POOL]), None).await.unwrap();
    tokio::time::sleep(Duration::from_millis(80)).await;
    let report = short.wave(a.pool(POOL).unwrap()).await.unwrap();
    assert_eq!(report.lapsed, 1);
    assert!(
        matches!(state(&a, &lapsing.id).await, TicketState::Ended { reason, .. } if reason == "expired")
    );
}

async fn a_replica_dying_in_a_wave_loses_nothing(world: World) {
    let (a, b) = (world.replica("a"), world.replica("b"));
    let pool = a.pool(POOL).unwrap().clone();
    let mo = world.player("mo", 1500).await;
    let ny = world.player("ny", 1500).await;
    let t1 = a.seek(&mo, &pools_of(&[POOL]), None).await.unwrap();
    let t2 = a.seek(&ny, &pools_of(&[POOL]), None).await.unwrap();
    // Replica a claims the pair and dies before the game exists (Games unreachable for it).
    *world.games.fail_creation.lock().unwrap() = true;
    assert!(a.wave(&pool).await.is_ok());
    assert!(matches!(
        state(&a, &t1.id).await,
        TicketState::Matching { .. }
    ));
    *world.games.fail_creation.lock().unwrap() = false;
    // b cannot take the lease yet, nor pair the claimed tickets; after the commit's retry time it
    // finishes the pairing a began.
    assert!(!b.wave(&pool).await.unwrap().ran);
    assert_eq!(b.recover().await.unwrap(), 0, "not due yet");
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(b.recover().await.unwrap(), 1);
    let (s1, s2) = (state(&b, &t1.id).await, state(&b, &t2.id).await);
    assert_eq!(game_of(&s1), game_of(&s2));
    assert_eq!(world.games.created.lock().unwrap().len(), 1);
    // Finishing again (another replica taking the same commit late) creates nothing more.
    assert_eq!(b.recover().await.unwrap(), 0);
    assert_eq!(world.games.created.lock().unwrap().len(), 1);
    // After the lease lapses, b runs the waves, with a higher fencing token.
    tokio::time::sleep(Duration::from_millis(350)).await;
    let t_a = a.lease(POOL).await.unwrap();
    assert!(t_a.is_some(), "a's lease lapsed: a takes it back");
    assert!(b.lease(POOL).await.unwrap().is_none());
    tokio::time::sleep(Duration::from_millis(350)).await;
    let t_b = b.lease(POOL).await.unwrap().unwrap();
    assert!(t_b > t_a.unwrap(), "fencing tokens grow");
}

macro_rules! suite {
    ($($check:ident),* $(,)?) => {
        mod memory {
            use super::*;
            $(
                #[tokio::test]
                async fn $check() {
                    super::$check(World::new(Arc::new(draughts_store::MemoryStore::new()))).await;
                }
            )*
        }
        mod redis {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let server = draughts_testkit::RedisServer::start().expect("redis-server (install: redis-server)");
                    let live = draughts_store::open_live_store(&server.url(), "mm-test:").await.unwrap();
                    super::$check(World::new(live)).await;
                }
            )*
        }
        /// On a 3-primary Redis Cluster (one per test binary, a key prefix per check): every ticket
        /// write with its pools and commits is one script in the `{mm}` slot.
        mod cluster {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let cluster = draughts_testkit::RedisCluster::shared().expect("redis cluster (install: redis-server)");
                    let prefix = format!("mm-{}:", stringify!($check));
                    let live = draughts_store::open_live_store(&cluster.url(), &prefix).await.unwrap();
                    super::$check(World::new(live)).await;
                }
            )*
        }
    };
}

suite!(
    two_seekers_are_paired_once_across_replicas,
    gaps_widen_with_missed_waves_and_ranges_hold,
    fair_play_rules,
    several_pools_first_pairing_wins_and_reconnects_join,
    a_replica_dying_in_a_wave_loses_nothing,
);
