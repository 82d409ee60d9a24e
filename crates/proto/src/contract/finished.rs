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
//! | `white`, `black` | object | `id`, `name` (display name when the game ended), `guest`, `computer`, `bot` (a BOT; present only when true, absent = false), `berserk` (this side went berserk: half its clock, no increment; present only when true, absent = false) |
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

use draughts_engine::{Color, DrawReason, GameResult, Variant, WinReason};
use serde::{Deserialize, Serialize};

use crate::ids::GameId;
use crate::pb;

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

impl Outcome {
    /// The outcome of a finished engine game (THE conversion: Games' records, the wire and this
    /// contract all use it).
    pub fn of(result: &GameResult) -> Outcome {
        match result {
            GameResult::Win {
                winner: Color::White,
                ..
            } => Outcome::WhiteWins,
            GameResult::Win {
                winner: Color::Black,
                ..
            } => Outcome::BlackWins,
            GameResult::Draw(_) => Outcome::Draw,
        }
    }

    /// The wire form.
    pub const fn to_wire(self) -> pb::Outcome {
        match self {
            Outcome::WhiteWins => pb::Outcome::WhiteWins,
            Outcome::BlackWins => pb::Outcome::BlackWins,
            Outcome::Draw => pb::Outcome::Draw,
            Outcome::Aborted => pb::Outcome::Aborted,
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

impl EndReason {
    /// Why a finished engine game ended (THE conversion, as [`Outcome::of`]).
    pub fn of(result: &GameResult) -> EndReason {
        match result {
            GameResult::Win { reason, .. } => match reason {
                WinReason::NoPieces => EndReason::NoPieces,
                WinReason::NoMoves => EndReason::NoMoves,
                WinReason::Resignation => EndReason::Resignation,
                WinReason::Time => EndReason::Time,
                WinReason::GaveAwayAllPieces => EndReason::GaveAwayAllPieces,
                WinReason::GaveAwayAllMoves => EndReason::GaveAwayAllMoves,
                WinReason::FirstKing => EndReason::FirstKing,
            },
            GameResult::Draw(draw) => match draw {
                DrawReason::Repetition => EndReason::Repetition,
                DrawReason::NoProgress { .. } => EndReason::NoProgress,
                DrawReason::Endgame { .. } => EndReason::EndgameRule,
                DrawReason::Agreement => EndReason::Agreement,
            },
        }
    }

    /// The wire form ([`EndReason::Other`], a newer writer's reason: unspecified).
    pub const fn to_wire(self) -> pb::EndReason {
        match self {
            EndReason::NoPieces => pb::EndReason::NoPieces,
            EndReason::NoMoves => pb::EndReason::NoMoves,
            EndReason::Resignation => pb::EndReason::Resignation,
            EndReason::Time => pb::EndReason::Time,
            EndReason::Repetition => pb::EndReason::Repetition,
            EndReason::NoProgress => pb::EndReason::NoProgress,
            EndReason::EndgameRule => pb::EndReason::EndgameRule,
            EndReason::Agreement => pb::EndReason::Agreement,
            EndReason::Aborted => pb::EndReason::Aborted,
            EndReason::GaveAwayAllPieces => pb::EndReason::GaveAwayAllPieces,
            EndReason::GaveAwayAllMoves => pb::EndReason::GaveAwayAllMoves,
            EndReason::FirstKing => pb::EndReason::FirstKing,
            EndReason::Other => pb::EndReason::Unspecified,
        }
    }
}

/// A game's time control: the platform's one type ([`crate::vocab::time`]).
pub use crate::vocab::time::TimeControl;

/// One side of a finished game: the platform's one player type ([`crate::vocab::player`]), whose
/// `berserk` says whether this side went berserk.
pub use crate::vocab::player::Player;

/// A `games.finished` entry, schema version 1 (see the module docs for every field).
#[derive(Clone, Debug, PartialEq)]
pub struct FinishedV1 {
    pub game_id: GameId,
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
    game_id: GameId,
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
    use crate::ids::PlayerKind;

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
            game_id: "g_1".parse().unwrap(),
            variant: Variant::International,
            options: String::new(),
            rated: true,
            white: Player {
                id: "player:1".parse().unwrap(),
                name: "Ann".into(),
                guest: false,
                computer: false,
                bot: false,
                berserk: false,
            },
            black: Player {
                id: "guest:x".parse().unwrap(),
                name: "Bob".into(),
                guest: true,
                computer: false,
                bot: false,
                berserk: false,
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

    /// A bot side carries `"bot":true`; a person's side writes no `bot` field (older readers and
    /// entries are unchanged), and an entry without it reads as a person.
    #[test]
    fn a_bot_side_is_marked_only_when_it_is_one() {
        let mut event = example();
        event.black.bot = true;
        let bytes = encode(&event);
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(json["black"]["bot"], true);
        assert!(json["white"].get("bot").is_none());
        assert_eq!(decode(&bytes).unwrap(), event);
        assert!(!decode(V1_EXAMPLE.as_bytes()).unwrap().black.bot);
    }

    /// A side that went berserk carries `"berserk":true`; the other side writes no `berserk` field, and
    /// entries written before the field existed read as no berserk on either side.
    #[test]
    fn berserk_sides_are_marked_and_old_entries_read_without_them() {
        let mut event = example();
        event.white.berserk = true;
        let bytes = encode(&event);
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(json["white"]["berserk"], true);
        assert!(json["black"].get("berserk").is_none());
        assert_eq!(decode(&bytes).unwrap(), event);
        let old = decode(V1_EXAMPLE.as_bytes()).unwrap();
        assert!(!old.white.berserk && !old.black.berserk);
        let written =
            br#"{"v":1,"game_id":"t0000000000000001-3","variant":"english","white":{"id":"a","berserk":true},"black":{"id":"b"},"outcome":"white","plies":30}"#;
        let read = decode(written).unwrap();
        assert!(read.white.berserk && !read.black.berserk);
    }

    #[test]
    fn engine_results_convert_once() {
        let win = |winner, reason| GameResult::Win { winner, reason };
        let cases = [
            (
                win(Color::White, WinReason::NoPieces),
                Outcome::WhiteWins,
                EndReason::NoPieces,
            ),
            (
                win(Color::Black, WinReason::Time),
                Outcome::BlackWins,
                EndReason::Time,
            ),
            (
                win(Color::White, WinReason::FirstKing),
                Outcome::WhiteWins,
                EndReason::FirstKing,
            ),
            (
                GameResult::Draw(DrawReason::NoProgress { moves: 25 }),
                Outcome::Draw,
                EndReason::NoProgress,
            ),
            (
                GameResult::Draw(DrawReason::Endgame { moves: 16 }),
                Outcome::Draw,
                EndReason::EndgameRule,
            ),
            (
                GameResult::Draw(DrawReason::Agreement),
                Outcome::Draw,
                EndReason::Agreement,
            ),
        ];
        for (result, outcome, reason) in cases {
            assert_eq!(
                (Outcome::of(&result), EndReason::of(&result)),
                (outcome, reason)
            );
        }
        assert_eq!(Outcome::Aborted.to_wire(), pb::Outcome::Aborted);
        assert_eq!(EndReason::Other.to_wire(), pb::EndReason::Unspecified);
        for r in EndReason::ALL {
            assert_eq!(
                r.to_wire() == pb::EndReason::Unspecified,
                r == EndReason::Other,
                "{r:?}"
            );
        }
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

    #[test]
    fn an_entry_written_before_typed_ids_writes_back_byte_for_byte() {
        // What the writer produced while `game_id` was a string.
        let before = r#"{"v":1,"game_id":"g_1","variant":"international","options":"","rated":true,"white":{"id":"player:1","name":"Ann","guest":false,"computer":false},"black":{"id":"guest:x","name":"Bob","guest":true,"computer":false},"outcome":"white","reason":"resignation","result":"2-0","time_control":{"kind":"fischer","base_ms":300000,"increment_ms":2000},"plies":41,"finished_at_ms":1764500000000,"pdn":"[Event ...] 1. 32-28 ... 2-0","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}"#;
        assert_eq!(
            encode(&decode(before.as_bytes()).unwrap()),
            before.as_bytes()
        );
        // The game id is checked on read.
        let bad = before.replace(r#""game_id":"g_1""#, r#""game_id":"g 1""#);
        assert!(matches!(
            decode(bad.as_bytes()),
            Err(DecodeError::Malformed(_))
        ));
        let read = decode(before.as_bytes()).unwrap();
        assert_eq!(read.white.id.kind(), PlayerKind::Player);
        assert!(read.black.id.is_guest());
    }

    /// Players' ids as Games took them before the id checks (2026-12-01: any text from the client,
    /// an identity provider's subject with white space) are in entries of games created then: they
    /// read as legacy ids and write back byte for byte. What no writer stored does not read.
    #[test]
    fn entries_with_ids_older_than_the_checks_still_read() {
        let day_one = r#"{"v":1,"game_id":"g18d2f0a1b2c3d4e5f6","variant":"english","options":"","rated":false,"white":{"id":"bob","name":"bob","guest":false,"computer":false},"black":{"id":"player:Ann Smith","name":"Ann","guest":false,"computer":false},"outcome":"draw","reason":"agreement","result":"1-1","plies":12,"finished_at_ms":1764600000000,"pdn":""}"#;
        let event = decode(day_one.as_bytes()).unwrap();
        assert_eq!(
            (event.white.id.kind(), event.black.id.kind()),
            (PlayerKind::Legacy, PlayerKind::Legacy)
        );
        assert_eq!(event.white.id, "bob");
        assert_eq!(encode(&event), day_one.as_bytes());
        for bad in [r#""id":"""#, r#""id":"b\u0000ob""#] {
            let payload = day_one.replace(r#""id":"bob""#, bad);
            assert!(
                matches!(decode(payload.as_bytes()), Err(DecodeError::Malformed(_))),
                "{payload}"
            );
        }
    }
}
