//! Tracing subscriber, optional OpenTelemetry export, and the Prometheus metrics endpoint.
//!
//! Libraries only emit `tracing` events and `metrics` values; a binary's `main` calls [`init`] once.
//! Without `OTEL_EXPORTER_OTLP_ENDPOINT` nothing is exported; with it, spans go to the collector in
//! batches, and an unreachable collector only costs dropped spans (never a failed request).

use std::net::SocketAddr;
use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::{ConfigError, TelemetryConfig};

/// Flushes and stops trace export when dropped.
#[derive(Debug)]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            let _ = p.shutdown();
        }
    }
}

/// Installs the global subscriber (logs + optional OTLP traces) and the W3C propagator.
pub fn init(service: &str, config: &TelemetryConfig) -> Result<TelemetryGuard, ConfigError> {
    config.validate()?;
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let filter = EnvFilter::try_new(&config.log).map_err(|e| ConfigError(e.to_string()))?;
    let fmt = if config.log_format == "json" {
        tracing_subscriber::fmt::layer().json().boxed()
    } else {
        tracing_subscriber::fmt::layer().boxed()
    };
    let (otel, provider) = match &config.otlp_endpoint {
        Some(endpoint) => {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(endpoint.clone())
                .build()
                .map_err(|e| ConfigError(format!("OTLP exporter: {e}")))?;
            let provider = SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(
                    opentelemetry_sdk::Resource::builder()
                        .with_service_name(service.to_string())
                        .build(),
                )
                .build();
            opentelemetry::global::set_tracer_provider(provider.clone());
            let tracer = provider.tracer(service.to_string());
            (
                Some(tracing_opentelemetry::layer().with_tracer(tracer)),
                Some(provider),
            )
        }
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(otel)
        .try_init()
        .map_err(|e| ConfigError(format!("tracing subscriber: {e}")))?;
    Ok(TelemetryGuard { provider })
}

static PROMETHEUS: OnceLock<PrometheusHandle> = OnceLock::new();

/// Bucket bounds (seconds) of every histogram: latency from 1 ms to 10 s. Histograms are exported
/// as Prometheus histograms (`_bucket`, `_sum`, `_count`), not summaries, so that the series of
/// several replicas can be added up and quantiles computed over all of them
/// (`histogram_quantile(0.99, sum by (le, method) (rate(draughts_rpc_duration_seconds_bucket[5m])))`).
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The process-wide Prometheus recorder (installed on first use).
pub fn prometheus() -> &'static PrometheusHandle {
    PROMETHEUS.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets(&LATENCY_BUCKETS)
            .map(PrometheusBuilder::build_recorder)
            .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
        let handle = recorder.handle();
        // Fails only if another recorder was installed first; the handle then renders nothing, which
        // is not worth failing a service for.
        let _ = metrics::set_global_recorder(recorder);
        handle
    })
}

/// Serves `GET /metrics` on `addr` until `shutdown` completes; returns the bound address.
/// What every service binary's `main` does first: [`init`], then the Prometheus listener (if
/// configured) until the process is asked to stop. Keep the guard until the end of `main`.
pub async fn start(
    service: &str,
    config: &TelemetryConfig,
) -> Result<TelemetryGuard, Box<dyn std::error::Error + Send + Sync>> {
    let guard = init(service, config)?;
    if let Some(addr) = config.metrics_addr()? {
        let bound = serve_metrics(addr, crate::shutdown_signal()).await?;
        tracing::info!(%bound, "metrics on http://{bound}/metrics");
    }
    Ok(guard)
}

pub async fn serve_metrics(
    addr: SocketAddr,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<SocketAddr> {
    let handle = prometheus();
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || async move { handle.render() }),
    );
    let listener = crate::listen::bind("metrics listener", addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::warn!(error = %e, "metrics endpoint stopped");
        }
    });
    Ok(bound)
}
