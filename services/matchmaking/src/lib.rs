//! The matchmaking service: `draughts.v1.Matchmaking` (quick pairing pools and their waves, lobby
//! seeks, challenges and rematches over Games' invitations, the lobby's numbers).
//!
//! Layout (dependencies flow down; only `grpc` knows tonic's server types):
//! - [`pairing`]: one wave's pairing, pure (no I/O, no async);
//! - [`pools`]: the configured pools and their ids;
//! - [`ports`]: what is asked of Games and Ratings (traits) and their gRPC clients;
//! - [`core`]: seeks, pools, fenced wave leases and two-step pairings over the live store (its names and
//!   payloads: `draughts_proto::contract::matchmaking`);
//! - [`service`]: the API's domain (following a seek, the wave loop, lobby seeks, invitations, numbers);
//! - [`grpc`]: the edge; [`error`]: the one error enum.
//!
//! `main.rs` (`draughts-matchmaking`) serves it alone; `draughtsd` registers [`Matchmaking`] on its port
//! and runs [`Matchmaking::run_waves`] with the other background work.
//!
//! ```
//! use draughts_matchmaking::pairing::{pair, Candidate, Rules};
//! let rules = Rules { base_gap: 100, widen_per_wave: 50, max_gap: 500, provisional_extra: 200, aborter_waves: 3 };
//! assert_eq!(pair(&[Candidate::new("player:a", 1500), Candidate::new("player:b", 1550)], &rules), vec![(0, 1)]);
//! ```

pub mod core;
pub mod error;
pub mod grpc;
pub mod pairing;
pub mod pools;
pub mod ports;
pub mod service;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use draughts_auth::{AuthConfig, AuthLayer, Authenticator, CallPolicy, Identities};
use draughts_proto::pb::matchmaking_server::MatchmakingServer;
use draughts_runtime::{BackendConfig, ConfigError, ServerConfig, Services, TelemetryConfig};
use draughts_store::LiveStore;
use tokio::net::TcpListener;

pub use error::{MatchmakingError, MatchmakingResult};
pub use service::MatchmakingCore;

/// Calls that only read (they fail open, bounded, when the rate counters are down).
pub const MATCHMAKING_READS: CallPolicy =
    CallPolicy::reads(&["ListPools", "ListLobbySeeks", "WatchLobby"]);

/// Settings of matchmaking: flags with environment fallbacks.
#[derive(Clone, Debug, clap::Args)]
pub struct MatchmakingConfig {
    /// Variants with quick-pairing pools (engine keys, comma-separated, or `all`).
    #[arg(
        long,
        env = "DRAUGHTS_MATCHMAKING_VARIANTS",
        default_value = "all",
        value_delimiter = ','
    )]
    pub matchmaking_variants: Vec<String>,
    /// Time controls of the pools: MINUTES+SECONDS or corrDAYS, comma-separated (each rated and casual).
    #[arg(
        long,
        env = "DRAUGHTS_MATCHMAKING_TIME_CONTROLS",
        default_value = pools::DEFAULT_TIME_CONTROLS,
        value_delimiter = ','
    )]
    pub matchmaking_time_controls: Vec<String>,
    /// Time between two waves of a pool, milliseconds (a new seek also triggers one at once).
    #[arg(long, env = "DRAUGHTS_MATCHMAKING_WAVE_MS", default_value_t = 2000)]
    pub matchmaking_wave_ms: u64,
    /// A seek lapses this long after its stream was last seen (a replica died), milliseconds.
    #[arg(
        long,
        env = "DRAUGHTS_MATCHMAKING_SEEK_TTL_MS",
        default_value_t = 15_000
    )]
    pub matchmaking_seek_ttl_ms: u64,
    /// Allowed rating gap in a seek's first wave, rating points.
    #[arg(long, env = "DRAUGHTS_MATCHMAKING_BASE_GAP", default_value_t = 100)]
    pub matchmaking_base_gap: i32,
    /// Added to the allowed gap for every wave missed, rating points.
    #[arg(
        long,
        env = "DRAUGHTS_MATCHMAKING_WIDEN_PER_WAVE",
        default_value_t = 50
    )]
    pub matchmaking_widen_per_wave: i32,
    /// The allowed gap never exceeds this (before the provisional extra), rating points.
    #[arg(long, env = "DRAUGHTS_MATCHMAKING_MAX_GAP", default_value_t = 500)]
    pub matchmaking_max_gap: i32,
    /// Added to the allowed gap of a provisional rating, rating points.
    #[arg(
        long,
        env = "DRAUGHTS_MATCHMAKING_PROVISIONAL_EXTRA",
        default_value_t = 200
    )]
    pub matchmaking_provisional_extra: i32,
    /// Waves an aborter waits before being paired with a non-aborter.
    #[arg(long, env = "DRAUGHTS_MATCHMAKING_ABORTER_WAVES", default_value_t = 5)]
    pub matchmaking_aborter_waves: u32,
    /// The Games service (`http://host:port`); draughtsd uses its own port.
    #[arg(long, env = "DRAUGHTS_MATCHMAKING_GAMES_URL")]
    pub matchmaking_games_url: Option<String>,
    /// The Ratings service (`http://host:port`); draughtsd uses its own port.
    #[arg(long, env = "DRAUGHTS_MATCHMAKING_RATINGS_URL")]
    pub matchmaking_ratings_url: Option<String>,
    /// The service credential for Games.CreateGame: an API key with the `play` and `admin` scopes.
    #[arg(long, env = "DRAUGHTS_MATCHMAKING_API_KEY", hide_env_values = true)]
    pub matchmaking_api_key: Option<String>,
    /// Variants Ratings rates per speed class (its own setting; international by default).
    #[arg(
        long,
        env = "DRAUGHTS_MATCHMAKING_PER_SPEED_VARIANTS",
        default_value = "international",
        value_delimiter = ','
    )]
    pub matchmaking_per_speed_variants: Vec<String>,
    /// Most lobby seeks standing at once from one client address (IPv6: one network, see
    /// `--address-v6-prefix`), whoever the players; 0 = no bound. Behind a proxy, set the edge to
    /// pass clients' addresses (`--trust-forwarded-for`), or every client shares the proxy's.
    #[arg(
        long,
        env = "DRAUGHTS_MATCHMAKING_LOBBY_SEEKS_PER_ADDRESS",
        default_value_t = crate::service::MAX_LOBBY_SEEKS_PER_ADDRESS
    )]
    pub matchmaking_lobby_seeks_per_address: u64,
}

impl MatchmakingConfig {
    pub fn defaults() -> MatchmakingConfig {
        MatchmakingConfig {
            matchmaking_variants: vec!["all".into()],
            matchmaking_time_controls: pools::DEFAULT_TIME_CONTROLS
                .split(',')
                .map(String::from)
                .collect(),
            matchmaking_wave_ms: 2000,
            matchmaking_seek_ttl_ms: 15_000,
            matchmaking_base_gap: 100,
            matchmaking_widen_per_wave: 50,
            matchmaking_max_gap: 500,
            matchmaking_provisional_extra: 200,
            matchmaking_aborter_waves: 5,
            matchmaking_games_url: None,
            matchmaking_ratings_url: None,
            matchmaking_api_key: None,
            matchmaking_per_speed_variants: vec!["international".into()],
            matchmaking_lobby_seeks_per_address: crate::service::MAX_LOBBY_SEEKS_PER_ADDRESS,
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
        pools::pools(&self.matchmaking_variants, &self.matchmaking_time_controls)
            .map_err(|e| ConfigError(format!("matchmaking pools: {e}")))?;
        check(
            (50..=60_000).contains(&self.matchmaking_wave_ms),
            "matchmaking-wave-ms must be from 50 to 60000",
        )?;
        check(
            (1000..=600_000).contains(&self.matchmaking_seek_ttl_ms),
            "matchmaking-seek-ttl-ms must be from 1000 to 600000",
        )?;
        for (value, name) in [
            (self.matchmaking_base_gap, "base-gap"),
            (self.matchmaking_widen_per_wave, "widen-per-wave"),
            (self.matchmaking_max_gap, "max-gap"),
            (self.matchmaking_provisional_extra, "provisional-extra"),
        ] {
            check(
                (0..=4000).contains(&value),
                &format!("matchmaking-{name} must be from 0 to 4000"),
            )?;
        }
        self.per_speed()?;
        Ok(())
    }

    fn per_speed(&self) -> Result<Vec<draughts_engine::Variant>, ConfigError> {
        self.matchmaking_per_speed_variants
            .iter()
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.parse()
                    .map_err(|_| ConfigError(format!("matchmaking-per-speed-variants: {v:?}")))
            })
            .collect()
    }

    pub fn settings(&self) -> core::Settings {
        core::Settings {
            wave_interval: Duration::from_millis(self.matchmaking_wave_ms),
            seek_ttl: Duration::from_millis(self.matchmaking_seek_ttl_ms),
            lease_ttl: Duration::from_millis(self.matchmaking_wave_ms * 3),
            rules: pairing::Rules {
                base_gap: self.matchmaking_base_gap,
                widen_per_wave: self.matchmaking_widen_per_wave,
                max_gap: self.matchmaking_max_gap,
                provisional_extra: self.matchmaking_provisional_extra,
                aborter_waves: self.matchmaking_aborter_waves,
            },
            max_pools_per_seek: 8,
            commit_retry: Duration::from_secs(10),
            lobby_seeks_per_address: self.matchmaking_lobby_seeks_per_address,
            lobby_seek_lives_for: crate::service::LOBBY_SEEK_LIVES_FOR,
        }
    }
}

/// Configuration of the `draughts-matchmaking` binary.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "draughts-matchmaking",
    version,
    about = "Quick pairing, lobby seeks, challenges and the lobby's numbers (draughts.v1.Matchmaking)"
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
    pub matchmaking: MatchmakingConfig,
}

impl Config {
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.server.validate()?;
        self.telemetry.validate()?;
        self.backends.validate()?;
        self.auth.validate()?;
        self.matchmaking.validate()?;
        let m = &self.matchmaking;
        if m.matchmaking_games_url.is_none()
            || m.matchmaking_ratings_url.is_none()
            || m.matchmaking_api_key.is_none()
        {
            return Err(ConfigError(
                "draughts-matchmaking needs --matchmaking-games-url, --matchmaking-ratings-url and --matchmaking-api-key (an admin API key)".into(),
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
    #[error(transparent)]
    Serve(#[from] draughts_runtime::ServeError),
}

/// The matchmaking service on a live store.
#[derive(Clone, Debug)]
pub struct Matchmaking {
    pub core: MatchmakingCore,
}

impl Matchmaking {
    /// Builds the service; Games and Ratings are reached at the configured addresses with the
    /// configured service credential.
    pub fn new(
        live: Arc<dyn LiveStore>,
        identities: Identities,
        config: &MatchmakingConfig,
    ) -> Result<Matchmaking, StartError> {
        config.validate()?;
        let missing = |what: &str| ConfigError(format!("matchmaking needs {what}"));
        let platform = Arc::new(ports::GrpcPlatform::new(
            config
                .matchmaking_games_url
                .as_deref()
                .ok_or_else(|| missing("--matchmaking-games-url"))?,
            config
                .matchmaking_ratings_url
                .as_deref()
                .ok_or_else(|| missing("--matchmaking-ratings-url"))?,
            config
                .matchmaking_api_key
                .as_deref()
                .ok_or_else(|| missing("--matchmaking-api-key"))?,
            config.per_speed()?,
        )?);
        let pools = pools::pools(
            &config.matchmaking_variants,
            &config.matchmaking_time_controls,
        )
        .map_err(ConfigError)?;
        let mm = core::Matchmaker {
            live,
            pools: Arc::new(pools),
            settings: config.settings(),
            games: platform.clone(),
            ratings: platform,
            identities,
            replica: format!("mm-{}", hex::encode(rand::random::<[u8; 6]>())),
        };
        Ok(Matchmaking {
            core: MatchmakingCore::new(mm),
        })
    }

    /// Adds `draughts.v1.Matchmaking` to a host, behind the authentication layer of `auth`.
    pub fn register(&self, services: &mut Services, server: &ServerConfig, auth: &Authenticator) {
        let api = MatchmakingServer::new(grpc::MatchmakingService::new(self.core.clone()))
            .max_decoding_message_size(server.max_message_bytes);
        services.add(tower::Layer::layer(
            &AuthLayer::new(auth.clone()).with_policy(MATCHMAKING_READS),
            api,
        ));
    }

    /// Waves, recovery of pairings and the lobby's numbers until `shutdown` resolves. Every replica
    /// runs it; each pool's waves run on the one holding its lease.
    pub async fn run_waves(self, shutdown: impl Future<Output = ()>) {
        self.core.run_waves(shutdown).await
    }
}

/// Serves `draughts.v1.Matchmaking` on `listener` until `shutdown` resolves.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    config.validate()?;
    let live =
        draughts_store::open_live_store(&config.backends.redis_url, &config.backends.key_prefix)
            .await?;
    let auth = Authenticator::new(config.auth.clone(), live.clone())?;
    let matchmaking = Matchmaking::new(live, auth.identities().clone(), &config.matchmaking)?;
    let mut services = Services::new();
    matchmaking.register(&mut services, &config.server, &auth);
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let waves = tokio::spawn(matchmaking.run_waves(async move {
        let _ = stop_rx.changed().await;
    }));
    let served = draughts_runtime::serve(&config.server, services, listener, shutdown).await;
    let _ = stop_tx.send(true);
    let _ = waves.await;
    served?;
    Ok(())
}
