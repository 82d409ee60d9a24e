//! One BOT's own limits, set by an administrator (`Auth.SetBotLimits`): games going on at once and
//! calls a minute. Auth owns the record (`auth:bot-limits:{player_id}`, next to the bot's identity and
//! credentials); the limits are enforced where calls arrive:
//!
//! - **calls a minute**: by every service's edge ([`crate::AuthLayer`]): a bot with its own rate
//!   counts all its credentials together (the bucket `bot:{player_id}`) against that limit, instead of
//!   each credential against its own;
//! - **games at once**: by Games where a game starts (creating, accepting), through [`read`]: the
//!   bot's own bound instead of the server's `--max-open-games-per-bot` (never above
//!   `--max-open-games-per-player`).
//!
//! A zero is "the server's default". The edge reads the record through a per-replica cache
//! ([`RECHECK`]); Games reads it when a game starts. A record that does not decode is ignored (the
//! defaults apply) and logged.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use draughts_store::cas::{self, Change, Raw, Retry};
use draughts_store::{ErrorCode, LiveStore, StoreError};
use serde::{Deserialize, Serialize};

use crate::AuthError;

/// Most games at once an administrator may give one bot.
pub const MAX_GAMES: u32 = 1_000;
/// Most calls a minute an administrator may give one bot.
pub const MAX_CALLS_PER_MINUTE: u32 = 100_000;
/// How long a replica's edge uses limits it read before reading them again.
pub const RECHECK: Duration = Duration::from_secs(10);
/// Most bots whose limits one replica's edge remembers (past that the cache starts again).
const CACHE_ENTRIES: usize = 10_000;

/// One bot's limits; zeros where the server's defaults apply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BotLimits {
    /// Games going on at once (0: `--max-open-games-per-bot`).
    #[serde(default)]
    pub max_games: u32,
    /// Calls a minute, all the bot's credentials together (0: each credential's own limit).
    #[serde(default)]
    pub calls_per_minute: u32,
    /// When they were set, Unix epoch milliseconds (0: never).
    #[serde(default)]
    pub updated_at_ms: u64,
}

impl BotLimits {
    /// Checks the bounds ([`MAX_GAMES`], [`MAX_CALLS_PER_MINUTE`]).
    pub fn check(&self) -> Result<(), AuthError> {
        if self.max_games > MAX_GAMES {
            return Err(AuthError::InvalidArgument(format!(
                "max_games must be from 0 (the server's default) to {MAX_GAMES}, got {}",
                self.max_games
            )));
        }
        if self.calls_per_minute > MAX_CALLS_PER_MINUTE {
            return Err(AuthError::InvalidArgument(format!(
                "calls_per_minute must be from 0 (the credential's own limit) to {MAX_CALLS_PER_MINUTE}, got {}",
                self.calls_per_minute
            )));
        }
        Ok(())
    }
}

/// The live-store name of a bot's limits.
fn record_name(player_id: &str) -> String {
    format!("auth:bot-limits:{player_id}")
}

/// A bot's limits as stored (`None`: never set, or a record that does not decode).
pub async fn read(store: &dyn LiveStore, player_id: &str) -> Result<Option<BotLimits>, StoreError> {
    Ok(read_versioned(store, player_id)
        .await?
        .map(|(limits, _)| limits))
}

async fn read_versioned(
    store: &dyn LiveStore,
    player_id: &str,
) -> Result<Option<(BotLimits, u64)>, StoreError> {
    let Some((bytes, version)) = store.get(&record_name(player_id)).await? else {
        return Ok(None);
    };
    match serde_json::from_slice(&bytes) {
        Ok(limits) => Ok(Some((limits, version))),
        Err(e) => {
            tracing::error!(player_id, error = %e, "bot limits record does not decode; defaults apply");
            Ok(Some((BotLimits::default(), version)))
        }
    }
}

/// Replaces a bot's limits (compare-and-set against concurrent writers: the last one wins whole).
pub(crate) async fn write(
    store: &dyn LiveStore,
    player_id: &str,
    limits: BotLimits,
) -> Result<(), AuthError> {
    let bytes = Bytes::from(serde_json::to_vec(&limits).map_err(AuthError::CorruptRecord)?);
    let written = cas::update(
        store,
        &record_name(player_id),
        &Raw,
        Retry::times(8),
        |_| {
            Ok::<_, AuthError>(Change::Write {
                value: bytes.clone(),
                ttl: None,
                effects: Vec::new(),
                then: (),
            })
        },
    )
    .await;
    match written {
        Err(AuthError::Store(e)) if e.code() == ErrorCode::Conflict => Err(AuthError::Busy),
        other => other,
    }
}

/// A replica's recent reads of bots' limits (for the edge: one store read per bot per [`RECHECK`]).
#[derive(Debug, Default)]
pub(crate) struct Cache {
    entries: Mutex<HashMap<String, (Option<BotLimits>, Instant)>>,
}

impl Cache {
    /// The bot's limits: this replica's read of the last [`RECHECK`], else the store's. A store that
    /// cannot answer leaves the last read in force (or the defaults).
    pub(crate) async fn get(&self, store: &dyn LiveStore, player_id: &str) -> Option<BotLimits> {
        let cached = self
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(player_id)
            .copied();
        if let Some((limits, at)) = cached
            && at.elapsed() < RECHECK
        {
            return limits;
        }
        match read(store, player_id).await {
            Ok(limits) => {
                self.remember(player_id, limits);
                limits
            }
            Err(e) => {
                tracing::warn!(
                    error = &e as &(dyn std::error::Error + 'static),
                    "bot limits unavailable; the last ones read (or the defaults) apply"
                );
                cached.and_then(|(limits, _)| limits)
            }
        }
    }

    /// Remembers limits just read or written.
    pub(crate) fn remember(&self, player_id: &str, limits: Option<BotLimits>) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CACHE_ENTRIES {
            entries.clear();
        }
        entries.insert(player_id.to_owned(), (limits, Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn limits_are_stored_replaced_and_bounded() {
        let store: std::sync::Arc<dyn LiveStore> =
            std::sync::Arc::new(draughts_store::MemoryStore::new());
        assert_eq!(read(&*store, "key:acme").await.unwrap(), None);
        let first = BotLimits {
            max_games: 3,
            calls_per_minute: 0,
            updated_at_ms: 1,
        };
        write(&*store, "key:acme", first).await.unwrap();
        assert_eq!(read(&*store, "key:acme").await.unwrap(), Some(first));
        let second = BotLimits {
            max_games: 0,
            calls_per_minute: 90,
            updated_at_ms: 2,
        };
        write(&*store, "key:acme", second).await.unwrap();
        assert_eq!(read(&*store, "key:acme").await.unwrap(), Some(second));
        assert_eq!(read(&*store, "key:other").await.unwrap(), None);
        // The cache answers from its read until RECHECK has passed.
        let cache = Cache::default();
        assert_eq!(cache.get(&*store, "key:acme").await, Some(second));
        write(&*store, "key:acme", first).await.unwrap();
        assert_eq!(cache.get(&*store, "key:acme").await, Some(second));
        cache.remember("key:acme", Some(first));
        assert_eq!(cache.get(&*store, "key:acme").await, Some(first));
        for bad in [
            BotLimits {
                max_games: MAX_GAMES + 1,
                ..first
            },
            BotLimits {
                calls_per_minute: MAX_CALLS_PER_MINUTE + 1,
                ..first
            },
        ] {
            assert!(matches!(bad.check(), Err(AuthError::InvalidArgument(_))));
        }
        assert!(first.check().is_ok() && BotLimits::default().check().is_ok());
    }
}
