//! Live games: the server referees every game (`draughts.v1.Games`).
//!
//! - [`record`]: the stored game and the pure rules of play around the engine (turns, clocks, offers).
//! - [`service`]: the domain over the shared backends (compare-and-set, schedules, archive, events).
//! - [`invitation`], [`consent`]: invitations (the consent step before a game between two people),
//!   rematches, and the per-player signals behind `WatchPlayerEvents`.
//! - [`pdn`]: PDN export.
//! - [`grpc`]: the gRPC edge (authenticate, convert, call, convert back).

pub mod consent;
pub mod grpc;
pub mod invitation;
pub mod pdn;
pub mod player_events;
pub mod record;
pub mod service;

pub use service::{Clock, GamesCore, GamesError, SystemClock, TokioClock};

/// Settings of live games.
#[derive(Clone, Debug, clap::Args)]
pub struct GamesConfig {
    /// Seconds each side has for its first move in Fischer games (clocks start once both sides have
    /// moved; a missed first move aborts the game).
    #[arg(long, env = "DRAUGHTS_FIRST_MOVE_SECS", default_value_t = 30)]
    pub first_move_secs: u64,
}

impl GamesConfig {
    pub fn validate(&self) -> Result<(), draughts_runtime::ConfigError> {
        if !(1..=3600).contains(&self.first_move_secs) {
            return Err(draughts_runtime::ConfigError(format!(
                "first-move-secs must be from 1 to 3600, got {}",
                self.first_move_secs
            )));
        }
        Ok(())
    }

    /// The defaults.
    pub fn defaults() -> GamesConfig {
        GamesConfig {
            first_move_secs: record::DEFAULT_FIRST_MOVE_MS / 1000,
        }
    }
}
