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
}

impl Identity {
    pub fn is_guest(&self) -> bool {
        self.id.is_guest()
    }
    pub fn is_computer(&self) -> bool {
        self.id.is_computer()
    }
}

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
    /// Player id -> (name written, when) for the ids this replica wrote recently.
    recent: Arc<Mutex<HashMap<String, (String, Instant)>>>,
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
        self.write(id, name, ttl, 0).await
    }

    /// Records the account `id` as `name`, created at `since_ms` (kept).
    pub async fn record_account(
        &self,
        id: &PlayerId,
        name: &str,
        since_ms: u64,
    ) -> Result<(), StoreError> {
        self.write(id, name, None, since_ms).await
    }

    async fn write(
        &self,
        id: &PlayerId,
        name: &str,
        ttl: Option<Duration>,
        since_ms: u64,
    ) -> Result<(), StoreError> {
        let record = IdentityRecord {
            v: 1,
            name: name.to_owned(),
            at_ms: now_unix_ms(),
            since_ms,
        };
        let bytes = serde_json::to_vec(&record).unwrap_or_default();
        // Last writer wins: every writer writes the truth from a verified credential.
        for _ in 0..5 {
            let version = self.store.get(&record_name(id)).await?.map(|(_, v)| v);
            match self
                .store
                .put(&record_name(id), Bytes::from(bytes.clone()), version, ttl)
                .await
            {
                Ok(_) => {
                    self.remember_written(id, name);
                    return Ok(());
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn remember_written(&self, id: &PlayerId, name: &str) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if recent.len() >= CACHE_ENTRIES {
            recent.clear();
        }
        recent.insert(id.to_string(), (name.to_owned(), Instant::now()));
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
            recent
                .get(id.as_str())
                .is_some_and(|(name, at)| *name == principal.display_name && at.elapsed() < REFRESH)
        };
        if fresh {
            return Ok(());
        }
        let ttl = (principal.kind == PrincipalKind::Guest).then_some(guest_ttl);
        self.record(&id, &principal.display_name, ttl).await
    }

    /// The identity of `id`, if this server knows it.
    pub async fn lookup(&self, id: &PlayerId) -> Result<Option<Identity>, StoreError> {
        if let PlayerKind::Computer { level } = id.kind() {
            return Ok(Some(Identity {
                id: id.clone(),
                name: computer_name(level),
                since_ms: 0,
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
        let ai = PlayerId::parse("ai:5").unwrap();
        assert_eq!(
            ids.lookup(&ai).await.unwrap().unwrap().name,
            "Computer level 5"
        );
    }
}
