//! `draughts-load-abuse`: honest players beside abusers, through the public API only (issue 38's
//! "must reach"). Honest players (signed-up accounts) play the computer (`ai:<level>`) at 1+0, one game after another,
//! moving at once (the first legal move `Rules.ListMoves` gives); the tool measures each computer
//! reply from the honest move's answer to the computer's move on `WatchGame`. Beside them:
//! - flooders: guests keeping `--in-flight` `Analysis.BestMove` calls at the strongest level open
//!   each, all the time (refusals are what they should get);
//! - churners: guests looping "create a game against the computer, abort it", "offer a lobby seek,
//!   cancel it" and "seek in a pool, withdraw".
//!
//! It reports the computer's reply times (p50/p95/max), games the computer lost on time, every refusal
//! an honest player saw (there should be none), and what the abusers got; it exits with an error when
//! an honest call was refused or the computer lost on time.
//!
//! ```sh
//! draughts-load-abuse --server http://127.0.0.1:50051 --flooders 10 --in-flight 8 --games 6
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use draughts_loadgen::Target;
use draughts_loadgen::games::{authed, guest};
use draughts_proto::pb;
use draughts_proto::pb::analysis_client::AnalysisClient;
use draughts_proto::pb::games_client::GamesClient;
use draughts_proto::pb::matchmaking_client::MatchmakingClient;
use draughts_proto::pb::rules_client::RulesClient;
use hdrhistogram::Histogram;
use tokio_stream::StreamExt;
use tonic::Code;
use tonic::transport::Channel;

#[derive(Parser, Debug)]
#[command(
    name = "draughts-load-abuse",
    about = "Honest games against the computer beside guests flooding BestMove and churning games, seeks and lobby seeks"
)]
struct Args {
    /// Server (loopback only).
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    server: String,
    /// Honest players (accounts), each playing `--games` games against the computer one after another.
    #[arg(long, default_value_t = 2)]
    honest: usize,
    /// Games per honest guest.
    #[arg(long, default_value_t = 3)]
    games: usize,
    /// The computer's level in the honest games.
    #[arg(long, default_value_t = 1)]
    level: u32,
    /// The honest games' time control: base seconds (Fischer, no increment unless given).
    #[arg(long, default_value_t = 60)]
    base_seconds: u64,
    #[arg(long, default_value_t = 0)]
    increment_seconds: u64,
    /// Guests flooding Analysis.BestMove.
    #[arg(long, default_value_t = 10)]
    flooders: usize,
    /// BestMove calls each flooder keeps in flight.
    #[arg(long, default_value_t = 8)]
    in_flight: usize,
    /// The flooders' level (6: the strongest a guest may ask by default).
    #[arg(long, default_value_t = 6)]
    flood_level: u32,
    /// Guests churning computer games, lobby seeks and pool seeks (each loops all three).
    #[arg(long, default_value_t = 4)]
    churners: usize,
}

/// What every abuser got, by kind.
#[derive(Default)]
struct Abuse {
    best_moves: AtomicU64,
    best_moves_refused: AtomicU64,
    games_created: AtomicU64,
    games_refused: AtomicU64,
    lobby_seeks: AtomicU64,
    lobby_refused: AtomicU64,
    seeks: AtomicU64,
    seeks_refused: AtomicU64,
    /// Calls answered neither OK nor a refusal: how many per status code, with the first message seen.
    other_errors: std::sync::Mutex<std::collections::BTreeMap<String, (u64, String)>>,
}

impl Abuse {
    fn other(&self, status: &tonic::Status) {
        let mut others = self.other_errors.lock().unwrap_or_else(|e| e.into_inner());
        others
            .entry(format!("{:?}", status.code()))
            .or_insert_with(|| (0, status.message().to_owned()))
            .0 += 1;
    }

    /// "N (CODE xK: "first message", ...)".
    fn others(&self) -> String {
        let others = self.other_errors.lock().unwrap_or_else(|e| e.into_inner());
        let total: u64 = others.values().map(|(n, _)| n).sum();
        let each: Vec<String> = others
            .iter()
            .map(|(code, (n, first))| format!("{code} x{n}: {first:?}"))
            .collect();
        if each.is_empty() {
            total.to_string()
        } else {
            format!("{total} ({})", each.join("; "))
        }
    }
}

/// What the honest players saw.
struct Honest {
    replies: Histogram<u64>,
    games: u64,
    computer_lost_on_time: u64,
    refusals: Vec<String>,
    results: Vec<String>,
}

fn refused(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        Code::ResourceExhausted | Code::Unavailable | Code::PermissionDenied
    )
}

fn rules(variant: pb::Variant) -> Option<pb::RuleSet> {
    Some(pb::RuleSet {
        variant: variant as i32,
        options: None,
    })
}

fn fischer(base_ms: u64, increment_ms: u64) -> Option<pb::TimeControl> {
    Some(pb::TimeControl {
        kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
            base_ms,
            increment_ms,
        })),
    })
}

fn player(id: &str) -> Option<pb::Player> {
    Some(pb::Player {
        id: id.to_owned(),
        ..Default::default()
    })
}

async fn churn(ch: Channel, stop: Arc<AtomicBool>, abuse: Arc<Abuse>) {
    let (me, token) = match guest(&ch, "churn").await {
        Ok(made) => made,
        Err(e) => return abuse.other(&e),
    };
    let mut games = GamesClient::new(ch.clone());
    let mut mm = MatchmakingClient::new(ch.clone());
    let count = |r: &Result<(), tonic::Status>, ok: &AtomicU64, no: &AtomicU64| match r {
        Ok(()) => {
            ok.fetch_add(1, Ordering::Relaxed);
        }
        Err(s) if refused(s) => {
            no.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => abuse.other(e),
    };
    while !stop.load(Ordering::Relaxed) {
        // A game against the strongest computer, aborted at once.
        let made = async {
            let game = games
                .create_game(authed(
                    &token,
                    pb::CreateGameRequest {
                        rules: rules(pb::Variant::International),
                        time_control: fischer(60_000, 0),
                        white: player("ai:8"),
                        black: player(&me),
                        rated: false,
                        fen: String::new(),
                        game_id: String::new(),
                        berserk_allowed: false,
                    },
                ))
                .await?
                .into_inner();
            let _ = games
                .abort(authed(
                    &token,
                    pb::GameActionRequest {
                        game_id: game.game_id,
                    },
                ))
                .await;
            Ok(())
        }
        .await;
        count(&made, &abuse.games_created, &abuse.games_refused);
        // A lobby seek, cancelled.
        let listed = async {
            let seek = mm
                .create_lobby_seek(authed(
                    &token,
                    pb::CreateLobbySeekRequest {
                        rules: rules(pb::Variant::International),
                        time_control: fischer(180_000, 2_000),
                        ..Default::default()
                    },
                ))
                .await?
                .into_inner();
            mm.cancel(authed(&token, pb::CancelRequest { id: seek.seek_id }))
                .await?;
            Ok(())
        }
        .await;
        count(&listed, &abuse.lobby_seeks, &abuse.lobby_refused);
        // A pool seek, withdrawn once it has answered.
        let sought = async {
            let mut stream = mm
                .seek(authed(
                    &token,
                    pb::SeekRequest {
                        pool_ids: vec!["international-3+2-casual".into()],
                        ..Default::default()
                    },
                ))
                .await?
                .into_inner();
            let first = stream.next().await;
            drop(stream);
            match first {
                Some(Err(s)) => Err(s),
                _ => Ok(()),
            }
        }
        .await;
        count(&sought, &abuse.seeks, &abuse.seeks_refused);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One honest guest's games against the computer; its replies and refusals.
async fn play(
    ch: Channel,
    args: Arc<Args>,
    n: usize,
    (me, token): (String, String),
) -> anyhow::Result<Honest> {
    let mut honest = Honest {
        replies: Histogram::new_with_bounds(1, 600_000_000, 3)?,
        games: 0,
        computer_lost_on_time: 0,
        refusals: Vec::new(),
        results: Vec::new(),
    };
    let mut games = GamesClient::new(ch.clone());
    let mut rules_api = RulesClient::new(ch.clone());
    let computer = format!("ai:{}", args.level);
    let note = |honest: &mut Honest, what: &str, s: &tonic::Status| {
        if refused(s) {
            honest
                .refusals
                .push(format!("{what}: {:?} {}", s.code(), s.message()));
        }
    };
    for g in 0..args.games {
        // Alternate colours: half the games the computer moves first.
        let (white, black) = if (g + n).is_multiple_of(2) {
            (me.clone(), computer.clone())
        } else {
            (computer.clone(), me.clone())
        };
        let game = match games
            .create_game(authed(
                &token,
                pb::CreateGameRequest {
                    rules: rules(pb::Variant::International),
                    time_control: fischer(args.base_seconds * 1000, args.increment_seconds * 1000),
                    white: player(&white),
                    black: player(&black),
                    rated: false,
                    fen: String::new(),
                    game_id: String::new(),
                    berserk_allowed: false,
                },
            ))
            .await
        {
            Ok(g) => g.into_inner(),
            Err(s) => {
                note(&mut honest, "CreateGame", &s);
                return Err(s.into());
            }
        };
        let my_color = if white == me {
            pb::Color::White
        } else {
            pb::Color::Black
        };
        let mut events = games
            .watch_game(authed(
                &token,
                pb::WatchGameRequest {
                    game_id: game.game_id.clone(),
                },
            ))
            .await?
            .into_inner();
        let mut fen = game
            .position
            .as_ref()
            .map(|p| p.fen.clone())
            .unwrap_or_default();
        let mut to_move = game.position.as_ref().map_or(0, |p| p.side_to_move);
        let mut since: Option<Instant> = None;
        let mut finished: Option<pb::GameStatus> = None;
        loop {
            if to_move == my_color as i32 {
                // Signed in: an anonymous call would count against the address every client of
                // this tool shares.
                let moves = rules_api
                    .list_moves(authed(
                        &token,
                        pb::ListMovesRequest {
                            rules: rules(pb::Variant::International),
                            fen: fen.clone(),
                        },
                    ))
                    .await?
                    .into_inner();
                let Some(first) = moves.moves.first() else {
                    break;
                };
                match games
                    .play_move(authed(
                        &token,
                        pb::PlayMoveRequest {
                            game_id: game.game_id.clone(),
                            r#move: Some(pb::MoveInput {
                                r#move: Some(pb::move_input::Move::Text(first.notation.clone())),
                            }),
                            expected_ply: None,
                        },
                    ))
                    .await
                {
                    Ok(view) => {
                        let view = view.into_inner();
                        since = Some(Instant::now());
                        if let Some(p) = view.position {
                            fen = p.fen;
                            to_move = p.side_to_move;
                        }
                        if view
                            .status
                            .as_ref()
                            .is_some_and(|s| s.outcome != pb::Outcome::Ongoing as i32)
                        {
                            finished = view.status;
                            break;
                        }
                    }
                    Err(s) => {
                        note(&mut honest, "PlayMove", &s);
                        if s.code() == Code::FailedPrecondition {
                            // The game ended meanwhile (e.g. on time): the event says how.
                        } else {
                            return Err(s.into());
                        }
                    }
                }
            }
            // Wait for the computer's move (or the end); our own move's event comes first.
            let Some(event) = tokio::time::timeout(Duration::from_secs(120), events.next()).await?
            else {
                break;
            };
            match event?.kind {
                Some(pb::game_event::Kind::MovePlayed(m)) if m.side != my_color as i32 => {
                    if let Some(t) = since.take() {
                        honest
                            .replies
                            .record(u64::try_from(t.elapsed().as_micros())?.max(1))?;
                    }
                    let view = games
                        .get_game(authed(
                            &token,
                            pb::GetGameRequest {
                                game_id: game.game_id.clone(),
                            },
                        ))
                        .await?
                        .into_inner();
                    if let Some(p) = view.position {
                        fen = p.fen;
                        to_move = p.side_to_move;
                    }
                }
                Some(pb::game_event::Kind::Finished(status)) => {
                    finished = Some(status);
                    break;
                }
                _ => {}
            }
        }
        honest.games += 1;
        if let Some(status) = finished {
            let computer_lost = (status.outcome == pb::Outcome::WhiteWins as i32
                && my_color == pb::Color::White)
                || (status.outcome == pb::Outcome::BlackWins as i32
                    && my_color == pb::Color::Black);
            if computer_lost && status.reason == pb::EndReason::Time as i32 {
                honest.computer_lost_on_time += 1;
            }
            honest.results.push(status.description);
        }
    }
    Ok(honest)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Arc::new(Args::parse());
    let target = Target::parse(&args.server).await?;
    let ch = Channel::from_shared(target.uri())?.connect().await?;
    let stop = Arc::new(AtomicBool::new(false));
    let abuse = Arc::new(Abuse::default());
    // The honest players first: every client of this tool shares one address, whose anonymous
    // calls the abusers would otherwise use up. Signed-up accounts (a guest's 120 calls a minute are
    // fewer than a player moving at once makes: three calls a move here).
    let mut honest_guests = Vec::new();
    let run = std::process::id();
    for n in 0..args.honest {
        let session = pb::auth_client::AuthClient::new(ch.clone())
            .sign_up(pb::SignUpRequest {
                username: format!("honest{run}x{n}"),
                password: format!("correct horse {run} {n}"),
                display_name: format!("Honest {n}"),
            })
            .await?
            .into_inner();
        let id = session.player.map(|p| p.id).unwrap_or_default();
        honest_guests.push((id, session.access_token));
    }
    let mut tasks = Vec::new();
    for _ in 0..args.flooders {
        // Each flooder is one guest with `in_flight` calls at once.
        let token = match guest(&ch, "flood").await {
            Ok((_, token)) => token,
            Err(e) => {
                abuse.other(&e);
                continue;
            }
        };
        for _ in 0..args.in_flight.max(1) {
            let (ch, stop, abuse, token) = (ch.clone(), stop.clone(), abuse.clone(), token.clone());
            let level = args.flood_level;
            tasks.push(tokio::spawn(async move {
                flood_as(ch, token, level, stop, abuse).await;
            }));
        }
    }
    for _ in 0..args.churners {
        tasks.push(tokio::spawn(churn(ch.clone(), stop.clone(), abuse.clone())));
    }
    // Let the flood build up before the honest games start.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = Instant::now();
    let honest: Vec<_> = honest_guests
        .into_iter()
        .enumerate()
        .map(|(n, who)| tokio::spawn(play(ch.clone(), args.clone(), n, who)))
        .collect();
    let mut replies = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3)?;
    let (mut games, mut lost_on_time, mut refusals, mut failures) = (0, 0, Vec::new(), Vec::new());
    for h in honest {
        match h.await? {
            Ok(h) => {
                replies.add(&h.replies)?;
                games += h.games;
                lost_on_time += h.computer_lost_on_time;
                refusals.extend(h.refusals);
                for r in h.results {
                    eprintln!("game: {r}");
                }
            }
            Err(e) => failures.push(e.to_string()),
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let ms = |us: u64| us as f64 / 1000.0;
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    println!(
        "honest: {games} games against ai:{} at {}+{} in {:.0} s; computer replies: {} (p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms, max {:.1} ms); computer lost on time: {lost_on_time}; honest calls refused: {}; failures: {}",
        args.level,
        args.base_seconds / 60,
        args.increment_seconds,
        started.elapsed().as_secs_f64(),
        replies.len(),
        ms(replies.value_at_quantile(0.5)),
        ms(replies.value_at_quantile(0.95)),
        ms(replies.value_at_quantile(0.99)),
        ms(replies.max()),
        refusals.len(),
        failures.len(),
    );
    println!(
        "abusers: {} flooders x {} in flight at level {}: BestMove answered {}, refused {}; {} churners: computer games made {}, refused {}; lobby seeks {}, refused {}; pool seeks {}, refused {}; other errors {}",
        args.flooders,
        args.in_flight,
        args.flood_level,
        load(&abuse.best_moves),
        load(&abuse.best_moves_refused),
        args.churners,
        load(&abuse.games_created),
        load(&abuse.games_refused),
        load(&abuse.lobby_seeks),
        load(&abuse.lobby_refused),
        load(&abuse.seeks),
        load(&abuse.seeks_refused),
        abuse.others(),
    );
    for r in refusals.iter().chain(&failures) {
        eprintln!("honest: {r}");
    }
    if !refusals.is_empty() || !failures.is_empty() || lost_on_time > 0 {
        anyhow::bail!("an honest player was refused, failed, or the computer lost on time");
    }
    Ok(())
}

/// One of a flooder's calls in flight, again and again until `stop`.
async fn flood_as(
    ch: Channel,
    token: String,
    level: u32,
    stop: Arc<AtomicBool>,
    abuse: Arc<Abuse>,
) {
    let mut analysis = AnalysisClient::new(ch);
    let mut seed = 1u64;
    while !stop.load(Ordering::Relaxed) {
        seed += 1;
        let request = pb::BestMoveRequest {
            source: Some(pb::best_move_request::Source::Position(pb::PositionInput {
                rules: rules(pb::Variant::International),
                fen: String::new(),
                moves: Vec::new(),
            })),
            strength: Some(pb::best_move_request::Strength::Level(level)),
            clock: None,
            seed,
        };
        match analysis.best_move(authed(&token, request)).await {
            Ok(_) => {
                abuse.best_moves.fetch_add(1, Ordering::Relaxed);
            }
            Err(s) if refused(&s) => {
                abuse.best_moves_refused.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => {
                abuse.other(&e);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}
