//! The edge: `draughts.v1.Tournaments`. Converts, calls [`TournamentsCore`], converts back.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use draughts_auth::{Principal, PrincipalKind, Scope};
use draughts_proto::contract::tournaments::{Event, ResultKind};
use draughts_proto::ids::PlayerId;
use draughts_proto::pb;
use draughts_proto::vocab::player::Player;
use draughts_store::Notice;
use futures_util::{Stream, StreamExt};
use tonic::{Request, Response, Status};

use crate::error::TournamentsError;
use crate::service::{Caller, ListState, TournamentsCore};
use crate::standings::{self, Format};
use crate::store::{Record, State};

/// Open WatchTournament streams per caller (account, or client address when anonymous) per replica.
pub const MAX_WATCHES_PER_CALLER: usize = 4;
/// Open WatchTournament streams of one tournament per replica.
pub const MAX_WATCHERS_PER_TOURNAMENT: usize = 500;
/// Rows in a `standings` event.
pub const EVENT_ROWS: usize = 20;
/// Largest standings page.
pub const MAX_STANDINGS_PAGE: usize = 500;
/// Largest list page.
pub const MAX_LIST_PAGE: usize = 100;

/// Counts open streams per key; a slot is given back when its guard drops.
#[derive(Debug, Default)]
struct Slots {
    open: Mutex<HashMap<String, usize>>,
}

#[derive(Debug)]
struct Slot {
    slots: Arc<Slots>,
    keys: Vec<String>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut open) = self.slots.open.lock() {
            for key in &self.keys {
                if let Some(n) = open.get_mut(key) {
                    *n -= 1;
                    if *n == 0 {
                        open.remove(key);
                    }
                }
            }
        }
    }
}

impl Slots {
    /// One slot under each `(key, bound)`, all or none.
    fn take(self: &Arc<Self>, wanted: &[(String, usize, &str)]) -> Result<Slot, TournamentsError> {
        let mut open = self
            .open
            .lock()
            .map_err(|_| TournamentsError::Corrupt("stream slots".into()))?;
        for (key, bound, what) in wanted {
            if open.get(key).copied().unwrap_or(0) >= *bound {
                return Err(TournamentsError::Exhausted(format!(
                    "at most {bound} open WatchTournament streams {what}"
                )));
            }
        }
        for (key, _, _) in wanted {
            *open.entry(key.clone()).or_default() += 1;
        }
        Ok(Slot {
            slots: self.clone(),
            keys: wanted.iter().map(|(k, _, _)| k.clone()).collect(),
        })
    }
}

/// The gRPC service.
#[derive(Clone, Debug)]
pub struct TournamentsService {
    core: TournamentsCore,
    watches: Arc<Slots>,
}

impl TournamentsService {
    pub fn new(core: TournamentsCore) -> TournamentsService {
        TournamentsService {
            core,
            watches: Arc::default(),
        }
    }
}

/// The caller (every caller's id is a player id: Auth checks them; one that is not is refused).
fn caller_of(p: &Principal) -> Result<Caller, TournamentsError> {
    let id = PlayerId::parse(&p.player_id)
        .map_err(|e| TournamentsError::Invalid(format!("caller: {e}")))?;
    Ok(Caller {
        player: Player {
            name: p.display_name.clone(),
            guest: p.kind == PrincipalKind::Guest,
            ..Player::new(id)
        },
        account: p.kind == PrincipalKind::Account,
        admin: p.scopes.has(Scope::Admin),
    })
}

/// The caller, who must have the `play` scope and not be a bot (bots meet people only through
/// challenges and invitations, as in matchmaking).
fn player<T>(req: &Request<T>) -> Result<Caller, Status> {
    let p = draughts_auth::principal(req)?;
    draughts_auth::require(&p, Scope::Play)?;
    if p.is_bot() {
        return Err(TournamentsError::Precondition(
            "bots play through challenges, not tournaments".into(),
        )
        .into());
    }
    Ok(caller_of(&p)?)
}

fn state_wire(state: State) -> pb::TournamentState {
    match state {
        State::Upcoming => pb::TournamentState::Upcoming,
        State::Running => pb::TournamentState::Running,
        State::Finished => pb::TournamentState::Finished,
        State::Cancelled => pb::TournamentState::Cancelled,
    }
}

/// The header of `record` as `me` (a player id, or none) sees it.
pub fn tournament_wire(record: &Record, me: Option<&str>) -> pb::Tournament {
    let joined = me
        .and_then(|me| record.entrant_of(me))
        .and_then(|p| record.standings.entries.get(&p))
        .is_some_and(|e| !e.paused && !e.withdrawn);
    pb::Tournament {
        tournament_id: record.id.to_string(),
        terms: Some(record.terms.to_wire(record.starts_at_ms)),
        has_password: record.terms.conditions.password_sha256.is_some(),
        creator: Some(record.creator.to_wire()),
        state: state_wire(record.state) as i32,
        created_at_ms: record.created_at_ms,
        starts_at_ms: record.starts_at_ms,
        ends_at_ms: record.ends_at_ms,
        finished_at_ms: record.finished_at_ms,
        players: record.entrants.len() as u32,
        round: record.standings.round,
        joined,
    }
}

/// Rows `from..from + n` of the standings; whether more follow.
pub fn rows_wire(record: &Record, from: usize, n: usize) -> (Vec<pb::StandingRow>, bool) {
    let table = standings::table(&record.standings);
    let arena = matches!(record.standings.format, Format::Arena(_));
    let rows = table
        .iter()
        .skip(from)
        .take(n)
        .map(|row| {
            let entry = record.standings.entries.get(&row.player);
            pb::StandingRow {
                rank: row.rank,
                player: record.player(row.player).as_ref().map(Player::to_wire),
                points: row.points,
                games: row.games,
                wins: row.wins,
                rating: record
                    .entrants
                    .get(row.player.0 as usize)
                    .map_or(0, |e| e.rating),
                buchholz: if arena { 0 } else { row.buchholz },
                sonneborn_berger: if arena { 0 } else { row.sonneborn_berger },
                on_fire: arena && entry.is_some_and(|e| e.sheet.on_fire()),
                paused: entry.is_some_and(|e| e.paused),
                withdrawn: row.withdrawn,
                sheet: if arena {
                    entry.map_or_else(String::new, |e| {
                        e.sheet
                            .entries()
                            .iter()
                            .map(|s| s.points.to_string())
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                } else {
                    String::new()
                },
            }
        })
        .collect();
    (rows, table.len() > from + n)
}

fn pairings_wire(record: &Record) -> Vec<pb::TournamentPairing> {
    record
        .ongoing
        .iter()
        .filter(|p| p.created)
        .map(|p| pb::TournamentPairing {
            game_id: p.game_id.to_string(),
            white: record.player(p.white).as_ref().map(Player::to_wire),
            black: record.player(p.black).as_ref().map(Player::to_wire),
            round: p.round,
        })
        .collect()
}

type EventStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// The wire form of one published event (`None`: re-read and send something else).
fn event_wire(event: Event) -> Option<pb::tournament_event::Kind> {
    use pb::tournament_event::Kind;
    Some(match event {
        Event::Joined { player } => Kind::Joined(player.to_wire()),
        Event::Left { player } => Kind::Left(player.to_wire()),
        Event::Paired {
            game_id,
            white,
            black,
            round,
        } => Kind::Paired(pb::TournamentPairing {
            game_id,
            white: Some(white.to_wire()),
            black: Some(black.to_wire()),
            round,
        }),
        Event::Result {
            game_id,
            white,
            black,
            result,
            forfeit,
            round,
        } => Kind::Result(pb::TournamentResult {
            game_id,
            white_berserk: white.berserk,
            black_berserk: black.berserk,
            white: Some(white.to_wire()),
            black: Some(black.to_wire()),
            outcome: match result {
                ResultKind::WhiteWins => pb::Outcome::WhiteWins,
                ResultKind::BlackWins => pb::Outcome::BlackWins,
                ResultKind::Draw => pb::Outcome::Draw,
            } as i32,
            forfeit,
            round,
        }),
        Event::RoundStarted { round, bye } => Kind::RoundStarted(pb::RoundStarted {
            round,
            bye: bye.as_ref().map(Player::to_wire),
        }),
        Event::Standings | Event::Finished => return None,
    })
}

fn send_kind(kind: pb::tournament_event::Kind) -> Result<pb::TournamentEvent, Status> {
    Ok(pb::TournamentEvent { kind: Some(kind) })
}

#[tonic::async_trait]
impl pb::tournaments_server::Tournaments for TournamentsService {
    async fn create_tournament(
        &self,
        req: Request<pb::CreateTournamentRequest>,
    ) -> Result<Response<pb::Tournament>, Status> {
        let me = player(&req)?;
        let record = self.core.create(&me, req.get_ref().terms.as_ref()).await?;
        Ok(Response::new(tournament_wire(&record, Some(&me.player.id))))
    }

    async fn list_tournaments(
        &self,
        req: Request<pb::ListTournamentsRequest>,
    ) -> Result<Response<pb::ListTournamentsResponse>, Status> {
        let me = draughts_auth::optional_principal(&req).map(|p| p.player_id);
        let req = req.into_inner();
        let state = match pb::TournamentState::try_from(req.state) {
            Ok(pb::TournamentState::Upcoming) => ListState::Upcoming,
            Ok(pb::TournamentState::Running) => ListState::Running,
            Ok(pb::TournamentState::Finished) => ListState::Finished,
            _ => {
                return Err(TournamentsError::Invalid(
                    "state must be UPCOMING, RUNNING or FINISHED".into(),
                )
                .into());
            }
        };
        let size = match req.page_size {
            0 => 20,
            n if n as usize <= MAX_LIST_PAGE => n as usize,
            _ => {
                return Err(TournamentsError::Invalid(format!(
                    "page_size must be from 1 to {MAX_LIST_PAGE}"
                ))
                .into());
            }
        };
        let (records, next) = self.core.list(state, size, &req.page_token).await?;
        Ok(Response::new(pb::ListTournamentsResponse {
            tournaments: records
                .iter()
                .map(|r| tournament_wire(r, me.as_deref()))
                .collect(),
            next_page_token: next,
        }))
    }

    async fn get_tournament(
        &self,
        req: Request<pb::GetTournamentRequest>,
    ) -> Result<Response<pb::TournamentView>, Status> {
        let me = draughts_auth::optional_principal(&req).map(|p| p.player_id);
        let req = req.into_inner();
        let size = match req.standings_page_size {
            0 => 50,
            n if n as usize <= MAX_STANDINGS_PAGE => n as usize,
            _ => {
                return Err(TournamentsError::Invalid(format!(
                    "standings_page_size must be from 1 to {MAX_STANDINGS_PAGE}"
                ))
                .into());
            }
        };
        let from = if req.standings_page_token.is_empty() {
            0
        } else {
            req.standings_page_token
                .strip_prefix('r')
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n <= crate::terms::MAX_PLAYERS as usize)
                .ok_or_else(|| {
                    TournamentsError::Invalid("standings_page_token is not one of ours".into())
                })?
        };
        let record = self.core.get(&req.tournament_id).await?;
        let (standings, more) = rows_wire(&record, from, size);
        Ok(Response::new(pb::TournamentView {
            tournament: Some(tournament_wire(&record, me.as_deref())),
            standings,
            next_standings_page_token: if more {
                format!("r{}", from + size)
            } else {
                String::new()
            },
            pairings: pairings_wire(&record),
            bye: record
                .bye
                .filter(|_| record.state == State::Running)
                .and_then(|p| record.player(p))
                .as_ref()
                .map(Player::to_wire),
        }))
    }

    async fn join_tournament(
        &self,
        req: Request<pb::JoinTournamentRequest>,
    ) -> Result<Response<pb::Tournament>, Status> {
        let me = player(&req)?;
        let req = req.get_ref();
        let record = self
            .core
            .join(&me, &req.tournament_id, &req.password)
            .await?;
        Ok(Response::new(tournament_wire(&record, Some(&me.player.id))))
    }

    async fn leave_tournament(
        &self,
        req: Request<pb::LeaveTournamentRequest>,
    ) -> Result<Response<pb::Tournament>, Status> {
        let me = player(&req)?;
        let record = self.core.leave(&me, &req.get_ref().tournament_id).await?;
        Ok(Response::new(tournament_wire(&record, Some(&me.player.id))))
    }

    async fn start_tournament(
        &self,
        req: Request<pb::StartTournamentRequest>,
    ) -> Result<Response<pb::Tournament>, Status> {
        let me = player(&req)?;
        let record = self.core.start(&me, &req.get_ref().tournament_id).await?;
        Ok(Response::new(tournament_wire(&record, Some(&me.player.id))))
    }

    type WatchTournamentStream = EventStream<pb::TournamentEvent>;

    async fn watch_tournament(
        &self,
        req: Request<pb::WatchTournamentRequest>,
    ) -> Result<Response<Self::WatchTournamentStream>, Status> {
        let me = draughts_auth::optional_principal(&req).map(|p| p.player_id);
        let who = me
            .clone()
            .unwrap_or_else(|| draughts_auth::client_address(&req));
        let id = req.into_inner().tournament_id;
        let slot = self.watches.take(&[
            (
                format!("caller:{who}"),
                MAX_WATCHES_PER_CALLER,
                "per caller",
            ),
            (
                format!("tournament:{id}"),
                MAX_WATCHERS_PER_TOURNAMENT,
                "of one tournament on this server",
            ),
        ])?;
        // Subscribed before the snapshot is sent: nothing published after the read is missed.
        self.core.get(&id).await?;
        let mut notices = self.core.subscribe(&id).await?;
        let record = self.core.get(&id).await?;
        let core = self.core.clone();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            let _slot = slot;
            let me = me.as_deref();
            let mut record = record;
            if record.state.is_over() {
                let _ = tx
                    .send(send_kind(pb::tournament_event::Kind::Finished(
                        tournament_wire(&record, me),
                    )))
                    .await;
                return;
            }
            if tx
                .send(send_kind(pb::tournament_event::Kind::Snapshot(
                    tournament_wire(&record, me),
                )))
                .await
                .is_err()
            {
                return;
            }
            loop {
                let notice = tokio::select! {
                    () = tx.closed() => return,
                    notice = notices.next() => notice,
                };
                let kind = match notice {
                    None => return,
                    Some(Notice::Gap) => match core.get(&id).await {
                        Ok(r) => {
                            record = r;
                            pb::tournament_event::Kind::Snapshot(tournament_wire(&record, me))
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e.into())).await;
                            return;
                        }
                    },
                    Some(Notice::Message(bytes)) => {
                        let event = match draughts_proto::contract::tournaments::decode_event(
                            &bytes,
                        ) {
                            Ok(event) => event,
                            Err(e) => {
                                tracing::warn!(error = %e, "unreadable tournament event skipped");
                                continue;
                            }
                        };
                        let reread = matches!(event, Event::Standings | Event::Finished);
                        if reread {
                            match core.get(&id).await {
                                Ok(r) => record = r,
                                Err(e) => {
                                    let _ = tx.send(Err(e.into())).await;
                                    return;
                                }
                            }
                        }
                        match event {
                            Event::Standings => {
                                pb::tournament_event::Kind::Standings(pb::StandingsChanged {
                                    rows: rows_wire(&record, 0, EVENT_ROWS).0,
                                })
                            }
                            Event::Finished => {
                                let _ = tx
                                    .send(send_kind(pb::tournament_event::Kind::Finished(
                                        tournament_wire(&record, me),
                                    )))
                                    .await;
                                return;
                            }
                            other => match event_wire(other) {
                                Some(kind) => kind,
                                None => continue,
                            },
                        }
                    }
                };
                if tx.send(send_kind(kind)).await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}
