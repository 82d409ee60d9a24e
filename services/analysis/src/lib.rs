//! The analysis service: `draughts.v1.Analysis` (analysis of positions and games on request, BestMove for
//! computer opponents and bots, the queue's status), its job queue, and the workers that run the
//! engine's search.
//!
//! Layout (dependencies flow down; workers need no gRPC server):
//! - [`contract`] (`draughts_proto::contract::analysis`): every name and payload the queue keeps in the
//!   live store (versioned JSON);
//! - [`engine`]: one job's search over `draughts_ai` (synchronous), the judgement of played moves;
//! - [`queue`]: submission (merging, cache, capacity), records, cancel, places, status;
//! - [`worker`]: the worker loop (priority pull, takeover of dead workers' jobs, exactly-once finish,
//!   progress, clean shutdown);
//! - [`quota`], [`games`], [`pdn`]: caps and quotas; reading stored games through `Games.GetGame`;
//!   reading PDN;
//! - [`service`]: the API's domain; [`grpc`]: the edge.
//!
//! `main.rs` (`draughts-analysis`) serves the API; `bin/worker.rs` (`draughts-analysis-worker`) runs
//! only workers; `draughtsd` registers [`Analysis`] on its port and runs [`worker::run`] in-process.
//!
//! ```
//! use draughts_analysis::{contract, engine, queue};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let live = draughts_store::open_live_store("memory://", "").await?;
//! let q = queue::Queue::new(live, queue::QueueConfig::for_tests()).await?;
//! let spec = contract::JobSpec::Position {
//!     line: contract::Line {
//!         rules: contract::Rules { variant: "english".into(), options: String::new() },
//!         fen: draughts_engine::Variant::English.start_fen().into(),
//!         moves: vec![],
//!     },
//!     limits: contract::JobLimits { depth: Some(4), multi_pv: 1, ..Default::default() },
//! };
//! let job = queue::NewJob {
//!     job_id: queue::Queue::new_job_id(), class: contract::Class::Interactive, spec,
//!     owner: Some("player:ann".parse().unwrap()), mergeable: true, trace: Default::default(),
//! };
//! let submitted = q.submit(job).await?;
//! assert_eq!(submitted.record().state, contract::JobState::Queued);
//! assert_eq!(q.status().await?.classes[1].1.queued, 1);
//! # Ok(()) }
//! ```

/// The queue's Redis contract lives with every other one in `draughts_proto::contract`.
pub use draughts_proto::contract::analysis as contract;
pub mod bulk;
pub mod engine;
pub mod error;
pub mod games;
pub mod grpc;
pub mod pdn;
pub mod queue;
pub mod quota;
pub mod service;
pub mod worker;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use draughts_auth::{AuthConfig, AuthLayer, Authenticator};
use draughts_proto::pb::analysis_server::AnalysisServer;
use draughts_runtime::{BackendConfig, ConfigError, ServerConfig, Services, TelemetryConfig};
use draughts_store::LiveStore;
use tokio::net::TcpListener;

pub use error::{AnalysisError, AnalysisResult};
pub use queue::{Queue, QueueConfig};
pub use quota::QuotaConfig;
pub use service::AnalysisCore;
pub use worker::WorkerConfig;

/// Settings of the queue and the API: flags with environment fallbacks.
#[derive(Clone, Debug, clap::Args)]
pub struct AnalysisConfig {
    /// How long jobs, results and evaluation-cache entries are kept, seconds.
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_RESULT_TTL_SECS",
        default_value_t = 86_400
    )]
    pub analysis_result_ttl_secs: u64,
    /// How long a delivered job may go without its worker before another worker checks on it
    /// (and takes it over when its worker is dead), milliseconds.
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_VISIBILITY_TIMEOUT_MS",
        default_value_t = 10_000
    )]
    pub analysis_visibility_timeout_ms: u64,
    /// Attempts before a job is marked failed.
    #[arg(long, env = "DRAUGHTS_ANALYSIS_MAX_ATTEMPTS", default_value_t = 3)]
    pub analysis_max_attempts: u32,
    /// Jobs waiting per class before new ones are refused (RESOURCE_EXHAUSTED).
    #[arg(long, env = "DRAUGHTS_ANALYSIS_MAX_QUEUED", default_value_t = 10_000)]
    pub analysis_max_queued: u64,
    /// Guests' BestMove jobs waiting before new ones are refused (RESOURCE_EXHAUSTED), all replicas
    /// together.
    #[arg(long, env = "DRAUGHTS_ANALYSIS_MAX_QUEUED_GUEST", default_value_t = 64)]
    pub analysis_max_queued_guest: u64,
    /// Longest wait of a BestMove call for its answer, milliseconds (keep it below the request timeout).
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_BEST_MOVE_TIMEOUT_MS",
        default_value_t = 8_000
    )]
    pub analysis_best_move_timeout_ms: u64,
    /// The Games service (`http://host:port`) that game ids are read from; unset: only positions and
    /// PDN are accepted (draughtsd sets its own port).
    #[arg(long, env = "DRAUGHTS_ANALYSIS_GAMES_URL")]
    pub analysis_games_url: Option<String>,
    /// Queue a bulk analysis of every finished rated game (consumer group `analysis-bulk` on the
    /// `games.finished` stream).
    #[arg(long, env = "DRAUGHTS_ANALYSIS_BULK_FINISHED_GAMES")]
    pub analysis_bulk_finished_games: bool,
    /// Nodes per ply of those bulk analyses.
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_BULK_NODES_PER_PLY",
        default_value_t = 100_000
    )]
    pub analysis_bulk_nodes_per_ply: u64,
    /// Open WatchAnalysis streams per caller on one replica (more: RESOURCE_EXHAUSTED).
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_MAX_WATCHES_PER_CALLER",
        default_value_t = 16
    )]
    pub analysis_max_watches_per_caller: u32,
    /// Open WatchAnalysis streams on one replica in all.
    #[arg(long, env = "DRAUGHTS_ANALYSIS_MAX_WATCHES", default_value_t = 10_000)]
    pub analysis_max_watches: u32,
    #[command(flatten)]
    pub quotas: QuotaConfig,
}

impl AnalysisConfig {
    pub fn defaults() -> AnalysisConfig {
        AnalysisConfig {
            analysis_result_ttl_secs: 86_400,
            analysis_visibility_timeout_ms: 10_000,
            analysis_max_attempts: 3,
            analysis_max_queued: 10_000,
            analysis_max_queued_guest: 64,
            analysis_best_move_timeout_ms: 8_000,
            analysis_games_url: None,
            analysis_bulk_finished_games: false,
            analysis_bulk_nodes_per_ply: 100_000,
            analysis_max_watches_per_caller: 16,
            analysis_max_watches: 10_000,
            quotas: QuotaConfig::defaults(),
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
            (1..=30 * 86_400).contains(&self.analysis_result_ttl_secs),
            "analysis-result-ttl-secs must be from 1 to 2592000",
        )?;
        check(
            (100..=3_600_000).contains(&self.analysis_visibility_timeout_ms),
            "analysis-visibility-timeout-ms must be from 100 to 3600000",
        )?;
        check(
            (1..=1024).contains(&self.analysis_max_watches_per_caller)
                && (1..=1_000_000).contains(&self.analysis_max_watches),
            "analysis-max-watches-per-caller must be from 1 to 1024 and analysis-max-watches from 1 to 1000000",
        )?;
        check(
            (1..=100).contains(&self.analysis_max_attempts),
            "analysis-max-attempts must be from 1 to 100",
        )?;
        check(
            (1..=10_000_000).contains(&self.analysis_max_queued),
            "analysis-max-queued must be from 1 to 10000000",
        )?;
        check(
            (1..=10_000_000).contains(&self.analysis_max_queued_guest),
            "analysis-max-queued-guest must be from 1 to 10000000",
        )?;
        check(
            (10..=600_000).contains(&self.analysis_best_move_timeout_ms),
            "analysis-best-move-timeout-ms must be from 10 to 600000",
        )?;
        check(
            (1..=1_000_000_000).contains(&self.analysis_bulk_nodes_per_ply),
            "analysis-bulk-nodes-per-ply must be from 1 to 1000000000",
        )?;
        games::GrpcGames::new(self.analysis_games_url.as_deref())?;
        self.quotas.validate()
    }

    pub fn queue(&self) -> QueueConfig {
        QueueConfig {
            result_ttl: Duration::from_secs(self.analysis_result_ttl_secs),
            visibility_timeout: Duration::from_millis(self.analysis_visibility_timeout_ms),
            max_attempts: self.analysis_max_attempts,
            max_queued: self.analysis_max_queued,
            max_queued_guest: self.analysis_max_queued_guest,
        }
    }
}

/// Settings of the workers of a process.
#[derive(Clone, Debug, clap::Args)]
pub struct WorkerArgs {
    /// Searches this process runs at once; 0 = one per core.
    #[arg(long, env = "DRAUGHTS_ANALYSIS_SLOTS", default_value_t = 0)]
    pub analysis_slots: usize,
    /// Of those, slots that take only computer moves (the computer-move class), so that a live
    /// game's move never waits for a slot; at most the slots less one. Unset: 1 with two slots or
    /// more, else 0.
    #[arg(long, env = "DRAUGHTS_ANALYSIS_RESERVED_COMPUTER_SLOTS")]
    pub analysis_reserved_computer_slots: Option<usize>,
    /// Transposition table per search slot, MiB (1-4096).
    #[arg(long, env = "DRAUGHTS_ANALYSIS_HASH_MB", default_value_t = 16)]
    pub analysis_hash_mb: usize,
    /// This worker's name (unique among workers); unset: `worker-<random>`.
    #[arg(long, env = "DRAUGHTS_ANALYSIS_WORKER_NAME")]
    pub analysis_worker_name: Option<String>,
    /// How long a running job may still finish after shutdown is asked before it is handed back,
    /// milliseconds.
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_SHUTDOWN_GRACE_MS",
        default_value_t = 10_000
    )]
    pub analysis_shutdown_grace_ms: u64,
    /// Endgame tables (every variant's found in the directory, loaded into memory at start: about 76 MB
    /// for an 8x8 variant's 5 pieces, 22 MB for international's 4), probed by the workers' searches;
    /// what `--analysis-bitbases-build` asks for and the directory lacks is built there in the
    /// background. Unset: none (`draughtsd` with a SQLite file: `draughts-bitbases` beside it).
    #[arg(long, env = "DRAUGHTS_ANALYSIS_BITBASES")]
    pub analysis_bitbases: Option<std::path::PathBuf>,
    /// The endgame tables built in the background into `--analysis-bitbases` when missing, as
    /// `VARIANT:PIECES,...` (`none`: build nothing). One thread; the workers use them once built.
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_BITBASES_BUILD",
        default_value = DEFAULT_BITBASES_BUILD
    )]
    pub analysis_bitbases_build: String,
}

/// What a server builds by itself when its tables directory lacks it: 4 pieces of the most played
/// variants (31 MB, about a minute of one core in all: docs/ai.md, "Endgame bitbases").
pub const DEFAULT_BITBASES_BUILD: &str = "international:4,russian:4,english:4,brazilian:4";

impl WorkerArgs {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.analysis_slots > 1024 {
            return Err(ConfigError("analysis-slots must be at most 1024".into()));
        }
        if !(1..=4096).contains(&self.analysis_hash_mb) {
            return Err(ConfigError(
                "analysis-hash-mb must be from 1 to 4096".into(),
            ));
        }
        self.bitbases_build_plan()?;
        if let Some(name) = &self.analysis_worker_name
            && (name.is_empty()
                || name.len() > 64
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'))
        {
            return Err(ConfigError(
                "analysis-worker-name must be 1-64 letters, digits, '-', '_' or '.'".into(),
            ));
        }
        Ok(())
    }

    fn bitbases_build_plan(&self) -> Result<draughts_ai::bitbase::BuildPlan, ConfigError> {
        self.analysis_bitbases_build
            .parse()
            .map_err(|e| ConfigError(format!("analysis-bitbases-build: {e}")))
    }

    /// The workers' settings; reads the endgame tables when a directory is given, and starts building
    /// in the background what `--analysis-bitbases-build` asks for and the directory lacks (the
    /// workers take the tables once built). A missing directory or table is a logged warning; a bad
    /// file is an error (a worker must not start believing it has tables it does not).
    pub fn worker(&self) -> Result<WorkerConfig, ConfigError> {
        use draughts_ai::bitbase::{self, Shelf, ShelfCell};
        let mut config = WorkerConfig::defaults();
        let plan = self.bitbases_build_plan()?;
        if let Some(dir) = &self.analysis_bitbases {
            let load = |dir: &std::path::Path| {
                Shelf::load(dir).map_err(|e| ConfigError(format!("analysis-bitbases: {e}")))
            };
            let shelf = if dir.exists() { Some(load(dir)?) } else { None };
            let loaded = shelf.as_ref().map(Shelf::summary).unwrap_or_default();
            for (variant, pieces) in &loaded {
                tracing::info!(%variant, pieces, dir = %dir.display(), "endgame tables loaded");
            }
            if loaded.is_empty() && plan.is_empty() {
                tracing::warn!(dir = %dir.display(), "no endgame tables found: the workers search without them");
            }
            config.bitbases = ShelfCell::new(shelf);
            if !plan.is_empty() {
                let (dir, cell) = (dir.clone(), config.bitbases.clone());
                let started = std::thread::Builder::new()
                    .name("bitbase-build".into())
                    .spawn(move || {
                        let start = std::time::Instant::now();
                        let built = bitbase::build_missing(&dir, &plan, 1, |variant, r| {
                            tracing::info!(
                                %variant,
                                slice = %r.material,
                                done = r.done,
                                total = r.total,
                                seconds = r.elapsed.as_secs_f64(),
                                "endgame table built"
                            );
                        });
                        match built.and_then(|solved| Ok((solved, Shelf::load(&dir)?))) {
                            Ok((0, _)) => {}
                            Ok((solved, shelf)) => {
                                tracing::info!(
                                    solved,
                                    plan = %plan,
                                    dir = %dir.display(),
                                    seconds = start.elapsed().as_secs_f64(),
                                    "endgame tables built: the workers use them from now on"
                                );
                                cell.replace(shelf);
                            }
                            Err(e) => tracing::warn!(
                                error = %e,
                                "building the endgame tables failed: the workers go on with what they have"
                            ),
                        }
                    });
                if let Err(e) = started {
                    tracing::warn!(error = %e, "no thread for building the endgame tables");
                }
            }
        }
        if self.analysis_slots > 0 {
            config.slots = self.analysis_slots;
        }
        config.reserved_computer_slots = match self.analysis_reserved_computer_slots {
            Some(reserved) if reserved >= config.slots.max(1) && reserved > 0 => {
                return Err(ConfigError(format!(
                    "analysis-reserved-computer-slots must be below the slots ({}), got {reserved}",
                    config.slots
                )));
            }
            Some(reserved) => reserved,
            None => WorkerConfig::default_reserved(config.slots),
        };
        config.hash_mb = self.analysis_hash_mb;
        if let Some(name) = &self.analysis_worker_name {
            config.name = name.clone();
        }
        config.shutdown_grace = Duration::from_millis(self.analysis_shutdown_grace_ms);
        Ok(config)
    }
}

/// Configuration of the `draughts-analysis` binary (the API; add `--analysis-slots` to also run
/// workers in the same process, else run `draughts-analysis-worker`).
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "draughts-analysis",
    version,
    about = "Analysis on request and computer moves (draughts.v1.Analysis) over a Redis job queue"
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
    pub analysis: AnalysisConfig,
    #[command(flatten)]
    pub workers: WorkerArgs,
    /// Run workers in this process too (the embedded backend needs them: nothing else sees its queue).
    #[arg(long, env = "DRAUGHTS_ANALYSIS_IN_PROCESS_WORKERS")]
    pub in_process_workers: bool,
}

impl Config {
    /// Port 0 on loopback, the embedded backend, test secrets, in-process workers (one slot).
    pub fn for_tests() -> Config {
        Config {
            server: ServerConfig::for_tests(),
            telemetry: TelemetryConfig::for_tests(),
            backends: BackendConfig::embedded_for_tests(),
            auth: AuthConfig::for_tests(),
            analysis: AnalysisConfig::defaults(),
            workers: WorkerArgs {
                analysis_slots: 1,
                analysis_reserved_computer_slots: None,
                analysis_hash_mb: 4,
                analysis_worker_name: None,
                analysis_shutdown_grace_ms: 1_000,
                analysis_bitbases: None,
                analysis_bitbases_build: "none".into(),
            },
            in_process_workers: true,
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        self.server.validate()?;
        self.telemetry.validate()?;
        self.backends.validate()?;
        self.auth.validate()?;
        self.analysis.validate()?;
        self.workers.validate()
    }
}

/// Starting the service failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("backend: {0}")]
    Store(#[from] draughts_store::StoreError),
    #[error("analysis: {0}")]
    Analysis(#[from] AnalysisError),
    #[error("auth: {0}")]
    Auth(#[from] draughts_auth::AuthError),
    #[error(transparent)]
    Serve(#[from] draughts_runtime::ServeError),
}

/// The analysis service on a live store.
#[derive(Clone, Debug)]
pub struct Analysis {
    pub core: AnalysisCore,
    /// The bulk feed's per-ply limits, when it is on.
    bulk: Option<contract::JobLimits>,
}

impl Analysis {
    /// Builds the service (creates the queue's consumer groups).
    pub async fn new(
        live: Arc<dyn LiveStore>,
        config: &AnalysisConfig,
    ) -> Result<Analysis, StartError> {
        config.validate()?;
        let queue = Queue::new(live.clone(), config.queue()).await?;
        let games = games::GrpcGames::new(config.analysis_games_url.as_deref())?;
        Ok(Analysis {
            core: AnalysisCore {
                queue,
                quotas: quota::Quotas::new(live.clone(), config.quotas.clone()),
                games: Arc::new(games),
                best_move_timeout: Duration::from_millis(config.analysis_best_move_timeout_ms),
                waiter: service::Waiter::start(live.clone()),
                watches: draughts_runtime::admission::Admission::new(
                    config.analysis_max_watches_per_caller,
                    config.analysis_max_watches,
                    Some("analysis_watches_open"),
                ),
                guests: quota::GuestLimits::new(&config.quotas),
            },
            bulk: config
                .analysis_bulk_finished_games
                .then(|| contract::JobLimits {
                    nodes: Some(config.analysis_bulk_nodes_per_ply),
                    // As an interactive request of the same nodes gets it: the same fingerprint.
                    movetime_ms: Some(config.quotas.max_ply_movetime_ms),
                    multi_pv: 1,
                    ..contract::JobLimits::default()
                }),
        })
    }

    /// Adds `draughts.v1.Analysis` to a host, behind the authentication layer of `auth`.
    pub fn register(&self, services: &mut Services, server: &ServerConfig, auth: &Authenticator) {
        let api = AnalysisServer::new(grpc::AnalysisService::new(self.core.clone()))
            .max_decoding_message_size(server.max_message_bytes);
        services.add(tower::Layer::layer(&AuthLayer::new(auth.clone()), api));
    }

    /// Feeds finished rated games into the bulk class until `shutdown` resolves (at once when the feed
    /// is off). Every replica may run it: each entry goes to one of them.
    pub async fn run_bulk(self, shutdown: impl Future<Output = ()>) {
        if let Some(limits) = self.bulk {
            let consumer = format!("bulk-{}", hex::encode(rand::random::<[u8; 4]>()));
            bulk::run(self.core.queue, consumer, limits, shutdown).await
        }
    }

    /// Runs workers on this service's queue until `shutdown` resolves, then drains them.
    pub async fn run_workers(self, config: WorkerConfig, shutdown: impl Future<Output = ()>) {
        worker::run(self.core.queue, config, shutdown).await
    }
}

/// Serves `draughts.v1.Analysis` on `listener` (and in-process workers when configured) until
/// `shutdown` resolves.
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
    let analysis = Analysis::new(live, &config.analysis).await?;
    let mut services = Services::new();
    analysis.register(&mut services, &config.server, &auth);
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let mut bulk_stop = stop_rx.clone();
    let bulk = tokio::spawn(analysis.clone().run_bulk(async move {
        let _ = bulk_stop.changed().await;
    }));
    let worker_config = match config.in_process_workers {
        true => Some(config.workers.worker()?),
        false => None,
    };
    let workers = worker_config.map(|worker_config| {
        tokio::spawn(analysis.clone().run_workers(worker_config, async move {
            let _ = stop_rx.changed().await;
        }))
    });
    let served = draughts_runtime::serve(&config.server, services, listener, shutdown).await;
    let _ = stop_tx.send(true);
    let _ = bulk.await;
    if let Some(workers) = workers {
        let _ = workers.await;
    }
    served?;
    Ok(())
}
