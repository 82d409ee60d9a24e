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
//! Players are [`PlayerRef`]s: a number the service gives each entrant of one event (its pairing
//! number; lower numbers joined earlier), so that pairing tens of thousands of players moves integers,
//! not strings. The service keeps the mapping to account ids.

pub mod arena;
pub mod standings;
pub mod swiss;

/// One entrant of one event (see the crate's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PlayerRef(pub u32);

/// A side of the board.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
