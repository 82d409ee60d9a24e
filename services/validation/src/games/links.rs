//! A guest taken over by an account (`Auth.LinkGuest`, stream `players.linked`): its finished games
//! move to the account. Consumer group `games-links`, run by every replica's timers; each entry is
//! acknowledged once its games are moved, and moving is idempotent (a repeat finds nothing left under
//! the guest id), so a replica killed half-way loses nothing: another one takes the entry over.
//!
//! Games still being played when the link is made move too, so that the account plays them on (the
//! guest's token no longer works): the side's id, name and guest flag in the live record, and the
//! lists of ongoing games of both ids. So do the guest's pending invitations (sent and received).
//! A game that finishes under the guest id while its entry is being applied (between the move of the
//! live games and the archive) stays under the guest; linking again (`LinkGuest` is repeatable)
//! moves it.

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
                    self.move_live_games(&link.guest_id, &link.player_id, &link.player_name)
                        .await?;
                    self.move_invitations(&link.guest_id, &link.player_id, &link.player_name)
                        .await?;
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

    /// Hands the ongoing games of `guest` to `player` (named `name`; empty keeps the guest's name).
    pub async fn move_live_games(&self, guest: &str, player: &str, name: &str) -> GamesResult<u64> {
        let mut moved = 0;
        for id in self.ongoing_ids(guest).await? {
            let adopt = |side: &mut super::record::PlayerRec| {
                if side.id == guest {
                    side.id = player.to_owned();
                    side.guest = false;
                    if !name.is_empty() {
                        side.name = name.to_owned();
                    }
                }
            };
            let mut done = false;
            for _ in 0..5 {
                match self
                    .act(&id, |record, _, _| {
                        adopt(&mut record.white);
                        adopt(&mut record.black);
                        Ok(())
                    })
                    .await
                {
                    Ok(_) => {
                        done = true;
                        break;
                    }
                    Err(super::service::GamesError::Conflict) => continue,
                    // Archived and gone from the live store meanwhile: the finished rows follow.
                    Err(super::service::GamesError::NotFound(_)) => break,
                    Err(e) => return Err(e),
                }
            }
            self.update_player_games(player, &id, true).await?;
            self.update_player_games(guest, &id, false).await?;
            if done {
                moved += 1;
            }
        }
        Ok(moved)
    }

    /// Hands the pending invitations of `guest` (sent and received) to `player`.
    pub async fn move_invitations(
        &self,
        guest: &str,
        player: &str,
        name: &str,
    ) -> GamesResult<u64> {
        let mut moved = 0;
        for invitation in self.pending_invitations(guest).await? {
            let adopt = |side: &mut super::record::PlayerRec| {
                if side.id == guest {
                    side.id = player.to_owned();
                    side.guest = false;
                    if !name.is_empty() {
                        side.name = name.to_owned();
                    }
                }
            };
            self.change_invitation(&invitation.id, |inv, _| {
                adopt(&mut inv.inviter);
                if let Some(invitee) = inv.invitee.as_mut() {
                    adopt(invitee);
                }
                Ok(())
            })
            .await?;
            self.index_invitation(player, &invitation.id).await?;
            moved += 1;
        }
        Ok(moved)
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

/// `Auth.ExportAccountData` reads a player's finished games here.
#[tonic::async_trait]
impl draughts_auth::grpc::FinishedGames for GamesCore {
    async fn finished_pdn(
        &self,
        player: &str,
        max: u32,
    ) -> Result<(Vec<String>, bool), tonic::Status> {
        let mut texts = Vec::new();
        let mut after = None;
        loop {
            let page = (max - texts.len() as u32).min(200);
            let (records, more) = self
                .recent(player, page, after.as_ref())
                .await
                .map_err(super::grpc::err)?;
            for record in &records {
                texts.push(super::pdn::export(record).map_err(super::grpc::err)?);
            }
            let full = texts.len() as u32 >= max;
            match records.last() {
                Some(last) if more && !full => {
                    after = Some(super::service::PageKey {
                        finished_at_ms: last.finished_ms.unwrap_or(0),
                        game_id: last.id.clone(),
                    });
                }
                _ => return Ok((texts, more)),
            }
        }
    }
}
