//! Typed identifiers, validated once where they enter the platform (the API edge, a stored record, a
//! Redis message) and passed around as types from then on.
//!
//! A [`PlayerId`] is one of the identities the server issues or knows:
//! - `guest:<random>`: a guest from `Auth.CreateGuest`;
//! - `user:<random>`: an account of this server (`Auth.SignUp`); the id never changes;
//! - `player:<subject>`: a player of the identity provider (the token's `sub`);
//! - `key:<owner>`: a third party's API key;
//! - `ai:<level>`: the server's computer player at level 1 to 8.
//!
//! Every id is 1 to [`MAX_PLAYER_ID_BYTES`] bytes of printable characters (no control characters, no
//! white space), so it can be stored, logged and written into PDN as it is. That an id is well formed does
//! not mean it exists: whether a guest or player is known is the identity registry's question (see
//! `draughts_auth`), answered when a game is created.
//!
//! Stored records older than these checks may hold ids of no known kind: for about a day (until
//! 2026-12-01) Games took a game's player ids as the client wrote them, and the identity provider's
//! subjects were not checked for white space. The readers of those records (Games' game record and
//! invitation, the `games.finished` entries built from them) read such an id with
//! [`PlayerId::parse_stored`]: a [`PlayerKind::Legacy`] id, kept as it is so the record writes back
//! unchanged. Every other reader, and every writer of a new id, uses [`PlayerId::parse`].
//!
//! ```
//! use draughts_proto::ids::{GameId, PlayerId, PlayerKind};
//!
//! let ai = PlayerId::parse("ai:8").unwrap();
//! assert_eq!(ai.kind(), PlayerKind::Computer { level: 8 });
//! assert!(PlayerId::parse("ai:9").is_err());
//! assert!(PlayerId::parse("guest:ab\0cd").is_err());
//! assert!(PlayerId::parse("bob").is_err(), "no known kind");
//! assert!(GameId::parse("g19abc-x_1").is_ok());
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{ErrorKind, ServiceError};

/// Longest player id, in bytes (`player:` + a subject of up to 128 bytes fits).
pub const MAX_PLAYER_ID_BYTES: usize = 140;

/// Longest game id, in bytes.
pub const MAX_GAME_ID_BYTES: usize = 64;

/// Longest ticket id, in bytes.
pub const MAX_TICKET_ID_BYTES: usize = 64;

/// The computer's levels (as `draughts_ai` defines them).
pub const COMPUTER_LEVELS: std::ops::RangeInclusive<u8> = 1..=8;

/// An id that is not well formed. The message quotes (a printable excerpt of) the rejected text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{what} is empty")]
    Empty { what: &'static str },
    #[error("{what} '{excerpt}' is longer than {max} bytes")]
    TooLong {
        what: &'static str,
        excerpt: String,
        max: usize,
    },
    #[error("{what} '{excerpt}' contains a control or white-space character")]
    NotPrintable { what: &'static str, excerpt: String },
    #[error(
        "player id '{0}' is not an identity this server knows: expected guest:<id>, user:<id>, player:<subject>, key:<owner> or ai:<level 1-8>"
    )]
    UnknownKind(String),
    #[error("{what} '{excerpt}' may only contain ASCII letters, digits, '_' and '-'")]
    BadCharacters { what: &'static str, excerpt: String },
    #[error("tournament id '{0}' is not `t` and 16 lowercase hex digits")]
    BadTournamentId(String),
}

impl ServiceError for IdError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidArgument
    }
}

/// At most 40 characters of `text`, control characters replaced, for error messages.
fn excerpt(text: &str) -> String {
    text.chars()
        .take(40)
        .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
        .collect()
}

/// What kind of identity a [`PlayerId`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PlayerKind {
    Guest,
    /// An account of this server.
    Account,
    Player,
    ApiKey,
    Computer {
        level: u8,
    },
    /// An id [`PlayerId::parse`] refuses (no known kind, or white space in it), read from a record
    /// written before ids were checked ([`PlayerId::parse_stored`]); never from a request.
    Legacy,
}

/// A well-formed player id (see the module docs). Serialized as its text; deserializing checks it
/// ([`PlayerId::parse`]), so a stored record or message with a malformed id does not read.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PlayerId(String);

impl PlayerId {
    /// Checks `text` (taken as it is: no trimming).
    pub fn parse(text: &str) -> Result<PlayerId, IdError> {
        const WHAT: &str = "player id";
        if text.is_empty() {
            return Err(IdError::Empty { what: WHAT });
        }
        if text.len() > MAX_PLAYER_ID_BYTES {
            return Err(IdError::TooLong {
                what: WHAT,
                excerpt: excerpt(text),
                max: MAX_PLAYER_ID_BYTES,
            });
        }
        if text.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(IdError::NotPrintable {
                what: WHAT,
                excerpt: excerpt(text),
            });
        }
        let id = PlayerId(text.to_owned());
        match id.kind_of() {
            Some(_) => Ok(id),
            None => Err(IdError::UnknownKind(excerpt(text))),
        }
    }

    /// Reads an id from a stored record that may be older than the id checks (see the module docs):
    /// a well-formed id as [`PlayerId::parse`] reads it, else a [`PlayerKind::Legacy`] id of 1 to
    /// [`MAX_PLAYER_ID_BYTES`] bytes without control characters (white space allowed: such ids were
    /// written). Only for reading records, never for an id a caller sends.
    pub fn parse_stored(text: &str) -> Result<PlayerId, IdError> {
        match PlayerId::parse(text) {
            Err(IdError::UnknownKind(_)) | Err(IdError::NotPrintable { .. })
                if !text.chars().any(char::is_control) =>
            {
                Ok(PlayerId(text.to_owned()))
            }
            other => other,
        }
    }

    /// Serde's `deserialize_with` for a stored record's player id ([`PlayerId::parse_stored`]); it
    /// writes as its text like any id.
    pub fn deserialize_stored<'de, D>(deserializer: D) -> Result<PlayerId, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        let text = String::deserialize(deserializer)?;
        PlayerId::parse_stored(&text).map_err(serde::de::Error::custom)
    }

    /// The computer player at `level` (1 to 8), or `None` for another level.
    pub fn computer(level: u8) -> Option<PlayerId> {
        COMPUTER_LEVELS
            .contains(&level)
            .then(|| PlayerId(format!("ai:{level}")))
    }

    fn kind_of(&self) -> Option<PlayerKind> {
        let (prefix, rest) = self.0.split_once(':')?;
        if rest.is_empty() {
            return None;
        }
        match prefix {
            "guest" => Some(PlayerKind::Guest),
            "user" => Some(PlayerKind::Account),
            "player" => Some(PlayerKind::Player),
            "key" => Some(PlayerKind::ApiKey),
            "ai" => {
                let level: u8 = rest.parse().ok()?;
                (COMPUTER_LEVELS.contains(&level) && rest == level.to_string())
                    .then_some(PlayerKind::Computer { level })
            }
            _ => None,
        }
    }

    pub fn kind(&self) -> PlayerKind {
        // Every constructor but `parse_stored` checked the kind and the characters.
        if self.0.chars().any(char::is_whitespace) {
            return PlayerKind::Legacy;
        }
        self.kind_of().unwrap_or(PlayerKind::Legacy)
    }

    /// The computer's level, for `ai:<level>`.
    pub fn computer_level(&self) -> Option<u8> {
        match self.kind() {
            PlayerKind::Computer { level } => Some(level),
            _ => None,
        }
    }

    pub fn is_computer(&self) -> bool {
        self.computer_level().is_some()
    }

    pub fn is_guest(&self) -> bool {
        self.kind() == PlayerKind::Guest
    }

    /// Whether this is an account of this server (`user:<id>`).
    pub fn is_account(&self) -> bool {
        self.kind() == PlayerKind::Account
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for PlayerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for PlayerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PlayerId({})", self.0)
    }
}

impl AsRef<str> for PlayerId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for PlayerId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PlayerId::parse(s)
    }
}

/// Ids made of ASCII letters, digits, `_` and `-` (1 to `$max` bytes): one definition for each such
/// id's type, its check, text forms and serde (serialized as its text; deserializing checks it).
macro_rules! token_id {
    ($(#[$doc:meta])* $id:ident, $what:literal, $max:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $id(String);

        impl $id {
            pub fn parse(text: &str) -> Result<$id, IdError> {
                const WHAT: &str = $what;
                if text.is_empty() {
                    return Err(IdError::Empty { what: WHAT });
                }
                if text.len() > $max {
                    return Err(IdError::TooLong {
                        what: WHAT,
                        excerpt: excerpt(text),
                        max: $max,
                    });
                }
                if !text
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                {
                    return Err(IdError::BadCharacters {
                        what: WHAT,
                        excerpt: excerpt(text),
                    });
                }
                Ok($id(text.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $id {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $id {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($id), "({})"), self.0)
            }
        }

        impl AsRef<str> for $id {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::str::FromStr for $id {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $id::parse(s)
            }
        }
    };
}

token_id!(
    /// A well-formed game (or invitation) id: 1 to [`MAX_GAME_ID_BYTES`] ASCII letters, digits, `_`,
    /// `-`.
    GameId,
    "game id",
    MAX_GAME_ID_BYTES
);

token_id!(
    /// A quick-pairing seek's ticket id (matchmaking's `t` and 24 hex digits; any 1 to
    /// [`MAX_TICKET_ID_BYTES`] ASCII letters, digits, `_`, `-` read).
    TicketId,
    "ticket id",
    MAX_TICKET_ID_BYTES
);

/// A tournament's id: `t` and 16 lowercase hex digits (as the tournaments service makes them).
/// Serialized as its text; deserializing checks it.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TournamentId(String);

impl TournamentId {
    pub fn parse(text: &str) -> Result<TournamentId, IdError> {
        let well_formed = text.len() == 17
            && text.starts_with('t')
            && text[1..]
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if well_formed {
            Ok(TournamentId(text.to_owned()))
        } else if text.is_empty() {
            Err(IdError::Empty {
                what: "tournament id",
            })
        } else {
            Err(IdError::BadTournamentId(excerpt(text)))
        }
    }

    /// The id made of `n`: `t` and its 16 lowercase hex digits (the service picks `n` at random).
    pub fn from_number(n: u64) -> TournamentId {
        TournamentId(format!("t{n:016x}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for TournamentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TournamentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TournamentId({})", self.0)
    }
}

impl std::str::FromStr for TournamentId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TournamentId::parse(s)
    }
}

/// The conversions serde uses (and anyone holding a `String` that should be an id).
macro_rules! string_conversions {
    ($id:ident) => {
        impl TryFrom<String> for $id {
            type Error = IdError;
            fn try_from(text: String) -> Result<Self, Self::Error> {
                $id::parse(&text)
            }
        }

        impl From<$id> for String {
            fn from(id: $id) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $id {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<String> for $id {
            fn eq(&self, other: &String) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<&str> for $id {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<$id> for str {
            fn eq(&self, other: &$id) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$id> for &str {
            fn eq(&self, other: &$id) -> bool {
                **self == other.0
            }
        }

        impl PartialEq<$id> for String {
            fn eq(&self, other: &$id) -> bool {
                *self == other.0
            }
        }

        /// An id reads as its text wherever text is asked for (`&id` as a `&str`).
        impl std::ops::Deref for $id {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $id {
            fn borrow(&self) -> &str {
                &self.0
            }
        }
    };
}

string_conversions!(PlayerId);
string_conversions!(GameId);
string_conversions!(TicketId);
string_conversions!(TournamentId);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn player_ids() {
        let check = |text: &str, expected: Option<PlayerKind>| {
            assert_eq!(
                PlayerId::parse(text).ok().map(|id| id.kind()),
                expected,
                "{text:?}"
            );
        };
        check("guest:0123abcd", Some(PlayerKind::Guest));
        check("player:auth0|42", Some(PlayerKind::Player));
        check("user:0123456789abcdef", Some(PlayerKind::Account));
        check("user:", None);
        check("key:tournament-bot", Some(PlayerKind::ApiKey));
        check("ai:1", Some(PlayerKind::Computer { level: 1 }));
        check("ai:8", Some(PlayerKind::Computer { level: 8 }));
        for bad in [
            "",
            "ai:0",
            "ai:9",
            "ai:08",
            "ai:",
            "guest:",
            "bob",
            "x:y",
            "guest:a\0b",
            "guest:a b",
            "guest:a\nb",
            ":x",
        ] {
            check(bad, None);
        }
        let long = format!("player:{}", "x".repeat(MAX_PLAYER_ID_BYTES));
        assert!(matches!(
            PlayerId::parse(&long),
            Err(IdError::TooLong { .. })
        ));
        let nul = PlayerId::parse("guest:a\0b").unwrap_err();
        assert!(!nul.to_string().contains('\0'), "{nul}");
        assert_eq!(PlayerId::computer(3).unwrap().as_str(), "ai:3");
        assert!(PlayerId::computer(0).is_none());
    }

    #[test]
    fn ids_read_and_write_as_their_text_and_are_checked_on_read() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Record {
            game_id: GameId,
            player: PlayerId,
        }
        let text = r#"{"game_id":"g19a2b3c","player":"guest:0123abcd"}"#;
        let record: Record = serde_json::from_str(text).unwrap();
        assert_eq!(record.game_id.as_str(), "g19a2b3c");
        assert_eq!(record.player, "guest:0123abcd");
        assert_eq!(serde_json::to_string(&record).unwrap(), text);
        for bad in [
            r#"{"game_id":"g 1","player":"guest:0123abcd"}"#,
            r#"{"game_id":"g1","player":"bob"}"#,
            r#"{"game_id":"g1","player":"guest:a\u0000b"}"#,
        ] {
            let error = serde_json::from_str::<Record>(bad).unwrap_err().to_string();
            assert!(error.contains("id"), "{bad}: {error}");
        }
    }

    /// Ids that records written before the checks may hold read as legacy ids; what no writer could
    /// store (empty, too long, control characters) is still refused.
    #[test]
    fn stored_ids_of_before_the_checks_read_as_legacy() {
        for old in ["a", "bob", "ai:10", "player:Ann Smith", "x y", "guest:"] {
            let id = PlayerId::parse_stored(old).unwrap();
            assert_eq!(
                (id.as_str(), id.kind()),
                (old, PlayerKind::Legacy),
                "{old:?}"
            );
            assert!(!id.is_computer() && !id.is_guest() && !id.is_account());
            assert!(PlayerId::parse(old).is_err(), "{old:?}");
        }
        let today = PlayerId::parse_stored("ai:8").unwrap();
        assert_eq!(today.kind(), PlayerKind::Computer { level: 8 });
        assert_eq!(today, PlayerId::parse("ai:8").unwrap());
        let long = format!("x{}", "y".repeat(MAX_PLAYER_ID_BYTES));
        for bad in ["", "a\0b", "guest:a\nb", &long] {
            assert!(PlayerId::parse_stored(bad).is_err(), "{bad:?}");
        }

        #[derive(Debug, Serialize, Deserialize)]
        struct Stored {
            #[serde(deserialize_with = "PlayerId::deserialize_stored")]
            id: PlayerId,
        }
        for text in [r#"{"id":"bob"}"#, r#"{"id":"guest:0123abcd"}"#] {
            let stored: Stored = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&stored).unwrap(), text);
        }
        assert!(serde_json::from_str::<Stored>(r#"{"id":""}"#).is_err());
    }

    #[test]
    fn game_ids() {
        assert!(GameId::parse("g19a2b3c4d5e6f7").is_ok());
        for bad in ["", "g 1", "g/1", "g\0x", &"g".repeat(MAX_GAME_ID_BYTES + 1)] {
            assert!(GameId::parse(bad).is_err(), "{bad:?}");
        }
        // The message clients have always read.
        assert_eq!(
            GameId::parse("g/1").unwrap_err().to_string(),
            "game id 'g/1' may only contain ASCII letters, digits, '_' and '-'"
        );
    }

    #[test]
    fn tournament_ids() {
        let id = TournamentId::parse("t0123456789abcdef").unwrap();
        assert_eq!(TournamentId::from_number(0x0123456789abcdef), id);
        assert_eq!(
            serde_json::to_string(&id).unwrap(),
            r#""t0123456789abcdef""#
        );
        for bad in [
            "",
            "t0123456789ABCDEF",
            "t0123",
            "x0123456789abcdef",
            "t0123456789abcdef0",
        ] {
            assert!(TournamentId::parse(bad).is_err(), "{bad:?}");
            assert!(serde_json::from_str::<TournamentId>(&format!("{bad:?}")).is_err());
        }
    }

    #[test]
    fn ticket_ids() {
        let id = TicketId::parse("t0123456789abcdef01234567").unwrap();
        assert_eq!(format!("{id:?}"), "TicketId(t0123456789abcdef01234567)");
        assert_eq!(
            serde_json::to_string(&id).unwrap(),
            r#""t0123456789abcdef01234567""#
        );
        for bad in ["", "t 1", "t:1", &"t".repeat(MAX_TICKET_ID_BYTES + 1)] {
            assert!(TicketId::parse(bad).is_err(), "{bad:?}");
            assert!(serde_json::from_str::<TicketId>(&format!("{bad:?}")).is_err());
        }
        assert!(
            TicketId::parse("t:1")
                .unwrap_err()
                .to_string()
                .starts_with("ticket id")
        );
    }
}
