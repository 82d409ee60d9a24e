//! `draughts.v1.Games` over gRPC: authenticate, convert, call [`GamesCore`], convert back.

use draughts_engine::{Color, Position, RuleSet};
use draughts_proto::{ServiceError, convert, pb};
use tonic::{Request, Response, Status};

use super::consent::NewInvitation;
use super::invitation::{DeclineReason, InvitationRec, InvitationState, Standing};
use super::record::{EventRec, GameRecord, TimeControlRec};
use super::service::{GamesCore, GamesError, Missing, NewGame, PageKey};
use crate::auth::{self, Identities, Principal, Scope};
use draughts_proto::ids::PlayerId;
use draughts_proto::vocab::player::Player;

/// The Games gRPC service.
#[derive(Clone, Debug)]
pub struct GamesService {
    core: GamesCore,
    identities: Identities,
}

impl GamesService {
    pub fn new(core: GamesCore) -> Self {
        let identities = Identities::new(core.live().clone());
        GamesService { core, identities }
    }

    /// The player named `id` (empty: the caller), from the server's identities: INVALID_ARGUMENT for a
    /// malformed id, NOT_FOUND for one the server does not know.
    async fn resolve_player(
        &self,
        id: &str,
        me: &Principal,
        field: &str,
    ) -> Result<Player, GamesError> {
        if id.is_empty() || id == me.player_id {
            return me_rec(me);
        }
        let id = PlayerId::parse(id).map_err(|e| GamesError::Invalid(format!("{field}: {e}")))?;
        let identity = self.identities.lookup(&id).await?.ok_or_else(|| {
            GamesError::NotFound(Missing::Player {
                id: id.to_string(),
                field: field.to_owned(),
            })
        })?;
        Ok(Player {
            guest: identity.is_guest(),
            computer: identity.is_computer(),
            bot: identity.bot,
            name: identity.name,
            ..Player::new(identity.id)
        })
    }
}

fn api(e: draughts_proto::ApiError) -> GamesError {
    GamesError::Invalid(e.to_string())
}

pub(crate) fn err(e: GamesError) -> Status {
    if e.kind() == draughts_proto::ErrorKind::Internal {
        tracing::error!(error = %e, "games: internal error");
    }
    let mut status = e.to_status();
    if let GamesError::Quota {
        retry_after_secs, ..
    } = e
    {
        status
            .metadata_mut()
            .insert("retry-after", retry_after_secs.into());
    }
    status
}

/// The caller as a player of a game (every caller's id is a player id: Auth checks them; a caller
/// whose is not is refused, never stored).
fn me_rec(me: &Principal) -> Result<Player, GamesError> {
    let id =
        PlayerId::parse(&me.player_id).map_err(|e| GamesError::Invalid(format!("caller: {e}")))?;
    Ok(Player {
        name: me.display_name.clone(),
        guest: me.kind == auth::PrincipalKind::Guest,
        bot: me.is_bot(),
        ..Player::new(id)
    })
}

fn time_control(tc: Option<&pb::TimeControl>) -> Result<TimeControlRec, GamesError> {
    TimeControlRec::from_wire(tc).map_err(|e| GamesError::Invalid(e.to_string()))
}

fn color_wire(c: Color) -> i32 {
    convert::color_to_wire(c) as i32
}

fn status_wire(record: &GameRecord, pos: &Position) -> pb::GameStatus {
    let Some(r) = &record.result else {
        return convert::status_to_wire(draughts_engine::GameStatus::Ongoing, pos);
    };
    let outcome = r.outcome.to_wire();
    let reason = r.reason.to_wire();
    pb::GameStatus {
        outcome: outcome as i32,
        reason: reason as i32,
        description: r.description.clone(),
        result: super::pdn::result_text(record),
    }
}

/// Builds the wire view of a record at `now` (no replay: the record has the position and every move).
pub fn view(record: &GameRecord, now: u64) -> Result<pb::GameView, GamesError> {
    view_from(record, now, 0)
}

/// A view whose `moves` start at index `from` (ply `from + 1`).
fn view_from(record: &GameRecord, now: u64, from: usize) -> Result<pb::GameView, GamesError> {
    let rules = record.rules()?;
    let pos = record.position()?;
    let board = pos.board();
    let name = |n: &u32| {
        board
            .square(*n)
            .map(|sq| convert::square_name(board, sq))
            .ok_or_else(|| GamesError::Corrupt(format!("stored move names square {n}")))
    };
    let mut moves = Vec::with_capacity(record.moves.len().saturating_sub(from));
    for (i, m) in record.moves.iter().enumerate().skip(from) {
        let path = m.path.iter().map(name).collect::<Result<Vec<_>, _>>()?;
        let wire = pb::Move {
            notation: m.text.clone(),
            from: path.first().cloned().unwrap_or_default(),
            to: path.last().cloned().unwrap_or_default(),
            captured: m.captured.iter().map(name).collect::<Result<_, _>>()?,
            path,
            promotes: m.promotes,
        };
        moves.push(played_move(i, record.mover(i), wire, m));
    }
    let (white_ms, black_ms) = record.clocks_at(pos.side_to_move(), now);
    Ok(pb::GameView {
        game_id: record.id.to_string(),
        rules: Some(convert::rules_to_wire(rules)),
        time_control: Some(time_control_wire(&record.time)),
        white: Some(record.white.to_wire()),
        black: Some(record.black.to_wire()),
        rated: record.rated,
        start_fen: record.start_fen.clone(),
        moves,
        position: Some(convert::position_to_wire(&pos)),
        status: Some(status_wire(record, &pos)),
        clocks: Some(pb::Clocks {
            white_ms,
            black_ms,
            running: if record.is_over() {
                0
            } else {
                color_wire(pos.side_to_move())
            },
            at_ms: now,
        }),
        draw_offer: record.draw_offer.map_or(0, |c| color_wire(c.into())),
        created_at_ms: record.created_ms,
        revision: record.last_seq(),
        first_ply: if record.moves.is_empty() {
            0
        } else {
            from as u32 + 1
        },
        first_move_deadline_ms: record.first_move_deadline(pos.side_to_move()).unwrap_or(0),
        spectators: 0,
        berserk_allowed: record.berserk_allowed,
        white_berserk: record.white_berserk,
        black_berserk: record.black_berserk,
    })
}

/// The view answered to actions: everything but the history, which is cut to the last move.
pub fn action_view(record: &GameRecord, now: u64) -> Result<pb::GameView, GamesError> {
    view_from(record, now, record.moves.len().saturating_sub(1))
}

/// The wire form of stored move `i` (0-based) played by `side`, with the clocks after it.
fn played_move(
    i: usize,
    side: Color,
    wire: pb::Move,
    m: &super::record::MoveRec,
) -> pb::PlayedMove {
    pb::PlayedMove {
        ply: i as u32 + 1,
        side: color_wire(side),
        r#move: Some(wire),
        clocks: Some(pb::Clocks {
            white_ms: m.white_ms,
            black_ms: m.black_ms,
            running: color_wire(!side),
            at_ms: m.at_ms,
        }),
        played_at_ms: m.at_ms,
    }
}

fn time_control_wire(t: &TimeControlRec) -> pb::TimeControl {
    t.to_wire()
}

/// The wire events of a record with seq greater than `after`.
pub fn events_after(
    record: &GameRecord,
    after: u64,
    now: u64,
) -> Result<Vec<pb::GameEvent>, GamesError> {
    let full = view(record, now)?;
    let mut out = Vec::new();
    for e in record.timeline().iter().filter(|e| e.seq() > after) {
        use pb::game_event::Kind;
        let (seq, at_ms, kind) = match e {
            EventRec::Created { seq, at_ms } => {
                let mut created = full.clone();
                created.moves.clear();
                created.status = Some(convert::status_to_wire(
                    draughts_engine::GameStatus::Ongoing,
                    &record.start_position()?,
                ));
                let initial = record.time.initial_ms();
                let start = record.start_position()?;
                created.position = Some(convert::position_to_wire(&start));
                created.clocks = Some(pb::Clocks {
                    white_ms: initial,
                    black_ms: initial,
                    running: color_wire(start.side_to_move()),
                    at_ms: *at_ms,
                });
                created.draw_offer = 0;
                created.revision = 1;
                // As created: a berserk comes later, as its own event.
                created.white_berserk = false;
                created.black_berserk = false;
                (*seq, *at_ms, Kind::Created(created))
            }
            EventRec::Move { seq, at_ms, ply } => {
                let m =
                    full.moves.get(*ply as usize - 1).cloned().ok_or_else(|| {
                        GamesError::Invalid(format!("event for missing ply {ply}"))
                    })?;
                (*seq, *at_ms, Kind::MovePlayed(m))
            }
            EventRec::DrawOffered { seq, at_ms, by, .. } => {
                (*seq, *at_ms, Kind::DrawOffered(color_wire((*by).into())))
            }
            EventRec::DrawDeclined { seq, at_ms, by, .. } => {
                (*seq, *at_ms, Kind::DrawDeclined(color_wire((*by).into())))
            }
            EventRec::Finished { seq, at_ms, .. } => (
                *seq,
                *at_ms,
                Kind::Finished(full.status.clone().unwrap_or_default()),
            ),
            EventRec::Berserk { seq, at_ms, by, .. } => {
                (*seq, *at_ms, Kind::Berserk(color_wire((*by).into())))
            }
        };
        out.push(pb::GameEvent {
            seq,
            at_ms,
            kind: Some(kind),
        });
    }
    Ok(out)
}

fn caller<T>(req: &Request<T>) -> Result<Principal, Status> {
    let p = auth::principal(req)?;
    auth::require(&p, Scope::Play)?;
    Ok(p)
}

use super::watch::WatchStream;

#[tonic::async_trait]
impl pb::games_server::Games for GamesService {
    #[tracing::instrument(skip_all, fields(game_id, variant))]
    async fn create_game(
        &self,
        req: Request<pb::CreateGameRequest>,
    ) -> Result<Response<pb::GameView>, Status> {
        let me = caller(&req)?;
        let address = draughts_auth::client_address(&req);
        let req = req.into_inner();
        let record = self.create(&me, &address, req).await.map_err(err)?;
        tracing::Span::current().record("game_id", record.id.as_str());
        tracing::Span::current().record("variant", record.variant.as_str());
        Ok(Response::new(view(&record, self.core.now()).map_err(err)?))
    }

    #[tracing::instrument(skip_all, fields(invitation_id))]
    async fn create_invitation(
        &self,
        req: Request<pb::CreateInvitationRequest>,
    ) -> Result<Response<pb::Invitation>, Status> {
        let me = caller(&req)?;
        let inv = self.invite(&me, req.into_inner()).await.map_err(err)?;
        tracing::Span::current().record("invitation_id", inv.id.as_str());
        Ok(Response::new(
            invitation_wire(&inv, self.core.now()).map_err(err)?,
        ))
    }

    async fn get_invitation(
        &self,
        req: Request<pb::InvitationRequest>,
    ) -> Result<Response<pb::Invitation>, Status> {
        let me = caller(&req)?;
        let inv = self
            .core
            .invitation_for(&req.get_ref().invitation_id, &me.player_id)
            .await
            .map_err(err)?;
        Ok(Response::new(
            invitation_wire(&inv, self.core.now()).map_err(err)?,
        ))
    }

    #[tracing::instrument(skip_all, fields(invitation_id = %req.get_ref().invitation_id))]
    async fn accept_invitation(
        &self,
        req: Request<pb::InvitationRequest>,
    ) -> Result<Response<pb::GameView>, Status> {
        let me = caller(&req)?;
        let record = self
            .core
            .accept_invitation(
                &req.get_ref().invitation_id,
                me_rec(&me).map_err(err)?,
                &req.get_ref().accept_key,
            )
            .await
            .map_err(err)?;
        Ok(Response::new(view(&record, self.core.now()).map_err(err)?))
    }

    async fn decline_invitation(
        &self,
        req: Request<pb::DeclineInvitationRequest>,
    ) -> Result<Response<pb::Invitation>, Status> {
        let me = caller(&req)?;
        let req = req.into_inner();
        let reason = decline_reason(req.reason).map_err(err)?;
        let inv = self
            .core
            .decline_invitation(&req.invitation_id, &me.player_id, reason)
            .await
            .map_err(err)?;
        Ok(Response::new(
            invitation_wire(&inv, self.core.now()).map_err(err)?,
        ))
    }

    async fn cancel_invitation(
        &self,
        req: Request<pb::InvitationRequest>,
    ) -> Result<Response<pb::Invitation>, Status> {
        let me = caller(&req)?;
        let inv = self
            .core
            .cancel_invitation(&req.get_ref().invitation_id, &me.player_id)
            .await
            .map_err(err)?;
        Ok(Response::new(
            invitation_wire(&inv, self.core.now()).map_err(err)?,
        ))
    }

    async fn list_invitations(
        &self,
        req: Request<pb::ListInvitationsRequest>,
    ) -> Result<Response<pb::ListInvitationsResponse>, Status> {
        let me = caller(&req)?;
        let now = self.core.now();
        let mut resp = pb::ListInvitationsResponse::default();
        for inv in self
            .core
            .pending_invitations(&me.player_id)
            .await
            .map_err(err)?
        {
            let wire = invitation_wire(&inv, now).map_err(err)?;
            if inv.inviter.id == me.player_id {
                resp.sent.push(wire);
            } else {
                resp.received.push(wire);
            }
        }
        Ok(Response::new(resp))
    }

    async fn offer_rematch(
        &self,
        req: Request<pb::GameActionRequest>,
    ) -> Result<Response<pb::Invitation>, Status> {
        let me = caller(&req)?;
        let inv = self
            .core
            .offer_rematch(&req.get_ref().game_id, &me.player_id)
            .await
            .map_err(err)?;
        Ok(Response::new(
            invitation_wire(&inv, self.core.now()).map_err(err)?,
        ))
    }

    type WatchPlayerEventsStream = super::player_events::PlayerEventStream;

    async fn watch_player_events(
        &self,
        req: Request<pb::WatchPlayerEventsRequest>,
    ) -> Result<Response<Self::WatchPlayerEventsStream>, Status> {
        let me = caller(&req)?;
        let stream = super::player_events::watch(self.core.clone(), me.player_id)
            .await
            .map_err(err)?;
        Ok(Response::new(stream))
    }

    async fn block_player(
        &self,
        req: Request<pb::BlockPlayerRequest>,
    ) -> Result<Response<pb::BlockedPlayers>, Status> {
        let me = caller(&req)?;
        let other = self
            .block_target(&me, &req.get_ref().player_id, true)
            .await
            .map_err(err)?;
        let list = self.core.block(&me.player_id, &other).await.map_err(err)?;
        Ok(Response::new(blocked_wire(list)))
    }

    async fn unblock_player(
        &self,
        req: Request<pb::BlockPlayerRequest>,
    ) -> Result<Response<pb::BlockedPlayers>, Status> {
        let me = caller(&req)?;
        let other = self
            .block_target(&me, &req.get_ref().player_id, false)
            .await
            .map_err(err)?;
        let list = self
            .core
            .unblock(&me.player_id, &other)
            .await
            .map_err(err)?;
        Ok(Response::new(blocked_wire(list)))
    }

    async fn list_blocked(
        &self,
        req: Request<pb::ListBlockedRequest>,
    ) -> Result<Response<pb::BlockedPlayers>, Status> {
        let me = caller(&req)?;
        let list = self.core.blocked_by(&me.player_id).await.map_err(err)?;
        Ok(Response::new(blocked_wire(list)))
    }

    async fn list_finished_games(
        &self,
        req: Request<pb::ListFinishedGamesRequest>,
    ) -> Result<Response<pb::ListFinishedGamesResponse>, Status> {
        let me = auth::principal(&req)?;
        auth::require(&me, Scope::Service)?;
        let req = req.into_inner();
        let query = super::published::FinishedQuery {
            after_ms: req.after_ms,
            after_game_id: req.after_game_id,
            before_ms: (req.before_ms > 0).then_some(req.before_ms),
            limit: match req.limit {
                0 => 100,
                n => usize::try_from(n).unwrap_or(usize::MAX),
            },
            rated_only: req.rated_only,
        };
        let games = self.core.finished_since(&query).await.map_err(err)?;
        Ok(Response::new(pb::ListFinishedGamesResponse {
            games: games
                .into_iter()
                .map(|g| pb::FinishedGameEntry {
                    game_id: g.game_id,
                    finished_at_ms: g.finished_at_ms,
                    event: g.event,
                })
                .collect(),
        }))
    }

    async fn count_games_in_progress(
        &self,
        req: Request<pb::CountGamesInProgressRequest>,
    ) -> Result<Response<pb::CountGamesInProgressResponse>, Status> {
        let me = auth::principal(&req)?;
        auth::require(&me, Scope::Service)?;
        let games_in_progress = self.core.games_in_progress().await.map_err(err)?;
        Ok(Response::new(pb::CountGamesInProgressResponse {
            games_in_progress,
        }))
    }

    async fn get_game(
        &self,
        req: Request<pb::GetGameRequest>,
    ) -> Result<Response<pb::GameView>, Status> {
        let (record, _) = self.core.load(&req.get_ref().game_id).await.map_err(err)?;
        let mut game = view(&record, self.core.now()).map_err(err)?;
        if !record.is_over() {
            game.spectators = super::watch::spectators(&self.core, &record.id).await;
        }
        Ok(Response::new(game))
    }

    #[tracing::instrument(skip_all, fields(game_id = %req.get_ref().game_id))]
    async fn play_move(
        &self,
        req: Request<pb::PlayMoveRequest>,
    ) -> Result<Response<pb::GameView>, Status> {
        let me = caller(&req)?;
        let req = req.into_inner();
        let input = req.r#move.clone();
        let record = self
            .core
            .play_move(
                &req.game_id,
                &me.player_id,
                |pos| convert::resolve_move(pos, input.as_ref()),
                req.expected_ply,
            )
            .await
            .map_err(err)?;
        Ok(Response::new(
            action_view(&record, self.core.now()).map_err(err)?,
        ))
    }

    async fn resign(
        &self,
        req: Request<pb::GameActionRequest>,
    ) -> Result<Response<pb::GameView>, Status> {
        self.action(req, GameRecord::resign).await
    }
    async fn offer_draw(
        &self,
        req: Request<pb::GameActionRequest>,
    ) -> Result<Response<pb::GameView>, Status> {
        self.action(req, GameRecord::offer_draw).await
    }
    async fn accept_draw(
        &self,
        req: Request<pb::GameActionRequest>,
    ) -> Result<Response<pb::GameView>, Status> {
        self.action(req, GameRecord::accept_draw).await
    }
    async fn decline_draw(
        &self,
        req: Request<pb::GameActionRequest>,
    ) -> Result<Response<pb::GameView>, Status> {
        self.action(req, GameRecord::decline_draw).await
    }
    async fn abort(
        &self,
        req: Request<pb::GameActionRequest>,
    ) -> Result<Response<pb::GameView>, Status> {
        self.action(req, GameRecord::abort).await
    }
    async fn claim_timeout(
        &self,
        req: Request<pb::GameActionRequest>,
    ) -> Result<Response<pb::GameView>, Status> {
        self.action(req, GameRecord::claim_timeout).await
    }
    #[tracing::instrument(skip_all, fields(game_id = %req.get_ref().game_id))]
    async fn berserk(
        &self,
        req: Request<pb::GameActionRequest>,
    ) -> Result<Response<pb::GameView>, Status> {
        // The caller's own side, from the credential: the request names only the game.
        let me = caller(&req)?;
        let record = self
            .core
            .berserk(&req.get_ref().game_id, &me.player_id)
            .await
            .map_err(err)?;
        Ok(Response::new(view(&record, self.core.now()).map_err(err)?))
    }

    async fn export_pdn(
        &self,
        req: Request<pb::GetGameRequest>,
    ) -> Result<Response<pb::ExportPdnResponse>, Status> {
        let (record, _) = self.core.load(&req.get_ref().game_id).await.map_err(err)?;
        Ok(Response::new(pb::ExportPdnResponse {
            pdn: super::pdn::export(&record).map_err(err)?,
        }))
    }

    type WatchGameStream = WatchStream;

    async fn watch_game(
        &self,
        req: Request<pb::WatchGameRequest>,
    ) -> Result<Response<WatchStream>, Status> {
        // A player by id; an anonymous watcher by its client address as the rate limits count it
        // (the X-Forwarded-For entry behind a trusted proxy, IPv6 by its network): behind an ingress
        // the TCP peer is the proxy, and every anonymous watcher would share its one cap.
        let caller = match auth::optional_principal(&req) {
            Some(principal) => principal.player_id.clone(),
            None => auth::client_address(&req),
        };
        let id = req.into_inner().game_id;
        let stream = super::watch::watch(&self.core, &caller, &id).await?;
        Ok(Response::new(stream))
    }

    async fn list_games(
        &self,
        req: Request<pb::ListGamesRequest>,
    ) -> Result<Response<pb::ListGamesResponse>, Status> {
        let req = req.into_inner();
        if req.player_id.trim().is_empty() {
            return Err(err(GamesError::Invalid("player_id is required".into())));
        }
        // Checked as the writes check ids: a malformed one (a NUL byte, white space, an unknown kind)
        // is INVALID_ARGUMENT here, never a query the database refuses.
        PlayerId::parse(&req.player_id)
            .map_err(|e| err(GamesError::Invalid(format!("player_id: {e}"))))?;
        let limit = match req.limit {
            0 => 20,
            n => n.min(100),
        };
        let after = if req.page_token.is_empty() {
            None
        } else {
            Some(PageKey::parse(&req.page_token).map_err(err)?)
        };
        let now = self.core.now();
        let mut resp = pb::ListGamesResponse::default();
        if after.is_none() {
            for r in &self.core.ongoing(&req.player_id).await.map_err(err)? {
                resp.ongoing.push(view(r, now).map_err(err)?);
            }
        }
        let (recent, more) = self
            .core
            .recent(&req.player_id, limit, after.as_ref())
            .await
            .map_err(err)?;
        for r in &recent {
            resp.recent.push(summary_wire(r, now).map_err(err)?);
        }
        if more && let Some(last) = recent.last() {
            resp.next_page_token = PageKey {
                finished_at_ms: last.finished_ms.unwrap_or(last.created_ms),
                game_id: last.id.to_string(),
            }
            .token();
        }
        Ok(Response::new(resp))
    }
}

fn blocked_wire(list: Vec<super::blocks::Blocked>) -> pb::BlockedPlayers {
    pb::BlockedPlayers {
        blocked: list
            .into_iter()
            .rev()
            .map(|b| pb::BlockedPlayer {
                player_id: b.id.into_string(),
                blocked_at_ms: b.at_ms,
            })
            .collect(),
    }
}

impl GamesService {
    /// The player a block request names: a valid id (INVALID_ARGUMENT), known to the server when it
    /// is being blocked (NOT_FOUND). Unblocking takes any valid id, so a list entry whose identity
    /// expired can still be removed.
    async fn block_target(
        &self,
        me: &Principal,
        id: &str,
        must_be_known: bool,
    ) -> Result<PlayerId, GamesError> {
        let id = id.trim();
        if id.is_empty() {
            return Err(GamesError::Invalid("player_id is required".into()));
        }
        if id == me.player_id {
            return Err(GamesError::Invalid("you cannot block yourself".into()));
        }
        if must_be_known {
            Ok(self.resolve_player(id, me, "player_id").await?.id)
        } else {
            PlayerId::parse(id).map_err(|e| GamesError::Invalid(format!("player_id: {e}")))
        }
    }

    async fn create(
        &self,
        me: &Principal,
        address: &str,
        req: pb::CreateGameRequest,
    ) -> Result<GameRecord, GamesError> {
        let rules: RuleSet = convert::rule_set(req.rules.as_ref()).map_err(api)?;
        let start = convert::position(rules, &req.fen).map_err(api)?;
        let id_of =
            |p: &Option<pb::Player>| p.as_ref().map_or(String::new(), |p| p.id.trim().to_owned());
        let white = self.resolve_player(&id_of(&req.white), me, "white").await?;
        let black = self.resolve_player(&id_of(&req.black), me, "black").await?;
        let time = time_control(req.time_control.as_ref())?;
        if !me.scopes.has(Scope::Admin) {
            let (mine, other) = if white.id == me.player_id {
                (&white, &black)
            } else if black.id == me.player_id {
                (&black, &white)
            } else {
                return Err(GamesError::NotAPlayer);
            };
            if mine.id == other.id {
                return Err(GamesError::Invalid(
                    "white and black must be different players".into(),
                ));
            }
            if !other.computer {
                return Err(GamesError::Refused(
                    "a game against another player starts when they accept: send an invitation (CreateInvitation)".into(),
                ));
            }
            let level = match PlayerId::parse(&other.id).map(|id| id.kind()) {
                Ok(draughts_proto::ids::PlayerKind::Computer { level }) => level,
                _ => 0,
            };
            self.core
                .count_computer_game(
                    &me.player_id,
                    me.kind == auth::PrincipalKind::Guest,
                    address,
                    level,
                )
                .await?;
        }
        // Berserk is a term of a tournament's game: only a pairing service (admin) sets it.
        if req.berserk_allowed && !me.scopes.has(Scope::Admin) {
            return Err(GamesError::Invalid(
                "berserk_allowed may only be set with the admin scope (a tournament's games)"
                    .into(),
            ));
        }
        let new = NewGame {
            rules,
            time,
            white,
            black,
            rated: req.rated,
            start,
            berserk_allowed: req.berserk_allowed,
        };
        if req.game_id.is_empty() {
            return self.core.create(new).await;
        }
        // A pairing service's own id: a retry after a lost answer finds the game it created.
        if !me.scopes.has(Scope::Admin) {
            return Err(GamesError::Invalid(
                "game_id may only be chosen with the admin scope".into(),
            ));
        }
        let id = draughts_proto::ids::GameId::parse(&req.game_id)
            .map_err(|e| GamesError::Invalid(e.to_string()))?;
        let (white_id, black_id) = (new.white.id.clone(), new.black.id.clone());
        // A pairing service (quick pairing) never seats two players of whom one blocks the other:
        // FAILED_PRECONDITION, and the service pairs them with others. A retry finds its game.
        if let Err(refused) = self.core.check_not_blocked(&white_id, &black_id).await {
            return match self.core.load(id.as_ref()).await {
                Ok((existing, _))
                    if existing.white.id == white_id && existing.black.id == black_id =>
                {
                    Ok(existing)
                }
                _ => Err(refused),
            };
        }
        match self.core.create_with_id(new, id.clone()).await {
            Err(GamesError::Conflict) => {
                let (existing, _) = self.core.load(id.as_ref()).await?;
                if existing.white.id == white_id && existing.black.id == black_id {
                    Ok(existing)
                } else {
                    Err(GamesError::Conflict)
                }
            }
            other => other,
        }
    }

    async fn invite(
        &self,
        me: &Principal,
        req: pb::CreateInvitationRequest,
    ) -> Result<InvitationRec, GamesError> {
        let rules: RuleSet = convert::rule_set(req.rules.as_ref()).map_err(api)?;
        let start = convert::position(rules, &req.fen).map_err(api)?;
        let time = time_control(req.time_control.as_ref())?;
        let invitee_id = req.invitee_id.trim();
        let invitee = if invitee_id.is_empty() {
            None
        } else {
            if invitee_id == me.player_id {
                return Err(GamesError::Denied(pb::ErrorReason::InviteSelf));
            }
            Some(self.resolve_player(invitee_id, me, "invitee_id").await?)
        };
        let inviter_color = match req.color {
            0 => None,
            c => Some(convert::color(c, "color").map_err(api)?),
        };
        self.core
            .invite(NewInvitation {
                inviter: me_rec(me)?,
                invitee,
                inviter_color,
                rules,
                time,
                rated: req.rated,
                start,
                expires_in_ms: req.expires_in_ms,
                accept_key: req.accept_key,
            })
            .await
    }

    async fn action(
        &self,
        req: Request<pb::GameActionRequest>,
        action: fn(&mut GameRecord, Color, u64) -> Result<(), super::record::PlayError>,
    ) -> Result<Response<pb::GameView>, Status> {
        let me = caller(&req)?;
        let id = req.into_inner().game_id;
        let record = self
            .core
            .player_action(&id, &me.player_id, action)
            .await
            .map_err(err)?;
        Ok(Response::new(view(&record, self.core.now()).map_err(err)?))
    }
}

fn decline_reason(wire: i32) -> Result<DeclineReason, GamesError> {
    use pb::DeclineReason as W;
    Ok(match W::try_from(wire) {
        Ok(W::Unspecified) => DeclineReason::Generic,
        Ok(W::Later) => DeclineReason::Later,
        Ok(W::TooFast) => DeclineReason::TooFast,
        Ok(W::TooSlow) => DeclineReason::TooSlow,
        Ok(W::TimeControl) => DeclineReason::TimeControl,
        Ok(W::Rated) => DeclineReason::Rated,
        Ok(W::Casual) => DeclineReason::Casual,
        Ok(W::Variant) => DeclineReason::Variant,
        Ok(W::TooMany) => {
            return Err(GamesError::Invalid(
                "reason: DECLINE_REASON_TOO_MANY is set by the server only".into(),
            ));
        }
        Err(_) => {
            return Err(GamesError::Invalid(format!(
                "reason: {wire} is not a decline reason"
            )));
        }
    })
}

fn decline_reason_wire(r: DeclineReason) -> pb::DeclineReason {
    use pb::DeclineReason as W;
    match r {
        DeclineReason::Generic => W::Unspecified,
        DeclineReason::Later => W::Later,
        DeclineReason::TooFast => W::TooFast,
        DeclineReason::TooSlow => W::TooSlow,
        DeclineReason::TimeControl => W::TimeControl,
        DeclineReason::Rated => W::Rated,
        DeclineReason::Casual => W::Casual,
        DeclineReason::Variant => W::Variant,
        DeclineReason::TooMany => W::TooMany,
    }
}

/// The wire form of an invitation at `now` (expiry included).
pub fn invitation_wire(inv: &InvitationRec, now: u64) -> Result<pb::Invitation, GamesError> {
    let variant: draughts_engine::Variant = inv
        .variant
        .parse()
        .map_err(|_| GamesError::Corrupt(format!("invitation {}: unknown variant", inv.id)))?;
    let options = draughts_engine::RuleOptions::parse(&inv.options)
        .map_err(|e| GamesError::Corrupt(e.to_string()))?;
    let rules =
        RuleSet::with_options(variant, options).map_err(|e| GamesError::Corrupt(e.to_string()))?;
    let state = match inv.standing(now) {
        Standing::Pending => pb::InvitationState::Pending,
        Standing::Accepted => pb::InvitationState::Accepted,
        Standing::Declined => pb::InvitationState::Declined,
        Standing::Cancelled => pb::InvitationState::Cancelled,
        Standing::Expired => pb::InvitationState::Expired,
    };
    let decline_reason = match &inv.state {
        InvitationState::Declined { reason, .. } => decline_reason_wire(*reason) as i32,
        _ => 0,
    };
    Ok(pb::Invitation {
        invitation_id: inv.id.to_string(),
        inviter: Some(inv.inviter.to_wire()),
        invitee: inv.invitee.as_ref().map(Player::to_wire),
        inviter_color: inv.inviter_color.map_or(0, |c| color_wire(c.into())),
        rules: Some(convert::rules_to_wire(rules)),
        time_control: Some(time_control_wire(&inv.time)),
        rated: inv.rated,
        fen: inv.fen.clone(),
        state: state as i32,
        decline_reason,
        created_at_ms: inv.created_ms,
        expires_at_ms: inv.expires_ms,
        updated_at_ms: inv.updated_ms(),
        game_id: if matches!(inv.state, InvitationState::Accepted { .. }) {
            inv.id.to_string()
        } else {
            String::new()
        },
        rematch_of: inv
            .rematch_of
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
    })
}

/// The summary of a finished game (as `ListGames` and `WatchPlayerEvents` show it).
pub fn summary_wire(record: &GameRecord, now: u64) -> Result<pb::GameSummary, GamesError> {
    let v = view(record, now)?;
    Ok(pb::GameSummary {
        game_id: record.id.to_string(),
        variant: v.rules.as_ref().map_or(0, |x| x.variant),
        white_id: record.white.id.to_string(),
        black_id: record.black.id.to_string(),
        status: v.status,
        rated: record.rated,
        finished_at_ms: record.finished_ms.unwrap_or(record.created_ms),
    })
}
