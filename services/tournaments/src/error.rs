//! The service's one error enum; its kinds go through the one status table in `draughts_proto`.

use draughts_proto::pb::ErrorReason;
use draughts_proto::{ErrorKind, ServiceError};
use draughts_runtime::upstream::UpstreamError;
use draughts_store::StoreError;

/// Why a tournaments operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TournamentsError {
    /// A bad request field; the message names it.
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Precondition(String),
    #[error("{0}")]
    Denied(String),
    #[error("{0}")]
    Exhausted(String),
    /// A refusal the API names (`ErrorReason`, sent as a trailer so a client words it in its
    /// reader's language), in its one English text.
    #[error("{}", draughts_proto::reason_text(*.0))]
    Refused(ErrorReason),
    /// A compare-and-set kept losing to concurrent writers (retried inside first).
    #[error("the tournament changed at the same moment; try again")]
    Conflict,
    #[error("state backend: {0}")]
    Store(StoreError),
    #[error("stored tournament state: {0}")]
    Corrupt(String),
    /// What another service (Games, Ratings) answered instead of a result: its refusal (kind,
    /// client-facing message, reason) or that it could not be reached.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
}

pub type TournamentsResult<T> = Result<T, TournamentsError>;

impl From<StoreError> for TournamentsError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict { .. } => TournamentsError::Conflict,
            e => TournamentsError::Store(e),
        }
    }
}

impl From<draughts_proto::contract::tournaments::DecodeError> for TournamentsError {
    fn from(e: draughts_proto::contract::tournaments::DecodeError) -> Self {
        TournamentsError::Corrupt(e.to_string())
    }
}

impl ServiceError for TournamentsError {
    fn kind(&self) -> ErrorKind {
        match self {
            TournamentsError::Invalid(_) => ErrorKind::InvalidArgument,
            TournamentsError::Precondition(_) => ErrorKind::FailedPrecondition,
            TournamentsError::Denied(_) => ErrorKind::PermissionDenied,
            TournamentsError::Exhausted(_) => ErrorKind::ResourceExhausted,
            TournamentsError::Refused(reason) => match reason {
                ErrorReason::NoSuchTournament => ErrorKind::NotFound,
                ErrorReason::TournamentPassword | ErrorReason::NotTheCreator => {
                    ErrorKind::PermissionDenied
                }
                _ => ErrorKind::FailedPrecondition,
            },
            TournamentsError::Conflict => ErrorKind::Conflict,
            TournamentsError::Store(e) => e.code().into(),
            TournamentsError::Corrupt(_) => ErrorKind::Internal,
            TournamentsError::Upstream(e) => e.kind(),
        }
    }

    fn reason(&self) -> Option<ErrorReason> {
        match self {
            TournamentsError::Refused(reason) => Some(*reason),
            TournamentsError::Upstream(e) => e.reason(),
            _ => None,
        }
    }
}

impl From<TournamentsError> for tonic::Status {
    fn from(e: TournamentsError) -> tonic::Status {
        if e.kind() == ErrorKind::Internal {
            tracing::error!(error = %e, "tournaments internal error");
        }
        e.to_status()
    }
}
