//! Standings of one event: every entrant's points and games, applied one finished game at a time, and
//! the table with tie-breaks and ranks.
//!
//! [`apply_result`] is a pure function of the state and a result, idempotent per game id: the state
//! remembers the ids it has applied, and a result whose id is known changes nothing, whatever its
//! content (the first delivery wins). The service keeps the state (with those ids) as one value, so
//! that a `games.finished` event delivered twice, or replayed after a crash, counts once.
//!
//! Points: arenas count [`ArenaSheet`] points (lichess's scoring, see `arena`); Swiss events count
//! half-points: a win 2, a draw 1, a loss 0, and a bye as a win (2), as FIDE's pairing-allocated bye
//! (C.04.1 c: "as many points as rewarded for a win") and lichess's Swiss do.
//!
//! A player who did not make the first move ([`Outcome::NoFirstMove`]) loses the game and is paused:
//! not paired until they come back ([`resume`] or [`join`]). In a Swiss event the game is a forfeit:
//! the opponent scores a win, neither colour counts for the colour rules, and the two are not paired
//! again (a simplification of C.04.1: FIDE would let them meet again).
//!
//! Late entries start with no points for the rounds they missed (lichess's Swiss; FIDE leaves the
//! choice to the organiser, who may give half-point byes instead). Withdrawals ([`leave`] in a Swiss
//! event) keep their games and points in the table but are paired no more.
//!
//! Tie-breaks (Swiss; FIDE handbook C.07, simplified: unplayed rounds contribute nothing, no virtual
//! opponent):
//! - Buchholz: the sum of the points of the opponents met;
//! - Buchholz cut-1: the same without the lowest of them;
//! - Sonneborn-Berger: the points of the opponents beaten, plus half the points of those drawn.
//!
//! The table ranks by points, then the event's tie-breaks in order ([`SwissRules::tie_breaks`];
//! arenas: points only, as lichess shows them); players equal on all of them share a rank ("3, 3, 5").

use std::collections::{BTreeMap, HashSet};

use draughts_proto::ids::GameId;

use crate::arena::{self, ArenaGame, ArenaPlayer, ArenaRules, ArenaSheet, LastOpponents};
use crate::swiss::{SwissPlayer, SwissRound};
use crate::{Colour, PlayerRef};

/// A Swiss tie-break.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TieBreak {
    Buchholz,
    BuchholzCut1,
    SonnebornBerger,
}

/// Settings of a Swiss event's standings.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SwissRules {
    /// Applied in this order after points.
    pub tie_breaks: Vec<TieBreak>,
}

impl Default for SwissRules {
    fn default() -> SwissRules {
        SwissRules {
            tie_breaks: vec![TieBreak::Buchholz, TieBreak::SonnebornBerger],
        }
    }
}

/// The kind of event.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Format {
    Arena(ArenaRules),
    Swiss(SwissRules),
}

/// How a game ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Outcome {
    WhiteWins,
    BlackWins,
    Draw,
    /// This side did not make its first move: it loses (by forfeit) and is paused.
    NoFirstMove(Colour),
}

/// A finished game of the event (from the `games.finished` contract).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GameResult {
    /// The game's id: the key of idempotence.
    pub game_id: GameId,
    pub white: PlayerRef,
    pub black: PlayerRef,
    pub outcome: Outcome,
    /// Plies played (arena: berserk points and quick draws).
    pub plies: u32,
    pub white_berserk: bool,
    pub black_berserk: bool,
    /// The Swiss round the game belongs to (arena: 0).
    pub round: u32,
}

/// One game from one player's side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlayedGame {
    pub opponent: PlayerRef,
    pub colour: Colour,
    pub outcome: arena::Outcome,
    pub round: u32,
    /// False for a forfeit (no first move): not a game for the colour rules.
    pub played: bool,
}

/// An entrant and what they did.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    pub player: PlayerRef,
    pub rating: i32,
    /// Arena points, or a Swiss event's half-points.
    pub points: i32,
    /// The arena sheet (empty in a Swiss event).
    pub sheet: ArenaSheet,
    /// Games in the order they were applied.
    pub games: Vec<PlayedGame>,
    /// Rounds in which this player had the bye.
    pub byes: Vec<u32>,
    pub paused: bool,
    pub withdrawn: bool,
    /// The round under way when they joined (0: before the first round).
    pub joined_round: u32,
}

impl Entry {
    fn new(player: PlayerRef, rating: i32, joined_round: u32) -> Entry {
        Entry {
            player,
            rating,
            points: 0,
            sheet: ArenaSheet::default(),
            games: Vec::new(),
            byes: Vec::new(),
            paused: false,
            withdrawn: false,
            joined_round,
        }
    }

    /// Whites minus blacks over the games played.
    pub fn colour_balance(&self) -> i32 {
        self.games
            .iter()
            .filter(|g| g.played)
            .map(|g| if g.colour == Colour::White { 1 } else { -1 })
            .sum()
    }
}

/// The standings of one event: the value the service stores.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Standings {
    pub format: Format,
    /// Stored as the list of entries (each names its player), so that the stored form has no
    /// integer map keys.
    #[serde(with = "entries_as_list")]
    pub entries: BTreeMap<PlayerRef, Entry>,
    /// The ids of the games applied (checked on read).
    pub applied: HashSet<GameId>,
    /// The last Swiss round started (0: none yet).
    pub round: u32,
}

mod entries_as_list {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serializer};

    use super::Entry;
    use crate::PlayerRef;

    pub fn serialize<S: Serializer>(
        entries: &BTreeMap<PlayerRef, Entry>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(entries.values())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<BTreeMap<PlayerRef, Entry>, D::Error> {
        let list = Vec::<Entry>::deserialize(deserializer)?;
        Ok(list.into_iter().map(|e| (e.player, e)).collect())
    }
}

impl Standings {
    pub fn new(format: Format) -> Standings {
        Standings {
            format,
            entries: BTreeMap::new(),
            applied: HashSet::new(),
            round: 0,
        }
    }

    /// The players a Swiss round pairs: those neither withdrawn nor paused.
    pub fn swiss_players(&self) -> Vec<SwissPlayer> {
        self.entries
            .values()
            .filter(|e| !e.withdrawn && !e.paused)
            .map(|e| SwissPlayer {
                player: e.player,
                rating: e.rating,
                points: u32::try_from(e.points).unwrap_or(0),
                opponents: e.games.iter().map(|g| g.opponent).collect(),
                colours: e
                    .games
                    .iter()
                    .filter(|g| g.played)
                    .map(|g| g.colour)
                    .collect(),
                had_bye: !e.byes.is_empty(),
            })
            .collect()
    }

    /// The arena players among `waiting` (those not in a game), as a wave sees them.
    pub fn arena_waiting(&self, waiting: &[PlayerRef]) -> Vec<ArenaPlayer> {
        waiting
            .iter()
            .filter_map(|p| self.entries.get(p))
            .filter(|e| !e.withdrawn)
            .map(|e| ArenaPlayer {
                player: e.player,
                score: e.points,
                rating: e.rating,
                paused: e.paused,
                colour_balance: e.colour_balance(),
            })
            .collect()
    }

    /// Each player's last opponent (for [`arena::pair_wave`]).
    pub fn last_opponents(&self) -> LastOpponents {
        let mut last = LastOpponents::new();
        for e in self.entries.values() {
            if let Some(g) = e.games.last() {
                last.record(e.player, g.opponent);
            }
        }
        last
    }
}

/// A player joins (or comes back: unpaused, no longer withdrawn). A late entry starts with no points.
pub fn join(mut state: Standings, player: PlayerRef, rating: i32) -> Standings {
    let round = state.round;
    let entry = state
        .entries
        .entry(player)
        .or_insert_with(|| Entry::new(player, rating, round));
    entry.paused = false;
    entry.withdrawn = false;
    state
}

/// A player leaves: paused in an arena (they may come back), withdrawn from a Swiss event.
pub fn leave(mut state: Standings, player: PlayerRef) -> Standings {
    let swiss = matches!(state.format, Format::Swiss(_));
    if let Some(e) = state.entries.get_mut(&player) {
        if swiss {
            e.withdrawn = true;
        } else {
            e.paused = true;
        }
    }
    state
}

/// A paused player is paired again.
pub fn resume(mut state: Standings, player: PlayerRef) -> Standings {
    if let Some(e) = state.entries.get_mut(&player) {
        e.paused = false;
    }
    state
}

/// Starts Swiss round `number` with its pairing: records the bye (a win's points). Idempotent: a
/// round at or before the last one started changes nothing.
pub fn start_round(mut state: Standings, number: u32, round: &SwissRound) -> Standings {
    if number <= state.round {
        return state;
    }
    state.round = number;
    if let Some(bye) = round.bye
        && let Some(e) = state.entries.get_mut(&bye)
    {
        e.byes.push(number);
        e.points += 2;
    }
    state
}

/// Applies one finished game; a game id already applied changes nothing (see the module's
/// documentation). A player the standings do not know is added (rating 0) rather than losing the game;
/// a result with one player on both sides is refused (nothing changes, its id is not recorded).
pub fn apply_result(mut state: Standings, result: &GameResult) -> Standings {
    if result.white == result.black || !state.applied.insert(result.game_id.clone()) {
        return state;
    }
    let round = state.round;
    for p in [result.white, result.black] {
        state
            .entries
            .entry(p)
            .or_insert_with(|| Entry::new(p, 0, round));
    }
    use arena::Outcome::{Draw, Loss, Win};
    let (white, black, played) = match result.outcome {
        Outcome::WhiteWins => (Win, Loss, true),
        Outcome::BlackWins => (Loss, Win, true),
        Outcome::Draw => (Draw, Draw, true),
        Outcome::NoFirstMove(Colour::White) => (Loss, Win, false),
        Outcome::NoFirstMove(Colour::Black) => (Win, Loss, false),
    };
    let sides = [
        (
            result.white,
            result.black,
            Colour::White,
            white,
            result.white_berserk,
        ),
        (
            result.black,
            result.white,
            Colour::Black,
            black,
            result.black_berserk,
        ),
    ];
    for (player, opponent, colour, outcome, berserk) in sides {
        let e = state.entries.get_mut(&player).expect("added above");
        e.games.push(PlayedGame {
            opponent,
            colour,
            outcome,
            round: result.round,
            played,
        });
        match &state.format {
            Format::Arena(rules) => {
                let game = ArenaGame {
                    outcome,
                    plies: result.plies,
                    berserk,
                };
                e.sheet.add(&game, rules);
                e.points = e.sheet.total();
            }
            Format::Swiss(_) => {
                e.points += match outcome {
                    Win => 2,
                    Draw => 1,
                    Loss => 0,
                };
            }
        }
        if !played && outcome == Loss {
            e.paused = true;
        }
    }
    state
}

/// One line of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// 1 for the leaders; players equal on points and every tie-break share a rank.
    pub rank: u32,
    pub player: PlayerRef,
    /// Arena points, or a Swiss event's half-points.
    pub points: i32,
    /// Half-points (Swiss).
    pub buchholz: i32,
    /// Half-points (Swiss).
    pub buchholz_cut1: i32,
    /// Quarter-points (Swiss): 4 x (beaten opponents' points + half the drawn opponents' points).
    pub sonneborn_berger: i32,
    pub games: u32,
    pub wins: u32,
    pub withdrawn: bool,
}

impl Row {
    fn key(&self, format: &Format) -> Vec<i32> {
        let mut key = vec![self.points];
        if let Format::Swiss(rules) = format {
            for tb in &rules.tie_breaks {
                key.push(match tb {
                    TieBreak::Buchholz => self.buchholz,
                    TieBreak::BuchholzCut1 => self.buchholz_cut1,
                    TieBreak::SonnebornBerger => self.sonneborn_berger,
                });
            }
        }
        key
    }
}

/// The table: best first (equal players by rating, then pairing number), with ranks and tie-breaks.
pub fn table(state: &Standings) -> Vec<Row> {
    let points = |p: &PlayerRef| state.entries.get(p).map_or(0, |e| e.points);
    let mut rows: Vec<Row> = state
        .entries
        .values()
        .map(|e| {
            let opp: Vec<i32> = e.games.iter().map(|g| points(&g.opponent)).collect();
            let buchholz: i32 = opp.iter().sum();
            let cut = opp.iter().min().copied().unwrap_or(0);
            let sonneborn_berger = e
                .games
                .iter()
                .map(|g| {
                    let result = match g.outcome {
                        arena::Outcome::Win => 2,
                        arena::Outcome::Draw => 1,
                        arena::Outcome::Loss => 0,
                    };
                    result * points(&g.opponent)
                })
                .sum();
            Row {
                rank: 0,
                player: e.player,
                points: e.points,
                buchholz,
                buchholz_cut1: buchholz - cut,
                sonneborn_berger,
                games: e.games.len() as u32,
                wins: e
                    .games
                    .iter()
                    .filter(|g| g.outcome == arena::Outcome::Win)
                    .count() as u32,
                withdrawn: e.withdrawn,
            }
        })
        .collect();
    let rating = |p: &PlayerRef| state.entries.get(p).map_or(0, |e| e.rating);
    rows.sort_by(|a, b| {
        b.key(&state.format)
            .cmp(&a.key(&state.format))
            .then(rating(&b.player).cmp(&rating(&a.player)))
            .then(a.player.cmp(&b.player))
    });
    for i in 0..rows.len() {
        rows[i].rank = if i > 0 && rows[i].key(&state.format) == rows[i - 1].key(&state.format) {
            rows[i - 1].rank
        } else {
            i as u32 + 1
        };
    }
    rows
}
