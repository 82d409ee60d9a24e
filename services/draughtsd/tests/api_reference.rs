//! The API reference served by `draughtsd` at `/api-reference.md`: the `docs/api-reference.md` built into
//! the binary, answered with `--no-web` as with a web client's folder (whose own file of that name is
//! not looked at).

use std::net::SocketAddr;
use std::path::PathBuf;

use draughtsd::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The reference in the repository, as the binary was built with it.
fn reference() -> String {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/api-reference.md");
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// Starts draughtsd with `config`; its address and what stops it.
async fn start(
    config: Config,
) -> (
    SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), draughtsd::StartError>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(draughtsd::run(config, listener, async {
        let _ = stopped.await;
    }));
    // Serving once gRPC answers on the port.
    loop {
        match tonic::transport::Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
        {
            Ok(_) => break,
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    }
    (addr, stop, server)
}

/// One HTTP/1.1 request with `method` on `path`: the status line and headers (lowercase), and the body.
async fn request(addr: SocketAddr, method: &str, path: &str) -> (String, String) {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut out = Vec::new();
    tcp.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8(out).expect("a UTF-8 answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    (head.to_lowercase(), body.to_owned())
}

/// Checks the reference's answers (GET and HEAD) on the server at `addr`.
async fn check_served(addr: SocketAddr) {
    let expected = reference();
    let (head, body) = request(addr, "GET", "/api-reference.md").await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains("\r\ncontent-type: text/markdown; charset=utf-8"),
        "{head}"
    );
    assert!(
        head.contains("\r\nx-content-type-options: nosniff"),
        "{head}"
    );
    assert!(
        head.contains(&format!("\r\ncontent-length: {}", expected.len())),
        "{head}"
    );
    assert!(
        body == expected,
        "the body differs from docs/api-reference.md"
    );
    // A query string does not change the path.
    let (_, again) = request(addr, "GET", "/api-reference.md?v=1").await;
    assert!(again == expected, "with a query string");
    let (head, body) = request(addr, "HEAD", "/api-reference.md").await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains("\r\ncontent-type: text/markdown; charset=utf-8"),
        "{head}"
    );
    assert_eq!(body, "", "HEAD has no body");
}

#[tokio::test]
async fn the_reference_is_served_without_a_web_client() {
    let config = Config::for_tests("memory://", "sqlite::memory:");
    assert!(config.no_web && config.web_files().is_none());
    let (addr, stop, server) = start(config).await;
    check_served(addr).await;
    // Nothing else is served as a file without a web client: gRPC-Web refuses a plain GET.
    let (head, _) = request(addr, "GET", "/index.html").await;
    assert!(!head.starts_with("http/1.1 200"), "{head}");
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn the_built_in_reference_wins_over_a_web_client_s_file() {
    let tmp = tempfile::Builder::new()
        .prefix("draughtsd-reference-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("index.html"),
        "<!doctype html><title>board</title>",
    )
    .unwrap();
    std::fs::write(dir.join("api-reference.md"), "# a stale copy").unwrap();
    let mut config = Config::for_tests("memory://", "sqlite::memory:");
    config.web_dir = Some(dir.to_path_buf());
    config.no_web = false;
    let (addr, stop, server) = start(config).await;
    check_served(addr).await;
    // The client's own files are still served.
    let (head, body) = request(addr, "GET", "/index.html").await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert_eq!(body, "<!doctype html><title>board</title>");
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
