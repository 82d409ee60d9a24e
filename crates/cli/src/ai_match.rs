//! `draughts match`: games between two engines (our levels, `greedy`, or external Hub engines), played a
//! few at a time, with W/D/L, Elo and an optional sequential probability ratio test.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command as Process, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use clap::Args;
use draughts_ai::hub;
use draughts_ai::level::MAX_LEVEL;
use draughts_ai::openings::balanced_openings_shifted;
use draughts_ai::{
    Level, Rng, RootState, Searcher, Selectivity, Sprt, SprtState, Tally, greedy_move,
};
use draughts_engine::{
    Color, Game, GameResult, GameStatus, Move, Position, RuleOptions, RuleSet, Variant,
    pdn_movetext, pdn_tag, pdn_variant_tags,
};
use serde::Serialize;

use crate::CliError;
use crate::ai_cmds::{level, print_line};

#[derive(Args, Debug)]
pub(crate) struct MatchArgs {
    /// Rule set.
    #[arg(long, short = 'v')]
    variant: String,
    /// House-rule options.
    #[arg(long, short = 'o', default_value = "")]
    options: String,
    /// First engine: a level `1`..`8` (or `level:N`), `greedy`, or a Hub engine command (`hub:CMD` or CMD).
    /// A level may name its evaluation after a colon: `8:hand` (the hand-set one), `8:learned` (the shipped
    /// learned weights), `8:default` (the shipped network where the variant has one, else learned), or
    /// `8:FILE` (a weights file from `draughts train fit` or a network from `train fit-nnue`), then after a second colon comma-separated
    /// settings: `nodes=N` (the level's node limit), `classic` (round one's search) and the search's
    /// selectivity (`probcut=M`, `probcut_depth=D`, `probcut_percent=P`, `lmr=0|1|2|3`, `singular=M`,
    /// `history=0|1`, `threats=0|1`, `asp=W`, `exchanges=0|1`, `drawish=0|1`; see `draughts_ai::Selectivity`;
    /// they change the variant's defaults), e.g. `8::nodes=30000,probcut=0`, and `bitbases=DIR` (endgame
    /// tables from `draughts bitbase build`, probed where present).
    #[arg(long)]
    a: String,
    /// Second engine, same forms.
    #[arg(long)]
    b: String,
    /// Number of games (each opening is played twice, colours swapped).
    #[arg(long, default_value_t = 20)]
    games: u32,
    /// Time per move in milliseconds for Hub engines (default 100); with it, our levels also get this
    /// time cap, and level 8 plays on the time alone (no node limit: full strength uses the time given).
    /// Without it our levels stop on their node or depth limits only, so the games do not depend on the
    /// machine's load.
    #[arg(long)]
    movetime: Option<u64>,
    /// Games played at the same time, one thread (and one pair of engines) each.
    #[arg(long, default_value_t = 1)]
    concurrency: u32,
    /// Seed for the levels' randomness; a seed other than 1 also shifts which balanced openings are
    /// played when there are more than the games need (so node-limited matches give a second sample).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A game still going after this many plies is scored a draw.
    #[arg(long, default_value_t = 400)]
    max_plies: u32,
    /// Adjudicate a game as won once both engines' own searches agree, on four consecutive moves (two
    /// each), that one side is at least this many centi-men ahead (or has a forced win). Only engines that
    /// report scores (our levels) take part; off by default.
    #[arg(long)]
    adjudicate: Option<i32>,
    /// Length of the openings in plies (default: 2 in international and turkish, 3 elsewhere): every line
    /// of that length whose position a depth-6 search scores within a quarter man of level, spread over
    /// the games; each is played twice, colours swapped.
    #[arg(long)]
    opening_plies: Option<u32>,
    /// Sequential probability ratio test `ELO0,ELO1` (logistic Elo, e.g. `0,10`): after every game the
    /// log-likelihood ratio of H1 (A is `ELO1` better) against H0 (`ELO0`) is updated, and no new game is
    /// started once it reaches a bound; `--games` is then the most games played.
    #[arg(long)]
    sprt: Option<String>,
    /// The SPRT's false-positive rate (accepting H1 when H0 holds).
    #[arg(long, default_value_t = 0.05)]
    sprt_alpha: f64,
    /// The SPRT's false-negative rate.
    #[arg(long, default_value_t = 0.05)]
    sprt_beta: f64,
    /// Print the final report as JSON.
    #[arg(long)]
    json: bool,
    /// Write every finished game to this file in PDN (appended, in the order the games finish), with
    /// the engines as players and how the game ended.
    #[arg(long)]
    pdn: Option<std::path::PathBuf>,
}

/// An engine taking part in a match.
enum Engine {
    Level {
        level: Level,
        searcher: Box<Searcher>,
        rng: Rng,
    },
    Greedy(Rng),
    Hub(HubProcess),
}

/// An external engine speaking the Hub protocol on its stdin/stdout.
struct HubProcess {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    name: String,
}

impl HubProcess {
    fn start(command: &str, variant: Variant) -> Result<HubProcess, CliError> {
        let mut child = Process::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| CliError(format!("cannot start '{command}': {e}")))?;
        let stdin = child.stdin.take().ok_or(CliError("no stdin".into()))?;
        let stdout = child.stdout.take().ok_or(CliError("no stdout".into()))?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut p = HubProcess {
            child,
            stdin,
            lines: rx,
            name: command.to_string(),
        };
        p.send("hub")?;
        p.wait_for("wait", Duration::from_secs(30))?;
        p.send(&format!(
            "set-param name=variant value={}",
            hub::variant_name(variant)
        ))?;
        p.send("init")?;
        p.wait_for("ready", Duration::from_secs(120))?;
        Ok(p)
    }

    fn send(&mut self, line: &str) -> Result<(), CliError> {
        writeln!(self.stdin, "{line}")
            .and_then(|_| self.stdin.flush())
            .map_err(|e| CliError(format!("engine '{}': {e}", self.name)))
    }

    /// Waits for a line whose command is `command`; returns it.
    fn wait_for(&mut self, command: &str, timeout: Duration) -> Result<hub::Line, CliError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(text) => {
                    if let Some(l) = hub::parse_line(&text) {
                        if l.command == command {
                            return Ok(l);
                        }
                        // A protocol error ends the match rather than passing unnoticed.
                        if l.command == "error" {
                            return Err(CliError(format!(
                                "engine '{}' reported a protocol error: {text}",
                                self.name
                            )));
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(CliError(format!(
                        "engine '{}' did not answer '{command}' in time",
                        self.name
                    )));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(CliError(format!("engine '{}' exited", self.name)));
                }
            }
        }
    }

    fn choose(&mut self, game: &Game, movetime: Duration) -> Result<Move, CliError> {
        let moves: Vec<String> = {
            let mut p = *game.start_position();
            game.moves()
                .iter()
                .map(|m| {
                    let t = hub::write_move(&p, m);
                    p = p.play_unchecked(m);
                    t
                })
                .collect()
        };
        self.send(&format!(
            "pos pos={} moves=\"{}\"",
            hub::write_position(game.start_position()),
            moves.join(" ")
        ))?;
        self.send(&format!("level move-time={:.3}", movetime.as_secs_f64()))?;
        self.send("go think")?;
        let done = self.wait_for("done", movetime * 20 + Duration::from_secs(10))?;
        let text = done.get("move").unwrap_or_default();
        hub::parse_move(game.position(), text)
            .map_err(|e| CliError(format!("engine '{}' played '{text}': {e}", self.name)))
    }
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        let _ = self.send("quit");
        std::thread::sleep(Duration::from_millis(50));
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Engine {
    fn start(
        spec: &str,
        rules: RuleSet,
        movetime: Option<Duration>,
        seed: u64,
    ) -> Result<Engine, CliError> {
        let trimmed = spec.trim();
        let level_text = trimmed.strip_prefix("level:").unwrap_or(trimmed);
        let mut parts = level_text.splitn(3, ':');
        let number = parts.next().unwrap_or_default();
        let eval = parts.next().filter(|e| !e.is_empty()).unwrap_or("default");
        let settings = parts.next().unwrap_or_default();
        if let Ok(n) = number.parse::<u8>() {
            let mut level = level(n, rules.variant())?;
            // Deterministic by default: no time cap unless the match sets one; with one, full strength
            // plays on the time alone.
            level.time = movetime;
            if movetime.is_some() && n == MAX_LEVEL {
                level.nodes = None;
            }
            let mut selectivity = Selectivity::for_variant(rules.variant());
            let mut search_settings = Vec::new();
            let mut bitbase_dir = None;
            for item in settings.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                if let Some(dir) = item.strip_prefix("bitbases=") {
                    bitbase_dir = Some(std::path::PathBuf::from(dir));
                    continue;
                }
                match item.strip_prefix("nodes=") {
                    Some(v) => {
                        level.nodes = Some(v.parse().map_err(|_| {
                            CliError(format!("'{spec}': '{v}' is not a node count"))
                        })?)
                    }
                    None => search_settings.push(item),
                }
            }
            selectivity
                .parse_into(&search_settings.join(","))
                .map_err(|e| CliError(format!("'{spec}': {e}")))?;
            let mut searcher = Box::new(Searcher::new(rules));
            searcher.set_evaluator(crate::ai_train::evaluator(rules.variant(), eval)?);
            searcher.set_selectivity(selectivity);
            searcher.set_bitbases(crate::ai_bitbase::load_for_search(
                bitbase_dir.as_deref(),
                rules.variant(),
            )?);
            return Ok(Engine::Level {
                level,
                searcher,
                rng: Rng::new(seed),
            });
        }
        let lower = trimmed.to_ascii_lowercase();
        if lower == "greedy" {
            return Ok(Engine::Greedy(Rng::new(seed)));
        }
        let command = spec.strip_prefix("hub:").unwrap_or(spec);
        Ok(Engine::Hub(HubProcess::start(command, rules.variant())?))
    }

    fn new_game(&mut self, seed: u64) -> Result<(), CliError> {
        match self {
            Engine::Level { searcher, rng, .. } => {
                searcher.clear();
                *rng = Rng::new(seed);
            }
            Engine::Greedy(rng) => *rng = Rng::new(seed),
            Engine::Hub(p) => p.send("new-game")?,
        }
        Ok(())
    }

    /// The engine's move, and its score of the position for the side to move (centi-men or the search's
    /// win/loss scores) when it searched and says so (our levels do).
    fn choose(&mut self, game: &Game, movetime: Duration) -> Result<(Move, Option<i32>), CliError> {
        let pos = game.position();
        let (mv, score) = match self {
            Engine::Level {
                level,
                searcher,
                rng,
            } => level.choose_scored(searcher, &RootState::from_game(game), rng),
            Engine::Greedy(rng) => (greedy_move(pos, rng), None),
            Engine::Hub(p) => (Some(p.choose(game, movetime)?), None),
        };
        Ok((
            mv.ok_or_else(|| CliError("engine found no move".into()))?,
            score,
        ))
    }
}

#[derive(Serialize)]
struct MatchJson {
    variant: &'static str,
    a: String,
    b: String,
    games: u32,
    wins: u32,
    draws: u32,
    losses: u32,
    score: f64,
    /// `null` when one side scored everything (then see `elo_lower`/`elo_upper`).
    elo: f64,
    elo_error: f64,
    /// The 95% interval (finite even for a clean sweep).
    elo_lower: f64,
    elo_upper: f64,
    /// Games the runner ended, not the rules: draws at `--max-plies` and wins by `--adjudicate`.
    adjudicated: u32,
    seconds: f64,
    /// With `--sprt`.
    #[serde(skip_serializing_if = "Option::is_none")]
    sprt: Option<SprtJson>,
}

#[derive(Serialize)]
struct SprtJson {
    elo0: f64,
    elo1: f64,
    alpha: f64,
    beta: f64,
    llr: f64,
    lower: f64,
    upper: f64,
    /// `H1`, `H0` or `none` (no bound reached within `--games`).
    result: &'static str,
    /// Games finished when the bound was reached (games already under way were played out and count).
    decided_after: Option<u32>,
}

/// What a match needs to play any one of its games (shared by the worker threads).
struct MatchPlan {
    rules: RuleSet,
    openings: Vec<Vec<Move>>,
    seed: u64,
    max_plies: u32,
    hub_time: Duration,
    /// See `MatchArgs::adjudicate`.
    adjudicate: Option<i32>,
    /// The games are written (`--pdn`): keep their move texts.
    record: bool,
}

/// One finished game, from engine A's point of view.
struct GameOutcome {
    index: u32,
    a_white: bool,
    plies: usize,
    /// `None`: adjudicated a draw after `max_plies`.
    result: Option<GameResult>,
    /// Won by adjudication (`--adjudicate`): the winner.
    adjudicated_winner: Option<Color>,
    /// The moves in the variant's notation, the opening's included (only when the games are written).
    moves: Vec<String>,
}

/// Plays game number `index` of the match (its opening, colours and seeds depend on the index only, so a
/// match of node-limited levels gives the same games whatever the concurrency).
fn play_game(
    plan: &MatchPlan,
    index: u32,
    engine_a: &mut Engine,
    engine_b: &mut Engine,
) -> Result<GameOutcome, CliError> {
    let opening = &plan.openings[(index / 2) as usize % plan.openings.len()];
    let a_white = index.is_multiple_of(2);
    let mut game = Game::new(Position::start(plan.rules));
    for mv in opening {
        if game.play(mv).is_err() {
            break;
        }
    }
    let game_seed = plan
        .seed
        .wrapping_mul(1_000_003)
        .wrapping_add(u64::from(index));
    engine_a.new_game(game_seed)?;
    engine_b.new_game(game_seed ^ 0xABCD)?;
    // The last scores, from White's point of view (adjudication).
    let mut white_scores: Vec<Option<i32>> = Vec::new();
    while game.status() == GameStatus::Ongoing {
        if game.moves().len() as u32 >= plan.max_plies {
            return Ok(GameOutcome {
                index,
                a_white,
                plies: game.moves().len(),
                result: None,
                adjudicated_winner: None,
                moves: move_texts(plan, &game),
            });
        }
        let white_to_move = game.position().side_to_move() == Color::White;
        let engine = if white_to_move == a_white {
            &mut *engine_a
        } else {
            &mut *engine_b
        };
        let (mv, score) = engine.choose(&game, plan.hub_time)?;
        game.play(&mv)
            .map_err(|e| CliError(format!("illegal move from an engine: {e}")))?;
        if let Some(threshold) = plan.adjudicate {
            white_scores.push(score.map(|s| if white_to_move { s } else { -s }));
            if let Some(winner) = adjudicated_winner(&white_scores, threshold) {
                return Ok(GameOutcome {
                    index,
                    a_white,
                    plies: game.moves().len(),
                    result: None,
                    adjudicated_winner: Some(winner),
                    moves: move_texts(plan, &game),
                });
            }
        }
    }
    let result = match game.status() {
        GameStatus::Finished(r) => Some(r),
        GameStatus::Ongoing => None,
    };
    Ok(GameOutcome {
        index,
        a_white,
        plies: game.moves().len(),
        result,
        adjudicated_winner: None,
        moves: move_texts(plan, &game),
    })
}

/// A game's moves in its variant's notation, if the match writes its games (else none).
fn move_texts(plan: &MatchPlan, game: &Game) -> Vec<String> {
    if plan.record {
        game_texts(game)
    } else {
        Vec::new()
    }
}

/// A game's moves in its variant's notation.
fn game_texts(game: &Game) -> Vec<String> {
    let mut pos = *game.start_position();
    game.moves()
        .iter()
        .map(|m| {
            let text = pos.move_to_text(m);
            pos = pos.play_unchecked(m);
            text
        })
        .collect()
}

/// One game in PDN: the engines as players, the variant's GameType (and `Variant` tag where the number
/// is shared), the result and how the game ended, then the moves wrapped at about 80 columns.
fn pdn_game(
    variant: Variant,
    round: u32,
    white: &str,
    black: &str,
    result: &str,
    how: &str,
    moves: &[String],
) -> String {
    let mut out = String::new();
    for (k, v) in [
        ("Event", "draughts match"),
        ("Round", &round.to_string()),
        ("White", white),
        ("Black", black),
        ("Result", result),
    ] {
        out.push_str(&pdn_tag(k, v));
    }
    out.push_str(&pdn_variant_tags(variant));
    out.push_str(&pdn_tag("Termination", how));
    out.push('\n');
    out.push_str(&pdn_movetext(moves, result));
    out.push_str("\n\n");
    out
}

/// The side both engines agree is winning: the last four scores (White's point of view, two from each
/// engine) all at least `threshold` for the same side. A move without a score (forced, or an engine that
/// reports none) breaks the run.
fn adjudicated_winner(white_scores: &[Option<i32>], threshold: i32) -> Option<Color> {
    let last = white_scores.get(white_scores.len().checked_sub(4)?..)?;
    if last.iter().all(|s| s.is_some_and(|s| s >= threshold)) {
        Some(Color::White)
    } else if last.iter().all(|s| s.is_some_and(|s| s <= -threshold)) {
        Some(Color::Black)
    } else {
        None
    }
}

/// "Elo +191 ± 160 (95%)", or the interval's finite side after a clean sweep.
fn elo_text(e: &draughts_ai::EloEstimate) -> String {
    if e.elo.is_finite() && e.error.is_finite() {
        format!("Elo {:+.0} ± {:.0} (95%)", e.elo, e.error)
    } else if e.elo > 0.0 {
        format!("Elo > {:+.0} (95%)", e.lower)
    } else {
        format!("Elo < {:+.0} (95%)", e.upper)
    }
}

pub(crate) fn run(a: MatchArgs) -> Result<(), CliError> {
    let variant: Variant = a.variant.parse()?;
    let rules = RuleSet::with_options(variant, RuleOptions::parse(&a.options)?)?;
    let movetime = a.movetime.map(Duration::from_millis);
    let games = a.games.max(1);
    let concurrency = a.concurrency.clamp(1, games);
    // Fail fast on bad engine specs before choosing openings.
    let specs = [a.a.clone(), a.b.clone()];
    let start_pair = |worker: u64| -> Result<(Engine, Engine), CliError> {
        let seed = a.seed.wrapping_add(worker);
        Ok((
            Engine::start(&specs[0], rules, movetime, seed)?,
            Engine::start(&specs[1], rules, movetime, seed ^ 1)?,
        ))
    };
    let first_pair = start_pair(0)?;
    let mut pdn = match &a.pdn {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| CliError(format!("--pdn {}: {e}", path.display())))?,
        ),
        None => None,
    };
    let plies = a.opening_plies.unwrap_or(match variant {
        Variant::International | Variant::Turkish => 2,
        _ => 3,
    });
    let sprt = a
        .sprt
        .as_deref()
        .map(|t| parse_sprt(t, a.sprt_alpha, a.sprt_beta))
        .transpose()?;
    eprintln!("choosing balanced openings ({plies} plies)...");
    let plan = MatchPlan {
        rules,
        // Seed 1 (the default) plays the lines it always did; another seed shifts the picks, so that a
        // match of engines without randomness (node limits) gives a second sample.
        openings: balanced_openings_shifted(
            rules,
            plies,
            games.div_ceil(2) as usize,
            a.seed.wrapping_sub(1) as usize,
        ),
        seed: a.seed,
        max_plies: a.max_plies,
        hub_time: movetime.unwrap_or(Duration::from_millis(100)),
        adjudicate: a.adjudicate,
        record: a.pdn.is_some(),
    };
    eprintln!(
        "{} openings; {games} games, {} vs {}, {concurrency} at a time",
        plan.openings.len(),
        a.a,
        a.b
    );
    let start = Instant::now();
    let next_game = std::sync::atomic::AtomicU32::new(0);
    let (tx, rx) = mpsc::channel::<Result<GameOutcome, CliError>>();
    let mut tally = Tally::default();
    let mut adjudicated = 0;
    let mut first_error = None;
    let mut sprt_decision: Option<(SprtState, u32)> = None;
    std::thread::scope(|scope| {
        let mut first_pair = Some(first_pair);
        for worker in 0..concurrency {
            let tx = tx.clone();
            let plan = &plan;
            let next_game = &next_game;
            let pair = match first_pair.take() {
                Some(p) => Ok(p),
                None => start_pair(u64::from(worker)),
            };
            scope.spawn(move || {
                let (mut engine_a, mut engine_b) = match pair {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                loop {
                    let index = next_game.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if index >= games {
                        break;
                    }
                    let outcome = play_game(plan, index, &mut engine_a, &mut engine_b);
                    let failed = outcome.is_err();
                    if tx.send(outcome).is_err() || failed {
                        // Stop the other workers too.
                        next_game.store(games, std::sync::atomic::Ordering::Relaxed);
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut finished = 0;
        for outcome in rx {
            let o = match outcome {
                Ok(o) => o,
                Err(e) => {
                    first_error.get_or_insert(e);
                    continue;
                }
            };
            finished += 1;
            let a_color = if o.a_white {
                Color::White
            } else {
                Color::Black
            };
            let winner = match (o.result, o.adjudicated_winner) {
                (Some(GameResult::Win { winner, .. }), _) => Some(winner),
                (_, Some(winner)) => Some(winner),
                _ => None,
            };
            let text = match winner {
                Some(w) if w == a_color => {
                    tally.wins += 1;
                    "A wins"
                }
                Some(_) => {
                    tally.losses += 1;
                    "B wins"
                }
                None => {
                    tally.draws += 1;
                    "draw"
                }
            };
            if o.result.is_none() {
                adjudicated += 1;
            }
            let how = match (o.result, o.adjudicated_winner) {
                (Some(r), _) => r.describe(),
                (None, Some(w)) => format!(
                    "adjudicated: both engines see {} at least {} centi-men ahead",
                    if w == Color::White { "white" } else { "black" },
                    plan.adjudicate.unwrap_or_default()
                ),
                (None, None) => format!("adjudicated a draw after {} plies", plan.max_plies),
            };
            if let Some(file) = pdn.as_mut() {
                let (white, black) = if o.a_white {
                    (&a.a, &a.b)
                } else {
                    (&a.b, &a.a)
                };
                let text = pdn_game(
                    variant,
                    o.index + 1,
                    white,
                    black,
                    variant.result_text(winner),
                    &how,
                    &o.moves,
                );
                if let Err(e) = file.write_all(text.as_bytes()) {
                    // The match goes on and still reports; only the record stops.
                    eprintln!("--pdn: {e}; no more games are written");
                    pdn = None;
                }
            }
            let e = tally.elo();
            let sprt_text = match &sprt {
                Some(test) => {
                    let state = test.state(&tally);
                    if state != SprtState::Continue && sprt_decision.is_none() {
                        sprt_decision = Some((state, tally.games()));
                        // No new games; those under way still count.
                        next_game.store(games, std::sync::atomic::Ordering::Relaxed);
                    }
                    let (lower, upper) = test.bounds();
                    format!(" | LLR {:.2} ({lower:.2}, {upper:.2})", test.llr(&tally))
                }
                None => String::new(),
            };
            eprintln!(
                "game {} ({finished}/{games} done; A {}, {} plies): {text} ({}) | A +{} ={} -{} | {:.1}% | {}{sprt_text}",
                o.index + 1,
                if o.a_white { "white" } else { "black" },
                o.plies,
                how,
                tally.wins,
                tally.draws,
                tally.losses,
                100.0 * e.score,
                elo_text(&e)
            );
        }
    });
    if let Some(e) = first_error {
        return Err(e);
    }
    let e = tally.elo();
    let report = MatchJson {
        variant: variant.key(),
        a: a.a.clone(),
        b: a.b.clone(),
        games: tally.games(),
        wins: tally.wins,
        draws: tally.draws,
        losses: tally.losses,
        score: e.score,
        elo: e.elo,
        elo_error: e.error,
        elo_lower: e.lower,
        elo_upper: e.upper,
        adjudicated,
        seconds: start.elapsed().as_secs_f64(),
        sprt: sprt.map(|test| {
            let (lower, upper) = test.bounds();
            SprtJson {
                elo0: test.elo0,
                elo1: test.elo1,
                alpha: test.alpha,
                beta: test.beta,
                llr: test.llr(&tally),
                lower,
                upper,
                result: match sprt_decision {
                    Some((SprtState::AcceptH1, _)) => "H1",
                    Some((SprtState::AcceptH0, _)) => "H0",
                    _ => "none",
                },
                decided_after: sprt_decision.map(|(_, n)| n),
            }
        }),
    };
    if a.json {
        print_line(&report);
    } else {
        out!(
            "{} {} vs {}: {} games, A +{} ={} -{} ({:.1}%), {}, {:.0} s",
            report.variant,
            report.a,
            report.b,
            report.games,
            report.wins,
            report.draws,
            report.losses,
            100.0 * report.score,
            elo_text(&e),
            report.seconds
        );
        if let Some(t) = &report.sprt {
            out!(
                "SPRT elo0 {} elo1 {} (alpha {}, beta {}): LLR {:.2} in ({:.2}, {:.2}): {}",
                t.elo0,
                t.elo1,
                t.alpha,
                t.beta,
                t.llr,
                t.lower,
                t.upper,
                match (t.result, t.decided_after) {
                    ("H1", Some(n)) => format!("H1 accepted after {n} games (A is stronger)"),
                    ("H0", Some(n)) => format!("H0 accepted after {n} games (no gain of elo1)"),
                    _ => "no decision within the games".to_string(),
                }
            );
        }
    }
    Ok(())
}

/// `ELO0,ELO1` with the error rates.
fn parse_sprt(text: &str, alpha: f64, beta: f64) -> Result<Sprt, CliError> {
    let bad = || CliError(format!("--sprt wants ELO0,ELO1 (e.g. 0,10), got '{text}'"));
    let (e0, e1) = text.split_once(',').ok_or_else(bad)?;
    let elo0: f64 = e0.trim().parse().map_err(|_| bad())?;
    let elo1: f64 = e1.trim().parse().map_err(|_| bad())?;
    let rate = |r: f64| r > 0.0 && r < 0.5;
    if !elo0.is_finite() || !elo1.is_finite() || elo1 <= elo0 || !rate(alpha) || !rate(beta) {
        return Err(CliError(format!(
            "--sprt needs ELO1 > ELO0 and error rates in (0, 0.5), got '{text}', {alpha}, {beta}"
        )));
    }
    Ok(Sprt {
        elo0,
        elo1,
        alpha,
        beta,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjudication_needs_four_agreeing_scores() {
        let w = |v: &[Option<i32>]| adjudicated_winner(v, 500);
        assert_eq!(w(&[Some(600), Some(700), Some(800)]), None);
        assert_eq!(
            w(&[Some(0), Some(600), Some(700), Some(500), Some(900)]),
            Some(Color::White)
        );
        assert_eq!(
            w(&[Some(-600), Some(-29_990), Some(-700), Some(-500)]),
            Some(Color::Black)
        );
        assert_eq!(w(&[Some(600), None, Some(700), Some(800)]), None);
        assert_eq!(w(&[Some(600), Some(-700), Some(700), Some(800)]), None);
    }

    #[test]
    fn match_games_are_written_in_pdn() {
        let rules = RuleSet::from(Variant::International);
        let mut game = Game::new(Position::start(rules));
        for text in ["32-28", "19-23", "28x19", "14x23"] {
            let mv = game.position().parse_move(text).unwrap();
            game.play(&mv).unwrap();
        }
        let moves = game_texts(&game);
        assert_eq!(moves, ["32-28", "19-23", "28x19", "14x23"]);
        let text = pdn_game(
            Variant::International,
            3,
            "8",
            "hub:a \"b\"\nc",
            Variant::International.result_text(Some(Color::Black)),
            "black wins",
            &moves,
        );
        assert!(text.contains("[Round \"3\"]\n"));
        assert!(text.contains("[Black \"hub:a \\\"b\\\" c\"]\n"), "{text}");
        assert!(
            text.contains("[Result \"0-2\"]\n[GameType \"20\"]\n"),
            "{text}"
        );
        assert!(
            text.ends_with("\n1. 32-28 19-23 2. 28x19 14x23 0-2\n\n"),
            "{text}"
        );
        // Long games wrap at 80 columns.
        let long: Vec<String> = (0..60).map(|_| "32-28".to_string()).collect();
        let text = pdn_game(Variant::Russian, 1, "a", "b", "1-0", "", &long);
        assert!(text.lines().all(|l| l.len() <= 80));
        assert!(!text.contains("[Variant"));
    }

    #[test]
    fn sprt_arguments_are_checked() {
        let t = parse_sprt("0, 10", 0.05, 0.05).unwrap();
        assert_eq!((t.elo0, t.elo1), (0.0, 10.0));
        assert!(parse_sprt("10,0", 0.05, 0.05).is_err());
        assert!(parse_sprt("0", 0.05, 0.05).is_err());
        assert!(parse_sprt("0,10", 0.0, 0.05).is_err());
    }
}
