//! The one error type of this crate and its stable kind.

use std::error::Error as StdError;

/// A boxed error from a backend driver, kept as the `source` of a [`StoreError`].
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// The kind of a [`StoreError`], stable enough to map onto a transport status
/// (the map itself lives with the transport, not here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The stream group, row or migration asked for does not exist.
    NotFound,
    /// A compare-and-set lost: the stored version was not the expected one,
    /// or a unique constraint was violated.
    Conflict,
    /// The backend cannot be reached (connection refused or lost, timeout, pool exhausted).
    /// Retrying later may succeed.
    Unavailable,
    /// The caller passed something the backend cannot store (for example a zero TTL).
    InvalidArgument,
    /// The backend answered something this crate did not expect, or failed in a way
    /// a retry will not fix.
    Internal,
}

impl ErrorCode {
    /// A short stable name, for logs and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::Internal => "internal",
        }
    }
}

/// Every failure of a live store or a database.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// See [`ErrorCode::NotFound`].
    #[error("not found: {what}")]
    NotFound {
        /// What was looked for (a stream group, a row), without payload data.
        what: String,
    },
    /// A compare-and-set on `key` lost; `actual` is the version stored now
    /// (`None`: the key does not exist).
    #[error("version conflict on key {key:?}: expected {expected:?}, stored {actual:?}")]
    Conflict {
        /// The key whose write was refused.
        key: String,
        /// The version the writer expected (`None`: "must not exist yet").
        expected: Option<u64>,
        /// The version stored when the write was refused.
        actual: Option<u64>,
    },
    /// A unique constraint or similar database-level conflict.
    #[error("database conflict: {source}")]
    DbConflict {
        /// The driver's error.
        #[source]
        source: BoxError,
    },
    /// See [`ErrorCode::Unavailable`].
    #[error("{backend} unavailable: {source}")]
    Unavailable {
        /// `"redis"`, `"database"` or `"memory"`.
        backend: &'static str,
        /// The driver's error.
        #[source]
        source: BoxError,
    },
    /// A migration version is recorded under another name than the one given: the
    /// migration list was edited after it was applied. Code: Internal.
    #[error("migration {version} is recorded as {recorded:?} but given as {given:?}")]
    MigrationMismatch {
        /// The migration's version.
        version: i64,
        /// The name in `schema_migrations`.
        recorded: String,
        /// The name in the list given to `migrate`.
        given: String,
    },
    /// See [`ErrorCode::InvalidArgument`].
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// See [`ErrorCode::Internal`].
    #[error("{backend} error: {message}")]
    Internal {
        /// `"redis"`, `"database"` or `"memory"`.
        backend: &'static str,
        /// What went wrong, without payload data.
        message: String,
        /// The driver's error, if there was one.
        #[source]
        source: Option<BoxError>,
    },
}

impl StoreError {
    /// The stable kind of this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            StoreError::NotFound { .. } => ErrorCode::NotFound,
            StoreError::Conflict { .. } | StoreError::DbConflict { .. } => ErrorCode::Conflict,
            StoreError::Unavailable { .. } => ErrorCode::Unavailable,
            StoreError::InvalidArgument(_) => ErrorCode::InvalidArgument,
            StoreError::Internal { .. } | StoreError::MigrationMismatch { .. } => {
                ErrorCode::Internal
            }
        }
    }

    pub(crate) fn internal(backend: &'static str, message: impl Into<String>) -> Self {
        StoreError::Internal {
            backend,
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn not_found(what: impl Into<String>) -> Self {
        StoreError::NotFound { what: what.into() }
    }
}

impl From<redis::RedisError> for StoreError {
    fn from(err: redis::RedisError) -> Self {
        if err.is_io_error()
            || err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.is_timeout()
            || err.kind() == redis::ErrorKind::ClusterConnectionNotFound
        {
            return StoreError::Unavailable {
                backend: "redis",
                source: Box::new(err),
            };
        }
        match err.code() {
            Some("NOGROUP") => StoreError::NotFound {
                what: err.detail().unwrap_or("consumer group").to_owned(),
            },
            Some("LOADING") | Some("MASTERDOWN") | Some("TRYAGAIN") | Some("CLUSTERDOWN") => {
                StoreError::Unavailable {
                    backend: "redis",
                    source: Box::new(err),
                }
            }
            _ => StoreError::Internal {
                backend: "redis",
                message: "command failed".to_owned(),
                source: Some(Box::new(err)),
            },
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        match err {
            sqlx::Error::RowNotFound => StoreError::not_found("row"),
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => StoreError::Unavailable {
                backend: "database",
                source: Box::new(err),
            },
            sqlx::Error::Database(ref db_err)
                if db_err.is_unique_violation() || db_err.is_foreign_key_violation() =>
            {
                StoreError::DbConflict {
                    source: Box::new(err),
                }
            }
            other => StoreError::Internal {
                backend: "database",
                message: "query failed".to_owned(),
                source: Some(Box::new(other)),
            },
        }
    }
}
