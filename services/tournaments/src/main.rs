use clap::Parser;
use draughts_tournaments::Config;

/// mimalloc, like the other service binaries (see the workspace Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    config.validate()?;
    let _telemetry = draughts_runtime::telemetry::start("draughts-tournaments", &config.telemetry)
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    let listener = tokio::net::TcpListener::bind(config.server.listen).await?;
    tracing::info!(addr = %listener.local_addr()?, "draughts-tournaments serving draughts.v1.Tournaments");
    draughts_tournaments::run(config, listener, draughts_runtime::shutdown_signal()).await?;
    Ok(())
}
