//! Consent: invitations (challenges), their acceptance, rematches, and the per-player signals that tell a
//! player about them without polling. Domain code over the live store; the gRPC edge is in
//! [`super::grpc`].
//!
//! Names (built here):
//! - `invitation:{id}`: the [`InvitationRec`] as JSON, versioned, expiring an hour after the invitation.
//! - `player-invitations:{player}`: JSON list of the ids of the player's invitations (sent and received),
//!   pruned of settled ones when read.
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
use draughts_store::{Effect, StoreError};

use super::invitation::{DeclineReason, InvitationRec, Standing};
use super::record::{GameRecord, PlayerRec, TimeControlRec};
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
/// Invitation ids kept in one player's list (the oldest are dropped beyond it).
pub const MAX_LISTED: usize = 200;
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
    pub inviter: PlayerRec,
    pub invitee: Option<PlayerRec>,
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
        self.store_new_invitation(&inv).await?;
        Ok(inv)
    }

    /// Writes a new invitation (rematches included), within the inviter's bound of pending ones, and
    /// signals and indexes it for both sides.
    async fn store_new_invitation(&self, inv: &InvitationRec) -> GamesResult<()> {
        let sent = self
            .pending_invitations(&inv.inviter.id)
            .await?
            .into_iter()
            .filter(|i| i.inviter.id == inv.inviter.id)
            .count();
        if sent >= MAX_PENDING_SENT {
            return Err(GamesError::Exhausted(format!(
                "you have {sent} pending invitations (at most {MAX_PENDING_SENT}): cancel one or wait for answers"
            )));
        }
        let mut effects = vec![signal(&inv.inviter.id, SignalKind::Invitation, &inv.id)];
        if let Some(invitee) = &inv.invitee {
            effects.push(signal(&invitee.id, SignalKind::Invitation, &inv.id));
        }
        self.live()
            .put_with(
                &keys::invitation(&inv.id),
                encode(inv)?,
                None,
                Some(self.invitation_ttl(inv)),
                &effects,
            )
            .await?;
        self.index_invitation(&inv.inviter.id, &inv.id).await?;
        if let Some(invitee) = &inv.invitee {
            self.index_invitation(&invitee.id, &inv.id).await?;
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
        for _ in 0..5 {
            let (mut inv, version) = self.load_invitation(id).await?;
            f(&mut inv, self.now())?;
            let mut effects = vec![signal(&inv.inviter.id, SignalKind::Invitation, &inv.id)];
            if let Some(invitee) = &inv.invitee {
                effects.push(signal(&invitee.id, SignalKind::Invitation, &inv.id));
            }
            match self
                .live()
                .put_with(
                    &keys::invitation(&inv.id),
                    encode(&inv)?,
                    Some(version),
                    Some(self.invitation_ttl(&inv)),
                    &effects,
                )
                .await
            {
                Ok(_) => return Ok(inv),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(GamesError::Conflict)
    }

    /// `player` accepts invitation `id`: the game starts (its id is the invitation's). Repeating an
    /// accept that succeeded returns the same game.
    /// `accept_key`: the invitation's key if it has one (ignored otherwise).
    pub async fn accept_invitation(
        &self,
        id: &str,
        player: PlayerRec,
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

    pub(crate) async fn index_invitation(&self, player: &str, id: &str) -> GamesResult<()> {
        let key = keys::player_invitations(player);
        for _ in 0..10 {
            let (mut ids, version): (Vec<String>, Option<u64>) = match self.live().get(&key).await?
            {
                Some((b, v)) => (serde_json::from_slice(&b).unwrap_or_default(), Some(v)),
                None => (Vec::new(), None),
            };
            if ids.iter().any(|i| i == id) {
                return Ok(());
            }
            ids.push(id.to_owned());
            if ids.len() > MAX_LISTED {
                let drop = ids.len() - MAX_LISTED;
                ids.drain(..drop);
            }
            let bytes = serde_json::to_vec(&ids).map_err(|e| GamesError::Invalid(e.to_string()))?;
            match self
                .live()
                .put(&key, Bytes::from(bytes), version, None)
                .await
            {
                Ok(_) => return Ok(()),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(GamesError::Conflict)
    }

    /// `player`'s pending invitations (sent and received), oldest first. Settled and expired ones are
    /// pruned from the player's list on the way.
    pub async fn pending_invitations(&self, player: &str) -> GamesResult<Vec<InvitationRec>> {
        let key = keys::player_invitations(player);
        let Some((bytes, version)) = self.live().get(&key).await? else {
            return Ok(Vec::new());
        };
        let ids: Vec<String> = serde_json::from_slice(&bytes).unwrap_or_default();
        let now = self.now();
        let mut pending = Vec::new();
        for id in &ids {
            match self.load_invitation(id).await {
                Ok((inv, _)) if inv.standing(now) == Standing::Pending => pending.push(inv),
                Ok(_) | Err(GamesError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        if pending.len() < ids.len() {
            let kept: Vec<&str> = pending.iter().map(|i| i.id.as_str()).collect();
            let bytes =
                serde_json::to_vec(&kept).map_err(|e| GamesError::Invalid(e.to_string()))?;
            // Best effort: a concurrent change keeps its own version of the list.
            let _ = self
                .live()
                .put(&key, Bytes::from(bytes), Some(version), None)
                .await;
        }
        Ok(pending)
    }
}
