use clap::Parser;
use draughtsd::Config;

/// mimalloc: fewer cycles than glibc malloc on the per-request allocations (see Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut config = Config::parse();
    let ephemeral_secret = config.auth.token_secret.is_empty();
    if ephemeral_secret {
        config.auth.token_secret = draughtsd::random_secret();
    }
    config.validate()?;
    let _telemetry = draughts_runtime::telemetry::start("draughtsd", &config.telemetry)
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    if ephemeral_secret {
        tracing::warn!(
            "no DRAUGHTS_TOKEN_SECRET given: using a random one, so guest tokens end with this process"
        );
    }
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
