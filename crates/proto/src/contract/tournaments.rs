//! The tournaments service's live state (`services/tournaments`): every name it keeps in the live
//! store and every payload it publishes. Written and read only by tournaments replicas.
//!
//! Names below: `<id>` stands for a value; `{tour}` is literal, a hash tag ([`GROUP_TAG`]): every name
//! with it is in one group (`draughts_store::keys`), so that a tournament's record and the indexes it
//! moves between are written in one atomic step (one slot of a Redis Cluster).
//!
//! | name | kind | payload | what |
//! |---|---|---|---|
//! | `tour:{tour}<id>` | versioned key | the tournament record (JSON `"v":1`: terms, entrants, standings, games in progress, fence; `services/tournaments/src/store.rs`) | one tournament; every change is a compare-and-set on it |
//! | `tour-upcoming:{tour}` | pinned schedule | member = tournament id, time = its start | tournaments not started (ListTournaments UPCOMING; the schedulers' work) |
//! | `tour-running:{tour}` | pinned schedule | member = tournament id, time = its start | tournaments under way |
//! | `tour-creator:{tour}<player>` | versioned key | [`CreatorOpen`] | a creator's open tournaments (the per-creator bound, counted and written by compare-and-set) |
//! | `tour-lease:<id>` | versioned key | [`SchedulerLease`] | which replica schedules the tournament; its version is the fencing token |
//! | `tour-events:<id>` | pub/sub | [`Event`] | what happened, for WatchTournament (a gap: re-read the record) |
//!
//! Finished tournaments leave the live store: their final record is archived in the database
//! (`tournaments_archive`, tournaments' own table) and the key is deleted a day later.
//!
//! Games of a tournament have ids `<tournament id>-<n>` ([`game_id`], [`tournament_of_game`]), so
//! that a `games.finished` entry names its tournament without another lookup.
//!
//! Every payload is JSON with `"v":1`; readers ignore unknown fields and refuse other versions.
//!
//! ```
//! use draughts_proto::contract::tournaments::{self as t, Event};
//! use draughts_proto::contract::finished::Player;
//!
//! let id = "t0123456789abcdef";
//! assert!(t::is_tournament_id(id));
//! assert_eq!(t::tournament_of_game(&t::game_id(id, 7)), Some(id));
//! assert_eq!(t::tournament_of_game("g123"), None);
//! let e = Event::Joined { player: Player::new("player:a".parse().unwrap()) };
//! assert_eq!(t::decode_event(&t::encode_event(&e)).unwrap(), e);
//! assert!(t::decode_event(br#"{"v":2,"kind":"standings"}"#).is_err());
//! ```

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::contract::finished::Player;
use crate::ids::TournamentId;

/// The schema version written.
pub const VERSION: u32 = 1;

/// Tournaments' group (see the module documentation).
pub const GROUP_TAG: &str = "{tour}";

/// Tournaments not started yet.
pub const UPCOMING: &str = "tour-upcoming:{tour}";
/// Tournaments under way.
pub const RUNNING: &str = "tour-running:{tour}";

pub fn record_key(id: &str) -> String {
    format!("tour:{GROUP_TAG}{id}")
}
pub fn creator_key(player: &str) -> String {
    format!("tour-creator:{GROUP_TAG}{player}")
}
pub fn lease_key(id: &str) -> String {
    format!("tour-lease:{id}")
}
pub fn events_channel(id: &str) -> String {
    format!("tour-events:{id}")
}

/// Whether `text` is a tournament id ([`TournamentId`]: `t` and 16 lowercase hex digits).
pub fn is_tournament_id(text: &str) -> bool {
    TournamentId::parse(text).is_ok()
}

/// The id of game `n` of tournament `id`.
pub fn game_id(id: &str, n: u64) -> String {
    format!("{id}-{n}")
}

/// The tournament a game belongs to, if its id is one of [`game_id`]'s.
pub fn tournament_of_game(game_id: &str) -> Option<&str> {
    let (id, n) = game_id.split_once('-')?;
    (is_tournament_id(id) && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some(id)
}

/// Who runs a tournament's scheduler, until when (the key's version is the fencing token).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedulerLease {
    pub owner: String,
    /// Unix epoch milliseconds.
    pub until_ms: u64,
}

/// A creator's tournaments that may still be open: `(id, reserved at, Unix epoch ms)`. An id is reserved
/// here before its record is written; ids whose record is over, or missing 10 s after the reservation
/// (a creation that died half way), no longer count and are dropped at the next creation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatorOpen {
    pub open: Vec<(TournamentId, u64)>,
}

/// A game's result as events carry it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultKind {
    WhiteWins,
    BlackWins,
    Draw,
}

/// What happened in a tournament, published on [`events_channel`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// A player entered or came back.
    Joined { player: Player },
    /// A player left (paused in an arena, withdrawn from a Swiss event).
    Left { player: Player },
    /// A game was created.
    Paired {
        game_id: String,
        white: Player,
        black: Player,
        #[serde(default)]
        round: u32,
    },
    /// A game ended and was counted.
    Result {
        game_id: String,
        white: Player,
        black: Player,
        result: ResultKind,
        /// The loser made no first move.
        #[serde(default)]
        forfeit: bool,
        #[serde(default)]
        round: u32,
    },
    /// The standings changed: re-read them.
    Standings,
    /// A Swiss round (or the arena, round 0) started.
    RoundStarted {
        round: u32,
        #[serde(default)]
        bye: Option<Player>,
    },
    /// The tournament finished or was cancelled.
    Finished,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("not a tournaments payload: {0}")]
    Malformed(String),
    #[error("tournaments schema version {0} is not supported (this reader knows 1)")]
    Version(u32),
}

#[derive(Deserialize)]
struct VersionOnly {
    v: u32,
}

#[derive(Serialize, Deserialize)]
struct Versioned<T> {
    v: u32,
    #[serde(flatten)]
    body: T,
}

/// The JSON of `body` with `"v":1`: the wrapper of every tournaments payload (the record too).
pub fn encode<T: Serialize>(body: &T) -> Vec<u8> {
    serde_json::to_vec(&Versioned { v: VERSION, body }).unwrap_or_default()
}

/// Reads a payload written by [`encode`]: the version first (another is refused, not misread).
pub fn decode<T: DeserializeOwned>(payload: &[u8]) -> Result<T, DecodeError> {
    let version: VersionOnly =
        serde_json::from_slice(payload).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    if version.v != VERSION {
        return Err(DecodeError::Version(version.v));
    }
    let wire: Versioned<T> =
        serde_json::from_slice(payload).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    Ok(wire.body)
}

pub fn encode_event(event: &Event) -> Vec<u8> {
    encode(event)
}
pub fn decode_event(payload: &[u8]) -> Result<Event, DecodeError> {
    decode(payload)
}
pub fn encode_lease(lease: &SchedulerLease) -> Vec<u8> {
    encode(lease)
}
pub fn decode_lease(payload: &[u8]) -> Result<SchedulerLease, DecodeError> {
    decode(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_event_decodes() {
        let payload = br#"{"v":1,"kind":"result","game_id":"t0123456789abcdef-3","white":{"id":"player:a"},"black":{"id":"guest:b","guest":true},"result":"draw","later":1}"#;
        let Event::Result {
            result, forfeit, ..
        } = decode_event(payload).unwrap()
        else {
            panic!("a result")
        };
        assert_eq!(result, ResultKind::Draw);
        assert!(!forfeit);
    }

    #[test]
    fn game_ids() {
        assert_eq!(tournament_of_game("t0123456789abcdef-"), None);
        assert_eq!(tournament_of_game("t0123456789abcdeg-1"), None);
        assert_eq!(tournament_of_game("t0123456789abcdef-1x"), None);
        assert!(!is_tournament_id("t0123456789ABCDEF"));
    }
}
