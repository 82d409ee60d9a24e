//! The retrograde generator.
//!
//! Per slice, in [`Material::solving_order`]:
//! 1. **Forward pass** (the engine's move generator): every position's moves are generated once. A move
//!    that captures or promotes leaves the slice and its value is read from a solved slice; a quiet move
//!    stays and is only counted. A position with a move to a lost position is won; one with no move is
//!    lost; one whose moves all leave the slice is decided at once (lost if every child is won, else
//!    drawn). The others keep the count of their quiet children and whether a child outside was a draw.
//! 2. **Backward pass** (un-moves): each newly lost or won position is taken back one quiet move of the
//!    side that moved (a king back along a free line, or one square with short kings; a man one square
//!    backward). A predecessor is a real one only if the engine accepts it and its side has no capture
//!    there (capture is mandatory), which makes the move legal in it. A lost child makes the predecessor
//!    won; a won child decrements its count, and a count reaching zero makes it lost (or drawn if a child
//!    outside the slice was drawn).
//! 3. What is left undecided is a draw: neither side can force a result.
//!
//! The rules of moves and captures are the engine's: only the geometry of a quiet move (which is the same
//! in every supported variant) is written here, and the forward pass checks it through the counts.

use std::time::{Duration, Instant};

use draughts_engine::{Color, Count, Move, Variant};

use super::index::{Layout, Material, SliceIndex, Squares};
use super::{
    BitbaseError, Bitbases, STORED_DRAW, STORED_INVALID, STORED_LOSS, STORED_WIN, Slice, Value,
};

const UNKNOWN: u8 = 0;
const WIN: u8 = 1;
const LOSS: u8 = 2;
const DRAW: u8 = 3;
const INVALID: u8 = 4;

/// Count bits of the per-position counter; the top bit says a child outside the slice is a draw.
const DRAW_OUTSIDE: u8 = 0x80;

/// What one solved slice came to (for progress lines).
#[derive(Clone, Debug)]
pub struct SliceReport {
    pub material: Material,
    /// Indices of the slice (both sides to move, unused indices included).
    pub size: u64,
    pub wins: u64,
    pub draws: u64,
    pub losses: u64,
    pub elapsed: Duration,
    /// Slices solved so far and in all.
    pub done: usize,
    pub total: usize,
}

/// Builds every slice of `variant` with at most `max_pieces` pieces, one thread; `on_slice` is called
/// after each.
pub fn build(
    variant: Variant,
    max_pieces: u32,
    mut on_slice: impl FnMut(&SliceReport),
) -> Result<Bitbases, BitbaseError> {
    let mut tables = Bitbases::empty(variant)?;
    extend(&mut tables, max_pieces, 1, |report, _| {
        on_slice(report);
        Ok(())
    })?;
    Ok(tables)
}

/// Solves the slices of at most `max_pieces` pieces that `tables` lacks, in solving order (so a build
/// stopped part-way goes on from the slices it kept), with `threads` threads for each slice's forward
/// pass. `on_slice` gets each new slice once it is solved (to write it at once); its error stops the
/// build. The values do not depend on `threads`.
pub fn extend(
    tables: &mut Bitbases,
    max_pieces: u32,
    threads: usize,
    mut on_slice: impl FnMut(&SliceReport, &Slice) -> Result<(), BitbaseError>,
) -> Result<(), BitbaseError> {
    if !(2..=super::MAX_PIECES).contains(&max_pieces) {
        return Err(BitbaseError::Pieces(max_pieces));
    }
    let order = Material::solving_order(max_pieces);
    for (done, material) in order.iter().enumerate() {
        if tables.slice(*material).is_some() {
            continue;
        }
        let start = Instant::now();
        let index = SliceIndex::new(tables.layout(), *material);
        let values = solve(tables, index, threads.max(1));
        let mut report = SliceReport {
            material: *material,
            size: index.size(),
            wins: 0,
            draws: 0,
            losses: 0,
            elapsed: Duration::ZERO,
            done: done + 1,
            total: order.len(),
        };
        let mut packed = vec![0u8; index.size().div_ceil(4) as usize];
        for (i, v) in values.iter().enumerate() {
            let code = match *v {
                WIN => {
                    report.wins += 1;
                    STORED_WIN
                }
                LOSS => {
                    report.losses += 1;
                    STORED_LOSS
                }
                INVALID => STORED_INVALID,
                _ => {
                    report.draws += 1;
                    STORED_DRAW
                }
            };
            packed[i / 4] |= code << ((i % 4) * 2);
        }
        tables.insert(Slice { index, packed });
        report.elapsed = start.elapsed();
        let slice = tables.slice(*material).expect("inserted above");
        on_slice(&report, slice)?;
    }
    Ok(())
}

/// The value code of a child position outside the slice being solved.
fn outside(tables: &Bitbases, squares: &Squares, side: Color) -> u8 {
    match tables.value_of(squares, side) {
        Some(Value::Win) => WIN,
        Some(Value::Loss) => LOSS,
        Some(Value::Draw) => DRAW,
        // Solving order guarantees every slice a move leads to is solved before.
        None => unreachable!("slice {} not solved yet", squares.material()),
    }
}

/// Positions (pairs of indices, both sides to move) per unit of forward-pass work shared by the threads.
const FORWARD_BLOCK: usize = 1 << 14;

fn solve(tables: &Bitbases, index: SliceIndex, threads: usize) -> Vec<u8> {
    let layout = tables.layout();
    let size = index.size() as usize;
    let mut values = vec![UNKNOWN; size];
    let mut counts = vec![0u8; size];

    // 1. Forward pass: blocks of indices handed out to the threads; each keeps its own queue.
    let block = 2 * FORWARD_BLOCK;
    let mut queue: Vec<u64> = if threads == 1 || size <= block {
        let mut queue = Vec::new();
        forward(tables, &index, 0, &mut values, &mut counts, &mut queue);
        queue
    } else {
        let work = std::sync::Mutex::new(
            values
                .chunks_mut(block)
                .zip(counts.chunks_mut(block))
                .enumerate(),
        );
        let queues: Vec<Vec<u64>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut queue = Vec::new();
                        loop {
                            let next = work.lock().expect("no thread panics holding it").next();
                            let Some((n, (values, counts))) = next else {
                                break;
                            };
                            forward(tables, &index, n * block, values, counts, &mut queue);
                        }
                        queue
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("a forward-pass thread panicked"))
                .collect()
        });
        queues.concat()
    };

    // 2. Backward pass.
    let mut preds: Vec<Squares> = Vec::with_capacity(128);
    while let Some(i) = queue.pop() {
        let value = values[i as usize];
        let Some((squares, side)) = index.squares(layout, i) else {
            continue;
        };
        let mover = !side;
        preds.clear();
        unmoves(layout, &squares, mover, &mut preds);
        for pred in &preds {
            let j = index.index(layout, pred, mover) as usize;
            if values[j] != UNKNOWN {
                continue;
            }
            // The move is legal in the predecessor only if it has no capture there.
            let Ok(pos) = layout.position(pred, mover) else {
                continue;
            };
            if pos.has_capture() && pos.rule_set().mandatory_capture() {
                continue;
            }
            if value == LOSS {
                values[j] = WIN;
                queue.push(j as u64);
            } else {
                let c = &mut counts[j];
                *c -= 1;
                if *c & !DRAW_OUTSIDE == 0 {
                    if *c & DRAW_OUTSIDE != 0 {
                        values[j] = DRAW;
                    } else {
                        values[j] = LOSS;
                        queue.push(j as u64);
                    }
                }
            }
        }
    }

    // 3. The rest are draws.
    for v in &mut values {
        if *v == UNKNOWN {
            *v = DRAW;
        }
    }
    values
}

/// The forward pass over the indices `first..first + values.len()` (`first` even, so each pair of indices
/// is one placement with either side to move): decides what the moves decide at once, counts the quiet
/// moves of the rest, and queues each newly won or lost index.
fn forward(
    tables: &Bitbases,
    index: &SliceIndex,
    first: usize,
    values: &mut [u8],
    counts: &mut [u8],
    queue: &mut Vec<u64>,
) {
    let layout = tables.layout();
    let material = index.material();
    let mut moves: Vec<Move> = Vec::with_capacity(64);
    for k in (0..values.len()).step_by(2) {
        let i = (first + k) as u64;
        // One placement, both sides to move: the index names it once, the engine builds it once (its
        // checks do not depend on the side to move for the goals the tables support).
        let Some((squares, _)) = index.squares(layout, i) else {
            values[k] = INVALID;
            values[k + 1] = INVALID;
            continue;
        };
        let Ok(white_to_move) = layout.position(&squares, Color::White) else {
            values[k] = INVALID;
            values[k + 1] = INVALID;
            continue;
        };
        for (j, pos) in [white_to_move, white_to_move.with_side_to_move(Color::Black)]
            .iter()
            .enumerate()
        {
            pos.legal_moves_into(&mut moves, Count::Unique);
            let at = k + j;
            if moves.is_empty() {
                values[at] = LOSS;
                queue.push(i + j as u64);
                continue;
            }
            let mut inside = 0u32;
            let mut draw_outside = false;
            let mut win = false;
            for mv in &moves {
                let child = pos.play_unchecked(mv);
                let (child_squares, child_side) = layout.squares_of(&child);
                if child_squares.material() == material {
                    inside += 1;
                    continue;
                }
                match outside(tables, &child_squares, child_side) {
                    LOSS => {
                        win = true;
                        break;
                    }
                    DRAW => draw_outside = true,
                    _ => {}
                }
            }
            if win {
                values[at] = WIN;
                queue.push(i + j as u64);
            } else if inside == 0 {
                if draw_outside {
                    values[at] = DRAW;
                } else {
                    values[at] = LOSS;
                    queue.push(i + j as u64);
                }
            } else {
                // At most 127 quiet moves (a flying king has at most 17 on 10x10; at most 7 pieces).
                counts[at] = inside.min(127) as u8 | if draw_outside { DRAW_OUTSIDE } else { 0 };
            }
        }
    }
}

/// The positions one quiet, non-promoting move of `mover` before `s` (geometry only; the caller checks
/// the engine accepts each and that the move is legal there).
fn unmoves(layout: &Layout, s: &Squares, mover: Color, out: &mut Vec<Squares>) {
    let occupied = s.occupied();
    let (men, kings) = match mover {
        Color::White => (s.white_men, s.white_kings),
        Color::Black => (s.black_men, s.black_kings),
    };
    // Kings: back along each free line (one square for short kings).
    let mut k = kings;
    while k != 0 {
        let from = k.trailing_zeros();
        k &= k - 1;
        for d in 0..4 {
            let mut at = from;
            while let Some(t) = layout.neighbour(at, d) {
                if occupied & (1 << t) != 0 {
                    break;
                }
                let mut p = *s;
                let moved = (1u64 << from) | (1u64 << t);
                match mover {
                    Color::White => p.white_kings ^= moved,
                    Color::Black => p.black_kings ^= moved,
                }
                out.push(p);
                if !layout.flying_kings() {
                    break;
                }
                at = t;
            }
        }
    }
    // Men: one square backward (a man moves one square diagonally forward).
    let backward = match mover {
        Color::White => [2, 3],
        Color::Black => [0, 1],
    };
    let allowed = layout.men_allowed(mover);
    let mut m = men;
    while m != 0 {
        let from = m.trailing_zeros();
        m &= m - 1;
        for d in backward {
            let Some(t) = layout.neighbour(from, d) else {
                continue;
            };
            if occupied & (1 << t) != 0 || allowed & (1 << t) == 0 {
                continue;
            }
            let mut p = *s;
            let moved = (1u64 << from) | (1u64 << t);
            match mover {
                Color::White => p.white_men ^= moved,
                Color::Black => p.black_men ^= moved,
            }
            out.push(p);
        }
    }
}
