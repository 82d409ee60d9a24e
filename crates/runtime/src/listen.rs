//! Binding a listener with an error that names it: a port clash says which listener and which
//! address ("gRPC listener 127.0.0.1:50051: address in use"), not only the OS error.

use std::net::SocketAddr;

use tokio::net::TcpListener;

/// Binding `name`'s address failed.
#[derive(Debug, thiserror::Error)]
#[error("{name} {addr}: {reason}")]
pub struct BindError {
    /// What the listener is for (`gRPC listener`, `metrics listener`).
    pub name: &'static str,
    pub addr: SocketAddr,
    /// `address in use`, or the OS error.
    pub reason: String,
    #[source]
    pub source: std::io::Error,
}

impl From<BindError> for std::io::Error {
    fn from(e: BindError) -> std::io::Error {
        std::io::Error::new(e.source.kind(), e.to_string())
    }
}

/// Binds `addr` for the listener called `name`.
pub async fn bind(name: &'static str, addr: SocketAddr) -> Result<TcpListener, BindError> {
    TcpListener::bind(addr).await.map_err(|source| BindError {
        name,
        addr,
        reason: match source.kind() {
            std::io::ErrorKind::AddrInUse => "address in use".to_owned(),
            std::io::ErrorKind::AddrNotAvailable => "address not available on this host".to_owned(),
            std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
            _ => source.to_string(),
        },
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_clash_names_the_listener() {
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = taken.local_addr().unwrap();
        let err = bind("gRPC listener", addr).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("gRPC listener {addr}: address in use")
        );
    }
}
