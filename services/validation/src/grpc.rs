//! `draughts.v1.Rules` over gRPC: converts, calls the engine, converts back. No rule lives here.

use draughts_engine::{Game, GameStatus, Position};
use draughts_proto::ApiError;
use draughts_proto::convert;
use draughts_proto::pb;
use draughts_proto::pb::rules_server::Rules;
use tonic::{Request, Response, Status};

/// Most moves accepted by one `ApplyMoves` call.
pub const MAX_APPLY_MOVES: usize = 2000;

#[derive(Clone, Copy, Debug, Default)]
pub struct RulesService;

fn position_of(rules: Option<&pb::RuleSet>, fen: &str) -> Result<Position, Status> {
    let rules = convert::rule_set(rules)?;
    Ok(convert::position(rules, fen)?)
}

fn status_of(pos: &Position) -> pb::GameStatus {
    convert::status_to_wire(Game::new(*pos).status(), pos)
}

#[tonic::async_trait]
impl Rules for RulesService {
    #[tracing::instrument(skip_all, fields(variant))]
    async fn list_moves(
        &self,
        req: Request<pb::ListMovesRequest>,
    ) -> Result<Response<pb::ListMovesResponse>, Status> {
        let req = req.into_inner();
        let pos = position_of(req.rules.as_ref(), &req.fen)?;
        tracing::Span::current().record("variant", pos.variant().key());
        let paths = pos.move_paths();
        let moves = pos
            .legal_moves()
            .iter()
            .map(|m| convert::move_to_wire_in(&pos, m, &paths))
            .collect();
        Ok(Response::new(pb::ListMovesResponse {
            position: Some(convert::position_to_wire(&pos)),
            moves,
            capture_available: pos.has_capture(),
            status: Some(status_of(&pos)),
        }))
    }

    // The hottest RPC: no span of its own (the per-RPC span of the runtime covers it), and the move paths
    // are generated once for resolution, notation and the wire move.
    async fn validate_move(
        &self,
        req: Request<pb::ValidateMoveRequest>,
    ) -> Result<Response<pb::ValidateMoveResponse>, Status> {
        let req = req.into_inner();
        let pos = position_of(req.rules.as_ref(), &req.fen)?;
        let paths = pos.move_paths();
        let resp = match convert::resolve_move_in(&pos, req.r#move.as_ref(), &paths) {
            Ok(mv) => {
                let next = pos.play_unchecked(&mv);
                pb::ValidateMoveResponse {
                    legal: true,
                    rejection: pb::MoveRejection::Unspecified as i32,
                    reason: String::new(),
                    candidates: Vec::new(),
                    r#move: Some(convert::move_to_wire_in(&pos, &mv, &paths)),
                    position: Some(if req.include_pieces {
                        convert::position_to_wire(&next)
                    } else {
                        convert::position_fen_to_wire(&next)
                    }),
                    status: Some(status_of(&next)),
                }
            }
            Err(e) => pb::ValidateMoveResponse {
                legal: false,
                rejection: convert::rejection(&e) as i32,
                reason: e.to_string(),
                candidates: match &e {
                    draughts_engine::ResolveError::Ambiguous { candidates, .. } => {
                        candidates.clone()
                    }
                    _ => Vec::new(),
                },
                r#move: None,
                position: None,
                status: None,
            },
        };
        Ok(Response::new(resp))
    }

    #[tracing::instrument(skip_all, fields(variant, n_moves))]
    async fn apply_moves(
        &self,
        req: Request<pb::ApplyMovesRequest>,
    ) -> Result<Response<pb::ApplyMovesResponse>, Status> {
        let req = req.into_inner();
        if req.moves.len() > MAX_APPLY_MOVES {
            return Err(ApiError::InvalidArgument(format!(
                "at most {MAX_APPLY_MOVES} moves per call, got {}",
                req.moves.len()
            ))
            .into());
        }
        let pos = position_of(req.rules.as_ref(), &req.fen)?;
        let span = tracing::Span::current();
        span.record("variant", pos.variant().key());
        span.record("n_moves", req.moves.len());
        let mut game = Game::new(pos);
        let mut applied = Vec::with_capacity(req.moves.len());
        let mut rejected = None;
        for (i, input) in req.moves.iter().enumerate() {
            let before = *game.position();
            if let GameStatus::Finished(r) = game.status() {
                rejected = Some((
                    i,
                    pb::MoveRejection::Illegal,
                    format!("the game is over ({})", r.describe()),
                ));
                break;
            }
            match convert::resolve_move(&before, Some(input)) {
                Ok(mv) => {
                    // Resolved against the current position, so it is legal and the game is ongoing.
                    if let Err(e) = game.play(&mv) {
                        rejected = Some((i, pb::MoveRejection::Illegal, e.to_string()));
                        break;
                    }
                    applied.push(convert::move_to_wire(&before, &mv));
                }
                Err(e) => {
                    rejected = Some((i, convert::rejection(&e), e.to_string()));
                    break;
                }
            }
        }
        let (rejected_index, rejection, reason) = match rejected {
            Some((i, r, reason)) => (Some(i as u32), r, reason),
            None => (None, pb::MoveRejection::Unspecified, String::new()),
        };
        Ok(Response::new(pb::ApplyMovesResponse {
            applied,
            position: Some(convert::position_to_wire(game.position())),
            status: Some(convert::status_to_wire(game.status(), game.position())),
            rejected_index,
            rejection: rejection as i32,
            reason,
        }))
    }

    async fn start_position(
        &self,
        req: Request<pb::StartPositionRequest>,
    ) -> Result<Response<pb::StartPositionResponse>, Status> {
        let rules = convert::rule_set(req.get_ref().rules.as_ref())?;
        Ok(Response::new(pb::StartPositionResponse {
            position: Some(convert::position_to_wire(&Position::start(rules))),
        }))
    }

    async fn parse_position(
        &self,
        req: Request<pb::ParsePositionRequest>,
    ) -> Result<Response<pb::ParsePositionResponse>, Status> {
        let req = req.into_inner();
        if req.fen.trim().is_empty() {
            return Err(ApiError::InvalidArgument("fen is required".into()).into());
        }
        let pos = position_of(req.rules.as_ref(), &req.fen)?;
        Ok(Response::new(pb::ParsePositionResponse {
            position: Some(convert::position_to_wire(&pos)),
            status: Some(status_of(&pos)),
        }))
    }
}
