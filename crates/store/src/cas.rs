//! Read-change-write of a versioned record with compare-and-set, tried again when another writer
//! wins: the one loop every such change of a [`LiveStore`] key goes through.
//!
//! [`update`] reads a key, decodes it with a [`Codec`], asks the caller's change what to make of it
//! ([`Change`]: write this value, with these effects, or leave it) and writes it against the version
//! read; a lost race starts again from the read, as often as a [`Retry`] allows. [`retry`] is the
//! same loop around a compare-and-set the caller writes itself (a game's action through its own
//! load and save). [`update_versioned`] is [`update`] for a writer that holds the record already
//! (its first try skips the read) and goes on from the version its write made.
//!
//! ```
//! use draughts_store::cas::{self, Change, Raw, Retry};
//! use draughts_store::{Bytes, StoreError, open_live_store};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), StoreError> {
//! let store = open_live_store("memory://", "draughts:").await?;
//! // A counter: absent reads as 0; each call adds one and returns the new count.
//! for expected in 1..=3u64 {
//!     let count = cas::update(store.as_ref(), "count", &Raw, Retry::times(5), |current| {
//!         let count = current.map_or(0, |b| String::from_utf8_lossy(&b).parse().unwrap_or(0)) + 1;
//!         Ok::<_, StoreError>(Change::Write {
//!             value: Bytes::from(count.to_string()),
//!             ttl: None,
//!             effects: Vec::new(),
//!             then: count,
//!         })
//!     })
//!     .await?;
//!     assert_eq!(count, expected);
//! }
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;

use crate::error::StoreError;
use crate::live::{Effect, LiveStore, Version};

/// How many times a lost compare-and-set is tried, and how long to pause between tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    attempts: u32,
    pause_step_ms: u64,
    pause_max_ms: u64,
}

impl Retry {
    /// At most `attempts` tries (at least one), each straight after the race the previous one lost.
    pub const fn times(attempts: u32) -> Self {
        Retry {
            attempts: if attempts == 0 { 1 } else { attempts },
            pause_step_ms: 0,
            pause_max_ms: 0,
        }
    }

    /// After the `n`-th lost race (from 1), a random pause of 0 to `min(n × step_ms, max_ms)`
    /// milliseconds before the next try: spreads the retries of many writers of one key.
    pub const fn jittered(self, step_ms: u64, max_ms: u64) -> Self {
        Retry {
            pause_step_ms: step_ms,
            pause_max_ms: max_ms,
            ..self
        }
    }

    /// The number of tries.
    pub const fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Called after the `lost`-th lost race: whether to try again (after this policy's pause).
    async fn again(&self, lost: u32) -> bool {
        if lost >= self.attempts {
            return false;
        }
        let most = self
            .pause_step_ms
            .saturating_mul(u64::from(lost))
            .min(self.pause_max_ms);
        if most > 0 {
            let pause = rand::random_range(0..=most);
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
        true
    }
}

/// How a record is read from its stored bytes and written back, failing with the caller's error.
///
/// A pair of functions `(decode, encode)` is a codec; [`Raw`] hands over the bytes as they are.
pub trait Codec<T, E> {
    /// The record in `bytes`.
    fn decode(&self, bytes: Bytes) -> Result<T, E>;
    /// The bytes stored for `value`.
    fn encode(&self, value: &T) -> Result<Bytes, E>;
}

impl<T, E, D, En> Codec<T, E> for (D, En)
where
    D: Fn(&[u8]) -> Result<T, E>,
    En: Fn(&T) -> Result<Bytes, E>,
{
    fn decode(&self, bytes: Bytes) -> Result<T, E> {
        (self.0)(&bytes)
    }

    fn encode(&self, value: &T) -> Result<Bytes, E> {
        (self.1)(value)
    }
}

/// The stored bytes themselves, for records a change reads its own way (or not at all: a gate key
/// whose version is all that matters).
#[derive(Debug, Clone, Copy, Default)]
pub struct Raw;

impl<E> Codec<Bytes, E> for Raw {
    fn decode(&self, bytes: Bytes) -> Result<Bytes, E> {
        Ok(bytes)
    }

    fn encode(&self, value: &Bytes) -> Result<Bytes, E> {
        Ok(value.clone())
    }
}

/// What a change of [`update`] makes of the record it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change<T, R> {
    /// Leave the record as it is (write nothing); [`update`] returns `R`.
    Keep(R),
    /// Write `value` (creating the key when it was absent) with its `ttl` (`None`: none) and
    /// `effects`, in one atomic step ([`LiveStore::put_with`]) that holds only if nobody wrote the
    /// key since it was read; once written, [`update`] returns `then`.
    Write {
        /// The new record.
        value: T,
        /// The key's time to live from now on (`None`: it never expires).
        ttl: Option<Duration>,
        /// Applied with the write, only if it wins.
        effects: Vec<Effect>,
        /// What [`update`] returns once the write won.
        then: R,
    },
}

/// Reads `key` (with `codec`), asks `change` what to make of it (`None`: the key is absent) and
/// writes what it returns with compare-and-set against the version read. A lost race starts again
/// from the read, as often as `retry` allows. Returns the change's result once its write won (or at
/// once for [`Change::Keep`]); an error of the read, the codec or the change as it is (nothing
/// written); or, when every try lost its race, the last [`StoreError::Conflict`].
///
/// `change` may run several times: it decides from the record it is given, never from what an
/// earlier run saw.
pub async fn update<T, R, E, C, F>(
    store: &dyn LiveStore,
    key: &str,
    codec: &C,
    retry: Retry,
    mut change: F,
) -> Result<R, E>
where
    C: Codec<T, E> + ?Sized,
    E: From<StoreError>,
    F: FnMut(Option<T>) -> Result<Change<T, R>, E>,
{
    update_async(store, key, codec, retry, |current| {
        std::future::ready(change(current))
    })
    .await
}

/// [`update`] with a change that reads more on its way (other records, a schedule's size) before it
/// decides. What it reads is read again on every try.
pub async fn update_async<T, R, E, C, F, Fut>(
    store: &dyn LiveStore,
    key: &str,
    codec: &C,
    retry: Retry,
    change: F,
) -> Result<R, E>
where
    C: Codec<T, E> + ?Sized,
    E: From<StoreError>,
    F: FnMut(Option<T>) -> Fut,
    Fut: Future<Output = Result<Change<T, R>, E>>,
{
    run(store, key, codec, retry, None, change)
        .await
        .map(|(result, _)| result)
}

/// [`update`] starting from `loaded`, the record and its version as the caller read (or wrote) them:
/// the first try changes it without a read; a lost race reads again. Returns with the change's
/// result the key's version after the call: the version written, or for [`Change::Keep`] the
/// version the change was given (`None`: the key was absent). A writer that is its record's only
/// writer makes its next change from these without reading.
pub async fn update_versioned<T, R, E, C, F>(
    store: &dyn LiveStore,
    key: &str,
    codec: &C,
    retry: Retry,
    loaded: Option<(T, Version)>,
    mut change: F,
) -> Result<(R, Option<Version>), E>
where
    C: Codec<T, E> + ?Sized,
    E: From<StoreError>,
    F: FnMut(Option<T>) -> Result<Change<T, R>, E>,
{
    run(store, key, codec, retry, loaded, |current| {
        std::future::ready(change(current))
    })
    .await
}

/// The one loop of [`update`], [`update_async`] and [`update_versioned`].
async fn run<T, R, E, C, F, Fut>(
    store: &dyn LiveStore,
    key: &str,
    codec: &C,
    retry: Retry,
    mut loaded: Option<(T, Version)>,
    mut change: F,
) -> Result<(R, Option<Version>), E>
where
    C: Codec<T, E> + ?Sized,
    E: From<StoreError>,
    F: FnMut(Option<T>) -> Fut,
    Fut: Future<Output = Result<Change<T, R>, E>>,
{
    let mut lost = 0;
    loop {
        let (current, version) = match loaded.take() {
            Some((value, version)) => (Some(value), Some(version)),
            None => match store.get(key).await? {
                Some((bytes, version)) => (Some(codec.decode(bytes)?), Some(version)),
                None => (None, None),
            },
        };
        let (value, ttl, effects, then) = match change(current).await? {
            Change::Keep(result) => return Ok((result, version)),
            Change::Write {
                value,
                ttl,
                effects,
                then,
            } => (value, ttl, effects, then),
        };
        let bytes = codec.encode(&value)?;
        match store.put_with(key, bytes, version, ttl, &effects).await {
            Ok(written) => return Ok((then, Some(written))),
            Err(e @ StoreError::Conflict { .. }) => {
                lost += 1;
                if !retry.again(lost).await {
                    return Err(e.into());
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Runs `attempt` until it succeeds, fails with an error that `lost_race` does not call a lost
/// race, or `retry`'s tries are spent (then the last lost race's error is returned): the loop of
/// [`update`] around a compare-and-set the caller writes itself.
pub async fn retry<R, E, F, Fut>(
    retry: Retry,
    lost_race: impl Fn(&E) -> bool,
    mut attempt: F,
) -> Result<R, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<R, E>>,
{
    let mut lost = 0;
    loop {
        match attempt().await {
            Err(e) if lost_race(&e) => {
                lost += 1;
                if !retry.again(lost).await {
                    return Err(e);
                }
            }
            done => return done,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::MemoryStore;

    fn text(bytes: &[u8]) -> Result<String, StoreError> {
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }

    #[allow(clippy::ptr_arg)] // the codec of `String` records takes `&String`
    fn bytes(value: &String) -> Result<Bytes, StoreError> {
        Ok(Bytes::from(value.clone()))
    }

    fn write(value: &str, then: u32) -> Change<String, u32> {
        Change::Write {
            value: value.to_owned(),
            ttl: None,
            effects: Vec::new(),
            then,
        }
    }

    #[tokio::test]
    async fn creates_changes_and_keeps() {
        let store = MemoryStore::new();
        let codec = (text, bytes);
        let made = update(&store, "k", &codec, Retry::times(3), |current| {
            assert_eq!(current, None);
            Ok(write("a", 1))
        })
        .await
        .unwrap();
        assert_eq!(made, 1);
        let changed = update(&store, "k", &codec, Retry::times(3), |current| {
            Ok(write(&format!("{}b", current.unwrap()), 2))
        })
        .await
        .unwrap();
        assert_eq!(changed, 2);
        let kept = update(&store, "k", &codec, Retry::times(3), |current| {
            assert_eq!(current.as_deref(), Some("ab"));
            Ok(Change::Keep(3))
        })
        .await
        .unwrap();
        assert_eq!(kept, 3);
        assert_eq!(
            store.get("k").await.unwrap(),
            Some((Bytes::from_static(b"ab"), 2))
        );
    }

    #[tokio::test]
    async fn a_lost_race_reads_again_and_the_last_one_is_a_conflict() {
        let store = MemoryStore::new();
        store
            .put("k", Bytes::from_static(b"0"), None, None)
            .await
            .unwrap();
        // Every run writes behind the change's back before its write: each try loses.
        let runs = AtomicU32::new(0);
        let result: Result<u32, StoreError> =
            update_async(&store, "k", &Raw, Retry::times(4), |current| {
                let store = &store;
                let runs = &runs;
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    let (_, version) = store.get("k").await?.unwrap();
                    store
                        .put("k", current.unwrap(), Some(version), None)
                        .await?;
                    Ok(Change::Write {
                        value: Bytes::from_static(b"mine"),
                        ttl: None,
                        effects: Vec::new(),
                        then: 0,
                    })
                }
            })
            .await;
        assert!(matches!(result, Err(StoreError::Conflict { .. })));
        assert_eq!(runs.load(Ordering::SeqCst), 4);
        // The second run of a change that lost once wins, from what the winner wrote.
        let runs = AtomicU32::new(0);
        let seen = update_async(&store, "k", &Raw, Retry::times(4), |current| {
            let store = &store;
            let runs = &runs;
            async move {
                if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                    let (_, version) = store.get("k").await?.unwrap();
                    store
                        .put("k", Bytes::from_static(b"theirs"), Some(version), None)
                        .await?;
                }
                Ok::<_, StoreError>(Change::Write {
                    value: Bytes::from_static(b"mine"),
                    ttl: None,
                    effects: Vec::new(),
                    then: current,
                })
            }
        })
        .await
        .unwrap();
        assert_eq!(seen, Some(Bytes::from_static(b"theirs")));
        assert_eq!(
            store.get("k").await.unwrap().unwrap().0,
            Bytes::from_static(b"mine")
        );
    }

    #[tokio::test]
    async fn errors_of_the_codec_and_the_change_are_not_retried() {
        let store = MemoryStore::new();
        store
            .put("k", Bytes::from_static(b"x"), None, None)
            .await
            .unwrap();
        let runs = AtomicU32::new(0);
        let refuse = |_: &[u8]| -> Result<String, StoreError> {
            Err(StoreError::InvalidArgument("corrupt".into()))
        };
        let result: Result<(), _> = update(&store, "k", &(refuse, bytes), Retry::times(5), |_| {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(Change::Keep(()))
        })
        .await;
        assert!(matches!(result, Err(StoreError::InvalidArgument(_))));
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        let result: Result<(), _> = update(&store, "k", &Raw, Retry::times(5), |_| {
            runs.fetch_add(1, Ordering::SeqCst);
            Err(StoreError::not_found("nothing"))
        })
        .await;
        assert!(matches!(result, Err(StoreError::NotFound { .. })));
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn effects_apply_only_with_the_winning_write() {
        let store = MemoryStore::new();
        let schedule = |at_unix_ms: u64| Effect::Schedule {
            set: "s".into(),
            member: "k".into(),
            at_unix_ms,
        };
        update(&store, "k", &Raw, Retry::times(1), |_| {
            Ok::<_, StoreError>(Change::Write {
                value: Bytes::from_static(b"v"),
                ttl: Some(Duration::from_secs(60)),
                effects: vec![schedule(5)],
                then: (),
            })
        })
        .await
        .unwrap();
        assert_eq!(
            store.next_due("s").await.unwrap(),
            Some(("k".to_owned(), 5))
        );
        // One try, lost: nothing written, no effect.
        let result = update_async(&store, "k", &Raw, Retry::times(1), |_| {
            let store = &store;
            async move {
                store
                    .put("k", Bytes::from_static(b"w"), Some(1), None)
                    .await?;
                Ok(Change::Write {
                    value: Bytes::from_static(b"lost"),
                    ttl: None,
                    effects: vec![schedule(9)],
                    then: (),
                })
            }
        })
        .await;
        assert!(matches!(result, Err(StoreError::Conflict { .. })));
        assert_eq!(
            store.next_due("s").await.unwrap(),
            Some(("k".to_owned(), 5))
        );
    }

    #[tokio::test]
    async fn concurrent_writers_each_win_once() {
        let store: Arc<dyn LiveStore> = Arc::new(MemoryStore::new());
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    update(
                        store.as_ref(),
                        "n",
                        &(text, bytes),
                        Retry::times(100).jittered(1, 3),
                        |current| {
                            let n: u32 = current.map_or(0, |t| t.parse().unwrap()) + 1;
                            Ok::<_, StoreError>(Change::Write {
                                value: n.to_string(),
                                ttl: None,
                                effects: Vec::new(),
                                then: n,
                            })
                        },
                    )
                    .await
                })
            })
            .collect();
        let mut seen = Vec::new();
        for task in tasks {
            seen.push(task.await.unwrap().unwrap());
        }
        seen.sort_unstable();
        assert_eq!(seen, (1..=20).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn retry_runs_until_an_error_that_is_not_a_lost_race() {
        let runs = AtomicU32::new(0);
        let lost = |e: &StoreError| matches!(e, StoreError::Conflict { .. });
        let conflict = || StoreError::Conflict {
            key: "k".into(),
            expected: None,
            actual: Some(1),
        };
        let result: Result<(), _> = retry(Retry::times(3), lost, || async {
            runs.fetch_add(1, Ordering::SeqCst);
            Err(conflict())
        })
        .await;
        assert!(matches!(result, Err(StoreError::Conflict { .. })));
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        let runs = AtomicU32::new(0);
        let result = retry(Retry::times(3), lost, || async {
            match runs.fetch_add(1, Ordering::SeqCst) {
                0 => Err(conflict()),
                _ => Ok(7),
            }
        })
        .await;
        assert_eq!(result.unwrap(), 7);
        let result: Result<(), _> = retry(Retry::times(3), lost, || async {
            Err(StoreError::not_found("x"))
        })
        .await;
        assert!(matches!(result, Err(StoreError::NotFound { .. })));
    }

    /// From a record already read: no read on the first try, the written version returned; a
    /// stale one loses its race and the next try reads the record as it is.
    #[tokio::test]
    async fn versioned_updates_start_from_what_the_caller_holds() {
        let store = MemoryStore::new();
        let codec = (text, bytes);
        let v1 = store
            .put("k", Bytes::from_static(b"a"), None, None)
            .await
            .unwrap();
        let (seen, v2) = update_versioned(
            &store,
            "k",
            &codec,
            Retry::times(3),
            Some(("a".to_owned(), v1)),
            |current| Ok(write(&format!("{}b", current.unwrap()), 1)),
        )
        .await
        .unwrap();
        assert_eq!((seen, v2), (1, Some(2)));
        // Held at v1 (stale: the key is at v2): the first try loses, the second reads "ab".
        let runs = AtomicU32::new(0);
        let (_, v3) = update_versioned(
            &store,
            "k",
            &codec,
            Retry::times(3),
            Some(("a".to_owned(), v1)),
            |current| {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(write(&format!("{}c", current.unwrap()), 0))
            },
        )
        .await
        .unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert_eq!(
            store.get("k").await.unwrap(),
            Some((Bytes::from_static(b"abc"), 3))
        );
        assert_eq!(v3, Some(3));
        // Kept: the version given back; absent: none.
        let kept = update_versioned(&store, "k", &codec, Retry::times(1), None, |_| {
            Ok(Change::Keep(()))
        })
        .await
        .unwrap();
        assert_eq!(kept, ((), Some(3)));
        let absent = update_versioned(&store, "none", &codec, Retry::times(1), None, |current| {
            assert!(current.is_none());
            Ok(Change::<String, ()>::Keep(()))
        })
        .await
        .unwrap();
        assert_eq!(absent, ((), None));
    }
}
