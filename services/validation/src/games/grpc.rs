//! `draughts.v1.Games` over gRPC: authenticate, convert, call [`GamesCore`], convert back.

use std::pin::Pin;

use draughts_engine::{Color, Position, RuleSet};
use draughts_proto::{ServiceError, convert, pb};
use futures_util::Stream;
use tonic::{Request, Response, Status};

use super::record::{EventRec, GameRecord, PlayerRec, TimeControlRec};
use super::service::{GamesCore, GamesError, NewGame};
use crate::auth::{self, Principal, Scope};

/// The Games gRPC service.
#[derive(Clone, Debug)]
pub struct GamesService {
    core: GamesCore,
}

impl GamesService {
    pub fn new(core: GamesCore) -> Self {
        GamesService { core }
    }
}

fn err(e: GamesError) -> Status {
    if e.kind() == draughts_proto::ErrorKind::Internal {
        tracing::error!(error = %e, "games: internal error");
    }
    e.to_status()
}

fn player_rec(p: Option<&pb::Player>, caller: &Principal, side: &str) -> Result<PlayerRec, Status> {
    let p = p.cloned().unwrap_or_default();
    let id = if p.id.trim().is_empty() {
        caller.player_id.clone()
    } else {
        p.id.trim().to_string()
    };
    if id.len() > 128 {
        return Err(Status::invalid_argument(format!(
            "{side}.id is longer than 128 characters"
        )));
    }
    let name = if p.display_name.trim().is_empty() {
        if id == caller.player_id {
            caller.display_name.clone()
        } else {
            id.clone()
        }
    } else {
        p.display_name.trim().chars().take(64).collect()
    };
    Ok(PlayerRec {
        guest: id.starts_with("guest:"),
        computer: p.computer || id.starts_with("ai:"),
        id,
        name,
    })
}

fn time_control(tc: Option<&pb::TimeControl>) -> Result<TimeControlRec, Status> {
    use pb::time_control::Kind;
    match tc.and_then(|t| t.kind.as_ref()) {
        Some(Kind::Fischer(f)) => {
            if f.base_ms == 0 && f.increment_ms == 0 {
                return Err(Status::invalid_argument(
                    "time_control.fischer needs a base or an increment",
                ));
            }
            if f.base_ms > 7 * 24 * 3_600_000 || f.increment_ms > 3_600_000 {
                return Err(Status::invalid_argument(
                    "time_control.fischer: base at most 7 days, increment at most 1 hour",
                ));
            }
            Ok(TimeControlRec::Fischer {
                base_ms: f.base_ms,
                increment_ms: f.increment_ms,
            })
        }
        Some(Kind::Correspondence(c)) => {
            if !(1..=30).contains(&c.days_per_move) {
                return Err(Status::invalid_argument(
                    "time_control.correspondence.days_per_move must be from 1 to 30",
                ));
            }
            Ok(TimeControlRec::Correspondence {
                days_per_move: c.days_per_move,
            })
        }
        None => Err(Status::invalid_argument(
            "time_control is required (fischer or correspondence)",
        )),
    }
}

fn color_wire(c: Color) -> i32 {
    convert::color_to_wire(c) as i32
}

fn player_wire(p: &PlayerRec) -> pb::Player {
    pb::Player {
        id: p.id.clone(),
        display_name: p.name.clone(),
        guest: p.guest,
        computer: p.computer,
    }
}

fn status_wire(record: &GameRecord, pos: &Position) -> pb::GameStatus {
    let Some(r) = &record.result else {
        return convert::status_to_wire(draughts_engine::GameStatus::Ongoing, pos);
    };
    let outcome = match r.outcome.as_str() {
        "white" => pb::Outcome::WhiteWins,
        "black" => pb::Outcome::BlackWins,
        "draw" => pb::Outcome::Draw,
        _ => pb::Outcome::Aborted,
    };
    let reason = match r.reason.as_str() {
        "no_pieces" => pb::EndReason::NoPieces,
        "no_moves" => pb::EndReason::NoMoves,
        "resignation" => pb::EndReason::Resignation,
        "time" => pb::EndReason::Time,
        "repetition" => pb::EndReason::Repetition,
        "no_progress" => pb::EndReason::NoProgress,
        "endgame_rule" => pb::EndReason::EndgameRule,
        "agreement" => pb::EndReason::Agreement,
        "aborted" => pb::EndReason::Aborted,
        _ => pb::EndReason::Unspecified,
    };
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
        game_id: record.id.clone(),
        rules: Some(convert::rules_to_wire(rules)),
        time_control: Some(time_control_wire(&record.time)),
        white: Some(player_wire(&record.white)),
        black: Some(player_wire(&record.black)),
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
    use pb::time_control::Kind;
    pb::TimeControl {
        kind: Some(match *t {
            TimeControlRec::Fischer {
                base_ms,
                increment_ms,
            } => Kind::Fischer(pb::Fischer {
                base_ms,
                increment_ms,
            }),
            TimeControlRec::Correspondence { days_per_move } => {
                Kind::Correspondence(pb::Correspondence { days_per_move })
            }
        }),
    }
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

type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::GameEvent, Status>> + Send>>;

#[tonic::async_trait]
impl pb::games_server::Games for GamesService {
    #[tracing::instrument(skip_all, fields(game_id, variant))]
    async fn create_game(
        &self,
        req: Request<pb::CreateGameRequest>,
    ) -> Result<Response<pb::GameView>, Status> {
        let me = caller(&req)?;
        let req = req.into_inner();
        let rules: RuleSet = convert::rule_set(req.rules.as_ref())?;
        let start = convert::position(rules, &req.fen)?;
        let white = player_rec(req.white.as_ref(), &me, "white")?;
        let black = player_rec(req.black.as_ref(), &me, "black")?;
        let is_admin = me.scopes.has(Scope::Admin);
        if !is_admin && white.id != me.player_id && black.id != me.player_id {
            return Err(Status::permission_denied(
                "you can only create games you play in",
            ));
        }
        let time = time_control(req.time_control.as_ref())?;
        let record = self
            .core
            .create(NewGame {
                rules,
                time,
                white,
                black,
                rated: req.rated,
                start,
            })
            .await
            .map_err(err)?;
        tracing::Span::current().record("game_id", record.id.as_str());
        tracing::Span::current().record("variant", record.variant.as_str());
        Ok(Response::new(view(&record, self.core.now()).map_err(err)?))
    }

    async fn get_game(
        &self,
        req: Request<pb::GetGameRequest>,
    ) -> Result<Response<pb::GameView>, Status> {
        let (record, _) = self.core.load(&req.get_ref().game_id).await.map_err(err)?;
        Ok(Response::new(view(&record, self.core.now()).map_err(err)?))
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
        let id = req.into_inner().game_id;
        let core = self.core.clone();
        // Subscribe first, then read: a change between the two still wakes us.
        let mut wake = core
            .live()
            .subscribe(&super::service::keys::events(&id))
            .await
            .map_err(|e| err(e.into()))?;
        let (record, _) = core.load(&id).await.map_err(err)?;
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<pb::GameEvent, Status>>(64);
        tokio::spawn(async move {
            use futures_util::StreamExt;
            let mut sent = 0u64;
            let mut record = record;
            loop {
                match events_after(&record, sent, core.now()) {
                    Ok(events) => {
                        for e in events {
                            sent = e.seq;
                            if tx.send(Ok(e)).await.is_err() {
                                return;
                            }
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(err(e))).await;
                        return;
                    }
                }
                if record.is_over() {
                    return;
                }
                // Wait for a wake-up (or poll every 2 s in case a notification was lost).
                tokio::select! {
                    _ = tx.closed() => return,
                    _ = wake.next() => {}
                    _ = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
                }
                match core.load(&id).await {
                    Ok((r, _)) => record = r,
                    Err(e) => {
                        let _ = tx.send(Err(err(e))).await;
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn list_games(
        &self,
        req: Request<pb::ListGamesRequest>,
    ) -> Result<Response<pb::ListGamesResponse>, Status> {
        let req = req.into_inner();
        if req.player_id.trim().is_empty() {
            return Err(Status::invalid_argument("player_id is required"));
        }
        let limit = match req.limit {
            0 => 20,
            n => n.min(100),
        };
        let now = self.core.now();
        let ongoing = self.core.ongoing(&req.player_id).await.map_err(err)?;
        let recent = self.core.recent(&req.player_id, limit).await.map_err(err)?;
        let mut resp = pb::ListGamesResponse::default();
        for r in &ongoing {
            resp.ongoing.push(view(r, now).map_err(err)?);
        }
        for r in &recent {
            let v = view(r, now).map_err(err)?;
            resp.recent.push(pb::GameSummary {
                game_id: r.id.clone(),
                variant: v.rules.as_ref().map_or(0, |x| x.variant),
                white_id: r.white.id.clone(),
                black_id: r.black.id.clone(),
                status: v.status,
                rated: r.rated,
                finished_at_ms: r.finished_ms.unwrap_or(r.created_ms),
            });
        }
        Ok(Response::new(resp))
    }
}

impl GamesService {
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
