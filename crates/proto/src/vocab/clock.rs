//! The computer's time allocation: how long a search for the side to move may take, given its clock.
//!
//! ONE rule for every deployment shape: the one-process platform (`draughtsd`'s computer, which puts
//! the cap into the analysis job) and a Games service deployed apart (which sends the clock in
//! `Analysis.BestMove`'s `clock`, from which the analysis service computes the cap) both call
//! [`computer_move_cap_ms`]. Before, the first allowed `remaining/10 + increment` and the second
//! `remaining/20 + increment/2`, so the same game played differently depending on how it was deployed.
//!
//! The rule: a twentieth of the time left plus half the increment (the increment is credited after the
//! move, so a steady state keeps about ten increments on the clock), never more than half of the time
//! left (so that a small clock with a large increment cannot lose on time: `0.5 s + 3 s` would otherwise
//! allow 1.5 s), and at least [`MIN_CAP_MS`] (a search always gets a few milliseconds to find a legal
//! move; the level's own limits and the server's time cap still apply on top).
//!
//! ```
//! use draughts_proto::vocab::clock::computer_move_cap_ms;
//!
//! assert_eq!(computer_move_cap_ms(300_000, 2_000), 16_000); // 5 min + 2 s: 15 s + 1 s
//! assert_eq!(computer_move_cap_ms(1_000, 3_000), 500); // never more than half of what is left
//! assert_eq!(computer_move_cap_ms(0, 0), 10);
//! ```

/// The smallest cap, milliseconds.
pub const MIN_CAP_MS: u64 = 10;

/// The most a computer's search may take, milliseconds, when its clock shows `remaining_ms` and
/// `increment_ms` is added after the move (0 for correspondence). See the module docs.
pub fn computer_move_cap_ms(remaining_ms: u64, increment_ms: u64) -> u64 {
    (remaining_ms / 20 + increment_ms / 2)
        .min(remaining_ms / 2)
        .max(MIN_CAP_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check(/* remaining, increment, expected cap */) {
        let cases = [
            (300_000, 2_000, 16_000),
            (60_000, 0, 3_000),
            (10_000, 10_000, 5_000),
            (1_000, 3_000, 500),
            (100, 0, MIN_CAP_MS),
            (0, 5_000, MIN_CAP_MS),
            (u64::MAX, u64::MAX, u64::MAX / 2),
        ];
        for (remaining, increment, expected) in cases {
            assert_eq!(
                computer_move_cap_ms(remaining, increment),
                expected,
                "{remaining} + {increment}"
            );
        }
    }

    #[test]
    fn never_loses_on_time_when_there_is_time() {
        for remaining in (20..200_000).step_by(997) {
            for increment in [0, 1, 500, 2_000, 30_000, 3_600_000] {
                let cap = computer_move_cap_ms(remaining, increment);
                assert!(cap < remaining, "{remaining} + {increment}: {cap}");
                assert!(cap >= MIN_CAP_MS);
            }
        }
    }
}
