//! Property tests over random valid positions of every variant (with and without rule options).
//!
//! Positions come from two generators: random playouts from the start position (random legal moves,
//! 0..80 plies) and random piece placements (men never on their own promotion row, a mix of men and
//! kings, random side to move). The default number of cases keeps the file well under a minute in a
//! debug build; set `PROPTEST_CASES` to run more.

use std::collections::HashSet;

use draughts_engine::{
    Color, Count, Game, GameError, GameStatus, Move, Position, Precedence, Promotion, ResolveError,
    RuleOptions, RuleSet, Variant,
};
use proptest::prelude::*;
use proptest::test_runner::Config;

// ---------------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------------

/// A small deterministic generator for the playouts (the seed comes from proptest).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A rule set: one of the eight variants, half the time with house-rule options (only those the
/// variant accepts).
fn arb_rules() -> impl Strategy<Value = RuleSet> {
    (
        0..Variant::ALL.len(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop::option::of(1u16..=60),
    )
        .prop_map(|(vi, with_options, nmc, pmc, move_limit)| {
            let variant = Variant::ALL[vi];
            if !with_options {
                return RuleSet::new(variant);
            }
            // Keep only the options the variant accepts.
            let accepts = |o: RuleOptions| RuleSet::with_options(variant, o).is_ok();
            let opts = RuleOptions {
                no_mandatory_capture: nmc
                    && accepts(RuleOptions {
                        no_mandatory_capture: true,
                        ..RuleOptions::default()
                    }),
                promote_mid_capture: pmc
                    && accepts(RuleOptions {
                        promote_mid_capture: true,
                        ..RuleOptions::default()
                    }),
                move_limit: move_limit.and_then(std::num::NonZeroU16::new),
                ..RuleOptions::default()
            };
            RuleSet::with_options(variant, opts).expect("accepted options")
        })
}

/// A random playout of `plies` random legal moves from the start position (stops early at a game end).
fn playout(rules: RuleSet, seed: u64, plies: usize) -> Position {
    let mut rng = SplitMix(seed);
    let mut pos = Position::start(rules);
    for _ in 0..plies {
        let moves = pos.legal_moves();
        if moves.is_empty() {
            break;
        }
        let mv = moves[rng.below(moves.len())];
        pos = pos.play(&mv).expect("generated moves are legal");
    }
    pos
}

fn arb_playout() -> impl Strategy<Value = Position> {
    (arb_rules(), any::<u64>(), 0usize..80)
        .prop_map(|(rules, seed, plies)| playout(rules, seed, plies))
}

/// One square's content in a random placement.
#[derive(Clone, Copy, Debug)]
struct Cell {
    roll: u8,
    black: bool,
    king_roll: u8,
}

/// The FEN of a random placement: each square holds a piece with probability `fill`/10, a king with
/// probability `kings`/10; a man that would stand on its own promotion row becomes a king.
/// Squares are written as numbers or algebraic names, White's or Black's field first.
fn placement_fen(
    rules: RuleSet,
    cells: &[Cell],
    fill: u8,
    kings: u8,
    side: Color,
    algebraic: bool,
    black_first: bool,
) -> String {
    let board = rules.rules().board.board();
    let mut white = Vec::new();
    let mut black = Vec::new();
    for (sq, cell) in board.squares().zip(cells) {
        // Rolls shrink toward 0: an empty square, a man.
        if cell.roll % 10 < 10 - fill {
            continue;
        }
        let color = if cell.black {
            Color::Black
        } else {
            Color::White
        };
        let promo_row = match color {
            Color::White => board.top_row,
            Color::Black => board.bottom_row,
        };
        // A man can't stand on its own promotion row, nor (Turkish) on its own first rank, and no
        // side has more pieces than it starts with (docs/rules.md §8): those become kings or are left out.
        let back_row = match color {
            Color::White => board.bottom_row,
            Color::Black => board.top_row,
        };
        let turkish = board.kind == draughts_engine::BoardKind::Turkish;
        let on_promo_row = promo_row & (1u128 << sq.bit()) != 0
            || (turkish && back_row & (1u128 << sq.bit()) != 0);
        let max = usize::from(rules.rules().pieces_per_side);
        let n_own = match color {
            Color::White => white.len(),
            Color::Black => black.len(),
        };
        if n_own >= max {
            continue;
        }
        let king = cell.king_roll % 10 >= 10 - kings || on_promo_row;
        // Breakthrough: a king ends the game (docs/rules.md §8.5): placements have none.
        if king && rules.rules().goal == draughts_engine::Goal::FirstKing {
            continue;
        }
        let name = if algebraic {
            board.algebraic(sq).to_string()
        } else {
            board.number(sq).to_string()
        };
        let text = if king { format!("K{name}") } else { name };
        match color {
            Color::White => white.push(text),
            Color::Black => black.push(text),
        }
    }
    let w = format!("W{}", white.join(","));
    let b = format!("B{}", black.join(","));
    let (first, second) = if black_first { (b, w) } else { (w, b) };
    format!("{}:{first}:{second}", side.letter())
}

fn arb_placement() -> impl Strategy<Value = Position> {
    (
        arb_rules(),
        prop::collection::vec(
            (any::<u8>(), any::<bool>(), any::<u8>()).prop_map(|(roll, black, king_roll)| Cell {
                roll,
                black,
                king_roll,
            }),
            // one cell per square of the largest board (canadian's 72)
            72,
        ),
        1u8..=6,
        0u8..=10,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(rules, cells, fill, kings, black, algebraic, black_first)| {
                let side = if black { Color::Black } else { Color::White };
                let fen = placement_fen(rules, &cells, fill, kings, side, algebraic, black_first);
                Position::from_fen(rules, &fen)
                    .unwrap_or_else(|e| panic!("generated FEN {fen} is valid: {e}"))
            },
        )
}

/// A random valid position of any variant: a playout or a placement.
fn arb_position() -> impl Strategy<Value = Position> {
    prop_oneof![arb_playout(), arb_placement()]
}

/// `cases` unless `PROPTEST_CASES` says otherwise; no regression files are written.
fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

// ---------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------

/// The capture separator of the variant's notation.
fn capture_sep(pos: &Position) -> char {
    match pos.rule_set().rules().notation {
        draughts_engine::NotationStyle::Numeric => 'x',
        draughts_engine::NotationStyle::Algebraic(c) => c,
    }
}

/// A position with its rule set and options, for failure messages.
fn show(pos: &Position) -> String {
    let opts = pos.rule_set().options().to_string();
    let opts = if opts.is_empty() {
        String::new()
    } else {
        format!(" [{opts}]")
    };
    format!("{}{opts} {}", pos.variant(), pos.to_fen())
}

/// Known engine bugs (see `quiet_king_move_text_with_same_capture_squares` and
/// `single_capture_text_with_same_squares_as_a_chain`): a move whose full path is just `X-Y` or `XxY`
/// (a quiet move, or a capture of one piece) can't be written so that it resolves when another legal
/// move also goes from X to Y: the text is reported ambiguous. The round-trip properties skip such
/// moves until it is fixed.
fn two_square_text_clash(moves: &[Move], mv: &Move) -> bool {
    mv.n_captured() <= 1
        && moves
            .iter()
            .any(|m| m != mv && m.from() == mv.from() && m.to() == mv.to())
}

fn count(bb: draughts_engine::Bitboard) -> u32 {
    bb.count()
}

// ---------------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(300))]

    /// Every option set reads back from its canonical text, and a rule set is accepted or refused
    /// whichever way it was written (the text is what stored games carry).
    #[test]
    fn rule_options_text_round_trip(
        vi in 0..Variant::ALL.len(),
        flags in any::<[bool; 2]>(),
        move_limit in prop::option::of(1u16..=1000),
        kings_only in prop::option::of(1u16..=1000),
        repetition in prop::option::of(any::<bool>()),
        endgame_counts in prop::option::of(any::<bool>()),
    ) {
        let opts = RuleOptions {
            no_mandatory_capture: flags[0],
            promote_mid_capture: flags[1],
            move_limit: move_limit.and_then(std::num::NonZeroU16::new),
            kings_only: kings_only.and_then(std::num::NonZeroU16::new),
            repetition,
            endgame_counts,
        };
        let text = opts.to_string();
        prop_assert_eq!(RuleOptions::parse(&text), Ok(opts), "{}", text);
        let variant = Variant::ALL[vi];
        let direct = RuleSet::with_options(variant, opts);
        let read = RuleSet::with_options(variant, RuleOptions::parse(&text).unwrap());
        prop_assert_eq!(direct, read);
    }

    /// `from_fen(to_fen(pos)) == pos`, `to_fen` is stable, and lidraughts counters are accepted.
    #[test]
    fn fen_round_trip(pos in arb_position()) {
        let rules = pos.rule_set();
        let fen = pos.to_fen();
        let back = Position::from_fen(rules, &fen);
        prop_assert_eq!(back.as_ref().ok(), Some(&pos), "{} -> {:?}", fen, back);
        prop_assert_eq!(back.unwrap().to_fen(), fen.clone());
        let with_counters = format!("{fen}:H0:F1");
        prop_assert_eq!(Position::from_fen(rules, &with_counters).ok(), Some(pos));
        let tagged = format!("[FEN \"{fen}\"]");
        prop_assert_eq!(Position::from_fen(rules, &tagged).ok(), Some(pos));
    }

    /// Every legal move's own text, and every path written in full, resolves to that move; a
    /// from-to text resolves exactly as the legal moves with that origin and destination say.
    #[test]
    fn move_text_round_trip(pos in arb_position(), pairs in prop::collection::vec((0u32..70, 0u32..70, any::<bool>()), 8)) {
        let moves = pos.legal_moves();
        for mv in &moves {
            if two_square_text_clash(&moves, mv) {
                continue;
            }
            let text = pos.move_to_text(mv);
            let back = pos.parse_move(&text);
            prop_assert_eq!(back.as_ref(), Ok(mv), "{}: text '{}' of {:?}", show(&pos), text, mv);
        }
        let sep = capture_sep(&pos);
        for p in pos.move_paths() {
            prop_assert!(moves.contains(&p.mv), "{}: path {:?} of a move not in legal_moves", show(&pos), p);
            if two_square_text_clash(&moves, &p.mv) {
                continue;
            }
            let s = if p.mv.is_capture() { sep } else { '-' };
            let text = p
                .path
                .iter()
                .map(|sq| pos.square_name(*sq))
                .collect::<Vec<_>>()
                .join(&s.to_string());
            let back = pos.parse_move(&text);
            prop_assert_eq!(back.as_ref(), Ok(&p.mv), "{}: path text '{}' of {:?}", show(&pos), text, p);
        }
        // Random from-to pairs (numbers 0..70 include squares that don't exist on the board); half of
        // them start on the origin of a legal move.
        let board = pos.board();
        for (i, (a, b, capture)) in pairs.into_iter().enumerate() {
            let a = match moves.get(a as usize % moves.len().max(1)) {
                Some(m) if i % 2 == 0 => board.number(m.from()),
                _ => a,
            };
            let name = |n: u32| match board.square(n) {
                Some(sq) => pos.square_name(sq),
                None => n.to_string(),
            };
            let s = if capture { sep } else { '-' };
            let text = format!("{}{s}{}", name(a), name(b));
            let got = pos.parse_move(&text);
            let candidates: Vec<Move> = match (board.square(a), board.square(b)) {
                (Some(x), Some(y)) => moves
                    .iter()
                    .filter(|m| m.from() == x && m.to() == y && (!capture || m.is_capture()))
                    .copied()
                    .collect(),
                _ => Vec::new(),
            };
            if candidates.iter().any(|m| two_square_text_clash(&moves, m)) {
                // Ambiguous today; after a fix the two-square move may win (see the known bugs above).
                continue;
            }
            match candidates.len() {
                0 => prop_assert!(
                    matches!(got, Err(ResolveError::Illegal { .. })),
                    "{}: '{}' should be illegal, got {:?}", show(&pos), text, got
                ),
                1 => prop_assert_eq!(got, Ok(candidates[0]), "{}: '{}'", show(&pos), text),
                _ => prop_assert!(
                    matches!(got, Err(ResolveError::Ambiguous { .. })),
                    "{}: '{}' should be ambiguous, got {:?}", show(&pos), text, got
                ),
            }
        }
    }

    /// Unique <= all orders <= all paths, for depths 1..=3; perft(1) is the length of the move list.
    #[test]
    fn perft_conventions_are_ordered(pos in arb_position()) {
        let mut list = Vec::new();
        for (c, name) in [(Count::Unique, "unique"), (Count::AllOrders, "all"), (Count::AllPaths, "paths")] {
            pos.legal_moves_into(&mut list, c);
            prop_assert_eq!(pos.perft(1, c), list.len() as u64, "{}: perft(1) {}", show(&pos), name);
        }
        for d in 1..=3 {
            if d == 3 && pos.perft(2, Count::AllPaths) > 3_000 {
                break;
            }
            let u = pos.perft(d, Count::Unique);
            let a = pos.perft(d, Count::AllOrders);
            let p = pos.perft(d, Count::AllPaths);
            prop_assert!(u <= a && a <= p, "{}: perft({}) unique {} all {} paths {}", show(&pos), d, u, a, p);
            let divided: u64 = pos.perft_divide(d, Count::Unique).iter().map(|(_, n)| n).sum();
            prop_assert_eq!(divided, u, "{}: perft_divide({}) sums to perft", show(&pos), d);
        }
    }

    /// perft's fast paths (the last ply counted on bitboards where that is exact, quiet moves played as
    /// the generator finds them) give the counts of the plain tree of legal move lists, in every
    /// convention, for depths 1..=3.
    #[test]
    fn perft_equals_the_move_list_tree(pos in arb_position()) {
        fn tree(pos: &Position, depth: u32, c: Count) -> u64 {
            if depth == 0 {
                return 1;
            }
            let mut list = Vec::new();
            pos.legal_moves_into(&mut list, c);
            list.iter().map(|mv| tree(&pos.play_unchecked(mv), depth - 1, c)).sum()
        }
        for (c, name) in [(Count::Unique, "unique"), (Count::AllOrders, "all"), (Count::AllPaths, "paths")] {
            for d in 1..=3 {
                if d == 3 && pos.perft(2, c) > 3_000 {
                    break;
                }
                prop_assert_eq!(pos.perft(d, c), tree(&pos, d, c), "{}: perft({}) {}", show(&pos), d, name);
            }
        }
    }

    /// Move lists: no duplicates; captured sets are opponent pieces, as many as `n_captured`; playing
    /// flips the side to move, keeps the mover's count, removes the captured pieces, and gives a valid
    /// position (it survives a FEN round trip: no man is left on its own promotion row).
    #[test]
    fn legal_moves_are_consistent(pos in arb_position()) {
        let moves = pos.legal_moves();
        let set: HashSet<Move> = moves.iter().copied().collect();
        prop_assert_eq!(set.len(), moves.len(), "{}: duplicate moves in {:?}", show(&pos), moves);
        let me = pos.side_to_move();
        let opp = me.opposite();
        let mine = pos.pieces(me);
        let theirs = pos.pieces(opp);
        let mandatory = pos.rule_set().mandatory_capture();
        let any_capture = moves.iter().any(Move::is_capture);
        prop_assert_eq!(pos.has_capture(), any_capture, "{}: has_capture", show(&pos));
        for mv in &moves {
            prop_assert!(mine.contains(mv.from()), "{}: {:?} does not start on an own piece", show(&pos), mv);
            prop_assert_eq!(count(mv.captured()), mv.n_captured(), "{}: {:?}", show(&pos), mv);
            prop_assert_eq!(mv.captured().0 & !theirs.0, 0, "{}: {:?} captures a non-opponent square", show(&pos), mv);
            prop_assert_eq!(mv.is_king_move(), pos.kings().contains(mv.from()), "{}: {:?}", show(&pos), mv);
            if mandatory && any_capture {
                prop_assert!(mv.is_capture(), "{}: quiet {:?} though a capture is mandatory", show(&pos), mv);
            }
            let next = pos.play(mv).expect("a legal move plays");
            prop_assert_eq!(next, pos.play_unchecked(mv));
            prop_assert_eq!(next.side_to_move(), opp);
            prop_assert_eq!(count(next.pieces(me)), count(mine), "{}: {:?}", show(&pos), mv);
            prop_assert_eq!(count(next.pieces(opp)) + mv.n_captured(), count(theirs), "{}: {:?}", show(&pos), mv);
            prop_assert!(next.pieces(me).contains(mv.to()), "{}: {:?}", show(&pos), mv);
            prop_assert_eq!(
                next.kings().contains(mv.to()),
                mv.is_king_move() || mv.promotes(),
                "{}: {:?} crowning", show(&pos), mv
            );
            let fen = next.to_fen();
            let back = Position::from_fen(pos.rule_set(), &fen);
            prop_assert_eq!(back.as_ref().ok(), Some(&next), "{}: {:?} gives {} -> {:?}", show(&pos), mv, fen, back);
        }
        // Capture orders: every all-orders entry is a legal move, and every legal move appears.
        let mut all = Vec::new();
        pos.legal_moves_into(&mut all, Count::AllOrders);
        let all_set: HashSet<Move> = all.iter().copied().collect();
        prop_assert_eq!(&all_set, &set, "{}: all-orders moves differ from legal moves", show(&pos));
        let paths = pos.move_paths();
        let path_set: HashSet<Move> = paths.iter().map(|p| p.mv).collect();
        prop_assert_eq!(&path_set, &set, "{}: move_paths differ from legal moves", show(&pos));
        for p in &paths {
            prop_assert_eq!(p.path.len(), p.mv.n_captured().max(1) as usize + 1, "{}: {:?}", show(&pos), p);
            prop_assert_eq!(p.path.first(), Some(&p.mv.from()), "{}: {:?}", show(&pos), p);
            prop_assert_eq!(p.path.last(), Some(&p.mv.to()), "{}: {:?}", show(&pos), p);
            prop_assert_eq!(p.captured.len(), p.mv.n_captured() as usize, "{}: {:?}", show(&pos), p);
            prop_assert!(p.captured.iter().all(|sq| p.mv.captured().contains(*sq)), "{}: {:?}", show(&pos), p);
        }
    }

    /// The capture-choice rule of the variant holds among the legal captures, a man ending on its
    /// promotion row is crowned, and `no-mandatory-capture` only adds the quiet moves.
    #[test]
    fn capture_choice_and_options(pos in arb_position()) {
        let moves = pos.legal_moves();
        let captures: Vec<&Move> = moves.iter().filter(|m| m.is_capture()).collect();
        let n_kings = |m: &Move| m.captured().filter(|sq| pos.kings().contains(*sq)).count();
        let board = pos.board();
        let promo_row = match pos.side_to_move() {
            Color::White => board.top_row,
            Color::Black => board.bottom_row,
        };
        for mv in &moves {
            let ends_on_row = promo_row & (1u128 << mv.to().bit()) != 0;
            if !mv.is_king_move() && ends_on_row {
                prop_assert!(mv.promotes(), "{}: {:?} ends on the last row uncrowned", show(&pos), mv);
            }
            if mv.promotes() && !ends_on_row {
                prop_assert_eq!(pos.rule_set().promotion(), Promotion::Continue, "{}: {:?}", show(&pos), mv);
            }
            prop_assert!(!(mv.is_king_move() && mv.promotes()), "{}: {:?}", show(&pos), mv);
        }
        if let Some(first) = captures.first() {
            match pos.rule_set().rules().precedence {
                Precedence::MostPieces | Precedence::Italian => {
                    prop_assert!(captures.iter().all(|m| m.n_captured() == first.n_captured()), "{}", show(&pos));
                }
                Precedence::MostPiecesThenKings => {
                    prop_assert!(
                        captures.iter().all(|m| m.n_captured() == first.n_captured() && n_kings(m) == n_kings(first)),
                        "{}", show(&pos)
                    );
                }
                Precedence::KingFirst => {
                    prop_assert!(captures.iter().all(|m| m.is_king_move() == first.is_king_move()), "{}", show(&pos));
                }
                Precedence::Frisian => {
                    // docs/rules.md §11.3: one value (a man 100, a king 199), and one kind of mover.
                    let value = |m: &Move| 100 * m.n_captured() as usize + 99 * n_kings(m);
                    prop_assert!(
                        captures.iter().all(|m| value(m) == value(first) && m.is_king_move() == first.is_king_move()),
                        "{}", show(&pos)
                    );
                }
                Precedence::Free => {}
            }
            if pos.rule_set().rules().precedence == Precedence::Italian {
                prop_assert!(captures.iter().all(|m| m.is_king_move() == first.is_king_move()), "{}", show(&pos));
                prop_assert!(captures.iter().all(|m| n_kings(m) == n_kings(first)), "{}", show(&pos));
            }
        }
        if !pos.rule_set().rules().men_capture_kings {
            for m in &captures {
                if !m.is_king_move() {
                    prop_assert_eq!(n_kings(m), 0, "{}: a man takes a king with {:?}", show(&pos), m);
                }
            }
        }
        if !pos.rule_set().mandatory_capture() {
            let opts = RuleOptions { no_mandatory_capture: false, ..pos.rule_set().options() };
            let strict_rules = RuleSet::with_options(pos.variant(), opts).unwrap();
            let strict = Position::from_fen(strict_rules, &pos.to_fen()).unwrap();
            let strict_moves: HashSet<Move> = strict.legal_moves().into_iter().collect();
            let own: HashSet<Move> = moves.iter().copied().collect();
            let own_captures: HashSet<Move> = captures.iter().map(|m| **m).collect();
            if strict.has_capture() {
                prop_assert_eq!(&own_captures, &strict_moves, "{}: captures", show(&pos));
            } else {
                prop_assert_eq!(&own, &strict_moves, "{}", show(&pos));
            }
        }
    }

    /// `hash` agrees with equality and depends on the side to move.
    #[test]
    fn hash_depends_on_position_and_side(pos in arb_position(), other in arb_position()) {
        let copy = Position::from_fen(pos.rule_set(), &pos.to_fen()).unwrap();
        prop_assert_eq!(copy.hash(), pos.hash());
        let flipped = pos.with_side_to_move(pos.side_to_move().opposite());
        prop_assert_ne!(flipped.hash(), pos.hash(), "{}", show(&pos));
        prop_assert_eq!(flipped.with_side_to_move(pos.side_to_move()).hash(), pos.hash());
        prop_assert_eq!(pos.with_side_to_move(pos.side_to_move()), pos);
        if other.rule_set() == pos.rule_set() && other != pos {
            prop_assert_ne!(other.hash(), pos.hash(), "{} {}", show(&pos), show(&other));
        }
        // Transpositions: each child reached through two different move orders hashes the same.
        for mv in pos.legal_moves().iter().take(4) {
            let child = pos.play_unchecked(mv);
            let again = Position::from_fen(child.rule_set(), &child.to_fen()).unwrap();
            prop_assert_eq!(again.hash(), child.hash());
        }
    }
}

/// Engine bug found by `move_text_round_trip`: with `no-mandatory-capture`, the quiet king move
/// `e5-e7` (written so by `move_to_text`) is refused as ambiguous with the capture `e5xc5xc7xe7`.
#[test]
fn quiet_king_move_text_with_same_capture_squares() {
    let opts = RuleOptions {
        no_mandatory_capture: true,
        ..RuleOptions::default()
    };
    let rules = RuleSet::with_options(Variant::Turkish, opts).unwrap();
    let pos = Position::from_fen(rules, "W:WKe5:BKd5,Kc6,Kd7").unwrap();
    let quiet = *pos
        .legal_moves()
        .iter()
        .find(|m| !m.is_capture() && pos.square_name(m.to()) == "e7")
        .expect("e5-e7 is legal");
    assert_eq!(pos.move_to_text(&quiet), "e5-e7");
    assert_eq!(pos.parse_move("e5-e7"), Ok(quiet));
}

/// Engine bug found by `move_text_round_trip`: in Russian (free capture choice) the king on c3 may take
/// b2 and stop on a1, or take five pieces and also end on a1. `move_to_text` writes the one-piece capture
/// as its full path `c3:a1`, which `parse_move` reports as ambiguous: the move can't be entered at all.
#[test]
fn single_capture_text_with_same_squares_as_a_chain() {
    let pos = Position::from_fen(Variant::Russian, "W:WK22:B6,7,14,15,25").unwrap();
    let moves = pos.legal_moves();
    let single = *moves
        .iter()
        .find(|m| m.n_captured() == 1 && pos.square_name(m.to()) == "a1")
        .expect("c3:a1 taking b2 is legal");
    assert!(
        moves
            .iter()
            .any(|m| m.n_captured() == 5 && pos.square_name(m.to()) == "a1")
    );
    let text = pos.move_to_text(&single);
    assert_eq!(pos.parse_move(&text), Ok(single), "text '{text}'");
}

/// One action on a game.
#[derive(Clone, Debug)]
enum Action {
    /// Play the i-th legal move.
    Legal(usize),
    /// Play the i-th legal move by its text.
    LegalText(usize),
    /// Play arbitrary text.
    Text(String),
    /// Play a move that was legal in the start position (often illegal now).
    Stale(usize),
    Resign(bool),
    AgreeDraw,
    TimeForfeit(bool),
}

fn arb_action() -> impl Strategy<Value = Action> {
    prop_oneof![
        6 => any::<usize>().prop_map(Action::Legal),
        4 => any::<usize>().prop_map(Action::LegalText),
        3 => "[0-9a-kx:×K\\- ]{0,14}".prop_map(Action::Text),
        1 => ".{0,12}".prop_map(Action::Text),
        2 => any::<usize>().prop_map(Action::Stale),
        1 => any::<bool>().prop_map(Action::Resign),
        1 => Just(Action::AgreeDraw),
        1 => any::<bool>().prop_map(Action::TimeForfeit),
    ]
}

fn color(black: bool) -> Color {
    if black { Color::Black } else { Color::White }
}

proptest! {
    #![proptest_config(config(200))]

    /// A game never panics on random actions, keeps its invariants and refuses everything once over.
    #[test]
    fn game_survives_random_actions(
        pos in arb_position(),
        halfmove in prop::option::of(0u32..200),
        actions in prop::collection::vec(arb_action(), 0..120),
    ) {
        let fen = match halfmove {
            Some(h) => format!("{}:H{h}:F1", pos.to_fen()),
            None => pos.to_fen(),
        };
        let mut game = Game::from_fen(pos.rule_set(), &fen).expect("a valid FEN");
        prop_assert_eq!(*game.position(), pos);
        let start_moves = pos.legal_moves();
        for action in actions {
            let before = *game.position();
            let n_before = game.moves().len();
            let over = game.status() != GameStatus::Ongoing;
            let legal = before.legal_moves();
            if !over {
                prop_assert!(!legal.is_empty(), "ongoing game without a legal move: {}", show(&before));
            }
            let played: Result<GameStatus, GameError> = match &action {
                Action::Legal(i) if !legal.is_empty() => game.play(&legal[i % legal.len()]),
                Action::LegalText(i)
                    if !legal.is_empty() && !two_square_text_clash(&legal, &legal[i % legal.len()]) =>
                {
                    let text = before.move_to_text(&legal[i % legal.len()]);
                    game.play_text(&text)
                }
                Action::Legal(_) | Action::LegalText(_) => continue,
                Action::Text(t) => game.play_text(t),
                Action::Stale(i) if !start_moves.is_empty() => {
                    game.play(&start_moves[i % start_moves.len()])
                }
                Action::Stale(_) => continue,
                Action::Resign(b) => game.resign(color(*b)).map(GameStatus::Finished),
                Action::AgreeDraw => game.agree_draw().map(GameStatus::Finished),
                Action::TimeForfeit(b) => game.time_forfeit(color(*b)).map(GameStatus::Finished),
            };
            if over {
                prop_assert_eq!(played.as_ref().err(), Some(&GameError::GameOver), "{:?}", action);
            }
            match &played {
                Ok(status) => {
                    prop_assert_eq!(*status, game.status());
                    let is_move = matches!(
                        action,
                        Action::Legal(_) | Action::LegalText(_) | Action::Text(_) | Action::Stale(_)
                    );
                    if is_move {
                        prop_assert_eq!(game.moves().len(), n_before + 1);
                        let mv = *game.moves().last().unwrap();
                        prop_assert!(legal.contains(&mv));
                        prop_assert_eq!(*game.position(), before.play_unchecked(&mv));
                    } else {
                        prop_assert!(matches!(status, GameStatus::Finished(_)));
                        prop_assert_eq!(game.moves().len(), n_before);
                    }
                    if matches!(action, Action::Legal(_) | Action::LegalText(_)) {
                        prop_assert!(!over);
                    }
                }
                Err(_) => {
                    prop_assert_eq!(*game.position(), before, "a refused action changed the position");
                    prop_assert_eq!(game.moves().len(), n_before);
                    if !over {
                        prop_assert!(
                            !matches!(action, Action::Legal(_) | Action::LegalText(_)),
                            "{:?} refused in {}: {:?}", action, show(&before), played
                        );
                    }
                }
            }
        }
    }
}

/// Random strings never make the FEN parser or the move resolver panic.
#[test]
fn parsers_never_panic_on_random_text() {
    let mut runner = proptest::test_runner::TestRunner::new(config(2000));
    let strategy = (
        0..Variant::ALL.len(),
        prop_oneof![
            "[WBwbHFK:,0-9a-z\\- \"\\[\\].]{0,40}",
            ".{0,40}",
            "(W|B):(W|B)[K0-9,\\-a-j]{0,30}(:(W|B|H|F)[K0-9,\\-a-j]{0,30}){0,3}",
        ],
    );
    runner
        .run(&strategy, |(vi, text)| {
            let variant = Variant::ALL[vi];
            if let Ok(pos) = Position::from_fen(variant, &text) {
                let again = Position::from_fen(variant, &pos.to_fen());
                prop_assert_eq!(again.ok(), Some(pos), "{}", text);
            }
            let pos = Position::start(variant);
            if let Ok(mv) = pos.parse_move(&text) {
                prop_assert!(pos.is_legal(&mv), "{}", text);
            }
            let _ = Game::from_fen(variant, &text);
            Ok(())
        })
        .unwrap();
}

proptest! {
    #![proptest_config(config(64))]

    /// Frisian king-move counts along random games that favour quiet king moves (docs/rules.md §11.5):
    /// the count names a king of its side and is at most 3; a king held at 3 while its side has men makes
    /// no quiet move; the FEN carries the count (round trip); and the count follows the moves played.
    #[test]
    fn frisian_king_move_counts_follow_the_game(
        seed in any::<u64>(),
        frysk in any::<bool>(),
        fen_index in 0usize..3,
    ) {
        let variant = if frysk { Variant::Frysk } else { Variant::Frisian };
        // Starts with kings and men on both sides, so the limit matters early.
        let fens = [
            "W:WK46,K50,31,32,33:BK5,K1,18,19,20",
            "W:WK47,36,37,38:BK4,13,14,15",
            "B:WK48,K49,35:BK3,11,12",
        ];
        let mut pos = Position::from_fen(variant, fens[fen_index]).unwrap();
        let mut rng = SplitMix(seed);
        for _ in 0..120 {
            let side = pos.side_to_move();
            let moves = pos.legal_moves();
            if moves.is_empty() {
                break;
            }
            let has_men = pos.material(side).0 > 0;
            if let Some((sq, n)) = pos.king_run(side) {
                prop_assert!((1..=3).contains(&n), "{}", pos.to_fen());
                prop_assert!(pos.pieces(side).contains(sq) && pos.kings().contains(sq), "{}", pos.to_fen());
                prop_assert!(has_men, "a count for a side without men: {}", pos.to_fen());
                if n == 3 {
                    prop_assert!(
                        moves.iter().all(|m| m.is_capture() || m.from() != sq),
                        "{}: the held king moves quietly", pos.to_fen()
                    );
                }
            }
            prop_assert_eq!(Position::from_fen(variant, &pos.to_fen()).unwrap(), pos);
            // perft's last ply reads the held king from the parent (its fast path for quiet moves).
            let two_plies: u64 = moves.iter().map(|m| pos.play_unchecked(m).legal_moves().len() as u64).sum();
            prop_assert_eq!(pos.perft(2, Count::Unique), two_plies, "{}", pos.to_fen());
            let quiet_kings: Vec<&Move> = moves.iter().filter(|m| m.is_king_move() && !m.is_capture()).collect();
            let mv = if !quiet_kings.is_empty() && rng.below(4) != 0 {
                *quiet_kings[rng.below(quiet_kings.len())]
            } else {
                moves[rng.below(moves.len())]
            };
            let before = pos.king_run(side);
            pos = pos.play(&mv).unwrap();
            let after = pos.king_run(side);
            let men_after = pos.material(side).0 > 0;
            if mv.is_king_move() && !mv.is_capture() && men_after {
                let n = match before {
                    Some((sq, n)) if sq == mv.from() => n + 1,
                    _ => 1,
                };
                prop_assert_eq!(after, Some((mv.to(), n)));
            } else {
                prop_assert_eq!(after, None);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// Canadian (docs/rules.md §12): the 12x12 board is symmetric under a half turn with the colours swapped
// (square n <-> 73 - n), which maps the squares the engine keeps above bit 63 (61-72) onto the lowest ones.
// ---------------------------------------------------------------------------------------------------

/// A random canadian placement (men never on their own promotion row, at most 30 a side).
fn arb_canadian() -> impl Strategy<Value = Position> {
    (
        prop::collection::vec(
            (any::<u8>(), any::<bool>(), any::<u8>()).prop_map(|(roll, black, king_roll)| Cell {
                roll,
                black,
                king_roll,
            }),
            72,
        ),
        1u8..=7,
        0u8..=10,
        any::<bool>(),
    )
        .prop_map(|(cells, fill, kings, black)| {
            let rules = RuleSet::new(Variant::Canadian);
            let side = if black { Color::Black } else { Color::White };
            let fen = placement_fen(rules, &cells, fill, kings, side, false, false);
            Position::from_fen(rules, &fen)
                .unwrap_or_else(|e| panic!("generated FEN {fen} is valid: {e}"))
        })
}

/// The position turned half round with the colours swapped: a White man on n becomes a Black man on 73 - n.
fn half_turn(pos: &Position) -> Position {
    let board = pos.board();
    let field = |color: Color| {
        pos.pieces(color)
            .map(|sq| {
                let n = 73 - board.number(sq);
                if pos.kings().contains(sq) {
                    format!("K{n}")
                } else {
                    n.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    let fen = format!(
        "{}:W{}:B{}",
        pos.side_to_move().opposite().letter(),
        field(Color::Black),
        field(Color::White)
    );
    Position::from_fen(pos.rule_set(), &fen).expect("the half turn of a valid position is valid")
}

/// A move as (from, to, captured) in PDN numbers, seen after a half turn when `turn` is set.
fn numbers(pos: &Position, mv: &Move, turn: bool) -> (u32, u32, Vec<u32>) {
    let board = pos.board();
    let n = |sq| {
        let n = board.number(sq);
        if turn { 73 - n } else { n }
    };
    let mut captured: Vec<u32> = mv.captured().map(n).collect();
    captured.sort_unstable();
    (n(mv.from()), n(mv.to()), captured)
}

proptest! {
    #![proptest_config(config(200))]

    /// The half-turned position has the same moves, turned (and the same perft to depth 2), and playing a
    /// move then turning gives the turned position after the turned move.
    #[test]
    fn canadian_moves_are_symmetric_under_a_half_turn(pos in arb_canadian()) {
        let turned = half_turn(&pos);
        let mut ours: Vec<_> = pos.legal_moves().iter().map(|m| numbers(&pos, m, true)).collect();
        let mut theirs: Vec<_> = turned.legal_moves().iter().map(|m| numbers(&turned, m, false)).collect();
        ours.sort();
        theirs.sort();
        prop_assert_eq!(&ours, &theirs, "{}", show(&pos));
        prop_assert_eq!(pos.perft(2, Count::Unique), turned.perft(2, Count::Unique), "{}", show(&pos));
        prop_assert_eq!(pos.perft(2, Count::AllOrders), turned.perft(2, Count::AllOrders), "{}", show(&pos));
        for mv in pos.legal_moves() {
            let after = pos.play(&mv).unwrap();
            let want = numbers(&pos, &mv, true);
            let twin = turned
                .legal_moves()
                .into_iter()
                .find(|m| numbers(&turned, m, false) == want)
                .expect("the turned move exists");
            prop_assert_eq!(half_turn(&after), turned.play(&twin).unwrap(), "{} {:?}", show(&pos), mv);
        }
    }
}
