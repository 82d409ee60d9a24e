//! Block lists: a player's own list of players they want nothing to do with. While A blocks B,
//! neither may invite the other, accept the other's invitation (an open link or a lobby seek
//! included) or offer the other a rematch; the blocked one is only told "not available".
//!
//! Names (built here): `player-blocks:{player}`: JSON [`BlockList`], versioned, no expiry; every
//! change is one compare-and-set on it, so the bound ([`MAX_BLOCKED`]) holds under concurrent calls.
//! The list lives in the live store: a live store that loses its data loses the lists too
//! (`docs/operations.md`, "Block lists").

use bytes::Bytes;
use draughts_proto::ids::PlayerId;
use draughts_store::cas::{self, Change, Retry};
use serde::{Deserialize, Serialize};

use super::service::{GamesCore, GamesError, GamesResult};

/// Players one block list may hold.
pub const MAX_BLOCKED: usize = 500;
/// Compare-and-set attempts on one list before a change gives up (ABORTED).
const CAS_ATTEMPTS: u32 = 32;

/// Key names of block lists.
pub mod keys {
    pub fn blocks(player: &str) -> String {
        format!("player-blocks:{player}")
    }
}

/// One blocked player.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocked {
    /// Checked on read: only checked, known ids were ever blocked.
    pub id: PlayerId,
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

/// `player`'s block list from its stored bytes.
fn decode_blocks(player: &str, bytes: &[u8]) -> GamesResult<BlockList> {
    serde_json::from_slice(bytes).map_err(|e| {
        tracing::error!(player, error = %e, "stored block list does not decode");
        GamesError::Corrupt(format!("block list of {player} does not decode"))
    })
}

/// An empty block list (what a player without a stored list has).
fn no_blocks() -> BlockList {
    BlockList {
        v: 1,
        ..BlockList::default()
    }
}

impl GamesCore {
    async fn read_blocks(&self, player: &str) -> GamesResult<BlockList> {
        match self.live().get(&keys::blocks(player)).await? {
            Some((bytes, _)) => decode_blocks(player, &bytes),
            None => Ok(no_blocks()),
        }
    }

    /// `player`'s block list, oldest first.
    pub async fn blocked_by(&self, player: &str) -> GamesResult<Vec<Blocked>> {
        Ok(self.read_blocks(player).await?.blocked)
    }

    async fn change_blocks(
        &self,
        player: &str,
        f: impl Fn(&mut BlockList, u64) -> GamesResult<bool>,
    ) -> GamesResult<Vec<Blocked>> {
        let codec = (
            |bytes: &[u8]| decode_blocks(player, bytes),
            |list: &BlockList| -> GamesResult<Bytes> {
                serde_json::to_vec(list)
                    .map(Bytes::from)
                    .map_err(|e| GamesError::Invalid(e.to_string()))
            },
        );
        cas::update(
            self.live().as_ref(),
            &keys::blocks(player),
            &codec,
            Retry::times(CAS_ATTEMPTS),
            |list| {
                let mut list = list.unwrap_or_else(no_blocks);
                if !f(&mut list, self.now())? {
                    return Ok(Change::Keep(list.blocked));
                }
                let blocked = list.blocked.clone();
                Ok(Change::Write {
                    value: list,
                    ttl: None,
                    effects: Vec::new(),
                    then: blocked,
                })
            },
        )
        .await
    }

    /// `player` blocks `other` (already a known, valid id): added to the list (within
    /// [`MAX_BLOCKED`]), and the pending invitations between the two are settled (those from `other`
    /// declined, those to `other` cancelled). Returns the list.
    pub async fn block(&self, player: &str, other: &PlayerId) -> GamesResult<Vec<Blocked>> {
        if player == other {
            return Err(GamesError::Invalid("you cannot block yourself".into()));
        }
        if other.is_computer() {
            return Err(GamesError::Invalid(
                "the computer plays only when you ask it to: there is nothing to block".into(),
            ));
        }
        let list = self
            .change_blocks(player, |list, now| {
                if list.blocked.iter().any(|b| &b.id == other) {
                    return Ok(false);
                }
                if list.blocked.len() >= MAX_BLOCKED {
                    return Err(GamesError::Exhausted(format!(
                        "your block list holds {MAX_BLOCKED} players, the most allowed: unblock someone first"
                    )));
                }
                list.blocked.push(Blocked {
                    id: other.clone(),
                    at_ms: now,
                });
                Ok(true)
            })
            .await?;
        self.settle_invitations_between(player, other).await?;
        Ok(list)
    }

    /// `player` unblocks `other`; returns the list.
    pub async fn unblock(&self, player: &str, other: &PlayerId) -> GamesResult<Vec<Blocked>> {
        self.change_blocks(player, |list, _| {
            let before = list.blocked.len();
            list.blocked.retain(|b| &b.id != other);
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
        if mine.blocked.iter().any(|b| b.id == other) {
            return Err(GamesError::Refused(
                "you blocked this player: unblock them first (UnblockPlayer)".into(),
            ));
        }
        if theirs.blocked.iter().any(|b| b.id == me) {
            return Err(GamesError::Refused(NOT_AVAILABLE.into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block list as Games wrote it before ids were typed reads (ids checked) and writes back byte
    /// for byte; only checked ids were ever blocked, so a malformed one does not read.
    #[test]
    fn block_lists_written_before_typed_ids_read_and_write_back_byte_for_byte() {
        const LIST: &str = r#"{"v":1,"blocked":[{"id":"guest:0123456789abcdef0123456789abcdef","at_ms":1764900000000},{"id":"key:acme-bot.v2","at_ms":1764900001000}]}"#;
        let list = decode_blocks("user:0123456789abcdef0123", LIST.as_bytes()).unwrap();
        assert!(list.blocked[0].id.is_guest());
        assert_eq!(serde_json::to_string(&list).unwrap(), LIST);
        let bad = LIST.replace("key:acme-bot.v2", "acme bot");
        assert!(matches!(
            decode_blocks("user:0123456789abcdef0123", bad.as_bytes()),
            Err(GamesError::Corrupt(_))
        ));
    }
}
