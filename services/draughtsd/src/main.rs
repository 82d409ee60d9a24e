use clap::Parser;
use draughtsd::Config;

/// mimalloc: fewer cycles than glibc malloc on the per-request allocations (see Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    config.validate()?;
    let _telemetry = draughts_runtime::telemetry::start("draughtsd", &config.telemetry)
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    let listener = draughts_runtime::listen::bind("gRPC listener", config.server.listen).await?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "draughtsd listening (gRPC and gRPC-Web)");
    match config.web_files() {
        Some(dir) => tracing::info!(dir = %dir.display(), "web client: open http://{addr}/"),
        None if !config.no_web => tracing::info!(
            "no web client built (run `npm ci && npm run build` in web/ to serve it here)"
        ),
        None => {}
    }
    draughtsd::run(config, listener, draughts_runtime::shutdown_signal()).await?;
    Ok(())
}
