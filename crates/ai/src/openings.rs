//! Balanced openings for matches: short move sequences from the start position whose resulting position a
//! shallow search scores close to equal.

use draughts_engine::{Move, Position, RuleSet};

use crate::search::{Limits, RootState, Searcher};

/// Every line of `plies` plies from the start position whose searched score (depth 6) is within a quarter
/// man of equal, in a deterministic order, then `count` of them spread evenly over that list.
/// If fewer qualify, all that do are returned (at least one line: the least unbalanced).
pub fn balanced_openings(rules: RuleSet, plies: u32, count: usize) -> Vec<Vec<Move>> {
    balanced_openings_shifted(rules, plies, count, 0)
}

/// [`balanced_openings`] with every pick moved `shift` lines further along the list of balanced lines
/// (wrapping), so that another shift gives other lines when there are more than `count` (a second sample
/// of a match whose engines have no randomness).
pub fn balanced_openings_shifted(
    rules: RuleSet,
    plies: u32,
    count: usize,
    shift: usize,
) -> Vec<Vec<Move>> {
    let start = Position::start(rules);
    let mut lines: Vec<Vec<Move>> = Vec::new();
    expand(&start, plies, &mut Vec::new(), &mut lines);
    let mut searcher = Searcher::new(rules);
    let mut scored: Vec<(i32, Vec<Move>)> = lines
        .into_iter()
        .map(|line| {
            let mut pos = start;
            for mv in &line {
                pos = pos.play_unchecked(mv);
            }
            searcher.clear();
            let r = searcher.search(&RootState::new(pos), &Limits::depth(6), |_| {});
            let raw = r.lines.first().map_or(0, |l| l.raw);
            (raw.abs(), line)
        })
        .collect();
    const MARGIN: i32 = 25;
    let balanced: Vec<Vec<Move>> = scored
        .iter()
        .filter(|(s, _)| *s <= MARGIN)
        .map(|(_, l)| l.clone())
        .collect();
    if balanced.is_empty() {
        scored.sort_by_key(|(s, _)| *s);
        return scored
            .into_iter()
            .take(count.max(1))
            .map(|(_, l)| l)
            .collect();
    }
    if balanced.len() <= count {
        return balanced;
    }
    let n = balanced.len();
    (0..count)
        .map(|i| balanced[(i * n / count + shift % n) % n].clone())
        .collect()
}

fn expand(pos: &Position, plies: u32, line: &mut Vec<Move>, out: &mut Vec<Vec<Move>>) {
    if plies == 0 {
        out.push(line.clone());
        return;
    }
    for mv in pos.legal_moves() {
        line.push(mv);
        expand(&pos.play_unchecked(&mv), plies - 1, line, out);
        line.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use draughts_engine::Variant;

    #[test]
    fn a_shift_picks_other_balanced_lines() {
        let rules = RuleSet::new(Variant::English);
        let plain = balanced_openings(rules, 2, 5);
        assert_eq!(plain, balanced_openings_shifted(rules, 2, 5, 0));
        let shifted = balanced_openings_shifted(rules, 2, 5, 1);
        assert_eq!(shifted.len(), 5);
        assert!(shifted.iter().all(|l| !plain.contains(l)), "{shifted:?}");
        // Fewer balanced lines than asked for: all of them, whatever the shift.
        let all = balanced_openings(rules, 2, 1000);
        assert_eq!(balanced_openings_shifted(rules, 2, 5, usize::MAX).len(), 5);
        assert_eq!(balanced_openings_shifted(rules, 2, 1000, 3), all);
    }
}
