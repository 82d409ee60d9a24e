//! The computer player of a separately deployed Games service: each `ai:<level>` move is asked of
//! `Analysis.BestMove` over gRPC (`--analysis-url`), with an API key of the platform (`--analysis-api-key`,
//! scopes `analysis` and `service`) so that the computer's moves are the server's own (the computer-move
//! class, not a player's analysis quota), each named for the person the computer plays
//! (`x-on-behalf-of`) so that it counts against that person's rate limit, not the key's.

use draughts_auth::layer::ServiceKey;
use draughts_proto::{convert, pb};
use tonic::transport::Channel;

use super::computer::{ComputerPlayer, ComputerTurn};
use super::service::{GamesError, GamesResult};

/// Most moves sent with a position (the analysis API's bound).
const MAX_MOVES: usize = 1000;

/// `Analysis.BestMove` over gRPC.
#[derive(Clone, Debug)]
pub struct GrpcComputer {
    channel: Channel,
    key: ServiceKey,
}

impl GrpcComputer {
    /// A lazily connected client of the analysis service at `url` (`http://host:port`).
    pub fn new(url: &str, api_key: &str) -> Result<GrpcComputer, draughts_runtime::ConfigError> {
        // No call timeout: a move takes what the clock allows (the analysis service bounds it).
        Ok(GrpcComputer {
            channel: draughts_runtime::upstream::channel("--analysis-url", url, None)?,
            key: ServiceKey::new(api_key)?,
        })
    }
}

fn unavailable(e: tonic::Status) -> GamesError {
    GamesError::Refused(format!("the computer found no move: {}", e.message()))
}

#[tonic::async_trait]
impl ComputerPlayer for GrpcComputer {
    async fn choose(&self, turn: ComputerTurn) -> GamesResult<String> {
        let turn_opponent = turn.opponent.clone();
        let (fen, moves) = if turn.moves.len() <= MAX_MOVES {
            (turn.start_fen.clone(), turn.moves.clone())
        } else {
            (turn.fen.clone(), Vec::new())
        };
        let remaining_ms = if turn.fen.starts_with('W') {
            turn.white_ms
        } else {
            turn.black_ms
        };
        let message = pb::BestMoveRequest {
            source: Some(pb::best_move_request::Source::Position(pb::PositionInput {
                rules: Some(convert::rules_to_wire(turn.rules)),
                fen,
                moves: moves
                    .into_iter()
                    .map(|text| pb::MoveInput {
                        r#move: Some(pb::move_input::Move::Text(text)),
                    })
                    .collect(),
            })),
            strength: Some(pb::best_move_request::Strength::Level(u32::from(
                turn.level,
            ))),
            clock: Some(pb::MoveClock {
                remaining_ms,
                increment_ms: turn.increment_ms,
            }),
            seed: rand::random(),
        };
        // For the person the computer plays: with a key of the `service` scope the call counts
        // against their limit, so no player can use up the key's (draughts_auth::layer).
        let request = self
            .key
            .request(message, turn_opponent.as_deref())
            .map_err(|e| GamesError::Refused(format!("the computer found no move: {e}")))?;
        let answer = pb::analysis_client::AnalysisClient::new(self.channel.clone())
            .best_move(request)
            .await
            .map_err(unavailable)?
            .into_inner();
        answer
            .r#move
            .map(|m| m.notation)
            .ok_or_else(|| GamesError::Refused("the computer found no move".into()))
    }
}
