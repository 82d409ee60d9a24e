//! `draughts-analysis-worker`: pulls analysis jobs from the queue (Redis) and runs the engine's search,
//! one search per core by default. No gRPC server: scale it out by running more of them.

use clap::Parser;
use draughts_analysis::{AnalysisConfig, Queue, WorkerArgs};
use draughts_runtime::{BackendConfig, TelemetryConfig};

/// mimalloc, like the other service binaries (see the workspace Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Configuration of the worker binary.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "draughts-analysis-worker",
    version,
    about = "Runs analysis jobs from the queue (draughts.v1.Analysis's workers)"
)]
struct Config {
    #[command(flatten)]
    telemetry: TelemetryConfig,
    #[command(flatten)]
    backends: BackendConfig,
    #[command(flatten)]
    analysis: AnalysisConfig,
    #[command(flatten)]
    workers: WorkerArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    config.telemetry.validate()?;
    config.backends.validate()?;
    config.analysis.validate()?;
    config.workers.validate()?;
    if config.backends.redis_url.starts_with("memory://") {
        anyhow::bail!(
            "a separate worker needs the shared queue: give --redis-url redis://... or redis+cluster://... (memory:// is one process only)"
        );
    }
    let _telemetry =
        draughts_runtime::telemetry::start("draughts-analysis-worker", &config.telemetry)
            .await
            .map_err(|e| anyhow::anyhow!(e))?;
    let live =
        draughts_store::open_live_store(&config.backends.redis_url, &config.backends.key_prefix)
            .await?;
    let queue = Queue::new(live, config.analysis.queue()).await?;
    draughts_analysis::worker::run(
        queue,
        config.workers.worker()?,
        draughts_runtime::shutdown_signal(),
    )
    .await;
    Ok(())
}
