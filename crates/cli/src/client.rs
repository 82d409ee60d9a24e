//! `draughts client ...`: calls the platform's API (draughts.v1) over gRPC.
//!
//! Every call carries the caller's token when one is given (`--token` / `DRAUGHTS_TOKEN`), so it counts
//! against the caller's own rate limit, not the anonymous per-address one; a call refused with
//! RESOURCE_EXHAUSTED is retried after the server's `retry-after` seconds, up to [`MAX_RATE_WAIT`] in
//! all, and only then reported.

use std::future::Future;
use std::time::Duration;

use clap::{Args, Subcommand};
use draughts_proto::pb;
use draughts_proto::pb::rules_client::RulesClient;
use tonic::transport::Channel;

use crate::CliError;

#[derive(Args, Debug)]
pub struct ClientArgs {
    /// Server address: HOST:PORT (plain HTTP/2) or a URL (http://HOST:PORT, https://HOST:PORT).
    #[arg(
        long,
        short = 's',
        env = "DRAUGHTS_SERVER",
        default_value = "127.0.0.1:50051",
        global = true
    )]
    server: String,
    /// Token or API key sent as `authorization: Bearer ...` (from `client guest`, or a personal
    /// token). Without it, the session saved by `client signin` for this server is used.
    #[arg(long, env = "DRAUGHTS_TOKEN", global = true, hide_env_values = true)]
    token: Option<String>,
    #[command(subcommand)]
    command: ClientCommand,
}

#[derive(Args, Debug)]
pub(crate) struct Target {
    /// Rule set: international, english, italian, russian, brazilian, spanish, czech, turkish,
    /// antidraughts, breakthrough, killer, pool, portuguese, frisian, frysk or canadian.
    #[arg(long, short = 'v')]
    pub(crate) variant: String,
    /// Position in PDN FEN (default: the start position).
    #[arg(long, short = 'f', default_value = "")]
    pub(crate) fen: String,
    /// House-rule options, comma separated: no-mandatory-capture, promote-mid-capture, move-limit=N,
    /// kings-only=N, repetition=on|off, endgame-counts=on|off (docs/rules.md §7).
    #[arg(long, short = 'o', default_value = "")]
    pub(crate) options: String,
}

#[derive(Subcommand, Debug)]
enum ClientCommand {
    /// Rules.ListMoves: the legal moves of a position.
    Moves(Target),
    /// Rules.ValidateMove: is this move legal here, and what follows.
    Validate {
        #[command(flatten)]
        target: Target,
        /// The move (`32-28`, `28x19`, `c3:e5`, a full path).
        #[arg(name = "MOVE")]
        mv: String,
    },
    /// Rules.ApplyMoves: play a sequence, stopping at the first illegal move.
    Apply {
        #[command(flatten)]
        target: Target,
        moves: Vec<String>,
    },
    /// Rules.StartPosition.
    Start {
        #[arg(long, short = 'v')]
        variant: String,
    },
    /// Rules.ParsePosition: check and normalise a FEN.
    Parse(Target),
    /// grpc.health.v1: is the server serving.
    Health,
    /// Auth.SignUp: creates an account and saves its session in the config directory (with --token
    /// a guest token: that guest becomes the account, keeping its games and ratings). The password
    /// is asked for (or read from standard input with --password-stdin).
    Signup(crate::session::SignUpArgs),
    /// Auth.SignIn: saves the session in the config directory; later commands use it.
    Signin(crate::session::SignInArgs),
    /// Auth.SignOut: ends the saved session of this server and forgets it.
    Signout,
    /// Auth.WhoAmI: who the server thinks you are.
    Whoami,
    /// Games.BlockPlayer: no invitations, challenges, rematches or lobby games with this player.
    Block { player_id: String },
    /// Games.UnblockPlayer.
    Unblock { player_id: String },
    /// Games.ListBlocked: your block list, most recent first.
    Blocked,
    /// Auth.CreateGuest: prints a guest token (use it with --token or DRAUGHTS_TOKEN).
    Guest {
        #[arg(long, default_value = "")]
        name: String,
    },
    /// Games.CreateInvitation: invite a player (by id) to a game with you (--token); prints the
    /// invitation id, which becomes the game's id when they accept.
    Create(crate::games_cli::CreateArgs),
    /// Accept a challenge, rematch, lobby seek or invitation to you (--token): Matchmaking.Accept
    /// (Games.AcceptInvitation on a server without Matchmaking); prints the game's id.
    Accept { invitation_id: String },
    /// Matchmaking.Seek: wait in one or more quick-pairing pools until paired; prints the game's id.
    Seek(crate::matchmaking_cli::SeekArgs),
    /// Matchmaking.Challenge: challenge a player by id (or open a link); prints the invitation id.
    Challenge(crate::matchmaking_cli::ChallengeArgs),
    /// The lobby: its numbers and open seeks; `--pools` lists the pools, `--offer` lists a custom game.
    Lobby(crate::matchmaking_cli::LobbyArgs),
    /// Tournaments: create, list, join, leave, start, show, watch.
    Tournament(crate::tournament_cli::TournamentArgs),
    /// Administration (an admin API key): `bot-limits <bot> --games N --rate R/min`.
    Admin(crate::bot::admin::AdminArgs),
    /// Play a game from the terminal: your moves from stdin, the opponent's as they come. At the end
    /// of input you leave the game: it goes on and your clock runs (run `play` again to come back).
    Play { game_id: String },
    /// Play a whole game against the built-in opponent (a simple engine-backed player). At the end of
    /// input the game is aborted (fewer than two moves) or resigned, since nobody plays the bot then.
    Bot(crate::games_cli::BotArgs),
    /// Games.WatchGame: print every event of a game until it ends.
    Watch { game_id: String },
    /// Games.Berserk (--token): go berserk in an arena game before your first move (half your clock,
    /// no increment; one more point for a long enough win). `play` takes `berserk` too.
    Berserk { game_id: String },
    /// Games.ExportPdn.
    Pdn { game_id: String },
    /// Analysis.AnalyzePosition, followed to the result (needs the analysis scope).
    Analyse(crate::analysis_cli::AnalyseArgs),
    /// Analysis.AnalyzeGame of a stored game or a PDN file, ply by ply (needs the analysis scope).
    AnalyseGame(crate::analysis_cli::AnalyseGameArgs),
    /// Analysis.BestMove: the server's computer move at a level or limits.
    Bestmove(crate::analysis_cli::BestMoveArgs),
}

pub(crate) fn rules_of(t: &Target) -> Result<Option<pb::RuleSet>, CliError> {
    let variant: draughts_engine::Variant = t.variant.parse()?;
    let options = draughts_engine::RuleOptions::parse(&t.options)?;
    let rs = draughts_engine::RuleSet::with_options(variant, options)?;
    Ok(Some(draughts_proto::convert::rules_to_wire(rs)))
}

pub(crate) fn status_error(e: tonic::Status) -> CliError {
    CliError(format!("{:?}: {}", e.code(), e.message()))
}

/// The server's URL: `HOST:PORT` becomes `http://HOST:PORT`; a URL stays as it is.
pub(crate) fn server_url(server: &str) -> String {
    let server = server.trim();
    if server.contains("://") {
        server.to_owned()
    } else {
        format!("http://{server}")
    }
}

/// Who calls: the `authorization` metadata every request of this caller carries (none without a
/// token: the call is anonymous).
#[derive(Clone, Debug)]
pub(crate) struct Caller {
    bearer: Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>,
}

impl Caller {
    pub(crate) fn new(token: Option<&str>) -> Result<Caller, CliError> {
        let bearer = match token.map(str::trim).filter(|t| !t.is_empty()) {
            None => None,
            Some(token) => Some(
                format!("Bearer {token}")
                    .parse()
                    .map_err(|_| CliError("the token has characters that can't be sent".into()))?,
            ),
        };
        Ok(Caller { bearer })
    }

    pub(crate) fn has_token(&self) -> bool {
        self.bearer.is_some()
    }

    /// `message` as a request of this caller.
    pub(crate) fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut req = tonic::Request::new(message);
        if let Some(bearer) = &self.bearer {
            req.metadata_mut().insert("authorization", bearer.clone());
        }
        req
    }
}

/// The longest total wait for rate limits before a call is given up.
pub(crate) const MAX_RATE_WAIT: Duration = Duration::from_secs(180);
/// The longest single wait (a server asking for more is capped).
const MAX_ONE_WAIT: Duration = Duration::from_secs(60);

/// The wait a RESOURCE_EXHAUSTED status asks for: its `retry-after` seconds (1 s when absent), capped.
fn retry_after(status: &tonic::Status) -> Duration {
    let secs = status
        .metadata()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(1)
        .max(1);
    Duration::from_secs(secs).min(MAX_ONE_WAIT)
}

/// Makes the call `call` builds, again after the server's `retry-after` while it is refused with
/// RESOURCE_EXHAUSTED, up to `max_wait` of waiting in all (then the last refusal is returned).
pub(crate) async fn retrying<T, F, Fut>(max_wait: Duration, mut call: F) -> Result<T, tonic::Status>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    let mut waited = Duration::ZERO;
    loop {
        match call().await {
            Ok(response) => return Ok(response.into_inner()),
            Err(status) if status.code() == tonic::Code::ResourceExhausted => {
                let wait = retry_after(&status);
                if waited + wait > max_wait {
                    return Err(status);
                }
                eprintln!(
                    "rate limited ({}); retrying in {} s",
                    status.message(),
                    wait.as_secs()
                );
                tokio::time::sleep(wait).await;
                waited += wait;
            }
            Err(status) => return Err(status),
        }
    }
}

/// `call!(caller, client, method, message)`: `client.method(message)` as `caller`, retried on rate
/// limits ([`retrying`]); the response message or the status.
macro_rules! call {
    ($caller:expr, $client:expr, $method:ident, $message:expr) => {{
        let message = $message;
        $crate::client::retrying($crate::client::MAX_RATE_WAIT, || {
            let mut client = $client.clone();
            let request = $caller.request(message.clone());
            async move { client.$method(request).await }
        })
        .await
    }};
}
pub(crate) use call;

fn text(t: &str) -> pb::MoveInput {
    pb::MoveInput {
        r#move: Some(pb::move_input::Move::Text(t.to_string())),
    }
}

fn describe_move(m: &pb::Move) -> String {
    if m.captured.is_empty() {
        m.notation.clone()
    } else {
        format!(
            "{}  (path {}, captures {})",
            m.notation,
            m.path.join("-"),
            m.captured.join(",")
        )
    }
}

fn print_status(s: Option<&pb::GameStatus>) -> Result<(), CliError> {
    if let Some(s) = s {
        out!("status: {}", s.description);
    }
    Ok(())
}

pub fn run(args: ClientArgs) -> Result<(), CliError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run_async(args))
}

async fn run_async(args: ClientArgs) -> Result<(), CliError> {
    let url = server_url(&args.server);
    let endpoint = Channel::from_shared(url.clone())
        .map_err(|e| CliError(format!("bad server address '{}': {e}", args.server)))?
        .connect_timeout(std::time::Duration::from_secs(5))
        .timeout(std::time::Duration::from_secs(30));
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| CliError(format!("cannot connect to {url}: {e}")))?;
    let rules_client = RulesClient::new(channel.clone());
    match args.command {
        ClientCommand::Signup(a) => {
            return crate::session::sign_up(&channel, &url, args.token.as_deref(), a).await;
        }
        ClientCommand::Signin(a) => return crate::session::sign_in(&channel, &url, a).await,
        ClientCommand::Signout => return crate::session::sign_out(&channel, &url).await,
        command => {
            let from_session = args.token.is_none();
            let token = match args.token.clone() {
                Some(token) => Some(token),
                None => crate::session::token_for(&channel, &url).await?,
            };
            let result = run_command(command, channel, rules_client, token).await;
            match result {
                Err(CallFailed::Unauthenticated(message))
                    if from_session && crate::session::has_session(&url) =>
                {
                    Err(crate::session::session_refused(&url, &message))
                }
                Err(CallFailed::Unauthenticated(message)) => {
                    Err(CliError(format!("Unauthenticated: {message}")))
                }
                Err(CallFailed::Other(e)) => Err(e),
                Ok(()) => Ok(()),
            }
        }
    }
}

/// How a command failed: refused as unauthenticated (kept apart, so that a refused saved session can
/// be told so), or anything else.
enum CallFailed {
    Unauthenticated(String),
    Other(CliError),
}

impl From<CliError> for CallFailed {
    fn from(e: CliError) -> CallFailed {
        // The commands report refused calls as "Code: message" text (`status_error`).
        match e.0.strip_prefix("Unauthenticated: ") {
            Some(message) => CallFailed::Unauthenticated(message.to_owned()),
            None => CallFailed::Other(e),
        }
    }
}

impl From<tonic::Status> for CallFailed {
    fn from(status: tonic::Status) -> CallFailed {
        status_error(status).into()
    }
}

async fn run_command(
    command: ClientCommand,
    channel: Channel,
    rules_client: RulesClient<Channel>,
    token: Option<String>,
) -> Result<(), CallFailed> {
    let caller = Caller::new(token.as_deref())?;
    match command {
        ClientCommand::Signup(_) | ClientCommand::Signin(_) | ClientCommand::Signout => {
            unreachable!("handled before a token is chosen")
        }
        ClientCommand::Block { player_id } => {
            let games = pb::games_client::GamesClient::new(channel);
            let message = pb::BlockPlayerRequest { player_id };
            let r = call!(caller, games, block_player, message)?;
            out!("{} blocked", r.blocked.len());
        }
        ClientCommand::Unblock { player_id } => {
            let games = pb::games_client::GamesClient::new(channel);
            let message = pb::BlockPlayerRequest { player_id };
            let r = call!(caller, games, unblock_player, message)?;
            out!("{} blocked", r.blocked.len());
        }
        ClientCommand::Blocked => {
            let games = pb::games_client::GamesClient::new(channel);
            let r = call!(caller, games, list_blocked, pb::ListBlockedRequest {})?;
            for b in &r.blocked {
                out!("{}", b.player_id);
            }
        }
        ClientCommand::Whoami => {
            let auth = pb::auth_client::AuthClient::new(channel);
            let r = call!(caller, auth, who_am_i, pb::WhoAmIRequest {})?;
            let player = r.player.unwrap_or_default();
            let kind = pb::PrincipalKind::try_from(r.kind)
                .map(|k| k.as_str_name())
                .unwrap_or("UNKNOWN");
            out!("{} ({}), {kind}", player.display_name, player.id);
        }
        ClientCommand::Moves(t) => {
            let r = call!(
                caller,
                rules_client,
                list_moves,
                pb::ListMovesRequest {
                    rules: rules_of(&t)?,
                    fen: t.fen.clone(),
                }
            )
            .map_err(status_error)?;
            for m in &r.moves {
                out!("{}", describe_move(m));
            }
            print_status(r.status.as_ref())?;
        }
        ClientCommand::Validate { target, mv } => {
            let r = call!(
                caller,
                rules_client,
                validate_move,
                pb::ValidateMoveRequest {
                    rules: rules_of(&target)?,
                    fen: target.fen.clone(),
                    r#move: Some(text(&mv)),
                    include_pieces: false,
                }
            )
            .map_err(status_error)?;
            if r.legal {
                if let Some(m) = &r.r#move {
                    out!("legal: {}", describe_move(m));
                }
                if let Some(p) = &r.position {
                    out!("fen: {}", p.fen);
                }
                print_status(r.status.as_ref())?;
            } else {
                return Err(CliError(r.reason).into());
            }
        }
        ClientCommand::Apply { target, moves } => {
            let r = call!(
                caller,
                rules_client,
                apply_moves,
                pb::ApplyMovesRequest {
                    rules: rules_of(&target)?,
                    fen: target.fen.clone(),
                    moves: moves.iter().map(|m| text(m)).collect(),
                }
            )
            .map_err(status_error)?;
            let applied: Vec<&str> = r.applied.iter().map(|m| m.notation.as_str()).collect();
            out!("applied: {}", applied.join(" "));
            if let Some(p) = &r.position {
                out!("fen: {}", p.fen);
            }
            print_status(r.status.as_ref())?;
            if let Some(i) = r.rejected_index {
                return Err(CliError(format!("move {} rejected: {}", i + 1, r.reason)).into());
            }
        }
        ClientCommand::Start { variant } => {
            let t = Target {
                variant,
                fen: String::new(),
                options: String::new(),
            };
            let r = call!(
                caller,
                rules_client,
                start_position,
                pb::StartPositionRequest {
                    rules: rules_of(&t)?,
                }
            )
            .map_err(status_error)?;
            if let Some(p) = r.position {
                out!("{}", p.fen);
            }
        }
        ClientCommand::Parse(t) => {
            let r = call!(
                caller,
                rules_client,
                parse_position,
                pb::ParsePositionRequest {
                    rules: rules_of(&t)?,
                    fen: t.fen.clone(),
                }
            )
            .map_err(status_error)?;
            if let Some(p) = &r.position {
                out!("{}", p.fen);
            }
            print_status(r.status.as_ref())?;
        }
        ClientCommand::Health => {
            let health = tonic_health::pb::health_client::HealthClient::new(channel);
            let r = call!(
                caller,
                health,
                check,
                tonic_health::pb::HealthCheckRequest {
                    service: String::new(),
                }
            )
            .map_err(status_error)?;
            let status = tonic_health::pb::health_check_response::ServingStatus::try_from(r.status)
                .map(|s| s.as_str_name())
                .unwrap_or("UNKNOWN");
            out!("{status}");
        }
        ClientCommand::Guest { name } => {
            let g = crate::games_cli::create_guest(&channel, &caller, &name).await?;
            out!("{}", g.token);
            eprintln!("guest {} (export DRAUGHTS_TOKEN=... to use it)", g.id);
        }
        ClientCommand::Create(a) => crate::games_cli::create(&channel, &caller, a).await?,
        ClientCommand::Accept { invitation_id } => {
            crate::matchmaking_cli::accept(&channel, &caller, &invitation_id).await?
        }
        ClientCommand::Seek(a) => crate::matchmaking_cli::seek(&channel, &caller, a).await?,
        ClientCommand::Challenge(a) => {
            crate::matchmaking_cli::challenge(&channel, &caller, a).await?
        }
        ClientCommand::Lobby(a) => crate::matchmaking_cli::lobby(&channel, &caller, a).await?,
        ClientCommand::Tournament(a) => crate::tournament_cli::run(&channel, &caller, a).await?,
        ClientCommand::Admin(a) => crate::bot::admin::run(&channel, &caller, a).await?,
        ClientCommand::Play { game_id } => {
            crate::games_cli::play(&channel, &caller, &game_id).await?
        }
        ClientCommand::Bot(a) => crate::games_cli::bot(&channel, &caller, a).await?,
        ClientCommand::Watch { game_id } => {
            crate::games_cli::watch(&channel, &caller, &game_id).await?
        }
        ClientCommand::Berserk { game_id } => {
            crate::games_cli::berserk(&channel, &caller, &game_id).await?
        }
        ClientCommand::Pdn { game_id } => {
            let games = pb::games_client::GamesClient::new(channel);
            let r = call!(caller, games, export_pdn, pb::GetGameRequest { game_id })
                .map_err(status_error)?;
            print!("{}", r.pdn);
        }
        ClientCommand::Analyse(a) => {
            crate::analysis_cli::analyse(&channel, token.as_deref(), a).await?
        }
        ClientCommand::AnalyseGame(a) => {
            crate::analysis_cli::analyse_game(&channel, token.as_deref(), a).await?
        }
        ClientCommand::Bestmove(a) => {
            crate::analysis_cli::best_move(&channel, token.as_deref(), a).await?
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_without_a_scheme_is_plain_http() {
        assert_eq!(server_url("127.0.0.1:50051"), "http://127.0.0.1:50051");
        assert_eq!(
            server_url("https://draughts.example:443"),
            "https://draughts.example:443"
        );
        assert_eq!(server_url(" localhost:1 "), "http://localhost:1");
    }

    fn exhausted(retry_after: &str) -> tonic::Status {
        let mut status = tonic::Status::resource_exhausted("rate limit exceeded");
        status
            .metadata_mut()
            .insert("retry-after", retry_after.parse().unwrap());
        status
    }

    /// A call refused with RESOURCE_EXHAUSTED is made again after `retry-after`; past the bound, the
    /// refusal is returned.
    #[tokio::test(start_paused = true)]
    async fn rate_limited_calls_are_retried_after_retry_after() {
        let mut attempts = 0;
        let started = tokio::time::Instant::now();
        let result = retrying(MAX_RATE_WAIT, || {
            attempts += 1;
            let attempt = attempts;
            async move {
                if attempt < 3 {
                    Err(exhausted("7"))
                } else {
                    Ok(tonic::Response::new(42))
                }
            }
        })
        .await;
        assert_eq!(result.unwrap(), 42);
        assert_eq!(attempts, 3);
        assert_eq!(started.elapsed().as_secs(), 14);

        let mut attempts = 0;
        let result: Result<u32, _> = retrying(Duration::from_secs(100), || {
            attempts += 1;
            async { Err(exhausted("40")) }
        })
        .await;
        assert_eq!(result.unwrap_err().code(), tonic::Code::ResourceExhausted);
        assert_eq!(
            attempts, 3,
            "40 s + 40 s fit in 100 s, a third wait does not"
        );
        let other: Result<u32, _> = retrying(MAX_RATE_WAIT, || async {
            Err(tonic::Status::invalid_argument("no"))
        })
        .await;
        assert_eq!(other.unwrap_err().code(), tonic::Code::InvalidArgument);
    }
}
