//! Every failure of the analysis service, and its kind (the status comes from the one table in
//! `draughts_proto::error`).

use draughts_proto::{ApiError, ErrorKind, ServiceError};
use draughts_store::StoreError;

/// Why a call failed. Messages are sentences for the client.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    /// A bad request field; the text names it.
    #[error("{0}")]
    Invalid(String),
    /// A position, rule set or move text the engine refused.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// A well-formed request the state forbids (an illegal move, no legal move to choose).
    #[error("{0}")]
    Precondition(String),
    /// The job does not exist, expired, or is not the caller's.
    #[error("no analysis job {0}")]
    NoJob(String),
    /// The game is not known to the Games service.
    #[error("no game {0}")]
    NoGame(String),
    /// A quota or the queue's capacity is used up.
    #[error("{what}: retry in {retry_after_secs} s")]
    Exhausted { what: String, retry_after_secs: u64 },
    /// The caller lacks what the call needs (a scope, or the guest limits).
    #[error("{0}")]
    Denied(String),
    /// No worker answered in time (BestMove).
    #[error("no worker answered within {0} ms")]
    Timeout(u64),
    /// The Games service could not be reached.
    #[error("the games service is unavailable")]
    GamesUnavailable(#[source] tonic::Status),
    /// The live store failed.
    #[error("analysis queue unavailable")]
    Store(#[from] StoreError),
    /// A stored payload could not be read (never shown).
    #[error("unreadable stored analysis record")]
    Corrupt(#[from] crate::contract::DecodeError),
    /// A race lost too many times in a row (never expected; retry).
    #[error("the job changed concurrently too often; retry")]
    Contended,
}

impl ServiceError for AnalysisError {
    fn kind(&self) -> ErrorKind {
        match self {
            AnalysisError::Invalid(_) => ErrorKind::InvalidArgument,
            AnalysisError::Api(e) => e.kind(),
            AnalysisError::Precondition(_) => ErrorKind::FailedPrecondition,
            AnalysisError::NoJob(_) | AnalysisError::NoGame(_) => ErrorKind::NotFound,
            AnalysisError::Exhausted { .. } => ErrorKind::ResourceExhausted,
            AnalysisError::Denied(_) => ErrorKind::PermissionDenied,
            AnalysisError::Timeout(_) => ErrorKind::DeadlineExceeded,
            AnalysisError::GamesUnavailable(_) => ErrorKind::Unavailable,
            // The one store-error mapping of draughts-proto.
            AnalysisError::Store(e) => e.code().into(),
            AnalysisError::Contended => ErrorKind::Conflict,
            AnalysisError::Corrupt(_) => ErrorKind::Internal,
        }
    }
}

impl AnalysisError {
    /// The gRPC status: [`ServiceError::to_status`], plus `retry-after` metadata (whole seconds) on
    /// RESOURCE_EXHAUSTED. Internal and unavailable failures are logged here.
    pub fn into_status(self) -> tonic::Status {
        if matches!(self.kind(), ErrorKind::Internal | ErrorKind::Unavailable) {
            tracing::error!(
                error = &self as &(dyn std::error::Error + 'static),
                "analysis call failed"
            );
        }
        let mut status = self.to_status();
        if let AnalysisError::Exhausted {
            retry_after_secs, ..
        } = self
        {
            status
                .metadata_mut()
                .insert("retry-after", retry_after_secs.into());
        }
        status
    }
}

impl From<AnalysisError> for tonic::Status {
    fn from(e: AnalysisError) -> tonic::Status {
        e.into_status()
    }
}

pub type AnalysisResult<T> = Result<T, AnalysisError>;
