//! A tournament's terms: checked once, at creation, from the wire (every bad field an INVALID_ARGUMENT
//! naming it), then stored as they are here. No I/O.

use draughts_engine::{RuleOptions, RuleSet, Variant};
use draughts_proto::pb;
use draughts_proto::vocab::time::TimeControl;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{TournamentsError, TournamentsResult};

/// Most entrants of one event (and the default of `max_players`).
pub const MAX_PLAYERS: u32 = 10_000;
/// Most Swiss rounds.
pub const MAX_ROUNDS: u32 = 50;
/// The longest arena, seconds (a day).
pub const MAX_ARENA_SECS: u32 = 86_400;
/// How far ahead a start may be, milliseconds (30 days).
pub const MAX_START_AHEAD_MS: u64 = 30 * 86_400_000;
/// Longest name, characters.
pub const MAX_NAME_CHARS: usize = 80;
/// Longest password, characters.
pub const MAX_PASSWORD_CHARS: usize = 64;
/// Round interval bounds, seconds (a minute to 7 days).
pub const MIN_INTERVAL_SECS: u32 = 60;
pub const MAX_INTERVAL_SECS: u32 = 7 * 86_400;

/// When Swiss rounds start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum RoundStart {
    /// When the last game of the previous round ends.
    AfterPrevious,
    /// `secs` after the previous round started (or when its last game ends, if later).
    Interval { secs: u32 },
}

/// The kind of event with its own terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Kind {
    Arena {
        duration_secs: u32,
        /// Players may go berserk in the event's games (Games.Berserk). Records written before it
        /// existed read as allowed (lichess's default).
        #[serde(default = "allowed")]
        berserk: bool,
    },
    Swiss {
        rounds: u32,
        round_start: RoundStart,
    },
}

/// Who may enter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conditions {
    /// 0: none.
    pub min_rating: u32,
    /// 0: none.
    pub max_rating: u32,
    pub accounts_only: bool,
    pub max_players: u32,
    /// SHA-256 of the password (hex), when private. The password itself is never stored.
    #[serde(default)]
    pub password_sha256: Option<String>,
}

/// The validated terms.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terms {
    pub name: String,
    /// The variant's stable key.
    pub variant: String,
    /// Canonical rule options (`RuleOptions`'s text), `""` for none.
    pub options: String,
    /// Always Fischer (correspondence is refused at creation).
    pub time_control: TimeControl,
    pub rated: bool,
    pub kind: Kind,
    pub conditions: Conditions,
}

/// What the server allows beyond the fixed bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The shortest arena, seconds.
    pub min_arena_secs: u32,
}

fn allowed() -> bool {
    true
}

fn invalid(text: impl Into<String>) -> TournamentsError {
    TournamentsError::Invalid(text.into())
}

/// SHA-256 (hex) of a password, as stored and compared.
pub fn password_hash(password: &str) -> String {
    hex::encode(Sha256::digest(password.as_bytes()))
}

/// The most Swiss rounds `players` entrants can play without two of them meeting twice: `n - 1` for an
/// even field, `n` for an odd one (each round one of them has the bye).
pub fn rounds_allowed(players: u32) -> u32 {
    if players.is_multiple_of(2) {
        players.saturating_sub(1)
    } else {
        players
    }
}

/// Checks the wire terms: the stored terms and the start time (Unix epoch ms).
pub fn validate(
    wire: Option<&pb::TournamentTerms>,
    now_ms: u64,
    limits: Limits,
) -> TournamentsResult<(Terms, u64)> {
    let wire = wire.ok_or_else(|| invalid("terms are required"))?;
    let name = wire.name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(invalid(format!(
            "terms.name must be 1 to {MAX_NAME_CHARS} characters"
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(invalid("terms.name must not contain control characters"));
    }
    let rules = draughts_proto::convert::rule_set(wire.rules.as_ref())
        .map_err(|e| invalid(format!("terms.rules: {e}")))?;
    let (base_ms, increment_ms) = match wire.time_control.as_ref().and_then(|t| t.kind.as_ref()) {
        Some(pb::time_control::Kind::Fischer(f)) => (f.base_ms, f.increment_ms),
        Some(pb::time_control::Kind::Correspondence(_)) => {
            return Err(invalid(
                "terms.time_control: correspondence is not played in tournaments; give a Fischer clock",
            ));
        }
        None => return Err(invalid("terms.time_control is required")),
    };
    if !(15_000..=10_800_000).contains(&base_ms) {
        return Err(invalid(
            "terms.time_control.fischer.base_ms must be from 15000 (15 s) to 10800000 (3 h)",
        ));
    }
    if increment_ms > 180_000 {
        return Err(invalid(
            "terms.time_control.fischer.increment_ms must be from 0 to 180000 (3 min)",
        ));
    }
    let kind = match pb::TournamentKind::try_from(wire.kind) {
        Ok(pb::TournamentKind::Arena) => {
            if wire.swiss_rounds != 0 {
                return Err(invalid("terms.swiss_rounds must be 0 in an arena"));
            }
            if wire.round_start != 0 || wire.round_interval_seconds != 0 {
                return Err(invalid(
                    "terms.round_start and terms.round_interval_seconds are for Swiss events only",
                ));
            }
            let secs = wire.arena_duration_seconds;
            if !(limits.min_arena_secs..=MAX_ARENA_SECS).contains(&secs) {
                return Err(invalid(format!(
                    "terms.arena_duration_seconds must be from {} to {MAX_ARENA_SECS}, got {secs}",
                    limits.min_arena_secs
                )));
            }
            Kind::Arena {
                duration_secs: secs,
                berserk: wire.berserk_allowed.unwrap_or(true),
            }
        }
        Ok(pb::TournamentKind::Swiss) => {
            if wire.berserk_allowed == Some(true) {
                return Err(invalid("terms.berserk_allowed: berserk is for arenas only"));
            }
            if wire.arena_duration_seconds != 0 {
                return Err(invalid(
                    "terms.arena_duration_seconds must be 0 in a Swiss event",
                ));
            }
            let rounds = wire.swiss_rounds;
            if !(1..=MAX_ROUNDS).contains(&rounds) {
                return Err(invalid(format!(
                    "terms.swiss_rounds must be from 1 to {MAX_ROUNDS}, got {rounds}"
                )));
            }
            let round_start = match pb::SwissRoundStart::try_from(wire.round_start) {
                Ok(pb::SwissRoundStart::Unspecified | pb::SwissRoundStart::AfterPrevious) => {
                    if wire.round_interval_seconds != 0 {
                        return Err(invalid(
                            "terms.round_interval_seconds is only for SWISS_ROUND_START_FIXED_INTERVAL",
                        ));
                    }
                    RoundStart::AfterPrevious
                }
                Ok(pb::SwissRoundStart::FixedInterval) => {
                    let secs = wire.round_interval_seconds;
                    if !(MIN_INTERVAL_SECS..=MAX_INTERVAL_SECS).contains(&secs) {
                        return Err(invalid(format!(
                            "terms.round_interval_seconds must be from {MIN_INTERVAL_SECS} to {MAX_INTERVAL_SECS}, got {secs}"
                        )));
                    }
                    RoundStart::Interval { secs }
                }
                Err(_) => {
                    return Err(invalid(format!(
                        "terms.round_start: unknown value {}",
                        wire.round_start
                    )));
                }
            };
            Kind::Swiss {
                rounds,
                round_start,
            }
        }
        _ => {
            return Err(invalid(
                "terms.kind must be TOURNAMENT_KIND_ARENA or TOURNAMENT_KIND_SWISS",
            ));
        }
    };
    let starts_at_ms = match wire.start {
        Some(pb::tournament_terms::Start::StartsAtMs(at)) => at.max(now_ms),
        Some(pb::tournament_terms::Start::StartInSeconds(secs)) => {
            now_ms.saturating_add(u64::from(secs) * 1000)
        }
        None => now_ms,
    };
    if starts_at_ms > now_ms.saturating_add(MAX_START_AHEAD_MS) {
        return Err(invalid(
            "terms.starts_at_ms / terms.start_in_seconds: at most 30 days ahead",
        ));
    }
    let c = wire.conditions.clone().unwrap_or_default();
    if c.min_rating > 4000 || c.max_rating > 4000 {
        return Err(invalid(
            "terms.conditions.min_rating and max_rating must be from 0 to 4000",
        ));
    }
    if c.max_rating != 0 && c.max_rating < c.min_rating {
        return Err(invalid(
            "terms.conditions.max_rating must not be below min_rating",
        ));
    }
    let max_players = match c.max_players {
        0 => MAX_PLAYERS,
        n @ 2..=MAX_PLAYERS => n,
        n => {
            return Err(invalid(format!(
                "terms.conditions.max_players must be from 2 to {MAX_PLAYERS} (0 = {MAX_PLAYERS}), got {n}"
            )));
        }
    };
    if let Kind::Swiss { rounds, .. } = kind
        && rounds > rounds_allowed(max_players)
    {
        return Err(invalid(format!(
            "terms.swiss_rounds: {rounds} rounds need more players than terms.conditions.max_players ({max_players}) allows"
        )));
    }
    let password_sha256 = match c.password.chars().count() {
        0 => None,
        1..=MAX_PASSWORD_CHARS => Some(password_hash(&c.password)),
        _ => {
            return Err(invalid(format!(
                "terms.conditions.password must be at most {MAX_PASSWORD_CHARS} characters"
            )));
        }
    };
    Ok((
        Terms {
            name: name.to_owned(),
            variant: rules.variant().key().to_owned(),
            options: rules.options().to_string(),
            time_control: TimeControl::Fischer {
                base_ms,
                increment_ms,
            },
            rated: wire.rated,
            kind,
            conditions: Conditions {
                min_rating: c.min_rating,
                max_rating: c.max_rating,
                accounts_only: c.accounts_only,
                max_players,
                password_sha256,
            },
        },
        starts_at_ms,
    ))
}

impl Terms {
    /// The rule set (stored validated; a record that no longer parses is corrupt).
    pub fn rule_set(&self) -> TournamentsResult<RuleSet> {
        let variant = Variant::from_key(&self.variant)
            .map_err(|e| TournamentsError::Corrupt(e.to_string()))?;
        let options = RuleOptions::parse(&self.options)
            .map_err(|e| TournamentsError::Corrupt(e.to_string()))?;
        RuleSet::with_options(variant, options)
            .map_err(|e| TournamentsError::Corrupt(e.to_string()))
    }

    pub fn is_arena(&self) -> bool {
        matches!(self.kind, Kind::Arena { .. })
    }

    /// Players may go berserk in the event's games: arenas that did not turn it off.
    pub fn berserk_allowed(&self) -> bool {
        matches!(self.kind, Kind::Arena { berserk: true, .. })
    }

    /// The wire form (no password), starting at `starts_at_ms`.
    pub fn to_wire(&self, starts_at_ms: u64) -> pb::TournamentTerms {
        let rules = self
            .rule_set()
            .ok()
            .map(draughts_proto::convert::rules_to_wire);
        let (kind, arena_duration_seconds, swiss_rounds, round_start, round_interval_seconds) =
            match self.kind {
                Kind::Arena { duration_secs, .. } => {
                    (pb::TournamentKind::Arena, duration_secs, 0, 0, 0)
                }
                Kind::Swiss {
                    rounds,
                    round_start: RoundStart::AfterPrevious,
                } => (
                    pb::TournamentKind::Swiss,
                    0,
                    rounds,
                    pb::SwissRoundStart::AfterPrevious as i32,
                    0,
                ),
                Kind::Swiss {
                    rounds,
                    round_start: RoundStart::Interval { secs },
                } => (
                    pb::TournamentKind::Swiss,
                    0,
                    rounds,
                    pb::SwissRoundStart::FixedInterval as i32,
                    secs,
                ),
            };
        pb::TournamentTerms {
            name: self.name.clone(),
            kind: kind as i32,
            rules,
            time_control: Some(self.time_control.to_wire()),
            rated: self.rated,
            start: Some(pb::tournament_terms::Start::StartsAtMs(starts_at_ms)),
            arena_duration_seconds,
            swiss_rounds,
            round_start,
            round_interval_seconds,
            conditions: Some(pb::EntryConditions {
                min_rating: self.conditions.min_rating,
                max_rating: self.conditions.max_rating,
                accounts_only: self.conditions.accounts_only,
                max_players: self.conditions.max_players,
                password: String::new(),
            }),
            berserk_allowed: Some(self.berserk_allowed()),
        }
    }
}

/// Whether `given` is the password of `conditions`, compared in constant time (on the hashes).
pub fn password_matches(conditions: &Conditions, given: &str) -> bool {
    match &conditions.password_sha256 {
        None => true,
        Some(expected) => {
            draughts_auth::constant_time_eq(password_hash(given).as_bytes(), expected.as_bytes())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arena() -> pb::TournamentTerms {
        pb::TournamentTerms {
            name: "Blitz arena".into(),
            kind: pb::TournamentKind::Arena as i32,
            rules: Some(pb::RuleSet {
                variant: pb::Variant::International as i32,
                options: None,
            }),
            time_control: Some(pb::TimeControl {
                kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                    base_ms: 180_000,
                    increment_ms: 2_000,
                })),
            }),
            arena_duration_seconds: 3600,
            ..Default::default()
        }
    }

    fn swiss() -> pb::TournamentTerms {
        pb::TournamentTerms {
            kind: pb::TournamentKind::Swiss as i32,
            arena_duration_seconds: 0,
            swiss_rounds: 7,
            ..arena()
        }
    }

    const LIMITS: Limits = Limits { min_arena_secs: 60 };
    const NOW: u64 = 1_000_000_000_000;

    /// `Ok(())` when the terms pass, else the field the error must name.
    fn check(terms: pb::TournamentTerms, expected: Result<(), &str>) {
        match (validate(Some(&terms), NOW, LIMITS), expected) {
            (Ok(_), Ok(())) => {}
            (Err(TournamentsError::Invalid(message)), Err(field)) => {
                assert!(message.contains(field), "{message:?} should name {field}")
            }
            (got, expected) => panic!("{got:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn terms_are_checked_field_by_field() {
        check(arena(), Ok(()));
        check(swiss(), Ok(()));
        let with = |f: &dyn Fn(&mut pb::TournamentTerms), base: pb::TournamentTerms| {
            let mut t = base;
            f(&mut t);
            t
        };
        check(
            with(&|t| t.arena_duration_seconds = 0, arena()),
            Err("arena_duration_seconds"),
        );
        check(
            with(&|t| t.arena_duration_seconds = 59, arena()),
            Err("arena_duration_seconds"),
        );
        check(
            with(&|t| t.arena_duration_seconds = 365 * 86_400, arena()),
            Err("arena_duration_seconds"),
        );
        check(with(&|t| t.swiss_rounds = 3, arena()), Err("swiss_rounds"));
        check(with(&|t| t.swiss_rounds = 0, swiss()), Err("swiss_rounds"));
        check(with(&|t| t.swiss_rounds = 51, swiss()), Err("swiss_rounds"));
        check(
            with(&|t| t.arena_duration_seconds = 60, swiss()),
            Err("arena_duration_seconds"),
        );
        check(
            with(
                &|t| {
                    t.conditions = Some(pb::EntryConditions {
                        max_players: 4,
                        ..Default::default()
                    })
                },
                swiss(),
            ),
            Err("swiss_rounds"),
        );
        check(
            with(
                &|t| t.round_start = pb::SwissRoundStart::FixedInterval as i32,
                swiss(),
            ),
            Err("round_interval_seconds"),
        );
        check(
            with(
                &|t| {
                    t.round_start = pb::SwissRoundStart::FixedInterval as i32;
                    t.round_interval_seconds = 600;
                },
                swiss(),
            ),
            Ok(()),
        );
        check(with(&|t| t.round_start = 9, swiss()), Err("round_start"));
        check(with(&|t| t.kind = 0, arena()), Err("kind"));
        check(with(&|t| t.name = String::new(), arena()), Err("name"));
        check(with(&|t| t.name = "x".repeat(81), arena()), Err("name"));
        check(with(&|t| t.name = "a\u{7}b".into(), arena()), Err("name"));
        check(with(&|t| t.rules = None, arena()), Err("rules"));
        check(
            with(&|t| t.time_control = None, arena()),
            Err("time_control"),
        );
        check(
            with(
                &|t| {
                    t.time_control = Some(pb::TimeControl {
                        kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                            base_ms: 1_000,
                            increment_ms: 0,
                        })),
                    })
                },
                arena(),
            ),
            Err("base_ms"),
        );
        check(
            with(
                &|t| t.start = Some(pb::tournament_terms::Start::StartInSeconds(40 * 86_400)),
                arena(),
            ),
            Err("start"),
        );
        check(
            with(
                &|t| {
                    t.conditions = Some(pb::EntryConditions {
                        min_rating: 2000,
                        max_rating: 1500,
                        ..Default::default()
                    })
                },
                arena(),
            ),
            Err("max_rating"),
        );
        check(
            with(
                &|t| {
                    t.conditions = Some(pb::EntryConditions {
                        max_players: 1,
                        ..Default::default()
                    })
                },
                arena(),
            ),
            Err("max_players"),
        );
        check(
            with(
                &|t| {
                    t.conditions = Some(pb::EntryConditions {
                        password: "p".repeat(65),
                        ..Default::default()
                    })
                },
                arena(),
            ),
            Err("password"),
        );
    }

    #[test]
    fn a_past_start_is_now_and_passwords_are_hashed() {
        let mut t = arena();
        t.start = Some(pb::tournament_terms::Start::StartsAtMs(5));
        t.conditions = Some(pb::EntryConditions {
            password: "secret".into(),
            ..Default::default()
        });
        let (terms, starts_at) = validate(Some(&t), NOW, LIMITS).unwrap();
        assert_eq!(starts_at, NOW);
        let stored = terms.conditions.password_sha256.clone().unwrap();
        assert!(!stored.contains("secret"));
        assert!(password_matches(&terms.conditions, "secret"));
        assert!(!password_matches(&terms.conditions, "Secret"));
        assert!(!password_matches(&terms.conditions, ""));
        assert_eq!(terms.to_wire(NOW).conditions.unwrap().password, "");
    }

    #[test]
    fn berserk_is_on_in_arenas_unless_turned_off_and_refused_in_swiss() {
        let on = |t: &pb::TournamentTerms| validate(Some(t), NOW, LIMITS).unwrap().0;
        let arena_terms = on(&arena());
        assert!(arena_terms.berserk_allowed());
        assert_eq!(arena_terms.to_wire(NOW).berserk_allowed, Some(true));
        let off = on(&pb::TournamentTerms {
            berserk_allowed: Some(false),
            ..arena()
        });
        assert!(!off.berserk_allowed());
        assert_eq!(off.to_wire(NOW).berserk_allowed, Some(false));
        let swiss_terms = on(&swiss());
        assert!(!swiss_terms.berserk_allowed());
        assert_eq!(swiss_terms.to_wire(NOW).berserk_allowed, Some(false));
        assert!(
            !on(&pb::TournamentTerms {
                berserk_allowed: Some(false),
                ..swiss()
            })
            .berserk_allowed()
        );
        check(
            pb::TournamentTerms {
                berserk_allowed: Some(true),
                ..swiss()
            },
            Err("terms.berserk_allowed"),
        );
        // Arena terms stored before the field existed read as berserk allowed.
        use draughts_proto::contract::tournaments as contract;
        let json = String::from_utf8(contract::encode(&arena_terms)).unwrap();
        assert!(json.contains(r#""berserk":true"#), "{json}");
        let before = json.replace(r#","berserk":true"#, "");
        let old: Terms = contract::decode(before.as_bytes()).unwrap();
        assert!(old.berserk_allowed());
    }

    #[test]
    fn rounds_allowed_by_a_field() {
        assert_eq!(rounds_allowed(2), 1);
        assert_eq!(rounds_allowed(3), 3);
        assert_eq!(rounds_allowed(4), 3);
        assert_eq!(rounds_allowed(0), 0);
    }
}
