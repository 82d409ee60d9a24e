//! Admission of long-lived streams on one replica: at most `max_per_key` open at once per caller key
//! and `max_total` in all. A stream holds its [`Permit`] while it is open; dropping the permit frees
//! its place. One definition used by every service that serves server streams (game watches, player
//! events, analysis watches), so each bound is counted the same way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Why a stream was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The replica has `open` streams, its limit.
    Total { open: u32 },
    /// This caller has `open` streams on this replica, its limit.
    PerKey { open: u32 },
}

#[derive(Debug, Default)]
struct Counts {
    per_key: HashMap<String, u32>,
    total: u32,
}

/// The counter of one kind of stream on one replica. Cheap to share (`Arc`).
#[derive(Debug)]
pub struct Admission {
    counts: Mutex<Counts>,
    max_per_key: u32,
    max_total: u32,
    /// The gauge that reports the open streams, if any.
    gauge: Option<&'static str>,
}

impl Admission {
    /// A counter admitting `max_per_key` streams per key and `max_total` in all; `gauge` names a
    /// metrics gauge set to the number of open streams.
    pub fn new(max_per_key: u32, max_total: u32, gauge: Option<&'static str>) -> Arc<Admission> {
        Arc::new(Admission {
            counts: Mutex::new(Counts::default()),
            max_per_key,
            max_total,
            gauge,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Counts> {
        // The counts stay consistent under a panic elsewhere (each change is one statement).
        self.counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Open streams on this replica.
    pub fn open(&self) -> u32 {
        self.lock().total
    }

    /// Admits one more stream for `key`, or says which bound refuses it.
    pub fn admit(self: &Arc<Self>, key: &str) -> Result<Permit, Refused> {
        let mut counts = self.lock();
        if counts.total >= self.max_total {
            return Err(Refused::Total { open: counts.total });
        }
        let mine = counts.per_key.entry(key.to_owned()).or_insert(0);
        if *mine >= self.max_per_key {
            return Err(Refused::PerKey { open: *mine });
        }
        *mine += 1;
        counts.total += 1;
        self.report(counts.total);
        Ok(Permit {
            admission: self.clone(),
            key: key.to_owned(),
        })
    }

    fn report(&self, total: u32) {
        if let Some(gauge) = self.gauge {
            metrics::gauge!(gauge).set(f64::from(total));
        }
    }
}

/// One admitted stream; dropping it frees its place.
#[derive(Debug)]
pub struct Permit {
    admission: Arc<Admission>,
    key: String,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut counts = self.admission.lock();
        if let Some(mine) = counts.per_key.get_mut(&self.key) {
            *mine -= 1;
            if *mine == 0 {
                counts.per_key.remove(&self.key);
            }
        }
        counts.total = counts.total.saturating_sub(1);
        self.admission.report(counts.total);
    }
}

/// The key a stream is counted under: the caller's player id (or API key id), or `addr:<ip>` for
/// an anonymous caller.
pub fn caller_key(player: Option<&str>, remote: Option<std::net::SocketAddr>) -> String {
    match (player, remote) {
        (Some(player), _) => player.to_owned(),
        (None, Some(addr)) => format!("addr:{}", addr.ip()),
        (None, None) => "addr:unknown".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_per_key_and_in_all_and_drop_frees_a_place() {
        let admission = Admission::new(2, 3, None);
        let a1 = admission.admit("a").unwrap();
        let _a2 = admission.admit("a").unwrap();
        assert_eq!(
            admission.admit("a").unwrap_err(),
            Refused::PerKey { open: 2 }
        );
        let _b1 = admission.admit("b").unwrap();
        assert_eq!(
            admission.admit("c").unwrap_err(),
            Refused::Total { open: 3 }
        );
        assert_eq!(admission.open(), 3);
        drop(a1);
        assert_eq!(admission.open(), 2);
        let _a3 = admission.admit("a").unwrap();
        assert_eq!(admission.lock().per_key.len(), 2);
    }

    #[test]
    fn anonymous_callers_are_counted_by_address() {
        let addr: std::net::SocketAddr = "10.1.2.3:4567".parse().unwrap();
        assert_eq!(caller_key(None, Some(addr)), "addr:10.1.2.3");
        assert_eq!(caller_key(Some("guest:x"), Some(addr)), "guest:x");
    }
}
