//! The load driver: `concurrency` workers, each with one request in flight at a time, spread over
//! `connections` HTTP/2 channels; a warm-up phase whose results are dropped, then a measured phase that
//! stops at the request count or the deadline, whichever comes first.
//!
//! Concurrency choices:
//! - A worker is a tokio task running a closed loop (send, await the answer, record, repeat), so the
//!   offered load adapts to the server: this measures capacity at a given number of outstanding calls,
//!   not latency at a fixed arrival rate.
//! - The request count is claimed by a shared atomic ticket counter before each call, so exactly
//!   `requests` calls are made when the deadline does not come first.
//! - Latencies go into one `hdrhistogram` per connection behind a std `Mutex`: the critical section is one
//!   array increment, far below the cost of a call, and memory stays bounded however long the run is.
//! - Every call is wrapped in the per-request timeout and no call starts after the deadline, so a phase
//!   ends at most one timeout after its deadline: the run always stops by itself, even against a server
//!   that never answers.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use tonic::client::Grpc;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Status};

use crate::call::PreparedCall;
use crate::codec::RawCodec;
use crate::cpu;
use crate::report::{Latency, Report, StoppedBy};
use crate::target::Target;

/// Largest latency the histograms hold (larger ones are recorded as this): the longest allowed timeout.
const MAX_LATENCY: Duration = Duration::from_secs(600);

/// How hard and how long to push.
#[derive(Debug, Clone)]
pub struct LoadSettings {
    pub target: Target,
    /// Calls in flight at any time (one per worker).
    pub concurrency: usize,
    /// Stop after this many measured calls...
    pub requests: u64,
    /// ...or after this long, whichever comes first.
    pub duration: Duration,
    /// Load sent before measuring, not counted (0 = none).
    pub warmup: Duration,
    /// HTTP/2 connections the workers are spread over (round robin).
    pub connections: usize,
    /// Per-call timeout; a call past it counts as DEADLINE_EXCEEDED.
    pub timeout: Duration,
    /// Print one progress line per second on stderr.
    pub progress: bool,
    /// The server's process id, to report its CPU time per request (Linux `/proc`); `None` = not measured.
    pub server_pid: Option<u32>,
}

/// Why settings are refused.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SettingsError(pub String);

impl LoadSettings {
    /// Default `--connections`: one per worker up to 4.
    pub fn default_connections(concurrency: usize) -> usize {
        concurrency.clamp(1, 4)
    }

    pub fn validate(&self) -> Result<(), SettingsError> {
        let fail = |text: String| Err(SettingsError(text));
        if !(1..=10_000).contains(&self.concurrency) {
            return fail(format!(
                "--concurrency must be from 1 to 10000, got {}",
                self.concurrency
            ));
        }
        if self.requests == 0 {
            return fail("--requests must be at least 1".into());
        }
        if self.duration.is_zero() || self.duration > Duration::from_secs(24 * 3600) {
            return fail(format!(
                "--duration must be more than 0 and at most 24h, got {:?}",
                self.duration
            ));
        }
        if self.warmup > Duration::from_secs(3600) {
            return fail(format!(
                "--warmup must be at most 1h, got {:?}",
                self.warmup
            ));
        }
        if !(1..=self.concurrency).contains(&self.connections) {
            return fail(format!(
                "--connections must be from 1 to --concurrency ({}), got {}",
                self.concurrency, self.connections
            ));
        }
        if self.timeout.is_zero() || self.timeout > MAX_LATENCY {
            return fail(format!(
                "--timeout must be more than 0 and at most 600s, got {:?}",
                self.timeout
            ));
        }
        if let Some(pid) = self.server_pid
            && cpu::process_cpu(Some(pid)).is_none()
        {
            return fail(format!(
                "--server-pid {pid}: no such process, or no /proc/{pid}/stat to read its CPU time"
            ));
        }
        Ok(())
    }
}

/// Why a run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error("cannot connect to {uri}: {reason} (is the server running?)")]
    Connect { uri: String, reason: String },
}

/// Runs the warm-up (if any) and the measured phase of `call` against the target.
pub async fn run_load(settings: &LoadSettings, call: &PreparedCall) -> Result<Report, LoadError> {
    settings.validate()?;
    let channels = connect(settings).await?;
    if !settings.warmup.is_zero() {
        run_phase(settings, call, &channels, Phase::Warmup).await;
    }
    let client_cpu_before = cpu::process_cpu(None);
    let server_cpu_before = settings
        .server_pid
        .and_then(|pid| cpu::process_cpu(Some(pid)));
    let measured = run_phase(settings, call, &channels, Phase::Measure).await;
    let cpu_used = CpuUsed {
        client: client_cpu_before
            .zip(cpu::process_cpu(None))
            .map(|(before, after)| after.saturating_sub(before)),
        server: server_cpu_before
            .zip(
                settings
                    .server_pid
                    .and_then(|pid| cpu::process_cpu(Some(pid))),
            )
            .map(|(before, after)| after.saturating_sub(before)),
    };
    Ok(measured.report(settings, call, cpu_used))
}

async fn connect(settings: &LoadSettings) -> Result<Vec<Channel>, LoadError> {
    let uri = settings.target.uri();
    let connect_error = |reason: String| LoadError::Connect {
        uri: uri.clone(),
        reason,
    };
    let endpoint = Endpoint::from_shared(uri.clone())
        .map_err(|err| connect_error(err.to_string()))?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(5));
    let mut channels = Vec::with_capacity(settings.connections);
    for _ in 0..settings.connections {
        // Each `connect()` opens its own TCP connection (clones of a Channel would share one).
        let channel = endpoint
            .connect()
            .await
            .map_err(|err| connect_error(source_chain(&err)))?;
        channels.push(channel);
    }
    Ok(channels)
}

fn source_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut previous = text.clone();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // Some layers wrap an error in another with the same message: say it once.
        if cause_text != previous && !previous.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        previous = cause_text;
        source = cause.source();
    }
    text
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Warmup,
    Measure,
}

/// What one connection's workers recorded.
#[derive(Debug)]
struct Shard {
    latency_us: Histogram<u64>,
    errors: BTreeMap<&'static str, u64>,
    response_bytes: u64,
}

impl Shard {
    fn new() -> Shard {
        let max_us = MAX_LATENCY.as_micros() as u64;
        Shard {
            latency_us: Histogram::new_with_bounds(1, max_us, 3)
                .expect("constant histogram bounds are valid"),
            errors: BTreeMap::new(),
            response_bytes: 0,
        }
    }
}

#[derive(Debug)]
struct Shared {
    /// Tickets handed out (may overshoot the limit by one per worker: those tickets are not used).
    issued: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    shards: Vec<Mutex<Shard>>,
}

/// CPU time used during the measured phase, where it could be read.
#[derive(Debug, Clone, Copy)]
struct CpuUsed {
    client: Option<Duration>,
    server: Option<Duration>,
}

/// The result of the measured phase.
#[derive(Debug)]
struct Measured {
    elapsed: Duration,
    shards: Vec<Shard>,
}

async fn run_phase(
    settings: &LoadSettings,
    call: &PreparedCall,
    channels: &[Channel],
    phase: Phase,
) -> Measured {
    let (length, max_requests) = match phase {
        Phase::Warmup => (settings.warmup, u64::MAX),
        Phase::Measure => (settings.duration, settings.requests),
    };
    let shared = Arc::new(Shared {
        issued: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        shards: channels.iter().map(|_| Mutex::new(Shard::new())).collect(),
    });
    let started = Instant::now();
    let deadline = started + length;
    let progress = settings.progress.then(|| {
        tokio::spawn(report_progress(
            Arc::clone(&shared),
            phase,
            call.method.clone(),
            started,
        ))
    });
    let workers: Vec<_> = (0..settings.concurrency)
        .map(|worker| {
            let shard = worker % channels.len();
            let grpc = Grpc::new(channels[shard].clone());
            tokio::spawn(work(
                grpc,
                call.path.clone(),
                call.request.clone(),
                Arc::clone(&shared),
                shard,
                deadline,
                max_requests,
                settings.timeout,
            ))
        })
        .collect();
    for worker in workers {
        // A worker only ends by returning; a panic in one is a bug worth surfacing.
        worker.await.expect("load worker panicked");
    }
    let elapsed = started.elapsed();
    if let Some(progress) = progress {
        progress.abort();
        // Wait until the task is gone: it holds a reference to `shared`.
        let _ = progress.await;
    }
    let shared = Arc::into_inner(shared).expect("every worker has ended");
    Measured {
        elapsed,
        shards: shared
            .shards
            .into_iter()
            .map(|shard| shard.into_inner().unwrap_or_else(|err| err.into_inner()))
            .collect(),
    }
}

#[allow(clippy::too_many_arguments)]
async fn work(
    mut grpc: Grpc<Channel>,
    path: PathAndQuery,
    request: Bytes,
    shared: Arc<Shared>,
    shard: usize,
    deadline: Instant,
    max_requests: u64,
    timeout: Duration,
) {
    loop {
        if Instant::now() >= deadline {
            return;
        }
        if shared.issued.fetch_add(1, Ordering::Relaxed) >= max_requests {
            return;
        }
        let started = Instant::now();
        let outcome = match tokio::time::timeout(
            timeout,
            call_once(&mut grpc, path.clone(), request.clone()),
        )
        .await
        {
            Ok(outcome) => outcome,
            Err(_elapsed) => Err(Status::deadline_exceeded("client-side timeout")),
        };
        let latency_us = started.elapsed().as_micros() as u64;
        {
            let mut shard = shared.shards[shard]
                .lock()
                .unwrap_or_else(|err| err.into_inner());
            shard.latency_us.saturating_record(latency_us.max(1));
            match &outcome {
                Ok(n_bytes) => shard.response_bytes += *n_bytes as u64,
                Err(status) => *shard.errors.entry(code_name(status.code())).or_default() += 1,
            }
        }
        if outcome.is_err() {
            shared.failed.fetch_add(1, Ordering::Relaxed);
        }
        shared.completed.fetch_add(1, Ordering::Relaxed);
    }
}

async fn call_once(
    grpc: &mut Grpc<Channel>,
    path: PathAndQuery,
    request: Bytes,
) -> Result<usize, Status> {
    grpc.ready()
        .await
        .map_err(|err| Status::unavailable(source_chain(&err)))?;
    let response = grpc.unary(Request::new(request), path, RawCodec).await?;
    Ok(response.into_inner())
}

async fn report_progress(shared: Arc<Shared>, phase: Phase, method: String, started: Instant) {
    let label = match phase {
        Phase::Warmup => "warmup",
        Phase::Measure => "load",
    };
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    let mut previous = 0;
    loop {
        ticks.tick().await;
        let completed = shared.completed.load(Ordering::Relaxed);
        let failed = shared.failed.load(Ordering::Relaxed);
        eprintln!(
            "[{label} {method} {:>4.0}s] {:>8} req/s  total {completed}  errors {failed}",
            started.elapsed().as_secs_f64(),
            completed - previous,
        );
        previous = completed;
    }
}

impl Measured {
    fn report(self, settings: &LoadSettings, call: &PreparedCall, cpu_used: CpuUsed) -> Report {
        let mut shards = self.shards.into_iter();
        let mut merged = shards.next().unwrap_or_else(Shard::new);
        for shard in shards {
            merged
                .latency_us
                .add(&shard.latency_us)
                .expect("histograms of equal bounds add");
            for (code, count) in shard.errors {
                *merged.errors.entry(code).or_default() += count;
            }
            merged.response_bytes += shard.response_bytes;
        }
        let requests = merged.latency_us.len();
        let n_errors: u64 = merged.errors.values().sum();
        let ok = requests - n_errors;
        let elapsed_s = self.elapsed.as_secs_f64();
        let ms = |us: u64| us as f64 / 1000.0;
        let latency = &merged.latency_us;
        let per_request_us = |used: Option<Duration>| {
            used.filter(|_| requests > 0)
                .map(|used| used.as_secs_f64() * 1e6 / requests as f64)
        };
        Report {
            method: call.method.clone(),
            request_bytes: call.request.len(),
            concurrency: settings.concurrency,
            connections: settings.connections,
            requests_limit: settings.requests,
            duration_limit_s: settings.duration.as_secs_f64(),
            warmup_s: settings.warmup.as_secs_f64(),
            requests,
            ok,
            errors: merged
                .errors
                .into_iter()
                .map(|(code, count)| (code.to_owned(), count))
                .collect(),
            stopped_by: if requests >= settings.requests {
                StoppedBy::Requests
            } else {
                StoppedBy::Duration
            },
            elapsed_s,
            throughput_rps: if elapsed_s > 0.0 {
                requests as f64 / elapsed_s
            } else {
                0.0
            },
            mean_response_bytes: if ok > 0 {
                merged.response_bytes as f64 / ok as f64
            } else {
                0.0
            },
            client_cpu_us_per_request: per_request_us(cpu_used.client),
            server_cpu_us_per_request: per_request_us(cpu_used.server),
            latency_ms: if requests == 0 {
                Latency::default()
            } else {
                Latency {
                    mean: latency.mean() / 1000.0,
                    p50: ms(latency.value_at_quantile(0.50)),
                    p90: ms(latency.value_at_quantile(0.90)),
                    p99: ms(latency.value_at_quantile(0.99)),
                    p99_9: ms(latency.value_at_quantile(0.999)),
                    max: ms(latency.max()),
                }
            },
        }
    }
}

/// The canonical gRPC name of a status code (`INVALID_ARGUMENT`), as the protocol spells it.
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}
