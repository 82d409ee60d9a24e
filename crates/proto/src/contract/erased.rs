//! `players.erased` (stream): an account deleted (`Auth.DeleteAccount`); the games it played keep its
//! player id and show `name` from then on. Written by auth after the account's row is erased (a crash
//! before the append leaves the old name in archived games until the next deletion attempt, which
//! finds no account: at most a name too many, never a game lost); read by games (consumer group
//! `games-erasures`: the name in finished and ongoing games).
//!
//! Payload, JSON, version 1 (readers ignore unknown fields and refuse an unknown version):
//! ```json
//! {"v":1,"player_id":"user:0a1b2c3d4e5f60718293","name":"Deleted player","at_ms":1764500000000}
//! ```
//!
//! ```
//! use draughts_proto::contract::erased::{self, ErasedV1};
//!
//! let e = ErasedV1 {
//!     player_id: "user:ab".parse().unwrap(),
//!     name: "Deleted player".into(),
//!     at_ms: 5,
//! };
//! assert_eq!(erased::decode(&erased::encode(&e)).unwrap(), e);
//! assert!(erased::decode(br#"{"v":2}"#).is_err());
//! // The id is checked on read.
//! assert!(erased::decode(br#"{"v":1,"player_id":"user:","name":"x"}"#).is_err());
//! ```

use serde::{Deserialize, Serialize};

use crate::ids::PlayerId;

pub const STREAM: &str = "players.erased";

pub const VERSION: u32 = 1;

/// One erased player.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErasedV1 {
    pub player_id: PlayerId,
    /// The name to show instead.
    pub name: String,
    /// When the account was deleted, Unix ms.
    pub at_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("not a players.erased event: {0}")]
    Malformed(String),
    #[error("players.erased schema version {0} is not supported (this reader knows 1)")]
    Version(u32),
}

#[derive(Serialize, Deserialize)]
struct Wire {
    v: u32,
    player_id: PlayerId,
    name: String,
    #[serde(default)]
    at_ms: u64,
}

#[derive(Deserialize)]
struct VersionOnly {
    v: u32,
}

pub fn encode(event: &ErasedV1) -> Vec<u8> {
    serde_json::to_vec(&Wire {
        v: VERSION,
        player_id: event.player_id.clone(),
        name: event.name.clone(),
        at_ms: event.at_ms,
    })
    .unwrap_or_default()
}

pub fn decode(payload: &[u8]) -> Result<ErasedV1, DecodeError> {
    let version: VersionOnly =
        serde_json::from_slice(payload).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    if version.v != VERSION {
        return Err(DecodeError::Version(version.v));
    }
    let wire: Wire =
        serde_json::from_slice(payload).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    Ok(ErasedV1 {
        player_id: wire.player_id,
        name: wire.name,
        at_ms: wire.at_ms,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_entry_written_before_typed_ids_reads_and_writes_back_byte_for_byte() {
        // As the untyped contract wrote it (same fields, same order).
        let before: &[u8] =
            br#"{"v":1,"player_id":"user:0a1b2c3d4e5f60718293","name":"Deleted player","at_ms":1764500000000}"#;
        let event = super::decode(before).unwrap();
        assert_eq!(event.player_id.as_str(), "user:0a1b2c3d4e5f60718293");
        assert_eq!(super::encode(&event), before);
    }
}
