//! The tower layer that authenticates and rate-limits every request of the server it wraps.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use draughts_proto::{ErrorKind, ServiceError};
use tonic::server::NamedService;
use tonic::transport::server::TcpConnectInfo;
use tower::{Layer, Service};

use super::authenticator::RateState;
use super::limits::{CallKind, CallPolicy};
use super::{AuthError, Authenticator, Principal};

/// Wraps a generated tonic server (or anything serving `http::Request`s) so that each request is
/// authenticated ([`Authenticator::authenticate`]) and counted against its caller's rate limit before it
/// reaches the server. The handler finds an `Option<Principal>` in the request extensions (`None`:
/// anonymous); a refused request is answered here with its gRPC status (RESOURCE_EXHAUSTED carries
/// `retry-after` metadata).
///
/// Every method of the wrapped server counts as a call that changes state (refused with UNAVAILABLE
/// while the rate counters are unreachable) unless [`AuthLayer::with_policy`] names it a read; see
/// [`crate::limits`].
#[derive(Clone, Debug)]
pub struct AuthLayer {
    auth: Authenticator,
    policy: CallPolicy,
}

impl AuthLayer {
    /// The layer for a server whose every method changes state.
    pub fn new(auth: Authenticator) -> AuthLayer {
        AuthLayer {
            auth,
            policy: CallPolicy::WRITES,
        }
    }

    /// The same layer with `policy` saying which methods only read.
    #[must_use]
    pub fn with_policy(mut self, policy: CallPolicy) -> AuthLayer {
        self.policy = policy;
        self
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = Authenticated<S>;

    fn layer(&self, inner: S) -> Authenticated<S> {
        Authenticated {
            inner,
            auth: self.auth.clone(),
            policy: self.policy,
        }
    }
}

/// A service behind [`AuthLayer`]; keeps the wrapped server's gRPC name.
#[derive(Clone, Debug)]
pub struct Authenticated<S> {
    inner: S,
    auth: Authenticator,
    policy: CallPolicy,
}

impl<S: NamedService> NamedService for Authenticated<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B, R> Service<http::Request<B>> for Authenticated<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
    R: Default,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        // The clone that was made ready is the one to call; leave a fresh clone in its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let auth = self.auth.clone();
        let kind = self.policy.kind(req.uri().path());
        // Only the head is looked at (and borrowed across awaits); the body is not `Sync`.
        let (mut head, body) = req.into_parts();
        Box::pin(async move {
            match admit(&auth, &head, kind).await {
                Ok((principal, rate)) => {
                    let address = address_bucket(&head, auth.trust_forwarded_for());
                    head.extensions.insert(ClientAddress(address));
                    head.extensions.insert(principal);
                    let mut response = inner.call(http::Request::from_parts(head, body)).await?;
                    if let Some(rate) = rate {
                        rate.write(response.headers_mut());
                    }
                    Ok(response)
                }
                Err(e) => {
                    tracing::debug!(error = %e, method = head.uri.path(), "call refused");
                    let retry_after = match &e {
                        AuthError::RateLimited { retry_after_secs } => Some(*retry_after_secs),
                        _ => None,
                    };
                    let mut response = e.into_status().into_http();
                    if let Some(reset_secs) = retry_after {
                        let headers = response.headers_mut();
                        headers.insert("x-ratelimit-remaining", 0u32.into());
                        headers.insert("x-ratelimit-reset", reset_secs.into());
                    }
                    Ok(response)
                }
            }
        })
    }
}

/// Authenticates and counts one request. A call without credentials, and a call whose credentials
/// are refused, count against the client address's bucket at the anonymous limit: whoever tries
/// token after token is slowed down as an anonymous caller is (RESOURCE_EXHAUSTED once the address's
/// calls of the minute are used up), and a refused credential is still answered UNAUTHENTICATED below
/// that limit.
async fn admit(
    auth: &Authenticator,
    head: &http::request::Parts,
    kind: CallKind,
) -> Result<(Option<Principal>, Option<RateState>), AuthError> {
    let address_bucket = || address_bucket(head, auth.trust_forwarded_for());
    match auth.caller(&head.headers).await {
        Ok(Some(caller)) => {
            let rate = auth
                .count_call(&caller.rate_bucket, caller.rate_limit_per_minute, kind)
                .await?;
            Ok((Some(caller.principal), rate))
        }
        Ok(None) => {
            let rate = auth
                .count_call(&address_bucket(), auth.anonymous_limit(), kind)
                .await?;
            Ok((None, rate))
        }
        Err(refused) if refused.kind() == ErrorKind::Unauthenticated => {
            // Counted as a read: a store that cannot count falls back to this replica's limiter.
            auth.count_call(&address_bucket(), auth.anonymous_limit(), CallKind::Read)
                .await?;
            Err(refused)
        }
        Err(other) => Err(other),
    }
}

/// The client's address as the rate limits count it (`addr:<ip>`), which a handler finds in the
/// request extensions (see [`client_address`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientAddress(pub String);

/// The client address of a request served behind [`AuthLayer`] (`addr:unknown` without one).
pub fn client_address<T>(req: &tonic::Request<T>) -> String {
    req.extensions()
        .get::<ClientAddress>()
        .map_or_else(|| "addr:unknown".to_owned(), |a| a.0.clone())
}

/// The rate-limit bucket of the request's client: its address, IPv6 grouped by the edge's prefix
/// (`--address-v6-prefix`, a /64 by default), so that one host's many IPv6 addresses count as one.
fn address_bucket(head: &http::request::Parts, trust_forwarded_for: bool) -> String {
    match client_ip(head, trust_forwarded_for) {
        Some(ip) => draughts_runtime::edge::address_bucket(
            ip,
            draughts_runtime::edge::v6_prefix(&head.extensions),
        ),
        None => "addr:unknown".to_owned(),
    }
}

/// The caller's address: the last `x-forwarded-for` entry when trusted (the one our proxy appended;
/// earlier entries are the client's word), else the TCP peer.
fn client_ip(head: &http::request::Parts, trust_forwarded_for: bool) -> Option<IpAddr> {
    if trust_forwarded_for {
        let forwarded = head
            .headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .next_back()
            .and_then(|entry| entry.trim().parse::<IpAddr>().ok());
        if forwarded.is_some() {
            return forwarded;
        }
    }
    head.extensions
        .get::<TcpConnectInfo>()
        .and_then(|info| info.remote_addr())
        .map(|addr| addr.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_clients_share_their_64_bucket() {
        let bucket = |ip: &str| {
            let (mut head, ()) = http::Request::new(()).into_parts();
            head.headers.insert("x-forwarded-for", ip.parse().unwrap());
            address_bucket(&head, true)
        };
        assert_eq!(bucket("2001:db8:1:2::1"), bucket("2001:db8:1:2:ffff::9"));
        assert_ne!(bucket("2001:db8:1:2::1"), bucket("2001:db8:1:3::1"));
        assert_eq!(bucket("203.0.113.7"), "addr:203.0.113.7");
    }

    #[test]
    fn forwarded_for_only_when_trusted() {
        let (mut head, ()) = http::Request::new(()).into_parts();
        head.headers
            .insert("x-forwarded-for", "10.0.0.9, 203.0.113.7".parse().unwrap());
        assert_eq!(client_ip(&head, false), None);
        assert_eq!(client_ip(&head, true), Some("203.0.113.7".parse().unwrap()));
    }
}
