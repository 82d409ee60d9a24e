//! What the ratings service reads: a finished game, from a `games.finished` stream entry (schema version
//! 1, written by the games service; its full description is at the top of
//! `services/validation/src/games/service.rs`) or from an admin import.
//!
//! The fields read here (every other field is ignored, as are unknown fields):
//! ```json
//! {"v":1,"game_id":"g_...","variant":"international","options":"","rated":true,
//!  "white":{"id":"player:1","guest":false,"computer":false},
//!  "black":{"id":"guest:x","guest":true,"computer":false},
//!  "outcome":"white",
//!  "time_control":{"kind":"fischer","base_ms":300000,"increment_ms":2000},
//!  "finished_at_ms":1764500000000,"traceparent":"00-...-...-01"}
//! ```
//! `outcome` is `white`, `black`, `draw` or `aborted`. `game_id` is the idempotency key: an entry may be
//! delivered more than once, and a game is rated once.

use draughts_engine::Variant;
use serde::Deserialize;

use crate::category::TimeControl;

/// The stream the games service publishes finished games on.
pub const FINISHED_STREAM: &str = "games.finished";

/// Where entries that can never be applied (not JSON, unknown schema version, unknown variant) are
/// copied, unchanged, before they are acknowledged, so that they are kept for inspection without
/// blocking the consumer group.
pub const DEAD_LETTER_STREAM: &str = "games.finished.ratings-rejected";

/// The schema version this reader understands.
pub const SCHEMA_VERSION: u32 = 1;

/// Longest player or game id accepted, in bytes.
pub const MAX_ID_BYTES: usize = 128;

/// How a game ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    WhiteWins,
    BlackWins,
    Draw,
    /// Cancelled before it really started: never rated.
    Aborted,
}

impl Outcome {
    /// White's score (1, 1/2, 0); `None` for an aborted game.
    pub fn white_score(self) -> Option<f64> {
        match self {
            Outcome::WhiteWins => Some(1.0),
            Outcome::BlackWins => Some(0.0),
            Outcome::Draw => Some(0.5),
            Outcome::Aborted => None,
        }
    }
}

/// One side of a finished game.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Side {
    /// Stable player id.
    pub id: String,
    /// A guest (no account).
    #[serde(default)]
    pub guest: bool,
    /// The computer.
    #[serde(default)]
    pub computer: bool,
}

/// Where a finished game came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The `games.finished` stream.
    Stream,
    /// `Ratings.RecordResult`.
    Import,
}

impl Source {
    pub(crate) const fn key(self) -> &'static str {
        match self {
            Source::Stream => "stream",
            Source::Import => "import",
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
    pub white: Side,
    pub black: Side,
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
    #[error("not a finished-game event: {0}")]
    Malformed(String),
    #[error("finished-game event schema version {0} is not supported (this reader knows 1)")]
    Version(u32),
    #[error("unknown variant {0:?}")]
    Variant(String),
    #[error("unknown outcome {0:?}")]
    Outcome(String),
    #[error("{0}")]
    Invalid(String),
}

#[derive(Deserialize)]
struct EventV1 {
    v: u32,
    game_id: String,
    variant: String,
    #[serde(default)]
    options: String,
    #[serde(default)]
    rated: bool,
    white: Side,
    black: Side,
    outcome: String,
    #[serde(default)]
    time_control: Option<TimeControl>,
    #[serde(default)]
    finished_at_ms: u64,
    #[serde(default)]
    traceparent: Option<String>,
}

#[derive(Deserialize)]
struct VersionOnly {
    v: u32,
}

/// Checks an id: not empty, at most [`MAX_ID_BYTES`], no control characters.
pub fn check_id(what: &str, id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err(format!("{what} is required"));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(format!("{what} is longer than {MAX_ID_BYTES} bytes"));
    }
    if id.chars().any(char::is_control) {
        return Err(format!("{what} contains control characters"));
    }
    Ok(())
}

impl FinishedGame {
    /// Decodes a `games.finished` entry payload.
    pub fn from_event(payload: &[u8]) -> Result<FinishedGame, EventError> {
        let version: VersionOnly =
            serde_json::from_slice(payload).map_err(|e| EventError::Malformed(e.to_string()))?;
        if version.v != SCHEMA_VERSION {
            return Err(EventError::Version(version.v));
        }
        let event: EventV1 =
            serde_json::from_slice(payload).map_err(|e| EventError::Malformed(e.to_string()))?;
        debug_assert_eq!(event.v, SCHEMA_VERSION);
        let variant = Variant::ALL
            .into_iter()
            .find(|v| v.key() == event.variant)
            .ok_or_else(|| EventError::Variant(event.variant.clone()))?;
        let outcome = match event.outcome.as_str() {
            "white" => Outcome::WhiteWins,
            "black" => Outcome::BlackWins,
            "draw" => Outcome::Draw,
            "aborted" => Outcome::Aborted,
            other => return Err(EventError::Outcome(other.to_owned())),
        };
        let game = FinishedGame {
            game_id: event.game_id,
            variant,
            options: event.options,
            rated: event.rated,
            white: event.white,
            black: event.black,
            outcome,
            time_control: event.time_control,
            finished_at_ms: event.finished_at_ms,
            traceparent: event.traceparent,
        };
        game.check().map_err(EventError::Invalid)?;
        Ok(game)
    }

    /// Checks the ids.
    pub fn check(&self) -> Result<(), String> {
        check_id("game id", &self.game_id)?;
        check_id("white player id", &self.white.id)?;
        check_id("black player id", &self.black.id)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example payload of the producer's documentation (services/validation/src/games/service.rs).
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
        let cases: [(&str, EventError); 5] = [
            ("not json", EventError::Malformed(String::new())),
            (r#"{"v":2,"game_id":"g"}"#, EventError::Version(2)),
            (
                &EXAMPLE.replace("\"international\"", "\"chess\""),
                EventError::Variant("chess".into()),
            ),
            (
                &EXAMPLE.replace("\"outcome\":\"white\"", "\"outcome\":\"blue\""),
                EventError::Outcome("blue".into()),
            ),
            (
                &EXAMPLE.replace("\"g_1\"", "\"\""),
                EventError::Invalid("game id is required".into()),
            ),
        ];
        for (payload, expected) in cases {
            let error = FinishedGame::from_event(payload.as_bytes()).unwrap_err();
            match (&error, &expected) {
                (EventError::Malformed(_), EventError::Malformed(_)) => {}
                _ => assert_eq!(error, expected, "{payload}"),
            }
        }
    }
}
