//! The connection edge of [`serve`](crate::serve): a bound on concurrent connections, TCP keepalive,
//! and an idle timeout counted in open requests.
//!
//! - Accepted sockets pass through [`incoming`]: each takes a permit of a semaphore of
//!   `max_connections` permits, held until the socket closes; a socket accepted when none is left is
//!   closed at once (the client sees the connection closed, instead of waiting in the backlog), and
//!   counted in `draughts_connections_refused_total`. `draughts_connections_open` is the gauge.
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

use std::io;
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

/// The connection info of an [`EdgeStream`]: tonic puts it in every request's extensions, where
/// [`ConnLayer`] finds it.
#[derive(Clone, Debug)]
pub struct EdgeInfo {
    tcp: TcpConnectInfo,
    activity: Arc<Activity>,
}

/// An accepted socket with its connection permit and idle timer.
#[derive(Debug)]
pub struct EdgeStream {
    inner: TcpStream,
    info: EdgeInfo,
    idle_timeout: Duration,
    idle_timer: Pin<Box<Sleep>>,
    _permit: OwnedSemaphorePermit,
}

impl EdgeStream {
    fn new(inner: TcpStream, permit: OwnedSemaphorePermit, idle_timeout: Duration) -> Self {
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
            },
            idle_timeout,
            idle_timer: Box::pin(tokio::time::sleep_until(now + idle_timeout)),
            _permit: permit,
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
    let idle_timeout = limits.idle_timeout();
    TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .with_keepalive(Some(limits.tcp_keepalive()))
        .filter_map(move |accepted| match accepted {
            Ok(stream) => match permits.clone().try_acquire_owned() {
                Ok(permit) => Some(Ok(EdgeStream::new(stream, permit, idle_timeout))),
                Err(_) => {
                    metrics::counter!("draughts_connections_refused_total").increment(1);
                    tracing::debug!(peer = ?stream.peer_addr().ok(), "connection limit reached; closing");
                    None
                }
            },
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
