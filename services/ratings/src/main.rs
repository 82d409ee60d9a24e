use clap::Parser;
use draughts_ratings::Config;

/// mimalloc, like the other service binaries (see the workspace Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    config.validate()?;
    let _telemetry = draughts_runtime::telemetry::start("draughts-ratings", &config.telemetry)
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    let listener = draughts_runtime::listen::bind("gRPC listener", config.server.listen).await?;
    tracing::info!(addr = %listener.local_addr()?, "draughts-ratings serving draughts.v1.Ratings");
    draughts_ratings::run(config, listener, draughts_runtime::shutdown_signal()).await?;
    Ok(())
}
