//! The standings through the public API: idempotent results, tie-breaks and ranks, and whole events
//! (arena waves and Swiss rounds) driven as the service will drive them.

use std::collections::HashSet;

use draughts_tournaments::arena::{ArenaRules, pair_wave};
use draughts_tournaments::standings::{
    Format, GameResult, Outcome, Standings, SwissRules, TieBreak, apply_result, join, leave,
    resume, start_round, table,
};
use draughts_tournaments::swiss::pair_round;
use draughts_tournaments::{Colour, PlayerRef};
use proptest::prelude::*;

fn p(i: u32) -> PlayerRef {
    PlayerRef(i)
}

fn game(id: &str, white: u32, black: u32, outcome: Outcome) -> GameResult {
    GameResult {
        game_id: id.parse().expect("a game id"),
        white: p(white),
        black: p(black),
        outcome,
        plies: 40,
        white_berserk: false,
        black_berserk: false,
        round: 0,
    }
}

fn swiss() -> Standings {
    Standings::new(Format::Swiss(SwissRules::default()))
}

fn arena() -> Standings {
    Standings::new(Format::Arena(ArenaRules::default()))
}

fn with_players(mut state: Standings, n: u32) -> Standings {
    for i in 1..=n {
        state = join(state, p(i), 2000 - i as i32);
    }
    state
}

#[test]
fn a_result_applied_twice_counts_once() {
    let state = with_players(arena(), 2);
    let once = apply_result(state, &game("g1", 1, 2, Outcome::WhiteWins));
    let twice = apply_result(once.clone(), &game("g1", 1, 2, Outcome::WhiteWins));
    assert_eq!(once, twice);
    // The first delivery wins, whatever a later one with the same id says.
    let other = apply_result(once.clone(), &game("g1", 1, 2, Outcome::BlackWins));
    assert_eq!(once, other);
    assert_eq!(once.entries[&p(1)].points, 2);
}

#[test]
fn swiss_tie_breaks_and_shared_ranks() {
    // Four players, three rounds, everybody meets everybody:
    // r1: 1-2 1-0, 3-4 draw; r2: 1-3 draw, 2-4 1-0; r3: 1-4 0-1, 2-3 draw.
    let mut s = with_players(swiss(), 4);
    for (id, w, b, o) in [
        ("a", 1, 2, Outcome::WhiteWins),
        ("b", 3, 4, Outcome::Draw),
        ("c", 1, 3, Outcome::Draw),
        ("d", 2, 4, Outcome::WhiteWins),
        ("e", 1, 4, Outcome::BlackWins),
        ("f", 2, 3, Outcome::Draw),
    ] {
        s = apply_result(s, &game(id, w, b, o));
    }
    // Points (half-points): 1: 2+1+0 = 3, 2: 0+2+1 = 3, 3: 1+1+1 = 3, 4: 1+0+2 = 3. All equal:
    // Buchholz = 9 for everybody; Sonneborn-Berger (quarters): 1: 2*3 + 1*3 = 9, 2: 2*3 + 1*3 = 9,
    // 3: 1*3*3 = 9, 4: 9. A single shared rank.
    let rows = table(&s);
    assert!(
        rows.iter()
            .all(|r| r.points == 3 && r.buchholz == 9 && r.rank == 1)
    );
    assert!(
        rows.iter()
            .all(|r| r.sonneborn_berger == 9 && r.buchholz_cut1 == 6)
    );

    // A fifth player who beat player 1 only: Buchholz and SB tell the leaders apart.
    let mut s = with_players(swiss(), 4);
    for (id, w, b, o) in [
        ("a", 1, 2, Outcome::WhiteWins), // 1: 2
        ("b", 3, 4, Outcome::WhiteWins), // 3: 2
        ("c", 1, 3, Outcome::WhiteWins), // 1: 4
        ("d", 2, 4, Outcome::Draw),      // 2: 1, 4: 1
    ] {
        s = apply_result(s, &game(id, w, b, o));
    }
    let rows = table(&s);
    let row = |i| rows.iter().find(|r| r.player == p(i)).unwrap().clone();
    assert_eq!((row(1).points, row(1).buchholz, row(1).rank), (4, 3, 1));
    // 3 (2 points, beat 4 who has 1, lost to 1 who has 4): Buchholz 5, SB 2*1 = 2 quarters.
    assert_eq!(
        (row(3).points, row(3).buchholz, row(3).sonneborn_berger),
        (2, 5, 2)
    );
    // 2 and 4 both on 1 point: 2 met 1 (4) and 4 (1): Buchholz 5; 4 met 3 (2) and 2 (1): 3.
    assert_eq!((row(2).buchholz, row(4).buchholz), (5, 3));
    assert_eq!((row(2).rank, row(4).rank), (3, 4));
    assert_eq!(row(2).buchholz_cut1, 4);
}

#[test]
fn tie_break_order_is_the_events() {
    let rules = SwissRules {
        tie_breaks: vec![TieBreak::SonnebornBerger, TieBreak::BuchholzCut1],
    };
    let mut s = with_players(Standings::new(Format::Swiss(rules)), 3);
    s = apply_result(s, &game("a", 1, 2, Outcome::Draw));
    s = apply_result(s, &game("b", 3, 1, Outcome::Draw));
    let rows = table(&s);
    assert_eq!(rows[0].player, p(1));
    assert_eq!(rows[0].rank, 1);
    assert_eq!(rows[1].rank, 2);
    // 2 and 3 are equal in everything: a shared rank, the higher rating listed first.
    assert_eq!(
        (rows[1].player, rows[2].player, rows[2].rank),
        (p(2), p(3), 2)
    );
}

#[test]
fn arena_event_pauses_a_player_who_does_not_move() {
    let mut s = with_players(arena(), 4);
    let waiting: Vec<PlayerRef> = (1..=4).map(p).collect();
    let wave = pair_wave(&s.arena_waiting(&waiting), &s.last_opponents());
    assert_eq!(wave.len(), 2);
    let (w, b) = wave[0];
    let mut r = game("g1", w.0, b.0, Outcome::NoFirstMove(Colour::Black));
    r.plies = 1;
    s = apply_result(s, &r);
    let (w2, b2) = wave[1];
    s = apply_result(s, &game("g2", w2.0, b2.0, Outcome::WhiteWins));
    assert!(s.entries[&b].paused);
    assert_eq!(s.entries[&w].points, 2);
    assert_eq!(s.entries[&b].points, 0);
    // The next wave skips the paused player; three others: one pair, never the last opponents.
    let wave = pair_wave(&s.arena_waiting(&waiting), &s.last_opponents());
    assert_eq!(wave.len(), 1);
    assert!(!wave.iter().any(|&(x, y)| x == b || y == b));
    // Back in the event: paired again.
    s = resume(s, b);
    let wave = pair_wave(&s.arena_waiting(&waiting), &s.last_opponents());
    assert_eq!(wave.len(), 2);
    let last = s.last_opponents();
    assert!(wave.iter().all(|&(x, y)| last.get(x) != Some(y)));
    // Leaving an arena is a pause, not a withdrawal.
    s = leave(s, p(1));
    assert!(s.entries[&p(1)].paused && !s.entries[&p(1)].withdrawn);
}

#[test]
fn arena_streaks_and_berserk_through_the_standings() {
    let mut s = with_players(arena(), 2);
    for (k, o) in [Outcome::WhiteWins; 3].into_iter().enumerate() {
        let mut r = game(&format!("g{k}"), 1, 2, o);
        r.white_berserk = k == 2;
        s = apply_result(s, &r);
    }
    // 2 + 2 + (4 + 1 berserk)
    assert_eq!(s.entries[&p(1)].points, 9);
    assert_eq!(table(&s)[0].player, p(1));
}

#[test]
fn swiss_event_with_a_late_entry_a_withdrawal_and_byes() {
    let mut s = with_players(swiss(), 5);
    let r1 = pair_round(&s.swiss_players());
    assert_eq!(r1.bye, Some(p(5)));
    s = start_round(s, 1, &r1);
    let again = start_round(s.clone(), 1, &r1);
    assert_eq!(again, s, "starting a round twice changes nothing");
    for (k, &(w, b)) in r1.pairs.iter().enumerate() {
        s = apply_result(s, &game(&format!("r1-{k}"), w.0, b.0, Outcome::WhiteWins));
    }
    assert_eq!(s.entries[&p(5)].points, 2, "the bye scores as a win");
    // A late entry in round 2, with no points; player 1 withdraws.
    s = join(s, p(6), 2500);
    assert_eq!(s.entries[&p(6)].points, 0);
    assert_eq!(s.entries[&p(6)].joined_round, 1);
    s = leave(s, p(1));
    let players = s.swiss_players();
    assert_eq!(players.len(), 5);
    let r2 = pair_round(&players);
    let paired: HashSet<PlayerRef> = r2.pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
    assert!(!paired.contains(&p(1)));
    assert!(paired.contains(&p(6)));
    assert_ne!(r2.bye, Some(p(5)), "never the bye twice");
    assert!(r2.bye.is_some());
    // The withdrawn player stays in the table.
    assert!(table(&s).iter().any(|r| r.player == p(1) && r.withdrawn));
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        Just(Outcome::WhiteWins),
        Just(Outcome::BlackWins),
        Just(Outcome::Draw),
        Just(Outcome::NoFirstMove(Colour::White)),
        Just(Outcome::NoFirstMove(Colour::Black)),
    ]
}

proptest! {
    #[test]
    fn duplicates_change_nothing(
        arena_format in any::<bool>(),
        games in prop::collection::vec((0u32..12, 1u32..7, 1u32..7, outcome(), 0u32..40, any::<bool>()), 0..60),
    ) {
        let start = with_players(if arena_format { arena() } else { swiss() }, 6);
        let results: Vec<GameResult> = games.iter().map(|&(id, w, b, o, plies, berserk)| GameResult {
            game_id: format!("g{id}").parse().expect("a game id"),
            white: p(w),
            black: p(b),
            outcome: o,
            plies,
            white_berserk: berserk,
            black_berserk: false,
            round: 0,
        }).collect();
        let mut with_duplicates = start.clone();
        for r in &results {
            with_duplicates = apply_result(with_duplicates, r);
            // Applying the same result again at once changes nothing.
            let again = apply_result(with_duplicates.clone(), r);
            prop_assert_eq!(&again, &with_duplicates);
        }
        let mut seen = HashSet::new();
        let mut first_only = start;
        for r in results
            .iter()
            .filter(|r| r.white != r.black && seen.insert(r.game_id.clone()))
        {
            first_only = apply_result(first_only, r);
        }
        prop_assert_eq!(&with_duplicates, &first_only);
        // Arena points are the sheets' totals; every table's ranks are ordered and start at 1.
        let rows = table(&with_duplicates);
        for w in rows.windows(2) {
            prop_assert!(w[0].rank <= w[1].rank && w[0].points >= w[1].points);
        }
        prop_assert!(rows.first().is_none_or(|r| r.rank == 1));
    }

    #[test]
    fn swiss_events_through_the_standings(
        n in 2u32..30,
        rounds in 1u32..9,
        seeds in prop::collection::vec((0u8..3, 0u32..40, 0u32..40), 10),
    ) {
        let mut s = with_players(swiss(), n);
        let mut met = HashSet::new();
        let mut byes = HashSet::new();
        let mut next_player = n + 1;
        for r in 1..=rounds {
            let (o, leaver, late) = seeds[r as usize % seeds.len()];
            if late % 4 == 0 {
                s = join(s, p(next_player), 1500);
                next_player += 1;
            }
            if leaver % 5 == 0 {
                s = leave(s, p(1 + leaver % n));
            }
            let players = s.swiss_players();
            let round = pair_round(&players);
            for &(a, b) in &round.pairs {
                prop_assert!(met.insert((a.min(b), a.max(b))), "a rematch in round {}", r);
                prop_assert!(!s.entries[&a].withdrawn && !s.entries[&b].withdrawn);
            }
            if let Some(b) = round.bye {
                prop_assert!(byes.insert(b) || round.repeated_bye);
            }
            s = start_round(s, r, &round);
            for (k, &(w, b)) in round.pairs.iter().enumerate() {
                let outcome = match (o as usize + k) % 3 {
                    0 => Outcome::WhiteWins,
                    1 => Outcome::Draw,
                    _ => Outcome::BlackWins,
                };
                let mut g = game(&format!("r{r}-{k}"), w.0, b.0, outcome);
                g.round = r;
                s = apply_result(s, &g);
            }
        }
        // Each game hands out 2 half-points, each bye 2.
        let games: usize = s.entries.values().map(|e| e.games.len()).sum::<usize>() / 2;
        let bye_count: usize = s.entries.values().map(|e| e.byes.len()).sum();
        let total: i32 = s.entries.values().map(|e| e.points).sum();
        prop_assert_eq!(total as usize, 2 * games + 2 * bye_count);
    }
}
