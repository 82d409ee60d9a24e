//! Tournaments under faults (issue 41, item 6): the split deployment of `draughts_systest` with two
//! `draughts-tournaments` replicas and two of Games (validation), one of ratings, one Redis and one
//! PostgreSQL. An arena of 12 players and a Swiss event of 8 run at the same time; every game the
//! service pairs is played to its end through the public API by drivers (each move picked from
//! `Rules.ListMoves`, then a resignation or an agreed draw after a number of plies that varies per
//! game). Faults, each a SIGKILL of a tournaments replica and its restart:
//! 1. the Swiss event's scheduler (the replica holding its lease) in the middle of round 2 (some of
//!    the round's games over, some in progress);
//! 2. the arena's scheduler while a wave is being paired: the test reads the record in Redis until it
//!    shows a wave recorded whose games are not all created yet, and kills the lease holder then (if
//!    no wave is caught in that window before the arena's last seconds, the holder is killed anyway,
//!    and the report says so);
//! 3. the other replica just after a game's end, while its result is on its way.
//!
//! At the end, from Games' own records (`Games.ListFinishedGames`, `Games.GetGame`): every game the
//! events recorded exists and is finished, none lost; every finished game is counted exactly once in
//! the standings (each player's arena sheet recomputed with the arena's scoring from their games in
//! order, Swiss points from the results); no player was in two games at once (a player's next game
//! was created after their previous one finished; no poll of the pairings showed a player twice); no
//! pair met twice in the Swiss event; both events are archived with their standings (read back from
//! the archive once the live records are gone).
//!
//! Runs by default (about 2 minutes in a debug build on 2 cores). Needs the workspace's binaries
//! (`cargo test --workspace` builds them; alone: `cargo build --workspace --bins` first).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use draughts_proto::contract::{finished, tournaments as contract};
use draughts_proto::pb;
use draughts_store::LiveStore;
use draughts_systest::{
    ADMIN_KEY, Node, Platform, Replicas, Scale, authed, player_token, with_retries,
};
use draughts_tournaments::arena::{ArenaGame, ArenaRules, ArenaSheet, Outcome as ArenaOutcome};
use draughts_tournaments::store::{Record, State};
use pb::games_client::GamesClient;
use pb::tournaments_client::TournamentsClient;

const RETRY_WITHIN: Duration = Duration::from_secs(60);
const ARENA_PLAYERS: usize = 12;
const SWISS_PLAYERS: usize = 8;
const SWISS_ROUNDS: u32 = 3;
const ARENA_SECONDS: u32 = 40;
/// The whole scenario's bound.
const TIMEOUT: Duration = Duration::from_secs(300);

/// A small deterministic hash (FNV-1a): varies the games without a random source.
fn hash(text: &str, n: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes().chain(n.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[derive(Debug, Default)]
struct Progress {
    /// Games the drivers saw end.
    games_over: AtomicU64,
    moves: AtomicU64,
    retries: AtomicU64,
    /// Both events finished.
    all_over: AtomicBool,
}

#[derive(Clone)]
struct Clients {
    games: Replicas,
    tournaments: Replicas,
    tokens: Arc<HashMap<String, String>>,
    progress: Arc<Progress>,
}

impl Clients {
    fn count(&self, retries: u32) {
        self.progress
            .retries
            .fetch_add(u64::from(retries), Ordering::Relaxed);
    }

    async fn get_game(&self, i: usize, id: &str) -> pb::GameView {
        let (r, retries) = draughts_systest::get_game(&self.games, i, RETRY_WITHIN, id).await;
        self.count(retries);
        r.unwrap_or_else(|e| panic!("GetGame {id}: {e}"))
    }

    async fn view(&self, i: usize, id: &str) -> pb::TournamentView {
        let (r, retries) = with_retries(&self.tournaments, i, RETRY_WITHIN, |ch| {
            let id = id.to_owned();
            async move {
                TournamentsClient::new(ch)
                    .get_tournament(pb::GetTournamentRequest {
                        tournament_id: id,
                        standings_page_size: 500,
                        standings_page_token: String::new(),
                    })
                    .await
                    .map(tonic::Response::into_inner)
            }
        })
        .await;
        self.count(retries);
        r.unwrap_or_else(|e| panic!("GetTournament {id}: {e}"))
    }

    /// A game action (resign, offer or accept a draw) by `token`; a refusal because the game moved
    /// on meanwhile is fine (the driver reads the game again).
    async fn action(&self, i: usize, token: &str, id: &str, what: &'static str) {
        let (r, retries) = with_retries(&self.games, i, RETRY_WITHIN, |ch| {
            let req = authed(
                token,
                pb::GameActionRequest {
                    game_id: id.to_owned(),
                },
            );
            async move {
                let mut client = GamesClient::new(ch);
                match what {
                    "resign" => client.resign(req).await,
                    "offer" => client.offer_draw(req).await,
                    _ => client.accept_draw(req).await,
                }
            }
        })
        .await;
        self.count(retries);
        if let Err(e) = r {
            assert_eq!(
                e.code(),
                tonic::Code::FailedPrecondition,
                "{what} in {id}: {e}"
            );
        }
    }
}

fn ongoing(game: &pb::GameView) -> bool {
    game.status
        .as_ref()
        .is_none_or(|s| s.outcome == pb::Outcome::Ongoing as i32)
}

/// Plays game `id` to its end for both sides: moves from `Rules.ListMoves` (picked by a hash of the
/// game and ply), then after `cap` plies the side to move resigns, or (one game in four) offers a
/// draw that the other side accepts.
async fn drive(clients: Clients, id: String) {
    let cap = 6 + hash(&id, 0) % 35;
    let draw = hash(&id, 1) % 4 == 3;
    let mut i = hash(&id, 2) as usize;
    loop {
        i += 1;
        let game = clients.get_game(i, &id).await;
        if !ongoing(&game) {
            clients.progress.games_over.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let position = game.position.clone().expect("a position");
        let white_to_move = position.side_to_move == pb::Color::White as i32;
        let (mover, other) = if white_to_move {
            (&game.white, &game.black)
        } else {
            (&game.black, &game.white)
        };
        let token =
            |p: &Option<pb::Player>| clients.tokens[&p.as_ref().expect("both players").id].clone();
        let (mover, other) = (token(mover), token(other));
        let ply = game.moves.len() as u64;
        if ply >= cap {
            if !draw {
                clients.action(i, &mover, &id, "resign").await;
            } else if game.draw_offer == pb::Color::Unspecified as i32 {
                clients.action(i, &mover, &id, "offer").await;
            } else {
                clients.action(i, &other, &id, "accept").await;
            }
            continue;
        }
        let (listed, retries) = with_retries(&clients.games, i, RETRY_WITHIN, |ch| {
            let req = pb::ListMovesRequest {
                rules: game.rules,
                fen: position.fen.clone(),
            };
            async move {
                pb::rules_client::RulesClient::new(ch)
                    .list_moves(req)
                    .await
                    .map(tonic::Response::into_inner)
            }
        })
        .await;
        clients.count(retries);
        let moves = listed
            .unwrap_or_else(|e| panic!("ListMoves in {id}: {e}"))
            .moves;
        if moves.is_empty() {
            // Over by the position: Games says so on the next read.
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let notation = moves[(hash(&id, ply + 10) % moves.len() as u64) as usize]
            .notation
            .clone();
        let (played, retries) = with_retries(&clients.games, i, RETRY_WITHIN, |ch| {
            let req = authed(
                &mover,
                pb::PlayMoveRequest {
                    game_id: id.clone(),
                    r#move: Some(pb::MoveInput {
                        r#move: Some(pb::move_input::Move::Text(notation.clone())),
                    }),
                    expected_ply: Some(ply as u32),
                },
            );
            async move { GamesClient::new(ch).play_move(req).await }
        })
        .await;
        clients.count(retries);
        match played {
            Ok(_) => {
                clients.progress.moves.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) if e.code() == tonic::Code::FailedPrecondition => {}
            Err(e) => panic!("PlayMove {notation} in {id}: {e}"),
        }
    }
}

/// Follows both events until they finish: a driver for every game paired (seen in the pairings of
/// `GetTournament`, read every 150 ms from either replica); every read's pairings name each player
/// once. Returns the final views.
async fn conduct(clients: Clients, ids: Vec<String>) -> Vec<pb::TournamentView> {
    let mut driven = HashSet::new();
    let mut drivers = tokio::task::JoinSet::new();
    let mut done: BTreeMap<usize, pb::TournamentView> = BTreeMap::new();
    let mut round = 0usize;
    while done.len() < ids.len() {
        round += 1;
        for (k, id) in ids.iter().enumerate() {
            if done.contains_key(&k) {
                continue;
            }
            let view = clients.view(round + k, id).await;
            let mut busy = HashSet::new();
            for p in &view.pairings {
                for side in [&p.white, &p.black] {
                    let player = side.as_ref().expect("a player").id.clone();
                    assert!(
                        busy.insert(player.clone()),
                        "{player} in two games at once in {id}: {:?}",
                        view.pairings
                    );
                }
                if driven.insert(p.game_id.clone()) {
                    drivers.spawn(drive(clients.clone(), p.game_id.clone()));
                }
            }
            let state = view.tournament.as_ref().expect("a header").state;
            if state == pb::TournamentState::Finished as i32 {
                assert!(view.pairings.is_empty(), "{id} finished with games going");
                done.insert(k, view);
            } else {
                assert_ne!(
                    state,
                    pb::TournamentState::Cancelled as i32,
                    "{id} cancelled"
                );
            }
        }
        while let Some(joined) = drivers.try_join_next() {
            joined.expect("a driver");
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    while let Some(joined) = drivers.join_next().await {
        joined.expect("a driver");
    }
    clients.progress.all_over.store(true, Ordering::Relaxed);
    done.into_values().collect()
}

/// The replica name a tournaments node logged last (its current process's).
fn replica_name(node: &Node) -> Option<String> {
    node.log()
        .lines()
        .filter(|l| l.contains("tournaments replica"))
        .filter_map(|l| {
            let at = l.find("tour-")?;
            let name: String = l[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            (name.len() > "tour-".len()).then_some(name)
        })
        .next_back()
}

async fn record(live: &dyn LiveStore, id: &str) -> Option<Record> {
    let (bytes, _) = live.get(&contract::record_key(id)).await.ok()??;
    Some(Record::decode(&bytes).expect("a readable record"))
}

/// The index of the tournaments node holding `id`'s scheduler lease now (waiting up to 10 s while
/// the lease is still a killed process's).
async fn lease_holder(platform: &Platform, live: &dyn LiveStore, id: &str) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let owner = match live.get(&contract::lease_key(id)).await {
            Ok(Some((bytes, _))) => contract::decode_lease(&bytes).ok().map(|l| l.owner),
            _ => None,
        };
        if let Some(i) = platform
            .tournaments
            .iter()
            .position(|n| owner.is_some() && replica_name(n) == owner)
        {
            return i;
        }
        assert!(
            Instant::now() < deadline,
            "{id}'s lease ({owner:?}) held by none of the replicas"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// SIGKILL, then the same process started again.
async fn restart(node: &mut Node) {
    node.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    node.spawn();
    restart_wait(node).await;
}

/// Restarts logged: names logged after the first.
fn count_names(node: &Node) -> usize {
    node.log()
        .lines()
        .filter(|l| l.contains("tournaments replica"))
        .count()
        .saturating_sub(1)
}

/// The three faults, in order; returns the platform and what was done.
async fn inject_faults(
    mut platform: Platform,
    live: Arc<dyn LiveStore>,
    arena: String,
    swiss: String,
    progress: Arc<Progress>,
) -> (Platform, Vec<String>) {
    let mut done = Vec::new();
    let over = || progress.all_over.load(Ordering::Relaxed);

    // 1. The Swiss scheduler in the middle of round 2: some of its games over, some not.
    let mut seen_round2 = None;
    loop {
        assert!(!over(), "the Swiss event ended before its round 2 was seen");
        if let Some(r) = record(&*live, &swiss).await
            && r.standings.round == 2
            && !r.ongoing.is_empty()
        {
            let first = *seen_round2.get_or_insert(Instant::now());
            let total = SWISS_PLAYERS / 2;
            if r.ongoing.len() < total || first.elapsed() > Duration::from_secs(5) {
                let holder = lease_holder(&platform, &*live, &swiss).await;
                let node = &mut platform.tournaments[holder];
                let name = node.name.clone();
                restart(node).await;
                done.push(format!(
                    "{name} (the Swiss scheduler) SIGKILL + restart in round 2, {} of its {total} games in progress",
                    r.ongoing.len()
                ));
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // 2. The arena's scheduler while a wave is being paired: recorded, games not all created.
    let mut ends_at_ms = u64::MAX;
    let (uncreated, ongoing, next_game) = loop {
        assert!(!over(), "the arena ended before the wave fault");
        let Some(r) = record(&*live, &arena).await else {
            tokio::time::sleep(Duration::from_millis(2)).await;
            continue;
        };
        if r.state == State::Running {
            ends_at_ms = r.ends_at_ms;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let uncreated = r.ongoing.iter().filter(|p| !p.created).count();
        // A wave after the first (among games in progress), or anything near the end.
        let later = r.next_game > 1 + (ARENA_PLAYERS / 2) as u64;
        if r.state == State::Running && ((later && uncreated > 0) || now + 8_000 > ends_at_ms) {
            break (uncreated, r.ongoing.len(), r.next_game);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let holder = lease_holder(&platform, &*live, &arena).await;
    let node = &mut platform.tournaments[holder];
    let name = node.name.clone();
    node.kill();
    done.push(if uncreated > 0 {
        format!(
            "{name} (the arena scheduler) SIGKILL + restart mid-wave: {uncreated} of {ongoing} games in progress recorded and not yet created (next game {next_game})"
        )
    } else {
        format!(
            "{name} (the arena scheduler) SIGKILL + restart near the arena's end: no wave caught between its record and its games ({ongoing} games in progress)"
        )
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    node.spawn();
    restart_wait(node).await;

    // 3. The other replica just after a game ends (its result on the way to the consumers).
    let other = 1 - holder;
    let before = progress.games_over.load(Ordering::Relaxed);
    while progress.games_over.load(Ordering::Relaxed) == before && !over() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let node = &mut platform.tournaments[other];
    let name = node.name.clone();
    restart(node).await;
    done.push(format!(
        "{name} SIGKILL + restart right after a game's end (games over: {})",
        progress.games_over.load(Ordering::Relaxed)
    ));
    (platform, done)
}

/// After a spawn: healthy again and its new name logged (the next fault looks it up).
async fn restart_wait(node: &mut Node) {
    if let Err(e) = node.wait_serving(Duration::from_secs(60)).await {
        panic!("did not come back: {e}");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while node.kills as usize > count_names(node) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One finished game as Games has it.
#[derive(Clone, Debug)]
struct Played {
    n: u64,
    white: String,
    black: String,
    outcome: finished::Outcome,
    plies: u32,
    created_at_ms: u64,
    finished_at_ms: u64,
}

impl Played {
    /// The outcome for `player`.
    fn outcome_of(&self, player: &str) -> ArenaOutcome {
        let white = self.white == player;
        match (self.outcome, white) {
            (finished::Outcome::Draw, _) => ArenaOutcome::Draw,
            (finished::Outcome::WhiteWins, true) | (finished::Outcome::BlackWins, false) => {
                ArenaOutcome::Win
            }
            _ => ArenaOutcome::Loss,
        }
    }
}

/// Every finished game of `ids`' events, from `Games.ListFinishedGames` (a `service` key) and
/// `Games.GetGame` (its creation time).
async fn finished_games(
    clients: &Clients,
    key: &str,
    ids: &[String],
) -> HashMap<String, BTreeMap<u64, Played>> {
    let mut out: HashMap<String, BTreeMap<u64, Played>> = HashMap::new();
    let (mut after_ms, mut after_id) = (0, String::new());
    loop {
        let (r, _) = with_retries(&clients.games, 0, RETRY_WITHIN, |ch| {
            let req = authed(
                key,
                pb::ListFinishedGamesRequest {
                    after_ms,
                    after_game_id: after_id.clone(),
                    before_ms: 0,
                    limit: 500,
                    rated_only: false,
                },
            );
            async move { GamesClient::new(ch).list_finished_games(req).await }
        })
        .await;
        let page = r.expect("ListFinishedGames").into_inner().games;
        for entry in &page {
            let Some(t) = contract::tournament_of_game(&entry.game_id) else {
                continue;
            };
            if !ids.iter().any(|id| id == t) {
                continue;
            }
            let event = finished::decode(&entry.event).expect("a finished entry");
            let n: u64 = entry.game_id[t.len() + 1..].parse().expect("a game number");
            let view = clients.get_game(n as usize, &entry.game_id).await;
            assert!(!ongoing(&view), "{} listed finished", entry.game_id);
            assert_eq!(view.moves.len() as u32, event.plies, "{}", entry.game_id);
            let played = Played {
                n,
                white: event.white.id.to_string(),
                black: event.black.id.to_string(),
                outcome: event.outcome,
                plies: event.plies,
                created_at_ms: view.created_at_ms,
                finished_at_ms: entry.finished_at_ms,
            };
            let previous = out.entry(t.to_owned()).or_default().insert(n, played);
            assert!(previous.is_none(), "{} listed twice", entry.game_id);
        }
        match page.last() {
            Some(last) if page.len() == 500 => {
                after_ms = last.finished_at_ms;
                after_id = last.game_id.clone();
            }
            _ => return out,
        }
    }
}

/// No player in two games at once: each one's next game was created after the previous finished.
fn one_game_at_a_time(id: &str, games: &BTreeMap<u64, Played>) {
    let mut by_player: HashMap<&str, Vec<&Played>> = HashMap::new();
    for g in games.values() {
        by_player.entry(&g.white).or_default().push(g);
        by_player.entry(&g.black).or_default().push(g);
    }
    for (player, mut list) in by_player {
        list.sort_by_key(|g| (g.created_at_ms, g.n));
        for w in list.windows(2) {
            assert!(
                w[1].created_at_ms >= w[0].finished_at_ms,
                "{player} in games {id}-{} and {id}-{} at once",
                w[0].n,
                w[1].n
            );
            assert!(w[1].n > w[0].n, "{player}'s games out of order in {id}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tournaments_survive_killed_replicas_and_count_every_game_once() {
    let started = Instant::now();
    let platform = Platform::start(
        Scale::TOURNAMENTS,
        &[
            ("DRAUGHTS_RATE_LIMIT_GUEST_PER_MINUTE", "100000"),
            ("DRAUGHTS_RATE_LIMIT_PLAYER_PER_MINUTE", "100000"),
            ("DRAUGHTS_RATE_LIMIT_ANONYMOUS_PER_MINUTE", "100000"),
            ("DRAUGHTS_RATE_LIMIT_API_KEY_PER_MINUTE", "100000"),
            ("DRAUGHTS_TOURNAMENTS_WAVE_MS", "1000"),
            ("DRAUGHTS_TOURNAMENTS_TICK_MS", "200"),
            ("DRAUGHTS_TOURNAMENTS_MIN_ARENA_SECS", "20"),
            // A dead replica's pending results are taken over after 2 s (30 s by default).
            ("DRAUGHTS_TOURNAMENTS_CLAIM_IDLE_MS", "2000"),
        ],
    )
    .await;
    let start_ms = started.elapsed().as_millis();
    let live: Arc<dyn LiveStore> = Arc::new(
        draughts_store::RedisStore::connect(&platform.redis.url(), draughts_systest::PREFIX)
            .await
            .expect("the platform's Redis"),
    );
    let games = Platform::replicas(&platform.validation);
    let reader_key = draughts_systest::create_key(
        &games.channel(0),
        "systest-reader",
        &[pb::AuthScope::Service],
    )
    .await;

    // The players: accounts of the test identity provider.
    let mut tokens = HashMap::new();
    let mut arena_players = Vec::new();
    let mut swiss_players = Vec::new();
    for i in 0..ARENA_PLAYERS + SWISS_PLAYERS {
        let sub = format!("tf-{i}");
        let token = player_token(&sub, &format!("Entrant {i}"));
        tokens.insert(format!("player:{sub}"), token.clone());
        if i < ARENA_PLAYERS {
            arena_players.push(token);
        } else {
            swiss_players.push(token);
        }
    }
    let progress = Arc::new(Progress::default());
    let clients = Clients {
        games,
        tournaments: Platform::replicas(&platform.tournaments),
        tokens: Arc::new(tokens),
        progress: progress.clone(),
    };

    let terms = |kind: pb::TournamentKind, start_in: u32| pb::TournamentTerms {
        name: format!("Systest {}", kind.as_str_name()),
        kind: kind as i32,
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
        rated: true,
        start: Some(pb::tournament_terms::Start::StartInSeconds(start_in)),
        arena_duration_seconds: if kind == pb::TournamentKind::Arena {
            ARENA_SECONDS
        } else {
            0
        },
        swiss_rounds: if kind == pb::TournamentKind::Swiss {
            SWISS_ROUNDS
        } else {
            0
        },
        round_start: if kind == pb::TournamentKind::Swiss {
            pb::SwissRoundStart::AfterPrevious as i32
        } else {
            0
        },
        ..Default::default()
    };
    let create = |t: pb::TournamentTerms| {
        let clients = clients.clone();
        async move {
            let (r, _) = with_retries(&clients.tournaments, 0, RETRY_WITHIN, |ch| {
                let req = authed(
                    ADMIN_KEY,
                    pb::CreateTournamentRequest {
                        terms: Some(t.clone()),
                    },
                );
                async move { TournamentsClient::new(ch).create_tournament(req).await }
            })
            .await;
            r.expect("CreateTournament").into_inner().tournament_id
        }
    };
    let arena = create(terms(pb::TournamentKind::Arena, 3)).await;
    let swiss = create(terms(pb::TournamentKind::Swiss, 3600)).await;
    let join = |token: String, id: String, i: usize| {
        let clients = clients.clone();
        async move {
            let (r, _) = with_retries(&clients.tournaments, i, RETRY_WITHIN, |ch| {
                let req = authed(
                    &token,
                    pb::JoinTournamentRequest {
                        tournament_id: id.clone(),
                        password: String::new(),
                    },
                );
                async move { TournamentsClient::new(ch).join_tournament(req).await }
            })
            .await;
            r.unwrap_or_else(|e| panic!("JoinTournament {id}: {e}"));
        }
    };
    for (i, token) in arena_players.iter().enumerate() {
        join(token.clone(), arena.clone(), i).await;
    }
    for (i, token) in swiss_players.iter().enumerate() {
        join(token.clone(), swiss.clone(), i).await;
    }
    let (r, _) = with_retries(&clients.tournaments, 1, RETRY_WITHIN, |ch| {
        let req = authed(
            ADMIN_KEY,
            pb::StartTournamentRequest {
                tournament_id: swiss.clone(),
            },
        );
        async move { TournamentsClient::new(ch).start_tournament(req).await }
    })
    .await;
    r.expect("StartTournament");

    let faults = tokio::spawn(inject_faults(
        platform,
        live.clone(),
        arena.clone(),
        swiss.clone(),
        progress.clone(),
    ));
    let ids = vec![arena.clone(), swiss.clone()];
    let finals = tokio::time::timeout(TIMEOUT, conduct(clients.clone(), ids.clone()))
        .await
        .expect("both events finished within the bound");
    let (mut platform, done) = faults.await.expect("the faults");
    let play_s = started.elapsed().as_secs_f64();
    let crashed = platform.crashed();
    assert!(
        crashed.is_empty(),
        "processes crashed:\n{}",
        crashed.join("\n")
    );
    assert_eq!(done.len(), 3, "every fault injected: {done:?}");

    // Games' own records.
    let played = finished_games(&clients, &reader_key, &ids).await;
    let mut summary = Vec::new();
    for (id, view) in ids.iter().zip(&finals) {
        let record = record(&*live, id).await.expect("the record, kept a day");
        assert!(record.state.is_over());
        let games = played.get(id).cloned().unwrap_or_default();
        // Nothing lost: every game the event recorded exists in Games, finished.
        let numbers: Vec<u64> = games.keys().copied().collect();
        assert_eq!(
            numbers,
            (1..record.next_game).collect::<Vec<_>>(),
            "{id}: every recorded game created and finished"
        );
        assert_eq!(
            record.standings.applied.len(),
            games.len(),
            "{id}: each game applied"
        );
        one_game_at_a_time(id, &games);
        // Counted exactly once, with the right points.
        let rows: HashMap<String, &pb::StandingRow> = view
            .standings
            .iter()
            .map(|r| (r.player.as_ref().expect("a player").id.clone(), r))
            .collect();
        let arena_kind = id == &arena;
        assert_eq!(
            rows.len(),
            if arena_kind {
                ARENA_PLAYERS
            } else {
                SWISS_PLAYERS
            }
        );
        for (player, row) in &rows {
            let mut mine: Vec<&Played> = games
                .values()
                .filter(|g| &g.white == player || &g.black == player)
                .collect();
            mine.sort_by_key(|g| (g.created_at_ms, g.n));
            let wins = mine
                .iter()
                .filter(|g| g.outcome_of(player) == ArenaOutcome::Win)
                .count();
            assert_eq!(row.games as usize, mine.len(), "{player}'s games in {id}");
            assert_eq!(row.wins as usize, wins, "{player}'s wins in {id}");
            if arena_kind {
                let mut sheet = ArenaSheet::default();
                let rules = ArenaRules::default();
                for g in &mine {
                    sheet.add(
                        &ArenaGame {
                            outcome: g.outcome_of(player),
                            plies: g.plies,
                            berserk: false,
                        },
                        &rules,
                    );
                }
                let text = sheet
                    .entries()
                    .iter()
                    .map(|e| e.points.to_string())
                    .collect::<Vec<_>>()
                    .join(" ");
                assert_eq!(row.sheet, text, "{player}'s arena sheet");
                assert_eq!(row.points, sheet.total(), "{player}'s arena points");
            } else {
                let points: i32 = mine
                    .iter()
                    .map(|g| match g.outcome_of(player) {
                        ArenaOutcome::Win => 2,
                        ArenaOutcome::Draw => 1,
                        ArenaOutcome::Loss => 0,
                    })
                    .sum();
                assert_eq!(row.points, points, "{player}'s Swiss points");
                assert_eq!(
                    mine.len(),
                    SWISS_ROUNDS as usize,
                    "{player}: a game a round"
                );
            }
        }
        if !arena_kind {
            let mut pairs = HashSet::new();
            for g in games.values() {
                let pair = if g.white < g.black {
                    (g.white.clone(), g.black.clone())
                } else {
                    (g.black.clone(), g.white.clone())
                };
                assert!(
                    pairs.insert(pair.clone()),
                    "{pair:?} met twice in the Swiss event"
                );
            }
            assert_eq!(record.standings.round, SWISS_ROUNDS);
        }
        let outcomes = |o: finished::Outcome| games.values().filter(|g| g.outcome == o).count();
        summary.push(format!(
            "| {} | {} games: {} white wins, {} black wins, {} draws |",
            if arena_kind { "arena" } else { "Swiss" },
            games.len(),
            outcomes(finished::Outcome::WhiteWins),
            outcomes(finished::Outcome::BlackWins),
            outcomes(finished::Outcome::Draw)
        ));
    }

    // Archived with their standings: listed with the finished events, and read back from the
    // archive once the live records are gone.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (r, _) = with_retries(&clients.tournaments, 0, RETRY_WITHIN, |ch| async move {
            TournamentsClient::new(ch)
                .list_tournaments(pb::ListTournamentsRequest {
                    state: pb::TournamentState::Finished as i32,
                    page_size: 10,
                    page_token: String::new(),
                })
                .await
        })
        .await;
        let listed: HashSet<String> = r
            .expect("ListTournaments")
            .into_inner()
            .tournaments
            .into_iter()
            .map(|t| t.tournament_id)
            .collect();
        if ids.iter().all(|id| listed.contains(id)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "both events archived: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (id, view) in ids.iter().zip(&finals) {
        live.delete(&contract::record_key(id))
            .await
            .expect("drop the live record");
        let archived = clients.view(0, id).await;
        assert_eq!(
            archived.standings, view.standings,
            "{id}: the archive's standings"
        );
        assert_eq!(
            archived.tournament.as_ref().map(|t| t.state),
            Some(pb::TournamentState::Finished as i32)
        );
    }

    eprintln!("| what | figure |\n| --- | --- |");
    eprintln!("| platform start | {start_ms} ms |");
    eprintln!("| both events played to their end | {play_s:.1} s |");
    for line in &summary {
        eprintln!("{line}");
    }
    eprintln!(
        "| moves played / calls retried on another replica | {} / {} |",
        progress.moves.load(Ordering::Relaxed),
        progress.retries.load(Ordering::Relaxed)
    );
    for fault in &done {
        eprintln!("| fault | {fault} |");
    }
    eprintln!("| whole test | {:.1} s |", started.elapsed().as_secs_f64());
}
