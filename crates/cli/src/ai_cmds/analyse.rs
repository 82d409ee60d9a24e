//! `draughts analyse`: search a position, one line per finished depth (text or JSON), then the result.

use std::io::Write;
use std::time::Duration;

use clap::Args;
use draughts_ai::{Info, Limits, Line, RootState, Score, SearchResult, Searcher};
use draughts_engine::{Move, Position};
use serde::Serialize;

use super::print_line;
use crate::{CliError, PositionArgs, position};

#[derive(Args, Debug)]
pub(crate) struct AnalyseArgs {
    #[command(flatten)]
    position: PositionArgs,
    /// Maximum depth in plies.
    #[arg(long, short = 'd')]
    depth: Option<u32>,
    /// Maximum number of nodes.
    #[arg(long)]
    nodes: Option<u64>,
    /// Maximum time in milliseconds (default 3000 when no limit is given).
    #[arg(long)]
    movetime: Option<u64>,
    /// Number of best lines.
    #[arg(long, default_value_t = 1)]
    multipv: usize,
    /// Transposition table size in MiB.
    #[arg(long, default_value_t = 64)]
    hash: usize,
    /// Search settings as in `draughts match` (`classic`, `threats=0`, ...; default: the shipped ones).
    #[arg(long, default_value = "")]
    search: String,
    /// Evaluation: `default` (the shipped network, else the learned weights), `learned`, `hand`, or a
    /// weights or network file (`train fit`, `train fit-nnue`).
    #[arg(long, default_value = "default")]
    eval: String,
    /// Print JSON, one object per line (one per depth and line, then the result).
    #[arg(long)]
    json: bool,
    /// Endgame tables from `draughts bitbase build`, probed where present.
    #[arg(long, env = crate::ai_bitbase::BITBASES_ENV)]
    bitbases: Option<std::path::PathBuf>,
}

fn pv_text(pos: &Position, pv: &[Move]) -> Vec<String> {
    let mut p = *pos;
    let mut out = Vec::new();
    for mv in pv {
        if !p.is_legal(mv) {
            break;
        }
        out.push(p.move_to_text(mv));
        p = p.play_unchecked(mv);
    }
    out
}

#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum ScoreJson {
    Men(f64),
    WinInPlies(u32),
    LossInPlies(u32),
}

fn score_json(s: Score) -> ScoreJson {
    match s {
        Score::CentiMen(c) => ScoreJson::Men(f64::from(c) / 100.0),
        Score::WinIn(n) => ScoreJson::WinInPlies(n),
        Score::LossIn(n) => ScoreJson::LossInPlies(n),
    }
}

#[derive(Serialize)]
struct DepthJson {
    depth: u32,
    seldepth: u32,
    multipv: usize,
    score: ScoreJson,
    nodes: u64,
    nps: f64,
    seconds: f64,
    pv: Vec<String>,
}

#[derive(Serialize)]
struct ResultJson {
    bestmove: Option<String>,
    ponder: Option<String>,
    score: Option<ScoreJson>,
    depth: u32,
    nodes: u64,
    nps: f64,
    seconds: f64,
    lines: Vec<Vec<String>>,
}

pub(super) fn run(a: AnalyseArgs) -> Result<(), CliError> {
    let pos = position(&a.position)?;
    let movetime = match (a.depth, a.nodes, a.movetime) {
        (None, None, None) => Some(3000),
        (_, _, t) => t,
    };
    let limits = Limits {
        depth: a.depth,
        nodes: a.nodes,
        time: movetime.map(Duration::from_millis),
        multipv: a.multipv.max(1),
    };
    let options = draughts_ai::SearchOptions {
        tt_megabytes: a.hash.clamp(1, 4096),
        ..Default::default()
    };
    let mut searcher = Searcher::with_options(pos.rule_set(), &options);
    searcher.set_evaluator(crate::ai_train::evaluator(pos.variant(), &a.eval)?);
    let mut selectivity = draughts_ai::Selectivity::for_variant(pos.variant());
    selectivity.parse_into(&a.search).map_err(CliError)?;
    searcher.set_selectivity(selectivity);
    searcher.set_bitbases(crate::ai_bitbase::load_for_search(
        a.bitbases.as_deref(),
        pos.variant(),
    )?);
    let json = a.json;
    let on_info = |info: &Info| {
        for (i, line) in info.lines.iter().enumerate() {
            let pv = pv_text(&pos, &line.pv);
            if json {
                print_line(&DepthJson {
                    depth: info.depth,
                    seldepth: info.seldepth,
                    multipv: i + 1,
                    score: score_json(line.score),
                    nodes: info.nodes,
                    nps: info.nps(),
                    seconds: info.elapsed.as_secs_f64(),
                    pv,
                });
            } else {
                let multi = if info.lines.len() > 1 {
                    format!("multipv {} ", i + 1)
                } else {
                    String::new()
                };
                println!(
                    "depth {:>2}/{:<2} {multi}score {:<18} nodes {:>10} nps {:>6.2}M time {:>7.3}s pv {}",
                    info.depth,
                    info.seldepth,
                    line.score.to_string(),
                    info.nodes,
                    info.nps() / 1e6,
                    info.elapsed.as_secs_f64(),
                    pv.join(" ")
                );
            }
        }
        let _ = std::io::stdout().flush();
    };
    let result = searcher.search(&RootState::new(pos), &limits, on_info);
    print_result(&pos, &result, json);
    Ok(())
}

fn print_result(pos: &Position, result: &SearchResult, json: bool) {
    let best = result.best.map(|m| pos.move_to_text(&m));
    let ponder = result
        .best
        .zip(result.ponder)
        .map(|(b, p)| pos.play_unchecked(&b).move_to_text(&p));
    if json {
        print_line(&ResultJson {
            bestmove: best,
            ponder,
            score: result.score().map(score_json),
            depth: result.depth,
            nodes: result.nodes,
            nps: result.nps(),
            seconds: result.elapsed.as_secs_f64(),
            lines: result
                .lines
                .iter()
                .map(|l: &Line| pv_text(pos, &l.pv))
                .collect(),
        });
        return;
    }
    match best {
        None => println!("no legal move"),
        Some(b) => {
            let score = result.score().map(|s| s.to_string()).unwrap_or_default();
            println!(
                "bestmove {b}{} (score {score}, depth {}, {} nodes, {:.2}M nodes/s)",
                ponder.map(|p| format!(" ponder {p}")).unwrap_or_default(),
                result.depth,
                result.nodes,
                result.nps() / 1e6
            );
        }
    }
}
