//! The one place that maps service errors to gRPC status codes.
//!
//! Every service defines its own error enum and says, per variant, which [`ErrorKind`] it is; the table in
//! [`status_code`] turns kinds into `tonic::Code`s. Status messages are the errors' `Display` text (a
//! sentence for the client), never a debug dump.

use draughts_engine::{FenError, OptionError, PositionError, ResolveError, UnknownVariant};

/// What kind of failure an error is, independent of the transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The request is wrong whatever the state: malformed FEN, unknown variant, bad option.
    InvalidArgument,
    /// The request is valid but the state forbids it: an illegal move, a finished game, not your turn.
    FailedPrecondition,
    NotFound,
    AlreadyExists,
    /// A concurrent change won (e.g. two replicas racing the same move): retry after re-reading.
    Conflict,
    Unauthenticated,
    PermissionDenied,
    /// Rate limit or quota: retry later.
    ResourceExhausted,
    /// A backend (Redis, the database) is unreachable.
    Unavailable,
    DeadlineExceeded,
    Internal,
}

/// THE table: error kind -> gRPC status code.
pub fn status_code(kind: ErrorKind) -> tonic::Code {
    match kind {
        ErrorKind::InvalidArgument => tonic::Code::InvalidArgument,
        ErrorKind::FailedPrecondition => tonic::Code::FailedPrecondition,
        ErrorKind::NotFound => tonic::Code::NotFound,
        ErrorKind::AlreadyExists => tonic::Code::AlreadyExists,
        ErrorKind::Conflict => tonic::Code::Aborted,
        ErrorKind::Unauthenticated => tonic::Code::Unauthenticated,
        ErrorKind::PermissionDenied => tonic::Code::PermissionDenied,
        ErrorKind::ResourceExhausted => tonic::Code::ResourceExhausted,
        ErrorKind::Unavailable => tonic::Code::Unavailable,
        ErrorKind::DeadlineExceeded => tonic::Code::DeadlineExceeded,
        ErrorKind::Internal => tonic::Code::Internal,
    }
}

/// The table read backwards: the kind of an error another service of the platform answered with (a
/// status received from Games, forwarded to this service's caller with its message).
pub fn kind_of_code(code: tonic::Code) -> ErrorKind {
    match code {
        tonic::Code::InvalidArgument | tonic::Code::OutOfRange => ErrorKind::InvalidArgument,
        tonic::Code::FailedPrecondition => ErrorKind::FailedPrecondition,
        tonic::Code::NotFound => ErrorKind::NotFound,
        tonic::Code::AlreadyExists => ErrorKind::AlreadyExists,
        tonic::Code::Aborted => ErrorKind::Conflict,
        tonic::Code::Unauthenticated => ErrorKind::Unauthenticated,
        tonic::Code::PermissionDenied => ErrorKind::PermissionDenied,
        tonic::Code::ResourceExhausted => ErrorKind::ResourceExhausted,
        tonic::Code::Unavailable | tonic::Code::Cancelled => ErrorKind::Unavailable,
        tonic::Code::DeadlineExceeded => ErrorKind::DeadlineExceeded,
        _ => ErrorKind::Internal,
    }
}

/// THE mapping from a store failure to an error kind, used by every service for its store errors
/// (feature `store`):
/// - `Unavailable` (Redis or the database unreachable, a timeout): UNAVAILABLE, retry later;
/// - `Conflict` (a compare-and-set lost, a unique constraint): ABORTED, re-read and retry;
/// - `InvalidArgument` (the service passed the store something it cannot hold), `NotFound` (a stream
///   group, row or migration the service expected), `Internal`: INTERNAL. These are the service's own
///   mistakes: client input must be validated at the edge (and get INVALID_ARGUMENT there) before it
///   reaches a store, and a store's text never reaches a client.
#[cfg(feature = "store")]
impl From<draughts_store::ErrorCode> for ErrorKind {
    fn from(code: draughts_store::ErrorCode) -> ErrorKind {
        use draughts_store::ErrorCode;
        match code {
            ErrorCode::Unavailable => ErrorKind::Unavailable,
            ErrorCode::Conflict => ErrorKind::Conflict,
            ErrorCode::InvalidArgument | ErrorCode::NotFound | ErrorCode::Internal => {
                ErrorKind::Internal
            }
        }
    }
}

/// The response trailer that names an [`ErrorReason`](crate::pb::ErrorReason) (its proto name), so a
/// client can word a refusal in its own language without reading the English message.
pub const REASON_TRAILER: &str = "draughts-reason";

/// An error that knows its kind (and, for refusals a client words itself, its reason); `to_status`
/// builds the gRPC status from the table.
pub trait ServiceError: std::error::Error {
    fn kind(&self) -> ErrorKind;

    /// Why, in the API's words (`ErrorReason`), where a client may act on it; none by default.
    fn reason(&self) -> Option<crate::pb::ErrorReason> {
        None
    }

    fn to_status(&self) -> tonic::Status {
        let message = match self.kind() {
            // Never leak internals to clients; they are logged by the caller.
            ErrorKind::Internal => "internal error".to_string(),
            _ => self.to_string(),
        };
        let mut status = tonic::Status::new(status_code(self.kind()), message);
        if let Some(reason) = self.reason() {
            status.metadata_mut().insert(
                REASON_TRAILER,
                tonic::metadata::MetadataValue::from_static(reason.as_str_name()),
            );
        }
        status
    }
}

/// The English text of each refusal the API names (`ErrorReason`): the one place it is written. A
/// client words the reason in its reader's language; this is the status message beside it.
pub fn reason_text(reason: crate::pb::ErrorReason) -> &'static str {
    use crate::pb::ErrorReason as R;
    match reason {
        R::NotYourTurn => "it is not your turn",
        R::GameOver => "the game is over",
        R::EndedOnTime => "the game just ended on time",
        R::DrawAlreadyOffered => "you have already offered a draw",
        R::InvitationExpired => "the invitation has expired",
        R::InvitationCancelled => "the invitation was cancelled",
        R::InvitationDeclined => "the invitation was declined",
        R::InviteSelf => "you cannot invite yourself",
        R::NotAPlayer => "only the game's players may do that",
        R::StalePly => "your view of the game is stale",
        R::NoSuchGame => "no such game",
        R::NoSuchTournament => "no such tournament",
        R::TournamentOver => "the tournament is over",
        R::TournamentPassword => "wrong tournament password",
        R::TournamentAccountsOnly => "this tournament is for signed-in accounts only",
        R::TournamentRatingRange => "your rating is outside this tournament's range",
        R::TournamentFull => "the tournament is full",
        R::NotAnEntrant => "you are not an entrant of this tournament",
        R::TournamentStarted => "the tournament has already started",
        R::NotTheCreator => "only the tournament's creator may do that",
        R::BadCredentials => "wrong username or password",
        R::UsernameTaken => "the username is taken",
        R::TooManyAttempts => "too many attempts: retry later",
        R::RateLimited => "rate limit exceeded: retry later",
        R::CredentialsExpired => "credentials expired: get new ones",
        R::SessionEnded => "this session has ended: sign in again",
        R::Unspecified => "refused",
    }
}

/// The reason a status received from a service of the platform names, if any (a name this build does
/// not know reads as none).
pub fn reason_of(status: &tonic::Status) -> Option<crate::pb::ErrorReason> {
    let name = status.metadata().get(REASON_TRAILER)?.to_str().ok()?;
    crate::pb::ErrorReason::from_str_name(name)
        .filter(|r| *r != crate::pb::ErrorReason::Unspecified)
}

/// Errors of the API edge itself (request conversion), shared by every service.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error(transparent)]
    Variant(#[from] UnknownVariant),
    #[error(transparent)]
    Option(#[from] OptionError),
    #[error(transparent)]
    Position(#[from] PositionError),
    #[error(transparent)]
    Fen(#[from] FenError),
    #[error(transparent)]
    Move(#[from] ResolveError),
}

impl ServiceError for ApiError {
    fn kind(&self) -> ErrorKind {
        match self {
            ApiError::Move(ResolveError::Illegal { .. } | ResolveError::Ambiguous { .. }) => {
                ErrorKind::FailedPrecondition
            }
            _ => ErrorKind::InvalidArgument,
        }
    }
}

impl From<ApiError> for tonic::Status {
    fn from(e: ApiError) -> tonic::Status {
        e.to_status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_distinct_codes() {
        let kinds = [
            ErrorKind::InvalidArgument,
            ErrorKind::FailedPrecondition,
            ErrorKind::NotFound,
            ErrorKind::AlreadyExists,
            ErrorKind::Conflict,
            ErrorKind::Unauthenticated,
            ErrorKind::PermissionDenied,
            ErrorKind::ResourceExhausted,
            ErrorKind::Unavailable,
            ErrorKind::DeadlineExceeded,
            ErrorKind::Internal,
        ];
        let codes: std::collections::HashSet<_> = kinds.iter().map(|k| status_code(*k)).collect();
        assert_eq!(codes.len(), kinds.len());
    }

    #[test]
    fn received_codes_read_back_to_their_kind() {
        for kind in [
            ErrorKind::InvalidArgument,
            ErrorKind::FailedPrecondition,
            ErrorKind::NotFound,
            ErrorKind::AlreadyExists,
            ErrorKind::Conflict,
            ErrorKind::Unauthenticated,
            ErrorKind::PermissionDenied,
            ErrorKind::ResourceExhausted,
            ErrorKind::Unavailable,
            ErrorKind::DeadlineExceeded,
            ErrorKind::Internal,
        ] {
            assert_eq!(kind_of_code(status_code(kind)), kind);
        }
    }

    #[cfg(feature = "store")]
    #[test]
    fn store_codes_map_to_one_kind_each() {
        use draughts_store::ErrorCode;
        let cases = [
            (ErrorCode::Unavailable, ErrorKind::Unavailable),
            (ErrorCode::Conflict, ErrorKind::Conflict),
            (ErrorCode::InvalidArgument, ErrorKind::Internal),
            (ErrorCode::NotFound, ErrorKind::Internal),
            (ErrorCode::Internal, ErrorKind::Internal),
        ];
        for (code, kind) in cases {
            assert_eq!(ErrorKind::from(code), kind, "{code:?}");
        }
    }

    #[test]
    fn a_reason_travels_as_its_trailer_and_reads_back() {
        #[derive(Debug, thiserror::Error)]
        #[error("it is not your turn")]
        struct Turn;
        impl ServiceError for Turn {
            fn kind(&self) -> ErrorKind {
                ErrorKind::FailedPrecondition
            }
            fn reason(&self) -> Option<crate::pb::ErrorReason> {
                Some(crate::pb::ErrorReason::NotYourTurn)
            }
        }
        let status = Turn.to_status();
        assert_eq!(status.code(), tonic::Code::FailedPrecondition);
        assert_eq!(status.message(), "it is not your turn");
        assert_eq!(
            status.metadata().get(REASON_TRAILER).unwrap(),
            "ERROR_REASON_NOT_YOUR_TURN"
        );
        assert_eq!(
            reason_of(&status),
            Some(crate::pb::ErrorReason::NotYourTurn)
        );
        // No reason, no trailer; a name this build does not know is none.
        let plain = ApiError::InvalidArgument("bad".into()).to_status();
        assert!(plain.metadata().get(REASON_TRAILER).is_none());
        let mut odd = tonic::Status::failed_precondition("x");
        odd.metadata_mut().insert(
            REASON_TRAILER,
            "ERROR_REASON_FROM_THE_FUTURE".parse().unwrap(),
        );
        assert_eq!(reason_of(&odd), None);
    }

    #[test]
    fn internal_errors_do_not_leak() {
        #[derive(Debug, thiserror::Error)]
        #[error("connection to 10.0.0.1 refused")]
        struct Secret;
        impl ServiceError for Secret {
            fn kind(&self) -> ErrorKind {
                ErrorKind::Internal
            }
        }
        let s = Secret.to_status();
        assert_eq!(s.code(), tonic::Code::Internal);
        assert_eq!(s.message(), "internal error");
    }
}
