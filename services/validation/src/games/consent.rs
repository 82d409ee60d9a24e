//! Consent: invitations (challenges), their acceptance, rematches, and the per-player signals that tell a
//! player about them without polling. Domain code over the live store; the gRPC edge is in
//! [`super::grpc`].
//!
//! Names (built here):
//! - `invitation:{id}`: the [`InvitationRec`] as JSON, versioned, expiring an hour after the invitation.
//! - `player-invitations:{player}`: JSON list of the player's invitations, sent and received ([`Listed`]:
//!   id, the other side, sent or received, from a stranger or not, expiry), oldest first. It is the one
//!   record the bounds are counted on: a new invitation is added to the inviter's list and to the
//!   invitee's by one compare-and-set each, which checks the bound on the list it writes, so concurrent
//!   invitations cannot pass it (the count and the write are one step). Settled invitations leave both
//!   lists when they settle (and any that stayed, when a bound is checked or the list is read).
//!   Older lists (a JSON list of ids) are read and rewritten in this form.
//! - `player-events:{player}` (pub/sub channel; contract [`draughts_proto::contract::player`]): a
//!   signal whenever an invitation to or from the
//!   player is created or changes, or one of the player's games starts or ends. A wake-up with the id
//!   to re-read; a lost signal is made good by the snapshot a reconnecting client receives.
//!
//! Matchmaking's challenges and rematches are invitations: one mechanism for every game between two
//! people that needs the other's consent.

use std::time::Duration;

use bytes::Bytes;
use draughts_engine::{Color, Position, RuleSet};
use draughts_proto::ids::GameId;
use draughts_proto::vocab::player::Player;
use draughts_store::cas::{self, Change, Raw, Retry};
use draughts_store::{Effect, StoreError};
use serde::{Deserialize, Serialize};

use super::invitation::{DeclineReason, InvitationRec, Standing};
use super::record::{GameRecord, TimeControlRec};
use super::service::{GamesCore, GamesError, GamesResult, Missing, NewGame};

/// Key and channel names of invitations and player signals.
pub mod keys {
    pub fn invitation(id: &str) -> String {
        format!("invitation:{id}")
    }
    pub fn player_invitations(player: &str) -> String {
        format!("player-invitations:{player}")
    }
    pub fn player_events(player: &str) -> String {
        draughts_proto::contract::player::channel(player)
    }
}

/// Pending invitations one player may have sent at once.
pub const MAX_PENDING_SENT: usize = 20;
/// Invitations kept in one player's list: beyond it the oldest received ones are declined
/// ([`DeclineReason::TooMany`]) and leave the list (sent ones are at most [`MAX_PENDING_SENT`]).
pub const MAX_LISTED: usize = 200;
/// Compare-and-set attempts on one player's list before an invitation gives up (ABORTED). Each lost
/// attempt means another writer of the list won, so many concurrent invitations of one player all
/// get through or get their refusal well within it.
const LIST_CAS_ATTEMPTS: u32 = 128;

/// One invitation in a player's list (`player-invitations:{player}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listed {
    /// The invitation's id (checked on read: every one was generated).
    pub id: GameId,
    /// The other side: the invitee of a sent invitation (empty for an open one), the inviter of a
    /// received one.
    #[serde(default)]
    pub with: String,
    /// Sent by the list's player.
    #[serde(default)]
    pub sent: bool,
    /// Received from a player the list's player has no finished game with.
    #[serde(default)]
    pub stranger: bool,
    /// When the invitation expires, Unix ms.
    #[serde(default)]
    pub expires_ms: u64,
}

/// A player's list as stored: entries, or the ids of lists written before the entries.
#[derive(Deserialize)]
#[serde(untagged)]
enum StoredList {
    Entries(Vec<Listed>),
    Ids(Vec<String>),
}

/// Why a new invitation cannot be listed.
enum ListRefusal {
    Sent(usize),
    Pair,
}
/// How long a settled or expired invitation stays readable.
const KEEP_AFTER_EXPIRY: Duration = Duration::from_secs(3600);

pub use draughts_proto::contract::player::{Signal as PlayerSignal, SignalKind};

/// The effect that signals `kind` about `id` to `player` (payload: the one contract,
/// [`draughts_proto::contract::player`]).
pub fn signal(player: &str, kind: SignalKind, id: &str) -> Effect {
    let payload = draughts_proto::contract::player::encode(&PlayerSignal {
        kind,
        id: id.to_owned(),
    });
    Effect::Publish {
        channel: keys::player_events(player),
        payload: Bytes::from(payload),
    }
}

/// What a new invitation needs (players already resolved from the server's identities).
#[derive(Clone, Debug)]
pub struct NewInvitation {
    pub inviter: Player,
    pub invitee: Option<Player>,
    pub inviter_color: Option<Color>,
    pub rules: RuleSet,
    pub time: TimeControlRec,
    pub rated: bool,
    pub start: Position,
    pub expires_in_ms: u64,
    /// Empty, or the key an acceptance must present (at most [`MAX_ACCEPT_KEY_BYTES`]).
    pub accept_key: String,
}

/// The longest accept key an invitation may carry.
pub const MAX_ACCEPT_KEY_BYTES: usize = 128;

fn encode(inv: &InvitationRec) -> GamesResult<Bytes> {
    serde_json::to_vec(inv)
        .map(Bytes::from)
        .map_err(|e| GamesError::Invalid(format!("cannot encode invitation: {e}")))
}

/// A player's list as stored.
fn encode_list(entries: &[Listed]) -> Result<Bytes, StoreError> {
    serde_json::to_vec(entries)
        .map(Bytes::from)
        .map_err(|e| StoreError::InvalidArgument(format!("cannot encode a list: {e}")))
}

fn decode(id: &str, bytes: &[u8]) -> GamesResult<InvitationRec> {
    serde_json::from_slice(bytes).map_err(|e| {
        tracing::error!(invitation_id = id, error = %e, "stored invitation does not decode");
        GamesError::Corrupt(format!("stored invitation {id} does not decode"))
    })
}

impl GamesCore {
    fn invitation_ttl(&self, inv: &InvitationRec) -> Duration {
        Duration::from_millis(inv.expires_ms.saturating_sub(self.now())) + KEEP_AFTER_EXPIRY
    }

    /// Loads an invitation and its version.
    pub async fn load_invitation(&self, id: &str) -> GamesResult<(InvitationRec, u64)> {
        let id = draughts_proto::ids::GameId::parse(id)
            .map_err(|e| GamesError::Invalid(e.to_string()))?;
        match self.live().get(&keys::invitation(id.as_str())).await? {
            Some((bytes, version)) => Ok((decode(id.as_str(), &bytes)?, version)),
            None => Err(GamesError::NotFound(Missing::Invitation(id.to_string()))),
        }
    }

    /// An invitation as `player` may see it.
    pub async fn invitation_for(&self, id: &str, player: &str) -> GamesResult<InvitationRec> {
        let (inv, _) = self.load_invitation(id).await?;
        if !inv.visible_to(player) {
            // Not visible is not found: ids of other people's invitations are not confirmed.
            return Err(GamesError::NotFound(Missing::Invitation(id.to_string())));
        }
        Ok(inv)
    }

    /// Sends an invitation.
    pub async fn invite(&self, new: NewInvitation) -> GamesResult<InvitationRec> {
        let now = self.now();
        let fen = if new.start == Position::start(new.rules) {
            String::new()
        } else {
            new.start.to_fen()
        };
        if new.accept_key.len() > MAX_ACCEPT_KEY_BYTES {
            return Err(GamesError::Invalid(format!(
                "accept_key is at most {MAX_ACCEPT_KEY_BYTES} bytes"
            )));
        }
        let mut inv = InvitationRec::new(
            super::service::new_game_id(),
            new.inviter,
            new.invitee,
            new.inviter_color,
            new.rules,
            new.time,
            new.rated,
            fen,
            now,
            new.expires_in_ms,
        )?;
        inv.accept_key = new.accept_key;
        if let Some(invitee) = &inv.invitee {
            self.check_not_blocked(&inv.inviter.id, &invitee.id).await?;
        }
        // The start position must be playable (the check a game makes when it starts).
        if draughts_engine::Game::new(new.start).status() != draughts_engine::GameStatus::Ongoing {
            return Err(GamesError::Invalid(
                "the start position is already decided".into(),
            ));
        }
        self.store_new_invitation(&inv).await?;
        Ok(inv)
    }

    /// A rematch of finished game `game_id`, offered by `player`: the same game with colours swapped.
    pub async fn offer_rematch(&self, game_id: &str, player: &str) -> GamesResult<InvitationRec> {
        let (game, _) = self.load(game_id).await?;
        let color = game.color_of(player).ok_or(GamesError::NotAPlayer)?;
        if !game.is_over() {
            return Err(GamesError::Refused(
                "a rematch is offered once the game is over".into(),
            ));
        }
        let (me, opponent) = match color {
            Color::White => (game.white.clone(), game.black.clone()),
            Color::Black => (game.black.clone(), game.white.clone()),
        };
        if opponent.computer {
            return Err(GamesError::Refused(
                "the computer needs no invitation: create a new game against it".into(),
            ));
        }
        let opponent_id = opponent.id.clone();
        let rules = game.rules()?;
        let start = game.start_position()?;
        let mut inv = InvitationRec::new(
            super::service::new_game_id(),
            me,
            Some(opponent),
            Some(!color),
            rules,
            game.time,
            game.rated,
            if start == Position::start(rules) {
                String::new()
            } else {
                game.start_fen.clone()
            },
            self.now(),
            0,
        )?;
        inv.rematch_of = Some(game.id.clone());
        self.check_not_blocked(player, &opponent_id).await?;
        self.store_new_invitation(&inv).await?;
        Ok(inv)
    }

    /// Writes a new invitation (rematches included), lists it for both sides within their bounds,
    /// and signals it to both.
    ///
    /// Order: the record is written first (create-only, no signal: nobody knows its id yet), then the
    /// inviter's list takes it by a compare-and-set that checks the inviter's bounds (refused: the
    /// record is deleted, the caller gets the refusal), then the invitee's list by a compare-and-set
    /// that keeps the invitee's bound on strangers (the oldest stranger's invitation leaves the list
    /// and is declined `too_many`). Every id in a list therefore has its record when the list is
    /// written, and a bound counted on a list is the bound of what that write leaves.
    async fn store_new_invitation(&self, inv: &InvitationRec) -> GamesResult<()> {
        let stranger = match &inv.invitee {
            // A rematch follows a game the two just played (its archive may still be on its way).
            Some(invitee) if inv.rematch_of.is_none() => {
                !self.have_played(&inv.inviter.id, &invitee.id).await?
            }
            _ => false,
        };
        self.live()
            .put(
                &keys::invitation(&inv.id),
                encode(inv)?,
                None,
                Some(self.invitation_ttl(inv)),
            )
            .await?;
        let sent = Listed {
            id: inv.id.clone(),
            with: inv
                .invitee
                .as_ref()
                .map(|p| p.id.to_string())
                .unwrap_or_default(),
            sent: true,
            stranger: false,
            expires_ms: inv.expires_ms,
        };
        let mut dropped = match self.list_checked(&inv.inviter.id, sent, true).await {
            Ok(dropped) => dropped,
            Err(refusal) => {
                // Best effort: the record is unknown to everyone, and expires anyway.
                let _ = self.live().delete(&keys::invitation(&inv.id)).await;
                return Err(refusal);
            }
        };
        if let Some(invitee) = &inv.invitee {
            let received = Listed {
                id: inv.id.clone(),
                with: inv.inviter.id.to_string(),
                sent: false,
                stranger,
                expires_ms: inv.expires_ms,
            };
            match self.list_checked(&invitee.id, received, false).await {
                Ok(more) => dropped.extend(more),
                Err(e) => {
                    // The invitee would never hear of it: withdrawn (best effort; it expires anyway).
                    let inviter = inv.inviter.id.clone();
                    let _ = self
                        .change_invitation(&inv.id, move |inv, now| {
                            inv.cancel(&inviter, now).map_err(GamesError::from)
                        })
                        .await;
                    return Err(e);
                }
            }
        }
        let mut effects = vec![signal(&inv.inviter.id, SignalKind::Invitation, &inv.id)];
        if let Some(invitee) = &inv.invitee {
            effects.push(signal(&invitee.id, SignalKind::Invitation, &inv.id));
        }
        for effect in effects {
            if let Effect::Publish { channel, payload } = effect {
                // A lost signal costs latency only: the snapshot of a (re)connecting client has it.
                let _ = self.live().publish(&channel, payload).await;
            }
        }
        for id in dropped {
            self.drop_as_too_many(&id).await;
        }
        Ok(())
    }

    /// Declines invitation `id` as [`DeclineReason::TooMany`] (it left its invitee's list).
    async fn drop_as_too_many(&self, id: &str) {
        let result = self
            .change_invitation(id, |inv, now| {
                if inv.standing(now) != Standing::Pending {
                    return Ok(());
                }
                inv.state = super::invitation::InvitationState::Declined {
                    reason: DeclineReason::TooMany,
                    at_ms: now,
                };
                Ok(())
            })
            .await;
        match result {
            Ok(_) => metrics::counter!("draughts_invitations_dropped_total").increment(1),
            Err(e) => {
                tracing::warn!(invitation_id = id, error = %e, "invitation over the invitee's bound not declined")
            }
        }
    }

    /// Whether `a` and `b` have a finished game together (either colours).
    pub async fn have_played(&self, a: &str, b: &str) -> GamesResult<bool> {
        let row: Option<(String,)> = draughts_store::sqlx::query_as(
            "SELECT game_id FROM finished_games
             WHERE (white_id = $1 AND black_id = $2) OR (white_id = $3 AND black_id = $4) LIMIT 1",
        )
        .bind(a)
        .bind(b)
        .bind(b)
        .bind(a)
        .fetch_optional(self.db().pool())
        .await
        .map_err(StoreError::from)?;
        Ok(row.is_some())
    }

    /// `player`'s list and its version (`None`: no list yet). A list in the older form (ids) is
    /// turned into entries from the invitations' records.
    async fn read_list(&self, player: &str) -> GamesResult<(Vec<Listed>, Option<u64>)> {
        let Some((bytes, version)) = self.live().get(&keys::player_invitations(player)).await?
        else {
            return Ok((Vec::new(), None));
        };
        Ok((self.entries_of(player, &bytes).await?, Some(version)))
    }

    /// The entries of `player`'s stored list.
    async fn entries_of(&self, player: &str, bytes: &[u8]) -> GamesResult<Vec<Listed>> {
        Ok(match serde_json::from_slice::<StoredList>(bytes) {
            Ok(StoredList::Entries(entries)) => entries,
            Ok(StoredList::Ids(ids)) => {
                let mut entries = Vec::new();
                for id in ids {
                    match self.load_invitation(&id).await {
                        Ok((inv, _)) => entries.push(listed_for(player, &inv, false)),
                        Err(GamesError::NotFound(_) | GamesError::Invalid(_)) => {}
                        Err(e) => return Err(e),
                    }
                }
                entries
            }
            Err(e) => {
                tracing::warn!(player, error = %e, "invitation list does not decode: started again");
                Vec::new()
            }
        })
    }

    async fn write_list(
        &self,
        player: &str,
        entries: &[Listed],
        version: Option<u64>,
    ) -> Result<u64, StoreError> {
        self.live()
            .put(
                &keys::player_invitations(player),
                encode_list(entries)?,
                version,
                None,
            )
            .await
    }

    /// Changes `player`'s list (empty when there is none) by compare-and-set ([`cas::update`]):
    /// `change` gets the entries and says what to write, tried again from a fresh read when another
    /// writer of the list wins.
    async fn change_list<R, F, Fut>(&self, player: &str, retry: Retry, change: F) -> GamesResult<R>
    where
        F: Fn(Vec<Listed>) -> Fut,
        Fut: std::future::Future<Output = GamesResult<Change<Vec<Listed>, R>>>,
    {
        let change = &change;
        cas::update_async(
            self.live().as_ref(),
            &keys::player_invitations(player),
            &Raw,
            retry,
            |stored| async move {
                let entries = match stored {
                    Some(bytes) => self.entries_of(player, &bytes).await?,
                    None => Vec::new(),
                };
                Ok(match change(entries).await? {
                    Change::Keep(result) => Change::Keep(result),
                    Change::Write {
                        value,
                        ttl,
                        effects,
                        then,
                    } => Change::Write {
                        value: encode_list(&value)?,
                        ttl,
                        effects,
                        then,
                    },
                })
            },
        )
        .await
    }

    /// Removes from `entries` those matching `which` whose invitation is no longer pending (one
    /// read each): what is counted against a bound is then what stands.
    async fn prune_settled(
        &self,
        entries: &mut Vec<Listed>,
        which: impl Fn(&Listed) -> bool,
    ) -> GamesResult<()> {
        let now = self.now();
        let mut settled = Vec::new();
        for entry in entries.iter().filter(|e| which(e)) {
            match self.load_invitation(&entry.id).await {
                Ok((inv, _)) if inv.standing(now) == Standing::Pending => {}
                Ok(_) | Err(GamesError::NotFound(_) | GamesError::Invalid(_)) => {
                    settled.push(entry.id.clone())
                }
                Err(e) => return Err(e),
            }
        }
        entries.retain(|e| !settled.contains(&e.id));
        Ok(())
    }

    /// Adds `entry` to `player`'s list in one compare-and-set that checks the bounds on the list
    /// it writes. `check_sent`: `entry` is sent by `player`: at most [`MAX_PENDING_SENT`] pending,
    /// one per invitee (refusals). Received from a stranger: the invitee keeps at most
    /// [`GamesLimits::max_pending_from_strangers`](super::GamesLimits) of those, the newest; and at
    /// most [`MAX_LISTED`] entries. Returns the ids of received invitations that left the list (to be
    /// declined `too_many`).
    async fn list_checked(
        &self,
        player: &str,
        entry: Listed,
        check_sent: bool,
    ) -> GamesResult<Vec<GameId>> {
        let max_strangers = self.limits().max_pending_from_strangers as usize;
        // Another writer of this list won: read it again, after a short random pause that spreads
        // the retries of many concurrent writers.
        let retry = Retry::times(LIST_CAS_ATTEMPTS).jittered(1, 8);
        let entry = &entry;
        self.change_list(player, retry, |mut entries| async move {
            let now = self.now();
            entries.retain(|e| e.expires_ms > now);
            if entries.iter().any(|e| e.id == entry.id) {
                return Ok(Change::Keep(Vec::new()));
            }
            if check_sent {
                let refusal = |entries: &[Listed]| {
                    let sent = entries.iter().filter(|e| e.sent).count();
                    if sent >= MAX_PENDING_SENT {
                        Some(ListRefusal::Sent(sent))
                    } else if !entry.with.is_empty()
                        && entries.iter().any(|e| e.sent && e.with == entry.with)
                    {
                        Some(ListRefusal::Pair)
                    } else {
                        None
                    }
                };
                if refusal(&entries).is_some() {
                    self.prune_settled(&mut entries, |e| e.sent).await?;
                    match refusal(&entries) {
                        Some(ListRefusal::Sent(sent)) => {
                            return Err(GamesError::Exhausted(format!(
                                "you have {sent} pending invitations (at most {MAX_PENDING_SENT}): cancel one or wait for answers"
                            )));
                        }
                        Some(ListRefusal::Pair) => {
                            return Err(GamesError::Refused(
                                "you already have a pending invitation to this player: cancel it or wait for an answer"
                                    .into(),
                            ));
                        }
                        None => {}
                    }
                }
            }
            let mut dropped = Vec::new();
            if entry.stranger {
                let strangers =
                    |entries: &[Listed]| entries.iter().filter(|e| !e.sent && e.stranger).count();
                if strangers(&entries) >= max_strangers {
                    self.prune_settled(&mut entries, |e| !e.sent && e.stranger)
                        .await?;
                }
                while strangers(&entries) >= max_strangers {
                    let Some(oldest) = entries.iter().position(|e| !e.sent && e.stranger) else {
                        break;
                    };
                    dropped.push(entries.remove(oldest).id);
                }
            }
            entries.push(entry.clone());
            while entries.len() > MAX_LISTED {
                match entries.iter().position(|e| !e.sent) {
                    Some(oldest) => dropped.push(entries.remove(oldest).id),
                    None => break,
                }
            }
            Ok(Change::Write {
                value: entries,
                ttl: None,
                effects: Vec::new(),
                then: dropped,
            })
        })
        .await
    }

    /// Removes invitation `id` from `player`'s list (best effort: an entry left behind is pruned
    /// when a bound is checked or the list read).
    async fn unlist(&self, player: &str, id: &str) {
        let _ = self
            .change_list(player, Retry::times(8), |mut entries| async move {
                let before = entries.len();
                entries.retain(|e| e.id != id);
                if entries.len() == before {
                    return Ok(Change::Keep(()));
                }
                Ok(Change::Write {
                    value: entries,
                    ttl: None,
                    effects: Vec::new(),
                    then: (),
                })
            })
            .await;
    }

    /// Settles the pending invitations between `player` and `other` (when `player` blocks `other`):
    /// those from `other` declined, those to `other` cancelled.
    pub(crate) async fn settle_invitations_between(
        &self,
        player: &str,
        other: &str,
    ) -> GamesResult<()> {
        let (entries, _) = self.read_list(player).await?;
        for entry in entries.iter().filter(|e| e.with == other) {
            let result = if entry.sent {
                self.change_invitation(&entry.id, |inv, now| {
                    if inv.standing(now) == Standing::Pending {
                        inv.cancel(player, now)?;
                    }
                    Ok(())
                })
                .await
            } else {
                self.change_invitation(&entry.id, |inv, now| {
                    if inv.standing(now) == Standing::Pending {
                        inv.decline(player, DeclineReason::Generic, now)?;
                    }
                    Ok(())
                })
                .await
            };
            match result {
                Ok(_) | Err(GamesError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Applies a transition to an invitation with compare-and-set (retried on conflicts), signalling
    /// both sides.
    pub(crate) async fn change_invitation(
        &self,
        id: &str,
        f: impl Fn(&mut InvitationRec, u64) -> GamesResult<()>,
    ) -> GamesResult<InvitationRec> {
        let id = draughts_proto::ids::GameId::parse(id)
            .map_err(|e| GamesError::Invalid(e.to_string()))?;
        let codec = (
            |bytes: &[u8]| decode(id.as_str(), bytes),
            |inv: &InvitationRec| encode(inv),
        );
        let inv = cas::update(
            self.live().as_ref(),
            &keys::invitation(id.as_str()),
            &codec,
            Retry::times(5),
            |inv| {
                let Some(mut inv) = inv else {
                    return Err(GamesError::NotFound(Missing::Invitation(id.to_string())));
                };
                f(&mut inv, self.now())?;
                let mut effects = vec![signal(&inv.inviter.id, SignalKind::Invitation, &inv.id)];
                if let Some(invitee) = &inv.invitee {
                    effects.push(signal(&invitee.id, SignalKind::Invitation, &inv.id));
                }
                Ok(Change::Write {
                    value: inv.clone(),
                    ttl: Some(self.invitation_ttl(&inv)),
                    effects,
                    then: inv,
                })
            },
        )
        .await?;
        if inv.standing(self.now()) != Standing::Pending {
            self.unlist(&inv.inviter.id, &inv.id).await;
            if let Some(invitee) = &inv.invitee {
                self.unlist(&invitee.id, &inv.id).await;
            }
        }
        Ok(inv)
    }

    /// `player` accepts invitation `id`: the game starts (its id is the invitation's). Repeating an
    /// accept that succeeded returns the same game.
    /// `accept_key`: the invitation's key if it has one (ignored otherwise).
    pub async fn accept_invitation(
        &self,
        id: &str,
        player: Player,
        accept_key: &str,
    ) -> GamesResult<GameRecord> {
        let (current, _) = self.load_invitation(id).await?;
        if !current.visible_to(&player.id) {
            return Err(GamesError::NotFound(Missing::Invitation(id.to_string())));
        }
        if !current.accept_key.is_empty()
            && !draughts_auth::constant_time_eq(
                current.accept_key.as_bytes(),
                accept_key.as_bytes(),
            )
        {
            return Err(GamesError::Refused(
                "this invitation is accepted only through the service that lists it (a lobby seek: \
                 Matchmaking.Accept, which checks its terms)"
                    .into(),
            ));
        }
        if current.inviter.id != player.id {
            self.check_not_blocked(&player.id, &current.inviter.id)
                .await?;
        }
        let already_mine = matches!(
            &current.state,
            super::invitation::InvitationState::Accepted { by, .. } if by.id == player.id
        );
        let inv = if already_mine {
            current
        } else {
            let accepter = player.clone();
            self.change_invitation(id, move |inv, now| {
                inv.accept(accepter.clone(), now).map_err(GamesError::from)
            })
            .await?
        };
        // The invitation is accepted: make its game (once; a repeat, or any read of the game id,
        // finds it: see `materialize_accepted`).
        match self.load(&inv.id).await {
            Ok((game, _)) => Ok(game),
            Err(GamesError::NotFound(_)) => self.create_game_of(&inv).await,
            Err(e) => Err(e),
        }
    }

    /// The game of an accepted invitation whose game is not stored yet (the accepting request
    /// failed or is still on its way between the two writes): made now, by whoever reads the id
    /// first, so that a player told of the acceptance never finds the game missing. `None` when
    /// `id` is not an accepted invitation.
    pub(crate) async fn materialize_accepted(&self, id: &str) -> GamesResult<Option<GameRecord>> {
        let inv = match self.load_invitation(id).await {
            Ok((inv, _)) => inv,
            Err(GamesError::NotFound(_) | GamesError::Invalid(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        if !matches!(
            inv.state,
            super::invitation::InvitationState::Accepted { .. }
        ) {
            return Ok(None);
        }
        self.create_game_of(&inv).await.map(Some)
    }

    /// Creates the game of an accepted invitation under the invitation's id (create-only: when
    /// another request made it first, that game is returned).
    async fn create_game_of(&self, inv: &InvitationRec) -> GamesResult<GameRecord> {
        let id = &inv.id;
        let random_white = {
            use rand::Rng;
            rand::rng().random::<bool>()
        };
        let (white, black) = inv.players(random_white).ok_or_else(|| {
            GamesError::Corrupt(format!("invitation {id} accepted without players"))
        })?;
        let rules = RuleSet::with_options(
            inv.variant
                .parse()
                .map_err(|_| GamesError::Corrupt(format!("invitation {id}: unknown variant")))?,
            draughts_engine::RuleOptions::parse(&inv.options)
                .map_err(|e| GamesError::Corrupt(e.to_string()))?,
        )
        .map_err(|e| GamesError::Corrupt(e.to_string()))?;
        let start = if inv.fen.is_empty() {
            Position::start(rules)
        } else {
            Position::from_fen(rules, &inv.fen).map_err(|e| GamesError::Corrupt(e.to_string()))?
        };
        let created = self
            .create_with_id(
                NewGame {
                    rules,
                    time: inv.time,
                    white,
                    black,
                    rated: inv.rated,
                    start,
                    berserk_allowed: false,
                },
                inv.id.clone(),
            )
            .await;
        match created {
            Ok(game) => Ok(game),
            // Another request made it at the same moment: that one stands.
            Err(GamesError::Conflict) => {
                match self.live().get(&super::service::keys::game(id)).await? {
                    Some((bytes, _)) => super::service::decode(id, &bytes),
                    None => Err(GamesError::Conflict),
                }
            }
            Err(e) => Err(e),
        }
    }

    pub async fn decline_invitation(
        &self,
        id: &str,
        player: &str,
        reason: DeclineReason,
    ) -> GamesResult<InvitationRec> {
        self.invitation_for(id, player).await?;
        self.change_invitation(id, |inv, now| {
            inv.decline(player, reason, now).map_err(GamesError::from)
        })
        .await
    }

    pub async fn cancel_invitation(&self, id: &str, player: &str) -> GamesResult<InvitationRec> {
        self.invitation_for(id, player).await?;
        self.change_invitation(id, |inv, now| {
            inv.cancel(player, now).map_err(GamesError::from)
        })
        .await
    }

    /// Lists invitation `id` (already stored) for `player` without checking bounds: how the
    /// invitations of a guest taken over by an account join the account's list.
    pub(crate) async fn index_invitation(&self, player: &str, id: &str) -> GamesResult<()> {
        let (inv, _) = self.load_invitation(id).await?;
        let entry = &listed_for(player, &inv, false);
        self.change_list(
            player,
            Retry::times(LIST_CAS_ATTEMPTS),
            |mut entries| async move {
                if entries.iter().any(|e| e.id == id) {
                    return Ok(Change::Keep(()));
                }
                entries.push(entry.clone());
                Ok(Change::Write {
                    value: entries,
                    ttl: None,
                    effects: Vec::new(),
                    then: (),
                })
            },
        )
        .await
    }

    /// `player`'s pending invitations (sent and received), oldest first. Settled and expired ones are
    /// pruned from the player's list on the way.
    pub async fn pending_invitations(&self, player: &str) -> GamesResult<Vec<InvitationRec>> {
        let (entries, version) = self.read_list(player).await?;
        let Some(version) = version else {
            return Ok(Vec::new());
        };
        let now = self.now();
        let mut pending = Vec::new();
        let mut kept = Vec::new();
        for entry in &entries {
            match self.load_invitation(&entry.id).await {
                Ok((inv, _)) if inv.standing(now) == Standing::Pending => {
                    pending.push(inv);
                    kept.push(entry.clone());
                }
                Ok(_) | Err(GamesError::NotFound(_) | GamesError::Invalid(_)) => {}
                Err(e) => return Err(e),
            }
        }
        if kept.len() < entries.len() {
            // Best effort: a concurrent change keeps its own version of the list.
            let _ = self.write_list(player, &kept, Some(version)).await;
        }
        Ok(pending)
    }
}

/// `player`'s entry for `inv`.
fn listed_for(player: &str, inv: &InvitationRec, stranger: bool) -> Listed {
    let sent = inv.inviter.id == player;
    Listed {
        id: inv.id.clone(),
        with: if sent {
            inv.invitee
                .as_ref()
                .map(|p| p.id.to_string())
                .unwrap_or_default()
        } else {
            inv.inviter.id.to_string()
        },
        sent,
        stranger,
        expires_ms: inv.expires_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A player's invitation list as Games wrote it before ids were typed (a sent open invitation, a
    /// received one from a stranger) reads, invitation ids checked, and writes back byte for byte; a
    /// list of the older form (ids only) still reads as such.
    #[test]
    fn lists_written_before_typed_ids_read_and_write_back_byte_for_byte() {
        const LIST: &str = r#"[{"id":"g19ae2b3c4d5e6f70789","with":"","sent":true,"stranger":false,"expires_ms":1765159200000},{"id":"g19ae2b3c4d5e6f70456","with":"user:0123456789abcdef0123","sent":false,"stranger":true,"expires_ms":1764900600000}]"#;
        let Ok(StoredList::Entries(entries)) = serde_json::from_str::<StoredList>(LIST) else {
            panic!("entries");
        };
        assert_eq!(entries[1].id.as_str(), "g19ae2b3c4d5e6f70456");
        assert_eq!(serde_json::to_string(&entries).unwrap(), LIST);
        assert!(matches!(
            serde_json::from_str::<StoredList>(r#"["g19ae2b3c4d5e6f70456"]"#),
            Ok(StoredList::Ids(ids)) if ids.len() == 1
        ));
        let bad = LIST.replace("g19ae2b3c4d5e6f70456", "g 1");
        assert!(serde_json::from_str::<StoredList>(&bad).is_err());
    }
}
