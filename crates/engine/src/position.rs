//! Positions, moves and legal move lists.

use std::fmt;

use crate::board::{
    Bitboard, Bits, Board, BoardKind, Brazilian8, Czech8, Diag8, Diag10, Diag12, English8,
    Frisian10, Geometry, Italian8, Ortho, Russian8, Spanish8, Square, step,
};
use crate::fen::{Fen, FenError, SquareRef};
use crate::movegen::{self, CountSink, Gen, LeafCount, ListSink, PathSink, Sink};
use crate::variant::{Color, Goal, RuleSet, Variant};

/// Man or king.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Man,
    King,
}

/// A piece: colour and role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Piece {
    pub color: Color,
    pub role: Role,
}

/// A legal move: origin, destination, captured pieces (as a set) and whether it crowns the piece.
///
/// Two capture chains with the same origin, destination and captured set give the same position and are
/// the same `Move` (docs/rules.md §6.1). The capture order and landing squares are
/// available through [`Position::move_path`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Move {
    /// Captured squares, bits 0-63 and (12x12 board only) 64-79: a move stays 16 bytes.
    captured: u64,
    captured_hi: u16,
    from: u8,
    to: u8,
    n_captured: u8,
    flags: u8,
}

const KING: u8 = 1;
const PROMOTES: u8 = 2;

impl Move {
    #[inline(always)]
    pub(crate) fn new<B: Bits>(
        from: B,
        to: B,
        captured: B,
        n: u8,
        king: bool,
        promotes: bool,
    ) -> Move {
        Move {
            captured: captured.lo(),
            captured_hi: captured.hi(),
            from: from.trailing_zeros() as u8,
            to: to.trailing_zeros() as u8,
            n_captured: n,
            flags: if king { KING } else { 0 } | if promotes { PROMOTES } else { 0 },
        }
    }
    pub fn from(&self) -> Square {
        Square(self.from)
    }
    pub fn to(&self) -> Square {
        Square(self.to)
    }
    /// The captured pieces' squares.
    pub fn captured(&self) -> Bitboard {
        Bitboard(self.captured_bb::<u128>())
    }
    #[inline(always)]
    pub(crate) fn captured_bb<B: Bits>(&self) -> B {
        B::join(self.captured, self.captured_hi)
    }
    pub fn n_captured(&self) -> u32 {
        u32::from(self.n_captured)
    }
    pub fn is_capture(&self) -> bool {
        self.n_captured > 0
    }
    /// Whether the moving piece is a king.
    pub fn is_king_move(&self) -> bool {
        self.flags & KING != 0
    }
    /// Whether the moving man is crowned by this move.
    pub fn promotes(&self) -> bool {
        self.flags & PROMOTES != 0
    }
}

impl fmt::Debug for Move {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Move(bit {} -> {}, captured {:#x}{}{})",
            self.from,
            self.to,
            self.captured_bb::<u128>(),
            if self.is_king_move() { ", king" } else { "" },
            if self.promotes() { ", promotes" } else { "" }
        )
    }
}

/// A move with the path of one of its capture orders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MovePath {
    pub mv: Move,
    /// Every square the piece stands on, from its origin to its destination.
    pub path: Vec<Square>,
    /// The captured pieces in capture order.
    pub captured: Vec<Square>,
}

/// How perft and move lists treat capture chains that differ only in the order of the captures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Count {
    /// Same origin, destination and captured set counted once (FMJD convention; the legal move list).
    #[default]
    Unique,
    /// Every distinct capture order counted (the convention of the best-known 8x8 tables).
    AllOrders,
    /// Every capture order, and a flying king's straight-on continuation counted once per square it
    /// could stop on before the next capture (not moves in the rules' sense: the convention of the
    /// `kish` Turkish tables and of pydraughts).
    AllPaths,
}

impl Count {
    fn unique(self) -> bool {
        self == Count::Unique
    }
    fn split(self) -> bool {
        self == Count::AllPaths
    }
}

/// Why a move can't be played.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("illegal move {0:?} in this position")]
pub struct PlayError(pub Move);

/// Why a position can't be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PositionError {
    #[error(transparent)]
    Fen(#[from] FenError),
    #[error("square {0} does not exist on the {1} board")]
    NoSuchSquare(String, Variant),
    #[error("square {0} is a light square, not playable in {1}")]
    LightSquare(String, Variant),
    #[error("square {0} is given twice")]
    Duplicate(String),
    #[error("a {color} man on {square} stands on its own promotion row")]
    ManOnPromotionRow { color: &'static str, square: String },
    /// More pieces of one colour than the variant starts with (docs/rules.md §8.1).
    #[error("{color} has {count} pieces, more than the {max} each side starts with in {variant}")]
    TooManyPieces {
        color: &'static str,
        count: u32,
        max: u32,
        variant: Variant,
    },
    /// Breakthrough: the side to move has a king, or the other side more than the one it crowned last
    /// (docs/rules.md §8.5).
    #[error(
        "in breakthrough the game ends with the first king: the side to move can have none and the other side one at most (got {side_to_move} and {other_side})"
    )]
    KingsAfterBreakthrough { side_to_move: u32, other_side: u32 },
    /// A Turkish man on its own first rank, where it can never be: men never move backward
    /// (docs/rules.md §8.3).
    #[error(
        "a {color} man on {square} stands on its own first rank, which a man can never return to in {variant}"
    )]
    ManOnOwnBackRank {
        color: &'static str,
        square: String,
        variant: Variant,
    },
    /// A king-move count (the FEN's `+` field) that does not fit the position: only Frisian counts them,
    /// from 1 to the limit, for a king of that colour on the square named (docs/rules.md §11.5, §8.6).
    #[error("bad king-move count for {color}: {why}")]
    BadKingMoves { color: &'static str, why: String },
}

/// A position: pieces, side to move and the rules in force. Always valid (built through
/// [`Position::from_fen`] or [`Position::start`]); move generation and play never fail on it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Position {
    /// The pieces, bits 0-63 of the board's layout ([`Bits`]).
    white: u64,
    black: u64,
    kings: u64,
    /// Bits 64-79 of white, black and kings: used on the 12x12 board only, 0 on every other board (whose
    /// generator never reads them).
    hi: [u16; 3],
    side: Color,
    rules: RuleSet,
    /// Frisian king-move runs (docs/rules.md §11.5), White's then Black's: `bit << 2 | count`, the square
    /// of the king that made `count` (1..=3) non-capturing moves in a row; 0 for none. Always 0 in the other
    /// variants.
    runs: [u8; 2],
}

impl fmt::Debug for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Position({} {})", self.rules.variant(), self.to_fen())
    }
}

/// Calls `$f` with the geometry of the position's variant (its board, and on 8x8 its group of rules).
macro_rules! dispatch {
    ($self:expr, $f:ident $(, $arg:expr)*) => {
        match $self.rules.variant() {
            Variant::International | Variant::Antidraughts | Variant::Breakthrough | Variant::Killer => {
                $f::<Diag10>($self $(, $arg)*)
            }
            Variant::Frisian | Variant::Frysk => $f::<Frisian10>($self $(, $arg)*),
            Variant::Canadian => $f::<Diag12>($self $(, $arg)*),
            Variant::Turkish => $f::<Ortho>($self $(, $arg)*),
            Variant::English => $f::<Diag8<English8>>($self $(, $arg)*),
            Variant::Italian => $f::<Diag8<Italian8>>($self $(, $arg)*),
            Variant::Russian | Variant::Pool => $f::<Diag8<Russian8>>($self $(, $arg)*),
            Variant::Brazilian => $f::<Diag8<Brazilian8>>($self $(, $arg)*),
            Variant::Spanish | Variant::Portuguese => $f::<Diag8<Spanish8>>($self $(, $arg)*),
            Variant::Czech => $f::<Diag8<Czech8>>($self $(, $arg)*),
        }
    };
}

fn gen_list<G: Geometry>(pos: &Position, list: &mut Vec<Move>, count: Count) {
    if pos.is_over_by_first_king() {
        list.clear();
        return;
    }
    let mut sink = ListSink::new(list, count.unique());
    Gen::<G, _>::new(pos, &mut sink)
        .split_landings(count.split())
        .run(pos);
}

fn gen_paths<G: Geometry>(pos: &Position, sink: &mut PathSink) {
    if pos.is_over_by_first_king() {
        return;
    }
    Gen::<G, _>::new(pos, sink).run(pos);
}

/// perft's last ply: the number of legal moves, on bitboards where that is exact (inlined into the loop
/// over the parent's moves), else by the capture generator.
#[inline(always)]
fn count_moves<G: Geometry>(pos: &Position, list: &mut Vec<Move>, count: Count) -> u64 {
    if G::FIRST_KING && pos.is_over_by_first_king() {
        return 0;
    }
    match movegen::bulk_count::<G>(pos) {
        LeafCount::Exact(n) => n,
        LeafCount::MenChains(go_on, starters) => {
            let (own, opp) = pos.own_opp::<G::B>();
            movegen::men_chains::<G>(
                pos.side,
                go_on,
                starters,
                own,
                opp,
                pos.kings_bb::<G::B>(),
                count.unique(),
                list,
            )
        }
        LeafCount::Generator => count_by_generator::<G>(pos, list, count),
    }
}

#[inline(never)]
fn count_by_generator<G: Geometry>(pos: &Position, list: &mut Vec<Move>, count: Count) -> u64 {
    // On the 8x8 boards, the men's chains on bitboards where only men capture.
    if !count.split()
        && let Some(n) = movegen::men_chains8::<G>(pos, count.unique(), list)
    {
        return n;
    }
    let mut sink = CountSink::new(list, count.unique());
    Gen::<G, _>::new(pos, &mut sink)
        .split_landings(count.split())
        .run(pos);
    sink.count()
}

/// perft's interior nodes: a quiet move is played and its subtree counted as the generator finds it (no
/// list); captures are kept, since a later chain may outrank them, and counted once the generator is done.
struct PerftSink<'a, G: Geometry, const TWO: bool> {
    pos: &'a Position,
    /// The position's pieces and rules, read once (the loop over the moves keeps them in registers).
    white: G::B,
    black: G::B,
    kings: G::B,
    side: Color,
    leaf: movegen::LeafRules,
    /// This node's depth (2 or more).
    depth: u32,
    /// At depth 2 on the eight-direction board and the 8x8 boards ([`Geometry::QUIET_REPLIES`]), where
    /// the other side has no king and no capture: its replies to the men's quiet steps after which it has
    /// no capture are counted at once ([`movegen::bulk_count_quiet_replies`]), and on the eight-direction
    /// board the replies to the other quiet moves by [`movegen::bulk_count_quiet_reply`] (set before the
    /// quiet moves).
    replies: Option<movegen::QuietReplies<G::B>>,
    count: Count,
    captures: ListSink<'a>,
    /// The lists of the plies below.
    rest: &'a mut [Vec<Move>],
    total: u64,
    _g: std::marker::PhantomData<G>,
}

/// The subtree of `child`, `depth - 1` plies deep (the last ply counted by [`count_moves`]).
#[inline(always)]
fn subtree<G: Geometry>(
    child: &Position,
    leaf: &movegen::LeafRules,
    depth: u32,
    count: Count,
    rest: &mut [Vec<Move>],
) -> u64 {
    if depth == 2 {
        count_moves::<G>(child, &mut rest[0], count)
    } else {
        perft_rec_at::<G>(child, leaf, depth - 1, count, rest)
    }
}

impl<G: Geometry, const TWO: bool> Sink<G::B> for PerftSink<'_, G, TWO> {
    #[inline(always)]
    fn capture(&mut self, mv: Move, key: u32) {
        Sink::<G::B>::capture(&mut self.captures, mv, key);
    }
    fn has_captures(&self) -> bool {
        Sink::<G::B>::has_captures(&self.captures)
    }
    #[inline(always)]
    fn quiet(&mut self, mv: Move) {
        let child = self.pos.play_in::<G>(&mv);
        self.total += subtree::<G>(&child, &self.leaf, self.depth, self.count, self.rest);
    }
    #[inline(always)]
    fn before_quiet(&mut self) {
        // Looked at only where there are quiet moves (not after a capture).
        if G::QUIET_REPLIES && TWO {
            let (own, opp) = match self.side {
                Color::White => (self.white, self.black),
                Color::Black => (self.black, self.white),
            };
            self.replies = movegen::quiet_replies::<G>(&self.leaf, self.side, own, opp, self.kings);
        }
    }
    #[inline(always)]
    fn quiet_men_steps(&mut self, to: G::B, d: usize) -> G::B {
        if !G::QUIET_REPLIES || !TWO {
            return to;
        }
        let Some(before) = &self.replies else {
            return to;
        };
        // The steps after which the other side has no capture are counted at once; the others (and,
        // where a first king ends the game, those that crown) go one by one.
        let (opp, promo_row) = match self.side {
            Color::White => (self.black, G::TOP_ROW),
            Color::Black => (self.white, G::BOTTOM_ROW),
        };
        let mut held = movegen::quiet_reply_captures::<G>(before, opp, d);
        if G::FIRST_KING && self.leaf.first_king {
            held |= promo_row;
        }
        let free = to & !held;
        self.total += movegen::bulk_count_quiet_replies::<G>(before, step::<G>(free, d ^ 2), free);
        to & held
    }
    #[inline(always)]
    fn quiet_step(&mut self, from: G::B, to: G::B, king: bool, promotes: bool) {
        if TWO {
            // The last ply from the child's pieces alone: the child position is built only when the
            // capture generator has to count. (A quiet move leaves the other side's king-move run and
            // men as they were, so its blocked king is the parent's.)
            let p = self.pos;
            let (mut white, mut black, mut kings) = (self.white, self.black, self.kings);
            let ft = from | to;
            let mover = match self.side {
                Color::White => {
                    white = white ^ ft;
                    white
                }
                Color::Black => {
                    black = black ^ ft;
                    black
                }
            };
            if king {
                kings = kings ^ ft;
            } else if promotes {
                kings |= to;
            }
            if G::FIRST_KING && self.leaf.first_king && !(mover & kings).is_zero() {
                return;
            }
            let (own, opp) = match self.side {
                Color::White => (black, white),
                Color::Black => (white, black),
            };
            let replies = if G::N_DIRS == 8 { self.replies } else { None };
            if let Some(before) = &replies {
                self.total += movegen::bulk_count_quiet_reply::<G>(
                    before,
                    !self.side,
                    own,
                    opp,
                    kings,
                    from,
                    to,
                    self.count.unique(),
                    &mut self.rest[0],
                );
                return;
            }
            // The held king matters only to a side with kings (looked up only then).
            let blocked = if G::KING_MOVE_LIMIT && !(own & kings).is_zero() {
                <G::B as Bits>::join(p.blocked_king_of(!self.side), 0)
            } else {
                <G::B as Bits>::ZERO
            };
            let leaf =
                movegen::bulk_count_bits::<G>(&self.leaf, !self.side, own, opp, kings, blocked);
            self.total += match leaf {
                LeafCount::Exact(n) => n,
                LeafCount::MenChains(go_on, starters) => movegen::men_chains::<G>(
                    !self.side,
                    go_on,
                    starters,
                    own,
                    opp,
                    kings,
                    self.count.unique(),
                    &mut self.rest[0],
                ),
                LeafCount::Generator => count_by_generator::<G>(
                    &p.play_quiet_in::<G>(from, to, king, promotes),
                    &mut self.rest[0],
                    self.count,
                ),
            };
            return;
        }
        let child = self.pos.play_quiet_in::<G>(from, to, king, promotes);
        self.total += subtree::<G>(&child, &self.leaf, self.depth, self.count, self.rest);
    }
}

/// [`perft_rec`], compiled apart for depth 2 (whose sink counts the last ply) and the depths above.
#[inline(always)]
fn perft_rec_at<G: Geometry>(
    pos: &Position,
    leaf: &movegen::LeafRules,
    depth: u32,
    count: Count,
    lists: &mut [Vec<Move>],
) -> u64 {
    if depth == 2 {
        perft_rec::<G, true>(pos, leaf, depth, count, lists)
    } else {
        perft_rec::<G, false>(pos, leaf, depth, count, lists)
    }
}

fn perft_rec<G: Geometry, const TWO: bool>(
    pos: &Position,
    leaf: &movegen::LeafRules,
    depth: u32,
    count: Count,
    lists: &mut [Vec<Move>],
) -> u64 {
    let (list, rest) = match lists.split_first_mut() {
        Some(x) => x,
        None => return 1,
    };
    if depth == 1 {
        return count_moves::<G>(pos, list, count);
    }
    if G::FIRST_KING && pos.is_over_by_first_king() {
        return 0;
    }
    let leaf = *leaf;
    let mut sink = PerftSink::<G, TWO> {
        pos,
        white: pos.white_bb::<G::B>(),
        black: pos.black_bb::<G::B>(),
        kings: pos.kings_bb::<G::B>(),
        side: pos.side,
        leaf,
        depth,
        replies: None,
        count,
        captures: ListSink::new(list, count.unique()),
        rest,
        total: 0,
        _g: std::marker::PhantomData,
    };
    Gen::<G, _>::new(pos, &mut sink)
        .split_landings(count.split())
        .run(pos);
    let PerftSink {
        captures,
        rest,
        mut total,
        ..
    } = sink;
    // Not on the 10x10 board (its time measured 1-2% slower that way; a first king ends its game there).
    if TWO && !G::FIRST_KING {
        for mv in captures.list.iter() {
            total += count_capture_reply::<G>(pos, &leaf, mv, count, &mut rest[0]);
        }
        return total;
    }
    for mv in captures.list.iter() {
        total += subtree::<G>(&pos.play_in::<G>(mv), &leaf, depth, count, rest);
    }
    total
}

/// perft's last ply after the capture `mv` of `pos`: counted from the child's pieces (as [`count_moves`]
/// does from the child position), which is built only when the generator has to count or, on the Frisian
/// board, when the replying side has a king (whose king-move run the capture may end).
#[inline(always)]
fn count_capture_reply<G: Geometry>(
    pos: &Position,
    leaf: &movegen::LeafRules,
    mv: &Move,
    count: Count,
    list: &mut Vec<Move>,
) -> u64 {
    let from = <G::B as Bits>::bit(u32::from(mv.from));
    let to = <G::B as Bits>::bit(u32::from(mv.to));
    let captured = mv.captured_bb::<G::B>();
    let (own, opp) = pos.own_opp::<G::B>();
    let kings0 = pos.kings_bb::<G::B>();
    // The mover's pieces and the replying side's, after the capture.
    let mover = (own & !from) | to;
    let replier = opp & !captured;
    let mut kings = kings0 & !(from | captured);
    if !(kings0 & from).is_zero() || mv.promotes() {
        kings |= to;
    }
    debug_assert!(!G::FIRST_KING);
    if G::KING_MOVE_LIMIT && !(replier & kings).is_zero() {
        return count_moves::<G>(&pos.play_in::<G>(mv), list, count);
    }
    match movegen::bulk_count_bits::<G>(
        leaf,
        !pos.side,
        replier,
        mover,
        kings,
        <G::B as Bits>::ZERO,
    ) {
        LeafCount::Exact(n) => n,
        LeafCount::MenChains(go_on, starters) => movegen::men_chains::<G>(
            !pos.side,
            go_on,
            starters,
            replier,
            mover,
            kings,
            count.unique(),
            list,
        ),
        LeafCount::Generator => count_by_generator::<G>(&pos.play_in::<G>(mv), list, count),
    }
}

fn has_capture_dispatch<G: Geometry>(pos: &Position) -> bool {
    !pos.is_over_by_first_king() && movegen::has_capture::<G>(pos)
}

fn count_quiet_dispatch<G: Geometry>(pos: &Position) -> u64 {
    if pos.is_over_by_first_king() {
        return 0;
    }
    movegen::count_quiet::<G>(pos)
}

impl Position {
    /// The start position of a rule set.
    pub fn start(rules: impl Into<RuleSet>) -> Position {
        let rules = rules.into();
        let fen: Fen = rules
            .variant()
            .start_fen()
            .parse()
            .expect("start FENs are valid");
        Position::from_parsed_fen(&fen, rules).expect("start FENs are valid")
    }

    /// Parses and validates a FEN for a rule set.
    pub fn from_fen(rules: impl Into<RuleSet>, fen: &str) -> Result<Position, PositionError> {
        let parsed: Fen = fen.parse()?;
        Position::from_parsed_fen(&parsed, rules.into())
    }

    /// Validates a parsed FEN against the board of a rule set.
    pub fn from_parsed_fen(fen: &Fen, rules: RuleSet) -> Result<Position, PositionError> {
        let variant = rules.variant();
        let board = rules.rules().board.board();
        let (mut white, mut black, mut kings) = (0u128, 0u128, 0u128);
        for p in &fen.pieces {
            let sq = resolve_square(board, p.square, variant)?;
            let m = sq.mask();
            if (white | black) & m != 0 {
                return Err(PositionError::Duplicate(p.square.to_string()));
            }
            if !p.king {
                check_men(board, variant, p.color, m, |_| p.square.to_string())?;
            }
            match p.color {
                Color::White => white |= m,
                Color::Black => black |= m,
            }
            if p.king {
                kings |= m;
            }
        }
        let mut pos = Position::with_pieces(rules, fen.side, white, black, kings)?;
        if let Some(runs) = &fen.king_moves {
            for (i, color) in [Color::White, Color::Black].into_iter().enumerate() {
                pos.runs[i] = pos.check_run(color, runs[i].0, runs[i].1, board)?;
            }
        }
        Ok(pos)
    }

    /// A position from its pieces as sets of the board's bits (as [`Position::pieces`] and
    /// [`Position::kings`] give them), validated as [`Position::from_fen`] validates a FEN's pieces: every
    /// bit a square of the board, no square in two sets, no man where it cannot stand, no more pieces than
    /// a side starts with, the first-king rule. No king has made non-capturing moves yet (Frisian's count).
    /// Errors name squares in the variant's notation. For callers that hold bitboards (the endgame table
    /// generator), without a FEN's text or piece list.
    pub fn from_bitboards(
        rules: impl Into<RuleSet>,
        side: Color,
        white_men: Bitboard,
        white_kings: Bitboard,
        black_men: Bitboard,
        black_kings: Bitboard,
    ) -> Result<Position, PositionError> {
        let rules = rules.into();
        let variant = rules.variant();
        let board = rules.rules().board.board();
        let name = |m: u128| {
            crate::notation::square_name(board, rules.rules().notation, Square::from_mask(m))
        };
        let sets = [white_men.0, white_kings.0, black_men.0, black_kings.0];
        let mut seen = 0u128;
        for set in sets {
            let off = set & !board.mask;
            if off != 0 {
                return Err(PositionError::NoSuchSquare(
                    format!("bit {}", off.trailing_zeros()),
                    variant,
                ));
            }
            if set & seen != 0 {
                return Err(PositionError::Duplicate(name(set & seen)));
            }
            seen |= set;
        }
        check_men(board, variant, Color::White, white_men.0, name)?;
        check_men(board, variant, Color::Black, black_men.0, name)?;
        Position::with_pieces(
            rules,
            side,
            white_men.0 | white_kings.0,
            black_men.0 | black_kings.0,
            white_kings.0 | black_kings.0,
        )
    }

    /// The position of pieces already placed on the board (distinct squares, men where men may stand),
    /// checked for what concerns the whole position: the first-king rule and the number of pieces.
    fn with_pieces(
        rules: RuleSet,
        side: Color,
        white: u128,
        black: u128,
        kings: u128,
    ) -> Result<Position, PositionError> {
        let mut pos = Position {
            white: 0,
            black: 0,
            kings: 0,
            hi: [0; 3],
            side,
            rules,
            runs: [0; 2],
        };
        pos.set_bb::<u128>(white, black, kings);
        if rules.rules().goal == Goal::FirstKing {
            // §8.5: the game ends with the first king, so the side to move has none and the side that
            // just moved at most the one it crowned.
            let (own, opp) = pos.own_opp::<u128>();
            let (own_kings, opp_kings) = ((own & kings).count_ones(), (opp & kings).count_ones());
            if own_kings > 0 || opp_kings > 1 {
                return Err(PositionError::KingsAfterBreakthrough {
                    side_to_move: own_kings,
                    other_side: opp_kings,
                });
            }
        }
        let max = u32::from(rules.rules().pieces_per_side);
        for color in [Color::White, Color::Black] {
            let count = pos.pieces(color).count();
            if count > max {
                return Err(PositionError::TooManyPieces {
                    color: color.name(),
                    count,
                    max,
                    variant: rules.variant(),
                });
            }
        }
        Ok(pos)
    }

    /// Validates one side's king-move count from a FEN (docs/rules.md §8.6) and encodes it.
    fn check_run(
        &self,
        color: Color,
        count: u8,
        square: Option<SquareRef>,
        board: &Board,
    ) -> Result<u8, PositionError> {
        let bad = |why: String| PositionError::BadKingMoves {
            color: color.name(),
            why,
        };
        if count == 0 {
            return Ok(0);
        }
        let limit = match self.rules.rules().king_move_limit {
            Some(l) => l,
            None => {
                return Err(bad(format!(
                    "only frisian limits a king's moves, not {}",
                    self.variant()
                )));
            }
        };
        if count > limit {
            return Err(bad(format!("{count} moves in a row, the limit is {limit}")));
        }
        let sq = square.ok_or_else(|| bad(format!("{count} moves but no square")))?;
        let sq = resolve_square(board, sq, self.variant())?;
        let own = self.pieces(color).0;
        if own & self.kings().0 & sq.mask() == 0 {
            return Err(bad(format!(
                "no {} king on {}",
                color.name(),
                board.number(sq)
            )));
        }
        // Without men the rule does not apply (§11.5): nothing to remember.
        if own & !self.kings().0 == 0 {
            return Ok(0);
        }
        Ok((sq.0 << 2) | count)
    }

    /// Frisian: the king of `color` that made non-capturing moves in a row, and how many (docs/rules.md
    /// §11.5); `None` when that side's last move was no such king move (and always in other variants).
    pub fn king_run(&self, color: Color) -> Option<(Square, u8)> {
        let r = self.runs[usize::from(color == Color::Black)];
        (r != 0).then_some((Square(r >> 2), r & 3))
    }

    /// The king of the side to move that may not make a non-capturing move now (docs/rules.md §11.5), as a
    /// bit; 0 when none.
    #[inline]
    pub(crate) fn blocked_king(&self) -> u64 {
        self.blocked_king_of(self.side)
    }

    /// [`Position::blocked_king`] for either side.
    #[inline]
    pub(crate) fn blocked_king_of(&self, color: Color) -> u64 {
        let r = self.runs[usize::from(color == Color::Black)];
        let limit = match self.rules.rules().king_move_limit {
            Some(l) => l,
            None => return 0,
        };
        let own = match color {
            Color::White => self.white,
            Color::Black => self.black,
        };
        if r & 3 >= limit && own & !self.kings != 0 {
            1u64 << (r >> 2)
        } else {
            0
        }
    }

    pub fn rule_set(&self) -> RuleSet {
        self.rules
    }

    /// Breakthrough: the side that just moved has crowned a king, so the game is over and the side to
    /// move has no legal move (docs/rules.md §9.3).
    #[inline(always)]
    pub fn is_over_by_first_king(&self) -> bool {
        let (_, opp) = self.own_opp::<u64>();
        // Breakthrough is played on the 10x10 board: the low word holds every square.
        opp & self.kings != 0 && self.rules.rules().goal == Goal::FirstKing
    }
    pub fn variant(&self) -> Variant {
        self.rules.variant()
    }
    pub fn board(&self) -> &'static Board {
        self.rules.rules().board.board()
    }
    pub fn side_to_move(&self) -> Color {
        self.side
    }
    /// The pieces of one colour.
    #[inline]
    pub fn pieces(&self, color: Color) -> Bitboard {
        Bitboard(match color {
            Color::White => self.white_bb::<u128>(),
            Color::Black => self.black_bb::<u128>(),
        })
    }
    /// All kings of both colours.
    #[inline]
    pub fn kings(&self) -> Bitboard {
        Bitboard(self.kings_bb::<u128>())
    }
    /// The piece on a square, if any.
    pub fn piece_at(&self, sq: Square) -> Option<Piece> {
        let m = sq.mask();
        let color = if self.pieces(Color::White).0 & m != 0 {
            Color::White
        } else if self.pieces(Color::Black).0 & m != 0 {
            Color::Black
        } else {
            return None;
        };
        let role = if self.kings().0 & m != 0 {
            Role::King
        } else {
            Role::Man
        };
        Some(Piece { color, role })
    }

    /// The pieces in a board word: `u64` reads bits 0-63 only (every board but 12x12), `u128` all.
    #[inline(always)]
    pub(crate) fn white_bb<B: Bits>(&self) -> B {
        B::join(self.white, self.hi[0])
    }
    #[inline(always)]
    pub(crate) fn black_bb<B: Bits>(&self) -> B {
        B::join(self.black, self.hi[1])
    }
    #[inline(always)]
    pub(crate) fn kings_bb<B: Bits>(&self) -> B {
        B::join(self.kings, self.hi[2])
    }
    #[inline(always)]
    pub(crate) fn own_opp<B: Bits>(&self) -> (B, B) {
        match self.side {
            Color::White => (self.white_bb(), self.black_bb()),
            Color::Black => (self.black_bb(), self.white_bb()),
        }
    }
    /// Stores the pieces from a board word (the high parts only for a wide word).
    #[inline(always)]
    fn set_bb<B: Bits>(&mut self, white: B, black: B, kings: B) {
        self.white = white.lo();
        self.black = black.lo();
        self.kings = kings.lo();
        if B::WIDE {
            self.hi = [white.hi(), black.hi(), kings.hi()];
        }
    }

    /// The legal moves (capture orders merged, as the API and players see them).
    pub fn legal_moves(&self) -> Vec<Move> {
        let mut list = Vec::new();
        self.legal_moves_into(&mut list, Count::Unique);
        list
    }

    /// The legal moves into a reusable list; `Count::AllOrders` lists a move once per capture order.
    pub fn legal_moves_into(&self, list: &mut Vec<Move>, count: Count) {
        dispatch!(self, gen_list, list, count);
    }

    /// Whether the side to move must (or, without mandatory capture, may) capture.
    pub fn has_capture(&self) -> bool {
        dispatch!(self, has_capture_dispatch)
    }

    /// Whether the side to move has any legal move (without building a move list: a bitboard count of
    /// the quiet moves when there is no capture). A side without one has lost.
    pub fn has_legal_move(&self) -> bool {
        self.has_capture() || self.count_quiet_moves() > 0
    }

    /// The number of quiet (non-capturing) moves the side to move has, counted on bitboards without a
    /// list; they are legal moves only when there is no capture (or captures are optional).
    pub fn count_quiet_moves(&self) -> u64 {
        dispatch!(self, count_quiet_dispatch)
    }

    /// Every legal move with every capture order and its path (several entries per `Move` when the same
    /// pieces can be taken in several orders).
    pub fn move_paths(&self) -> Vec<MovePath> {
        let mut sink = PathSink::new();
        dispatch!(self, gen_paths, &mut sink);
        sink.paths
            .into_iter()
            .map(|r| MovePath {
                mv: r.mv,
                path: r.path,
                captured: r.captured,
            })
            .collect()
    }

    /// One path (the first capture order found) of a legal move; `None` if the move is not legal.
    pub fn move_path(&self, mv: &Move) -> Option<MovePath> {
        self.move_paths().into_iter().find(|p| p.mv == *mv)
    }

    /// Whether the move is legal here.
    pub fn is_legal(&self, mv: &Move) -> bool {
        self.legal_moves().contains(mv)
    }

    /// Plays a legal move, or says it is illegal.
    pub fn play(&self, mv: &Move) -> Result<Position, PlayError> {
        if self.is_legal(mv) {
            Ok(self.play_unchecked(mv))
        } else {
            Err(PlayError(*mv))
        }
    }

    /// Plays a move known to be legal (generated for this position). Fast path for search and perft:
    /// playing anything else gives a meaningless (but memory-safe) position.
    #[inline]
    pub fn play_unchecked(&self, mv: &Move) -> Position {
        if self.rules.variant() == Variant::Canadian {
            return self.play_pieces::<u128>(mv);
        }
        let mut next = self.play_pieces::<u64>(mv);
        if self.rules.variant().is_frisian() {
            next.update_runs(self.side, mv);
        }
        next
    }

    /// [`Position::play_unchecked`] for a generator that knows its geometry: the Frisian king-move count
    /// is kept only where the rule applies, decided at compile time (perft's hot path).
    #[inline(always)]
    pub(crate) fn play_in<G: Geometry>(&self, mv: &Move) -> Position {
        let mut next = self.play_pieces::<G::B>(mv);
        // A man's move changes no run when no run is counting (most moves of a game).
        if G::KING_MOVE_LIMIT && (mv.is_king_move() || self.runs != [0; 2]) {
            next.update_runs(self.side, mv);
        }
        next
    }

    /// [`Position::play_in`] for a quiet move given as one-bit sets (perft plays them as they are found).
    #[inline(always)]
    pub(crate) fn play_quiet_in<G: Geometry>(
        &self,
        from: G::B,
        to: G::B,
        king: bool,
        promotes: bool,
    ) -> Position {
        let ft = from | to;
        let (mut white, mut black, mut kings) = (
            self.white_bb::<G::B>(),
            self.black_bb::<G::B>(),
            self.kings_bb::<G::B>(),
        );
        match self.side {
            Color::White => white = white ^ ft,
            Color::Black => black = black ^ ft,
        }
        if king {
            kings = kings ^ ft;
        } else if promotes {
            kings |= to;
        }
        let mut next = *self;
        next.set_bb::<G::B>(white, black, kings);
        next.side = !self.side;
        // As in `play_in`: the move is built only for the Frisian king-move count, when it changes one.
        if G::KING_MOVE_LIMIT && (king || self.runs != [0; 2]) {
            let mv = Move::new(from, to, <G::B as Bits>::ZERO, 0, king, promotes);
            next.update_runs(self.side, &mv);
        }
        next
    }

    /// The pieces after a move: the mover's piece, the captured ones, a crowning, the side to move.
    #[inline(always)]
    fn play_pieces<B: Bits>(&self, mv: &Move) -> Position {
        let from = B::bit(u32::from(mv.from));
        let to = B::bit(u32::from(mv.to));
        let captured = mv.captured_bb::<B>();
        let mut next = *self;
        let (mut white, mut black, kings0) = (
            self.white_bb::<B>(),
            self.black_bb::<B>(),
            self.kings_bb::<B>(),
        );
        let (own, opp) = match self.side {
            Color::White => (&mut white, &mut black),
            Color::Black => (&mut black, &mut white),
        };
        *own = (*own & !from) | to;
        *opp &= !captured;
        let was_king = !(kings0 & from).is_zero();
        let mut kings = kings0 & !(from | captured);
        if was_king || mv.promotes() {
            kings |= to;
        }
        next.set_bb::<B>(white, black, kings);
        next.side = !self.side;
        next
    }

    /// docs/rules.md §11.5: after `mover` played `mv`, its king-move run grows (the same king moved again
    /// without capturing) or starts (another king) or ends (a man moved, or a capture); the other side's
    /// run is forgotten when its king was taken. A side without men has no run.
    #[cold]
    fn update_runs(&mut self, mover: Color, mv: &Move) {
        let (me, them) = match mover {
            Color::White => (0, 1),
            Color::Black => (1, 0),
        };
        let men = |bb: u64| bb & !self.kings;
        let (own, opp) = match mover {
            Color::White => (self.white, self.black),
            Color::Black => (self.black, self.white),
        };
        self.runs[me] = if mv.is_king_move() && !mv.is_capture() && men(own) != 0 {
            let r = self.runs[me];
            let count = if r != 0 && r >> 2 == mv.from {
                (r & 3) + 1
            } else {
                1
            };
            (mv.to << 2) | count.min(3)
        } else {
            0
        };
        let r = self.runs[them];
        if r != 0 && (mv.captured & (1u64 << (r >> 2)) != 0 || men(opp) == 0) {
            self.runs[them] = 0;
        }
    }

    /// The same position with the other side to move (for analysis; not a legal move).
    pub fn with_side_to_move(&self, side: Color) -> Position {
        Position { side, ..*self }
    }

    /// A 64-bit hash of pieces, side to move and Frisian king-move runs (not of the rules), for repetition
    /// detection and tables.
    /// Computed from the bitboards by a strong mixer, so it needs no incremental upkeep.
    pub fn hash(&self) -> u64 {
        let side = match self.side {
            Color::White => 0x9E37_79B9_7F4A_7C15,
            Color::Black => 0xC2B2_AE3D_27D4_EB4F,
        };
        let mut h = mix(self.white ^ side);
        h = mix(h ^ self.black.rotate_left(17));
        h = mix(h ^ self.kings.rotate_left(41));
        if self.hi != [0; 3] {
            // The 12x12 board's squares above bit 63.
            let [w, b, k] = self.hi.map(u64::from);
            h = mix(h ^ (w | b << 16 | k << 32));
        }
        if self.runs != [0; 2] {
            // Frisian king-move runs change the legal moves (docs/rules.md §11.5).
            h = mix(h ^ u64::from(u16::from_le_bytes(self.runs)));
        }
        h
    }

    /// perft: the number of leaf positions of the legal move tree `depth` plies deep.
    pub fn perft(&self, depth: u32, count: Count) -> u64 {
        if depth == 0 {
            return 1;
        }
        let mut lists: Vec<Vec<Move>> = (0..depth).map(|_| Vec::with_capacity(64)).collect();
        // The rules are the same in the whole tree: read once.
        let leaf = movegen::LeafRules::new(self.rules);
        dispatch!(self, perft_rec_at, &leaf, depth, count, &mut lists)
    }

    /// perft split by the first move: each legal move with its subtree count.
    pub fn perft_divide(&self, depth: u32, count: Count) -> Vec<(Move, u64)> {
        let mut list = Vec::new();
        self.legal_moves_into(&mut list, count);
        list.into_iter()
            .map(|mv| {
                let n = if depth <= 1 {
                    1
                } else {
                    self.play_unchecked(&mv).perft(depth - 1, count)
                };
                (mv, n)
            })
            .collect()
    }

    /// Number of pieces of each role for a colour: (men, kings).
    pub fn material(&self, color: Color) -> (u32, u32) {
        let (own, own_hi) = match color {
            Color::White => (self.white, self.hi[0]),
            Color::Black => (self.black, self.hi[1]),
        };
        let kings_hi = self.hi[2];
        (
            (own & !self.kings).count_ones() + (own_hi & !kings_hi).count_ones(),
            (own & self.kings).count_ones() + (own_hi & kings_hi).count_ones(),
        )
    }
}

#[inline(always)]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Maps a FEN or move-text square to a board square.
/// The men of `color` on `men` stand where a man can (docs/rules.md §8.3): not on its promotion row, and
/// on the Turkish board not on its own first rank, which a man never returns to. `name` names the square
/// of an offending man (its one bit).
fn check_men(
    board: &Board,
    variant: Variant,
    color: Color,
    men: u128,
    name: impl Fn(u128) -> String,
) -> Result<(), PositionError> {
    let lowest = |m: u128| m & m.wrapping_neg();
    let (promo_row, back_rank) = match color {
        Color::White => (board.top_row, board.bottom_row),
        Color::Black => (board.bottom_row, board.top_row),
    };
    if men & promo_row != 0 {
        return Err(PositionError::ManOnPromotionRow {
            color: color.name(),
            square: name(lowest(men & promo_row)),
        });
    }
    if board.kind == BoardKind::Turkish && men & back_rank != 0 {
        return Err(PositionError::ManOnOwnBackRank {
            color: color.name(),
            square: name(lowest(men & back_rank)),
            variant,
        });
    }
    Ok(())
}

pub(crate) fn resolve_square(
    board: &Board,
    sq: SquareRef,
    variant: Variant,
) -> Result<Square, PositionError> {
    match sq {
        SquareRef::Number(n) => board
            .square(n)
            .ok_or_else(|| PositionError::NoSuchSquare(n.to_string(), variant)),
        SquareRef::Algebraic { file, rank } => {
            if file >= board.size || rank >= board.size {
                return Err(PositionError::NoSuchSquare(sq.to_string(), variant));
            }
            board
                .square_at(file, rank)
                .ok_or_else(|| PositionError::LightSquare(sq.to_string(), variant))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules a geometry fixes at compile time are those of every variant played on it.
    #[test]
    fn geometry_rules_match_the_tables() {
        fn check<G: Geometry>(pos: &Position) {
            let r = pos.rule_set().rules();
            let v = pos.variant();
            let fixed = |c: Option<bool>, actual: bool| c.is_none_or(|c| c == actual);
            let board = r.board.board();
            assert_eq!(G::BOARD.n_squares, board.n_squares, "{v}: board");
            assert_eq!(G::BOARD.size, board.size, "{v}: board");
            assert!(fixed(G::FLYING, r.flying_kings), "{v}: flying kings");
            assert!(
                fixed(G::MEN_CAPTURE_BACKWARD, r.men_capture_backward),
                "{v}: men capture backward"
            );
            assert!(
                fixed(G::MEN_CAPTURE_KINGS, r.men_capture_kings),
                "{v}: men capture kings"
            );
            assert!(
                fixed(G::STRIKE, r.removal == crate::variant::Removal::Strike),
                "{v}: removal"
            );
            assert!(
                G::PRECEDENCE.is_none_or(|p| p == r.precedence),
                "{v}: precedence"
            );
            assert!(
                G::FIRST_KING || r.goal != Goal::FirstKing,
                "{v}: first king"
            );
        }
        for v in Variant::ALL {
            let pos = Position::start(v);
            dispatch!(&pos, check);
        }
    }

    /// The 12x12 board's high parts cost the 64-bit boards no move size: a move stays 16 bytes (the move
    /// lists of perft and the search), and a position 48 bytes (40 before the 12x12 board).
    #[test]
    fn moves_and_positions_stay_small() {
        assert_eq!(std::mem::size_of::<Move>(), 16);
        assert_eq!(std::mem::size_of::<Position>(), 48);
    }
}
