//! The web client's files as `serve` sends them: every answer carries the page's security headers, and
//! the client's pages (the source `web/index.html`, and the built `web/dist/index.html` when it has been
//! built) have nothing inline that the Content-Security-Policy would block.

use std::net::SocketAddr;
use std::path::Path;

use draughts_runtime::web::{CONTENT_SECURITY_POLICY, SECURITY_HEADERS};
use draughts_runtime::{ServerConfig, Services};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The site's files in a fresh temporary directory, removed when the returned value is dropped.
fn site(name: &str) -> tempfile::TempDir {
    let tmp = tempfile::Builder::new()
        .prefix(&format!("runtime-web-{name}-"))
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("assets")).unwrap();
    std::fs::write(
        dir.join("index.html"),
        "<!doctype html><script type=\"module\" src=\"/assets/app.js\"></script>",
    )
    .unwrap();
    std::fs::write(dir.join("assets/app.js"), "console.log('app');").unwrap();
    tmp
}

async fn start(dir: &Path) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut services = Services::new();
    services.serve_files(dir);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        draughts_runtime::serve(&ServerConfig::for_tests(), services, listener, async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    (addr, stop)
}

/// The status line and the headers (names lower-cased) of a `GET path`.
async fn get(addr: SocketAddr, path: &str) -> (String, Vec<(String, String)>) {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut out = Vec::new();
    tcp.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out).to_string();
    let head = text.split("\r\n\r\n").next().unwrap_or_default();
    let mut lines = head.lines();
    let status = lines.next().unwrap_or_default().to_owned();
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_lowercase(), value.trim().to_owned()))
        .collect();
    (status, headers)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    headers
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .collect()
}

#[tokio::test]
async fn every_file_answer_carries_the_security_headers() {
    let site = site("headers");
    let (addr, _stop) = start(site.path()).await;
    for (path, status) in [
        ("/", "200"),
        ("/index.html", "200"),
        ("/assets/app.js", "200"),
        ("/missing.js", "404"),
    ] {
        let (line, headers) = get(addr, path).await;
        assert!(line.contains(status), "{path}: {line}");
        for (name, value) in SECURITY_HEADERS {
            assert_eq!(
                header(&headers, name),
                [value],
                "{path}: {name} in {headers:?}"
            );
        }
    }
}

#[test]
fn the_policy_allows_nothing_inline_and_no_framing() {
    let directives: Vec<(&str, Vec<&str>)> = CONTENT_SECURITY_POLICY
        .split(';')
        .map(|d| {
            let mut words = d.split_whitespace();
            (words.next().unwrap(), words.collect())
        })
        .collect();
    let sources = |name: &str| {
        directives
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| s.clone())
            .unwrap_or_else(|| panic!("no {name} in {CONTENT_SECURITY_POLICY}"))
    };
    assert_eq!(sources("default-src"), ["'none'"]);
    assert_eq!(sources("script-src"), ["'self'"]);
    assert_eq!(sources("style-src"), ["'self'"]);
    assert_eq!(sources("connect-src"), ["'self'"]);
    assert_eq!(sources("frame-ancestors"), ["'none'"]);
    assert_eq!(sources("object-src"), ["'none'"]);
    assert_eq!(sources("base-uri"), ["'none'"]);
    for (name, sources) in &directives {
        for source in sources {
            assert!(
                !matches!(
                    *source,
                    "'unsafe-inline'" | "'unsafe-eval'" | "*" | "http:" | "https:"
                ),
                "{name} allows {source}"
            );
        }
    }
}

/// What in an HTML page a policy without `'unsafe-inline'` blocks: a `<script>` without `src`, an
/// event handler attribute (`onload=`), a `javascript:` URL, a `<style>` element or a `style=`
/// attribute. Returns each offending piece found.
fn inline_code(html: &str) -> Vec<String> {
    let lower = html.to_lowercase();
    let mut found = Vec::new();
    let mut rest = lower.as_str();
    while let Some(at) = rest.find('<') {
        rest = &rest[at + 1..];
        let end = rest.find('>').unwrap_or(rest.len());
        let tag = &rest[..end];
        let name = tag.split_whitespace().next().unwrap_or_default();
        if name == "script" && !tag.contains(" src=") {
            found.push(format!("<{tag}>"));
        }
        if name == "style" {
            found.push(format!("<{tag}>"));
        }
        for attribute in tag.split_whitespace().skip(1) {
            let attribute_name = attribute.split('=').next().unwrap_or_default();
            if (attribute_name.starts_with("on") && attribute.contains('='))
                || attribute_name == "style"
                || attribute.contains("javascript:")
            {
                found.push(format!("<{name} {attribute}>"));
            }
        }
    }
    found
}

#[test]
fn the_check_finds_inline_code() {
    assert_eq!(
        inline_code("<p onclick=\"x()\">a</p><script>alert(1)</script><script src=/a.js></script>"),
        ["<p onclick=\"x()\">", "<script>"]
    );
    assert_eq!(
        inline_code("<div style=\"color:red\"></div><style>p{}</style><a href=\"javascript:x()\">"),
        [
            "<div style=\"color:red\">",
            "<style>",
            "<a href=\"javascript:x()\">"
        ]
    );
    assert!(inline_code("<script type=\"module\" src=\"/src/main.ts\"></script>").is_empty());
}

#[test]
fn the_client_s_pages_have_no_inline_code() {
    let web = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web");
    let source = std::fs::read_to_string(web.join("index.html")).expect("web/index.html");
    assert_eq!(inline_code(&source), Vec::<String>::new(), "web/index.html");
    assert!(source.contains("<script type=\"module\" src="), "{source}");
    // The built page, where it has been built (`cd web && npm run build`).
    if let Ok(built) = std::fs::read_to_string(web.join("dist/index.html")) {
        assert_eq!(
            inline_code(&built),
            Vec::<String>::new(),
            "web/dist/index.html"
        );
    }
}
