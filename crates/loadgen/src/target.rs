//! The server to load: a plain-HTTP gRPC address on the loopback interface, and nothing else. A load
//! generator aimed at someone else's machine is a denial-of-service tool; this one refuses to be one.

use std::net::{IpAddr, SocketAddr};

/// A checked loopback address to connect to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub addr: SocketAddr,
}

/// Why a `--server` value is refused.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("--server {0:?}: not a URL of the form http://127.0.0.1:50051")]
    Malformed(String),
    #[error("--server {0:?}: only plain http:// is supported (the load generator has no TLS)")]
    Scheme(String),
    #[error("--server {0:?}: a port is required, e.g. http://127.0.0.1:50051")]
    NoPort(String),
    #[error(
        "--server {given:?}: refused: {host} is not a loopback address; only 127.0.0.0/8, ::1 and localhost may be targeted"
    )]
    NotLoopback { given: String, host: String },
    #[error(
        "--server {given:?}: localhost resolves to {resolved}, which is not a loopback address"
    )]
    LocalhostNotLoopback { given: String, resolved: IpAddr },
    #[error("--server {given:?}: cannot resolve localhost: {reason}")]
    Resolve { given: String, reason: String },
}

impl Target {
    /// Parses `http://HOST:PORT` (the `http://` may be left out). HOST must be an IPv4 address in
    /// 127.0.0.0/8, `[::1]`, or `localhost`, which is resolved here and must resolve to loopback only.
    pub async fn parse(given: &str) -> Result<Target, TargetError> {
        let (host, port) = split(given)?;
        if host.eq_ignore_ascii_case("localhost") {
            let resolved: Vec<SocketAddr> = tokio::net::lookup_host(("localhost", port))
                .await
                .map_err(|err| TargetError::Resolve {
                    given: given.to_owned(),
                    reason: err.to_string(),
                })?
                .collect();
            if let Some(bad) = resolved.iter().find(|addr| !is_loopback(addr.ip())) {
                return Err(TargetError::LocalhostNotLoopback {
                    given: given.to_owned(),
                    resolved: bad.ip(),
                });
            }
            // Prefer IPv4: servers here listen on 127.0.0.1 or 0.0.0.0 far more often than on ::1.
            let addr = resolved
                .iter()
                .find(|addr| addr.is_ipv4())
                .or(resolved.first())
                .copied()
                .ok_or_else(|| TargetError::Resolve {
                    given: given.to_owned(),
                    reason: "no address".into(),
                })?;
            return Ok(Target { addr });
        }
        let ip: IpAddr = host.parse().map_err(|_| TargetError::NotLoopback {
            given: given.to_owned(),
            host: host.to_owned(),
        })?;
        if !is_loopback(ip) {
            return Err(TargetError::NotLoopback {
                given: given.to_owned(),
                host: host.to_owned(),
            });
        }
        Ok(Target {
            addr: SocketAddr::new(ip, port),
        })
    }

    /// The URI tonic connects to.
    pub fn uri(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// 127.0.0.0/8 or ::1 exactly (an IPv4-mapped `::ffff:127.0.0.1` is refused: say 127.0.0.1).
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback(),
    }
}

/// `http://host:port[/]` -> (host without IPv6 brackets, port).
fn split(given: &str) -> Result<(&str, u16), TargetError> {
    let malformed = || TargetError::Malformed(given.to_owned());
    let rest = match given.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
        Some(_) => return Err(TargetError::Scheme(given.to_owned())),
        None => given,
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() || authority.contains(['/', '@', '?', '#']) {
        return Err(malformed());
    }
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']').ok_or_else(malformed)?;
        let port = after
            .strip_prefix(':')
            .ok_or_else(|| TargetError::NoPort(given.to_owned()))?;
        (host, port)
    } else {
        if authority.matches(':').count() > 1 {
            // A bare IPv6 address: it needs brackets to carry a port.
            return Err(malformed());
        }
        authority
            .split_once(':')
            .ok_or_else(|| TargetError::NoPort(given.to_owned()))?
    };
    let port: u16 = port.parse().map_err(|_| malformed())?;
    if host.is_empty() || port == 0 {
        return Err(malformed());
    }
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn check(given: &str, expected: Result<&str, &str>) {
        match (Target::parse(given).await, expected) {
            (Ok(target), Ok(addr)) => assert_eq!(target.addr.to_string(), addr, "{given}"),
            (Err(err), Err(fragment)) => {
                let text = err.to_string();
                assert!(text.contains(fragment), "{given}: {text}");
            }
            (got, expected) => panic!("{given}: got {got:?}, expected {expected:?}"),
        }
    }

    #[tokio::test]
    async fn only_loopback_is_accepted() {
        check("http://127.0.0.1:50051", Ok("127.0.0.1:50051")).await;
        check("127.0.0.1:50051", Ok("127.0.0.1:50051")).await;
        check("http://127.1.2.3:7/", Ok("127.1.2.3:7")).await;
        check("http://[::1]:50051", Ok("[::1]:50051")).await;
        check("http://10.0.0.1:50051", Err("not a loopback address")).await;
        check("http://0.0.0.0:50051", Err("not a loopback address")).await;
        check("http://[::ffff:127.0.0.1]:1", Err("not a loopback address")).await;
        check("http://example.com:80", Err("not a loopback address")).await;
        check(
            "http://localhost.example.com:80",
            Err("not a loopback address"),
        )
        .await;
        check("https://127.0.0.1:443", Err("only plain http://")).await;
        check("http://127.0.0.1", Err("a port is required")).await;
        check("http://127.0.0.1:50051/x", Err("not a URL")).await;
        check("http://user@127.0.0.1:1", Err("not a URL")).await;
        check("http://127.0.0.1:0", Err("not a URL")).await;
    }

    #[tokio::test]
    async fn localhost_resolves_to_loopback() {
        let target = Target::parse("http://localhost:50051").await.unwrap();
        assert!(target.addr.ip().is_loopback());
        assert_eq!(target.addr.port(), 50051);
    }
}
