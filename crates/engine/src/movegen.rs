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

use crate::board::{
    Bits, Geometry, Square, count_sparse, each_dir, frisian_jumps, step, step_into,
};
use crate::position::{Move, Position};
use crate::variant::{Color, Precedence, Promotion, Removal, RuleSet, Rules};

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
    /// The quiet moves come next (there is no capture, or captures are optional).
    #[inline(always)]
    fn before_quiet(&mut self) {}
    /// A quiet move as the generator finds it (one-bit sets), for sinks that play it at once.
    #[inline(always)]
    fn quiet_step(&mut self, from: B, to: B, king: bool, promotes: bool) {
        self.quiet(Move::new(from, to, B::ZERO, 0, king, promotes));
    }
    /// The men's quiet steps in direction `d` onto the squares `to` (their origins one step back), for
    /// sinks that count some of them at once: returns those left to [`Sink::quiet_step`].
    #[inline(always)]
    fn quiet_men_steps(&mut self, to: B, _d: usize) -> B {
        to
    }
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

/// The directions a man of `side` captures in.
#[inline(always)]
pub(crate) fn man_capture_dirs<G: Geometry>(rules: &Rules, side: Color) -> u8 {
    if G::MEN_CAPTURE_BACKWARD.unwrap_or(rules.men_capture_backward) {
        0xFF
    } else {
        man_move_dirs(G::BOARD.kind == crate::BoardKind::Turkish, side)
    }
}

// The rules the generator reads: a constant where the geometry fixes it (`Geometry::FLYING` and the
// others, resolved at compile time), else the position's rule table.
#[inline(always)]
fn flying<G: Geometry>(rules: &Rules) -> bool {
    G::FLYING.unwrap_or(rules.flying_kings)
}
#[inline(always)]
fn men_capture_kings<G: Geometry>(rules: &Rules) -> bool {
    G::MEN_CAPTURE_KINGS.unwrap_or(rules.men_capture_kings)
}
#[inline(always)]
fn strike<G: Geometry>(rules: &Rules) -> bool {
    G::STRIKE.unwrap_or(rules.removal == Removal::Strike)
}
#[inline(always)]
fn precedence<G: Geometry>(rules: &Rules) -> Precedence {
    G::PRECEDENCE.unwrap_or(rules.precedence)
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
            men_jumpable: if men_capture_kings::<G>(rules) {
                opp
            } else {
                opp & !opp_kings
            },
            promo_row: match pos.side_to_move() {
                Color::White => G::TOP_ROW,
                Color::Black => G::BOTTOM_ROW,
            },
            man_capture_dirs: man_capture_dirs::<G>(rules, pos.side_to_move()),
            flying: flying::<G>(rules),
            strike: strike::<G>(rules),
            promotion: rs.promotion(),
            precedence: precedence::<G>(rules),
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

    // The fields a geometry may fix at compile time (see the rule readers above).
    #[inline(always)]
    fn man_dirs(&self) -> u8 {
        if G::MEN_CAPTURE_BACKWARD == Some(true) {
            0xFF
        } else {
            self.man_capture_dirs
        }
    }
    #[inline(always)]
    fn flying(&self) -> bool {
        G::FLYING.unwrap_or(self.flying)
    }
    #[inline(always)]
    fn strike(&self) -> bool {
        G::STRIKE.unwrap_or(self.strike)
    }
    #[inline(always)]
    fn precedence(&self) -> Precedence {
        G::PRECEDENCE.unwrap_or(self.precedence)
    }

    /// Generates every legal move of `pos` into the sink.
    pub(crate) fn run(mut self, pos: &Position) {
        let (own, _) = pos.own_opp::<G::B>();
        let own_kings = own & pos.kings_bb::<G::B>();
        let own_men = own & !own_kings;
        // Men that have a first jump, per direction.
        let zero = <G::B as Bits>::ZERO;
        let (empty, jumpable) = (self.empty, self.men_jumpable);
        let first_jumps = |dirs: u8| {
            let mut first = [zero; 8];
            let mut starters = zero;
            each_dir::<G>(|d| {
                if dirs & (1 << d) != 0 {
                    let r = d ^ 2;
                    // Unmasked steps on the eight-direction board (the sets are intersected with
                    // squares of the board); the other boards keep the masked steps, which their move
                    // lists were measured faster with.
                    let f = if G::N_DIRS == 8 {
                        own_men & step_into::<G>(step_into::<G>(empty, r) & jumpable, r)
                    } else {
                        own_men & step::<G>(step::<G>(empty, r) & jumpable, r)
                    };
                    starters |= f;
                    first[d] = f;
                }
            });
            (first, starters)
        };
        // Where men capture forward only, the directions are constants of each side's code.
        let turkish = G::BOARD.kind == crate::BoardKind::Turkish;
        let (first, starters) = match (G::MEN_CAPTURE_BACKWARD, pos.side_to_move()) {
            (Some(false), Color::White) => first_jumps(man_move_dirs(turkish, Color::White)),
            (Some(false), Color::Black) => first_jumps(man_move_dirs(turkish, Color::Black)),
            _ => first_jumps(self.man_dirs()),
        };
        let empty0 = self.empty;
        let mut m = starters;
        while !m.is_zero() {
            let from = m.lowest();
            m = m.clear_lowest();
            self.empty = empty0 | from;
            // The first jumps are known from the direction sets (directions in ascending order).
            let mut ds = 0u32;
            each_dir::<G>(|d| {
                if !(first[d] & from).is_zero() {
                    ds |= 1 << d;
                }
            });
            while ds != 0 {
                let d = ds.trailing_zeros() as usize;
                ds &= ds - 1;
                let (over, land) = if G::N_DIRS == 8 {
                    // Every step is a constant shift in the bit layout of the eight-direction board
                    // (and the first jump's squares are on the board): no masks, no test of the sign.
                    let f = from.trailing_zeros() as i32;
                    let s = if d < 4 {
                        G::SHIFT[d]
                    } else {
                        G::SHIFT_ORTHO[d - 4]
                    };
                    (
                        <G::B as Bits>::bit((f + s) as u32),
                        <G::B as Bits>::bit((f + 2 * s) as u32),
                    )
                } else {
                    let over = step::<G>(from, d);
                    (over, step::<G>(over, d))
                };
                self.man_jump_over(from, zero, 0, 0, 0, d, over, land);
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
        self.sink.before_quiet();
        self.quiet_moves(pos, own_men, own_kings);
    }

    fn quiet_moves(&mut self, pos: &Position, own_men: G::B, own_kings: G::B) {
        let dirs = man_move_dirs(
            G::BOARD.kind == crate::BoardKind::Turkish,
            pos.side_to_move(),
        );
        // One call per direction, so that each step is a constant shift.
        if dirs & 1 != 0 {
            self.quiet_men(own_men, 0);
        }
        if dirs & 2 != 0 {
            self.quiet_men(own_men, 1);
        }
        if dirs & 4 != 0 {
            self.quiet_men(own_men, 2);
        }
        if dirs & 8 != 0 {
            self.quiet_men(own_men, 3);
        }
        let mut k = own_kings & !blocked_king::<G>(pos);
        while !k.is_zero() {
            let from = k.lowest();
            k = k.clear_lowest();
            self.quiet_king(from, 0);
            self.quiet_king(from, 1);
            self.quiet_king(from, 2);
            self.quiet_king(from, 3);
        }
    }

    #[inline(always)]
    fn quiet_men(&mut self, own_men: G::B, d: usize) {
        let mut t = self
            .sink
            .quiet_men_steps(step::<G>(own_men, d) & self.empty, d);
        while !t.is_zero() {
            let to = t.lowest();
            t = t.clear_lowest();
            let from = step::<G>(to, d ^ 2);
            let promotes = !(to & self.promo_row).is_zero();
            self.sink.quiet_step(from, to, false, promotes);
        }
    }

    #[inline(always)]
    fn quiet_king(&mut self, from: G::B, d: usize) {
        let mut to = step::<G>(from, d) & self.empty;
        while !to.is_zero() {
            self.sink.quiet_step(from, to, true, false);
            if !self.flying() {
                break;
            }
            to = step::<G>(to, d) & self.empty;
        }
    }

    #[inline(always)]
    fn empty_now(&self, captured: G::B) -> G::B {
        if self.strike() {
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
            match self.precedence() {
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

    /// The jumps of a man on `cur` whose chain goes on, `ahead` being its landing squares (from
    /// [`Gen::man_go_on`], never empty).
    #[allow(clippy::too_many_arguments)]
    fn man_jump(
        &mut self,
        from: G::B,
        cur: G::B,
        captured: G::B,
        n: u32,
        n_kings: u32,
        order: u32,
        ahead: G::B,
    ) {
        if G::N_DIRS == 8 {
            // Eight directions (Frisian): visit the landing squares, not the directions. Every step is a
            // constant shift in the bit layout, so the piece jumped from `s` to `l` is on (s + l) / 2,
            // and the step tells the direction.
            let s = cur.trailing_zeros() as i32;
            let mut a = ahead;
            while !a.is_zero() {
                let land = a.lowest();
                a = a.clear_lowest();
                let o = (s + land.trailing_zeros() as i32) / 2;
                let over = <G::B as Bits>::bit(o as u32);
                let d = usize::from(G::DIR_OF_SHIFT[(o - s + 16) as usize & 31]);
                self.man_jump_over(from, captured, n, n_kings, order, d, over, land);
            }
        } else {
            // Directions in ascending order (the order of the moves in the lists).
            let empty = self.empty_now(captured);
            let jumpable = self.men_jumpable & !captured;
            for d in 0..G::N_DIRS {
                if self.man_dirs() & (1 << d) == 0 {
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
                self.man_jump_over(from, captured, n, n_kings, order, d, over, land);
            }
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
        let empty = self.empty_now(captured);
        let jumpable = self.men_jumpable & !captured;
        let mut ahead = <G::B as Bits>::ZERO;
        let dirs = self.man_dirs();
        if G::N_DIRS == 8 {
            // Eight directions (Frisian): the squares beyond the jumpable neighbours, all at once by
            // table ([`frisian_jumps`]). Every step is a constant shift in the bit layout, so the square
            // beyond a neighbour `o` of `s` is `2o - s` (on the board for the neighbours in
            // `JUMP_NEIGHBOURS`); men capture every way here.
            let s = cur.trailing_zeros();
            let c = G::JUMP_NEIGHBOURS[s as usize & 63] & jumpable;
            ahead = <G::B as Bits>::join(frisian_jumps(s, c.lo()), 0) & empty;
            debug_assert_eq!(dirs, 0xFF);
        } else {
            each_dir::<G>(|d| {
                if dirs & (1 << d) != 0 {
                    ahead |= step::<G>(step::<G>(cur, d) & jumpable, d) & empty;
                }
            });
        }
        if ahead.is_zero() {
            let promoted = !(cur & self.promo_row).is_zero();
            self.emit(from, cur, captured, n, n_kings, order, promoted, false);
            return;
        }
        self.man_jump(from, cur, captured, n, n_kings, order, ahead);
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
            if self.flying() {
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
            if self.flying() {
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
            if !self.flying() {
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

/// perft's last ply: the number of legal moves counted on bitboards where that is exact, `None` where the
/// capture generator must count them. Exact when the side to move has no capture (its quiet moves), and
/// when its only captures are single jumps by men that no rule can tell apart: none of them can go on
/// (tested for every landing square at once: a jump from a landing square over anything but the piece
/// just taken is the same test as a first jump, and jumping back over that piece would land on the
/// origin, which is occupied in the sets tested), none crowns a man that would go on as a king, and the
/// precedence does not look at kings taken. Then each first jump is one move. On the Frisian board, when
/// no king of the side to move can capture, the men's chains are counted without the generator
/// ([`LeafCount::MenChains`], [`men_chains`]).
#[inline(always)]
pub(crate) fn bulk_count<G: Geometry>(pos: &Position) -> LeafCount {
    let (own, opp) = pos.own_opp::<G::B>();
    bulk_count_bits::<G>(
        &LeafRules::new(pos.rule_set()),
        pos.side_to_move(),
        own,
        opp,
        pos.kings_bb::<G::B>(),
        blocked_king::<G>(pos),
    )
}

/// How perft's last ply is counted ([`bulk_count`]).
pub(crate) enum LeafCount {
    /// The number of legal moves, counted on bitboards.
    Exact(u64),
    /// Frisian men's captures, and no king of the side to move can capture: [`men_chains`] counts them
    /// (the landing squares of the first jumps that go on, or 0 if not known, and the men that have a
    /// first jump, if known; the Frisian board's word is a `u64`).
    MenChains(u64, u64),
    /// The capture generator must count them.
    Generator,
}

/// The rules [`bulk_count_bits`] reads, looked up once per node (the same in a whole perft tree).
#[derive(Clone, Copy)]
pub(crate) struct LeafRules {
    pub(crate) rules: &'static Rules,
    mandatory: bool,
    crowning_goes_on: bool,
    /// Breakthrough: a crowning ends the game (docs/rules.md §9.3).
    pub(crate) first_king: bool,
    /// A man that reaches the promotion row in a capture stops there (English, Italian, Spanish, Czech).
    ends_move: bool,
}

impl LeafRules {
    #[inline(always)]
    pub(crate) fn new(rs: RuleSet) -> LeafRules {
        let rules = rs.rules();
        LeafRules {
            rules,
            mandatory: rs.mandatory_capture(),
            crowning_goes_on: rs.promotion() == Promotion::Continue,
            first_king: rules.goal == crate::variant::Goal::FirstKing,
            ends_move: rs.promotion() == Promotion::EndsMove,
        }
    }
}

/// [`bulk_count`] from the pieces of the side to move and the other side (`blocked`: the king that may
/// not make a quiet move, docs/rules.md §11.5).
#[inline(always)]
pub(crate) fn bulk_count_bits<G: Geometry>(
    lr: &LeafRules,
    side: Color,
    own: G::B,
    opp: G::B,
    kings: G::B,
    blocked: G::B,
) -> LeafCount {
    let rules = lr.rules;
    let empty = G::MASK & !(own | opp);
    let zero = <G::B as Bits>::ZERO;
    let men_jumpable = if men_capture_kings::<G>(rules) {
        opp
    } else {
        opp & !kings
    };
    let own_men = own & !kings;
    // Squares a man could jump from, per direction and in any (`jump_from` may hold ghost bits: it is
    // only intersected with squares of the board).
    let first_jumps = |dirs: u8| {
        let mut first = [zero; 8];
        let mut jump_from = zero;
        each_dir::<G>(|d| {
            if dirs & (1 << d) != 0 {
                let r = d ^ 2;
                let j = step_into::<G>(step_into::<G>(empty, r) & men_jumpable, r);
                jump_from |= j;
                first[d] = own_men & j;
            }
        });
        (first, jump_from)
    };
    // Where men capture forward only, the directions are constants of each side's code.
    let (first, jump_from) = match (G::MEN_CAPTURE_BACKWARD, side) {
        (Some(false), Color::White) => first_jumps(man_capture_dirs::<G>(rules, Color::White)),
        (Some(false), Color::Black) => first_jumps(man_capture_dirs::<G>(rules, Color::Black)),
        _ => first_jumps(man_capture_dirs::<G>(rules, side)),
    };
    let own_kings = own & kings;
    if !own_kings.is_zero() && king_has_capture::<G>(flying::<G>(rules), own_kings, opp, empty) {
        return LeafCount::Generator;
    }
    if (own_men & jump_from).is_zero() {
        return LeafCount::Exact(count_quiet_in::<G>(rules, side, own, kings, empty, blocked));
    }
    let kings_alike = matches!(
        precedence::<G>(rules),
        Precedence::MostPieces | Precedence::Free | Precedence::KingFirst
    );
    // Frisian (the eight-direction board): only men capture here (the kings cannot), so their chains are
    // counted without the generator unless a man crowned mid-chain would go on as a king.
    let men_chains = G::N_DIRS == 8 && lr.mandatory && !lr.crowning_goes_on;
    if !lr.mandatory || (!kings_alike && !(opp & kings).is_zero()) {
        return if men_chains {
            LeafCount::MenChains(0, 0)
        } else {
            LeafCount::Generator
        };
    }
    let promo_row = match side {
        Color::White => G::TOP_ROW,
        Color::Black => G::BOTTOM_ROW,
    };
    // Every landing square at once; each first jump is a move (a man jumps a piece one way only).
    let mut lands = zero;
    let mut n = 0u32;
    each_dir::<G>(|d| {
        lands |= step_into::<G>(step_into::<G>(first[d], d), d);
        if cfg!(target_feature = "popcnt") {
            n += first[d].count_ones();
        }
    });
    if !(lands & jump_from).is_zero() || (lr.crowning_goes_on && !(lands & promo_row).is_zero()) {
        return if men_chains {
            LeafCount::MenChains((lands & jump_from).lo(), (own_men & jump_from).lo())
        } else {
            LeafCount::Generator
        };
    }
    if !cfg!(target_feature = "popcnt") {
        n = count_sparse(&first[..G::N_DIRS]);
    }
    LeafCount::Exact(u64::from(n))
}

/// What [`bulk_count_quiet_replies`] and (on the eight-direction board) [`bulk_count_quiet_reply`] need
/// of a position of the eight-direction board or an 8x8 board ([`Geometry::QUIET_REPLIES`]; `side`,
/// `own`: the side to move; `opp`: the side that replies to its quiet moves), where the replying side has
/// no king and no capture (and, on the eight-direction board, the men's chains are counted without the
/// generator, [`men_chains`]); `None` elsewhere. On the 8x8 boards only the directions the replying
/// side's men capture in are looked at (a piece of the side to move is exposed only to a man that can
/// jump it that way).
#[inline(always)]
pub(crate) fn quiet_replies<G: Geometry>(
    lr: &LeafRules,
    side: Color,
    own: G::B,
    opp: G::B,
    kings: G::B,
) -> Option<QuietReplies<G::B>> {
    // The eight-direction board also counts the replies that capture ([`bulk_count_quiet_reply`]).
    if !G::QUIET_REPLIES
        || (G::N_DIRS == 8 && (!lr.mandatory || lr.crowning_goes_on))
        || !(opp & kings).is_zero()
    {
        return None;
    }
    let empty = G::MASK & !(own | opp);
    let (mut exposed, mut landing) = (<G::B as Bits>::ZERO, <G::B as Bits>::ZERO);
    // The directions the replying side's men capture in (every one on the eight-direction board).
    let dirs = if G::N_DIRS == 8 {
        0xFF
    } else {
        man_capture_dirs::<G>(lr.rules, !side)
    };
    each_dir::<G>(|d| {
        if dirs & (1 << d) != 0 {
            let men = step_into::<G>(opp, d);
            exposed |= men & step_into::<G>(empty, d ^ 2);
            landing |= step_into::<G>(men & own, d);
        }
    });
    // The replying side has no capture now (each of its captures would take a piece on an exposed square).
    if !(exposed & own).is_zero() {
        return None;
    }
    // Its men's steps (two directions, forwards), and their number.
    let (a, b) = match side {
        Color::White => (2, 3),
        Color::Black => (0, 1),
    };
    debug_assert_eq!(man_move_dirs(false, !side), (1 << a) | (1 << b));
    let steps = [step_into::<G>(opp, a), step_into::<G>(opp, b)];
    let quiet = (steps[0] & empty).count_ones() + (steps[1] & empty).count_ones();
    Some(QuietReplies {
        exposed,
        landing,
        steps,
        quiet,
    })
}

/// [`bulk_count_quiet_reply`] summed over quiet moves of the men one step each, onto `to` from `from`
/// (the same steps), where the other side has no capture after any of them (none of `to` exposed, of
/// `from` a landing square, of the squares beyond `to` holding a man of the other side): for each, the
/// quiet moves before, less the steps onto its `to`, plus those onto its `from`.
#[inline(always)]
pub(crate) fn bulk_count_quiet_replies<G: Geometry>(
    before: &QuietReplies<G::B>,
    from: G::B,
    to: G::B,
) -> u64 {
    let onto = |sq: G::B| (before.steps[0] & sq).count_ones() + (before.steps[1] & sq).count_ones();
    u64::from(to.count_ones() * before.quiet + onto(from) - onto(to))
}

/// The squares where a quiet step in direction `d` onto them may leave the other side a capture (see
/// [`bulk_count_quiet_reply`]): exposed, one step beyond a landing square, or one step before a man of the
/// other side (`opp`).
#[inline(always)]
pub(crate) fn quiet_reply_captures<G: Geometry>(
    before: &QuietReplies<G::B>,
    opp: G::B,
    d: usize,
) -> G::B {
    before.exposed | step::<G>(before.landing, d) | step::<G>(opp, d ^ 2)
}

/// See [`quiet_replies`]: the squares where a piece of the side to move could be taken (a man of the other
/// side on one side of it, an empty square on the other), those that, emptied, a man of the other side
/// could land on (over a piece of the side to move), the squares the other side's men step to (per
/// direction), and the number of its quiet moves.
#[derive(Clone, Copy)]
pub(crate) struct QuietReplies<B> {
    exposed: B,
    landing: B,
    steps: [B; 2],
    quiet: u32,
}

/// [`bulk_count_bits`] for the reply to a quiet move `from` -> `to` (one-bit sets) of `opp`, from the
/// position before it (`before`, [`quiet_replies`]): the number of legal moves of `side` (`own`, men only).
/// That side had no capture then, so each of its captures now takes the piece on `to` or lands on `from`,
/// the only squares that changed. Whether there is one is three bit tests (`to` exposed, `from` a landing
/// square, or a man just beyond `to` that jumps it onto `from`); with none, the quiet moves are those
/// before, less the steps onto `to`, plus those onto `from`; else the first jumps are found from the two
/// squares, and the chains of those that go on followed from them at once ([`MenChains`], as in
/// [`men_chains`]; `seen`: a scratch list).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn bulk_count_quiet_reply<G: Geometry>(
    before: &QuietReplies<G::B>,
    side: Color,
    own: G::B,
    opp: G::B,
    kings: G::B,
    from: G::B,
    to: G::B,
    unique: bool,
    seen: &mut Vec<Move>,
) -> u64 {
    let t = to.trailing_zeros();
    let f = from.trailing_zeros();
    let over_to = G::JUMPERS[t as usize & 63] & own;
    // A man beyond `to` (a neighbour of `to` only after a one-step move) that jumps it onto `from`.
    let back = over_to & <G::B as Bits>::bit((2 * t).wrapping_sub(f) & 63);
    if ((to & before.exposed) | (from & before.landing) | back).is_zero() {
        let onto = |sq: G::B| {
            u32::from(!(before.steps[0] & sq).is_zero())
                + u32::from(!(before.steps[1] & sq).is_zero())
        };
        return u64::from(before.quiet + onto(from) - onto(to));
    }
    bulk_count_reply_captures::<G>(
        before, side, own, opp, kings, f, t, over_to, back, unique, seen,
    )
}

/// [`bulk_count_quiet_reply`] where the side to move may have a capture (`f`, `t`: the bits of the quiet
/// move's origin and destination; `over_to`: the men next to `t` that could jump it; `back`: the one
/// beyond it that jumps it onto `f`, if any).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn bulk_count_reply_captures<G: Geometry>(
    before: &QuietReplies<G::B>,
    side: Color,
    own: G::B,
    opp: G::B,
    kings: G::B,
    f: u32,
    t: u32,
    over_to: G::B,
    back: G::B,
    unique: bool,
    seen: &mut Vec<Move>,
) -> u64 {
    let (from, to) = (<G::B as Bits>::bit(f), <G::B as Bits>::bit(t));
    let empty = G::MASK & !(own | opp);
    // Only the men that can: jumpers of `to` if it is exposed (or the man beyond it jumps it onto
    // `from`), men two steps from `from` if it is a landing square.
    let zero = <G::B as Bits>::ZERO;
    let over_to = if (to & before.exposed).is_zero() && back.is_zero() {
        zero
    } else {
        over_to
    };
    let onto_from = if (from & before.landing).is_zero() {
        zero
    } else {
        G::JUMP_LANDINGS[f as usize & 63] & own
    };
    let (mut n, mut n_kings) = (0u32, 0u32);
    // The chains of the first jumps that go on (their values start above 0, so `best` stays 0 while
    // there are none; `end` clears `seen` before the first move it keeps).
    let mut chains = MenChains::<G>::new(side, opp, opp & kings, empty, unique, seen);
    // A first jump from `x` over `o` onto `l`: if the man can go on from `l` (a jump back over `o`
    // would land on `x`, the only square it empties; `o` stays on the board), its chain is followed.
    let mut first = |x: G::B, o: u32, l: u32| {
        n += 1;
        let over = <G::B as Bits>::bit(o);
        n_kings += u32::from(!(over & kings).is_zero());
        let c = G::JUMP_NEIGHBOURS[l as usize & 63] & opp & !over;
        let ahead = <G::B as Bits>::join(frisian_jumps(l, c.lo()), 0) & empty;
        if !ahead.is_zero() {
            chains.empty = empty | x;
            let value = chains.value(over);
            chains.chain(x, l, over, value, 1, ahead);
        }
    };
    let mut xs = over_to;
    while !xs.is_zero() {
        let x = xs.lowest();
        xs = xs.clear_lowest();
        let l = (2 * t).wrapping_sub(x.trailing_zeros()) & 63;
        if !(<G::B as Bits>::bit(l) & empty).is_zero() {
            first(x, t, l);
        }
    }
    let mut xs = onto_from;
    while !xs.is_zero() {
        let x = xs.lowest();
        xs = xs.clear_lowest();
        let o = (x.trailing_zeros() + f) / 2;
        // Over `to` onto `from`: found above.
        if o != t && !(<G::B as Bits>::bit(o) & opp).is_zero() {
            first(x, o, f);
        }
    }
    debug_assert!(n > 0);
    if chains.best > 0 {
        chains.n_best
    } else {
        // Single jumps only: those that take a king outvalue the others (docs/rules.md §11.3).
        u64::from(if n_kings > 0 { n_kings } else { n })
    }
}

/// [`LeafCount::MenChains`]: the number of legal moves of the side to move (`own` against `opp`), whose
/// captures are all men's, on the Frisian board. `go_on`: the landing squares of the first jumps whose
/// chain goes on, if known (0 when not: then they are found here), and `starters` the men that have a
/// first jump (the first jumps onto those squares are looked for among them only); `seen`: a scratch
/// list.
///
/// A chain that can go on outvalues every chain that stops at the same point, whatever they take: one
/// more piece is worth at least 100 more, a man instead of a king at most 99 less. So when a first jump can
/// go on (its landing square is one a man could jump from, with the moving man on its origin: only a jump
/// back over the piece just taken, which stays on the board until the end, would land on the origin), the
/// single jumps are out, and only the chains from those first jumps are followed; when none can, every
/// move is a single jump, and those that take a king win.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
pub(crate) fn men_chains<G: Geometry>(
    side: Color,
    go_on: u64,
    starters: u64,
    own: G::B,
    opp: G::B,
    kings: G::B,
    unique: bool,
    seen: &mut Vec<Move>,
) -> u64 {
    debug_assert!(G::N_DIRS == 8 && G::MEN_CAPTURE_KINGS == Some(true));
    let empty = G::MASK & !(own | opp);
    let own_men = own & !kings;
    let opp_kings = opp & kings;
    let zero = <G::B as Bits>::ZERO;
    let mut go_on = <G::B as Bits>::join(go_on, 0);
    let mut starters = <G::B as Bits>::join(starters, 0);
    if go_on.is_zero() {
        let mut first = [zero; 8];
        let mut jump_from = zero;
        each_dir::<G>(|d| {
            let r = d ^ 2;
            let j = step::<G>(step::<G>(empty, r) & opp, r);
            jump_from |= j;
            first[d] = own_men & j;
        });
        each_dir::<G>(|d| {
            go_on |= step::<G>(step::<G>(first[d], d), d);
        });
        go_on &= jump_from;
        starters = own_men & jump_from;
        if go_on.is_zero() {
            let (mut n_all, mut n_kings) = (0, 0);
            each_dir::<G>(|d| {
                n_all += first[d].count_ones();
                n_kings += (first[d] & step::<G>(opp_kings, d ^ 2)).count_ones();
            });
            return u64::from(if n_kings > 0 { n_kings } else { n_all });
        }
    }
    seen.clear();
    let mut chains = MenChains::<G>::new(side, opp, opp_kings, empty, unique, seen);
    // The first jumps onto each of those landing squares: from a man two steps away, over the piece
    // between (the same steps as in `MenChains::ahead`, backwards).
    let mut lands = go_on;
    while !lands.is_zero() {
        let l = lands.trailing_zeros();
        lands = lands.clear_lowest();
        let mut men = G::JUMP_LANDINGS[l as usize & 63] & starters;
        while !men.is_zero() {
            let from = men.lowest();
            men = men.clear_lowest();
            let over = <G::B as Bits>::bit((from.trailing_zeros() + l) / 2) & opp;
            if over.is_zero() {
                continue;
            }
            chains.empty = empty | from;
            let ahead = chains.ahead(l, over);
            debug_assert!(!ahead.is_zero());
            chains.jumps(from, l, over, chains.value(over), 1, ahead);
        }
    }
    chains.n_best
}

/// perft's last ply where the capture generator was to count ([`LeafCount::Generator`]), on the 8x8
/// boards ([`Geometry::MEN_CHAINS8`]): the number of legal moves of `pos` when only its men can capture
/// ([`men_chains4`]); `None` where the generator must count (a king of the side to move can capture,
/// captures are optional, a man crowned mid-chain goes on as a king, or no man can capture).
#[inline(always)]
pub(crate) fn men_chains8<G: Geometry>(
    pos: &Position,
    unique: bool,
    seen: &mut Vec<Move>,
) -> Option<u64> {
    if G::N_DIRS != 4 || !G::MEN_CHAINS8 {
        return None;
    }
    let rs = pos.rule_set();
    if !rs.mandatory_capture() || rs.promotion() == Promotion::Continue {
        return None;
    }
    let lr = LeafRules::new(rs);
    let (own, opp) = pos.own_opp::<G::B>();
    let kings = pos.kings_bb::<G::B>();
    let own_kings = own & kings;
    let empty = G::MASK & !(own | opp);
    if !own_kings.is_zero() && king_has_capture::<G>(flying::<G>(lr.rules), own_kings, opp, empty) {
        return None;
    }
    let n = men_chains4::<G>(&lr, pos.side_to_move(), own, opp, kings, unique, seen);
    // No man can capture either: the generator counts the quiet moves.
    (n > 0).then_some(n)
}

/// [`men_chains8`]'s count: every capture chain of the men of `side` (`own` against `opp`, on a
/// four-direction board), followed on bitboards without building moves, and the number of legal moves
/// among them, as the generator finds them: the same chains (a man captures in its rules' directions;
/// captured pieces stay on the board until the end; where reaching the promotion row ends the move
/// (`lr.ends_move`) a chain stops there, else the man goes on as a man), the same precedence keys
/// ([`Gen::emit`] with a man moving), and each origin, destination and captured set once in unique mode
/// (`seen`: a scratch list). Where every chain is a move (no precedence: pool, english; Czech,
/// whose king-first rule does not arise when no king captures), the first jumps that cannot go on are
/// counted at once, as in [`bulk_count_bits`] (a jump from the landing square over anything but the
/// piece just taken is a first jump's test, and a jump back over it would land on the origin, occupied
/// in that test), and only the chains that go on are followed.
#[allow(clippy::too_many_arguments)]
fn men_chains4<G: Geometry>(
    lr: &LeafRules,
    side: Color,
    own: G::B,
    opp: G::B,
    kings: G::B,
    unique: bool,
    seen: &mut Vec<Move>,
) -> u64 {
    debug_assert!(G::N_DIRS == 4 && !lr.crowning_goes_on);
    let rules = lr.rules;
    let zero = <G::B as Bits>::ZERO;
    let empty = G::MASK & !(own | opp);
    let own_men = own & !kings;
    let jumpable = if men_capture_kings::<G>(rules) {
        opp
    } else {
        opp & !kings
    };
    let dirs = man_capture_dirs::<G>(rules, side);
    // The men with a first jump, per direction, and the squares a man could jump from.
    let mut first = [zero; 4];
    let mut jump_from = zero;
    each_dir::<G>(|d| {
        if dirs & (1 << d) != 0 {
            let r = d ^ 2;
            let j = step::<G>(step::<G>(empty, r) & jumpable, r);
            jump_from |= j;
            first[d & 3] = own_men & j;
        }
    });
    seen.clear();
    let precedence = precedence::<G>(rules);
    let mut chains = Chains4::<G> {
        jumpable,
        opp_kings: opp & kings,
        empty,
        promo_row: match side {
            Color::White => G::TOP_ROW,
            Color::Black => G::BOTTOM_ROW,
        },
        ends_move: lr.ends_move,
        precedence,
        dirs,
        unique,
        best: 0,
        n_best: 0,
        seen,
        _g: std::marker::PhantomData,
    };
    let every_chain = matches!(precedence, Precedence::Free | Precedence::KingFirst);
    let mut singles = 0u32;
    // One call per direction, so that each step is a constant shift.
    for_dir_chains::<G>(
        &mut chains,
        0,
        first[0],
        jump_from,
        every_chain,
        &mut singles,
    );
    for_dir_chains::<G>(
        &mut chains,
        1,
        first[1],
        jump_from,
        every_chain,
        &mut singles,
    );
    for_dir_chains::<G>(
        &mut chains,
        2,
        first[2],
        jump_from,
        every_chain,
        &mut singles,
    );
    for_dir_chains::<G>(
        &mut chains,
        3,
        first[3],
        jump_from,
        every_chain,
        &mut singles,
    );
    u64::from(singles) + chains.n_best
}

/// [`men_chains4`]'s first jumps in direction `d`, of the men `first` (none outside the men's capture
/// directions): those that cannot go on added to `singles` where every chain is a move, the chains of the
/// others followed.
#[inline(always)]
fn for_dir_chains<G: Geometry>(
    chains: &mut Chains4<'_, G>,
    d: usize,
    first: G::B,
    jump_from: G::B,
    every_chain: bool,
    singles: &mut u32,
) {
    let mut men = first;
    if men.is_zero() {
        return;
    }
    if every_chain {
        // One landing square per man: those that go on, the others single jumps.
        let mut goes = step::<G>(step::<G>(men, d), d) & jump_from;
        if chains.ends_move {
            goes &= !chains.promo_row;
        }
        *singles += men.count_ones() - goes.count_ones();
        men = step::<G>(step::<G>(goes, d ^ 2), d ^ 2);
    }
    let empty = chains.empty;
    while !men.is_zero() {
        let from = men.lowest();
        men = men.clear_lowest();
        let land = step::<G>(step::<G>(from, d), d);
        chains.empty = empty | from;
        chains.jumps(
            from,
            from.trailing_zeros(),
            <G::B as Bits>::ZERO,
            0,
            0,
            0,
            land,
        );
    }
    chains.empty = empty;
}

/// The search of [`men_chains4`]: the chains of one man at a time (`empty` holds its origin).
struct Chains4<'a, G: Geometry> {
    /// The pieces a man may jump.
    jumpable: G::B,
    opp_kings: G::B,
    empty: G::B,
    promo_row: G::B,
    ends_move: bool,
    precedence: Precedence,
    /// The men's capture directions.
    dirs: u8,
    unique: bool,
    /// The best precedence key so far and how many moves have it (none kept while `n_best` is 0).
    best: u32,
    n_best: u64,
    /// The moves kept that another capture order could repeat (unique mode).
    seen: &'a mut Vec<Move>,
    _g: std::marker::PhantomData<G>,
}

impl<G: Geometry> Chains4<'_, G> {
    /// The squares the man on `cur` can jump to, `captured` taken.
    #[inline(always)]
    fn ahead(&self, cur: G::B, captured: G::B) -> G::B {
        let jumpable = self.jumpable & !captured;
        let mut ahead = <G::B as Bits>::ZERO;
        each_dir::<G>(|d| {
            if self.dirs & (1 << d) != 0 {
                ahead |= step::<G>(step::<G>(cur, d) & jumpable, d);
            }
        });
        ahead & self.empty
    }

    /// The jumps of the man from `from` standing on bit `s`, `captured` taken (`n` pieces, `n_kings` of
    /// them kings, `order` the Italian order bits), onto the squares of `ahead` (not empty): each one and
    /// the rest of its chain. Every step is a constant shift in the bit layout, so the piece jumped from
    /// `s` to `l` is on `(s + l) / 2`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn jumps(
        &mut self,
        from: G::B,
        s: u32,
        captured: G::B,
        n: u32,
        n_kings: u32,
        order: u32,
        ahead: G::B,
    ) {
        let mut ls = ahead;
        while !ls.is_zero() {
            let land = ls.lowest();
            ls = ls.clear_lowest();
            let l = land.trailing_zeros();
            let over = <G::B as Bits>::bit((s + l) / 2);
            let is_king = !(over & self.opp_kings).is_zero();
            // Italian: capture number `n` (0-based) of a king sets bit 15 - n (as `Gen::order_bit`).
            let order2 = if is_king && n < 16 {
                order | (1 << (15 - n))
            } else {
                order
            };
            let captured2 = captured | over;
            let (n2, nk2) = (n + 1, n_kings + u32::from(is_king));
            if self.ends_move && !(land & self.promo_row).is_zero() {
                self.end(from, land, captured2, n2, nk2, order2);
                continue;
            }
            let ahead2 = self.ahead(land, captured2);
            if ahead2.is_zero() {
                self.end(from, land, captured2, n2, nk2, order2);
            } else {
                self.go_on(from, l, captured2, n2, nk2, order2, ahead2);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn go_on(
        &mut self,
        from: G::B,
        s: u32,
        captured: G::B,
        n: u32,
        n_kings: u32,
        order: u32,
        ahead: G::B,
    ) {
        self.jumps(from, s, captured, n, n_kings, order, ahead);
    }

    /// A chain ends on `to`: kept if its key is the best so far (and, in unique mode, not a repeat).
    #[inline(always)]
    fn end(&mut self, from: G::B, to: G::B, captured: G::B, n: u32, n_kings: u32, order: u32) {
        let key = match G::PRECEDENCE.unwrap_or(self.precedence) {
            Precedence::Free | Precedence::Frisian | Precedence::KingFirst => 0,
            Precedence::MostPieces => n,
            Precedence::MostPiecesThenKings => (n << 8) | n_kings,
            Precedence::Italian => (n << 24) | (n_kings << 16) | order,
        };
        let (seen, n_best) = (&mut *self.seen, &mut self.n_best);
        if !precedence_admits(&mut self.best, *n_best > 0, key, || {
            seen.clear();
            *n_best = 0;
        }) {
            return;
        }
        let promotes = !(to & self.promo_row).is_zero();
        let mv = Move::new(from, to, captured, n as u8, false, promotes);
        if first_of_its_kind(self.unique, self.seen, mv) {
            self.n_best += 1;
        }
    }
}

/// perft's last ply on the Frisian board when only men can capture (no king of the side to move can):
/// every capture chain of the men, followed on bitboards without building moves, and the number of legal
/// moves among them: the chains of the highest value (docs/rules.md §11.3: a man 100, a king 199; the
/// king's preference at equal value does not arise, since no king captures), each origin, destination and
/// captured set once in unique mode. The same chains as the generator's (a man on the promotion row
/// mid-chain goes on as a man; captured pieces stay on the board until the end), without its precedence
/// keys, capture order or move list.
struct MenChains<'a, G: Geometry> {
    opp: G::B,
    opp_kings: G::B,
    /// Empty squares, the moving man's origin included.
    empty: G::B,
    promo_row: G::B,
    unique: bool,
    /// The value of the best chain so far, and how many moves have it.
    best: u32,
    n_best: u64,
    /// The moves of the best value that another capture order could repeat (unique mode).
    seen: &'a mut Vec<Move>,
}

impl<'a, G: Geometry> MenChains<'a, G> {
    /// No chain found yet, for `side`'s men (the promotion row is its).
    #[inline(always)]
    fn new(
        side: Color,
        opp: G::B,
        opp_kings: G::B,
        empty: G::B,
        unique: bool,
        seen: &'a mut Vec<Move>,
    ) -> Self {
        MenChains {
            opp,
            opp_kings,
            empty,
            promo_row: match side {
                Color::White => G::TOP_ROW,
                Color::Black => G::BOTTOM_ROW,
            },
            unique,
            best: 0,
            n_best: 0,
            seen,
        }
    }

    #[inline(always)]
    fn value(&self, over: G::B) -> u32 {
        if (over & self.opp_kings).is_zero() {
            100
        } else {
            199
        }
    }

    /// The squares a man on bit `s` can jump to, `captured` being taken (the square beyond a neighbour
    /// `o` is `2o - s`, see [`Gen::man_go_on`]).
    #[inline(always)]
    fn ahead(&self, s: u32, captured: G::B) -> G::B {
        let c = G::JUMP_NEIGHBOURS[s as usize & 63] & self.opp & !captured;
        <G::B as Bits>::join(frisian_jumps(s, c.lo()), 0) & self.empty
    }

    /// The chain of the man from `from` standing on bit `s` after taking `captured` (`n` pieces worth
    /// `value`), which goes on to the squares of `ahead` (not empty): each jump, then the chain's end or
    /// the rest of it.
    #[inline(never)]
    fn chain(&mut self, from: G::B, s: u32, captured: G::B, value: u32, n: u32, ahead: G::B) {
        self.jumps(from, s, captured, value, n, ahead);
    }

    /// [`MenChains::chain`]'s body (written out in [`men_chains`] for the first jumps' landing squares).
    #[inline(always)]
    fn jumps(&mut self, from: G::B, s: u32, captured: G::B, value: u32, n: u32, ahead: G::B) {
        let mut ls = ahead;
        while !ls.is_zero() {
            let l = ls.trailing_zeros();
            ls = ls.clear_lowest();
            let over = <G::B as Bits>::bit((s + l) / 2);
            let captured2 = captured | over;
            let value2 = value + self.value(over);
            let ahead2 = self.ahead(l, captured2);
            if ahead2.is_zero() {
                self.end(from, l, captured2, value2, n + 1);
            } else {
                self.chain(from, l, captured2, value2, n + 1, ahead2);
            }
        }
    }

    #[inline(always)]
    fn end(&mut self, from: G::B, s: u32, captured: G::B, value: u32, n: u32) {
        if value < self.best {
            return;
        }
        if value > self.best {
            self.best = value;
            self.n_best = 0;
            self.seen.clear();
        }
        let to = <G::B as Bits>::bit(s);
        let promotes = !(to & self.promo_row).is_zero();
        let mv = Move::new(from, to, captured, n as u8, false, promotes);
        if first_of_its_kind(self.unique, self.seen, mv) {
            self.n_best += 1;
        }
    }
}

/// Whether a chain's move counts: always in all-orders mode; in unique mode only the first time it is
/// found, when another capture order could give it again (`seen` keeps those found so far).
#[inline(always)]
fn first_of_its_kind(unique: bool, seen: &mut Vec<Move>, mv: Move) -> bool {
    if unique && may_repeat(&mv) {
        if seen.contains(&mv) {
            return false;
        }
        seen.push(mv);
    }
    true
}

#[inline(always)]
fn has_capture_in<G: Geometry>(
    pos: &Position,
    rules: &Rules,
    own: G::B,
    opp: G::B,
    kings: G::B,
    empty: G::B,
) -> bool {
    let men_jumpable = if men_capture_kings::<G>(rules) {
        opp
    } else {
        opp & !kings
    };
    let own_men = own & !kings;
    let dirs = man_capture_dirs::<G>(rules, pos.side_to_move());
    for d in 0..G::N_DIRS {
        if dirs & (1 << d) != 0 {
            let r = d ^ 2;
            if !(own_men & step::<G>(step::<G>(empty, r) & men_jumpable, r)).is_zero() {
                return true;
            }
        }
    }
    let own_kings = own & kings;
    !own_kings.is_zero() && king_has_capture::<G>(flying::<G>(rules), own_kings, opp, empty)
}

/// Whether one of `own_kings` can jump a piece of `opp`.
#[inline(always)]
fn king_has_capture<G: Geometry>(flying: bool, own_kings: G::B, opp: G::B, empty: G::B) -> bool {
    for d in 0..G::N_DIRS {
        let mut front = step::<G>(own_kings, d);
        let mut blockers = front & !empty;
        if flying {
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
    count_quiet_in::<G>(
        rules,
        pos.side_to_move(),
        own,
        kings,
        empty,
        blocked_king::<G>(pos),
    )
}

#[inline(always)]
fn count_quiet_in<G: Geometry>(
    rules: &Rules,
    side: Color,
    own: G::B,
    kings: G::B,
    empty: G::B,
    blocked: G::B,
) -> u64 {
    let own_men = own & !kings;
    let dirs = man_move_dirs(G::BOARD.kind == crate::BoardKind::Turkish, side);
    let mut n = 0u64;
    for d in 0..4 {
        if dirs & (1 << d) != 0 {
            n += u64::from((step_into::<G>(own_men, d) & empty).count_ones());
        }
    }
    let own_kings = own & kings & !blocked;
    if !own_kings.is_zero() {
        for d in 0..4 {
            let mut front = step_into::<G>(own_kings, d) & empty;
            n += u64::from(front.count_ones());
            if flying::<G>(rules) {
                while !front.is_zero() {
                    front = step_into::<G>(front, d) & empty;
                    n += u64::from(front.count_ones());
                }
            }
        }
    }
    n
}

/// Whether another capture order can give the same move (the same origin, destination and captured set),
/// so that the unique-move sinks must compare it. Never for a single capture, nor for two pieces taken by
/// a man that stays a man: its jumps are two equal steps each, and taking A then B from x (over x + a and
/// x + 2a + b) or B then A ends on the same square only if b = -a, that is on A again.
#[inline(always)]
fn may_repeat(mv: &Move) -> bool {
    let n = mv.n_captured();
    n >= 3 || (n == 2 && (mv.is_king_move() || mv.promotes()))
}

/// Capture precedence as every sink applies it (one place for the rule): whether a chain with
/// precedence `key` is kept, given the best key so far (`best`) and whether any chain is kept. A key
/// below the best loses; a key above it first drops every chain kept so far (`drop_kept`).
#[inline(always)]
fn precedence_admits(best: &mut u32, any_kept: bool, key: u32, drop_kept: impl FnOnce()) -> bool {
    if any_kept {
        if key < *best {
            return false;
        }
        if key > *best {
            drop_kept();
        }
    }
    *best = key;
    true
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
        let any_kept = self.n_captures > 0;
        if !precedence_admits(&mut self.best, any_kept, key, || {
            self.list.clear();
            self.n_captures = 0;
        }) {
            return;
        }
        if self.unique && may_repeat(&mv) && self.list.contains(&mv) {
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

/// Counts moves without listing them (perft's last ply when the side to move has a capture): the chains
/// with the best precedence key, and in unique mode each multi-capture once (those alone are kept, to
/// compare; a single capture is never a duplicate).
pub(crate) struct CountSink<'a> {
    seen: &'a mut Vec<Move>,
    best: u32,
    n_captures: u64,
    n_quiet: u64,
    unique: bool,
}

impl<'a> CountSink<'a> {
    pub(crate) fn new(seen: &'a mut Vec<Move>, unique: bool) -> Self {
        seen.clear();
        CountSink {
            seen,
            best: 0,
            n_captures: 0,
            n_quiet: 0,
            unique,
        }
    }

    /// The number of moves given to the sink that are legal moves.
    pub(crate) fn count(&self) -> u64 {
        self.n_captures + self.n_quiet
    }
}

impl<B: Bits> Sink<B> for CountSink<'_> {
    #[inline(always)]
    fn capture(&mut self, mv: Move, key: u32) {
        let any_kept = self.n_captures > 0;
        if !precedence_admits(&mut self.best, any_kept, key, || {
            self.seen.clear();
            self.n_captures = 0;
        }) {
            return;
        }
        if self.unique && may_repeat(&mv) {
            if self.seen.contains(&mv) {
                return;
            }
            self.seen.push(mv);
        }
        self.n_captures += 1;
    }
    fn has_captures(&self) -> bool {
        self.n_captures > 0
    }
    #[inline(always)]
    fn quiet(&mut self, _mv: Move) {
        self.n_quiet += 1;
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
        let any_kept = self.n_captures > 0;
        if !precedence_admits(&mut self.best, any_kept, key, || {
            self.paths.clear();
            self.n_captures = 0;
        }) {
            return;
        }
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
