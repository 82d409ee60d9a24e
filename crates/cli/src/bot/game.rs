//! One game played by the bridge: its own engine process, the server's view of the game, the moves.
//!
//! The loop, step by step:
//! 1. open `WatchGame`, then read the whole game with `GetGame` (a move played in between is in the
//!    watch's history; moves at or below the known ply are skipped), and rebuild the position locally;
//! 2. on the bot's turn: the engine gets the start position and the moves (`pos`), a budget from the
//!    bot's clock ([`super::policy::think_time`]) and `go`; its move is checked against the position
//!    and sent with `PlayMove` and the `expected_ply` guard (so a stale view can never play twice);
//! 3. otherwise wait for the next event of the watch: a move, a draw offer, or the end.
//!
//! Draws ([`super::policy::DrawRule`]): an opponent's offer (seen in the game on step 1, or as an
//! event, also while the engine thinks) is accepted when the engine's latest scores call the game
//! level after enough plies, and declined otherwise; after its own move the bridge offers a draw on
//! the same rule (not again within [`DrawRule::OFFER_EVERY_PLIES`]). With `--draws never` every offer
//! is declined and none made.
//!
//! Anything unexpected from the server (a dropped stream, a refused or lost `PlayMove`, a restart)
//! goes back to step 1 after a short back-off: the server's record is the truth, and a game is picked
//! up again wherever it stands. Anything wrong with the engine (an illegal move, silence past its time,
//! an exit) resigns the game and is reported: the bridge never waits on an engine without a deadline.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use draughts_ai::hub;
use draughts_engine::{Color, Game, GameStatus, Position};
use draughts_proto::pb;
use draughts_proto::pb::games_client::GamesClient;
use tokio::time::Instant;
use tonic::transport::Channel;

use super::engine::{EngineError, HubEngine};
use super::policy::{DrawRule, think_time};
use crate::client::Caller;

/// What every game of one bridge shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) channel: Channel,
    pub(crate) caller: Caller,
    /// The bot's player id.
    pub(crate) me: String,
    pub(crate) engine: String,
    /// Kept in reserve on every move for the network and the bridge, ms.
    pub(crate) move_overhead_ms: u64,
    /// How long past its budget the engine's answer is still waited for (then `stop`, then resign).
    pub(crate) engine_grace: Duration,
    /// The longest think for a correspondence move.
    pub(crate) correspondence_think: Duration,
    /// Where each game's log and PDN go (`<game id>.log`, `<game id>.pdn`).
    pub(crate) log_dir: Option<PathBuf>,
    /// When to accept and offer draws.
    pub(crate) draws: DrawRule,
    pub(crate) stats: Mutex<Stats>,
}

/// A game's draw bookkeeping, kept across re-reads of the game.
#[derive(Debug, Default)]
struct DrawState {
    /// The engine's scores of its latest searches (men, its own side), oldest first.
    scores: Vec<f64>,
    /// The ply at which the bridge last offered a draw.
    last_offer: Option<u32>,
}

impl DrawState {
    fn record(&mut self, score: Option<f64>) {
        match score {
            Some(score) => self.scores.push(score),
            // A search without a score breaks the run.
            None => self.scores.clear(),
        }
        if self.scores.len() > DrawRule::SCORES {
            self.scores.remove(0);
        }
    }
}

fn wire_color(color: Color) -> pb::Color {
    match color {
        Color::White => pb::Color::White,
        Color::Black => pb::Color::Black,
    }
}

/// Per-move samples kept for the running quantiles.
const MAX_SAMPLES: usize = 100_000;

/// The bridge's own time per move (from the event that gave the turn to the `PlayMove` answer, less
/// the engine's thinking), and how games ended.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) overhead_us: Vec<u64>,
    pub(crate) games: u64,
    pub(crate) resigned_for_engine: u64,
}

impl Stats {
    /// The `q` quantile (0..=1) of the per-move overhead, µs.
    pub(crate) fn overhead_quantile(&self, q: f64) -> u64 {
        let mut v = self.overhead_us.clone();
        if v.is_empty() {
            return 0;
        }
        v.sort_unstable();
        let i = ((v.len() as f64 - 1.0) * q).round() as usize;
        v[i.min(v.len() - 1)]
    }
}

/// How a game ended for the bridge.
#[derive(Debug)]
pub(crate) enum Ending {
    /// The server says it is over.
    Over(pb::GameStatus),
    /// The engine failed; the game was resigned.
    EngineFailed(String),
    /// The game is gone or not ours.
    Gone(String),
}

/// The game as the bridge follows it.
struct Board {
    start: Position,
    start_hub: String,
    /// The game with the variant's draw rules, so that a game drawn by them is not played on.
    game: Game,
    pos: Position,
    hub_moves: Vec<String>,
    mine: Color,
    increment_ms: u64,
    correspondence: bool,
    /// The bot's clock, ms, and when it was read.
    my_ms: u64,
    read_at: Instant,
}

impl Board {
    fn from_view(view: &pb::GameView, me: &str) -> Result<Board, String> {
        let rules =
            draughts_proto::convert::rule_set(view.rules.as_ref()).map_err(|e| e.to_string())?;
        let start =
            draughts_proto::convert::position(rules, &view.start_fen).map_err(|e| e.to_string())?;
        let game = if view.start_fen.is_empty() {
            Game::new(start)
        } else {
            Game::from_fen(rules, &view.start_fen).map_err(|e| e.to_string())?
        };
        let mine = if view.white.as_ref().is_some_and(|p| p.id == me) {
            Color::White
        } else if view.black.as_ref().is_some_and(|p| p.id == me) {
            Color::Black
        } else {
            return Err("not a player of this game".into());
        };
        use pb::time_control::Kind;
        let (increment_ms, correspondence) =
            match view.time_control.as_ref().and_then(|t| t.kind.as_ref()) {
                Some(Kind::Fischer(f)) => (f.increment_ms, false),
                _ => (0, true),
            };
        let mut board = Board {
            start_hub: hub::write_position(&start),
            start,
            game,
            pos: start,
            hub_moves: Vec::new(),
            mine,
            increment_ms,
            correspondence,
            my_ms: 0,
            read_at: Instant::now(),
        };
        if view.first_ply > 1 {
            return Err("the game view lacks the first moves".into());
        }
        for played in &view.moves {
            board.apply(played)?;
        }
        if let Some(clocks) = &view.clocks {
            board.set_clock(clocks);
        }
        Ok(board)
    }

    fn plies(&self) -> u32 {
        self.hub_moves.len() as u32
    }

    fn my_turn(&self) -> bool {
        self.game.status() == GameStatus::Ongoing && self.pos.side_to_move() == self.mine
    }

    fn set_clock(&mut self, clocks: &pb::Clocks) {
        self.my_ms = match self.mine {
            Color::White => clocks.white_ms,
            Color::Black => clocks.black_ms,
        };
        self.read_at = Instant::now();
    }

    /// Applies a played move from the server (its path resolves it against the position).
    fn apply(&mut self, played: &pb::PlayedMove) -> Result<(), String> {
        let wire = played
            .r#move
            .as_ref()
            .ok_or("a played move without its move")?;
        let input = pb::MoveInput {
            r#move: Some(pb::move_input::Move::Squares(pb::MoveSquares {
                squares: wire.path.clone(),
            })),
        };
        let mv = draughts_proto::convert::resolve_move(&self.pos, Some(&input))
            .or_else(|_| self.pos.parse_move(&wire.notation))
            .map_err(|e| format!("the server's move {} does not resolve: {e}", wire.notation))?;
        self.play(&mv)?;
        if let Some(clocks) = &played.clocks {
            self.set_clock(clocks);
        }
        Ok(())
    }

    fn play(&mut self, mv: &draughts_engine::Move) -> Result<(), String> {
        self.game
            .play(mv)
            .map_err(|e| format!("move {} after the end: {e}", hub::write_move(&self.pos, mv)))?;
        self.hub_moves.push(hub::write_move(&self.pos, mv));
        self.pos = self.pos.play_unchecked(mv);
        Ok(())
    }

    /// The bot's clock now (the server's reading less the time since it was read).
    fn my_remaining_ms(&self) -> u64 {
        self.my_ms
            .saturating_sub(u64::try_from(self.read_at.elapsed().as_millis()).unwrap_or(u64::MAX))
    }
}

/// What one turn came to.
enum Turn {
    Played,
    /// The server's view is needed again (refused, lost or stale move, or a transport error).
    Resync,
    EngineFailed(String),
    /// The game ended while the engine thought (a draw accepted, a resignation, a flag).
    Over(pb::GameStatus),
}

/// `<log dir>/<game id>.<extension>`, for a game id that is a plain file name (ids come from the
/// server, and a path is never built from anything else).
fn log_path(shared: &Shared, game_id: &str, extension: &str) -> Option<PathBuf> {
    let plain = !game_id.is_empty()
        && game_id.len() <= 64
        && game_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    let dir = shared.log_dir.as_ref()?;
    plain.then(|| dir.join(format!("{game_id}.{extension}")))
}

/// Appends a line to the game's log file (best effort).
fn log_line(shared: &Shared, game_id: &str, line: &str) {
    if let Some(path) = log_path(shared, game_id, "log") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// Plays `game_id` to its end (or until the engine fails, when the game is resigned).
/// `ended` hears the game's id as soon as the game is over for the bridge (before the engine's exit
/// and the log), so that its slot is free for the next invitation at once.
pub(crate) async fn play(
    shared: Arc<Shared>,
    game_id: String,
    ended: tokio::sync::mpsc::UnboundedSender<String>,
) -> Ending {
    let mut engine: Option<HubEngine> = None;
    let mut draws = DrawState::default();
    let mut failures = 0u32;
    let ending = loop {
        if failures > 0 {
            let wait = Duration::from_millis(250 * u64::from(failures.min(20)));
            tokio::time::sleep(wait).await;
        }
        failures += 1;
        match follow(&shared, &game_id, &mut engine, &mut draws, &mut failures).await {
            Some(ending) => break ending,
            None => continue,
        }
    };
    let _ = ended.send(game_id.clone());
    if let Some(engine) = engine {
        engine.quit().await;
    }
    finish_log(&shared, &game_id, &ending).await;
    ending
}

/// One pass of steps 1-3; `None` to start again (after a back-off), `Some` when the game is done.
async fn follow(
    shared: &Shared,
    game_id: &str,
    engine: &mut Option<HubEngine>,
    draws: &mut DrawState,
    failures: &mut u32,
) -> Option<Ending> {
    let mut games = GamesClient::new(shared.channel.clone());
    let watch = games
        .watch_game(shared.caller.request(pb::WatchGameRequest {
            game_id: game_id.to_owned(),
        }))
        .await;
    let mut stream = match watch {
        Ok(stream) => stream.into_inner(),
        Err(status) => return gone_or_retry(&status),
    };
    let mut request = shared.caller.request(pb::GetGameRequest {
        game_id: game_id.to_owned(),
    });
    request.set_timeout(Duration::from_secs(10));
    let view = match games.get_game(request).await {
        Ok(view) => view.into_inner(),
        Err(status) => return gone_or_retry(&status),
    };
    if let Some(status) = over(&view) {
        return Some(Ending::Over(status));
    }
    let mut board = match Board::from_view(&view, &shared.me) {
        Ok(board) => board,
        Err(e) => return Some(Ending::Gone(e)),
    };
    // The engine is started before it is needed, so that its start never counts as the bridge's time.
    if engine.is_none() {
        match HubEngine::start(&shared.engine, Some(board.start.variant())).await {
            Ok(mut started) => {
                if let Err(e) = started.new_game().await {
                    return Some(resign(shared, game_id, &e.to_string()).await);
                }
                *engine = Some(started);
            }
            Err(e) => return Some(resign(shared, game_id, &e.to_string()).await),
        }
    }
    // An offer standing when the game is (re)read is answered now.
    let theirs = wire_color(board.mine.opposite());
    if view.draw_offer == theirs as i32 {
        answer_draw(shared, game_id, &board, draws).await;
    }
    let mut turn_since = Instant::now();
    loop {
        if board.my_turn() {
            let running = engine.as_mut()?;
            let turn = take_turn(
                shared,
                game_id,
                running,
                &mut board,
                turn_since,
                &mut stream,
                draws,
            )
            .await;
            match turn {
                Turn::Played => *failures = 0,
                Turn::Over(status) => return Some(Ending::Over(status)),
                Turn::Resync => return None,
                Turn::EngineFailed(why) => {
                    // The process is in an unknown state: it goes, whatever it was doing.
                    *engine = None;
                    return Some(resign(shared, game_id, &why).await);
                }
            }
        }
        let event = match stream.message().await {
            Ok(Some(event)) => event,
            // The stream ended or broke: the end is read from the game itself.
            Ok(None) | Err(_) => return None,
        };
        use pb::game_event::Kind;
        match event.kind {
            Some(Kind::MovePlayed(played)) => {
                if played.ply <= board.plies() {
                    continue;
                }
                if played.ply != board.plies() + 1 {
                    return None;
                }
                if let Err(e) = board.apply(&played) {
                    return Some(Ending::Gone(e));
                }
                turn_since = Instant::now();
            }
            Some(Kind::Finished(status)) => return Some(Ending::Over(status)),
            Some(Kind::DrawOffered(color)) if color == theirs as i32 => {
                answer_draw(shared, game_id, &board, draws).await;
            }
            _ => {}
        }
    }
}

/// Answers the opponent's standing draw offer by the rule: accepts or declines (best effort: a lost
/// answer leaves the offer to be cleared by the next move).
async fn answer_draw(shared: &Shared, game_id: &str, board: &Board, draws: &DrawState) {
    let accept = shared.draws.level(board.plies(), &draws.scores);
    let mut request = shared.caller.request(pb::GameActionRequest {
        game_id: game_id.to_owned(),
    });
    request.set_timeout(Duration::from_secs(10));
    let mut games = GamesClient::new(shared.channel.clone());
    let answer = if accept {
        games.accept_draw(request).await
    } else {
        games.decline_draw(request).await
    };
    let what = if accept { "accepted" } else { "declined" };
    let outcome = match answer {
        Ok(_) => String::new(),
        // An offer seen late (its event read after the bot's move, which cleared it).
        Err(status) if status.code() == tonic::Code::FailedPrecondition => {
            " (the offer was gone)".to_owned()
        }
        Err(status) => format!(" (refused: {:?} {})", status.code(), status.message()),
    };
    log_line(
        shared,
        game_id,
        &format!(
            "draw offer {what} ply={} scores={:?}{outcome}",
            board.plies(),
            draws.scores
        ),
    );
}

/// Offers a draw (the rule holds after the bot's move).
/// Offers a draw with the move that makes the game `plies` long. Sent before that move: the
/// offerer's own move leaves an offer standing, so the opponent finds it at their turn (sent after
/// the move, an opponent who moved at once would clear it unseen).
async fn offer_draw(shared: &Shared, game_id: &str, plies: u32, draws: &mut DrawState) {
    draws.last_offer = Some(plies);
    let mut request = shared.caller.request(pb::GameActionRequest {
        game_id: game_id.to_owned(),
    });
    request.set_timeout(Duration::from_secs(10));
    let answer = GamesClient::new(shared.channel.clone())
        .offer_draw(request)
        .await;
    let outcome = match answer {
        Ok(_) => String::new(),
        Err(status) => format!(" (refused: {:?} {})", status.code(), status.message()),
    };
    log_line(
        shared,
        game_id,
        &format!(
            "draw offered ply={plies} scores={:?}{outcome}",
            draws.scores
        ),
    );
}

/// NOT_FOUND and PERMISSION_DENIED end the game for the bridge; anything else is retried.
fn gone_or_retry(status: &tonic::Status) -> Option<Ending> {
    match status.code() {
        tonic::Code::NotFound | tonic::Code::PermissionDenied | tonic::Code::InvalidArgument => {
            Some(Ending::Gone(status.message().chars().take(200).collect()))
        }
        _ => None,
    }
}

fn over(view: &pb::GameView) -> Option<pb::GameStatus> {
    view.status
        .clone()
        .filter(|s| s.outcome != pb::Outcome::Ongoing as i32)
}

/// Step 2: the engine's move, checked and played.
async fn take_turn(
    shared: &Shared,
    game_id: &str,
    engine: &mut HubEngine,
    board: &mut Board,
    turn_since: Instant,
    stream: &mut tonic::Streaming<pb::GameEvent>,
    draws: &mut DrawState,
) -> Turn {
    let remaining = board.my_remaining_ms();
    let think = think_time(
        remaining,
        board.increment_ms,
        board.correspondence,
        shared.move_overhead_ms,
        shared.correspondence_think,
    );
    // The engine's answer is taken until its budget plus the grace, and never past the clock.
    let hard = (think + shared.engine_grace).min(Duration::from_millis(
        remaining
            .saturating_sub(shared.move_overhead_ms / 2)
            .max(think.as_millis() as u64),
    ));
    let current = hub::write_position(&board.pos);
    let asked = Instant::now();
    let answer = {
        let thinking = engine.best_move(
            &board.start_hub,
            &board.hub_moves,
            &current,
            think,
            asked + hard,
            shared.engine_grace.min(Duration::from_millis(500)),
        );
        tokio::pin!(thinking);
        // The game's events go on while the engine thinks: an offer is answered at once (the move
        // would clear it), the end stops the turn.
        let theirs = wire_color(board.mine.opposite()) as i32;
        loop {
            tokio::select! {
                answer = &mut thinking => break answer,
                event = stream.message() => {
                    use pb::game_event::Kind;
                    match event {
                        Ok(Some(pb::GameEvent { kind: Some(Kind::Finished(status)), .. })) => {
                            return Turn::Over(status);
                        }
                        Ok(Some(pb::GameEvent { kind: Some(Kind::DrawOffered(color)), .. }))
                            if color == theirs =>
                        {
                            answer_draw(shared, game_id, board, draws).await;
                        }
                        Ok(Some(_)) => {}
                        // The stream broke: the move is still played, then the game read again.
                        Ok(None) | Err(_) => break (&mut thinking).await,
                    }
                }
            }
        }
    };
    let answered = Instant::now();
    let text = match answer {
        Ok((text, score)) => {
            draws.record(score);
            text
        }
        Err(e @ (EngineError::Silent(..) | EngineError::Exited | EngineError::Reported(_))) => {
            return Turn::EngineFailed(e.to_string());
        }
        Err(e) => return Turn::EngineFailed(e.to_string()),
    };
    let mv = match hub::parse_move(&board.pos, &text) {
        Ok(mv) => mv,
        Err(e) => {
            return Turn::EngineFailed(format!("the engine played an illegal move '{text}': {e}"));
        }
    };
    let wire = draughts_proto::convert::move_to_wire(&board.pos, &mv);
    let ply = board.plies();
    // The offer's round trip is the server's and the network's, not the bridge's overhead.
    let offering = Instant::now();
    if shared.draws.offer(ply + 1, &draws.scores, draws.last_offer) {
        offer_draw(shared, game_id, ply + 1, draws).await;
    }
    let offer_time = offering.elapsed();
    let sending = Instant::now();
    let mut request = shared.caller.request(pb::PlayMoveRequest {
        game_id: game_id.to_owned(),
        r#move: Some(pb::MoveInput {
            r#move: Some(pb::move_input::Move::Squares(pb::MoveSquares {
                squares: wire.path,
            })),
        }),
        expected_ply: Some(ply),
    });
    request.set_timeout(Duration::from_secs(10));
    let mut games = GamesClient::new(shared.channel.clone());
    match games.play_move(request).await {
        Ok(response) => {
            let done = Instant::now();
            if let Err(e) = board.play(&mv) {
                return Turn::EngineFailed(e);
            }
            let view = response.into_inner();
            if let Some(clocks) = view.moves.last().and_then(|m| m.clocks.as_ref()) {
                board.set_clock(clocks);
            }
            let engine_time = answered - asked;
            // The bridge's own time: from the event that gave the turn to the engine's `go`, and
            // from its `done` to the move's sending. The round trip of PlayMove (the server's work
            // and the network) is logged apart.
            let overhead = ((asked - turn_since) + (sending - answered)).saturating_sub(offer_time);
            let overhead_us = u64::try_from(overhead.as_micros()).unwrap_or(u64::MAX);
            let rpc_us = u64::try_from((done - sending).as_micros()).unwrap_or(u64::MAX);
            if let Ok(mut stats) = shared.stats.lock() {
                // The latest samples only: a bot runs for months.
                if stats.overhead_us.len() >= MAX_SAMPLES {
                    stats.overhead_us.drain(..MAX_SAMPLES / 2);
                }
                stats.overhead_us.push(overhead_us);
            }
            log_line(
                shared,
                game_id,
                &format!(
                    "move ply={} move={} think_ms={} engine_ms={} overhead_us={overhead_us} rpc_us={rpc_us} clock_ms={remaining}",
                    ply + 1,
                    wire.notation,
                    think.as_millis(),
                    engine_time.as_millis(),
                ),
            );
            Turn::Played
        }
        Err(status) => {
            log_line(
                shared,
                game_id,
                &format!(
                    "refused ply={} move={}: {:?} {}",
                    ply + 1,
                    wire.notation,
                    status.code(),
                    status.message()
                ),
            );
            Turn::Resync
        }
    }
}

/// Resigns the game because the engine failed (reported on stderr and in the log).
async fn resign(shared: &Shared, game_id: &str, why: &str) -> Ending {
    eprintln!("game {game_id}: engine failure, resigning: {why}");
    log_line(shared, game_id, &format!("engine failure: {why}"));
    let mut games = GamesClient::new(shared.channel.clone());
    for _ in 0..5 {
        let mut request = shared.caller.request(pb::GameActionRequest {
            game_id: game_id.to_owned(),
        });
        request.set_timeout(Duration::from_secs(10));
        match games.resign(request).await {
            Ok(_) => break,
            Err(status)
                if matches!(
                    status.code(),
                    tonic::Code::Unavailable
                        | tonic::Code::Aborted
                        | tonic::Code::ResourceExhausted
                ) =>
            {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            // Already over, or not ours: nothing left to resign.
            Err(_) => break,
        }
    }
    if let Ok(mut stats) = shared.stats.lock() {
        stats.resigned_for_engine += 1;
    }
    Ending::EngineFailed(why.to_owned())
}

/// The game's last log line, its PDN (when a log directory is set) and a line on stderr.
async fn finish_log(shared: &Shared, game_id: &str, ending: &Ending) {
    let text = match ending {
        Ending::Over(status) => format!("over result={} ({})", status.result, status.description),
        Ending::EngineFailed(why) => format!("resigned: {why}"),
        Ending::Gone(why) => format!("gone: {why}"),
    };
    // The PDN first, then the log's end line: a log that ends has its game's files complete.
    if let Some(path) = log_path(shared, game_id, "pdn") {
        let mut games = GamesClient::new(shared.channel.clone());
        let mut request = shared.caller.request(pb::GetGameRequest {
            game_id: game_id.to_owned(),
        });
        request.set_timeout(Duration::from_secs(10));
        let written = match games.export_pdn(request).await {
            Ok(pdn) => std::fs::write(&path, pdn.into_inner().pdn).map_err(|e| e.to_string()),
            Err(status) => Err(format!("{:?}: {}", status.code(), status.message())),
        };
        if let Err(why) = written {
            log_line(shared, game_id, &format!("pdn not written: {why}"));
        }
    }
    log_line(shared, game_id, &format!("end {text}"));
    let mut summary = format!("game {game_id}: {text}");
    if let Ok(mut stats) = shared.stats.lock() {
        stats.games += 1;
        let _ = write!(
            summary,
            "; {} games, {} moves, bridge overhead per move p50 {} us, p99 {} us",
            stats.games,
            stats.overhead_us.len(),
            stats.overhead_quantile(0.5),
            stats.overhead_quantile(0.99)
        );
    }
    eprintln!("{summary}");
}
