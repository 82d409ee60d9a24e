//! Telemetry must never fail a request: with an OTLP endpoint where no collector listens, the service
//! starts, answers, and shuts down promptly.

use std::time::{Duration, Instant};

use draughts_proto::pb;
use draughts_runtime::{ServerConfig, Services, TelemetryConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_succeed_without_a_collector() {
    // Port 9 (discard) on loopback: nothing listens there in the test environment.
    let config = TelemetryConfig {
        log: "info".into(),
        log_format: "json".into(),
        otlp_endpoint: Some("http://127.0.0.1:9".into()),
        metrics_listen: "127.0.0.1:0".into(),
    };
    let guard = draughts_runtime::telemetry::init("telemetry-test", &config).unwrap();
    let metrics = draughts_runtime::telemetry::serve_metrics(
        "127.0.0.1:0".parse().unwrap(),
        std::future::pending(),
    )
    .await
    .unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        draughts_runtime::serve(
            &ServerConfig::for_tests(),
            Services::new(),
            listener,
            async {
                let _ = rx.await;
            },
        )
        .await
    });
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut echo = pb::diagnostics_client::DiagnosticsClient::with_interceptor(
        channel,
        draughts_runtime::propagation::inject_into_request,
    );
    for i in 0..20u8 {
        let r = echo
            .echo(pb::EchoRequest { payload: vec![i] })
            .await
            .unwrap();
        assert_eq!(r.into_inner().payload, vec![i]);
    }
    // Metrics were recorded and are served.
    let body = http_get(metrics, "/metrics").await;
    assert!(body.contains("draughts_rpc_requests_total"), "{body}");
    assert!(body.contains("Diagnostics/Echo"), "{body}");

    let _ = tx.send(());
    server.await.unwrap().unwrap();
    let t = Instant::now();
    drop(guard);
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "shutdown of the exporter hung"
    );
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    String::from_utf8_lossy(&out).into_owned()
}
