//! The stored form of a live game and the pure rules of play around the engine: turns, clocks, draw
//! offers, aborts, results. No I/O here: [`super::service`] loads, calls these, and stores.
//!
//! Schema (JSON in the live store under `game:{<id>}` (a hash tag), field `v` = [`SCHEMA_VERSION`]): see [`GameRecord`].
//! It is read and rewritten on every move, so it is kept small: moves are compact ([`MoveRec`]) and
//! move events are not stored but merged in when the history is read ([`GameRecord::timeline`]). Readers ignore
//! unknown fields, so fields can be added without a version bump.

use draughts_engine::{
    Color, Count, DrawReason, Game, GameResult, GameStatus, Move, Position, RuleOptions, RuleSet,
    Variant, WinReason,
};
use draughts_proto::contract::finished::{EndReason, Outcome};
use draughts_proto::ids::GameId;
use draughts_proto::pb::ErrorReason;
use draughts_proto::vocab::player::Player;
use serde::{Deserialize, Serialize};

/// A time control as stored: the platform's one type ([`draughts_proto::vocab::time::TimeControl`],
/// the same JSON as this record wrote before: `{"kind":"fischer","base_ms","increment_ms"}` or
/// `{"kind":"correspondence","days_per_move"}`).
pub use draughts_proto::vocab::time::TimeControl as TimeControlRec;

/// One played move, compact (a game's record is read and written on every move): the squares stood
/// on as PDN numbers (origin first, so `p[0]` is the origin and the last the destination), the captured
/// squares in capture order, its text, when it was played and both clocks after it. Who moved follows
/// from the ply and the start position's side to move. Enough to replay the move against the legal
/// moves and to show it without a replay.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveRec {
    /// Path, PDN square numbers, origin first.
    #[serde(rename = "p")]
    pub path: Vec<u32>,
    /// Captured squares, PDN numbers, in capture order.
    #[serde(rename = "x", default, skip_serializing_if = "Vec::is_empty")]
    pub captured: Vec<u32>,
    /// The move as written (the variant's notation).
    #[serde(rename = "n")]
    pub text: String,
    /// When it was played (Unix ms).
    #[serde(rename = "t")]
    pub at_ms: u64,
    /// White's and Black's remaining time after it, ms.
    #[serde(rename = "w")]
    pub white_ms: u64,
    #[serde(rename = "b")]
    pub black_ms: u64,
    /// Whether the man was crowned.
    #[serde(rename = "k", default, skip_serializing_if = "std::ops::Not::not")]
    pub promotes: bool,
}

impl MoveRec {
    pub fn from(&self) -> u32 {
        self.path.first().copied().unwrap_or(0)
    }
    pub fn to(&self) -> u32 {
        self.path.last().copied().unwrap_or(0)
    }
}

/// Something that happened, in order; the history a watcher receives. The record stores every kind
/// but `Move` (each stored event carries `ply`, the number of moves played before it); the move events
/// are merged in by [`GameRecord::timeline`], so a game's history costs nothing per move.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventRec {
    Created {
        seq: u64,
        at_ms: u64,
    },
    Move {
        seq: u64,
        at_ms: u64,
        ply: u32,
    },
    DrawOffered {
        seq: u64,
        at_ms: u64,
        by: ColorRec,
        #[serde(default)]
        ply: u32,
    },
    DrawDeclined {
        seq: u64,
        at_ms: u64,
        by: ColorRec,
        #[serde(default)]
        ply: u32,
    },
    Finished {
        seq: u64,
        at_ms: u64,
        #[serde(default)]
        ply: u32,
    },
    /// This side went berserk ([`GameRecord::berserk`]). A new kind: a replica built before it
    /// cannot read a record holding one (it answers that game as corrupt), so every Games replica is
    /// upgraded before a tournaments replica creates games with berserk allowed (an older Games
    /// ignores the request's flag, and its games simply allow no berserk).
    Berserk {
        seq: u64,
        at_ms: u64,
        by: ColorRec,
        #[serde(default)]
        ply: u32,
    },
}

impl EventRec {
    pub fn seq(&self) -> u64 {
        match self {
            EventRec::Created { seq, .. }
            | EventRec::Move { seq, .. }
            | EventRec::DrawOffered { seq, .. }
            | EventRec::DrawDeclined { seq, .. }
            | EventRec::Finished { seq, .. }
            | EventRec::Berserk { seq, .. } => *seq,
        }
    }

    /// Moves played before this event (for a move event: its own ply, so it counts itself).
    pub fn ply(&self) -> u32 {
        match self {
            EventRec::Created { .. } => 0,
            EventRec::Move { ply, .. }
            | EventRec::DrawOffered { ply, .. }
            | EventRec::DrawDeclined { ply, .. }
            | EventRec::Finished { ply, .. }
            | EventRec::Berserk { ply, .. } => *ply,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ColorRec {
    White,
    Black,
}

impl From<Color> for ColorRec {
    fn from(c: Color) -> Self {
        match c {
            Color::White => ColorRec::White,
            Color::Black => ColorRec::Black,
        }
    }
}
impl From<ColorRec> for Color {
    fn from(c: ColorRec) -> Self {
        match c {
            ColorRec::White => Color::White,
            ColorRec::Black => Color::Black,
        }
    }
}

/// How a game ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultRec {
    /// Stored as its key (`white`, `black`, `draw` or `aborted`), as before it was typed.
    pub outcome: Outcome,
    /// Stored as its key (`no_pieces`, `resignation`, ...); a key this build does not know reads as
    /// [`EndReason::Other`].
    pub reason: EndReason,
    pub description: String,
}

/// A live game as stored (schema version 2; version 1, which stored move events and square names
/// per move, was replaced before any deployment and is refused as corrupt).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GameRecord {
    pub v: u32,
    /// Checked on read: every id Games wrote is one (generated, or an admin's checked choice).
    pub id: GameId,
    pub variant: String,
    /// Canonical option list (`no-mandatory-capture,move-limit=40`), empty for none.
    #[serde(default)]
    pub options: String,
    pub white: Player,
    pub black: Player,
    pub time: TimeControlRec,
    pub rated: bool,
    pub start_fen: String,
    /// The current position (normalised FEN), kept so that reads need no replay.
    #[serde(default)]
    pub fen: String,
    #[serde(default)]
    pub moves: Vec<MoveRec>,
    /// Remaining time of each side when the current turn started, ms.
    pub white_ms: u64,
    pub black_ms: u64,
    /// When the current turn started (Unix ms).
    pub turn_started_ms: u64,
    #[serde(default)]
    pub draw_offer: Option<ColorRec>,
    #[serde(default)]
    pub result: Option<ResultRec>,
    pub created_ms: u64,
    #[serde(default)]
    pub finished_ms: Option<u64>,
    /// Every event but the moves (see [`EventRec`]).
    #[serde(default)]
    pub events: Vec<EventRec>,
    /// Set once the finished game is in the durable store and on the finished-games stream.
    #[serde(default)]
    pub archived: bool,
    /// Time each side has for its first move (Fischer games), ms: clocks run only once both sides have
    /// moved, and a missed first move aborts the game.
    #[serde(default = "default_first_move_ms")]
    pub first_move_ms: u64,
    /// Each player may go berserk before their first move ([`GameRecord::berserk`]): set at creation
    /// by a tournament service for an arena that allows it, never by a player. Absent in older
    /// records: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub berserk_allowed: bool,
    /// White went berserk: half the base time, no increment for the rest of the game.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub white_berserk: bool,
    /// Black went berserk.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub black_berserk: bool,
}

/// A berserk side's time: half the base (lichess's arena berserk). The one definition of the
/// berserk clock: the tournaments service only scores it.
pub fn berserk_ms(base_ms: u64) -> u64 {
    base_ms / 2
}

/// Time for each side's first move unless the server is configured otherwise, ms.
pub const DEFAULT_FIRST_MOVE_MS: u64 = 30_000;

fn default_first_move_ms() -> u64 {
    DEFAULT_FIRST_MOVE_MS
}

/// The schema version written in `v`.
pub const SCHEMA_VERSION: u32 = 2;

/// Why an action is refused (mapped to gRPC codes by the service's error type).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlayError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Refused(String),
    /// A refusal the API names (`ErrorReason`, sent as a trailer), in its one English text.
    #[error("{}", draughts_proto::reason_text(*.0))]
    Denied(ErrorReason),
    #[error("only the game's players may do that")]
    NotAPlayer,
}

pub type PlayResult<T> = Result<T, PlayError>;

impl GameRecord {
    /// A new game (validated) at `now`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: GameId,
        rules: RuleSet,
        time: TimeControlRec,
        white: Player,
        black: Player,
        rated: bool,
        start: &Position,
        now: u64,
    ) -> PlayResult<GameRecord> {
        if white.id == black.id {
            return Err(PlayError::Invalid(
                "white and black must be different players".into(),
            ));
        }
        let game = Game::new(*start);
        if game.status() != GameStatus::Ongoing {
            return Err(PlayError::Invalid(
                "the start position is already decided".into(),
            ));
        }
        let initial = time.initial_ms();
        Ok(GameRecord {
            v: SCHEMA_VERSION,
            id,
            variant: rules.variant().key().to_string(),
            options: rules.options().to_string(),
            white,
            black,
            time,
            rated,
            start_fen: start.to_fen(),
            fen: start.to_fen(),
            moves: Vec::new(),
            white_ms: initial,
            black_ms: initial,
            turn_started_ms: now,
            draw_offer: None,
            result: None,
            created_ms: now,
            finished_ms: None,
            events: vec![EventRec::Created { seq: 1, at_ms: now }],
            archived: false,
            first_move_ms: DEFAULT_FIRST_MOVE_MS,
            berserk_allowed: false,
            white_berserk: false,
            black_berserk: false,
        })
    }

    pub fn rules(&self) -> PlayResult<RuleSet> {
        let variant = Variant::from_key(&self.variant).map_err(|_| {
            PlayError::Invalid(format!("stored game has unknown variant {}", self.variant))
        })?;
        let options =
            RuleOptions::parse(&self.options).map_err(|e| PlayError::Invalid(e.to_string()))?;
        RuleSet::with_options(variant, options).map_err(|e| PlayError::Invalid(e.to_string()))
    }

    pub fn start_position(&self) -> PlayResult<Position> {
        Position::from_fen(self.rules()?, &self.start_fen)
            .map_err(|e| PlayError::Invalid(e.to_string()))
    }

    /// Replays the moves into an engine game (draw-rule counters and repetitions included).
    pub fn replay(&self) -> PlayResult<Game> {
        let mut game = Game::new(self.start_position()?);
        let mut buffer = Vec::new();
        for (i, m) in self.moves.iter().enumerate() {
            let pos = *game.position();
            let mv = find_move(&pos, m, &mut buffer).ok_or_else(|| {
                PlayError::Invalid(format!(
                    "stored move {} ({}) no longer replays",
                    i + 1,
                    m.text
                ))
            })?;
            game.play(&mv)
                .map_err(|e| PlayError::Invalid(e.to_string()))?;
        }
        Ok(game)
    }

    pub fn is_over(&self) -> bool {
        self.result.is_some()
    }

    pub fn ply(&self) -> u32 {
        self.moves.len() as u32
    }

    pub fn color_of(&self, player_id: &str) -> Option<Color> {
        if self.white.id == player_id {
            Some(Color::White)
        } else if self.black.id == player_id {
            Some(Color::Black)
        } else {
            None
        }
    }

    /// The side to move, from the stored FEN (a replay only for records written without it).
    pub fn side_to_move(&self) -> PlayResult<Color> {
        match self.fen.as_bytes().first() {
            Some(b'W') => Ok(Color::White),
            Some(b'B') => Ok(Color::Black),
            _ => Ok(self.replay()?.position().side_to_move()),
        }
    }

    /// The current position, from the stored FEN (a replay only for records written without it).
    pub fn position(&self) -> PlayResult<Position> {
        if self.fen.is_empty() {
            return Ok(*self.replay()?.position());
        }
        Position::from_fen(self.rules()?, &self.fen).map_err(|e| PlayError::Invalid(e.to_string()))
    }

    /// The number of the latest event (moves included); the game's revision.
    pub fn last_seq(&self) -> u64 {
        (self.moves.len() + self.events.len()) as u64
    }

    fn next_seq(&self) -> u64 {
        self.last_seq() + 1
    }

    /// Every event in order, the stored ones merged with one `Move` event per move.
    pub fn timeline(&self) -> Vec<EventRec> {
        let mut out = Vec::with_capacity(self.moves.len() + self.events.len());
        let mut stored = self.events.iter().peekable();
        for ply in 0..=self.moves.len() as u32 {
            while let Some(e) = stored.next_if(|e| e.ply() <= ply) {
                out.push(e.clone());
            }
            if let Some(m) = self.moves.get(ply as usize) {
                out.push(EventRec::Move {
                    seq: out.len() as u64 + 1,
                    at_ms: m.at_ms,
                    ply: ply + 1,
                });
            }
        }
        out.extend(stored.cloned());
        out
    }

    /// The side that played stored move `index` (0-based).
    pub fn mover(&self, index: usize) -> Color {
        let first = if self.start_fen.starts_with('B') {
            Color::Black
        } else {
            Color::White
        };
        if index.is_multiple_of(2) {
            first
        } else {
            !first
        }
    }

    /// Whether `side` went berserk.
    pub fn is_berserk(&self, side: Color) -> bool {
        match side {
            Color::White => self.white_berserk,
            Color::Black => self.black_berserk,
        }
    }

    /// Whether `side` has made a move.
    fn has_moved(&self, side: Color) -> bool {
        (0..self.moves.len()).any(|i| self.mover(i) == side)
    }

    /// `player` goes berserk (lichess's arena berserk, `Clock.goBerserk`): their own remaining time
    /// becomes half the base ([`berserk_ms`]) and they get no increment for the rest of the game.
    /// Only in a game that allows it ([`GameRecord::berserk_allowed`], Fischer clocks), before that
    /// side's first move. Returns `false` (nothing changed) when the side is already berserk: once
    /// per side, and a repeat is harmless.
    pub fn berserk(&mut self, player: Color, now: u64) -> PlayResult<bool> {
        if self.is_berserk(player) {
            return Ok(false);
        }
        self.ensure_ongoing(now)?;
        if !self.berserk_allowed {
            return Err(PlayError::Refused(
                "berserk is only for games of an arena that allows it".into(),
            ));
        }
        let TimeControlRec::Fischer { base_ms, .. } = self.time else {
            return Err(PlayError::Refused("berserk needs a Fischer clock".into()));
        };
        if self.has_moved(player) {
            return Err(PlayError::Refused(
                "too late to go berserk: you have made your first move".into(),
            ));
        }
        // No clock has run for a side that has not moved: its time is the base, now halved.
        let half = berserk_ms(base_ms);
        match player {
            Color::White => {
                self.white_ms = half;
                self.white_berserk = true;
            }
            Color::Black => {
                self.black_ms = half;
                self.black_berserk = true;
            }
        }
        let seq = self.next_seq();
        let ply = self.ply();
        self.events.push(EventRec::Berserk {
            seq,
            at_ms: now,
            by: player.into(),
            ply,
        });
        Ok(true)
    }

    fn remaining(&self, side: Color) -> u64 {
        match side {
            Color::White => self.white_ms,
            Color::Black => self.black_ms,
        }
    }

    /// Whether a side has yet to make its first move: then no clock runs, and the game cannot be won
    /// or lost by anything but the rules on the board (a missed first move, a resignation or an agreed
    /// draw abort it).
    pub fn in_opening(&self) -> bool {
        self.moves.len() < 2
    }

    /// Whether the side to move's clock is running (Fischer games after both first moves).
    fn clock_runs(&self) -> bool {
        !self.in_opening() && matches!(self.time, TimeControlRec::Fischer { .. })
    }

    /// Whether the finished game counts for ratings: rated, with a result, and both sides moved.
    pub fn counts_for_rating(&self) -> bool {
        self.rated
            && self.moves.len() >= 2
            && self
                .result
                .as_ref()
                .is_some_and(|r| r.outcome != Outcome::Aborted)
    }

    /// Remaining time of each side at `now` (the side to move's clock runs). After the end: what each
    /// side had when the game ended.
    pub fn clocks_at(&self, side_to_move: Color, now: u64) -> (u64, u64) {
        if self.is_over() || !self.clock_runs() {
            return (self.white_ms, self.black_ms);
        }
        let spent = now.saturating_sub(self.turn_started_ms);
        match side_to_move {
            Color::White => (self.white_ms.saturating_sub(spent), self.black_ms),
            Color::Black => (self.white_ms, self.black_ms.saturating_sub(spent)),
        }
    }

    /// When the side to move's flag falls (Unix ms), for an ongoing game; before both sides have moved,
    /// when the side to move's time for its first move runs out.
    pub fn deadline(&self, side_to_move: Color) -> u64 {
        if self.in_opening() && matches!(self.time, TimeControlRec::Fischer { .. }) {
            return self.turn_started_ms + self.first_move_ms;
        }
        self.turn_started_ms + self.remaining(side_to_move)
    }

    /// While the side to move still has to make its first move in a Fischer game: when its time for
    /// it runs out (Unix ms); `None` otherwise.
    pub fn first_move_deadline(&self, side_to_move: Color) -> Option<u64> {
        (!self.is_over()
            && self.in_opening()
            && matches!(self.time, TimeControlRec::Fischer { .. }))
        .then(|| self.deadline(side_to_move))
    }

    fn finish(&mut self, result: ResultRec, now: u64) {
        // Settle the running clock, so that a finished game shows what each side had at the end.
        if self.clock_runs()
            && let Ok(side) = self.side_to_move()
        {
            let spent = now.saturating_sub(self.turn_started_ms);
            let clock = match side {
                Color::White => &mut self.white_ms,
                Color::Black => &mut self.black_ms,
            };
            *clock = clock.saturating_sub(spent);
        }
        self.turn_started_ms = now;
        let seq = self.next_seq();
        self.result = Some(result);
        self.finished_ms = Some(now);
        self.draw_offer = None;
        let ply = self.ply();
        self.events.push(EventRec::Finished {
            seq,
            at_ms: now,
            ply,
        });
    }

    /// Ends the game on time if the side to move's flag has fallen at `now`. Returns whether it did.
    pub fn check_flag(&mut self, now: u64) -> PlayResult<bool> {
        if self.is_over() {
            return Ok(false);
        }
        let side = self.side_to_move()?;
        if now < self.deadline(side) {
            return Ok(false);
        }
        if self.in_opening() {
            let description = format!("aborted: {} made no first move in time", title(side));
            self.finish(aborted(description), now);
            return Ok(true);
        }
        // Settle the clock of the side that ran out at zero.
        match side {
            Color::White => self.white_ms = 0,
            Color::Black => self.black_ms = 0,
        }
        let r = GameResult::Win {
            winner: !side,
            reason: WinReason::Time,
        };
        self.finish(result_rec(&r), now);
        Ok(true)
    }

    /// Plays `player`'s move (already resolved against the current position) at `now`.
    pub fn play(&mut self, player: Color, game: &mut Game, mv: &Move, now: u64) -> PlayResult<()> {
        if self.is_over() {
            return Err(PlayError::Denied(ErrorReason::GameOver));
        }
        let pos = *game.position();
        if pos.side_to_move() != player {
            return Err(PlayError::Denied(ErrorReason::NotYourTurn));
        }
        if self.check_flag(now)? {
            return Err(PlayError::Refused(
                "your time is up: the game is lost on time".into(),
            ));
        }
        let text = pos.move_to_text(mv);
        let board = pos.board();
        let (path, captured) = match pos.move_path(mv) {
            Some(p) => (
                p.path.iter().map(|s| board.number(*s)).collect(),
                p.captured.iter().map(|s| board.number(*s)).collect(),
            ),
            None => (
                vec![board.number(mv.from()), board.number(mv.to())],
                mv.captured().map(|s| board.number(s)).collect(),
            ),
        };
        game.play(mv)
            .map_err(|e| PlayError::Refused(e.to_string()))?;
        // Before both sides have moved no clock runs: the first moves cost no time and earn no increment.
        let spent = if self.clock_runs() {
            now.saturating_sub(self.turn_started_ms)
        } else {
            0
        };
        let berserk = self.is_berserk(player);
        let (increment, reset) = match self.time {
            // A berserk side gets no increment.
            TimeControlRec::Fischer { .. } if berserk => (0, None),
            TimeControlRec::Fischer { increment_ms, .. } if self.clock_runs() => {
                (increment_ms, None)
            }
            TimeControlRec::Fischer { .. } => (0, None),
            TimeControlRec::Correspondence { .. } => (0, Some(self.time.initial_ms())),
        };
        let clock = match player {
            Color::White => &mut self.white_ms,
            Color::Black => &mut self.black_ms,
        };
        *clock = reset.unwrap_or_else(|| clock.saturating_sub(spent) + increment);
        self.turn_started_ms = now;
        self.moves.push(MoveRec {
            path,
            captured,
            text,
            at_ms: now,
            white_ms: self.white_ms,
            black_ms: self.black_ms,
            promotes: mv.promotes(),
        });
        self.fen = game.position().to_fen();
        // A standing offer lapses when a move is played (except the offerer's own move).
        if self.draw_offer.is_some_and(|c| Color::from(c) != player) {
            self.draw_offer = None;
        }
        if let GameStatus::Finished(r) = game.status() {
            self.finish(result_rec(&r), now);
        }
        Ok(())
    }

    pub fn resign(&mut self, player: Color, now: u64) -> PlayResult<()> {
        self.ensure_ongoing(now)?;
        if self.in_opening() {
            let description = format!(
                "aborted: {} resigned before both sides moved",
                title(player)
            );
            self.finish(aborted(description), now);
            return Ok(());
        }
        let r = GameResult::Win {
            winner: !player,
            reason: WinReason::Resignation,
        };
        self.finish(result_rec(&r), now);
        Ok(())
    }

    pub fn offer_draw(&mut self, player: Color, now: u64) -> PlayResult<()> {
        self.ensure_ongoing(now)?;
        match self.draw_offer {
            Some(c) if Color::from(c) == player => {
                return Err(PlayError::Denied(ErrorReason::DrawAlreadyOffered));
            }
            Some(_) => return self.accept_draw(player, now),
            None => {}
        }
        self.draw_offer = Some(player.into());
        let seq = self.next_seq();
        let ply = self.ply();
        self.events.push(EventRec::DrawOffered {
            seq,
            at_ms: now,
            by: player.into(),
            ply,
        });
        Ok(())
    }

    pub fn accept_draw(&mut self, player: Color, now: u64) -> PlayResult<()> {
        self.ensure_ongoing(now)?;
        match self.draw_offer {
            Some(c) if Color::from(c) != player => {
                if self.in_opening() {
                    self.finish(
                        aborted("aborted: drawn by agreement before both sides moved".into()),
                        now,
                    );
                } else {
                    self.finish(result_rec(&GameResult::Draw(DrawReason::Agreement)), now);
                }
                Ok(())
            }
            _ => Err(PlayError::Refused(
                "there is no draw offer from your opponent to accept".into(),
            )),
        }
    }

    pub fn decline_draw(&mut self, player: Color, now: u64) -> PlayResult<()> {
        self.ensure_ongoing(now)?;
        match self.draw_offer {
            Some(c) if Color::from(c) != player => {
                self.draw_offer = None;
                let seq = self.next_seq();
                let ply = self.ply();
                self.events.push(EventRec::DrawDeclined {
                    seq,
                    at_ms: now,
                    by: player.into(),
                    ply,
                });
                Ok(())
            }
            _ => Err(PlayError::Refused(
                "there is no draw offer from your opponent to decline".into(),
            )),
        }
    }

    /// Cancels the game while each side has not yet moved (fewer than two plies).
    pub fn abort(&mut self, _player: Color, now: u64) -> PlayResult<()> {
        self.ensure_ongoing(now)?;
        if self.moves.len() >= 2 {
            return Err(PlayError::Refused(
                "too late to abort: both sides have moved".into(),
            ));
        }
        self.finish(aborted("aborted".into()), now);
        Ok(())
    }

    /// The caller claims the win because the opponent's time is up.
    pub fn claim_timeout(&mut self, player: Color, now: u64) -> PlayResult<()> {
        if self.is_over() {
            return Err(PlayError::Denied(ErrorReason::GameOver));
        }
        let side = self.side_to_move()?;
        if side == player {
            return Err(PlayError::Refused(
                "it is your turn: only the opponent's time can run out".into(),
            ));
        }
        if !self.check_flag(now)? {
            let left = self.deadline(side).saturating_sub(now);
            return Err(PlayError::Refused(format!(
                "your opponent still has {} ms",
                left
            )));
        }
        Ok(())
    }

    fn ensure_ongoing(&mut self, now: u64) -> PlayResult<()> {
        if self.is_over() {
            return Err(PlayError::Denied(ErrorReason::GameOver));
        }
        if self.check_flag(now)? {
            return Err(PlayError::Denied(ErrorReason::EndedOnTime));
        }
        Ok(())
    }
}

/// The legal move of `pos` that a stored move names: same origin, destination and captured squares
/// (a capture's path is not needed: the engine counts moves with the same captures as one).
fn find_move(pos: &Position, m: &MoveRec, buffer: &mut Vec<Move>) -> Option<Move> {
    let board = pos.board();
    buffer.clear();
    pos.legal_moves_into(buffer, Count::Unique);
    let (from, to) = (m.from(), m.to());
    buffer.iter().copied().find(|mv| {
        board.number(mv.from()) == from
            && board.number(mv.to()) == to
            && mv.captured().count() as usize == m.captured.len()
            && mv.captured().all(|s| m.captured.contains(&board.number(s)))
    })
}

/// `White` or `Black`.
fn title(side: Color) -> &'static str {
    match side {
        Color::White => "White",
        Color::Black => "Black",
    }
}

/// The stored form of an aborted game's result.
fn aborted(description: String) -> ResultRec {
    ResultRec {
        outcome: Outcome::Aborted,
        reason: EndReason::Aborted,
        description,
    }
}

/// The stored form of an engine result (the contract's one conversion).
pub fn result_rec(r: &GameResult) -> ResultRec {
    ResultRec {
        outcome: Outcome::of(r),
        reason: EndReason::of(r),
        description: r.describe(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn player(id: &str) -> Player {
        Player {
            name: id.into(),
            guest: true,
            ..Player::new(id.parse().unwrap())
        }
    }

    fn new_game(variant: Variant) -> (GameRecord, Game) {
        let start = Position::start(variant);
        let record = GameRecord::new(
            "g1".parse().unwrap(),
            RuleSet::new(variant),
            TimeControlRec::Fischer {
                base_ms: 60_000,
                increment_ms: 1_000,
            },
            player("guest:w"),
            player("guest:b"),
            false,
            &start,
            1_000,
        )
        .unwrap();
        (record, Game::new(start))
    }

    fn play(record: &mut GameRecord, game: &mut Game, text: &str, now: u64) {
        let mv = game.position().parse_move(text).unwrap();
        let side = game.position().side_to_move();
        record.play(side, game, &mv, now).unwrap();
    }

    /// Move events are merged in between the stored events in the order things happened, numbered
    /// 1, 2, 3, ... with no gap, and the revision is the last number.
    #[test]
    fn timeline_merges_moves_with_stored_events_in_order() {
        let (mut r, mut g) = new_game(Variant::English);
        play(&mut r, &mut g, "11-15", 2_000);
        r.offer_draw(Color::White, 2_500).unwrap();
        r.decline_draw(Color::Black, 2_600).unwrap();
        play(&mut r, &mut g, "23-19", 3_000);
        play(&mut r, &mut g, "8-11", 4_000);
        r.offer_draw(Color::Black, 4_100).unwrap();
        r.resign(Color::White, 5_000).unwrap();
        let kinds: Vec<(u64, &str, u32)> = r
            .timeline()
            .iter()
            .map(|e| {
                let kind = match e {
                    EventRec::Created { .. } => "created",
                    EventRec::Move { .. } => "move",
                    EventRec::DrawOffered { .. } => "offer",
                    EventRec::DrawDeclined { .. } => "decline",
                    EventRec::Finished { .. } => "finished",
                    EventRec::Berserk { .. } => "berserk",
                };
                (e.seq(), kind, e.ply())
            })
            .collect();
        assert_eq!(
            kinds,
            [
                (1, "created", 0),
                (2, "move", 1),
                (3, "offer", 1),
                (4, "decline", 1),
                (5, "move", 2),
                (6, "move", 3),
                (7, "offer", 3),
                (8, "finished", 3),
            ]
        );
        assert_eq!(r.last_seq(), 8);
        assert_eq!(r.events.len(), 5, "no move event is stored");
        assert_eq!(r.mover(0), Color::Black, "english: Black moves first");
        assert_eq!(r.mover(1), Color::White);
    }

    /// The record round-trips through its JSON, replays to the same game, and a move costs well under
    /// a hundred bytes of it.
    /// Results as records stored them before outcome and reason were typed (strings written by
    /// `result_rec`) read as the typed values and are written back byte for byte.
    #[test]
    fn stored_results_of_the_string_format_still_read() {
        let cases = [
            (
                r#"{"outcome":"white","reason":"resignation","description":"Black resigned"}"#,
                Outcome::WhiteWins,
                EndReason::Resignation,
            ),
            (
                r#"{"outcome":"black","reason":"gave_away_all_pieces","description":"x"}"#,
                Outcome::BlackWins,
                EndReason::GaveAwayAllPieces,
            ),
            (
                r#"{"outcome":"draw","reason":"endgame_rule","description":"x"}"#,
                Outcome::Draw,
                EndReason::EndgameRule,
            ),
            (
                r#"{"outcome":"aborted","reason":"aborted","description":"x"}"#,
                Outcome::Aborted,
                EndReason::Aborted,
            ),
        ];
        for (json, outcome, reason) in cases {
            let result: ResultRec = serde_json::from_str(json).unwrap();
            assert_eq!((result.outcome, result.reason), (outcome, reason), "{json}");
            assert_eq!(serde_json::to_string(&result).unwrap(), json);
        }
        let later: ResultRec =
            serde_json::from_str(r#"{"outcome":"draw","reason":"meteor","description":""}"#)
                .unwrap();
        assert_eq!(later.reason, EndReason::Other);
        let engine = GameResult::Win {
            winner: Color::Black,
            reason: WinReason::Time,
        };
        let stored = result_rec(&engine);
        assert_eq!(
            (stored.outcome.key(), stored.reason.key()),
            ("black", "time")
        );
    }

    /// An arena game (berserk allowed), english: Black moves first. 60 s + 1 s.
    fn arena_game() -> (GameRecord, Game) {
        let (mut r, g) = new_game(Variant::English);
        r.berserk_allowed = true;
        (r, g)
    }

    #[test]
    fn berserk_halves_the_own_clock_and_drops_the_increment() {
        let (mut r, mut g) = arena_game();
        assert_eq!(r.berserk(Color::Black, 1_500), Ok(true));
        assert_eq!((r.white_ms, r.black_ms), (60_000, 30_000));
        assert!(r.black_berserk && !r.white_berserk, "never the opponent");
        // Repeated: nothing changes, no second event.
        let events = r.events.len();
        assert_eq!(r.berserk(Color::Black, 1_600), Ok(false));
        assert_eq!((r.events.len(), r.black_ms), (events, 30_000));
        // First moves cost nothing; then Black spends 2 s and gets no increment, White spends 3 s
        // and gets its 1 s.
        play(&mut r, &mut g, "11-15", 2_000);
        play(&mut r, &mut g, "23-19", 3_000);
        play(&mut r, &mut g, "8-11", 5_000);
        assert_eq!(r.black_ms, 28_000);
        play(&mut r, &mut g, "22-17", 8_000);
        assert_eq!(r.white_ms, 58_000);
        assert_eq!(r.moves[2].black_ms, 28_000);
        // The watchers' history has the berserk event before the first move.
        let kinds: Vec<(u64, u32, bool)> = r
            .timeline()
            .iter()
            .map(|e| {
                (
                    e.seq(),
                    e.ply(),
                    matches!(
                        e,
                        EventRec::Berserk {
                            by: ColorRec::Black,
                            ..
                        }
                    ),
                )
            })
            .collect();
        assert_eq!(kinds[..3], [(1, 0, false), (2, 0, true), (3, 1, false)]);
        assert_eq!(r.last_seq(), 6);
    }

    #[test]
    fn berserk_is_refused_after_the_first_move_and_outside_arenas() {
        let (mut r, mut g) = arena_game();
        play(&mut r, &mut g, "11-15", 2_000);
        assert!(matches!(
            r.berserk(Color::Black, 2_500),
            Err(PlayError::Refused(m)) if m.contains("first move")
        ));
        // White has not moved yet: it may still go berserk, after Black's first move.
        assert_eq!(r.berserk(Color::White, 2_600), Ok(true));
        assert_eq!((r.white_ms, r.black_ms), (30_000, 60_000));
        play(&mut r, &mut g, "23-19", 3_000);
        assert!(!r.black_berserk);
        // A game not from an arena that allows it.
        let (mut casual, _) = new_game(Variant::English);
        assert!(matches!(
            casual.berserk(Color::Black, 1_500),
            Err(PlayError::Refused(m)) if m.contains("arena")
        ));
        assert_eq!((casual.black_ms, casual.black_berserk), (60_000, false));
        // Over: refused.
        let (mut over, _) = arena_game();
        over.abort(Color::White, 1_200).unwrap();
        assert!(over.berserk(Color::White, 1_300).is_err());
    }

    /// Records written before berserk existed read as "not allowed, nobody berserk", and records of
    /// games without berserk are written as before (no new fields).
    #[test]
    fn records_without_berserk_fields_still_read() {
        let (r, _) = new_game(Variant::English);
        let json = serde_json::to_string(&r).unwrap();
        assert!(!json.contains("berserk"), "{json}");
        let back: GameRecord = serde_json::from_str(&json).unwrap();
        assert!(!back.berserk_allowed && !back.white_berserk && !back.black_berserk);
        let (mut a, _) = arena_game();
        a.berserk(Color::White, 1_100).unwrap();
        let back: GameRecord = serde_json::from_slice(&serde_json::to_vec(&a).unwrap()).unwrap();
        assert_eq!(back, a);
    }

    /// Berserk is kept per colour in the live record, never on its sides (the platform's player
    /// type has the field for the finished entry's sides): the sides' JSON is as before.
    #[test]
    fn berserk_is_kept_per_colour_not_on_the_sides() {
        let (mut a, _) = arena_game();
        a.berserk(Color::White, 1_100).unwrap();
        assert!(a.white_berserk && !a.white.berserk && !a.black.berserk);
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json["white_berserk"], true);
        assert!(json["white"].get("berserk").is_none(), "{json}");
    }

    #[test]
    fn record_round_trips_and_moves_are_compact() {
        let (mut r, mut g) = new_game(Variant::International);
        let before = serde_json::to_vec(&r).unwrap().len();
        let mut now = 2_000;
        for text in ["32-28", "19-23", "28x19", "14x23"] {
            now += 1_000;
            play(&mut r, &mut g, text, now);
        }
        let bytes = serde_json::to_vec(&r).unwrap();
        let per_move = (bytes.len() - before) / 4;
        assert!(per_move < 100, "{per_move} bytes per move");
        let back: GameRecord = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, r);
        let replayed = back.replay().unwrap();
        assert_eq!(replayed.position(), g.position());
        assert_eq!(back.moves[2].path, [28, 19]);
        assert_eq!(back.moves[2].captured, [23]);
        assert_eq!(back.position().unwrap(), *g.position());
    }
    /// A finished game's record as Games wrote it before ids were typed (against the computer, a
    /// draw offer, a resignation): it reads, its ids are checked, and it writes back byte for byte.
    const RECORD_BEFORE_TYPED_IDS: &str = r#"{"v":2,"id":"g19ae2b3c4d5e6f70123","variant":"english","options":"","white":{"id":"user:0123456789abcdef0123","name":"Ann","guest":false,"computer":false},"black":{"id":"ai:3","name":"Computer level 3","guest":false,"computer":true},"time":{"kind":"fischer","base_ms":60000,"increment_ms":1000},"rated":false,"start_fen":"B:W21,22,23,24,25,26,27,28,29,30,31,32:B1,2,3,4,5,6,7,8,9,10,11,12","fen":"B:W19,21,22,24,25,26,27,28,29,30,31,32:B1,2,3,4,5,6,7,8,9,10,12,15","moves":[{"p":[11,15],"n":"11-15","t":1764900001000,"w":60000,"b":60000},{"p":[23,19],"n":"23-19","t":1764900002000,"w":60000,"b":60000}],"white_ms":60000,"black_ms":58000,"turn_started_ms":1764900004000,"draw_offer":null,"result":{"outcome":"white","reason":"resignation","description":"white wins: black resigned"},"created_ms":1764900000000,"finished_ms":1764900004000,"events":[{"kind":"created","seq":1,"at_ms":1764900000000},{"kind":"draw_offered","seq":4,"at_ms":1764900003000,"by":"white","ply":2},{"kind":"finished","seq":5,"at_ms":1764900004000,"ply":2}],"archived":false,"first_move_ms":30000}"#;

    #[test]
    fn records_written_before_typed_ids_read_and_write_back_byte_for_byte() {
        use draughts_proto::ids::PlayerKind;
        let record: GameRecord = serde_json::from_str(RECORD_BEFORE_TYPED_IDS).unwrap();
        assert_eq!(record.id.as_str(), "g19ae2b3c4d5e6f70123");
        assert_eq!(record.white.id.kind(), PlayerKind::Account);
        assert_eq!(record.black.id.computer_level(), Some(3));
        assert_eq!(record.color_of("ai:3"), Some(Color::Black));
        assert_eq!(
            serde_json::to_string(&record).unwrap(),
            RECORD_BEFORE_TYPED_IDS
        );
        assert_eq!(
            record.replay().unwrap().position(),
            &record.position().unwrap()
        );

        // Until 2026-12-01 Games took player ids as the client wrote them, and a subject with white
        // space from the identity provider: such records read, as legacy ids, unchanged.
        let day_one = RECORD_BEFORE_TYPED_IDS
            .replace("user:0123456789abcdef0123", "bob")
            .replace(r#""ai:3""#, r#""player:Ann Smith""#);
        let old: GameRecord = serde_json::from_str(&day_one).unwrap();
        assert_eq!(
            (old.white.id.kind(), old.black.id.kind()),
            (PlayerKind::Legacy, PlayerKind::Legacy)
        );
        assert_eq!(old.color_of("bob"), Some(Color::White));
        assert_eq!(serde_json::to_string(&old).unwrap(), day_one);

        // What no writer stored is refused: a malformed game id, an empty or control-character id.
        for bad in [
            RECORD_BEFORE_TYPED_IDS.replace("g19ae2b3c4d5e6f70123", "g19 ae2"),
            RECORD_BEFORE_TYPED_IDS.replace("user:0123456789abcdef0123", ""),
            RECORD_BEFORE_TYPED_IDS.replace("user:0123456789abcdef0123", "a\\u0000b"),
        ] {
            let error = serde_json::from_str::<GameRecord>(&bad).unwrap_err();
            assert!(error.to_string().contains("id"), "{bad}: {error}");
        }
    }
}
