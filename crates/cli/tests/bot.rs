//! Bots: the server's rules for BOT players (API keys with the `bot` scope) and the `draughts bot
//! --engine` bridge, against the real one-process platform (`draughtsd`'s library) on 127.0.0.1.
//!
//! - `bot_rules`: the mark comes from the key, never the request; pools and lobby seeks refuse bots;
//!   game views, WhoAmI, profiles and the PDN mark them; a bot owner's keys stay bots.
//! - `an_operator_sets_one_bot_s_limits`: `Auth.SetBotLimits` (admin only, bots only, bounded): the
//!   bot's own games-at-once bound in Games and its own calls a minute at the edge, all its keys
//!   together; other bots keep the server's defaults.
//! - `misbehaving_engines_are_resigned_never_waited_on`: fake engines (an illegal move, silence, a
//!   crash): each game ends at once (resigned, so aborted before two moves), the bridge says why.
//! - `a_full_bridge_queues_then_declines_and_filters_challenges`: `--max-games 2` and three
//!   challenges at once: two played at the same time, the third queued and accepted when a game
//!   ends, one more queued, the next declined LATER; another variant VARIANT, a rated game CASUAL.
//! - `an_engine_failing_mid_game_loses_that_game_only`: an engine that crashes (one game) or plays an
//!   illegal move (another) after three good moves: each game resigned at once (a loss, not an abort),
//!   the bridge's third game played on.
//! - `the_bridge_answers_and_offers_draws_by_the_engine_s_score`: `draughts hub` with its scores
//!   rewritten (level, or 3 men up): the level bot declines an offer before --draw-min-ply, offers a
//!   draw itself afterwards (accepted: drawn by agreement); the other declines and never offers.
//! - `two_bridged_bots_play_each_other_to_the_end`: two bridges running `draughts hub`.
//! - `bridge_resumes_its_game_across_a_server_restart_on_redis`: the server stops and starts again on
//!   the same port and Redis; the bridge reconnects and finishes its game.
//! - `scan_plays_through_the_bridge` (opt-in, `DRAUGHTS_SCAN_DIR=<folder of a built Scan 2.0>`):
//!   Scan 2.0 (the first Hub syntax) bridged, against a bridged `draughts hub`, to the end.
//! - `fifty_games_against_scripted_challengers` (opt-in, `DRAUGHTS_BOT_SOAK=1`): the must-reach run
//!   against challengers playing the server's level 1, whose command and figures are in docs/bots.md.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use draughts_engine::Position;
use draughts_proto::pb;
use draughts_proto::pb::auth_client::AuthClient;
use draughts_proto::pb::games_client::GamesClient;
use draughts_proto::pb::matchmaking_client::MatchmakingClient;
use draughts_testkit::games::authed;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

const ADMIN_KEY: &str = "dk_bot_test_admin_key_0123456789abcdef0123456789";

fn config(redis_url: &str, extra: &[&str]) -> draughtsd::Config {
    let mut args = vec![
        "draughtsd",
        "--redis-url",
        redis_url,
        "--database-url",
        "sqlite::memory:",
        "--metrics-listen",
        "off",
        "--token-secret",
        "bot-test-only-token-secret-0123456789abcdef",
        "--admin-api-key",
        ADMIN_KEY,
        "--rate-limit-guest-per-minute",
        "100000",
        "--rate-limit-api-key-per-minute",
        "100000",
        "--rate-limit-anonymous-per-minute",
        "100000",
    ];
    args.extend_from_slice(extra);
    draughtsd::Config::try_parse_from(args).unwrap()
}

/// The platform serving on `listener` until the returned sender fires.
struct Server {
    addr: std::net::SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Server {
    async fn start_on(listener: TcpListener, redis_url: &str) -> Server {
        Server::start_with(listener, redis_url, &[]).await
    }

    async fn start_with(listener: TcpListener, redis_url: &str, extra: &[&str]) -> Server {
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let config = config(redis_url, extra);
        let task = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            if let Err(e) = draughtsd::run(config, listener, shutdown).await {
                panic!("draughtsd failed: {e}");
            }
        });
        Server {
            addr,
            stop: Some(stop),
            task,
        }
    }

    async fn start(redis_url: &str) -> Server {
        Server::start_on(TcpListener::bind("127.0.0.1:0").await.unwrap(), redis_url).await
    }

    async fn channel(&self) -> Channel {
        let endpoint = Channel::from_shared(format!("http://{}", self.addr)).unwrap();
        for _ in 0..500 {
            if let Ok(channel) = endpoint.connect().await {
                return channel;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("cannot connect to {}", self.addr);
    }

    /// Graceful stop (bounded: open streams are cut after 10 s).
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
    }
}

async fn api_key(
    channel: &Channel,
    owner: &str,
    scopes: &[pb::AuthScope],
) -> Result<String, tonic::Status> {
    let response = AuthClient::new(channel.clone())
        .create_api_key(authed(
            ADMIN_KEY,
            pb::CreateApiKeyRequest {
                owner: owner.into(),
                scopes: scopes.iter().map(|s| *s as i32).collect(),
                rate_limit_per_minute: 0,
                expires_in_secs: 0,
            },
        ))
        .await?;
    Ok(response.into_inner().key)
}

async fn bot_key(channel: &Channel, owner: &str) -> String {
    api_key(channel, owner, &[pb::AuthScope::Play, pb::AuthScope::Bot])
        .await
        .unwrap()
}

async fn guest(channel: &Channel, name: &str) -> (String, String) {
    let g = AuthClient::new(channel.clone())
        .create_guest(pb::CreateGuestRequest {
            display_name: name.into(),
        })
        .await
        .unwrap()
        .into_inner();
    (g.token, g.player.unwrap().id)
}

fn english_rules() -> Option<pb::RuleSet> {
    Some(draughts_proto::convert::rules_to_wire(
        draughts_engine::Variant::English.into(),
    ))
}

fn fischer(base_ms: u64, increment_ms: u64) -> Option<pb::TimeControl> {
    Some(pb::TimeControl {
        kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
            base_ms,
            increment_ms,
        })),
    })
}

/// `token` invites `invitee` to an english game with the given clock, `color` being the inviter's.
async fn invite(
    channel: &Channel,
    token: &str,
    invitee: &str,
    clock: Option<pb::TimeControl>,
    color: pb::Color,
) -> Result<pb::Invitation, tonic::Status> {
    Ok(GamesClient::new(channel.clone())
        .create_invitation(authed(
            token,
            pb::CreateInvitationRequest {
                rules: english_rules(),
                time_control: clock,
                invitee_id: invitee.into(),
                color: color as i32,
                rated: false,
                ..Default::default()
            },
        ))
        .await?
        .into_inner())
}

async fn get_game(channel: &Channel, game_id: &str) -> Option<pb::GameView> {
    GamesClient::new(channel.clone())
        .get_game(pb::GetGameRequest {
            game_id: game_id.into(),
        })
        .await
        .ok()
        .map(|r| r.into_inner())
}

fn is_over(view: &pb::GameView) -> bool {
    view.status
        .as_ref()
        .is_some_and(|s| s.outcome != pb::Outcome::Ongoing as i32)
}

/// Polls until the game exists and is over; panics after `limit`.
async fn wait_over(channel: &Channel, game_id: &str, limit: Duration) -> pb::GameView {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(view) = get_game(channel, game_id).await
            && is_over(&view)
        {
            return view;
        }
        assert!(
            Instant::now() < deadline,
            "game {game_id} not over after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A bridge process; killed when dropped. Its stderr goes to `<dir>/bridge.err`.
struct Bridge {
    child: Child,
    dir: tempfile::TempDir,
}

impl Bridge {
    fn start(
        addr: std::net::SocketAddr,
        key: &str,
        engine: &str,
        name: &str,
        extra: &[&str],
    ) -> Bridge {
        let dir = tempfile::Builder::new()
            .prefix(&format!("draughts-bot-{name}-"))
            .tempdir()
            .unwrap();
        let err = std::fs::File::create(dir.path().join("bridge.err")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_draughts"))
            .arg("bot")
            .args(["--server", &addr.to_string(), "--engine", engine])
            .arg("--log-dir")
            .arg(dir.path().join("games"))
            .args(extra)
            .env("DRAUGHTS_TOKEN", key)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap();
        Bridge { child, dir }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("bridge.err")).unwrap_or_default()
    }

    /// Every game log line (all games).
    fn game_logs(&self) -> String {
        let mut all = String::new();
        if let Ok(entries) = std::fs::read_dir(self.dir.path().join("games")) {
            for entry in entries.flatten() {
                if entry.path().extension().is_some_and(|e| e == "log") {
                    all.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
                }
            }
        }
        all
    }

    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // The bridge writes into the directory: stopped before the directory (a field) is dropped.
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Kept after a failure, for its logs.
        if std::thread::panicking() {
            self.dir.disable_cleanup(true);
            eprintln!("bridge files kept in {}", self.dir.path().display());
        }
    }
}

fn hub_engine() -> String {
    format!("{} hub", env!("CARGO_BIN_EXE_draughts"))
}

/// Waits until the invitation is accepted (the bridge accepted it); the game's id.
async fn accepted(channel: &Channel, token: &str, invitation_id: &str, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let inv = GamesClient::new(channel.clone())
            .get_invitation(authed(
                token,
                pb::InvitationRequest {
                    invitation_id: invitation_id.into(),
                    accept_key: String::new(),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        if inv.state == pb::InvitationState::Accepted as i32 {
            return inv.game_id;
        }
        assert_eq!(inv.state, pb::InvitationState::Pending as i32, "{inv:?}");
        assert!(
            Instant::now() < deadline,
            "invitation {invitation_id} not accepted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How a scripted challenger chooses its moves.
enum Pick {
    /// The first legal move.
    First,
    /// The server's computer at level 1: the engine crate's `Level::for_variant(1, ..)` (depth 1,
    /// up to 150 centi-men of noise), chosen with `choose_scored` as `Analysis.BestMove` at level 1
    /// does (a searcher with the default options, a seeded generator), in this process.
    Level1 {
        seed: u64,
        state: Option<Box<(draughts_ai::Searcher, draughts_ai::Rng)>>,
    },
}

impl Pick {
    fn level1(seed: u64) -> Pick {
        Pick::Level1 { seed, state: None }
    }

    fn choose(&mut self, pos: &Position) -> Option<draughts_engine::Move> {
        let moves = pos.legal_moves();
        match self {
            Pick::First => moves.first().cloned(),
            Pick::Level1 { seed, state } => {
                if moves.len() <= 1 {
                    return moves.first().cloned();
                }
                let (searcher, rng) = &mut **state.get_or_insert_with(|| {
                    Box::new((
                        draughts_ai::Searcher::new(pos.variant()),
                        draughts_ai::Rng::new(*seed),
                    ))
                });
                let level = draughts_ai::Level::for_variant(1, pos.variant()).unwrap();
                level.choose(searcher, &draughts_ai::RootState::new(*pos), rng)
            }
        }
    }
}

/// The scripted challenger's side of a game: on its turn, the first legal move; until the game ends.
/// `reconnect` gives a fresh channel after an error (a restarted server). Returns the final view.
async fn play_first_moves<F, Fut>(
    channel: Channel,
    token: &str,
    game_id: &str,
    reconnect: F,
    limit: Duration,
) -> pb::GameView
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Channel>,
{
    play_moves(channel, token, game_id, reconnect, limit, &mut Pick::First).await
}

/// The scripted challenger's side of a game, its moves chosen by `pick`; until the game ends.
async fn play_moves<F, Fut>(
    mut channel: Channel,
    token: &str,
    game_id: &str,
    reconnect: F,
    limit: Duration,
    pick: &mut Pick,
) -> pb::GameView
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Channel>,
{
    let deadline = Instant::now() + limit;
    let me = AuthClient::new(channel.clone())
        .who_am_i(authed(token, pb::WhoAmIRequest {}))
        .await
        .unwrap()
        .into_inner()
        .player
        .unwrap()
        .id;
    loop {
        assert!(
            Instant::now() < deadline,
            "game {game_id} not over after {limit:?}"
        );
        let Some(view) = get_game(&channel, game_id).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            channel = reconnect().await;
            continue;
        };
        if is_over(&view) {
            return view;
        }
        let rules = draughts_proto::convert::rule_set(view.rules.as_ref()).unwrap();
        let pos: Position =
            draughts_proto::convert::position(rules, &view.position.as_ref().unwrap().fen).unwrap();
        let white = view.white.as_ref().unwrap().id == me;
        let my_turn = (pos.side_to_move() == draughts_engine::Color::White) == white;
        if my_turn && let Some(mv) = pick.choose(&pos) {
            let wire = draughts_proto::convert::move_to_wire(&pos, &mv);
            let _ = GamesClient::new(channel.clone())
                .play_move(authed(
                    token,
                    pb::PlayMoveRequest {
                        game_id: game_id.into(),
                        r#move: Some(pb::MoveInput {
                            r#move: Some(pb::move_input::Move::Squares(pb::MoveSquares {
                                squares: wire.path,
                            })),
                        }),
                        expected_ply: Some(view.moves.len() as u32),
                    },
                ))
                .await;
            continue;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bot_rules() {
    let server = Server::start("memory://").await;
    let ch = server.channel().await;
    let bot = bot_key(&ch, "rulebot").await;
    // The mark: from the key.
    let me = AuthClient::new(ch.clone())
        .who_am_i(authed(&bot, pb::WhoAmIRequest {}))
        .await
        .unwrap()
        .into_inner();
    let player = me.player.unwrap();
    assert!(player.bot && player.id == "key:rulebot", "{player:?}");
    assert!(me.scopes.contains(&(pb::AuthScope::Bot as i32)));
    // A bot owner's keys stay bots; the mark goes with play only.
    let plain = api_key(&ch, "rulebot", &[pb::AuthScope::Play])
        .await
        .unwrap_err();
    assert_eq!(plain.code(), tonic::Code::FailedPrecondition, "{plain:?}");
    // ... and a person's keys stay people's: an owner with a key without the mark gets no bot key.
    api_key(&ch, "rulehuman", &[pb::AuthScope::Play])
        .await
        .unwrap();
    let turned = api_key(&ch, "rulehuman", &[pb::AuthScope::Play, pb::AuthScope::Bot])
        .await
        .unwrap_err();
    assert_eq!(turned.code(), tonic::Code::FailedPrecondition, "{turned:?}");
    assert!(turned.message().contains("as a person"), "{turned:?}");
    let admin_bot = api_key(
        &ch,
        "other",
        &[
            pb::AuthScope::Play,
            pb::AuthScope::Admin,
            pb::AuthScope::Bot,
        ],
    )
    .await
    .unwrap_err();
    assert_eq!(
        admin_bot.code(),
        tonic::Code::InvalidArgument,
        "{admin_bot:?}"
    );
    // Pools and lobby seeks refuse bots.
    let mut mm = MatchmakingClient::new(ch.clone());
    let pools = mm
        .list_pools(pb::ListPoolsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let pool_ids: Vec<String> = pools
        .pools
        .iter()
        .take(1)
        .map(|p| p.pool_id.clone())
        .collect();
    let seek = mm
        .seek(authed(
            &bot,
            pb::SeekRequest {
                pool_ids,
                rating_range: None,
            },
        ))
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(seek.code(), tonic::Code::FailedPrecondition, "{seek:?}");
    let lobby = mm
        .create_lobby_seek(authed(
            &bot,
            pb::CreateLobbySeekRequest {
                rules: english_rules(),
                time_control: fischer(60_000, 0),
                ..Default::default()
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(lobby.code(), tonic::Code::FailedPrecondition, "{lobby:?}");
    // A person's lobby seek: a bot may not accept it, a person may.
    let (ann, _) = guest(&ch, "Ann").await;
    let seek = mm
        .create_lobby_seek(authed(
            &ann,
            pb::CreateLobbySeekRequest {
                rules: english_rules(),
                time_control: fischer(60_000, 0),
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let refused = mm
        .accept(authed(
            &bot,
            pb::AcceptRequest {
                id: seek.seek_id.clone(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "{refused:?}"
    );
    // Challenges are allowed: a person invites the bot, which accepts. A request claiming the bot
    // mark for a person is ignored (CreateInvitation takes ids only).
    let (bob, bob_id) = guest(&ch, "Bob").await;
    let inv = invite(
        &ch,
        &bob,
        "key:rulebot",
        fischer(60_000, 0),
        pb::Color::White,
    )
    .await
    .unwrap();
    assert!(inv.invitee.as_ref().unwrap().bot, "{inv:?}");
    assert!(!inv.inviter.as_ref().unwrap().bot);
    let view = GamesClient::new(ch.clone())
        .accept_invitation(authed(
            &bot,
            pb::InvitationRequest {
                invitation_id: inv.invitation_id.clone(),
                accept_key: String::new(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let (white, black) = (view.white.clone().unwrap(), view.black.clone().unwrap());
    assert_eq!(white.id, bob_id);
    assert!(!white.bot && black.bot, "{view:?}");
    let read = get_game(&ch, &view.game_id).await.unwrap();
    assert!(read.black.unwrap().bot);
    let pdn = GamesClient::new(ch.clone())
        .export_pdn(pb::GetGameRequest {
            game_id: view.game_id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .pdn;
    assert!(pdn.contains("[BlackType \"program\"]"), "{pdn}");
    assert!(!pdn.contains("WhiteType"), "{pdn}");
    // Profiles mark bots.
    let profile = pb::ratings_client::RatingsClient::new(ch.clone())
        .get_profile(pb::GetProfileRequest {
            player_id: "key:rulebot".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(profile.player.unwrap().bot);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_has_at_most_its_open_games() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server =
        Server::start_with(listener, "memory://", &["--max-open-games-per-bot", "1"]).await;
    let ch = server.channel().await;
    let bot = bot_key(&ch, "busybot").await;
    let mut games = GamesClient::new(ch.clone());
    let mut answers = Vec::new();
    for name in ["Ann", "Bob"] {
        let (person, _) = guest(&ch, name).await;
        let inv = invite(
            &ch,
            &person,
            "key:busybot",
            fischer(60_000, 0),
            pb::Color::White,
        )
        .await
        .unwrap();
        answers.push(
            games
                .accept_invitation(authed(
                    &bot,
                    pb::InvitationRequest {
                        invitation_id: inv.invitation_id,
                        accept_key: String::new(),
                    },
                ))
                .await,
        );
    }
    assert!(answers[0].is_ok(), "{:?}", answers[0]);
    let refused = answers[1].as_ref().unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    // People keep the per-player bound (50 by default): a person may have two games.
    let (carl, carl_id) = guest(&ch, "Carl").await;
    for name in ["Dora", "Emil"] {
        let (person, _) = guest(&ch, name).await;
        let inv = invite(&ch, &person, &carl_id, fischer(60_000, 0), pb::Color::White)
            .await
            .unwrap();
        games
            .accept_invitation(authed(
                &carl,
                pb::InvitationRequest {
                    invitation_id: inv.invitation_id,
                    accept_key: String::new(),
                },
            ))
            .await
            .unwrap();
    }
    server.stop().await;
}

/// The bot's invitation from a new guest, accepted by `bot_token`.
async fn accept_from_guest(
    channel: &Channel,
    bot_token: &str,
    bot_id: &str,
    name: &str,
) -> Result<tonic::Response<pb::GameView>, tonic::Status> {
    let (person, _) = guest(channel, name).await;
    let inv = invite(
        channel,
        &person,
        bot_id,
        fischer(60_000, 0),
        pb::Color::White,
    )
    .await
    .unwrap();
    GamesClient::new(channel.clone())
        .accept_invitation(authed(
            bot_token,
            pb::InvitationRequest {
                invitation_id: inv.invitation_id,
                accept_key: String::new(),
            },
        ))
        .await
}

fn set_limits(player_id: &str, max_games: u32, calls_per_minute: u32) -> pb::SetBotLimitsRequest {
    pb::SetBotLimitsRequest {
        player_id: player_id.into(),
        max_games,
        calls_per_minute,
    }
}

fn header(metadata: &tonic::metadata::MetadataMap, name: &str) -> u64 {
    metadata
        .get(name)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {metadata:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_sets_one_bot_s_limits() {
    let server = Server::start("memory://").await;
    let ch = server.channel().await;
    let mut auth = AuthClient::new(ch.clone());
    let limited = bot_key(&ch, "limitbot").await;
    let limited_too = bot_key(&ch, "limitbot").await;
    let free = bot_key(&ch, "freebot").await;
    let (person, person_id) = guest(&ch, "Ann").await;

    // Who may set them, for whom, and how much.
    for (token, req, code) in [
        (
            limited.as_str(),
            set_limits("key:limitbot", 1, 0),
            tonic::Code::PermissionDenied,
        ),
        (
            person.as_str(),
            set_limits("key:limitbot", 1, 0),
            tonic::Code::PermissionDenied,
        ),
        (
            ADMIN_KEY,
            set_limits(&person_id, 1, 0),
            tonic::Code::FailedPrecondition,
        ),
        (
            ADMIN_KEY,
            set_limits("key:nobody", 1, 0),
            tonic::Code::FailedPrecondition,
        ),
        (
            ADMIN_KEY,
            set_limits("", 1, 0),
            tonic::Code::InvalidArgument,
        ),
        (
            ADMIN_KEY,
            set_limits("key:limitbot", 1_001, 0),
            tonic::Code::InvalidArgument,
        ),
        (
            ADMIN_KEY,
            set_limits("key:limitbot", 1, 100_001),
            tonic::Code::InvalidArgument,
        ),
    ] {
        let status = auth
            .set_bot_limits(authed(token, req.clone()))
            .await
            .unwrap_err();
        assert_eq!(status.code(), code, "{req:?}: {status:?}");
    }
    let unset = auth
        .get_bot_limits(authed(
            ADMIN_KEY,
            pb::GetBotLimitsRequest {
                player_id: "key:limitbot".into(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (unset.max_games, unset.calls_per_minute, unset.updated_at_ms),
        (0, 0, 0)
    );

    // Games at once: one for limitbot; freebot keeps the server's bound for bots (8).
    let set = auth
        .set_bot_limits(authed(ADMIN_KEY, set_limits("key:limitbot", 1, 0)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((set.max_games, set.calls_per_minute), (1, 0));
    assert!(set.updated_at_ms > 0);
    accept_from_guest(&ch, &limited, "key:limitbot", "Bob")
        .await
        .unwrap();
    let refused = accept_from_guest(&ch, &limited, "key:limitbot", "Carl")
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(
        refused.message().contains("this bot's own bound"),
        "{refused:?}"
    );
    for name in ["Dora", "Emil"] {
        accept_from_guest(&ch, &free, "key:freebot", name)
            .await
            .unwrap();
    }

    // Calls a minute: 5 for limitbot, both its keys together (set with the CLI, which keeps the
    // games bound); freebot keeps its key's limit.
    let admin = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_draughts"))
            .args([
                "client",
                "--server",
                &server.addr.to_string(),
                "admin",
                "bot-limits",
            ])
            .args(args)
            .env("DRAUGHTS_TOKEN", ADMIN_KEY)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let printed = admin(&["key:limitbot", "--rate", "5/min"]);
    assert!(
        printed.contains("games at once 1, calls a minute 5"),
        "{printed}"
    );
    assert_eq!(admin(&["key:limitbot"]), printed);
    let who = |token: &str| authed(token, pb::WhoAmIRequest {});
    // Start in a fresh window, so that the count below is one window's.
    let first = auth.who_am_i(who(&limited)).await.unwrap();
    assert_eq!(header(first.metadata(), "x-ratelimit-limit"), 5);
    let reset = header(first.metadata(), "x-ratelimit-reset");
    if reset < 10 {
        tokio::time::sleep(Duration::from_secs(reset + 1)).await;
    }
    let mut passed = 0;
    let refusal = loop {
        let token = if passed % 2 == 0 {
            &limited
        } else {
            &limited_too
        };
        match auth.who_am_i(who(token)).await {
            Ok(_) => passed += 1,
            Err(status) => break status,
        }
        assert!(passed <= 5, "more than 5 calls passed in one minute");
    };
    assert_eq!(
        refusal.code(),
        tonic::Code::ResourceExhausted,
        "{refusal:?}"
    );
    assert!((4..=5).contains(&passed), "{passed} calls passed");
    assert!(refusal.metadata().get("retry-after").is_some());
    let status = auth.who_am_i(who(&limited_too)).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    let other = auth.who_am_i(who(&free)).await.unwrap();
    assert_eq!(header(other.metadata(), "x-ratelimit-limit"), 100_000);
    server.stop().await;
}

async fn sign_up(channel: &Channel, username: &str) -> String {
    AuthClient::new(channel.clone())
        .sign_up(pb::SignUpRequest {
            username: username.into(),
            password: "correct horse battery".into(),
            display_name: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .access_token
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_becomes_a_bot_for_good_unless_it_has_played() {
    let server = Server::start("memory://").await;
    let ch = server.channel().await;
    let mut auth = AuthClient::new(ch.clone());
    let token = sign_up(&ch, "robota").await;
    let account = auth
        .become_bot(authed(&token, pb::BecomeBotRequest {}))
        .await
        .unwrap()
        .into_inner();
    let player = account.player.unwrap();
    assert!(player.bot, "{player:?}");
    // The same session is a bot's from now on; asking again is harmless.
    let me = auth
        .who_am_i(authed(&token, pb::WhoAmIRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert!(me.player.unwrap().bot);
    auth.become_bot(authed(&token, pb::BecomeBotRequest {}))
        .await
        .unwrap();
    let seek = MatchmakingClient::new(ch.clone())
        .seek(authed(&token, pb::SeekRequest::default()))
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(seek.code(), tonic::Code::FailedPrecondition, "{seek:?}");
    // Others see it as a bot: a person's invitation names it so.
    let (person, _) = guest(&ch, "Person").await;
    let inv = invite(
        &ch,
        &person,
        &player.id,
        fischer(60_000, 0),
        pb::Color::White,
    )
    .await
    .unwrap();
    assert!(inv.invitee.unwrap().bot);
    // Not for an API key; not for an account that has played.
    let key = api_key(&ch, "plainkey", &[pb::AuthScope::Play])
        .await
        .unwrap();
    let refused = auth
        .become_bot(authed(&key, pb::BecomeBotRequest {}))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    let player_token = sign_up(&ch, "playeda").await;
    let mut games = GamesClient::new(ch.clone());
    let game = games
        .create_game(authed(
            &player_token,
            pb::CreateGameRequest {
                rules: english_rules(),
                time_control: fischer(60_000, 0),
                white: Some(pb::Player::default()),
                black: Some(pb::Player {
                    id: "ai:1".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner();
    games
        .resign(authed(
            &player_token,
            pb::GameActionRequest {
                game_id: game.game_id.clone(),
            },
        ))
        .await
        .unwrap();
    let me = auth
        .who_am_i(authed(&player_token, pb::WhoAmIRequest {}))
        .await
        .unwrap()
        .into_inner()
        .player
        .unwrap();
    // Once the game is archived among its finished games, the account can no longer become a bot.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed = games
            .list_games(pb::ListGamesRequest {
                player_id: me.id.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        if listed.recent.iter().any(|g| g.game_id == game.game_id) {
            break;
        }
        assert!(Instant::now() < deadline, "the game was not archived");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let refused = auth
        .become_bot(authed(&player_token, pb::BecomeBotRequest {}))
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "{refused:?}"
    );
    assert!(
        !auth
            .who_am_i(authed(&player_token, pb::WhoAmIRequest {}))
            .await
            .unwrap()
            .into_inner()
            .player
            .unwrap()
            .bot
    );
    server.stop().await;
}

/// A fake Hub engine: the handshake, then `on_go` (shell) when asked to think.
fn fake_engine(dir: &std::path::Path, name: &str, on_go: &str) -> String {
    let script = format!(
        "while read -r line; do\n  case \"$line\" in\n    hub) echo 'id name={name}'; echo wait;;\n    init) echo ready;;\n    go*) {on_go};;\n    quit) exit 0;;\n  esac\ndone\n"
    );
    let path = dir.join(format!("{name}.sh"));
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(&path, script).unwrap();
    format!("sh {}", path.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_engines_are_resigned_never_waited_on() {
    let server = Server::start("memory://").await;
    let ch = server.channel().await;
    let tmp = tempfile::Builder::new()
        .prefix("draughts-bot-fakes-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let cases = [
        ("illegal", "echo 'done move=11-99'", "illegal move"),
        ("silent", "sleep 30", "said nothing"),
        ("crash", "exit 3", "exited"),
        // A line without end: read up to a bound, then the engine counts as gone.
        ("flood", "head -c 200000 /dev/zero | tr '\\0' x", "exited"),
    ];
    for (name, on_go, expected) in cases {
        let key = bot_key(&ch, &format!("fake-{name}")).await;
        let engine = fake_engine(dir, name, on_go);
        let mut bridge = Bridge::start(
            server.addr,
            &key,
            &engine,
            name,
            &["--variants", "international", "--engine-grace-ms", "300"],
        );
        let (person, _) = guest(&ch, "Person").await;
        let started = Instant::now();
        // The person takes Black: the bot moves first.
        let rules =
            draughts_proto::convert::rules_to_wire(draughts_engine::Variant::International.into());
        let inv = GamesClient::new(ch.clone())
            .create_invitation(authed(
                &person,
                pb::CreateInvitationRequest {
                    rules: Some(rules),
                    time_control: fischer(10_000, 0),
                    invitee_id: format!("key:fake-{name}"),
                    color: pb::Color::Black as i32,
                    ..Default::default()
                },
            ))
            .await
            .unwrap()
            .into_inner();
        let game_id = accepted(&ch, &person, &inv.invitation_id, Duration::from_secs(20)).await;
        let view = wait_over(&ch, &game_id, Duration::from_secs(20)).await;
        let status = view.status.unwrap();
        // Resigned before two moves: the game is aborted, never a loss on time.
        assert_eq!(
            status.outcome,
            pb::Outcome::Aborted as i32,
            "{name}: {status:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{name}: {:?}",
            started.elapsed()
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while !bridge.stderr().contains("engine failure") && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let err = bridge.stderr();
        assert!(
            err.contains("engine failure") && err.contains(expected),
            "{name}: {err}"
        );
        assert!(
            bridge.running(),
            "{name}: the bridge goes on after a failed engine"
        );
    }
    server.stop().await;
}

/// `token` invites `invitee` to a casual or rated game in `variant` (Fischer `base_ms` + 0), the
/// inviter taking `color`.
async fn invite_in(
    channel: &Channel,
    token: &str,
    invitee: &str,
    variant: draughts_engine::Variant,
    rated: bool,
    base_ms: u64,
    color: pb::Color,
) -> pb::Invitation {
    GamesClient::new(channel.clone())
        .create_invitation(authed(
            token,
            pb::CreateInvitationRequest {
                rules: Some(draughts_proto::convert::rules_to_wire(variant.into())),
                time_control: fischer(base_ms, 0),
                invitee_id: invitee.into(),
                color: color as i32,
                rated,
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner()
}

async fn invitation(channel: &Channel, token: &str, invitation_id: &str) -> pb::Invitation {
    GamesClient::new(channel.clone())
        .get_invitation(authed(
            token,
            pb::InvitationRequest {
                invitation_id: invitation_id.into(),
                accept_key: String::new(),
            },
        ))
        .await
        .unwrap()
        .into_inner()
}

/// Waits until the invitation is declined; its reason.
async fn declined(channel: &Channel, token: &str, invitation_id: &str) -> pb::DeclineReason {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let inv = invitation(channel, token, invitation_id).await;
        if inv.state == pb::InvitationState::Declined as i32 {
            return pb::DeclineReason::try_from(inv.decline_reason).unwrap();
        }
        assert_eq!(inv.state, pb::InvitationState::Pending as i32, "{inv:?}");
        assert!(
            Instant::now() < deadline,
            "invitation {invitation_id} not declined"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the bridge's stderr holds `needle`; panics with it after `limit`.
async fn stderr_says(bridge: &Bridge, needle: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !bridge.stderr().contains(needle) {
        assert!(
            Instant::now() < deadline,
            "the bridge did not say {needle:?}: {}",
            bridge.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A challenger's moves in one game: `opening` (Hub notation) as its first move if given, then the
/// first legal move, until the game has `plies` plies or is over. The game's view then.
async fn play_until(
    channel: &Channel,
    token: &str,
    game_id: &str,
    opening: Option<&str>,
    plies: usize,
    limit: Duration,
) -> pb::GameView {
    let deadline = Instant::now() + limit;
    let me = AuthClient::new(channel.clone())
        .who_am_i(authed(token, pb::WhoAmIRequest {}))
        .await
        .unwrap()
        .into_inner()
        .player
        .unwrap()
        .id;
    loop {
        let view = get_game(channel, game_id).await.unwrap();
        if is_over(&view) || view.moves.len() >= plies {
            return view;
        }
        assert!(
            Instant::now() < deadline,
            "game {game_id}: {} plies after {limit:?}",
            view.moves.len()
        );
        let rules = draughts_proto::convert::rule_set(view.rules.as_ref()).unwrap();
        let pos: Position =
            draughts_proto::convert::position(rules, &view.position.as_ref().unwrap().fen).unwrap();
        let white = view.white.as_ref().unwrap().id == me;
        if (pos.side_to_move() == draughts_engine::Color::White) != white {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let moves = pos.legal_moves();
        let chosen = match opening.filter(|_| view.moves.is_empty()) {
            Some(text) => moves
                .iter()
                .find(|m| draughts_ai::hub::write_move(&pos, m) == text)
                .unwrap_or_else(|| panic!("{text} is not a legal first move")),
            None => &moves[0],
        };
        let wire = draughts_proto::convert::move_to_wire(&pos, chosen);
        GamesClient::new(channel.clone())
            .play_move(authed(
                token,
                pb::PlayMoveRequest {
                    game_id: game_id.into(),
                    r#move: Some(pb::MoveInput {
                        r#move: Some(pb::move_input::Move::Squares(pb::MoveSquares {
                            squares: wire.path,
                        })),
                    }),
                    expected_ply: Some(view.moves.len() as u32),
                },
            ))
            .await
            .unwrap();
    }
}

async fn resign_game(channel: &Channel, token: &str, game_id: &str) {
    GamesClient::new(channel.clone())
        .resign(authed(
            token,
            pb::GameActionRequest {
                game_id: game_id.into(),
            },
        ))
        .await
        .unwrap();
}

/// `--max-games 2`, three challenges at once: two are accepted and played at the same time, the third
/// waits in the bridge's queue (policy: at most `--max-games` wait) and is accepted when a game ends;
/// with the queue full, the next is declined LATER. A challenge in another variant is declined
/// VARIANT, a rated one to a casual-only bot CASUAL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_bridge_queues_then_declines_and_filters_challenges() {
    use draughts_engine::Variant;
    let server = Server::start("memory://").await;
    let ch = server.channel().await;
    let key = bot_key(&ch, "pair").await;
    let bridge = Bridge::start(
        server.addr,
        &key,
        &hub_engine(),
        "pair",
        &[
            "--variants",
            "english",
            "--mode",
            "casual",
            "--max-games",
            "2",
        ],
    );
    let bot = "key:pair";
    let limit = Duration::from_secs(20);
    let mut people = Vec::new();
    for name in ["Ann", "Bob", "Carl", "Dora", "Emil", "Fay", "Gus"] {
        people.push(guest(&ch, name).await.0);
    }
    let casual = |i: usize| {
        let (ch, token) = (ch.clone(), people[i].clone());
        async move {
            invite_in(
                &ch,
                &token,
                bot,
                Variant::English,
                false,
                20_000,
                pb::Color::White,
            )
            .await
        }
    };
    // Three at once.
    let (a, b, c) = tokio::join!(casual(0), casual(1), casual(2));
    let three = [&a, &b, &c];
    // Two accepted, the third queued ("every slot is taken") and still pending.
    let deadline = Instant::now() + limit;
    let (playing, queued) = loop {
        let mut playing = Vec::new();
        let mut pending = Vec::new();
        for (i, inv) in three.iter().enumerate() {
            let now = invitation(&ch, &people[i], &inv.invitation_id).await;
            if now.state == pb::InvitationState::Accepted as i32 {
                playing.push((i, now.game_id));
            } else {
                assert_eq!(now.state, pb::InvitationState::Pending as i32, "{now:?}");
                pending.push(i);
            }
        }
        assert!(playing.len() <= 2, "more than --max-games accepted");
        if playing.len() == 2 {
            break (playing, pending[0]);
        }
        assert!(Instant::now() < deadline, "{} accepted", playing.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let queued_id = &three[queued].invitation_id;
    stderr_says(&bridge, &format!("queued {queued_id}"), limit).await;
    // Both games are played at the same time: each reaches 6 plies (3 moves of the bot's) while the
    // other is still going on.
    let (g0, g1) = tokio::join!(
        play_until(&ch, &people[playing[0].0], &playing[0].1, None, 6, limit),
        play_until(&ch, &people[playing[1].0], &playing[1].1, None, 6, limit)
    );
    for view in [&g0, &g1] {
        assert!(!is_over(view), "{view:?}");
        assert!(view.moves.len() >= 6, "{view:?}");
    }
    assert_eq!(
        invitation(&ch, &people[queued], queued_id).await.state,
        pb::InvitationState::Pending as i32
    );
    // One more waits (the queue holds --max-games); the one after is declined LATER.
    let d = casual(3).await;
    stderr_says(&bridge, &format!("queued {}", d.invitation_id), limit).await;
    let e = casual(4).await;
    assert_eq!(
        declined(&ch, &people[4], &e.invitation_id).await,
        pb::DeclineReason::Later
    );
    // Outside the filters, whatever the slots: another variant, a rated game.
    let international = invite_in(
        &ch,
        &people[5],
        bot,
        Variant::International,
        false,
        20_000,
        pb::Color::White,
    )
    .await;
    assert_eq!(
        declined(&ch, &people[5], &international.invitation_id).await,
        pb::DeclineReason::Variant
    );
    let rated = invite_in(
        &ch,
        &people[6],
        bot,
        Variant::English,
        true,
        20_000,
        pb::Color::White,
    )
    .await;
    assert_eq!(
        declined(&ch, &people[6], &rated.invitation_id).await,
        pb::DeclineReason::Casual
    );
    // A game ends: the oldest queued invitation is accepted; the next one when another ends.
    resign_game(&ch, &people[playing[0].0], &playing[0].1).await;
    let third = accepted(&ch, &people[queued], queued_id, limit).await;
    assert_eq!(
        invitation(&ch, &people[3], &d.invitation_id).await.state,
        pb::InvitationState::Pending as i32,
        "one slot freed, one invitation accepted"
    );
    resign_game(&ch, &people[playing[1].0], &playing[1].1).await;
    let fourth = accepted(&ch, &people[3], &d.invitation_id, limit).await;
    for (token, game) in [(&people[queued], &third), (&people[3], &fourth)] {
        resign_game(&ch, token, game).await;
    }
    let err = bridge.stderr();
    assert!(!err.contains("engine failure"), "{err}");
    drop(bridge);
    server.stop().await;
}

/// `draughts hub` behind a filter that breaks it in the games opened with a given move (the challenger,
/// White, chooses it): after 31-26 the engine exits when asked for its 4th move (a crash), after 35-30
/// it answers its 4th with an illegal move; after any other opening it plays on.
fn failing_engine(dir: &std::path::Path) -> String {
    let script = format!(
        r#"exec 3>&1
awk -v out=/dev/fd/3 '
/^pos / {{
  m = ""
  if (match($0, /moves="[^"]*"/)) m = substr($0, RSTART + 7, RLENGTH - 8)
  k = split(m, a, " ")
  how = "good"
  if (k > 0 && a[1] == "31-26") how = "crash"
  if (k > 0 && a[1] == "35-30") how = "illegal"
  late = k >= 7
}}
/^go/ && late && how == "crash" {{ exit 3 }}
/^go/ && late && how == "illegal" {{ print "done move=11-99" > out; close(out); next }}
{{ print; fflush() }}
' | {} hub
"#,
        env!("CARGO_BIN_EXE_draughts")
    );
    let path = dir.join("failing.sh");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(&path, script).unwrap();
    format!("sh {}", path.display())
}

/// An engine that fails after three good moves (it crashes in one game, plays an illegal move in
/// another): the bridge resigns each of those games at once (a loss by resignation, not an abort),
/// and plays on in its third game, whose engine is sound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_failing_mid_game_loses_that_game_only() {
    let server = Server::start("memory://").await;
    let ch = server.channel().await;
    let tmp = tempfile::Builder::new()
        .prefix("draughts-bot-failing-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let key = bot_key(&ch, "flaky").await;
    let bridge = Bridge::start(
        server.addr,
        &key,
        &failing_engine(dir),
        "flaky",
        &[
            "--variants",
            "international",
            "--max-games",
            "3",
            "--engine-grace-ms",
            "300",
        ],
    );
    let limit = Duration::from_secs(30);
    let mut games = Vec::new();
    for (name, opening) in [("Crash", "31-26"), ("Illegal", "35-30"), ("Sound", "33-28")] {
        let (token, _) = guest(&ch, name).await;
        // The challenger takes White, so its first move chooses the engine's behaviour.
        let inv = invite_in(
            &ch,
            &token,
            "key:flaky",
            draughts_engine::Variant::International,
            false,
            15_000,
            pb::Color::White,
        )
        .await;
        let game_id = accepted(&ch, &token, &inv.invitation_id, limit).await;
        games.push((token, game_id, opening));
    }
    let started = Instant::now();
    let play = |i: usize, plies: usize| {
        let (token, game_id, opening) = games[i].clone();
        let ch = ch.clone();
        async move { play_until(&ch, &token, &game_id, Some(opening), plies, limit).await }
    };
    // The two failing games are played to their end, the sound one meanwhile to 8 plies.
    let (crashed, illegal, sound) =
        tokio::join!(play(0, usize::MAX), play(1, usize::MAX), play(2, 8));
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "{:?}",
        started.elapsed()
    );
    for (view, why) in [(&crashed, "exited"), (&illegal, "illegal move")] {
        let status = view.status.clone().unwrap();
        // Three good moves of the bot's (plies 2, 4, 6), the challenger's 7th, then the resignation.
        assert_eq!(view.moves.len(), 7, "{why}: {view:?}");
        assert_eq!(
            (status.outcome, status.reason),
            (
                pb::Outcome::WhiteWins as i32,
                pb::EndReason::Resignation as i32
            ),
            "{why}: {status:?}"
        );
        stderr_says(
            &bridge,
            &format!("game {}: engine failure, resigning", view.game_id),
            Duration::from_secs(5),
        )
        .await;
        let line = bridge
            .stderr()
            .lines()
            .find(|l| l.starts_with(&format!("game {}: engine failure", view.game_id)))
            .unwrap()
            .to_owned();
        assert!(line.contains(why), "{line}");
    }
    // The sound game goes on: the bot makes two more moves after the others ended.
    assert!(!is_over(&sound), "{sound:?}");
    let on = play(2, sound.moves.len() + 4).await;
    assert!(!is_over(&on), "{on:?}");
    assert!(on.moves.len() >= sound.moves.len() + 4, "{on:?}");
    let (token, game_id, _) = &games[2];
    resign_game(&ch, token, game_id).await;
    let over = wait_over(&ch, game_id, Duration::from_secs(5)).await;
    assert_eq!(
        over.status.unwrap().outcome,
        pb::Outcome::BlackWins as i32,
        "the bot won its sound game"
    );
    let mut bridge = bridge;
    assert!(bridge.running(), "the bridge goes on");
    let err = bridge.stderr();
    assert_eq!(err.matches("engine failure").count(), 2, "{err}");
    drop(bridge);
    server.stop().await;
}

/// `draughts hub` with every `info` score rewritten to `score` (men): a fake engine that plays legal
/// moves and reports the score a test needs.
fn scored_engine(score: &str) -> String {
    format!(
        "{} hub | sed -u 's/score=[^ ]*/score={score}/'",
        env!("CARGO_BIN_EXE_draughts")
    )
}

async fn draw_action(channel: &Channel, token: &str, game_id: &str, action: &str) {
    let mut games = GamesClient::new(channel.clone());
    let req = authed(
        token,
        pb::GameActionRequest {
            game_id: game_id.into(),
        },
    );
    let answer = match action {
        "offer" => games.offer_draw(req).await,
        "accept" => games.accept_draw(req).await,
        _ => games.resign(req).await,
    };
    answer.unwrap_or_else(|e| panic!("{action}: {e:?}"));
}

/// A person (White) against a bridged bot: offers a draw at `offer_at_ply` (waits for the bot's
/// answer: the offer gone), accepts the bot's own offer if `accept` (else notes it), plays the first
/// legal move otherwise, and resigns at `resign_at_ply`. The final view and whether the bot offered.
async fn person_against(
    channel: &Channel,
    token: &str,
    game_id: &str,
    offer_at_ply: usize,
    resign_at_ply: usize,
) -> (pb::GameView, bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut offered = false;
    let mut bot_offered = false;
    loop {
        assert!(Instant::now() < deadline, "game {game_id} not over");
        let view = get_game(channel, game_id).await.unwrap();
        if is_over(&view) {
            return (view, bot_offered);
        }
        if view.draw_offer == pb::Color::Black as i32 {
            bot_offered = true;
            draw_action(channel, token, game_id, "accept").await;
            continue;
        }
        let rules = draughts_proto::convert::rule_set(view.rules.as_ref()).unwrap();
        let pos: Position =
            draughts_proto::convert::position(rules, &view.position.as_ref().unwrap().fen).unwrap();
        let plies = view.moves.len();
        if pos.side_to_move() != draughts_engine::Color::White {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        if plies >= resign_at_ply {
            draw_action(channel, token, game_id, "resign").await;
            continue;
        }
        if plies >= offer_at_ply && !offered {
            offered = true;
            draw_action(channel, token, game_id, "offer").await;
            // The bot answers (declines: the offer is gone, the game goes on; accepts: it is over).
            let answer_by = Instant::now() + Duration::from_secs(10);
            loop {
                let view = get_game(channel, game_id).await.unwrap();
                if is_over(&view) || view.draw_offer != pb::Color::White as i32 {
                    break;
                }
                assert!(
                    Instant::now() < answer_by,
                    "the bot never answered the offer"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            continue;
        }
        let mv = pos.legal_moves()[0];
        let wire = draughts_proto::convert::move_to_wire(&pos, &mv);
        let _ = GamesClient::new(channel.clone())
            .play_move(authed(
                token,
                pb::PlayMoveRequest {
                    game_id: game_id.into(),
                    r#move: Some(pb::MoveInput {
                        r#move: Some(pb::move_input::Move::Squares(pb::MoveSquares {
                            squares: wire.path,
                        })),
                    }),
                    expected_ply: Some(plies as u32),
                },
            ))
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_answers_and_offers_draws_by_the_engine_s_score() {
    let server = Server::start("memory://").await;
    let ch = server.channel().await;
    let level_key = bot_key(&ch, "levelbot").await;
    let ahead_key = bot_key(&ch, "aheadbot").await;
    let args = [
        "--variants",
        "english",
        "--move-overhead-ms",
        "100",
        "--draws",
        "engine",
        "--draw-margin",
        "0.2",
        "--draw-min-ply",
        "6",
    ];
    let level = Bridge::start(
        server.addr,
        &level_key,
        &scored_engine("0.05"),
        "levelbot",
        &args,
    );
    let ahead = Bridge::start(
        server.addr,
        &ahead_key,
        &scored_engine("3.00"),
        "aheadbot",
        &args,
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut games = Vec::new();
    for bot in ["key:levelbot", "key:aheadbot"] {
        let (person, _) = guest(&ch, "Ann").await;
        let inv = invite(&ch, &person, bot, fischer(20_000, 100), pb::Color::White)
            .await
            .unwrap();
        let game_id = accepted(&ch, &person, &inv.invitation_id, Duration::from_secs(30)).await;
        games.push((person, game_id));
    }
    // English: Black (the bot) moves first, so the person plays the odd plies. The level bot: an
    // offer at ply 1 is too early (declined); past ply 6 it offers itself, and the person accepts.
    // The bot 3 men up declines an offer at ply 9 and never offers; the person resigns at ply 15.
    let (level_game, ahead_game) = tokio::join!(
        person_against(&ch, &games[0].0, &games[0].1, 0, usize::MAX),
        person_against(&ch, &games[1].0, &games[1].1, 8, 14),
    );
    let (view, bot_offered) = level_game;
    let status = view.status.unwrap();
    assert!(bot_offered, "{}", level.game_logs());
    assert_eq!(status.outcome, pb::Outcome::Draw as i32, "{status:?}");
    assert_eq!(status.reason, pb::EndReason::Agreement as i32, "{status:?}");
    assert!(view.moves.len() >= 6, "{} plies", view.moves.len());
    let (view, bot_offered) = ahead_game;
    let status = view.status.unwrap();
    assert!(!bot_offered, "{}", ahead.game_logs());
    assert_eq!(status.outcome, pb::Outcome::BlackWins as i32, "{status:?}");
    assert_eq!(
        status.reason,
        pb::EndReason::Resignation as i32,
        "{status:?}"
    );
    let logs = level.game_logs();
    assert!(logs.contains("draw offer declined ply=1 "), "{logs}");
    assert!(logs.contains("draw offered ply="), "{logs}");
    let logs = ahead.game_logs();
    assert!(logs.contains("draw offer declined ply=9 "), "{logs}");
    assert!(!logs.contains("draw offered"), "{logs}");
    server.stop().await;
}

/// Opt-in: `DRAUGHTS_SCAN_DIR` names a folder holding a built Scan 2.0 (`scan`, `scan.ini`, `data/`;
/// built outside the repository, see docs/bots.md). Scan plays international through the bridge
/// against a bridged `draughts hub`, both as bots, to the end of one game.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_plays_through_the_bridge() {
    let Ok(dir) = std::env::var("DRAUGHTS_SCAN_DIR") else {
        eprintln!("skipped: set DRAUGHTS_SCAN_DIR to a folder with a built Scan 2.0");
        return;
    };
    let server = Server::start("memory://").await;
    let ch = server.channel().await;
    let scan_key = bot_key(&ch, "scan").await;
    let hub_key = bot_key(&ch, "ourhub").await;
    let args = ["--variants", "international", "--move-overhead-ms", "100"];
    let scan_engine = format!("cd '{dir}' && ./scan hub");
    let scan = Bridge::start(server.addr, &scan_key, &scan_engine, "scan", &args);
    let ours = Bridge::start(server.addr, &hub_key, &hub_engine(), "ourhub", &args);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let inv = GamesClient::new(ch.clone())
        .create_invitation(authed(
            &hub_key,
            pb::CreateInvitationRequest {
                rules: Some(draughts_proto::convert::rules_to_wire(
                    draughts_engine::Variant::International.into(),
                )),
                time_control: fischer(20_000, 200),
                invitee_id: "key:scan".into(),
                color: pb::Color::Black as i32,
                rated: false,
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let game_id = accepted(&ch, &hub_key, &inv.invitation_id, Duration::from_secs(30)).await;
    let view = wait_over(&ch, &game_id, Duration::from_secs(300)).await;
    let status = view.status.clone().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !scan.game_logs().contains("end ") && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let logs = scan.game_logs();
    eprintln!(
        "Scan 2.0 (White) against draughts hub: {} ({}) after {} plies\n{logs}",
        status.result,
        status.description,
        view.moves.len()
    );
    assert_ne!(
        status.outcome,
        pb::Outcome::Aborted as i32,
        "{status:?}\n{logs}\n{}",
        scan.stderr()
    );
    assert!(!logs.contains("engine failure"), "{logs}");
    assert!(logs.contains("engine_ms="), "{logs}");
    drop(ours);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_bridged_bots_play_each_other_to_the_end() {
    let server = Server::start("memory://").await;
    let ch = server.channel().await;
    let alpha = bot_key(&ch, "alpha").await;
    let beta = bot_key(&ch, "beta").await;
    let args = ["--variants", "english", "--move-overhead-ms", "100"];
    let a = Bridge::start(server.addr, &alpha, &hub_engine(), "alpha", &args);
    let b = Bridge::start(server.addr, &beta, &hub_engine(), "beta", &args);
    // Bots challenge each other: alpha invites beta (whose bridge accepts); both bridges play.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let inv = invite(
        &ch,
        &alpha,
        "key:beta",
        fischer(3_000, 200),
        pb::Color::White,
    )
    .await
    .unwrap();
    let game_id = accepted(&ch, &alpha, &inv.invitation_id, Duration::from_secs(30)).await;
    let view = wait_over(&ch, &game_id, Duration::from_secs(240)).await;
    let status = view.status.clone().unwrap();
    assert_ne!(
        status.outcome,
        pb::Outcome::Aborted as i32,
        "{status:?}\n{}\n{}",
        a.stderr(),
        b.stderr()
    );
    assert_ne!(
        status.reason,
        pb::EndReason::Time as i32,
        "lost on time: {status:?}\n{}",
        a.game_logs()
    );
    assert!(view.moves.len() >= 10, "{} plies", view.moves.len());
    assert!(view.white.unwrap().bot && view.black.unwrap().bot);
    // Both logged it: their moves with timings, the end and the PDN.
    let deadline = Instant::now() + Duration::from_secs(10);
    while ![&a, &b].iter().all(|x| x.game_logs().contains("end over")) && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for bridge in [&a, &b] {
        let logs = bridge.game_logs();
        assert!(
            logs.contains("overhead_us=") && logs.contains("end over"),
            "{logs}"
        );
        assert!(
            bridge
                .dir
                .path()
                .join("games")
                .join(format!("{game_id}.pdn"))
                .exists()
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_resumes_its_game_across_a_server_restart_on_redis() {
    let redis = draughts_testkit::RedisServer::start().expect("redis-server");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = Server::start_on(listener, &redis.url()).await;
    let ch = server.channel().await;
    let key = bot_key(&ch, "phoenix").await;
    let mut bridge = Bridge::start(
        addr,
        &key,
        &hub_engine(),
        "restart",
        &["--variants", "english"],
    );
    let (person, _) = guest(&ch, "Person").await;
    let inv = invite(
        &ch,
        &person,
        "key:phoenix",
        fischer(20_000, 200),
        pb::Color::Black,
    )
    .await
    .unwrap();
    let game_id = accepted(&ch, &person, &inv.invitation_id, Duration::from_secs(30)).await;
    // A few moves each, then the server goes away and comes back on the same port and Redis.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let view = get_game(&ch, &game_id).await.unwrap();
        if view.moves.len() >= 6 {
            break;
        }
        assert!(Instant::now() < deadline, "no progress before the restart");
        let pos = draughts_proto::convert::position(
            draughts_proto::convert::rule_set(view.rules.as_ref()).unwrap(),
            &view.position.as_ref().unwrap().fen,
        )
        .unwrap();
        if pos.side_to_move() == draughts_engine::Color::Black {
            let mv = pos.legal_moves()[0];
            let wire = draughts_proto::convert::move_to_wire(&pos, &mv);
            GamesClient::new(ch.clone())
                .play_move(authed(
                    &person,
                    pb::PlayMoveRequest {
                        game_id: game_id.clone(),
                        r#move: Some(pb::MoveInput {
                            r#move: Some(pb::move_input::Move::Text(wire.notation)),
                        }),
                        expected_ply: None,
                    },
                ))
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    server.stop().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let listener = TcpListener::bind(addr).await.unwrap();
    let server = Server::start_on(listener, &redis.url()).await;
    let ch = server.channel().await;
    let url = format!("http://{addr}");
    let reconnect = || {
        let url = url.clone();
        async move {
            loop {
                if let Ok(channel) = Channel::from_shared(url.clone()).unwrap().connect().await {
                    return channel;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let view = play_first_moves(
        ch.clone(),
        &person,
        &game_id,
        reconnect,
        Duration::from_secs(180),
    )
    .await;
    let status = view.status.unwrap();
    assert_ne!(
        status.reason,
        pb::EndReason::Time as i32,
        "{status:?}\n{}",
        bridge.stderr()
    );
    assert_ne!(status.outcome, pb::Outcome::Aborted as i32, "{status:?}");
    assert!(view.moves.len() > 8, "the bot played on after the restart");
    assert!(bridge.running());
    // The bridge learns of the end from its own stream, a moment after the person's last read.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !bridge.game_logs().contains("end over") && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let logs = bridge.game_logs();
    assert!(logs.contains("end over"), "{logs}\n{}", bridge.stderr());
    server.stop().await;
}

/// The must-reach run (docs/bots.md): `DRAUGHTS_BOT_SOAK=1 cargo test --release -p draughts-cli --test
/// bot fifty_games -- --nocapture`. Four scripted challengers (the server's computer at level 1,
/// [`Pick::Level1`]; they were first-legal-move players before) challenge the bot
/// in turn until 50 games have ended; the bot plays up to four at once with `draughts hub`. Checks:
/// every game ends with a result (none aborted, none lost on time by the bot, no refused move), and
/// prints the bridge's overhead per move (p50, p99, max).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_games_against_scripted_challengers() {
    if std::env::var_os("DRAUGHTS_BOT_SOAK").is_none() {
        eprintln!("skipped: set DRAUGHTS_BOT_SOAK=1 to run the 50-game run");
        return;
    }
    let games: usize = std::env::var("DRAUGHTS_BOT_SOAK_GAMES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(50);
    let server = Server::start("memory://").await;
    let ch = server.channel().await;
    let key = bot_key(&ch, "soak").await;
    let bridge = Bridge::start(
        server.addr,
        &key,
        &hub_engine(),
        "soak",
        &["--variants", "english", "--max-games", "4"],
    );
    let started = Instant::now();
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut challengers = Vec::new();
    for c in 0..4 {
        let ch = ch.clone();
        let next = next.clone();
        challengers.push(tokio::spawn(async move {
            let (token, _) = guest(&ch, &format!("Challenger {c}")).await;
            let mut ended = Vec::new();
            while next.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < games {
                let color = if ended.len() % 2 == 0 {
                    pb::Color::White
                } else {
                    pb::Color::Black
                };
                let inv = invite(&ch, &token, "key:soak", fischer(10_000, 100), color)
                    .await
                    .unwrap();
                let game_id =
                    accepted(&ch, &token, &inv.invitation_id, Duration::from_secs(60)).await;
                let ch2 = ch.clone();
                let seed = 1 + c * 1_000 + ended.len() as u64;
                let view = play_moves(
                    ch.clone(),
                    &token,
                    &game_id,
                    move || {
                        let ch = ch2.clone();
                        async move { ch }
                    },
                    Duration::from_secs(300),
                    &mut Pick::level1(seed),
                )
                .await;
                ended.push(view);
            }
            ended
        }));
    }
    let mut views = Vec::new();
    for c in challengers {
        views.extend(c.await.unwrap());
    }
    assert_eq!(views.len(), games);
    let (mut won, mut drawn, mut lost, mut plies) = (0, 0, 0, 0);
    for view in &views {
        let outcome = view.status.as_ref().map(|s| s.outcome).unwrap_or_default();
        let bot_white = view.white.as_ref().unwrap().bot;
        let bot_won = if bot_white {
            pb::Outcome::WhiteWins
        } else {
            pb::Outcome::BlackWins
        } as i32;
        if outcome == bot_won {
            won += 1;
        } else if outcome == pb::Outcome::Draw as i32 {
            drawn += 1;
        } else {
            lost += 1;
        }
        plies += view.moves.len();
    }
    eprintln!(
        "the bot won {won}, drew {drawn}, lost {lost}; {:.0} plies a game on average",
        plies as f64 / games as f64
    );
    for view in &views {
        let status = view.status.clone().unwrap();
        assert_ne!(
            status.outcome,
            pb::Outcome::Aborted as i32,
            "{}: {status:?}",
            view.game_id
        );
        let bot_white = view.white.as_ref().unwrap().bot;
        let bot_lost = (bot_white && status.outcome == pb::Outcome::BlackWins as i32)
            || (!bot_white && status.outcome == pb::Outcome::WhiteWins as i32);
        assert!(
            !(bot_lost && status.reason == pb::EndReason::Time as i32),
            "{}: lost on time",
            view.game_id
        );
    }
    let logs = bridge.game_logs();
    assert!(
        !logs.contains("refused ply="),
        "a move was refused:\n{logs}"
    );
    assert!(!logs.contains("engine failure"), "{logs}");
    let samples = |field: &str| {
        let mut values: Vec<u64> = logs
            .lines()
            .filter_map(|l| l.split(field).nth(1))
            .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
            .collect();
        values.sort_unstable();
        values
    };
    let (overhead, rpc) = (samples("overhead_us="), samples("rpc_us="));
    let at = |v: &[u64], p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    let q = |p: f64| at(&overhead, p);
    eprintln!(
        "{games} games in {:.0} s, {} bot moves; bridge overhead per move: p50 {} us, p99 {} us, max {} us; PlayMove round trip: p50 {} us, p99 {} us",
        started.elapsed().as_secs_f64(),
        overhead.len(),
        q(0.5),
        q(0.99),
        q(1.0),
        at(&rpc, 0.5),
        at(&rpc, 0.99)
    );
    assert!(q(0.99) < 5_000, "p99 {} us", q(0.99));
    server.stop().await;
}

// The integrators' examples (examples/, docs/integrators.md), each run against the platform.

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"))
}

/// The project's Python environment for the examples, `target/py-venv` with grpcio and grpcio-tools
/// (created and installed with pip on first use); `None` when python3 cannot make a virtualenv
/// (python3-venv missing), which skips the Python examples with a message.
/// Whether the examples' tests must run (`DRAUGHTS_EXAMPLES_REQUIRED=1`, set by the test script): a
/// missing toolchain then fails them instead of skipping them.
fn examples_required() -> bool {
    std::env::var("DRAUGHTS_EXAMPLES_REQUIRED").is_ok_and(|v| v == "1")
}

fn python() -> Option<PathBuf> {
    // One test at a time makes or fills the environment.
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _making = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let venv = target_dir().join("py-venv");
    let python = venv.join("bin/python");
    if !python.exists() {
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status();
        if !made.is_ok_and(|s| s.success()) {
            assert!(
                !examples_required(),
                "`python3 -m venv` failed: the Python examples cannot run (install python3 and python3-venv)"
            );
            eprintln!(
                "skipped: `python3 -m venv` failed (install python3 and python3-venv to run the Python examples)"
            );
            let _ = std::fs::remove_dir_all(&venv);
            return None;
        }
    }
    let ready = Command::new(&python)
        .args(["-c", "import grpc, grpc_tools"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ready {
        let installed = Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "grpcio", "grpcio-tools"])
            .status()
            .unwrap();
        assert!(
            installed.success(),
            "pip install grpcio grpcio-tools failed"
        );
    }
    Some(python)
}

/// Python stubs of every proto file, generated afresh into `target/py-stubs-<pid>`.
fn python_stubs(python: &PathBuf) -> PathBuf {
    let out = target_dir().join(format!("py-stubs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let protos: Vec<PathBuf> = std::fs::read_dir(repo().join("proto/draughts/v1"))
        .unwrap()
        .flatten()
        .map(|e| PathBuf::from("proto/draughts/v1").join(e.file_name()))
        .filter(|p| p.extension().is_some_and(|e| e == "proto"))
        .collect();
    let status = Command::new(python)
        .current_dir(repo())
        .args(["-m", "grpc_tools.protoc", "-I", "proto"])
        .arg(format!("--python_out={}", out.display()))
        .arg(format!("--grpc_python_out={}", out.display()))
        .args(&protos)
        .status()
        .unwrap();
    assert!(status.success(), "grpc_tools.protoc failed");
    out
}

/// Runs `command` to its end (at most `limit`, then kills it): success, stdout, stderr.
async fn run_to_end(mut command: Command, limit: Duration) -> (bool, String, String) {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = command.spawn().unwrap();
    let id = child.id();
    let waiting = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap());
    match tokio::time::timeout(limit, waiting).await {
        Ok(out) => {
            let out = out.unwrap();
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
        Err(_) => {
            let _ = Command::new("kill").arg(id.to_string()).status();
            panic!("{command:?} did not end within {limit:?}");
        }
    }
}

/// A person challenges the example bot (holding `key`, run by `command`, which must exit after one
/// game) and plays first moves until the end; checks the bot played it through.
async fn example_bot_plays_one_game(server: &Server, key_owner: &str, command: Command) {
    let ch = server.channel().await;
    let running = tokio::spawn(run_to_end(command, Duration::from_secs(120)));
    let (person, _) = guest(&ch, "Person").await;
    // The bot signs in and opens its events stream; an invitation sent earlier is in its snapshot.
    let inv = invite(
        &ch,
        &person,
        &format!("key:{key_owner}"),
        fischer(60_000, 0),
        pb::Color::White,
    )
    .await
    .unwrap();
    let game_id = accepted(&ch, &person, &inv.invitation_id, Duration::from_secs(60)).await;
    let ch2 = ch.clone();
    let view = play_first_moves(
        ch.clone(),
        &person,
        &game_id,
        move || {
            let ch = ch2.clone();
            async move { ch }
        },
        Duration::from_secs(120),
    )
    .await;
    let (ok, out, err) = running.await.unwrap();
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("1 games played") && out.to_lowercase().contains("bot: true"),
        "{out}\n{err}"
    );
    let status = view.status.unwrap();
    assert_ne!(status.outcome, pb::Outcome::Aborted as i32, "{status:?}");
    assert!(view.moves.len() >= 4, "{} plies", view.moves.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_bot_example_plays_a_game() {
    let Some(python) = python() else { return };
    let stubs = python_stubs(&python);
    let server = Server::start("memory://").await;
    let ch = server.channel().await;
    let key = bot_key(&ch, "pybot").await;
    let mut command = Command::new(&python);
    command
        .arg(repo().join("examples/python/bot.py"))
        .arg("--stubs")
        .arg(&stubs)
        .args([
            "--server",
            &server.addr.to_string(),
            "--token",
            &key,
            "--games",
            "1",
        ]);
    example_bot_plays_one_game(&server, "pybot", command).await;
    server.stop().await;
    let _ = std::fs::remove_dir_all(&stubs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_to_server_analysis_example() {
    let Some(python) = python() else { return };
    let stubs = python_stubs(&python);
    let server = Server::start("memory://").await;
    let ch = server.channel().await;
    let key = api_key(&ch, "partner-service", &[pb::AuthScope::Analysis])
        .await
        .unwrap();
    let mut command = Command::new(&python);
    command
        .arg(repo().join("examples/server-to-server/analyse.py"))
        .arg("--stubs")
        .arg(&stubs)
        .args([
            "--server",
            &server.addr.to_string(),
            "--variant",
            "english",
            "--depth",
            "4",
        ])
        .args([
            "",
            "W:W21,22,23,24,25,26,27,28,29,30,31,32:B1,2,3,4,5,6,7,8,9,10,11,12",
        ])
        .env("DRAUGHTS_API_KEY", &key);
    let (ok, out, err) = run_to_end(command, Duration::from_secs(120)).await;
    assert!(ok, "{out}\n{err}");
    let answers: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), 2, "{out}");
    for answer in &answers {
        assert!(!answer["move"].as_str().unwrap().is_empty(), "{answer}");
        assert!(
            answer["ratelimit"]["x-ratelimit-remaining"].is_string(),
            "{answer}"
        );
    }
    server.stop().await;
    let _ = std::fs::remove_dir_all(&stubs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_web_bot_example_plays_a_game() {
    let web_modules = repo().join("web/node_modules");
    let bin = web_modules.join(".bin");
    if !bin.join("protoc-gen-es").exists() || !web_modules.join("@connectrpc/connect-web").exists()
    {
        assert!(
            !examples_required(),
            "web/node_modules lacks the buf tools or connect-web: run `npm ci` in web/ first"
        );
        eprintln!(
            "skipped: web/node_modules lacks the buf tools or connect-web (run `npm ci` in web/)"
        );
        return;
    }
    // A scratch copy of the example: its stubs generated by its own template, web's packages linked.
    let dir = target_dir().join(format!("grpc-web-example-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["bot.mjs", "bot-core.mjs", "buf.gen.yaml"] {
        std::fs::copy(repo().join("examples/grpc-web").join(file), dir.join(file)).unwrap();
    }
    std::os::unix::fs::symlink(&web_modules, dir.join("node_modules")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let generated = Command::new(bin.join("buf"))
        .current_dir(&dir)
        .arg("generate")
        .arg(repo().join("proto"))
        .args(["--template", "buf.gen.yaml"])
        .env("PATH", &path)
        .status()
        .unwrap();
    assert!(generated.success(), "buf generate failed");
    let server = Server::start("memory://").await;
    let ch = server.channel().await;
    let key = bot_key(&ch, "webbot").await;
    let mut command = Command::new("node");
    command.current_dir(&dir).arg("bot.mjs").args([
        "--server",
        &format!("http://{}", server.addr),
        "--token",
        &key,
        "--games",
        "1",
    ]);
    example_bot_plays_one_game(&server, "webbot", command).await;
    server.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
