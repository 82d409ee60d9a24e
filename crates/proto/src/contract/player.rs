//! `player-events:{player_id}` (pub/sub, one channel per player): a wake-up telling a player's event
//! streams (`Games.WatchPlayerEvents`) what to re-read. Written by games (invitations created or
//! changed, games started or finished, in the same atomic write as the change); read by every replica's
//! event streams. A lost message is made good by the snapshot a reconnecting stream sends, so the
//! payload carries only what to read, never the state itself.
//!
//! Payload, JSON, version 1 (readers ignore unknown fields and drop a version they do not know):
//! ```json
//! {"v":1,"kind":"invitation","id":"g19a2b3c4d5e6f7"}
//! ```
//! `kind`: `invitation` (id = the invitation's), `game_started`, `game_finished` (id = the game's).
//!
//! ```
//! use draughts_proto::contract::player::{self, Signal, SignalKind};
//!
//! let s = Signal { kind: SignalKind::GameStarted, id: "g1".into() };
//! assert_eq!(player::decode(&player::encode(&s)), Some(s));
//! assert_eq!(player::channel("guest:ab"), "player-events:guest:ab");
//! assert_eq!(player::decode(br#"{"v":2,"kind":"game_started","id":"g1"}"#), None);
//! ```

use serde::{Deserialize, Serialize};

/// The schema version written.
pub const VERSION: u32 = 1;

/// The channel of `player_id`.
pub fn channel(player_id: &str) -> String {
    format!("player-events:{player_id}")
}

/// What changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalKind {
    Invitation,
    GameStarted,
    GameFinished,
}

/// One signal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signal {
    pub kind: SignalKind,
    /// The invitation's or the game's id.
    pub id: String,
}

#[derive(Serialize, Deserialize)]
struct Wire {
    v: u32,
    kind: SignalKind,
    id: String,
}

pub fn encode(signal: &Signal) -> Vec<u8> {
    serde_json::to_vec(&Wire {
        v: VERSION,
        kind: signal.kind,
        id: signal.id.clone(),
    })
    .unwrap_or_default()
}

/// The signal, or `None` for a payload that is not a version-1 signal (such a payload is dropped:
/// signals are wake-ups, and the next snapshot makes up for it).
pub fn decode(payload: &[u8]) -> Option<Signal> {
    let wire: Wire = serde_json::from_slice(payload).ok()?;
    (wire.v == VERSION).then_some(Signal {
        kind: wire.kind,
        id: wire.id,
    })
}
