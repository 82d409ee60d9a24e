//! What every service binary shares: configuration, telemetry, and one way to serve gRPC.
//!
//! A service's `main` parses its `Config` (which flattens [`ServerConfig`] and [`TelemetryConfig`]),
//! validates it, calls [`telemetry::init`], binds its listener and calls its library's
//! `run(config, listener, shutdown)`, which builds its services and hands them to [`serve::serve`].
//! `serve` adds what every service needs: gRPC health (for Kubernetes probes), reflection (v1 and
//! v1alpha), the `Diagnostics` echo, gRPC-Web with CORS for browsers, a request timeout, a concurrency
//! limit, per-RPC metrics and trace-context extraction, and graceful shutdown that drains in-flight calls.
//! [`upstream`] is the one way a service calls another: its channel and the reading of its answers.

pub mod admission;
pub mod config;
pub mod echo;
pub mod edge;
pub mod listen;
pub mod propagation;
pub mod serve;
pub mod telemetry;
pub mod upstream;
pub mod web;

pub use config::{BackendConfig, ConfigError, ConnectionLimits, ServerConfig, TelemetryConfig};
pub use serve::{ROUND_GRACE, ServeError, Services, round_or_shutdown, serve, shutdown_signal};
