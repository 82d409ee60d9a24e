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
use draughts_proto::ids::PlayerId;
use draughts_proto::vocab::player::Player;
use draughts_store::StoreError;
use draughts_store::cas::{self, Change, Retry};

use super::service::{GamesCore, GamesError, GamesResult};

/// A game's action that lost its compare-and-set to another writer (tried again).
fn lost_race(e: &GamesError) -> bool {
    matches!(e, GamesError::Conflict)
}

/// The consumer group of the games service on `players.linked`.
pub const GROUP: &str = "games-links";

/// The consumer group of the games service on `players.erased`.
pub const ERASURES_GROUP: &str = "games-erasures";

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
                    let (guest, player) = (link.guest_id.as_str(), &link.player_id);
                    self.move_live_games(guest, player, &link.player_name)
                        .await?;
                    self.move_invitations(guest, player, &link.player_name)
                        .await?;
                    self.move_finished_games(guest, player).await?;
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

    /// Deals with the deleted accounts waiting on `players.erased`: their games show the anonymous
    /// name. Returns how many were applied.
    pub async fn apply_erasures(&self, consumer: &str) -> GamesResult<usize> {
        use draughts_proto::contract::erased;
        let entries = draughts_store::take_batch(
            self.live().as_ref(),
            erased::STREAM,
            ERASURES_GROUP,
            consumer,
            TAKE_OVER_AFTER,
            50,
        )
        .await?;
        let mut applied = 0;
        for entry in entries {
            match erased::decode(&entry.payload) {
                Ok(event) => {
                    self.rename_in_games(event.player_id.as_str(), &event.name)
                        .await?;
                    applied += 1;
                }
                Err(e) => {
                    tracing::warn!(id = %entry.id, error = %e, "players.erased entry ignored")
                }
            }
            self.live()
                .ack(erased::STREAM, ERASURES_GROUP, &[entry.id])
                .await?;
        }
        Ok(applied)
    }

    /// Shows `player` as `name` in its ongoing games and in its finished games (the stored record,
    /// its PDN and its `games.finished` payload). Idempotent.
    pub async fn rename_in_games(&self, player: &str, name: &str) -> GamesResult<u64> {
        let rename = |side: &mut Player| {
            if side.id == player {
                side.name = name.to_owned();
            }
        };
        let mut renamed = 0;
        for id in self.ongoing_ids(player).await? {
            let renaming = cas::retry(Retry::times(5), lost_race, || {
                self.act(&id, |record, _, _| {
                    rename(&mut record.white);
                    rename(&mut record.black);
                    Ok(())
                })
            })
            .await;
            match renaming {
                Ok(_) => renamed += 1,
                Err(GamesError::Conflict | GamesError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let corrupt = |e: serde_json::Error| super::service::GamesError::Corrupt(e.to_string());
        let mut after = String::new();
        loop {
            let rows: Vec<(String, String, Option<String>)> = draughts_store::sqlx::query_as(
                "SELECT game_id, record, event FROM finished_games WHERE (white_id = $1 OR black_id = $2) AND game_id > $3 ORDER BY game_id LIMIT $4",
            )
            .bind(player)
            .bind(player)
            .bind(after.clone())
            .bind(PAGE)
            .fetch_all(self.db().pool())
            .await
            .map_err(StoreError::from)?;
            let Some(last) = rows.last() else {
                return Ok(renamed);
            };
            after = last.0.clone();
            for (game_id, json, event) in rows {
                let mut record: super::record::GameRecord =
                    serde_json::from_str(&json).map_err(corrupt)?;
                rename(&mut record.white);
                rename(&mut record.black);
                let pdn = super::pdn::export(&record)?;
                let json = serde_json::to_string(&record).map_err(corrupt)?;
                // The event as the stream carried it, with the name replaced where the id matches.
                let event = match event {
                    Some(text) => {
                        let mut value: serde_json::Value =
                            serde_json::from_str(&text).map_err(corrupt)?;
                        for side in ["white", "black"] {
                            if let Some(p) = value.get_mut(side)
                                && p.get("id").and_then(|id| id.as_str()) == Some(player)
                            {
                                p["name"] = serde_json::Value::String(name.to_owned());
                            }
                        }
                        Some(serde_json::to_string(&value).map_err(corrupt)?)
                    }
                    None => None,
                };
                draughts_store::sqlx::query(
                    "UPDATE finished_games SET record = $1, pdn = $2, event = $3 WHERE game_id = $4",
                )
                .bind(json)
                .bind(pdn)
                .bind(event)
                .bind(game_id.clone())
                .execute(self.db().pool())
                .await
                .map_err(StoreError::from)?;
                self.rename_in_archived_record(&game_id, &rename).await?;
                renamed += 1;
            }
        }
    }

    /// The same change (a renaming, an adoption) in a finished game's live record, kept for a while
    /// after archiving (reads are served from it until it expires).
    async fn rename_in_archived_record(
        &self,
        game_id: &str,
        rename: &impl Fn(&mut Player),
    ) -> GamesResult<()> {
        let codec = (
            |bytes: &[u8]| super::service::decode(game_id, bytes),
            |record: &super::record::GameRecord| -> GamesResult<bytes::Bytes> {
                serde_json::to_vec(record)
                    .map(bytes::Bytes::from)
                    .map_err(|e| GamesError::Corrupt(e.to_string()))
            },
        );
        cas::update(
            self.live().as_ref(),
            &super::service::keys::game(game_id),
            &codec,
            Retry::times(5),
            |record| {
                let Some(mut record) = record else {
                    return Ok(Change::Keep(()));
                };
                rename(&mut record.white);
                rename(&mut record.black);
                let ttl = record.archived.then(|| self.limits().archived_game_ttl());
                Ok(Change::Write {
                    value: record,
                    ttl,
                    effects: Vec::new(),
                    then: (),
                })
            },
        )
        .await
    }

    /// Hands the ongoing games of `guest` to `player` (named `name`; empty keeps the guest's name).
    pub async fn move_live_games(
        &self,
        guest: &str,
        player: &PlayerId,
        name: &str,
    ) -> GamesResult<u64> {
        let mut moved = 0;
        for id in self.ongoing_ids(guest).await? {
            let adopt = |side: &mut Player| {
                if side.id == guest {
                    side.id = player.clone();
                    side.guest = false;
                    if !name.is_empty() {
                        side.name = name.to_owned();
                    }
                }
            };
            let adopting = cas::retry(Retry::times(5), lost_race, || {
                self.act(&id, |record, _, _| {
                    adopt(&mut record.white);
                    adopt(&mut record.black);
                    Ok(())
                })
            })
            .await;
            let done = match adopting {
                Ok(_) => true,
                // Archived and gone from the live store meanwhile: the finished rows follow.
                Err(GamesError::Conflict | GamesError::NotFound(_)) => false,
                Err(e) => return Err(e),
            };
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
        player: &PlayerId,
        name: &str,
    ) -> GamesResult<u64> {
        let mut moved = 0;
        for invitation in self.pending_invitations(guest).await? {
            let adopt = |side: &mut Player| {
                if side.id == guest {
                    side.id = player.clone();
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
    pub async fn move_finished_games(&self, guest: &str, player: &PlayerId) -> GamesResult<u64> {
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
                        side.id = player.clone();
                        side.guest = false;
                    }
                }
                let json = serde_json::to_string(&record)
                    .map_err(|e| super::service::GamesError::Corrupt(e.to_string()))?;
                draughts_store::sqlx::query(
                    "UPDATE finished_games SET white_id = $1, black_id = $2, record = $3 WHERE game_id = $4",
                )
                .bind(record.white.id.to_string())
                .bind(record.black.id.to_string())
                .bind(json)
                .bind(game_id.clone())
                .execute(self.db().pool())
                .await
                .map_err(StoreError::from)?;
                let adopt = |side: &mut Player| {
                    if side.id == guest {
                        side.id = player.clone();
                        side.guest = false;
                    }
                };
                self.rename_in_archived_record(&game_id, &adopt).await?;
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
                        game_id: last.id.to_string(),
                    });
                }
                _ => return Ok((texts, more)),
            }
        }
    }
}
