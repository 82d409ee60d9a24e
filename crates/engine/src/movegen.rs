//! Legal move generation, one generic generator for every geometry and rule set.
//!
//! The generator is monomorphised over the board geometry ([`Geometry`]: four directions as constant
//! shifts, on the geometry's word, `u64` or the 12x12 board's `u128`) and over a [`Sink`] that receives the
//! moves; rule differences (flying or short kings, backward
//! captures, promotion timing, removal timing, precedence) are parameters read where captures are built.
//!
//! Captures are found by a depth-first search per piece. Each finished chain is handed to the sink with a
//! precedence key (the Italian list, Spanish kings, the maximum rule, Czech king-first are all "keep the
//! chains with the largest key"), so the sink keeps only the best chains as it goes.

use crate::board::{Bits, Geometry, Square, step};
use crate::position::{Move, Position};
use crate::variant::{Color, Precedence, Promotion, Removal};

/// Receives generated moves (`B`: the board's word).
pub(crate) trait Sink<B: Bits> {
    /// A capture chain went one jump deeper (landing square, captured piece), for sinks that record paths.
    #[inline(always)]
    fn jump(&mut self, _land: B, _over: B) {}
    /// The last jump is taken back.
    #[inline(always)]
    fn unjump(&mut self) {}
    /// A complete capture chain with its precedence key (larger is preferred).
    fn capture(&mut self, mv: Move, key: u32);
    /// Whether any capture was kept.
    fn has_captures(&self) -> bool;
    /// A quiet move.
    fn quiet(&mut self, mv: Move);
}

/// Per-position constants of the search.
pub(crate) struct Gen<'s, G: Geometry, S: Sink<G::B>> {
    sink: &'s mut S,
    /// Empty squares (the moving piece's origin is made empty when a chain starts).
    empty: G::B,
    opp: G::B,
    opp_kings: G::B,
    /// Opponent pieces a man may jump.
    men_jumpable: G::B,
    /// The mover's promotion row.
    promo_row: G::B,
    man_capture_dirs: u8,
    flying: bool,
    strike: bool,
    promotion: Promotion,
    precedence: Precedence,
    /// Count each landing square of a straight continuation as its own path (the `AllPaths` perft
    /// convention of some tables) instead of merging them.
    split_landings: bool,
    /// The killer rule (docs/rules.md §9.4).
    killer: bool,
    _g: std::marker::PhantomData<G>,
}

/// Direction bit sets (bit d = direction d; geometry order: 0 up-left/up, 1 up-right/right, 2 down-right/down,
/// 3 down-left/left).
pub(crate) fn man_move_dirs(turkish: bool, side: Color) -> u8 {
    match (turkish, side) {
        (false, Color::White) => 0b0011,
        (false, Color::Black) => 0b1100,
        (true, Color::White) => 0b1011,
        (true, Color::Black) => 0b1110,
    }
}

pub(crate) fn man_capture_dirs(pos: &Position) -> u8 {
    let rules = pos.rule_set().rules();
    if rules.men_capture_backward {
        0xFF
    } else {
        man_move_dirs(rules.board == crate::BoardKind::Turkish, pos.side_to_move())
    }
}

impl<'s, G: Geometry, S: Sink<G::B>> Gen<'s, G, S> {
    pub(crate) fn new(pos: &Position, sink: &'s mut S) -> Self {
        let rs = pos.rule_set();
        let rules = rs.rules();
        let (_own, opp) = pos.own_opp::<G::B>();
        let opp_kings = opp & pos.kings_bb::<G::B>();
        Gen {
            sink,
            empty: G::MASK & !(pos.white_bb::<G::B>() | pos.black_bb::<G::B>()),
            opp,
            opp_kings,
            men_jumpable: if rules.men_capture_kings {
                opp
            } else {
                opp & !opp_kings
            },
            promo_row: match pos.side_to_move() {
                Color::White => G::TOP_ROW,
                Color::Black => G::BOTTOM_ROW,
            },
            man_capture_dirs: man_capture_dirs(pos),
            flying: rules.flying_kings,
            strike: rules.removal == Removal::Strike,
            promotion: rs.promotion(),
            precedence: rules.precedence,
            split_landings: false,
            killer: rules.killer,
            _g: std::marker::PhantomData,
        }
    }

    /// Counts straight-on continuations once per landing square (see [`crate::Count::AllPaths`]).
    pub(crate) fn split_landings(mut self, split: bool) -> Self {
        self.split_landings = split;
        self
    }

    /// Generates every legal move of `pos` into the sink.
    pub(crate) fn run(mut self, pos: &Position) {
        let (own, _) = pos.own_opp::<G::B>();
        let own_kings = own & pos.kings_bb::<G::B>();
        let own_men = own & !own_kings;
        // Men that have a first jump, per direction.
        let zero = <G::B as Bits>::ZERO;
        let mut first = [zero; 4];
        let mut starters = zero;
        for d in 0..G::N_DIRS {
            if self.man_capture_dirs & (1 << d) != 0 {
                let r = d ^ 2;
                let f = own_men & step::<G>(step::<G>(self.empty, r) & self.men_jumpable, r);
                starters |= f;
                if G::N_DIRS == 4 {
                    first[d & 3] = f;
                }
            }
        }
        let empty0 = self.empty;
        let mut m = starters;
        while !m.is_zero() {
            let from = m.lowest();
            m = m.clear_lowest();
            self.empty = empty0 | from;
            if G::N_DIRS == 8 {
                self.man_jump(from, from, zero, 0, 0, 0);
            } else {
                // The first jump is known from the direction sets (the same moves, in the same order,
                // as `man_jump` would find them: directions in ascending order).
                for (d, f) in first.iter().enumerate() {
                    if !(*f & from).is_zero() {
                        let over = step::<G>(from, d);
                        let land = step::<G>(over, d);
                        self.man_jump_over(from, zero, 0, 0, 0, d, over, land);
                    }
                }
            }
        }
        let mut k = own_kings;
        while !k.is_zero() {
            let from = k.lowest();
            k = k.clear_lowest();
            self.empty = empty0 | from;
            self.king_jump(from, from, zero, 0, 0, 0, G::ALL_DIRS, false, true);
        }
        self.empty = empty0;
        if self.sink.has_captures() && pos.rule_set().mandatory_capture() {
            return;
        }
        self.quiet_moves(pos, own_men, own_kings);
    }

    fn quiet_moves(&mut self, pos: &Position, own_men: G::B, own_kings: G::B) {
        let dirs = man_move_dirs(
            G::BOARD.kind == crate::BoardKind::Turkish,
            pos.side_to_move(),
        );
        for d in 0..4 {
            if dirs & (1 << d) == 0 {
                continue;
            }
            let mut t = step::<G>(own_men, d) & self.empty;
            while !t.is_zero() {
                let to = t.lowest();
                t = t.clear_lowest();
                let from = step::<G>(to, d ^ 2);
                let promotes = !(to & self.promo_row).is_zero();
                self.sink.quiet(Move::new(
                    from,
                    to,
                    <G::B as Bits>::ZERO,
                    0,
                    false,
                    promotes,
                ));
            }
        }
        let mut k = own_kings & !blocked_king::<G>(pos);
        while !k.is_zero() {
            let from = k.lowest();
            k = k.clear_lowest();
            for d in 0..4 {
                let mut to = step::<G>(from, d) & self.empty;
                while !to.is_zero() {
                    self.sink
                        .quiet(Move::new(from, to, <G::B as Bits>::ZERO, 0, true, false));
                    if !self.flying {
                        break;
                    }
                    to = step::<G>(to, d) & self.empty;
                }
            }
        }
    }

    #[inline(always)]
    fn empty_now(&self, captured: G::B) -> G::B {
        if self.strike {
            self.empty
        } else {
            self.empty | captured
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn emit(
        &mut self,
        from: G::B,
        to: G::B,
        captured: G::B,
        n: u32,
        n_kings: u32,
        king_order: u32,
        promoted: bool,
        mover_king: bool,
    ) {
        let key = if G::N_DIRS == 8 {
            // The Frisian board (only the Frisian rules use it), docs/rules.md §11.3: a man 100, a king
            // 199; at equal value a king's capture.
            ((100 * n + 99 * n_kings) << 1) | u32::from(mover_king)
        } else {
            match self.precedence {
                Precedence::Free | Precedence::Frisian => 0,
                Precedence::MostPieces => n,
                Precedence::MostPiecesThenKings => (n << 8) | n_kings,
                Precedence::Italian => {
                    (n << 24) | (u32::from(mover_king) << 23) | (n_kings << 16) | king_order
                }
                Precedence::KingFirst => u32::from(mover_king),
            }
        };
        self.sink.capture(
            Move::new(from, to, captured, n as u8, mover_king, promoted),
            key,
        );
    }

    /// Bit for the Italian "king met earliest" rule: capture number `n` (0-based) sets bit 15 - n.
    #[inline(always)]
    fn order_bit(n: u32) -> u32 {
        if n < 16 { 1 << (15 - n) } else { 0 }
    }

    fn man_jump(
        &mut self,
        from: G::B,
        cur: G::B,
        captured: G::B,
        n: u32,
        n_kings: u32,
        order: u32,
    ) {
        let empty = self.empty_now(captured);
        let jumpable = self.men_jumpable & !captured;
        let mut any = false;
        if G::N_DIRS == 8 {
            // Eight directions (Frisian): visit the jumpable neighbours, not the directions. Every step is
            // a constant shift in the bit layout, so the square beyond a neighbour `o` of `s` is
            // `2o - s`, valid where it is a neighbour of `o` too.
            let s = cur.trailing_zeros() as i32;
            let mut c = G::NEIGHBOURS[s as usize & 63] & jumpable;
            while !c.is_zero() {
                let over = c.lowest();
                c = c.clear_lowest();
                let o = over.trailing_zeros() as i32;
                let l = 2 * o - s;
                if !(0..64).contains(&l) {
                    continue;
                }
                let land = <G::B as Bits>::bit(l as u32) & G::NEIGHBOURS[o as usize & 63] & empty;
                if land.is_zero() {
                    continue;
                }
                let d = usize::from(G::DIR_OF_SHIFT[(o - s + 16) as usize & 31]);
                if self.man_capture_dirs & (1 << d) == 0 {
                    continue;
                }
                any = true;
                self.man_jump_over(from, captured, n, n_kings, order, d, over, land);
            }
        } else {
            // (Reached through `man_go_on`, which has seen that the chain goes on.)
            for d in 0..G::N_DIRS {
                if self.man_capture_dirs & (1 << d) == 0 {
                    continue;
                }
                let over = step::<G>(cur, d) & jumpable;
                if over.is_zero() {
                    continue;
                }
                let land = step::<G>(over, d) & empty;
                if land.is_zero() {
                    continue;
                }
                any = true;
                self.man_jump_over(from, captured, n, n_kings, order, d, over, land);
            }
        }
        if !any && n > 0 {
            let promoted = !(cur & self.promo_row).is_zero();
            self.emit(from, cur, captured, n, n_kings, order, promoted, false);
        }
    }

    /// One jump of a man in direction `d` over `over` to `land`, and the rest of its chain.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn man_jump_over(
        &mut self,
        from: G::B,
        captured: G::B,
        n: u32,
        n_kings: u32,
        order: u32,
        d: usize,
        over: G::B,
        land: G::B,
    ) {
        let is_king = !(over & self.opp_kings).is_zero();
        let n2 = n + 1;
        let nk2 = n_kings + u32::from(is_king);
        let order2 = if is_king {
            order | Self::order_bit(n)
        } else {
            order
        };
        self.sink.jump(land, over);
        if !(land & self.promo_row).is_zero() {
            match self.promotion {
                Promotion::EndsMove => {
                    self.emit(from, land, captured | over, n2, nk2, order2, true, false)
                }
                Promotion::Continue => self.king_jump(
                    from,
                    land,
                    captured | over,
                    n2,
                    nk2,
                    order2,
                    G::ALL_DIRS & !(1 << (d ^ 2)),
                    true,
                    false,
                ),
                Promotion::AtEnd => self.man_go_on(from, land, captured | over, n2, nk2, order2),
            }
        } else {
            self.man_go_on(from, land, captured | over, n2, nk2, order2);
        }
        self.sink.unjump();
    }

    /// A man's chain after a jump: it ends here (most chains do; seen with one test of every direction,
    /// without a call) or goes on ([`Gen::man_jump`]).
    #[inline(always)]
    fn man_go_on(
        &mut self,
        from: G::B,
        cur: G::B,
        captured: G::B,
        n: u32,
        n_kings: u32,
        order: u32,
    ) {
        if G::N_DIRS == 4 {
            let empty = self.empty_now(captured);
            let jumpable = self.men_jumpable & !captured;
            let mut ahead = <G::B as Bits>::ZERO;
            for d in 0..4 {
                if self.man_capture_dirs & (1 << d) != 0 {
                    ahead |= step::<G>(step::<G>(cur, d) & jumpable, d) & empty;
                }
            }
            if ahead.is_zero() {
                let promoted = !(cur & self.promo_row).is_zero();
                self.emit(from, cur, captured, n, n_kings, order, promoted, false);
                return;
            }
        }
        self.man_jump(from, cur, captured, n, n_kings, order);
    }

    /// Whether a king standing on `at` (after the jumps in `captured`) can jump in one of `dirs`.
    fn king_can_jump(&self, at: G::B, captured: G::B, dirs: u8) -> bool {
        let empty = self.empty_now(captured);
        let jumpable = self.opp & !captured;
        for d in 0..G::N_DIRS {
            if dirs & (1 << d) == 0 {
                continue;
            }
            let mut sq = step::<G>(at, d);
            if self.flying {
                while !(sq & empty).is_zero() {
                    sq = step::<G>(sq, d);
                }
            }
            if !(sq & jumpable).is_zero() && !(step::<G>(sq, d) & empty).is_zero() {
                return true;
            }
        }
        false
    }

    /// Capture search for a king on `cur`, jumping in the directions of `dirs`. A king never turns back
    /// on its line (under the strike the captured piece blocks it anyway; under immediate removal it is
    /// the Turkish 180-degree rule). `promoted` is set for a man crowned mid-chain.
    ///
    /// A flying king that can go on straight along its line does so once, from the first square beyond
    /// the captured piece: stopping on a later square of the same line and going on is the same capture
    /// order (passing over a square is not a landing).
    #[allow(clippy::too_many_arguments)]
    fn king_jump(
        &mut self,
        from: G::B,
        cur: G::B,
        captured: G::B,
        n: u32,
        n_kings: u32,
        order: u32,
        dirs: u8,
        promoted: bool,
        mover_king: bool,
    ) {
        let empty = self.empty_now(captured);
        let jumpable = self.opp & !captured;
        let mut any = false;
        for d in 0..G::N_DIRS {
            if dirs & (1 << d) == 0 {
                continue;
            }
            let mut sq = step::<G>(cur, d);
            if self.flying {
                while !(sq & empty).is_zero() {
                    sq = step::<G>(sq, d);
                }
            }
            let over = sq & jumpable;
            if over.is_zero() {
                continue;
            }
            let first_land = step::<G>(over, d) & empty;
            if first_land.is_zero() {
                continue;
            }
            any = true;
            let is_king = !(over & self.opp_kings).is_zero();
            let captured2 = captured | over;
            let n2 = n + 1;
            let nk2 = n_kings + u32::from(is_king);
            let order2 = if is_king {
                order | Self::order_bit(n)
            } else {
                order
            };
            let back = 1u8 << (d ^ 2);
            if !self.flying {
                self.sink.jump(first_land, over);
                self.king_jump(
                    from,
                    first_land,
                    captured2,
                    n2,
                    nk2,
                    order2,
                    G::ALL_DIRS & !back,
                    promoted,
                    mover_king,
                );
                self.sink.unjump();
                continue;
            }
            // Every empty square beyond the captured piece is a landing square. If the chain can go on
            // (straight on, or turning from some landing squares), it must; otherwise the king may stop
            // on any of them.
            let empty2 = self.empty_now(captured2);
            let mut landings = <G::B as Bits>::ZERO;
            let mut last = first_land;
            let mut l = first_land;
            while !l.is_zero() {
                landings |= l;
                last = l;
                l = step::<G>(l, d) & empty2;
            }
            let (straight, turns) = if self.split_landings {
                (false, G::ALL_DIRS & !back)
            } else {
                (
                    self.king_can_jump(last, captured2, 1 << d),
                    G::ALL_DIRS & !(back | (1 << d)),
                )
            };
            let mut turning = <G::B as Bits>::ZERO;
            let mut ls = landings;
            while !ls.is_zero() {
                let l = ls.lowest();
                ls = ls.clear_lowest();
                if self.king_can_jump(l, captured2, turns) {
                    turning |= l;
                }
            }
            if straight || !turning.is_zero() {
                if straight {
                    self.sink.jump(first_land, over);
                    self.king_jump(
                        from,
                        first_land,
                        captured2,
                        n2,
                        nk2,
                        order2,
                        1 << d,
                        promoted,
                        mover_king,
                    );
                    self.sink.unjump();
                }
                let mut ls = turning;
                while !ls.is_zero() {
                    let l = ls.lowest();
                    ls = ls.clear_lowest();
                    self.sink.jump(l, over);
                    self.king_jump(
                        from, l, captured2, n2, nk2, order2, turns, promoted, mover_king,
                    );
                    self.sink.unjump();
                }
            } else {
                // Killer rule: after taking a king as the last piece, the king stops directly behind it.
                let mut ls = if self.killer && is_king {
                    first_land
                } else {
                    landings
                };
                while !ls.is_zero() {
                    let l = ls.lowest();
                    ls = ls.clear_lowest();
                    self.sink.jump(l, over);
                    self.emit(from, l, captured2, n2, nk2, order2, promoted, mover_king);
                    self.sink.unjump();
                }
            }
        }
        if !any && n > 0 {
            self.emit(from, cur, captured, n, n_kings, order, promoted, mover_king);
        }
    }
}

/// Whether the side to move has any capture (fast bitboard test, no chains built).
pub(crate) fn has_capture<G: Geometry>(pos: &Position) -> bool {
    let rules = pos.rule_set().rules();
    let (own, opp) = pos.own_opp::<G::B>();
    let kings = pos.kings_bb::<G::B>();
    let empty = G::MASK & !(pos.white_bb::<G::B>() | pos.black_bb::<G::B>());
    has_capture_in::<G>(pos, rules, own, opp, kings, empty)
}

/// perft's last ply: the number of quiet moves when the side to move has no capture, `None` when it
/// has one ([`has_capture`] and [`count_quiet`] sharing their sets).
#[inline(always)]
pub(crate) fn quiet_count_without_capture<G: Geometry>(pos: &Position) -> Option<u64> {
    let rules = pos.rule_set().rules();
    let (own, opp) = pos.own_opp::<G::B>();
    let kings = pos.kings_bb::<G::B>();
    let empty = G::MASK & !(pos.white_bb::<G::B>() | pos.black_bb::<G::B>());
    if has_capture_in::<G>(pos, rules, own, opp, kings, empty) {
        return None;
    }
    Some(count_quiet_in::<G>(pos, rules, own, kings, empty))
}

#[inline(always)]
fn has_capture_in<G: Geometry>(
    pos: &Position,
    rules: &crate::variant::Rules,
    own: G::B,
    opp: G::B,
    kings: G::B,
    empty: G::B,
) -> bool {
    let men_jumpable = if rules.men_capture_kings {
        opp
    } else {
        opp & !kings
    };
    let own_men = own & !kings;
    let dirs = if rules.men_capture_backward {
        0xFF
    } else {
        man_move_dirs(rules.board == crate::BoardKind::Turkish, pos.side_to_move())
    };
    for d in 0..G::N_DIRS {
        if dirs & (1 << d) != 0 {
            let r = d ^ 2;
            if !(own_men & step::<G>(step::<G>(empty, r) & men_jumpable, r)).is_zero() {
                return true;
            }
        }
    }
    let own_kings = own & kings;
    if own_kings.is_zero() {
        return false;
    }
    for d in 0..G::N_DIRS {
        let mut front = step::<G>(own_kings, d);
        let mut blockers = front & !empty;
        if rules.flying_kings {
            front &= empty;
            while !front.is_zero() {
                front = step::<G>(front, d);
                blockers |= front & !empty;
                front &= empty;
            }
        }
        if !(step::<G>(blockers & opp, d) & empty).is_zero() {
            return true;
        }
    }
    false
}

/// The king of the side to move that may make no more non-capturing moves (docs/rules.md §11.5: it made
/// the limit of them in a row while its side has men), as a bit; 0 when none, and always 0 where the rule
/// does not apply (resolved at compile time).
#[inline(always)]
pub(crate) fn blocked_king<G: Geometry>(pos: &Position) -> G::B {
    if !G::KING_MOVE_LIMIT {
        return <G::B as Bits>::ZERO;
    }
    <G::B as Bits>::join(pos.blocked_king(), 0)
}

/// Number of quiet moves (used when there is no capture, or captures are optional).
pub(crate) fn count_quiet<G: Geometry>(pos: &Position) -> u64 {
    let rules = pos.rule_set().rules();
    let (own, _) = pos.own_opp::<G::B>();
    let kings = pos.kings_bb::<G::B>();
    let empty = G::MASK & !(pos.white_bb::<G::B>() | pos.black_bb::<G::B>());
    count_quiet_in::<G>(pos, rules, own, kings, empty)
}

#[inline(always)]
fn count_quiet_in<G: Geometry>(
    pos: &Position,
    rules: &crate::variant::Rules,
    own: G::B,
    kings: G::B,
    empty: G::B,
) -> u64 {
    let own_men = own & !kings;
    let dirs = man_move_dirs(
        G::BOARD.kind == crate::BoardKind::Turkish,
        pos.side_to_move(),
    );
    let mut n = 0u64;
    for d in 0..4 {
        if dirs & (1 << d) != 0 {
            n += u64::from((step::<G>(own_men, d) & empty).count_ones());
        }
    }
    let own_kings = own & kings & !blocked_king::<G>(pos);
    if !own_kings.is_zero() {
        for d in 0..4 {
            let mut front = step::<G>(own_kings, d) & empty;
            n += u64::from(front.count_ones());
            if rules.flying_kings {
                while !front.is_zero() {
                    front = step::<G>(front, d) & empty;
                    n += u64::from(front.count_ones());
                }
            }
        }
    }
    n
}

/// Collects moves into a list, keeping only the captures with the best precedence key and, in unique
/// mode, dropping chains that repeat another's start, end, captured set and promotion.
pub(crate) struct ListSink<'a> {
    pub(crate) list: &'a mut Vec<Move>,
    pub(crate) best: u32,
    pub(crate) n_captures: usize,
    pub(crate) unique: bool,
}

impl<'a> ListSink<'a> {
    pub(crate) fn new(list: &'a mut Vec<Move>, unique: bool) -> Self {
        list.clear();
        ListSink {
            list,
            best: 0,
            n_captures: 0,
            unique,
        }
    }
}

impl<B: Bits> Sink<B> for ListSink<'_> {
    #[inline]
    fn capture(&mut self, mv: Move, key: u32) {
        if self.n_captures > 0 {
            if key < self.best {
                return;
            }
            if key > self.best {
                self.list.clear();
                self.n_captures = 0;
            }
        }
        self.best = key;
        if self.unique && mv.n_captured() >= 2 && self.list.contains(&mv) {
            return;
        }
        self.list.push(mv);
        self.n_captures += 1;
    }
    fn has_captures(&self) -> bool {
        self.n_captures > 0
    }
    #[inline]
    fn quiet(&mut self, mv: Move) {
        self.list.push(mv);
    }
}

/// A capture chain with its path, as found by the search (one per capture order).
#[derive(Clone, Debug)]
pub(crate) struct RawPath {
    pub(crate) mv: Move,
    /// Landing squares, origin first.
    pub(crate) path: Vec<Square>,
    /// Captured pieces in order.
    pub(crate) captured: Vec<Square>,
}

/// Records every chain with its path (no deduplication), keeping the best precedence key.
pub(crate) struct PathSink {
    pub(crate) paths: Vec<RawPath>,
    best: u32,
    n_captures: usize,
    lands: Vec<Square>,
    overs: Vec<Square>,
}

impl PathSink {
    pub(crate) fn new() -> Self {
        PathSink {
            paths: Vec::new(),
            best: 0,
            n_captures: 0,
            lands: Vec::new(),
            overs: Vec::new(),
        }
    }
}

impl<B: Bits> Sink<B> for PathSink {
    fn jump(&mut self, land: B, over: B) {
        self.lands.push(Square::from_mask(land));
        self.overs.push(Square::from_mask(over));
    }
    fn unjump(&mut self) {
        self.lands.pop();
        self.overs.pop();
    }
    fn capture(&mut self, mv: Move, key: u32) {
        if self.n_captures > 0 {
            if key < self.best {
                return;
            }
            if key > self.best {
                self.paths.clear();
                self.n_captures = 0;
            }
        }
        self.best = key;
        let mut path = Vec::with_capacity(self.lands.len() + 1);
        path.push(mv.from());
        path.extend_from_slice(&self.lands);
        self.paths.push(RawPath {
            mv,
            path,
            captured: self.overs.clone(),
        });
        self.n_captures += 1;
    }
    fn has_captures(&self) -> bool {
        self.n_captures > 0
    }
    fn quiet(&mut self, mv: Move) {
        self.paths.push(RawPath {
            mv,
            path: vec![mv.from(), mv.to()],
            captured: Vec::new(),
        });
    }
}
