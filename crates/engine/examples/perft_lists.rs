//! perft without bulk counting: the full legal move list is generated at every node, the last ply
//! included (its length is the count), through the public API the AI's search uses
//! (`Position::legal_moves_into`, `Position::play_unchecked`), so that the time is move generation and
//! playing moves alone, without the last-ply shortcuts of `Position::perft`:
//! `cargo run --release -p draughts-engine --example perft_lists -- VARIANT DEPTH [FEN] [unique|all]`.
//! Prints `perft(DEPTH) = N in S s (M nodes/s)`; N equals `--example perft`'s.

use std::time::Instant;

use draughts_engine::{Count, Position, Variant};

fn perft(
    pos: &Position,
    depth: u32,
    count: Count,
    lists: &mut [Vec<draughts_engine::Move>],
) -> u64 {
    let (list, rest) = lists.split_first_mut().expect("one list a ply");
    pos.legal_moves_into(list, count);
    if depth == 1 {
        return list.len() as u64;
    }
    let mut n = 0;
    for mv in list.iter() {
        n += perft(&pos.play_unchecked(mv), depth - 1, count, rest);
    }
    n
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let variant: Variant = args
        .first()
        .map_or("international", String::as_str)
        .parse()?;
    let depth: u32 = args.get(1).map_or("6", String::as_str).parse()?;
    let pos = match args.get(2).filter(|f| !f.is_empty() && *f != "start") {
        Some(fen) => Position::from_fen(variant, fen)?,
        None => Position::start(variant),
    };
    let count = match args.get(3).map(String::as_str) {
        Some("all") => Count::AllOrders,
        _ => Count::Unique,
    };
    let mut lists = vec![Vec::new(); depth.max(1) as usize];
    let t = Instant::now();
    let n = if depth == 0 {
        1
    } else {
        perft(&pos, depth, count, &mut lists)
    };
    let s = t.elapsed().as_secs_f64();
    println!(
        "perft({depth}) = {n} in {s:.3} s ({:.1} M nodes/s)",
        n as f64 / s / 1e6
    );
    Ok(())
}
