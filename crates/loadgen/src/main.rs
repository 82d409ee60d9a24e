//! `draughts-load`: argument parsing and output over the `draughts_loadgen` library.

use std::io::Read;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use draughts_loadgen::{
    Comparison, LoadSettings, Output, PreparedCall, Report, Target, parse_duration, run_load,
};

#[derive(Parser, Debug)]
#[command(
    name = "draughts-load",
    version,
    about = "Load generator for any unary RPC of the draughts.v1 API (loopback servers only)",
    after_help = "Example:\n  draughts-load --method draughts.v1.Rules/ValidateMove \\\n    --request '{\"rules\":{\"variant\":\"VARIANT_ENGLISH\"},\"move\":{\"text\":\"11-15\"}}' \\\n    --concurrency 64 --duration 20s --compare"
)]
struct Cli {
    /// Server to load: http://HOST:PORT with HOST in 127.0.0.0/8, `[::1]` or localhost (anything else is refused).
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    server: String,
    /// Unary method, package.Service/Method.
    #[arg(long)]
    method: String,
    /// Request message as proto3 JSON (enums by name, bytes as base64); default `{}`.
    #[arg(long, conflicts_with = "request_file")]
    request: Option<String>,
    /// Read the request JSON from a file (`-` = standard input).
    #[arg(long)]
    request_file: Option<String>,
    /// Calls in flight at any time.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Stop after this many measured calls (or at --duration, whichever comes first).
    #[arg(long, default_value_t = 200_000)]
    requests: u64,
    /// Stop after this long (or at --requests, whichever comes first): 30s, 500ms, 2m.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Load sent before measuring, not counted (0 = none).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    warmup: Duration,
    /// HTTP/2 connections to spread the calls over (default: min(concurrency, 4)).
    #[arg(long)]
    connections: Option<usize>,
    /// Per-call timeout; a call past it counts as DEADLINE_EXCEEDED.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    timeout: Duration,
    /// The server's process id: report its CPU time per request too (Linux).
    #[arg(long)]
    server_pid: Option<u32>,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    quiet: bool,
    /// After the method, run --compare-method with the same settings and print the ratio.
    #[arg(long)]
    compare: bool,
    /// The baseline method of --compare.
    #[arg(long, default_value = "draughts.v1.Diagnostics/Echo")]
    compare_method: String,
    /// The baseline request of --compare (proto3 JSON).
    #[arg(long, default_value = r#"{"payload":""}"#)]
    compare_request: String,
}

fn request_json(cli: &Cli) -> anyhow::Result<String> {
    match (&cli.request, &cli.request_file) {
        (Some(json), _) => Ok(json.clone()),
        (None, Some(path)) if path == "-" => {
            let mut json = String::new();
            std::io::stdin()
                .read_to_string(&mut json)
                .context("reading the request from standard input")?;
            Ok(json)
        }
        (None, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("reading the request file {path}")),
        (None, None) => Ok("{}".into()),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // One line, whatever RUST_BACKTRACE says: these are the user's mistakes, not bugs.
            eprintln!("draughts-load: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let target = Target::parse(&cli.server).await?;
    let call = PreparedCall::from_json(&cli.method, &request_json(&cli)?)?;
    let baseline = cli
        .compare
        .then(|| PreparedCall::from_json(&cli.compare_method, &cli.compare_request))
        .transpose()?;
    let settings = LoadSettings {
        target,
        concurrency: cli.concurrency,
        requests: cli.requests,
        duration: cli.duration,
        warmup: cli.warmup,
        connections: cli
            .connections
            .unwrap_or_else(|| LoadSettings::default_connections(cli.concurrency)),
        timeout: cli.timeout,
        progress: !cli.quiet,
        server_pid: cli.server_pid,
    };
    settings.validate()?;

    let mut runs: Vec<Report> = Vec::new();
    for call in std::iter::once(&call).chain(baseline.as_ref()) {
        let report = run_load(&settings, call).await?;
        if !cli.json {
            println!("{report}\n");
        }
        runs.push(report);
    }
    let comparison = match runs.as_slice() {
        [method, baseline] => Some(Comparison::new(method, baseline)),
        _ => None,
    };
    if cli.json {
        let output = Output { runs, comparison };
        println!("{}", serde_json::to_string_pretty(&output)?);
    } else if let Some(comparison) = comparison {
        println!("{comparison}");
    }
    Ok(())
}
