//! What the ratings service reads: a finished game, from a `games.finished` stream entry (decoded by
//! the one contract, [`draughts_proto::contract::finished`], whose docs list every field), from the
//! same entry as the games service lists it (the reconciler, [`crate::reconcile`]), or from an admin
//! import.
//!
//! `game_id` is the idempotency key: an entry may be delivered more than once, and a game is rated once.

use draughts_engine::Variant;
use draughts_proto::contract::finished::{self, DecodeError, FinishedV1};
use draughts_proto::ids;

pub use draughts_proto::contract::finished::{Outcome, TimeControl};

/// The stream the games service publishes finished games on.
pub const FINISHED_STREAM: &str = finished::STREAM;

/// Where entries that can never be applied (not JSON, unknown schema version, unknown variant) are
/// copied, unchanged, before they are acknowledged, so that they are kept for inspection without
/// blocking the consumer group.
pub const DEAD_LETTER_STREAM: &str = "games.finished.ratings-rejected";

/// Longest player id accepted, in bytes: the platform's one bound ([`ids::MAX_PLAYER_ID_BYTES`]), so
/// that every game Games accepts can be rated.
pub const MAX_PLAYER_ID_BYTES: usize = ids::MAX_PLAYER_ID_BYTES;
/// Longest game id accepted, in bytes ([`ids::MAX_GAME_ID_BYTES`]).
pub const MAX_GAME_ID_BYTES: usize = ids::MAX_GAME_ID_BYTES;

/// One side of a finished game: the platform's one player type. Its `bot` comes from the server's
/// data only (the `games.finished` entry Games writes from the player's credential, or the identity
/// registry for an import), never from a client.
pub use draughts_proto::vocab::player::Player;

/// Where a finished game came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The `games.finished` stream.
    Stream,
    /// `Ratings.RecordResult`.
    Import,
    /// The reconciler: a finished game the games service lists that the stream did not deliver.
    Reconcile,
}

impl Source {
    pub(crate) const fn key(self) -> &'static str {
        match self {
            Source::Stream => "stream",
            Source::Import => "import",
            Source::Reconcile => "reconcile",
        }
    }
}

/// A finished game, as the ratings service needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct FinishedGame {
    /// The idempotency key.
    pub game_id: String,
    pub variant: Variant,
    /// House-rule options as the games service writes them (`""`: none).
    pub options: String,
    /// Rated (true) or casual (false).
    pub rated: bool,
    pub white: Player,
    pub black: Player,
    pub outcome: Outcome,
    /// `None` when unknown (imports may leave it out).
    pub time_control: Option<TimeControl>,
    /// Unix epoch milliseconds.
    pub finished_at_ms: u64,
    /// W3C trace context of the game's last action, if the producer sent one.
    pub traceparent: Option<String>,
}

/// Why a stream entry can never be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// The contract refused it (not JSON, unknown version, variant or outcome).
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("{0}")]
    Invalid(String),
}

/// Checks an id: not empty, at most `max` bytes ([`MAX_PLAYER_ID_BYTES`], [`MAX_GAME_ID_BYTES`]), no
/// control characters.
pub fn check_id(what: &str, id: &str, max: usize) -> Result<(), String> {
    if id.is_empty() {
        return Err(format!("{what} is required"));
    }
    if id.len() > max {
        return Err(format!("{what} is longer than {max} bytes"));
    }
    if id.chars().any(char::is_control) {
        return Err(format!("{what} contains control characters"));
    }
    Ok(())
}

impl FinishedGame {
    /// Decodes a `games.finished` entry payload.
    pub fn from_event(payload: &[u8]) -> Result<FinishedGame, EventError> {
        let game = FinishedGame::from_contract(finished::decode(payload)?);
        game.check().map_err(EventError::Invalid)?;
        Ok(game)
    }

    /// The ratings view of a decoded `games.finished` event.
    pub fn from_contract(event: FinishedV1) -> FinishedGame {
        FinishedGame {
            game_id: event.game_id.into_string(),
            variant: event.variant,
            options: event.options,
            rated: event.rated,
            white: event.white,
            black: event.black,
            outcome: event.outcome,
            time_control: event.time_control,
            finished_at_ms: event.finished_at_ms,
            traceparent: event.traceparent,
        }
    }

    /// Checks the game id (the players' ids are checked by their type, [`ids::PlayerId`]).
    pub fn check(&self) -> Result<(), String> {
        check_id("game id", &self.game_id, MAX_GAME_ID_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example payload of the contract's documentation (crates/proto/src/contract/finished.rs).
    const EXAMPLE: &str = r#"{"v":1,"game_id":"g_1","variant":"international","options":"","rated":true,
 "white":{"id":"player:1","name":"Ann","guest":false,"computer":false},
 "black":{"id":"guest:x","name":"Bob","guest":true,"computer":false},
 "outcome":"white","reason":"resignation","result":"2-0",
 "time_control":{"kind":"fischer","base_ms":300000,"increment_ms":2000},
 "plies":41,"finished_at_ms":1764500000000,"pdn":"[Event ...] 1. 32-28 ... 2-0",
 "traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","later_field":[1,2]}"#;

    #[test]
    fn decodes_the_documented_example() {
        let game = FinishedGame::from_event(EXAMPLE.as_bytes()).unwrap();
        assert_eq!(game.game_id, "g_1");
        assert_eq!(game.variant, Variant::International);
        assert!(game.rated);
        assert_eq!(game.white.id, "player:1");
        assert!(game.black.guest && !game.black.computer);
        assert!(!game.white.bot && !game.black.bot);
        assert_eq!(game.outcome, Outcome::WhiteWins);
        assert_eq!(
            game.time_control,
            Some(TimeControl::Fischer {
                base_ms: 300_000,
                increment_ms: 2_000
            })
        );
        assert_eq!(game.finished_at_ms, 1_764_500_000_000);
    }

    #[test]
    fn check(/* payload, expected error */) {
        let cases: [(&str, EventError); 2] = [
            (r#"{"v":2,"game_id":"g"}"#, DecodeError::Version(2).into()),
            (
                &EXAMPLE.replace("\"outcome\":\"white\"", "\"outcome\":\"blue\""),
                DecodeError::Outcome("blue".into()).into(),
            ),
        ];
        for (payload, expected) in cases {
            let error = FinishedGame::from_event(payload.as_bytes()).unwrap_err();
            assert_eq!(error, expected, "{payload}");
        }
        // The contract checks the game id (a `GameId`).
        let error =
            FinishedGame::from_event(EXAMPLE.replace("\"g_1\"", "\"\"").as_bytes()).unwrap_err();
        assert!(
            matches!(&error, EventError::Decode(DecodeError::Malformed(m)) if m.contains("game id is empty")),
            "{error}"
        );
    }

    /// Every id Games accepts is accepted here (Games took player ids up to 140 bytes and ratings 128:
    /// such a game was dead-lettered and never rated); one byte more is refused by both.
    #[test]
    fn the_longest_ids_games_accepts_are_accepted() {
        let longest = format!(
            "player:{}",
            "x".repeat(ids::MAX_PLAYER_ID_BYTES - "player:".len())
        );
        assert!(ids::PlayerId::parse(&longest).is_ok());
        let game_id = "g".repeat(ids::MAX_GAME_ID_BYTES);
        assert!(ids::GameId::parse(&game_id).is_ok());
        let payload = EXAMPLE
            .replace("\"player:1\"", &format!("{longest:?}"))
            .replace("\"g_1\"", &format!("{game_id:?}"));
        let game = FinishedGame::from_event(payload.as_bytes()).unwrap();
        assert_eq!((game.white.id.len(), game.game_id.len()), (140, 64));
        let too_long = format!("{longest}x");
        assert!(ids::PlayerId::parse(&too_long).is_err());
        let payload = EXAMPLE.replace("\"player:1\"", &format!("{too_long:?}"));
        // The contract refuses it (player ids are checked on read).
        let error = FinishedGame::from_event(payload.as_bytes()).unwrap_err();
        assert!(
            matches!(&error, EventError::Decode(DecodeError::Malformed(m)) if m.contains("longer than 140 bytes")),
            "{error}"
        );
    }
}
