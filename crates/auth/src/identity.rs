//! The identity registry: which player ids this server has issued or seen, and their display names.
//!
//! Games ask it whether an opponent named in a request exists and what it is called, so that a caller can
//! neither invent an opponent nor choose how it is shown. Entries are written
//! - when `Auth.CreateGuest` issues a guest (kept as long as the guest's token is valid),
//! - when a player of the identity provider or an API key authenticates (kept; the name is refreshed when
//!   the provider's token carries another one),
//! - and `ai:<level>` needs no entry: the computer is always known.
//!
//! | live store name | kind | contents |
//! |---|---|---|
//! | `identity:{player_id}` | versioned key; guests expire with their token | [`IdentityRecord`] as JSON |
//!
//! Writes on authentication go through a bounded in-process cache, so a player's calls cost one write per
//! replica per [`REFRESH`], not one per call.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use draughts_proto::ids::{PlayerId, PlayerKind};
use draughts_store::cas::{self, Change, Raw, Retry};
use draughts_store::{LiveStore, StoreError, now_unix_ms};
use serde::{Deserialize, Serialize};

use super::{Principal, PrincipalKind};

/// How often a replica rewrites the entry of a player it keeps seeing.
pub const REFRESH: Duration = Duration::from_secs(3600);

/// Entries the in-process cache holds before it starts again from empty.
const CACHE_ENTRIES: usize = 50_000;

/// The stored form of an identity. JSON; readers ignore unknown fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityRecord {
    /// Schema version: 1.
    pub v: u32,
    /// The display name (already checked by the issuer: 1 to 32 characters, no control characters).
    pub name: String,
    /// When it was written, Unix ms.
    pub at_ms: u64,
    /// Since when the player exists (an account's creation), Unix ms; 0 = unknown.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub since_ms: u64,
    /// A BOT (an API key owner with the `bot` scope). For good: once set, no later write clears it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub bot: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// A known identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub id: PlayerId,
    pub name: String,
    /// Since when the player exists (an account's creation), Unix ms; 0 = unknown.
    pub since_ms: u64,
    /// A BOT (see [`IdentityRecord::bot`]).
    pub bot: bool,
}

impl Identity {
    pub fn is_guest(&self) -> bool {
        self.id.is_guest()
    }
    pub fn is_computer(&self) -> bool {
        self.id.is_computer()
    }
}

/// What a replica wrote for an id: the name, the bot mark, and when.
type Written = (String, bool, Instant);

/// The live store name of an identity.
fn record_name(id: &PlayerId) -> String {
    format!("identity:{id}")
}

/// The display name of the computer at `level`.
pub fn computer_name(level: u8) -> String {
    format!("Computer level {level}")
}

/// The registry over a live store. Cheap to clone.
#[derive(Clone)]
pub struct Identities {
    store: Arc<dyn LiveStore>,
    /// Player id -> what this replica wrote recently.
    recent: Arc<Mutex<HashMap<String, Written>>>,
}

impl fmt::Debug for Identities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identities").finish_non_exhaustive()
    }
}

impl Identities {
    pub fn new(store: Arc<dyn LiveStore>) -> Identities {
        Identities {
            store,
            recent: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Records `id` as `name`, kept for `ttl` (`None`: kept).
    pub async fn record(
        &self,
        id: &PlayerId,
        name: &str,
        ttl: Option<Duration>,
    ) -> Result<(), StoreError> {
        self.write(id, name, ttl, 0, false).await
    }

    /// Marks the known identity `id` as a BOT, for good, keeping its name and creation time (an
    /// unknown one is recorded under its id).
    pub async fn mark_bot(&self, id: &PlayerId) -> Result<(), StoreError> {
        let (name, since_ms) = match self.lookup(id).await? {
            Some(identity) => (identity.name, identity.since_ms),
            None => (id.to_string(), 0),
        };
        self.write(id, &name, None, since_ms, true).await
    }

    /// Records `id` as `name` and as a BOT, for good (kept).
    pub async fn record_bot(&self, id: &PlayerId, name: &str) -> Result<(), StoreError> {
        self.write(id, name, None, 0, true).await
    }

    /// Records the account `id` as `name`, created at `since_ms` (kept).
    pub async fn record_account(
        &self,
        id: &PlayerId,
        name: &str,
        since_ms: u64,
    ) -> Result<(), StoreError> {
        self.write(id, name, None, since_ms, false).await
    }

    async fn write(
        &self,
        id: &PlayerId,
        name: &str,
        ttl: Option<Duration>,
        since_ms: u64,
        bot: bool,
    ) -> Result<(), StoreError> {
        // Last writer wins (every writer writes the truth from a verified credential), but the bot
        // mark, once written, stays. A record that does not decode is written again.
        let written = cas::update(
            self.store.as_ref(),
            &record_name(id),
            &Raw,
            Retry::times(5),
            |found| {
                let was_bot = found
                    .and_then(|bytes| serde_json::from_slice::<IdentityRecord>(&bytes).ok())
                    .is_some_and(|record| record.bot);
                let record = IdentityRecord {
                    v: 1,
                    name: name.to_owned(),
                    at_ms: now_unix_ms(),
                    since_ms,
                    bot: bot || was_bot,
                };
                Ok(Change::Write {
                    value: Bytes::from(serde_json::to_vec(&record).unwrap_or_default()),
                    ttl,
                    effects: Vec::new(),
                    then: record.bot,
                })
            },
        )
        .await;
        match written {
            Ok(bot) => {
                self.remember_written(id, name, bot);
                Ok(())
            }
            // Other writers kept winning: one of them wrote the truth.
            Err(StoreError::Conflict { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn remember_written(&self, id: &PlayerId, name: &str, bot: bool) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if recent.len() >= CACHE_ENTRIES {
            recent.clear();
        }
        recent.insert(id.to_string(), (name.to_owned(), bot, Instant::now()));
    }

    /// Records an authenticated caller unless this replica did so recently with the same name.
    /// Guests are recorded when issued; they are refreshed here too (with `guest_ttl`), so a registry
    /// that lost its data learns a guest again at its next call.
    pub async fn seen(&self, principal: &Principal, guest_ttl: Duration) -> Result<(), StoreError> {
        let Ok(id) = PlayerId::parse(&principal.player_id) else {
            return Ok(());
        };
        let fresh = {
            let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
            recent.get(id.as_str()).is_some_and(|(name, bot, at)| {
                *name == principal.display_name
                    && (*bot || !principal.is_bot())
                    && at.elapsed() < REFRESH
            })
        };
        if fresh {
            return Ok(());
        }
        let ttl = (principal.kind == PrincipalKind::Guest).then_some(guest_ttl);
        self.write(&id, &principal.display_name, ttl, 0, principal.is_bot())
            .await
    }

    /// The identity of `id`, if this server knows it.
    pub async fn lookup(&self, id: &PlayerId) -> Result<Option<Identity>, StoreError> {
        if let PlayerKind::Computer { level } = id.kind() {
            return Ok(Some(Identity {
                id: id.clone(),
                name: computer_name(level),
                since_ms: 0,
                bot: false,
            }));
        }
        let Some((bytes, _)) = self.store.get(&record_name(id)).await? else {
            return Ok(None);
        };
        match serde_json::from_slice::<IdentityRecord>(&bytes) {
            Ok(record) => Ok(Some(Identity {
                id: id.clone(),
                name: record.name,
                since_ms: record.since_ms,
                bot: record.bot,
            })),
            Err(e) => {
                tracing::error!(player_id = %id, error = %e, "identity record does not decode");
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scopes;

    #[tokio::test]
    async fn records_and_looks_up() {
        let store: Arc<dyn LiveStore> = Arc::new(draughts_store::MemoryStore::new());
        let ids = Identities::new(store.clone());
        let ann = PlayerId::parse("player:ann").unwrap();
        assert_eq!(ids.lookup(&ann).await.unwrap(), None, "unknown until seen");
        let principal = Principal {
            player_id: ann.to_string(),
            display_name: "Ann".into(),
            kind: PrincipalKind::Player,
            scopes: Scopes::PLAY,
        };
        ids.seen(&principal, Duration::from_secs(60)).await.unwrap();
        assert_eq!(ids.lookup(&ann).await.unwrap().unwrap().name, "Ann");
        // A new name from the provider replaces the old one at once.
        let renamed = Principal {
            display_name: "Annie".into(),
            ..principal
        };
        ids.seen(&renamed, Duration::from_secs(60)).await.unwrap();
        assert_eq!(ids.lookup(&ann).await.unwrap().unwrap().name, "Annie");
        assert!(!ids.lookup(&ann).await.unwrap().unwrap().bot);
        // A bot key marks its owner for good: a later call without the mark does not clear it.
        let acme = PlayerId::parse("key:acme").unwrap();
        let bot = Principal {
            player_id: acme.to_string(),
            display_name: "acme".into(),
            kind: PrincipalKind::ApiKey,
            scopes: Scopes::PLAY.with(crate::Scope::Bot),
        };
        ids.seen(&bot, Duration::from_secs(60)).await.unwrap();
        assert!(ids.lookup(&acme).await.unwrap().unwrap().bot);
        ids.record(&acme, "acme", None).await.unwrap();
        assert!(
            ids.lookup(&acme).await.unwrap().unwrap().bot,
            "the mark stays"
        );
        let ai = PlayerId::parse("ai:5").unwrap();
        assert_eq!(
            ids.lookup(&ai).await.unwrap().unwrap().name,
            "Computer level 5"
        );
    }
}
