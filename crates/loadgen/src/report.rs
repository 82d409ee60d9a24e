//! What a run measured, as text for people and JSON for scripts.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

/// Latency percentiles in milliseconds (every completed call, answered with OK or with an error status).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
}

/// Which bound ended the measured phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StoppedBy {
    Requests,
    Duration,
}

/// One method's measured phase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// `package.Service/Method`.
    pub method: String,
    /// Size of the encoded request message.
    pub request_bytes: usize,
    pub concurrency: usize,
    pub connections: usize,
    pub requests_limit: u64,
    pub duration_limit_s: f64,
    pub warmup_s: f64,
    /// Calls completed in the measured phase (OK + errors).
    pub requests: u64,
    pub ok: u64,
    /// Failed calls by gRPC status code name (`INVALID_ARGUMENT`); a client-side timeout counts as
    /// `DEADLINE_EXCEEDED`.
    pub errors: BTreeMap<String, u64>,
    pub stopped_by: StoppedBy,
    /// Wall time of the measured phase, seconds.
    pub elapsed_s: f64,
    /// `requests / elapsed_s`.
    pub throughput_rps: f64,
    /// Mean size of an OK response message, bytes.
    pub mean_response_bytes: f64,
    /// CPU time (user + system) of this load generator per request in the measured phase, microseconds
    /// (Linux; 10 ms clock granularity over the whole phase).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_cpu_us_per_request: Option<f64>,
    /// The same for the server process, with `--server-pid`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_us_per_request: Option<f64>,
    pub latency_ms: Latency,
}

impl Report {
    pub fn n_errors(&self) -> u64 {
        self.errors.values().sum()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}  (request {} bytes, response {:.0} bytes; concurrency {}, connections {})",
            self.method,
            self.request_bytes,
            self.mean_response_bytes,
            self.concurrency,
            self.connections
        )?;
        let stopped_by = match self.stopped_by {
            StoppedBy::Requests => "request count",
            StoppedBy::Duration => "duration",
        };
        writeln!(
            f,
            "  requests    {} in {:.2} s (ok {}, errors {}; stopped by {stopped_by})",
            self.requests,
            self.elapsed_s,
            self.ok,
            self.n_errors()
        )?;
        writeln!(f, "  throughput  {:.0} req/s", self.throughput_rps)?;
        let l = &self.latency_ms;
        write!(
            f,
            "  latency ms  p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}  (mean {:.3})",
            l.p50, l.p90, l.p99, l.p99_9, l.max, l.mean
        )?;
        let cpu = [
            ("client", self.client_cpu_us_per_request),
            ("server", self.server_cpu_us_per_request),
        ]
        .into_iter()
        .filter_map(|(who, us)| us.map(|us| format!("{who} {us:.1}")))
        .collect::<Vec<_>>();
        if !cpu.is_empty() {
            write!(f, "\n  cpu us/req  {}", cpu.join("  "))?;
        }
        if self.server_cpu_us_per_request == Some(0.0) {
            write!(
                f,
                " (no server CPU time: is --server-pid the server itself, not a shell that started it?)"
            )?;
        }
        for (code, count) in &self.errors {
            write!(f, "\n  error       {code}: {count}")?;
        }
        Ok(())
    }
}

/// The first method against the second (the baseline), run with the same settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub method: String,
    pub baseline: String,
    /// method req/s ÷ baseline req/s.
    pub throughput_ratio: f64,
    /// method p50 ÷ baseline p50.
    pub p50_ratio: f64,
    /// method p99 ÷ baseline p99.
    pub p99_ratio: f64,
    /// method server CPU per request ÷ baseline's, with `--server-pid`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_ratio: Option<f64>,
}

impl Comparison {
    pub fn new(method: &Report, baseline: &Report) -> Comparison {
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
        Comparison {
            method: method.method.clone(),
            baseline: baseline.method.clone(),
            throughput_ratio: ratio(method.throughput_rps, baseline.throughput_rps),
            p50_ratio: ratio(method.latency_ms.p50, baseline.latency_ms.p50),
            p99_ratio: ratio(method.latency_ms.p99, baseline.latency_ms.p99),
            server_cpu_ratio: method
                .server_cpu_us_per_request
                .zip(baseline.server_cpu_us_per_request)
                .map(|(a, b)| ratio(a, b)),
        }
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} vs {}: throughput x{:.3}, p50 x{:.3}, p99 x{:.3}",
            self.method, self.baseline, self.throughput_ratio, self.p50_ratio, self.p99_ratio
        )?;
        if let Some(server_cpu_ratio) = self.server_cpu_ratio {
            write!(f, ", server CPU per request x{server_cpu_ratio:.3}")?;
        }
        Ok(())
    }
}

/// What `--json` prints: every run, and the comparison when there is one.
#[derive(Debug, Clone, Serialize)]
pub struct Output {
    pub runs: Vec<Report>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
}
