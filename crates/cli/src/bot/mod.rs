//! `draughts bot --engine "<command>"`: a bridge between a Hub-protocol engine (`draughts hub`, Scan)
//! and the platform, playing as a BOT account (an API key with the `bot` scope).
//!
//! The bridge holds `Games.WatchPlayerEvents` open: each pending invitation to the bot is accepted
//! when it passes the filters ([`policy::Filters`]: variants, rated or casual, time controls, games at
//! once) and declined with a reason otherwise; each game of the bot (started by an acceptance, by a
//! challenge the bot's owner sent, or found ongoing in the snapshot after a reconnect) is played by its
//! own task with its own engine process ([`game`]). A dropped stream or a restarted server is met with
//! a reconnect after a back-off (at most 5 s): the snapshot then lists the ongoing games, which are
//! picked up again where they stand. Each game is logged (a line on stderr; with `--log-dir`, a log of
//! every move with its timings and the game's PDN).
//!
//! Layout: [`engine`] (one Hub process, every wait with a deadline), [`policy`] (pure: filters, time
//! per move), [`game`] (one game's loop), this module (arguments, the events loop).

pub(crate) mod admin;
mod engine;
mod game;
mod policy;

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use draughts_engine::Variant;
use draughts_proto::pb;
use draughts_proto::pb::auth_client::AuthClient;
use draughts_proto::pb::games_client::GamesClient;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tonic::transport::{Channel, Endpoint};

use crate::CliError;
use crate::client::{Caller, server_url};
use policy::{Filters, Verdict};

#[derive(Args, Debug)]
pub(crate) struct BotArgs {
    /// The engine: a shell command that speaks the Hub protocol on stdin/stdout (`draughts hub`,
    /// `./scan hub`). Each game runs its own process.
    #[arg(long)]
    engine: String,
    /// Server address: HOST:PORT (plain HTTP/2) or a URL.
    #[arg(
        long,
        short = 's',
        env = "DRAUGHTS_SERVER",
        default_value = "127.0.0.1:50051"
    )]
    server: String,
    /// The bot's credential: an API key with the `bot` and `play` scopes.
    #[arg(long, env = "DRAUGHTS_TOKEN", hide_env_values = true)]
    token: String,
    /// Variants accepted, comma separated (default: every variant the engine announces; an engine
    /// announcing none plays international only).
    #[arg(long, value_delimiter = ',')]
    variants: Vec<String>,
    /// Which games: rated, casual or both.
    #[arg(long, default_value = "both", value_parser = ["rated", "casual", "both"])]
    mode: String,
    /// Fischer clocks: the least base time accepted, seconds.
    #[arg(long, default_value_t = 0)]
    min_base_secs: u64,
    /// Fischer clocks: the most base time accepted, seconds.
    #[arg(long, default_value_t = 3600)]
    max_base_secs: u64,
    /// Fischer clocks: the most increment accepted, seconds.
    #[arg(long, default_value_t = 60)]
    max_increment_secs: u64,
    /// Accept correspondence games (days per move; the engine thinks at most --correspondence-secs).
    #[arg(long)]
    correspondence: bool,
    /// The longest think for a correspondence move, seconds.
    #[arg(long, default_value_t = 10)]
    correspondence_secs: u64,
    /// Games at once (one engine process each); invitations beyond wait (at most as many) and are
    /// accepted as games end; beyond the queue they are declined as "later".
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=64))]
    max_games: u64,
    /// Kept in reserve on every move for the network and the bridge, milliseconds.
    #[arg(long, default_value_t = 150)]
    move_overhead_ms: u64,
    /// How long past its budget the engine's move is still waited for before the game is resigned
    /// for it, milliseconds.
    #[arg(long, default_value_t = 1000)]
    engine_grace_ms: u64,
    /// A directory for each game's log (`<game id>.log`: every move with its timings) and PDN.
    #[arg(long)]
    log_dir: Option<PathBuf>,
    /// Draws: `engine` accepts an offer, and offers one after its own move, when the engine's last 3
    /// scores are within --draw-margin of 0 and the game has --draw-min-ply plies (declines
    /// otherwise); `never` declines every offer and makes none.
    #[arg(long, value_enum, default_value_t = policy::Draws::Engine)]
    draws: policy::Draws,
    /// Draws: the largest score (in men, the Hub protocol's `info score=`) still called level.
    #[arg(long, default_value_t = 0.15)]
    draw_margin: f64,
    /// Draws: the fewest plies played before the bridge accepts or offers one.
    #[arg(long, default_value_t = 40)]
    draw_min_ply: u32,
}

pub(crate) fn run(args: BotArgs) -> Result<(), CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run_async(args))
}

/// The longest pause between two reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

fn backoff(failures: u32) -> Duration {
    (Duration::from_millis(200) * failures.min(25)).min(MAX_BACKOFF)
}

async fn run_async(args: BotArgs) -> Result<(), CliError> {
    let caller = Caller::new(Some(&args.token))?;
    if !caller.has_token() {
        return Err(CliError("--token (or DRAUGHTS_TOKEN) is required".into()));
    }
    if !(0.0..=10.0).contains(&args.draw_margin) {
        return Err(CliError(format!(
            "--draw-margin must be from 0 to 10 (men), got {}",
            args.draw_margin
        )));
    }
    let url = server_url(&args.server);
    // Lazy: the bridge may start before the server, and the channel reconnects by itself after a
    // restart. No channel-wide timeout (streams stay open); unary calls set their own.
    let channel = Endpoint::from_shared(url.clone())
        .map_err(|e| CliError(format!("bad server address '{}': {e}", args.server)))?
        .connect_timeout(Duration::from_secs(5))
        .http2_keep_alive_interval(Duration::from_secs(20))
        .keep_alive_timeout(Duration::from_secs(10))
        .connect_lazy();
    let me = who_am_i(&channel, &caller).await?;
    if let Some(dir) = &args.log_dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError(format!("cannot create {}: {e}", dir.display())))?;
    }
    let probe = engine::HubEngine::start(&args.engine, None)
        .await
        .map_err(|e| CliError(format!("engine '{}': {e}", args.engine)))?;
    let info = probe.info.clone();
    probe.quit().await;
    let filters = filters(&args, &info)?;
    eprintln!(
        "bot {me} on {url}: engine '{}' ({}), variants {}, at most {} games at once",
        args.engine,
        if info.name.is_empty() {
            "unnamed"
        } else {
            &info.name
        },
        filters
            .variants
            .iter()
            .map(|v| v.key())
            .collect::<Vec<_>>()
            .join(","),
        filters.max_games
    );
    let shared = Arc::new(game::Shared {
        channel: channel.clone(),
        caller: caller.clone(),
        me: me.clone(),
        engine: args.engine.clone(),
        move_overhead_ms: args.move_overhead_ms,
        engine_grace: Duration::from_millis(args.engine_grace_ms),
        correspondence_think: Duration::from_secs(args.correspondence_secs.max(1)),
        log_dir: args.log_dir.clone(),
        draws: policy::DrawRule {
            draws: args.draws,
            margin: args.draw_margin,
            min_ply: args.draw_min_ply,
        },
        stats: Mutex::new(game::Stats::default()),
    });
    let (ended_tx, mut ended) = mpsc::unbounded_channel();
    let mut bridge = Bridge {
        shared,
        filters,
        games: HashMap::new(),
        active: HashSet::new(),
        waiting: VecDeque::new(),
        answered: HashSet::new(),
        ended: ended_tx,
    };
    let mut failures = 0u32;
    loop {
        if failures > 0 {
            tokio::time::sleep(backoff(failures)).await;
        }
        failures += 1;
        let mut events = GamesClient::new(channel.clone());
        let stream = events
            .watch_player_events(caller.request(pb::WatchPlayerEventsRequest {}))
            .await;
        let mut stream = match stream {
            Ok(stream) => stream.into_inner(),
            Err(status) if status.code() == tonic::Code::Unauthenticated => {
                return Err(CliError(format!(
                    "the server refused the token: {}",
                    status.message()
                )));
            }
            Err(status) => {
                eprintln!(
                    "events: {:?} {}; reconnecting",
                    status.code(),
                    status.message()
                );
                continue;
            }
        };
        loop {
            let message = tokio::select! {
                message = stream.message() => message,
                Some(game_id) = ended.recv() => {
                    bridge.on_game_end(&game_id).await;
                    continue;
                }
            };
            match message {
                Ok(Some(event)) => {
                    if matches!(event.kind, Some(pb::player_event::Kind::Synced(_))) {
                        failures = 0;
                    }
                    bridge.on_event(event).await;
                }
                Ok(None) => {
                    eprintln!("events: the stream ended; reconnecting");
                    break;
                }
                Err(status) => {
                    eprintln!(
                        "events: {:?} {}; reconnecting",
                        status.code(),
                        status.message()
                    );
                    break;
                }
            }
        }
    }
}

/// The bot's player id (retried while the server is not reachable).
async fn who_am_i(channel: &Channel, caller: &Caller) -> Result<String, CliError> {
    let mut failures = 0u32;
    loop {
        let mut request = caller.request(pb::WhoAmIRequest {});
        request.set_timeout(Duration::from_secs(10));
        match AuthClient::new(channel.clone()).who_am_i(request).await {
            Ok(response) => {
                let me = response.into_inner();
                let player = me.player.unwrap_or_default();
                if !player.bot {
                    eprintln!(
                        "warning: {} is not a bot (its key lacks the bot scope); people may not expect a program",
                        player.id
                    );
                }
                return Ok(player.id);
            }
            Err(status)
                if matches!(
                    status.code(),
                    tonic::Code::Unavailable
                        | tonic::Code::ResourceExhausted
                        | tonic::Code::DeadlineExceeded
                ) && failures < 60 =>
            {
                failures += 1;
                tokio::time::sleep(backoff(failures)).await;
            }
            Err(status) => {
                return Err(CliError(format!(
                    "Auth.WhoAmI: {:?}: {}",
                    status.code(),
                    status.message()
                )));
            }
        }
    }
}

fn filters(args: &BotArgs, info: &engine::EngineInfo) -> Result<Filters, CliError> {
    let variants: Vec<Variant> = if args.variants.is_empty() {
        if info.variants.is_empty() {
            vec![Variant::International]
        } else {
            info.variants.clone()
        }
    } else {
        let mut chosen = Vec::new();
        for name in &args.variants {
            let v: Variant = name.trim().parse()?;
            if !info.plays(v) {
                return Err(CliError(format!("the engine does not play {}", v.key())));
            }
            chosen.push(v);
        }
        chosen
    };
    if args.min_base_secs > args.max_base_secs {
        return Err(CliError("--min-base-secs is above --max-base-secs".into()));
    }
    Ok(Filters {
        variants,
        rated: args.mode != "casual",
        casual: args.mode != "rated",
        min_base_secs: args.min_base_secs,
        max_base_secs: args.max_base_secs,
        max_increment_secs: args.max_increment_secs,
        correspondence: args.correspondence,
        max_games: usize::try_from(args.max_games).unwrap_or(64),
        start_position_only: true,
    })
}

/// The events loop's state.
struct Bridge {
    shared: Arc<game::Shared>,
    filters: Filters,
    /// The game tasks, by game id (a task lives a moment past its game's end: engine exit, log).
    games: HashMap<String, JoinHandle<()>>,
    /// The games not over yet: what counts against `--max-games`.
    active: HashSet<String>,
    /// Invitations that passed the filters while every slot was taken: accepted, oldest first, as
    /// games end (at most `--max-games` wait; beyond, they are declined as "later").
    waiting: VecDeque<pb::Invitation>,
    /// Invitations already answered or queued (the snapshot after a reconnect lists pending ones again).
    answered: HashSet<String>,
    /// Where game tasks say that their game is over.
    ended: mpsc::UnboundedSender<String>,
}

impl Bridge {
    async fn on_event(&mut self, event: pb::PlayerEvent) {
        use pb::player_event::Kind;
        self.games.retain(|_, task| !task.is_finished());
        match event.kind {
            Some(Kind::Invitation(invitation)) => self.on_invitation(invitation).await,
            Some(Kind::GameStarted(view)) => self.start_game(&view.game_id),
            _ => {}
        }
    }

    async fn on_invitation(&mut self, invitation: pb::Invitation) {
        let to_me = invitation
            .invitee
            .as_ref()
            .is_some_and(|p| p.id == self.shared.me);
        let pending = invitation.state == pb::InvitationState::Pending as i32;
        if !to_me || !pending || self.answered.contains(&invitation.invitation_id) {
            return;
        }
        if self.answered.len() > 100_000 {
            self.answered.clear();
        }
        self.answered.insert(invitation.invitation_id.clone());
        let from = invitation
            .inviter
            .as_ref()
            .map(|p| p.id.clone())
            .unwrap_or_default();
        // Judged as if a slot were free: a full house queues the invitation instead (below).
        let verdict = self.filters.judge(&invitation, 0);
        if verdict == Verdict::Accept && self.active.len() >= self.filters.max_games {
            if self.waiting.len() < self.filters.max_games {
                eprintln!(
                    "queued {} from {from}: every slot is taken",
                    invitation.invitation_id
                );
                self.waiting.push_back(invitation);
                return;
            }
            self.decline(&invitation, &from, pb::DeclineReason::Later)
                .await;
            return;
        }
        match verdict {
            Verdict::Accept => self.accept(&invitation, &from).await,
            Verdict::Decline(reason) => self.decline(&invitation, &from, reason).await,
        }
    }

    /// A game is over: its slot goes to the oldest queued invitation still pending.
    async fn on_game_end(&mut self, game_id: &str) {
        self.active.remove(game_id);
        while self.active.len() < self.filters.max_games {
            let Some(invitation) = self.waiting.pop_front() else {
                break;
            };
            let from = invitation
                .inviter
                .as_ref()
                .map(|p| p.id.clone())
                .unwrap_or_default();
            self.accept(&invitation, &from).await;
        }
    }

    async fn accept(&mut self, invitation: &pb::Invitation, from: &str) {
        let mut games = GamesClient::new(self.shared.channel.clone());
        let mut request = self.shared.caller.request(pb::InvitationRequest {
            invitation_id: invitation.invitation_id.clone(),
            accept_key: String::new(),
        });
        request.set_timeout(Duration::from_secs(10));
        match games.accept_invitation(request).await {
            Ok(view) => {
                eprintln!("accepted {} from {from}", invitation.invitation_id);
                self.start_game(&view.into_inner().game_id);
            }
            // No longer pending (cancelled, expired, taken): nothing to do.
            Err(status) => eprintln!(
                "accepting {} from {from}: {:?} {}",
                invitation.invitation_id,
                status.code(),
                status.message()
            ),
        }
    }

    async fn decline(
        &mut self,
        invitation: &pb::Invitation,
        from: &str,
        reason: pb::DeclineReason,
    ) {
        let mut games = GamesClient::new(self.shared.channel.clone());
        let mut request = self.shared.caller.request(pb::DeclineInvitationRequest {
            invitation_id: invitation.invitation_id.clone(),
            reason: reason as i32,
        });
        request.set_timeout(Duration::from_secs(10));
        let answer = games.decline_invitation(request).await;
        eprintln!(
            "declined {} from {from} ({}){}",
            invitation.invitation_id,
            reason.as_str_name(),
            answer
                .err()
                .map(|s| format!(": {:?} {}", s.code(), s.message()))
                .unwrap_or_default()
        );
    }

    fn start_game(&mut self, game_id: &str) {
        if game_id.is_empty() || self.games.contains_key(game_id) {
            return;
        }
        let shared = Arc::clone(&self.shared);
        let id = game_id.to_owned();
        let ended = self.ended.clone();
        eprintln!("game {id}: playing");
        let task = tokio::spawn(async move {
            game::play(shared, id, ended).await;
        });
        self.games.insert(game_id.to_owned(), task);
        self.active.insert(game_id.to_owned());
    }
}
