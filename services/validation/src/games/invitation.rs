//! The stored form of an invitation (the consent step before a game between two people) and its pure
//! transitions. No I/O here: [`super::consent`] loads, calls these, and stores.
//!
//! Schema (JSON in the live store under `invitation:{id}`, field `v` = [`SCHEMA_VERSION`], kept until an
//! hour after it expires): see [`InvitationRec`]. Readers ignore unknown fields.
//!
//! States: `pending` until the invitee (anyone but the inviter, for an open invitation) accepts or
//! declines, the inviter cancels, or `expires_ms` passes (expiry is read from the clock, not written).
//! Accepting is the one way a game between two people starts; the game takes the invitation's id, so a
//! repeated accept finds the game it made instead of making a second one.

use draughts_engine::{Color, RuleSet};
use draughts_proto::ids::GameId;
use draughts_proto::pb::ErrorReason;
use draughts_proto::vocab::player::Player;
use serde::{Deserialize, Serialize};

use super::record::{ColorRec, PlayError, PlayResult, TimeControlRec};

/// The schema version written in `v`.
pub const SCHEMA_VERSION: u32 = 1;

/// Default time an invitation stands (real-time games), ms.
pub const DEFAULT_EXPIRY_MS: u64 = 10 * 60 * 1000;
/// Default time an invitation stands (correspondence games), ms.
pub const DEFAULT_CORRESPONDENCE_EXPIRY_MS: u64 = 3 * 24 * 3600 * 1000;
/// Longest time an invitation may stand, ms.
pub const MAX_EXPIRY_MS: u64 = 7 * 24 * 3600 * 1000;

/// Why an invitation was declined (the wire enum's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeclineReason {
    Generic,
    Later,
    TooFast,
    TooSlow,
    TimeControl,
    Rated,
    Casual,
    Variant,
    /// Set by the server: the invitee held the most pending invitations from strangers and a newer
    /// one pushed this one out (`consent`).
    TooMany,
}

/// Where an invitation stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum InvitationState {
    Pending,
    Accepted { by: Player, at_ms: u64 },
    Declined { reason: DeclineReason, at_ms: u64 },
    Cancelled { at_ms: u64 },
}

/// An invitation as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvitationRec {
    pub v: u32,
    /// Checked on read (ids are generated like a game's: the game it starts takes it).
    pub id: GameId,
    pub inviter: Player,
    /// `None`: an open invitation.
    #[serde(default)]
    pub invitee: Option<Player>,
    /// `None`: drawn at random when accepted.
    #[serde(default)]
    pub inviter_color: Option<ColorRec>,
    pub variant: String,
    #[serde(default)]
    pub options: String,
    pub time: TimeControlRec,
    pub rated: bool,
    /// Normalised start FEN; empty for the variant's start position.
    #[serde(default)]
    pub fen: String,
    pub created_ms: u64,
    pub expires_ms: u64,
    pub state: InvitationState,
    /// For a rematch: the finished game it follows.
    #[serde(default)]
    pub rematch_of: Option<GameId>,
    /// When not empty, an acceptance must present this key (CreateInvitationRequest.accept_key).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub accept_key: String,
}

/// What an invitation looks like at a moment (expiry included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    Pending,
    Accepted,
    Declined,
    Cancelled,
    Expired,
}

impl InvitationRec {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: GameId,
        inviter: Player,
        invitee: Option<Player>,
        inviter_color: Option<Color>,
        rules: RuleSet,
        time: TimeControlRec,
        rated: bool,
        fen: String,
        now: u64,
        expires_in_ms: u64,
    ) -> PlayResult<InvitationRec> {
        if invitee.as_ref().is_some_and(|p| p.id == inviter.id) {
            return Err(PlayError::Denied(ErrorReason::InviteSelf));
        }
        if invitee.as_ref().is_some_and(|p| p.computer) {
            return Err(PlayError::Invalid(
                "the computer needs no invitation: create the game (CreateGame) against it".into(),
            ));
        }
        let expires_in_ms = match expires_in_ms {
            0 => match time {
                TimeControlRec::Fischer { .. } => DEFAULT_EXPIRY_MS,
                TimeControlRec::Correspondence { .. } => DEFAULT_CORRESPONDENCE_EXPIRY_MS,
            },
            ms if ms > MAX_EXPIRY_MS => {
                return Err(PlayError::Invalid(format!(
                    "expires_in_ms is at most {MAX_EXPIRY_MS} (7 days)"
                )));
            }
            ms => ms,
        };
        Ok(InvitationRec {
            v: SCHEMA_VERSION,
            id,
            inviter,
            invitee,
            inviter_color: inviter_color.map(Into::into),
            variant: rules.variant().key().to_string(),
            options: rules.options().to_string(),
            time,
            rated,
            fen,
            created_ms: now,
            expires_ms: now + expires_in_ms,
            state: InvitationState::Pending,
            rematch_of: None,
            accept_key: String::new(),
        })
    }

    pub fn standing(&self, now: u64) -> Standing {
        match self.state {
            InvitationState::Pending if now >= self.expires_ms => Standing::Expired,
            InvitationState::Pending => Standing::Pending,
            InvitationState::Accepted { .. } => Standing::Accepted,
            InvitationState::Declined { .. } => Standing::Declined,
            InvitationState::Cancelled { .. } => Standing::Cancelled,
        }
    }

    /// When the state last changed, Unix ms.
    pub fn updated_ms(&self) -> u64 {
        match &self.state {
            InvitationState::Pending => self.created_ms,
            InvitationState::Accepted { at_ms, .. }
            | InvitationState::Declined { at_ms, .. }
            | InvitationState::Cancelled { at_ms } => *at_ms,
        }
    }

    /// Whether `player` may see it: its inviter, its invitee, anyone for an open one.
    pub fn visible_to(&self, player: &str) -> bool {
        self.invitee.as_ref().is_none_or(|p| p.id == player) || self.inviter.id == player
    }

    fn refuse_unless_pending(&self, now: u64) -> PlayResult<()> {
        match self.standing(now) {
            Standing::Pending => Ok(()),
            Standing::Accepted => Err(PlayError::Refused(
                "the invitation has already been accepted".into(),
            )),
            Standing::Declined => Err(PlayError::Denied(ErrorReason::InvitationDeclined)),
            Standing::Cancelled => Err(PlayError::Denied(ErrorReason::InvitationCancelled)),
            Standing::Expired => Err(PlayError::Denied(ErrorReason::InvitationExpired)),
        }
    }

    /// `player` accepts at `now`.
    pub fn accept(&mut self, player: Player, now: u64) -> PlayResult<()> {
        if player.id == self.inviter.id {
            return Err(PlayError::Refused(
                "you cannot accept your own invitation".into(),
            ));
        }
        if self.invitee.as_ref().is_some_and(|p| p.id != player.id) {
            return Err(PlayError::NotAPlayer);
        }
        self.refuse_unless_pending(now)?;
        self.state = InvitationState::Accepted {
            by: player,
            at_ms: now,
        };
        Ok(())
    }

    /// The invitee declines at `now`.
    pub fn decline(&mut self, player: &str, reason: DeclineReason, now: u64) -> PlayResult<()> {
        match &self.invitee {
            None => {
                return Err(PlayError::Refused(
                    "an open invitation cannot be declined: leave it".into(),
                ));
            }
            Some(p) if p.id != player => return Err(PlayError::NotAPlayer),
            Some(_) => {}
        }
        self.refuse_unless_pending(now)?;
        self.state = InvitationState::Declined { reason, at_ms: now };
        Ok(())
    }

    /// The inviter withdraws it at `now`.
    pub fn cancel(&mut self, player: &str, now: u64) -> PlayResult<()> {
        if player != self.inviter.id {
            return Err(PlayError::NotAPlayer);
        }
        self.refuse_unless_pending(now)?;
        self.state = InvitationState::Cancelled { at_ms: now };
        Ok(())
    }

    /// White and Black once accepted (the inviter's colour, or `random_white` when none was asked).
    pub fn players(&self, random_white: bool) -> Option<(Player, Player)> {
        let InvitationState::Accepted { by, .. } = &self.state else {
            return None;
        };
        let inviter_white = match self.inviter_color {
            Some(ColorRec::White) => true,
            Some(ColorRec::Black) => false,
            None => random_white,
        };
        Some(if inviter_white {
            (self.inviter.clone(), by.clone())
        } else {
            (by.clone(), self.inviter.clone())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use draughts_engine::Variant;

    fn player(id: &str) -> Player {
        Player {
            name: id.into(),
            guest: true,
            ..Player::new(id.parse().unwrap())
        }
    }

    fn invitation(invitee: Option<&str>) -> InvitationRec {
        InvitationRec::new(
            "g1".parse().unwrap(),
            player("guest:a"),
            invitee.map(player),
            Some(Color::Black),
            RuleSet::new(Variant::English),
            TimeControlRec::Fischer {
                base_ms: 60_000,
                increment_ms: 0,
            },
            true,
            String::new(),
            1_000,
            0,
        )
        .unwrap()
    }

    #[test]
    fn only_the_invitee_accepts_once_and_colours_follow_the_request() {
        let mut inv = invitation(Some("guest:b"));
        assert_eq!(
            inv.accept(player("guest:c"), 2_000),
            Err(PlayError::NotAPlayer)
        );
        assert!(matches!(
            inv.accept(player("guest:a"), 2_000),
            Err(PlayError::Refused(_))
        ));
        inv.accept(player("guest:b"), 2_000).unwrap();
        assert!(matches!(
            inv.accept(player("guest:b"), 2_000),
            Err(PlayError::Refused(_))
        ));
        let (white, black) = inv.players(true).unwrap();
        assert_eq!(
            (white.id.as_str(), black.id.as_str()),
            ("guest:b", "guest:a")
        );
        assert!(matches!(
            inv.cancel("guest:a", 3_000),
            Err(PlayError::Refused(_))
        ));
    }

    #[test]
    fn expiry_decline_cancel_and_open_invitations() {
        let mut inv = invitation(Some("guest:b"));
        assert_eq!(
            inv.standing(1_000 + DEFAULT_EXPIRY_MS - 1),
            Standing::Pending
        );
        assert_eq!(inv.standing(1_000 + DEFAULT_EXPIRY_MS), Standing::Expired);
        assert!(
            inv.accept(player("guest:b"), 1_000 + DEFAULT_EXPIRY_MS)
                .is_err()
        );
        assert_eq!(
            inv.decline("guest:a", DeclineReason::Later, 2_000),
            Err(PlayError::NotAPlayer)
        );
        inv.decline("guest:b", DeclineReason::TooFast, 2_000)
            .unwrap();
        assert_eq!(inv.standing(2_001), Standing::Declined);

        let mut open = invitation(None);
        assert!(open.visible_to("guest:anyone"));
        assert!(
            open.decline("guest:c", DeclineReason::Generic, 2_000)
                .is_err()
        );
        assert_eq!(open.cancel("guest:c", 2_000), Err(PlayError::NotAPlayer));
        open.accept(player("guest:c"), 2_000).unwrap();
        assert_eq!(open.standing(2_000), Standing::Accepted);

        let self_invite = InvitationRec::new(
            "g2".parse().unwrap(),
            player("guest:a"),
            Some(player("guest:a")),
            None,
            RuleSet::new(Variant::English),
            TimeControlRec::Correspondence { days_per_move: 1 },
            false,
            String::new(),
            0,
            0,
        );
        assert_eq!(self_invite, Err(PlayError::Denied(ErrorReason::InviteSelf)));
    }
    /// Invitations as Games wrote them before ids were typed (an accepted rematch; an open
    /// invitation of a BOT with an accept key): they read, ids checked, and write back byte for byte.
    #[test]
    fn invitations_written_before_typed_ids_read_and_write_back_byte_for_byte() {
        use draughts_proto::ids::PlayerKind;
        const ACCEPTED: &str = r#"{"v":1,"id":"g19ae2b3c4d5e6f70456","inviter":{"id":"user:0123456789abcdef0123","name":"Ann","guest":false,"computer":false},"invitee":{"id":"guest:0123456789abcdef0123456789abcdef","name":"Bob","guest":true,"computer":false},"inviter_color":"white","variant":"international","options":"","time":{"kind":"fischer","base_ms":300000,"increment_ms":2000},"rated":true,"fen":"","created_ms":1764900000000,"expires_ms":1764900600000,"state":{"state":"accepted","by":{"id":"guest:0123456789abcdef0123456789abcdef","name":"Bob","guest":true,"computer":false},"at_ms":1764900005000},"rematch_of":"g19ae2b3c4d5e6f70123"}"#;
        const OPEN: &str = r#"{"v":1,"id":"g19ae2b3c4d5e6f70789","inviter":{"id":"key:acme-bot.v2","name":"acme-bot.v2","guest":false,"computer":false,"bot":true},"invitee":null,"inviter_color":null,"variant":"english","options":"","time":{"kind":"correspondence","days_per_move":3},"rated":false,"fen":"","created_ms":1764900000000,"expires_ms":1765159200000,"state":{"state":"pending"},"rematch_of":null,"accept_key":"k3y"}"#;
        for json in [ACCEPTED, OPEN] {
            let inv: InvitationRec = serde_json::from_str(json).unwrap();
            assert_eq!(serde_json::to_string(&inv).unwrap(), json);
        }
        let accepted: InvitationRec = serde_json::from_str(ACCEPTED).unwrap();
        assert_eq!(accepted.inviter.id.kind(), PlayerKind::Account);
        assert_eq!(
            accepted.rematch_of.as_ref().map(|id| id.as_str()),
            Some("g19ae2b3c4d5e6f70123")
        );
        let (white, black) = accepted.players(false).unwrap();
        assert_eq!(
            (white.id.as_str(), black.id.is_guest()),
            ("user:0123456789abcdef0123", true)
        );
        let open: InvitationRec = serde_json::from_str(OPEN).unwrap();
        assert_eq!(open.inviter.id.kind(), PlayerKind::ApiKey);
        assert!(open.visible_to("guest:anyone"));

        // A side of an id older than the checks reads as a legacy id; malformed game ids do not read.
        let legacy = ACCEPTED.replace("user:0123456789abcdef0123", "ann");
        let old: InvitationRec = serde_json::from_str(&legacy).unwrap();
        assert_eq!(old.inviter.id.kind(), PlayerKind::Legacy);
        assert_eq!(serde_json::to_string(&old).unwrap(), legacy);
        for bad in [
            ACCEPTED.replace(r#""id":"g19ae2b3c4d5e6f70456""#, r#""id":"g/1""#),
            ACCEPTED.replace(
                r#""rematch_of":"g19ae2b3c4d5e6f70123""#,
                r#""rematch_of":"""#,
            ),
        ] {
            assert!(
                serde_json::from_str::<InvitationRec>(&bad).is_err(),
                "{bad}"
            );
        }
    }
}
