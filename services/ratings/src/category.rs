//! Rating categories: one rating per player per variant, and per speed class for the variants the
//! configuration rates that way (international by default): the platform's one type and rule
//! ([`draughts_proto::vocab::rating`], shared with matchmaking and tournaments).

pub use draughts_proto::vocab::rating::{BadCategory, Category};
/// A game's time control and its speed class: the platform's one type and rule
/// ([`draughts_proto::vocab::time`], shared with Games, the contract and matchmaking).
pub use draughts_proto::vocab::time::{Speed, TimeControl};
