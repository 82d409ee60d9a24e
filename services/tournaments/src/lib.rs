//! The pure domain core of tournaments: no gRPC, no storage, no clock, no I/O. The tournaments service
//! drives it: it keeps a [`standings::Standings`] per event (applying each finished game with
//! [`standings::apply_result`], idempotent per game id), asks [`arena::pair_wave`] for a wave of an
//! arena, [`swiss::pair_round`] for a round of a Swiss event, and creates the games through Games.
//!
//! - [`arena`]: lichess's arena: scoring sheets (wins 2, draws 1, streaks, berserk) and the pairing of
//!   one wave of waiting players by rank and rating, avoiding immediate rematches.
//! - [`swiss`]: a simplified Dutch system (FIDE handbook C.04.3): score groups, no pair meets twice,
//!   colour limits, one bye to the lowest eligible player, through a maximum-weight matching.
//! - [`standings`]: points, tie-breaks (Buchholz, Buchholz cut-1, Sonneborn-Berger), ranks with ties.
//!
//! The service around it (`draughts.v1.Tournaments`, binary `draughts-tournaments`, and inside
//! `draughtsd`):
//! - [`terms`]: the terms of an event, checked once at creation;
//! - [`store`]: the tournament record in the live store and the archive of finished events;
//! - [`ports`]: what is asked of Games (creating the paired games) and Ratings;
//! - [`service`]: the domain over the live store, with its concurrency protocol (fenced scheduler
//!   leases, pairings recorded before their games are created, results applied once);
//! - [`loops`]: the scheduler loop and the consumer of `games.finished`;
//! - [`grpc`]: the edge; [`error`]: the one error enum.
//!
//! Players are [`PlayerRef`]s: a number the service gives each entrant of one event (its pairing
//! number; lower numbers joined earlier), so that pairing tens of thousands of players moves integers,
//! not strings. The service keeps the mapping to account ids.

pub mod arena;
pub mod error;
pub mod grpc;
pub mod loops;
pub mod ports;
pub mod service;
pub mod standings;
pub mod store;
pub mod swiss;
pub mod terms;

mod app;

pub use app::{Config, StartError, Tournaments, TournamentsConfig, run};
pub use error::{TournamentsError, TournamentsResult};

/// One entrant of one event (see the crate's documentation).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct PlayerRef(pub u32);

/// A side of the board.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Colour {
    White,
    Black,
}

impl Colour {
    /// The other side.
    pub fn opposite(self) -> Colour {
        match self {
            Colour::White => Colour::Black,
            Colour::Black => Colour::White,
        }
    }
}
