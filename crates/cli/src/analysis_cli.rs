//! `draughts client analyse | analyse-game | bestmove`: the server's analysis (draughts.v1.Analysis).
//! Analysis jobs need a token with the `analysis` scope; guests may ask `bestmove` at low levels.

use clap::Args;
use draughts_proto::pb;
use draughts_proto::pb::analysis_client::AnalysisClient;
use tonic::transport::Channel;

use crate::CliError;
use crate::client::{Target, rules_of, status_error};

#[derive(Args, Debug)]
pub struct Limits {
    /// Plies of full-width search (0: none).
    #[arg(long, default_value_t = 0)]
    depth: u32,
    /// Nodes (0: none).
    #[arg(long, default_value_t = 0)]
    nodes: u64,
    /// Milliseconds (0: none; the server then applies its cap).
    #[arg(long, default_value_t = 0)]
    movetime: u64,
}

impl Limits {
    fn wire(&self, multi_pv: u32) -> Option<pb::SearchLimits> {
        Some(pb::SearchLimits {
            depth: self.depth,
            nodes: self.nodes,
            movetime_ms: self.movetime,
            multi_pv,
        })
    }
}

#[derive(Args, Debug)]
pub struct AnalyseArgs {
    #[command(flatten)]
    target: Target,
    /// Moves played from the position (the moves since the last capture or man move help the draw
    /// rules).
    moves: Vec<String>,
    #[command(flatten)]
    limits: Limits,
    /// Best lines to show (1-10).
    #[arg(long, default_value_t = 1)]
    multipv: u32,
}

#[derive(Args, Debug)]
pub struct AnalyseGameArgs {
    /// A game stored on the server.
    #[arg(long, conflicts_with = "pdn", required_unless_present = "pdn")]
    game: Option<String>,
    /// A PDN file to import ("-": standard input).
    #[arg(long)]
    pdn: Option<String>,
    /// Search limits per ply.
    #[command(flatten)]
    limits: Limits,
}

#[derive(Args, Debug)]
pub struct BestMoveArgs {
    #[command(flatten)]
    target: Target,
    /// Moves played from the position.
    moves: Vec<String>,
    /// Playing level 1-8 (else the limits are used).
    #[arg(long)]
    level: Option<u32>,
    #[command(flatten)]
    limits: Limits,
}

fn authed<T>(token: Option<&str>, msg: T) -> Result<tonic::Request<T>, CliError> {
    let token = token.ok_or_else(|| {
        CliError("this command needs --token (a guest token from `draughts client guest`, or an API key)".into())
    })?;
    let mut req = tonic::Request::new(msg);
    let value = format!("Bearer {token}")
        .parse()
        .map_err(|_| CliError("the token has characters that can't be sent".into()))?;
    req.metadata_mut().insert("authorization", value);
    Ok(req)
}

fn input(target: &Target, moves: &[String]) -> Result<pb::PositionInput, CliError> {
    Ok(pb::PositionInput {
        rules: rules_of(target)?,
        fen: target.fen.clone(),
        moves: moves
            .iter()
            .map(|m| pb::MoveInput {
                r#move: Some(pb::move_input::Move::Text(m.clone())),
            })
            .collect(),
    })
}

fn score(s: Option<&pb::Score>) -> String {
    use pb::score::Kind;
    match s.and_then(|s| s.kind) {
        Some(Kind::CentiMen(c)) => format!("{:+.2}", f64::from(c) / 100.0),
        Some(Kind::WinInPlies(n)) => format!("win in {n}"),
        Some(Kind::LossInPlies(n)) => format!("loss in {n}"),
        None => "-".into(),
    }
}

fn pv(moves: &[pb::Move]) -> String {
    moves
        .iter()
        .map(|m| m.notation.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

fn judgement(j: i32) -> &'static str {
    match pb::Judgement::try_from(j) {
        Ok(pb::Judgement::Inaccuracy) => "inaccuracy",
        Ok(pb::Judgement::Mistake) => "mistake",
        Ok(pb::Judgement::Blunder) => "blunder",
        _ => "",
    }
}

fn print_ply(p: &pb::PlyAnalysis) -> Result<(), CliError> {
    let side = if p.side == pb::Color::White as i32 {
        "white"
    } else {
        "black"
    };
    out!(
        "{:>4}. {side:<5} {:<10} best {:<10} {} -> {}  {}",
        p.ply,
        p.played.as_ref().map_or("", |m| m.notation.as_str()),
        p.best.as_ref().map_or("-", |m| m.notation.as_str()),
        score(p.score_before.as_ref()),
        score(p.score_after.as_ref()),
        judgement(p.judgement)
    );
    Ok(())
}

/// Follows a job to its end, printing progress and the result.
async fn follow(
    client: &mut AnalysisClient<Channel>,
    token: Option<&str>,
    job: pb::AnalysisJob,
) -> Result<(), CliError> {
    eprintln!(
        "job {}{}",
        job.job_id,
        if job.cached {
            " (from the cache)"
        } else if job.merged {
            " (joined an identical request)"
        } else {
            ""
        }
    );
    let mut stream = client
        .watch_analysis(authed(
            token,
            pb::AnalysisJobRequest {
                job_id: job.job_id.clone(),
            },
        )?)
        .await
        .map_err(status_error)?
        .into_inner();
    while let Some(update) = stream.message().await.map_err(status_error)? {
        match update.kind {
            Some(pb::analysis_update::Kind::QueuePosition(n)) => eprintln!("queued: {n} ahead"),
            Some(pb::analysis_update::Kind::Progress(p)) => {
                if p.plies_total > 0 {
                    p.plies.iter().try_for_each(print_ply)?;
                } else if let Some(best) = p.lines.first() {
                    eprintln!(
                        "depth {:>2} {:>10} nodes  {}  {}",
                        p.depth,
                        p.nodes,
                        score(best.score.as_ref()),
                        pv(&best.pv)
                    );
                }
            }
            Some(pb::analysis_update::Kind::Finished(view)) => {
                return print_result(&view);
            }
            None => {}
        }
    }
    Err(CliError("the stream ended before the job did".into()))
}

fn print_result(view: &pb::AnalysisView) -> Result<(), CliError> {
    if view.state == pb::JobState::Failed as i32 {
        return Err(CliError(format!("analysis failed: {}", view.error)));
    }
    if view.state == pb::JobState::Cancelled as i32 {
        return Err(CliError("analysis cancelled".into()));
    }
    match &view.result {
        Some(pb::analysis_view::Result::Position(p)) => {
            for (i, line) in p.lines.iter().enumerate() {
                out!(
                    "{}. {}  {}",
                    i + 1,
                    score(line.score.as_ref()),
                    pv(&line.pv)
                );
            }
            out!(
                "depth {} (sel {}), {} nodes, {} ms",
                p.depth,
                p.seldepth,
                p.nodes,
                p.elapsed_ms
            );
        }
        Some(pb::analysis_view::Result::Game(g)) => {
            for s in &g.summary {
                let side = if s.side == pb::Color::White as i32 {
                    "white"
                } else {
                    "black"
                };
                out!(
                    "{side}: {} moves, {} inaccuracies, {} mistakes, {} blunders, average loss {} centi-men",
                    s.moves,
                    s.inaccuracies,
                    s.mistakes,
                    s.blunders,
                    s.average_loss_centi_men
                );
            }
        }
        None => out!("no result"),
    }
    Ok(())
}

pub async fn analyse(ch: &Channel, token: Option<&str>, a: AnalyseArgs) -> Result<(), CliError> {
    let mut client = AnalysisClient::new(ch.clone());
    let job = client
        .analyze_position(authed(
            token,
            pb::AnalyzePositionRequest {
                source: Some(pb::analyze_position_request::Source::Position(input(
                    &a.target, &a.moves,
                )?)),
                limits: a.limits.wire(a.multipv),
            },
        )?)
        .await
        .map_err(status_error)?
        .into_inner();
    follow(&mut client, token, job).await
}

pub async fn analyse_game(
    ch: &Channel,
    token: Option<&str>,
    a: AnalyseGameArgs,
) -> Result<(), CliError> {
    let source = match (&a.game, &a.pdn) {
        (Some(id), _) => pb::analyze_game_request::Source::GameId(id.clone()),
        (None, Some(path)) => {
            let text = if path == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                std::fs::read_to_string(path)
                    .map_err(|e| CliError(format!("cannot read {path}: {e}")))?
            };
            pb::analyze_game_request::Source::Pdn(text)
        }
        (None, None) => return Err(CliError("give --game or --pdn".into())),
    };
    let mut client = AnalysisClient::new(ch.clone());
    let job = client
        .analyze_game(authed(
            token,
            pb::AnalyzeGameRequest {
                source: Some(source),
                limits_per_ply: a.limits.wire(1),
                rules: None,
            },
        )?)
        .await
        .map_err(status_error)?
        .into_inner();
    follow(&mut client, token, job).await
}

pub async fn best_move(ch: &Channel, token: Option<&str>, a: BestMoveArgs) -> Result<(), CliError> {
    let strength = match a.level {
        Some(level) => pb::best_move_request::Strength::Level(level),
        None => pb::best_move_request::Strength::Limits(a.limits.wire(1).unwrap_or_default()),
    };
    let r = AnalysisClient::new(ch.clone())
        .best_move(authed(
            token,
            pb::BestMoveRequest {
                source: Some(pb::best_move_request::Source::Position(input(
                    &a.target, &a.moves,
                )?)),
                strength: Some(strength),
                clock: None,
                seed: 0,
            },
        )?)
        .await
        .map_err(status_error)?
        .into_inner();
    out!("{}", r.r#move.as_ref().map_or("", |m| m.notation.as_str()));
    eprintln!(
        "score {}, depth {}, {} nodes, search {} ms, queued {} ms",
        score(r.score.as_ref()),
        r.depth,
        r.nodes,
        r.search_ms,
        r.queued_ms
    );
    Ok(())
}
