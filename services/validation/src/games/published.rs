//! What Games publishes for the platform's other services, besides its Redis contracts: Games owns
//! its tables, keys and schedules (`finished_games`, `game-deadlines`, ...), and no other service reads
//! them. Another service learns of finished games from the `games.finished` stream and, for the entries
//! the stream lost, from [`GamesCore::finished_since`] (`Games.ListFinishedGames`); of the games in
//! progress from [`GamesCore::games_in_progress`] (`Games.CountGamesInProgress`). Both are for the
//! platform's services only (the `service` scope, checked at the edge).

use draughts_proto::contract::finished;
use draughts_store::StoreError;

use super::service::{GamesCore, GamesError, GamesResult, decode, finished_event, keys};

/// Most entries in one [`GamesCore::finished_since`] page.
pub const MAX_FINISHED_PAGE: usize = 500;

/// One finished game as the `games.finished` stream carried it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishedEntry {
    pub game_id: String,
    /// Unix epoch milliseconds.
    pub finished_at_ms: u64,
    /// The `games.finished` payload ([`finished::encode`]), its PDN left out.
    pub event: Vec<u8>,
}

/// Where a page of finished games starts and ends.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FinishedQuery {
    /// Games that finished after (`after_ms`, `after_game_id`), by finish time then id.
    pub after_ms: u64,
    pub after_game_id: String,
    /// Only games that finished before this (Unix ms; `None`: no bound).
    pub before_ms: Option<u64>,
    /// 1 to [`MAX_FINISHED_PAGE`] (larger values are read as the maximum).
    pub limit: usize,
    /// Only games created rated.
    pub rated_only: bool,
}

fn ms_i64(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

impl GamesCore {
    /// A page of finished games in the order they finished, each as its stream entry (see the module
    /// docs). A game archived before the entry was stored with it gets the entry built now from the
    /// stored game, as the archive would have written it.
    pub async fn finished_since(&self, query: &FinishedQuery) -> GamesResult<Vec<FinishedEntry>> {
        let limit = query.limit.clamp(1, MAX_FINISHED_PAGE);
        let rows: Vec<(String, i64, Option<String>, Option<String>)> =
            draughts_store::sqlx::query_as(
                // The stored game (its whole move list) only for rows without an `event`.
                "SELECT game_id, finished_at_ms, event, CASE WHEN event IS NULL THEN record ELSE NULL END \
                 FROM finished_games \
                 WHERE (finished_at_ms > $1 OR (finished_at_ms = $1 AND game_id > $2)) AND finished_at_ms < $3 \
                   AND (rated <> 0 OR $4 = 0) \
                 ORDER BY finished_at_ms, game_id LIMIT $5",
            )
            .bind(ms_i64(query.after_ms))
            .bind(query.after_game_id.clone())
            .bind(query.before_ms.map_or(i64::MAX, ms_i64))
            .bind(i64::from(query.rated_only))
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(self.db().pool())
            .await
            .map_err(StoreError::from)?;
        let mut entries = Vec::with_capacity(rows.len());
        for (game_id, finished_at_ms, event, record) in rows {
            let finished_at_ms = u64::try_from(finished_at_ms).unwrap_or(0);
            let event = match (event, record) {
                (Some(event), _) => match finished::decode(event.as_bytes()) {
                    Ok(mut event) => {
                        event.pdn.clear();
                        finished::encode(&event)
                    }
                    // A newer writer's entry: passed on as stored, its reader decides.
                    Err(_) => event.into_bytes(),
                },
                (None, Some(record)) => {
                    let record = decode(&game_id, record.as_bytes())?;
                    let Some(result) = &record.result else {
                        return Err(GamesError::Corrupt(format!(
                            "archived game {game_id} has no result"
                        )));
                    };
                    let result_text = super::pdn::result_text(&record);
                    let mut event =
                        finished_event(&record, result, &result_text, finished_at_ms, "")?;
                    event.traceparent = None;
                    finished::encode(&event)
                }
                (None, None) => {
                    return Err(GamesError::Corrupt(format!(
                        "archived game {game_id} has neither an entry nor a record"
                    )));
                }
            };
            entries.push(FinishedEntry {
                game_id,
                finished_at_ms,
                event,
            });
        }
        Ok(entries)
    }

    /// Games in progress now: every ongoing game has one entry in the clock schedule.
    pub async fn games_in_progress(&self) -> GamesResult<u64> {
        Ok(self.live().schedule_len(keys::DEADLINES).await?)
    }
}
