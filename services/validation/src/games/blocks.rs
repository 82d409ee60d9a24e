//! Block lists: a player's own list of players they want nothing to do with. While A blocks B,
//! neither may invite the other, accept the other's invitation (an open link or a lobby seek
//! included) or offer the other a rematch; the blocked one is only told "not available".
//!
//! Names (built here): `player-blocks:{player}`: JSON [`BlockList`], versioned, no expiry; every
//! change is one compare-and-set on it, so the bound ([`MAX_BLOCKED`]) holds under concurrent calls.
//! The list lives in the live store: a live store that loses its data loses the lists too
//! (`docs/operations.md`, "Block lists").

use bytes::Bytes;
use draughts_store::StoreError;
use serde::{Deserialize, Serialize};

use super::service::{GamesCore, GamesError, GamesResult};

/// Players one block list may hold.
pub const MAX_BLOCKED: usize = 500;
/// Compare-and-set attempts on one list before a change gives up (ABORTED).
const CAS_ATTEMPTS: usize = 32;

/// Key names of block lists.
pub mod keys {
    pub fn blocks(player: &str) -> String {
        format!("player-blocks:{player}")
    }
}

/// One blocked player.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocked {
    pub id: String,
    pub at_ms: u64,
}

/// A player's block list as stored (schema `v` 1), oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockList {
    #[serde(default = "schema")]
    pub v: u32,
    #[serde(default)]
    pub blocked: Vec<Blocked>,
}

fn schema() -> u32 {
    1
}

/// What the message to the player who is refused may say.
pub const NOT_AVAILABLE: &str = "this player is not available";

impl GamesCore {
    async fn read_blocks(&self, player: &str) -> GamesResult<(BlockList, Option<u64>)> {
        match self.live().get(&keys::blocks(player)).await? {
            Some((bytes, version)) => {
                let list = serde_json::from_slice(&bytes).map_err(|e| {
                    tracing::error!(player, error = %e, "stored block list does not decode");
                    GamesError::Corrupt(format!("block list of {player} does not decode"))
                })?;
                Ok((list, Some(version)))
            }
            None => Ok((
                BlockList {
                    v: 1,
                    ..BlockList::default()
                },
                None,
            )),
        }
    }

    /// `player`'s block list, oldest first.
    pub async fn blocked_by(&self, player: &str) -> GamesResult<Vec<Blocked>> {
        Ok(self.read_blocks(player).await?.0.blocked)
    }

    async fn change_blocks(
        &self,
        player: &str,
        f: impl Fn(&mut BlockList, u64) -> GamesResult<bool>,
    ) -> GamesResult<Vec<Blocked>> {
        for _ in 0..CAS_ATTEMPTS {
            let (mut list, version) = self.read_blocks(player).await?;
            if !f(&mut list, self.now())? {
                return Ok(list.blocked);
            }
            let bytes =
                serde_json::to_vec(&list).map_err(|e| GamesError::Invalid(e.to_string()))?;
            match self
                .live()
                .put(&keys::blocks(player), Bytes::from(bytes), version, None)
                .await
            {
                Ok(_) => return Ok(list.blocked),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(GamesError::Conflict)
    }

    /// `player` blocks `other` (already a known, valid id): added to the list (within
    /// [`MAX_BLOCKED`]), and the pending invitations between the two are settled (those from `other`
    /// declined, those to `other` cancelled). Returns the list.
    pub async fn block(&self, player: &str, other: &str) -> GamesResult<Vec<Blocked>> {
        if player == other {
            return Err(GamesError::Invalid("you cannot block yourself".into()));
        }
        if other.starts_with("ai:") {
            return Err(GamesError::Invalid(
                "the computer plays only when you ask it to: there is nothing to block".into(),
            ));
        }
        let list = self
            .change_blocks(player, |list, now| {
                if list.blocked.iter().any(|b| b.id == other) {
                    return Ok(false);
                }
                if list.blocked.len() >= MAX_BLOCKED {
                    return Err(GamesError::Exhausted(format!(
                        "your block list holds {MAX_BLOCKED} players, the most allowed: unblock someone first"
                    )));
                }
                list.blocked.push(Blocked {
                    id: other.to_owned(),
                    at_ms: now,
                });
                Ok(true)
            })
            .await?;
        self.settle_invitations_between(player, other).await?;
        Ok(list)
    }

    /// `player` unblocks `other`; returns the list.
    pub async fn unblock(&self, player: &str, other: &str) -> GamesResult<Vec<Blocked>> {
        self.change_blocks(player, |list, _| {
            let before = list.blocked.len();
            list.blocked.retain(|b| b.id != other);
            Ok(list.blocked.len() != before)
        })
        .await
    }

    /// Refuses (FAILED_PRECONDITION) anything between `me` and `other` while either blocks the
    /// other: `me` is told they blocked `other`; of `other`'s list, only "not available".
    pub async fn check_not_blocked(&self, me: &str, other: &str) -> GamesResult<()> {
        if me == other || other.starts_with("ai:") || me.starts_with("ai:") {
            return Ok(());
        }
        let (mine, theirs) = tokio::try_join!(self.read_blocks(me), self.read_blocks(other))?;
        if mine.0.blocked.iter().any(|b| b.id == other) {
            return Err(GamesError::Refused(
                "you blocked this player: unblock them first (UnblockPlayer)".into(),
            ));
        }
        if theirs.0.blocked.iter().any(|b| b.id == me) {
            return Err(GamesError::Refused(NOT_AVAILABLE.into()));
        }
        Ok(())
    }
}
