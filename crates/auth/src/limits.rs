//! What the rate limiter does when the live store cannot count: fail closed or fail open, chosen per
//! kind of call.
//!
//! Rate counters live in the live store (Redis in a deployment) so that every replica shares them.
//! When the store cannot count (down, unreachable, failing), the layer decides by the kind of call:
//!
//! - **Calls that create or change state fail closed**: refused with UNAVAILABLE ("rate limiter
//!   unavailable"). Creating games, playing moves, issuing guests, creating keys, importing results:
//!   without a shared count an outage would let one caller create unbounded state, and most of these
//!   calls need the store anyway. This is the default for every method a service does not name as a
//!   read, so a new RPC is safe until someone decides otherwise.
//! - **Reads may fail open**: the methods a service registers as reads ([`CallPolicy::reads`],
//!   [`CallPolicy::ALL_READS`]: `Rules`, the ratings reads, ...) go on, but counted by a small
//!   in-process fallback limiter of this replica: per caller bucket (guest, player, API key, or
//!   client address for anonymous calls), fixed one-minute windows, a quarter of the caller's limit
//!   ([`FALLBACK_DIVISOR`]), at most [`FALLBACK_MAX_BUCKETS`] buckets tracked (past that, callers
//!   not yet tracked are refused until the window ends). So an outage degrades reads to a per-replica
//!   limit instead of opening a flood; with N replicas a caller gets at most N quarters.
//!
//! Authentication itself needs the store only for API keys (their records live there): an API key
//! caller is refused with UNAVAILABLE while the store is down, whatever the call.

use std::collections::HashMap;
use std::sync::Mutex;

use super::AuthError;

/// The fallback limit is the caller's limit divided by this (at least 1 call per minute).
pub const FALLBACK_DIVISOR: u32 = 4;

/// Most caller buckets the fallback limiter tracks at once (bounded memory during an outage).
pub const FALLBACK_MAX_BUCKETS: usize = 50_000;

/// What a call does, as far as the rate limiter is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// Reads only: may go on (through the fallback limiter) while the store cannot count.
    Read,
    /// Creates or changes state: refused while the store cannot count.
    Write,
}

/// Which methods of a server are reads; every other method is a [`CallKind::Write`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallPolicy {
    all_reads: bool,
    reads: &'static [&'static str],
}

impl CallPolicy {
    /// Every method creates or changes state (the default).
    pub const WRITES: CallPolicy = CallPolicy {
        all_reads: false,
        reads: &[],
    };

    /// Every method only reads (a stateless service such as `Rules`).
    pub const ALL_READS: CallPolicy = CallPolicy {
        all_reads: true,
        reads: &[],
    };

    /// The methods named (by their bare name, `GetRating`) are reads; the others are writes.
    pub const fn reads(methods: &'static [&'static str]) -> CallPolicy {
        CallPolicy {
            all_reads: false,
            reads: methods,
        }
    }

    /// The kind of the call to `path` (`/draughts.v1.Ratings/GetRating`).
    pub fn kind(&self, path: &str) -> CallKind {
        let method = path.rsplit('/').next().unwrap_or("");
        if self.all_reads || self.reads.contains(&method) {
            CallKind::Read
        } else {
            CallKind::Write
        }
    }
}

/// The in-process limiter used for reads while the shared counters are unavailable.
#[derive(Debug, Default)]
pub(crate) struct FallbackLimiter {
    /// bucket -> (window, calls in it).
    windows: Mutex<HashMap<String, (u64, u32)>>,
}

/// The limit the fallback limiter applies to a caller whose limit is `limit`: a quarter
/// ([`FALLBACK_DIVISOR`]), at least 1 call per window.
pub(crate) fn fallback_limit(limit: u32) -> u32 {
    (limit / FALLBACK_DIVISOR).max(1)
}

impl FallbackLimiter {
    /// Counts one call of `bucket` in `window` against [`fallback_limit`]`(limit)`: the calls left in
    /// the window after this one, or RESOURCE_EXHAUSTED.
    pub(crate) fn hit(
        &self,
        bucket: &str,
        limit: u32,
        window: u64,
        retry_after_secs: u64,
    ) -> Result<u32, AuthError> {
        let allowed = fallback_limit(limit);
        let refused = || AuthError::RateLimited { retry_after_secs };
        let Ok(mut windows) = self.windows.lock() else {
            return Err(refused());
        };
        if !windows.contains_key(bucket) && windows.len() >= FALLBACK_MAX_BUCKETS {
            windows.retain(|_, (w, _)| *w == window);
            if windows.len() >= FALLBACK_MAX_BUCKETS {
                return Err(refused());
            }
        }
        let entry = windows.entry(bucket.to_owned()).or_insert((window, 0));
        if entry.0 != window {
            *entry = (window, 0);
        }
        if entry.1 >= allowed {
            return Err(refused());
        }
        entry.1 += 1;
        Ok(allowed - entry.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_method() {
        let ratings = CallPolicy::reads(&["GetRating"]);
        assert_eq!(
            ratings.kind("/draughts.v1.Ratings/GetRating"),
            CallKind::Read
        );
        assert_eq!(
            ratings.kind("/draughts.v1.Ratings/RecordResult"),
            CallKind::Write
        );
        assert_eq!(CallPolicy::WRITES.kind("/x.Y/GetRating"), CallKind::Write);
        assert_eq!(CallPolicy::ALL_READS.kind("/x.Y/Anything"), CallKind::Read);
    }

    #[test]
    fn fallback_allows_a_quarter_per_window_and_stays_bounded() {
        let limiter = FallbackLimiter::default();
        let passed = (0..100)
            .filter(|_| limiter.hit("addr:1", 60, 7, 5).is_ok())
            .count();
        assert_eq!(passed, 15);
        // The calls left are counted down to 0.
        assert_eq!(limiter.hit("addr:4", 60, 7, 5).ok(), Some(14));
        assert_eq!(limiter.hit("addr:4", 60, 7, 5).ok(), Some(13));
        assert_eq!(fallback_limit(60), 15);
        assert_eq!(fallback_limit(3), 1);
        // Another caller has its own count; the next window starts again.
        assert!(limiter.hit("addr:2", 60, 7, 5).is_ok());
        assert!(limiter.hit("addr:1", 60, 8, 5).is_ok());
        assert!(limiter.hit("addr:3", 1, 8, 5).is_ok());
        assert!(limiter.hit("addr:3", 1, 8, 5).is_err());
        for i in 0..FALLBACK_MAX_BUCKETS + 10 {
            let _ = limiter.hit(&format!("flood:{i}"), 60, 9, 5);
        }
        assert!(limiter.windows.lock().unwrap().len() <= FALLBACK_MAX_BUCKETS);
    }
}
