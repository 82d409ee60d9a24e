//! Reading one game from PDN text for AnalyzeGame (the workspace's PDN code only writes): tags, then
//! the move text. Syntax first (tags, tokens), then the moves are resolved against the positions by the
//! engine's notation, so an illegal move is reported with its ply.
//!
//! Read: `[GameType "20"]` (the variant by its PDN number; an optional `,...` tail is ignored),
//! `[Variant "..."]` where a number is shared, `[Options "..."]` (the house rules as the platform's games
//! export them: docs/rules.md §5.7; they can change which moves are legal) and `[FEN "..."]`; other tags
//! are skipped. Skipped in the move text: move numbers (`12.`, `12...`, also
//! glued to a move as `12.32-28`), comments `{...}` and `;` to the end of the line, variations `(...)`
//! (nested), NAGs `$n`, move suffixes `!` `?`, and the result (`2-0`, `0-2`, `1-1`, `1-0`, `0-1`,
//! `1/2-1/2`, `0-0`, `*`).
//!
//! ```
//! use draughts_analysis::pdn;
//! let game = pdn::parse("[GameType \"21\"]\n1. 11-15 {a comment} 23-19 (24-20) 2. 8-11 *", None).unwrap();
//! assert_eq!(game.rules.variant(), draughts_engine::Variant::English);
//! assert_eq!(game.moves, ["11-15", "23-19", "8-11"]);
//! ```

use draughts_engine::{Game, Position, RuleOptions, RuleSet, Variant};

/// Longest game accepted, plies.
pub const MAX_PLIES: usize = 1000;

/// A game read from PDN: rules, normalised start FEN and the moves as resolved move texts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PdnGame {
    pub rules: RuleSet,
    pub start_fen: String,
    pub moves: Vec<String>,
}

/// Why a PDN text was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PdnError {
    #[error("PDN: {0}")]
    Syntax(String),
    #[error("PDN: unknown GameType {0}")]
    GameType(String),
    #[error("PDN: bad FEN tag: {0}")]
    Fen(String),
    #[error("PDN: bad Options tag: {0}")]
    Options(String),
    #[error("PDN: ply {ply} ({text}): {reason}")]
    Move {
        ply: usize,
        text: String,
        reason: String,
    },
    #[error("PDN: more than {MAX_PLIES} plies")]
    TooLong,
}

fn is_result(token: &str) -> bool {
    matches!(
        token,
        "2-0" | "0-2" | "1-1" | "1-0" | "0-1" | "1/2-1/2" | "0-0" | "*"
    )
}

/// Parses one game. `default_rules` applies when there is no GameType tag (else international).
pub fn parse(text: &str, default_rules: Option<RuleSet>) -> Result<PdnGame, PdnError> {
    let mut game_type = None;
    let mut variant_tag: Option<String> = None;
    let mut fen = None;
    let mut options: Option<String> = None;
    let mut tokens: Vec<String> = Vec::new();
    let mut chars = text.chars().peekable();
    let mut current = String::new();
    let mut depth = 0usize;
    let flush = |current: &mut String, tokens: &mut Vec<String>| {
        if !current.is_empty() {
            tokens.push(std::mem::take(current));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '[' if depth == 0 => {
                flush(&mut current, &mut tokens);
                let mut tag = String::new();
                let mut in_quotes = false;
                loop {
                    match chars.next() {
                        None => return Err(PdnError::Syntax("unterminated tag".into())),
                        Some('\\') if in_quotes => {
                            if let Some(next) = chars.next() {
                                tag.push(next);
                            }
                        }
                        Some('"') => {
                            in_quotes = !in_quotes;
                            tag.push('"');
                        }
                        Some(']') if !in_quotes => break,
                        Some(ch) => tag.push(ch),
                    }
                }
                let (name, value) = tag
                    .trim()
                    .split_once(char::is_whitespace)
                    .ok_or_else(|| PdnError::Syntax(format!("bad tag [{tag}]")))?;
                let value = value.trim().trim_matches('"').to_owned();
                match name {
                    "GameType" => game_type = Some(value),
                    "Variant" => variant_tag = Some(value),
                    "FEN" => fen = Some(value),
                    "Options" => options = Some(value),
                    _ => {}
                }
            }
            '{' => {
                flush(&mut current, &mut tokens);
                if !chars.by_ref().any(|ch| ch == '}') {
                    return Err(PdnError::Syntax("unterminated comment".into()));
                }
            }
            ';' => {
                flush(&mut current, &mut tokens);
                for ch in chars.by_ref() {
                    if ch == '\n' {
                        break;
                    }
                }
            }
            '(' => {
                flush(&mut current, &mut tokens);
                depth += 1;
            }
            ')' => {
                flush(&mut current, &mut tokens);
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| PdnError::Syntax("unbalanced ')'".into()))?;
            }
            c if c.is_whitespace() => flush(&mut current, &mut tokens),
            c if depth == 0 => current.push(c),
            _ => {}
        }
        if tokens.len() > 4 * MAX_PLIES {
            return Err(PdnError::TooLong);
        }
    }
    flush(&mut current, &mut tokens);
    if depth != 0 {
        return Err(PdnError::Syntax("unbalanced '('".into()));
    }
    // A `Variant` tag names a variant that shares its GameType number with another (antidraughts,
    // breakthrough and killer are GameType 20); it must agree with the GameType when both are given.
    let named = variant_tag.and_then(|v| v.parse::<Variant>().ok());
    let rules = match game_type {
        Some(gt) => {
            let number = gt.split(',').next().unwrap_or("").trim();
            let by_number = number
                .parse::<u8>()
                .ok()
                .and_then(Variant::from_pdn_game_type)
                .ok_or_else(|| PdnError::GameType(gt.clone()))?;
            match named {
                Some(v) if v.pdn_game_type() == by_number.pdn_game_type() => RuleSet::from(v),
                _ => RuleSet::from(by_number),
            }
        }
        None => match named {
            Some(v) => RuleSet::from(v),
            None => default_rules.unwrap_or_else(|| RuleSet::from(Variant::International)),
        },
    };
    // House rules: the tag's options replace the defaults' (an empty tag is none).
    let rules = match options.as_deref().map(str::trim) {
        Some(text) if !text.is_empty() => {
            let parsed = RuleOptions::parse(text).map_err(|e| PdnError::Options(e.to_string()))?;
            RuleSet::with_options(rules.variant(), parsed)
                .map_err(|e| PdnError::Options(e.to_string()))?
        }
        _ => rules,
    };
    let start = match fen.as_deref() {
        Some(f) if !f.trim().is_empty() => {
            Position::from_fen(rules, f).map_err(|e| PdnError::Fen(e.to_string()))?
        }
        _ => Position::start(rules),
    };
    let mut game = Game::new(start);
    let mut moves = Vec::new();
    for token in tokens {
        // Strip a move number ("12." or "12...") glued in front, and annotation suffixes.
        let without_number = match token.find('.') {
            Some(dot) if token[..dot].chars().all(|c| c.is_ascii_digit()) => {
                token[dot..].trim_start_matches('.')
            }
            _ => token.as_str(),
        };
        let text = without_number.trim_end_matches(['!', '?']);
        if text.is_empty() || text.starts_with('$') || is_result(text) {
            continue;
        }
        if moves.len() >= MAX_PLIES {
            return Err(PdnError::TooLong);
        }
        let pos = *game.position();
        let mv = pos.parse_move(text).map_err(|e| PdnError::Move {
            ply: moves.len() + 1,
            text: text.to_owned(),
            reason: e.to_string(),
        })?;
        game.play(&mv).map_err(|e| PdnError::Move {
            ply: moves.len() + 1,
            text: text.to_owned(),
            reason: e.to_string(),
        })?;
        moves.push(pos.move_to_text(&mv));
    }
    Ok(PdnGame {
        rules,
        start_fen: start.to_fen(),
        moves,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variant_tag_names_a_variant_that_shares_its_game_type() {
        let game = parse("[GameType \"20\"][Variant \"antidraughts\"] 32-28 *", None).unwrap();
        assert_eq!(game.rules.variant(), Variant::Antidraughts);
        let game = parse("[Variant \"killer\"] 32-28 *", None).unwrap();
        assert_eq!(game.rules.variant(), Variant::Killer);
        // A Variant tag that disagrees with the GameType number is ignored.
        let game = parse("[GameType \"21\"][Variant \"killer\"] 11-15 *", None).unwrap();
        assert_eq!(game.rules.variant(), Variant::English);
        // Frisian is GameType 40; frysk shares it with its Variant tag (docs/rules.md §5.6, §11.8).
        let game = parse("[GameType \"40\"] 32-28 *", None).unwrap();
        assert_eq!(game.rules.variant(), Variant::Frisian);
        let game = parse("[GameType \"40\"][Variant \"frysk\"] 46-41 *", None).unwrap();
        assert_eq!(game.rules.variant(), Variant::Frysk);
        assert_eq!(game.moves, ["46-41"]);
        // Canadian is GameType 27 (docs/rules.md §5.6, §12), also in its long form.
        let game = parse("[GameType \"27,W,12,12,N2,0\"] 1. 46-40 25-31 *", None).unwrap();
        assert_eq!(game.rules.variant(), Variant::Canadian);
        assert_eq!(game.moves, ["46-40", "25-31"]);
    }

    #[test]
    fn the_options_tag_gives_the_house_rules() {
        // English: after 11-15 24-19 Black must take 15x24; without the capture obligation 9-13 is legal.
        let text = "[GameType \"21\"][Options \"no-mandatory-capture\"] 1. 11-15 24-19 2. 9-13 *";
        let game = parse(text, None).unwrap();
        assert!(game.rules.options().no_mandatory_capture);
        assert_eq!(game.moves, ["11-15", "24-19", "9-13"]);
        let refused = parse(
            &text.replace("[Options \"no-mandatory-capture\"]", ""),
            None,
        );
        assert!(
            matches!(refused, Err(PdnError::Move { ply: 3, .. })),
            "{refused:?}"
        );
        // The tag as Games writes it (canonical text, draw rules only) reads back to the same rule set.
        let rules = RuleSet::with_options(
            Variant::International,
            RuleOptions::parse("kings-only=30,repetition=off").unwrap(),
        )
        .unwrap();
        let tag = draughts_engine::pdn_options_tag(rules.options());
        let game = parse(&format!("[GameType \"20\"]{tag} 32-28 *"), None).unwrap();
        assert_eq!(game.rules, rules);
        // An empty tag is no options; a bad one, or one the variant refuses, is an error.
        let game = parse("[GameType \"20\"][Options \"\"] 32-28 *", None).unwrap();
        assert_eq!(game.rules, RuleSet::from(Variant::International));
        for bad in ["move-limit=0", "castling", "kings-only=25"] {
            let tag =
                format!("[GameType \"20\"][Variant \"breakthrough\"][Options \"{bad}\"] 32-28 *");
            assert!(
                matches!(parse(&tag, None), Err(PdnError::Options(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn reads_tags_numbers_comments_and_variations() {
        let text = "[Event \"x [y]\"]\n[GameType \"20,W,10,10,N2,0\"]\n1. 32-28 19-23 2.28x19 14x23 ; eol\n3... $1 *";
        let game = parse(text, None).unwrap();
        assert_eq!(game.rules.variant(), Variant::International);
        assert_eq!(game.moves, ["32-28", "19-23", "28x19", "14x23"]);
    }

    #[test]
    fn refuses_bad_input_with_the_ply() {
        let err = parse("1. 32-28 32-28", None).unwrap_err();
        assert!(matches!(err, PdnError::Move { ply: 2, .. }), "{err}");
        assert!(matches!(
            parse("[GameType \"99\"]", None),
            Err(PdnError::GameType(_))
        ));
        assert!(matches!(
            parse("1. 32-28 {", None),
            Err(PdnError::Syntax(_))
        ));
        assert!(matches!(parse("(1. 32-28", None), Err(PdnError::Syntax(_))));
        assert!(matches!(
            parse("[FEN \"W:Wzz\"]", None),
            Err(PdnError::Fen(_))
        ));
    }

    #[test]
    fn a_fen_tag_sets_the_start() {
        let game = parse("[GameType \"21\"][FEN \"W:W22:B14\"] 22-18 14x23", None).unwrap();
        assert_eq!(game.moves.len(), 2);
        assert!(game.start_fen.starts_with("W:W22"));
    }
}
