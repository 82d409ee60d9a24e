//! Every failure of authentication and of the `Auth` service, and its kind.

use draughts_proto::{ErrorKind, ServiceError};
use draughts_store::StoreError;

use super::Scope;

/// Why a call is refused. Messages are sentences for the client: they never carry the credential, a
/// claim value or a backend's error text.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The `authorization` metadata is not `Bearer <token>` (or appears more than once).
    #[error("authorization metadata must be \"Bearer <token>\"")]
    MalformedHeader,
    /// The bearer token is not a token this server accepts; the reason is a fixed phrase.
    #[error("invalid token: {0}")]
    InvalidToken(&'static str),
    /// A well-signed token past its `exp`, or an API key past its expiry.
    #[error("credentials expired: get new ones")]
    Expired,
    /// An API key of the right shape that is not (or no longer) stored.
    #[error("unknown or revoked API key")]
    UnknownApiKey,
    /// An anonymous call to a method that needs credentials.
    #[error("this call needs credentials: authorization metadata \"Bearer <token>\"")]
    Unauthenticated,
    /// The caller lacks the scope the call needs.
    #[error("this call needs the {0} scope")]
    MissingScope(Scope),
    /// The caller's rate limit for the current window is used up.
    #[error("rate limit exceeded: retry in {retry_after_secs} s")]
    RateLimited {
        /// Seconds until the window ends (at least 1).
        retry_after_secs: u64,
    },
    /// A bad request field (display name, owner, scopes, key id); the text says which and why.
    #[error("{0}")]
    InvalidArgument(String),
    /// The rate counters cannot be reached and the call changes state, so it is refused (kind
    /// Unavailable; see [`crate::limits`]).
    #[error(
        "rate limiter unavailable: calls that change state are refused until it is back; retry later"
    )]
    LimiterUnavailable(#[source] StoreError),
    /// The live store failed (kind: the one store mapping, `From<ErrorCode> for ErrorKind`; the
    /// store's text is never shown).
    #[error("authentication store unavailable")]
    Store(#[source] StoreError),
    /// A handler that needs the caller was reached without the authentication layer: a wiring
    /// mistake of the server (kind Internal; never shown).
    #[error("request not authenticated by the layer")]
    NotBehindLayer,
    /// Signing a guest token failed (kind Internal; never shown).
    #[error("signing a token failed")]
    Signing(#[source] jsonwebtoken::errors::Error),
    /// A call for accounts only by a caller that is not one (kind PermissionDenied).
    #[error("only a signed-in account can do this")]
    NotAnAccount,
    /// A personal token of the right shape that is not (or no longer) stored.
    #[error("unknown or revoked personal token")]
    UnknownPersonalToken,
    /// An access token of a session that was ended (sign-out, password change, deletion), or a
    /// refresh token that is unknown, expired, revoked or reused (kind Unauthenticated).
    #[error("this session has ended: sign in again")]
    SessionEnded,
    /// Sign-in with an unknown username or a wrong password: one message for both (kind
    /// Unauthenticated).
    #[error("wrong username or password")]
    BadCredentials,
    /// SignUp with a username taken in any letter case (kind AlreadyExists).
    #[error("username '{0}' is taken")]
    UsernameTaken(String),
    /// Too many sign-in or sign-up attempts (kind ResourceExhausted, with `retry-after`).
    #[error("too many {what}: retry in {retry_after_secs} s")]
    Throttled {
        /// "sign-in attempts from this address", ...
        what: &'static str,
        retry_after_secs: u64,
    },
    /// Too many passwords waiting to be hashed (kind Unavailable): retry.
    #[error("the server is busy checking passwords: retry in a moment")]
    Busy,
    /// Hashing a password failed (kind Internal; never shown).
    #[error("hashing a password failed")]
    Hashing,
    /// The database of accounts failed (kind from the store's code; the text is never shown).
    #[error("accounts unavailable")]
    Accounts(#[source] StoreError),
    /// This server keeps no accounts (no database attached; kind FailedPrecondition).
    #[error("this server has no accounts")]
    NoAccounts,
    /// A call the caller's state forbids (already signed in, too many personal tokens; kind
    /// FailedPrecondition); the text says why.
    #[error("{0}")]
    Refused(String),
    /// A guest token whose guest was linked to an account (kind Unauthenticated).
    #[error("this guest was linked to an account: sign in with that account")]
    GuestLinked,
    /// The guest is already linked to another account (kind FailedPrecondition).
    #[error("this guest is already linked to another account")]
    AlreadyLinked,
    /// A stored API key record could not be read (kind Internal; never shown).
    #[error("unreadable API key record")]
    CorruptRecord(#[source] serde_json::Error),
}

/// A store failure as it is (the compare-and-set loops of `draughts_store::cas` give their errors so).
impl From<StoreError> for AuthError {
    fn from(e: StoreError) -> AuthError {
        AuthError::Store(e)
    }
}

impl ServiceError for AuthError {
    /// The refusals a client words in its reader's language (the messages keep their details).
    fn reason(&self) -> Option<draughts_proto::pb::ErrorReason> {
        use draughts_proto::pb::ErrorReason as R;
        match self {
            AuthError::BadCredentials => Some(R::BadCredentials),
            AuthError::UsernameTaken(_) => Some(R::UsernameTaken),
            AuthError::Throttled { .. } => Some(R::TooManyAttempts),
            AuthError::RateLimited { .. } => Some(R::RateLimited),
            AuthError::Expired => Some(R::CredentialsExpired),
            AuthError::SessionEnded => Some(R::SessionEnded),
            _ => None,
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            AuthError::MalformedHeader
            | AuthError::InvalidToken(_)
            | AuthError::Expired
            | AuthError::UnknownApiKey
            | AuthError::Unauthenticated
            | AuthError::GuestLinked
            | AuthError::UnknownPersonalToken
            | AuthError::SessionEnded
            | AuthError::BadCredentials => ErrorKind::Unauthenticated,
            AuthError::UsernameTaken(_) => ErrorKind::AlreadyExists,
            AuthError::Throttled { .. } => ErrorKind::ResourceExhausted,
            AuthError::Busy => ErrorKind::Unavailable,
            AuthError::Hashing => ErrorKind::Internal,
            AuthError::Accounts(e) => e.code().into(),
            AuthError::NoAccounts => ErrorKind::FailedPrecondition,
            AuthError::Refused(_) => ErrorKind::FailedPrecondition,
            AuthError::MissingScope(_) | AuthError::NotAnAccount => ErrorKind::PermissionDenied,
            AuthError::AlreadyLinked => ErrorKind::FailedPrecondition,
            AuthError::RateLimited { .. } => ErrorKind::ResourceExhausted,
            AuthError::InvalidArgument(_) => ErrorKind::InvalidArgument,
            AuthError::LimiterUnavailable(_) => ErrorKind::Unavailable,
            AuthError::Store(e) => e.code().into(),
            AuthError::NotBehindLayer | AuthError::Signing(_) | AuthError::CorruptRecord(_) => {
                ErrorKind::Internal
            }
        }
    }
}

impl AuthError {
    /// The gRPC status: [`ServiceError::to_status`], plus `retry-after` metadata (whole seconds) on
    /// RESOURCE_EXHAUSTED. Internal failures are logged here, since their text never reaches the client.
    pub fn into_status(self) -> tonic::Status {
        if self.kind() == ErrorKind::Internal || self.kind() == ErrorKind::Unavailable {
            tracing::error!(
                error = &self as &(dyn std::error::Error + 'static),
                "authentication failed"
            );
        }
        let mut status = self.to_status();
        if let AuthError::RateLimited { retry_after_secs }
        | AuthError::Throttled {
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

impl From<AuthError> for tonic::Status {
    fn from(e: AuthError) -> tonic::Status {
        e.into_status()
    }
}
