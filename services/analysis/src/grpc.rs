//! The edge of `draughts.v1.Analysis`: converts requests into the domain's types, calls
//! [`AnalysisCore`], converts back. Errors go through [`AnalysisError`] and the one status table.

use std::pin::Pin;
use std::time::Duration;

use draughts_engine::{Game, GameStatus};
use draughts_proto::vocab::clock::computer_move_cap_ms;
use draughts_proto::{convert, pb};
use draughts_runtime::admission::Refused;
use futures_util::{Stream, StreamExt};
use tonic::{Request, Response, Status};

use crate::contract::{
    self, Class, JobLimits, JobRecord, JobResult, JobSpec, JobState, Judgement, Line, LineOut,
    MoveOut, PlyOut, ProgressRec, ScoreOut,
};
use crate::engine;
use crate::error::{AnalysisError, AnalysisResult};
use crate::pdn;
use crate::queue::Submitted;
use crate::quota::Caller;
use crate::service::{AnalysisCore, Strength};

/// Most moves a PositionInput may carry.
pub const MAX_INPUT_MOVES: usize = 1000;
/// How often a watcher re-reads the job without a wake-up (queue position changes silently).
const WATCH_POLL: Duration = Duration::from_millis(1000);

/// The gRPC service.
#[derive(Clone, Debug)]
pub struct AnalysisService {
    core: AnalysisCore,
}

impl AnalysisService {
    pub fn new(core: AnalysisCore) -> AnalysisService {
        AnalysisService { core }
    }
}

fn caller<T>(req: &Request<T>) -> Result<Caller, Status> {
    let principal = draughts_auth::principal(req)?;
    let authorization = req
        .metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Ok(Caller::new(
        &principal,
        authorization,
        draughts_auth::client_address(req),
    ))
}

/// A position input as a line: every move resolved and played in a game (so a line past the end of
/// the game is refused here, not by a worker).
pub fn input_line(input: &pb::PositionInput) -> AnalysisResult<(Line, Game)> {
    if input.moves.len() > MAX_INPUT_MOVES {
        return Err(AnalysisError::Invalid(format!(
            "at most {MAX_INPUT_MOVES} moves, got {}",
            input.moves.len()
        )));
    }
    let rules = convert::rule_set(input.rules.as_ref())?;
    let start = convert::position(rules, &input.fen)?;
    let mut game = Game::new(start);
    let mut moves = Vec::with_capacity(input.moves.len());
    for (index, m) in input.moves.iter().enumerate() {
        let pos = *game.position();
        let mv = convert::resolve_move(&pos, Some(m))
            .map_err(|e| AnalysisError::Precondition(format!("moves[{index}]: {e}")))?;
        game.play(&mv)
            .map_err(|e| AnalysisError::Precondition(format!("moves[{index}]: {e}")))?;
        moves.push(pos.move_to_text(&mv));
    }
    Ok((
        Line {
            rules: engine::rules_to_contract(rules),
            fen: start.to_fen(),
            moves,
        },
        game,
    ))
}

fn line_game(line: &Line) -> AnalysisResult<Game> {
    engine::replay(line).map_err(|e| AnalysisError::Precondition(e.to_string()))
}

fn limits_of(
    core: &AnalysisCore,
    caller: &Caller,
    l: Option<&pb::SearchLimits>,
    per_ply: bool,
) -> AnalysisResult<JobLimits> {
    let l = l.ok_or_else(|| AnalysisError::Invalid("limits are required".into()))?;
    let caps = core.quotas.caps(caller, per_ply);
    core.quotas
        .limits(l.depth, l.nodes, l.movetime_ms, l.multi_pv, caps)
}

fn class_to_wire(class: Class) -> pb::JobClass {
    match class {
        Class::ComputerMove => pb::JobClass::ComputerMove,
        Class::Interactive => pb::JobClass::Interactive,
        Class::Guest => pb::JobClass::Guest,
        Class::Bulk => pb::JobClass::Bulk,
    }
}

fn state_to_wire(state: JobState) -> pb::JobState {
    match state {
        JobState::Queued => pb::JobState::Queued,
        JobState::Running => pb::JobState::Running,
        JobState::Done => pb::JobState::Done,
        JobState::Failed => pb::JobState::Failed,
        JobState::Cancelled => pb::JobState::Cancelled,
    }
}

fn move_to_wire(m: &MoveOut) -> pb::Move {
    pb::Move {
        notation: m.notation.clone(),
        from: m.from.clone(),
        to: m.to.clone(),
        path: m.path.clone(),
        captured: m.captured.clone(),
        promotes: m.promotes,
    }
}

fn score_to_wire(s: ScoreOut) -> pb::Score {
    use pb::score::Kind;
    pb::Score {
        kind: Some(match s {
            ScoreOut::CentiMen(c) => Kind::CentiMen(c),
            ScoreOut::WinIn(n) => Kind::WinInPlies(n),
            ScoreOut::LossIn(n) => Kind::LossInPlies(n),
        }),
    }
}

fn line_to_wire(l: &LineOut) -> pb::Line {
    pb::Line {
        score: Some(score_to_wire(l.score)),
        pv: l.pv.iter().map(move_to_wire).collect(),
    }
}

fn color_of(side: &str) -> pb::Color {
    match side {
        "white" => pb::Color::White,
        "black" => pb::Color::Black,
        _ => pb::Color::Unspecified,
    }
}

fn ply_to_wire(p: &PlyOut) -> pb::PlyAnalysis {
    pb::PlyAnalysis {
        ply: p.ply,
        side: color_of(&p.side) as i32,
        played: Some(move_to_wire(&p.played)),
        best: p.best.as_ref().map(move_to_wire),
        score_before: p.score_before.map(score_to_wire),
        score_after: p.score_after.map(score_to_wire),
        loss_centi_men: p.loss_centi_men,
        judgement: match p.judgement {
            Judgement::Good => pb::Judgement::Good,
            Judgement::Inaccuracy => pb::Judgement::Inaccuracy,
            Judgement::Mistake => pb::Judgement::Mistake,
            Judgement::Blunder => pb::Judgement::Blunder,
        } as i32,
        pv: p.pv.iter().map(move_to_wire).collect(),
    }
}

fn progress_to_wire(p: &ProgressRec, plies_from: usize) -> pb::Progress {
    pb::Progress {
        depth: p.depth,
        nodes: p.nodes,
        lines: p.lines.iter().map(line_to_wire).collect(),
        plies_done: p.plies.len() as u32,
        plies_total: p.plies_total,
        plies: p.plies.iter().skip(plies_from).map(ply_to_wire).collect(),
    }
}

fn spec_line(spec: &JobSpec) -> &Line {
    match spec {
        JobSpec::Position { line, .. }
        | JobSpec::Game { line, .. }
        | JobSpec::BestMove { line, .. } => line,
    }
}

/// The wire view of a record.
pub fn view(record: &JobRecord, queue_position: u64) -> pb::AnalysisView {
    let result = match &record.result {
        Some(JobResult::Position(p)) => {
            let game = line_game(spec_line(&record.spec)).ok();
            Some(pb::analysis_view::Result::Position(pb::PositionAnalysis {
                position: game
                    .as_ref()
                    .map(|g| convert::position_to_wire(g.position())),
                lines: p.lines.iter().map(line_to_wire).collect(),
                depth: p.depth,
                seldepth: p.seldepth,
                nodes: p.nodes,
                elapsed_ms: p.elapsed_ms,
                status: game
                    .as_ref()
                    .map(|g| convert::status_to_wire(g.status(), g.position())),
            }))
        }
        Some(JobResult::Game(g)) => Some(pb::analysis_view::Result::Game(pb::GameAnalysis {
            rules: engine::rules_from_contract(&g.rules)
                .ok()
                .map(convert::rules_to_wire),
            start_fen: g.start_fen.clone(),
            plies: g.plies.iter().map(ply_to_wire).collect(),
            summary: g
                .summary
                .iter()
                .map(|s| pb::SideSummary {
                    side: color_of(&s.side) as i32,
                    moves: s.moves,
                    inaccuracies: s.inaccuracies,
                    mistakes: s.mistakes,
                    blunders: s.blunders,
                    average_loss_centi_men: s.average_loss_centi_men,
                })
                .collect(),
            game_id: g.game_id.clone().unwrap_or_default(),
        })),
        Some(JobResult::BestMove(_)) | None => None,
    };
    pb::AnalysisView {
        job_id: record.job_id.clone(),
        state: state_to_wire(record.state) as i32,
        class: class_to_wire(record.class) as i32,
        created_at_ms: record.created_ms,
        started_at_ms: record.started_ms,
        finished_at_ms: record.finished_ms,
        attempts: record.attempts,
        error: record
            .error
            .clone()
            .filter(|_| record.state == JobState::Failed)
            .unwrap_or_default(),
        queue_position,
        progress: record.progress.as_ref().map(|p| progress_to_wire(p, 0)),
        result,
        expires_at_ms: record.expires_ms,
    }
}

fn job_to_wire(submitted: &Submitted, queue_position: u64) -> pb::AnalysisJob {
    let record = submitted.record();
    pb::AnalysisJob {
        job_id: record.job_id.clone(),
        state: state_to_wire(record.state) as i32,
        class: class_to_wire(record.class) as i32,
        merged: matches!(submitted, Submitted::Merged(_)),
        cached: matches!(submitted, Submitted::Cached(_)),
        queue_position,
    }
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::AnalysisUpdate, Status>> + Send>>;

#[tonic::async_trait]
impl pb::analysis_server::Analysis for AnalysisService {
    #[tracing::instrument(skip_all)]
    async fn analyze_position(
        &self,
        req: Request<pb::AnalyzePositionRequest>,
    ) -> Result<Response<pb::AnalysisJob>, Status> {
        let caller = caller(&req)?;
        caller.require_analysis()?;
        let body = req.get_ref();
        let limits = limits_of(&self.core, &caller, body.limits.as_ref(), false)?;
        let line = match &body.source {
            Some(pb::analyze_position_request::Source::Position(input)) => input_line(input)?.0,
            Some(pb::analyze_position_request::Source::Game(g)) => {
                let line = self.core.game_line(&caller, &g.game_id, g.ply).await?;
                line_game(&line)?;
                line
            }
            None => {
                return Err(AnalysisError::Invalid("position or game is required".into()).into());
            }
        };
        let submitted = self.core.analyze_position(&caller, line, limits).await?;
        let position = self
            .core
            .queue
            .queue_position(submitted.record())
            .await
            .map_err(AnalysisError::into_status)?;
        Ok(Response::new(job_to_wire(&submitted, position)))
    }

    #[tracing::instrument(skip_all)]
    async fn analyze_game(
        &self,
        req: Request<pb::AnalyzeGameRequest>,
    ) -> Result<Response<pb::AnalysisJob>, Status> {
        let caller = caller(&req)?;
        caller.require_analysis()?;
        let body = req.get_ref();
        let mut limits = limits_of(&self.core, &caller, body.limits_per_ply.as_ref(), true)?;
        limits.multi_pv = 1;
        let (line, game_id) = match &body.source {
            Some(pb::analyze_game_request::Source::GameId(id)) => (
                self.core.game_line(&caller, id, None).await?,
                Some(id.clone()),
            ),
            Some(pb::analyze_game_request::Source::Pdn(text)) => {
                let default_rules = match body.rules.as_ref() {
                    Some(r) => Some(convert::rule_set(Some(r)).map_err(AnalysisError::from)?),
                    None => None,
                };
                let game = pdn::parse(text, default_rules).map_err(|e| match e {
                    pdn::PdnError::Move { .. } => AnalysisError::Precondition(e.to_string()),
                    _ => AnalysisError::Invalid(e.to_string()),
                })?;
                (
                    Line {
                        rules: engine::rules_to_contract(game.rules),
                        fen: game.start_fen,
                        moves: game.moves,
                    },
                    None,
                )
            }
            None => return Err(AnalysisError::Invalid("game_id or pdn is required".into()).into()),
        };
        let submitted = self
            .core
            .analyze_game(&caller, line, limits, game_id)
            .await?;
        let position = self
            .core
            .queue
            .queue_position(submitted.record())
            .await
            .map_err(AnalysisError::into_status)?;
        Ok(Response::new(job_to_wire(&submitted, position)))
    }

    async fn get_analysis(
        &self,
        req: Request<pb::AnalysisJobRequest>,
    ) -> Result<Response<pb::AnalysisView>, Status> {
        let caller = caller(&req)?;
        caller.require_analysis()?;
        let (record, position) = self.core.get(&caller, &req.get_ref().job_id).await?;
        Ok(Response::new(view(&record, position)))
    }

    type WatchAnalysisStream = WatchStream;

    async fn watch_analysis(
        &self,
        req: Request<pb::AnalysisJobRequest>,
    ) -> Result<Response<WatchStream>, Status> {
        let caller = caller(&req)?;
        caller.require_analysis()?;
        let job_id = req.get_ref().job_id.clone();
        self.core.owned(&caller, &job_id).await?;
        let permit = self.core.watches.admit(&caller.player_id).map_err(|refused| {
            let what = match refused {
                Refused::Total { open } => {
                    format!("this server has {open} open analysis watches, its limit")
                }
                Refused::PerKey { open } => format!(
                    "you have {open} open analysis watches on this server, the limit; close one first"
                ),
            };
            AnalysisError::Exhausted {
                what,
                retry_after_secs: 5,
            }
            .into_status()
        })?;
        let mut events = self
            .core
            .queue
            .live()
            .subscribe(&contract::events_channel(&job_id))
            .await
            .map_err(|e| AnalysisError::from(e).into_status())?;
        let core = self.core.clone();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            // The stream's place is held until this task ends (the stream ended or was closed).
            let _permit = permit;
            let mut last_position = None;
            let mut last_seq = None;
            let mut plies_sent = 0usize;
            loop {
                let record = match core.owned(&caller, &job_id).await {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = tx.send(Err(e.into_status())).await;
                        return;
                    }
                };
                let update = match record.state {
                    JobState::Queued => match core.queue.queue_position(&record).await {
                        Ok(p) if last_position != Some(p) => {
                            last_position = Some(p);
                            Some(pb::analysis_update::Kind::QueuePosition(p))
                        }
                        Ok(_) => None,
                        Err(e) => {
                            let _ = tx.send(Err(e.into_status())).await;
                            return;
                        }
                    },
                    JobState::Running => match &record.progress {
                        Some(p) if last_seq != Some(p.seq) => {
                            last_seq = Some(p.seq);
                            // A restarted attempt starts its plies again.
                            if p.plies.len() < plies_sent {
                                plies_sent = 0;
                            }
                            let wire = progress_to_wire(p, plies_sent);
                            plies_sent = p.plies.len();
                            Some(pb::analysis_update::Kind::Progress(wire))
                        }
                        _ => None,
                    },
                    _ => {
                        let _ = tx
                            .send(Ok(pb::AnalysisUpdate {
                                kind: Some(pb::analysis_update::Kind::Finished(view(&record, 0))),
                            }))
                            .await;
                        return;
                    }
                };
                if let Some(kind) = update
                    && tx
                        .send(Ok(pb::AnalysisUpdate { kind: Some(kind) }))
                        .await
                        .is_err()
                {
                    return;
                }
                tokio::select! {
                    _ = tokio::time::timeout(WATCH_POLL, events.next()) => {}
                    _ = tx.closed() => return,
                }
            }
        });
        let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
        Ok(Response::new(Box::pin(stream) as WatchStream))
    }

    async fn cancel_analysis(
        &self,
        req: Request<pb::AnalysisJobRequest>,
    ) -> Result<Response<pb::AnalysisView>, Status> {
        let caller = caller(&req)?;
        caller.require_analysis()?;
        let record = self.core.cancel(&caller, &req.get_ref().job_id).await?;
        Ok(Response::new(view(&record, 0)))
    }

    #[tracing::instrument(skip_all)]
    async fn best_move(
        &self,
        req: Request<pb::BestMoveRequest>,
    ) -> Result<Response<pb::BestMoveResponse>, Status> {
        let caller = caller(&req)?;
        let body = req.get_ref();
        let (line, game) = match &body.source {
            Some(pb::best_move_request::Source::Position(input)) => input_line(input)?,
            Some(pb::best_move_request::Source::GameId(id)) => {
                let line = self.core.game_line(&caller, id, None).await?;
                let game = line_game(&line)?;
                (line, game)
            }
            None => {
                return Err(
                    AnalysisError::Invalid("position or game_id is required".into()).into(),
                );
            }
        };
        if game.status() != GameStatus::Ongoing || game.position().legal_moves().is_empty() {
            return Err(AnalysisError::Precondition(
                "the game is over: there is no move to choose".into(),
            )
            .into());
        }
        let strength = match &body.strength {
            Some(pb::best_move_request::Strength::Level(level)) => {
                Strength::Level(u8::try_from(*level).unwrap_or(u8::MAX))
            }
            Some(pb::best_move_request::Strength::Limits(l)) => Strength::Limits {
                depth: l.depth,
                nodes: l.nodes,
                movetime_ms: l.movetime_ms,
            },
            None => return Err(AnalysisError::Invalid("level or limits is required".into()).into()),
        };
        let clock_cap_ms = body
            .clock
            .as_ref()
            .map(|c| computer_move_cap_ms(c.remaining_ms, c.increment_ms));
        let (record, result) = self
            .core
            .best_move(&caller, line, strength, clock_cap_ms, body.seed)
            .await?;
        Ok(Response::new(pb::BestMoveResponse {
            r#move: Some(move_to_wire(&result.mv)),
            score: result.score.map(score_to_wire),
            depth: result.depth,
            nodes: result.nodes,
            search_ms: result.search_ms,
            queued_ms: AnalysisCore::queued_ms(&record),
            job_id: record.job_id,
        }))
    }

    async fn queue_status(
        &self,
        _req: Request<pb::QueueStatusRequest>,
    ) -> Result<Response<pb::QueueStatusResponse>, Status> {
        let status = self.core.status().await?;
        Ok(Response::new(pb::QueueStatusResponse {
            classes: status
                .classes
                .iter()
                .map(|(class, s)| pb::ClassStatus {
                    class: class_to_wire(*class) as i32,
                    queued: s.queued,
                    oldest_wait_ms: s.oldest_wait_ms,
                    running: s.running,
                })
                .collect(),
            live_workers: status.live_workers,
            worker_slots: status.worker_slots,
            running_jobs: status.running_jobs,
        }))
    }
}
