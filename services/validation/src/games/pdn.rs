//! PDN export of a game: the standard seven tags plus GameType, FEN (when not the start position),
//! TimeControl, the termination reason, `WhiteType`/`BlackType` "program" for bots and
//! `WhiteBerserk`/`BlackBerserk` "1" for a side that went berserk in an arena, then the moves numbered
//! from the first mover.

use draughts_engine::{
    Color, Position, Variant, pdn_movetext, pdn_options_tag, pdn_tag, pdn_variant_tags,
};

use draughts_proto::contract::finished::Outcome;

use super::record::{GameRecord, TimeControlRec};
use super::service::{GamesError, GamesResult};

/// The result text of a record as the engine writes it for the variant (`2-0` or `1-0`, ...:
/// `Variant::result_text`), `*` while ongoing, aborted, or for a record it cannot read.
pub fn result_text(record: &GameRecord) -> String {
    let Some(r) = &record.result else {
        return "*".into();
    };
    let Ok(variant) = Variant::from_key(&record.variant) else {
        return "*".into();
    };
    let winner = match r.outcome {
        Outcome::WhiteWins => Some(Color::White),
        Outcome::BlackWins => Some(Color::Black),
        Outcome::Draw => None,
        Outcome::Aborted => return "*".into(),
    };
    variant.result_text(winner).into()
}

/// The game in PDN.
pub fn export(record: &GameRecord) -> GamesResult<String> {
    let rules = record.rules()?;
    let variant: Variant = rules.variant();
    let start = Position::from_fen(rules, &record.start_fen)
        .map_err(|e| GamesError::Invalid(e.to_string()))?;
    let date = {
        // Civil date from Unix ms (UTC), without a date crate: days since 1970-01-01.
        let days = (record.created_ms / 86_400_000) as i64;
        let (y, m, d) = civil_from_days(days);
        format!("{y:04}.{m:02}.{d:02}")
    };
    let result = result_text(record);
    let mut out = String::new();
    let tag = |out: &mut String, k: &str, v: &str| out.push_str(&pdn_tag(k, v));
    tag(
        &mut out,
        "Event",
        if record.rated {
            "Rated game"
        } else {
            "Casual game"
        },
    );
    tag(&mut out, "Site", "draughts platform");
    tag(&mut out, "Date", &date);
    tag(&mut out, "Round", "-");
    tag(&mut out, "White", &record.white.name);
    tag(&mut out, "Black", &record.black.name);
    tag(&mut out, "Result", &result);
    out.push_str(&pdn_variant_tags(variant));
    // House rules (draw-rule options and the others), when the game has any (docs/rules.md §5.7).
    out.push_str(&pdn_options_tag(rules.options()));
    if start != Position::start(rules) {
        tag(&mut out, "SetUp", "1");
        tag(&mut out, "FEN", &record.start_fen);
    }
    let tc = match record.time {
        TimeControlRec::Fischer {
            base_ms,
            increment_ms,
        } => {
            format!("{}+{}", base_ms / 1000, increment_ms / 1000)
        }
        TimeControlRec::Correspondence { days_per_move } => {
            format!("{days_per_move} days per move")
        }
    };
    tag(&mut out, "TimeControl", &tc);
    // Bots are marked as programs (PGN's WhiteType/BlackType, which PDN readers know).
    for (key, player) in [("WhiteType", &record.white), ("BlackType", &record.black)] {
        if player.bot {
            tag(&mut out, key, "program");
        }
    }
    // Arena berserk: the side played on half its time with no increment.
    for (key, berserk) in [
        ("WhiteBerserk", record.white_berserk),
        ("BlackBerserk", record.black_berserk),
    ] {
        if berserk {
            tag(&mut out, key, "1");
        }
    }
    if let Some(r) = &record.result {
        tag(&mut out, "Termination", &r.description);
    }
    out.push('\n');
    let texts: Vec<&str> = record.moves.iter().map(|m| m.text.as_str()).collect();
    out.push_str(&pdn_movetext(&texts, &result));
    out.push('\n');
    Ok(out)
}

/// Howard Hinnant's days-from-civil inverse: (year, month, day) of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_berserk_side_is_tagged() {
        use super::super::record::{GameRecord, TimeControlRec};
        use draughts_engine::{Color, Position, RuleSet, Variant};
        use draughts_proto::vocab::player::Player;
        let player = |id: &str| Player {
            name: id.into(),
            guest: true,
            ..Player::new(id.parse().unwrap())
        };
        let mut record = GameRecord::new(
            "g1".parse().unwrap(),
            RuleSet::new(Variant::English),
            TimeControlRec::Fischer {
                base_ms: 60_000,
                increment_ms: 1_000,
            },
            player("guest:w"),
            player("guest:b"),
            false,
            &Position::start(Variant::English),
            1_000,
        )
        .unwrap();
        assert!(!super::export(&record).unwrap().contains("Berserk"));
        record.berserk_allowed = true;
        record.berserk(Color::Black, 1_100).unwrap();
        let pdn = super::export(&record).unwrap();
        assert!(pdn.contains("[BlackBerserk \"1\"]"), "{pdn}");
        assert!(!pdn.contains("WhiteBerserk"), "{pdn}");
    }

    #[test]
    fn civil_dates() {
        assert_eq!(super::civil_from_days(0), (1970, 1, 1));
        assert_eq!(super::civil_from_days(20_422), (2025, 11, 30));
    }
}
