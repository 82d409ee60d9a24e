//! The edge of the one-process platform: it listens on loopback unless told otherwise, a port clash
//! names the listener, and every service maps store errors to kinds the same way.

use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use clap::Parser;
use draughts_proto::{ErrorKind, ServiceError};
use draughts_store::{ErrorCode, StoreError};
use draughtsd::Config;

#[test]
fn listens_on_loopback_by_default_and_a_flag_changes_it() {
    let config = Config::try_parse_from(["draughtsd"]).unwrap();
    if std::env::var_os("DRAUGHTS_LISTEN").is_none() {
        assert_eq!(config.server.listen.to_string(), "127.0.0.1:50051");
    }
    if std::env::var_os("DRAUGHTS_METRICS_LISTEN").is_none() {
        assert_eq!(config.telemetry.metrics_listen, "127.0.0.1:9090");
    }
    let config = Config::try_parse_from(["draughtsd", "--listen", "0.0.0.0:6000"]).unwrap();
    assert_eq!(config.server.listen.to_string(), "0.0.0.0:6000");
    assert!(
        config.server.cors_origins().next().is_none(),
        "no CORS origin by default"
    );
}

/// Runs the `draughtsd` binary with `args` (embedded backends in memory); its exit status and stderr.
fn run_draughtsd(args: &[&str]) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_draughtsd"))
        .args([
            "--redis-url",
            "memory://",
            "--database-url",
            "sqlite::memory:",
        ])
        .args(args)
        .env_remove("DRAUGHTS_LISTEN")
        .env_remove("DRAUGHTS_METRICS_LISTEN")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // It must exit by itself; kill it if it serves instead (then the test fails below).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    (
        output.status,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_port_clash_names_the_listener() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (status, stderr) = run_draughtsd(&["--listen", &addr, "--metrics-listen", "off"]);
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("gRPC listener {addr}: address in use")),
        "{stderr}"
    );
    let (status, stderr) = run_draughtsd(&["--listen", "127.0.0.1:0", "--metrics-listen", &addr]);
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("metrics listener {addr}: address in use")),
        "{stderr}"
    );
}

/// One mapping from store errors to kinds, used by every service: auth, ratings and games agree
/// (a store's InvalidArgument was INTERNAL in two of them and INVALID_ARGUMENT in the third).
#[test]
fn every_service_maps_store_errors_the_same_way() {
    let errors = || -> Vec<StoreError> {
        vec![
            StoreError::NotFound {
                what: "group".into(),
            },
            StoreError::Conflict {
                key: "k".into(),
                expected: Some(1),
                actual: Some(2),
            },
            StoreError::Unavailable {
                backend: "redis",
                source: "refused".into(),
            },
            StoreError::InvalidArgument("zero ttl".into()),
            StoreError::Internal {
                backend: "redis",
                message: "odd".into(),
                source: None,
            },
        ]
    };
    let codes: Vec<ErrorCode> = errors().iter().map(StoreError::code).collect();
    let auth: Vec<ErrorKind> = errors()
        .into_iter()
        .map(|e| draughts_validation::auth::AuthError::Store(e).kind())
        .collect();
    let ratings: Vec<ErrorKind> = errors()
        .into_iter()
        .map(|e| draughts_ratings::RatingsError::Store(e).kind())
        .collect();
    let games: Vec<ErrorKind> = errors()
        .into_iter()
        .map(|e| draughts_validation::games::GamesError::Store(e).kind())
        .collect();
    let expected: Vec<ErrorKind> = codes.into_iter().map(ErrorKind::from).collect();
    assert_eq!(auth, expected);
    assert_eq!(ratings, expected);
    assert_eq!(games, expected);
    assert_eq!(expected[3], ErrorKind::Internal);
}
