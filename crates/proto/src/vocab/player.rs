//! One side of a game: THE player type of the stored records and the Redis contracts. Games' live
//! record and its invitations store it, the `games.finished` contract carries it (as
//! [`crate::contract::finished::Player`], the same type), and the tournaments record keeps its
//! entrants and creator as it.
//!
//! Its JSON is what each of those wrote before they shared it: `{"id","name","guest","computer"}`,
//! plus `"bot":true` and `"berserk":true` only when true.
//!
//! ```
//! use draughts_proto::vocab::player::Player;
//!
//! let mut ann = Player::new("player:1".parse().unwrap());
//! ann.name = "Ann".into();
//! let json = serde_json::to_string(&ann).unwrap();
//! assert_eq!(json, r#"{"id":"player:1","name":"Ann","guest":false,"computer":false}"#);
//! assert_eq!(serde_json::from_str::<Player>(&json).unwrap(), ann);
//! ```

use serde::{Deserialize, Serialize};

use crate::ids::PlayerId;
use crate::pb;

/// One side of a game, as the server knew it (never as a request said: the flags come from the
/// server's identities).
///
/// `berserk` belongs to a finished game's side only: Games' live record (and its invitations) never
/// set it on a side. A live game keeps berserk per colour (`white_berserk`, `black_berserk`: the
/// record's JSON as before, where a side has no `berserk` field), and the `games.finished` entry
/// built from the record copies those flags onto its two sides. Callers that are not sides of a game
/// (Auth's principal, each service's caller, matchmaking's seeker) are their own types.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Player {
    /// Stable player id. Read with [`PlayerId::parse_stored`]: Games' records older than the id
    /// checks (before 2026-12-01) hold ids of no known kind, and the finished-game entries built from
    /// them carry them; they read as legacy ids and write back unchanged. Writers take the id from a
    /// checked caller or Games' record, so a new side never has a malformed one.
    #[serde(deserialize_with = "PlayerId::deserialize_stored")]
    pub id: PlayerId,
    /// Display name (a finished game's: when it ended; may be empty). Every writer writes it; a side
    /// without it reads as `""`.
    #[serde(default)]
    pub name: String,
    /// A guest (no account).
    #[serde(default)]
    pub guest: bool,
    /// A computer player.
    #[serde(default)]
    pub computer: bool,
    /// A BOT (a program playing through the API; the server's mark from the player's credential: an
    /// API key owner with the `bot` scope, never from a request). Written only when true, so sides of
    /// people read and write as before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bot: bool,
    /// This side went berserk in this game (Games.Berserk: half its own clock, no increment; arena
    /// games only). Set on a finished game's sides only (see the type's docs). Written only when
    /// true; sides without it read as false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub berserk: bool,
}

impl Player {
    /// A person's side (not a guest, the computer or a BOT; no berserk) named `id`, with no name.
    pub fn new(id: PlayerId) -> Player {
        Player {
            id,
            name: String::new(),
            guest: false,
            computer: false,
            bot: false,
            berserk: false,
        }
    }

    /// The wire form (`draughts.v1.Player`; berserk is not part of it: a game's view has it per
    /// colour).
    pub fn to_wire(&self) -> pb::Player {
        pb::Player {
            id: self.id.to_string(),
            display_name: self.name.clone(),
            guest: self.guest,
            computer: self.computer,
            bot: self.bot,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::PlayerKind;

    /// Sides as Games' records, invitations and the `games.finished` entries wrote them before they
    /// shared this type read and write back byte for byte.
    #[test]
    fn every_writers_side_writes_back_byte_for_byte() {
        for json in [
            r#"{"id":"player:1","name":"Ann","guest":false,"computer":false}"#,
            r#"{"id":"guest:x","name":"","guest":true,"computer":false}"#,
            r#"{"id":"ai:3","name":"Computer level 3","guest":false,"computer":true}"#,
            r#"{"id":"player:b","name":"Bot","guest":false,"computer":false,"bot":true}"#,
            r#"{"id":"player:1","name":"Ann","guest":false,"computer":false,"berserk":true}"#,
            r#"{"id":"bob","name":"bob","guest":false,"computer":false}"#,
        ] {
            let side: Player = serde_json::from_str(json).unwrap();
            assert_eq!(serde_json::to_string(&side).unwrap(), json);
        }
    }

    #[test]
    fn absent_fields_read_as_their_defaults_and_ids_are_checked() {
        let side: Player = serde_json::from_str(r#"{"id":"bob"}"#).unwrap();
        assert_eq!(side.id.kind(), PlayerKind::Legacy);
        assert_eq!(side, Player::new(side.id.clone()));
        for bad in [r#"{"id":""}"#, r#"{"id":"b\u0000ob"}"#, r#"{"name":"Ann"}"#] {
            assert!(serde_json::from_str::<Player>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_wire_form_carries_every_flag_but_berserk() {
        let side = Player {
            name: "Bot".into(),
            bot: true,
            berserk: true,
            ..Player::new("player:b".parse().unwrap())
        };
        assert_eq!(
            side.to_wire(),
            pb::Player {
                id: "player:b".into(),
                display_name: "Bot".into(),
                guest: false,
                computer: false,
                bot: true,
            }
        );
    }
}
