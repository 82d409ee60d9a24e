//! Move generation speed: perft (bulk-counted at the last ply) from each variant's start position.
//! `cargo bench -p draughts-engine`; `draughts bench` reports the deeper, few-seconds figures.

use criterion::{Criterion, criterion_group, criterion_main};
use draughts_engine::{Count, Position, Variant};

fn perft(c: &mut Criterion) {
    let mut group = c.benchmark_group("perft-start");
    group.sample_size(10);
    for v in Variant::ALL {
        let depth = match v {
            Variant::International => 7,
            Variant::Turkish => 6,
            _ => 9,
        };
        let pos = Position::start(v);
        group.bench_function(format!("{v}/{depth}"), |b| {
            b.iter(|| pos.perft(depth, Count::Unique))
        });
    }
    group.finish();
}

criterion_group!(benches, perft);
criterion_main!(benches);
