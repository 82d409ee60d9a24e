//! Conversions between wire messages and engine types. Serialization lives here, at the edge; the engine
//! knows nothing of protobuf.

use draughts_engine::{
    Color, GameStatus, MAX_DRAW_COUNT, Move, MoveText, Piece, Position, ResolveError, Role,
    RuleOptions, RuleSet, SquareRef, Variant,
};
use std::num::NonZeroU16;

use crate::error::ApiError;
use crate::pb;

/// Wire variant -> engine variant.
pub fn variant(v: i32) -> Result<Variant, ApiError> {
    let v = pb::Variant::try_from(v)
        .map_err(|_| ApiError::InvalidArgument(format!("unknown variant number {v}")))?;
    Ok(match v {
        pb::Variant::Unspecified => {
            return Err(ApiError::InvalidArgument(
                "rules.variant is required (international, english, italian, russian, brazilian, spanish, czech, turkish, antidraughts, breakthrough, killer, pool, portuguese, frisian, frysk or canadian)".into(),
            ));
        }
        pb::Variant::International => Variant::International,
        pb::Variant::English => Variant::English,
        pb::Variant::Italian => Variant::Italian,
        pb::Variant::Russian => Variant::Russian,
        pb::Variant::Brazilian => Variant::Brazilian,
        pb::Variant::Spanish => Variant::Spanish,
        pb::Variant::Czech => Variant::Czech,
        pb::Variant::Turkish => Variant::Turkish,
        pb::Variant::Antidraughts => Variant::Antidraughts,
        pb::Variant::Breakthrough => Variant::Breakthrough,
        pb::Variant::Killer => Variant::Killer,
        pb::Variant::Pool => Variant::Pool,
        pb::Variant::Portuguese => Variant::Portuguese,
        pb::Variant::Frisian => Variant::Frisian,
        pb::Variant::Frysk => Variant::Frysk,
        pb::Variant::Canadian => Variant::Canadian,
    })
}

/// Engine variant -> wire variant.
pub fn variant_to_wire(v: Variant) -> pb::Variant {
    match v {
        Variant::International => pb::Variant::International,
        Variant::English => pb::Variant::English,
        Variant::Italian => pb::Variant::Italian,
        Variant::Russian => pb::Variant::Russian,
        Variant::Brazilian => pb::Variant::Brazilian,
        Variant::Spanish => pb::Variant::Spanish,
        Variant::Czech => pb::Variant::Czech,
        Variant::Turkish => pb::Variant::Turkish,
        Variant::Antidraughts => pb::Variant::Antidraughts,
        Variant::Breakthrough => pb::Variant::Breakthrough,
        Variant::Killer => pb::Variant::Killer,
        Variant::Pool => pb::Variant::Pool,
        Variant::Portuguese => pb::Variant::Portuguese,
        Variant::Frisian => pb::Variant::Frisian,
        Variant::Frysk => pb::Variant::Frysk,
        Variant::Canadian => pb::Variant::Canadian,
    }
}

/// Wire rules (required) -> validated rule set.
pub fn rule_set(rules: Option<&pb::RuleSet>) -> Result<RuleSet, ApiError> {
    let rules = rules.ok_or_else(|| ApiError::InvalidArgument("rules are required".into()))?;
    let variant = variant(rules.variant)?;
    let options = rules
        .options
        .as_ref()
        .map(options)
        .transpose()?
        .unwrap_or_default();
    Ok(RuleSet::with_options(variant, options)?)
}

fn options(o: &pb::RuleOptions) -> Result<RuleOptions, ApiError> {
    // 0 = unset (the variant's rule); otherwise 1..MAX_DRAW_COUNT.
    let count = |n: u32, field: &str| {
        match n {
        0 => Ok(None),
        n => u16::try_from(n)
            .ok()
            .filter(|n| *n <= MAX_DRAW_COUNT)
            .and_then(NonZeroU16::new)
            .map(Some)
            .ok_or_else(|| {
                ApiError::InvalidArgument(format!(
                    "rules.options.{field} must be from 1 to {MAX_DRAW_COUNT} (0 = the variant's rule), got {n}"
                ))
            }),
    }
    };
    Ok(RuleOptions {
        no_mandatory_capture: o.no_mandatory_capture,
        promote_mid_capture: o.promote_mid_capture,
        move_limit: count(o.move_limit, "move_limit")?,
        kings_only: count(o.kings_only_limit, "kings_only_limit")?,
        repetition: o.repetition,
        endgame_counts: o.endgame_counts,
    })
}

/// Engine rule set -> wire rules.
pub fn rules_to_wire(rules: RuleSet) -> pb::RuleSet {
    let o = rules.options();
    let count = |n: Option<NonZeroU16>| n.map_or(0, |n| u32::from(n.get()));
    pb::RuleSet {
        variant: variant_to_wire(rules.variant()) as i32,
        options: Some(pb::RuleOptions {
            no_mandatory_capture: o.no_mandatory_capture,
            promote_mid_capture: o.promote_mid_capture,
            move_limit: count(o.move_limit),
            kings_only_limit: count(o.kings_only),
            repetition: o.repetition,
            endgame_counts: o.endgame_counts,
        }),
    }
}

/// A FEN (empty = start position) for a rule set.
pub fn position(rules: RuleSet, fen: &str) -> Result<Position, ApiError> {
    if fen.trim().is_empty() {
        Ok(Position::start(rules))
    } else {
        Ok(Position::from_fen(rules, fen)?)
    }
}

pub fn color_to_wire(c: Color) -> pb::Color {
    match c {
        Color::White => pb::Color::White,
        Color::Black => pb::Color::Black,
    }
}

/// Wire colour (required) -> engine colour.
pub fn color(c: i32, field: &str) -> Result<Color, ApiError> {
    match pb::Color::try_from(c) {
        Ok(pb::Color::White) => Ok(Color::White),
        Ok(pb::Color::Black) => Ok(Color::Black),
        _ => Err(ApiError::InvalidArgument(format!(
            "{field} must be white or black"
        ))),
    }
}

/// Engine position -> wire position with the FEN and side to move only (no piece list).
pub fn position_fen_to_wire(pos: &Position) -> pb::Position {
    pb::Position {
        fen: pos.to_fen(),
        side_to_move: color_to_wire(pos.side_to_move()) as i32,
        pieces: Vec::new(),
    }
}

/// Engine position -> wire position (normalised FEN and the piece list).
pub fn position_to_wire(pos: &Position) -> pb::Position {
    let board = pos.board();
    let pieces = board
        .squares()
        .filter_map(|sq| {
            pos.piece_at(sq)
                .map(|Piece { color, role }| pb::PlacedPiece {
                    square: board.algebraic(sq).to_string(),
                    number: board.number(sq),
                    color: color_to_wire(color) as i32,
                    kind: match role {
                        Role::Man => pb::PieceKind::Man,
                        Role::King => pb::PieceKind::King,
                    } as i32,
                })
        })
        .collect();
    pb::Position {
        fen: pos.to_fen(),
        side_to_move: color_to_wire(pos.side_to_move()) as i32,
        pieces,
    }
}

/// A square's algebraic name, built without the formatting machinery (hot in every response).
pub fn square_name(board: &draughts_engine::Board, sq: draughts_engine::Square) -> String {
    let (file, rank) = board.coords(sq);
    let mut s = String::with_capacity(3);
    s.push((b'a' + file) as char);
    let rank = rank + 1;
    if rank >= 10 {
        s.push((b'0' + rank / 10) as char);
    }
    s.push((b'0' + rank % 10) as char);
    s
}

/// A legal move of `pos` -> wire move, with the position's move paths already computed.
pub fn move_to_wire_in(pos: &Position, mv: &Move, paths: &[draughts_engine::MovePath]) -> pb::Move {
    let board = pos.board();
    let name = |sq| square_name(board, sq);
    let (path, captured) = match paths.iter().find(|p| p.mv == *mv) {
        Some(p) => (
            p.path.iter().map(|s| name(*s)).collect(),
            p.captured.iter().map(|s| name(*s)).collect(),
        ),
        None => (vec![name(mv.from()), name(mv.to())], Vec::new()),
    };
    pb::Move {
        notation: pos.move_to_text_in(mv, paths),
        from: name(mv.from()),
        to: name(mv.to()),
        path,
        captured,
        promotes: mv.promotes(),
    }
}

/// A legal move of `pos` -> wire move (notation, squares, path, captured).
pub fn move_to_wire(pos: &Position, mv: &Move) -> pb::Move {
    move_to_wire_in(pos, mv, &pos.move_paths())
}

/// Resolves a wire move against a position: text, or squares (origin, landings, destination).
pub fn resolve_move(pos: &Position, input: Option<&pb::MoveInput>) -> Result<Move, ResolveError> {
    resolve_move_in(pos, input, &pos.move_paths())
}

/// [`resolve_move`] with the position's move paths already computed.
pub fn resolve_move_in(
    pos: &Position,
    input: Option<&pb::MoveInput>,
    paths: &[draughts_engine::MovePath],
) -> Result<Move, ResolveError> {
    use pb::move_input::Move as M;
    let malformed = |text: &str, reason| {
        ResolveError::Malformed(draughts_engine::MoveTextError {
            text: text.chars().take(60).collect(),
            reason,
        })
    };
    match input.and_then(|i| i.r#move.as_ref()) {
        None => Err(malformed("", "a move is required (text or squares)")),
        Some(M::Text(text)) => text.parse::<MoveText>()?.resolve_in(pos, paths),
        Some(M::Squares(s)) => {
            if s.squares.len() < 2 || s.squares.len() > 64 {
                return Err(malformed(
                    &s.squares.join(","),
                    "give from 2 to 64 squares: origin, landings, destination",
                ));
            }
            let squares = s
                .squares
                .iter()
                .map(|t| SquareRef::parse(t.trim()))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    malformed(
                        &s.squares.join(","),
                        "a square must be a number like 32 or a name like c3",
                    )
                })?;
            // Not requiring a capture matches both quiet moves and captures by their squares.
            MoveText {
                squares,
                capture: false,
            }
            .resolve_in(pos, paths)
        }
    }
}

/// Engine game status -> wire status.
pub fn status_to_wire(status: GameStatus, pos: &Position) -> pb::GameStatus {
    match status {
        GameStatus::Ongoing => pb::GameStatus {
            outcome: pb::Outcome::Ongoing as i32,
            reason: pb::EndReason::Unspecified as i32,
            description: format!("ongoing, {} to move", pos.side_to_move().name()),
            result: "*".into(),
        },
        GameStatus::Finished(r) => {
            // The one conversion of an engine result (the finished contract's).
            let outcome = crate::contract::finished::Outcome::of(&r).to_wire();
            let reason = crate::contract::finished::EndReason::of(&r).to_wire();
            pb::GameStatus {
                outcome: outcome as i32,
                reason: reason as i32,
                description: r.describe(),
                result: r.result_text(pos.variant()).into(),
            }
        }
    }
}

/// The wire rejection of a move-resolution error.
pub fn rejection(e: &ResolveError) -> pb::MoveRejection {
    match e {
        ResolveError::Malformed(_) => pb::MoveRejection::Malformed,
        ResolveError::Illegal { .. } => pb::MoveRejection::Illegal,
        ResolveError::Ambiguous { .. } => pb::MoveRejection::Ambiguous,
    }
}
