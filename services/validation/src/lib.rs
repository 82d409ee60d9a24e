//! The move-validation service: `draughts.v1.Rules` (stateless validation for any client) and the live
//! games it referees (`draughts.v1.Games`, with `draughts.v1.Auth` for tokens and API keys).
//!
//! `main.rs` parses [`Config`] and calls [`run`]; the one-process platform builds a [`Validation`] on
//! its shared backends and calls [`Validation::register`] to put these services on its port.

/// The platform's one authentication layer (crate `draughts-auth`), re-exported under its old path.
pub use draughts_auth as auth;
pub mod games;
pub mod grpc;

use std::sync::Arc;

use draughts_proto::pb::games_server::GamesServer;
use draughts_proto::pb::rules_server::RulesServer;
use draughts_runtime::{BackendConfig, ConfigError, ServerConfig, Services, TelemetryConfig};
use draughts_store::{Database, LiveStore};
use tokio::net::TcpListener;

/// Configuration of the validation service binary.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "draughts-validation",
    version,
    about = "Move validation (draughts.v1.Rules) and live games (draughts.v1.Games, draughts.v1.Auth)"
)]
pub struct Config {
    #[command(flatten)]
    pub server: ServerConfig,
    #[command(flatten)]
    pub telemetry: TelemetryConfig,
    #[command(flatten)]
    pub backends: BackendConfig,
    #[command(flatten)]
    pub auth: auth::AuthConfig,
    #[command(flatten)]
    pub games: games::GamesLimits,
    /// The analysis service that plays the `ai:<level>` players (`http://host:port`); unset: no computer
    /// player on this replica (another replica's, or the rules, end such games).
    #[arg(long, env = "DRAUGHTS_ANALYSIS_URL")]
    pub analysis_url: Option<String>,
    /// The API key (scope `analysis` or `admin`) the computer's BestMove calls carry.
    #[arg(long, env = "DRAUGHTS_ANALYSIS_API_KEY", hide_env_values = true)]
    pub analysis_api_key: Option<String>,
}

impl Config {
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.server.validate()?;
        self.telemetry.validate()?;
        self.backends.validate()?;
        self.games.validate()?;
        self.auth.validate()?;
        if self.analysis_url.is_some() != self.analysis_api_key.is_some() {
            return Err(ConfigError(
                "analysis-url and analysis-api-key go together".into(),
            ));
        }
        Ok(())
    }

    /// Port 0 on loopback, embedded backends, test secrets.
    pub fn for_tests() -> Config {
        Config {
            server: ServerConfig::for_tests(),
            telemetry: TelemetryConfig::for_tests(),
            backends: BackendConfig::embedded_for_tests(),
            auth: auth::AuthConfig::for_tests(),
            games: games::GamesLimits::defaults(),
            analysis_url: None,
            analysis_api_key: None,
        }
    }
}

/// Starting the service failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("backend: {0}")]
    Store(#[from] draughts_store::StoreError),
    #[error("games: {0}")]
    Games(#[from] games::GamesError),
    #[error(transparent)]
    Serve(#[from] draughts_runtime::ServeError),
}

/// Adds the stateless `Rules` service to a host, behind the authentication layer of `auth` like every
/// other service: anonymous calls are allowed and rate limited per client address (callers with
/// credentials by their own limit). Every method only reads, so while the rate counters are
/// unreachable the calls go on through the per-replica fallback limiter (`draughts_auth::limits`).
pub fn register_rules(services: &mut Services, server: &ServerConfig, auth: &auth::Authenticator) {
    let rules =
        RulesServer::new(grpc::RulesService).max_decoding_message_size(server.max_message_bytes);
    let layer = auth::AuthLayer::new(auth.clone()).with_policy(auth::CallPolicy::ALL_READS);
    services.add(tower::Layer::layer(&layer, rules));
}

/// The methods of `draughts.v1.Games` that only read (see `draughts_auth::limits`): every other
/// method creates or changes a game and is refused while the rate counters are unreachable.
pub const GAMES_READS: auth::CallPolicy =
    auth::CallPolicy::reads(&["GetGame", "ExportPdn", "WatchGame", "ListGames"]);

/// The stateful part: live games and authentication over shared backends.
#[derive(Clone, Debug)]
pub struct Validation {
    pub games: games::GamesCore,
    pub auth: auth::Authenticator,
}

impl Validation {
    /// Builds the domain on connected backends (applies the durable schema).
    pub async fn new(
        live: Arc<dyn LiveStore>,
        db: Database,
        auth_config: &auth::AuthConfig,
        clock: Arc<dyn games::Clock>,
    ) -> Result<Validation, StartError> {
        let auth = auth::Authenticator::new(auth_config.clone(), live.clone())?;
        // Accounts live in this service's database: Auth is served here.
        auth.attach_accounts(db.clone()).await?;
        let games = games::GamesCore::new(live, db, clock).await?;
        Ok(Validation { games, auth })
    }

    /// Adds Rules, Games and Auth to a host, all behind the authentication layer.
    pub fn register(&self, services: &mut Services, server: &ServerConfig) {
        register_rules(services, server, &self.auth);
        let games = GamesServer::new(games::grpc::GamesService::new(self.games.clone()))
            .max_decoding_message_size(server.max_message_bytes);
        services.add(tower::Layer::layer(
            &auth::AuthLayer::new(self.auth.clone()).with_policy(GAMES_READS),
            games,
        ));
        auth::register_auth(
            services,
            &self.auth,
            server.max_message_bytes,
            Some(Arc::new(self.games.clone())),
        );
    }

    /// Sets the bounds of games and watchers (before serving).
    /// Plays the `ai:<level>` players of this replica's games with `player` (see `games::computer`).
    pub fn with_computer(mut self, player: Arc<dyn games::computer::ComputerPlayer>) -> Validation {
        self.games = self.games.with_computer(player);
        self
    }

    pub fn with_limits(mut self, limits: games::GamesLimits) -> Validation {
        self.games = self.games.with_limits(limits);
        self
    }

    /// Runs the clock and archive timers until `shutdown` resolves.
    pub async fn run_timers(self, shutdown: impl std::future::Future<Output = ()>) {
        self.games.run_timers(shutdown).await
    }
}

/// Connects the backends named in the configuration.
pub async fn connect(
    backends: &BackendConfig,
) -> Result<(Arc<dyn LiveStore>, Database), StartError> {
    let live = draughts_store::open_live_store(&backends.redis_url, &backends.key_prefix).await?;
    let db = Database::connect(&backends.database_url).await?;
    Ok((live, db))
}

/// Serves until `shutdown` resolves.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    config.validate()?;
    let (live, db) = connect(&config.backends).await?;
    let v = Validation::new(live, db, &config.auth, Arc::new(games::SystemClock))
        .await?
        .with_limits(config.games.clone());
    let v = match (&config.analysis_url, &config.analysis_api_key) {
        (Some(url), Some(key)) => {
            v.with_computer(Arc::new(games::computer_grpc::GrpcComputer::new(url, key)?))
        }
        _ => v,
    };
    let mut services = Services::new();
    v.register(&mut services, &config.server);
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let timers = tokio::spawn(v.run_timers(async move {
        let _ = stop_rx.changed().await;
    }));
    let result = draughts_runtime::serve(&config.server, services, listener, async move {
        shutdown.await;
    })
    .await;
    let _ = stop_tx.send(true);
    let _ = timers.await;
    result?;
    Ok(())
}
