//! The connection edge of [`serve`](fn@crate::serve): a bound on concurrent connections, TCP keepalive,
//! and an idle timeout counted in open requests.
//!
//! - Accepted sockets pass through [`incoming`]: each takes a permit of a semaphore of
//!   `max_connections` permits, held until the socket closes; a socket accepted when none is left is
//!   closed at once (the client sees the connection closed, instead of waiting in the backlog), and
//!   counted in `draughts_connections_refused_total{why="replica"}`. `draughts_connections_open` is
//!   the gauge.
//! - Each client address also holds at most `max_connections_per_address` of them (an IPv6 address
//!   counts with its whole network of `address_v6_prefix` bits, [`address_group`]: one machine gets
//!   a /64 and can pick any address in it); beyond that a socket is closed at once and counted in
//!   `draughts_connections_refused_total{why="address"}`. One client's idle sockets cannot take every
//!   connection of the replica.
//! - The same grouping names a caller's per-address rate-limit bucket ([`address_bucket`]); the edge
//!   puts its prefix length in every request ([`AddressGrouping`], read with [`v6_prefix`]).
//! - Each accepted socket is an [`EdgeStream`]: it counts the requests open on it (a unary call
//!   from its arrival to the end of its response body, a stream until it ends or is cancelled), fed
//!   by [`ConnLayer`], and when none has been open for the idle timeout its read side reports
//!   end-of-stream, so hyper closes the connection. An open `WatchGame` stream keeps its connection
//!   however quiet the game is; a connection that only answers HTTP/2 pings does not.
//! - HTTP/2 keepalive pings (with a timeout, closing half-open connections) and the per-connection
//!   stream limit are tonic settings applied in `serve`.
//!
//! hyper and tonic have no idle timeout for HTTP/2 server connections (tonic's
//! `max_connection_age` closes busy connections too, which would cut watch streams), hence this
//! small wrapper.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv6Addr};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::{Connected, TcpConnectInfo, TcpIncoming};
use tower::{Layer, Service};

use crate::config::ConnectionLimits;

/// Requests open on one connection, and since when none is.
#[derive(Debug)]
struct Activity {
    open: AtomicUsize,
    idle_since: Mutex<Instant>,
    /// The connection's reader, woken when the last open request ends (to arm the idle timer).
    reader: Mutex<Option<Waker>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Activity {
    fn start(self: &Arc<Self>) -> OpenRequest {
        self.open.fetch_add(1, Ordering::SeqCst);
        OpenRequest {
            activity: self.clone(),
        }
    }
}

/// One open request; its drop (end of the response body) may start the idle time.
#[derive(Debug)]
pub struct OpenRequest {
    activity: Arc<Activity>,
}

impl Drop for OpenRequest {
    fn drop(&mut self) {
        if self.activity.open.fetch_sub(1, Ordering::SeqCst) == 1 {
            *lock(&self.activity.idle_since) = Instant::now();
            if let Some(waker) = lock(&self.activity.reader).take() {
                waker.wake();
            }
        }
    }
}

/// The default of `--address-v6-prefix`: an IPv6 client is its /64.
pub const DEFAULT_V6_PREFIX: u8 = 64;

/// The address that `ip` counts as for per-address bounds: an IPv4 address itself (an IPv4-mapped
/// IPv6 address, `::ffff:a.b.c.d`, as that IPv4 address), an IPv6 address its first `v6_prefix` bits
/// (at most 128) with the rest zero.
pub fn address_group(ip: IpAddr, v6_prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u32::from(v6_prefix.min(128));
                let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
            }
        },
    }
}

/// The name of the rate-limit bucket of an anonymous caller at `ip`: `addr:<IPv4>`, or
/// `addr:<network>/<v6_prefix>` for IPv6 (so that the addresses of one /64 share one bucket).
pub fn address_bucket(ip: IpAddr, v6_prefix: u8) -> String {
    match address_group(ip, v6_prefix) {
        IpAddr::V4(v4) => format!("addr:{v4}"),
        IpAddr::V6(network) => format!("addr:{network}/{}", v6_prefix.min(128)),
    }
}

/// The grouping of client addresses that the edge applies (`--address-v6-prefix`), in every
/// request's extensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressGrouping {
    pub v6_prefix: u8,
}

/// The IPv6 prefix length of a request's [`AddressGrouping`] ([`DEFAULT_V6_PREFIX`] for a request
/// that did not come through the edge).
pub fn v6_prefix(extensions: &http::Extensions) -> u8 {
    extensions
        .get::<AddressGrouping>()
        .map_or(DEFAULT_V6_PREFIX, |g| g.v6_prefix)
}

/// Connections open per client address (grouped by [`address_group`]).
#[derive(Debug)]
struct PerAddress {
    max: usize,
    v6_prefix: u8,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl PerAddress {
    /// A place for one more connection from `ip`, or `None` when its address holds `max`.
    fn take(self: &Arc<Self>, ip: IpAddr) -> Option<AddressSlot> {
        let group = address_group(ip, self.v6_prefix);
        let mut open = lock(&self.open);
        let n = open.entry(group).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(AddressSlot {
            table: self.clone(),
            group,
        })
    }
}

/// One connection's place in its address's count, given back on drop.
#[derive(Debug)]
struct AddressSlot {
    table: Arc<PerAddress>,
    group: IpAddr,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = lock(&self.table.open);
        if let Some(n) = open.get_mut(&self.group) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.group);
            }
        }
    }
}

/// The connection info of an [`EdgeStream`]: tonic puts it in every request's extensions, where
/// [`ConnLayer`] finds it.
#[derive(Clone, Debug)]
pub struct EdgeInfo {
    tcp: TcpConnectInfo,
    activity: Arc<Activity>,
    grouping: AddressGrouping,
}

/// An accepted socket with its connection permit and idle timer.
#[derive(Debug)]
pub struct EdgeStream {
    inner: TcpStream,
    info: EdgeInfo,
    idle_timeout: Duration,
    idle_timer: Pin<Box<Sleep>>,
    _permit: OwnedSemaphorePermit,
    _address: Option<AddressSlot>,
}

impl EdgeStream {
    fn new(
        inner: TcpStream,
        permit: OwnedSemaphorePermit,
        address: Option<AddressSlot>,
        idle_timeout: Duration,
        grouping: AddressGrouping,
    ) -> Self {
        let tcp = TcpConnectInfo {
            local_addr: inner.local_addr().ok(),
            remote_addr: inner.peer_addr().ok(),
        };
        let now = Instant::now();
        metrics::gauge!("draughts_connections_open").increment(1.0);
        EdgeStream {
            inner,
            info: EdgeInfo {
                tcp,
                activity: Arc::new(Activity {
                    open: AtomicUsize::new(0),
                    idle_since: Mutex::new(now),
                    reader: Mutex::new(None),
                }),
                grouping,
            },
            idle_timeout,
            idle_timer: Box::pin(tokio::time::sleep_until(now + idle_timeout)),
            _permit: permit,
            _address: address,
        }
    }
}

impl Drop for EdgeStream {
    fn drop(&mut self) {
        metrics::gauge!("draughts_connections_open").decrement(1.0);
    }
}

impl Connected for EdgeStream {
    type ConnectInfo = EdgeInfo;
    fn connect_info(&self) -> EdgeInfo {
        self.info.clone()
    }
}

impl AsyncRead for EdgeStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let activity = &this.info.activity;
        *lock(&activity.reader) = Some(cx.waker().clone());
        if activity.open.load(Ordering::SeqCst) == 0 {
            let deadline = *lock(&activity.idle_since) + this.idle_timeout;
            if this.idle_timer.deadline() != deadline {
                this.idle_timer.as_mut().reset(deadline);
            }
            if this.idle_timer.as_mut().poll(cx).is_ready() {
                // End of stream: hyper closes the connection.
                tracing::debug!(peer = ?this.info.tcp.remote_addr, "closing an idle connection");
                metrics::counter!("draughts_connections_idle_closed_total").increment(1);
                return Poll::Ready(Ok(()));
            }
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for EdgeStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The accepted connections of `listener`, bounded and wrapped (see the module docs).
pub fn incoming(
    listener: tokio::net::TcpListener,
    limits: &ConnectionLimits,
) -> impl Stream<Item = io::Result<EdgeStream>> + Send + 'static {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let grouping = AddressGrouping {
        v6_prefix: limits.address_v6_prefix,
    };
    let per_address = Arc::new(PerAddress {
        max: limits.max_connections_per_address,
        v6_prefix: limits.address_v6_prefix,
        open: Mutex::new(HashMap::new()),
    });
    let idle_timeout = limits.idle_timeout();
    TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .with_keepalive(Some(limits.tcp_keepalive()))
        .filter_map(move |accepted| match accepted {
            Ok(stream) => {
                let peer = stream.peer_addr().ok();
                let address = match peer {
                    Some(peer) => match per_address.take(peer.ip()) {
                        Some(slot) => Some(slot),
                        None => {
                            metrics::counter!("draughts_connections_refused_total", "why" => "address")
                                .increment(1);
                            tracing::debug!(?peer, "connection limit of the address reached; closing");
                            return None;
                        }
                    },
                    None => None,
                };
                match permits.clone().try_acquire_owned() {
                    Ok(permit) => Some(Ok(EdgeStream::new(
                        stream,
                        permit,
                        address,
                        idle_timeout,
                        grouping,
                    ))),
                    Err(_) => {
                        metrics::counter!("draughts_connections_refused_total", "why" => "replica")
                            .increment(1);
                        tracing::debug!(?peer, "connection limit reached; closing");
                        None
                    }
                }
            }
            Err(err) => Some(Err(err)),
        })
}

/// Counts each request as open on its connection until its response body ends, and puts the
/// connection's [`TcpConnectInfo`] in the request (so `Request::remote_addr` works as with tonic's
/// own listener).
#[derive(Clone, Copy, Debug)]
pub struct ConnLayer;

impl<S> Layer<S> for ConnLayer {
    type Service = ConnService<S>;
    fn layer(&self, inner: S) -> ConnService<S> {
        ConnService { inner }
    }
}

#[derive(Clone, Debug)]
pub struct ConnService<S> {
    inner: S,
}

impl<S, B, R> Service<http::Request<B>> for ConnService<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<CountedBody<R>>;
    type Error = S::Error;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let open = req.extensions().get::<EdgeInfo>().cloned().map(|info| {
            req.extensions_mut().insert(info.tcp.clone());
            req.extensions_mut().insert(info.grouping);
            info.activity.start()
        });
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await?;
            Ok(res.map(|body| CountedBody { body, _open: open }))
        })
    }
}

pin_project_lite::pin_project! {
    /// A response body that keeps its request counted as open until it is dropped.
    #[derive(Debug)]
    pub struct CountedBody<B> {
        #[pin]
        body: B,
        _open: Option<OpenRequest>,
    }
}

impl<B: http_body::Body> http_body::Body for CountedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        self.project().body.poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }
    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn ipv6_addresses_group_by_their_prefix() {
        // One /64: any address a host picks in it is the same client.
        assert_eq!(
            address_group(ip("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), 64),
            ip("2001:db8:1:2::")
        );
        assert_eq!(
            address_bucket(ip("2001:db8:1:2::1"), 64),
            address_bucket(ip("2001:db8:1:2:ffff:ffff:ffff:ffff"), 64)
        );
        assert_eq!(
            address_bucket(ip("2001:db8:1:2::1"), 64),
            "addr:2001:db8:1:2::/64"
        );
        // The next /64 is another client.
        assert_ne!(
            address_bucket(ip("2001:db8:1:2::1"), 64),
            address_bucket(ip("2001:db8:1:3::1"), 64)
        );
        // Other prefix lengths: /48 groups the /64s of one site, /128 counts addresses apart.
        assert_eq!(
            address_bucket(ip("2001:db8:1:2::1"), 48),
            address_bucket(ip("2001:db8:1:3::1"), 48)
        );
        assert_eq!(
            address_bucket(ip("2001:db8:1:2::1"), 48),
            "addr:2001:db8:1::/48"
        );
        assert_ne!(
            address_bucket(ip("2001:db8::1"), 128),
            address_bucket(ip("2001:db8::2"), 128)
        );
        assert_eq!(
            address_bucket(ip("2001:db8::1"), 128),
            "addr:2001:db8::1/128"
        );
        // Odd lengths mask inside a group; anything past 128 is 128.
        assert_eq!(
            address_group(ip("2001:db8:ffff::"), 36),
            ip("2001:db8:f000::")
        );
        assert_eq!(address_group(ip("2001:db8::7"), 200), ip("2001:db8::7"));
        assert_eq!(address_group(ip("2001:db8::7"), 0), ip("::"));
    }

    #[test]
    fn ipv4_addresses_count_one_by_one() {
        assert_eq!(address_bucket(ip("203.0.113.7"), 64), "addr:203.0.113.7");
        assert_ne!(
            address_bucket(ip("203.0.113.7"), 64),
            address_bucket(ip("203.0.113.8"), 64)
        );
        // An IPv4-mapped IPv6 address (a dual-stack listener) is its IPv4 address.
        assert_eq!(
            address_bucket(ip("::ffff:203.0.113.7"), 64),
            "addr:203.0.113.7"
        );
    }

    #[test]
    fn the_per_address_count_bounds_each_group_and_frees_on_drop() {
        let table = Arc::new(PerAddress {
            max: 2,
            v6_prefix: 64,
            open: Mutex::new(HashMap::new()),
        });
        let a = table.take(ip("2001:db8:1:2::1")).unwrap();
        let b = table.take(ip("2001:db8:1:2::2")).unwrap();
        // A third address of the same /64 is refused; another /64 and an IPv4 address are not.
        assert!(table.take(ip("2001:db8:1:2::3")).is_none());
        let other = table.take(ip("2001:db8:1:3::1")).unwrap();
        let v4 = table.take(ip("192.0.2.1")).unwrap();
        drop(a);
        let c = table.take(ip("2001:db8:1:2::3")).unwrap();
        drop((b, c, other, v4));
        assert!(lock(&table.open).is_empty(), "every count given back");
    }

    #[test]
    fn requests_outside_the_edge_get_the_default_grouping() {
        let mut extensions = http::Extensions::new();
        assert_eq!(v6_prefix(&extensions), DEFAULT_V6_PREFIX);
        extensions.insert(AddressGrouping { v6_prefix: 56 });
        assert_eq!(v6_prefix(&extensions), 56);
    }
}
