//! Configuration shared by every service: flags with environment fallbacks (so that a Kubernetes
//! ConfigMap maps onto them), validated at start so that a bad value fails fast with a clear message.

use std::net::SocketAddr;
use std::time::Duration;

/// A configuration value that can't be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct ConfigError(pub String);

/// Whether `text` is a browser origin as browsers send it: `http://` or `https://`, a host and an
/// optional port; no user, path, query or wildcard.
fn is_origin(text: &str) -> bool {
    let Ok(uri) = text.parse::<http::Uri>() else {
        return false;
    };
    let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
    let authority_ok = uri.authority().is_some_and(|a| {
        !a.as_str().contains('@') && !a.host().is_empty() && !a.host().contains('*')
    });
    scheme_ok && authority_ok && uri.query().is_none() && !text.ends_with('/') && uri.path() == "/"
}

#[cfg(test)]
mod origin_tests {
    use super::is_origin;

    #[test]
    fn origins() {
        for ok in [
            "https://play.example.com",
            "http://localhost:8080",
            "http://[::1]:3000",
        ] {
            assert!(is_origin(ok), "{ok}");
        }
        for bad in [
            "*",
            "example.com",
            "https://example.com/",
            "https://a.com/x",
            "ftp://a.com",
            "https://u@a.com",
            "https://*.a.com",
            "null",
        ] {
            assert!(!is_origin(bad), "{bad}");
        }
    }
}

/// How the gRPC server listens and protects itself.
#[derive(Clone, Debug, clap::Args)]
pub struct ServerConfig {
    /// Address of the gRPC (and gRPC-Web) listener.
    #[arg(long, env = "DRAUGHTS_LISTEN", default_value = "0.0.0.0:50051")]
    pub listen: SocketAddr,
    /// Largest request message accepted, in bytes (larger ones are refused with OUT_OF_RANGE).
    #[arg(long, env = "DRAUGHTS_MAX_MESSAGE_BYTES", default_value_t = 64 * 1024)]
    pub max_message_bytes: usize,
    /// Per-request timeout in milliseconds (DEADLINE_EXCEEDED past it; streams are not limited).
    #[arg(long, env = "DRAUGHTS_REQUEST_TIMEOUT_MS", default_value_t = 10_000)]
    pub request_timeout_ms: u64,
    /// Concurrent requests served per connection.
    #[arg(
        long,
        env = "DRAUGHTS_CONCURRENCY_PER_CONNECTION",
        default_value_t = 256
    )]
    pub concurrency_per_connection: usize,
    /// How long shutdown waits for in-flight calls before closing, in milliseconds.
    #[arg(long, env = "DRAUGHTS_SHUTDOWN_GRACE_MS", default_value_t = 10_000)]
    pub shutdown_grace_ms: u64,
    /// Browser origins allowed to call over gRPC-Web (CORS), comma-separated, each
    /// `http(s)://host[:port]` exactly as the browser sends it. Default: none (no cross-origin call is
    /// allowed; same-origin pages and non-browser clients need no CORS).
    #[arg(
        long,
        env = "DRAUGHTS_CORS_ORIGINS",
        value_delimiter = ',',
        default_value = ""
    )]
    pub cors_origins: Vec<String>,
    #[command(flatten)]
    pub connections: ConnectionLimits,
}

/// How long connections may live idle or unresponsive, and how many a replica holds (see
/// `serve`'s module docs). Every value has a flag and an environment variable.
#[derive(Clone, Debug, clap::Args)]
pub struct ConnectionLimits {
    /// HTTP/2 PING sent on a connection after this long without frames from the client, in ms.
    #[arg(
        long,
        env = "DRAUGHTS_HTTP2_KEEPALIVE_INTERVAL_MS",
        default_value_t = 30_000
    )]
    pub http2_keepalive_interval_ms: u64,
    /// A PING unanswered this long closes the connection (half-open peers), in ms.
    #[arg(
        long,
        env = "DRAUGHTS_HTTP2_KEEPALIVE_TIMEOUT_MS",
        default_value_t = 10_000
    )]
    pub http2_keepalive_timeout_ms: u64,
    /// TCP keepalive: idle time before the kernel probes the peer, in ms.
    #[arg(long, env = "DRAUGHTS_TCP_KEEPALIVE_MS", default_value_t = 60_000)]
    pub tcp_keepalive_ms: u64,
    /// A connection with no open request (call or stream) for this long is closed, in ms.
    #[arg(long, env = "DRAUGHTS_IDLE_TIMEOUT_MS", default_value_t = 120_000)]
    pub idle_timeout_ms: u64,
    /// Connections a replica holds at once; more are accepted and closed at once. Keep it below
    /// the process's open-file limit (`ulimit -n`) minus the backends' connections.
    #[arg(long, env = "DRAUGHTS_MAX_CONNECTIONS", default_value_t = 8_192)]
    pub max_connections: usize,
    /// Concurrent HTTP/2 streams (calls, watch streams) per connection.
    #[arg(
        long,
        env = "DRAUGHTS_MAX_STREAMS_PER_CONNECTION",
        default_value_t = 256
    )]
    pub max_streams_per_connection: u32,
    /// Connections one client address (an IPv6 address: its network of `--address-v6-prefix` bits)
    /// holds at once on a replica; more are accepted and closed at once. Behind a proxy every
    /// client has the proxy's address: raise it to `--max-connections` there and let the proxy bound
    /// its clients (`deploy/`).
    #[arg(
        long,
        env = "DRAUGHTS_MAX_CONNECTIONS_PER_ADDRESS",
        default_value_t = 256
    )]
    pub max_connections_per_address: usize,
    /// How many leading bits of an IPv6 address name its client for per-address bounds (the
    /// connection cap, anonymous rate limits): 64, one customer's network, by default; 128 counts
    /// each address apart. IPv4 addresses count one by one.
    #[arg(long, env = "DRAUGHTS_ADDRESS_V6_PREFIX", default_value_t = 64)]
    pub address_v6_prefix: u8,
}

impl ConnectionLimits {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let in_range = |name: &str, value: u64, low: u64, high: u64| {
            if (low..=high).contains(&value) {
                Ok(())
            } else {
                Err(ConfigError(format!(
                    "{name} must be from {low} to {high}, got {value}"
                )))
            }
        };
        in_range(
            "http2-keepalive-interval-ms",
            self.http2_keepalive_interval_ms,
            100,
            3_600_000,
        )?;
        in_range(
            "http2-keepalive-timeout-ms",
            self.http2_keepalive_timeout_ms,
            100,
            600_000,
        )?;
        in_range("tcp-keepalive-ms", self.tcp_keepalive_ms, 1_000, 7_200_000)?;
        in_range("idle-timeout-ms", self.idle_timeout_ms, 100, 86_400_000)?;
        in_range("max-connections", self.max_connections as u64, 1, 1_000_000)?;
        in_range(
            "max-connections-per-address",
            self.max_connections_per_address as u64,
            1,
            1_000_000,
        )?;
        in_range(
            "address-v6-prefix",
            u64::from(self.address_v6_prefix),
            32,
            128,
        )?;
        in_range(
            "max-streams-per-connection",
            u64::from(self.max_streams_per_connection),
            1,
            10_000,
        )?;
        Ok(())
    }
    pub fn http2_keepalive_interval(&self) -> Duration {
        Duration::from_millis(self.http2_keepalive_interval_ms)
    }
    pub fn http2_keepalive_timeout(&self) -> Duration {
        Duration::from_millis(self.http2_keepalive_timeout_ms)
    }
    pub fn tcp_keepalive(&self) -> Duration {
        Duration::from_millis(self.tcp_keepalive_ms)
    }
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }
    /// The defaults (the same as the flags').
    pub fn defaults() -> ConnectionLimits {
        ConnectionLimits {
            http2_keepalive_interval_ms: 30_000,
            http2_keepalive_timeout_ms: 10_000,
            tcp_keepalive_ms: 60_000,
            idle_timeout_ms: 120_000,
            max_connections: 8_192,
            max_streams_per_connection: 256,
            max_connections_per_address: 256,
            address_v6_prefix: 64,
        }
    }
}

impl ServerConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1024..=64 * 1024 * 1024).contains(&self.max_message_bytes) {
            return Err(ConfigError(format!(
                "max-message-bytes must be from 1024 to 67108864, got {}",
                self.max_message_bytes
            )));
        }
        if !(1..=600_000).contains(&self.request_timeout_ms) {
            return Err(ConfigError(format!(
                "request-timeout-ms must be from 1 to 600000, got {}",
                self.request_timeout_ms
            )));
        }
        for origin in self.cors_origins() {
            if !is_origin(origin) {
                return Err(ConfigError(format!(
                    "cors-origins: '{origin}' is not an origin (http(s)://host[:port], no path, no wildcard)"
                )));
            }
        }
        if self.concurrency_per_connection == 0 {
            return Err(ConfigError(
                "concurrency-per-connection must be at least 1".into(),
            ));
        }
        self.connections.validate()
    }
    /// The configured CORS origins (empty entries, as an empty default gives, left out).
    pub fn cors_origins(&self) -> impl Iterator<Item = &str> {
        self.cors_origins
            .iter()
            .map(|o| o.trim())
            .filter(|o| !o.is_empty())
    }
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }
    /// A configuration for tests: port 0 on loopback, default limits.
    pub fn for_tests() -> ServerConfig {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            max_message_bytes: 64 * 1024,
            request_timeout_ms: 10_000,
            concurrency_per_connection: 256,
            shutdown_grace_ms: 2_000,
            cors_origins: Vec::new(),
            connections: ConnectionLimits::defaults(),
        }
    }
}

/// Logs, traces and metrics.
#[derive(Clone, Debug, clap::Args)]
pub struct TelemetryConfig {
    /// Log filter (tracing EnvFilter syntax), e.g. `info,draughts=debug`.
    #[arg(long, env = "RUST_LOG", default_value = "info")]
    pub log: String,
    /// Log format: `text` or `json`.
    #[arg(long, env = "DRAUGHTS_LOG_FORMAT", default_value = "text")]
    pub log_format: String,
    /// OTLP/gRPC collector for traces (e.g. http://otel-collector:4317); unset = no export.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// Prometheus metrics HTTP listener (`GET /metrics`); `off` disables it.
    #[arg(long, env = "DRAUGHTS_METRICS_LISTEN", default_value = "0.0.0.0:9090")]
    pub metrics_listen: String,
}

impl TelemetryConfig {
    /// Warnings only, as text; no trace export, no metrics listener.
    pub fn for_tests() -> TelemetryConfig {
        TelemetryConfig {
            log: "warn".into(),
            log_format: "text".into(),
            otlp_endpoint: None,
            metrics_listen: "off".into(),
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if !matches!(self.log_format.as_str(), "text" | "json") {
            return Err(ConfigError(format!(
                "log-format must be text or json, got '{}'",
                self.log_format
            )));
        }
        tracing_subscriber::EnvFilter::try_new(&self.log)
            .map_err(|e| ConfigError(format!("bad log filter '{}': {e}", self.log)))?;
        if let Some(e) = &self.otlp_endpoint
            && !(e.starts_with("http://") || e.starts_with("https://"))
        {
            return Err(ConfigError(format!(
                "OTEL_EXPORTER_OTLP_ENDPOINT must be an http(s):// URL, got '{e}'"
            )));
        }
        self.metrics_addr()?;
        Ok(())
    }

    /// The metrics listener address, or `None` when disabled.
    pub fn metrics_addr(&self) -> Result<Option<SocketAddr>, ConfigError> {
        if self.metrics_listen == "off" {
            return Ok(None);
        }
        self.metrics_listen.parse().map(Some).map_err(|_| {
            ConfigError(format!(
                "metrics-listen must be host:port or off, got '{}'",
                self.metrics_listen
            ))
        })
    }
}

/// Where a service keeps its state: the live store (Redis, or memory in the embedded mode) and the
/// durable database (PostgreSQL, or SQLite in the embedded mode).
#[derive(Clone, Debug, clap::Args)]
pub struct BackendConfig {
    /// Live state, queues and events: `memory://` (embedded, this process only), `redis://host:port`
    /// (one Redis primary) or `redis+cluster://host:port,host:port` (a Redis Cluster: some of its
    /// primaries; the others are discovered).
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

impl BackendConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.redis_url.starts_with("memory://")
            || self.redis_url.starts_with("redis://")
            || self.redis_url.starts_with("rediss://")
            || self.redis_url.starts_with("redis+cluster://")
            || self.redis_url.starts_with("rediss+cluster://"))
        {
            return Err(ConfigError(format!(
                "redis-url must be memory://, redis://... or redis+cluster://..., got '{}'",
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

    /// In-process backends for tests.
    pub fn embedded_for_tests() -> BackendConfig {
        BackendConfig {
            redis_url: "memory://".into(),
            key_prefix: "test:".into(),
            database_url: "sqlite::memory:".into(),
        }
    }
}
