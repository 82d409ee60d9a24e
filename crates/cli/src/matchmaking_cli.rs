//! `draughts client` commands for finding an opponent: `seek` (quick pairing), `challenge`, `lobby`
//! (list, or offer a custom game), and `accept` (a challenge, rematch, lobby seek or invitation).

use clap::Args;
use draughts_proto::pb;
use draughts_proto::pb::matchmaking_client::MatchmakingClient;
use tonic::transport::Channel;

use crate::CliError;
use crate::client::{Caller, Target, call, rules_of, status_error};

#[derive(Args, Debug)]
pub struct SeekArgs {
    /// Pool ids (e.g. `international-3+2-rated`; `draughts client lobby --pools` lists them). The first
    /// pairing in any of them wins.
    #[arg(required = true)]
    pools: Vec<String>,
    /// Only opponents rated at least this.
    #[arg(long)]
    min: Option<i32>,
    /// Only opponents rated at most this.
    #[arg(long)]
    max: Option<i32>,
}

fn need_token(caller: &Caller) -> Result<&Caller, CliError> {
    if caller.has_token() {
        Ok(caller)
    } else {
        Err(CliError(
            "this command needs --token (get one with `draughts client guest`)".into(),
        ))
    }
}

/// Waits in the pools until paired (Matchmaking.Seek): progress on stderr, then the game id on stdout.
/// Ctrl-C (closing the stream) withdraws the seek.
pub async fn seek(ch: &Channel, caller: &Caller, a: SeekArgs) -> Result<(), CliError> {
    let caller = need_token(caller)?;
    let rating_range = match (a.min, a.max) {
        (None, None) => None,
        (min, max) => Some(pb::RatingRange {
            min: min.unwrap_or(0),
            max: max.unwrap_or(4000),
        }),
    };
    let mm = MatchmakingClient::new(ch.clone());
    let mut stream = call!(
        caller,
        mm,
        seek,
        pb::SeekRequest {
            pool_ids: a.pools.clone(),
            rating_range,
        }
    )
    .map_err(status_error)?;
    while let Some(event) = stream.message().await.map_err(status_error)? {
        use pb::seek_event::Kind;
        match event.kind {
            Some(Kind::Waiting(w)) => eprintln!(
                "waiting {:.1}s (seek {}, {} waves missed)",
                w.waited_ms as f64 / 1000.0,
                w.seek_id,
                w.missed_waves
            ),
            Some(Kind::Paired(p)) => {
                let color = if p.color == pb::Color::White as i32 {
                    "white"
                } else {
                    "black"
                };
                eprintln!(
                    "paired in {} after {:.1}s: you play {color} against {}",
                    p.pool_id,
                    p.waited_ms as f64 / 1000.0,
                    p.opponent.map(|o| o.display_name).unwrap_or_default()
                );
                out!("{}", p.game_id);
                return Ok(());
            }
            Some(Kind::Ended(e)) => {
                let reason = pb::SeekEndReason::try_from(e.reason)
                    .map(|r| r.as_str_name())
                    .unwrap_or("UNKNOWN");
                return Err(CliError(format!("the seek ended without a game: {reason}")));
            }
            None => {}
        }
    }
    Err(CliError("the server closed the seek".into()))
}

#[derive(Args, Debug)]
pub struct ChallengeArgs {
    #[command(flatten)]
    target: Target,
    /// The challenged player's id; leave it out for an open link anyone may accept.
    #[arg(long, default_value = "")]
    opponent: String,
    /// Play Black (default: random).
    #[arg(long, conflicts_with = "white")]
    black: bool,
    /// Play White (default: random).
    #[arg(long)]
    white: bool,
    /// Fischer base time, seconds.
    #[arg(long, default_value_t = 300)]
    base: u64,
    /// Fischer increment, seconds.
    #[arg(long, default_value_t = 3)]
    increment: u64,
    /// Correspondence instead: days per move.
    #[arg(long)]
    days: Option<u32>,
    #[arg(long)]
    rated: bool,
}

fn time_control(a: &ChallengeArgs) -> pb::TimeControl {
    use pb::time_control::Kind;
    pb::TimeControl {
        kind: Some(match a.days {
            Some(d) => Kind::Correspondence(pb::Correspondence { days_per_move: d }),
            None => Kind::Fischer(pb::Fischer {
                base_ms: a.base * 1000,
                increment_ms: a.increment * 1000,
            }),
        }),
    }
}

fn color(a: &ChallengeArgs) -> i32 {
    if a.black {
        pb::Color::Black as i32
    } else if a.white {
        pb::Color::White as i32
    } else {
        pb::Color::Unspecified as i32
    }
}

/// Matchmaking.Challenge: prints the invitation id (the game's id once accepted).
pub async fn challenge(ch: &Channel, caller: &Caller, a: ChallengeArgs) -> Result<(), CliError> {
    let caller = need_token(caller)?;
    let mm = MatchmakingClient::new(ch.clone());
    let request = pb::ChallengeRequest {
        invitee_id: a.opponent.clone(),
        rules: rules_of(&a.target)?,
        time_control: Some(time_control(&a)),
        color: color(&a),
        rated: a.rated,
        fen: a.target.fen.clone(),
        expires_in_ms: 0,
    };
    let invitation = call!(caller, mm, challenge, request).map_err(status_error)?;
    out!("{}", invitation.invitation_id);
    eprintln!(
        "challenge sent; the game starts when {} runs `draughts client accept {}`",
        if a.opponent.is_empty() {
            "someone"
        } else {
            &a.opponent
        },
        invitation.invitation_id
    );
    Ok(())
}

#[derive(Args, Debug)]
pub struct LobbyArgs {
    /// List the quick-pairing pools instead.
    #[arg(long)]
    pools: bool,
    /// Offer a custom game in the lobby instead of listing.
    #[arg(long)]
    offer: bool,
    /// The offered game's rule set.
    #[arg(long, short = 'v', default_value = "international")]
    variant: String,
    /// House-rule options of the offered game.
    #[arg(long, short = 'o', default_value = "")]
    options: String,
    /// Play Black (default: random).
    #[arg(long, conflicts_with = "white")]
    black: bool,
    /// Play White (default: random).
    #[arg(long)]
    white: bool,
    /// Fischer base time, seconds.
    #[arg(long, default_value_t = 300)]
    base: u64,
    /// Fischer increment, seconds.
    #[arg(long, default_value_t = 3)]
    increment: u64,
    /// Correspondence instead: days per move.
    #[arg(long)]
    days: Option<u32>,
    #[arg(long)]
    rated: bool,
}

/// The lobby: its numbers and open seeks (or the pools; or offers a seek with `--offer`).
pub async fn lobby(ch: &Channel, caller: &Caller, a: LobbyArgs) -> Result<(), CliError> {
    let mm = MatchmakingClient::new(ch.clone());
    if a.pools {
        let pools = call!(caller, mm, list_pools, pb::ListPoolsRequest {}).map_err(status_error)?;
        for p in pools.pools {
            out!("{}", p.pool_id);
        }
        return Ok(());
    }
    if a.offer {
        let caller = need_token(caller)?;
        let g = ChallengeArgs {
            target: Target {
                variant: a.variant.clone(),
                fen: String::new(),
                options: a.options.clone(),
            },
            opponent: String::new(),
            black: a.black,
            white: a.white,
            base: a.base,
            increment: a.increment,
            days: a.days,
            rated: a.rated,
        };
        let g = &g;
        let request = pb::CreateLobbySeekRequest {
            rules: rules_of(&g.target)?,
            time_control: Some(time_control(g)),
            color: color(g),
            rated: g.rated,
            rating_range: None,
            expires_in_ms: 0,
        };
        let seek = call!(caller, mm, create_lobby_seek, request).map_err(status_error)?;
        out!("{}", seek.seek_id);
        eprintln!(
            "listed in the lobby; others accept it with `draughts client accept {}`",
            seek.seek_id
        );
        return Ok(());
    }
    let mut stats =
        call!(caller, mm, watch_lobby, pb::WatchLobbyRequest {}).map_err(status_error)?;
    if let Some(s) = stats.message().await.map_err(status_error)? {
        out!(
            "{} players online, {} games in progress, {} lobby seeks",
            s.players_online,
            s.games_in_progress,
            s.lobby_seeks
        );
        for p in s
            .pools
            .iter()
            .filter(|p| p.seeking > 0 || p.typical_wait_ms > 0)
        {
            out!(
                "  {:<32} {:>5} seeking, typical wait {:.1}s",
                p.pool_id,
                p.seeking,
                p.typical_wait_ms as f64 / 1000.0
            );
        }
    }
    let seeks = call!(
        caller,
        mm,
        list_lobby_seeks,
        pb::ListLobbySeeksRequest {
            variant: 0,
            limit: 50
        }
    )
    .map_err(status_error)?;
    for s in seeks.seeks {
        let seeker = s.seeker.map(|p| p.display_name).unwrap_or_default();
        let tc = match s.time_control.and_then(|t| t.kind) {
            Some(pb::time_control::Kind::Fischer(f)) => {
                format!("{}+{}", f.base_ms / 60_000, f.increment_ms / 1000)
            }
            Some(pb::time_control::Kind::Correspondence(c)) => {
                format!("{} days/move", c.days_per_move)
            }
            None => "-".into(),
        };
        let variant = s
            .rules
            .and_then(|r| pb::Variant::try_from(r.variant).ok())
            .map(|v| v.as_str_name())
            .unwrap_or("?");
        out!(
            "{}  {} ({})  {}  {}  {}",
            s.seek_id,
            seeker,
            s.seeker_rating,
            variant,
            tc,
            if s.rated { "rated" } else { "casual" }
        );
    }
    Ok(())
}

/// Accepts a challenge, rematch, lobby seek or invitation by its id (Matchmaking.Accept, which also
/// ends the caller's quick-pairing seek; a server without Matchmaking: Games.AcceptInvitation).
/// Prints the game's id.
pub async fn accept(ch: &Channel, caller: &Caller, id: &str) -> Result<(), CliError> {
    let caller = need_token(caller)?;
    let mm = MatchmakingClient::new(ch.clone());
    match call!(caller, mm, accept, pb::AcceptRequest { id: id.into() }) {
        Ok(game) => {
            out!("{}", game.game_id);
            Ok(())
        }
        Err(status) if status.code() == tonic::Code::Unimplemented => {
            crate::games_cli::accept(ch, caller, id).await
        }
        Err(status) => Err(status_error(status)),
    }
}
