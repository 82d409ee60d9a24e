//! The pairing of one wave: pure, synchronous, no I/O (lila's `MatchMaking` next to its `PoolActor`).
//!
//! Input: the candidates waiting in one pool. Output: pairs of candidates, each candidate in at most one
//! pair, every pair compatible ([`compatible`]), as many pairs as possible and, among the matchings with
//! that many pairs, the smallest total rating gap: a maximum-weight matching with edge weight
//! `BIG - gap` (BIG above any sum of gaps).
//!
//! Compatibility of two candidates `a` and `b`:
//! - different players (a player listed twice is kept once: nobody is paired twice);
//! - both guests or neither (guests are paired with guests);
//! - each rating inside the other's explicit range, when one was given;
//! - the gap `|rating(a) - rating(b)|` at most the allowance of both, where a candidate's allowance is
//!   `min(base_gap + widen_per_wave * missed_waves, max_gap)`, plus `provisional_extra` for a provisional
//!   rating (its uncertainty is real: a narrow gap on an uncertain rating means nothing);
//! - an aborter (a player who aborted or left several games in a row) and a non-aborter only once the
//!   aborter has missed `aborter_waves` waves: aborters are paired with each other at once and with
//!   everybody else only after waiting longer.
//!
//! How (all linear in the number of candidates, after one sort):
//! 1. Guests and registered players apart; each group sorted by rating and cut into components wherever
//!    two neighbours on the rating line are further apart than any allowance.
//! 2. A component whose neighbour pairing (see `along_the_line`) is allowed throughout takes it: that
//!    is provably the optimum (the usual case in a dense pool).
//! 3. Otherwise `band_matching`: the exact maximum-weight matching over the allowed pairs at most
//!    [`BAND`] places apart on the rating line, by dynamic programming.
//! 4. Whoever stayed alone is paired again the same way, until a round adds no pair.
//!
//! The general blossom algorithm was measured first: `mwmatching` (an O(n^3) port of van Rantwijk's
//! implementation, on windows of 32-64 consecutive ratings) took 180 ms for 10,000 players and
//! `integer-blossom` needs an n x n weight matrix (10^8 cells at 10,000 players). It stays in the tests
//! as the reference that `band_matching` is checked against, with brute force on small pools, where
//! the result is exact: every pool whose components have at most `BAND + 1` candidates.
//!
//! ```
//! use draughts_matchmaking::pairing::{pair, Candidate, Rules};
//! let c = |id: &str, rating| Candidate::new(id, rating);
//! let rules = Rules { base_gap: 100, widen_per_wave: 50, max_gap: 500, provisional_extra: 200, aborter_waves: 3 };
//! let pairs = pair(&[c("a", 1500), c("b", 1900), c("c", 1520), c("d", 1880)], &rules);
//! assert_eq!(pairs, vec![(0, 2), (1, 3)]);
//! ```

use std::collections::HashSet;

/// Pairs further apart than this many places on the rating line are not considered (see
/// `band_matching`): seldom in an optimum, since the candidates in between are nearer to both.
pub const BAND: usize = 6;

/// One waiting seek as the pairing sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The player's id: two candidates of one player are never paired (with each other or twice).
    pub player: String,
    /// Rating points in the pool's category (guests: the starting rating).
    pub rating: i32,
    /// The rating is provisional (few games, large deviation).
    pub provisional: bool,
    pub guest: bool,
    /// The player aborted or left several games in a row (see [`Rules::aborter_waves`]).
    pub aborter: bool,
    /// The opponent's rating must lie in this inclusive range, when given.
    pub range: Option<(i32, i32)>,
    /// Waves this seek has been in without being paired.
    pub missed_waves: u32,
    /// Players this candidate must not be paired with (one of the two blocks the other).
    pub avoid: Vec<String>,
}

impl Candidate {
    /// A registered, established, well-behaved candidate with no range that has missed no wave.
    pub fn new(player: &str, rating: i32) -> Candidate {
        Candidate {
            player: player.to_owned(),
            rating,
            provisional: false,
            guest: false,
            aborter: false,
            range: None,
            missed_waves: 0,
            avoid: Vec::new(),
        }
    }
}

/// How far apart two candidates may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// Allowed gap of a candidate in its first wave, rating points.
    pub base_gap: i32,
    /// Added to the allowance for every wave missed, rating points.
    pub widen_per_wave: i32,
    /// The allowance never grows beyond this (before `provisional_extra`), rating points.
    pub max_gap: i32,
    /// Added to the allowance of a provisional rating, rating points.
    pub provisional_extra: i32,
    /// Waves an aborter waits before it may be paired with a non-aborter.
    pub aborter_waves: u32,
}

impl Rules {
    /// The gap `c` accepts now.
    pub fn allowance(&self, c: &Candidate) -> i32 {
        let widened =
            i64::from(self.base_gap) + i64::from(self.widen_per_wave) * i64::from(c.missed_waves);
        let capped = widened.min(i64::from(self.max_gap)).max(0);
        let extra = if c.provisional {
            i64::from(self.provisional_extra)
        } else {
            0
        };
        i32::try_from(capped + extra).unwrap_or(i32::MAX)
    }
}

/// Whether `a` and `b` may be paired now (the rules of the module docs).
pub fn compatible(a: &Candidate, b: &Candidate, rules: &Rules) -> bool {
    if a.player == b.player || a.guest != b.guest {
        return false;
    }
    if a.avoid.contains(&b.player) || b.avoid.contains(&a.player) {
        return false;
    }
    if a.aborter != b.aborter {
        let aborter = if a.aborter { a } else { b };
        if aborter.missed_waves < rules.aborter_waves {
            return false;
        }
    }
    let in_range =
        |c: &Candidate, rating: i32| c.range.is_none_or(|(lo, hi)| (lo..=hi).contains(&rating));
    if !in_range(a, b.rating) || !in_range(b, a.rating) {
        return false;
    }
    let gap = gap(a, b);
    gap <= i64::from(rules.allowance(a)) && gap <= i64::from(rules.allowance(b))
}

fn gap(a: &Candidate, b: &Candidate) -> i64 {
    (i64::from(a.rating) - i64::from(b.rating)).abs()
}

/// The pairs of one wave, as indices into `candidates` (`(i, j)` with `i < j`, sorted by `i`). See the
/// module docs for what is guaranteed.
pub fn pair(candidates: &[Candidate], rules: &Rules) -> Vec<(usize, usize)> {
    // Nobody twice: the first candidate of each player is kept.
    let mut seen = HashSet::with_capacity(candidates.len());
    let mut alive: Vec<usize> = (0..candidates.len())
        .filter(|&i| seen.insert(candidates[i].player.as_str()))
        .collect();
    let mut pairs = Vec::new();
    loop {
        let found = pair_round(candidates, &alive, rules);
        if found.is_empty() {
            break;
        }
        let paired: HashSet<usize> = found.iter().flat_map(|&(a, b)| [a, b]).collect();
        alive.retain(|i| !paired.contains(i));
        pairs.extend(found);
    }
    pairs.sort_unstable();
    pairs
}

/// One round: components along the rating line, each solved by [`along_the_line`] or [`band_matching`].
fn pair_round(candidates: &[Candidate], alive: &[usize], rules: &Rules) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    for guest in [false, true] {
        let mut group: Vec<usize> = alive
            .iter()
            .copied()
            .filter(|&i| candidates[i].guest == guest)
            .collect();
        group.sort_by_key(|&i| (candidates[i].rating, i));
        let reach = group
            .iter()
            .map(|&i| i64::from(rules.allowance(&candidates[i])))
            .max()
            .unwrap_or(0);
        // Components: cut wherever two neighbours on the rating line are beyond every allowance.
        let mut start = 0;
        for end in 1..=group.len() {
            let cut = end == group.len()
                || gap(&candidates[group[end - 1]], &candidates[group[end]]) > reach;
            if cut {
                let component = &group[start..end];
                match along_the_line(candidates, component, rules) {
                    Some(found) => pairs.extend(found),
                    None => pairs.extend(band_matching(candidates, component, rules)),
                }
                start = end;
            }
        }
    }
    pairs
}

/// The best matching of `sorted` (indices sorted by rating) when compatibility is ignored, if all its
/// pairs are compatible (else `None`); then it is also the best compatible matching, exactly.
///
/// On a line, a perfect matching of minimum total gap pairs neighbours: (0,1), (2,3), ... (two pairs
/// that cross or nest can be swapped for two neighbour pairs with a smaller or equal sum). With an odd
/// count one candidate stays alone, at an even place `k` (leaving an odd place out makes a pair span
/// it, which costs more than leaving its neighbour out instead), and the rest pair as neighbours:
/// the best `k` is found with prefix and suffix sums. That matching has the most pairs possible, so
/// when every pair of it is allowed no allowed matching beats it. Dense pools almost always end here:
/// linear time, no graph.
fn along_the_line(
    candidates: &[Candidate],
    sorted: &[usize],
    rules: &Rules,
) -> Option<Vec<(usize, usize)>> {
    let m = sorted.len();
    let g = |x: usize| gap(&candidates[sorted[x]], &candidates[sorted[x + 1]]);
    let alone = if m.is_multiple_of(2) {
        None
    } else {
        // prefix[k]: neighbours 0..k paired (k even); suffix[k]: neighbours k..m paired (m - k even).
        let mut prefix = vec![0i64; m + 1];
        let mut k = 2;
        while k <= m {
            prefix[k] = prefix[k - 2] + g(k - 2);
            k += 2;
        }
        let mut suffix = vec![0i64; m + 2];
        let mut k = m.saturating_sub(2);
        loop {
            if (m - k).is_multiple_of(2) && k + 1 < m {
                suffix[k] = suffix[k + 2] + g(k);
            }
            if k < 2 {
                break;
            }
            k -= 2;
        }
        (0..m).step_by(2).min_by_key(|&k| prefix[k] + suffix[k + 1])
    };
    let mut pairs = Vec::with_capacity(m / 2);
    let mut x = 0;
    while x + 1 < m {
        if Some(x) == alone {
            x += 1;
            continue;
        }
        let (a, b) = (sorted[x], sorted[x + 1]);
        if !compatible(&candidates[a], &candidates[b], rules) {
            return None;
        }
        pairs.push((a.min(b), a.max(b)));
        x += 2;
    }
    Some(pairs)
}

/// The maximum-weight matching (most pairs, then smallest total gap) of `sorted` (indices sorted by
/// rating) over the compatible pairs at most [`BAND`] places apart: a dynamic programme along the
/// rating line whose state is which of the next `BAND` candidates are already taken (2^BAND states per
/// candidate). It is exact on that graph (a graph of bandwidth `BAND` in rating order), so exact
/// overall for every component of at most `BAND + 1` candidates; the tests check it against brute force
/// and, on larger pools, against the blossom algorithm (`mwmatching`) on the same graph.
fn band_matching(candidates: &[Candidate], sorted: &[usize], rules: &Rules) -> Vec<(usize, usize)> {
    let m = sorted.len();
    let states = 1usize << BAND;
    // Score of a prefix: (pairs, -gap) packed so that more pairs always win: pairs * BIG - gap.
    let big = i64::from(i32::MAX);
    const NONE: i64 = i64::MIN;
    let mut score = vec![NONE; states];
    score[0] = 0;
    // choice[x * states + mask']: how state mask' at x+1 was reached: (previous mask, partner offset).
    let mut choice = vec![(0u16, 0u8); m * states];
    for x in 0..m {
        let mut next = vec![NONE; states];
        for (mask, &here) in score.iter().enumerate() {
            if here == NONE {
                continue;
            }
            let mut offer = |to: usize, value: i64, j: u8, next: &mut Vec<i64>| {
                if value > next[to] {
                    next[to] = value;
                    choice[x * states + to] = (mask as u16, j);
                }
            };
            if mask & 1 == 1 {
                offer(mask >> 1, here, 0, &mut next); // x was taken by an earlier candidate
                continue;
            }
            offer(mask >> 1, here, 0, &mut next); // x stays alone
            for j in 1..=BAND {
                if x + j >= m {
                    break;
                }
                if mask & (1 << j) != 0 {
                    continue;
                }
                let (a, b) = (&candidates[sorted[x]], &candidates[sorted[x + j]]);
                if compatible(a, b, rules) {
                    let value = here + big - gap(a, b);
                    offer((mask | (1 << j)) >> 1, value, j as u8, &mut next);
                }
            }
        }
        score = next;
    }
    // Walk back from the best final state (every bit shifted out: mask 0).
    let mut pairs = Vec::new();
    let mut mask = 0usize;
    for x in (0..m).rev() {
        let (previous, j) = choice[x * states + mask];
        if j > 0 {
            let (a, b) = (sorted[x], sorted[x + usize::from(j)]);
            pairs.push((a.min(b), a.max(b)));
        }
        mask = usize::from(previous);
    }
    pairs
}

/// The total gap of `pairs` (for tests and benchmarks).
pub fn total_gap(candidates: &[Candidate], pairs: &[(usize, usize)]) -> i64 {
    pairs
        .iter()
        .map(|&(a, b)| gap(&candidates[a], &candidates[b]))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const RULES: Rules = Rules {
        base_gap: 100,
        widen_per_wave: 50,
        max_gap: 400,
        provisional_extra: 150,
        aborter_waves: 3,
    };

    fn check(candidates: &[Candidate], expected: &[(usize, usize)]) {
        assert_eq!(pair(candidates, &RULES), expected, "{candidates:?}");
    }

    #[test]
    fn small_cases() {
        let c = Candidate::new;
        check(&[], &[]);
        check(&[c("a", 1500)], &[]);
        check(&[c("a", 1500), c("b", 1600)], &[(0, 1)]);
        check(&[c("a", 1500), c("b", 1601)], &[]);
        // The same player twice: never paired with themselves.
        check(&[c("a", 1500), c("a", 1500)], &[]);
        // The same player twice with one opponent: paired once.
        check(&[c("a", 1500), c("a", 1510), c("b", 1505)], &[(0, 2)]);
        // Minimum total gap: 1500-1520 and 1580-1600, not 1520-1580.
        check(
            &[c("a", 1500), c("b", 1520), c("c", 1580), c("d", 1600)],
            &[(0, 1), (2, 3)],
        );
        // Cardinality first: b-c would be the smallest gap but leaves a and d alone.
        check(
            &[c("a", 1400), c("b", 1490), c("c", 1500), c("d", 1590)],
            &[(0, 1), (2, 3)],
        );
    }

    #[test]
    fn widening_guests_provisional_aborters_ranges() {
        let c = Candidate::new;
        let waited = |id, rating, waves| Candidate {
            missed_waves: waves,
            ..c(id, rating)
        };
        check(&[waited("a", 1500, 2), c("b", 1700)], &[]); // b's allowance is still 100
        check(&[waited("a", 1500, 2), waited("b", 1700, 2)], &[(0, 1)]);
        check(&[waited("a", 1000, 50), waited("b", 1401, 50)], &[]); // capped at 400
        let guest = |id, rating| Candidate {
            guest: true,
            ..c(id, rating)
        };
        check(&[guest("a", 1500), c("b", 1500)], &[]);
        check(
            &[guest("a", 1500), c("b", 1500), guest("c", 1500)],
            &[(0, 2)],
        );
        let provisional = |id, rating| Candidate {
            provisional: true,
            ..c(id, rating)
        };
        check(&[provisional("a", 1500), provisional("b", 1740)], &[(0, 1)]);
        check(&[provisional("a", 1500), c("b", 1640)], &[]); // b's own allowance holds
        let aborter = |id, waves| Candidate {
            aborter: true,
            missed_waves: waves,
            ..c(id, 1500)
        };
        check(&[aborter("a", 0), c("b", 1500)], &[]);
        check(&[aborter("a", 0), aborter("b", 0)], &[(0, 1)]);
        check(&[aborter("a", 3), c("b", 1500)], &[(0, 1)]);
        let ranged = Candidate {
            range: Some((1550, 1700)),
            ..c("a", 1500)
        };
        check(&[ranged.clone(), c("b", 1540)], &[]);
        check(&[ranged, c("b", 1560)], &[(0, 1)]);
        // One blocks the other: never paired, each paired with someone else when possible.
        let avoiding = Candidate {
            avoid: vec!["b".into()],
            ..c("a", 1500)
        };
        check(&[avoiding.clone(), c("b", 1500)], &[]);
        check(&[c("b", 1500), avoiding.clone()], &[]);
        // (a-c and b-d would do as well: the same total gap.)
        check(
            &[avoiding, c("b", 1500), c("c", 1510), c("d", 1490)],
            &[(0, 3), (1, 2)],
        );
    }

    #[test]
    fn long_components_are_paired_along_the_line() {
        // 1000 players 1 point apart: everybody within reach, 500 pairs of neighbours.
        let candidates: Vec<Candidate> = (0..1000)
            .map(|i| Candidate::new(&format!("p{i}"), 1000 + i))
            .collect();
        let pairs = pair(&candidates, &RULES);
        assert_eq!(pairs.len(), 500);
        assert_eq!(total_gap(&candidates, &pairs), 500);
    }

    /// The best (pairs, -gap) over every matching of `candidates`, by exhaustive search.
    fn brute_force(candidates: &[Candidate]) -> (usize, i64) {
        fn go(c: &[Candidate], used: &mut Vec<bool>, from: usize) -> (usize, i64) {
            let Some(i) = (from..c.len()).find(|&i| !used[i]) else {
                return (0, 0);
            };
            used[i] = true;
            let mut best = go(c, used, i + 1); // i stays alone
            for j in i + 1..c.len() {
                if !used[j] && compatible(&c[i], &c[j], &RULES) {
                    used[j] = true;
                    let (n, g) = go(c, used, i + 1);
                    let candidate = (n + 1, g + gap(&c[i], &c[j]));
                    if (candidate.0, -candidate.1) > (best.0, -best.1) {
                        best = candidate;
                    }
                    used[j] = false;
                }
            }
            used[i] = false;
            best
        }
        go(candidates, &mut vec![false; candidates.len()], 0)
    }

    fn candidate() -> impl Strategy<Value = Candidate> {
        (
            0..6u8,
            1200..1800i32,
            any::<bool>(),
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.2),
            prop::option::weighted(0.2, (1100..1600i32, 0..400i32)),
            0..6u32,
        )
            .prop_map(
                |(player, rating, provisional, guest, aborter, range, missed_waves)| Candidate {
                    player: format!("p{player}"),
                    rating,
                    provisional,
                    guest,
                    aborter,
                    range: range.map(|(lo, width)| (lo, lo + width)),
                    missed_waves,
                    avoid: Vec::new(),
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn pairs_are_allowed_disjoint_and_optimal(candidates in prop::collection::vec(candidate(), 0..(BAND + 2))) {
            let pairs = pair(&candidates, &RULES);
            let mut players = HashSet::new();
            for &(a, b) in &pairs {
                prop_assert!(a < b);
                prop_assert!(compatible(&candidates[a], &candidates[b], &RULES), "forbidden pair {a}-{b}");
                prop_assert!(players.insert(candidates[a].player.clone()), "{} twice", candidates[a].player);
                prop_assert!(players.insert(candidates[b].player.clone()), "{} twice", candidates[b].player);
            }
            // Optimal: as many pairs as the best matching, and no larger total gap.
            // (over the first candidate of each player, as `pair` keeps).
            let mut first = HashSet::new();
            let unique: Vec<Candidate> = candidates.iter().filter(|c| first.insert(c.player.clone())).cloned().collect();
            let (n, g) = brute_force(&unique);
            prop_assert_eq!((pairs.len(), total_gap(&candidates, &pairs)), (n, g));
        }

        #[test]
        fn band_matching_equals_the_blossom_algorithm(
            ratings in prop::collection::vec(1400..1600i32, 2..60),
            flags in prop::collection::vec((prop::bool::weighted(0.3), prop::bool::weighted(0.3), 0..4u32), 60),
        ) {
            let candidates: Vec<Candidate> = ratings.iter().enumerate().map(|(i, &r)| Candidate {
                aborter: flags[i].0,
                provisional: flags[i].1,
                missed_waves: flags[i].2,
                range: (i % 7 == 3).then_some((r - 20, r + 120)),
                ..Candidate::new(&format!("p{i}"), r)
            }).collect();
            let mut sorted: Vec<usize> = (0..candidates.len()).collect();
            sorted.sort_by_key(|&i| (candidates[i].rating, i));
            let ours = band_matching(&candidates, &sorted, &RULES);
            let big = 1_000_000i64;
            let mut edges = Vec::new();
            for x in 0..sorted.len() {
                for y in x + 1..sorted.len().min(x + BAND + 1) {
                    let (a, b) = (&candidates[sorted[x]], &candidates[sorted[y]]);
                    if compatible(a, b, &RULES) {
                        edges.push((sorted[x], sorted[y], i32::try_from(big - gap(a, b)).unwrap()));
                    }
                }
            }
            let mut theirs = Vec::new();
            if !edges.is_empty() {
                let mates = mwmatching::Matching::new(edges).max_cardinality().solve();
                for (i, &mate) in mates.iter().enumerate() {
                    if mate != mwmatching::SENTINEL && i < mate {
                        theirs.push((i, mate));
                    }
                }
            }
            prop_assert_eq!(
                (ours.len(), total_gap(&candidates, &ours)),
                (theirs.len(), total_gap(&candidates, &theirs))
            );
        }

        #[test]
        fn large_pools_stay_allowed_and_disjoint(candidates in prop::collection::vec(candidate(), 0..300)) {
            let pairs = pair(&candidates, &RULES);
            let mut seen = HashSet::new();
            for &(a, b) in &pairs {
                prop_assert!(compatible(&candidates[a], &candidates[b], &RULES));
                prop_assert!(seen.insert(candidates[a].player.clone()));
                prop_assert!(seen.insert(candidates[b].player.clone()));
            }
        }
    }
}
