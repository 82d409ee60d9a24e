//! The computer's side of live games: a player `ai:<level>` is played by the server.
//!
//! Whenever a write makes it a computer's turn, the same atomic write puts the game into the
//! `game-computer` schedule (due at once). Every replica's timers claim due games from it (each to one
//! replica; a claim stays scheduled [`CLAIM_RETRY`] ahead until dealt with, so a replica killed during
//! the search loses nothing: another one claims the game again), ask the configured
//! [`ComputerPlayer`] for a move, and play it through the normal move path (`GamesCore::play_move`: the
//! same validation, clocks and events as a person's move, with `expected_ply` so that a late answer
//! can never be played twice). A replica without a computer player claims nothing. When no answer
//! comes within the computer's clock, its flag falls (or, before its first move, the game is aborted)
//! as the rules say, and the game's end event says why.
//!
//! Whether a player is a computer is decided from its id (`ai:<level>`), never from a request.

use std::sync::Arc;
use std::time::Duration;

use draughts_engine::RuleSet;
use draughts_proto::ids::PlayerId;

use super::record::{GameRecord, TimeControlRec};
use super::service::{CLAIM_RETRY, GamesCore, GamesError, GamesResult, keys};

/// What the computer needs to choose a move.
#[derive(Clone, Debug)]
pub struct ComputerTurn {
    pub game_id: String,
    /// 1 to 8 (`draughts_ai` levels).
    pub level: u8,
    pub rules: RuleSet,
    /// The game's start position (FEN) and every move since, in the variant's notation, so that the
    /// draw rules' history is known.
    pub start_fen: String,
    pub moves: Vec<String>,
    /// The current position (FEN).
    pub fen: String,
    /// Both clocks now, ms, and the increment per move (0 for correspondence).
    pub white_ms: u64,
    pub black_ms: u64,
    pub increment_ms: u64,
    /// The person the computer plays (its move is asked for them: in a deployment the call counts
    /// against their rate limit, not the Games service's key); `None` when both sides are computers.
    pub opponent: Option<String>,
}

/// Chooses the computer's moves (in a deployment: `Analysis.BestMove`).
#[tonic::async_trait]
pub trait ComputerPlayer: Send + Sync + std::fmt::Debug {
    /// The move to play, in the variant's notation (or as `from-to`/`fromxto` squares).
    async fn choose(&self, turn: ComputerTurn) -> GamesResult<String>;
}

/// Computer moves searched at once by one replica; more wait for the next timer turn.
pub const MAX_IN_FLIGHT: usize = 64;

/// Whether it is a computer's turn in `record` (an ongoing game whose side to move is `ai:<level>`).
pub fn computer_to_move(record: &GameRecord) -> Option<PlayerId> {
    if record.is_over() {
        return None;
    }
    let side = record.side_to_move().ok()?;
    let player = match side {
        draughts_engine::Color::White => &record.white,
        draughts_engine::Color::Black => &record.black,
    };
    PlayerId::parse(&player.id)
        .ok()
        .filter(PlayerId::is_computer)
}

/// Whether either player is a computer (only such games touch the computer schedule).
pub fn has_computer(record: &GameRecord) -> bool {
    [&record.white.id, &record.black.id]
        .into_iter()
        .any(|id| PlayerId::parse(id).is_ok_and(|p| p.is_computer()))
}

impl GamesCore {
    /// Claims the games where it is a computer's turn and starts a search for each (at most
    /// [`MAX_IN_FLIGHT`] at once on this replica).
    pub(crate) async fn run_computer_turns(&self, slots: &Arc<tokio::sync::Semaphore>) {
        let Some(player) = self.computer().cloned() else {
            return;
        };
        let free = slots.available_permits().min(MAX_IN_FLIGHT);
        if free == 0 {
            return;
        }
        let ids = match self
            .live()
            .claim_due(keys::COMPUTER, self.now(), free, CLAIM_RETRY)
            .await
        {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e, "computer schedule unavailable");
                return;
            }
        };
        for id in ids {
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                // Stays claimed; it comes due again after the claim.
                break;
            };
            let core = self.clone();
            let player = player.clone();
            tokio::spawn(async move {
                let _permit = permit;
                if let Err(e) = core.computer_move(&id, player.as_ref()).await {
                    tracing::warn!(game_id = %id, error = %e, "computer move failed; retrying in 1 s");
                    let retry = core.now() + 1_000;
                    let _ = core.live().schedule(keys::COMPUTER, &id, retry).await;
                }
            });
        }
    }

    /// Plays the computer's move in game `id` if it is the computer's turn.
    pub async fn computer_move(&self, id: &str, player: &dyn ComputerPlayer) -> GamesResult<()> {
        let (record, _) = match self.load(id).await {
            Ok(x) => x,
            Err(GamesError::NotFound(_)) => {
                self.live().cancel(keys::COMPUTER, id).await?;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let Some(computer) = computer_to_move(&record) else {
            // Not (or no longer) the computer's turn: nothing to do.
            self.live().cancel(keys::COMPUTER, id).await?;
            return Ok(());
        };
        let side = record.side_to_move()?;
        let (white_ms, black_ms) = record.clocks_at(side, self.now());
        let turn = ComputerTurn {
            game_id: record.id.to_string(),
            level: computer.computer_level().unwrap_or(1),
            rules: record.rules()?,
            start_fen: record.start_fen.clone(),
            moves: record.moves.iter().map(|m| m.text.clone()).collect(),
            fen: record.position()?.to_fen(),
            white_ms,
            black_ms,
            increment_ms: match record.time {
                TimeControlRec::Fischer { increment_ms, .. } => increment_ms,
                TimeControlRec::Correspondence { .. } => 0,
            },
            opponent: [&record.white, &record.black]
                .into_iter()
                .find(|p| !p.computer)
                .map(|p| p.id.to_string()),
        };
        let ply = record.ply();
        let text = player.choose(turn).await?;
        match self
            .play_move(
                id,
                computer.as_str(),
                |pos| pos.parse_move(&text),
                Some(ply),
            )
            .await
        {
            Ok(_) => Ok(()),
            // The game moved on meanwhile (it ended, or another replica played): nothing to do.
            Err(GamesError::Refused(_)) | Err(GamesError::Conflict) => {
                let (now, _) = self.load(id).await?;
                if computer_to_move(&now).is_none() {
                    self.live().cancel(keys::COMPUTER, id).await?;
                    Ok(())
                } else {
                    Err(GamesError::Conflict)
                }
            }
            Err(e) => {
                tracing::error!(game_id = %id, error = %e, "the computer's move was refused");
                Err(e)
            }
        }
    }
}

/// How long an idle timer waits at most before looking at the computer schedule again.
pub const POLL: Duration = Duration::from_millis(250);
