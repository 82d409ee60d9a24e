use clap::Parser;
use draughtsd::Config;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    config.validate()?;
    let _telemetry = draughts_runtime::telemetry::init("draughtsd", &config.telemetry)?;
    if let Some(addr) = config.telemetry.metrics_addr()? {
        let bound =
            draughts_runtime::telemetry::serve_metrics(addr, draughts_runtime::shutdown_signal())
                .await?;
        tracing::info!(%bound, "metrics on http://{bound}/metrics");
    }
    let listener = tokio::net::TcpListener::bind(config.server.listen).await?;
    tracing::info!(addr = %listener.local_addr()?, "draughtsd listening (gRPC and gRPC-Web)");
    draughtsd::run(config, listener, draughts_runtime::shutdown_signal()).await?;
    Ok(())
}
