//! Perft against published numbers: every line of `tests/data/<variant>.perft` names its source.
//!
//! By default only lines whose counts stay under `DRAUGHTS_PERFT_MAX_NODES` (default 20 million) run, so
//! the suite takes seconds (`DRAUGHTS_PERFT_MIN_NODES` skips the lines below a count). Fields: `unique`, `all` (every capture order) and `paths` (every capture
//! order and every landing square of a straight-on king continuation, see `Count::AllPaths`); set `DRAUGHTS_PERFT_DEEP=1` to run every published depth (minutes to hours).
//! A position marked `refused` is published but cannot occur in a game (docs/rules.md §8): its lines check
//! that the engine refuses it.

use std::time::Instant;

use draughts_engine::{Count, Position, Variant};

struct Line {
    name: String,
    fen: String,
    depth: u32,
    unique: Option<u64>,
    all: Option<u64>,
    paths: Option<u64>,
    source: String,
    /// The position is one the engine refuses (it cannot occur: docs/rules.md §8); the line checks the
    /// refusal instead of the count.
    refused: bool,
}

fn read(variant: Variant) -> Vec<Line> {
    let path = format!(
        "{}/tests/data/{}.perft",
        env!("CARGO_MANIFEST_DIR"),
        variant.key()
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut lines = Vec::new();
    let (mut name, mut fen) = (String::new(), String::new());
    let mut refused = false;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        match key {
            "name" => {
                name = rest.trim().to_string();
                refused = false;
            }
            "fen" => fen = rest.trim().to_string(),
            "refused" => refused = true,
            "perft" => {
                let mut parts = rest.split_whitespace();
                let depth = parts.next().and_then(|d| d.parse().ok());
                let mut l = Line {
                    name: name.clone(),
                    fen: fen.clone(),
                    depth: depth.unwrap_or_else(|| panic!("{path}:{}: bad depth", i + 1)),
                    unique: None,
                    all: None,
                    paths: None,
                    source: String::new(),
                    refused,
                };
                for p in parts {
                    let (k, v) = p
                        .split_once('=')
                        .unwrap_or_else(|| panic!("{path}:{}: bad field {p}", i + 1));
                    match k {
                        "unique" => l.unique = v.parse().ok(),
                        "all" => l.all = v.parse().ok(),
                        "paths" => l.paths = v.parse().ok(),
                        "source" => l.source = v.to_string(),
                        _ => panic!("{path}:{}: unknown field {k}", i + 1),
                    }
                }
                assert!(
                    !l.source.is_empty(),
                    "{path}:{}: every number names its source",
                    i + 1
                );
                assert!(
                    l.unique.is_some() || l.all.is_some() || l.paths.is_some(),
                    "{path}:{}: no number",
                    i + 1
                );
                lines.push(l);
            }
            _ => panic!("{path}:{}: unknown line kind {key}", i + 1),
        }
    }
    assert!(!lines.is_empty(), "{path}: no perft lines");
    lines
}

fn check(variant: Variant) {
    let deep = std::env::var("DRAUGHTS_PERFT_DEEP").is_ok_and(|v| v != "0" && !v.is_empty());
    let budget: u64 = std::env::var("DRAUGHTS_PERFT_MAX_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000_000);
    // Lines below this count are skipped (to run only the deepest lines of an opt-in run).
    let min: u64 = std::env::var("DRAUGHTS_PERFT_MIN_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut ran = 0;
    let mut skipped = 0;
    for l in read(variant) {
        if l.refused {
            let e = Position::from_fen(variant, &l.fen).expect_err(&format!(
                "{variant} {}: marked refused but accepted",
                l.name
            ));
            eprintln!("{variant} {}: refused as it should be: {e}", l.name);
            ran += 1;
            continue;
        }
        let pos = Position::from_fen(variant, &l.fen)
            .unwrap_or_else(|e| panic!("{variant} {}: {e}", l.name));
        for (count, expected) in [
            (Count::Unique, l.unique),
            (Count::AllOrders, l.all),
            (Count::AllPaths, l.paths),
        ] {
            let Some(expected) = expected else { continue };
            if (!deep && expected > budget) || expected < min {
                skipped += 1;
                continue;
            }
            let t = Instant::now();
            let got = pos.perft(l.depth, count);
            eprintln!(
                "{variant} {} perft({}) {count:?} = {got} ({:.2}s, source {})",
                l.name,
                l.depth,
                t.elapsed().as_secs_f64(),
                l.source
            );
            assert_eq!(
                got, expected,
                "{variant} {} ({}) perft({}) {count:?} (source {})",
                l.name, l.fen, l.depth, l.source
            );
            ran += 1;
        }
    }
    eprintln!(
        "{variant}: {ran} perft lines checked, {skipped} deeper ones skipped (set DRAUGHTS_PERFT_DEEP=1)"
    );
    assert!(ran > 0 || min > 0);
}

#[test]
fn international() {
    check(Variant::International);
}
#[test]
fn english() {
    check(Variant::English);
}
#[test]
fn italian() {
    check(Variant::Italian);
}
#[test]
fn russian() {
    check(Variant::Russian);
}
#[test]
fn brazilian() {
    check(Variant::Brazilian);
}
#[test]
fn spanish() {
    check(Variant::Spanish);
}
#[test]
fn czech() {
    check(Variant::Czech);
}
#[test]
fn turkish() {
    check(Variant::Turkish);
}
#[test]
fn killer() {
    check(Variant::Killer);
}
#[test]
fn frisian() {
    check(Variant::Frisian);
}
#[test]
fn canadian() {
    check(Variant::Canadian);
}
