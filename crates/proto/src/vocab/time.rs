//! A game's time control and its speed class: ONE type and ONE rule for every service (Games stores
//! it, the `games.finished` contract carries it, Ratings classes its games by it, matchmaking names
//! its pools' classes by it).
//!
//! ```
//! use draughts_proto::vocab::time::{Speed, TimeControl};
//!
//! let blitz = TimeControl::Fischer { base_ms: 180_000, increment_ms: 2_000 };
//! assert_eq!(Speed::of(&blitz), Speed::Blitz); // 3 min + 40 x 2 s = 4 min 20 s
//! assert_eq!(Speed::of(&TimeControl::Correspondence { days_per_move: 3 }), Speed::Correspondence);
//! assert_eq!(Speed::from_key("rapid"), Some(Speed::Rapid));
//! ```

use serde::{Deserialize, Serialize};

use crate::pb;

/// A game's time control (milliseconds, days): THE time-control type of the stored records and the
/// Redis contracts. Serialised as `{"kind":"fischer","base_ms","increment_ms"}` or
/// `{"kind":"correspondence","days_per_move"}`.
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

/// Longest base time of a Fischer time control, milliseconds (7 days).
pub const MAX_BASE_MS: u64 = 7 * 24 * 3_600_000;
/// Largest increment, milliseconds (1 hour).
pub const MAX_INCREMENT_MS: u64 = 3_600_000;
/// Days per move of a correspondence time control.
pub const CORRESPONDENCE_DAYS: std::ops::RangeInclusive<u32> = 1..=30;

const DAY_MS: u64 = 24 * 3_600_000;

/// A time control the platform does not accept (the message is the client's).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimeControlError {
    #[error("time_control is required (fischer or correspondence)")]
    Missing,
    #[error("time_control.fischer needs a base or an increment")]
    NoTime,
    #[error("time_control.fischer: base at most 7 days, increment at most 1 hour")]
    TooLong,
    #[error("time_control.correspondence.days_per_move must be from 1 to 30")]
    Days,
}

impl crate::ServiceError for TimeControlError {
    fn kind(&self) -> crate::ErrorKind {
        crate::ErrorKind::InvalidArgument
    }
}

impl TimeControl {
    /// Checks a time control from the wire against the platform's bounds.
    pub fn from_wire(wire: Option<&pb::TimeControl>) -> Result<TimeControl, TimeControlError> {
        use pb::time_control::Kind;
        match wire.and_then(|t| t.kind.as_ref()) {
            Some(Kind::Fischer(f)) => {
                if f.base_ms == 0 && f.increment_ms == 0 {
                    return Err(TimeControlError::NoTime);
                }
                if f.base_ms > MAX_BASE_MS || f.increment_ms > MAX_INCREMENT_MS {
                    return Err(TimeControlError::TooLong);
                }
                Ok(TimeControl::Fischer {
                    base_ms: f.base_ms,
                    increment_ms: f.increment_ms,
                })
            }
            Some(Kind::Correspondence(c)) => {
                if !CORRESPONDENCE_DAYS.contains(&c.days_per_move) {
                    return Err(TimeControlError::Days);
                }
                Ok(TimeControl::Correspondence {
                    days_per_move: c.days_per_move,
                })
            }
            None => Err(TimeControlError::Missing),
        }
    }

    /// The wire form.
    pub fn to_wire(&self) -> pb::TimeControl {
        use pb::time_control::Kind;
        pb::TimeControl {
            kind: Some(match *self {
                TimeControl::Fischer {
                    base_ms,
                    increment_ms,
                } => Kind::Fischer(pb::Fischer {
                    base_ms,
                    increment_ms,
                }),
                TimeControl::Correspondence { days_per_move } => {
                    Kind::Correspondence(pb::Correspondence { days_per_move })
                }
            }),
        }
    }

    /// The short text form operators and pool ids use: `3+2` (base minutes + increment seconds) or
    /// `corr3` (days per move), within the same bounds as [`TimeControl::from_wire`].
    ///
    /// ```
    /// use draughts_proto::vocab::time::TimeControl;
    /// let tc = TimeControl::parse_short("3+2").unwrap();
    /// assert_eq!(tc, TimeControl::Fischer { base_ms: 180_000, increment_ms: 2_000 });
    /// assert_eq!(tc.short_key(), "3+2");
    /// assert_eq!(TimeControl::parse_short("corr3").unwrap().short_key(), "corr3");
    /// assert!(TimeControl::parse_short("0+0").is_err());
    /// ```
    pub fn parse_short(text: &str) -> Result<TimeControl, String> {
        let bad = |why: &str| {
            format!(
                "time control {text:?}: expected MINUTES+SECONDS (3+2) or corrDAYS (corr3){why}"
            )
        };
        if let Some(days) = text.strip_prefix("corr") {
            let days: u32 = days.parse().map_err(|_| bad(""))?;
            if !CORRESPONDENCE_DAYS.contains(&days) {
                return Err(bad(&format!(": {}", TimeControlError::Days)));
            }
            return Ok(TimeControl::Correspondence {
                days_per_move: days,
            });
        }
        let (base, inc) = text.split_once('+').ok_or_else(|| bad(""))?;
        let base: u64 = base.parse().map_err(|_| bad(""))?;
        let inc: u64 = inc.parse().map_err(|_| bad(""))?;
        let (base_ms, increment_ms) = (base.saturating_mul(60_000), inc.saturating_mul(1000));
        if base_ms == 0 && increment_ms == 0 {
            return Err(bad(&format!(": {}", TimeControlError::NoTime)));
        }
        if base_ms > MAX_BASE_MS || increment_ms > MAX_INCREMENT_MS {
            return Err(bad(&format!(": {}", TimeControlError::TooLong)));
        }
        Ok(TimeControl::Fischer {
            base_ms,
            increment_ms,
        })
    }

    /// The short text form ([`TimeControl::parse_short`]): `3+2`, `corr3` (whole minutes and seconds).
    pub fn short_key(&self) -> String {
        match *self {
            TimeControl::Fischer {
                base_ms,
                increment_ms,
            } => format!("{}+{}", base_ms / 60_000, increment_ms / 1000),
            TimeControl::Correspondence { days_per_move } => format!("corr{days_per_move}"),
        }
    }

    /// A correspondence time control (days per move, no running clock).
    pub fn is_correspondence(&self) -> bool {
        matches!(self, TimeControl::Correspondence { .. })
    }

    /// Time each side has at the start (Fischer) or for each move (correspondence), milliseconds.
    pub fn initial_ms(&self) -> u64 {
        match *self {
            TimeControl::Fischer { base_ms, .. } => base_ms,
            TimeControl::Correspondence { days_per_move } => u64::from(days_per_move) * DAY_MS,
        }
    }
}

/// How long a game is, from its time control (ratings per speed class, matchmaking's pools).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Speed {
    /// Estimated duration under 3 minutes per player.
    Bullet,
    /// Under 8 minutes.
    Blitz,
    /// Under 25 minutes.
    Rapid,
    /// 25 minutes or more.
    Classical,
    /// Days per move.
    Correspondence,
}

impl Speed {
    /// Every speed class, fastest first.
    pub const ALL: [Speed; 5] = [
        Speed::Bullet,
        Speed::Blitz,
        Speed::Rapid,
        Speed::Classical,
        Speed::Correspondence,
    ];

    /// The stable key (`bullet`, ...), used in stored rating category keys.
    pub const fn key(self) -> &'static str {
        match self {
            Speed::Bullet => "bullet",
            Speed::Blitz => "blitz",
            Speed::Rapid => "rapid",
            Speed::Classical => "classical",
            Speed::Correspondence => "correspondence",
        }
    }

    /// The class with that key.
    pub fn from_key(key: &str) -> Option<Speed> {
        Speed::ALL.into_iter().find(|s| s.key() == key)
    }

    /// The class of a time control. Fischer games are classed by their estimated duration per player,
    /// `base + 40 x increment` (40 moves, as the big online platforms estimate it).
    pub fn of(time_control: &TimeControl) -> Speed {
        match *time_control {
            TimeControl::Correspondence { .. } => Speed::Correspondence,
            TimeControl::Fischer {
                base_ms,
                increment_ms,
            } => {
                let estimated_ms = base_ms.saturating_add(increment_ms.saturating_mul(40));
                match estimated_ms {
                    ms if ms < 3 * 60_000 => Speed::Bullet,
                    ms if ms < 8 * 60_000 => Speed::Blitz,
                    ms if ms < 25 * 60_000 => Speed::Rapid,
                    _ => Speed::Classical,
                }
            }
        }
    }

    /// The wire form.
    pub const fn to_wire(self) -> pb::SpeedClass {
        match self {
            Speed::Bullet => pb::SpeedClass::Bullet,
            Speed::Blitz => pb::SpeedClass::Blitz,
            Speed::Rapid => pb::SpeedClass::Rapid,
            Speed::Classical => pb::SpeedClass::Classical,
            Speed::Correspondence => pb::SpeedClass::Correspondence,
        }
    }

    /// From the wire: `None` for `SPEED_CLASS_UNSPECIFIED` (no speed class).
    pub const fn from_wire(speed: pb::SpeedClass) -> Option<Speed> {
        match speed {
            pb::SpeedClass::Unspecified => None,
            pb::SpeedClass::Bullet => Some(Speed::Bullet),
            pb::SpeedClass::Blitz => Some(Speed::Blitz),
            pb::SpeedClass::Rapid => Some(Speed::Rapid),
            pb::SpeedClass::Classical => Some(Speed::Classical),
            pb::SpeedClass::Correspondence => Some(Speed::Correspondence),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check(/* minutes, increment seconds, expected class */) {
        let cases = [
            (1, 0, Speed::Bullet),
            (2, 1, Speed::Bullet),
            (3, 2, Speed::Blitz),
            (5, 3, Speed::Blitz),
            (10, 0, Speed::Rapid),
            (15, 10, Speed::Rapid),
            (30, 0, Speed::Classical),
        ];
        for (minutes, seconds, expected) in cases {
            let tc = TimeControl::Fischer {
                base_ms: minutes * 60_000,
                increment_ms: seconds * 1_000,
            };
            assert_eq!(Speed::of(&tc), expected, "{minutes}+{seconds}");
        }
        let huge = TimeControl::Fischer {
            base_ms: u64::MAX,
            increment_ms: u64::MAX,
        };
        assert_eq!(Speed::of(&huge), Speed::Classical);
    }

    #[test]
    fn bounds(/* wire time control, expected */) {
        let fischer = |base_ms, increment_ms| pb::TimeControl {
            kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                base_ms,
                increment_ms,
            })),
        };
        let corr = |days_per_move| pb::TimeControl {
            kind: Some(pb::time_control::Kind::Correspondence(pb::Correspondence {
                days_per_move,
            })),
        };
        let cases = [
            (Some(fischer(60_000, 0)), Ok(())),
            (Some(fischer(0, 2_000)), Ok(())),
            (Some(fischer(0, 0)), Err(TimeControlError::NoTime)),
            (Some(fischer(MAX_BASE_MS, MAX_INCREMENT_MS)), Ok(())),
            (
                Some(fischer(MAX_BASE_MS + 1, 0)),
                Err(TimeControlError::TooLong),
            ),
            (
                Some(fischer(1, MAX_INCREMENT_MS + 1)),
                Err(TimeControlError::TooLong),
            ),
            (Some(corr(1)), Ok(())),
            (Some(corr(30)), Ok(())),
            (Some(corr(0)), Err(TimeControlError::Days)),
            (Some(corr(31)), Err(TimeControlError::Days)),
            (
                Some(pb::TimeControl { kind: None }),
                Err(TimeControlError::Missing),
            ),
            (None, Err(TimeControlError::Missing)),
        ];
        for (wire, expected) in cases {
            let got = TimeControl::from_wire(wire.as_ref());
            assert_eq!(
                got.as_ref().map(|_| ()),
                expected.as_ref().map(|_| ()),
                "{wire:?}"
            );
            if let Ok(tc) = got {
                assert_eq!(Some(tc.to_wire()), wire);
            }
        }
        assert_eq!(
            TimeControl::Correspondence { days_per_move: 2 }.initial_ms(),
            2 * DAY_MS
        );
    }

    #[test]
    fn keys_and_wire_round_trip() {
        for speed in Speed::ALL {
            assert_eq!(Speed::from_key(speed.key()), Some(speed));
            assert_eq!(Speed::from_wire(speed.to_wire()), Some(speed));
        }
        assert_eq!(Speed::from_wire(pb::SpeedClass::Unspecified), None);
        assert_eq!(Speed::from_key("lightning"), None);
    }

    #[test]
    fn serialises_as_the_contracts_write_it() {
        let tc = TimeControl::Fischer {
            base_ms: 300_000,
            increment_ms: 2_000,
        };
        let json = serde_json::to_string(&tc).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"fischer","base_ms":300000,"increment_ms":2000}"#
        );
        let corr: TimeControl =
            serde_json::from_str(r#"{"kind":"correspondence","days_per_move":3}"#).unwrap();
        assert_eq!(corr, TimeControl::Correspondence { days_per_move: 3 });
        let no_increment: TimeControl =
            serde_json::from_str(r#"{"kind":"fischer","base_ms":60000}"#).unwrap();
        assert_eq!(
            no_increment,
            TimeControl::Fischer {
                base_ms: 60_000,
                increment_ms: 0
            }
        );
    }
}
