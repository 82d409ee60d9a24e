//! A service under test: its `run(listener, shutdown)` spawned on `127.0.0.1:0` in this process, with a
//! client channel, a graceful stop and a kill.
//!
//! ```no_run
//! # async fn demo() {
//! use draughts_testkit::ServiceUnderTest;
//! let server = ServiceUnderTest::start(|listener, shutdown| async move {
//!     // e.g. draughts_validation::run(config, listener, shutdown).await
//!     # let _ = (listener, shutdown);
//!     Ok::<(), std::io::Error>(())
//! })
//! .await;
//! let channel = server.channel().await;
//! # drop(channel);
//! server.stop().await;
//! # }
//! ```

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

/// The shutdown future handed to the service's `run`: it resolves when the test calls
/// [`ServiceUnderTest::stop`].
pub type Shutdown = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A service running in a task of the test's runtime.
#[derive(Debug)]
pub struct ServiceUnderTest {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    handle: JoinHandle<()>,
}

impl ServiceUnderTest {
    /// Binds `127.0.0.1:0` and spawns `run(listener, shutdown)`. If `run` returns an error the task
    /// panics with it, so [`stop`](Self::stop) fails the test.
    pub async fn start<F, Fut, E>(run: F) -> ServiceUnderTest
    where
        F: FnOnce(TcpListener, Shutdown) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("bound address");
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown: Shutdown = Box::pin(async move {
            let _ = stopped.await;
        });
        let serving = run(listener, shutdown);
        let handle = tokio::spawn(async move {
            if let Err(e) = serving.await {
                panic!("the service under test failed: {e}");
            }
        });
        ServiceUnderTest {
            addr,
            stop: Some(stop),
            handle,
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A connected channel; retries for up to 10 s while the service starts.
    pub async fn channel(&self) -> Channel {
        let endpoint = Channel::from_shared(self.url()).expect("a valid URL");
        let mut last_error = None;
        for _ in 0..500 {
            match endpoint.connect().await {
                Ok(channel) => return channel,
                Err(e) => last_error = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("cannot connect to {}: {last_error:?}", self.addr);
    }

    /// Asks it to shut down gracefully and waits until it has (panics if it failed).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Err(e) = (&mut self.handle).await {
            std::panic::resume_unwind(e.into_panic());
        }
    }

    /// Kills it: the task is aborted, nothing is drained or flushed (a crashed replica).
    pub async fn kill(self) {
        self.handle.abort();
        let _ = self.handle.await;
    }
}
