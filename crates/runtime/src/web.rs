//! Static files (the web client) on the gRPC port: the same origin as the API, so a browser needs no
//! CORS to call it.
//!
//! gRPC and gRPC-Web calls are always `POST`; [`StaticFilesLayer`] sends every `GET` and `HEAD`
//! request to a [`ServeDir`] over the configured folder (gzip-precompressed `*.gz` siblings are served
//! to clients that accept gzip) and everything else on to the gRPC routes. It sits outside the
//! gRPC-Web translation, which refuses plain HTTP/1.1 requests. Without a folder it passes every
//! request on unchanged.
//!
//! Every answer of the files (pages, assets, errors) carries the page's security headers
//! ([`SECURITY_HEADERS`]): a strict Content-Security-Policy (scripts, styles and calls only from this
//! origin, no inline script or style, no plugins, no `<base>`, never framed), `X-Content-Type-Options:
//! nosniff`, `X-Frame-Options: DENY` (for browsers without `frame-ancestors`) and `Referrer-Policy:
//! no-referrer`. The client is built so that it needs no more: `web/index.html` has no inline script,
//! and Vite's build writes the script as a file (`crates/runtime/tests/web.rs` checks both pages).

use std::convert::Infallible;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use tower::{Layer, Service};
use tower_http::services::ServeDir;

/// The Content-Security-Policy of the served files: everything from this origin only, nothing inline
/// (`'self'` without `'unsafe-inline'`: an injected `<script>` or `onclick=` does not run), images
/// also as `data:` URLs (the page's empty favicon), no plugins, no `<base>`, forms only to this origin,
/// and no framing by any page.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; font-src 'self'; connect-src 'self'; manifest-src 'self'; object-src 'none'; \
base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The headers set on every answer of the files (see the module docs).
pub const SECURITY_HEADERS: [(&str, &str); 4] = [
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
];

/// Serves the files under a folder for `GET`/`HEAD`, else calls the inner (gRPC) service.
#[derive(Clone, Debug, Default)]
pub struct StaticFilesLayer {
    dir: Option<PathBuf>,
}

impl StaticFilesLayer {
    /// `None`: no static files (every request goes to the inner service).
    pub fn new(dir: Option<&Path>) -> Self {
        Self {
            dir: dir.map(Path::to_path_buf),
        }
    }
}

impl<S> Layer<S> for StaticFilesLayer {
    type Service = StaticFiles<S>;
    fn layer(&self, inner: S) -> StaticFiles<S> {
        StaticFiles {
            files: self
                .dir
                .as_ref()
                .map(|d| ServeDir::new(d).precompressed_gzip()),
            inner,
        }
    }
}

/// The service of [`StaticFilesLayer`].
#[derive(Clone, Debug)]
pub struct StaticFiles<S> {
    files: Option<ServeDir>,
    inner: S,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B> Service<http::Request<B>> for StaticFiles<S>
where
    S: Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let is_file_request = matches!(*req.method(), http::Method::GET | http::Method::HEAD);
        match &self.files {
            Some(files) if is_file_request => {
                let mut files = files.clone();
                Box::pin(async move {
                    let res: Result<_, Infallible> = files.call(req).await;
                    let res = match res {
                        Ok(res) => res,
                        Err(never) => match never {},
                    };
                    let mut res = res.map(tonic::body::Body::new);
                    let headers = res.headers_mut();
                    for (name, value) in SECURITY_HEADERS {
                        headers.insert(
                            http::HeaderName::from_static(name),
                            http::HeaderValue::from_static(value),
                        );
                    }
                    Ok(res)
                })
            }
            _ => Box::pin(self.inner.call(req)),
        }
    }
}
