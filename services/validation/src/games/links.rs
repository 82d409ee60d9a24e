//! A guest taken over by an account (`Auth.LinkGuest`, stream `players.linked`): its finished games
//! move to the account. Consumer group `games-links`, run by every replica's timers; each entry is
//! acknowledged once its games are moved, and moving is idempotent (a repeat finds nothing left under
//! the guest id), so a replica killed half-way loses nothing: another one takes the entry over.
//!
//! Games still being played when the link is made finish under the guest id; linking again (the
//! `LinkGuest` call is repeatable) moves them too.

use std::time::Duration;

use draughts_proto::contract::linked;
use draughts_store::StoreError;

use super::service::{GamesCore, GamesResult};

/// The consumer group of the games service on `players.linked`.
pub const GROUP: &str = "games-links";

/// Entries pending this long with a member are taken over by another.
const TAKE_OVER_AFTER: Duration = Duration::from_secs(30);

/// Rows moved per statement round.
const PAGE: i64 = 100;

impl GamesCore {
    /// Deals with the links waiting on the stream; returns how many were applied.
    pub async fn apply_links(&self, consumer: &str) -> GamesResult<usize> {
        let entries = draughts_store::take_batch(
            self.live().as_ref(),
            linked::STREAM,
            GROUP,
            consumer,
            TAKE_OVER_AFTER,
            50,
        )
        .await?;
        let mut applied = 0;
        for entry in entries {
            match linked::decode(&entry.payload) {
                Ok(link) => {
                    self.move_finished_games(&link.guest_id, &link.player_id)
                        .await?;
                    applied += 1;
                }
                Err(e) => {
                    tracing::warn!(id = %entry.id, error = %e, "players.linked entry ignored")
                }
            }
            self.live().ack(linked::STREAM, GROUP, &[entry.id]).await?;
        }
        Ok(applied)
    }

    /// Moves every finished game of `guest` to `player` (ids in the row and in the stored record).
    pub async fn move_finished_games(&self, guest: &str, player: &str) -> GamesResult<u64> {
        let mut moved = 0;
        loop {
            let rows: Vec<(String, String)> = draughts_store::sqlx::query_as(
                "SELECT game_id, record FROM finished_games WHERE white_id = $1 OR black_id = $2 LIMIT $3",
            )
            .bind(guest)
            .bind(guest)
            .bind(PAGE)
            .fetch_all(self.db().pool())
            .await
            .map_err(StoreError::from)?;
            if rows.is_empty() {
                return Ok(moved);
            }
            for (game_id, json) in rows {
                let mut record: super::record::GameRecord = serde_json::from_str(&json)
                    .map_err(|e| super::service::GamesError::Corrupt(e.to_string()))?;
                for side in [&mut record.white, &mut record.black] {
                    if side.id == guest {
                        side.id = player.to_owned();
                        side.guest = false;
                    }
                }
                let json = serde_json::to_string(&record)
                    .map_err(|e| super::service::GamesError::Corrupt(e.to_string()))?;
                draughts_store::sqlx::query(
                    "UPDATE finished_games SET white_id = $1, black_id = $2, record = $3 WHERE game_id = $4",
                )
                .bind(record.white.id.clone())
                .bind(record.black.id.clone())
                .bind(json)
                .bind(game_id)
                .execute(self.db().pool())
                .await
                .map_err(StoreError::from)?;
                moved += 1;
            }
        }
    }
}
