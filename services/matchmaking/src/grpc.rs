//! The edge: `draughts.v1.Matchmaking`. Converts, calls [`MatchmakingCore`], converts back.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use draughts_auth::{Principal, PrincipalKind, Scope};
use draughts_proto::ids::PlayerId;
use draughts_proto::pb;
use futures_util::Stream;
use tonic::{Request, Response, Status};

use crate::core::Caller;
use crate::error::MatchmakingError;
use crate::ports::time_control_wire;
use crate::service::{LobbyStats, MatchmakingCore, SeekUpdate, range_of};

/// Open streams per caller per replica, each kind.
pub const MAX_STREAMS_PER_CALLER: usize = 4;

/// Counts open streams per caller; a slot is given back when its guard drops.
#[derive(Debug, Default)]
pub struct StreamSlots {
    open: Mutex<HashMap<String, usize>>,
}

#[derive(Debug)]
pub struct Slot {
    slots: Arc<StreamSlots>,
    caller: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut open) = self.slots.open.lock()
            && let Some(n) = open.get_mut(&self.caller)
        {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.caller);
            }
        }
    }
}

impl StreamSlots {
    fn take(self: &Arc<Self>, caller: &str, what: &str) -> Result<Slot, MatchmakingError> {
        let mut open = self
            .open
            .lock()
            .map_err(|_| MatchmakingError::Corrupt("stream slots".into()))?;
        let n = open.entry(caller.to_owned()).or_default();
        if *n >= MAX_STREAMS_PER_CALLER {
            return Err(MatchmakingError::Exhausted(format!(
                "at most {MAX_STREAMS_PER_CALLER} open {what} streams per caller"
            )));
        }
        *n += 1;
        Ok(Slot {
            slots: self.clone(),
            caller: caller.to_owned(),
        })
    }
}

/// The gRPC service.
#[derive(Clone, Debug)]
pub struct MatchmakingService {
    core: MatchmakingCore,
    seeks: Arc<StreamSlots>,
    watches: Arc<StreamSlots>,
}

impl MatchmakingService {
    pub fn new(core: MatchmakingCore) -> MatchmakingService {
        MatchmakingService {
            core,
            seeks: Arc::default(),
            watches: Arc::default(),
        }
    }
}

/// Bots never meet people in quick pairing pools or lobby seeks (they play through challenges and
/// invitations): FAILED_PRECONDITION for a bot caller (the mark is the server's, from its credential).
fn refuse_bots<T>(req: &Request<T>, what: &str) -> Result<(), Status> {
    match draughts_auth::optional_principal(req) {
        Some(p) if p.is_bot() => Err(MatchmakingError::Precondition(format!(
            "bots play through challenges, not {what}"
        ))
        .into()),
        _ => Ok(()),
    }
}

fn caller<T>(req: &Request<T>) -> Result<(Caller, String), Status> {
    let p: Principal = draughts_auth::principal(req)?;
    draughts_auth::require(&p, Scope::Play)?;
    let authorization = req
        .metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    Ok((
        Caller {
            player: PlayerId::parse(&p.player_id)
                .map_err(|e| MatchmakingError::Invalid(format!("caller: {e}")))?,
            name: p.display_name,
            guest: p.kind == PrincipalKind::Guest,
        },
        authorization,
    ))
}

fn player_wire(who: &draughts_proto::contract::matchmaking::Who) -> pb::Player {
    pb::Player {
        id: who.id.to_string(),
        display_name: who.name.clone(),
        guest: who.guest,
        computer: false,
        bot: false,
    }
}

fn seek_event(update: SeekUpdate) -> pb::SeekEvent {
    use pb::seek_event::Kind;
    let kind = match update {
        SeekUpdate::Waiting {
            seek_id,
            waited_ms,
            missed_waves,
            ratings,
        } => Kind::Waiting(pb::Waiting {
            seek_id: seek_id.into_string(),
            waited_ms,
            missed_waves,
            ratings,
        }),
        SeekUpdate::Paired {
            seek_id,
            game_id,
            pool_id,
            white,
            opponent,
            waited_ms,
        } => Kind::Paired(pb::Paired {
            seek_id: seek_id.into_string(),
            game_id,
            pool_id,
            color: if white {
                pb::Color::White
            } else {
                pb::Color::Black
            } as i32,
            opponent: Some(player_wire(&opponent)),
            waited_ms,
        }),
        SeekUpdate::Ended { seek_id, reason } => Kind::Ended(pb::SeekEnded {
            seek_id: seek_id.into_string(),
            reason: match reason.as_str() {
                "cancelled" => pb::SeekEndReason::Cancelled,
                "in_game" => pb::SeekEndReason::InGame,
                "expired" => pb::SeekEndReason::Expired,
                "unknown_player" => pb::SeekEndReason::UnknownPlayer,
                _ => pb::SeekEndReason::Unspecified,
            } as i32,
        }),
    };
    pb::SeekEvent { kind: Some(kind) }
}

fn stats_wire(stats: &LobbyStats) -> pb::LobbyStats {
    pb::LobbyStats {
        at_ms: stats.at_ms,
        players_online: stats.players_online,
        games_in_progress: stats.games_in_progress,
        pools: stats
            .pools
            .iter()
            .map(|(pool_id, seeking, wait)| pb::PoolStats {
                pool_id: pool_id.clone(),
                seeking: *seeking,
                typical_wait_ms: *wait,
            })
            .collect(),
        lobby_seeks: stats.lobby_seeks,
    }
}

fn lobby_seek_wire(seek: &draughts_proto::contract::matchmaking::LobbySeek) -> pb::LobbySeek {
    use pb::time_control::Kind;
    // The seek's house rules are part of its terms: shown to whoever may accept it. (A stored seek
    // whose rules no longer parse shows its variant alone; it was checked when it was made.)
    let variant = seek.variant.parse::<draughts_engine::Variant>().ok();
    let rules = variant.and_then(|v| {
        let options = draughts_engine::RuleOptions::parse(&seek.options).ok()?;
        draughts_engine::RuleSet::with_options(v, options).ok()
    });
    let rules = match (rules, variant) {
        (Some(rules), _) => draughts_proto::convert::rules_to_wire(rules),
        (None, v) => pb::RuleSet {
            variant: v.map_or(
                pb::Variant::Unspecified,
                draughts_proto::convert::variant_to_wire,
            ) as i32,
            options: None,
        },
    };
    pb::LobbySeek {
        seek_id: seek.id.to_string(),
        seeker: Some(player_wire(&seek.seeker)),
        rules: Some(rules),
        time_control: Some(pb::TimeControl {
            kind: Some(if seek.days_per_move > 0 {
                Kind::Correspondence(pb::Correspondence {
                    days_per_move: seek.days_per_move,
                })
            } else {
                Kind::Fischer(pb::Fischer {
                    base_ms: seek.base_ms,
                    increment_ms: seek.increment_ms,
                })
            }),
        }),
        color: match seek.color.as_str() {
            "white" => pb::Color::White,
            "black" => pb::Color::Black,
            _ => pb::Color::Unspecified,
        } as i32,
        rated: seek.rated,
        rating_range: seek.range.map(|(min, max)| pb::RatingRange { min, max }),
        seeker_rating: seek.rating,
        created_at_ms: seek.created_ms,
        expires_at_ms: seek.expires_ms,
    }
}

type EventStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl pb::matchmaking_server::Matchmaking for MatchmakingService {
    async fn list_pools(
        &self,
        _req: Request<pb::ListPoolsRequest>,
    ) -> Result<Response<pb::ListPoolsResponse>, Status> {
        let pools = self
            .core
            .mm
            .pools
            .iter()
            .map(|p| pb::Pool {
                pool_id: p.id.clone(),
                rules: Some(pb::RuleSet {
                    variant: draughts_proto::convert::variant_to_wire(p.variant) as i32,
                    options: None,
                }),
                time_control: Some(time_control_wire(&p.time)),
                rated: p.rated,
            })
            .collect();
        Ok(Response::new(pb::ListPoolsResponse { pools }))
    }

    type SeekStream = EventStream<pb::SeekEvent>;

    #[tracing::instrument(skip_all)]
    async fn seek(
        &self,
        req: Request<pb::SeekRequest>,
    ) -> Result<Response<Self::SeekStream>, Status> {
        let (me, _) = caller(&req)?;
        refuse_bots(&req, "quick pairing pools")?;
        let slot = self.seeks.take(&me.player, "Seek")?;
        let req = req.into_inner();
        let range = range_of(req.rating_range.as_ref())?;
        let mut updates = self.core.seek(&me, &req.pool_ids, range).await?;
        let stream = async_stream(move |tx| async move {
            let _slot = slot;
            loop {
                tokio::select! {
                    // The client went away: dropping `updates` withdraws the seek at once.
                    _ = tx.closed() => return,
                    update = updates.recv() => match update {
                        Some(update) => {
                            if tx.send(Ok(seek_event(update))).await.is_err() {
                                return;
                            }
                        }
                        None => return,
                    },
                }
            }
        });
        Ok(Response::new(stream))
    }

    async fn cancel_seek(
        &self,
        req: Request<pb::CancelSeekRequest>,
    ) -> Result<Response<pb::CancelSeekResponse>, Status> {
        let (me, _) = caller(&req)?;
        let cancelled = self.core.mm.cancel_player(&me.player, "cancelled").await?;
        Ok(Response::new(pb::CancelSeekResponse { cancelled }))
    }

    async fn create_lobby_seek(
        &self,
        req: Request<pb::CreateLobbySeekRequest>,
    ) -> Result<Response<pb::LobbySeek>, Status> {
        let (me, authorization) = caller(&req)?;
        refuse_bots(&req, "lobby seeks")?;
        let address = draughts_auth::client_address(&req);
        let seek = self
            .core
            .create_lobby_seek(&me, &address, &authorization, req.into_inner())
            .await?;
        Ok(Response::new(lobby_seek_wire(&seek)))
    }

    async fn list_lobby_seeks(
        &self,
        req: Request<pb::ListLobbySeeksRequest>,
    ) -> Result<Response<pb::ListLobbySeeksResponse>, Status> {
        let req = req.into_inner();
        let variant = if req.variant == 0 {
            None
        } else {
            Some(draughts_proto::convert::variant(req.variant).map_err(MatchmakingError::from)?)
        };
        let limit = match req.limit {
            0 => 50,
            n => n.min(200) as usize,
        };
        let seeks = self.core.list_lobby_seeks(variant, limit).await?;
        Ok(Response::new(pb::ListLobbySeeksResponse {
            seeks: seeks.iter().map(lobby_seek_wire).collect(),
        }))
    }

    async fn challenge(
        &self,
        req: Request<pb::ChallengeRequest>,
    ) -> Result<Response<pb::Invitation>, Status> {
        let (me, authorization) = caller(&req)?;
        Ok(Response::new(
            self.core
                .challenge(&me, &authorization, req.into_inner())
                .await?,
        ))
    }

    async fn rematch(
        &self,
        req: Request<pb::RematchRequest>,
    ) -> Result<Response<pb::Invitation>, Status> {
        let (me, authorization) = caller(&req)?;
        Ok(Response::new(
            self.core
                .rematch(&me, &authorization, &req.get_ref().game_id)
                .await?,
        ))
    }

    async fn accept(
        &self,
        req: Request<pb::AcceptRequest>,
    ) -> Result<Response<pb::GameView>, Status> {
        let (me, authorization) = caller(&req)?;
        let lobby_seek = draughts_proto::contract::matchmaking::lobby_seek_key(&req.get_ref().id);
        if self
            .core
            .mm
            .live
            .get(&lobby_seek)
            .await
            .ok()
            .flatten()
            .is_some()
        {
            refuse_bots(&req, "lobby seeks")?;
        }
        Ok(Response::new(
            self.core
                .accept(&me, &authorization, &req.get_ref().id)
                .await?,
        ))
    }

    async fn decline(
        &self,
        req: Request<pb::DeclineRequest>,
    ) -> Result<Response<pb::Invitation>, Status> {
        let (me, authorization) = caller(&req)?;
        let r = req.get_ref();
        Ok(Response::new(
            self.core
                .decline(&me, &authorization, &r.id, r.reason)
                .await?,
        ))
    }

    async fn cancel(
        &self,
        req: Request<pb::CancelRequest>,
    ) -> Result<Response<pb::Invitation>, Status> {
        let (me, authorization) = caller(&req)?;
        Ok(Response::new(
            self.core
                .cancel(&me, &authorization, &req.get_ref().id)
                .await?,
        ))
    }

    type WatchLobbyStream = EventStream<pb::LobbyStats>;

    async fn watch_lobby(
        &self,
        req: Request<pb::WatchLobbyRequest>,
    ) -> Result<Response<Self::WatchLobbyStream>, Status> {
        // Anyone may watch; anonymous callers are counted by their client address as the rate limits
        // count it (the X-Forwarded-For entry behind a trusted proxy, whose own address every
        // anonymous watcher would share; IPv6 by its network).
        let signed_in = draughts_auth::optional_principal(&req).map(|p| p.player_id);
        let who = match &signed_in {
            Some(player) => {
                self.core.seen(player).await;
                player.clone()
            }
            None => draughts_auth::client_address(&req),
        };
        let slot = self.watches.take(&who, "WatchLobby")?;
        let first = self.core.read_lobby_stats().await?;
        let mut feed = self.core.lobby_feed();
        let core = self.core.clone();
        let stream = async_stream(move |tx| async move {
            let _slot = slot;
            if tx.send(Ok(stats_wire(&first))).await.is_err() {
                return;
            }
            // While a signed-in player watches the lobby they are online and their real-time lobby
            // seeks stay listed; when the stream goes, the seeks lapse a minute later.
            let mut heartbeat = tokio::time::interval(crate::service::LOBBY_HEARTBEAT);
            heartbeat.tick().await;
            loop {
                tokio::select! {
                    _ = tx.closed() => return,
                    _ = heartbeat.tick(), if signed_in.is_some() => {
                        if let Some(player) = &signed_in {
                            core.seen(player).await;
                        }
                    }
                    changed = feed.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        let stats = stats_wire(&feed.borrow_and_update());
                        if tx.send(Ok(stats)).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Ok(Response::new(stream))
    }
}

/// A response stream fed by a task (ends when the task ends; the task sees `tx.closed()` when the
/// client goes away).
fn async_stream<T, F, Fut>(body: F) -> EventStream<T>
where
    T: Send + 'static,
    F: FnOnce(tokio::sync::mpsc::Sender<Result<T, Status>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tokio::spawn(body(tx));
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}
