//! The tower layer that authenticates and rate-limits every request of the server it wraps.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use draughts_proto::ids::{PlayerId, PlayerKind};
use draughts_proto::{ErrorKind, ServiceError};
use tonic::server::NamedService;
use tonic::transport::server::TcpConnectInfo;
use tower::{Layer, Service};

use super::authenticator::{RateState, Refused};
use super::limits::{CallKind, CallPolicy};
use super::{AuthError, Authenticator, Principal, Scope};

/// Wraps a generated tonic server (or anything serving `http::Request`s) so that each request is
/// authenticated ([`Authenticator::authenticate`]) and counted against its caller's rate limit before it
/// reaches the server. The handler finds an `Option<Principal>` in the request extensions (`None`:
/// anonymous); a refused request is answered here with its gRPC status (RESOURCE_EXHAUSTED carries
/// `retry-after` metadata).
///
/// Every answer of a call that was counted against a rate-limit bucket carries where that bucket
/// stands after it, as response metadata (HTTP headers, so also on a trailers-only error answer and
/// at the start of a stream): `x-ratelimit-limit` (calls allowed a minute), `x-ratelimit-remaining`
/// (calls left in this minute; 0 on RESOURCE_EXHAUSTED) and `x-ratelimit-reset` (seconds until the
/// minute ends). That is the handler's answers whatever their status, and the refusals made here
/// (see `admit` for which bucket counts each).
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
            // The client's address: counted for anonymous calls, and kept for the handlers.
            let address = address_bucket(&head, auth.trust_forwarded_for());
            match admit(&auth, &head, &address, kind).await {
                Ok((principal, rate, behalf)) => {
                    head.extensions.insert(ClientAddress(address));
                    head.extensions.insert(principal);
                    if let Some(user) = behalf {
                        head.extensions.insert(OnBehalfOf(user));
                    }
                    let mut response = inner.call(http::Request::from_parts(head, body)).await?;
                    rate.write(response.headers_mut());
                    Ok(response)
                }
                Err(Refused { error, rate }) => {
                    tracing::debug!(error = %error, method = head.uri.path(), "call refused");
                    // RESOURCE_EXHAUSTED carries `retry-after` (`AuthError::into_status`).
                    let mut response = error.into_status().into_http();
                    if let Some(rate) = rate {
                        rate.write(response.headers_mut());
                    }
                    Ok(response)
                }
            }
        })
    }
}

/// Authenticates and counts one request: the caller, where the bucket the call was counted against
/// stands after it (for the `x-ratelimit-*` metadata), and the user a service calls for.
///
/// A call without credentials, and a call whose credentials are refused (UNAUTHENTICATED), count
/// against the client address's bucket at the anonymous limit: whoever tries token after token is
/// slowed down as an anonymous caller is (RESOURCE_EXHAUSTED once the address's calls of the minute
/// are used up), and a refused credential is still answered UNAUTHENTICATED below that limit, with
/// the address bucket's state. A service's call naming a malformed user in `x-on-behalf-of` counts
/// against the service key's own bucket before it is refused (INVALID_ARGUMENT). Both refusals count
/// as reads (they change nothing), so while the store cannot count they are counted by the fallback
/// limiter. A refusal with no state is one that was not counted: the store could neither count a call
/// that changes state (UNAVAILABLE) nor read an API key's record.
async fn admit(
    auth: &Authenticator,
    head: &http::request::Parts,
    address: &str,
    kind: CallKind,
) -> Result<(Option<Principal>, RateState, Option<PlayerId>), Refused> {
    match auth.caller(&head.headers).await {
        Ok(Some(caller)) => {
            // A service calling on a user's behalf spends that user's calls, not its own key's.
            let behalf = match caller.principal.scopes.has(Scope::Service) {
                true => match on_behalf_of_header(head) {
                    Ok(behalf) => behalf,
                    Err(error) => {
                        let rate = auth
                            .count_call(
                                &caller.rate_bucket,
                                caller.rate_limit_per_minute,
                                CallKind::Read,
                            )
                            .await?;
                        return Err(Refused {
                            error,
                            rate: Some(rate),
                        });
                    }
                },
                false => None,
            };
            let rate = match &behalf {
                Some(user) => match user.kind() {
                    // The server's own computer has no limit of its own: the service's key counts.
                    PlayerKind::Computer { .. } => {
                        auth.count_call(&caller.rate_bucket, caller.rate_limit_per_minute, kind)
                            .await?
                    }
                    PlayerKind::Guest => {
                        auth.count_call(user.as_str(), auth.guest_limit(), kind)
                            .await?
                    }
                    _ => {
                        auth.count_call(user.as_str(), auth.player_limit(), kind)
                            .await?
                    }
                },
                None => {
                    auth.count_call(&caller.rate_bucket, caller.rate_limit_per_minute, kind)
                        .await?
                }
            };
            Ok((Some(caller.principal), rate, behalf))
        }
        Ok(None) => {
            let rate = auth
                .count_call(address, auth.anonymous_limit(), kind)
                .await?;
            Ok((None, rate, None))
        }
        Err(refused) if refused.kind() == ErrorKind::Unauthenticated => {
            // Counted as a read: a store that cannot count falls back to this replica's limiter.
            let rate = auth
                .count_call(address, auth.anonymous_limit(), CallKind::Read)
                .await?;
            Err(Refused {
                error: refused,
                rate: Some(rate),
            })
        }
        Err(other) => Err(other.into()),
    }
}

/// The metadata in which a service names the user it calls for (trusted only from callers with the
/// `service` scope; ignored from others).
pub const ON_BEHALF_OF: &str = "x-on-behalf-of";

/// The user a service's call is made for (see [`ON_BEHALF_OF`]), in the request extensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OnBehalfOf(pub PlayerId);

/// The user a call of a service was made for, if it named one.
pub fn on_behalf_of<T>(req: &tonic::Request<T>) -> Option<PlayerId> {
    req.extensions().get::<OnBehalfOf>().map(|o| o.0.clone())
}

/// A service's credential for its calls to other services: the `authorization` metadata
/// (`Bearer <key>`) of an API key, checked once when the service starts. Its `Debug` never shows
/// the key.
#[derive(Clone)]
pub struct ServiceKey(tonic::metadata::AsciiMetadataValue);

impl std::fmt::Debug for ServiceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServiceKey(..)")
    }
}

impl ServiceKey {
    /// The credential of `api_key`; refused when the key cannot be sent as gRPC metadata (visible
    /// ASCII only).
    pub fn new(api_key: &str) -> Result<ServiceKey, draughts_runtime::ConfigError> {
        format!("Bearer {api_key}")
            .parse()
            .map(ServiceKey)
            .map_err(|_| {
                draughts_runtime::ConfigError(
                    "the service API key must be visible ASCII (it is sent as gRPC metadata)"
                        .into(),
                )
            })
    }

    /// `message` as a request of this service: its credential, the current trace context and,
    /// when the call is made for a user, [`ON_BEHALF_OF`] naming `user` (a service-scope key's call
    /// then counts against that user's own rate limit, not against the key's). INVALID_ARGUMENT
    /// when `user` cannot be sent as metadata (the server would refuse it as a player id).
    pub fn request<T>(
        &self,
        message: T,
        user: Option<&str>,
    ) -> Result<tonic::Request<T>, AuthError> {
        let mut request = tonic::Request::new(message);
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        if let Some(user) = user {
            let refused = || {
                AuthError::InvalidArgument(format!(
                    "{ON_BEHALF_OF}: player id {user:?} cannot be sent as metadata"
                ))
            };
            // Visible ASCII only: the server reads nothing else (`on_behalf_of_header`).
            if !user.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(refused());
            }
            let value = user.parse().map_err(|_| refused())?;
            request.metadata_mut().insert(ON_BEHALF_OF, value);
        }
        draughts_runtime::propagation::inject_into_request(request)
            .map_err(|status| AuthError::InvalidArgument(status.message().to_owned()))
    }
}

/// The user named in `x-on-behalf-of`, if any; INVALID_ARGUMENT for a value that is not a player id.
fn on_behalf_of_header(head: &http::request::Parts) -> Result<Option<PlayerId>, AuthError> {
    let Some(value) = head.headers.get(ON_BEHALF_OF) else {
        return Ok(None);
    };
    let text = value
        .to_str()
        .map_err(|_| AuthError::InvalidArgument(format!("{ON_BEHALF_OF} must be a player id")))?;
    PlayerId::parse(text)
        .map(Some)
        .map_err(|e| AuthError::InvalidArgument(format!("{ON_BEHALF_OF}: {e}")))
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

    #[test]
    fn a_service_request_carries_the_key_and_the_user() {
        let key = super::ServiceKey::new("k-123").unwrap();
        assert_eq!(format!("{key:?}"), "ServiceKey(..)");
        let request = key.request((), Some("guest:abc")).unwrap();
        assert_eq!(
            request.metadata().get("authorization").unwrap(),
            "Bearer k-123"
        );
        assert_eq!(
            request.metadata().get(super::ON_BEHALF_OF).unwrap(),
            "guest:abc"
        );
        let request = key.request((), None).unwrap();
        assert!(request.metadata().get(super::ON_BEHALF_OF).is_none());
        assert!(key.request((), Some("player:b\u{e9}b")).is_err());
        assert!(super::ServiceKey::new("bad\nkey").is_err());
    }
}
