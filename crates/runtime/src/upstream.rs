//! Calls from one service of the platform to another: the one way to open a channel to a peer (bounded
//! connection and call times) and the one way to read back what the peer answered.

use std::time::Duration;

use draughts_proto::pb::ErrorReason;
use draughts_proto::{ErrorKind, kind_of_code, reason_of};
use tonic::transport::{Channel, Endpoint};

use crate::ConfigError;

/// How long opening a connection to a peer may take before the call fails as unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a unary call to a peer may take (its own request timeout is of the same order): a peer
/// that accepts the connection and never answers fails the call as unreachable rather than holding
/// the caller's request open.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A lazily connected channel to the peer at `url` (`http://host:port`; `flag` names the setting in
/// the error). Connecting gives up after [`CONNECT_TIMEOUT`]; each call after `call_timeout` when it
/// is given (`None` for calls that legitimately last longer: a search with its own time limit).
pub fn channel(
    flag: &str,
    url: &str,
    call_timeout: Option<Duration>,
) -> Result<Channel, ConfigError> {
    let endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|e| ConfigError(format!("{flag} '{url}': {e}")))?
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true);
    let endpoint = match call_timeout {
        Some(limit) => endpoint.timeout(limit),
        None => endpoint,
    };
    Ok(endpoint.connect_lazy())
}

/// What a peer answered instead of a result, as the calling service sees it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    /// The peer could not be reached, timed out or failed inside (logged where it was read): the
    /// caller's client sees UNAVAILABLE and retries later.
    #[error("{0} is unreachable")]
    Unreachable(&'static str),
    /// The peer's refusal, forwarded: its kind (read back through the one status table), its message
    /// (written for clients) and the reason it named, so that a client words it itself.
    #[error("{message}")]
    Answered {
        kind: ErrorKind,
        message: String,
        reason: Option<ErrorReason>,
    },
}

impl UpstreamError {
    /// What `status`, received from `service` ("Games", "Ratings"), means to its caller.
    pub fn from_status(service: &'static str, status: &tonic::Status) -> UpstreamError {
        match kind_of_code(status.code()) {
            ErrorKind::Unavailable | ErrorKind::Internal | ErrorKind::DeadlineExceeded => {
                tracing::warn!(service, code = ?status.code(), message = status.message(), "upstream call failed");
                UpstreamError::Unreachable(service)
            }
            kind => UpstreamError::Answered {
                kind,
                message: status.message().to_owned(),
                reason: reason_of(status),
            },
        }
    }

    /// The error's kind: a peer's own kind, or UNAVAILABLE when it could not answer.
    pub fn kind(&self) -> ErrorKind {
        match self {
            UpstreamError::Unreachable(_) => ErrorKind::Unavailable,
            UpstreamError::Answered { kind, .. } => *kind,
        }
    }

    /// The reason the peer named, if any.
    pub fn reason(&self) -> Option<ErrorReason> {
        match self {
            UpstreamError::Unreachable(_) => None,
            UpstreamError::Answered { reason, .. } => *reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_keeps_its_kind_message_and_reason() {
        let mut status = tonic::Status::failed_precondition("you are already playing");
        status.metadata_mut().insert(
            draughts_proto::REASON_TRAILER,
            ErrorReason::RateLimited.as_str_name().parse().unwrap(),
        );
        let e = UpstreamError::from_status("Games", &status);
        assert_eq!(e.kind(), ErrorKind::FailedPrecondition);
        assert_eq!(e.reason(), Some(ErrorReason::RateLimited));
        assert_eq!(e.to_string(), "you are already playing");
    }

    #[test]
    fn a_peer_that_cannot_answer_is_unreachable_and_its_text_is_not_forwarded() {
        for status in [
            tonic::Status::unavailable("connection refused"),
            tonic::Status::internal("database password wrong"),
            tonic::Status::cancelled("Timeout expired"),
            tonic::Status::deadline_exceeded("too slow"),
        ] {
            let e = UpstreamError::from_status("Ratings", &status);
            assert_eq!(e, UpstreamError::Unreachable("Ratings"), "{status:?}");
            assert_eq!(e.kind(), ErrorKind::Unavailable);
            assert_eq!(e.reason(), None);
            assert_eq!(e.to_string(), "Ratings is unreachable");
        }
    }

    #[tokio::test]
    async fn a_silent_peer_fails_the_call_within_the_call_timeout() {
        // A listener that accepts connections and never answers a byte.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                open.push(socket);
            }
        });
        let channel = channel(
            "--test-url",
            &format!("http://{addr}"),
            Some(Duration::from_millis(300)),
        )
        .unwrap();
        let mut client = draughts_proto::pb::games_client::GamesClient::new(channel);
        // Without the channel's call timeout this call would never end: the test's own bound makes
        // that a failure rather than a hang.
        let status = tokio::time::timeout(
            Duration::from_secs(10),
            client.count_games_in_progress(draughts_proto::pb::CountGamesInProgressRequest {}),
        )
        .await
        .expect("the call ends within the channel's call timeout")
        .unwrap_err();
        assert_eq!(
            UpstreamError::from_status("Games", &status),
            UpstreamError::Unreachable("Games")
        );
        held.abort();
    }

    #[test]
    fn a_malformed_address_is_a_configuration_error_naming_its_flag() {
        let e = channel("--games-url", "not a url", None).unwrap_err();
        assert!(e.to_string().contains("--games-url"), "{e}");
    }
}
