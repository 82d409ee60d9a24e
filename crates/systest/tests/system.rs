//! The platform as a distributed system under faults (issue 15, point 5): every service in its own
//! processes, two replicas of each stateless service (validation with Games and Auth, ratings,
//! analysis API, matchmaking), three analysis workers, one real Redis (append-only file) and one real
//! PostgreSQL, all started by the test. A scripted scenario drives it through the public API only:
//! players and guests seek in several pools, get paired, play complete games with moves chosen by
//! `Analysis.BestMove`, some play the computer (`ai:1`, moved by the server), spectators watch every
//! game, results reach the ratings and the leaderboards, finished games are analysed. Faults while it
//! runs: one replica of each service SIGKILLed and restarted, an analysis worker SIGKILLed in the middle
//! of its job and restarted, Redis restarted. At the end: every game finished, every rated game rated
//! exactly once (in each player's history and in the games count), every analysis job done with every
//! ply, every watcher saw every event of its game in order, every move the server confirmed is in its
//! game; a summary table is printed.
//!
//! Beside the honest traffic, abusers run all along (issue 38): a guest keeping more BestMove calls in
//! flight than its bound, guests looping "a game against `ai:8`, aborted", "a lobby seek,
//! cancelled" and "a pool seek, dropped". Any refusal of an honest call fails the scenario, as does
//! a computer losing on time.
//!
//! The bounded version runs by default (a few minutes on 2 cores); `DRAUGHTS_SYSTEM_LONG=1` plays more
//! games (opt-in). Needs the workspace's binaries (`cargo test --workspace` builds them).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use draughts_proto::pb;
use draughts_systest::{Platform, Replicas, Scale, authed, player_token, with_retries};
use pb::analysis_client::AnalysisClient;
use pb::games_client::GamesClient;
use pb::matchmaking_client::MatchmakingClient;
use pb::ratings_client::RatingsClient;

/// A call's budget of retries across replicas (a restart takes about a second).
const RETRY_WITHIN: Duration = Duration::from_secs(60);
/// A game longer than this is resigned by the side to move (level-1 play can wander).
const MAX_PLIES: usize = 300;

#[derive(Clone, Copy, Debug)]
struct Settings {
    /// Signed-in players per rated pool (paired two by two).
    rated_per_pool: usize,
    /// Guests per casual pool.
    casual_per_pool: usize,
    /// Games of a signed-in player against `ai:1`.
    computer_games: usize,
    /// Nodes per ply of the analysis of each finished game.
    nodes_per_ply: u64,
    /// The whole scenario's bound.
    timeout: Duration,
}

impl Settings {
    fn from_env() -> Settings {
        if std::env::var("DRAUGHTS_SYSTEM_LONG").is_ok_and(|v| v == "1") {
            Settings {
                rated_per_pool: 16,
                casual_per_pool: 12,
                computer_games: 6,
                nodes_per_ply: 40_000,
                timeout: Duration::from_secs(1800),
            }
        } else {
            Settings {
                rated_per_pool: 6,
                casual_per_pool: 4,
                computer_games: 2,
                nodes_per_ply: 20_000,
                timeout: Duration::from_secs(600),
            }
        }
    }
}

const RATED_POOLS: [(&str, pb::Variant); 2] = [
    ("english-3+2-rated", pb::Variant::English),
    ("russian-3+2-rated", pb::Variant::Russian),
];
const CASUAL_POOLS: [&str; 2] = ["international-3+2-casual", "english-3+2-casual"];

#[derive(Debug, Default)]
struct Counters {
    seeks_opened: AtomicU64,
    paired: AtomicU64,
    games_started: AtomicU64,
    games_finished: AtomicU64,
    moves: AtomicU64,
    retries: AtomicU64,
    stale_moves: AtomicU64,
    watch_reconnects: AtomicU64,
    seek_reconnects: AtomicU64,
    /// The abusers (guests flooding BestMove, churning computer games and lobby seeks): answers and
    /// refusals they got.
    abuse_answered: AtomicU64,
    abuse_refused: AtomicU64,
    /// The computer's replies in games against people: from the position becoming its turn (as
    /// the driver saw it) to its move, milliseconds.
    computer_replies_ms: Mutex<Vec<u64>>,
}

#[derive(Debug, Clone)]
struct GameInfo {
    rated: bool,
    variant: pb::Variant,
    white: String,
    black: String,
    /// Moves the server confirmed (PlayMove answered OK): ply -> notation.
    confirmed: BTreeMap<u32, String>,
}

#[derive(Debug, Default)]
struct World {
    tokens: HashMap<String, String>,
    games: BTreeMap<String, GameInfo>,
}

type Shared = Arc<Mutex<World>>;

#[derive(Clone, Debug)]
struct Clients {
    games: Replicas,
    analysis: Replicas,
    ratings: Replicas,
    matchmaking: Replicas,
    counters: Arc<Counters>,
}

impl Clients {
    fn count_retries(&self, retries: u32) {
        self.counters
            .retries
            .fetch_add(u64::from(retries), Ordering::Relaxed);
    }

    async fn get_game(&self, i: usize, id: &str) -> pb::GameView {
        let (r, retries) = draughts_systest::get_game(&self.games, i, RETRY_WITHIN, id).await;
        self.count_retries(retries);
        r.unwrap_or_else(|e| panic!("GetGame {id}: {e}"))
    }
}

async fn new_guest(clients: &Clients, i: usize, name: &str) -> (String, String) {
    let (r, retries) = with_retries(&clients.games, i, RETRY_WITHIN, |ch| {
        let name = name.to_owned();
        async move {
            pb::auth_client::AuthClient::new(ch)
                .create_guest(pb::CreateGuestRequest { display_name: name })
                .await
                .map(tonic::Response::into_inner)
        }
    })
    .await;
    clients.count_retries(retries);
    let guest = r.expect("CreateGuest");
    (guest.player.expect("a player").id, guest.token)
}

fn ongoing(game: &pb::GameView) -> bool {
    game.status
        .as_ref()
        .is_none_or(|s| s.outcome == pb::Outcome::Ongoing as i32)
}

/// Seeks `pool` until paired (a broken stream is opened again, on the next replica: it joins the same
/// seek); returns the game id.
async fn seek(clients: Clients, i: usize, token: String, pool: String) -> String {
    let mut replica = i;
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no pairing in {pool}"
        );
        clients
            .counters
            .seeks_opened
            .fetch_add(1, Ordering::Relaxed);
        let opened = MatchmakingClient::new(clients.matchmaking.channel(replica))
            .seek(authed(
                &token,
                pb::SeekRequest {
                    pool_ids: vec![pool.clone()],
                    rating_range: None,
                },
            ))
            .await;
        let mut stream = match opened {
            Ok(s) => s.into_inner(),
            Err(e) if draughts_systest::retriable(&e) => {
                clients
                    .counters
                    .seek_reconnects
                    .fetch_add(1, Ordering::Relaxed);
                replica += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(e) => panic!("Seek {pool}: {e}"),
        };
        loop {
            match stream.message().await {
                Ok(Some(event)) => match event.kind {
                    Some(pb::seek_event::Kind::Paired(p)) => {
                        clients.counters.paired.fetch_add(1, Ordering::Relaxed);
                        return p.game_id;
                    }
                    Some(pb::seek_event::Kind::Ended(e)) => {
                        panic!("the seek in {pool} ended: {e:?}")
                    }
                    _ => {}
                },
                Ok(None) | Err(_) => {
                    clients
                        .counters
                        .seek_reconnects
                        .fetch_add(1, Ordering::Relaxed);
                    replica += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    break;
                }
            }
        }
    }
}

/// Plays game `id` to its end: each human side's move is `Analysis.BestMove` at level 1, sent with
/// `expected_ply` (a repeat after a lost answer is refused as stale, never played twice).
async fn drive(clients: Clients, world: Shared, i: usize, id: String) {
    let mut round = i;
    // Since when the computer has been to move (as this driver saw it).
    let mut computer_since: Option<Instant> = None;
    loop {
        round += 1;
        let game = clients.get_game(round, &id).await;
        if let Some(since) = computer_since
            && game.position.as_ref().is_none_or(|p| {
                let mover = if p.side_to_move == pb::Color::White as i32 {
                    &game.white
                } else {
                    &game.black
                };
                !mover.as_ref().is_some_and(|m| m.computer)
            })
        {
            computer_since = None;
            let ms = u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX);
            clients
                .counters
                .computer_replies_ms
                .lock()
                .unwrap()
                .push(ms);
        }
        if !ongoing(&game) {
            clients
                .counters
                .games_finished
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        let position = game.position.clone().expect("a position");
        let side = if position.side_to_move == pb::Color::White as i32 {
            game.white.clone()
        } else {
            game.black.clone()
        }
        .expect("both players");
        if side.computer {
            computer_since.get_or_insert_with(Instant::now);
            tokio::time::sleep(Duration::from_millis(30)).await;
            continue;
        }
        let token = world
            .lock()
            .unwrap()
            .tokens
            .get(&side.id)
            .cloned()
            .expect("a token for every human player");
        let ply = u32::try_from(game.moves.len()).expect("plies fit");
        if game.moves.len() >= MAX_PLIES {
            let (r, retries) = with_retries(&clients.games, round, RETRY_WITHIN, |ch| {
                let req = authed(
                    &token,
                    pb::GameActionRequest {
                        game_id: id.clone(),
                    },
                );
                async move { GamesClient::new(ch).resign(req).await }
            })
            .await;
            clients.count_retries(retries);
            if let Err(e) = r {
                assert_eq!(e.code(), tonic::Code::FailedPrecondition, "resign: {e}");
            }
            continue;
        }
        let (best, retries) = with_retries(&clients.analysis, round, RETRY_WITHIN, |ch| {
            let req = authed(
                &token,
                pb::BestMoveRequest {
                    source: Some(pb::best_move_request::Source::GameId(id.clone())),
                    strength: Some(pb::best_move_request::Strength::Level(1)),
                    clock: None,
                    seed: u64::from(ply) + 1,
                },
            );
            async move { AnalysisClient::new(ch).best_move(req).await }
        })
        .await;
        clients.count_retries(retries);
        let best = match best {
            Ok(b) => b.into_inner(),
            // The game moved on or ended meanwhile: look again.
            Err(e) if e.code() == tonic::Code::FailedPrecondition => continue,
            Err(e) => panic!("BestMove in {id}: {e}"),
        };
        let notation = best.r#move.expect("a move").notation;
        let (played, retries) = with_retries(&clients.games, round, RETRY_WITHIN, |ch| {
            let req = authed(
                &token,
                pb::PlayMoveRequest {
                    game_id: id.clone(),
                    r#move: Some(pb::MoveInput {
                        r#move: Some(pb::move_input::Move::Text(notation.clone())),
                    }),
                    expected_ply: Some(ply),
                },
            );
            async move { GamesClient::new(ch).play_move(req).await }
        })
        .await;
        clients.count_retries(retries);
        match played {
            Ok(_) => {
                clients.counters.moves.fetch_add(1, Ordering::Relaxed);
                world
                    .lock()
                    .unwrap()
                    .games
                    .get_mut(&id)
                    .expect("a known game")
                    .confirmed
                    .insert(ply + 1, notation);
            }
            // Stale (a retried move that had landed, or the clock ran out): read the game again.
            Err(e) if e.code() == tonic::Code::FailedPrecondition => {
                clients.counters.stale_moves.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => panic!("PlayMove {notation} in {id}: {e}"),
        }
    }
}

/// Everything a spectator saw of one game: events by sequence number.
#[derive(Debug, Default)]
struct Seen {
    events: BTreeMap<u64, pb::GameEvent>,
    finished: bool,
}

/// Watches game `id` to its end as a spectator, opening the stream again after a failure (a new
/// stream replays the whole history, so nothing may be missing once it is over).
async fn spectate(clients: Clients, i: usize, token: String, id: String) -> Seen {
    let mut seen = Seen::default();
    let mut replica = i;
    let started = Instant::now();
    while !seen.finished {
        assert!(
            started.elapsed() < Duration::from_secs(900),
            "spectating {id} did not end"
        );
        let opened = GamesClient::new(clients.games.channel(replica))
            .watch_game(authed(
                &token,
                pb::WatchGameRequest {
                    game_id: id.clone(),
                },
            ))
            .await;
        let mut stream = match opened {
            Ok(s) => s.into_inner(),
            Err(e) if draughts_systest::retriable(&e) => {
                clients
                    .counters
                    .watch_reconnects
                    .fetch_add(1, Ordering::Relaxed);
                replica += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(e) => panic!("WatchGame {id}: {e}"),
        };
        loop {
            match stream.message().await {
                Ok(Some(event)) => {
                    if matches!(event.kind, Some(pb::game_event::Kind::Finished(_))) {
                        seen.finished = true;
                    }
                    if let Some(before) = seen.events.get(&event.seq) {
                        // A replay after a reconnect: the same event under the same number (the
                        // creation by its game and players: its view is rendered when sent).
                        match (&before.kind, &event.kind) {
                            (
                                Some(pb::game_event::Kind::Created(a)),
                                Some(pb::game_event::Kind::Created(b)),
                            ) => assert_eq!(
                                (&a.game_id, &a.white, &a.black, &a.rules, &a.start_fen),
                                (&b.game_id, &b.white, &b.black, &b.rules, &b.start_fen),
                                "{id}: the creation differs on replay"
                            ),
                            (a, b) => {
                                assert_eq!(a, b, "{id}: event {} differs on replay", event.seq)
                            }
                        }
                    }
                    seen.events.insert(event.seq, event);
                    if seen.finished {
                        break;
                    }
                }
                Ok(None) | Err(_) => {
                    if seen.finished {
                        break;
                    }
                    clients
                        .counters
                        .watch_reconnects
                        .fetch_add(1, Ordering::Relaxed);
                    replica += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    break;
                }
            }
        }
    }
    seen
}

/// Abuse beside the honest traffic (issue 38): a guest keeping more BestMove calls in flight than
/// its bound, and guests looping "a game against the strongest computer, aborted", "a lobby
/// seek, cancelled" and (one of them) "a pool seek, dropped", until `over`. Refusals are what they
/// should get; what the honest players see is checked by the scenario (any refusal of theirs fails
/// it).
async fn abuse(clients: Clients, k: usize, over: Arc<std::sync::atomic::AtomicBool>) {
    let (me, token) = new_guest(&clients, k, &format!("Abuser {k}")).await;
    let count = |r: Result<(), tonic::Status>| match r {
        Ok(()) => clients
            .counters
            .abuse_answered
            .fetch_add(1, Ordering::Relaxed),
        Err(_) => clients
            .counters
            .abuse_refused
            .fetch_add(1, Ordering::Relaxed),
    };
    let mut n = 0u64;
    while !over.load(Ordering::Relaxed) {
        n += 1;
        let replica = k + n as usize;
        if k == 0 {
            // The flooder: four calls at once (the per-guest bound is two). One flooder, at level 4:
            // the point is the bound, and on 2 cores more searching starves the analysis workers'
            // renewals of the scenario's own jobs (2 s visibility here) on a busy machine.
            let calls = (0..4).map(|j| {
                let mut client = AnalysisClient::new(clients.analysis.channel(replica + j));
                let req = authed(
                    &token,
                    pb::BestMoveRequest {
                        source: Some(pb::best_move_request::Source::Position(pb::PositionInput {
                            rules: Some(pb::RuleSet {
                                variant: pb::Variant::International as i32,
                                options: None,
                            }),
                            fen: String::new(),
                            moves: Vec::new(),
                        })),
                        strength: Some(pb::best_move_request::Strength::Level(4)),
                        clock: None,
                        seed: n * 8 + j as u64,
                    },
                );
                async move { client.best_move(req).await.map(|_| ()) }
            });
            for r in futures_util::future::join_all(calls).await {
                count(r);
            }
        } else {
            let mut games = GamesClient::new(clients.games.channel(replica));
            let made = games
                .create_game(authed(
                    &token,
                    pb::CreateGameRequest {
                        rules: Some(pb::RuleSet {
                            variant: pb::Variant::International as i32,
                            options: None,
                        }),
                        time_control: Some(pb::TimeControl {
                            kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                                base_ms: 60_000,
                                increment_ms: 0,
                            })),
                        }),
                        white: Some(pb::Player {
                            id: "ai:8".into(),
                            ..pb::Player::default()
                        }),
                        black: Some(pb::Player {
                            id: me.clone(),
                            ..pb::Player::default()
                        }),
                        rated: false,
                        fen: String::new(),
                        game_id: String::new(),
                        berserk_allowed: false,
                    },
                ))
                .await;
            if let Ok(game) = &made {
                let _ = games
                    .abort(authed(
                        &token,
                        pb::GameActionRequest {
                            game_id: game.get_ref().game_id.clone(),
                        },
                    ))
                    .await;
            }
            count(made.map(|_| ()));
            let mut mm = MatchmakingClient::new(clients.matchmaking.channel(replica));
            let listed = mm
                .create_lobby_seek(authed(
                    &token,
                    pb::CreateLobbySeekRequest {
                        rules: Some(pb::RuleSet {
                            variant: pb::Variant::International as i32,
                            options: None,
                        }),
                        time_control: Some(pb::TimeControl {
                            kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                                base_ms: 180_000,
                                increment_ms: 2_000,
                            })),
                        }),
                        ..Default::default()
                    },
                ))
                .await;
            if let Ok(seek) = &listed {
                let _ = mm
                    .cancel(authed(
                        &token,
                        pb::CancelRequest {
                            id: seek.get_ref().seek_id.clone(),
                        },
                    ))
                    .await;
            }
            count(listed.map(|_| ()));
            if k == 1 {
                // A seek opened and dropped at once, in a pool no honest player uses (alone there,
                // it is never paired).
                let sought = async {
                    let mut stream = mm
                        .seek(authed(
                            &token,
                            pb::SeekRequest {
                                pool_ids: vec!["russian-3+2-casual".into()],
                                rating_range: None,
                            },
                        ))
                        .await?
                        .into_inner();
                    stream.message().await.map(|_| ())
                }
                .await;
                count(sought);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The faults, in order, each once its moment has come (or once every game is over).
async fn inject_faults(
    mut platform: Platform,
    counters: Arc<Counters>,
    all_over: Arc<std::sync::atomic::AtomicBool>,
) -> (Platform, Vec<String>) {
    let mut done = Vec::new();
    let moment = |cond: Box<dyn Fn(&Counters) -> bool + Send>| {
        let counters = counters.clone();
        let all_over = all_over.clone();
        async move {
            while !cond(&counters) && !all_over.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    // While the seekers are still arriving: streams break, seeks are opened again (on the other
    // replica) and joined, pairings in flight are finished by whoever runs the next wave.
    moment(Box::new(|c| c.seeks_opened.load(Ordering::Relaxed) >= 6)).await;
    restart(&mut platform.matchmaking[0]).await;
    done.push(format!(
        "matchmaking-0 SIGKILL + restart (while seeking: {} seek streams opened, {} paired)",
        counters.seeks_opened.load(Ordering::Relaxed),
        counters.paired.load(Ordering::Relaxed)
    ));
    moment(Box::new(|c| c.moves.load(Ordering::Relaxed) >= 60)).await;
    restart(&mut platform.validation[0]).await;
    done.push(format!(
        "validation-0 SIGKILL + restart (at {} moves)",
        counters.moves.load(Ordering::Relaxed)
    ));
    moment(Box::new(|c| c.moves.load(Ordering::Relaxed) >= 150)).await;
    restart(&mut platform.analysis[0]).await;
    done.push(format!(
        "analysis-0 SIGKILL + restart (at {} moves)",
        counters.moves.load(Ordering::Relaxed)
    ));
    moment(Box::new(|c| c.moves.load(Ordering::Relaxed) >= 250)).await;
    let at = counters.moves.load(Ordering::Relaxed);
    let redis = Instant::now();
    platform.restart_redis();
    done.push(format!(
        "redis restart, append-only file kept (at {at} moves, {} ms)",
        redis.elapsed().as_millis()
    ));
    moment(Box::new(|c| c.games_finished.load(Ordering::Relaxed) >= 1)).await;
    restart(&mut platform.ratings[0]).await;
    done.push(format!(
        "ratings-0 SIGKILL + restart (after {} finished games)",
        counters.games_finished.load(Ordering::Relaxed)
    ));
    (platform, done)
}

async fn restart(node: &mut draughts_systest::Node) {
    node.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    node.spawn();
    if let Err(e) = node.wait_serving(Duration::from_secs(60)).await {
        panic!("did not come back: {e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_platform_survives_faults_and_loses_nothing() {
    let settings = Settings::from_env();
    let started = Instant::now();
    let platform = Platform::start(
        Scale::SYSTEM,
        &[
            ("DRAUGHTS_RATE_LIMIT_GUEST_PER_MINUTE", "100000"),
            ("DRAUGHTS_RATE_LIMIT_PLAYER_PER_MINUTE", "100000"),
            ("DRAUGHTS_RATE_LIMIT_ANONYMOUS_PER_MINUTE", "100000"),
            ("DRAUGHTS_RATE_LIMIT_API_KEY_PER_MINUTE", "100000"),
            // Games against the computer in loops from one address (games.rs quotas).
            ("DRAUGHTS_AI_GAMES_PER_HOUR_GUEST", "100000"),
            ("DRAUGHTS_AI_GAMES_PER_HOUR_PLAYER", "100000"),
            ("DRAUGHTS_AI_GAMES_PER_HOUR_ADDRESS", "100000"),
            ("DRAUGHTS_ANALYSIS_BEST_MOVES_PER_DAY_GUEST", "1000000"),
            ("DRAUGHTS_ANALYSIS_BEST_MOVES_PER_DAY_PLAYER", "1000000"),
            ("DRAUGHTS_ANALYSIS_JOBS_PER_DAY_PLAYER", "100000"),
            ("DRAUGHTS_ANALYSIS_VISIBILITY_TIMEOUT_MS", "2000"),
            // Every client of the test shares 127.0.0.1: the per-address bound on guests' BestMoves
            // in flight would count honest guests with the abusers; the per-guest and class bounds
            // stay as they are.
            (
                "DRAUGHTS_ANALYSIS_GUEST_BEST_MOVES_IN_FLIGHT_PER_ADDRESS",
                "1000",
            ),
            ("DRAUGHTS_MATCHMAKING_LOBBY_SEEKS_PER_ADDRESS", "0"),
            (
                "DRAUGHTS_MATCHMAKING_VARIANTS",
                "english,russian,international",
            ),
            ("DRAUGHTS_MATCHMAKING_TIME_CONTROLS", "3+2"),
            ("DRAUGHTS_MATCHMAKING_WAVE_MS", "500"),
            // Everyone on the leaderboard after a game (it lists established players only).
            ("DRAUGHTS_RATINGS_PROVISIONAL_DEVIATION", "350"),
            // The same pairs meet again and again within minutes: every rated game is to be rated.
            ("DRAUGHTS_RATINGS_PAIR_GAMES_PER_DAY", "0"),
        ],
    )
    .await;
    let start_ms = started.elapsed().as_millis();
    let counters = Arc::new(Counters::default());
    let clients = Clients {
        games: Platform::replicas(&platform.validation),
        analysis: Platform::replicas(&platform.analysis),
        ratings: Platform::replicas(&platform.ratings),
        matchmaking: Platform::replicas(&platform.matchmaking),
        counters: counters.clone(),
    };
    let world: Shared = Arc::default();

    // Seekers: signed-in players in the rated pools, guests in the casual ones.
    let mut seekers = Vec::new();
    for (p, (pool, _)) in RATED_POOLS.iter().enumerate() {
        for k in 0..settings.rated_per_pool {
            let sub = format!("sys-{p}-{k}");
            let token = player_token(&sub, &format!("Player {p}-{k}"));
            let id = format!("player:{sub}");
            world.lock().unwrap().tokens.insert(id, token.clone());
            seekers.push((token, (*pool).to_owned()));
        }
    }
    for (p, pool) in CASUAL_POOLS.iter().enumerate() {
        for k in 0..settings.casual_per_pool {
            let (id, token) = new_guest(&clients, k, &format!("Guest {p}-{k}")).await;
            world.lock().unwrap().tokens.insert(id, token.clone());
            seekers.push((token, (*pool).to_owned()));
        }
    }
    let spectators: Vec<String> = {
        let mut out = Vec::new();
        for s in 0..4 {
            out.push(new_guest(&clients, s, &format!("Spectator {s}")).await.1);
        }
        out
    };

    let all_over = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let faults = tokio::spawn(inject_faults(platform, counters.clone(), all_over.clone()));
    let mut abusers = tokio::task::JoinSet::new();
    for k in 0..3 {
        abusers.spawn(abuse(clients.clone(), k, all_over.clone()));
    }

    let mut pairings = tokio::task::JoinSet::new();
    for (i, (token, pool)) in seekers.into_iter().enumerate() {
        pairings.spawn(seek(clients.clone(), i, token, pool));
    }
    // Games against the computer, made directly through Games.
    let mut computer_ids = Vec::new();
    for c in 0..settings.computer_games {
        let sub = format!("sys-ai-{c}");
        let id = format!("player:{sub}");
        let token = player_token(&sub, &format!("Human {c}"));
        world
            .lock()
            .unwrap()
            .tokens
            .insert(id.clone(), token.clone());
        let (r, retries) = with_retries(&clients.games, c, RETRY_WITHIN, |ch| {
            let req = authed(
                &token,
                pb::CreateGameRequest {
                    rules: Some(pb::RuleSet {
                        variant: pb::Variant::English as i32,
                        options: None,
                    }),
                    time_control: Some(pb::TimeControl {
                        kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                            base_ms: 180_000,
                            increment_ms: 2_000,
                        })),
                    }),
                    white: Some(pb::Player {
                        id: id.clone(),
                        ..pb::Player::default()
                    }),
                    black: Some(pb::Player {
                        id: "ai:1".into(),
                        ..pb::Player::default()
                    }),
                    rated: false,
                    fen: String::new(),
                    game_id: String::new(),
                    berserk_allowed: false,
                },
            );
            async move { GamesClient::new(ch).create_game(req).await }
        })
        .await;
        clients.count_retries(retries);
        computer_ids.push(r.expect("a game against ai:1").into_inner().game_id);
    }

    let mut drivers = tokio::task::JoinSet::new();
    let mut watchers = tokio::task::JoinSet::new();
    let mut game_ids: Vec<String> = Vec::new();
    let mut follow = |id: String, i: usize, game: pb::GameView| {
        let mut w = world.lock().unwrap();
        if w.games.contains_key(&id) {
            return;
        }
        w.games.insert(
            id.clone(),
            GameInfo {
                rated: game.rated,
                variant: pb::Variant::try_from(game.rules.as_ref().map_or(0, |r| r.variant))
                    .unwrap_or(pb::Variant::Unspecified),
                white: game
                    .white
                    .as_ref()
                    .map(|p| p.id.clone())
                    .unwrap_or_default(),
                black: game
                    .black
                    .as_ref()
                    .map(|p| p.id.clone())
                    .unwrap_or_default(),
                confirmed: BTreeMap::new(),
            },
        );
        drop(w);
        counters.games_started.fetch_add(1, Ordering::Relaxed);
        game_ids.push(id.clone());
        drivers.spawn(drive(clients.clone(), world.clone(), i, id.clone()));
        let token = spectators[i % spectators.len()].clone();
        let spectator = clients.clone();
        watchers.spawn(async move {
            let seen = spectate(spectator, i, token, id.clone()).await;
            (id, seen)
        });
    };
    for (i, id) in computer_ids.into_iter().enumerate() {
        let game = clients.get_game(i, &id).await;
        follow(id, i, game);
    }
    let mut i = 0;
    let pairing_deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    while let Some(paired) = tokio::time::timeout_at(pairing_deadline, pairings.join_next())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "every seeker is paired within 3 minutes ({} paired)",
                counters.paired.load(Ordering::Relaxed)
            )
        })
    {
        let id = paired.expect("a seeker");
        i += 1;
        let game = clients.get_game(i, &id).await;
        follow(id, i, game);
    }
    let deadline = tokio::time::Instant::now() + settings.timeout;
    while let Some(done) = tokio::time::timeout_at(deadline, drivers.join_next())
        .await
        .expect("every game ends within the scenario's bound")
    {
        done.expect("a game driver");
    }
    all_over.store(true, Ordering::Relaxed);
    let mut seen = BTreeMap::new();
    while let Some(done) = tokio::time::timeout_at(deadline, watchers.join_next())
        .await
        .expect("every spectator sees its game end")
    {
        let (id, s) = done.expect("a spectator");
        seen.insert(id, s);
    }
    while let Some(done) = abusers.join_next().await {
        done.expect("an abuser");
    }
    let (mut platform, faults_done) = faults.await.expect("the fault script");
    let games_ms = started.elapsed().as_millis() - start_ms;

    // Every game finished; every confirmed move is in its game; every spectator saw every event.
    let world_now = world.lock().unwrap().games.clone();
    let mut finished_games = BTreeMap::new();
    let mut total_plies = 0;
    for (k, (id, info)) in world_now.iter().enumerate() {
        let game = clients.get_game(k, id).await;
        assert!(!ongoing(&game), "{id} is over");
        // The computer never loses on time, abusers or not.
        if let Some(status) = &game.status
            && status.reason == pb::EndReason::Time as i32
        {
            let loser = if status.outcome == pb::Outcome::WhiteWins as i32 {
                &game.black
            } else {
                &game.white
            };
            assert!(
                !loser.as_ref().is_some_and(|p| p.computer),
                "{id}: the computer lost on time"
            );
        }
        for (ply, notation) in &info.confirmed {
            let played = game
                .moves
                .get(*ply as usize - 1)
                .unwrap_or_else(|| panic!("{id}: confirmed ply {ply} is missing"));
            assert_eq!(
                played.r#move.as_ref().map(|m| m.notation.as_str()),
                Some(notation.as_str()),
                "{id}: ply {ply}"
            );
        }
        let s = &seen[id];
        let seqs: Vec<u64> = s.events.keys().copied().collect();
        let first = seqs[0];
        assert!(
            seqs.iter().enumerate().all(|(n, q)| *q == first + n as u64),
            "{id}: the spectator's events have a gap: {seqs:?}"
        );
        assert!(
            matches!(
                s.events[&first].kind,
                Some(pb::game_event::Kind::Created(_))
            ),
            "{id}: the history starts with the creation"
        );
        let watched_moves: Vec<&str> = s
            .events
            .values()
            .filter_map(|e| match &e.kind {
                Some(pb::game_event::Kind::MovePlayed(m)) => {
                    m.r#move.as_ref().map(|m| m.notation.as_str())
                }
                _ => None,
            })
            .collect();
        let game_moves: Vec<&str> = game
            .moves
            .iter()
            .filter_map(|m| m.r#move.as_ref().map(|m| m.notation.as_str()))
            .collect();
        assert_eq!(
            watched_moves, game_moves,
            "{id}: the spectator saw every move"
        );
        total_plies += game.moves.len();
        finished_games.insert(id.clone(), game);
    }

    // Every rated game rated exactly once: in both players' histories once, and in their counts.
    let rated: Vec<(&String, &GameInfo)> = world_now
        .iter()
        .filter(|(id, info)| {
            info.rated
                && finished_games[*id]
                    .status
                    .as_ref()
                    .is_some_and(|s| s.outcome != pb::Outcome::Aborted as i32)
        })
        .collect();
    let mut per_player: HashMap<(String, pb::Variant), Vec<String>> = HashMap::new();
    for (id, info) in &rated {
        for p in [&info.white, &info.black] {
            per_player
                .entry((p.clone(), info.variant))
                .or_default()
                .push((*id).clone());
        }
    }
    let ratings_deadline = Instant::now() + Duration::from_secs(60);
    let mut history_rows = 0;
    for ((player, variant), games) in &per_player {
        let category = pb::RatingCategory {
            variant: *variant as i32,
            speed: 0,
        };
        loop {
            let (r, retries) = with_retries(&clients.ratings, 0, RETRY_WITHIN, |ch| {
                let req = pb::RatingHistoryRequest {
                    player_id: player.clone(),
                    category: Some(category),
                    page_size: 200,
                    page_token: String::new(),
                };
                async move { RatingsClient::new(ch).rating_history(req).await }
            })
            .await;
            clients.count_retries(retries);
            let entries = r.map(|r| r.into_inner().entries).unwrap_or_default();
            let complete = games
                .iter()
                .all(|g| entries.iter().any(|e| &e.game_id == g));
            if complete || Instant::now() > ratings_deadline {
                for g in games {
                    let n = entries.iter().filter(|e| &e.game_id == g).count();
                    assert_eq!(n, 1, "{player}: game {g} rated {n} times");
                }
                assert_eq!(
                    entries.len(),
                    games.len(),
                    "{player}: nothing else was rated"
                );
                history_rows += entries.len();
                let (rating, _) = with_retries(&clients.ratings, 1, RETRY_WITHIN, |ch| {
                    let req = pb::GetRatingRequest {
                        player_id: player.clone(),
                        category: Some(category),
                    };
                    async move { RatingsClient::new(ch).get_rating(req).await }
                })
                .await;
                let rating = rating.expect("GetRating").into_inner();
                assert_eq!(
                    rating.games as usize,
                    games.len(),
                    "{player}: games counted once"
                );
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let mut leaderboard_rows = 0;
    for (_, variant) in RATED_POOLS {
        let players: Vec<&String> = per_player
            .keys()
            .filter(|(_, v)| *v == variant)
            .map(|(p, _)| p)
            .collect();
        let (r, _) = with_retries(&clients.ratings, 0, RETRY_WITHIN, |ch| {
            let req = pb::LeaderboardRequest {
                category: Some(pb::RatingCategory {
                    variant: variant as i32,
                    speed: 0,
                }),
                page_size: 200,
                page_token: String::new(),
                bots: false,
            };
            async move { RatingsClient::new(ch).leaderboard(req).await }
        })
        .await;
        let board = r.expect("Leaderboard").into_inner().entries;
        for p in &players {
            let n = board
                .iter()
                .filter(|e| e.rating.as_ref().is_some_and(|r| &r.player_id == *p))
                .count();
            assert_eq!(n, 1, "{p} is on the {variant:?} leaderboard once");
        }
        leaderboard_rows += board.len();
    }

    // Analysis of every finished game that a signed-in player played (guests have no analysis
    // scope); a worker is killed while all three are in the middle of a job. Under heavy load a batch
    // can end before a kill lands on a worker holding a job: then the same games are submitted again
    // with one node more a ply (identical requests would be merged or answered from the cache), up to
    // three batches, and every job of every batch must finish.
    let mut jobs = Vec::new();
    let mut worker_fault = String::from("not injected: fewer than 3 jobs ran at once");
    'inject: for batch in 0..3u64 {
        for (id, info) in &world_now {
            let owner = [&info.white, &info.black]
                .into_iter()
                .find(|p| p.starts_with("player:"));
            let Some(owner) = owner else { continue };
            if finished_games[id].moves.is_empty() {
                continue;
            }
            let token = world.lock().unwrap().tokens[owner].clone();
            let (r, retries) = with_retries(&clients.analysis, jobs.len(), RETRY_WITHIN, |ch| {
                let req = authed(
                    &token,
                    pb::AnalyzeGameRequest {
                        source: Some(pb::analyze_game_request::Source::GameId(id.clone())),
                        limits_per_ply: Some(pb::SearchLimits {
                            nodes: settings.nodes_per_ply + batch,
                            ..pb::SearchLimits::default()
                        }),
                        rules: None,
                    },
                );
                async move { AnalysisClient::new(ch).analyze_game(req).await }
            })
            .await;
            clients.count_retries(retries);
            let job = r.expect("AnalyzeGame").into_inner();
            jobs.push((id.clone(), token, job.job_id));
        }
        let status_token = jobs.first().map(|(_, t, _)| t.clone()).expect("some jobs");
        let kill_deadline = Instant::now() + Duration::from_secs(60);
        let mut idle_since: Option<Instant> = None;
        while Instant::now() < kill_deadline {
            let (r, _) = with_retries(&clients.analysis, 0, RETRY_WITHIN, |ch| {
                let req = authed(&status_token, pb::QueueStatusRequest {});
                async move { AnalysisClient::new(ch).queue_status(req).await }
            })
            .await;
            let status = r.expect("QueueStatus").into_inner();
            if status.running_jobs >= 3 {
                platform.workers[0].kill();
                tokio::time::sleep(Duration::from_millis(300)).await;
                platform.workers[0].spawn();
                worker_fault = format!(
                    "worker-0 SIGKILL mid-job + restart ({} jobs running, {} live workers)",
                    status.running_jobs, status.live_workers
                );
                // The running count comes from heartbeats up to a second old, so worker-0 may have
                // been between two jobs when it was killed: then no job is taken over, and the fault
                // is injected again while jobs still run. A job it held shows a second attempt once
                // another worker takes it over (after the 2 s visibility timeout).
                if a_job_was_taken_over(&clients, &jobs, Duration::from_secs(8)).await {
                    break 'inject;
                }
                worker_fault = String::from("not injected: worker-0 held no job when killed");
            }
            // Nothing running for 3 s: this batch is over (or never got going); submit another.
            if status.running_jobs == 0 {
                if idle_since.get_or_insert_with(Instant::now).elapsed() > Duration::from_secs(3) {
                    continue 'inject;
                }
            } else {
                idle_since = None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let mut retried_jobs = 0;
    let mut analysed_plies = 0;
    for (k, (game_id, token, job_id)) in jobs.iter().enumerate() {
        let view = loop {
            let view = analysis_view(&clients, k, token, job_id)
                .await
                .expect("GetAnalysis");
            if view.state == pb::JobState::Queued as i32
                || view.state == pb::JobState::Running as i32
            {
                assert!(
                    started.elapsed() < settings.timeout + Duration::from_secs(300),
                    "analysis {job_id} did not finish"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            break view;
        };
        assert_eq!(
            view.state,
            pb::JobState::Done as i32,
            "analysis of {game_id} ({} plies): {} (attempts {}, created {} started {} finished {}; \
             worker fault: {worker_fault})",
            finished_games[game_id].moves.len(),
            view.error,
            view.attempts,
            view.created_at_ms,
            view.started_at_ms,
            view.finished_at_ms
        );
        let Some(pb::analysis_view::Result::Game(analysis)) = view.result else {
            panic!("analysis of {game_id} has a game result");
        };
        assert_eq!(
            analysis.plies.len(),
            finished_games[game_id].moves.len(),
            "{game_id}: every ply analysed"
        );
        analysed_plies += analysis.plies.len();
        if view.attempts > 1 {
            retried_jobs += 1;
        }
    }
    let crashed = platform.crashed();
    assert!(
        crashed.is_empty(),
        "processes ended by themselves: {crashed:#?}"
    );
    assert!(
        worker_fault.starts_with("worker-0"),
        "the worker fault was injected: {worker_fault}"
    );
    assert_eq!(
        faults_done.len(),
        5,
        "every service fault was injected: {faults_done:#?}"
    );
    assert!(
        retried_jobs >= 1,
        "the killed worker's job was taken over and finished"
    );

    let c = &counters;
    let computer = world_now
        .values()
        .filter(|g| g.white.starts_with("ai:") || g.black.starts_with("ai:"))
        .count();
    println!("\nsystem test summary ({:?} settings)", settings);
    println!("| what | count |");
    println!("|---|---|");
    println!(
        "| processes (validation, ratings, analysis API, workers, matchmaking) | 2, 2, 2, 3, 2 |"
    );
    println!("| platform start | {start_ms} ms |");
    println!(
        "| games played to the end (rated / casual / against ai:1) | {} ({} / {} / {computer}) |",
        world_now.len(),
        rated.len(),
        world_now.len() - rated.len() - computer
    );
    println!(
        "| plies in those games / moves sent by the clients and confirmed | {total_plies} / {} |",
        c.moves.load(Ordering::Relaxed)
    );
    println!(
        "| stale moves refused (a retry of a move that had landed) | {} |",
        c.stale_moves.load(Ordering::Relaxed)
    );
    println!(
        "| seek streams opened / reopened | {} / {} |",
        c.seeks_opened.load(Ordering::Relaxed),
        c.seek_reconnects.load(Ordering::Relaxed)
    );
    println!(
        "| spectator streams reopened | {} |",
        c.watch_reconnects.load(Ordering::Relaxed)
    );
    println!(
        "| calls retried on another replica | {} |",
        c.retries.load(Ordering::Relaxed)
    );
    println!("| rating history rows checked (each rated game once per player) | {history_rows} |");
    println!("| leaderboard rows read | {leaderboard_rows} |");
    println!(
        "| analysis jobs done / plies analysed / jobs retried after the worker kill | {} / {analysed_plies} / {retried_jobs} |",
        jobs.len()
    );
    for f in &faults_done {
        println!("| fault | {f} |");
    }
    println!("| fault | {worker_fault} |");
    println!("| games, moves, ratings, jobs or events lost | 0 |");
    let mut replies = counters.computer_replies_ms.lock().unwrap().clone();
    replies.sort_unstable();
    let at = |q: f64| {
        replies
            .get(((replies.len() as f64 * q).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0)
    };
    println!(
        "| abusers' calls answered / refused (1 guest flooding BestMove at level 4, 2 churning computer games, lobby seeks, pool seeks) | {} / {} |",
        counters.abuse_answered.load(Ordering::Relaxed),
        counters.abuse_refused.load(Ordering::Relaxed)
    );
    println!(
        "| the computer's replies seen by the drivers: count, p50 / p95 / max (faults included), honest refusals, computer losses on time | {}, {} / {} / {} ms, 0, 0 |",
        replies.len(),
        at(0.5),
        at(0.95),
        replies.last().copied().unwrap_or(0)
    );
    println!(
        "| time: platform start + games / whole test | {games_ms} ms / {} ms |",
        started.elapsed().as_millis()
    );
}

/// Whether one of the analysis `jobs` (game id, owner's token, job id) shows a second attempt within
/// `within`: a job its killed worker held, taken over by another.
async fn a_job_was_taken_over(
    clients: &Clients,
    jobs: &[(String, String, String)],
    within: Duration,
) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        for (k, (_, token, job_id)) in jobs.iter().enumerate() {
            let view = analysis_view(clients, k, token, job_id).await;
            if view.is_ok_and(|view| view.attempts > 1) {
                return true;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

/// `GetAnalysis` of `job_id` as its owner, starting at replica `k` (retried on another replica).
async fn analysis_view(
    clients: &Clients,
    k: usize,
    token: &str,
    job_id: &str,
) -> Result<pb::AnalysisView, tonic::Status> {
    let (r, retries) = with_retries(&clients.analysis, k, RETRY_WITHIN, |ch| {
        let req = authed(
            token,
            pb::AnalysisJobRequest {
                job_id: job_id.to_owned(),
            },
        );
        async move { AnalysisClient::new(ch).get_analysis(req).await }
    })
    .await;
    clients.count_retries(retries);
    r.map(tonic::Response::into_inner)
}
