//! Static files (the web client) on the gRPC port: the same origin as the API, so a browser needs no
//! CORS to call it.
//!
//! gRPC and gRPC-Web calls are always `POST`; [`StaticFilesLayer`] sends every `GET` and `HEAD`
//! request to a [`ServeDir`] over the configured folder (gzip-precompressed `*.gz` siblings are served
//! to clients that accept gzip) and everything else on to the gRPC routes. It sits outside the
//! gRPC-Web translation, which refuses plain HTTP/1.1 requests. Without a folder it passes every
//! request on unchanged.
//!
//! Some documents are built into the binary and answered at their fixed path whatever the folder, and
//! also without one ([`DOCUMENTS`]): the API reference, `GET /api-reference.md`
//! ([`API_REFERENCE`], `docs/api-reference.md` as it was when the binary was built, `text/markdown;
//! charset=utf-8`). Every server built on this crate (`draughtsd` and each service binary) answers
//! it, with `--no-web` too; a file of the same name in the folder is not looked at.
//!
//! Every answer of the files (pages, assets, errors) and of the documents carries the page's security headers
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

/// A document built into the binary and answered at a fixed path (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Document {
    /// The request path that gets it (`/api-reference.md`); the query string is not looked at.
    pub path: &'static str,
    /// Its `content-type`.
    pub content_type: &'static str,
    /// Its text.
    pub body: &'static str,
}

/// The API reference generated from the protos' comments (`docs/api-reference.md`, `cd web && npm run
/// reference`), as it was when this binary was built.
pub const API_REFERENCE: Document = Document {
    path: "/api-reference.md",
    content_type: "text/markdown; charset=utf-8",
    body: include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/api-reference.md"
    )),
};

/// The documents every server answers for `GET`/`HEAD` at their paths, with or without a folder of files.
pub const DOCUMENTS: [Document; 1] = [API_REFERENCE];

/// The built-in document at `path`, if any.
fn document(path: &str) -> Option<&'static Document> {
    DOCUMENTS.iter().find(|d| d.path == path)
}

/// The answer to a `GET` (the text) or `HEAD` (its headers only) of `document`.
fn document_response(document: &Document, head_only: bool) -> http::Response<tonic::body::Body> {
    let body = match head_only {
        true => tonic::body::Body::empty(),
        false => tonic::body::Body::new(http_body_util::Full::new(bytes::Bytes::from_static(
            document.body.as_bytes(),
        ))),
    };
    let mut res = http::Response::new(body);
    let headers = res.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(document.content_type),
    );
    headers.insert(http::header::CONTENT_LENGTH, document.body.len().into());
    res
}

/// Adds [`SECURITY_HEADERS`] to `res`.
fn secure(res: &mut http::Response<tonic::body::Body>) {
    let headers = res.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        headers.insert(
            http::HeaderName::from_static(name),
            http::HeaderValue::from_static(value),
        );
    }
}

/// Serves the built-in [`DOCUMENTS`] and the files under a folder (if any) for `GET`/`HEAD`, else
/// calls the inner (gRPC) service.
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
        if is_file_request && let Some(document) = document(req.uri().path()) {
            let mut res = document_response(document, req.method() == http::Method::HEAD);
            secure(&mut res);
            return Box::pin(async move { Ok(res) });
        }
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
                    secure(&mut res);
                    Ok(res)
                })
            }
            _ => Box::pin(self.inner.call(req)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_is_built_in_at_its_path() {
        let doc = document("/api-reference.md").expect("the API reference");
        assert!(doc.body.starts_with("# API reference: `draughts.v1`"));
        assert_eq!(doc.content_type, "text/markdown; charset=utf-8");
        assert!(document("/api-reference").is_none());
        assert!(document("/index.html").is_none());
        let head = document_response(doc, true);
        assert_eq!(
            head.headers()[http::header::CONTENT_LENGTH],
            doc.body.len().to_string().as_str()
        );
    }
}
