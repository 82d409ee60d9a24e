//! The fixed benchmark positions: middlegame positions per variant (`data/bench.txt`, generated once by
//! `cargo run --release -p draughts-ai --example gen_bench` from level-5 self-play after balanced openings,
//! then frozen), and the depth each variant is searched to.

use draughts_engine::Variant;

const DATA: &str = include_str!("../data/bench.txt");

/// The benchmark FENs of a variant.
pub fn positions(variant: Variant) -> Vec<&'static str> {
    DATA.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .filter(|(v, _)| *v == variant.key())
        .map(|(_, fen)| fen.trim())
        .collect()
}

/// The benchmark depth of a variant (a fraction of a second per position in a release build).
pub fn depth(variant: Variant) -> u32 {
    match variant {
        Variant::International => 12,
        Variant::Canadian => 10,
        Variant::Turkish => 10,
        _ => 14,
    }
}
