//! `draughts hub`: the Hub protocol (version 2, as Scan 3.1 defines it) on stdin/stdout: a reader loop
//! and one search thread.

use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use draughts_ai::hub::{self, HubError};
use draughts_ai::{Limits, RootState, Searcher, StopHandle};
use draughts_engine::{Game, Move, Position, RuleSet, Variant};

use crate::CliError;

#[derive(clap::Args, Debug)]
pub(crate) struct HubArgs {
    /// Endgame tables from `draughts bitbase build` (every variant's found there), probed by each search
    /// of a variant they cover. Unset: `draughts-bitbases` in the current directory when it exists (where
    /// `draughtsd` builds its own).
    #[arg(long, env = crate::ai_bitbase::BITBASES_ENV)]
    bitbases: Option<std::path::PathBuf>,
}

/// Writes one protocol line (stdout is shared by the reader loop and the search thread; `println!` locks).
fn send(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

struct HubSession {
    rules: RuleSet,
    root: Option<RootState>,
    limits: Limits,
    searcher: Arc<Mutex<Searcher>>,
    stop: StopHandle,
    thread: Option<JoinHandle<()>>,
}

impl HubSession {
    fn wait_search(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.stop();
            let _ = t.join();
        }
    }
}

pub(super) fn run(a: HubArgs) -> Result<(), CliError> {
    let rules = RuleSet::new(Variant::International);
    let mut searcher = Searcher::new(rules);
    let found = std::path::PathBuf::from("draughts-bitbases");
    let dir = a.bitbases.or_else(|| found.is_dir().then_some(found));
    if dir.is_none() {
        eprintln!(
            "bitbases: none (--bitbases DIR, or tables built by `draughts bitbase build` or draughtsd)"
        );
    }
    if let Some(dir) = &dir {
        let shelf = draughts_ai::bitbase::Shelf::load(dir)?;
        // The protocol owns stdout; what was loaded goes to stderr.
        for (variant, pieces) in shelf.summary() {
            eprintln!("bitbases: {variant} up to {pieces} pieces");
        }
        searcher.set_shelf(Some(Arc::new(shelf)));
    }
    let stop = searcher.stop_handle();
    let mut s = HubSession {
        rules,
        root: None,
        limits: Limits::default(),
        searcher: Arc::new(Mutex::new(searcher)),
        stop,
        thread: None,
    };
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Some(cmd) = hub::parse_line(&line) else {
            continue;
        };
        // Joins a finished search thread so that `thread` is `Some` only while searching.
        if s.thread.as_ref().is_some_and(|t| t.is_finished()) {
            s.wait_search();
        }
        let searching = s.thread.is_some();
        match cmd.command.as_str() {
            "ping" => send("pong"),
            "stop" => s.stop.stop(),
            "ponder-hit" => {}
            "quit" => break,
            _ if searching => {
                // Only ping, ponder-hit and stop may come during a search; anything else ends it first.
                s.wait_search();
                hub_command(&mut s, &cmd);
            }
            _ => hub_command(&mut s, &cmd),
        }
    }
    s.wait_search();
    Ok(())
}

fn hub_command(s: &mut HubSession, cmd: &hub::Line) {
    match cmd.command.as_str() {
        "hub" => {
            send(&format!(
                "id name=draughts version={} author=\"draughts platform\" country=\"\"",
                env!("CARGO_PKG_VERSION")
            ));
            let mut names = vec!["normal"];
            names.extend(Variant::ALL.iter().map(|v| v.key()));
            send(&format!(
                "param name=variant value={} type=enum values=\"{}\"",
                hub::variant_name(s.rules.variant()),
                names.join(" ")
            ));
            send("wait");
        }
        "set-param" => {
            if cmd.get("name") == Some("variant")
                && let Some(v) = cmd.get("value").and_then(hub::parse_variant)
            {
                s.rules = RuleSet::new(v);
                s.root = None;
            }
        }
        "init" => send("ready"),
        "new-game" => {
            if let Ok(mut searcher) = s.searcher.lock() {
                searcher.clear();
            }
        }
        "pos" => match hub_position(s.rules, cmd) {
            Ok(root) => s.root = Some(root),
            Err(e) => send(&format!("error message={}", hub::quote(&e.to_string()))),
        },
        "level" => s.limits = hub_limits(cmd),
        "go" => start_search(s, cmd.has("analyze")),
        _ => {}
    }
}

fn hub_position(rules: RuleSet, cmd: &hub::Line) -> Result<RootState, HubError> {
    let text = cmd.get("pos").unwrap_or_default();
    let pos = match text {
        "" => Position::start(rules),
        t => hub::parse_position(rules, t)?,
    };
    let mut game = Game::new(pos);
    for mv_text in cmd.get("moves").unwrap_or_default().split_whitespace() {
        let mv = hub::parse_move(game.position(), mv_text)?;
        if game.play(&mv).is_err() {
            break;
        }
    }
    Ok(RootState::from_game(&game))
}

fn secs(v: Option<&str>) -> Option<Duration> {
    v.and_then(|t| t.parse::<f64>().ok())
        .filter(|t| t.is_finite() && *t >= 0.0)
        .map(|t| Duration::from_secs_f64(t.min(1e6)))
}

fn hub_limits(cmd: &hub::Line) -> Limits {
    let mut limits = Limits::default();
    if cmd.has("infinite") {
        return limits;
    }
    limits.depth = cmd.get("depth").and_then(|d| d.parse().ok());
    limits.nodes = cmd.get("nodes").and_then(|d| d.parse().ok());
    if let Some(t) = secs(cmd.get("move-time")) {
        limits.time = Some(t);
    } else if let Some(total) = secs(cmd.get("time")) {
        let inc = secs(cmd.get("inc")).unwrap_or_default();
        let moves: u32 = cmd
            .get("moves")
            .and_then(|m| m.parse().ok())
            .unwrap_or(30)
            .clamp(1, 60);
        let budget = total / moves + inc.mul_f64(0.8);
        limits.time = Some(budget.min(total.mul_f64(0.5)));
    }
    limits
}

fn start_search(s: &mut HubSession, analyze: bool) {
    let root = s
        .root
        .clone()
        .unwrap_or_else(|| RootState::new(Position::start(s.rules)));
    let limits = s.limits.clone();
    let searcher = Arc::clone(&s.searcher);
    s.stop.reset();
    let _ = analyze;
    s.thread = Some(std::thread::spawn(move || {
        let Ok(mut searcher) = searcher.lock() else {
            return;
        };
        let pos = root.position;
        let result = searcher.search(&root, &limits, |info| {
            if let Some(line) = info.lines.first() {
                let pv: Vec<String> = pv_hub(&pos, &line.pv);
                send(&format!(
                    "info depth={} score={:.2} nodes={} time={:.3} nps={:.2} pv=\"{}\"",
                    info.depth,
                    line.score.men(),
                    info.nodes,
                    info.elapsed.as_secs_f64(),
                    info.nps() / 1e6,
                    pv.join(" ")
                ));
            }
        });
        match result.best {
            Some(best) => {
                let mut line = format!("done move={}", hub::write_move(&pos, &best));
                if let Some(p) = result.ponder {
                    line.push_str(&format!(
                        " ponder={}",
                        hub::write_move(&pos.play_unchecked(&best), &p)
                    ));
                }
                send(&line);
            }
            None => send("done"),
        }
    }));
}

fn pv_hub(pos: &Position, pv: &[Move]) -> Vec<String> {
    let mut p = *pos;
    let mut out = Vec::new();
    for mv in pv {
        out.push(hub::write_move(&p, mv));
        p = p.play_unchecked(mv);
    }
    out
}
