//! One wave's pairing over 1k, 10k and 100k waiting players in one pool (ratings spread like a real
//! pool: normal around 1500 with a deviation of 300; a tenth provisional, a tenth with a missed wave).
//! `mixed` also has a tenth aborters and a tenth with a narrow rating range (neighbours are often
//! incompatible: the dynamic programme runs instead of the neighbour pairing).
//! `cargo bench -p draughts-matchmaking --bench wave`.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use draughts_matchmaking::pairing::{Candidate, Rules, pair};
use rand::{Rng, SeedableRng};

fn pool(n: usize, mixed: bool) -> Vec<Candidate> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(12);
    (0..n)
        .map(|i| {
            // Irwin-Hall approximation of a normal distribution.
            let z: f64 = (0..12).map(|_| rng.random::<f64>()).sum::<f64>() - 6.0;
            let rating = (1500.0 + 300.0 * z) as i32;
            Candidate {
                aborter: mixed && i % 10 == 2,
                range: (mixed && i % 10 == 3).then_some((rating - 30, rating + 200)),
                provisional: i % 10 == 0,
                missed_waves: u32::from(i % 10 == 1),
                ..Candidate::new(&format!("player:{i}"), rating)
            }
        })
        .collect()
}

fn waves(c: &mut Criterion) {
    let rules = Rules {
        base_gap: 100,
        widen_per_wave: 50,
        max_gap: 500,
        provisional_extra: 200,
        aborter_waves: 3,
    };
    let mut group = c.benchmark_group("wave");
    group.sample_size(10);
    for mixed in [false, true] {
        for n in [1_000, 10_000, 100_000] {
            let candidates = pool(n, mixed);
            let name = if mixed { "mixed" } else { "plain" };
            group.bench_with_input(BenchmarkId::new(name, n), &candidates, |b, candidates| {
                b.iter(|| pair(candidates, &rules))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, waves);
criterion_main!(benches);
