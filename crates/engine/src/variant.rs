//! The rule sets as data tables, and the house-rule options.
//!
//! Each [`Rules`] field cites the rule it encodes by its article in `docs/rules.md`, the product's rule book
//! (which cites the federation rules and rule pages it was written from).

use std::fmt;
use std::num::NonZeroU16;
use std::str::FromStr;

use crate::board::BoardKind;

/// One of the two sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Color {
    White,
    Black,
}

impl Color {
    pub fn opposite(self) -> Color {
        match self {
            Color::White => Color::Black,
            Color::Black => Color::White,
        }
    }
    /// `W` or `B`, as in FEN.
    pub fn letter(self) -> char {
        match self {
            Color::White => 'W',
            Color::Black => 'B',
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Color::White => "white",
            Color::Black => "black",
        }
    }
}

impl std::ops::Not for Color {
    type Output = Color;
    fn not(self) -> Color {
        self.opposite()
    }
}

/// The rule sets served by the platform, with stable keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Variant {
    International,
    English,
    Italian,
    Russian,
    Brazilian,
    Spanish,
    Czech,
    Turkish,
    /// International rules, reversed goal (docs/rules.md §9.2).
    Antidraughts,
    /// International rules; the first to crown a king wins (docs/rules.md §9.3).
    Breakthrough,
    /// International rules with Scan's killer rule (docs/rules.md §9.4).
    Killer,
    /// American pool checkers (docs/rules.md §10.1).
    Pool,
    /// Portuguese draughts (docs/rules.md §10.2).
    Portuguese,
    /// Frisian draughts: orthogonal captures too, capture by value (docs/rules.md §11).
    Frisian,
    /// Frysk!: Frisian draughts from five men a side (docs/rules.md §11.8).
    Frysk,
    /// Canadian draughts: international rules on a 12x12 board, 30 men a side (docs/rules.md §12).
    Canadian,
}

impl Variant {
    pub const ALL: [Variant; 16] = [
        Variant::International,
        Variant::English,
        Variant::Italian,
        Variant::Russian,
        Variant::Brazilian,
        Variant::Spanish,
        Variant::Czech,
        Variant::Turkish,
        Variant::Antidraughts,
        Variant::Breakthrough,
        Variant::Killer,
        Variant::Pool,
        Variant::Portuguese,
        Variant::Frisian,
        Variant::Frysk,
        Variant::Canadian,
    ];

    /// The stable key (`international`, `english`, ...).
    pub fn key(self) -> &'static str {
        match self {
            Variant::International => "international",
            Variant::English => "english",
            Variant::Italian => "italian",
            Variant::Russian => "russian",
            Variant::Brazilian => "brazilian",
            Variant::Spanish => "spanish",
            Variant::Czech => "czech",
            Variant::Turkish => "turkish",
            Variant::Antidraughts => "antidraughts",
            Variant::Breakthrough => "breakthrough",
            Variant::Killer => "killer",
            Variant::Pool => "pool",
            Variant::Portuguese => "portuguese",
            Variant::Frisian => "frisian",
            Variant::Frysk => "frysk",
            Variant::Canadian => "canadian",
        }
    }

    /// The PDN `GameType` tag number (docs/rules.md §5.6). Antidraughts, breakthrough and killer have none
    /// of their own: they are international draughts on its board and numbering (20), told apart by the
    /// PDN `Variant` tag ([`Variant::key`]); frysk is Frisian (40) with a `Variant` tag, likewise.
    pub fn pdn_game_type(self) -> u8 {
        match self {
            Variant::International
            | Variant::Antidraughts
            | Variant::Breakthrough
            | Variant::Killer => 20,
            Variant::Pool => 23,
            Variant::Portuguese => 28,
            Variant::English => 21,
            Variant::Italian => 22,
            Variant::Spanish => 24,
            Variant::Russian => 25,
            Variant::Brazilian => 26,
            Variant::Czech => 29,
            Variant::Turkish => 30,
            Variant::Frisian | Variant::Frysk => 40,
            Variant::Canadian => 27,
        }
    }

    /// The rule table of this variant.
    #[inline(always)]
    pub fn rules(self) -> &'static Rules {
        // One load from a table in `Variant` order (the declaration order of the enum).
        static TABLE: [&Rules; Variant::ALL.len()] = [
            &INTERNATIONAL,
            &ENGLISH,
            &ITALIAN,
            &RUSSIAN,
            &BRAZILIAN,
            &SPANISH,
            &CZECH,
            &TURKISH,
            &ANTIDRAUGHTS,
            &BREAKTHROUGH,
            &KILLER,
            &POOL,
            &PORTUGUESE,
            &FRISIAN,
            &FRYSK,
            &CANADIAN,
        ];
        TABLE[self as usize]
    }

    /// The FEN of the start position.
    pub fn start_fen(self) -> &'static str {
        match self {
            Variant::International
            | Variant::Antidraughts
            | Variant::Breakthrough
            | Variant::Killer
            | Variant::Frisian => "W:W31-50:B1-20",
            Variant::Frysk => "W:W46-50:B1-5",
            Variant::Canadian => "W:W43-72:B1-30",
            Variant::English | Variant::Pool => "B:W21-32:B1-12",
            Variant::Turkish => {
                "W:Wa2,b2,c2,d2,e2,f2,g2,h2,a3,b3,c3,d3,e3,f3,g3,h3:Ba6,b6,c6,d6,e6,f6,g6,h6,a7,b7,c7,d7,e7,f7,g7,h7"
            }
            _ => "W:W21-32:B1-12",
        }
    }
}

impl Variant {
    /// The variant with this stable key, exactly as [`Variant::key`] writes it (lower case, no aliases): the
    /// lookup for stored and wire keys. [`FromStr`] also accepts aliases and PDN numbers, for user input.
    pub fn from_key(key: &str) -> Result<Variant, UnknownVariant> {
        Variant::ALL
            .into_iter()
            .find(|v| v.key() == key)
            .ok_or_else(|| UnknownVariant(key.to_string()))
    }

    /// The variant with this PDN `GameType` number (docs/rules.md §5.6).
    pub fn from_pdn_game_type(number: u8) -> Option<Variant> {
        Variant::ALL
            .into_iter()
            .find(|v| v.pdn_game_type() == number)
    }

    /// Whether a game scores two points (`2-0`, `1-1`) rather than one (`1-0`, `1/2-1/2`)
    /// (docs/rules.md §5.5): the FMJD-scored games, international, brazilian and the 10x10 variants
    /// (Frisian too, docs/rules.md §11.7), and canadian (international rules, docs/rules.md §12.2).
    pub fn scores_two_points(self) -> bool {
        matches!(
            self,
            Variant::International
                | Variant::Brazilian
                | Variant::Antidraughts
                | Variant::Breakthrough
                | Variant::Killer
                | Variant::Frisian
                | Variant::Frysk
                | Variant::Canadian
        )
    }

    /// Whether this is Frisian draughts or Frysk! (orthogonal captures, value precedence, the king-move
    /// limit: docs/rules.md §11).
    #[inline(always)]
    pub fn is_frisian(self) -> bool {
        matches!(self, Variant::Frisian | Variant::Frysk)
    }

    /// The result as PDN and the players write it for this variant (docs/rules.md §5.5), from White's side:
    /// `winner` is `None` for a draw. The one place that writes result notation.
    pub fn result_text(self, winner: Option<Color>) -> &'static str {
        match (self.scores_two_points(), winner) {
            (true, Some(Color::White)) => "2-0",
            (true, Some(Color::Black)) => "0-2",
            (true, None) => "1-1",
            (false, Some(Color::White)) => "1-0",
            (false, Some(Color::Black)) => "0-1",
            (false, None) => "1/2-1/2",
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// An unknown variant key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown variant '{0}' (expected one of: international, english, italian, russian, brazilian, spanish, czech, turkish, antidraughts, breakthrough, killer, pool, portuguese, frisian, frysk, canadian)"
)]
pub struct UnknownVariant(pub String);

impl FromStr for Variant {
    type Err = UnknownVariant;
    fn from_str(s: &str) -> Result<Variant, UnknownVariant> {
        let lower = s.trim().to_ascii_lowercase();
        let v = match lower.as_str() {
            "international" | "normal" | "10x10" | "20" => Variant::International,
            "english" | "american" | "checkers" | "21" => Variant::English,
            "italian" | "22" => Variant::Italian,
            "russian" | "25" => Variant::Russian,
            "brazilian" | "26" => Variant::Brazilian,
            "spanish" | "24" => Variant::Spanish,
            "czech" | "29" => Variant::Czech,
            "turkish" | "30" => Variant::Turkish,
            "antidraughts" | "losing" | "giveaway" => Variant::Antidraughts,
            "breakthrough" | "bt" => Variant::Breakthrough,
            "killer" => Variant::Killer,
            "pool" | "american-pool" | "23" => Variant::Pool,
            "portuguese" | "28" => Variant::Portuguese,
            "frisian" | "40" => Variant::Frisian,
            "frysk" | "frysk!" => Variant::Frysk,
            "canadian" | "12x12" | "27" => Variant::Canadian,
            _ => return Err(UnknownVariant(s.to_string())),
        };
        Ok(v)
    }
}

/// How a game is won (docs/rules.md §2.3, §9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Goal {
    /// The side with no pieces, or with no legal move on its turn, has lost.
    Normal,
    /// Antidraughts: the side with no pieces, or with no legal move on its turn, has WON.
    Lose,
    /// Breakthrough: the first side to crown a king wins (and, as always, a side with no move loses).
    FirstKing,
}

/// What happens when a man reaches the last row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Promotion {
    /// The man is crowned and the move ends, even if it could capture on (english, italian, spanish, czech).
    EndsMove,
    /// A man passing the last row in a chain stays a man; it is crowned only if the chain ends there
    /// (international, brazilian; turkish, where it may go on capturing sideways along the last row).
    AtEnd,
    /// The man is crowned at once and goes on capturing as a king (russian; the `promote-mid-capture` option).
    Continue,
}

/// When the captured pieces leave the board.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// Turkish strike: at the end of the move; they block their squares and can't be jumped twice.
    Strike,
    /// At once after each jump (turkish).
    Immediate,
}

/// Which captures a player may choose from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precedence {
    /// Any capture (russian, english).
    Free,
    /// Most pieces (kings count 1) (international, brazilian, turkish).
    MostPieces,
    /// Most pieces, then most kings (spanish).
    MostPiecesThenKings,
    /// Italian list: most pieces; with a king rather than a man; most kings; the king met earliest.
    Italian,
    /// If any king can capture, a king must capture; otherwise free (czech).
    KingFirst,
    /// Frisian: the highest value, a man 100 and a king 199 (n kings weigh more than 2n-1 men and less than
    /// 2n); at equal value a capture by a king (docs/rules.md §11.3).
    Frisian,
}

/// What resets the no-progress counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressReset {
    /// A capture or a man's move (only kings moving counts toward the draw).
    CaptureOrManMove,
    /// A capture or a promotion.
    CaptureOrPromotion,
}

/// The no-progress draw rule: `moves` moves by each side with no reset is a draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoProgress {
    pub moves: u16,
    pub reset: ProgressReset,
}

/// The endgame draw rule in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndgameRule {
    None,
    /// FMJD endgame rules: three pieces with a king against a lone king, 16 moves each; two pieces with
    /// a king (or one king) against a lone king, 5 moves each (docs/rules.md §4.3).
    Fmjd,
    /// Frisian: two kings against one king, 7 moves each; one king against one king, 2 moves each
    /// (docs/rules.md §11.6).
    Frisian,
}

/// The draw rules a game enforces (besides an agreed draw, always available).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrawRules {
    /// Threefold repetition of the same position with the same side to move.
    pub repetition: bool,
    pub no_progress: Option<NoProgress>,
    pub endgame: EndgameRule,
}

/// How moves are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotationStyle {
    /// PDN numbers: `32-28`, `28x19`.
    Numeric,
    /// Algebraic squares with this capture separator: `c3-d4`, `c3:e5`.
    Algebraic(char),
}

/// The rule parameters of one variant.
#[derive(Debug)]
pub struct Rules {
    pub variant: Variant,
    /// Board and numbering (docs/rules.md §3, column "board"; §5.1).
    pub board: BoardKind,
    /// docs/rules.md §3, column "first".
    pub first_to_move: Color,
    /// Pieces of each side in the start position (docs/rules.md §3, column "pieces"); no side can ever have
    /// more (docs/rules.md §8.1).
    pub pieces_per_side: u8,
    /// docs/rules.md §3, column "kings": flying (§3.3) or short (§3.4).
    pub flying_kings: bool,
    /// docs/rules.md §3, column "men capture": forward and backward, or forward (and sideways) only.
    pub men_capture_backward: bool,
    /// docs/rules.md §3, italian: a man may never capture a king.
    pub men_capture_kings: bool,
    /// docs/rules.md §3, column "promotion during a chain".
    pub promotion: Promotion,
    /// docs/rules.md §3, column "captured pieces" (§1, Turkish strike).
    pub removal: Removal,
    /// docs/rules.md §3, column "capture choice", and §3.1 (the Italian precedence list).
    pub precedence: Precedence,
    /// docs/rules.md §4 (draw rules).
    pub draw: DrawRules,
    /// docs/rules.md §2.3 and §9: how the game is won.
    pub goal: Goal,
    /// docs/rules.md §9.4, the killer rule: a king whose last captured piece is a king lands on the square
    /// directly behind it.
    pub killer: bool,
    /// docs/rules.md §5.
    pub notation: NotationStyle,
    /// docs/rules.md §11.2: men and kings also capture along ranks and files (over the dark squares two
    /// files or two ranks away).
    pub orthogonal_captures: bool,
    /// docs/rules.md §11.5: while its side has men, one king may make at most this many non-capturing
    /// moves in a row.
    pub king_move_limit: Option<u8>,
}

const KINGS_ONLY_25: Option<NoProgress> = Some(NoProgress {
    moves: 25,
    reset: ProgressReset::CaptureOrManMove,
});
const FORTY: Option<NoProgress> = Some(NoProgress {
    moves: 40,
    reset: ProgressReset::CaptureOrPromotion,
});
const FORTY_RULES: DrawRules = DrawRules {
    repetition: false,
    no_progress: FORTY,
    endgame: EndgameRule::None,
};

pub static INTERNATIONAL: Rules = Rules {
    variant: Variant::International,
    board: BoardKind::Ten,
    first_to_move: Color::White,
    pieces_per_side: 20,
    flying_kings: true,
    men_capture_backward: true,
    men_capture_kings: true,
    promotion: Promotion::AtEnd,
    removal: Removal::Strike,
    precedence: Precedence::MostPieces,
    draw: DrawRules {
        repetition: true,
        no_progress: KINGS_ONLY_25,
        endgame: EndgameRule::Fmjd,
    },
    goal: Goal::Normal,
    killer: false,
    notation: NotationStyle::Numeric,
    orthogonal_captures: false,
    king_move_limit: None,
};

pub static BRAZILIAN: Rules = Rules {
    variant: Variant::Brazilian,
    board: BoardKind::Eight,
    pieces_per_side: 12,
    notation: NotationStyle::Algebraic('x'),
    ..INTERNATIONAL
};

pub static RUSSIAN: Rules = Rules {
    variant: Variant::Russian,
    board: BoardKind::Eight,
    pieces_per_side: 12,
    promotion: Promotion::Continue,
    precedence: Precedence::Free,
    draw: DrawRules {
        repetition: true,
        no_progress: Some(NoProgress {
            moves: 15,
            reset: ProgressReset::CaptureOrManMove,
        }),
        endgame: EndgameRule::None,
    },
    notation: NotationStyle::Algebraic(':'),
    ..INTERNATIONAL
};

pub static ENGLISH: Rules = Rules {
    variant: Variant::English,
    board: BoardKind::Eight,
    first_to_move: Color::Black,
    pieces_per_side: 12,
    flying_kings: false,
    men_capture_backward: false,
    men_capture_kings: true,
    promotion: Promotion::EndsMove,
    // Removal at once and the strike give the same moves with short kings (a landing square can never be a
    // captured square), so the strike is used for every diagonal variant.
    removal: Removal::Strike,
    precedence: Precedence::Free,
    draw: FORTY_RULES,
    goal: Goal::Normal,
    killer: false,
    notation: NotationStyle::Numeric,
    orthogonal_captures: false,
    king_move_limit: None,
};

pub static ITALIAN: Rules = Rules {
    variant: Variant::Italian,
    board: BoardKind::EightMirrored,
    first_to_move: Color::White,
    men_capture_kings: false,
    precedence: Precedence::Italian,
    ..ENGLISH
};

pub static SPANISH: Rules = Rules {
    variant: Variant::Spanish,
    board: BoardKind::EightMirrored,
    first_to_move: Color::White,
    flying_kings: true,
    precedence: Precedence::MostPiecesThenKings,
    ..ENGLISH
};

pub static CZECH: Rules = Rules {
    variant: Variant::Czech,
    board: BoardKind::Eight,
    first_to_move: Color::White,
    flying_kings: true,
    precedence: Precedence::KingFirst,
    notation: NotationStyle::Algebraic(':'),
    ..ENGLISH
};

pub static TURKISH: Rules = Rules {
    variant: Variant::Turkish,
    board: BoardKind::Turkish,
    first_to_move: Color::White,
    pieces_per_side: 16,
    flying_kings: true,
    men_capture_backward: false,
    men_capture_kings: true,
    promotion: Promotion::AtEnd,
    removal: Removal::Immediate,
    precedence: Precedence::MostPieces,
    draw: DrawRules {
        repetition: true,
        no_progress: None,
        endgame: EndgameRule::None,
    },
    goal: Goal::Normal,
    killer: false,
    notation: NotationStyle::Algebraic('x'),
    orthogonal_captures: false,
    king_move_limit: None,
};

pub static ANTIDRAUGHTS: Rules = Rules {
    variant: Variant::Antidraughts,
    draw: DrawRules {
        repetition: true,
        no_progress: KINGS_ONLY_25,
        endgame: EndgameRule::None,
    },
    goal: Goal::Lose,
    ..INTERNATIONAL
};

pub static BREAKTHROUGH: Rules = Rules {
    variant: Variant::Breakthrough,
    // Without kings no position repeats and no king-only moves are played: no draw rule applies.
    draw: DrawRules {
        repetition: true,
        no_progress: None,
        endgame: EndgameRule::None,
    },
    goal: Goal::FirstKing,
    ..INTERNATIONAL
};

pub static KILLER: Rules = Rules {
    variant: Variant::Killer,
    // The killer rule exists to win two or three kings against one: the FMJD endgame rule is off.
    draw: DrawRules {
        repetition: true,
        no_progress: KINGS_ONLY_25,
        endgame: EndgameRule::None,
    },
    killer: true,
    ..INTERNATIONAL
};

pub static POOL: Rules = Rules {
    variant: Variant::Pool,
    board: BoardKind::Eight,
    pieces_per_side: 12,
    first_to_move: Color::Black,
    precedence: Precedence::Free,
    draw: DrawRules {
        repetition: true,
        no_progress: None,
        endgame: EndgameRule::None,
    },
    notation: NotationStyle::Numeric,
    ..INTERNATIONAL
};

pub static PORTUGUESE: Rules = Rules {
    variant: Variant::Portuguese,
    ..SPANISH
};

/// Frisian draughts (docs/rules.md §11): international's board, men, flying kings, promotion at the end of a
/// chain and strike, with orthogonal captures, the value precedence, the king-move limit and its own endgame
/// draws.
pub static FRISIAN: Rules = Rules {
    variant: Variant::Frisian,
    precedence: Precedence::Frisian,
    draw: DrawRules {
        repetition: true,
        no_progress: None,
        endgame: EndgameRule::Frisian,
    },
    orthogonal_captures: true,
    king_move_limit: Some(3),
    ..INTERNATIONAL
};

/// Frysk!: Frisian from five men a side on the first rows (docs/rules.md §11.8).
pub static FRYSK: Rules = Rules {
    variant: Variant::Frysk,
    pieces_per_side: 5,
    ..FRISIAN
};

/// Canadian draughts (docs/rules.md §12): every rule of international draughts on the 12x12 board, 30 men a
/// side.
pub static CANADIAN: Rules = Rules {
    variant: Variant::Canadian,
    board: BoardKind::Twelve,
    pieces_per_side: 30,
    ..INTERNATIONAL
};

/// House-rule options (docs/rules.md §7). An unset option (`None`, `false`) leaves the variant's rule.
///
/// The draw rules of §4 are each an option: threefold repetition on or off (`repetition`), the no-progress
/// count (`move_limit`: its length, progress as the variant defines it), a kings-only count (`kings_only`),
/// and the endgame counts on or off (`endgame_counts`).
///
/// ```
/// use draughts_engine::{RuleOptions, RuleSet, Variant};
///
/// let opts = RuleOptions::parse("repetition=off, kings-only=30, endgame-counts=off").unwrap();
/// let rules = RuleSet::with_options(Variant::International, opts).unwrap();
/// let draw = rules.draw_rules();
/// assert!(!draw.repetition);
/// assert_eq!(draw.no_progress.unwrap().moves, 30);
/// assert_eq!(rules.options().to_string(), "kings-only=30,repetition=off,endgame-counts=off");
/// // A kings-only count in breakthrough is refused: the first king ends the game.
/// assert!(RuleSet::with_options(Variant::Breakthrough, RuleOptions::parse("kings-only 25").unwrap()).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct RuleOptions {
    /// `no-mandatory-capture` (8x8 variants): a quiet move may be played instead of a capture.
    pub no_mandatory_capture: bool,
    /// `promote-mid-capture` (international, brazilian, turkish): a man reaching the last row in a chain is
    /// crowned at once and continues as a king.
    pub promote_mid_capture: bool,
    /// `move-limit N` (§7.2), the no-progress count: N moves by each side without progress is a draw,
    /// progress as the variant's own count defines it (a capture or a promotion in the §4.5 variants, a
    /// capture or a man move in the others); replaces the variant's count. 1 to 1000.
    pub move_limit: Option<NonZeroU16>,
    /// `kings-only N` (§7.4): N moves by each side with only kings moving and no capture is a draw (§4.2);
    /// replaces the variant's count (a game has one no-progress count, so it is refused together with
    /// `move_limit`). 1 to 1000; not in breakthrough.
    pub kings_only: Option<NonZeroU16>,
    /// `repetition=on|off` (§7.5): threefold repetition (§4.1) is a draw, or is not. Off is refused where
    /// the game would then have no count either (`OptionError::Endless`).
    pub repetition: Option<bool>,
    /// `endgame-counts=on|off` (§7.6): the endgame counts (§4.3 FMJD; §11.6 in frisian and frysk) on or
    /// off. On is refused where they make no sense: short kings, antidraughts, breakthrough.
    pub endgame_counts: Option<bool>,
}

/// The largest `move-limit` or `kings-only` count, in moves by each side.
pub const MAX_DRAW_COUNT: u16 = 1000;

/// A rule option that is malformed or does not apply to the variant.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    #[error(
        "unknown rule option '{0}' (expected no-mandatory-capture, promote-mid-capture, move-limit N, kings-only N, repetition=on|off or endgame-counts=on|off)"
    )]
    Unknown(String),
    #[error("move-limit needs a number of moves from 1 to 1000, got '{0}'")]
    BadMoveLimit(String),
    #[error("kings-only needs a number of moves from 1 to 1000, got '{0}'")]
    BadKingsOnly(String),
    #[error("{option} needs on or off, got '{value}'")]
    BadSwitch { option: &'static str, value: String },
    #[error("rule option '{option}' does not apply to {variant}: {why}")]
    NotApplicable {
        option: &'static str,
        variant: Variant,
        why: &'static str,
    },
    #[error(
        "move-limit and kings-only both set the no-progress count (a game has one); give one of them"
    )]
    Conflict,
    /// Threefold repetition off where the variant has no count: nothing would end a game in which
    /// nobody makes progress, so it could go on (and its record grow) for ever.
    #[error(
        "repetition=off leaves {0} without a rule that ends a game without progress; add move-limit N or kings-only N"
    )]
    Endless(Variant),
}

impl RuleOptions {
    /// Parses a comma- or space-separated list: `no-mandatory-capture, move-limit=40, repetition=off`.
    /// A value may follow its option after `=` or a space (`move-limit 40`, `kings-only=30`,
    /// `endgame-counts off`). An option given twice keeps the last value.
    pub fn parse(text: &str) -> Result<RuleOptions, OptionError> {
        let mut opts = RuleOptions::default();
        let mut tokens = text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|t| !t.is_empty())
            .peekable();
        while let Some(tok) = tokens.next() {
            opts.add(tok, &mut tokens)?;
        }
        Ok(opts)
    }

    fn add<'a>(
        &mut self,
        tok: &str,
        rest: &mut std::iter::Peekable<impl Iterator<Item = &'a str>>,
    ) -> Result<(), OptionError> {
        let lower = tok.to_ascii_lowercase();
        let (name, inline) = match lower.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (lower.as_str(), None),
        };
        let mut value = || {
            inline
                .map(str::to_owned)
                .or_else(|| rest.next().map(str::to_owned))
        };
        match name {
            "no-mandatory-capture" if inline.is_none() => self.no_mandatory_capture = true,
            "promote-mid-capture" if inline.is_none() => self.promote_mid_capture = true,
            "move-limit" => {
                let n = value().unwrap_or_default();
                self.move_limit = Some(parse_count(&n).ok_or(OptionError::BadMoveLimit(n))?);
            }
            "kings-only" => {
                let n = value().unwrap_or_default();
                self.kings_only = Some(parse_count(&n).ok_or(OptionError::BadKingsOnly(n))?);
            }
            "repetition" => self.repetition = Some(parse_switch("repetition", value())?),
            "endgame-counts" => {
                self.endgame_counts = Some(parse_switch("endgame-counts", value())?)
            }
            _ => return Err(OptionError::Unknown(tok.to_string())),
        }
        Ok(())
    }

    /// Checks that every option makes sense for the variant.
    pub fn validate(&self, variant: Variant) -> Result<(), OptionError> {
        let rules = variant.rules();
        let not_applicable = |option, why| {
            Err(OptionError::NotApplicable {
                option,
                variant,
                why,
            })
        };
        if self.no_mandatory_capture && matches!(rules.board, BoardKind::Ten | BoardKind::Twelve) {
            return not_applicable(
                "no-mandatory-capture",
                "it is a house rule of the 8x8 variants only",
            );
        }
        if self.promote_mid_capture {
            match rules.promotion {
                Promotion::Continue => {
                    return not_applicable(
                        "promote-mid-capture",
                        "a man reaching the last row already continues as a king",
                    );
                }
                Promotion::EndsMove => {
                    return not_applicable(
                        "promote-mid-capture",
                        "reaching the last row ends the move in this variant",
                    );
                }
                Promotion::AtEnd => {}
            }
        }
        // A value built in code (not parsed) gets the same bounds as parsed text.
        if let Some(n) = self.move_limit
            && n.get() > MAX_DRAW_COUNT
        {
            return Err(OptionError::BadMoveLimit(n.to_string()));
        }
        if let Some(n) = self.kings_only {
            if n.get() > MAX_DRAW_COUNT {
                return Err(OptionError::BadKingsOnly(n.to_string()));
            }
            if self.move_limit.is_some() {
                return Err(OptionError::Conflict);
            }
            if rules.goal == Goal::FirstKing {
                return not_applicable(
                    "kings-only",
                    "the first king crowned ends the game, so no king ever moves",
                );
            }
        }
        if self.endgame_counts == Some(true) {
            let why = match rules.goal {
                Goal::FirstKing => Some("the first king crowned ends the game"),
                Goal::Lose => Some(
                    "the counts protect a lone king defending a draw, and here the side with fewer pieces is ahead",
                ),
                Goal::Normal if !rules.flying_kings => Some(
                    "the counts are for flying kings; with short kings these endings are won by force",
                ),
                Goal::Normal => None,
            };
            if let Some(why) = why {
                return not_applicable("endgame-counts", why);
            }
        }
        // Every game must stay finite: with men, moves are irreversible; with kings only, a repetition or
        // a count ends it. (Breakthrough ends at the first king.)
        let draw = RuleSet {
            variant,
            options: *self,
        }
        .draw_rules();
        if !draw.repetition && draw.no_progress.is_none() && rules.goal != Goal::FirstKing {
            return Err(OptionError::Endless(variant));
        }
        Ok(())
    }
}

fn parse_count(n: &str) -> Option<NonZeroU16> {
    n.parse::<NonZeroU16>()
        .ok()
        .filter(|v| v.get() <= MAX_DRAW_COUNT)
}

fn parse_switch(option: &'static str, value: Option<String>) -> Result<bool, OptionError> {
    match value.as_deref() {
        Some("on") => Ok(true),
        Some("off") => Ok(false),
        _ => Err(OptionError::BadSwitch {
            option,
            value: value.unwrap_or_default(),
        }),
    }
}

impl fmt::Display for RuleOptions {
    /// The canonical option list, e.g. `no-mandatory-capture,move-limit=40,repetition=off` (empty when
    /// none), which [`RuleOptions::parse`] reads back. Stored records and queue payloads carry this text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.no_mandatory_capture {
            parts.push("no-mandatory-capture".to_string());
        }
        if self.promote_mid_capture {
            parts.push("promote-mid-capture".to_string());
        }
        if let Some(n) = self.move_limit {
            parts.push(format!("move-limit={n}"));
        }
        if let Some(n) = self.kings_only {
            parts.push(format!("kings-only={n}"));
        }
        let switch = |on: bool| if on { "on" } else { "off" };
        if let Some(on) = self.repetition {
            parts.push(format!("repetition={}", switch(on)));
        }
        if let Some(on) = self.endgame_counts {
            parts.push(format!("endgame-counts={}", switch(on)));
        }
        f.write_str(&parts.join(","))
    }
}

/// A variant together with validated options: everything move generation and the referee need.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RuleSet {
    variant: Variant,
    options: RuleOptions,
}

impl RuleSet {
    /// The variant with its default rules.
    pub fn new(variant: Variant) -> RuleSet {
        RuleSet {
            variant,
            options: RuleOptions::default(),
        }
    }

    /// The variant with options, checked.
    pub fn with_options(variant: Variant, options: RuleOptions) -> Result<RuleSet, OptionError> {
        options.validate(variant)?;
        Ok(RuleSet { variant, options })
    }

    pub fn variant(&self) -> Variant {
        self.variant
    }
    pub fn options(&self) -> RuleOptions {
        self.options
    }
    pub fn rules(&self) -> &'static Rules {
        self.variant.rules()
    }
    pub fn mandatory_capture(&self) -> bool {
        !self.options.no_mandatory_capture
    }
    /// The promotion rule in force (the variant's, or `Continue` under `promote-mid-capture`).
    pub fn promotion(&self) -> Promotion {
        if self.options.promote_mid_capture {
            Promotion::Continue
        } else {
            self.rules().promotion
        }
    }
    /// The draw rules in force: the variant's (docs/rules.md §4), with each draw-rule option that is set
    /// in its place (§7.2, §7.4-§7.6).
    pub fn draw_rules(&self) -> DrawRules {
        let mut d = self.rules().draw;
        let o = &self.options;
        if let Some(n) = o.move_limit {
            let reset = d
                .no_progress
                .map_or(ProgressReset::CaptureOrManMove, |p| p.reset);
            d.no_progress = Some(NoProgress {
                moves: n.get(),
                reset,
            });
        }
        if let Some(n) = o.kings_only {
            d.no_progress = Some(NoProgress {
                moves: n.get(),
                reset: ProgressReset::CaptureOrManMove,
            });
        }
        if let Some(on) = o.repetition {
            d.repetition = on;
        }
        match o.endgame_counts {
            Some(false) => d.endgame = EndgameRule::None,
            Some(true) if d.endgame == EndgameRule::None => d.endgame = EndgameRule::Fmjd,
            _ => {}
        }
        d
    }
}

impl From<Variant> for RuleSet {
    fn from(v: Variant) -> RuleSet {
        RuleSet::new(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_finds_its_own_rule_table() {
        for (i, v) in Variant::ALL.into_iter().enumerate() {
            assert_eq!(v as usize, i, "Variant::ALL is in declaration order");
            assert_eq!(v.rules().variant, v);
        }
    }
}
