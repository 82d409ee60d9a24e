//! Search, evaluation and playing levels for every variant of `draughts-engine`.
//!
//! A pure library: no I/O and no async runtime. The caller owns threads and clocks; a search is cancelled
//! through a [`StopHandle`] shared with another thread.
//!
//! ```
//! use draughts_ai::{Limits, RootState, Score, Searcher};
//! use draughts_engine::{Position, Variant};
//!
//! // English: a few pieces each, search eight plies deep.
//! let pos = Position::from_fen(Variant::English, "W:W21,25:B14,17").unwrap();
//! let mut searcher = Searcher::new(Variant::English);
//! let result = searcher.search(&RootState::new(pos), &Limits::depth(8), |_info| {});
//! assert!(result.best.is_some());
//! assert!(matches!(result.score(), Some(Score::CentiMen(_) | Score::WinIn(_) | Score::LossIn(_))));
//! ```
//!
//! Modules:
//! - [`eval`]: the static evaluation: the learned pattern evaluation where a variant ships weights, else a
//!   hand-set weight table;
//! - [`learned`]: the pattern-table evaluation and its weights file;
//! - [`nnue`]: the NNUE-style network evaluation (integer inference, incremental accumulators, its file
//!   format and its trainer);
//! - [`train`]: self-play data and the logistic (Texel) fit that makes the learned weights;
//! - [`search`]: iterative deepening PVS with a transposition table, quiescence, draw rules and limits;
//! - [`level`]: playing levels 1 to 8 and the one-ply greedy player;
//! - [`bitbase`]: win/draw/loss endgame tables, our own retrograde generator, their files and probes;
//! - [`hub`]: the Hub protocol's line, position and move formats (the loop lives in the CLI);
//! - [`openings`], [`stats`]: balanced match openings and Elo estimates.

pub mod bench;
pub mod bitbase;
pub mod eval;
pub mod hub;
pub mod learned;
pub mod level;
pub mod nnue;
pub mod openings;
pub mod search;
pub mod stats;
pub mod train;
pub mod tt;
mod wide;

pub use eval::{Evaluator, Weights};
pub use level::{Level, Rng, greedy_move};
pub use search::{
    Info, Limits, Line, RootState, Score, SearchOptions, SearchResult, Searcher, Selectivity,
    StopHandle, search_position,
};
pub use stats::{EloEstimate, Sprt, SprtState, Tally};
