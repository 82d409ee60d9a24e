//! Arena waves over 100, 1,000 and 10,000 waiting players (scores 0-60, ratings around 1500 with a
//! deviation of 300, everybody's last opponent among their neighbours in the ranking), and Swiss rounds
//! of 100, 1,000 and 10,000 players: the first round (one score group) and the fifth (after four rounds
//! paired by the pairer itself with random results, through the standings).
//! `cargo bench -p draughts-tournaments --bench pairing`.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use draughts_tournaments::PlayerRef;
use draughts_tournaments::arena::{ArenaPlayer, LastOpponents, pair_wave};
use draughts_tournaments::standings::{
    Format, GameResult, Outcome, Standings, apply_result, join, start_round,
};
use draughts_tournaments::swiss::{SwissPlayer, pair_round};
use rand::{Rng, SeedableRng};

fn rating(rng: &mut impl Rng) -> i32 {
    // Irwin-Hall approximation of a normal distribution.
    let z: f64 = (0..12).map(|_| rng.random::<f64>()).sum::<f64>() - 6.0;
    (1500.0 + 300.0 * z) as i32
}

fn arena(n: usize) -> (Vec<ArenaPlayer>, LastOpponents) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(41);
    let mut players: Vec<ArenaPlayer> = (0..n)
        .map(|i| ArenaPlayer {
            player: PlayerRef(i as u32),
            score: rng.random_range(0..60),
            rating: rating(&mut rng),
            paused: i % 20 == 0,
            colour_balance: rng.random_range(-2..3),
        })
        .collect();
    players.sort_by_key(|p| (-p.score, -p.rating));
    let mut history = LastOpponents::new();
    for pair in players.chunks(2) {
        if let [a, b] = pair {
            history.record(a.player, b.player);
        }
    }
    (players, history)
}

fn swiss(n: usize, rounds: u32) -> Vec<SwissPlayer> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let mut state = Standings::new(Format::Swiss(Default::default()));
    for i in 0..n {
        state = join(state, PlayerRef(i as u32), rating(&mut rng));
    }
    for r in 1..=rounds {
        let round = pair_round(&state.swiss_players());
        state = start_round(state, r, &round);
        for (k, &(white, black)) in round.pairs.iter().enumerate() {
            let outcome = match rng.random_range(0..10) {
                0..=4 => Outcome::WhiteWins,
                5..=7 => Outcome::BlackWins,
                _ => Outcome::Draw,
            };
            let result = GameResult {
                game_id: format!("t{r}-{k}").parse().expect("a game id"),
                white,
                black,
                outcome,
                plies: 60,
                white_berserk: false,
                black_berserk: false,
                round: r,
            };
            state = apply_result(state, &result);
        }
    }
    state.swiss_players()
}

fn waves(c: &mut Criterion) {
    let mut group = c.benchmark_group("arena_wave");
    group.sample_size(10);
    for n in [100, 1_000, 10_000] {
        let (players, history) = arena(n);
        group.bench_with_input(BenchmarkId::from_parameter(n), &players, |b, players| {
            b.iter(|| pair_wave(players, &history))
        });
    }
    group.finish();
}

fn rounds(c: &mut Criterion) {
    let mut group = c.benchmark_group("swiss_round");
    group.sample_size(10);
    for n in [100, 1_000, 10_000] {
        for before in [0, 4] {
            let players = swiss(n, before);
            let name = format!("round{}", before + 1);
            group.bench_with_input(BenchmarkId::new(name, n), &players, |b, players| {
                b.iter(|| pair_round(players))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, waves, rounds);
criterion_main!(benches);
