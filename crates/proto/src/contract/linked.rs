//! `players.linked` (stream): a guest identity taken over by a signed-in account
//! (`Auth.LinkGuest`). Written by auth after the link is recorded (a repeated link appends again:
//! consumers must be idempotent, which moving rows from one id to another is); read by games
//! (consumer group `games-links`: finished games move to the account) and ratings (consumer group
//! `ratings-links`: the guest's ratings move to the account where it has none in that category).
//!
//! Payload, JSON, version 1 (readers ignore unknown fields and refuse an unknown version):
//! ```json
//! {"v":1,"guest_id":"guest:0123...","player_id":"user:0a1b...","player_name":"Ann","at_ms":1764500000000}
//! ```
//!
//! `player_name` (the account's display name, for the games it takes over) is absent from events
//! written before accounts existed: readers then keep the guest's name.
//!
//! ```
//! use draughts_proto::contract::linked::{self, LinkedV1};
//!
//! let e = LinkedV1 {
//!     guest_id: "guest:ab".parse().unwrap(),
//!     player_id: "user:x".parse().unwrap(),
//!     player_name: "Ann".into(),
//!     at_ms: 5,
//! };
//! assert_eq!(linked::decode(&linked::encode(&e)).unwrap(), e);
//! assert!(linked::decode(br#"{"v":9}"#).is_err());
//! // Ids are checked on read.
//! assert!(linked::decode(br#"{"v":1,"guest_id":"bob","player_id":"user:x"}"#).is_err());
//! ```

use serde::{Deserialize, Serialize};

use crate::ids::PlayerId;

pub const STREAM: &str = "players.linked";

pub const VERSION: u32 = 1;

/// One link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkedV1 {
    pub guest_id: PlayerId,
    pub player_id: PlayerId,
    /// The account's display name; empty when the writer did not say (events before accounts).
    pub player_name: String,
    /// When the link was made, Unix ms.
    pub at_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("not a players.linked event: {0}")]
    Malformed(String),
    #[error("players.linked schema version {0} is not supported (this reader knows 1)")]
    Version(u32),
}

#[derive(Serialize, Deserialize)]
struct Wire {
    v: u32,
    guest_id: PlayerId,
    player_id: PlayerId,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    player_name: String,
    #[serde(default)]
    at_ms: u64,
}

#[derive(Deserialize)]
struct VersionOnly {
    v: u32,
}

pub fn encode(event: &LinkedV1) -> Vec<u8> {
    serde_json::to_vec(&Wire {
        v: VERSION,
        guest_id: event.guest_id.clone(),
        player_id: event.player_id.clone(),
        player_name: event.player_name.clone(),
        at_ms: event.at_ms,
    })
    .unwrap_or_default()
}

pub fn decode(payload: &[u8]) -> Result<LinkedV1, DecodeError> {
    let version: VersionOnly =
        serde_json::from_slice(payload).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    if version.v != VERSION {
        return Err(DecodeError::Version(version.v));
    }
    let wire: Wire =
        serde_json::from_slice(payload).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    Ok(LinkedV1 {
        guest_id: wire.guest_id,
        player_id: wire.player_id,
        player_name: wire.player_name,
        at_ms: wire.at_ms,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_entry_written_before_typed_ids_reads_and_writes_back_byte_for_byte() {
        // As the untyped contract wrote it (same fields, same order).
        let before: &[u8] = br#"{"v":1,"guest_id":"guest:0123abcd","player_id":"user:0a1b2c3d","player_name":"Ann","at_ms":1764500000000}"#;
        let event = super::decode(before).unwrap();
        assert_eq!(event.guest_id.as_str(), "guest:0123abcd");
        assert_eq!(event.player_id.as_str(), "user:0a1b2c3d");
        assert_eq!(super::encode(&event), before);
        let without_name: &[u8] =
            br#"{"v":1,"guest_id":"guest:0123abcd","player_id":"player:auth0|42","at_ms":7}"#;
        assert_eq!(
            super::encode(&super::decode(without_name).unwrap()),
            without_name
        );
    }
}
