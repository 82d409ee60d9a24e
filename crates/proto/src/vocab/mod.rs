//! The platform's shared vocabulary: the few domain rules that more than one service applies, written
//! once here so that every deployment shape (one process, or services apart) behaves the same.
//!
//! - [`clock`]: how much of a clock the computer may spend on one move;
//! - [`player`]: one side of a game, as every stored record and contract keeps it;
//! - [`rating`]: which rating a game counts for (a variant, and a speed class where rated so);
//! - [`time`]: a game's time control and its speed class.

pub mod clock;
pub mod player;
pub mod rating;
pub mod time;
