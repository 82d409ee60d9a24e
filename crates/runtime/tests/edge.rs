//! The connection edge of `serve`: idle connections closed, a bound on connections, HTTP/2
//! keepalive pings that close half-open peers, and an open stream that keeps its connection.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use draughts_runtime::{ServerConfig, Services};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A server with only the built-in services, stopped when the sender drops.
async fn start(config: ServerConfig) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        draughts_runtime::serve(&config, Services::new(), listener, async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    (addr, stop)
}

fn config(idle_ms: u64, max_connections: usize) -> ServerConfig {
    let mut config = ServerConfig::for_tests();
    config.connections.idle_timeout_ms = idle_ms;
    config.connections.max_connections = max_connections;
    config.validate().unwrap();
    config
}

/// Reads until the server closes the socket; returns how long that took and the bytes read,
/// or `None` if it is still open after `within`.
async fn closed_within(socket: &mut TcpStream, within: Duration) -> Option<(Duration, Vec<u8>)> {
    let start = Instant::now();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let read_all = async {
        loop {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(within, read_all).await.ok()?;
    Some((start.elapsed(), seen))
}

#[tokio::test]
async fn idle_sockets_are_closed_after_the_timeout() {
    let (addr, _stop) = start(config(400, 100)).await;
    let mut socket = TcpStream::connect(addr).await.unwrap();
    let (after, _) = closed_within(&mut socket, Duration::from_secs(5))
        .await
        .expect("an idle socket is closed");
    assert!(
        after >= Duration::from_millis(300) && after < Duration::from_secs(3),
        "closed after {after:?}"
    );
}

#[tokio::test]
async fn connections_beyond_the_bound_are_refused() {
    let (addr, _stop) = start(config(20_000, 2)).await;
    let mut first = TcpStream::connect(addr).await.unwrap();
    let mut second = TcpStream::connect(addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut third = TcpStream::connect(addr).await.unwrap();
    assert!(
        closed_within(&mut third, Duration::from_secs(2))
            .await
            .is_some(),
        "the third connection is closed at once"
    );
    assert!(
        closed_within(&mut first, Duration::from_millis(300))
            .await
            .is_none()
    );
    assert!(
        closed_within(&mut second, Duration::from_millis(300))
            .await
            .is_none()
    );
    // A connection that closes frees its place.
    drop(first);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut fourth = TcpStream::connect(addr).await.unwrap();
    assert!(
        closed_within(&mut fourth, Duration::from_millis(500))
            .await
            .is_none(),
        "accepted again below the bound"
    );
}

/// A connection to `addr` from the local address `from` (any 127.x.y.z on Linux).
async fn connect_from(from: &str, addr: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::new(from.parse().unwrap(), 0))
        .unwrap();
    socket.connect(addr).await.unwrap()
}

#[tokio::test]
async fn one_address_holds_at_most_its_share_of_connections() {
    let mut capped = config(20_000, 100);
    capped.connections.max_connections_per_address = 2;
    capped.validate().unwrap();
    let (addr, _stop) = start(capped).await;
    let mut first = connect_from("127.0.0.1", addr).await;
    let mut second = connect_from("127.0.0.1", addr).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut third = connect_from("127.0.0.1", addr).await;
    assert!(
        closed_within(&mut third, Duration::from_secs(2))
            .await
            .is_some(),
        "the address's third connection is closed at once"
    );
    // Another address still gets in, and the first two stay open.
    let mut elsewhere = connect_from("127.0.0.2", addr).await;
    assert!(
        closed_within(&mut elsewhere, Duration::from_millis(300))
            .await
            .is_none(),
        "another address is not bounded by the first one's connections"
    );
    assert!(
        closed_within(&mut first, Duration::from_millis(100))
            .await
            .is_none()
    );
    assert!(
        closed_within(&mut second, Duration::from_millis(100))
            .await
            .is_none()
    );
    // A closed connection gives its address's place back.
    drop(first);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut again = connect_from("127.0.0.1", addr).await;
    assert!(
        closed_within(&mut again, Duration::from_millis(500))
            .await
            .is_none(),
        "accepted again below the address's bound"
    );
}

/// Speaks just enough HTTP/2 to open a connection (preface and SETTINGS), then never answers:
/// returns whether the server closed it within `within` and whether it sent a PING first.
async fn silent_http2_peer(addr: SocketAddr, within: Duration) -> (bool, bool) {
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    // An empty SETTINGS frame: length 0, type 4, no flags, stream 0.
    socket
        .write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0])
        .await
        .unwrap();
    let Some((_, bytes)) = closed_within(&mut socket, within).await else {
        return (false, false);
    };
    let mut pinged = false;
    let mut at = 0;
    while at + 9 <= bytes.len() {
        let length = usize::from(bytes[at]) << 16
            | usize::from(bytes[at + 1]) << 8
            | usize::from(bytes[at + 2]);
        let (kind, flags) = (bytes[at + 3], bytes[at + 4]);
        if kind == 6 && flags & 1 == 0 {
            pinged = true;
        }
        at += 9 + length;
    }
    (true, pinged)
}

#[tokio::test]
async fn unanswered_http2_pings_close_the_connection() {
    let mut pinging = config(60_000, 100);
    pinging.connections.http2_keepalive_interval_ms = 200;
    pinging.connections.http2_keepalive_timeout_ms = 300;
    let (addr, _stop) = start(pinging).await;
    let (closed, pinged) = silent_http2_peer(addr, Duration::from_secs(5)).await;
    assert!(closed && pinged, "closed={closed} pinged={pinged}");
    // The same peer with pings a minute apart stays connected (the idle timeout is a minute).
    let (addr, _stop_quiet) = start(config(60_000, 100)).await;
    let (closed, _) = silent_http2_peer(addr, Duration::from_secs(2)).await;
    assert!(!closed, "no ping yet, no close");
}

#[tokio::test]
async fn an_open_stream_keeps_its_connection() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let (addr, _stop) = start(config(300, 100)).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = HealthClient::new(channel);
    let mut watch = client
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(watch.message().await.unwrap().is_some());
    // Three idle timeouts later the stream is still open: no message, no end, no error.
    let quiet = tokio::time::timeout(Duration::from_millis(1_000), watch.message()).await;
    assert!(quiet.is_err(), "the stream ended: {quiet:?}");
}
