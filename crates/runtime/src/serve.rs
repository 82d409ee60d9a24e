//! One way to serve gRPC, shared by every service binary and by the one-process platform.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use draughts_proto::pb::diagnostics_server::DiagnosticsServer;
use tokio::net::TcpListener;
use tonic::server::NamedService;
use tonic::service::RoutesBuilder;
use tonic_health::ServingStatus;
use tower::{Layer, Service};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::config::ServerConfig;
use crate::echo::EchoService;

/// Serving failed to start or crashed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("listener: {0}")]
    Io(#[from] std::io::Error),
}

/// The gRPC services to serve, by name (for health reporting).
#[derive(Default)]
pub struct Services {
    routes: RoutesBuilder,
    names: Vec<&'static str>,
    /// Static files served on the same port for `GET`/`HEAD` (the web client), if any.
    files: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("names", &self.names)
            .field("files", &self.files)
            .finish()
    }
}

impl Services {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a generated tonic server (already configured, e.g. with its message size limit).
    pub fn add<S>(&mut self, svc: S) -> &mut Self
    where
        S: Service<http::Request<tonic::body::Body>, Error = std::convert::Infallible>
            + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Response: axum::response::IntoResponse,
        S::Future: Send + 'static,
    {
        self.names.push(S::NAME);
        self.routes.add_service(svc);
        self
    }

    /// Also serves the files under `dir` on the same port: `GET`/`HEAD` requests get them (see
    /// [`crate::web`]), gRPC and gRPC-Web calls are unaffected.
    pub fn serve_files(&mut self, dir: impl Into<std::path::PathBuf>) -> &mut Self {
        self.files = Some(dir.into());
        self
    }

    /// Names of the services added so far.
    pub fn names(&self) -> &[&'static str] {
        &self.names
    }
}

/// How long a background round (a timer tick's work) may still run once shutdown is asked.
pub const ROUND_GRACE: Duration = Duration::from_secs(2);

/// Runs one round of a background loop unless `shutdown` resolves first; then the round gets `grace` to
/// finish and is dropped after it (the loops are written so that a round cut anywhere loses nothing, as a
/// killed process would not). `None`: shut down. Without this a round whose every store call waits for its
/// error (the store is down) held the process's exit for minutes.
pub async fn round_or_shutdown<W, S>(
    work: W,
    shutdown: &mut S,
    grace: Duration,
) -> Option<W::Output>
where
    W: std::future::Future,
    S: std::future::Future + Unpin,
{
    tokio::pin!(work);
    tokio::select! {
        out = &mut work => Some(out),
        _ = shutdown => {
            let _ = tokio::time::timeout(grace, work).await;
            None
        }
    }
}

/// Resolves on Ctrl-C or SIGTERM (what Kubernetes sends before killing a pod).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown requested");
}

/// Serves `services` on `listener` until `shutdown` resolves, then stops accepting, reports NOT_SERVING,
/// and lets in-flight calls finish for up to the configured grace period.
///
/// Every server also gets: health (`grpc.health.v1.Health`, every service SERVING while up), reflection
/// v1 and v1alpha over the whole API, `draughts.v1.Diagnostics/Echo`, gRPC-Web with CORS for the
/// configured origins only (`--cors-origins`, default none; HTTP/1.1 accepted), the request timeout,
/// the per-connection concurrency limit, per-RPC metrics and trace context taken from the request
/// metadata, and the connection edge of [`crate::edge`]: at most `max_connections` connections, TCP
/// keepalive, HTTP/2 keepalive pings with a timeout, a stream limit per connection, and connections
/// without an open request closed after the idle timeout.
pub async fn serve(
    config: &ServerConfig,
    mut services: Services,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let (reporter, health) = tonic_health::server::health_reporter();
    services.add(
        DiagnosticsServer::new(EchoService).max_decoding_message_size(config.max_message_bytes),
    );
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(draughts_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(draughts_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    for name in services.names.clone() {
        reporter
            .set_service_status(name, ServingStatus::Serving)
            .await;
    }
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    let names = services.names.clone();
    services.add(health);
    services.add(reflection_v1);
    services.add(reflection_v1alpha);

    // CORS: only the configured origins, never a mirror of whatever Origin the request carries, and
    // no credentials (calls authenticate with the `authorization` header, not cookies).
    let origins: Vec<http::HeaderValue> = config
        .cors_origins()
        .filter_map(|o| http::HeaderValue::from_str(o).ok())
        .collect();
    let cors = CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins))
        .allow_credentials(false)
        .allow_methods([http::Method::POST, http::Method::OPTIONS])
        .allow_headers([
            http::header::AUTHORIZATION,
            http::header::CONTENT_TYPE,
            http::HeaderName::from_static("x-grpc-web"),
            http::HeaderName::from_static("x-user-agent"),
            http::HeaderName::from_static("grpc-timeout"),
            http::HeaderName::from_static("traceparent"),
        ])
        .expose_headers([
            http::HeaderName::from_static("grpc-status"),
            http::HeaderName::from_static("grpc-message"),
            http::HeaderName::from_static("grpc-status-details-bin"),
            http::HeaderName::from_static("retry-after"),
            http::HeaderName::from_static("x-ratelimit-limit"),
            http::HeaderName::from_static("x-ratelimit-remaining"),
            http::HeaderName::from_static("x-ratelimit-reset"),
            http::HeaderName::from_static(draughts_proto::REASON_TRAILER),
        ])
        .max_age(std::time::Duration::from_secs(24 * 3600));

    let draining = Arc::new(tokio::sync::Notify::new());
    let draining_tx = draining.clone();
    let shutdown = async move {
        shutdown.await;
        for name in names {
            reporter
                .set_service_status(name, ServingStatus::NotServing)
                .await;
        }
        reporter
            .set_service_status("", ServingStatus::NotServing)
            .await;
        draining_tx.notify_one();
    };
    let limits = &config.connections;
    let incoming = crate::edge::incoming(listener, limits);
    let server = tonic::transport::Server::builder()
        .accept_http1(true)
        .timeout(config.request_timeout())
        .concurrency_limit_per_connection(config.concurrency_per_connection)
        .http2_keepalive_interval(Some(limits.http2_keepalive_interval()))
        .http2_keepalive_timeout(Some(limits.http2_keepalive_timeout()))
        .max_concurrent_streams(limits.max_streams_per_connection)
        .layer(crate::edge::ConnLayer)
        .layer(cors)
        .layer(crate::web::StaticFilesLayer::new(services.files.as_deref()))
        .layer(tonic_web::GrpcWebLayer::new())
        .layer(RpcLayer)
        .add_routes(services.routes.routes())
        .serve_with_incoming_shutdown(incoming, shutdown);
    let grace = config.shutdown_grace();
    tokio::select! {
        r = server => r?,
        _ = async { draining.notified().await; tokio::time::sleep(grace).await } => {
            tracing::warn!(grace_ms = grace.as_millis() as u64, "in-flight calls still running after the grace period; closing");
        }
    }
    Ok(())
}

/// Per-RPC span (child of the caller's trace context) and metrics:
/// `draughts_rpc_requests_total{method,code}` and `draughts_rpc_duration_seconds{method}`.
/// The code is the `grpc-status` of a trailers-only response (errors), else 0.
#[derive(Clone, Copy, Debug)]
struct RpcLayer;

impl<S> Layer<S> for RpcLayer {
    type Service = RpcService<S>;
    fn layer(&self, inner: S) -> RpcService<S> {
        RpcService { inner }
    }
}

#[derive(Clone, Debug)]
struct RpcService<S> {
    inner: S,
}

impl<S, B, R> Service<http::Request<B>> for RpcService<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = req.uri().path().to_string();
        let span = tracing::info_span!("rpc", rpc.method = %method, otel.kind = "server");
        crate::propagation::set_parent_from_headers(&span, req.headers());
        let start = Instant::now();
        let fut = {
            let _enter = span.enter();
            self.inner.call(req)
        };
        Box::pin(tracing::Instrument::instrument(
            async move {
                let res = fut.await;
                let code = match &res {
                    Ok(r) => r
                        .headers()
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("0")
                        .to_string(),
                    Err(_) => "transport".to_string(),
                };
                metrics::counter!("draughts_rpc_requests_total", "method" => method.clone(), "code" => code)
                    .increment(1);
                metrics::histogram!("draughts_rpc_duration_seconds", "method" => method)
                    .record(start.elapsed().as_secs_f64());
                res
            },
            span,
        ))
    }
}
