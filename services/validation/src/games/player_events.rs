//! `Games.WatchPlayerEvents`: a player's invitations and games as they happen.
//!
//! The stream subscribes to the player's signal channel first, then sends a snapshot (every pending
//! invitation to or from the player, every ongoing game), then `synced`, then one event per signal, read
//! fresh from the store (the records are the truth; a signal only says what to read). When the
//! subscription is lost the stream re-subscribes with a growing pause (100 ms doubling to 5 s, never a
//! busy loop) and sends the snapshot again, so nothing that happened meanwhile is missed; clients treat
//! every event as the current state of its invitation or game, so a repeat is harmless. Each stream counts
//! against the caller's and the replica's watch caps (`--max-watchers-per-caller`, `--max-watchers`).

use std::pin::Pin;
use std::time::Duration;

use draughts_proto::pb;
use draughts_store::Notice;
use futures_util::{Stream, StreamExt};
use tokio::sync::mpsc;
use tonic::Status;

use super::consent::{PlayerSignal, SignalKind, keys};
use super::grpc::{invitation_wire, summary_wire, view};
use super::service::{GamesCore, GamesError, GamesResult};

pub type PlayerEventStream = Pin<Box<dyn Stream<Item = Result<pb::PlayerEvent, Status>> + Send>>;

const FIRST_PAUSE: Duration = Duration::from_millis(100);
const LONGEST_PAUSE: Duration = Duration::from_secs(5);

/// Starts the event stream of `player`.
pub async fn watch(core: GamesCore, player: String) -> GamesResult<PlayerEventStream> {
    // Counted with the caller's WatchGame streams: the same per-caller and per-replica caps.
    let admitted = core.watchers().admit(&player)?;
    let subscription = core.live().subscribe(&keys::player_events(&player)).await?;
    let (tx, rx) = mpsc::channel::<Result<pb::PlayerEvent, Status>>(64);
    tokio::spawn(async move {
        let _admitted = admitted;
        let mut subscription = subscription;
        let mut pause = FIRST_PAUSE;
        'snapshot: loop {
            match snapshot(&core, &player).await {
                Ok(events) => {
                    for e in events {
                        if tx.send(Ok(e)).await.is_err() {
                            return;
                        }
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e.to_status())).await;
                    return;
                }
            }
            loop {
                tokio::select! {
                    _ = tx.closed() => return,
                    message = subscription.next() => match message {
                        // Signals may have been missed (the store re-established its connection):
                        // send the snapshot again.
                        Some(Notice::Gap) => continue 'snapshot,
                        Some(Notice::Message(bytes)) => {
                            pause = FIRST_PAUSE;
                            let Some(signal) = draughts_proto::contract::player::decode(&bytes) else {
                                tracing::warn!("player signal does not decode; ignored");
                                continue;
                            };
                            match event(&core, &player, &signal).await {
                                Ok(Some(e)) => {
                                    if tx.send(Ok(e)).await.is_err() {
                                        return;
                                    }
                                }
                                Ok(None) => {}
                                Err(e) => tracing::warn!(id = %signal.id, error = %e, "player event not read"),
                            }
                        }
                        None => break,
                    },
                }
            }
            // The subscription ended (the backend connection was lost): subscribe again after a pause
            // that grows while it keeps failing, then send the snapshot again.
            loop {
                tokio::select! {
                    _ = tx.closed() => return,
                    _ = tokio::time::sleep(pause) => {}
                }
                pause = (pause * 2).min(LONGEST_PAUSE);
                match core.live().subscribe(&keys::player_events(&player)).await {
                    Ok(s) => {
                        subscription = s;
                        break;
                    }
                    Err(e) => tracing::warn!(error = %e, "player events: subscribing again failed"),
                }
            }
        }
    });
    Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)))
}

use draughts_proto::ServiceError;

fn event_at(at_ms: u64, kind: pb::player_event::Kind) -> pb::PlayerEvent {
    pb::PlayerEvent {
        at_ms,
        kind: Some(kind),
    }
}

async fn snapshot(core: &GamesCore, player: &str) -> GamesResult<Vec<pb::PlayerEvent>> {
    use pb::player_event::Kind;
    let now = core.now();
    let mut events = Vec::new();
    for inv in core.pending_invitations(player).await? {
        events.push(event_at(now, Kind::Invitation(invitation_wire(&inv, now)?)));
    }
    for game in core.ongoing(player).await? {
        events.push(event_at(now, Kind::GameStarted(view(&game, now)?)));
    }
    events.push(event_at(now, Kind::Synced(true)));
    Ok(events)
}

async fn event(
    core: &GamesCore,
    player: &str,
    signal: &PlayerSignal,
) -> GamesResult<Option<pb::PlayerEvent>> {
    use pb::player_event::Kind;
    let now = core.now();
    let kind = match signal.kind {
        SignalKind::Invitation => match core.invitation_for(&signal.id, player).await {
            Ok(inv) => Kind::Invitation(invitation_wire(&inv, now)?),
            Err(GamesError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        },
        SignalKind::GameStarted => Kind::GameStarted(view(&core.load(&signal.id).await?.0, now)?),
        SignalKind::GameFinished => {
            Kind::GameFinished(summary_wire(&core.load(&signal.id).await?.0, now)?)
        }
    };
    Ok(Some(event_at(now, kind)))
}
