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

use crate::error::{ErrorKind, ServiceError};

/// Longest player id, in bytes (`player:` + a subject of up to 128 bytes fits).
pub const MAX_PLAYER_ID_BYTES: usize = 140;

/// Longest game id, in bytes.
pub const MAX_GAME_ID_BYTES: usize = 64;

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
    #[error("game id '{0}' may only contain ASCII letters, digits, '_' and '-'")]
    BadGameId(String),
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
}

/// A well-formed player id (see the module docs).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
        // Every constructor checked the kind.
        self.kind_of().unwrap_or(PlayerKind::Player)
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

/// A well-formed game (or invitation) id: 1 to [`MAX_GAME_ID_BYTES`] ASCII letters, digits, `_`, `-`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GameId(String);

impl GameId {
    pub fn parse(text: &str) -> Result<GameId, IdError> {
        const WHAT: &str = "game id";
        if text.is_empty() {
            return Err(IdError::Empty { what: WHAT });
        }
        if text.len() > MAX_GAME_ID_BYTES {
            return Err(IdError::TooLong {
                what: WHAT,
                excerpt: excerpt(text),
                max: MAX_GAME_ID_BYTES,
            });
        }
        if !text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(IdError::BadGameId(excerpt(text)));
        }
        Ok(GameId(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for GameId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for GameId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GameId({})", self.0)
    }
}

impl AsRef<str> for GameId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for GameId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        GameId::parse(s)
    }
}

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
    fn game_ids() {
        assert!(GameId::parse("g19a2b3c4d5e6f7").is_ok());
        for bad in ["", "g 1", "g/1", "g\0x", &"g".repeat(MAX_GAME_ID_BYTES + 1)] {
            assert!(GameId::parse(bad).is_err(), "{bad:?}");
        }
    }
}
