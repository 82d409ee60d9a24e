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
use draughts_runtime::upstream::UpstreamError;
use draughts_store::LiveStore;

/// Games as the suite needs it: records created games; players may be marked as in a game or as
/// aborters; `create_game` may be made to fail (a replica dying before it).
#[derive(Debug, Default)]
struct FakeGames {
    created: Mutex<Vec<AgreedGame>>,
    busy: Mutex<HashSet<String>>,
    aborters: Mutex<HashSet<String>>,
    fail_creation: Mutex<bool>,
    /// Pairs (sorted, space-separated) Games refuses to seat together: one blocks the other.
    blocked: Mutex<HashSet<String>>,
    /// Invitations made (lobby seeks), by id.
    invitations: Mutex<u64>,
}

#[async_trait]
impl GamesPort for FakeGames {
    async fn create_game(&self, game: &AgreedGame) -> MatchmakingResult<()> {
        if *self.fail_creation.lock().unwrap() {
            return Err(UpstreamError::Unreachable("Games").into());
        }
        if self
            .blocked
            .lock()
            .unwrap()
            .contains(&mm::avoid_member(&game.white, &game.black))
        {
            return Err(UpstreamError::Answered {
                kind: draughts_proto::ErrorKind::FailedPrecondition,
                message: "not available".into(),
                reason: None,
            }
            .into());
        }
        let mut created = self.created.lock().unwrap();
        if !created.iter().any(|g| g.game_id == game.game_id) {
            created.push(game.clone());
        }
        Ok(())
    }
    async fn games_in_progress(&self) -> MatchmakingResult<u64> {
        Ok(self.created.lock().unwrap().len() as u64)
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
        request: pb::CreateInvitationRequest,
    ) -> MatchmakingResult<pb::Invitation> {
        let n = {
            let mut n = self.invitations.lock().unwrap();
            *n += 1;
            *n
        };
        let now = draughts_store::now_unix_ms();
        Ok(pb::Invitation {
            invitation_id: format!("g{n:015x}"),
            expires_at_ms: now
                + if request.expires_in_ms == 0 {
                    600_000
                } else {
                    request.expires_in_ms
                },
            ..Default::default()
        })
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
    async fn cancel(&self, _: &str, id: &str) -> MatchmakingResult<pb::Invitation> {
        Ok(pb::Invitation {
            invitation_id: id.to_owned(),
            ..Default::default()
        })
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
                lobby_seeks_per_address: 10,
                lobby_seek_lives_for: Duration::from_millis(1500),
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
            player: PlayerId::parse(&id).unwrap(),
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
        .insert(ab.player.to_string());
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
    world
        .games
        .busy
        .lock()
        .unwrap()
        .insert(gi.player.to_string());
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
        player: PlayerId::parse("guest:ghost").unwrap(),
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
    // A replica killed between a seek's two writes leaves its pointer to a ticket never stored:
    // the next seek stands (and is the one a reconnect joins); no ticket ever waits unpointed.
    let mi = world.player("mi", 1500).await;
    world
        .live
        .put(
            &mm::player_key(&mi.player),
            bytes::Bytes::from_static(b"t-never-stored"),
            None,
            Some(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    let stood = b.seek(&mi, &pools_of(&[POOL]), None).await.unwrap();
    assert_eq!(
        a.seek(&mi, &pools_of(&[POOL]), None).await.unwrap().id,
        stood.id,
        "a reconnect joins the seek that stood"
    );
    let pointer = world.live.get(&mm::player_key(&mi.player)).await.unwrap();
    assert_eq!(pointer.unwrap().0.as_ref(), stood.id.as_bytes());
    assert!(a.cancel_player(&mi.player, "cancelled").await.unwrap());
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

/// Quick pairing never seats two players of whom one blocks the other (Games refuses; the pair is
/// avoided by later waves), and each is paired with someone else.
async fn blocked_players_are_not_paired(world: World) {
    let a = world.replica("a");
    let ann = world.player("ann", 1500).await;
    let bob = world.player("bob", 1500).await;
    world
        .games
        .blocked
        .lock()
        .unwrap()
        .insert(mm::avoid_member(&ann.player, &bob.player));
    let t1 = a.seek(&ann, &pools_of(&[POOL]), None).await.unwrap();
    let t2 = a.seek(&bob, &pools_of(&[POOL]), None).await.unwrap();
    let pool = a.pool(POOL).unwrap().clone();
    a.wave(&pool).await.unwrap();
    a.recover().await.unwrap();
    assert_eq!(state(&a, &t1.id).await, TicketState::Waiting);
    assert_eq!(state(&a, &t2.id).await, TicketState::Waiting);
    // Later waves do not even try them.
    for _ in 0..3 {
        let report = a.wave(&pool).await.unwrap();
        assert_eq!(report.paired, 0, "{report:?}");
    }
    assert!(world.games.created.lock().unwrap().is_empty());
    let cy = world.player("cy", 1510).await;
    let t3 = a.seek(&cy, &pools_of(&[POOL]), None).await.unwrap();
    a.wave(&pool).await.unwrap();
    a.recover().await.unwrap();
    let states = [
        state(&a, &t1.id).await,
        state(&a, &t2.id).await,
        state(&a, &t3.id).await,
    ];
    assert!(game_of(&states[2]).is_some(), "cy is paired: {states:?}");
    assert_eq!(
        states[..2].iter().filter(|s| game_of(s).is_some()).count(),
        1,
        "with one of ann and bob: {states:?}"
    );
}

fn lobby_request(expires_in_ms: u64, correspondence: bool) -> pb::CreateLobbySeekRequest {
    pb::CreateLobbySeekRequest {
        rules: Some(pb::RuleSet {
            variant: pb::Variant::International as i32,
            options: None,
        }),
        time_control: Some(if correspondence {
            pb::TimeControl {
                kind: Some(pb::time_control::Kind::Correspondence(pb::Correspondence {
                    days_per_move: 3,
                })),
            }
        } else {
            pb::TimeControl {
                kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                    base_ms: 180_000,
                    increment_ms: 2_000,
                })),
            }
        }),
        expires_in_ms,
        ..Default::default()
    }
}

/// Lobby seeks: bounded per player and per address even under concurrent calls, listed newest
/// first from the index, real-time ones lapsing when their owner goes quiet, correspondence ones
/// standing; guests' correspondence seeks at most a day.
async fn lobby_seeks_are_bounded_listed_and_lapse(world: World) {
    use draughts_matchmaking::service::MatchmakingCore;
    let core = MatchmakingCore::new(world.replica("a"));
    let ann = world.player("ann", 1500).await;
    // Ten at once from one player: exactly three stand.
    let tries = futures_util::future::join_all(
        (0..10).map(|_| core.create_lobby_seek(&ann, "addr:10.0.0.1", "", lobby_request(0, false))),
    )
    .await;
    assert_eq!(tries.iter().filter(|r| r.is_ok()).count(), 3, "{tries:?}");
    assert!(
        tries
            .iter()
            .any(|r| matches!(r, Err(e) if e.to_string().contains("per player")))
    );
    // Per address: players sharing an address get ten in all.
    let mut made = 3;
    for i in 0..6 {
        let p = world.player(&format!("p{i}"), 1500).await;
        for _ in 0..3 {
            if core
                .create_lobby_seek(&p, "addr:10.0.0.1", "", lobby_request(0, false))
                .await
                .is_ok()
            {
                made += 1;
            }
        }
    }
    assert_eq!(made, 10, "ten from one address");
    let other = world.player("other", 1500).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let corr = core
        .create_lobby_seek(&other, "addr:10.0.0.2", "", lobby_request(0, true))
        .await
        .unwrap();
    let listed = core.list_lobby_seeks(None, 50).await.unwrap();
    assert_eq!(listed.len(), 11);
    assert_eq!(listed[0].id, corr.id, "newest first");
    assert!(
        listed
            .windows(2)
            .all(|w| w[0].created_ms >= w[1].created_ms)
    );
    assert_eq!(core.list_lobby_seeks(None, 4).await.unwrap().len(), 4);
    // Nobody keeps the real-time seeks alive: they lapse (1.5 s here), the correspondence one stands.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    core.prune_lobby().await.unwrap();
    let listed = core.list_lobby_seeks(None, 50).await.unwrap();
    assert_eq!(
        listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        [corr.id.as_str()]
    );
    // Their places are free again; a heartbeat (any call of the owner) keeps a seek alive.
    let kept = core
        .create_lobby_seek(&ann, "addr:10.0.0.1", "", lobby_request(0, false))
        .await
        .unwrap();
    // (3.2 s in all, more than twice its life without a heartbeat.)
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        core.seen(&ann.player).await;
        core.prune_lobby().await.unwrap();
    }
    assert!(
        core.list_lobby_seeks(None, 50)
            .await
            .unwrap()
            .iter()
            .any(|s| s.id == kept.id)
    );
    // A guest's correspondence seek stands a day at most.
    let guest = Caller {
        guest: true,
        ..world.player("guesty", 1500).await
    };
    let week = 7 * 24 * 3600 * 1000;
    let g = core
        .create_lobby_seek(&guest, "addr:10.0.0.3", "", lobby_request(week, true))
        .await
        .unwrap();
    assert!(g.expires_ms <= draughts_store::now_unix_ms() + 24 * 3600 * 1000);
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
    blocked_players_are_not_paired,
    lobby_seeks_are_bounded_listed_and_lapse,
);

/// A page of the lobby costs O(page) Redis commands, however full the lobby is (an anonymous call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lobby_page_costs_commands_in_proportion_to_the_page() {
    use draughts_matchmaking::service::MatchmakingCore;
    let server =
        draughts_testkit::RedisServer::start().expect("redis-server (install: redis-server)");
    let live = draughts_store::open_live_store(&server.url(), "mm-page:")
        .await
        .unwrap();
    let world = World::new(live);
    let core = MatchmakingCore::new(world.replica("a"));
    for i in 0..100 {
        let p = world.player(&format!("p{i}"), 1500).await;
        for _ in 0..3 {
            core.create_lobby_seek(&p, &format!("addr:10.0.{i}.1"), "", lobby_request(0, true))
                .await
                .unwrap();
        }
    }
    assert_eq!(core.list_lobby_seeks(None, 200).await.unwrap().len(), 200);
    for page in [10usize, 50] {
        let before = draughts_testkit::RedisStats::read(server.port());
        let listed = core.list_lobby_seeks(None, page).await.unwrap();
        let cost = draughts_testkit::RedisStats::read(server.port())
            .since(&before)
            .total_calls();
        assert_eq!(listed.len(), page);
        // One read of the index, one per seek (and the INFO call that measures).
        assert!(
            cost <= page as u64 + 3,
            "a page of {page} of 300 seeks cost {cost} commands"
        );
    }
}
