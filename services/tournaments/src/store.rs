//! The tournament record kept in the live store (one value per tournament, written by compare-and-set)
//! and the archive of finished tournaments in the database. Names: `draughts_proto::contract::tournaments`.
//!
//! The record holds everything that must change together: the entrants, the standings (with the ids
//! of the games applied, so a result counts once), the games in progress and the scheduler's fencing
//! token. A pairing is written into `ongoing` (with `created: false`) before its game is created
//! through Games under its id; a scheduler that dies in between leaves it there, and the next one
//! creates it (Games' creation is idempotent on the id), so a pairing is never half made and no player
//! is in two games of the event.

use draughts_proto::contract::tournaments as contract;
use draughts_proto::ids::{GameId, TournamentId};
use draughts_proto::vocab::player::Player;
use draughts_store::sqlx::{self, Row};
use draughts_store::{Database, Migration};
use serde::{Deserialize, Serialize};

use crate::PlayerRef;
use crate::error::{TournamentsError, TournamentsResult};
use crate::standings::Standings;
use crate::terms::Terms;

/// Where a tournament stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Upcoming,
    Running,
    Finished,
    Cancelled,
}

impl State {
    pub fn key(self) -> &'static str {
        match self {
            State::Upcoming => "upcoming",
            State::Running => "running",
            State::Finished => "finished",
            State::Cancelled => "cancelled",
        }
    }
    pub fn is_over(self) -> bool {
        matches!(self, State::Finished | State::Cancelled)
    }
}

/// One entrant: `entrants[i]` is `PlayerRef(i)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entrant {
    pub player: Player,
    /// Rating points when they joined.
    pub rating: i32,
}

/// A game of the event, from the pairing until its result is applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pairing {
    /// Checked on read (`<tournament id>-<n>`, a game id Games creates the game under).
    pub game_id: GameId,
    pub white: PlayerRef,
    pub black: PlayerRef,
    /// Swiss round (arena: 0).
    pub round: u32,
    /// Games has created the game (false: the intent is recorded, the creation may be retried).
    pub created: bool,
}

/// One tournament.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub id: TournamentId,
    pub terms: Terms,
    pub creator: Player,
    pub state: State,
    pub created_at_ms: u64,
    pub starts_at_ms: u64,
    /// Arena: when pairing stops (set at the start).
    pub ends_at_ms: u64,
    pub finished_at_ms: u64,
    pub entrants: Vec<Entrant>,
    pub standings: Standings,
    pub ongoing: Vec<Pairing>,
    /// The number of the next game (game ids `<id>-<n>`).
    pub next_game: u64,
    /// Swiss: the rounds this event plays (the terms' number, lowered at the start when the field is
    /// too small for it).
    pub rounds: u32,
    /// Swiss: when the current round started.
    pub round_started_at_ms: u64,
    /// Swiss: the bye of the current round.
    pub bye: Option<PlayerRef>,
    /// Arena: when the last wave ran.
    pub last_wave_ms: u64,
    /// The highest scheduler fencing token that wrote the record: a scheduler with a lower one stops.
    pub fence: u64,
}

impl Record {
    /// The entrant with this player id.
    pub fn entrant_of(&self, player_id: &str) -> Option<PlayerRef> {
        self.entrants
            .iter()
            .position(|e| e.player.id == player_id)
            .map(|i| PlayerRef(i as u32))
    }

    /// The entrant `p` refers to (`None` only for a reference this record did not make).
    pub fn player(&self, p: PlayerRef) -> Option<Player> {
        self.entrants.get(p.0 as usize).map(|e| e.player.clone())
    }

    /// Players in a game of the event now.
    pub fn busy(&self) -> std::collections::HashSet<PlayerRef> {
        self.ongoing
            .iter()
            .flat_map(|p| [p.white, p.black])
            .collect()
    }

    pub fn encode(&self) -> Vec<u8> {
        contract::encode(self)
    }

    pub fn decode(bytes: &[u8]) -> TournamentsResult<Record> {
        Ok(contract::decode(bytes)?)
    }
}

/// The archive's schema. Versions 3001+: `schema_migrations` is shared by every service of one database
/// (games 1.., ratings 1001.., auth 2000..).
pub const MIGRATIONS: &[Migration<'static>] = &[Migration {
    version: 3001,
    name: "tournaments_archive",
    sql: "CREATE TABLE IF NOT EXISTS tournaments_archive (
            tournament_id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            kind TEXT NOT NULL,
            state TEXT NOT NULL,
            creator_id TEXT NOT NULL,
            starts_at_ms BIGINT NOT NULL,
            finished_at_ms BIGINT NOT NULL,
            players BIGINT NOT NULL,
            record TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS tournaments_archive_finished ON tournaments_archive (finished_at_ms DESC, tournament_id);",
}];

/// The archive of finished tournaments: each one's final record (terms and standings), once.
#[derive(Clone, Debug)]
pub struct Archive {
    db: Database,
}

fn db_error(e: sqlx::Error) -> TournamentsError {
    TournamentsError::Store(draughts_store::StoreError::from(e))
}

impl Archive {
    /// Migrates the table and returns the archive.
    pub async fn new(db: Database) -> TournamentsResult<Archive> {
        db.migrate(MIGRATIONS).await?;
        Ok(Archive { db })
    }

    /// Stores the final record (again: the latest write wins, so a retried finish is harmless).
    pub async fn put(&self, record: &Record) -> TournamentsResult<()> {
        let kind = if record.terms.is_arena() {
            "arena"
        } else {
            "swiss"
        };
        let json = String::from_utf8(record.encode())
            .map_err(|e| TournamentsError::Corrupt(e.to_string()))?;
        sqlx::query(
            "INSERT INTO tournaments_archive (tournament_id, name, kind, state, creator_id, starts_at_ms, finished_at_ms, players, record)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (tournament_id) DO UPDATE SET state = EXCLUDED.state, finished_at_ms = EXCLUDED.finished_at_ms,
               players = EXCLUDED.players, record = EXCLUDED.record",
        )
        .bind(record.id.to_string())
        .bind(record.terms.name.clone())
        .bind(kind)
        .bind(record.state.key())
        .bind(record.creator.id.to_string())
        .bind(record.starts_at_ms as i64)
        .bind(record.finished_at_ms as i64)
        .bind(record.entrants.len() as i64)
        .bind(json)
        .execute(self.db.pool())
        .await
        .map_err(db_error)?;
        Ok(())
    }

    /// The archived record of `id`.
    pub async fn get(&self, id: &str) -> TournamentsResult<Option<Record>> {
        let row = sqlx::query("SELECT record FROM tournaments_archive WHERE tournament_id = $1")
            .bind(id.to_owned())
            .fetch_optional(self.db.pool())
            .await
            .map_err(db_error)?;
        match row {
            Some(row) => {
                let text: String = row.try_get("record").map_err(db_error)?;
                Ok(Some(Record::decode(text.as_bytes())?))
            }
            None => Ok(None),
        }
    }

    /// Up to `limit` finished tournaments, latest finished first, after `(finished_at_ms, id)`.
    pub async fn list(
        &self,
        after: Option<(u64, String)>,
        limit: usize,
    ) -> TournamentsResult<Vec<Record>> {
        let (at, id) = after.unwrap_or((u64::MAX >> 1, String::new()));
        let rows = sqlx::query(
            "SELECT record FROM tournaments_archive
             WHERE finished_at_ms < $1 OR (finished_at_ms = $1 AND tournament_id > $2)
             ORDER BY finished_at_ms DESC, tournament_id LIMIT $3",
        )
        .bind(at as i64)
        .bind(id)
        .bind(limit as i64)
        .fetch_all(self.db.pool())
        .await
        .map_err(db_error)?;
        rows.iter()
            .map(|row| {
                let text: String = row.try_get("record").map_err(db_error)?;
                Record::decode(text.as_bytes())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::standings::{self, Format, GameResult, Outcome};
    use crate::terms::{Conditions, Kind, Terms};

    /// A record with entrants, standings and a game round-trips through its stored form.
    #[test]
    fn record_round_trips() {
        let mut standings = Standings::new(Format::Arena(crate::arena::ArenaRules::default()));
        standings = standings::join(standings, PlayerRef(0), 1500);
        standings = standings::join(standings, PlayerRef(1), 1600);
        standings = standings::apply_result(
            standings,
            &GameResult {
                game_id: "t0123456789abcdef-1".parse().unwrap(),
                white: PlayerRef(0),
                black: PlayerRef(1),
                outcome: Outcome::WhiteWins,
                plies: 30,
                white_berserk: false,
                black_berserk: false,
                round: 0,
            },
        );
        let record = Record {
            id: "t0123456789abcdef".parse().unwrap(),
            terms: Terms {
                name: "x".into(),
                variant: "international".into(),
                options: String::new(),
                time_control: draughts_proto::vocab::time::TimeControl::Fischer {
                    base_ms: 60_000,
                    increment_ms: 0,
                },
                rated: true,
                kind: Kind::Arena {
                    duration_secs: 60,
                    berserk: true,
                },
                conditions: Conditions::default(),
            },
            creator: Player::new("key:acme-org".parse().unwrap()),
            state: State::Running,
            created_at_ms: 1,
            starts_at_ms: 2,
            ends_at_ms: 3,
            finished_at_ms: 0,
            entrants: Vec::new(),
            standings,
            ongoing: vec![Pairing {
                game_id: "t0123456789abcdef-2".parse().unwrap(),
                white: PlayerRef(1),
                black: PlayerRef(0),
                round: 0,
                created: false,
            }],
            next_game: 3,
            rounds: 0,
            round_started_at_ms: 0,
            bye: None,
            last_wave_ms: 0,
            fence: 4,
        };
        let decoded = Record::decode(&record.encode()).unwrap();
        assert_eq!(decoded, record);
    }

    /// An arena's record as the service wrote it before ids were typed (two entrants, one result
    /// applied, one pairing waiting for its game): it reads, ids checked, and writes back byte for byte.
    const RECORD_BEFORE_TYPED_IDS: &str = r#"{"v":1,"id":"t0123456789abcdef","terms":{"name":"x","variant":"international","options":"","time_control":{"kind":"fischer","base_ms":60000,"increment_ms":0},"rated":true,"kind":{"kind":"arena","duration_secs":60,"berserk":true},"conditions":{"min_rating":0,"max_rating":0,"accounts_only":false,"max_players":0,"password_sha256":null}},"creator":{"id":"key:acme-org","name":"acme-org","guest":false,"computer":false},"state":"running","created_at_ms":1,"starts_at_ms":2,"ends_at_ms":3,"finished_at_ms":0,"entrants":[{"player":{"id":"user:0123456789abcdef0123","name":"Ann","guest":false,"computer":false},"rating":1500},{"player":{"id":"guest:0123456789abcdef0123456789abcdef","name":"Bob","guest":true,"computer":false},"rating":1600}],"standings":{"format":{"Arena":{"streaks":true,"berserk_min_plies":14,"quick_draw_plies":20,"draw_streak":true,"long_game_plies":60}},"entries":[{"player":0,"rating":1500,"points":2,"sheet":{"entries":[{"result":"Win","doubled":false,"berserk_point":false,"points":2}],"total":2},"games":[{"opponent":1,"colour":"White","outcome":"Win","round":0,"played":true}],"byes":[],"paused":false,"withdrawn":false,"joined_round":0},{"player":1,"rating":1600,"points":0,"sheet":{"entries":[{"result":"Loss","doubled":false,"berserk_point":false,"points":0}],"total":0},"games":[{"opponent":0,"colour":"Black","outcome":"Loss","round":0,"played":true}],"byes":[],"paused":false,"withdrawn":false,"joined_round":0}],"applied":["t0123456789abcdef-1"],"round":0},"ongoing":[{"game_id":"t0123456789abcdef-2","white":1,"black":0,"round":0,"created":false}],"next_game":3,"rounds":0,"round_started_at_ms":0,"bye":null,"last_wave_ms":0,"fence":4}"#;

    #[test]
    fn records_written_before_typed_ids_read_and_write_back_byte_for_byte() {
        let record = Record::decode(RECORD_BEFORE_TYPED_IDS.as_bytes()).unwrap();
        assert_eq!(record.ongoing[0].game_id.as_str(), "t0123456789abcdef-2");
        assert!(record.standings.applied.contains("t0123456789abcdef-1"));
        // Entrants and creator are the finished contract's players: typed ids.
        assert!(record.entrants[1].player.id.is_guest());
        assert_eq!(
            record.creator.id.kind(),
            draughts_proto::ids::PlayerKind::ApiKey
        );
        assert_eq!(
            record.entrant_of("user:0123456789abcdef0123"),
            Some(PlayerRef(0))
        );
        assert_eq!(record.encode(), RECORD_BEFORE_TYPED_IDS.as_bytes());
        // Game ids are checked on read.
        for bad in [
            RECORD_BEFORE_TYPED_IDS
                .replace(r#""game_id":"t0123456789abcdef-2""#, r#""game_id":"t 2""#),
            RECORD_BEFORE_TYPED_IDS
                .replace(r#""applied":["t0123456789abcdef-1"]"#, r#""applied":[""]"#),
        ] {
            assert!(Record::decode(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
