//! The service's one error enum; its kinds go through the one status table in `draughts_proto`.

use draughts_proto::{ErrorKind, ServiceError};
use draughts_runtime::upstream::UpstreamError;
use draughts_store::StoreError;

/// Why a matchmaking operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MatchmakingError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Precondition(String),
    #[error("{0}")]
    Exhausted(String),
    /// A write lost a compare-and-set race (retried inside; seen by a caller only after retries).
    #[error("the state changed at the same moment; try again")]
    Conflict,
    #[error("state backend: {0}")]
    Store(StoreError),
    #[error("stored matchmaking state: {0}")]
    Corrupt(String),
    /// What another service (Games, Ratings) answered instead of a result: its refusal forwarded with
    /// the reason it named (so a client words a refusal of Games met through Accept itself), or that
    /// it could not be reached.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
}

pub type MatchmakingResult<T> = Result<T, MatchmakingError>;

impl From<StoreError> for MatchmakingError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict { .. } => MatchmakingError::Conflict,
            e => MatchmakingError::Store(e),
        }
    }
}

impl From<draughts_proto::contract::matchmaking::DecodeError> for MatchmakingError {
    fn from(e: draughts_proto::contract::matchmaking::DecodeError) -> Self {
        MatchmakingError::Corrupt(e.to_string())
    }
}

impl From<draughts_proto::ApiError> for MatchmakingError {
    fn from(e: draughts_proto::ApiError) -> Self {
        MatchmakingError::Invalid(e.to_string())
    }
}

impl ServiceError for MatchmakingError {
    fn kind(&self) -> ErrorKind {
        match self {
            MatchmakingError::Invalid(_) => ErrorKind::InvalidArgument,
            MatchmakingError::NotFound(_) => ErrorKind::NotFound,
            MatchmakingError::Precondition(_) => ErrorKind::FailedPrecondition,
            MatchmakingError::Exhausted(_) => ErrorKind::ResourceExhausted,
            MatchmakingError::Conflict => ErrorKind::Conflict,
            MatchmakingError::Store(e) => e.code().into(),
            MatchmakingError::Corrupt(_) => ErrorKind::Internal,
            MatchmakingError::Upstream(e) => e.kind(),
        }
    }

    fn reason(&self) -> Option<draughts_proto::pb::ErrorReason> {
        match self {
            MatchmakingError::Upstream(e) => e.reason(),
            _ => None,
        }
    }
}

impl From<MatchmakingError> for tonic::Status {
    fn from(e: MatchmakingError) -> tonic::Status {
        if e.kind() == ErrorKind::Internal {
            tracing::error!(error = %e, "matchmaking internal error");
        }
        e.to_status()
    }
}
