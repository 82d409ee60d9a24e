//! The one-process platform serves every service on one port, on embedded backends by default and on
//! Redis and PostgreSQL when their URLs are given (real servers started by the test on free ports).

use draughts_proto::pb;
use draughts_runtime::{ServerConfig, TelemetryConfig};
use draughtsd::Config;

fn config(redis_url: &str, database_url: &str) -> Config {
    Config {
        server: ServerConfig::for_tests(),
        telemetry: TelemetryConfig {
            log: "warn".into(),
            log_format: "text".into(),
            otlp_endpoint: None,
            metrics_listen: "off".into(),
        },
        backends: draughts_runtime::BackendConfig {
            redis_url: redis_url.into(),
            key_prefix: "test:".into(),
            database_url: database_url.into(),
        },
        auth: draughts_validation::auth::AuthConfig::for_tests(),
    }
}

async fn exercise(config: Config) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(draughtsd::run(config, listener, async {
        let _ = rx.await;
    }));
    let channel = loop {
        match tonic::transport::Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
        {
            Ok(c) => break c,
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    };
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    for service in ["", "draughts.v1.Rules"] {
        let r = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.status, 1, "{service} should be SERVING");
    }
    let mut rules = pb::rules_client::RulesClient::new(channel);
    let r = rules
        .list_moves(pb::ListMovesRequest {
            rules: Some(pb::RuleSet {
                variant: pb::Variant::International as i32,
                options: None,
            }),
            fen: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.moves.len(), 9);
    let _ = tx.send(());
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn embedded_backends_by_default() {
    exercise(config("memory://", "sqlite::memory:")).await;
}

#[tokio::test]
async fn redis_and_postgres_when_given() {
    let redis =
        draughts_testkit::RedisServer::start().expect("redis-server (install: redis-server)");
    let pg = draughts_testkit::PostgresServer::start().expect("postgres (install: postgresql)");
    exercise(config(&redis.url(), &pg.url())).await;
}

#[tokio::test]
async fn a_wrong_backend_url_fails_fast() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let err = draughtsd::run(
        config("mysql://x", "sqlite::memory:"),
        listener,
        std::future::pending(),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("redis-url"), "{err}");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = draughts_testkit::free_port().unwrap();
    let err = draughtsd::run(
        config(&format!("redis://127.0.0.1:{port}"), "sqlite::memory:"),
        listener,
        std::future::pending(),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("backend"), "{err}");
}
