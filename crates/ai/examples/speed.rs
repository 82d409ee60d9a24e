//! Quick speed check: searches every benchmark position of each variant to its benchmark depth.
//! `cargo run --release -p draughts-ai --example speed [variant] [depth]`

use draughts_ai::{Limits, RootState, Searcher, bench};
use draughts_engine::{Position, Variant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let variants: Vec<Variant> = match args.get(1) {
        Some(v) => vec![v.parse().expect("variant")],
        None => Variant::ALL.to_vec(),
    };
    for v in variants {
        let depth = args
            .get(2)
            .map_or(bench::depth(v), |d| d.parse().expect("depth"));
        let (mut nodes, mut secs) = (0u64, 0f64);
        for fen in bench::positions(v) {
            let pos = Position::from_fen(v, fen).expect("fen");
            let mut s = Searcher::new(v);
            let r = s.search(&RootState::new(pos), &Limits::depth(depth), |_| {});
            nodes += r.nodes;
            secs += r.elapsed.as_secs_f64();
        }
        println!(
            "{v:<14} depth {depth:>2} {nodes:>11} nodes {secs:>7.3} s {:>6.2} M/s",
            nodes as f64 / secs / 1e6
        );
    }
}
