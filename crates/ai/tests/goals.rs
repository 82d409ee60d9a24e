//! The search plays for each variant's goal (docs/rules.md §9): in antidraughts a side without a move has
//! won, in breakthrough the first king wins, and the evaluation counts material against its owner in
//! antidraughts.

use draughts_ai::{Evaluator, Limits, RootState, Score, Searcher};
use draughts_engine::{Position, Variant};

fn score(variant: Variant, fen: &str, depth: u32) -> (Score, String) {
    let pos = Position::from_fen(variant, fen).unwrap();
    let mut s = Searcher::new(pos.rule_set());
    let r = s.search(&RootState::new(pos), &Limits::depth(depth), |_| {});
    let best = r.best.map(|m| pos.move_to_text(&m)).unwrap_or_default();
    (r.lines[0].score, best)
}

#[test]
fn antidraughts_giving_away_the_last_piece_loses_for_the_taker() {
    // Black d6 (22) must take e5 (28), landing f4 (33): White is left without pieces, to move, and wins.
    assert_eq!(
        score(Variant::Antidraughts, "B:W28:B22", 4).0,
        Score::LossIn(1)
    );
    // In international the same capture wins for Black.
    assert_eq!(
        score(Variant::International, "B:W28:B22", 4).0,
        Score::WinIn(1)
    );
    // A side without a move at the root has won.
    assert_eq!(
        score(Variant::Antidraughts, "W:W6:B1", 2).0,
        Score::WinIn(0)
    );
}

#[test]
fn antidraughts_prefers_to_give_a_piece_away() {
    // White e5 (28) or a1 (46). 28-22 or 28-23 offers the man to Black's men on c7 (17) / g7 (19); a quiet
    // 46-41 keeps every piece. Material counts against its owner, so the search gives a man away.
    let (_, best) = score(Variant::Antidraughts, "W:W28,46:B17,19,5", 3);
    assert!(best == "28-22" || best == "28-23", "{best}");
    let e = Evaluator::new(Variant::Antidraughts);
    let more = Position::from_fen(Variant::Antidraughts, "W:W28,46:B17").unwrap();
    let fewer = Position::from_fen(Variant::Antidraughts, "W:W28:B17,19").unwrap();
    assert!(e.evaluate(&fewer) > e.evaluate(&more));
}

#[test]
fn breakthrough_races_to_the_first_king() {
    // White c9 (7) crowns on b10 or d10 at once: a win in one ply; the search stops the line there.
    let (s, best) = score(Variant::Breakthrough, "W:W7:B45", 4);
    assert_eq!(s, Score::WinIn(1));
    assert!(best == "7-1" || best == "7-2", "{best}");
    // Black to move, one step from crowning too late: White's man on c9 crowns first.
    assert_eq!(
        score(Variant::Breakthrough, "B:W7:B40", 4).0,
        Score::LossIn(2)
    );
}
