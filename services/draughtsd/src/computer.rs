//! The computer players of the one-process platform: `Games` asks the in-process analysis service for
//! each `ai:<level>` move (a BestMove job in the highest queue class, with no quota, as the server's own
//! computer), so the computer's moves go through the same queue and workers as every analysis.

use draughts_analysis::contract::{JobSpec, Line, Rules};
use draughts_analysis::{AnalysisCore, Queue};
use draughts_proto::vocab::clock::computer_move_cap_ms;
use draughts_validation::games::GamesError;
use draughts_validation::games::computer::{ComputerPlayer, ComputerTurn};

/// Most moves sent with a position (the analysis API's bound); a longer game is sent as its current
/// position alone.
const MAX_MOVES: usize = 1000;

/// Plays `ai:<level>` through the analysis queue of this process.
#[derive(Clone, Debug)]
pub struct QueuedComputer {
    pub analysis: AnalysisCore,
}

#[tonic::async_trait]
impl ComputerPlayer for QueuedComputer {
    async fn choose(&self, turn: ComputerTurn) -> Result<String, GamesError> {
        let (fen, moves) = if turn.moves.len() <= MAX_MOVES {
            (turn.start_fen.clone(), turn.moves.clone())
        } else {
            (turn.fen.clone(), Vec::new())
        };
        let side_to_move_ms = if turn.fen.starts_with('W') {
            turn.white_ms
        } else {
            turn.black_ms
        };
        let spec = JobSpec::BestMove {
            line: Line {
                rules: Rules {
                    variant: turn.rules.variant().key().to_owned(),
                    options: turn.rules.options().to_string(),
                },
                fen,
                moves,
            },
            level: Some(turn.level),
            limits: None,
            // The one time allocation of every deployment shape (Analysis.BestMove's `clock` too).
            clock_cap_ms: Some(computer_move_cap_ms(side_to_move_ms, turn.increment_ms)),
            seed: rand::random(),
        };
        let owner = draughts_proto::ids::PlayerId::computer(turn.level);
        let (_, result) = self
            .analysis
            .run_best_move(Queue::new_job_id(), spec, owner)
            .await
            .map_err(|e| GamesError::Refused(format!("the computer found no move: {e}")))?;
        Ok(result.mv.notation)
    }
}
