//! Move text: parsed in two steps, like shakmaty's SAN. [`MoveText::from_str`] checks the syntax only
//! (malformed text); [`MoveText::resolve`] finds the move in a position (illegal, or ambiguous).
//!
//! Accepted forms, in every variant: `32-28`, `28x19`, `c3-d4`, `c3:e5`, a full path `28x19x10` (every
//! landing square), and the Hub protocol's `from x to x captured x captured...`.

use std::fmt::Write as _;
use std::str::FromStr;

use crate::board::{Board, Square};
use crate::fen::SquareRef;
use crate::position::{Move, MovePath, Position, resolve_square};
use crate::variant::NotationStyle;

/// A move as written, before it is matched against a position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveText {
    pub squares: Vec<SquareRef>,
    /// Written with a capture separator (`x` or `:`).
    pub capture: bool,
}

/// Move text that is not a move in any position.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed move '{text}': {reason}")]
pub struct MoveTextError {
    pub text: String,
    pub reason: &'static str,
}

/// Why a move text does not give exactly one legal move.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error(transparent)]
    Malformed(#[from] MoveTextError),
    #[error("illegal move '{text}': {reason}")]
    Illegal { text: String, reason: String },
    #[error("ambiguous move '{text}': it could be {}", candidates.join(" or "))]
    Ambiguous {
        text: String,
        candidates: Vec<String>,
    },
}

const MAX_MOVE_TEXT: usize = 200;

impl FromStr for MoveText {
    type Err = MoveTextError;
    fn from_str(input: &str) -> Result<MoveText, MoveTextError> {
        let err = |reason| MoveTextError {
            text: input.chars().take(60).collect(),
            reason,
        };
        if input.len() > MAX_MOVE_TEXT {
            return Err(err("too long"));
        }
        let text = input.trim();
        if text.is_empty() {
            return Err(err("empty"));
        }
        let mut squares = Vec::new();
        let mut quiet_sep = false;
        let mut capture_sep = false;
        let mut start = 0;
        for (i, c) in text.char_indices() {
            let is_sep = match c {
                '-' => {
                    quiet_sep = true;
                    true
                }
                'x' | 'X' | ':' | '×' => {
                    capture_sep = true;
                    true
                }
                _ => false,
            };
            if is_sep {
                squares.push(&text[start..i]);
                start = i + c.len_utf8();
            }
        }
        squares.push(&text[start..]);
        if squares.len() < 2 {
            return Err(err("expected squares separated by '-', 'x' or ':'"));
        }
        if quiet_sep && capture_sep {
            return Err(err("mixes '-' with a capture separator"));
        }
        let squares = squares
            .into_iter()
            .map(|s| {
                SquareRef::parse(s.trim())
                    .ok_or_else(|| err("a square must be a number like 32 or a name like c3"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(MoveText {
            squares,
            capture: capture_sep,
        })
    }
}

impl MoveText {
    /// Finds the one legal move this text denotes.
    pub fn resolve(&self, pos: &Position) -> Result<Move, ResolveError> {
        self.resolve_in(pos, &pos.move_paths())
    }

    /// [`MoveText::resolve`] against the position's [`Position::move_paths`], already computed (callers
    /// that also need the paths or the notation generate them once).
    pub fn resolve_in(&self, pos: &Position, paths: &[MovePath]) -> Result<Move, ResolveError> {
        let text = self.to_string();
        let board = pos.board();
        let squares = self
            .squares
            .iter()
            .map(|s| resolve_square(board, *s, pos.variant()))
            .collect::<Result<Vec<Square>, _>>()
            .map_err(|e| ResolveError::Illegal {
                text: text.clone(),
                reason: e.to_string(),
            })?;
        let from = squares[0];
        let last = squares[squares.len() - 1];
        let mut found: Vec<Move> = Vec::new();
        // Moves one of whose paths is exactly the squares given: the full path written by
        // `move_to_text` always names its move, even when its origin and destination are shared.
        let mut exact: Vec<Move> = Vec::new();
        for p in paths {
            let mv = p.mv;
            if mv.from() != from || (self.capture && !mv.is_capture()) {
                continue;
            }
            let matches = if squares.len() == 2 {
                mv.to() == last
            } else {
                let as_path = mv.to() == last && p.path == squares;
                let as_hub = mv.is_capture()
                    && mv.to() == squares[1]
                    && squares.len() - 2 == p.captured.len()
                    && squares[2..].iter().all(|s| mv.captured().contains(*s));
                as_path || as_hub
            };
            if matches && !found.contains(&mv) {
                found.push(mv);
            }
            if matches && p.path == squares && !exact.contains(&mv) {
                exact.push(mv);
            }
        }
        if found.len() > 1 && exact.len() == 1 {
            return Ok(exact[0]);
        }
        match found.len() {
            1 => Ok(found[0]),
            0 => Err(ResolveError::Illegal {
                reason: illegal_reason(pos, from),
                text,
            }),
            _ => Err(ResolveError::Ambiguous {
                text,
                candidates: found.iter().map(|m| pos.move_to_text(m)).collect(),
            }),
        }
    }
}

fn illegal_reason(pos: &Position, from: Square) -> String {
    match pos.piece_at(from) {
        None => "there is no piece on its first square".into(),
        Some(p) if p.color != pos.side_to_move() => {
            format!(
                "the piece on its first square is {}'s, and {} is to move",
                p.color.name(),
                pos.side_to_move().name()
            )
        }
        Some(_) if pos.has_capture() && pos.rule_set().mandatory_capture() => {
            "it is not among the legal moves (a capture is mandatory)".into()
        }
        Some(_) => "it is not among the legal moves".into(),
    }
}

impl std::fmt::Display for MoveText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sep = if self.capture { "x" } else { "-" };
        for (i, s) in self.squares.iter().enumerate() {
            if i > 0 {
                f.write_str(sep)?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

/// Writes a square in a variant's style.
pub(crate) fn square_name(board: &Board, style: NotationStyle, sq: Square) -> String {
    match style {
        NotationStyle::Numeric => board.number(sq).to_string(),
        NotationStyle::Algebraic(_) => board.algebraic(sq).to_string(),
    }
}

/// A PDN tag line, `[Key "value"]` and a newline, the value as PDN may carry it: control characters (a
/// newline would start a forged tag) become spaces, and `\` and `"` are escaped.
pub fn pdn_tag(key: &str, value: &str) -> String {
    let mut out = String::with_capacity(key.len() + value.len() + 6);
    out.push('[');
    out.push_str(key);
    out.push_str(" \"");
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push_str("\"]\n");
    out
}

/// The PDN tags that name a variant: `GameType` (its number), and `Variant` (its key) where that number
/// is shared with another variant (antidraughts, breakthrough and killer play on international's 20), as
/// lidraughts writes them.
pub fn pdn_variant_tags(variant: crate::Variant) -> String {
    let number = variant.pdn_game_type();
    let mut out = pdn_tag("GameType", &number.to_string());
    if crate::Variant::from_pdn_game_type(number) != Some(variant) {
        out.push_str(&pdn_tag("Variant", variant.key()));
    }
    out
}

/// The PDN tag of a game's house rules (docs/rules.md §5.7): `[Options "kings-only=30,repetition=off"]`
/// with the canonical option text, or nothing when the game has none.
pub fn pdn_options_tag(options: crate::RuleOptions) -> String {
    if options == crate::RuleOptions::default() {
        String::new()
    } else {
        pdn_tag("Options", &options.to_string())
    }
}

/// A PDN movetext section: the moves numbered from the first (`1. 32-28 19-23 2. ...`), then the result,
/// wrapped at about 80 columns as PDN readers expect; no final newline.
pub fn pdn_movetext<S: AsRef<str>>(moves: &[S], result: &str) -> String {
    let mut out = String::new();
    let mut col = 0;
    let mut word = |w: &str| {
        if col > 0 && col + w.len() + 1 > 80 {
            out.push('\n');
            col = 0;
        } else if col > 0 {
            out.push(' ');
            col += 1;
        }
        out.push_str(w);
        col += w.len();
    };
    for (i, m) in moves.iter().enumerate() {
        if i % 2 == 0 {
            word(&format!("{}.", i / 2 + 1));
        }
        word(m.as_ref());
    }
    word(result);
    out
}

impl Position {
    /// Parses and resolves a move text in one call.
    pub fn parse_move(&self, text: &str) -> Result<Move, ResolveError> {
        let mt: MoveText = text.parse()?;
        mt.resolve(self)
    }

    /// The move in the variant's own notation: `32-28`, `28x19`, `c3:e5`; the full path (`28x19x10`)
    /// only when another legal move has the same origin and destination.
    pub fn move_to_text(&self, mv: &Move) -> String {
        let style = self.rule_set().rules().notation;
        let board = self.board();
        let sep = match (mv.is_capture(), style) {
            (false, _) => '-',
            (true, NotationStyle::Numeric) => 'x',
            (true, NotationStyle::Algebraic(c)) => c,
        };
        let name = |sq| square_name(board, style, sq);
        let mut out = String::new();
        let ambiguous = mv.is_capture()
            && self
                .legal_moves()
                .iter()
                .any(|m| m != mv && m.from() == mv.from() && m.to() == mv.to());
        let path = if ambiguous {
            self.move_path(mv).map(|p| p.path)
        } else {
            None
        };
        match path {
            Some(path) => {
                for (i, sq) in path.iter().enumerate() {
                    if i > 0 {
                        out.push(sep);
                    }
                    out.push_str(&name(*sq));
                }
            }
            None => {
                let _ = write!(out, "{}{}{}", name(mv.from()), sep, name(mv.to()));
            }
        }
        out
    }

    /// [`Position::move_to_text`] with the position's [`Position::move_paths`] already computed.
    pub fn move_to_text_in(&self, mv: &Move, paths: &[MovePath]) -> String {
        let style = self.rule_set().rules().notation;
        let board = self.board();
        let sep = match (mv.is_capture(), style) {
            (false, _) => '-',
            (true, NotationStyle::Numeric) => 'x',
            (true, NotationStyle::Algebraic(c)) => c,
        };
        let ambiguous = mv.is_capture()
            && paths
                .iter()
                .any(|p| p.mv != *mv && p.mv.from() == mv.from() && p.mv.to() == mv.to());
        let squares: Vec<Square> = match paths.iter().find(|p| p.mv == *mv) {
            Some(p) if ambiguous => p.path.clone(),
            _ => vec![mv.from(), mv.to()],
        };
        let mut out = String::new();
        for (i, sq) in squares.iter().enumerate() {
            if i > 0 {
                out.push(sep);
            }
            out.push_str(&square_name(board, style, *sq));
        }
        out
    }

    /// A square's name in the variant's notation (`32` or `c3`).
    pub fn square_name(&self, sq: Square) -> String {
        square_name(self.board(), self.rule_set().rules().notation, sq)
    }
}

#[cfg(test)]
mod tests {
    use super::{pdn_movetext, pdn_options_tag, pdn_tag, pdn_variant_tags};

    #[test]
    fn pdn_tag_values_cannot_break_out_of_their_tag() {
        assert_eq!(pdn_tag("White", "Ann"), "[White \"Ann\"]\n");
        assert_eq!(
            pdn_tag("White", "x\"]\n[Result \"2-0"),
            "[White \"x\\\"] [Result \\\"2-0\"]\n"
        );
        assert_eq!(pdn_tag("W", "a\r\nb\u{0}c").lines().count(), 1);
        assert_eq!(pdn_tag("W", "back\\slash"), "[W \"back\\\\slash\"]\n");
    }

    #[test]
    fn pdn_names_a_variant_by_number_and_by_key_where_the_number_is_shared() {
        use crate::Variant;
        assert_eq!(pdn_variant_tags(Variant::Russian), "[GameType \"25\"]\n");
        assert_eq!(
            pdn_variant_tags(Variant::Killer),
            "[GameType \"20\"]\n[Variant \"killer\"]\n"
        );
        for v in Variant::ALL {
            let tags = pdn_variant_tags(v);
            assert!(tags.starts_with(&format!("[GameType \"{}\"]", v.pdn_game_type())));
            assert_eq!(
                tags.contains("[Variant"),
                Variant::from_pdn_game_type(v.pdn_game_type()) != Some(v)
            );
        }
    }

    #[test]
    fn pdn_writes_house_rules_only_when_there_are_some() {
        use crate::RuleOptions;
        assert_eq!(pdn_options_tag(RuleOptions::default()), "");
        let opts = RuleOptions::parse("repetition=off,kings-only=30").unwrap();
        assert_eq!(
            pdn_options_tag(opts),
            "[Options \"kings-only=30,repetition=off\"]\n"
        );
    }

    #[test]
    fn pdn_movetext_numbers_and_wraps() {
        assert_eq!(
            pdn_movetext(&["32-28", "19-23", "28x19"], "2-0"),
            "1. 32-28 19-23 2. 28x19 2-0"
        );
        assert_eq!(pdn_movetext::<&str>(&[], "*"), "*");
        let long = vec!["32-28"; 60];
        let text = pdn_movetext(&long, "1-1");
        assert!(text.lines().count() > 5);
        assert!(
            text.lines()
                .all(|l| l.len() <= 80 && !l.starts_with(' ') && !l.ends_with(' '))
        );
        assert_eq!(text.split_whitespace().count(), 60 + 30 + 1);
    }
}
