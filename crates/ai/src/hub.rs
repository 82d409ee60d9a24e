//! The pure parts of the Hub protocol (version 2, as Scan 3.x defines it): line syntax, the position
//! format and move text. The command loop, which owns stdin/stdout and threads, lives in the CLI.
//!
//! Line syntax: `<command> <arg>=<val> <arg>="quoted val" <flag> ...`. Position: `W` or `B`, then one
//! character per playable square in PDN number order (`w`/`b` men, `W`/`B` kings, `e` empty). Moves: quiet
//! `32-28`; captures `from x to x captured x captured...` (captured pieces in square order).

use draughts_engine::{
    Color, Fen, FenPiece, Move, Position, PositionError, ResolveError, RuleSet, SquareRef, Variant,
};

/// One parsed line: the command and its arguments in order (flags have an empty value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub command: String,
    pub args: Vec<(String, String)>,
}

impl Line {
    /// The value of an argument (`Some("")` for a flag).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.args
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
}

/// Parses a line; `None` for an empty line.
pub fn parse_line(text: &str) -> Option<Line> {
    let mut tokens = tokenize(text).into_iter();
    let command = tokens.next()?;
    let args = tokens
        .map(|t| match t.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (t, String::new()),
        })
        .collect();
    Some(Line { command, args })
}

/// Splits on spaces outside double quotes; quotes are removed.
fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in text.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

/// Quotes a value if it needs it.
pub fn quote(value: &str) -> String {
    if value.is_empty() || value.contains([' ', '=', '"']) {
        format!("\"{}\"", value.replace('"', ""))
    } else {
        value.to_string()
    }
}

/// The Hub name of a variant: Scan 3.1's names where Scan plays it (`normal` for international, `losing`
/// for antidraughts, `bt` for breakthrough, `killer`), our key otherwise.
pub fn variant_name(variant: Variant) -> &'static str {
    match variant {
        Variant::International => "normal",
        Variant::Antidraughts => "losing",
        Variant::Breakthrough => "bt",
        v => v.key(),
    }
}

/// A variant from a Hub name: Scan's names (`normal`, `losing`, `bt`, `killer`) or any of our keys.
pub fn parse_variant(name: &str) -> Option<Variant> {
    match name {
        "normal" => Some(Variant::International),
        "losing" => Some(Variant::Antidraughts),
        "bt" => Some(Variant::Breakthrough),
        key => Variant::from_key(key).ok(),
    }
}

/// Why a Hub position or move can't be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HubError {
    /// Wrong length or an unknown character.
    #[error("bad hub position: {0}")]
    BadPosition(String),
    #[error(transparent)]
    Position(PositionError),
    #[error(transparent)]
    Move(ResolveError),
}

/// Reads a Hub position for a rule set.
pub fn parse_position(rules: RuleSet, text: &str) -> Result<Position, HubError> {
    let board = rules.rules().board.board();
    let chars: Vec<char> = text.trim().chars().collect();
    let n = usize::from(board.n_squares);
    if chars.len() != n + 1 {
        return Err(HubError::BadPosition(format!(
            "expected {} characters for {}, got {}",
            n + 1,
            rules.variant(),
            chars.len()
        )));
    }
    let side = match chars[0] {
        'W' | 'w' => Color::White,
        'B' | 'b' => Color::Black,
        c => return Err(HubError::BadPosition(format!("side to move '{c}'"))),
    };
    let mut pieces = Vec::new();
    for (i, c) in chars[1..].iter().enumerate() {
        let (color, king) = match c {
            'w' => (Color::White, false),
            'b' => (Color::Black, false),
            'W' => (Color::White, true),
            'B' => (Color::Black, true),
            'e' | '.' => continue,
            c => return Err(HubError::BadPosition(format!("square {}: '{c}'", i + 1))),
        };
        pieces.push(FenPiece {
            color,
            king,
            square: SquareRef::Number(i as u32 + 1),
        });
    }
    let fen = Fen {
        side,
        pieces,
        halfmove: None,
        fullmove: None,
        king_moves: None,
    };
    Position::from_parsed_fen(&fen, rules).map_err(HubError::Position)
}

/// Writes a position in the Hub format.
pub fn write_position(pos: &Position) -> String {
    let mut out = String::with_capacity(65);
    out.push(pos.side_to_move().letter());
    for sq in pos.board().squares() {
        out.push(match pos.piece_at(sq) {
            None => 'e',
            Some(p) => match (p.color, p.role) {
                (Color::White, draughts_engine::Role::Man) => 'w',
                (Color::Black, draughts_engine::Role::Man) => 'b',
                (Color::White, draughts_engine::Role::King) => 'W',
                (Color::Black, draughts_engine::Role::King) => 'B',
            },
        });
    }
    out
}

/// A move in Hub text: `32-28`, or `from x to x captured...` with PDN numbers.
pub fn write_move(pos: &Position, mv: &Move) -> String {
    let board = pos.board();
    let from = board.number(mv.from());
    let to = board.number(mv.to());
    if !mv.is_capture() {
        return format!("{from}-{to}");
    }
    let mut captured: Vec<u32> = mv.captured().map(|sq| board.number(sq)).collect();
    captured.sort_unstable();
    let mut out = format!("{from}x{to}");
    for c in captured {
        out.push('x');
        out.push_str(&c.to_string());
    }
    out
}

/// Reads a Hub move (any form the engine's move text accepts).
pub fn parse_move(pos: &Position, text: &str) -> Result<Move, HubError> {
    pos.parse_move(text).map_err(HubError::Move)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_with_quotes_and_flags() {
        let l = parse_line("pos pos=Wbbe moves=\"32-28 17-22\" go  think").unwrap();
        assert_eq!(l.command, "pos");
        assert_eq!(l.get("pos"), Some("Wbbe"));
        assert_eq!(l.get("moves"), Some("32-28 17-22"));
        assert!(l.has("think"));
        assert_eq!(parse_line("   "), None);
        let l = parse_line("id name=x author=\"A B\" country=\"\"").unwrap();
        assert_eq!(l.get("country"), Some(""));
    }

    #[test]
    fn positions_round_trip() {
        for v in Variant::ALL {
            let pos = Position::start(v);
            let text = write_position(&pos);
            assert_eq!(parse_position(v.into(), &text).unwrap(), pos, "{v}");
        }
        let start = "Wbbbbbbbbbbbbbbbbbbbbeeeeeeeeeewwwwwwwwwwwwwwwwwwww";
        assert_eq!(
            parse_position(Variant::International.into(), start).unwrap(),
            Position::start(Variant::International)
        );
        assert!(parse_position(Variant::English.into(), start).is_err());
    }

    #[test]
    fn captures_list_the_captured_pieces() {
        // Scan's own example: 28x19x23.
        let pos = Position::from_fen(Variant::International, "W:W28:B23").unwrap();
        let moves = pos.legal_moves();
        let text = write_move(&pos, &moves[0]);
        assert_eq!(text, "28x19x23");
        assert_eq!(parse_move(&pos, &text).unwrap(), moves[0]);
    }

    #[test]
    fn normal_is_international() {
        assert_eq!(parse_variant("normal"), Some(Variant::International));
        assert_eq!(variant_name(Variant::International), "normal");
        assert_eq!(parse_variant("losing"), Some(Variant::Antidraughts));
        assert_eq!(parse_variant("bt"), Some(Variant::Breakthrough));
        assert_eq!(parse_variant("killer"), Some(Variant::Killer));
        for v in Variant::ALL {
            assert_eq!(parse_variant(variant_name(v)), Some(v));
        }
        for v in Variant::ALL {
            assert_eq!(parse_variant(v.key()), Some(v));
        }
    }
}
