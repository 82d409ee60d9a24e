//! Bitbase tests: known endgame results, a self-consistency sweep over whole slices, agreement with a plain
//! win/loss search on random positions, the file format's typed errors, and the search's use of the tables.
//!
//! The 2- and 3-piece tables are built in the tests themselves (a second or two); `DRAUGHTS_SLOW=1` also
//! builds and checks the 4-piece tables of russian and international.

use std::sync::OnceLock;

use draughts_ai::bitbase::{self, Bitbases, FileError, Material, Value, file};
use draughts_ai::search::BITBASE_WIN;
use draughts_ai::{Limits, RootState, Score, Searcher};
use draughts_engine::{Count, Position, Variant};

fn slow() -> bool {
    std::env::var("DRAUGHTS_SLOW").is_ok_and(|v| v == "1")
}

/// The 3-piece tables of a variant, built once per test binary.
fn tables(variant: Variant) -> &'static Bitbases {
    static CACHE: [OnceLock<Bitbases>; 4] = [const { OnceLock::new() }; 4];
    let slot = match variant {
        Variant::International => 0,
        Variant::English => 1,
        Variant::Russian => 2,
        Variant::Brazilian => 3,
        other => panic!("no test tables for {other}"),
    };
    CACHE[slot].get_or_init(|| bitbase::build(variant, 3, |_| {}).expect("supported variant"))
}

/// `check(variant, fen, expected)`: the tables' value of a position for the side to move.
fn check(tables: &Bitbases, fen: &str, expected: Value) {
    let pos = Position::from_fen(tables.variant(), fen).expect("test FENs are valid");
    assert_eq!(
        tables.probe(&pos),
        Some(expected),
        "{} {fen}",
        tables.variant()
    );
}

#[test]
fn known_results_international() {
    let t = tables(Variant::International);
    // docs/rules.md (a side with no legal move has lost): a king against a king draws unless one takes
    // the other at once.
    check(t, "W:WK1:BK50", Value::Draw);
    check(t, "B:WK1:BK50", Value::Draw);
    // FMJD endgame theory (the reason for the 5-move rule of docs/rules.md "Draw rules": "2 or fewer
    // pieces against a lone king"): two kings cannot beat a king holding the long diagonal 46-5.
    check(t, "W:WK1,K2:BK28", Value::Draw);
    check(t, "B:WK1,K2:BK28", Value::Draw);
    check(t, "W:WK3,K45:BK46", Value::Draw);
    // A man that cannot be stopped: white to move takes the other man at once.
    check(t, "W:W28:B23", Value::Win);
    check(t, "B:W28:B23", Value::Win);
    // The side to move with its pieces blocked has lost (docs/rules.md, "Common to every variant").
    check(t, "B:W28,K46:B23", Value::Loss);
    // Most 2-kings-against-1 positions are draws: the single king reaches the long diagonal.
    let slice = t
        .slice(Material::new(0, 2, 0, 1))
        .expect("3-piece slice built");
    let (mut wins, mut valid) = (0u64, 0u64);
    for i in 0..slice.index.size() {
        match slice.stored(i) {
            bitbase::STORED_INVALID => {}
            code => {
                valid += 1;
                wins += u64::from(code == bitbase::STORED_WIN);
            }
        }
    }
    assert!(wins * 2 < valid, "{wins} wins of {valid}");
}

#[test]
fn known_results_english() {
    let t = tables(Variant::English);
    // Checkers theory: two kings beat one king (the lone king is driven out of the double corner; e.g.
    // Wikipedia "English draughts", and the classic "first position" literature); short kings.
    check(t, "W:WK32,K31:BK1", Value::Win);
    check(t, "B:WK32,K31:BK1", Value::Loss);
    check(t, "W:WK29,K25:BK5", Value::Win);
    // A king against a king: no progress possible.
    check(t, "W:WK32:BK1", Value::Draw);
    // A man one step from the last row crowns, and king against king is a draw.
    check(t, "W:W5:BK32", Value::Draw);
    // Over the whole slice, the two kings win almost every position with no capture for either side;
    // the exceptions are forks where the lone king wins a king back (1 v 1 then draws).
    let slice = t.slice(Material::new(0, 2, 0, 1)).expect("slice built");
    let layout = t.layout();
    let (mut quiet, mut won) = (0u32, 0u32);
    for i in 0..slice.index.size() {
        let Some((squares, side)) = slice.index.squares(layout, i) else {
            continue;
        };
        let pos = layout.position(&squares, side).expect("valid");
        if pos.has_capture() || pos.with_side_to_move(!side).has_capture() {
            continue;
        }
        quiet += 1;
        let expected = if side == draughts_engine::Color::White {
            Value::Win
        } else {
            Value::Loss
        };
        won += u32::from(t.probe(&pos) == Some(expected));
    }
    assert!(f64::from(won) > 0.9 * f64::from(quiet), "{won} of {quiet}");
}

#[test]
fn known_results_russian_and_brazilian() {
    // Flying kings on 8x8: two kings cannot beat one king on the long diagonal (a1-h8, squares 29..4).
    for v in [Variant::Russian, Variant::Brazilian] {
        let t = tables(v);
        check(t, "W:WK1,K2:BK22", Value::Draw);
        check(t, "W:WK1:BK32", Value::Draw);
    }
}

/// Every WIN has a move to a position lost for the opponent, every LOSS has only moves to positions won
/// for the opponent (or none), and every DRAW has no move to a lost one and one to a drawn one.
fn assert_consistent(t: &Bitbases, pieces: u32) {
    let layout = t.layout();
    let mut moves = Vec::new();
    for slice in t.slices().filter(|s| s.index.material().total() <= pieces) {
        for i in 0..slice.index.size() {
            let Some((squares, side)) = slice.index.squares(layout, i) else {
                assert_eq!(slice.stored(i), bitbase::STORED_INVALID);
                continue;
            };
            let pos = layout.position(&squares, side).expect("valid");
            let value = t.probe(&pos).expect("in the tables");
            pos.legal_moves_into(&mut moves, Count::Unique);
            let children: Vec<Value> = moves
                .iter()
                .map(|m| t.probe(&pos.play_unchecked(m)).expect("in the tables"))
                .collect();
            let ok = match value {
                Value::Win => children.contains(&Value::Loss),
                Value::Loss => children.iter().all(|&c| c == Value::Win),
                Value::Draw => !children.contains(&Value::Loss) && children.contains(&Value::Draw),
            };
            assert!(ok, "{value:?} {} children {children:?}", pos.to_fen());
        }
    }
}

#[test]
fn slices_are_self_consistent() {
    for v in [
        Variant::English,
        Variant::Russian,
        Variant::Brazilian,
        Variant::International,
    ] {
        assert_consistent(tables(v), 3);
    }
}

#[test]
fn four_piece_tables_are_self_consistent_slow() {
    if !slow() {
        return;
    }
    // International's 4-piece tables take minutes to build: check them on disk with
    // `DRAUGHTS_BITBASE_CHECK=international:DIR` instead.
    for v in [Variant::Russian, Variant::English] {
        let t = bitbase::build(v, 4, |_| {}).expect("supported");
        assert_consistent(&t, 4);
        if v == Variant::Russian {
            // Petrov's triangle: three kings beat one that does not hold the long diagonal (white to
            // move, no capture at once); with the lone king on it (22), a draw.
            check(&t, "W:WK30,K31,K32:BK1", Value::Win);
            check(&t, "W:WK1,K2,K3:BK22", Value::Draw);
        }
    }
}

/// Whether the side to move can force a win (`Some(Win)`), or will be forced to lose (`Some(Loss)`),
/// within `plies`: plain AND-OR search on the engine's moves, no tables, no heuristics.
fn forced(pos: &Position, plies: u32) -> Option<Value> {
    let moves = pos.legal_moves();
    if moves.is_empty() {
        return Some(Value::Loss);
    }
    if plies == 0 {
        return None;
    }
    let mut all_lose = true;
    for m in &moves {
        match forced(&pos.play_unchecked(m), plies - 1) {
            Some(Value::Loss) => return Some(Value::Win),
            Some(Value::Win) => {}
            _ => all_lose = false,
        }
    }
    all_lose.then_some(Value::Loss)
}

#[test]
fn agrees_with_plain_search_on_random_positions() {
    let mut rng = draughts_ai::Rng::new(13);
    for v in [Variant::English, Variant::International, Variant::Russian] {
        let t = tables(v);
        let layout = t.layout();
        let slices: Vec<_> = t.slices().collect();
        let mut checked = 0;
        while checked < 40 {
            let slice = slices[rng.below(slices.len() as u64) as usize];
            let i = rng.below(slice.index.size());
            let Some((squares, side)) = slice.index.squares(layout, i) else {
                continue;
            };
            let pos = layout.position(&squares, side).expect("valid");
            checked += 1;
            let value = t.probe(&pos).expect("in the tables");
            // A result forced within 7 plies (5 with flying kings on 10x10) must be the tables' one.
            let plies = if v == Variant::International { 5 } else { 7 };
            if let Some(f) = forced(&pos, plies) {
                assert_eq!(f, value, "{v} {}", pos.to_fen());
            }
            // The search, without tables: a forced win or loss it finds must be the tables' one too.
            let mut searcher = Searcher::new(v);
            let r = searcher.search(&RootState::new(pos), &Limits::depth(10), |_| {});
            match r.score() {
                Some(Score::WinIn(_)) => assert_eq!(value, Value::Win, "{v} {}", pos.to_fen()),
                Some(Score::LossIn(_)) => {
                    assert_eq!(value, Value::Loss, "{v} {}", pos.to_fen())
                }
                _ => {}
            }
        }
    }
}

#[test]
fn bad_files_are_refused_with_typed_errors() {
    let t = tables(Variant::English);
    let slice = t.slice(Material::new(0, 2, 0, 1)).expect("slice");
    let good = file::encode(Variant::English, slice);
    let layout = t.layout();
    let back = file::decode(&good, layout).expect("round trip");
    assert_eq!(back.packed, slice.packed);

    let mut short = good.clone();
    short.truncate(good.len() - 1);
    assert!(matches!(
        file::decode(&short, layout),
        Err(FileError::Truncated { .. })
    ));
    for n in 0..31 {
        assert!(
            file::decode(&good[..n], layout).is_err(),
            "header cut at {n}"
        );
    }
    let mut magic = good.clone();
    magic[0] = b'X';
    assert_eq!(
        file::decode(&magic, layout).err(),
        Some(FileError::BadMagic)
    );
    let mut version = good.clone();
    version[8] = 9;
    assert_eq!(
        file::decode(&version, layout).err(),
        Some(FileError::Version(9))
    );
    let russian = bitbase::Layout::new(Variant::Russian).expect("supported");
    assert!(matches!(
        file::decode(&good, &russian),
        Err(FileError::WrongVariant { .. })
    ));
    let mut material = good.clone();
    material[11..15].copy_from_slice(&[0, 0, 0, 3]);
    assert!(matches!(
        file::decode(&material, layout),
        Err(FileError::BadMaterial(_))
    ));
    let mut corrupt = good.clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x55;
    assert_eq!(file::decode(&corrupt, layout).err(), Some(FileError::Hash));

    // Through the loader: the bad file is named in the error; a missing directory is no tables.
    let tmp = tempfile::Builder::new()
        .prefix("draughts-bb-test-")
        .tempdir()
        .expect("temp dir");
    let dir = tmp.path();
    std::fs::write(dir.join("english-0201.bb"), &short).expect("write");
    let err = Bitbases::load(dir, Variant::English).expect_err("truncated file");
    assert!(matches!(
        err,
        bitbase::BitbaseError::File {
            error: FileError::Truncated { .. },
            ..
        }
    ));
    let none = Bitbases::load(&dir.join("missing"), Variant::English).expect("no directory");
    assert_eq!(none.pieces(), 0);
    // Written and loaded back: the same values.
    std::fs::remove_dir_all(dir).expect("clean");
    t.write_dir(dir).expect("write tables");
    let loaded = Bitbases::load(dir, Variant::English).expect("load");
    assert_eq!(loaded.pieces(), 3);
    check(&loaded, "W:WK32,K31:BK1", Value::Win);
}

#[test]
fn a_stopped_build_goes_on_and_threads_change_nothing() {
    let full = tables(Variant::English);
    let tmp = tempfile::Builder::new()
        .prefix("draughts-bb-resume-")
        .tempdir()
        .expect("temp dir");
    let dir = tmp.path();
    // Every slice is written as it is solved.
    let mut written = Vec::new();
    let mut t = Bitbases::empty(Variant::English).expect("supported");
    bitbase::extend(&mut t, 3, 1, |r, slice| {
        written.push(r.material);
        Bitbases::write_slice(dir, Variant::English, slice).map(|_| ())
    })
    .expect("build");
    assert_eq!(written.len(), full.slices().count());
    // A build stopped after some slices: two files gone (one of 2 pieces, one of 3 that depends on it).
    let gone = [Material::new(0, 1, 0, 1), Material::new(0, 2, 0, 1)];
    for m in gone {
        std::fs::remove_file(dir.join(file::file_name(Variant::English, m))).expect("remove");
    }
    let mut resumed = Bitbases::load(dir, Variant::English).expect("load");
    assert!(resumed.pieces() < 2, "a 2-piece slice is missing");
    let mut again = Vec::new();
    bitbase::extend(&mut resumed, 3, 1, |r, _| {
        again.push(r.material);
        Ok(())
    })
    .expect("resume");
    assert_eq!(again, gone, "only the missing slices are solved again");
    for slice in full.slices() {
        let m = slice.index.material();
        assert_eq!(resumed.slice(m).expect("slice").packed, slice.packed, "{m}");
    }

    // The forward pass on two threads gives the same tables (the 4-piece slices span many work blocks).
    let one = bitbase::build(Variant::English, 4, |_| {}).expect("one thread");
    let mut two = Bitbases::empty(Variant::English).expect("supported");
    bitbase::extend(&mut two, 4, 2, |_, _| Ok(())).expect("two threads");
    assert_eq!(one.slices().count(), two.slices().count());
    for slice in one.slices() {
        let m = slice.index.material();
        assert_eq!(two.slice(m).expect("slice").packed, slice.packed, "{m}");
    }
}

#[test]
fn search_uses_the_tables() {
    let international = std::sync::Arc::new(tables(Variant::International).clone());
    // A root outside the tables (4 pieces, tables of 3): captures lead into them and are probed.
    let pos = Position::from_fen(Variant::International, "W:WK1,K2,K3:BK28").expect("valid");
    let mut searcher = Searcher::new(Variant::International);
    searcher.set_bitbases(Some(international.clone()));
    searcher.search(&RootState::new(pos), &Limits::depth(6), |_| {});
    assert!(searcher.bitbase_hits() > 0);
    // A root inside the tables: the search plays only moves that keep the value (here a win for two
    // short kings against one).
    let english = std::sync::Arc::new(tables(Variant::English).clone());
    for fen in ["W:WK32,K31:BK1", "W:WK29,K25:BK5", "B:WK1:BK28,K32"] {
        let pos = Position::from_fen(Variant::English, fen).expect("valid");
        let mut searcher = Searcher::new(Variant::English);
        searcher.set_bitbases(Some(english.clone()));
        let r = searcher.search(&RootState::new(pos), &Limits::depth(4), |_| {});
        let best = r.best.expect("a move");
        assert_eq!(english.probe(&pos), Some(Value::Win), "{fen}");
        assert_eq!(
            english.probe(&pos.play_unchecked(&best)),
            Some(Value::Loss),
            "{fen}"
        );
    }
    // The score of a won ending reached inside the search is a bitbase win, below the search's own.
    const { assert!(BITBASE_WIN + 2_000 < draughts_ai::search::WIN_THRESHOLD) };
    // Tables of another variant are not probed.
    let pos = Position::from_fen(Variant::English, "W:WK32,K31:BK1").expect("valid");
    let mut searcher = Searcher::new(Variant::English);
    searcher.set_bitbases(Some(international));
    searcher.search(&RootState::new(pos), &Limits::depth(4), |_| {});
    assert_eq!(searcher.bitbase_hits(), 0);
}

/// A shelf (every variant's tables in one directory) gives each root the tables of its own variant, also
/// when one searcher goes from variant to variant (as an analysis worker's does).
#[test]
fn a_shelf_follows_the_root_s_variant() {
    let tmp = tempfile::Builder::new()
        .prefix("draughts-bb-shelf-")
        .tempdir()
        .expect("temp dir");
    let dir = tmp.path();
    tables(Variant::English).write_dir(dir).expect("write");
    tables(Variant::International)
        .write_dir(dir)
        .expect("write");
    let shelf = bitbase::Shelf::load(dir).expect("load");
    // Removed now: the loaded shelf no longer needs the files, and the end checks a missing directory.
    std::fs::remove_dir_all(dir).expect("clean");
    assert_eq!(
        shelf.summary(),
        vec![(Variant::International, 3), (Variant::English, 3)]
    );
    assert!(shelf.get(Variant::Russian).is_none());
    let mut searcher = Searcher::new(Variant::Russian);
    searcher.set_shelf(Some(std::sync::Arc::new(shelf)));
    // Four pieces, one capture from three: probed inside the search.
    let roots = [
        (Variant::International, "W:WK1,K2,K3:BK28", true),
        (Variant::English, "W:WK11,K5:BK30,15", true),
        (Variant::Russian, "W:WKa1,Kc1:BKe5,Kh8", false),
        (Variant::International, "W:WK1,K2,K3:BK28", true),
    ];
    for (variant, fen, probed) in roots {
        let pos = Position::from_fen(variant, fen).expect("valid");
        searcher.search(&RootState::new(pos), &Limits::depth(4), |_| {});
        assert_eq!(searcher.bitbase_hits() > 0, probed, "{variant} {fen}");
    }
    assert!(bitbase::Shelf::load(dir).is_err(), "a missing directory");
}

/// Tables on disk (`DRAUGHTS_BITBASE_CHECK=VARIANT:DIR`, e.g. `english:/tmp/bb/english-5`): the
/// consistency rule on random positions of every slice, loaded as the search loads them.
#[test]
fn tables_on_disk_are_consistent_opt_in() {
    let Ok(spec) = std::env::var("DRAUGHTS_BITBASE_CHECK") else {
        return;
    };
    let (variant, dir) = spec.split_once(':').expect("VARIANT:DIR");
    let variant: Variant = variant.parse().expect("variant");
    let t = Bitbases::load(std::path::Path::new(dir), variant).expect("tables load");
    let layout = t.layout();
    let mut rng = draughts_ai::Rng::new(7);
    let mut moves = Vec::new();
    for slice in t.slices() {
        let mut checked = 0;
        while checked < 2000 {
            let i = rng.below(slice.index.size());
            let Some((squares, side)) = slice.index.squares(layout, i) else {
                continue;
            };
            checked += 1;
            let pos = layout.position(&squares, side).expect("valid");
            let value = t.probe(&pos).expect("in the tables");
            pos.legal_moves_into(&mut moves, Count::Unique);
            let children: Vec<Value> = moves
                .iter()
                .map(|m| t.probe(&pos.play_unchecked(m)).expect("in the tables"))
                .collect();
            let ok = match value {
                Value::Win => children.contains(&Value::Loss),
                Value::Loss => children.iter().all(|&c| c == Value::Win),
                Value::Draw => !children.contains(&Value::Loss) && children.contains(&Value::Draw),
            };
            assert!(ok, "{value:?} {} children {children:?}", pos.to_fen());
        }
    }
}

/// Games from random won 5-piece positions (`DRAUGHTS_BITBASE_PLAY=VARIANT:DIR`): the side with the
/// tables must never lose a position the tables call won.
#[test]
fn won_positions_are_not_lost_opt_in() {
    let Ok(spec) = std::env::var("DRAUGHTS_BITBASE_PLAY") else {
        return;
    };
    let (variant, dir) = spec.split_once(':').expect("VARIANT:DIR");
    let variant: Variant = variant.parse().expect("variant");
    let t = std::sync::Arc::new(
        Bitbases::load(std::path::Path::new(dir), variant).expect("tables load"),
    );
    let layout = t.layout().clone();
    let mut rng = draughts_ai::Rng::new(11);
    let slices: Vec<_> = t
        .slices()
        .filter(|s| s.index.material().total() == t.pieces())
        .collect();
    let (mut won, mut drawn, mut lost) = (0, 0, 0);
    while won + drawn + lost < 20 {
        let slice = slices[rng.below(slices.len() as u64) as usize];
        let i = rng.below(slice.index.size());
        let Some((squares, side)) = slice.index.squares(&layout, i) else {
            continue;
        };
        let pos = layout.position(&squares, side).expect("valid");
        if t.probe(&pos) != Some(Value::Win) || pos.has_capture() {
            continue;
        }
        let mut game = draughts_engine::Game::new(pos);
        let mut with = Searcher::new(variant);
        with.set_bitbases(Some(t.clone()));
        let mut without = Searcher::new(variant);
        let winner = pos.side_to_move();
        for _ in 0..300 {
            if game.status() != draughts_engine::GameStatus::Ongoing {
                break;
            }
            let searcher = if game.position().side_to_move() == winner {
                &mut with
            } else {
                &mut without
            };
            let r = searcher.search(&RootState::from_game(&game), &Limits::nodes(30_000), |_| {});
            let Some(mv) = r.best else { break };
            game.play(&mv).expect("legal");
        }
        let status = game.status();
        eprintln!("{} -> {status:?}", pos.to_fen());
        match status {
            draughts_engine::GameStatus::Finished(r) if r.winner() == Some(winner) => won += 1,
            draughts_engine::GameStatus::Finished(r) if r.winner().is_some() => lost += 1,
            _ => drawn += 1,
        }
    }
    eprintln!("won {won} drawn {drawn} lost {lost}");
    assert_eq!(lost, 0);
}
