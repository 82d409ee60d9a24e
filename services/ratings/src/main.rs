use clap::Parser;
use draughts_ratings::Config;

/// mimalloc, like the other service binaries (see the workspace Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    config.validate()?;
    let _telemetry = draughts_runtime::telemetry::init("draughts-ratings", &config.telemetry)?;
    if let Some(addr) = config.telemetry.metrics_addr()? {
        let bound =
            draughts_runtime::telemetry::serve_metrics(addr, draughts_runtime::shutdown_signal())
                .await?;
        tracing::info!(%bound, "metrics on /metrics");
    }
    let listener = tokio::net::TcpListener::bind(config.server.listen).await?;
    tracing::info!(addr = %listener.local_addr()?, "draughts-ratings serving draughts.v1.Ratings");
    draughts_ratings::run(config, listener, draughts_runtime::shutdown_signal()).await?;
    Ok(())
}
