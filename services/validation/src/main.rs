use clap::Parser;
use draughts_validation::Config;

/// mimalloc: fewer cycles than glibc malloc on the per-request allocations (see Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    config.validate()?;
    let _telemetry = draughts_runtime::telemetry::start("draughts-validation", &config.telemetry)
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    let listener = draughts_runtime::listen::bind("gRPC listener", config.server.listen).await?;
    tracing::info!(addr = %listener.local_addr()?, "draughts-validation serving draughts.v1.Rules");
    draughts_validation::run(config, listener, draughts_runtime::shutdown_signal()).await?;
    Ok(())
}
