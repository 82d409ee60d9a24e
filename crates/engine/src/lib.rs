//! The rules of draughts: sixteen variants, their move generation, notation and game state.
//!
//! The crate is pure: no I/O, no async, no dependency on the services' transports.
//!
//! ```
//! use draughts_engine::{Count, Position, Variant};
//!
//! let pos = Position::start(Variant::International);
//! assert_eq!(pos.legal_moves().len(), 9);
//! assert_eq!(pos.perft(3, Count::Unique), 658);
//!
//! let pos = Position::from_fen(Variant::English, "B:W21-32:B1-12").unwrap();
//! let mv = pos.parse_move("11-15").unwrap();
//! let next = pos.play(&mv).unwrap();
//! assert_eq!(next.to_fen(), "W:W21,22,23,24,25,26,27,28,29,30,31,32:B1,2,3,4,5,6,7,8,9,10,12,15");
//! ```

mod board;
mod fen;
mod game;
mod movegen;
mod notation;
mod position;
mod variant;

pub use board::{Algebraic, Bitboard, Board, BoardKind, Square};
pub use fen::{Fen, FenError, FenPiece, SquareRef};
pub use game::{DrawReason, Game, GameError, GameResult, GameStatus, WinReason};
pub use notation::{
    MoveText, MoveTextError, ResolveError, pdn_movetext, pdn_options_tag, pdn_tag, pdn_variant_tags,
};
pub use position::{Count, Move, MovePath, Piece, PlayError, Position, PositionError, Role};
pub use variant::{
    Color, DrawRules, EndgameRule, Goal, MAX_DRAW_COUNT, NoProgress, NotationStyle, OptionError,
    Precedence, ProgressReset, Promotion, Removal, RuleOptions, RuleSet, Rules, UnknownVariant,
    Variant,
};
