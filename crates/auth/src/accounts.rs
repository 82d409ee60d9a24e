//! Accounts of this server: sign-up, sign-in, sessions with rotating refresh tokens, password
//! changes, deletion, and personal API tokens. Plain async code over the [`Database`] (the durable
//! records) and the live store (throttles, session-end marks, personal tokens' lookup records); no
//! tonic types.
//!
//! # Sessions
//!
//! A sign-in opens a session: a row of `auth_sessions` and a refresh token `rt_<session id>_<secret>`,
//! of which only the SHA-256 of the secret is stored. `RefreshSession` swaps the secret for a new one
//! (a compare-and-set on the row's generation) and issues a new access token: a JWT signed with the
//! platform's keys (`sub` = the account's player id `user:<20 hex>`, `sid` = the session id), valid
//! for `access-token-ttl-secs`. A refresh token that does not match the session's current secret has
//! been used before (or raced another use of itself): the whole session ends, as OAuth 2.0 security
//! practice recommends for refresh-token reuse. Ending a session (sign-out, reuse, a password change,
//! deletion) writes the mark `auth:session-ended:{sid}` for as long as its access tokens live; every
//! replica refuses them within seconds (`Authenticator::is_retired`).
//!
//! # Throttles
//!
//! Sign-in attempts are counted before any password is hashed, in 5-minute windows: per client
//! address (30), per account and address (10), per account (100). A refused attempt costs one counter
//! and no hashing. One address can thus add at most 10 attempts a window to an account's count: the
//! owner, from another address, is locked out only by attackers holding more than ten addresses, and
//! only until the window ends. Sign-ups are counted per address and hour
//! (`signups-per-address-per-hour`).
//!
//! # Stored data
//!
//! | table / live name | contents |
//! |---|---|
//! | `auth_accounts` | player id, username (and its lowercase key, unique), display name, Argon2id hash, created, adopted guests, deleted |
//! | `auth_sessions` | session id, player id, SHA-256 of the current refresh secret, generation, times, end and why |
//! | `auth_personal_tokens` | token id, player id, SHA-256 of the token, label, scopes, created, expiry |
//! | `auth:ptoken:{id}` (live) | [`PersonalTokenRecord`]: what every replica reads to authenticate a personal token (restored from the table at start) |
//! | `auth:ptoken-used:{id}` (live) | last use, Unix ms |
//! | `auth:session-ended:{sid}` (live, TTL) | the session ended |
//! | `auth:throttle:{bucket}:{window}` (live, TTL) | attempts in the window |
//!
//! A deleted account keeps its row (player id, creation time) with no username, password or name: its
//! finished games and rating history stay under the same id, shown as [`DELETED_NAME`].

use std::time::Duration;

use bytes::Bytes;
use draughts_proto::ids::PlayerId;
use draughts_store::cas::{self, Change, Retry};
use draughts_store::{Database, ErrorCode, Migration, StoreError, now_unix_ms};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::authenticator::{
    ACCOUNT_SCOPES, GuestClaims, MAX_API_KEY_LIFETIME, PERSONAL_TOKEN_PREFIX, api_key_id,
    personal_token_record_name, personal_token_use_name, session_ended_name,
};
use super::config::GUEST_ISSUER;
use super::names;
use super::passwords::{MAX_PASSWORD_BYTES, Passwords, check_new_password};
use super::{AuthError, Authenticator, Principal, PrincipalKind, Scope, Scopes};

/// The durable schema of accounts (auth's migrations are numbered from 2000).
pub const MIGRATIONS: &[Migration<'static>] = &[Migration {
    version: 2001,
    name: "auth_accounts",
    sql: "CREATE TABLE IF NOT EXISTS auth_accounts (
            player_id TEXT PRIMARY KEY,
            username TEXT NOT NULL,
            username_key TEXT NOT NULL,
            display_name TEXT NOT NULL,
            password_hash TEXT NOT NULL,
            created_at_ms BIGINT NOT NULL,
            updated_at_ms BIGINT NOT NULL,
            adopted_guests TEXT NOT NULL,
            deleted_at_ms BIGINT NOT NULL
        );
        CREATE UNIQUE INDEX IF NOT EXISTS auth_accounts_username ON auth_accounts (username_key);
        CREATE TABLE IF NOT EXISTS auth_sessions (
            session_id TEXT PRIMARY KEY,
            player_id TEXT NOT NULL,
            token_hash TEXT NOT NULL,
            generation BIGINT NOT NULL,
            created_at_ms BIGINT NOT NULL,
            refreshed_at_ms BIGINT NOT NULL,
            expires_at_ms BIGINT NOT NULL,
            ended_at_ms BIGINT NOT NULL,
            end_reason TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS auth_sessions_player ON auth_sessions (player_id, refreshed_at_ms);
        CREATE TABLE IF NOT EXISTS auth_personal_tokens (
            token_id TEXT PRIMARY KEY,
            player_id TEXT NOT NULL,
            token_hash TEXT NOT NULL,
            label TEXT NOT NULL,
            scopes TEXT NOT NULL,
            created_at_ms BIGINT NOT NULL,
            expires_at_ms BIGINT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS auth_personal_tokens_player ON auth_personal_tokens (player_id, created_at_ms);",
}];

/// The name a deleted account is shown under.
pub const DELETED_NAME: &str = "Deleted player";

/// Open sessions an account keeps; signing in once more ends the least recently refreshed.
pub const MAX_SESSIONS_PER_ACCOUNT: usize = 50;

/// Personal tokens an account may hold.
pub const MAX_PERSONAL_TOKENS: usize = 20;

/// Longest personal token label, in characters.
const MAX_LABEL_CHARS: usize = 40;

/// The window of the sign-in throttles.
pub const SIGN_IN_WINDOW: Duration = Duration::from_secs(300);
/// Sign-in attempts per client address per window.
pub const SIGN_INS_PER_ADDRESS: u64 = 30;
/// Sign-in attempts per account and client address per window.
pub const SIGN_INS_PER_ACCOUNT_AND_ADDRESS: u64 = 10;
/// Sign-in attempts per account per window, from every address.
pub const SIGN_INS_PER_ACCOUNT: u64 = 100;
/// The window of the sign-up and export throttles.
const HOUR: Duration = Duration::from_secs(3600);
/// Data exports (`ExportAccountData`, up to 2,000 games read and sent each) per caller per hour.
pub const EXPORTS_PER_HOUR: u64 = 10;

/// Random bytes of a session id (shown as twice as many hex digits).
const SESSION_ID_BYTES: usize = 16;
/// Random bytes of a refresh secret.
const REFRESH_SECRET_BYTES: usize = 32;
/// Random bytes of an account's id (`user:` + twice as many hex digits).
const ACCOUNT_ID_BYTES: usize = 10;

/// Prefix of every refresh token.
pub const REFRESH_TOKEN_PREFIX: &str = "rt_";

/// The accounts' database and password hasher, attached to an [`Authenticator`].
#[derive(Clone, Debug)]
pub(crate) struct AccountsBackend {
    db: Database,
    passwords: Passwords,
}

/// A session just opened or refreshed.
#[derive(Clone, Debug)]
pub struct IssuedSession {
    pub access_token: String,
    pub access_expires_at_ms: u64,
    pub refresh_token: String,
    pub refresh_expires_at_ms: u64,
    /// The account as a caller.
    pub principal: Principal,
    pub username: String,
    /// The guest that became this account (SignUp with a guest token).
    pub adopted_guest: Option<String>,
}

/// An account as its owner sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountInfo {
    pub player_id: String,
    pub display_name: String,
    pub username: String,
    pub created_at_ms: u64,
    pub adopted_guests: Vec<String>,
}

/// The live-store record of a personal token, under `auth:ptoken:{id}`. JSON; readers ignore unknown
/// fields.
#[derive(Debug, Serialize, Deserialize)]
pub struct PersonalTokenRecord {
    /// Schema version: 1.
    pub v: u32,
    /// SHA-256 of the whole token, lowercase hex.
    pub token_hash: String,
    /// The account (`user:...`).
    pub player_id: String,
    /// The account's display name (rewritten when it changes).
    pub display_name: String,
    /// Scope names (`play`, `analysis`).
    pub scopes: Vec<String>,
    /// When it stops working, Unix ms; 0 = never.
    #[serde(default)]
    pub expires_at_ms: u64,
}

/// A personal token as its owner sees it (never the token).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersonalTokenInfo {
    pub token_id: String,
    pub label: String,
    pub scopes: Scopes,
    pub created_at_ms: u64,
    pub expires_at_ms: u64,
    pub last_used_at_ms: u64,
}

/// One account row.
#[derive(Debug)]
struct AccountRow {
    player_id: String,
    username: String,
    display_name: String,
    password_hash: String,
    created_at_ms: i64,
    adopted_guests: String,
    deleted_at_ms: i64,
}

const ACCOUNT_COLUMNS: &str = "player_id, username, display_name, password_hash, created_at_ms, adopted_guests, deleted_at_ms";

type AccountTuple = (String, String, String, String, i64, String, i64);

impl From<AccountTuple> for AccountRow {
    fn from(t: AccountTuple) -> AccountRow {
        AccountRow {
            player_id: t.0,
            username: t.1,
            display_name: t.2,
            password_hash: t.3,
            created_at_ms: t.4,
            adopted_guests: t.5,
            deleted_at_ms: t.6,
        }
    }
}

impl AccountRow {
    fn info(&self) -> AccountInfo {
        AccountInfo {
            player_id: self.player_id.clone(),
            display_name: self.display_name.clone(),
            username: self.username.clone(),
            created_at_ms: u64::try_from(self.created_at_ms).unwrap_or(0),
            adopted_guests: self
                .adopted_guests
                .split(',')
                .filter(|g| !g.is_empty())
                .map(str::to_owned)
                .collect(),
        }
    }
}

fn random_hex(n_bytes: usize) -> String {
    use rand::RngCore;
    let mut bytes = vec![0u8; n_bytes];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn ms_i64(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

fn db_error(e: impl Into<StoreError>) -> AuthError {
    AuthError::Accounts(e.into())
}

/// The session id and secret of a refresh token, if it has the right shape.
fn parse_refresh_token(token: &str) -> Option<(&str, &str)> {
    let rest = token.trim().strip_prefix(REFRESH_TOKEN_PREFIX)?;
    let (session, secret) = rest.split_once('_')?;
    let hex_of = |text: &str, bytes: usize| {
        text.len() == 2 * bytes && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    (hex_of(session, SESSION_ID_BYTES) && hex_of(secret, REFRESH_SECRET_BYTES))
        .then_some((session, secret))
}

impl Authenticator {
    /// Keeps accounts in `db` from now on (applies the schema, restores the personal tokens' lookup
    /// records). Without it the account calls answer FAILED_PRECONDITION "this server has no accounts".
    pub async fn attach_accounts(&self, db: Database) -> Result<(), StoreError> {
        db.migrate(MIGRATIONS).await?;
        let backend = AccountsBackend {
            db,
            passwords: Passwords::new(self.config().password_hash_threads),
        };
        let _ = self.inner_accounts().set(backend);
        self.restore_personal_tokens().await
    }

    fn accounts(&self) -> Result<&AccountsBackend, AuthError> {
        self.inner_accounts().get().ok_or(AuthError::NoAccounts)
    }

    /// Counts one attempt of `bucket` in the current `window`; [`AuthError::Throttled`] past `limit`.
    /// A store that cannot count lets the attempt through (the per-minute call limits still apply).
    async fn throttle(
        &self,
        what: &'static str,
        bucket: &str,
        limit: u64,
        window: Duration,
    ) -> Result<(), AuthError> {
        let window_ms = window.as_millis() as u64;
        let now = now_unix_ms();
        let index = now / window_ms;
        let name = format!("auth:throttle:{bucket}:{index}");
        match self.store().hit(&name, window).await {
            Ok(count) if count > limit => Err(AuthError::Throttled {
                what,
                retry_after_secs: ((index + 1) * window_ms - now).div_ceil(1000).max(1),
            }),
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::warn!(error = %e, "throttle counter unavailable; attempt let through");
                Ok(())
            }
        }
    }

    /// Counts one data export of `caller`; [`AuthError::Throttled`] past [`EXPORTS_PER_HOUR`].
    pub async fn count_export(&self, caller: &Principal) -> Result<(), AuthError> {
        self.throttle(
            "data exports this hour",
            &format!("export:{}", caller.player_id),
            EXPORTS_PER_HOUR,
            HOUR,
        )
        .await
    }

    async fn load_account_by(
        &self,
        column: &str,
        value: &str,
    ) -> Result<Option<AccountRow>, AuthError> {
        let db = &self.accounts()?.db;
        let sql = format!("SELECT {ACCOUNT_COLUMNS} FROM auth_accounts WHERE {column} = $1");
        let row: Option<AccountTuple> =
            draughts_store::sqlx::query_as(draughts_store::sqlx::AssertSqlSafe(sql))
                .bind(value.to_owned())
                .fetch_optional(db.pool())
                .await
                .map_err(db_error)?;
        Ok(row.map(AccountRow::from))
    }

    /// The live account of `caller` (an account's token), else PERMISSION_DENIED or UNAUTHENTICATED.
    async fn own_account(&self, caller: &Principal) -> Result<AccountRow, AuthError> {
        if caller.kind != PrincipalKind::Account {
            return Err(AuthError::NotAnAccount);
        }
        match self.load_account_by("player_id", &caller.player_id).await? {
            Some(row) if row.deleted_at_ms == 0 => Ok(row),
            _ => Err(AuthError::SessionEnded),
        }
    }

    /// Registers an account and opens its first session. `caller` is the guest to adopt, if any
    /// (another kind of caller is refused: sign out first). `address` is the client's, for the
    /// sign-up throttle.
    pub async fn sign_up(
        &self,
        caller: Option<&Principal>,
        address: &str,
        username: &str,
        password: &str,
        display_name: &str,
    ) -> Result<IssuedSession, AuthError> {
        let backend = self.accounts()?.clone();
        let key = names::username_key(username)?;
        check_new_password(password)?;
        let display_name = match display_name.trim() {
            "" => username.to_owned(),
            name => names::display_name(name)?.to_owned(),
        };
        let guest = match caller {
            None => None,
            Some(p) if p.kind == PrincipalKind::Guest => Some(
                PlayerId::parse(&p.player_id)
                    .map_err(|_| AuthError::InvalidToken("malformed subject"))?,
            ),
            Some(_) => {
                return Err(AuthError::Refused(
                    "already signed in: SignUp takes no credentials, or a guest token to adopt"
                        .into(),
                ));
            }
        };
        self.throttle(
            "sign-ups from this address",
            &format!("signup-addr:{address}"),
            u64::from(self.config().signups_per_address_per_hour),
            HOUR,
        )
        .await?;
        if self.load_account_by("username_key", &key).await?.is_some() {
            return Err(AuthError::UsernameTaken(username.to_owned()));
        }
        let hash = backend.passwords.hash(password).await?;
        let player_id = format!("user:{}", random_hex(ACCOUNT_ID_BYTES));
        let now = now_unix_ms();
        let inserted = draughts_store::sqlx::query(
            "INSERT INTO auth_accounts (player_id, username, username_key, display_name, password_hash, created_at_ms, updated_at_ms, adopted_guests, deleted_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0)",
        )
        .bind(player_id.clone())
        .bind(username.to_owned())
        .bind(key)
        .bind(display_name.clone())
        .bind(hash)
        .bind(ms_i64(now))
        .bind(ms_i64(now))
        .bind(String::new())
        .execute(backend.db.pool())
        .await;
        match inserted {
            Ok(_) => {}
            Err(e) => {
                let e = StoreError::from(e);
                return Err(if e.code() == ErrorCode::Conflict {
                    AuthError::UsernameTaken(username.to_owned())
                } else {
                    db_error(e)
                });
            }
        }
        let id = PlayerId::parse(&player_id).map_err(|_| AuthError::Hashing)?;
        self.identities()
            .record_account(&id, &display_name, now)
            .await
            .map_err(AuthError::Store)?;
        tracing::info!(player_id, "account created");
        // The account exists from here on: a guest that cannot be adopted (linked meanwhile by a
        // concurrent sign-up with the same token) leaves an account without it, not a failed call
        // that took the username anyway.
        let adopted = match &guest {
            Some(guest) => match self.link_guest_id(guest, &player_id, &display_name).await {
                Ok(_) => {
                    draughts_store::sqlx::query(
                        "UPDATE auth_accounts SET adopted_guests = $1 WHERE player_id = $2",
                    )
                    .bind(guest.to_string())
                    .bind(player_id.clone())
                    .execute(backend.db.pool())
                    .await
                    .map_err(db_error)?;
                    tracing::info!(player_id, guest_id = %guest, "guest adopted");
                    Some(guest.to_string())
                }
                Err(AuthError::AlreadyLinked) => {
                    tracing::warn!(player_id, guest_id = %guest, "guest already linked elsewhere: not adopted");
                    None
                }
                Err(e) => return Err(e),
            },
            None => None,
        };
        let mut session = self
            .open_session(&player_id, &display_name, username)
            .await?;
        session.adopted_guest = adopted;
        Ok(session)
    }

    /// Signs in: throttles first (no hashing for a refused attempt), then checks the password (or a
    /// decoy's, for an unknown username: same answer, about the same time).
    pub async fn sign_in(
        &self,
        address: &str,
        username: &str,
        password: &str,
    ) -> Result<IssuedSession, AuthError> {
        let backend = self.accounts()?.clone();
        let key = names::username_key(username).ok();
        // A name that cannot be a username still counts, under its bounded lowercase form.
        let account_bucket = key.clone().unwrap_or_else(|| {
            let mut text: String = username.chars().take(24).collect();
            text.make_ascii_lowercase();
            sha256_hex(&text)[..16].to_owned()
        });
        self.throttle(
            "sign-in attempts from this address",
            &format!("signin-addr:{address}"),
            SIGN_INS_PER_ADDRESS,
            SIGN_IN_WINDOW,
        )
        .await?;
        self.throttle(
            "sign-in attempts for this account from this address",
            &format!("signin-pair:{account_bucket}:{address}"),
            SIGN_INS_PER_ACCOUNT_AND_ADDRESS,
            SIGN_IN_WINDOW,
        )
        .await?;
        self.throttle(
            "sign-in attempts for this account",
            &format!("signin-account:{account_bucket}"),
            SIGN_INS_PER_ACCOUNT,
            SIGN_IN_WINDOW,
        )
        .await?;
        let row = match &key {
            Some(key) => self
                .load_account_by("username_key", key)
                .await?
                .filter(|row| row.deleted_at_ms == 0),
            None => None,
        };
        let matched = backend
            .passwords
            .verify(password, row.as_ref().map(|r| r.password_hash.as_str()))
            .await?;
        let row = match row {
            Some(row) if matched => row,
            _ => return Err(AuthError::BadCredentials),
        };
        if let Ok(id) = PlayerId::parse(&row.player_id) {
            let created = u64::try_from(row.created_at_ms).unwrap_or(0);
            if let Err(e) = self
                .identities()
                .record_account(&id, &row.display_name, created)
                .await
            {
                tracing::warn!(error = %e, "identity registry unavailable at sign-in");
            }
        }
        self.open_session(&row.player_id, &row.display_name, &row.username)
            .await
    }

    /// Opens a session for the account and issues its first tokens; ends the account's least
    /// recently refreshed sessions beyond [`MAX_SESSIONS_PER_ACCOUNT`] and forgets its expired ones.
    async fn open_session(
        &self,
        player_id: &str,
        display_name: &str,
        username: &str,
    ) -> Result<IssuedSession, AuthError> {
        let db = self.accounts()?.db.clone();
        let now = now_unix_ms();
        let session_id = random_hex(SESSION_ID_BYTES);
        let secret = random_hex(REFRESH_SECRET_BYTES);
        let expires = now + self.config().session_ttl_secs * 1000;
        draughts_store::sqlx::query(
            "INSERT INTO auth_sessions (session_id, player_id, token_hash, generation, created_at_ms, refreshed_at_ms, expires_at_ms, ended_at_ms, end_reason) VALUES ($1, $2, $3, 1, $4, $5, $6, 0, '')",
        )
        .bind(session_id.clone())
        .bind(player_id.to_owned())
        .bind(sha256_hex(&secret))
        .bind(ms_i64(now))
        .bind(ms_i64(now))
        .bind(ms_i64(expires))
        .execute(db.pool())
        .await
        .map_err(db_error)?;
        draughts_store::sqlx::query(
            "DELETE FROM auth_sessions WHERE player_id = $1 AND expires_at_ms < $2",
        )
        .bind(player_id.to_owned())
        .bind(ms_i64(now))
        .execute(db.pool())
        .await
        .map_err(db_error)?;
        let open: Vec<(String,)> = draughts_store::sqlx::query_as(
            "SELECT session_id FROM auth_sessions WHERE player_id = $1 AND ended_at_ms = 0 ORDER BY refreshed_at_ms DESC, session_id",
        )
        .bind(player_id.to_owned())
        .fetch_all(db.pool())
        .await
        .map_err(db_error)?;
        for (old,) in open.iter().skip(MAX_SESSIONS_PER_ACCOUNT) {
            self.end_session(old, "too many sessions").await?;
        }
        self.issue_tokens(
            player_id,
            display_name,
            username,
            &session_id,
            &secret,
            expires,
        )
    }

    fn issue_tokens(
        &self,
        player_id: &str,
        display_name: &str,
        username: &str,
        session_id: &str,
        secret: &str,
        refresh_expires_at_ms: u64,
    ) -> Result<IssuedSession, AuthError> {
        let now_secs = now_unix_ms() / 1000;
        let exp = now_secs + self.config().access_token_ttl_secs;
        let claims = GuestClaims {
            iss: GUEST_ISSUER.to_owned(),
            aud: GUEST_ISSUER.to_owned(),
            sub: player_id.to_owned(),
            name: display_name.to_owned(),
            iat: now_secs,
            exp,
            sid: Some(session_id.to_owned()),
        };
        Ok(IssuedSession {
            access_token: self.keys().sign(&claims)?,
            access_expires_at_ms: exp * 1000,
            refresh_token: format!("{REFRESH_TOKEN_PREFIX}{session_id}_{secret}"),
            refresh_expires_at_ms,
            principal: Principal {
                player_id: player_id.to_owned(),
                display_name: display_name.to_owned(),
                kind: PrincipalKind::Account,
                scopes: ACCOUNT_SCOPES,
            },
            username: username.to_owned(),
            adopted_guest: None,
        })
    }

    /// Ends `session` (once; later calls change nothing) and marks it so that its access tokens are
    /// refused on every replica.
    async fn end_session(&self, session: &str, reason: &str) -> Result<bool, AuthError> {
        let db = &self.accounts()?.db;
        let ended = draughts_store::sqlx::query(
            "UPDATE auth_sessions SET ended_at_ms = $1, end_reason = $2 WHERE session_id = $3 AND ended_at_ms = 0",
        )
        .bind(ms_i64(now_unix_ms()))
        .bind(reason.to_owned())
        .bind(session.to_owned())
        .execute(db.pool())
        .await
        .map_err(db_error)?
        .rows_affected()
            > 0;
        // Access tokens live `access_token_ttl_secs` plus the allowed clock skew.
        let mark_ttl = Duration::from_secs(self.config().access_token_ttl_secs + 120);
        let name = session_ended_name(session);
        match self
            .store()
            .put(&name, Bytes::from_static(b"1"), None, Some(mark_ttl))
            .await
        {
            Ok(_) => {}
            Err(e) if e.code() == ErrorCode::Conflict => {}
            Err(e) => return Err(AuthError::Store(e)),
        }
        self.remember_retired(&name, true);
        if ended {
            tracing::info!(session, reason, "session ended");
        }
        Ok(ended)
    }

    /// Ends every open session of `player_id` but `keep`.
    async fn end_sessions_of(
        &self,
        player_id: &str,
        keep: Option<&str>,
        reason: &str,
    ) -> Result<(), AuthError> {
        let db = self.accounts()?.db.clone();
        let open: Vec<(String,)> = draughts_store::sqlx::query_as(
            "SELECT session_id FROM auth_sessions WHERE player_id = $1 AND ended_at_ms = 0",
        )
        .bind(player_id.to_owned())
        .fetch_all(db.pool())
        .await
        .map_err(db_error)?;
        for (session,) in open {
            if Some(session.as_str()) != keep {
                self.end_session(&session, reason).await?;
            }
        }
        Ok(())
    }

    /// Trades a refresh token for new tokens; a token that is not the session's current one ends the
    /// session (reuse).
    pub async fn refresh_session(&self, refresh_token: &str) -> Result<IssuedSession, AuthError> {
        let db = self.accounts()?.db.clone();
        let (session, secret) =
            parse_refresh_token(refresh_token).ok_or(AuthError::SessionEnded)?;
        let row: Option<(String, String, i64, i64, i64)> = draughts_store::sqlx::query_as(
            "SELECT player_id, token_hash, generation, expires_at_ms, ended_at_ms FROM auth_sessions WHERE session_id = $1",
        )
        .bind(session.to_owned())
        .fetch_optional(db.pool())
        .await
        .map_err(db_error)?;
        let Some((player_id, stored_hash, generation, expires_at_ms, ended_at_ms)) = row else {
            return Err(AuthError::SessionEnded);
        };
        let now = now_unix_ms();
        if ended_at_ms != 0 || ms_i64(now) >= expires_at_ms {
            return Err(AuthError::SessionEnded);
        }
        let presented = Sha256::digest(secret.as_bytes());
        let stored = hex::decode(&stored_hash).unwrap_or_default();
        if !super::constant_time_eq(&presented, &stored) {
            tracing::warn!(session, player_id, "refresh token reused: session ended");
            self.end_session(session, "refresh token reused").await?;
            return Err(AuthError::SessionEnded);
        }
        let new_secret = random_hex(REFRESH_SECRET_BYTES);
        let expires = now + self.config().session_ttl_secs * 1000;
        let swapped = draughts_store::sqlx::query(
            "UPDATE auth_sessions SET token_hash = $1, generation = $2, refreshed_at_ms = $3, expires_at_ms = $4 WHERE session_id = $5 AND generation = $6 AND ended_at_ms = 0",
        )
        .bind(sha256_hex(&new_secret))
        .bind(generation + 1)
        .bind(ms_i64(now))
        .bind(ms_i64(expires))
        .bind(session.to_owned())
        .bind(generation)
        .execute(db.pool())
        .await
        .map_err(db_error)?
        .rows_affected();
        if swapped == 0 {
            // The same token was used twice at once: one use is not the owner's.
            tracing::warn!(
                session,
                player_id,
                "refresh token used concurrently: session ended"
            );
            self.end_session(session, "refresh token reused").await?;
            return Err(AuthError::SessionEnded);
        }
        let account = match self.load_account_by("player_id", &player_id).await? {
            Some(row) if row.deleted_at_ms == 0 => row,
            _ => return Err(AuthError::SessionEnded),
        };
        if let Ok(id) = PlayerId::parse(&player_id)
            && let Err(e) = self
                .identities()
                .record_account(
                    &id,
                    &account.display_name,
                    u64::try_from(account.created_at_ms).unwrap_or(0),
                )
                .await
        {
            tracing::warn!(error = %e, "identity registry unavailable at refresh");
        }
        self.issue_tokens(
            &player_id,
            &account.display_name,
            &account.username,
            session,
            &new_secret,
            expires,
        )
    }

    /// Ends the session of `refresh_token`; whether one was ended now.
    pub async fn sign_out(&self, refresh_token: &str) -> Result<bool, AuthError> {
        self.accounts()?;
        match parse_refresh_token(refresh_token) {
            Some((session, _)) => self.end_session(session, "sign-out").await,
            None => Ok(false),
        }
    }

    /// Checks `password` against the account of `caller` under the sign-in throttles.
    async fn confirm_password(
        &self,
        caller: &Principal,
        address: &str,
        password: &str,
    ) -> Result<AccountRow, AuthError> {
        let row = self.own_account(caller).await?;
        let key = row.username.to_ascii_lowercase();
        self.throttle(
            "password attempts for this account from this address",
            &format!("signin-pair:{key}:{address}"),
            SIGN_INS_PER_ACCOUNT_AND_ADDRESS,
            SIGN_IN_WINDOW,
        )
        .await?;
        let backend = self.accounts()?.clone();
        if password.len() > MAX_PASSWORD_BYTES
            || !backend
                .passwords
                .verify(password, Some(&row.password_hash))
                .await?
        {
            return Err(AuthError::BadCredentials);
        }
        Ok(row)
    }

    /// Changes the password of `caller`'s account, ends its other sessions and opens a new one.
    pub async fn change_password(
        &self,
        caller: &Principal,
        address: &str,
        current: &str,
        new: &str,
    ) -> Result<IssuedSession, AuthError> {
        check_new_password(new)?;
        let row = self.confirm_password(caller, address, current).await?;
        let backend = self.accounts()?.clone();
        let hash = backend.passwords.hash(new).await?;
        draughts_store::sqlx::query(
            "UPDATE auth_accounts SET password_hash = $1, updated_at_ms = $2 WHERE player_id = $3",
        )
        .bind(hash)
        .bind(ms_i64(now_unix_ms()))
        .bind(row.player_id.clone())
        .execute(backend.db.pool())
        .await
        .map_err(db_error)?;
        self.end_sessions_of(&row.player_id, None, "password changed")
            .await?;
        tracing::info!(player_id = row.player_id, "password changed");
        self.open_session(&row.player_id, &row.display_name, &row.username)
            .await
    }

    /// The account of `caller`.
    pub async fn account(&self, caller: &Principal) -> Result<AccountInfo, AuthError> {
        Ok(self.own_account(caller).await?.info())
    }

    /// Renames `caller`'s account (its id stays): the registry, and its personal tokens' records.
    pub async fn update_display_name(
        &self,
        caller: &Principal,
        display_name: &str,
    ) -> Result<AccountInfo, AuthError> {
        let name = names::display_name(display_name)?.to_owned();
        let mut row = self.own_account(caller).await?;
        let db = self.accounts()?.db.clone();
        draughts_store::sqlx::query(
            "UPDATE auth_accounts SET display_name = $1, updated_at_ms = $2 WHERE player_id = $3",
        )
        .bind(name.clone())
        .bind(ms_i64(now_unix_ms()))
        .bind(row.player_id.clone())
        .execute(db.pool())
        .await
        .map_err(db_error)?;
        row.display_name = name.clone();
        let id = PlayerId::parse(&row.player_id).map_err(|_| AuthError::Hashing)?;
        self.identities()
            .record_account(&id, &name, u64::try_from(row.created_at_ms).unwrap_or(0))
            .await
            .map_err(AuthError::Store)?;
        let tokens: Vec<(String,)> = draughts_store::sqlx::query_as(
            "SELECT token_id FROM auth_personal_tokens WHERE player_id = $1",
        )
        .bind(row.player_id.clone())
        .fetch_all(db.pool())
        .await
        .map_err(db_error)?;
        for (token_id,) in tokens {
            self.rewrite_token_record(&token_id, |record| {
                record.display_name = name.clone();
            })
            .await?;
        }
        Ok(row.info())
    }

    async fn rewrite_token_record(
        &self,
        token_id: &str,
        edit: impl Fn(&mut PersonalTokenRecord),
    ) -> Result<(), AuthError> {
        let codec = (
            |bytes: &[u8]| {
                serde_json::from_slice::<PersonalTokenRecord>(bytes)
                    .map_err(AuthError::CorruptRecord)
            },
            |record: &PersonalTokenRecord| {
                serde_json::to_vec(record)
                    .map(Bytes::from)
                    .map_err(AuthError::CorruptRecord)
            },
        );
        cas::update(
            self.store().as_ref(),
            &personal_token_record_name(token_id),
            &codec,
            Retry::times(5),
            |record| match record {
                None => Ok(Change::Keep(())),
                Some(mut record) => {
                    edit(&mut record);
                    // The record keeps its lapse (a rewrite without one kept it for ever).
                    let ttl = token_record_ttl(&record);
                    Ok(Change::Write {
                        value: record,
                        ttl,
                        effects: Vec::new(),
                        then: (),
                    })
                }
            },
        )
        .await
    }

    /// Deletes `caller`'s account after checking its password: credentials, sessions, personal tokens
    /// and personal data go; the row keeps the id and creation time; the registry shows
    /// [`DELETED_NAME`]. Returns the player id.
    pub async fn delete_account(
        &self,
        caller: &Principal,
        address: &str,
        password: &str,
    ) -> Result<String, AuthError> {
        let row = self.confirm_password(caller, address, password).await?;
        let db = self.accounts()?.db.clone();
        let now = ms_i64(now_unix_ms());
        draughts_store::sqlx::query(
            "UPDATE auth_accounts SET username = '', username_key = $1, display_name = $2, password_hash = '', adopted_guests = '', updated_at_ms = $3, deleted_at_ms = $4 WHERE player_id = $5",
        )
        .bind(format!("deleted:{}", row.player_id))
        .bind(DELETED_NAME)
        .bind(now)
        .bind(now)
        .bind(row.player_id.clone())
        .execute(db.pool())
        .await
        .map_err(db_error)?;
        self.end_sessions_of(&row.player_id, None, "account deleted")
            .await?;
        let tokens: Vec<(String,)> = draughts_store::sqlx::query_as(
            "SELECT token_id FROM auth_personal_tokens WHERE player_id = $1",
        )
        .bind(row.player_id.clone())
        .fetch_all(db.pool())
        .await
        .map_err(db_error)?;
        for (token_id,) in tokens {
            self.revoke_personal_token(caller, &token_id).await?;
        }
        let id = PlayerId::parse(&row.player_id).map_err(|_| AuthError::Hashing)?;
        self.identities()
            .record_account(
                &id,
                DELETED_NAME,
                u64::try_from(row.created_at_ms).unwrap_or(0),
            )
            .await
            .map_err(AuthError::Store)?;
        // The games it played show the anonymous name from now on (games applies it).
        let event = draughts_proto::contract::erased::ErasedV1 {
            player_id: id,
            name: DELETED_NAME.to_owned(),
            at_ms: now_unix_ms(),
        };
        self.store()
            .append(
                draughts_proto::contract::erased::STREAM,
                Bytes::from(draughts_proto::contract::erased::encode(&event)),
            )
            .await
            .map_err(AuthError::Store)?;
        tracing::info!(player_id = row.player_id, "account deleted");
        Ok(row.player_id)
    }

    /// Creates a personal token for `caller`'s account: `dp_` + 64 hex digits, shown once.
    pub async fn create_personal_token(
        &self,
        caller: &Principal,
        label: &str,
        scopes: Scopes,
        lifetime: Option<Duration>,
    ) -> Result<(String, PersonalTokenInfo), AuthError> {
        let label = label.trim();
        let label_chars = label.chars().count();
        if label_chars == 0 || label_chars > MAX_LABEL_CHARS || label.chars().any(char::is_control)
        {
            return Err(AuthError::InvalidArgument(format!(
                "label must be 1 to {MAX_LABEL_CHARS} characters without control characters"
            )));
        }
        if scopes.is_empty() || scopes.iter().any(|s| !ACCOUNT_SCOPES.has(s)) {
            return Err(AuthError::InvalidArgument(
                "scopes: at least one, and only PLAY and ANALYSIS (what an account has)".into(),
            ));
        }
        if lifetime.is_some_and(|t| t.is_zero() || t > MAX_API_KEY_LIFETIME) {
            return Err(AuthError::InvalidArgument(format!(
                "expires_in_secs must be 0 (never) or at most {}",
                MAX_API_KEY_LIFETIME.as_secs()
            )));
        }
        let row = self.own_account(caller).await?;
        let db = self.accounts()?.db.clone();
        let (count,): (i64,) = draughts_store::sqlx::query_as(
            "SELECT COUNT(*) FROM auth_personal_tokens WHERE player_id = $1",
        )
        .bind(row.player_id.clone())
        .fetch_one(db.pool())
        .await
        .map_err(db_error)?;
        if count >= MAX_PERSONAL_TOKENS as i64 {
            return Err(AuthError::Refused(format!(
                "an account holds at most {MAX_PERSONAL_TOKENS} personal tokens: revoke one first"
            )));
        }
        let now = now_unix_ms();
        let expires_at_ms = lifetime.map_or(0, |t| {
            now.saturating_add(u64::try_from(t.as_millis()).unwrap_or(u64::MAX))
        });
        let token = format!("{PERSONAL_TOKEN_PREFIX}{}", random_hex(32));
        let token_id = api_key_id(&token);
        let scope_names: Vec<String> = scopes.iter().map(|s| s.name().to_owned()).collect();
        draughts_store::sqlx::query(
            "INSERT INTO auth_personal_tokens (token_id, player_id, token_hash, label, scopes, created_at_ms, expires_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(token_id.clone())
        .bind(row.player_id.clone())
        .bind(sha256_hex(&token))
        .bind(label.to_owned())
        .bind(scope_names.join(","))
        .bind(ms_i64(now))
        .bind(ms_i64(expires_at_ms))
        .execute(db.pool())
        .await
        .map_err(db_error)?;
        let record = PersonalTokenRecord {
            v: 1,
            token_hash: sha256_hex(&token),
            player_id: row.player_id.clone(),
            display_name: row.display_name.clone(),
            scopes: scope_names,
            expires_at_ms,
        };
        self.put_token_record(&token_id, &record).await?;
        tracing::info!(token_id, player_id = row.player_id, %scopes, "personal token created");
        Ok((
            token,
            PersonalTokenInfo {
                token_id,
                label: label.to_owned(),
                scopes,
                created_at_ms: now,
                expires_at_ms,
                last_used_at_ms: 0,
            },
        ))
    }

    async fn put_token_record(
        &self,
        token_id: &str,
        record: &PersonalTokenRecord,
    ) -> Result<(), AuthError> {
        let value = serde_json::to_vec(record).map_err(AuthError::CorruptRecord)?;
        let ttl = token_record_ttl(record);
        match self
            .store()
            .put(
                &personal_token_record_name(token_id),
                Bytes::from(value),
                None,
                ttl,
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.code() == ErrorCode::Conflict => Ok(()),
            Err(e) => Err(AuthError::Store(e)),
        }
    }

    /// The personal tokens of `caller`'s account, newest first.
    pub async fn list_personal_tokens(
        &self,
        caller: &Principal,
    ) -> Result<Vec<PersonalTokenInfo>, AuthError> {
        let row = self.own_account(caller).await?;
        let db = self.accounts()?.db.clone();
        let rows: Vec<(String, String, String, i64, i64)> = draughts_store::sqlx::query_as(
            "SELECT token_id, label, scopes, created_at_ms, expires_at_ms FROM auth_personal_tokens WHERE player_id = $1 ORDER BY created_at_ms DESC, token_id",
        )
        .bind(row.player_id)
        .fetch_all(db.pool())
        .await
        .map_err(db_error)?;
        let mut tokens = Vec::with_capacity(rows.len());
        for (token_id, label, scopes, created, expires) in rows {
            let last_used_at_ms = match self.store().get(&personal_token_use_name(&token_id)).await
            {
                Ok(Some((bytes, _))) => std::str::from_utf8(&bytes)
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(0),
                _ => 0,
            };
            tokens.push(PersonalTokenInfo {
                token_id,
                label,
                scopes: scopes
                    .split(',')
                    .filter_map(|s| s.parse::<Scope>().ok())
                    .collect(),
                created_at_ms: u64::try_from(created).unwrap_or(0),
                expires_at_ms: u64::try_from(expires).unwrap_or(0),
                last_used_at_ms,
            });
        }
        Ok(tokens)
    }

    /// Revokes one of `caller`'s personal tokens; false when it has none with that id.
    pub async fn revoke_personal_token(
        &self,
        caller: &Principal,
        token_id: &str,
    ) -> Result<bool, AuthError> {
        if caller.kind != PrincipalKind::Account {
            return Err(AuthError::NotAnAccount);
        }
        let token_id = token_id.trim();
        let token_id = if token_id.starts_with(PERSONAL_TOKEN_PREFIX) {
            api_key_id(token_id)
        } else {
            token_id.to_owned()
        };
        let db = self.accounts()?.db.clone();
        let removed = draughts_store::sqlx::query(
            "DELETE FROM auth_personal_tokens WHERE token_id = $1 AND player_id = $2",
        )
        .bind(token_id.clone())
        .bind(caller.player_id.clone())
        .execute(db.pool())
        .await
        .map_err(db_error)?
        .rows_affected()
            > 0;
        if removed {
            self.store()
                .delete(&personal_token_record_name(&token_id))
                .await
                .map_err(AuthError::Store)?;
            let _ = self
                .store()
                .delete(&personal_token_use_name(&token_id))
                .await;
            tracing::info!(
                token_id,
                player_id = caller.player_id,
                "personal token revoked"
            );
        }
        Ok(removed)
    }

    /// Writes the lookup record of every live personal token that the live store lacks (after a
    /// restart on the in-memory store, or a Redis that lost its data).
    async fn restore_personal_tokens(&self) -> Result<(), StoreError> {
        let Ok(backend) = self.accounts() else {
            return Ok(());
        };
        let db = backend.db.clone();
        let mut after = String::new();
        let mut restored = 0usize;
        loop {
            // The tokens of live accounts with their names, a page at a time (one query a page).
            let rows: Vec<(String, String, String, String, i64, String)> =
                draughts_store::sqlx::query_as(
                    "SELECT t.token_id, t.player_id, t.token_hash, t.scopes, t.expires_at_ms, a.display_name \
                     FROM auth_personal_tokens t JOIN auth_accounts a ON a.player_id = t.player_id \
                     WHERE t.token_id > $1 AND a.deleted_at_ms = 0 ORDER BY t.token_id LIMIT 500",
                )
                .bind(after.clone())
                .fetch_all(db.pool())
                .await?;
            let Some(last) = rows.last() else { break };
            after = last.0.clone();
            for (token_id, player_id, token_hash, scopes, expires, display_name) in rows {
                let expires_at_ms = u64::try_from(expires).unwrap_or(0);
                if expires_at_ms != 0 && expires_at_ms <= now_unix_ms() {
                    continue;
                }
                let record = PersonalTokenRecord {
                    v: 1,
                    token_hash,
                    player_id,
                    display_name,
                    scopes: scopes.split(',').map(str::to_owned).collect(),
                    expires_at_ms,
                };
                match self.put_token_record(&token_id, &record).await {
                    Ok(()) => restored += 1,
                    Err(AuthError::Store(e)) => return Err(e),
                    Err(e) => tracing::warn!(error = %e, "personal token not restored"),
                }
            }
        }
        if restored > 0 {
            tracing::debug!(restored, "personal tokens' lookup records checked");
        }
        Ok(())
    }
}

/// How long a personal token's record is kept: a day past the token's expiry (`None`: it never
/// expires, nor does its record).
fn token_record_ttl(record: &PersonalTokenRecord) -> Option<Duration> {
    (record.expires_at_ms != 0).then(|| {
        Duration::from_millis(record.expires_at_ms.saturating_sub(now_unix_ms()))
            + Duration::from_secs(24 * 3600)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refresh_token_shape() {
        let token = format!("rt_{}_{}", "a".repeat(32), "b".repeat(64));
        assert_eq!(
            parse_refresh_token(&token),
            Some(("a".repeat(32).as_str(), "b".repeat(64).as_str()))
        );
        for bad in [
            "",
            "rt_",
            &format!("rt_{}", "a".repeat(32)),
            &format!("rt_{}_{}", "A".repeat(32), "b".repeat(64)),
            &format!("xx_{}_{}", "a".repeat(32), "b".repeat(64)),
            &format!("rt_{}_{}", "a".repeat(31), "b".repeat(64)),
        ] {
            assert_eq!(parse_refresh_token(bad), None, "{bad}");
        }
    }
}
