//! The `games.finished` stream: one entry per finished game (filled in below).

/// The stream the games service appends finished games to.
pub const STREAM: &str = "games.finished";
