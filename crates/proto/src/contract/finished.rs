//! The `games.finished` stream: one entry per finished game, appended by the games service when it
//! archives the game (`GamesCore::archive`), read by ratings (consumer group `ratings`) and, later, by
//! analysis for bulk work.
//!
//! Payload: JSON, schema version 1 ([`FinishedV1`]). Entries already on a stream stay readable: the
//! tests below decode today's documented example byte for byte. Consumers must treat `game_id` as the
//! idempotency key, since an entry may be delivered more than once (the archive is at-least-once).
//!
//! ```json
//! {"v":1,"game_id":"g_...","variant":"international","options":"","rated":true,
//!  "white":{"id":"player:1","name":"Ann","guest":false,"computer":false},
//!  "black":{"id":"guest:x","name":"Bob","guest":true,"computer":false},
//!  "outcome":"white","reason":"resignation","result":"2-0",
//!  "time_control":{"kind":"fischer","base_ms":300000,"increment_ms":2000},
//!  "plies":41,"finished_at_ms":1764500000000,"pdn":"[Event ...] 1. 32-28 ... 2-0",
//!  "traceparent":"00-...-...-01"}
//! ```
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `v` | integer | schema version, 1 |
//! | `game_id` | string | the game's id; the idempotency key |
//! | `variant` | string | the variant's stable key (`Variant::key`) |
//! | `options` | string | canonical house-rule options (`no-mandatory-capture,move-limit=40`), `""` for none |
//! | `rated` | bool | rated (already false for an aborted game) |
//! | `white`, `black` | object | `id`, `name` (display name when the game ended), `guest`, `computer` |
//! | `outcome` | string | [`Outcome`]: `white`, `black`, `draw`, `aborted` |
//! | `reason` | string | [`EndReason`]: `no_pieces`, `no_moves`, `resignation`, `time`, `repetition`, `no_progress`, `endgame_rule`, `agreement`, `aborted`; a reason this reader does not know decodes as [`EndReason::Other`] |
//! | `result` | string | the result as PDN writes it for the variant (`2-0`, `1-0`, `1/2-1/2`, `*`) |
//! | `time_control` | object | [`TimeControl`]: `{"kind":"fischer","base_ms","increment_ms"}` (ms) or `{"kind":"correspondence","days_per_move"}`; may be absent (then unknown) |
//! | `plies` | integer | moves played |
//! | `finished_at_ms` | integer | when it ended, Unix epoch milliseconds |
//! | `pdn` | string | the whole game as PDN |
//! | `traceparent` | string, optional | W3C trace context of the game's last action |
//!
//! ```
//! use draughts_proto::contract::finished::{self, FinishedV1, Outcome};
//!
//! let payload = br#"{"v":1,"game_id":"g1","variant":"english","white":{"id":"guest:a"},
//!   "black":{"id":"ai:3","computer":true},"outcome":"draw","reason":"agreement","later":1}"#;
//! let event = finished::decode(payload).unwrap();
//! assert_eq!(event.outcome, Outcome::Draw);
//! assert!(event.black.computer);
//! assert_eq!(finished::decode(&finished::encode(&event)).unwrap(), event);
//! ```

use std::fmt;

use draughts_engine::Variant;
use serde::{Deserialize, Serialize};

/// The stream the games service appends finished games to.
pub const STREAM: &str = "games.finished";

/// The schema version [`encode`] writes and [`decode`] reads.
pub const VERSION: u32 = 1;

/// How a game ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Outcome {
    /// `white`: White won.
    #[serde(rename = "white")]
    WhiteWins,
    /// `black`: Black won.
    #[serde(rename = "black")]
    BlackWins,
    /// `draw`.
    #[serde(rename = "draw")]
    Draw,
    /// `aborted`: cancelled before it really started; never rated.
    #[serde(rename = "aborted")]
    Aborted,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 4] = [
        Outcome::WhiteWins,
        Outcome::BlackWins,
        Outcome::Draw,
        Outcome::Aborted,
    ];

    /// The stable key as written on the wire (`white`, `black`, `draw`, `aborted`).
    pub const fn key(self) -> &'static str {
        match self {
            Outcome::WhiteWins => "white",
            Outcome::BlackWins => "black",
            Outcome::Draw => "draw",
            Outcome::Aborted => "aborted",
        }
    }

    /// The outcome with that key.
    pub fn from_key(key: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.key() == key)
    }

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

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// Why a game ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The loser has no pieces left.
    NoPieces,
    /// The loser has no legal move.
    NoMoves,
    Resignation,
    /// A flag fell.
    Time,
    Repetition,
    /// The no-progress (moves without a capture or a man's move) rule.
    NoProgress,
    /// The variant's endgame move limit.
    EndgameRule,
    /// A draw offer accepted.
    Agreement,
    /// The game was aborted.
    Aborted,
    /// Antidraughts: the winner, to move, has no pieces left.
    GaveAwayAllPieces,
    /// Antidraughts: the winner, to move, has no legal move.
    GaveAwayAllMoves,
    /// Breakthrough: the winner crowned the first king.
    FirstKing,
    /// A reason written by a newer writer that this reader does not know (decode only; written as
    /// `other`).
    #[serde(other)]
    Other,
}

impl EndReason {
    /// Every known reason.
    pub const ALL: [EndReason; 13] = [
        EndReason::NoPieces,
        EndReason::NoMoves,
        EndReason::Resignation,
        EndReason::Time,
        EndReason::Repetition,
        EndReason::NoProgress,
        EndReason::EndgameRule,
        EndReason::Agreement,
        EndReason::Aborted,
        EndReason::GaveAwayAllPieces,
        EndReason::GaveAwayAllMoves,
        EndReason::FirstKing,
        EndReason::Other,
    ];

    /// The stable key as written on the wire.
    pub const fn key(self) -> &'static str {
        match self {
            EndReason::NoPieces => "no_pieces",
            EndReason::NoMoves => "no_moves",
            EndReason::Resignation => "resignation",
            EndReason::Time => "time",
            EndReason::Repetition => "repetition",
            EndReason::NoProgress => "no_progress",
            EndReason::EndgameRule => "endgame_rule",
            EndReason::Agreement => "agreement",
            EndReason::Aborted => "aborted",
            EndReason::GaveAwayAllPieces => "gave_away_all_pieces",
            EndReason::GaveAwayAllMoves => "gave_away_all_moves",
            EndReason::FirstKing => "first_king",
            EndReason::Other => "other",
        }
    }

    /// The reason with that key; an unknown key is [`EndReason::Other`].
    pub fn from_key(key: &str) -> EndReason {
        EndReason::ALL
            .into_iter()
            .find(|r| r.key() == key)
            .unwrap_or(EndReason::Other)
    }
}

/// A game's time control (milliseconds, days): THE time-control type of the Redis contracts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TimeControl {
    /// Base time plus an increment per move.
    Fischer {
        /// Initial time per player, milliseconds.
        base_ms: u64,
        /// Added after each move, milliseconds.
        #[serde(default)]
        increment_ms: u64,
    },
    /// A fixed number of days for each move.
    Correspondence {
        /// Days per move.
        days_per_move: u32,
    },
}

/// One side of a finished game, as the server knew it.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Player {
    /// Stable player id.
    pub id: String,
    /// Display name when the game ended (may be empty).
    #[serde(default)]
    pub name: String,
    /// A guest (no account).
    #[serde(default)]
    pub guest: bool,
    /// A computer player.
    #[serde(default)]
    pub computer: bool,
}

/// A `games.finished` entry, schema version 1 (see the module docs for every field).
#[derive(Clone, Debug, PartialEq)]
pub struct FinishedV1 {
    pub game_id: String,
    pub variant: Variant,
    /// Canonical house-rule options, `""` for none.
    pub options: String,
    pub rated: bool,
    pub white: Player,
    pub black: Player,
    pub outcome: Outcome,
    pub reason: EndReason,
    /// The result as PDN writes it (`2-0`, ...), `""` when the writer left it out.
    pub result: String,
    /// `None` when unknown.
    pub time_control: Option<TimeControl>,
    pub plies: u32,
    /// Unix epoch milliseconds.
    pub finished_at_ms: u64,
    /// The game as PDN, `""` when the writer left it out.
    pub pdn: String,
    pub traceparent: Option<String>,
}

/// Why a payload is not a `games.finished` v1 entry. Never retried: such an entry is dead-lettered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("not a finished-game event: {0}")]
    Malformed(String),
    #[error("finished-game event schema version {0} is not supported (this reader knows 1)")]
    Version(u32),
    #[error("unknown variant {0:?}")]
    Variant(String),
    #[error("unknown outcome {0:?}")]
    Outcome(String),
}

/// The wire form: every field as JSON has it; strings for the fields whose unknown values get their
/// own decode error.
#[derive(Serialize, Deserialize)]
struct Wire {
    v: u32,
    game_id: String,
    variant: String,
    #[serde(default)]
    options: String,
    #[serde(default)]
    rated: bool,
    white: Player,
    black: Player,
    outcome: String,
    #[serde(default = "other_reason")]
    reason: EndReason,
    #[serde(default)]
    result: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    time_control: Option<TimeControl>,
    #[serde(default)]
    plies: u32,
    #[serde(default)]
    finished_at_ms: u64,
    #[serde(default)]
    pdn: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    traceparent: Option<String>,
}

fn other_reason() -> EndReason {
    EndReason::Other
}

#[derive(Deserialize)]
struct VersionOnly {
    v: u32,
}

/// The JSON payload of `event` (schema version [`VERSION`]).
pub fn encode(event: &FinishedV1) -> Vec<u8> {
    let wire = Wire {
        v: VERSION,
        game_id: event.game_id.clone(),
        variant: event.variant.key().to_owned(),
        options: event.options.clone(),
        rated: event.rated,
        white: event.white.clone(),
        black: event.black.clone(),
        outcome: event.outcome.key().to_owned(),
        reason: event.reason,
        result: event.result.clone(),
        time_control: event.time_control,
        plies: event.plies,
        finished_at_ms: event.finished_at_ms,
        pdn: event.pdn.clone(),
        traceparent: event.traceparent.clone(),
    };
    // Strings, integers and enums only: serialising cannot fail.
    serde_json::to_vec(&wire).unwrap_or_default()
}

/// Reads a payload: the version first (an unknown version is refused, not misread), then the fields;
/// unknown fields are ignored.
pub fn decode(payload: &[u8]) -> Result<FinishedV1, DecodeError> {
    let version: VersionOnly =
        serde_json::from_slice(payload).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    if version.v != VERSION {
        return Err(DecodeError::Version(version.v));
    }
    let wire: Wire =
        serde_json::from_slice(payload).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    let variant = Variant::from_key(&wire.variant).map_err(|e| DecodeError::Variant(e.0))?;
    let outcome = Outcome::from_key(&wire.outcome).ok_or(DecodeError::Outcome(wire.outcome))?;
    Ok(FinishedV1 {
        game_id: wire.game_id,
        variant,
        options: wire.options,
        rated: wire.rated,
        white: wire.white,
        black: wire.black,
        outcome,
        reason: wire.reason,
        result: wire.result,
        time_control: wire.time_control,
        plies: wire.plies,
        finished_at_ms: wire.finished_at_ms,
        pdn: wire.pdn,
        traceparent: wire.traceparent,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The payload today's writer produced before this module existed (its documented example, with
    /// a field from a later writer): entries like it may still sit on a stream.
    const V1_EXAMPLE: &str = r#"{"v":1,"game_id":"g_1","variant":"international","options":"","rated":true,
 "white":{"id":"player:1","name":"Ann","guest":false,"computer":false},
 "black":{"id":"guest:x","name":"Bob","guest":true,"computer":false},
 "outcome":"white","reason":"resignation","result":"2-0",
 "time_control":{"kind":"fischer","base_ms":300000,"increment_ms":2000},
 "plies":41,"finished_at_ms":1764500000000,"pdn":"[Event ...] 1. 32-28 ... 2-0",
 "traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","later_field":[1,2]}"#;

    fn example() -> FinishedV1 {
        FinishedV1 {
            game_id: "g_1".into(),
            variant: Variant::International,
            options: String::new(),
            rated: true,
            white: Player {
                id: "player:1".into(),
                name: "Ann".into(),
                guest: false,
                computer: false,
            },
            black: Player {
                id: "guest:x".into(),
                name: "Bob".into(),
                guest: true,
                computer: false,
            },
            outcome: Outcome::WhiteWins,
            reason: EndReason::Resignation,
            result: "2-0".into(),
            time_control: Some(TimeControl::Fischer {
                base_ms: 300_000,
                increment_ms: 2_000,
            }),
            plies: 41,
            finished_at_ms: 1_764_500_000_000,
            pdn: "[Event ...] 1. 32-28 ... 2-0".into(),
            traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
        }
    }

    #[test]
    fn decodes_entries_written_before_the_contract() {
        assert_eq!(decode(V1_EXAMPLE.as_bytes()).unwrap(), example());
    }

    #[test]
    fn round_trips_and_writes_the_v1_field_names() {
        let bytes = encode(&example());
        assert_eq!(decode(&bytes).unwrap(), example());
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let old: serde_json::Value = serde_json::from_str(V1_EXAMPLE).unwrap();
        for (name, value) in json.as_object().unwrap() {
            assert_eq!(Some(value), old.get(name), "field {name}");
        }
        assert_eq!(json["v"], 1);
    }

    #[test]
    fn keys_round_trip() {
        for o in Outcome::ALL {
            assert_eq!(Outcome::from_key(o.key()), Some(o));
            let json = serde_json::to_string(&o).unwrap();
            assert_eq!(json, format!("\"{}\"", o.key()));
        }
        for r in EndReason::ALL {
            assert_eq!(EndReason::from_key(r.key()), r);
            assert_eq!(
                serde_json::to_string(&r).unwrap(),
                format!("\"{}\"", r.key())
            );
        }
        assert_eq!(EndReason::from_key("meteor"), EndReason::Other);
    }

    #[test]
    fn check(/* payload, expected error */) {
        let cases: [(&str, Result<(), DecodeError>); 6] = [
            ("not json", Err(DecodeError::Malformed(String::new()))),
            (r#"{"v":2,"game_id":"g"}"#, Err(DecodeError::Version(2))),
            (
                &V1_EXAMPLE.replace("\"international\"", "\"chess\""),
                Err(DecodeError::Variant("chess".into())),
            ),
            (
                &V1_EXAMPLE.replace("\"outcome\":\"white\"", "\"outcome\":\"blue\""),
                Err(DecodeError::Outcome("blue".into())),
            ),
            (&V1_EXAMPLE.replace("\"resignation\"", "\"meteor\""), Ok(())),
            (
                r#"{"v":1,"game_id":"g","variant":"english","white":{"id":"a"},"black":{"id":"b"},"outcome":"draw"}"#,
                Ok(()),
            ),
        ];
        for (payload, expected) in cases {
            let got = decode(payload.as_bytes()).map(|_| ());
            match (&got, &expected) {
                (Err(DecodeError::Malformed(_)), Err(DecodeError::Malformed(_))) => {}
                _ => assert_eq!(got, expected, "{payload}"),
            }
        }
        let minimal = decode(br#"{"v":1,"game_id":"g","variant":"english","white":{"id":"a"},"black":{"id":"b"},"outcome":"draw"}"#).unwrap();
        assert_eq!(
            (minimal.reason, minimal.time_control, minimal.rated),
            (EndReason::Other, None, false)
        );
    }
}
