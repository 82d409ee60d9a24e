//! Configuration, wiring and the `run` entry point of the service.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use draughts_auth::{AuthConfig, AuthLayer, Authenticator, CallPolicy};
use draughts_proto::pb::tournaments_server::TournamentsServer;
use draughts_runtime::{BackendConfig, ConfigError, ServerConfig, Services, TelemetryConfig};
use draughts_store::{Database, LiveStore};
use tokio::net::TcpListener;

use crate::loops::{self, ConsumerSettings};
use crate::service::{Settings, TournamentsCore};
use crate::store::Archive;
use crate::{ports, terms};

/// Calls that only read (they fail open, bounded, when the rate counters are down).
pub const TOURNAMENTS_READS: CallPolicy =
    CallPolicy::reads(&["ListTournaments", "GetTournament", "WatchTournament"]);

/// Settings of tournaments: flags with environment fallbacks.
#[derive(Clone, Debug, clap::Args)]
pub struct TournamentsConfig {
    /// Time between two arena waves, milliseconds.
    #[arg(long, env = "DRAUGHTS_TOURNAMENTS_WAVE_MS", default_value_t = 3000)]
    pub tournaments_wave_ms: u64,
    /// Time between two turns of the scheduler, milliseconds (how soon a Swiss round follows the
    /// previous one's last game, and an arena's end is seen).
    #[arg(long, env = "DRAUGHTS_TOURNAMENTS_TICK_MS", default_value_t = 500)]
    pub tournaments_tick_ms: u64,
    /// Open (upcoming or running) tournaments per creator; admins are not bounded.
    #[arg(
        long,
        env = "DRAUGHTS_TOURNAMENTS_MAX_OPEN_PER_CREATOR",
        default_value_t = 3
    )]
    pub tournaments_max_open_per_creator: usize,
    /// The shortest arena, seconds.
    #[arg(
        long,
        env = "DRAUGHTS_TOURNAMENTS_MIN_ARENA_SECS",
        default_value_t = 60
    )]
    pub tournaments_min_arena_secs: u32,
    /// The consumer group on `games.finished`.
    #[arg(
        long,
        env = "DRAUGHTS_TOURNAMENTS_CONSUMER_GROUP",
        default_value = "tournaments"
    )]
    pub tournaments_consumer_group: String,
    /// Entries pending this long with a consumer that died are taken over, milliseconds.
    #[arg(
        long,
        env = "DRAUGHTS_TOURNAMENTS_CLAIM_IDLE_MS",
        default_value_t = 30_000
    )]
    pub tournaments_claim_idle_ms: u64,
    /// The Games service (`http://host:port`); draughtsd uses its own port.
    #[arg(long, env = "DRAUGHTS_TOURNAMENTS_GAMES_URL")]
    pub tournaments_games_url: Option<String>,
    /// The Ratings service (`http://host:port`); draughtsd uses its own port.
    #[arg(long, env = "DRAUGHTS_TOURNAMENTS_RATINGS_URL")]
    pub tournaments_ratings_url: Option<String>,
    /// The service credential: an API key with the `play`, `admin` and `service` scopes.
    #[arg(long, env = "DRAUGHTS_TOURNAMENTS_API_KEY", hide_env_values = true)]
    pub tournaments_api_key: Option<String>,
    /// Variants Ratings rates per speed class (its own setting; international by default).
    #[arg(
        long,
        env = "DRAUGHTS_TOURNAMENTS_PER_SPEED_VARIANTS",
        default_value = "international",
        value_delimiter = ','
    )]
    pub tournaments_per_speed_variants: Vec<String>,
}

impl TournamentsConfig {
    pub fn defaults() -> TournamentsConfig {
        TournamentsConfig {
            tournaments_wave_ms: 3000,
            tournaments_tick_ms: 500,
            tournaments_max_open_per_creator: 3,
            tournaments_min_arena_secs: 60,
            tournaments_consumer_group: "tournaments".into(),
            tournaments_claim_idle_ms: 30_000,
            tournaments_games_url: None,
            tournaments_ratings_url: None,
            tournaments_api_key: None,
            tournaments_per_speed_variants: vec!["international".into()],
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = |ok: bool, text: &str| {
            if ok {
                Ok(())
            } else {
                Err(ConfigError(text.into()))
            }
        };
        check(
            (100..=60_000).contains(&self.tournaments_wave_ms),
            "tournaments-wave-ms must be from 100 to 60000",
        )?;
        check(
            (50..=10_000).contains(&self.tournaments_tick_ms),
            "tournaments-tick-ms must be from 50 to 10000",
        )?;
        check(
            (1..=100).contains(&self.tournaments_max_open_per_creator),
            "tournaments-max-open-per-creator must be from 1 to 100",
        )?;
        check(
            (1..=terms::MAX_ARENA_SECS).contains(&self.tournaments_min_arena_secs),
            "tournaments-min-arena-secs must be from 1 to 86400",
        )?;
        check(
            !self.tournaments_consumer_group.is_empty(),
            "tournaments-consumer-group must not be empty",
        )?;
        check(
            (1000..=3_600_000).contains(&self.tournaments_claim_idle_ms),
            "tournaments-claim-idle-ms must be from 1000 to 3600000",
        )?;
        self.per_speed()?;
        Ok(())
    }

    fn per_speed(&self) -> Result<Vec<draughts_engine::Variant>, ConfigError> {
        self.tournaments_per_speed_variants
            .iter()
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.parse()
                    .map_err(|_| ConfigError(format!("tournaments-per-speed-variants: {v:?}")))
            })
            .collect()
    }

    pub fn settings(&self) -> Settings {
        let tick = Duration::from_millis(self.tournaments_tick_ms);
        Settings {
            wave_interval: Duration::from_millis(self.tournaments_wave_ms),
            tick,
            lease_ttl: (tick * 6).max(Duration::from_secs(3)),
            max_open_per_creator: self.tournaments_max_open_per_creator,
            max_open_total: 10_000,
            limits: terms::Limits {
                min_arena_secs: self.tournaments_min_arena_secs,
            },
            finished_ttl: Duration::from_secs(86_400),
        }
    }
}

/// Configuration of the `draughts-tournaments` binary.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "draughts-tournaments",
    version,
    about = "Arenas and Swiss events (draughts.v1.Tournaments)"
)]
pub struct Config {
    #[command(flatten)]
    pub server: ServerConfig,
    #[command(flatten)]
    pub telemetry: TelemetryConfig,
    #[command(flatten)]
    pub backends: BackendConfig,
    #[command(flatten)]
    pub auth: AuthConfig,
    #[command(flatten)]
    pub tournaments: TournamentsConfig,
}

impl Config {
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.server.validate()?;
        self.telemetry.validate()?;
        self.backends.validate()?;
        self.auth.validate()?;
        self.tournaments.validate()?;
        let t = &self.tournaments;
        if t.tournaments_games_url.is_none()
            || t.tournaments_ratings_url.is_none()
            || t.tournaments_api_key.is_none()
        {
            return Err(ConfigError(
                "draughts-tournaments needs --tournaments-games-url, --tournaments-ratings-url and --tournaments-api-key (a service API key)".into(),
            ));
        }
        Ok(())
    }
}

/// Starting the service failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("backend: {0}")]
    Store(#[from] draughts_store::StoreError),
    #[error("auth: {0}")]
    Auth(#[from] draughts_auth::AuthError),
    #[error("tournaments: {0}")]
    Tournaments(#[from] crate::TournamentsError),
    #[error(transparent)]
    Serve(#[from] draughts_runtime::ServeError),
}

/// The tournaments service on a live store and a database.
#[derive(Clone, Debug)]
pub struct Tournaments {
    pub core: TournamentsCore,
    live: Arc<dyn LiveStore>,
    consumer: ConsumerSettings,
}

impl Tournaments {
    /// Builds the service (migrating its archive table); Games and Ratings are reached at the
    /// configured addresses with the configured service credential.
    pub async fn new(
        live: Arc<dyn LiveStore>,
        db: Database,
        config: &TournamentsConfig,
    ) -> Result<Tournaments, StartError> {
        config.validate()?;
        let missing = |what: &str| ConfigError(format!("tournaments needs {what}"));
        let platform = Arc::new(ports::GrpcPlatform::new(
            config
                .tournaments_games_url
                .as_deref()
                .ok_or_else(|| missing("--tournaments-games-url"))?,
            config
                .tournaments_ratings_url
                .as_deref()
                .ok_or_else(|| missing("--tournaments-ratings-url"))?,
            config
                .tournaments_api_key
                .as_deref()
                .ok_or_else(|| missing("--tournaments-api-key"))?,
            config.per_speed()?,
        )?);
        let archive = Archive::new(db).await?;
        let replica = format!("tour-{}", hex::encode(rand::random::<[u8; 6]>()));
        // The name in the scheduler leases (`tour-lease:<id>`) and the consumer group: an operator
        // (or the system test) finds which process holds a tournament's lease by it.
        tracing::info!(replica = %replica, "tournaments replica");
        let core = TournamentsCore::new(
            live.clone(),
            archive,
            platform.clone(),
            platform,
            config.settings(),
            replica.clone(),
        );
        Ok(Tournaments {
            core,
            live,
            consumer: ConsumerSettings {
                stream: draughts_proto::contract::finished::STREAM.into(),
                group: config.tournaments_consumer_group.clone(),
                name: replica,
                batch: 64,
                block: Duration::from_millis(500),
                claim_idle: Duration::from_millis(config.tournaments_claim_idle_ms),
            },
        })
    }

    /// Adds `draughts.v1.Tournaments` to a host, behind the authentication layer of `auth`.
    pub fn register(&self, services: &mut Services, server: &ServerConfig, auth: &Authenticator) {
        let api = TournamentsServer::new(crate::grpc::TournamentsService::new(self.core.clone()))
            .max_decoding_message_size(server.max_message_bytes);
        services.add(tower::Layer::layer(
            &AuthLayer::new(auth.clone()).with_policy(TOURNAMENTS_READS),
            api,
        ));
    }

    /// The scheduler and the consumer of `games.finished` until `shutdown` resolves. Every replica
    /// runs them.
    pub async fn run_background(self, shutdown: impl Future<Output = ()>) {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|stop| *stop).await;
        };
        let scheduler = loops::run_scheduler(self.core.clone(), stopped(stop_rx.clone()));
        let consumer = loops::run_consumer(
            self.core.clone(),
            self.live.clone(),
            self.consumer.clone(),
            stopped(stop_rx),
        );
        let signal = async move {
            shutdown.await;
            let _ = stop_tx.send(true);
        };
        tokio::join!(scheduler, consumer, signal);
    }
}

/// Serves `draughts.v1.Tournaments` on `listener` until `shutdown` resolves.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    config.validate()?;
    let live =
        draughts_store::open_live_store(&config.backends.redis_url, &config.backends.key_prefix)
            .await?;
    let db = Database::connect(&config.backends.database_url).await?;
    let auth = Authenticator::new(config.auth.clone(), live.clone())?;
    let tournaments = Tournaments::new(live, db, &config.tournaments).await?;
    let mut services = Services::new();
    tournaments.register(&mut services, &config.server, &auth);
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let background = tokio::spawn(tournaments.run_background(async move {
        let _ = stop_rx.changed().await;
    }));
    let served = draughts_runtime::serve(&config.server, services, listener, shutdown).await;
    let _ = stop_tx.send(true);
    let _ = background.await;
    served?;
    Ok(())
}
