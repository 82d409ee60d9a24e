//! Short, bounded runs against the real validation service started in-process on 127.0.0.1:0.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use draughts_loadgen::report::StoppedBy;
use draughts_loadgen::{LoadError, LoadSettings, PreparedCall, Report, Target, run_load};
use draughts_validation::Config;

use draughts_testkit::ServiceUnderTest;

const VALIDATE_MOVE: &str = "draughts.v1.Rules/ValidateMove";
const ENGLISH_11_15: &str = r#"{"rules":{"variant":"VARIANT_ENGLISH"},"move":{"text":"11-15"}}"#;
/// International middle game, 16 men each, White to move: 28x17 (the only legal move) takes the man on 22.
const INTERNATIONAL_CAPTURE: &str = r#"{"rules":{"variant":"VARIANT_INTERNATIONAL"},
    "fen":"W:W27,28,31,32,33,34,36,37,38,39,41,42,43,44,46,47:B3,6,7,8,9,11,12,13,14,16,18,19,22,23,24,25",
    "move":{"text":"28x17"}}"#;

/// The validation service on 127.0.0.1:0 (the shared harness from testkit).
struct Server {
    addr: SocketAddr,
    inner: ServiceUnderTest,
}

impl Server {
    async fn start() -> Server {
        // Rules is rate limited per client address like every anonymous call: lift the limit for load.
        let mut config = Config::for_tests();
        config.auth.rate_limit_anonymous_per_minute = u32::MAX;
        let inner = ServiceUnderTest::start(move |listener, shutdown| {
            draughts_validation::run(config, listener, shutdown)
        })
        .await;
        Server {
            addr: inner.addr(),
            inner,
        }
    }

    async fn stop(self) {
        self.inner.stop().await
    }
}

fn settings(addr: SocketAddr, requests: u64, duration: Duration) -> LoadSettings {
    LoadSettings {
        target: Target { addr },
        concurrency: 8,
        requests,
        duration,
        warmup: Duration::ZERO,
        connections: 2,
        timeout: Duration::from_secs(10),
        progress: false,
        server_pid: None,
    }
}

async fn load(addr: SocketAddr, method: &str, json: &str, requests: u64) -> Report {
    let call = PreparedCall::from_json(method, json).unwrap();
    run_load(&settings(addr, requests, Duration::from_secs(60)), &call)
        .await
        .unwrap()
}

fn check_all_ok(report: &Report, requests: u64) {
    assert_eq!(report.requests, requests, "{report}");
    assert_eq!(report.ok, requests, "{report}");
    assert!(report.errors.is_empty(), "{report}");
    assert_eq!(report.stopped_by, StoppedBy::Requests);
    assert!(report.throughput_rps > 0.0);
    let latency = report.latency_ms;
    assert!(0.0 < latency.p50 && latency.p50 <= latency.p99 && latency.p99 <= latency.max);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_load_of_validate_move_and_echo_has_no_errors() {
    let server = Server::start().await;
    let report = load(server.addr, VALIDATE_MOVE, ENGLISH_11_15, 500).await;
    check_all_ok(&report, 500);
    // A legal move's answer carries the move, the position and the status.
    assert!(report.mean_response_bytes > 100.0, "{report}");

    let report = load(server.addr, VALIDATE_MOVE, INTERNATIONAL_CAPTURE, 500).await;
    check_all_ok(&report, 500);
    assert!(report.mean_response_bytes > 100.0, "{report}");

    let report = load(
        server.addr,
        "draughts.v1.Diagnostics/Echo",
        r#"{"payload":"aGVsbG8="}"#,
        500,
    )
    .await;
    check_all_ok(&report, 500);
    // "hello": 2 bytes of field header + 5 bytes.
    assert_eq!(report.mean_response_bytes, 7.0);
    server.stop().await;
}

#[tokio::test]
async fn the_measured_requests_are_legal_moves() {
    use draughts_proto::pb::rules_client::RulesClient;
    use prost::Message;

    let server = Server::start().await;
    let mut client = RulesClient::connect(format!("http://{}", server.addr))
        .await
        .unwrap();
    for (json, captured) in [(ENGLISH_11_15, 0), (INTERNATIONAL_CAPTURE, 1)] {
        let call = PreparedCall::from_json(VALIDATE_MOVE, json).unwrap();
        let request = draughts_proto::pb::ValidateMoveRequest::decode(call.request).unwrap();
        let response = client.validate_move(request).await.unwrap().into_inner();
        assert!(response.legal, "{json}: {}", response.reason);
        assert_eq!(response.r#move.unwrap().captured.len(), captured, "{json}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_request_is_counted_under_its_status_code() {
    let server = Server::start().await;
    // No variant: INVALID_ARGUMENT.
    let report = load(
        server.addr,
        VALIDATE_MOVE,
        r#"{"move":{"text":"11-15"}}"#,
        200,
    )
    .await;
    assert_eq!(report.requests, 200, "{report}");
    assert_eq!(report.ok, 0, "{report}");
    assert_eq!(
        report.errors.iter().collect::<Vec<_>>(),
        [(&"INVALID_ARGUMENT".to_owned(), &200)],
        "{report}"
    );
    // An illegal move is an answer, not an error.
    let report = load(
        server.addr,
        VALIDATE_MOVE,
        r#"{"rules":{"variant":"VARIANT_ENGLISH"},"move":{"text":"11-16"}}"#,
        50,
    )
    .await;
    check_all_ok(&report, 50);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_duration_bounds_a_run_with_a_large_request_count() {
    let server = Server::start().await;
    let call = PreparedCall::from_json("draughts.v1.Diagnostics/Echo", "{}").unwrap();
    let mut settings = settings(server.addr, u64::MAX, Duration::from_millis(300));
    // The server runs in this process: its CPU time is ours.
    settings.server_pid = Some(std::process::id());
    let started = Instant::now();
    let report = run_load(&settings, &call).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(report.stopped_by, StoppedBy::Duration, "{report}");
    assert!(report.requests > 0 && report.errors.is_empty(), "{report}");
    if cfg!(target_os = "linux") {
        assert!(report.client_cpu_us_per_request.is_some(), "{report}");
        assert!(report.server_cpu_us_per_request.is_some(), "{report}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_still_ends_the_run() {
    // Accepts connections and reads nothing: every call times out on the client side.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let call = PreparedCall::from_json("draughts.v1.Diagnostics/Echo", "{}").unwrap();
    let mut settings = settings(addr, 1_000, Duration::from_millis(300));
    settings.timeout = Duration::from_millis(200);
    let started = Instant::now();
    let report = run_load(&settings, &call).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(report.ok, 0, "{report}");
    assert_eq!(
        report.errors.get("DEADLINE_EXCEEDED"),
        Some(&report.requests),
        "{report}"
    );
    silent.abort();
}

#[tokio::test]
async fn no_server_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let call = PreparedCall::from_json("draughts.v1.Diagnostics/Echo", "{}").unwrap();
    let err = run_load(&settings(addr, 10, Duration::from_secs(1)), &call)
        .await
        .unwrap_err();
    assert!(matches!(err, LoadError::Connect { .. }), "{err}");
    assert!(err.to_string().contains("is the server running?"), "{err}");
}

#[tokio::test]
async fn bad_settings_are_refused() {
    let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let call = PreparedCall::from_json("draughts.v1.Diagnostics/Echo", "{}").unwrap();
    let mut bad = settings(addr, 10, Duration::from_secs(1));
    bad.connections = 9;
    let err = run_load(&bad, &call).await.unwrap_err();
    assert!(err.to_string().contains("--connections"), "{err}");
    let mut bad = settings(addr, 0, Duration::from_secs(1));
    bad.requests = 0;
    let err = run_load(&bad, &call).await.unwrap_err();
    assert!(err.to_string().contains("--requests"), "{err}");
}
