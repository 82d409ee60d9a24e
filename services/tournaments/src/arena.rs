//! Arenas as lichess runs them (lila's `modules/tournament`, `arena/PairingSystem.scala`,
//! `arena/AntmaPairing.scala`, `arena/ArenaSheet.scala`, `Pairing.scala`): for a fixed duration, every
//! player who is not in a game waits to be paired; waves pair the waiting players by rank and rating;
//! each finished game adds to the player's sheet.
//!
//! Scoring ([`ArenaSheet::add`], lila's `Sheet.addResult`):
//! - a win 2 points, a draw 1, a loss 0;
//! - "on fire": after two wins in a row, each further win counts double (4) until a game is not won; a
//!   draw while on fire counts double too (2) and ends the streak, as in lila (`Flag.Double` on a draw);
//! - berserk: a player who halved their own clock and gave up the increment (Games keeps the clock:
//!   `Games.Berserk`; the finished entry says who did) gets one more point on a win, if the game lasted
//!   at least [`ArenaRules::berserk_min_plies`] plies (lila: `notSoQuickFinish`, 14 plies, that is 7
//!   moves by each side, the berserker's included);
//! - a draw in fewer than [`ArenaRules::quick_draw_plies`] plies (lila's `quickDraw`, 20) is worth
//!   nothing and does not count as a draw for streaks;
//! - a draw that is not a long game, after a previous draw with nothing but losses in between, is worth
//!   nothing (lila's draw streak, `Sheet.Version.V2`, 2020); [`ArenaRules::draw_streak`] turns it off.
//!
//! Pausing: a player who does not make the first move of a game loses it and is paused (lila withdraws
//! them); the service sets [`ArenaPlayer::paused`] (see `standings`), and a wave skips paused players
//! until they come back.
//!
//! Pairing ([`pair_wave`]): see its documentation.

use std::collections::HashMap;

use crate::{Colour, PlayerRef};

/// The scoring settings of one arena (the defaults are lichess's).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ArenaRules {
    /// Wins after two wins in a row count double (lichess: on unless the event turned streaks off).
    pub streaks: bool,
    /// A berserk win earns its extra point only if the game lasted at least this many plies.
    pub berserk_min_plies: u32,
    /// A draw in fewer plies than this earns nothing (0: every draw counts).
    pub quick_draw_plies: u32,
    /// Consecutive short draws (losses in between do not separate them) earn nothing after the first.
    pub draw_streak: bool,
    /// A draw of at least this many plies is a long game: it always counts, draw streak or not.
    pub long_game_plies: u32,
}

impl Default for ArenaRules {
    fn default() -> ArenaRules {
        ArenaRules {
            streaks: true,
            berserk_min_plies: 14,
            quick_draw_plies: 20,
            draw_streak: true,
            long_game_plies: 60,
        }
    }
}

/// A game's result from one player's point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Outcome {
    Win,
    Draw,
    Loss,
}

/// What the sheet needs to know of one finished game, from one player's point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArenaGame {
    pub outcome: Outcome,
    /// Plies played in the game (both sides).
    pub plies: u32,
    /// This player went berserk in this game.
    pub berserk: bool,
}

/// How one game was counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SheetResult {
    Win,
    Draw,
    Loss,
    /// A draw shorter than [`ArenaRules::quick_draw_plies`]: no point, and no draw for streaks.
    QuickDraw,
}

/// One line of a sheet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SheetEntry {
    pub result: SheetResult,
    /// Counted double (the player was on fire).
    pub doubled: bool,
    /// The berserk point was earned.
    pub berserk_point: bool,
    /// The points this game earned.
    pub points: i32,
}

/// A player's games in one arena, oldest first, and their total.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ArenaSheet {
    entries: Vec<SheetEntry>,
    total: i32,
}

impl ArenaSheet {
    /// The player's arena score.
    pub fn total(&self) -> i32 {
        self.total
    }

    /// The games counted so far, oldest first.
    pub fn entries(&self) -> &[SheetEntry] {
        &self.entries
    }

    /// The last two games were won: the next win (or draw) counts double.
    pub fn on_fire(&self) -> bool {
        let n = self.entries.len();
        n >= 2
            && self.entries[n - 1].result == SheetResult::Win
            && self.entries[n - 2].result == SheetResult::Win
    }

    /// Looking back over losses, the last game that was not lost was a draw (of either kind).
    fn after_draw(&self) -> bool {
        for entry in self.entries.iter().rev() {
            match entry.result {
                SheetResult::Loss => continue,
                SheetResult::Win => return false,
                SheetResult::Draw | SheetResult::QuickDraw => return true,
            }
        }
        false
    }

    /// Counts one more game; returns the points it earned.
    pub fn add(&mut self, game: &ArenaGame, rules: &ArenaRules) -> i32 {
        let fire = rules.streaks && self.on_fire();
        let (result, doubled, base) = match game.outcome {
            Outcome::Win if fire => (SheetResult::Win, true, 4),
            Outcome::Win => (SheetResult::Win, false, 2),
            Outcome::Loss => (SheetResult::Loss, false, 0),
            Outcome::Draw if game.plies < rules.quick_draw_plies => {
                (SheetResult::QuickDraw, false, 0)
            }
            Outcome::Draw if fire => (SheetResult::Draw, true, 2),
            Outcome::Draw
                if rules.draw_streak && game.plies < rules.long_game_plies && self.after_draw() =>
            {
                (SheetResult::Draw, false, 0)
            }
            Outcome::Draw => (SheetResult::Draw, false, 1),
        };
        let berserk_point =
            game.berserk && result == SheetResult::Win && game.plies >= rules.berserk_min_plies;
        let points = base + i32::from(berserk_point);
        self.entries.push(SheetEntry {
            result,
            doubled,
            berserk_point,
            points,
        });
        self.total += points;
        points
    }
}

/// A player waiting for a game, as a wave sees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArenaPlayer {
    pub player: PlayerRef,
    /// Arena points so far ([`ArenaSheet::total`]).
    pub score: i32,
    /// Rating in the event's category.
    pub rating: i32,
    /// Paused (left, or did not make a first move): not paired.
    pub paused: bool,
    /// Games with white minus games with black in this event: the lower one gets white.
    pub colour_balance: i32,
}

/// Each player's last opponent in the event (lila's `Pairing.LastOpponents`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LastOpponents(HashMap<PlayerRef, PlayerRef>);

impl LastOpponents {
    pub fn new() -> LastOpponents {
        LastOpponents::default()
    }

    /// `a` and `b` were paired (their previous last opponents are forgotten).
    pub fn record(&mut self, a: PlayerRef, b: PlayerRef) {
        self.0.insert(a, b);
        self.0.insert(b, a);
    }

    pub fn get(&self, player: PlayerRef) -> Option<PlayerRef> {
        self.0.get(&player).copied()
    }

    fn just_played(&self, a: PlayerRef, b: PlayerRef) -> bool {
        self.get(a) == Some(b) || self.get(b) == Some(a)
    }
}

/// Pairs further apart than this many places in the ranking are not considered (see [`pair_wave`]).
pub const BAND: usize = 6;

/// The cost of leaving a player unpaired: above any wave's total of rematches and rank gaps (up to
/// 100,000 players), so every wave pairs as many players as it can.
const UNPAIRED: i64 = 10_000_000_000_000;
/// The cost of an immediate rematch: above any wave's total of rank and rating gaps.
const REMATCH: i64 = 1_000_000_000;

/// Pairs one wave of waiting players. Returns `(white, black)` pairs, best-ranked first.
///
/// The players who are not paused (a player listed twice counts once) are ranked by score, then
/// rating, then pairing number. Among the ways of pairing them, the wave takes the one that, in this
/// order of priority:
/// 1. pairs the most players (all of them, or all but one when their number is odd);
/// 2. makes the fewest immediate rematches: two players who have just played each other meet again only
///    when they could not both be paired otherwise ("never twice in a row when another is available");
/// 3. has the smallest total cost, a pair's cost being lila's `AntmaPairing` score: the gap in ranks
///    times a rank factor (2,000 at the top down to 300 at the bottom: lila's `rankFactorFor`, so that
///    the leaders meet each other) plus the gap in ratings.
///
/// lila finds that matching with a general weighted matching (`WMMatching`) on groups of at most 100
/// players and pairs only the first two groups per wave. Here it is exact over the pairs at most
/// [`BAND`] places apart in the ranking (a pair further apart is never cheaper than a nearer one
/// unless rematches get in the way), found by dynamic programming over the ranking in
/// `O(n * 2^BAND * BAND)`: every waiting player is paired in each wave, 10,000 in a few milliseconds.
/// Colours: the player with fewer whites than blacks so far gets white; at equal balance, the
/// better-ranked player.
pub fn pair_wave(waiting: &[ArenaPlayer], history: &LastOpponents) -> Vec<(PlayerRef, PlayerRef)> {
    let mut seen = std::collections::HashSet::with_capacity(waiting.len());
    let mut ranked: Vec<&ArenaPlayer> = waiting
        .iter()
        .filter(|p| !p.paused && seen.insert(p.player))
        .collect();
    ranked.sort_by(|a, b| {
        b.score
            .cmp(&a.score)
            .then(b.rating.cmp(&a.rating))
            .then(a.player.cmp(&b.player))
    });
    band_matching(&ranked, history)
        .into_iter()
        .map(|(i, j)| {
            let (a, b) = (ranked[i], ranked[j]);
            if b.colour_balance < a.colour_balance {
                (b.player, a.player)
            } else {
                (a.player, b.player)
            }
        })
        .collect()
}

/// The cost of pairing ranks `i < j` of `n` (see [`pair_wave`]).
fn pair_cost(ranked: &[&ArenaPlayer], i: usize, j: usize, history: &LastOpponents) -> i64 {
    let n = ranked.len() as i64;
    let rank = i as i64 + 1;
    let factor = 300 + 1700 * (n - rank) / n;
    let (a, b) = (ranked[i], ranked[j]);
    let rematch = if history.just_played(a.player, b.player) {
        REMATCH
    } else {
        0
    };
    factor * (j - i) as i64 + (i64::from(a.rating) - i64::from(b.rating)).abs() + rematch
}

/// The optimal matching over pairs at most [`BAND`] apart: indexes into `ranked`, `i < j`, by `i`.
///
/// `best[i][mask]` is the least cost of deciding ranks `i..n` when `mask` marks which of ranks
/// `i..i + BAND` are already paired with a rank before `i`; computed from the end, keeping the choice.
fn band_matching(ranked: &[&ArenaPlayer], history: &LastOpponents) -> Vec<(usize, usize)> {
    const STATES: usize = 1 << BAND;
    const SKIP: u8 = u8::MAX;
    let n = ranked.len();
    if n < 2 {
        return Vec::new();
    }
    let mut choice = vec![0u8; n * STATES];
    let mut next = [0i64; STATES];
    let mut cur = [0i64; STATES];
    for i in (0..n).rev() {
        let mut costs = [0i64; BAND + 1];
        for (d, cost) in costs.iter_mut().enumerate().skip(1) {
            if i + d < n {
                *cost = pair_cost(ranked, i, i + d, history);
            }
        }
        for mask in 0..STATES {
            if mask & 1 == 1 {
                cur[mask] = next[mask >> 1];
                continue;
            }
            let mut best = UNPAIRED.saturating_add(next[mask >> 1]);
            let mut pick = SKIP;
            for (d, &cost) in costs.iter().enumerate().skip(1) {
                if i + d >= n {
                    break;
                }
                if mask >> d & 1 == 0 {
                    let v = cost.saturating_add(next[(mask | 1 << d) >> 1]);
                    if v < best {
                        best = v;
                        pick = d as u8;
                    }
                }
            }
            cur[mask] = best;
            choice[i * STATES + mask] = pick;
        }
        std::mem::swap(&mut cur, &mut next);
    }
    let mut pairs = Vec::with_capacity(n / 2);
    let mut mask = 0usize;
    for i in 0..n {
        if mask & 1 == 0 {
            let pick = choice[i * STATES + mask];
            if pick != SKIP {
                let d = usize::from(pick);
                pairs.push((i, i + d));
                mask |= 1 << d;
            }
        }
        mask >>= 1;
    }
    pairs
}

/// Colour of `player` in a pair returned by [`pair_wave`].
pub fn colour_in(pair: (PlayerRef, PlayerRef), player: PlayerRef) -> Option<Colour> {
    if pair.0 == player {
        Some(Colour::White)
    } else if pair.1 == player {
        Some(Colour::Black)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn game(outcome: Outcome) -> ArenaGame {
        ArenaGame {
            outcome,
            plies: 40,
            berserk: false,
        }
    }

    fn points(games: &[ArenaGame]) -> Vec<i32> {
        let mut sheet = ArenaSheet::default();
        let rules = ArenaRules::default();
        let pts = games.iter().map(|g| sheet.add(g, &rules)).collect();
        assert_eq!(
            sheet.total(),
            sheet.entries().iter().map(|e| e.points).sum::<i32>()
        );
        pts
    }

    use Outcome::{Draw, Loss, Win};

    #[test]
    fn wins_draws_losses() {
        assert_eq!(points(&[game(Win), game(Loss), game(Draw)]), vec![2, 0, 1]);
    }

    #[test]
    fn streak_starts_after_two_wins_and_ends_with_a_loss() {
        let games = [Win, Win, Win, Win, Loss, Win, Win, Win].map(game);
        assert_eq!(points(&games), vec![2, 2, 4, 4, 0, 2, 2, 4]);
    }

    #[test]
    fn a_draw_on_fire_counts_double_and_breaks_the_streak() {
        let games = [Win, Win, Draw, Win, Win, Win].map(game);
        assert_eq!(points(&games), vec![2, 2, 2, 2, 2, 4]);
    }

    #[test]
    fn a_draw_breaks_the_streak_before_it_starts() {
        let games = [Win, Draw, Win, Win].map(game);
        assert_eq!(points(&games), vec![2, 1, 2, 2]);
    }

    #[test]
    fn no_streaks_when_turned_off() {
        let rules = ArenaRules {
            streaks: false,
            ..ArenaRules::default()
        };
        let mut sheet = ArenaSheet::default();
        let pts: Vec<i32> = [Win, Win, Win, Draw]
            .map(|o| sheet.add(&game(o), &rules))
            .to_vec();
        assert_eq!(pts, vec![2, 2, 2, 1]);
    }

    #[test]
    fn berserk_point_on_a_win_after_enough_plies() {
        let b = |outcome, plies| ArenaGame {
            outcome,
            plies,
            berserk: true,
        };
        // 13 plies: too quick for the berserk point; 14: earned; on fire: 4 + 1.
        assert_eq!(
            points(&[b(Win, 13), b(Win, 14), b(Win, 30), b(Draw, 30), b(Loss, 30)]),
            vec![2, 3, 5, 2, 0]
        );
    }

    #[test]
    fn quick_draws_and_draw_streaks() {
        let d = |plies| ArenaGame {
            outcome: Draw,
            plies,
            berserk: false,
        };
        // A quick draw earns nothing; the next short draw follows a draw: nothing; a long one counts.
        assert_eq!(points(&[d(10), d(30), d(30), d(80)]), vec![0, 0, 0, 1]);
        // Losses between draws do not separate them; a win does.
        assert_eq!(
            points(&[d(30), game(Loss), d(30), game(Win), d(30)]),
            vec![1, 0, 0, 2, 1]
        );
        let rules = ArenaRules {
            draw_streak: false,
            quick_draw_plies: 0,
            ..ArenaRules::default()
        };
        let mut sheet = ArenaSheet::default();
        assert_eq!([d(10), d(30)].map(|g| sheet.add(&g, &rules)), [1, 1]);
    }

    #[test]
    fn a_quick_draw_ends_a_streak() {
        let q = ArenaGame {
            outcome: Draw,
            plies: 4,
            berserk: false,
        };
        assert_eq!(
            points(&[game(Win), game(Win), q, game(Win)]),
            vec![2, 2, 0, 2]
        );
    }

    fn player(i: u32, score: i32, rating: i32) -> ArenaPlayer {
        ArenaPlayer {
            player: PlayerRef(i),
            score,
            rating,
            paused: false,
            colour_balance: 0,
        }
    }

    #[test]
    fn pairs_by_rank_and_skips_paused() {
        let mut waiting = vec![
            player(1, 10, 1500),
            player(2, 0, 1500),
            player(3, 9, 1400),
            player(4, 1, 1600),
            player(5, 5, 1500),
        ];
        waiting[4].paused = true;
        let pairs = pair_wave(&waiting, &LastOpponents::new());
        assert_eq!(
            pairs,
            vec![(PlayerRef(1), PlayerRef(3)), (PlayerRef(4), PlayerRef(2))]
        );
    }

    #[test]
    fn avoids_the_last_opponent_when_another_is_available() {
        let waiting = [
            player(1, 10, 1500),
            player(2, 9, 1500),
            player(3, 8, 1500),
            player(4, 7, 1500),
        ];
        let mut history = LastOpponents::new();
        history.record(PlayerRef(1), PlayerRef(2));
        history.record(PlayerRef(3), PlayerRef(4));
        let pairs = pair_wave(&waiting, &history);
        assert_eq!(
            pairs,
            vec![(PlayerRef(1), PlayerRef(3)), (PlayerRef(2), PlayerRef(4))]
        );
        // Two players alone who just played: paired again rather than left waiting.
        let pairs = pair_wave(&waiting[..2], &history);
        assert_eq!(pairs, vec![(PlayerRef(1), PlayerRef(2))]);
    }

    #[test]
    fn white_to_the_lower_colour_balance() {
        let mut a = player(1, 10, 1500);
        let mut b = player(2, 9, 1500);
        a.colour_balance = 1;
        b.colour_balance = -1;
        assert_eq!(
            pair_wave(&[a, b], &LastOpponents::new()),
            vec![(PlayerRef(2), PlayerRef(1))]
        );
        assert_eq!(
            colour_in((PlayerRef(2), PlayerRef(1)), PlayerRef(1)),
            Some(Colour::Black)
        );
    }

    /// (pairs, rematches, cost) of a wave, as ranked by [`pair_wave`].
    fn wave_key(
        ranked: &[&ArenaPlayer],
        pairs: &[(usize, usize)],
        history: &LastOpponents,
    ) -> (usize, usize, i64) {
        let rematches = pairs
            .iter()
            .filter(|&&(i, j)| history.just_played(ranked[i].player, ranked[j].player))
            .count();
        let cost = pairs
            .iter()
            .map(|&(i, j)| pair_cost(ranked, i.min(j), i.max(j), history) % REMATCH)
            .sum();
        (usize::MAX - pairs.len(), rematches, cost)
    }

    /// Every matching of `0..n` (perfect or not), by recursion on the first undecided rank.
    fn all_matchings(
        free: &mut Vec<usize>,
        current: &mut Vec<(usize, usize)>,
        out: &mut Vec<Vec<(usize, usize)>>,
    ) {
        let Some(first) = free.first().copied() else {
            out.push(current.clone());
            return;
        };
        free.remove(0);
        all_matchings(free, current, out);
        for k in 0..free.len() {
            let other = free.remove(k);
            current.push((first, other));
            all_matchings(free, current, out);
            current.pop();
            free.insert(k, other);
        }
        free.insert(0, first);
    }

    fn arena_players() -> impl Strategy<Value = Vec<ArenaPlayer>> {
        prop::collection::vec(
            (0..30i32, 1200..1800i32, prop::bool::weighted(0.1), -2..3i32),
            0..60,
        )
        .prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (score, rating, paused, colour_balance))| ArenaPlayer {
                    player: PlayerRef(i as u32),
                    score,
                    rating,
                    paused,
                    colour_balance,
                })
                .collect()
        })
    }

    fn history_for(players: &[ArenaPlayer], seeds: &[(usize, usize)]) -> LastOpponents {
        let mut history = LastOpponents::new();
        if players.len() >= 2 {
            for &(a, b) in seeds {
                let (a, b) = (a % players.len(), b % players.len());
                if a != b {
                    history.record(players[a].player, players[b].player);
                }
            }
        }
        history
    }

    proptest! {
        #[test]
        fn a_wave_pairs_each_active_player_at_most_once(
            players in arena_players(),
            seeds in prop::collection::vec((0..60usize, 0..60usize), 0..30),
        ) {
            let history = history_for(&players, &seeds);
            let pairs = pair_wave(&players, &history);
            let mut seen = HashSet::new();
            for &(w, b) in &pairs {
                prop_assert!(seen.insert(w));
                prop_assert!(seen.insert(b));
            }
            let active: Vec<&ArenaPlayer> = players.iter().filter(|p| !p.paused).collect();
            for p in &players {
                prop_assert!(!(p.paused && seen.contains(&p.player)));
            }
            // Everybody active is paired, but one when their number is odd.
            prop_assert_eq!(pairs.len(), active.len() / 2);
            // White goes to the lower colour balance.
            let balance: HashMap<PlayerRef, i32> = players.iter().map(|p| (p.player, p.colour_balance)).collect();
            for &(w, b) in &pairs {
                prop_assert!(balance[&w] <= balance[&b]);
            }
        }

        #[test]
        fn a_small_wave_is_optimal(
            players in prop::collection::vec((0..6i32, 1400..1600i32, prop::bool::weighted(0.1)), 0..=BAND + 1),
            seeds in prop::collection::vec((0..8usize, 0..8usize), 0..5),
        ) {
            let players: Vec<ArenaPlayer> = players.into_iter().enumerate().map(|(i, (score, rating, paused))| ArenaPlayer {
                player: PlayerRef(i as u32), score, rating, paused, colour_balance: 0,
            }).collect();
            let history = history_for(&players, &seeds);
            let pairs = pair_wave(&players, &history);
            let mut ranked: Vec<&ArenaPlayer> = players.iter().filter(|p| !p.paused).collect();
            ranked.sort_by(|a, b| b.score.cmp(&a.score).then(b.rating.cmp(&a.rating)).then(a.player.cmp(&b.player)));
            let index: HashMap<PlayerRef, usize> = ranked.iter().enumerate().map(|(i, p)| (p.player, i)).collect();
            let ours: Vec<(usize, usize)> = pairs.iter().map(|(a, b)| (index[a], index[b])).collect();
            let mut all = Vec::new();
            all_matchings(&mut (0..ranked.len()).collect(), &mut Vec::new(), &mut all);
            let best = all.iter().map(|m| wave_key(&ranked, m, &history)).min().unwrap();
            prop_assert_eq!(wave_key(&ranked, &ours, &history), best);
        }
    }
}
