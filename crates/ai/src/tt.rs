//! The transposition table: one 16-byte entry per slot (four to a cache line), indexed and verified by the
//! engine's 64-bit position hash.
//!
//! The best move is stored as a 32-bit signature (origin, destination and a fold of the captured set), not
//! as a move: the search plays the generated legal move with that signature, if there is one. A key
//! collision can therefore cost accuracy, never an illegal move.

use draughts_engine::Move;

/// What a stored score is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The true score (a PV node).
    Exact,
    /// A lower bound (the node failed high).
    Lower,
    /// An upper bound (the node failed low).
    Upper,
}

impl Bound {
    /// What a search in the window `(alpha, beta)` that returned `best` knows.
    #[inline]
    pub fn of(best: i32, alpha: i32, beta: i32) -> Bound {
        if best >= beta {
            Bound::Lower
        } else if best > alpha {
            Bound::Exact
        } else {
            Bound::Upper
        }
    }
}

/// One stored search result, unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The best move's [`signature`], 0 if none.
    pub mv: u32,
    pub score: i16,
    pub depth: i8,
    pub bound: Bound,
}

/// A nonzero 32-bit summary of a move: origin, destination and a fold of the captured squares.
#[inline]
pub fn signature(mv: &Move) -> u32 {
    let c = mv.captured().0;
    // `c >> 64`: the 12x12 board's squares above bit 63 (zero on every other board).
    let fold = ((c ^ (c >> 21) ^ (c >> 42) ^ (c >> 64)) & 0x3_FFFF) as u32;
    (mv.from().bit() + 1) | (mv.to().bit() << 7) | (fold << 14)
}

/// One slot: `[key, data]`, data = score (16) | depth (8) | bound (2) | generation (6) | move signature (32);
/// data 0 = empty. A plain array so that a new table is one zeroed allocation (pages the OS zeroes lazily).
type Slot = [u64; 2];

/// A fixed-size table.
#[derive(Debug)]
pub struct Tt {
    slots: Vec<Slot>,
    mask: u64,
    /// Keys are `hash & key_mask`: all ones normally; tests narrow it to force collisions.
    key_mask: u64,
    generation: u8,
}

impl Tt {
    /// A table of about `megabytes` MiB (a power of two entries, at least 1024).
    pub fn new(megabytes: usize) -> Tt {
        Tt::with_key_mask(megabytes, !0)
    }

    /// A table whose keys keep only the bits of `key_mask` (tests: many positions share a key).
    pub fn with_key_mask(megabytes: usize, key_mask: u64) -> Tt {
        let bytes = megabytes.clamp(1, 1 << 16) << 20;
        let n = (bytes / std::mem::size_of::<Slot>()).max(1024);
        let n = if n.is_power_of_two() {
            n
        } else {
            n.next_power_of_two() / 2
        };
        Tt {
            slots: vec![[0; 2]; n],
            mask: n as u64 - 1,
            key_mask,
            generation: 0,
        }
    }

    /// Forgets everything (a new game).
    pub fn clear(&mut self) {
        self.slots.fill([0; 2]);
        self.generation = 0;
    }

    /// Starts a new search: older entries become preferred victims.
    pub fn new_search(&mut self) {
        self.generation = (self.generation + 1) & 63;
    }

    #[inline]
    fn slot(&self, key: u64) -> usize {
        (key.rotate_left(23) & self.mask) as usize
    }

    /// The entry stored for this hash, if any.
    #[inline]
    pub fn probe(&self, hash: u64) -> Option<Entry> {
        let key = hash & self.key_mask;
        let [slot_key, d] = self.slots[self.slot(key)];
        if d == 0 || slot_key != key {
            return None;
        }
        let bound = match (d >> 24) & 3 {
            0 => Bound::Exact,
            1 => Bound::Lower,
            _ => Bound::Upper,
        };
        Some(Entry {
            score: d as u16 as i16,
            depth: (d >> 16) as u8 as i8,
            bound,
            mv: (d >> 32) as u32,
        })
    }

    /// Stores a result, unless the slot holds a deeper entry of another position from this search.
    #[inline]
    pub fn store(&mut self, hash: u64, mv: u32, score: i32, depth: i32, bound: Bound) {
        let key = hash & self.key_mask;
        let i = self.slot(key);
        let [old_key, old_data] = self.slots[i];
        let same = old_data != 0 && old_key == key;
        if old_data != 0
            && !same
            && ((old_data >> 26) & 63) as u8 == self.generation
            && i64::from((old_data >> 16) as u8 as i8) > i64::from(depth) + 2
        {
            return;
        }
        let mv = if mv == 0 && same {
            (old_data >> 32) as u32
        } else {
            mv
        };
        let score = score.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16;
        let depth = depth.clamp(-1, 127) as i8;
        let bound_bits: u64 = match bound {
            Bound::Exact => 0,
            Bound::Lower => 1,
            Bound::Upper => 2,
        };
        let data = u64::from(score as u16)
            | u64::from(depth as u8) << 16
            | bound_bits << 24
            | u64::from(self.generation) << 26
            | u64::from(mv) << 32;
        // data is never 0: a stored entry with score 0, depth 0, exact, generation 0 and no move would be;
        // mark it with a depth of -1 instead (never used for a cutoff).
        let data = if data == 0 { 0xFF << 16 } else { data };
        self.slots[i] = [key, data];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip() {
        let mut tt = Tt::new(1);
        tt.store(12345, 777, -250, 9, Bound::Lower);
        let e = tt.probe(12345).unwrap();
        assert_eq!(
            e,
            Entry {
                mv: 777,
                score: -250,
                depth: 9,
                bound: Bound::Lower
            }
        );
        assert_eq!(tt.probe(54321), None);
    }
}
