//! The web client's files on the gRPC port: `GET`/`HEAD` get the files of `--web-dir` (gzip siblings
//! to browsers that accept gzip), gRPC-Web and gRPC calls on the same port are unaffected.

use clap::Parser;
use draughts_proto::pb;
use draughtsd::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A folder with a small built client: index.html, a script and its gzip sibling (a temporary
/// directory, removed when the returned value is dropped).
fn web_dir(name: &str) -> tempfile::TempDir {
    let tmp = tempfile::Builder::new()
        .prefix(&format!("draughtsd-web-{name}-"))
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("assets")).unwrap();
    std::fs::write(
        dir.join("index.html"),
        "<!doctype html><title>board</title>",
    )
    .unwrap();
    std::fs::write(dir.join("assets/app.js"), "console.log('plain');").unwrap();
    // Not real gzip: the test only checks which of the two files is sent.
    std::fs::write(dir.join("assets/app.js.gz"), "GZIPPED").unwrap();
    tmp
}

async fn raw(addr: std::net::SocketAddr, request: &[u8]) -> String {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request).await.unwrap();
    let mut out = Vec::new();
    tcp.read_to_end(&mut out).await.unwrap();
    String::from_utf8_lossy(&out).to_string()
}

async fn get(addr: std::net::SocketAddr, path: &str, extra: &str) -> String {
    raw(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
}

#[tokio::test]
async fn serves_the_client_and_the_api_on_one_port() {
    let site = web_dir("serve");
    let dir = site.path().to_path_buf();
    let mut config = Config::for_tests("memory://", "sqlite::memory:");
    config.web_dir = Some(dir.clone());
    config.no_web = false;
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

    let page = get(addr, "/", "").await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(
        page.to_lowercase().contains("content-type: text/html"),
        "{page}"
    );
    assert!(
        page.ends_with("<!doctype html><title>board</title>"),
        "{page}"
    );

    let plain = get(addr, "/assets/app.js", "").await;
    assert!(plain.ends_with("console.log('plain');"), "{plain}");
    let gzipped = get(addr, "/assets/app.js", "Accept-Encoding: gzip\r\n").await;
    assert!(
        gzipped.to_lowercase().contains("content-encoding: gzip"),
        "{gzipped}"
    );
    assert!(gzipped.ends_with("GZIPPED"), "{gzipped}");

    let head = raw(
        addr,
        format!("HEAD / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(!head.contains("<title>"), "{head}");

    let missing = get(addr, "/nothing-here.js", "").await;
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    let outside = get(addr, "/../Cargo.toml", "").await;
    assert!(!outside.starts_with("HTTP/1.1 200"), "{outside}");

    // gRPC-Web over HTTP/1.1 from the page's own origin: no CORS needed, still answered.
    use prost::Message;
    let msg = pb::StartPositionRequest {
        rules: Some(pb::RuleSet {
            variant: pb::Variant::English as i32,
            options: None,
        }),
    }
    .encode_to_vec();
    let mut body = vec![0u8];
    body.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    body.extend_from_slice(&msg);
    let mut request = format!(
        "POST /draughts.v1.Rules/StartPosition HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/grpc-web+proto\r\nX-Grpc-Web: 1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    let answer = raw(addr, &request).await.to_lowercase();
    assert!(answer.starts_with("http/1.1 200"), "{answer}");
    assert!(answer.contains("grpc-status:0"), "{answer}");

    // And plain gRPC over HTTP/2.
    let mut rules = pb::rules_client::RulesClient::new(channel);
    let start = rules
        .start_position(pb::StartPositionRequest {
            rules: Some(pb::RuleSet {
                variant: pb::Variant::English as i32,
                options: None,
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(start.position.unwrap().pieces.len(), 24);

    let _ = tx.send(());
    server.await.unwrap().unwrap();
}

#[test]
fn web_dir_settings() {
    let site = web_dir("settings");
    let dir = site.path().to_path_buf();
    let config = Config::try_parse_from(["draughtsd", "--web-dir", dir.to_str().unwrap()]).unwrap();
    assert_eq!(config.web_files(), Some(dir.clone()));
    let config = Config::try_parse_from(["draughtsd", "--no-web"]).unwrap();
    assert_eq!(config.web_files(), None);
    // A folder without index.html is refused at start, naming the setting.
    let empty = dir.join("assets");
    let mut config =
        Config::try_parse_from(["draughtsd", "--web-dir", empty.to_str().unwrap()]).unwrap();
    config.auth.token_secret = draughtsd::random_secret();
    let err = config.validate().unwrap_err().to_string();
    assert!(err.contains("web-dir"), "{err}");
    assert!(Config::try_parse_from(["draughtsd", "--no-web", "--web-dir", "x"]).is_err());
}
