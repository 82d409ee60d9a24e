//! One test (or a small group) per rule of `docs/rules.md`, the product's rule book; each section names
//! the articles it tests.
//!
//! Every position is built by hand and every expected answer is derived from the rule book on a drawn
//! board (the comment of each test shows the reasoning), never copied from the engine's output.
//!
//! Square names used in the comments: files a.. from White's left, ranks 1.. from White's side.
//! PDN numbers (docs/rules.md §5.1):
//! - 10x10: row r (0 = rank 10) holds 5r+1..5r+5; even rows on files b d f h j, odd rows on a c e g i.
//!   1 = b10, 5 = j10, 46 = a1, 50 = i1.
//! - 8x8 ordinary (english, russian, brazilian, czech): 1..4 = b8 d8 f8 h8, 5..8 = a7 c7 e7 g7, ...,
//!   29..32 = a1 c1 e1 g1.
//! - 8x8 mirrored (italian, spanish; a1 light): 1..4 = a8 c8 e8 g8, 5..8 = b7 d7 f7 h7, ...,
//!   29..32 = b1 d1 f1 h1.
//! - turkish: algebraic squares, all 64.
//! - 12x12 (canadian): row r (0 = rank 12) holds 6r+1..6r+6; even rows on files b d f h j l, odd rows on
//!   a c e g i k. 1 = b12, 6 = l12, 67 = a1, 72 = k1; squares 61-72 (ranks 1-2) sit above bit 63.

use draughts_engine::{
    Bitboard, Color, Count, DrawReason, Game, GameError, GameResult, GameStatus, Move, OptionError,
    Piece, Position, PositionError, ResolveError, Role, RuleOptions, RuleSet, Square, Variant,
    WinReason,
};

use Variant::{
    Antidraughts, Brazilian, Breakthrough, Canadian, Czech, English, Frisian, Frysk, International,
    Italian, Killer, Pool, Portuguese, Russian, Spanish, Turkish,
};

// ---------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------

/// A rule set with options (`"no-mandatory-capture"`, `"move-limit 3"`, ...), which must be valid.
fn with(variant: Variant, options: &str) -> RuleSet {
    let opts = RuleOptions::parse(options).unwrap_or_else(|e| panic!("{options}: {e}"));
    RuleSet::with_options(variant, opts).unwrap_or_else(|e| panic!("{variant} {options}: {e}"))
}

fn pos(rules: impl Into<RuleSet>, fen: &str) -> Position {
    let rules = rules.into();
    Position::from_fen(rules, fen).unwrap_or_else(|e| panic!("{} {fen}: {e}", rules.variant()))
}

/// The legal moves in the variant's own notation, sorted.
fn texts(p: &Position) -> Vec<String> {
    let mut v: Vec<String> = p.legal_moves().iter().map(|m| p.move_to_text(m)).collect();
    v.sort();
    v
}

fn sorted(expected: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// The legal moves of `fen` must be exactly `expected` (as a set; a duplicate would also fail).
fn check(rules: impl Into<RuleSet>, fen: &str, expected: &[&str]) -> Position {
    let rules = rules.into();
    let p = pos(rules, fen);
    assert_eq!(
        texts(&p),
        sorted(expected),
        "{} {fen}{}",
        rules.variant(),
        if rules.options() == RuleOptions::default() {
            String::new()
        } else {
            format!(" [{}]", rules.options())
        }
    );
    p
}

/// Like [`check`], and every legal move captures exactly `n` pieces.
fn check_n(rules: impl Into<RuleSet>, fen: &str, expected: &[&str], n: u32) -> Position {
    let p = check(rules, fen, expected);
    for m in p.legal_moves() {
        assert_eq!(m.n_captured(), n, "{fen}: {} captures", p.move_to_text(&m));
    }
    p
}

/// A square by PDN number (`"32"`) or algebraic name (`"c3"`) on the position's board.
fn sq(p: &Position, name: &str) -> Square {
    let board = p.board();
    let found = if name.bytes().all(|b| b.is_ascii_digit()) {
        board.square(name.parse().unwrap())
    } else {
        let b = name.as_bytes();
        board.square_at(b[0] - b'a', name[1..].parse::<u8>().unwrap() - 1)
    };
    found.unwrap_or_else(|| panic!("no square {name}"))
}

fn piece(p: &Position, name: &str) -> Option<Piece> {
    p.piece_at(sq(p, name))
}

fn man(color: Color) -> Option<Piece> {
    Some(Piece {
        color,
        role: Role::Man,
    })
}

fn king(color: Color) -> Option<Piece> {
    Some(Piece {
        color,
        role: Role::King,
    })
}

/// The legal move written `text` (in the variant's notation), which must exist.
fn mv(p: &Position, text: &str) -> Move {
    p.parse_move(text)
        .unwrap_or_else(|e| panic!("{:?}: {text}: {e}", p))
}

/// The position after the move written `text`.
fn after(p: &Position, text: &str) -> Position {
    p.play(&mv(p, text)).unwrap()
}

fn game(rules: impl Into<RuleSet>, fen: &str) -> Game {
    Game::from_fen(rules, fen).unwrap_or_else(|e| panic!("{fen}: {e}"))
}

/// Plays `plies` plies, White's and Black's moves taken in turn from the two cycles (the side to move
/// first takes from `first`). Every ply but the last must leave the game going; returns the last status.
fn play_cycles(g: &mut Game, first: &[&str], second: &[&str], plies: usize) -> GameStatus {
    let mut status = g.status();
    for i in 0..plies {
        assert_eq!(
            status,
            GameStatus::Ongoing,
            "game ended early, before ply {}",
            i + 1
        );
        let cycle = if i % 2 == 0 { first } else { second };
        let text = cycle[(i / 2) % cycle.len()];
        status = g
            .play_text(text)
            .unwrap_or_else(|e| panic!("ply {} {text}: {e}", i + 1));
    }
    status
}

fn draw(reason: DrawReason) -> GameStatus {
    GameStatus::Finished(GameResult::Draw(reason))
}

fn win(winner: Color, reason: WinReason) -> GameStatus {
    GameStatus::Finished(GameResult::Win { winner, reason })
}

// ---------------------------------------------------------------------------------------------------
// Who moves first; the start positions (docs/rules.md §2.1, §3)
// ---------------------------------------------------------------------------------------------------

#[test]
fn first_to_move_in_the_start_position() {
    // docs/rules.md §3, column "first": Black in english (and pool, §10.1), White everywhere else.
    for v in Variant::ALL {
        let want = if v == English || v == Pool {
            Color::Black
        } else {
            Color::White
        };
        let p = Position::start(v);
        assert_eq!(p.side_to_move(), want, "{v}");
        // "pieces": 20 each on 10x10, 16 each in turkish, 5 in frysk (§11.8), 30 in canadian (§12.2), 12
        // each elsewhere; all men.
        let n = match v {
            International | Antidraughts | Breakthrough | Killer | Frisian => 20,
            Canadian => 30,
            Turkish => 16,
            Frysk => 5,
            _ => 12,
        };
        assert_eq!(p.material(Color::White), (n, 0), "{v}");
        assert_eq!(p.material(Color::Black), (n, 0), "{v}");
    }
}

#[test]
fn start_position_moves() {
    // International: White men on 31..35 (b4 d4 f4 h4 j4) step up to rank 5 (26..30, a5 c5 e5 g5 i5):
    // b4 -> a5 c5, d4 -> c5 e5, f4 -> e5 g5, h4 -> g5 i5, j4 -> i5 only (edge).
    check(
        International,
        International.start_fen(),
        &[
            "31-26", "31-27", "32-27", "32-28", "33-28", "33-29", "34-29", "34-30", "35-30",
        ],
    );
    // English: Black (9..12 = b6 d6 f6 h6) moves first, down to rank 5 (13..16 = a5 c5 e5 g5).
    check(
        English,
        English.start_fen(),
        &["9-13", "9-14", "10-14", "10-15", "11-15", "11-16", "12-16"],
    );
    // Italian and Spanish, mirrored board: White on 21..24 = b3 d3 f3 h3 moves to 17..20 = a4 c4 e4 g4.
    for v in [Italian, Spanish] {
        check(
            v,
            v.start_fen(),
            &[
                "21-17", "21-18", "22-18", "22-19", "23-19", "23-20", "24-20",
            ],
        );
    }
    // Russian, brazilian, czech: White on a3 c3 e3 g3 moves to b4 d4 f4 h4, written algebraically.
    for v in [Russian, Brazilian, Czech] {
        check(
            v,
            v.start_fen(),
            &[
                "a3-b4", "c3-b4", "c3-d4", "e3-d4", "e3-f4", "g3-f4", "g3-h4",
            ],
        );
    }
    // Turkish: rank 2 is blocked by rank 3, rank 3 men can only go forward (sideways is occupied).
    check(
        Turkish,
        Turkish.start_fen(),
        &[
            "a3-a4", "b3-b4", "c3-c4", "d3-d4", "e3-e4", "f3-f4", "g3-g4", "h3-h4",
        ],
    );
}

// ---------------------------------------------------------------------------------------------------
// Men: move direction (docs/rules.md §3.5)
// ---------------------------------------------------------------------------------------------------

#[test]
fn men_move_one_square_diagonally_forward() {
    // International: White man 32 = d4 goes up to c5 (27) or e5 (28); a man on the edge, 36 = a3,
    // has only b4 (31). Black man 19 = g7 goes down to f6 (23) or h6 (24).
    check(International, "W:W32,36:B19", &["32-27", "32-28", "36-31"]);
    check(International, "B:W32,36:B19", &["19-23", "19-24"]);
    // English: Black man 9 = b6 goes down to a5 (13), c5 (14); White man 22 = c3 up to b4 (17), d4 (18).
    check(English, "B:W22:B9", &["9-13", "9-14"]);
    check(English, "W:W22:B9", &["22-17", "22-18"]);
    // Mirrored board: White man 22 = d3 goes up to c4 (18), e4 (19); Black man 10 = c6 down to b5 (13),
    // d5 (14).
    for v in [Italian, Spanish] {
        check(v, "W:W22:B10", &["22-18", "22-19"]);
        check(v, "B:W22:B10", &["10-13", "10-14"]);
    }
    // Algebraic variants: White c3 (22) -> b4, d4; Black f6 (11) -> e5, g5.
    for v in [Russian, Brazilian, Czech] {
        check(v, "W:W22:B11", &["c3-b4", "c3-d4"]);
        check(v, "B:W22:B11", &["f6-e5", "f6-g5"]);
    }
}

#[test]
fn turkish_men_move_forward_or_sideways_never_backward_or_diagonally() {
    // White d3: d4 (forward), c3, e3 (sideways); never d2 or a diagonal.
    check(Turkish, "W:Wd3:Be6", &["d3-c3", "d3-d4", "d3-e3"]);
    // Black e6: forward for Black is down, e5; sideways d6, f6.
    check(Turkish, "B:Wd3:Be6", &["e6-d6", "e6-e5", "e6-f6"]);
}

// ---------------------------------------------------------------------------------------------------
// Men: capture direction (docs/rules.md §3, column "men capture")
// ---------------------------------------------------------------------------------------------------

#[test]
fn men_capture_backward_in_international_russian_brazilian() {
    // International: White man 28 = e5, Black man 33 = f4 behind it (down-right), 39 = g3 empty:
    // the man captures backward, 28x39.
    check(International, "W:W28:B33", &["28x39"]);
    // 8x8: White man d4 (18), Black man c3 (22) behind it, b2 (25) empty: d4 captures to b2.
    check(Russian, "W:W18:B22", &["d4:b2"]);
    check(Brazilian, "W:W18:B22", &["d4xb2"]);
}

#[test]
fn men_capture_forward_only_in_english_italian_spanish_czech() {
    // English, Black to move (Black goes down). Black man d4 (18), White man c5 (14) behind it
    // (up-left), b6 (9) empty: no backward capture, so only the quiet moves to c3 (22), e3 (23).
    check(English, "B:W14:B18", &["18-22", "18-23"]);
    // The same man with White on c3 (22) in front, b2 (25) empty: it must capture 18x25.
    check(English, "B:W22:B18", &["18x25"]);
    // Mirrored board: White man d3 (22), Black man c2 (26) behind (down-left), b1 (29) empty: no
    // capture, quiet moves c4 (18), e4 (19). With Black on e4 (19) in front and f5 (15) empty: 22x15.
    for v in [Italian, Spanish] {
        check(v, "W:W22:B26", &["22-18", "22-19"]);
        check(v, "W:W22:B19", &["22x15"]);
    }
    // Czech: White man d4 (18), Black c3 (22) behind: quiet d4-c5, d4-e5. Black e5 (15) in front,
    // f6 (11) empty: d4:f6.
    check(Czech, "W:W18:B22", &["d4-c5", "d4-e5"]);
    check(Czech, "W:W18:B15", &["d4:f6"]);
}

#[test]
fn turkish_men_capture_forward_or_sideways() {
    // White man d4; Black on d3 (behind), e4 (right), d5 (front). d3 can't be taken (backward).
    // d4xd6 over d5: from d6 nothing adjacent (d7, c6, e6 empty). d4xf4 over e4: from f4 nothing
    // (f5, g4 empty; e4 is gone). One piece each, so the maximum rule keeps both.
    check(Turkish, "W:Wd4:Bd3,e4,d5", &["d4xd6", "d4xf4"]);
}

// ---------------------------------------------------------------------------------------------------
// Kings: flying or short (docs/rules.md §3.3, §3.4)
// ---------------------------------------------------------------------------------------------------

#[test]
fn flying_kings_move_any_distance() {
    // International king on a1 (46), empty long diagonal b2 c3 d4 e5 f6 g7 h8 i9 j10.
    check(
        International,
        "W:WK46:B1",
        &[
            "46-41", "46-37", "46-32", "46-28", "46-23", "46-19", "46-14", "46-10", "46-5",
        ],
    );
    // 8x8 a1 (29): b2 c3 d4 e5 f6 g7 h8 (Black b8 is not on that line).
    for v in [Russian, Brazilian, Czech] {
        check(
            v,
            "W:WK29:B1",
            &[
                "a1-b2", "a1-c3", "a1-d4", "a1-e5", "a1-f6", "a1-g7", "a1-h8",
            ],
        );
    }
    // Spanish (mirrored): b1 (29): a2 (25) one way, c2 d3 e4 f5 g6 h7 (26 22 19 15 12 8) the other.
    check(
        Spanish,
        "W:WK29:B4",
        &["29-25", "29-26", "29-22", "29-19", "29-15", "29-12", "29-8"],
    );
    // Turkish king d4: the whole d file and rank 4 (orthogonal), 14 squares.
    check(
        Turkish,
        "W:WKd4:Bh7",
        &[
            "d4-d1", "d4-d2", "d4-d3", "d4-d5", "d4-d6", "d4-d7", "d4-d8", "d4-a4", "d4-b4",
            "d4-c4", "d4-e4", "d4-f4", "d4-g4", "d4-h4",
        ],
    );
}

#[test]
fn flying_kings_capture_from_afar_and_land_on_any_square_beyond() {
    // International king a1 (46), Black man e5 (28) four squares away: lands on f6 g7 h8 i9 j10.
    check(
        International,
        "W:WK46:B28",
        &["46x23", "46x19", "46x14", "46x10", "46x5"],
    );
    // 8x8 king a1, Black e5: lands f6, g7, h8.
    check(Russian, "W:WK29:B15", &["a1:f6", "a1:g7", "a1:h8"]);
    check(Czech, "W:WK29:B15", &["a1:f6", "a1:g7", "a1:h8"]);
    check(Brazilian, "W:WK29:B15", &["a1xf6", "a1xg7", "a1xh8"]);
    // Spanish (mirrored) king h1 (32) on the long diagonal h1 g2 f3 e4 d5 c6 b7 a8 (32 28 23 19 14 10
    // 5 1), Black on e4: lands d5, c6, b7, a8.
    check(Spanish, "W:WK32:B19", &["32x14", "32x10", "32x5", "32x1"]);
    // Turkish king d4, Black d6: lands d7 or d8.
    check(Turkish, "W:WKd4:Bd6", &["d4xd7", "d4xd8"]);
}

#[test]
fn flying_king_must_land_where_the_chain_goes_on() {
    // Russian king a1, Black c3 and d6. Over c3 the king may land on d4 e5 f6 g7 h8, but only from
    // e5 can it go on (up-left over d6 to c7 or b8); a chain must be completed, so the moves are the
    // two-piece chains a1:c7 and a1:b8 only.
    check(Russian, "W:WK29:B22,10", &["a1:b8", "a1:c7"]);
}

#[test]
fn short_kings_move_and_capture_one_square() {
    // English king d4 (18): c5 14, e5 15, c3 22, e3 23. Black f6 (11) is two squares away: no capture.
    check(English, "W:WK18:B11", &["18-14", "18-15", "18-22", "18-23"]);
    // Czech (flying) on the same position takes f6 from afar, landing g7 or h8: the contrast.
    check(Czech, "W:WK18:B11", &["d4:g7", "d4:h8"]);
    // Black e5 (15) adjacent, f6 (11) empty: the king lands on f6 only, never g7.
    check(English, "W:WK18:B15", &["18x11"]);
    // Kings capture backward too: Black c3 (22) below, b2 (25) empty.
    check(English, "W:WK18:B22", &["18x25"]);
    // Italian (mirrored) king d3 (22): c4 18, e4 19, c2 26, e2 27; Black f5 (15) two squares away.
    check(Italian, "W:WK22:B15", &["22-18", "22-19", "22-26", "22-27"]);
    // Black e4 (19) adjacent, f5 (15) empty: 22x15 only (not g6 = 12).
    check(Italian, "W:WK22:B19", &["22x15"]);
}

// ---------------------------------------------------------------------------------------------------
// Capture is mandatory; chains are completed; no-mandatory-capture (docs/rules.md §2.2, §7.1)
// ---------------------------------------------------------------------------------------------------

#[test]
fn capture_is_mandatory() {
    // White man d4 (32) can take c5 (27) landing b6 (21); White j2 (45) has quiet moves but may not
    // play them.
    check(International, "W:W32,45:B27", &["32x21"]);
    // Same for a king in english: d4 king, Black e5, plus a White man on a3 (21) that could move.
    check(English, "W:WK18,21:B15", &["18x11"]);
}

#[test]
fn a_chain_must_be_completed() {
    // White d4 (32) x c5 (27) lands b6 (21); from b6 it can take c7 (17) landing d8 (12), so it must:
    // 32x12 only, never 32x21.
    check(International, "W:W32:B27,17", &["32x12"]);
}

#[test]
fn no_mandatory_capture_option() {
    // Russian: White c3 (22) can take d4 (18) landing e5 (15) (nothing after it).
    check(Russian, "W:W22,28:B18", &["c3:e5"]);
    // With the option the quiet moves are allowed too: c3-b4 (d4 is occupied) and h2-g3.
    let rs = with(Russian, "no-mandatory-capture");
    check(rs, "W:W22,28:B18", &["c3-b4", "c3:e5", "h2-g3"]);
    // A chain once started must still be completed: with Black also on f6 (11), the capture over d4
    // must go on over f6 to g7 (8); stopping on e5 is not offered.
    check(rs, "W:W22,28:B18,11", &["c3-b4", "c3:g7", "h2-g3"]);
    // English too (8x8 variant).
    let rs = with(English, "no-mandatory-capture");
    check(rs, "B:W22:B18", &["18-23", "18x25"]);
    // The option is a house rule of the 8x8 variants: an error for international.
    let opts = RuleOptions::parse("no-mandatory-capture").unwrap();
    assert!(matches!(
        RuleSet::with_options(International, opts),
        Err(OptionError::NotApplicable {
            option: "no-mandatory-capture",
            ..
        })
    ));
    for v in Variant::ALL {
        let ten = matches!(
            v,
            International | Antidraughts | Breakthrough | Killer | Frisian | Frysk | Canadian
        );
        assert_eq!(RuleSet::with_options(v, opts).is_ok(), !ten, "{v}");
    }
}

// ---------------------------------------------------------------------------------------------------
// Capture precedence (docs/rules.md §3, column "capture choice"; §3.1)
// ---------------------------------------------------------------------------------------------------

#[test]
fn international_maximum_capture_kings_count_one() {
    // White king a1 (46): b2 (41) holds a Black KING, c3 (37) empty, d4 (32) is White's own man, so
    // the king takes one piece (a king) landing on c3 only (nothing to take from c3).
    // White man d4: x c5 (27) -> b6 (21), x c7 (17) -> d8 (12): two men.
    // Maximum rule, kings counting 1: two pieces beat one king.
    check(International, "W:WK46,32:BK41,27,17", &["32x12"]);
    // Without c7 the man takes one man (32x21) and the king one king (46x37): equal, both legal.
    check(International, "W:WK46,32:BK41,27", &["32x21", "46x37"]);
}

#[test]
fn russian_and_english_free_choice() {
    // 8x8, White c3 (22): over b4 (17) to a5 (13), then over b6 (9) to c7 (6): two pieces; or over
    // d4 (18) to e5 (15) and stop (d6, f6, f4 empty): one piece.
    // Russian: free choice, both. Brazilian: maximum, the two-piece chain only.
    check(Russian, "W:W22:B17,9,18", &["c3:c7", "c3:e5"]);
    check(Brazilian, "W:W22:B17,9,18", &["c3xc7"]);
    // English, Black f6 (11): over e5 (15) to d4 (18), then over e3 (23) to f2 (27): two pieces; or over
    // g5 (16) to h4 (20) and stop: one. Free choice: both.
    check(English, "B:W15,16,23:B11", &["11x20", "11x27"]);
}

#[test]
fn spanish_most_pieces_then_most_kings() {
    // Mirrored board, White man d3 (22).
    // Chain A: x c4 (18) -> b5 (13), x c6 (10) -> d7 (6).   Chain B: x e4 (19) -> f5 (15), x g6 (12) -> h7 (8).
    // All men: two pieces each, no king: both.
    check(Spanish, "W:W22:B18,10,19,12", &["22x6", "22x8"]);
    // g6 is a king: B takes as many pieces and more kings: B only.
    check(Spanish, "W:W22:B18,10,19,K12", &["22x8"]);
    // Most pieces first: B reduced to one KING (nothing on g6) against A's two men: A only.
    check(Spanish, "W:W22:B18,10,K19", &["22x6"]);
}

#[test]
fn italian_precedence_most_pieces() {
    // Step 1. White man d3 (22): x c4 (18) -> b5 (13), x c6 (10) -> d7 (6): two; x e4 (19) -> f5 (15):
    // one. Most pieces: 22x6.
    check(Italian, "W:W22:B18,10,19", &["22x6"]);
}

#[test]
fn italian_precedence_king_rather_than_man() {
    // Step 2. White king a6 (9): x b5 (13) -> c4 (18), nothing after (d5 empty, d3 own): one man.
    // White man d3 (22): x e4 (19) -> f5 (15): one man. Equal count: capture with the king.
    check(Italian, "W:W22,K9:B19,13", &["9x18"]);
}

#[test]
fn italian_precedence_most_kings() {
    // Step 3. White king d3 (22). A: x c4 (18) -> b5, x c6 (10) -> d7 (6). B: x e4 (19) -> f5, x g6 (12)
    // -> h7 (8). All men: both (two pieces each, both by a king, no kings taken).
    check(Italian, "W:WK22:B18,10,19,12", &["22x6", "22x8"]);
    // e4 a king: B takes one king, A none: B.
    check(Italian, "W:WK22:B18,10,K19,12", &["22x8"]);
}

#[test]
fn italian_precedence_king_met_earliest() {
    // Step 4. A takes the king c4 first, then the man c6; B takes the man e4 first, then the king g6.
    // Same count, both by a king, one king each: the king met earliest, A.
    check(Italian, "W:WK22:BK18,10,19,K12", &["22x6"]);
}

#[test]
fn italian_men_never_capture_kings() {
    // White man d3 (22), Black KING on e4 (19), f5 empty: no capture; e4 occupied, so only 22-18.
    check(Italian, "W:W22:BK19", &["22-18"]);
    // A man's chain stops before a king: x c4 (18) -> b5 (13); c6 (10) is a king, so it stops on b5.
    check(Italian, "W:W22:B18,K10", &["22x13"]);
    // The rule is Italian only: an English man c3 (22) takes the Black KING d4 (18), landing e5 (15).
    check(English, "W:W22:BK18", &["22x15"]);
}

#[test]
fn czech_king_must_capture_first() {
    // Czech (ordinary 8x8). White king h2 (28): x g3 (24), landing f4 only (e5 is White's own man);
    // from f4 nothing more: one piece.
    // White man a1 (29): x b2 (25) -> c3, x b4 (17) -> a5: two pieces. White man f2 (27): x g3 -> h4: one.
    // A king can capture, so a king must, even though a man could take more.
    check(Czech, "W:WK28,15,29,27:B24,25,17", &["h2:f4"]);
    // Without the king: free choice among the men's captures (no maximum rule).
    check(Czech, "W:W15,29,27:B24,25,17", &["a1:a5", "f2:h4"]);
}

#[test]
fn turkish_maximum_capture() {
    // White man d4. x d5 -> d6, then sideways x e6 -> f6: two. x c4 -> b4: one. Maximum: d4xf6.
    check(Turkish, "W:Wd4:Bd5,e6,c4", &["d4xf6"]);
}

// ---------------------------------------------------------------------------------------------------
// Promotion (docs/rules.md §3, column "promotion during a chain"; §7.3)
// ---------------------------------------------------------------------------------------------------

#[test]
fn international_man_passes_the_last_row_as_a_man() {
    // White man f8 (13): x e9 (8) -> d10 (2) on the last row; as a MAN it goes on backward x c9 (7)
    // -> b8 (11) and stops. Not crowned (the chain does not end on the last row).
    let p = check(International, "W:W13:B8,7", &["13x11"]);
    let m = mv(&p, "13x11");
    assert!(!m.promotes());
    assert_eq!(piece(&after(&p, "13x11"), "11"), man(Color::White));
    // A chain that ENDS on the last row crowns: f8 x e9 -> d10, nothing more.
    let p = check(International, "W:W13:B8", &["13x2"]);
    assert!(mv(&p, "13x2").promotes());
    assert_eq!(piece(&after(&p, "13x2"), "2"), king(Color::White));
    // A quiet step onto the last row crowns: c9 (7) -> b10 (1) or d10 (2).
    let p = check(International, "W:W7:B45", &["7-1", "7-2"]);
    assert!(mv(&p, "7-1").promotes());
    assert_eq!(piece(&after(&p, "7-2"), "2"), king(Color::White));
    // Brazilian is the same (8x8): White f6 (11) x e7 (7) -> d8, on as a man x c7 (6) -> b6 (9).
    let p = check(Brazilian, "W:W11:B7,6", &["f6xb6"]);
    assert_eq!(piece(&after(&p, "f6xb6"), "b6"), man(Color::White));
}

#[test]
fn promote_mid_capture_option() {
    // The international position above with `promote-mid-capture`: crowned on d10, the new king flies
    // over c9 and lands on b8 (11) or a7 (16).
    let rs = with(International, "promote-mid-capture");
    let p = check(rs, "W:W13:B8,7", &["13x11", "13x16"]);
    for m in p.legal_moves() {
        assert!(m.promotes());
    }
    assert_eq!(piece(&after(&p, "13x16"), "16"), king(Color::White));
    // Valid where a man passes the last row as a man (international and its variants, brazilian,
    // turkish, pool); an error for the others.
    let opts = RuleOptions::parse("promote-mid-capture").unwrap();
    for v in Variant::ALL {
        let ok = matches!(
            v,
            International
                | Brazilian
                | Turkish
                | Antidraughts
                | Breakthrough
                | Killer
                | Pool
                | Frisian
                | Frysk
                | Canadian
        );
        let r = RuleSet::with_options(v, opts);
        assert_eq!(r.is_ok(), ok, "{v}: {r:?}");
        if !ok {
            assert!(matches!(
                r,
                Err(OptionError::NotApplicable {
                    option: "promote-mid-capture",
                    ..
                })
            ));
        }
    }
}

#[test]
fn russian_promotes_at_once_and_goes_on_as_a_king() {
    // White f6 (11) x e7 (7) -> d8: crowned at once; as a flying king it goes on over c7 (6) and lands
    // on b6 or a5 (a man could only reach b6).
    let p = check(Russian, "W:W11:B7,6", &["f6:a5", "f6:b6"]);
    for m in p.legal_moves() {
        assert!(m.promotes());
    }
    assert_eq!(piece(&after(&p, "f6:a5"), "a5"), king(Color::White));
}

#[test]
fn promotion_ends_the_move_in_english_italian_spanish_czech() {
    // English, Black c3 (22) x d2 (26) -> e1 (31), Black's last row: crowned and the move ends, though a
    // king on e1 could take f2 (27) -> g3 (24).
    let p = check(English, "B:W26,27:B22", &["22x31"]);
    assert!(mv(&p, "22x31").promotes());
    assert_eq!(piece(&after(&p, "22x31"), "31"), king(Color::Black));
    // Italian and Spanish (mirrored): White c6 (10) x d7 (6) -> e8 (3): ends, though a king could take
    // f7 (7) -> g6 (12).
    for v in [Italian, Spanish] {
        let p = check(v, "W:W10:B6,7", &["10x3"]);
        assert_eq!(piece(&after(&p, "10x3"), "3"), king(Color::White));
    }
    // Czech: White d6 (10) x e7 (7) -> f8 (3): ends, though a king could take g7 (8) -> h6 (12).
    let p = check(Czech, "W:W10:B7,8", &["d6:f8"]);
    assert_eq!(piece(&after(&p, "d6:f8"), "f8"), king(Color::White));
}

#[test]
fn turkish_promotes_at_the_end_and_men_capture_along_the_last_row() {
    // White d6 x d7 -> d8 (last row), still a man, goes on sideways x e8 -> f8, crowned at the end. (The
    // piece on e8 is a king: a black man can't stand on Black's first rank, docs/rules.md §8.3.)
    let p = check(Turkish, "W:Wd6:Bd7,Ke8", &["d6xf8"]);
    assert!(mv(&p, "d6xf8").promotes());
    assert_eq!(piece(&after(&p, "d6xf8"), "f8"), king(Color::White));
    // With `promote-mid-capture` it is a flying king on d8 and may land on f8, g8 or h8.
    let rs = with(Turkish, "promote-mid-capture");
    check(rs, "W:Wd6:Bd7,Ke8", &["d6xf8", "d6xg8", "d6xh8"]);
}

// ---------------------------------------------------------------------------------------------------
// Turkish strike vs immediate removal; the Turkish 180-degree rule (docs/rules.md §1, §3)
// ---------------------------------------------------------------------------------------------------

#[test]
fn turkish_strike_captured_pieces_block_until_the_end_of_the_move() {
    // International. White king a1 (46); Black X d4 (32), Y e7 (18), Z c7 (17), W f2 (43); White men
    // g7 (19), c9 (7), d6 (22) restrict the landings.
    //
    //   10 . . . . . . . . . .
    //    9 . . w . . . . . . .      c9 White
    //    8 . . . . . . . . . .
    //    7 . . Z . Y . w . . .      c7 Z, e7 Y, g7 White
    //    6 . . . w . . . . . .      d6 White
    //    5 . . . . . . . . . .
    //    4 . . . X . . . . . .      d4 X
    //    3 . . . . . . . . . .
    //    2 . . . . . W . . . .      f2 W
    //    1 K . . . . . . . . .      a1 White king
    //      a b c d e f g h i j
    //
    // a1 x d4 lands e5 or f6 (g7 own). From e5: up-left blocked by d6, down-right empty. From f6: x e7
    // lands d8 (c9 own). From d8: x c7 lands b6 or a5. From b6 the down-right line c5, d4 meets X,
    // which stays on the board until the move ends: it blocks, and can't be jumped twice, so W on f2
    // is out of reach. (With removal at once the king would go on over f2 to g1: four pieces.)
    // The White men can take one piece each (d6 x c7, d6 x e7): the three-piece chain wins.
    check_n(
        International,
        "W:WK46,19,7,22:B32,18,17,43",
        &["46x21", "46x26"],
        3,
    );
}

#[test]
fn turkish_removal_at_once_lets_a_square_be_crossed_again() {
    // Turkish. White king c1; Black X c3, Y e5, Z f4, W b3.
    //
    //   5 . . . . Y . . .
    //   4 . . . . . Z . .
    //   3 . W X . . . . .
    //   1 . . K . . . . .
    //     a b c d e f g h
    //
    // c1 x c3 lands c4..c8. From c4: x f4 -> g4/h4, then nothing: two pieces. From c5: x e5 -> f5, x f4
    // (down) -> f3, then left along rank 3: e3, d3, c3 -- X was removed at once, so the square is
    // crossed -- x b3 -> a3: four pieces. Maximum rule: c1xa3 only.
    check_n(Turkish, "W:WKc1:Bc3,e5,f4,b3", &["c1xa3"], 4);
}

#[test]
fn turkish_king_may_not_turn_180_degrees() {
    // Turkish king c4, Black b4 and e4 on its rank. x b4 lands a4; x e4 lands f4, g4 or h4. Turning back
    // from a4 over e4, or from f4..h4 over b4, would take a second piece (the first one is already
    // removed and the line is open) but is a 180-degree turn: every move takes exactly one piece.
    check_n(
        Turkish,
        "W:WKc4:Bb4,e4",
        &["c4xa4", "c4xf4", "c4xg4", "c4xh4"],
        1,
    );
}

// ---------------------------------------------------------------------------------------------------
// What counts as one move (docs/rules.md §6)
// ---------------------------------------------------------------------------------------------------

#[test]
fn the_same_chain_in_two_orders_is_one_move() {
    // International: White man c3 (37), Black b4 (31), d4 (32), b6 (21), d6 (22): a ring. The man goes
    // round it (men capture backward) clockwise or anticlockwise, takes all four and comes back to c3.
    // Same from, to and captured set: one legal move; two capture orders.
    let p = check_n(International, "W:W37:B31,32,21,22", &["37x37"], 4);
    let mut all = Vec::new();
    p.legal_moves_into(&mut all, Count::AllOrders);
    assert_eq!(all.len(), 2);
    assert_eq!(p.move_paths().len(), 2);
    assert_eq!(p.perft(1, Count::Unique), 1);
    assert_eq!(p.perft(1, Count::AllOrders), 2);
    // English short king on c3 (22) in the ring b4 d4 b6 d6 (17 18 9 10): the same.
    let p = check_n(English, "W:WK22:B9,10,17,18", &["22x22"], 4);
    let mut all = Vec::new();
    p.legal_moves_into(&mut all, Count::AllOrders);
    assert_eq!(all.len(), 2);
}

#[test]
fn chains_taking_different_pieces_are_different_moves() {
    // English, Black d6 (10) going down: x c5 (14) -> b4 (17), x c3 (22) -> d2 (26); or x e5 (15) -> f4
    // (19), x e3 (23) -> d2. Same start and end, different pieces: two moves, written with the full
    // path (one square per captured piece) because they share start and end.
    let p = check(English, "B:W14,15,22,23:B10", &["10x17x26", "10x19x26"]);
    let mut all = Vec::new();
    p.legal_moves_into(&mut all, Count::AllOrders);
    assert_eq!(all.len(), 2);
}

// ---------------------------------------------------------------------------------------------------
// Notation (docs/rules.md §5)
// ---------------------------------------------------------------------------------------------------

#[test]
fn move_text_in_each_variant() {
    // Numeric quiet move and capture: 32-28 from the start; White e5 (28) x f6 (23) -> g7 (19).
    let p = Position::start(International);
    assert_eq!(p.move_to_text(&mv(&p, "32-28")), "32-28");
    check(International, "W:W28:B23", &["28x19"]);
    // Algebraic: Russian and Czech `c3-d4`, `c3:e5`; Brazilian `c3xe5`; Turkish `d4xd6`.
    for v in [Russian, Czech] {
        let p = Position::start(v);
        assert_eq!(p.move_to_text(&mv(&p, "c3-d4")), "c3-d4");
        check(v, "W:W22:B18", &["c3:e5"]);
    }
    check(Brazilian, "W:W22:B18", &["c3xe5"]);
    check(Turkish, "W:Wd4:Bd5", &["d4xd6"]);
    // Both numbers and names are accepted as input: 22-18 is c3-d4 on the 8x8 board.
    let p = Position::start(Russian);
    assert_eq!(mv(&p, "22-18"), mv(&p, "c3-d4"));
}

#[test]
fn parse_move_errors() {
    // The two-route position: 10x17x26 and 10x19x26.
    let p = pos(English, "B:W14,15,22,23:B10");
    // Ambiguous: start and end only.
    match p.parse_move("10x26") {
        Err(ResolveError::Ambiguous { candidates, .. }) => {
            assert_eq!(
                sorted(&candidates.iter().map(String::as_str).collect::<Vec<_>>()),
                sorted(&["10x17x26", "10x19x26"])
            );
        }
        other => panic!("10x26 should be ambiguous, got {other:?}"),
    }
    // The full path picks one.
    let m = mv(&p, "10x17x26");
    assert_eq!(p.move_to_text(&m), "10x17x26");
    assert!(m.captured().contains(sq(&p, "14")) && m.captured().contains(sq(&p, "22")));
    // The Hub form `from x to x captured...` too.
    assert_eq!(mv(&p, "10x26x14x22"), m);
    // Illegal: a quiet move when a capture is mandatory; a move from an empty square; a square that
    // does not exist on the board.
    for text in ["10-14", "9-13", "10x40"] {
        assert!(
            matches!(p.parse_move(text), Err(ResolveError::Illegal { .. })),
            "{text}: {:?}",
            p.parse_move(text)
        );
    }
    // Malformed: not a move in any position.
    for text in ["", "hello", "10", "10x", "10-17x26", "x-y"] {
        assert!(
            matches!(p.parse_move(text), Err(ResolveError::Malformed(_))),
            "{text:?}: {:?}",
            p.parse_move(text)
        );
    }
}

// ---------------------------------------------------------------------------------------------------
// FEN (docs/rules.md §5.3)
// ---------------------------------------------------------------------------------------------------

#[test]
fn fen_ranges_kings_colour_order_and_lidraughts_counters() {
    let start = Position::start(International);
    // Ranges.
    let p = pos(International, "W:W31-35:B16-20");
    assert_eq!(p.material(Color::White), (5, 0));
    assert_eq!(p.to_fen(), "W:W31,32,33,34,35:B16,17,18,19,20");
    // Either colour order, and the lidraughts `:H0:F1` suffix.
    assert_eq!(pos(International, "W:B1-20:W31-50"), start);
    assert_eq!(pos(International, "W:W31-50:B1-20:H0:F1"), start);
    // Kings and side to move.
    let p = pos(International, "B:WK46,31:BK5,10");
    assert_eq!(p.side_to_move(), Color::Black);
    assert_eq!(piece(&p, "46"), king(Color::White));
    assert_eq!(piece(&p, "31"), man(Color::White));
    assert_eq!(piece(&p, "5"), king(Color::Black));
    assert_eq!(piece(&p, "10"), man(Color::Black));
    assert_eq!(p.to_fen(), "B:W31,K46:BK5,10");
    // 8x8 mirrored: 1 = a8, 32 = h1.
    let p = pos(Italian, "W:W32:B1");
    assert_eq!(piece(&p, "h1"), man(Color::White));
    assert_eq!(piece(&p, "a8"), man(Color::Black));
    // 8x8 ordinary: 1 = b8, 29 = a1.
    let p = pos(English, "W:W29:B1");
    assert_eq!(piece(&p, "a1"), man(Color::White));
    assert_eq!(piece(&p, "b8"), man(Color::Black));
}

#[test]
fn turkish_fen_uses_algebraic_squares() {
    let p = pos(Turkish, "W:WKd4,e2:Ba7");
    assert_eq!(piece(&p, "d4"), king(Color::White));
    assert_eq!(piece(&p, "e2"), man(Color::White));
    assert_eq!(piece(&p, "a7"), man(Color::Black));
    // Written back in PDN order a8..h8, a7..h1: d4 before e2.
    assert_eq!(p.to_fen(), "W:WKd4,e2:Ba7");
    // Black first, then White: the start position.
    let fen = "W:Ba6,b6,c6,d6,e6,f6,g6,h6,a7,b7,c7,d7,e7,f7,g7,h7:\
               Wa2,b2,c2,d2,e2,f2,g2,h2,a3,b3,c3,d3,e3,f3,g3,h3";
    assert_eq!(pos(Turkish, fen), Position::start(Turkish));
}

#[test]
fn fen_errors() {
    // A man on its own promotion row: White on the top row (1..5), Black on the bottom row (46..50).
    for (v, fen) in [
        (International, "W:W3:B20"),
        (International, "W:W31:B46"),
        (English, "W:W1:B12"),
        (Italian, "W:W21:B32"),
        (Turkish, "W:Wa8:Bh7"),
        (Turkish, "W:Wa2:Bh1"),
    ] {
        assert!(
            matches!(
                Position::from_fen(v, fen),
                Err(PositionError::ManOnPromotionRow { .. })
            ),
            "{v} {fen}: {:?}",
            Position::from_fen(v, fen)
        );
    }
    // The same square twice.
    assert!(matches!(
        Position::from_fen(International, "W:W32:B32"),
        Err(PositionError::Duplicate(_))
    ));
    assert!(matches!(
        Position::from_fen(International, "W:W32,32:B1"),
        Err(PositionError::Duplicate(_))
    ));
    // Unknown squares: 51 on 10x10, 33 on 8x8, i1 on 8x8; a light square by name.
    for (v, fen) in [
        (International, "W:W51:B1"),
        (English, "W:W33:B1"),
        (Russian, "W:Wi1:B1"),
    ] {
        assert!(
            matches!(
                Position::from_fen(v, fen),
                Err(PositionError::NoSuchSquare(..))
            ),
            "{v} {fen}: {:?}",
            Position::from_fen(v, fen)
        );
    }
    assert!(matches!(
        Position::from_fen(Russian, "W:Wa2:B1"),
        Err(PositionError::LightSquare(..))
    ));
    // Syntax errors.
    for fen in ["", "X:W31:B1", "W:W31:Bzz", "W:W31:Q1", "W:W35-31:B1"] {
        assert!(
            matches!(
                Position::from_fen(International, fen),
                Err(PositionError::Fen(_))
            ),
            "{fen:?}: {:?}",
            Position::from_fen(International, fen)
        );
    }
}

/// `Position::from_bitboards` (the endgame table generator's way in) accepts what a FEN with the same
/// pieces gives and refuses what such a FEN is refused for, naming squares in the variant's notation.
#[test]
fn positions_from_bitboards_are_checked_as_fens_are() {
    let set = |v: Variant, squares: &[u32]| {
        let board = v.rules().board.board();
        Bitboard(
            squares
                .iter()
                .map(|&n| 1u128 << board.square(n).unwrap().bit())
                .fold(0, |a, b| a | b),
        )
    };
    let none = Bitboard(0);
    let from = |v: Variant, side: Color, sets: [&[u32]; 4]| {
        Position::from_bitboards(
            v,
            side,
            set(v, sets[0]),
            set(v, sets[1]),
            set(v, sets[2]),
            set(v, sets[3]),
        )
    };
    assert_eq!(
        from(International, Color::Black, [&[31, 32], &[46], &[19], &[]]),
        Position::from_fen(International, "B:W31,32,K46:B19")
    );
    assert_eq!(
        from(English, Color::White, [&[21, 22], &[], &[], &[5]]),
        Position::from_fen(English, "W:W21,22:BK5")
    );
    assert_eq!(
        from(International, Color::White, [&[3], &[], &[20], &[]]),
        Err(PositionError::ManOnPromotionRow {
            color: "white",
            square: "3".into()
        })
    );
    assert_eq!(
        from(International, Color::White, [&[31], &[], &[47], &[]]),
        Err(PositionError::ManOnPromotionRow {
            color: "black",
            square: "47".into()
        })
    );
    assert_eq!(
        from(International, Color::White, [&[32], &[], &[], &[32]]),
        Err(PositionError::Duplicate("32".into()))
    );
    let board = International.rules().board.board();
    let ghost = (!board.mask).trailing_zeros();
    assert!(matches!(
        Position::from_bitboards(
            International,
            Color::White,
            Bitboard(1u128 << ghost),
            none,
            set(International, &[1]),
            none
        ),
        Err(PositionError::NoSuchSquare(..))
    ));
    let turkish = Turkish.rules().board.board();
    let d1 = turkish.square_at(3, 0).unwrap();
    let d5 = turkish.square_at(3, 4).unwrap();
    assert_eq!(
        Position::from_bitboards(
            Turkish,
            Color::White,
            Bitboard(1u128 << d1.bit()),
            none,
            Bitboard(1u128 << d5.bit()),
            none
        ),
        Err(PositionError::ManOnOwnBackRank {
            color: "white",
            square: "d1".into(),
            variant: Turkish
        })
    );
    let twenty_one: Vec<u32> = (30..=50).collect();
    assert!(matches!(
        from(International, Color::White, [&twenty_one, &[], &[1], &[]]),
        Err(PositionError::TooManyPieces { count: 21, .. })
    ));
    assert!(matches!(
        from(Breakthrough, Color::White, [&[], &[30], &[1], &[]]),
        Err(PositionError::KingsAfterBreakthrough { .. })
    ));
}

// ---------------------------------------------------------------------------------------------------
// Positions that cannot occur (docs/rules.md §8)
// ---------------------------------------------------------------------------------------------------

/// The error of `fen`, which must be refused.
fn refused(v: Variant, fen: &str) -> PositionError {
    match Position::from_fen(v, fen) {
        Ok(p) => panic!("{v} {fen}: accepted as {p:?}"),
        Err(e) => e,
    }
}

#[test]
fn no_side_has_more_pieces_than_it_starts_with() {
    // §8.1: 30 white men on 10x10 (21..50), the example.
    assert_eq!(
        refused(International, "W:W21-50:B1-20"),
        PositionError::TooManyPieces {
            color: "white",
            count: 30,
            max: 20,
            variant: International
        }
    );
    // Kings count too: 20 men and one king is 21 pieces.
    assert!(matches!(
        refused(International, "W:W31-50,K26:B1-20"),
        PositionError::TooManyPieces { count: 21, .. }
    ));
    // Black, on 8x8: 13 pieces (1..13).
    assert!(matches!(
        refused(English, "B:W21-32:B1-13"),
        PositionError::TooManyPieces {
            color: "black",
            count: 13,
            max: 12,
            ..
        }
    ));
    for v in [Brazilian, Russian, Italian, Spanish, Czech] {
        assert!(matches!(
            refused(v, "W:W20-32:B1-4"),
            PositionError::TooManyPieces { count: 13, .. }
        ));
    }
    // Turkish: 17 white pieces (rank 2, rank 3, and a king on d5).
    let fen = "W:Wa2,b2,c2,d2,e2,f2,g2,h2,a3,b3,c3,d3,e3,f3,g3,h3,Kd5:Ba7";
    assert_eq!(
        refused(Turkish, fen),
        PositionError::TooManyPieces {
            color: "white",
            count: 17,
            max: 16,
            variant: Turkish
        }
    );
    // Exactly the start count is fine, with kings among them.
    for v in Variant::ALL {
        let _ = Position::start(v);
    }
    let p = pos(International, "W:W31-49,K26:B1-20");
    assert_eq!(p.material(Color::White), (19, 1));
    let p = pos(English, "W:WK1,K2,K3,K4,21-28:B9-12");
    assert_eq!(p.material(Color::White), (8, 4));
}

#[test]
fn turkish_men_never_stand_on_their_first_rank() {
    // §8.3: White's first rank is rank 1, Black's is rank 8; kings may stand there.
    assert_eq!(
        refused(Turkish, "W:Wd1:Ba7"),
        PositionError::ManOnOwnBackRank {
            color: "white",
            square: "d1".into(),
            variant: Turkish
        }
    );
    assert!(matches!(
        refused(Turkish, "B:Wd2:Bh8"),
        PositionError::ManOnOwnBackRank { color: "black", .. }
    ));
    let p = pos(Turkish, "W:WKd1,d2:BKh8,h7");
    assert_eq!(p.material(Color::White), (1, 1));
    // On the diagonal boards men start on their first rank: accepted.
    let _ = pos(International, "W:W46:B5");
    let _ = pos(English, "B:W29:B1");
}

#[test]
fn impossible_positions_are_refused_with_a_clear_message() {
    let e = refused(International, "W:W21-50:B1-20");
    assert_eq!(
        e.to_string(),
        "white has 30 pieces, more than the 20 each side starts with in international"
    );
    let e = refused(Turkish, "W:Wd1:Ba7");
    assert_eq!(
        e.to_string(),
        "a white man on d1 stands on its own first rank, which a man can never return to in turkish"
    );
}

// ---------------------------------------------------------------------------------------------------
// Result notation, variant keys (docs/rules.md §5.5, §5.6)
// ---------------------------------------------------------------------------------------------------

#[test]
fn result_notation_per_variant() {
    // §5.5: two points a game in international and brazilian (and frisian, §11.7, and canadian, §12.2),
    // one point elsewhere.
    for v in Variant::ALL {
        let (w, d, b) = if matches!(
            v,
            International
                | Brazilian
                | Antidraughts
                | Breakthrough
                | Killer
                | Frisian
                | Frysk
                | Canadian
        ) {
            ("2-0", "1-1", "0-2")
        } else {
            ("1-0", "1/2-1/2", "0-1")
        };
        assert_eq!(v.result_text(Some(Color::White)), w, "{v}");
        assert_eq!(v.result_text(None), d, "{v}");
        assert_eq!(v.result_text(Some(Color::Black)), b, "{v}");
        let won = GameResult::Win {
            winner: Color::Black,
            reason: WinReason::Resignation,
        };
        assert_eq!(won.result_text(v), b);
        assert_eq!(GameResult::Draw(DrawReason::Agreement).result_text(v), d);
    }
}

#[test]
fn stored_keys_are_strict() {
    for v in Variant::ALL {
        assert_eq!(Variant::from_key(v.key()), Ok(v));
        // GameType 20 is international; antidraughts, breakthrough and killer share it; frysk shares
        // frisian's 40 (§5.6).
        let by_number = Variant::from_pdn_game_type(v.pdn_game_type());
        if matches!(v, Antidraughts | Breakthrough | Killer) {
            assert_eq!(by_number, Some(International));
        } else if v == Frysk {
            assert_eq!(by_number, Some(Frisian));
        } else {
            assert_eq!(by_number, Some(v));
        }
        // User input is lenient (case, aliases, PDN numbers); stored keys are not.
        assert_eq!(v.key().to_uppercase().parse::<Variant>(), Ok(v));
        assert!(Variant::from_key(&v.key().to_uppercase()).is_err());
        assert!(Variant::from_key(&format!(" {}", v.key())).is_err());
        assert!(Variant::from_key(&v.pdn_game_type().to_string()).is_err());
    }
    assert!(Variant::from_key("normal").is_err());
    assert!(Variant::from_key("american").is_err());
    assert_eq!("normal".parse::<Variant>(), Ok(International));
    assert_eq!(Variant::from_pdn_game_type(31), None);
}

// ---------------------------------------------------------------------------------------------------
// Game: results and draw rules (docs/rules.md §2.3, §2.4, §4, §7.2)
// ---------------------------------------------------------------------------------------------------

/// International kings shuffle: White a1 (46) <-> b2 (41), Black j2 (45) <-> i3 (40); White man a3 (36)
/// and Black man a7 (16) stay put (so no endgame rule applies). No piece is ever on an enemy king's line.
const INTL_SHUFFLE: &str = "W:WK46,36:BK45,16";
const INTL_WHITE: [&str; 2] = ["46-41", "41-46"];
const INTL_BLACK: [&str; 2] = ["45-40", "40-45"];

/// 8x8 ordinary kings shuffle: White a1 <-> b2, Black h2 <-> g1; White man a3, Black man a7.
const EIGHT_SHUFFLE: &str = "W:WK29,21:BK28,5";
const EIGHT_WHITE: [&str; 2] = ["29-25", "25-29"];
const EIGHT_BLACK: [&str; 2] = ["28-32", "32-28"];

#[test]
fn threefold_repetition() {
    // After 4 plies the start position is back (second time), after 8 the third time: a draw.
    let mut g = game(International, INTL_SHUFFLE);
    assert_eq!(
        play_cycles(&mut g, &INTL_WHITE, &INTL_BLACK, 8),
        draw(DrawReason::Repetition)
    );
    for v in [Russian, Brazilian] {
        let mut g = game(v, EIGHT_SHUFFLE);
        assert_eq!(
            play_cycles(&mut g, &EIGHT_WHITE, &EIGHT_BLACK, 8),
            draw(DrawReason::Repetition),
            "{v}"
        );
    }
    // Turkish: kings a1 <-> b1 and h8 <-> g8, never on each other's file or rank.
    let mut g = game(Turkish, "W:WKa1:BKh8");
    assert_eq!(
        play_cycles(&mut g, &["a1-b1", "b1-a1"], &["h8-g8", "g8-h8"], 8),
        draw(DrawReason::Repetition)
    );
}

#[test]
fn no_repetition_rule_in_english_italian_czech_spanish() {
    // docs/rules.md §4.5: these variants have only the 40-move rule. Repeating the position three
    // (and five) times does not end the game.
    for (v, fen, w, b) in [
        (
            English,
            "W:WK29:BK28",
            ["29-25", "25-29"],
            ["28-32", "32-28"],
        ),
        (Czech, "W:WK29:BK28", ["29-25", "25-29"], ["28-32", "32-28"]),
        (
            Italian,
            "W:WK29:BK16",
            ["29-25", "25-29"],
            ["16-20", "20-16"],
        ),
        (
            Spanish,
            "W:WK29:BK16",
            ["29-25", "25-29"],
            ["16-20", "20-16"],
        ),
    ] {
        let mut g = game(v, fen);
        assert_eq!(play_cycles(&mut g, &w, &b, 16), GameStatus::Ongoing, "{v}");
    }
}

#[test]
fn forty_moves_without_capture_or_promotion() {
    // English, Czech (ordinary 8x8): kings a1 <-> b2 and h2 <-> g1. Italian, Spanish (mirrored): b1 (29)
    // <-> a2 (25) and h5 (16) <-> g4 (20). No capture, no promotion: drawn after 40 moves each (80 plies).
    for (v, fen, w, b) in [
        (
            English,
            "W:WK29:BK28",
            ["29-25", "25-29"],
            ["28-32", "32-28"],
        ),
        (Czech, "W:WK29:BK28", ["29-25", "25-29"], ["28-32", "32-28"]),
        (
            Italian,
            "W:WK29:BK16",
            ["29-25", "25-29"],
            ["16-20", "20-16"],
        ),
        (
            Spanish,
            "W:WK29:BK16",
            ["29-25", "25-29"],
            ["16-20", "20-16"],
        ),
    ] {
        let mut g = game(v, fen);
        assert_eq!(
            play_cycles(&mut g, &w, &b, 80),
            draw(DrawReason::NoProgress { moves: 40 }),
            "{v}"
        );
    }
}

#[test]
fn forty_move_rule_counts_man_moves_and_resets_on_promotion() {
    // English: the counter is reset by a capture or a promotion, not by an ordinary man move.
    // White men c3 (22) and g7 (8), Black king h2 (28), far apart. c3-d4 (22-18) is a man move without
    // promotion: counted.
    let mut g = game(English, "W:W22,8:BK28");
    g.play_text("22-18").unwrap();
    assert_eq!(g.no_progress_plies(), 1);
    g.play_text("28-32").unwrap();
    assert_eq!(g.no_progress_plies(), 2);
    // g7 (8) -> h8 (4): promotion, reset.
    g.play_text("8-4").unwrap();
    assert_eq!(g.no_progress_plies(), 0);
    // International: a man move resets (only kings moving counts).
    let mut g = game(International, INTL_SHUFFLE);
    g.play_text("46-41").unwrap();
    assert_eq!(g.no_progress_plies(), 1);
    g.play_text("16-21").unwrap();
    assert_eq!(g.no_progress_plies(), 0);
}

#[test]
fn twenty_five_kings_only_moves_international() {
    // The lidraughts `H` counter seeds the count: 48 plies done, 2 more make 25 moves each.
    let fen = format!("{INTL_SHUFFLE}:H48:F30");
    let mut g = game(International, &fen);
    assert_eq!(g.play_text("46-41").unwrap(), GameStatus::Ongoing);
    assert_eq!(
        g.play_text("45-40").unwrap(),
        draw(DrawReason::NoProgress { moves: 25 })
    );
    // A man move resets it: a3-b4 (36-31) then two king moves: still going.
    let mut g = game(International, &fen);
    g.play_text("36-31").unwrap();
    g.play_text("45-40").unwrap();
    assert_eq!(g.play_text("46-41").unwrap(), GameStatus::Ongoing);
    assert_eq!(g.no_progress_plies(), 2);
}

#[test]
fn twenty_five_kings_only_moves_brazilian() {
    // Brazilian shares the international draw rules.
    let mut g = game(Brazilian, &format!("{EIGHT_SHUFFLE}:H48"));
    assert_eq!(g.play_text("a1-b2").unwrap(), GameStatus::Ongoing);
    assert_eq!(
        g.play_text("h2-g1").unwrap(),
        draw(DrawReason::NoProgress { moves: 25 })
    );
}

#[test]
fn fifteen_kings_only_moves_russian() {
    let mut g = game(Russian, &format!("{EIGHT_SHUFFLE}:H28"));
    assert_eq!(g.play_text("a1-b2").unwrap(), GameStatus::Ongoing);
    assert_eq!(
        g.play_text("h2-g1").unwrap(),
        draw(DrawReason::NoProgress { moves: 15 })
    );
}

#[test]
fn move_limit_option() {
    // `move-limit 3`: 3 moves by each side of kings only is a draw (6 plies; the start position occurs
    // only twice by then, so it is not a repetition).
    let rs = with(International, "move-limit 3");
    let mut g = game(rs, INTL_SHUFFLE);
    assert_eq!(
        play_cycles(&mut g, &INTL_WHITE, &INTL_BLACK, 6),
        draw(DrawReason::NoProgress { moves: 3 })
    );
    // English with `move-limit 2`: 4 plies.
    let rs = with(English, "move-limit=2");
    let mut g = game(rs, "W:WK29:BK28");
    assert_eq!(
        play_cycles(&mut g, &["29-25", "25-29"], &["28-32", "32-28"], 4),
        draw(DrawReason::NoProgress { moves: 2 })
    );
    // Bad values.
    assert!(matches!(
        RuleOptions::parse("move-limit 0"),
        Err(OptionError::BadMoveLimit(_))
    ));
    assert!(matches!(
        RuleOptions::parse("move-limit"),
        Err(OptionError::BadMoveLimit(_))
    ));
    assert!(matches!(
        RuleOptions::parse("no-such-rule"),
        Err(OptionError::Unknown(_))
    ));
}

// ---------------------------------------------------------------------------------------------------
// Draw rules as game options (docs/rules.md §7.2, §7.4-§7.6)
// ---------------------------------------------------------------------------------------------------

/// The reason an option list is refused for a variant (it must parse).
fn refused_options(variant: Variant, options: &str) -> OptionError {
    let opts = RuleOptions::parse(options).unwrap_or_else(|e| panic!("{options}: {e}"));
    RuleSet::with_options(variant, opts).expect_err(options)
}

#[test]
fn unset_draw_options_keep_the_variant_rules() {
    // §4: every variant's draw rules apply when no option is set, and an option set to the variant's own
    // value changes nothing.
    for v in Variant::ALL {
        assert_eq!(RuleSet::new(v).draw_rules(), v.rules().draw, "{v}");
        let same = format!(
            "repetition={}",
            if v.rules().draw.repetition {
                "on"
            } else {
                "off"
            }
        );
        assert_eq!(with(v, &same).draw_rules(), v.rules().draw, "{v} {same}");
    }
    assert_eq!(
        with(International, "endgame-counts=on").draw_rules(),
        International.rules().draw
    );
}

#[test]
fn repetition_option_off() {
    // §7.5 `repetition=off` in international: the shuffle of `threefold_repetition` brings the start
    // position back a third time after 8 plies, a fifth after 16, and the game goes on.
    let mut g = game(with(International, "repetition=off"), INTL_SHUFFLE);
    assert_eq!(
        play_cycles(&mut g, &INTL_WHITE, &INTL_BLACK, 16),
        GameStatus::Ongoing
    );
    // The kings-only count still applies: 25 moves each (50 plies) end it.
    assert_eq!(
        play_cycles(&mut g, &INTL_WHITE, &INTL_BLACK, 34),
        draw(DrawReason::NoProgress { moves: 25 })
    );
}

#[test]
fn repetition_off_needs_a_count() {
    // §7.5: without repetition and without a count nothing would end a game of kings shuffling (turkish,
    // pool and frisian have no count of their own): refused, unless a count is given with it.
    for v in [Turkish, Pool, Frisian, Frysk] {
        assert_eq!(
            refused_options(v, "repetition=off"),
            OptionError::Endless(v),
            "{v}"
        );
        assert!(
            !with(v, "repetition=off,kings-only=30")
                .draw_rules()
                .repetition
        );
        assert!(
            !with(v, "repetition=off,move-limit=30")
                .draw_rules()
                .repetition
        );
    }
    // Breakthrough ends at the first king; the §4.5 variants keep their 40-move count.
    with(Breakthrough, "repetition=off");
    with(English, "repetition=off");
    // With repetition off and a kings-only count, turkish kings shuffling end by the count.
    let mut g = game(with(Turkish, "repetition=off,kings-only=5"), "W:WKa1:BKh8");
    assert_eq!(
        play_cycles(&mut g, &["a1-b1", "b1-a1"], &["h8-g8", "g8-h8"], 10),
        draw(DrawReason::NoProgress { moves: 5 })
    );
}

#[test]
fn repetition_option_on() {
    // §7.5 `repetition=on` in english (§4.5 has none, see `no_repetition_rule_in_english_italian_czech_spanish`):
    // the third occurrence after 8 plies is a draw.
    for v in [English, Czech] {
        let mut g = game(with(v, "repetition=on"), "W:WK29:BK28");
        assert_eq!(
            play_cycles(&mut g, &["29-25", "25-29"], &["28-32", "32-28"], 8),
            draw(DrawReason::Repetition),
            "{v}"
        );
    }
}

#[test]
fn kings_only_option() {
    // §7.4 `kings-only 3` in international: the count of §4.2 shortened, 3 moves each (6 plies; the
    // start position occurs only twice by then).
    let mut g = game(with(International, "kings-only=3"), INTL_SHUFFLE);
    assert_eq!(
        play_cycles(&mut g, &INTL_WHITE, &INTL_BLACK, 6),
        draw(DrawReason::NoProgress { moves: 3 })
    );
    // Turkish has no count (§4): `kings-only 2` adds one. Kings a1 <-> b1 and h8 <-> g8: 4 plies.
    let mut g = game(with(Turkish, "kings-only 2"), "W:WKa1:BKh8");
    assert_eq!(
        play_cycles(&mut g, &["a1-b1", "b1-a1"], &["h8-g8", "g8-h8"], 4),
        draw(DrawReason::NoProgress { moves: 2 })
    );
    // In english it replaces the 40-move count: a man move now resets the count (under §4.5 it counts,
    // see `forty_move_rule_counts_man_moves_and_resets_on_promotion`), king moves count.
    let mut g = game(with(English, "kings-only=2"), "W:W22,K29:BK28");
    g.play_text("22-18").unwrap();
    assert_eq!(g.no_progress_plies(), 0);
    assert_eq!(
        play_cycles(&mut g, &["28-32", "32-28"], &["29-25", "25-29"], 4),
        draw(DrawReason::NoProgress { moves: 2 })
    );
    // Without the option the same moves go on (40 moves each).
    let mut g = game(English, "W:W22,K29:BK28");
    g.play_text("22-18").unwrap();
    assert_eq!(g.no_progress_plies(), 1);
    assert_eq!(
        play_cycles(&mut g, &["28-32", "32-28"], &["29-25", "25-29"], 4),
        GameStatus::Ongoing
    );
}

#[test]
fn kings_only_option_refused() {
    // Zero, over 1000, missing or not a number.
    for text in [
        "kings-only 0",
        "kings-only=1001",
        "kings-only",
        "kings-only=x",
    ] {
        assert!(
            matches!(RuleOptions::parse(text), Err(OptionError::BadKingsOnly(_))),
            "{text}"
        );
    }
    // Built in code, the same bound.
    let opts = RuleOptions {
        kings_only: std::num::NonZeroU16::new(5000),
        ..RuleOptions::default()
    };
    assert_eq!(
        RuleSet::with_options(International, opts),
        Err(OptionError::BadKingsOnly("5000".into()))
    );
    // Breakthrough: the first king ends the game (§9.3), so no king ever moves.
    assert!(matches!(
        refused_options(Breakthrough, "kings-only 25"),
        OptionError::NotApplicable {
            option: "kings-only",
            ..
        }
    ));
    // One no-progress count per game: `move-limit` and `kings-only` together are refused.
    assert_eq!(
        refused_options(International, "move-limit 40, kings-only 30"),
        OptionError::Conflict
    );
}

#[test]
fn endgame_counts_option_off() {
    // §7.6 `endgame-counts=off`: king and man against a lone king (`fmjd_endgame_five_moves`) goes on past
    // 5 moves each.
    let mut g = game(with(International, "endgame-counts=off"), "W:WK46,50:BK35");
    assert_eq!(
        play_cycles(&mut g, &ENDGAME_WHITE, &ENDGAME_BLACK, 10),
        GameStatus::Ongoing
    );
    // Frisian's own counts (§11.6) too: one king each goes on past 2 moves each.
    let mut g = game(with(Frisian, "endgame-counts=off"), "W:WK47:BK1");
    assert_eq!(
        play_cycles(&mut g, &["47-42", "42-47"], &["1-6", "6-1"], 4),
        GameStatus::Ongoing
    );
    // Off is accepted (and changes nothing) where there are no counts.
    assert_eq!(
        with(English, "endgame-counts off").draw_rules(),
        English.rules().draw
    );
}

#[test]
fn endgame_counts_option_on() {
    // §7.6 `endgame-counts=on` in russian (§4.4 has none): the position of
    // `fmjd_endgame_rule_in_brazilian_not_in_russian` is drawn after 5 moves each, as in brazilian.
    let (w, b) = (
        ["29-22", "22-25", "25-18", "18-29"],
        ["7-16", "16-20", "20-7"],
    );
    let mut g = game(with(Russian, "endgame-counts=on"), "W:WK29,28:BK7");
    assert_eq!(
        play_cycles(&mut g, &w, &b, 10),
        draw(DrawReason::Endgame { moves: 5 })
    );
    // Killer (§9.4, off by default) accepts it.
    assert!(
        RuleSet::with_options(Killer, RuleOptions::parse("endgame-counts=on").unwrap()).is_ok()
    );
    // Refused where the counts make no sense: short kings, antidraughts, breakthrough.
    for v in [English, Italian, Antidraughts, Breakthrough] {
        assert!(
            matches!(
                refused_options(v, "endgame-counts=on"),
                OptionError::NotApplicable {
                    option: "endgame-counts",
                    ..
                }
            ),
            "{v}"
        );
    }
}

#[test]
fn draw_options_text_round_trip() {
    // The canonical text (stored in game records) reads back to the same options; order and spelling of
    // the input do not matter.
    let o = RuleOptions::parse("Endgame-Counts off repetition=ON kings-only 30").unwrap();
    assert_eq!(
        o.to_string(),
        "kings-only=30,repetition=on,endgame-counts=off"
    );
    assert_eq!(RuleOptions::parse(&o.to_string()), Ok(o));
    assert_eq!(
        RuleOptions::parse("repetition=maybe"),
        Err(OptionError::BadSwitch {
            option: "repetition",
            value: "maybe".into()
        })
    );
    assert!(matches!(
        RuleOptions::parse("endgame-counts"),
        Err(OptionError::BadSwitch { .. })
    ));
    // A text written before these options existed reads as it did.
    let old = RuleOptions::parse("no-mandatory-capture,move-limit=40").unwrap();
    assert_eq!(old.move_limit.map(|n| n.get()), Some(40));
    assert_eq!(
        (old.kings_only, old.repetition, old.endgame_counts),
        (None, None, None)
    );
}

/// International endgame cycles: the White king goes round a1 -> c3 -> b2 -> d4 -> a1 (46 37 41 32) on the
/// long diagonal, the Black king round j4 -> h6 -> i5 -> j4 (35 24 30) on its line; periods 4 and 3, so a
/// position comes back only every 12 moves (at most twice in 16 moves: no repetition draw).
const ENDGAME_WHITE: [&str; 4] = ["46-37", "37-41", "41-32", "32-46"];
const ENDGAME_BLACK: [&str; 3] = ["35-24", "24-30", "30-35"];

#[test]
fn fmjd_endgame_five_moves() {
    // King and man (i1 = 50) against a lone king: 5 moves each.
    let mut g = game(International, "W:WK46,50:BK35");
    assert_eq!(
        play_cycles(&mut g, &ENDGAME_WHITE, &ENDGAME_BLACK, 10),
        draw(DrawReason::Endgame { moves: 5 })
    );
    // A lone king against a lone king is also "two or fewer pieces".
    let mut g = game(International, "W:WK46:BK35");
    assert_eq!(
        play_cycles(&mut g, &ENDGAME_WHITE, &ENDGAME_BLACK, 10),
        draw(DrawReason::Endgame { moves: 5 })
    );
}

#[test]
fn fmjd_endgame_rule_in_brazilian_not_in_russian() {
    // 8x8: White king a1 -> c3 -> b2 -> d4 -> a1 (29 22 25 18) on the long diagonal and a man on h2 (28);
    // Black lone king e7 -> g5 -> h4 -> e7 (7 16 20) on the line d8-h4. Nobody is ever on an enemy
    // king's line; periods 4 and 3, no repetition within 10 plies.
    let (w, b) = (
        ["29-22", "22-25", "25-18", "18-29"],
        ["7-16", "16-20", "20-7"],
    );
    let mut g = game(Brazilian, "W:WK29,28:BK7");
    assert_eq!(
        play_cycles(&mut g, &w, &b, 10),
        draw(DrawReason::Endgame { moves: 5 })
    );
    // Russian has no endgame rule (docs/rules.md §4.4): still going.
    let mut g = game(Russian, "W:WK29,28:BK7");
    assert_eq!(play_cycles(&mut g, &w, &b, 10), GameStatus::Ongoing);
}

#[test]
fn fmjd_endgame_sixteen_moves() {
    // King and two men (i1 = 50, j2 = 45) against a lone king: 16 moves each (32 plies), not 5.
    let mut g = game(International, "W:WK46,50,45:BK35");
    assert_eq!(
        play_cycles(&mut g, &ENDGAME_WHITE, &ENDGAME_BLACK, 32),
        draw(DrawReason::Endgame { moves: 16 })
    );
}

#[test]
fn agreed_draw_and_resignation() {
    let mut g = Game::new(Position::start(International));
    assert_eq!(
        g.agree_draw().unwrap(),
        GameResult::Draw(DrawReason::Agreement)
    );
    assert_eq!(g.status(), draw(DrawReason::Agreement));

    let mut g = Game::new(Position::start(English));
    assert_eq!(
        g.resign(Color::White).unwrap(),
        GameResult::Win {
            winner: Color::Black,
            reason: WinReason::Resignation
        }
    );
    assert_eq!(g.status(), win(Color::Black, WinReason::Resignation));
}

#[test]
fn win_when_the_opponent_has_no_pieces() {
    // White d4 (32) x c5 (27): Black has nothing left.
    let mut g = game(International, "W:W32:B27");
    assert_eq!(
        g.play_text("32x21").unwrap(),
        win(Color::White, WinReason::NoPieces)
    );
}

#[test]
fn win_when_the_opponent_has_no_legal_move() {
    // English. White man a1 (29); Black b2 (25) and d4 (18), Black to move. d4-c3 (18-22) leaves the
    // White man with no step (b2 occupied) and no capture (c3 behind b2 occupied): White has lost.
    let mut g = game(English, "B:W29:B18,25");
    assert_eq!(g.status(), GameStatus::Ongoing);
    assert_eq!(
        g.play_text("18-22").unwrap(),
        win(Color::Black, WinReason::NoMoves)
    );
    // A position given with the blocked side to move is already decided.
    let g = game(English, "W:W29:B22,25");
    assert_eq!(g.status(), win(Color::Black, WinReason::NoMoves));
}

#[test]
fn nothing_is_played_after_the_end() {
    let mut g = game(International, "W:W32:B27");
    g.play_text("32x21").unwrap();
    assert!(matches!(g.play_text("21-16"), Err(GameError::GameOver)));
    assert!(matches!(g.resign(Color::Black), Err(GameError::GameOver)));
    assert!(matches!(g.agree_draw(), Err(GameError::GameOver)));
    let mut g = Game::new(Position::start(International));
    g.agree_draw().unwrap();
    let m = mv(g.position(), "32-28");
    assert!(matches!(g.play(&m), Err(GameError::GameOver)));
    // An illegal move in an ongoing game is refused without ending it.
    let mut g = Game::new(Position::start(International));
    assert!(matches!(
        g.play_text("32-27x21"),
        Err(GameError::Move(ResolveError::Malformed(_)))
    ));
    assert!(matches!(
        g.play_text("32-23"),
        Err(GameError::Move(ResolveError::Illegal { .. }))
    ));
    assert_eq!(g.status(), GameStatus::Ongoing);
    assert!(g.moves().is_empty());
}

// ---------------------------------------------------------------------------------------------------
// Variants of international draughts (docs/rules.md §9) and other 8x8 variants (§10)
// ---------------------------------------------------------------------------------------------------

fn finished(g: &Game) -> GameResult {
    match g.status() {
        GameStatus::Finished(r) => r,
        GameStatus::Ongoing => panic!("still going: {:?}", g.position()),
    }
}

#[test]
fn antidraughts_the_side_left_without_a_move_wins() {
    // §9.2. White man e5 (28) must take d6 (22) landing c7 (17); Black, to move, has no pieces: Black wins.
    let mut g = Game::from_fen(Antidraughts, "W:W28:B22").unwrap();
    g.play_text("28x17").unwrap();
    let r = finished(&g);
    assert_eq!(
        r,
        GameResult::Win {
            winner: Color::Black,
            reason: WinReason::GaveAwayAllPieces
        }
    );
    assert_eq!(r.result_text(Antidraughts), "0-2");
    assert_eq!(
        r.describe(),
        "black wins: black has no pieces left (antidraughts)"
    );
    // The same in international: White wins.
    let mut g = Game::from_fen(International, "W:W28:B22").unwrap();
    g.play_text("28x17").unwrap();
    assert_eq!(finished(&g).winner(), Some(Color::White));
    // Blocked: White a9 (6) can't move (b10 = 1 is taken, nothing to jump to): White, to move, wins.
    let g = Game::from_fen(Antidraughts, "W:W6:B1").unwrap();
    assert_eq!(
        finished(&g),
        GameResult::Win {
            winner: Color::White,
            reason: WinReason::GaveAwayAllMoves
        }
    );
    let g = Game::from_fen(International, "W:W6:B1").unwrap();
    assert_eq!(finished(&g).winner(), Some(Color::Black));
    // Captures are mandatory with the majority rule, as in international: the moves are the same.
    for fen in ["W:W28,39:B22,17,33", "W:WK46:B37,17,23"] {
        assert_eq!(
            texts(&pos(Antidraughts, fen)),
            texts(&pos(International, fen)),
            "{fen}"
        );
    }
}

#[test]
fn breakthrough_the_first_king_wins() {
    // §9.3. White c9 (7) steps to b10 (1) or d10 (2) and is crowned: White wins at once.
    let mut g = Game::from_fen(Breakthrough, "W:W7:B45").unwrap();
    assert_eq!(g.status(), GameStatus::Ongoing);
    g.play_text("7-1").unwrap();
    let r = finished(&g);
    assert_eq!(
        r,
        GameResult::Win {
            winner: Color::White,
            reason: WinReason::FirstKing
        }
    );
    assert_eq!(r.result_text(Breakthrough), "2-0");
    // The finished position: Black has no legal move, and perft stops there.
    let p = *g.position();
    assert!(p.legal_moves().is_empty());
    assert!(!p.has_legal_move());
    assert_eq!(p.perft(1, Count::Unique), 0);
    assert_eq!(pos(Breakthrough, "W:W7:B45").perft(2, Count::Unique), 0);
    // In international the game goes on.
    assert_eq!(pos(International, "W:W7:B45").perft(2, Count::Unique), 2); // j2-i1 after either
    // §8.5: the side to move can have no king; the other side one at most.
    assert!(matches!(
        refused(Breakthrough, "W:WK1:B45"),
        PositionError::KingsAfterBreakthrough {
            side_to_move: 1,
            other_side: 0
        }
    ));
    assert!(matches!(
        refused(Breakthrough, "B:WK1,K2:B45"),
        PositionError::KingsAfterBreakthrough { other_side: 2, .. }
    ));
    let g = Game::from_fen(Breakthrough, "B:WK1:B45").unwrap();
    assert_eq!(finished(&g).winner(), Some(Color::White));
}

#[test]
fn killer_a_king_that_takes_a_king_last_stops_behind_it() {
    // §9.4. White king a1 (46) on the long diagonal 46 41 37 32 28 23 19 14 10 5.
    // A black KING on c3 (37): international lands on any of 32..5, killer only on d4 (32).
    let all = ["46x32", "46x28", "46x23", "46x19", "46x14", "46x10", "46x5"];
    check(International, "W:WK46:BK37", &all);
    check(Killer, "W:WK46:BK37", &["46x32"]);
    // A black MAN there: no difference.
    check(Killer, "W:WK46:B37", &all);
    // A chain: c3 (37), then from e5 (28) up-left over c7 (17) to b8 (11) or a9 (6).
    // Man last: free landing. King last (c7 a king): only b8, directly behind it.
    check(Killer, "W:WK46:BK37,17", &["46x11", "46x6"]);
    check(Killer, "W:WK46:B37,K17", &["46x11"]);
    check(International, "W:WK46:B37,K17", &["46x11", "46x6"]);
}

#[test]
fn pool_black_first_free_choice_men_pass_the_last_row() {
    // §10.1, english numbering. Black man c3 (22) takes d2 (26) to e1 (31), the last row, and must go
    // on backward as a MAN over f2 (27) to g3 (24): not crowned. Black's d6 (10) may take e5 (15) to f4
    // (19) instead: free choice (no majority rule).
    let p = check(Pool, "B:W26,27,15:B22,10", &["22x24", "10x19"]);
    assert_eq!(piece(&after(&p, "22x24"), "24"), man(Color::Black));
    assert!(!mv(&p, "22x24").promotes());
    // Brazilian (majority rule) keeps only the two-piece capture; Russian crowns on e1 and goes on as a
    // king to g3 or h4 (20).
    check(Brazilian, "B:W26,27,15:B22,10", &["c3xg3"]);
    let p = check(Russian, "B:W26,27,15:B22,10", &["c3:g3", "c3:h4", "d6:f4"]);
    assert!(mv(&p, "c3:h4").promotes());
    // Kings fly; men capture backward.
    // Black king b8 (1) takes White e5 (15) from afar, landing f4 (19), g3 (24) or h2 (28); an english
    // (short) king has no capture there.
    check(Pool, "B:W15:BK1", &["1x19", "1x24", "1x28"]);
    check(English, "B:W15:BK1", &["1-5", "1-6"]);
}

#[test]
fn portuguese_plays_the_spanish_rules() {
    // §10.2: same board, same table; the same move tree.
    assert_eq!(
        Position::start(Portuguese).to_fen(),
        Position::start(Spanish).to_fen()
    );
    for d in 1..=6 {
        assert_eq!(
            Position::start(Portuguese).perft(d, Count::Unique),
            Position::start(Spanish).perft(d, Count::Unique)
        );
    }
    for fen in ["W:WK29,22:B18,11,K10", "W:W21,22:B17,18,K10,11"] {
        assert_eq!(
            texts(&pos(Portuguese, fen)),
            texts(&pos(Spanish, fen)),
            "{fen}"
        );
    }
}

// ---------------------------------------------------------------------------------------------------
// Frisian draughts and Frysk! (docs/rules.md §11)
// ---------------------------------------------------------------------------------------------------

#[test]
fn frisian_men_capture_along_ranks_and_files() {
    // §11.2. White man e5 (28). Along rank 5 the dark squares are a5 c5 e5 g5 i5 (26..30); along file e
    // they are e9 e7 e5 e3 e1 (8 18 28 38 48). A black man on each neighbour in turn: the man jumps it
    // to the next dark square of the line. International has no such capture: the man just moves.
    check(Frisian, "W:W28:B29", &["28x30"]);
    check(Frisian, "W:W28:B27", &["28x26"]);
    check(Frisian, "W:W28:B18", &["28x8"]);
    check(Frisian, "W:W28:B38", &["28x48"]);
    check(International, "W:W28:B29", &["28-22", "28-23"]);
    // No wrap round the edge: j6 (25) ends row 4 and a5 (26) starts row 5 (one bit apart in the layout);
    // they are not neighbours on a rank, so j6 just moves to i7 (20).
    check(Frisian, "W:W25:B26", &["25-20"]);
    // Nor off the board: a man on the first row has no neighbour below (black kings, as no black man
    // stands on row 1).
    check(Frisian, "W:W48:BK38,K49", &["48x28", "48x50"]);
    // Quiet moves stay diagonal and forward (§11.2): e5 to d6 (22) or f6 (23) only.
    check(Frisian, "W:W28:B1", &["28-22", "28-23"]);
}

#[test]
fn frisian_kings_capture_along_ranks_and_files_at_any_distance() {
    // §11.2. White king a1 (46): rank 1 is a1 c1 e1 g1 i1 (46..50), file a is a1 a3 a5 a7 a9 (46 36 26 16 6).
    // Black kings on e1 (48) and a5 (26): the king sees over the free c1 / a3, jumps, and lands on any
    // free dark square beyond: g1 or i1, a7 or a9. Its diagonal (41 37 .. 5) is free but captures come first.
    check(
        Frisian,
        "W:WK46:BK48,K26",
        &["46x49", "46x50", "46x16", "46x6"],
    );
    // A chain turns from a rank to a file: a1 along rank 1 over e1 (48) to g1 (49), then up file g
    // (39 29 19 9) over g5 (29) to g7 (19) or g9 (9). Two pieces beat one: only the chain.
    check(Frisian, "W:WK46:BK48,29", &["46x19", "46x9"]);
    // Kings move quietly along diagonals only: a king on e1 (48) with nothing to take goes to d2 c3 b4 a5
    // (42 37 31 26) or f2 g3 h4 i5 j6 (43 39 34 30 25).
    check(
        Frisian,
        "W:WK48:B1",
        &[
            "48-42", "48-37", "48-31", "48-26", "48-43", "48-39", "48-34", "48-30", "48-25",
        ],
    );
}

#[test]
fn frisian_precedence_by_value() {
    // §11.3: a man 100, a king 199.
    // White man a1 (46) can take b2 (41) and d4 (32) to e5 (28): two men, 200. White man i1 (50) can take
    // the king on i3 (40) up file i to i5 (30): 199. Two men beat one king.
    check(Frisian, "W:W46,50:B41,32,K40", &["46x28"]);
    // One king (199) beats one man (100).
    check(Frisian, "W:W46,50:B41,K40", &["50x30"]);
    // Two kings (398: i3 and i7, up file i to i9, 10) beat three men (300: b2, d4, d6 to c7, 17).
    check(Frisian, "W:W46,50:B41,32,22,K40,K20", &["50x10"]);
    // Three kings (597: i3, i7, then h8 (14) to g7 (19)) beat five men (500: b2, d4, d6, b8, then along
    // rank 9 c9 (7) to e9 (8)): n kings outweigh 2n-1 men. (A king at one and a half men, pydraughts'
    // count, would take the five men here.)
    check(Frisian, "W:W46,50:B41,32,22,11,7,K40,K20,K14", &["50x19"]);
    // Equal value: a king's capture rather than a man's. White man a1 (46) takes b2 (41) to c3 (37); the
    // white king i1 (50) takes h2 (44) and may stop on any of g3..a9 (39 33 28 22 17 11 6): one man each,
    // so only the king's captures are legal.
    check(
        Frisian,
        "W:W46,K50:B41,44",
        &["50x39", "50x33", "50x28", "50x22", "50x17", "50x11", "50x6"],
    );
    // International counts pieces only (both take one, either may).
    let p = pos(International, "W:W46,K50:B41,44");
    assert_eq!(p.legal_moves().len(), 8);
}

#[test]
fn frisian_a_king_makes_at_most_three_quiet_moves_in_a_row() {
    // §11.5. White king a1 (46) and man i1 (50); Black only a king on b10 (1) that shuttles to a9 (6) and
    // back (never in reach). The white king goes a1-b2-a1-b2: after its third quiet move it may not move
    // quietly, so White must move the man (to h2 44 or j2 45).
    let mut g = game(Frisian, "W:WK46,50:BK1");
    for (i, m) in ["46-41", "1-6", "41-46", "6-1", "46-41", "1-6"]
        .iter()
        .enumerate()
    {
        g.play_text(m)
            .unwrap_or_else(|e| panic!("ply {}: {m}: {e}", i + 1));
    }
    let p = *g.position();
    assert_eq!(texts(&p), sorted(&["50-44", "50-45"]));
    assert_eq!(p.king_run(Color::White), Some((sq(&p, "41"), 3)));
    assert_eq!(p.to_fen(), "W:WK41,50:BK6:+0+341");
    // The man moves (to j2: on h2 it would be taken from a9); the king is free again.
    g.play_text("50-45").unwrap();
    g.play_text("6-1").unwrap();
    let p = *g.position();
    assert_eq!(p.king_run(Color::White), None);
    assert!(texts(&p).contains(&"41-46".to_string()));
    // The same position without the count (a FEN without the field) has no limit.
    let fresh = pos(Frisian, "W:WK41,50:BK6");
    assert!(texts(&fresh).contains(&"41-46".to_string()));
    // The FEN field is read back: the king on 41 is held.
    check(Frisian, "W:WK41,50:BK6:+0+341", &["50-44", "50-45"]);
    // International has no such rule.
    let mut g = game(International, "W:WK46,50:BK1");
    for m in ["46-41", "1-6", "41-46", "6-1", "46-41", "1-6"] {
        g.play_text(m).unwrap();
    }
    assert!(texts(g.position()).contains(&"41-46".to_string()));
}

#[test]
fn frisian_king_limit_is_per_king_frees_on_capture_and_lapses_without_men() {
    // §11.5. Another king's move starts a new count: two white kings a1 (46) and c1 (47), a man i1 (50).
    let mut g = game(Frisian, "W:WK46,K47,50:BK1");
    for m in [
        "46-41", "1-6", "41-46", "6-1", "47-42", "1-6", "46-41", "6-1",
    ] {
        g.play_text(m).unwrap_or_else(|e| panic!("{m}: {e}"));
    }
    // a1's count restarted at one when c1 moved: a1 (now on 41) may move twice more.
    assert_eq!(
        g.position().king_run(Color::White),
        Some((sq(g.position(), "41"), 1))
    );
    // Held king, but a capture is always allowed (and here mandatory): a black man on c3 (37).
    check(
        Frisian,
        "W:WK41,50:BK6,37:+0+341",
        &["41x32", "41x28", "41x23", "41x19", "41x14", "41x10", "41x5"],
    );
    // A side with only kings is never held: the same count, no white man.
    let p = pos(Frisian, "W:WK41:BK6:+0+341");
    assert_eq!(p.king_run(Color::White), None);
    assert!(texts(&p).contains(&"41-46".to_string()));
    // A held king that is the side's only movable piece: no legal move, the side has lost (§2.3). White
    // king b2 (41) held; the man a5 (26) can only step to b6 (21), taken, and cannot take it (c7, 17, is
    // taken too); the king cannot take b6 up file b either (b8, 11, is taken).
    let g = game(Frisian, "W:WK41,26:B21,17,11:+0+341");
    assert_eq!(
        g.status(),
        win(Color::Black, WinReason::NoMoves),
        "{:?}",
        g.position().legal_moves()
    );
}

#[test]
fn frisian_king_move_counts_in_fen_are_checked() {
    // §8.6.
    for fen in [
        "W:WK41,50:BK6:+0+342", // no white king on 42
        "W:WK41,50:BK6:+0+441", // beyond the limit
        "W:WK41,50:BK6:+0+3",   // no square
        "W:WK41,50:BK6:+341+0", // 41 is not a black king
    ] {
        assert!(
            matches!(refused(Frisian, fen), PositionError::BadKingMoves { .. }),
            "{fen}"
        );
    }
    // Only Frisian counts them; a zero count is accepted everywhere.
    assert!(matches!(
        refused(International, "W:WK41,50:BK6:+0+141"),
        PositionError::BadKingMoves { .. }
    ));
    assert_eq!(
        pos(International, "W:WK41,50:BK6:+0+0"),
        pos(International, "W:WK41,50:BK6")
    );
    assert!(Position::from_fen(Frisian, "W:WK41,50:BK6:+0+341:+0+0").is_err());
    assert!(Position::from_fen(Frisian, "W:WK41,50:BK6:+x+341").is_err());
    // A running count is part of the position and of its hash (§2.5).
    let a = pos(Frisian, "W:WK41,50:BK6:+0+241");
    let b = pos(Frisian, "W:WK41,50:BK6");
    assert_ne!(a, b);
    assert_ne!(a.hash(), b.hash());
    assert_eq!(pos(Frisian, &a.to_fen()), a);
}

#[test]
fn frisian_endgame_draws() {
    // §11.6. One king each (White c1 47, Black b10 1): a draw after two moves each. Black's b10 and a9
    // (1, 6) are out of reach of any capture; White's c1 and d2 (47, 42) are on none of their lines.
    let mut g = game(Frisian, "W:WK47:BK1");
    let last = play_cycles(&mut g, &["47-42", "42-47"], &["1-6", "6-1"], 4);
    assert_eq!(last, draw(DrawReason::Endgame { moves: 2 }));
    // Two kings against one: seven moves each. White a1 (46) stays; c1 tours d2 e1 f2 g1 and back; no
    // position occurs three times.
    let mut g = game(Frisian, "W:WK46,K47:BK1");
    let white = [
        "47-42", "42-48", "48-43", "43-49", "49-43", "43-48", "48-42",
    ];
    let status = play_cycles(&mut g, &white, &["1-6", "6-1"], 13);
    assert_eq!(status, GameStatus::Ongoing);
    assert_eq!(
        play_cycles(&mut g, &["1-6"], &[], 1),
        draw(DrawReason::Endgame { moves: 7 })
    );
    // With a man on the board neither rule applies.
    let mut g = game(Frisian, "W:WK47,50:BK1");
    let status = play_cycles(&mut g, &["47-42", "42-47"], &["1-6", "6-1"], 6);
    assert_eq!(status, GameStatus::Ongoing);
}

#[test]
fn frysk_five_men_a_side() {
    // §11.8: W:W46-50:B1-5, Frisian rules. a1 (46) goes to b2 (41) only; c1 e1 g1 i1 (47..50) each two ways.
    let p = check(
        Frysk,
        Frysk.start_fen(),
        &[
            "46-41", "47-41", "47-42", "48-42", "48-43", "49-43", "49-44", "50-44", "50-45",
        ],
    );
    assert_eq!(p.material(Color::White), (5, 0));
    // Orthogonal captures as in frisian.
    check(Frysk, "W:W28:B29", &["28x30"]);
    // At most five pieces a side (§8.1).
    assert!(matches!(
        refused(Frysk, "W:W41-46:B1-5"),
        PositionError::TooManyPieces { max: 5, .. }
    ));
    assert_eq!(Frysk.pdn_game_type(), 40);
    assert_eq!("frysk!".parse::<Variant>(), Ok(Frysk));
}

// ---------------------------------------------------------------------------------------------------
// Canadian draughts (docs/rules.md §12): international rules on the 12x12 board
// ---------------------------------------------------------------------------------------------------

#[test]
fn canadian_board_numbering_and_start_position() {
    // §12.2: 1..72, six a row from the top; 1 = b12, 6 = l12, 7 = a11, 43 = a5, 67 = a1, 72 = k1.
    let p = Position::start(Canadian);
    let name = |n: &str| p.board().algebraic(sq(&p, n)).to_string();
    assert_eq!(name("1"), "b12");
    assert_eq!(name("6"), "l12");
    assert_eq!(name("7"), "a11");
    assert_eq!(name("43"), "a5");
    assert_eq!(name("67"), "a1");
    assert_eq!(name("72"), "k1");
    assert_eq!(
        p.to_fen(),
        Position::from_fen(Canadian, "W:W43-72:B1-30")
            .unwrap()
            .to_fen()
    );
    // White (the light pieces) on 43..72 moves first: the front row 43..48 = a5 c5 e5 g5 i5 k5 steps up to
    // 37..42 = b6 d6 f6 h6 j6 l6; a5 has one move (left edge), the others two: 11 moves.
    check(
        Canadian,
        Canadian.start_fen(),
        &[
            "43-37", "44-37", "44-38", "45-38", "45-39", "46-39", "46-40", "47-40", "47-41",
            "48-41", "48-42",
        ],
    );
    assert!(piece(&p, "k1") == man(Color::White) && piece(&p, "l12") == man(Color::Black));
    assert_eq!(Canadian.pdn_game_type(), 27);
    assert_eq!(Variant::from_pdn_game_type(27), Some(Canadian));
    assert_eq!("canadian".parse::<Variant>(), Ok(Canadian));
}

#[test]
fn canadian_men_capture_backward_into_the_high_squares() {
    // §12.2 (men capture forward and backward): White man d4 (50) takes c3 (56) backward, landing on
    // b2 (61), a square above bit 63; capture is mandatory, so the quiet moves are gone.
    let p = check(Canadian, "W:W50:B56,1", &["50x61"]);
    let q = after(&p, "50x61");
    assert_eq!(piece(&q, "b2"), man(Color::White));
    assert_eq!(piece(&q, "c3"), None);
    // Black, moving down: man a3 (55) takes a White man on b2 (61) and lands on c1 (68), Black's promotion
    // row; no further jump from c1, so the chain ends there and the man is crowned.
    let r = check(Canadian, "B:W61,40:B55", &["55x68"]);
    let s = after(&r, "55x68");
    assert_eq!(piece(&s, "c1"), king(Color::Black));
    assert_eq!(piece(&s, "b2"), None);
}

#[test]
fn canadian_flying_king_across_the_long_diagonal() {
    // §12.2 (kings fly, §3.3): a1 (67) to l12 (6) is the long diagonal 67 61 56 50 45 39 34 28 23 17 12 6.
    // A lone White king on a1 moves to any of its 11 squares (Black's man on b12 = 1 is off it).
    check(
        Canadian,
        "W:WK67:B1",
        &[
            "67-61", "67-56", "67-50", "67-45", "67-39", "67-34", "67-28", "67-23", "67-17",
            "67-12", "67-6",
        ],
    );
    // With a Black man on f6 (39): the king flies over b2..e5, takes f6 and stops on any square beyond.
    let p = check(
        Canadian,
        "W:WK67:B39",
        &["67x34", "67x28", "67x23", "67x17", "67x12", "67x6"],
    );
    let q = after(&p, "67x6");
    assert_eq!(piece(&q, "l12"), king(Color::White));
    assert!(q.pieces(Color::Black).is_empty());
    // And back: a Black king on l12 takes a White man on b2 (61, above bit 63) and lands on a1 (67).
    check(Canadian, "B:W61:BK6", &["6x67"]);
}

#[test]
fn canadian_majority_capture() {
    // §12.2 (the capture taking the most pieces is mandatory): White man d4 (50) takes e5 (45) and g7
    // (34), landing on f6 (39) then h8 (28); White man a3 (55) could take only b4 (49), landing on c5 (44).
    check_n(Canadian, "W:W50,55:B45,34,49", &["50x28"], 2);
}

#[test]
fn canadian_man_passes_the_last_row_as_a_man() {
    // §12.2 (a man is crowned only when its move ends on the last row): White man d10 (14) takes e11 (9)
    // to f12 (3) on the last row, then must go on over g11 (10) to h10 (16): it stays a man.
    let p = check_n(Canadian, "W:W14:B9,10", &["14x16"], 2);
    let q = after(&p, "14x16");
    assert_eq!(piece(&q, "h10"), man(Color::White));
    // Ending there crowns it.
    let p = check(Canadian, "W:W14:B9", &["14x3"]);
    assert_eq!(piece(&after(&p, "14x3"), "f12"), king(Color::White));
    // Black men are crowned on 67..72 (above bit 63): b2 (61) steps to a1 or c1, both crowning.
    let p = check(Canadian, "B:W50:B61", &["61-67", "61-68"]);
    for m in p.legal_moves() {
        assert!(m.promotes());
    }
}

#[test]
fn canadian_impossible_positions_are_refused() {
    // §8.1: at most 30 pieces a side (31 White men on 42..72).
    assert!(matches!(
        refused(Canadian, "W:W42-72:B1-5"),
        PositionError::TooManyPieces {
            count: 31,
            max: 30,
            ..
        }
    ));
    // §8.2: no White man on 1..6, no Black man on 67..72.
    assert!(matches!(
        refused(Canadian, "W:W3:B20"),
        PositionError::ManOnPromotionRow { .. }
    ));
    assert!(matches!(
        refused(Canadian, "W:W50:B70"),
        PositionError::ManOnPromotionRow { .. }
    ));
    // §8.4: 73 does not exist; a12 is a light square; a square given twice.
    assert!(matches!(
        refused(Canadian, "W:W73:B1"),
        PositionError::NoSuchSquare(..)
    ));
    assert!(matches!(
        refused(Canadian, "W:Wa12:B1"),
        PositionError::LightSquare(..)
    ));
    assert!(matches!(
        refused(Canadian, "W:W50:B50"),
        PositionError::Duplicate(..)
    ));
    // Kings there are fine, 30 a side too.
    pos(Canadian, "W:W43-72:BK1-30");
    pos(Canadian, "W:WK3,K72:BK70,K1");
}

#[test]
fn canadian_fen_round_trip_and_file_k() {
    // §5.3 FEN on the 12x12 board: numbers; `k3` is the square on file k (60), `Kk3` a king there.
    let p = pos(Canadian, "W:Wk3,Kl2,61:BK1,7");
    assert_eq!(piece(&p, "60"), man(Color::White));
    assert_eq!(piece(&p, "66"), king(Color::White));
    assert_eq!(p.to_fen(), "W:W60,61,K66:BK1,7");
    let q = pos(Canadian, "W:WKk3:B1");
    assert_eq!(piece(&q, "60"), king(Color::White));
    assert_eq!(pos(Canadian, &p.to_fen()), p);
    // Positions that differ only above bit 63 are different positions (and hash differently).
    let a = pos(Canadian, "W:W61:B1");
    let b = pos(Canadian, "W:W62:B1");
    assert_ne!(a, b);
    assert_ne!(a.hash(), b.hash());
}

#[test]
fn canadian_draw_rules_and_options_are_international() {
    // §12.2: the draw rules of international (§4.1-§4.3); the 10x10 options apply (§7): promote-mid-capture
    // and move-limit, not no-mandatory-capture.
    assert_eq!(Canadian.rules().draw, International.rules().draw);
    assert!(
        RuleSet::with_options(Canadian, RuleOptions::parse("promote-mid-capture").unwrap()).is_ok()
    );
    assert!(RuleSet::with_options(Canadian, RuleOptions::parse("move-limit 40").unwrap()).is_ok());
    // promote-mid-capture: the man of canadian_man_passes_the_last_row_as_a_man is crowned on f12 and
    // goes on as a king: over g11 (10) it may land on h10 (16) or fly on to i9 (23), k7... (the line
    // f12 g11 h10 i9 j8 k7 l6 = 3 10 16 23 29 36 42).
    check_n(
        with(Canadian, "promote-mid-capture"),
        "W:W14:B9,10",
        &["14x16", "14x23", "14x29", "14x36", "14x42"],
        2,
    );
    // §4.3 FMJD endgame rule: a king and a man (g3 = 58) against a lone king, 5 moves each. The White king
    // goes round a1 b2 c3 d4 (67 61 56 50, all on the long diagonal), the Black king round b12 c11 d10
    // (1 8 14): no king ever stands on a line of an enemy piece, and a position comes back only every 12
    // moves (no repetition draw).
    let mut g = game(Canadian, "W:WK67,58:BK1");
    let status = play_cycles(
        &mut g,
        &["67-61", "61-56", "56-50", "50-67"],
        &["1-8", "8-14", "14-1"],
        10,
    );
    assert_eq!(status, draw(DrawReason::Endgame { moves: 5 }));
}
