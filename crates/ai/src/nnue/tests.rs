use std::sync::Arc;

use draughts_engine::{Color, Position, Variant};

use super::fit::{NnueFitConfig, fit};
use super::*;
use crate::eval::Evaluator;
use crate::level::Rng;
use crate::train::Sample;

/// A network of random weights (activations spread over the clip's range).
fn random_net(variant: Variant, hidden: usize, layer2: usize, seed: u64) -> Network {
    random_net_w2(variant, hidden, layer2, seed, 0.2)
}

/// [`random_net`] with the second layer's float weights drawn within `+-w2_range` (times 64 in the
/// integers: 0.2 keeps them within +-64, 1.5 within a byte, 3.0 outside one).
fn random_net_w2(
    variant: Variant,
    hidden: usize,
    layer2: usize,
    seed: u64,
    w2_range: f32,
) -> Network {
    let mut rng = Rng::new(seed);
    let mut u = |r: f32| (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 * r - r;
    let n = variant.rules().board.board().squares().count();
    let float = FloatNet {
        variant,
        hidden,
        layer2,
        w1: (0..KINDS * n * hidden).map(|_| u(0.3)).collect(),
        b1: (0..hidden).map(|_| u(0.5) + 0.3).collect(),
        w2: (0..layer2 * 2 * hidden).map(|_| u(w2_range)).collect(),
        b2: (0..layer2).map(|_| u(0.5)).collect(),
        w3: (0..layer2).map(|_| u(2.0)).collect(),
        b3: u(0.2),
    };
    Network::quantise(&float).unwrap()
}

/// Random games: every position along them, with kings promoted by play and some placed by hand.
fn positions(variant: Variant, n: usize, seed: u64) -> Vec<Position> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let mut pos = Position::start(variant);
    while out.len() < n {
        let moves = pos.legal_moves();
        if moves.is_empty() || rng.below(200) == 0 {
            pos = Position::start(variant);
            continue;
        }
        pos = pos.play_unchecked(&moves[rng.below(moves.len() as u64) as usize]);
        out.push(pos);
    }
    out
}

fn mirror(pos: &Position) -> Position {
    let board = pos.board();
    let size = board.size;
    let name = |sq| {
        let (f, r) = board.coords(sq);
        board.number(board.square_at(size - 1 - f, size - 1 - r).unwrap())
    };
    let list = |c: Color| {
        pos.pieces(c)
            .map(|sq| {
                let k = if pos.kings().contains(sq) { "K" } else { "" };
                format!("{k}{}", name(sq))
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    let side = if pos.side_to_move() == Color::White {
        "B"
    } else {
        "W"
    };
    let fen = format!("{side}:W{}:B{}", list(Color::Black), list(Color::White));
    Position::from_fen(pos.variant(), &fen).unwrap()
}

#[test]
fn simd_portable_incremental_and_refresh_agree() {
    for (hidden, layer2) in [(128, 32), (32, 8)] {
        let net = random_net(Variant::International, hidden, layer2, 3);
        let portable = net.with_kernel(Kernel::Portable).unwrap();
        let simd = net.with_kernel(Kernel::Avx2);
        let mut stack = AccumulatorStack::default();
        let mut simd_stack = AccumulatorStack::default();
        let mut rng = Rng::new(9);
        let mut distinct = std::collections::HashSet::new();
        for pos in positions(Variant::International, 3000, 5) {
            let sets = Sets::of(&pos);
            let wtm = pos.side_to_move() == Color::White;
            let reference = portable.evaluate(sets, wtm);
            distinct.insert(reference);
            // A ply chosen at random, as a search meets positions at many plies.
            let ply = rng.below(6) as usize;
            assert_eq!(stack.evaluate(&portable, sets, wtm, ply), reference);
            if let Some(simd) = &simd {
                assert_eq!(simd.evaluate(sets, wtm), reference);
                assert_eq!(simd_stack.evaluate(simd, sets, wtm, ply), reference);
            }
        }
        assert!(stack.updates > stack.refreshes, "the updates are used");
        assert!(distinct.len() > 100, "the scores vary: {}", distinct.len());
    }
}

/// Every kernel path against the portable refresh: the AVX2 second layer on bytes with two groups
/// of four added in `i16` (weights within +-64), on bytes one group at a time (within a byte), on
/// `i16` weights (outside a byte); the accumulators updated in registers (H = 128, 64) and a stretch at
/// a time (H = 48); updated from the ply above and in place; and an output kept for a position met
/// again at its ply, asked for either side to move.
#[test]
fn every_kernel_path_and_the_kept_outputs_equal_a_refresh() {
    let cases = [
        (128, 32, 0.2),
        (128, 32, 1.5),
        (128, 32, 3.0),
        (64, 16, 1.5),
        (48, 24, 0.2),
    ];
    for (i, (hidden, layer2, w2_range)) in cases.into_iter().enumerate() {
        let net = random_net_w2(
            Variant::International,
            hidden,
            layer2,
            20 + i as u64,
            w2_range,
        );
        let reference = net.with_kernel(Kernel::Portable).unwrap();
        let nets = [Some(reference.clone()), net.with_kernel(Kernel::Avx2)];
        for net in nets.iter().flatten() {
            let mut stack = AccumulatorStack::default();
            let mut rng = Rng::new(31);
            let mut kept = 0;
            let (mut ply, mut last) = (0usize, None);
            for pos in positions(Variant::International, 2000, 40 + i as u64) {
                let sets = Sets::of(&pos);
                let wtm = pos.side_to_move() == Color::White;
                // Mostly one ply deeper than the last position (a line of play), sometimes back up.
                ply = if rng.below(4) == 0 {
                    rng.below(6) as usize
                } else {
                    (ply + 1) % 8
                };
                assert_eq!(
                    stack.evaluate(net, sets, wtm, ply),
                    reference.evaluate(sets, wtm)
                );
                // The same position again at its ply: for the same side to move (the kept output)
                // and for the other.
                if rng.below(3) == 0 {
                    let w = if rng.below(2) == 0 { wtm } else { !wtm };
                    kept += usize::from(w == wtm);
                    assert_eq!(
                        stack.evaluate(net, sets, w, ply),
                        reference.evaluate(sets, w)
                    );
                }
                // A position met before, at a ply below it (its accumulator was moved on since).
                if let Some((old_sets, old_wtm)) = last
                    && rng.below(5) == 0
                {
                    let p = rng.below(8) as usize;
                    assert_eq!(
                        stack.evaluate(net, old_sets, old_wtm, p),
                        reference.evaluate(old_sets, old_wtm)
                    );
                }
                last = Some((sets, wtm));
            }
            assert!(
                stack.updates > 4 * stack.refreshes,
                "{} {}",
                stack.updates,
                stack.refreshes
            );
            assert!(kept > 100, "kept outputs asked for: {kept}");
        }
    }
    // The three second-layer forms are the ones meant.
    let form = |r: f32| {
        random_net_w2(Variant::International, 128, 32, 1, r)
            .w2_quads
            .map(|q| q.pairs)
    };
    assert_eq!(form(0.2), Some(true));
    assert_eq!(form(1.5), Some(false));
    assert_eq!(form(3.0), None);
}

#[test]
fn colour_mirrored_positions_score_opposite() {
    let net = Arc::new(random_net(Variant::International, 64, 16, 4));
    let eval = Evaluator::network(net);
    let mut nonzero = 0;
    for pos in positions(Variant::International, 500, 8) {
        let m = mirror(&pos);
        let (a, b) = (eval.evaluate(&pos), eval.evaluate(&m));
        // Both are for their side to move: the mirrored side to move is the other colour.
        assert_eq!(a, b, "{}", pos.to_fen());
        nonzero += usize::from(a != 0);
    }
    assert!(nonzero > 400);
}

#[test]
fn the_evaluator_s_incremental_path_equals_its_full_one() {
    let net = Arc::new(random_net(Variant::International, 128, 32, 6));
    let eval = Evaluator::network(net);
    let mut stack = AccumulatorStack::default();
    for (i, pos) in positions(Variant::International, 1000, 12)
        .iter()
        .enumerate()
    {
        assert_eq!(eval.evaluate_at(pos, &mut stack, i % 4), eval.evaluate(pos));
    }
    // A search with the network runs and finds a move.
    let mut searcher = crate::Searcher::new(Variant::International);
    searcher.set_evaluator(eval);
    let root = crate::RootState::new(Position::start(Variant::International));
    let r = searcher.search(&root, &crate::Limits::depth(4), |_| {});
    assert!(r.best.is_some());
}

#[test]
fn files_round_trip_and_bad_files_are_typed_errors() {
    let v = Variant::International;
    let net = random_net(v, 32, 8, 1);
    let bytes = net.to_bytes();
    let back = Network::from_bytes(v, &bytes).unwrap();
    assert_eq!(back.to_bytes(), bytes);
    assert_eq!(back.shape(), (50, 32, 8));
    let pos = Position::start(v);
    assert_eq!(
        back.evaluate(Sets::of(&pos), true),
        net.evaluate(Sets::of(&pos), true)
    );

    for cut in [0, 3, 5, 7, 20, bytes.len() / 2, bytes.len() - 1] {
        let e = Network::from_bytes(v, &bytes[..cut]).unwrap_err();
        assert!(
            matches!(e, NnueError::Truncated | NnueError::Magic if cut < 4 || e == NnueError::Truncated),
            "cut {cut}: {e}"
        );
    }
    let mut bad = bytes.clone();
    bad[0] = b'X';
    assert_eq!(Network::from_bytes(v, &bad).unwrap_err(), NnueError::Magic);
    let mut bad = bytes.clone();
    bad[4] = 9;
    assert_eq!(
        Network::from_bytes(v, &bad).unwrap_err(),
        NnueError::Version(9)
    );
    let mut bad = bytes.clone();
    bad.push(0);
    assert_eq!(
        Network::from_bytes(v, &bad).unwrap_err(),
        NnueError::Trailing(1)
    );
    assert_eq!(
        Network::from_bytes(Variant::English, &bytes).unwrap_err(),
        NnueError::Variant("international".into())
    );
    // A hidden size the kernels do not take.
    let at = 4 + 2 + 1 + v.key().len() + 2;
    let mut bad = bytes.clone();
    bad[at..at + 2].copy_from_slice(&20u16.to_le_bytes());
    assert!(matches!(
        Network::from_bytes(v, &bad).unwrap_err(),
        NnueError::Shape(_)
    ));
    // A network moves to a variant on its board, not to another board.
    assert!(net.for_variant(Variant::Killer).is_some());
    assert!(net.for_variant(Variant::English).is_none());
}

/// Samples whose labels follow material (a learnable signal), from random games.
fn material_samples(n: usize, seed: u64) -> Vec<Sample> {
    let mut rng = Rng::new(seed);
    positions(Variant::International, n, seed)
        .iter()
        .enumerate()
        .map(|(i, pos)| {
            let (wm, wk) = pos.material(Color::White);
            let (bm, bk) = pos.material(Color::Black);
            let diff = wm as i32 + 3 * wk as i32 - bm as i32 - 3 * bk as i32;
            let noise = rng.below(3) as i32 - 1;
            Sample {
                white: pos.pieces(Color::White).0,
                black: pos.pieces(Color::Black).0,
                kings: pos.kings().0,
                white_to_move: pos.side_to_move() == Color::White,
                result: (1 + (diff + noise).signum()) as u8,
                score: (diff * 100) as i16,
                game_start: i % 40 == 0,
            }
        })
        .collect()
}

/// The small fit the trainer's tests run: six epochs of a 32 x 8 network at a large step, one thread.
fn small_fit() -> NnueFitConfig {
    NnueFitConfig {
        hidden: 32,
        layer2: 8,
        epochs: 6,
        batch: 128,
        learning_rate: 1e-2,
        seed: 5,
        threads: 1,
        ..NnueFitConfig::default()
    }
}

#[test]
fn the_fit_is_seeded_threads_change_nothing_and_it_learns() {
    let samples = material_samples(3000, 2);
    let cfg = small_fit();
    let mut lines = Vec::new();
    let (a, ra) = fit(Variant::International, &samples, &cfg, |p| {
        lines.push(p.clone())
    })
    .unwrap();
    let (b, rb) = fit(
        Variant::International,
        &samples,
        &NnueFitConfig {
            threads: 3,
            ..cfg.clone()
        },
        |_| {},
    )
    .unwrap();
    assert_eq!(a.to_bytes(), b.to_bytes());
    assert_eq!(ra.fit.final_validation_loss, rb.fit.final_validation_loss);
    let (c, _) = fit(
        Variant::International,
        &samples,
        &NnueFitConfig {
            seed: 6,
            ..cfg.clone()
        },
        |_| {},
    )
    .unwrap();
    assert_ne!(a.to_bytes(), c.to_bytes());
    // The second layer is kept where the fastest kernel runs it, also where a large step pushes its
    // weights to the bound.
    let (d, _) = fit(
        Variant::International,
        &samples,
        &NnueFitConfig {
            learning_rate: 0.3,
            epochs: 2,
            ..cfg.clone()
        },
        |_| {},
    )
    .unwrap();
    for net in [&a, &d] {
        assert!(net.w2.iter().all(|w| w.abs() <= 64));
        assert!(net.w2_quads.as_ref().is_some_and(|q| q.pairs));
    }
    let at_bound = d.w2.iter().filter(|w| w.abs() == 64).count();
    assert!(at_bound > 0);
    // Weight decay keeps the weights smaller, the fit still learns, and it is as seeded as the rest.
    let decayed = NnueFitConfig {
        weight_decay: 1.0,
        ..cfg.clone()
    };
    let (e, re) = fit(Variant::International, &samples, &decayed, |_| {}).unwrap();
    let (e2, _) = fit(Variant::International, &samples, &decayed, |_| {}).unwrap();
    assert_eq!(e.to_bytes(), e2.to_bytes());
    let norm = |n: &Network| -> f64 {
        n.w1.iter()
            .map(|&w| f64::from(w) * f64::from(w))
            .sum::<f64>()
            .sqrt()
    };
    assert!(norm(&e) < 0.9 * norm(&a), "{} vs {}", norm(&e), norm(&a));
    assert!(re.fit.final_validation_loss < 0.5, "{re:?}");
    // One line per epoch with the validation loss, and it falls below a coin's.
    let ends: Vec<f64> = lines.iter().filter_map(|p| p.validation_loss).collect();
    assert_eq!(ends.len(), 6);
    assert!(ra.fit.validation_games.unwrap() > 0);
    assert!(ra.fit.final_validation_loss < 0.45, "{ra:?}");
    assert!(
        (ra.quantised_validation_loss - ra.fit.final_validation_loss).abs() < 0.02,
        "{ra:?}"
    );
    // The network prefers an extra man.
    let pos = Position::from_fen(Variant::International, "W:W31,32,33,34,35:B16,17,18,19").unwrap();
    assert!(Evaluator::network(Arc::new(a)).evaluate(&pos) > 0);
}

/// The networks kept in the repository for later rounds to compare against read as international
/// networks, run on the fastest kernel, and prefer an extra man.
#[test]
fn the_kept_networks_load_and_value_a_man() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/nnue");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let net = Network::from_bytes(Variant::International, &bytes)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            net.w2_quads.as_ref().is_some_and(|q| q.pairs),
            "{}",
            path.display()
        );
        let pos =
            Position::from_fen(Variant::International, "W:W31,32,33,34,35:B16,17,18,19").unwrap();
        assert!(
            Evaluator::network(Arc::new(net)).evaluate(&pos) > 0,
            "{}",
            path.display()
        );
        seen += 1;
    }
    assert!(seen >= 2, "{seen} networks in {}", dir.display());
}

/// A fit can go on from a network: its float model rounds back to the same integers, a fit of no epochs
/// from it gives it back, a fit of some epochs from it learns from there (a lower loss at the first
/// epoch's end than from the seeded draw), and a network of another shape or variant is refused.
#[test]
fn a_fit_goes_on_from_a_network() {
    for (hidden, layer2, seed) in [(32, 8, 3), (128, 32, 4)] {
        let net = random_net(Variant::International, hidden, layer2, seed);
        let again = Network::quantise(&net.to_float()).unwrap();
        assert_eq!(again.to_bytes(), net.to_bytes());
    }
    let samples = material_samples(3000, 2);
    let cfg = small_fit();
    let (trained, _) = fit(Variant::International, &samples, &cfg, |_| {}).unwrap();
    let go_on = NnueFitConfig {
        init: Some(trained.to_float()),
        ..cfg.clone()
    };
    let (same, _) = fit(
        Variant::International,
        &samples,
        &NnueFitConfig {
            epochs: 0,
            ..go_on.clone()
        },
        |_| {},
    )
    .unwrap();
    assert_eq!(same.to_bytes(), trained.to_bytes());
    let first_epoch = |cfg: &NnueFitConfig| {
        let mut first = None;
        fit(
            Variant::International,
            &samples,
            &NnueFitConfig {
                epochs: 1,
                ..cfg.clone()
            },
            |p| {
                if first.is_none() {
                    first = p.validation_loss;
                }
            },
        )
        .unwrap();
        first.unwrap()
    };
    let (from_draw, from_net) = (first_epoch(&cfg), first_epoch(&go_on));
    assert!(from_net < from_draw, "{from_net} vs {from_draw}");
    let wider = NnueFitConfig {
        hidden: 64,
        ..go_on.clone()
    };
    assert!(matches!(
        fit(Variant::International, &samples, &wider, |_| {}),
        Err(NnueError::Shape(_))
    ));
    let mut other = trained.to_float();
    other.variant = Variant::Frisian;
    let frisian = NnueFitConfig {
        init: Some(other),
        ..cfg
    };
    assert!(matches!(
        fit(Variant::International, &samples, &frisian, |_| {}),
        Err(NnueError::Variant(_))
    ));
}
