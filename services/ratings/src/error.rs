//! The one error type of the ratings service and its kinds.

use draughts_proto::{ErrorKind, ServiceError};
use draughts_store::{ErrorCode, StoreError};

/// Why a ratings operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RatingsError {
    /// The request is wrong whatever the state (a missing variant, a bad page token, ...).
    #[error("{0}")]
    InvalidArgument(String),
    /// The database or the live store failed; [`StoreError::code`] says whether a retry may help.
    #[error("ratings backend: {0}")]
    Store(#[from] StoreError),
    /// A stored row does not make sense (never sent to clients; logged).
    #[error("corrupt rating data: {0}")]
    Corrupt(String),
    /// Nothing with that id (a profile of a player the server does not know).
    #[error("{0}")]
    NotFound(String),
    /// The identity registry cannot be read; retry.
    #[error("player names are unavailable: retry later")]
    Unavailable,
    /// Another service of the platform did not answer (the games service's finished-games feed);
    /// retried (never sent to clients: only the background reconciler calls out).
    #[error("upstream: {0}")]
    Upstream(String),
}

impl RatingsError {
    /// Whether retrying the same operation later may succeed (a backend that is down, a lost race).
    pub fn is_transient(&self) -> bool {
        match self {
            RatingsError::Store(e) => matches!(
                e.code(),
                ErrorCode::Unavailable | ErrorCode::Conflict | ErrorCode::Internal
            ),
            RatingsError::Unavailable | RatingsError::Upstream(_) => true,
            RatingsError::InvalidArgument(_)
            | RatingsError::Corrupt(_)
            | RatingsError::NotFound(_) => false,
        }
    }
}

impl From<draughts_store::sqlx::Error> for RatingsError {
    fn from(e: draughts_store::sqlx::Error) -> Self {
        RatingsError::Store(StoreError::from(e))
    }
}

impl ServiceError for RatingsError {
    fn kind(&self) -> ErrorKind {
        match self {
            RatingsError::InvalidArgument(_) => ErrorKind::InvalidArgument,
            RatingsError::Store(e) => e.code().into(),
            RatingsError::Corrupt(_) => ErrorKind::Internal,
            RatingsError::NotFound(_) => ErrorKind::NotFound,
            RatingsError::Unavailable | RatingsError::Upstream(_) => ErrorKind::Unavailable,
        }
    }
}

/// Results of the ratings domain.
pub type RatingsResult<T> = Result<T, RatingsError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let invalid = RatingsError::InvalidArgument("bad page token".into());
        assert_eq!(invalid.to_status().code(), tonic::Code::InvalidArgument);
        assert_eq!(invalid.to_status().message(), "bad page token");
        assert!(!invalid.is_transient());
        let corrupt = RatingsError::Corrupt("rating row of player:1 is NaN".into());
        assert_eq!(corrupt.to_status().message(), "internal error");
        let down = RatingsError::Store(StoreError::Unavailable {
            backend: "database",
            source: "connection refused".into(),
        });
        assert_eq!(down.to_status().code(), tonic::Code::Unavailable);
        assert!(down.is_transient());
        // The one store mapping: a store's InvalidArgument is the service's mistake, not the client's.
        let refused = RatingsError::Store(StoreError::InvalidArgument("zero TTL".into()));
        assert_eq!(refused.kind(), ErrorKind::Internal);
        assert_eq!(refused.to_status().message(), "internal error");
    }
}
