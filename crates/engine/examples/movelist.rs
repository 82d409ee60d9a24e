//! Move-list generation speed (the path the AI's search takes: a list per position, no bulk counting):
//! `cargo run --release -p draughts-engine --example movelist -- FILE [ROUNDS]`, FILE holding
//! `<variant> <FEN>` lines (`crates/ai/data/bench.txt`). For each position, ROUNDS times (default 200):
//! its legal moves and, after each, the reply list. Prints per variant the lists made, moves listed and
//! a checksum of every reply list (equal for two builds that generate the same moves in the same order).

use std::collections::BTreeMap;
use std::time::Instant;

use draughts_engine::{Count, Position, Variant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let file = args.first().ok_or("usage: movelist FILE [ROUNDS]")?;
    let rounds: u32 = args.get(1).map_or("200", String::as_str).parse()?;
    let mut positions: BTreeMap<Variant, Vec<Position>> = BTreeMap::new();
    for line in std::fs::read_to_string(file)?.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, fen) = line.split_once(' ').ok_or("a line is `<variant> <FEN>`")?;
        let variant: Variant = key.parse()?;
        positions
            .entry(variant)
            .or_default()
            .push(Position::from_fen(variant, fen)?);
    }
    let (mut list, mut replies) = (Vec::new(), Vec::new());
    for (variant, positions) in &positions {
        let t = Instant::now();
        let (mut lists, mut moves, mut sum) = (0u64, 0u64, 0u64);
        for _ in 0..rounds {
            for pos in positions {
                pos.legal_moves_into(&mut list, Count::Unique);
                lists += 1;
                moves += list.len() as u64;
                for (i, mv) in list.iter().enumerate() {
                    let child = pos.play_unchecked(mv);
                    child.legal_moves_into(&mut replies, Count::Unique);
                    lists += 1;
                    moves += replies.len() as u64;
                    for r in &replies {
                        sum = sum.wrapping_mul(31).wrapping_add(
                            (i as u64)
                                ^ u64::from(r.from().bit()) << 8
                                ^ u64::from(r.to().bit()) << 16
                                ^ (r.captured().0 as u64) << 24,
                        );
                    }
                }
            }
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "{variant}: {lists} lists, {moves} moves in {s:.3} s ({:.1} M lists/s), checksum {sum:016x}",
            lists as f64 / s / 1e6
        );
    }
    Ok(())
}
