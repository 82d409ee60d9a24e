//! The one-process platform: every service that exists, registered on one gRPC port.
//!
//! By default everything runs on embedded backends that need no server: live state and queues in
//! memory (`memory://`), durable records in a SQLite file. Give `--redis-url redis://...` (or
//! `redis+cluster://host:port,host:port` for a Redis Cluster) and `--database-url postgres://...` to
//! run on Redis and PostgreSQL, as the separate services do in a deployment. Backends are connected (and migrated) at start, so a wrong URL fails fast.

pub mod computer;
pub mod feeds;

use std::sync::Arc;

use draughts_runtime::{BackendConfig, ConfigError, ServerConfig, Services, TelemetryConfig};
use draughts_store::{Database, LiveStore};
use tokio::net::TcpListener;

/// Where `draughtsd` listens for gRPC and gRPC-Web unless told otherwise: loopback.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:50051";
/// Where `draughtsd` serves Prometheus metrics unless told otherwise: loopback.
pub const DEFAULT_METRICS_LISTEN: &str = "127.0.0.1:9090";

/// Configuration of `draughtsd`.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "draughtsd",
    version,
    about = "The draughts platform in one process: every service on one port",
    // The one-process mode runs on a developer's machine: loopback only by default. A deployment
    // sets --listen / DRAUGHTS_LISTEN (and --metrics-listen / DRAUGHTS_METRICS_LISTEN), e.g. 0.0.0.0:50051.
    mut_arg("listen", |a| a.default_value(DEFAULT_LISTEN)),
    mut_arg("metrics_listen", |a| a.default_value(DEFAULT_METRICS_LISTEN))
)]
pub struct Config {
    #[command(flatten)]
    pub server: ServerConfig,
    #[command(flatten)]
    pub telemetry: TelemetryConfig,
    #[command(flatten)]
    pub backends: BackendConfig,
    #[command(flatten)]
    pub auth: draughts_validation::auth::AuthConfig,
    #[command(flatten)]
    pub ratings: draughts_ratings::RatingsConfig,
    #[command(flatten)]
    pub games: draughts_validation::games::GamesLimits,
    #[command(flatten)]
    pub analysis: draughts_analysis::AnalysisConfig,
    #[command(flatten)]
    pub analysis_workers: draughts_analysis::WorkerArgs,
    #[command(flatten)]
    pub matchmaking: draughts_matchmaking::MatchmakingConfig,
    #[command(flatten)]
    pub tournaments: draughts_tournaments::TournamentsConfig,
    /// Run no analysis workers in this process (workers run as `draughts-analysis-worker` on the same
    /// Redis). Without Redis nothing else sees the queue, so this is refused with `memory://`.
    #[arg(long, env = "DRAUGHTS_ANALYSIS_EXTERNAL_WORKERS")]
    pub analysis_external_workers: bool,
    /// Folder of the web client's built files, served on the gRPC port (open `http://<listen>/`).
    /// Unset: the repository's `web/dist` when it has been built (`npm run build` in `web/`). The API
    /// reference is served at `/api-reference.md` with or without it (built into the binary).
    #[arg(long, env = "DRAUGHTS_WEB_DIR", conflicts_with = "no_web")]
    pub web_dir: Option<std::path::PathBuf>,
    /// Serve no web client (the API reference at `/api-reference.md` is still served).
    #[arg(long, env = "DRAUGHTS_NO_WEB")]
    pub no_web: bool,
}

/// Where the repository's web client is built (`web/dist`), as seen from this crate's sources.
pub const REPOSITORY_WEB_DIST: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../web/dist");

impl Config {
    /// Port 0 on loopback, the given backends, test secrets, short consumer waits, one analysis slot.
    pub fn for_tests(redis_url: &str, database_url: &str) -> Config {
        Config {
            server: ServerConfig::for_tests(),
            telemetry: TelemetryConfig::for_tests(),
            backends: BackendConfig {
                redis_url: redis_url.into(),
                key_prefix: "test:".into(),
                database_url: database_url.into(),
            },
            auth: draughts_validation::auth::AuthConfig::for_tests(),
            ratings: draughts_ratings::RatingsConfig {
                block_ms: 50,
                ..draughts_ratings::RatingsConfig::defaults()
            },
            games: draughts_validation::games::GamesLimits::defaults(),
            analysis: draughts_analysis::AnalysisConfig::defaults(),
            analysis_workers: draughts_analysis::WorkerArgs {
                analysis_slots: 1,
                analysis_reserved_computer_slots: None,
                analysis_hash_mb: 1,
                analysis_worker_name: None,
                analysis_shutdown_grace_ms: 1_000,
                analysis_bitbases: None,
                analysis_bitbases_build: "none".into(),
            },
            analysis_external_workers: false,
            matchmaking: draughts_matchmaking::MatchmakingConfig {
                matchmaking_wave_ms: 200,
                ..draughts_matchmaking::MatchmakingConfig::defaults()
            },
            tournaments: draughts_tournaments::TournamentsConfig {
                tournaments_wave_ms: 300,
                tournaments_tick_ms: 100,
                tournaments_min_arena_secs: 2,
                tournaments_claim_idle_ms: 2_000,
                ..draughts_tournaments::TournamentsConfig::defaults()
            },
            web_dir: None,
            no_web: true,
        }
    }

    /// The folder of web client files to serve, if any: `--web-dir`, else the repository's built
    /// `web/dist` (when its `index.html` exists); none with `--no-web`.
    pub fn web_files(&self) -> Option<std::path::PathBuf> {
        if self.no_web {
            return None;
        }
        match &self.web_dir {
            Some(dir) => Some(dir.clone()),
            None => {
                let dist = std::path::Path::new(REPOSITORY_WEB_DIST);
                dist.join("index.html")
                    .is_file()
                    .then(|| dist.to_path_buf())
            }
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        self.server.validate()?;
        self.telemetry.validate()?;
        self.backends.validate()?;
        if self.auth.token_secret.is_empty() {
            // The signing keys then come from the database at start (see `run`): check the rest.
            let mut auth = self.auth.clone();
            auth.token_secret = "0".repeat(draughts_validation::auth::config::MIN_SECRET_BYTES);
            auth.validate()?;
        } else {
            self.auth.validate()?;
        }
        self.ratings.validate()?;
        self.games.validate()?;
        self.matchmaking.validate()?;
        self.tournaments.validate()?;
        if let Some(dir) = &self.web_dir
            && !self.no_web
            && !dir.join("index.html").is_file()
        {
            return Err(ConfigError(format!(
                "web-dir (DRAUGHTS_WEB_DIR) {}: no index.html there (build the client with `npm run build` in web/)",
                dir.display()
            )));
        }
        Ok(())
    }
}

/// The file of a SQLite `database_url` (`None`: in memory, or another database).
pub fn sqlite_file(database_url: &str) -> Option<&str> {
    let rest = database_url
        .strip_prefix("sqlite://")
        .or_else(|| database_url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or_default();
    if path.is_empty() || path.starts_with(":memory:") || database_url.contains("mode=memory") {
        return None;
    }
    Some(path)
}

/// Where `draughtsd` keeps its endgame tables when `--analysis-bitbases` is unset: `draughts-bitbases`
/// beside its SQLite file, so the embedded install keeps its data together (none with a database in
/// memory or PostgreSQL: a deployment names its directory).
///
/// ```
/// use draughtsd::default_bitbases_dir;
/// use std::path::PathBuf;
/// let dir = |url| default_bitbases_dir(url);
/// assert_eq!(dir("sqlite://draughts.sqlite3?mode=rwc"), Some(PathBuf::from("draughts-bitbases")));
/// assert_eq!(dir("sqlite:///var/lib/d/db.sqlite3"), Some(PathBuf::from("/var/lib/d/draughts-bitbases")));
/// assert_eq!(dir("sqlite::memory:"), None);
/// assert_eq!(dir("sqlite://x.db?mode=memory&cache=shared"), None);
/// assert_eq!(dir("postgres://u@h/db"), None);
/// ```
pub fn default_bitbases_dir(database_url: &str) -> Option<std::path::PathBuf> {
    let file = std::path::Path::new(sqlite_file(database_url)?);
    let parent = file.parent().unwrap_or(std::path::Path::new(""));
    Some(parent.join("draughts-bitbases"))
}

/// Makes the SQLite file of `database_url` (and its journal files) readable by its owner only: it
/// holds password hashes and the token signing keys. Other URLs are left alone.
pub fn protect_database_file(database_url: &str) {
    let Some(path) = sqlite_file(database_url) else {
        return;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for file in [
            path.to_owned(),
            format!("{path}-wal"),
            format!("{path}-shm"),
        ] {
            if std::path::Path::new(&file).exists()
                && let Err(e) =
                    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))
            {
                tracing::warn!(file, error = %e, "could not make the database file private");
            }
        }
    }
}

/// A random 64-hex-digit secret, for the embedded default when no token secret is configured.
pub fn random_secret() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// Starting the platform failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("backend: {0}")]
    Store(#[from] draughts_store::StoreError),
    #[error(transparent)]
    Serve(#[from] draughts_runtime::ServeError),
    #[error(transparent)]
    Validation(#[from] draughts_validation::StartError),
    #[error(transparent)]
    Ratings(#[from] draughts_ratings::StartError),
    #[error(transparent)]
    Analysis(#[from] draughts_analysis::StartError),
    #[error(transparent)]
    Matchmaking(#[from] draughts_matchmaking::StartError),
    #[error(transparent)]
    Tournaments(#[from] draughts_tournaments::StartError),
}

/// The connected backends, shared by every service of the process.
#[derive(Clone)]
pub struct Backends {
    pub live: Arc<dyn LiveStore>,
    pub db: Database,
}

impl std::fmt::Debug for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backends")
            .field("db", &self.db.backend())
            .finish_non_exhaustive()
    }
}

/// Connects the live store and the database named in the configuration.
pub async fn connect(config: &Config) -> Result<Backends, StartError> {
    let (live, db) = draughts_validation::connect(&config.backends).await?;
    Ok(Backends { live, db })
}

/// The stateful services of the platform, built on its backends.
#[derive(Clone, Debug)]
pub struct Platform {
    pub validation: draughts_validation::Validation,
    pub ratings: draughts_ratings::Ratings,
    pub analysis: draughts_analysis::Analysis,
    pub matchmaking: draughts_matchmaking::Matchmaking,
    pub tournaments: draughts_tournaments::Tournaments,
    /// In-process analysis workers (`None`: external workers serve the queue).
    pub analysis_workers: Option<draughts_analysis::WorkerConfig>,
}

impl Platform {
    pub async fn new(config: &Config, backends: &Backends) -> Result<Platform, StartError> {
        let validation = draughts_validation::Validation::new(
            backends.live.clone(),
            backends.db.clone(),
            &config.auth,
            Arc::new(draughts_validation::games::SystemClock),
        )
        .await?
        .with_limits(config.games.clone());
        // The reconciler learns of finished games from what Games publishes, in process.
        let ratings = draughts_ratings::Ratings::new(
            backends.live.clone(),
            backends.db.clone(),
            &config.ratings,
        )
        .await?
        .with_finished_feed(Arc::new(feeds::GamesFinishedFeed {
            games: validation.games.clone(),
        }));
        let analysis =
            draughts_analysis::Analysis::new(backends.live.clone(), &config.analysis).await?;
        // The computer players move through this process's analysis queue.
        let validation = validation.with_computer(Arc::new(computer::QueuedComputer {
            analysis: analysis.core.clone(),
        }));
        // `run` points matchmaking at this process's port; a platform built without `run` (tests)
        // gets the configured listen address and the admin key (or a random one).
        let mut mm_config = config.matchmaking.clone();
        let own = format!("http://{}", config.server.listen);
        mm_config
            .matchmaking_games_url
            .get_or_insert_with(|| own.clone());
        mm_config.matchmaking_ratings_url.get_or_insert(own.clone());
        if mm_config.matchmaking_api_key.is_none() {
            mm_config.matchmaking_api_key = Some(
                config
                    .auth
                    .admin_api_key
                    .clone()
                    .unwrap_or_else(|| format!("dk_{}", random_secret())),
            );
        }
        let matchmaking = draughts_matchmaking::Matchmaking::new(
            backends.live.clone(),
            validation.auth.identities().clone(),
            &mm_config,
        )?;
        // Tournaments too: this process's Games and Ratings, the same service credential.
        let mut t_config = config.tournaments.clone();
        t_config
            .tournaments_games_url
            .get_or_insert_with(|| own.clone());
        t_config.tournaments_ratings_url.get_or_insert(own);
        t_config
            .tournaments_api_key
            .get_or_insert_with(|| mm_config.matchmaking_api_key.clone().unwrap_or_default());
        let tournaments = draughts_tournaments::Tournaments::new(
            backends.live.clone(),
            backends.db.clone(),
            &t_config,
        )
        .await?;
        Ok(Platform {
            validation,
            ratings,
            analysis,
            matchmaking,
            tournaments,
            analysis_workers: match config.analysis_external_workers {
                false => {
                    let mut args = config.analysis_workers.clone();
                    if args.analysis_bitbases.is_none() {
                        args.analysis_bitbases =
                            default_bitbases_dir(&config.backends.database_url);
                    }
                    Some(args.worker()?)
                }
                true => None,
            },
        })
    }

    /// Every service, registered on one host.
    pub fn services(&self, config: &Config) -> Services {
        let mut services = Services::new();
        self.validation.register(&mut services, &config.server);
        self.ratings
            .register(&mut services, &config.server, &self.validation.auth);
        self.analysis
            .register(&mut services, &config.server, &self.validation.auth);
        self.matchmaking
            .register(&mut services, &config.server, &self.validation.auth);
        self.tournaments
            .register(&mut services, &config.server, &self.validation.auth);
        services
    }

    /// Background work of every service (clocks and archiving; the ratings consumer of the
    /// finished-games stream) until `shutdown` resolves.
    pub async fn run_background(self, shutdown: impl std::future::Future<Output = ()>) {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|stop| *stop).await;
        };
        let timers = self.validation.run_timers(stopped(stop_rx.clone()));
        let consumer = self.ratings.run_consumer(stopped(stop_rx.clone()));
        let bulk = self.analysis.clone().run_bulk(stopped(stop_rx.clone()));
        let waves = self.matchmaking.run_waves(stopped(stop_rx.clone()));
        let tournaments = self.tournaments.run_background(stopped(stop_rx.clone()));
        let workers = async {
            if let Some(workers) = self.analysis_workers {
                self.analysis.run_workers(workers, stopped(stop_rx)).await;
            }
        };
        let signal = async move {
            shutdown.await;
            let _ = stop_tx.send(true);
        };
        tokio::join!(timers, consumer, bulk, waves, tournaments, workers, signal);
    }
}

/// Connects the backends and serves every service on `listener` until `shutdown` resolves.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    config.validate()?;
    let mut config = config;
    if config.analysis.analysis_games_url.is_none() {
        // Game ids are read through Games.GetGame on this very port.
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        config.analysis.analysis_games_url = Some(format!("http://127.0.0.1:{port}"));
    }
    // Matchmaking reaches Games and Ratings on this very port, with the admin key as its service
    // credential (a random one, known only to this process, when none is configured).
    let own = format!(
        "http://127.0.0.1:{}",
        listener.local_addr().map(|a| a.port()).unwrap_or(0)
    );
    let m = &mut config.matchmaking;
    m.matchmaking_games_url.get_or_insert_with(|| own.clone());
    m.matchmaking_ratings_url.get_or_insert_with(|| own.clone());
    if m.matchmaking_api_key.is_none() {
        let key = config
            .auth
            .admin_api_key
            .get_or_insert_with(|| format!("dk_{}", random_secret()))
            .clone();
        config.matchmaking.matchmaking_api_key = Some(key);
    }
    let t = &mut config.tournaments;
    t.tournaments_games_url.get_or_insert_with(|| own.clone());
    t.tournaments_ratings_url.get_or_insert_with(|| own.clone());
    if t.tournaments_api_key.is_none() {
        t.tournaments_api_key = config.matchmaking.matchmaking_api_key.clone();
    }
    let backends = connect(&config).await?;
    protect_database_file(&config.backends.database_url);
    if config.auth.token_secret.is_empty() {
        // No keys given: the platform keeps its own in its database, so sessions and guest tokens
        // survive restarts (a new key every 90 days; old ones verify while their tokens can live).
        let keep = std::time::Duration::from_secs(config.auth.guest_token_ttl_secs + 24 * 3600);
        let (current, previous) = draughts_validation::auth::signing::load_or_create(
            &backends.db,
            draughts_validation::auth::signing::ROTATE_AFTER,
            keep,
        )
        .await?;
        tracing::info!(
            verifying_keys = previous.len() + 1,
            "token signing keys from the database (no DRAUGHTS_TOKEN_SECRET given)"
        );
        config.auth.token_secret = current;
        config.auth.token_secret_previous.extend(previous);
    }
    let platform = Platform::new(&config, &backends).await?;
    let mut services = platform.services(&config);
    let web = config.web_files();
    if let Some(dir) = &web {
        services.serve_files(dir);
    }
    tracing::info!(
        services = ?services.names(),
        web = ?web,
        live = %config.backends.redis_url,
        database = ?backends.db.backend(),
        "draughtsd starting"
    );
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let background = tokio::spawn(platform.run_background(async move {
        let _ = stop_rx.changed().await;
    }));
    let served = draughts_runtime::serve(&config.server, services, listener, shutdown).await;
    let _ = stop_tx.send(true);
    let _ = background.await;
    served?;
    Ok(())
}
