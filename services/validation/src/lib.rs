//! The move-validation service. Today it serves `draughts.v1.Rules`, stateless validation for any
//! client; the live games it referees (`Games`, `Auth`) come next.
//!
//! `main.rs` parses [`Config`] and calls [`run`]; the one-process platform calls [`register`] instead, to
//! put these services on its shared port.

pub mod grpc;

use draughts_proto::pb::rules_server::RulesServer;
use draughts_runtime::{ServerConfig, Services, TelemetryConfig};
use tokio::net::TcpListener;

/// Configuration of the validation service binary.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "draughts-validation",
    version,
    about = "draughts.v1.Rules: stateless move validation"
)]
pub struct Config {
    #[command(flatten)]
    pub server: ServerConfig,
    #[command(flatten)]
    pub telemetry: TelemetryConfig,
}

impl Config {
    pub fn validate(&self) -> Result<(), draughts_runtime::ConfigError> {
        self.server.validate()?;
        self.telemetry.validate()
    }
}

/// Adds this service's gRPC servers to a host.
pub fn register(services: &mut Services, server: &ServerConfig) {
    services.add(
        RulesServer::new(grpc::RulesService).max_decoding_message_size(server.max_message_bytes),
    );
}

/// Serves until `shutdown` resolves.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), draughts_runtime::ServeError> {
    let mut services = Services::new();
    register(&mut services, &config.server);
    draughts_runtime::serve(&config.server, services, listener, shutdown).await
}
