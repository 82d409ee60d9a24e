//! Bulk-counting perft from the command line, with only the engine compiled (a quick release build for speed
//! measurements): `cargo run --release -p draughts-engine --example perft -- VARIANT DEPTH [FEN] [unique|all]`.
//! Prints `perft(DEPTH) = N in S s (M nodes/s)`.

use std::time::Instant;

use draughts_engine::{Count, Position, Variant};

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
    let t = Instant::now();
    let n = pos.perft(depth, count);
    let s = t.elapsed().as_secs_f64();
    println!(
        "perft({depth}) = {n} in {s:.3} s ({:.1} M nodes/s)",
        n as f64 / s / 1e6
    );
    Ok(())
}
