//! The one-process platform: every service that exists, registered on one gRPC port.
//!
//! By default everything runs on embedded backends that need no server: live state and queues in
//! memory (`memory://`), durable records in a SQLite file. Give `--redis-url redis://...` and
//! `--database-url postgres://...` to run on Redis and PostgreSQL, as the separate services do in a
//! deployment. Backends are connected (and migrated) at start, so a wrong URL fails fast.

use std::sync::Arc;

use draughts_runtime::{ConfigError, ServerConfig, Services, TelemetryConfig};
use draughts_store::{Database, LiveStore};
use tokio::net::TcpListener;

/// Configuration of `draughtsd`.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "draughtsd",
    version,
    about = "The draughts platform in one process: every service on one port"
)]
pub struct Config {
    #[command(flatten)]
    pub server: ServerConfig,
    #[command(flatten)]
    pub telemetry: TelemetryConfig,
    /// Live state, queues and events: `memory://` (embedded, this process only) or `redis://host:port`.
    #[arg(long, env = "DRAUGHTS_REDIS_URL", default_value = "memory://")]
    pub redis_url: String,
    /// Prefix of every Redis key, so several deployments can share one server.
    #[arg(long, env = "DRAUGHTS_KEY_PREFIX", default_value = "draughts:")]
    pub key_prefix: String,
    /// Durable records: `sqlite://FILE?mode=rwc`, `sqlite::memory:` or `postgres://user@host/db`.
    #[arg(
        long,
        env = "DRAUGHTS_DATABASE_URL",
        default_value = "sqlite://draughts.sqlite3?mode=rwc"
    )]
    pub database_url: String,
}

impl Config {
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.server.validate()?;
        self.telemetry.validate()?;
        if !(self.redis_url.starts_with("memory://")
            || self.redis_url.starts_with("redis://")
            || self.redis_url.starts_with("rediss://"))
        {
            return Err(ConfigError(format!(
                "redis-url must be memory:// or redis://..., got '{}'",
                self.redis_url
            )));
        }
        if !(self.database_url.starts_with("sqlite:")
            || self.database_url.starts_with("postgres://")
            || self.database_url.starts_with("postgresql://"))
        {
            return Err(ConfigError(format!(
                "database-url must be sqlite:... or postgres://..., got '{}'",
                self.database_url
            )));
        }
        Ok(())
    }
}

/// Starting the platform failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("backend: {0}")]
    Store(#[from] draughts_store::StoreError),
    #[error(transparent)]
    Serve(#[from] draughts_runtime::ServeError),
}

/// The connected backends, shared by every service of the process.
#[derive(Clone)]
pub struct Backends {
    pub live: Arc<dyn LiveStore>,
    pub db: Database,
}

impl std::fmt::Debug for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backends")
            .field("db", &self.db.backend())
            .finish_non_exhaustive()
    }
}

/// Connects the live store and the database named in the configuration.
pub async fn connect(config: &Config) -> Result<Backends, StartError> {
    let live = draughts_store::open_live_store(&config.redis_url, &config.key_prefix).await?;
    let db = Database::connect(&config.database_url).await?;
    Ok(Backends { live, db })
}

/// The services this platform serves, registered on one host.
pub fn services(config: &Config, _backends: &Backends) -> Services {
    let mut services = Services::new();
    draughts_validation::register(&mut services, &config.server);
    services
}

/// Connects the backends and serves every service on `listener` until `shutdown` resolves.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    config.validate()?;
    let backends = connect(&config).await?;
    let services = services(&config, &backends);
    tracing::info!(
        services = ?services.names(),
        live = %config.redis_url,
        database = ?backends.db.backend(),
        "draughtsd starting"
    );
    draughts_runtime::serve(&config.server, services, listener, shutdown).await?;
    Ok(())
}
