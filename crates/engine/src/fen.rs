//! FEN as PDN uses it: `W:W31-50:B1-20`, `B:WK4,29:B8,K12`, optional lidraughts `:H0:F1` counters and,
//! for Frisian, lidraughts' king-move field `:+0+328` (Black's count and king square, then White's).
//!
//! Parsing is syntax only ([`Fen`]); [`crate::Position::from_fen`] resolves the squares against a board.

use std::fmt;
use std::str::FromStr;

use crate::variant::Color;

/// A square as written: a PDN number or an algebraic name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SquareRef {
    Number(u32),
    Algebraic { file: u8, rank: u8 },
}

impl fmt::Display for SquareRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SquareRef::Number(n) => write!(f, "{n}"),
            SquareRef::Algebraic { file, rank } => {
                write!(f, "{}{}", (b'a' + file) as char, u32::from(*rank) + 1)
            }
        }
    }
}

impl SquareRef {
    /// Parses `32` or `c3` (files a..z, ranks 1..99). `None` if it is neither.
    pub fn parse(text: &str) -> Option<SquareRef> {
        let bytes = text.as_bytes();
        match bytes.first()? {
            b'0'..=b'9' => {
                if bytes.len() > 3 || !bytes.iter().all(u8::is_ascii_digit) {
                    return None;
                }
                text.parse().ok().map(SquareRef::Number)
            }
            c @ b'a'..=b'z' => {
                let rest = &text[1..];
                if rest.is_empty() || rest.len() > 2 || !rest.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                let rank: u8 = rest.parse().ok()?;
                if rank == 0 {
                    return None;
                }
                Some(SquareRef::Algebraic {
                    file: c - b'a',
                    rank: rank - 1,
                })
            }
            _ => None,
        }
    }
}

/// One piece of a FEN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FenPiece {
    pub color: Color,
    pub king: bool,
    pub square: SquareRef,
}

/// A parsed (not yet validated) FEN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fen {
    pub side: Color,
    pub pieces: Vec<FenPiece>,
    /// lidraughts `H`: plies since the last capture or man move, when given.
    pub halfmove: Option<u32>,
    /// lidraughts `F`: the move number, when given.
    pub fullmove: Option<u32>,
    /// Frisian king-move counts (lidraughts' `+` field, docs/rules.md §5.3, §11.5), White's then Black's:
    /// how many non-capturing moves in a row the king on that square made; `None` when not given.
    pub king_moves: Option<[(u8, Option<SquareRef>); 2]>,
}

/// A FEN that does not parse, with the offending text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed FEN '{fen}': {reason}")]
pub struct FenError {
    pub fen: String,
    pub reason: String,
}

const MAX_FEN_LEN: usize = 1024;

impl FromStr for Fen {
    type Err = FenError;
    fn from_str(input: &str) -> Result<Fen, FenError> {
        let err = |reason: String| FenError {
            fen: input.chars().take(120).collect(),
            reason,
        };
        if input.len() > MAX_FEN_LEN {
            return Err(err(format!("longer than {MAX_FEN_LEN} bytes")));
        }
        let mut text = input.trim();
        // Accept a PDN tag `[FEN "..."]` or a quoted FEN, and a trailing full stop.
        if let Some(inner) = text.strip_prefix("[FEN").and_then(|t| t.strip_suffix(']')) {
            text = inner.trim();
        }
        text = text.trim_matches('"').trim();
        text = text.strip_suffix('.').unwrap_or(text).trim();
        if text.is_empty() {
            return Err(err("empty".into()));
        }
        let mut fields = text.split(':');
        let side = match fields.next().map(str::trim) {
            Some("W" | "w") => Color::White,
            Some("B" | "b") => Color::Black,
            Some(other) => {
                return Err(err(format!(
                    "the side to move must be W or B, got '{other}'"
                )));
            }
            None => return Err(err("empty".into())),
        };
        let mut fen = Fen {
            side,
            pieces: Vec::new(),
            halfmove: None,
            fullmove: None,
            king_moves: None,
        };
        let mut seen = [false; 2];
        for field in fields {
            let field = field.trim();
            let mut chars = field.chars();
            let head = chars.next();
            let rest = chars.as_str();
            let color = match head {
                Some('W' | 'w') => Color::White,
                Some('B' | 'b') => Color::Black,
                Some('H' | 'h') => {
                    fen.halfmove = Some(
                        parse_counter(rest)
                            .ok_or_else(|| err(format!("bad halfmove counter '{field}'")))?,
                    );
                    continue;
                }
                Some('F' | 'f') => {
                    fen.fullmove = Some(
                        parse_counter(rest)
                            .ok_or_else(|| err(format!("bad move number '{field}'")))?,
                    );
                    continue;
                }
                Some('+') => {
                    if fen.king_moves.is_some() {
                        return Err(err("the king-move counts are given twice".into()));
                    }
                    let (black, white) = rest.split_once('+').ok_or_else(|| {
                        err(format!(
                            "king-move counts are '+<black count><square>+<white count><square>', got '{field}'"
                        ))
                    })?;
                    let one = |t: &str| -> Result<(u8, Option<SquareRef>), FenError> {
                        let t = t.trim();
                        let mut cs = t.chars();
                        let count = cs
                            .next()
                            .and_then(|c| c.to_digit(10))
                            .ok_or_else(|| err(format!("bad king-move count in '{field}'")))?;
                        let sq = cs.as_str();
                        let sq = if sq.is_empty() {
                            None
                        } else {
                            Some(SquareRef::parse(sq).ok_or_else(|| {
                                err(format!("bad king-move square '{sq}' in '{field}'"))
                            })?)
                        };
                        Ok((count as u8, sq))
                    };
                    fen.king_moves = Some([one(white)?, one(black)?]);
                    continue;
                }
                _ => {
                    return Err(err(format!(
                        "each field after the side to move must start with W, B, H, F or +, got '{field}'"
                    )));
                }
            };
            let idx = usize::from(color == Color::Black);
            if seen[idx] {
                return Err(err(format!("the {} pieces are given twice", color.name())));
            }
            seen[idx] = true;
            for token in rest.split(',') {
                let token = token.trim();
                if token.is_empty() {
                    continue;
                }
                // `K` marks a king; so does a lower-case `k`, except before digits alone: `k3` is
                // the square on file k of the 12x12 board (the only board with that file).
                let file_k = token.len() > 1
                    && token.starts_with('k')
                    && token[1..].bytes().all(|b| b.is_ascii_digit());
                let (king, sq) = match token.strip_prefix(['K', 'k']) {
                    Some(s) if !file_k => (true, s.trim()),
                    _ => (false, token),
                };
                if let Some((a, b)) = sq.split_once('-') {
                    let (a, b) = match (SquareRef::parse(a.trim()), SquareRef::parse(b.trim())) {
                        (Some(SquareRef::Number(a)), Some(SquareRef::Number(b))) if a <= b => {
                            (a, b)
                        }
                        _ => return Err(err(format!("bad square range '{token}'"))),
                    };
                    if b > 100 {
                        return Err(err(format!("square range '{token}' beyond any board")));
                    }
                    for n in a..=b {
                        fen.pieces.push(FenPiece {
                            color,
                            king,
                            square: SquareRef::Number(n),
                        });
                    }
                } else {
                    let square =
                        SquareRef::parse(sq).ok_or_else(|| err(format!("bad square '{token}'")))?;
                    fen.pieces.push(FenPiece {
                        color,
                        king,
                        square,
                    });
                }
            }
        }
        Ok(fen)
    }
}

fn parse_counter(s: &str) -> Option<u32> {
    let s = s.trim();
    if s.is_empty() || s.len() > 9 {
        return None;
    }
    s.parse().ok()
}

impl crate::Position {
    /// The FEN of the position: side to move, White's pieces, Black's pieces, kings marked `K`, squares
    /// in PDN numbers (algebraic names for Turkish), e.g. `W:W31,32,K46:B1,2`.
    pub fn to_fen(&self) -> String {
        let board = self.board();
        let turkish = board.kind == crate::BoardKind::Turkish;
        let mut out = String::new();
        out.push(self.side_to_move().letter());
        for color in [Color::White, Color::Black] {
            out.push(':');
            out.push(color.letter());
            let own = self.pieces(color);
            let mut first = true;
            for sq in board.squares() {
                if !own.contains(sq) {
                    continue;
                }
                if !first {
                    out.push(',');
                }
                first = false;
                if self.kings().contains(sq) {
                    out.push('K');
                }
                if turkish {
                    out.push_str(&board.algebraic(sq).to_string());
                } else {
                    out.push_str(&board.number(sq).to_string());
                }
            }
        }
        // Frisian king-move counts, only when one is running (lidraughts' field, docs/rules.md §11.5).
        let runs = [Color::Black, Color::White].map(|c| self.king_run(c));
        if runs.iter().any(Option::is_some) {
            out.push(':');
            for run in runs {
                out.push('+');
                if let Some((sq, n)) = run {
                    out.push_str(&format!("{n}{}", board.number(sq)));
                } else {
                    out.push('0');
                }
            }
        }
        out
    }
}
