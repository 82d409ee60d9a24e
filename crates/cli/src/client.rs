//! `draughts client ...`: calls the platform's API (draughts.v1) over gRPC.

use clap::{Args, Subcommand};
use draughts_proto::pb;
use draughts_proto::pb::rules_client::RulesClient;
use tonic::transport::Channel;

use crate::CliError;

#[derive(Args, Debug)]
pub struct ClientArgs {
    /// Server address.
    #[arg(
        long,
        short = 's',
        env = "DRAUGHTS_SERVER",
        default_value = "http://127.0.0.1:50051",
        global = true
    )]
    server: String,
    /// Token or API key sent as `authorization: Bearer ...` (from `client guest`).
    #[arg(long, env = "DRAUGHTS_TOKEN", global = true, hide_env_values = true)]
    token: Option<String>,
    #[command(subcommand)]
    command: ClientCommand,
}

#[derive(Args, Debug)]
pub(crate) struct Target {
    /// Rule set: international, english, italian, russian, brazilian, spanish, czech or turkish.
    #[arg(long, short = 'v')]
    pub(crate) variant: String,
    /// Position in PDN FEN (default: the start position).
    #[arg(long, short = 'f', default_value = "")]
    pub(crate) fen: String,
    /// House-rule options: no-mandatory-capture, promote-mid-capture, move-limit=N.
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
    /// Auth.CreateGuest: prints a guest token (use it with --token or DRAUGHTS_TOKEN).
    Guest {
        #[arg(long, default_value = "")]
        name: String,
    },
    /// Games.CreateGame: a game between you (--token) and an opponent id.
    Create(crate::games_cli::CreateArgs),
    /// Play a game from the terminal: your moves from stdin, the opponent's as they come.
    Play { game_id: String },
    /// Play a whole game against the built-in opponent (a simple engine-backed player).
    Bot(crate::games_cli::BotArgs),
    /// Games.WatchGame: print every event of a game until it ends.
    Watch { game_id: String },
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

fn print_status(s: Option<&pb::GameStatus>) {
    if let Some(s) = s {
        println!("status: {}", s.description);
    }
}

pub fn run(args: ClientArgs) -> Result<(), CliError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run_async(args))
}

async fn run_async(args: ClientArgs) -> Result<(), CliError> {
    let endpoint = Channel::from_shared(args.server.clone())
        .map_err(|e| CliError(format!("bad server address '{}': {e}", args.server)))?
        .connect_timeout(std::time::Duration::from_secs(5))
        .timeout(std::time::Duration::from_secs(30));
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| CliError(format!("cannot connect to {}: {e}", args.server)))?;
    let mut rules_client = RulesClient::new(channel.clone());
    let token = args.token.clone();
    match args.command {
        ClientCommand::Moves(t) => {
            let r = rules_client
                .list_moves(pb::ListMovesRequest {
                    rules: rules_of(&t)?,
                    fen: t.fen.clone(),
                })
                .await
                .map_err(status_error)?
                .into_inner();
            for m in &r.moves {
                println!("{}", describe_move(m));
            }
            print_status(r.status.as_ref());
        }
        ClientCommand::Validate { target, mv } => {
            let r = rules_client
                .validate_move(pb::ValidateMoveRequest {
                    rules: rules_of(&target)?,
                    fen: target.fen.clone(),
                    r#move: Some(text(&mv)),
                    include_pieces: false,
                })
                .await
                .map_err(status_error)?
                .into_inner();
            if r.legal {
                if let Some(m) = &r.r#move {
                    println!("legal: {}", describe_move(m));
                }
                if let Some(p) = &r.position {
                    println!("fen: {}", p.fen);
                }
                print_status(r.status.as_ref());
            } else {
                return Err(CliError(r.reason));
            }
        }
        ClientCommand::Apply { target, moves } => {
            let r = rules_client
                .apply_moves(pb::ApplyMovesRequest {
                    rules: rules_of(&target)?,
                    fen: target.fen.clone(),
                    moves: moves.iter().map(|m| text(m)).collect(),
                })
                .await
                .map_err(status_error)?
                .into_inner();
            let applied: Vec<&str> = r.applied.iter().map(|m| m.notation.as_str()).collect();
            println!("applied: {}", applied.join(" "));
            if let Some(p) = &r.position {
                println!("fen: {}", p.fen);
            }
            print_status(r.status.as_ref());
            if let Some(i) = r.rejected_index {
                return Err(CliError(format!("move {} rejected: {}", i + 1, r.reason)));
            }
        }
        ClientCommand::Start { variant } => {
            let t = Target {
                variant,
                fen: String::new(),
                options: String::new(),
            };
            let r = rules_client
                .start_position(pb::StartPositionRequest {
                    rules: rules_of(&t)?,
                })
                .await
                .map_err(status_error)?
                .into_inner();
            if let Some(p) = r.position {
                println!("{}", p.fen);
            }
        }
        ClientCommand::Parse(t) => {
            let r = rules_client
                .parse_position(pb::ParsePositionRequest {
                    rules: rules_of(&t)?,
                    fen: t.fen.clone(),
                })
                .await
                .map_err(status_error)?
                .into_inner();
            if let Some(p) = &r.position {
                println!("{}", p.fen);
            }
            print_status(r.status.as_ref());
        }
        ClientCommand::Health => {
            let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
            let r = health
                .check(tonic_health::pb::HealthCheckRequest {
                    service: String::new(),
                })
                .await
                .map_err(status_error)?
                .into_inner();
            let status = tonic_health::pb::health_check_response::ServingStatus::try_from(r.status)
                .map(|s| s.as_str_name())
                .unwrap_or("UNKNOWN");
            println!("{status}");
        }
        ClientCommand::Guest { name } => {
            let g = crate::games_cli::create_guest(&channel, &name).await?;
            println!("{}", g.token);
            eprintln!("guest {} (export DRAUGHTS_TOKEN=... to use it)", g.id);
        }
        ClientCommand::Create(a) => crate::games_cli::create(&channel, token.as_deref(), a).await?,
        ClientCommand::Play { game_id } => {
            crate::games_cli::play(&channel, token.as_deref(), &game_id).await?
        }
        ClientCommand::Bot(a) => crate::games_cli::bot(&channel, token.as_deref(), a).await?,
        ClientCommand::Watch { game_id } => crate::games_cli::watch(&channel, &game_id).await?,
        ClientCommand::Pdn { game_id } => {
            let r = pb::games_client::GamesClient::new(channel)
                .export_pdn(pb::GetGameRequest { game_id })
                .await
                .map_err(status_error)?;
            print!("{}", r.into_inner().pdn);
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
