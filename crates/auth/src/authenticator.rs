//! Credentials: guest tokens, identity-provider tokens, API keys, and the per-caller rate limits.
//! Plain async code over a [`LiveStore`]; no tonic types.
//!
//! # Stored data
//!
//! Every name below is built in this file only (`api_key_record_name`, `guest_link_name`,
//! `rate_counter_name`).
//!
//! | live store name | kind | contents |
//! |---|---|---|
//! | `auth:apikey:{key_id}` | versioned key, no TTL | [`ApiKeyRecord`] as JSON |
//! | `auth:guest-link:{guest_id}` | key, no TTL | the account a guest was linked to (`LinkGuest`), written once; the guest's token is refused from then on |
//! | `auth:rate:{bucket}:{window}` | rate counter (`hit`), 60 s | calls of `bucket` in minute `window` (Unix ms / 60000) |
//!
//! `key_id` is the first 16 hex digits of the key's SHA-256; the record holds the whole hash, never the
//! key. Buckets: `guest:…` / `player:…` (the player id), `apikey:{key_id}` (per key, not per owner), and
//! `addr:{ip}` for anonymous calls.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use draughts_proto::contract::linked;
use draughts_proto::ids::PlayerId;
use draughts_runtime::ConfigError;
use draughts_store::{ErrorCode, LiveStore, now_unix_ms};
use jsonwebtoken::errors::ErrorKind as JwtErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::config::{AuthConfig, GUEST_ISSUER};
use super::identity::Identities;
use super::layer::AuthLayer;
use super::limits::{CallKind, FallbackLimiter};
use super::signing::SigningKeys;
use super::{AuthError, Principal, PrincipalKind, Scope, Scopes};

/// The rate-limit window.
pub const RATE_WINDOW: Duration = Duration::from_secs(60);

/// Clock skew allowed on `exp` and `nbf`, in seconds.
const LEEWAY_SECS: u64 = 30;

/// What an account may do: play, and ask for analysis.
pub const ACCOUNT_SCOPES: Scopes = Scopes::PLAY.with(Scope::Analysis);

/// Every API key starts with this.
pub const API_KEY_PREFIX: &str = "dk_";

/// Random bytes in an API key (shown as twice as many hex digits).
const API_KEY_RANDOM_BYTES: usize = 32;

/// Longest API key owner, in bytes.
const MAX_OWNER_BYTES: usize = 64;

/// Longest identity-provider subject accepted, in bytes.
const MAX_SUBJECT_BYTES: usize = 128;

/// The owner (and display name) of the bootstrap admin key.
const BOOTSTRAP_OWNER: &str = "admin";

/// How long a replica trusts its last look at a retirement mark (a guest linked to an account, an
/// account's session ended): such a credential stops working on every replica within this long (at
/// once on the replica that retired it), for one read per credential per replica per this long.
const RETIRED_RECHECK: Duration = Duration::from_secs(10);

/// Retirement marks a replica remembers before it starts again from empty.
const RETIRED_CACHE_ENTRIES: usize = 50_000;

/// Every personal token (an account's own API token) starts with this.
pub const PERSONAL_TOKEN_PREFIX: &str = "dp_";

/// The stored link of a guest to an account, under `auth:guest-link:{guest_id}` (no TTL). JSON.
#[derive(Debug, Serialize, Deserialize)]
struct GuestLink {
    v: u32,
    player_id: String,
    at_ms: u64,
}

/// The stored form of an API key, under `api_key_record_name`. JSON; readers ignore unknown fields
/// and unknown scope names.
#[derive(Debug, Serialize, Deserialize)]
pub struct ApiKeyRecord {
    /// Schema version: 1.
    pub v: u32,
    /// SHA-256 of the whole key, lowercase hex.
    pub key_hash: String,
    /// The owner given at creation (the principal is `key:{owner}`).
    pub owner: String,
    /// Scope names (`play`, `analysis`, `admin`).
    pub scopes: Vec<String>,
    /// Calls per minute; 0 = the configured default for API keys.
    #[serde(default)]
    pub rate_limit_per_minute: u32,
    /// Creation time, Unix epoch milliseconds.
    #[serde(default)]
    pub created_at_ms: u64,
    /// When the key stops working, Unix epoch milliseconds; 0 = never (records written before keys
    /// could expire have none).
    #[serde(default)]
    pub expires_at_ms: u64,
}

/// The longest lifetime an API key can be given.
pub const MAX_API_KEY_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// The live-store name of the record of the API key with id `key_id`.
fn api_key_record_name(key_id: &str) -> String {
    format!("auth:apikey:{key_id}")
}

/// The live-store name of the link of guest `guest_id` to an account.
fn guest_link_name(guest_id: &str) -> String {
    format!("auth:guest-link:{guest_id}")
}

/// The live-store name of the mark of an ended account session (kept while its access tokens live).
pub(crate) fn session_ended_name(session: &str) -> String {
    format!("auth:session-ended:{session}")
}

/// The live-store name of the record of the personal token with id `token_id`.
pub(crate) fn personal_token_record_name(token_id: &str) -> String {
    format!("auth:ptoken:{token_id}")
}

/// The live-store name of a personal token's last use (Unix ms, decimal).
pub(crate) fn personal_token_use_name(token_id: &str) -> String {
    format!("auth:ptoken-used:{token_id}")
}

/// The live-store name of the rate counter of `bucket` in minute `window`.
fn rate_counter_name(bucket: &str, window: u64) -> String {
    format!("auth:rate:{bucket}:{window}")
}

/// The public id of an API key: the first 16 hex digits of its SHA-256 (not secret).
pub fn api_key_id(key: &str) -> String {
    let mut id = hex::encode(Sha256::digest(key.as_bytes()));
    id.truncate(16);
    id
}

/// The claims of this platform's own tokens: guest tokens and accounts' access tokens.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct GuestClaims {
    pub(crate) iss: String,
    pub(crate) aud: String,
    /// `guest:<32 hex>`, or `user:<id>` for an account's access token.
    pub(crate) sub: String,
    /// The display name.
    pub(crate) name: String,
    /// Issued at, Unix seconds.
    pub(crate) iat: u64,
    /// Expires at, Unix seconds.
    pub(crate) exp: u64,
    /// The account session of an access token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) sid: Option<String>,
}

/// The claims read from an identity provider's token (others are ignored; `exp`, `nbf`, `iss`, `aud`
/// are checked by the validation).
#[derive(Debug, Deserialize)]
struct PlayerClaims {
    sub: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    preferred_username: Option<String>,
}

/// Only the issuer, read before verification to pick the key.
#[derive(Debug, Deserialize)]
struct IssuerPeek {
    #[serde(default)]
    iss: Option<String>,
}

/// Where a caller stands in its rate-limit window after a call, as the `x-ratelimit-*` response
/// metadata tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateState {
    /// Calls allowed per window (a minute).
    pub limit: u32,
    /// Calls left in this window.
    pub remaining: u32,
    /// Seconds until the window ends and the count starts again (at least 1).
    pub reset_secs: u64,
}

impl RateState {
    /// Adds `x-ratelimit-limit`, `x-ratelimit-remaining` and `x-ratelimit-reset` to `headers`.
    pub fn write(&self, headers: &mut http::HeaderMap) {
        headers.insert("x-ratelimit-limit", self.limit.into());
        headers.insert("x-ratelimit-remaining", self.remaining.into());
        headers.insert("x-ratelimit-reset", self.reset_secs.into());
    }
}

/// A call refused by the layer, and where the bucket it was counted against stands (`None`: it was
/// not counted against any bucket).
#[derive(Debug)]
pub(crate) struct Refused {
    pub(crate) error: AuthError,
    pub(crate) rate: Option<RateState>,
}

impl From<AuthError> for Refused {
    /// A refusal of a call that was not counted.
    fn from(error: AuthError) -> Refused {
        Refused { error, rate: None }
    }
}

/// A new guest identity and its token.
#[derive(Clone, Debug)]
pub struct IssuedGuest {
    /// The guest token (send as `authorization: Bearer <token>`).
    pub token: String,
    pub principal: Principal,
    /// When the token stops being accepted, Unix epoch milliseconds.
    pub expires_at_ms: u64,
}

/// An authenticated caller with what the rate limiter needs.
#[derive(Clone, Debug)]
pub(crate) struct Caller {
    pub(crate) principal: Principal,
    pub(crate) rate_bucket: String,
    pub(crate) rate_limit_per_minute: u32,
    /// The account session an access token belongs to.
    pub(crate) session: Option<String>,
}

/// Checks credentials, issues guest tokens, manages API keys and counts calls. Cheap to clone (one
/// `Arc`); every replica given the same configuration and live store behaves the same.
#[derive(Clone)]
pub struct Authenticator {
    inner: Arc<Inner>,
}

struct Inner {
    config: AuthConfig,
    store: Arc<dyn LiveStore>,
    /// The keys of this platform's own tokens (guests' and accounts').
    keys: SigningKeys,
    /// Validation of this platform's own tokens.
    guest_validation: Validation,
    /// The identity provider's key and validation, if configured.
    player_key: Option<(DecodingKey, Validation)>,
    /// SHA-256 of the bootstrap admin key, if configured.
    admin_key_hash: Option<[u8; 32]>,
    /// Who this server has issued or seen.
    identities: Identities,
    /// Counts reads while the live store cannot (see [`crate::limits`]).
    fallback: FallbackLimiter,
    /// Live-store name of a retirement mark (a guest's link, a session's end) -> (present, when this
    /// replica last looked).
    retired: Mutex<HashMap<String, (bool, Instant)>>,
    /// Accounts, once a database is attached ([`Authenticator::attach_accounts`]).
    pub(crate) accounts: std::sync::OnceLock<crate::accounts::AccountsBackend>,
    /// Personal token id -> when this replica last recorded its use.
    pub(crate) token_uses: Mutex<HashMap<String, Instant>>,
    /// Bots' own limits as this replica last read them ([`crate::bot_limits`]).
    bot_limits: crate::bot_limits::Cache,
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authenticator")
            .field("config", &self.inner.config)
            .field("store", &self.inner.store)
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// Validates `config` and builds the keys.
    pub fn new(
        config: AuthConfig,
        store: Arc<dyn LiveStore>,
    ) -> Result<Authenticator, ConfigError> {
        config.validate()?;
        let keys = SigningKeys::new(&config.token_secret, &config.token_secret_previous)
            .map_err(|_| ConfigError("token-secret is not a usable HS256 secret".into()))?;
        let mut guest_validation = Validation::new(Algorithm::HS256);
        guest_validation.leeway = LEEWAY_SECS;
        guest_validation.set_issuer(&[GUEST_ISSUER]);
        guest_validation.set_audience(&[GUEST_ISSUER]);
        guest_validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);

        let player_key = config.idp_key()?.map(|(key, algorithm)| {
            let mut validation = Validation::new(algorithm);
            validation.leeway = LEEWAY_SECS;
            validation.validate_nbf = true;
            let mut required = vec!["exp", "sub"];
            if let Some(issuer) = &config.jwt_issuer {
                validation.set_issuer(&[issuer]);
                required.push("iss");
            }
            match &config.jwt_audience {
                Some(audience) => {
                    validation.set_audience(&[audience]);
                    required.push("aud");
                }
                None => validation.validate_aud = false,
            }
            validation.set_required_spec_claims(&required);
            (key, validation)
        });
        let admin_key_hash = config
            .admin_api_key
            .as_deref()
            .map(|key| Sha256::digest(key.as_bytes()).into());
        Ok(Authenticator {
            inner: Arc::new(Inner {
                config,
                identities: Identities::new(store.clone()),
                store,
                keys,
                guest_validation,
                player_key,
                admin_key_hash,
                fallback: FallbackLimiter::default(),
                retired: Mutex::default(),
                accounts: std::sync::OnceLock::new(),
                token_uses: Mutex::default(),
                bot_limits: crate::bot_limits::Cache::default(),
            }),
        })
    }

    /// The identity registry (who exists, and their display names).
    pub fn identities(&self) -> &Identities {
        &self.inner.identities
    }

    /// How long a guest identity lives: its token's lifetime plus the allowed clock skew.
    fn guest_ttl(&self) -> Duration {
        Duration::from_secs(self.inner.config.guest_token_ttl_secs + LEEWAY_SECS)
    }

    /// The configuration in use.
    pub fn config(&self) -> &AuthConfig {
        &self.inner.config
    }

    /// The tower layer that checks every request of a server with this authenticator.
    pub fn layer(&self) -> AuthLayer {
        AuthLayer::new(self.clone())
    }

    /// Checks the `authorization` metadata: `Ok(None)` without it (an anonymous call), the caller for
    /// valid credentials, an error otherwise. Does not count the call (the layer does).
    pub async fn authenticate(
        &self,
        headers: &http::HeaderMap,
    ) -> Result<Option<Principal>, AuthError> {
        Ok(self.caller(headers).await?.map(|caller| caller.principal))
    }

    pub(crate) async fn caller(
        &self,
        headers: &http::HeaderMap,
    ) -> Result<Option<Caller>, AuthError> {
        let Some(token) = bearer_token(headers)? else {
            return Ok(None);
        };
        let mut caller =
            if token.starts_with(API_KEY_PREFIX) || token.starts_with(PERSONAL_TOKEN_PREFIX) {
                self.api_key_caller(token).await?
            } else if token.bytes().filter(|b| *b == b'.').count() == 2 {
                self.token_caller(token)?
            } else {
                return Err(AuthError::InvalidToken("neither a JWT nor an API key"));
            };
        if caller.principal.kind == PrincipalKind::Guest
            && self
                .is_retired(&guest_link_name(&caller.principal.player_id))
                .await
        {
            return Err(AuthError::GuestLinked);
        }
        if let Some(session) = &caller.session
            && self.is_retired(&session_ended_name(session)).await
        {
            return Err(AuthError::SessionEnded);
        }
        // An account made a bot (`become_bot`): every credential of it carries the mark.
        if caller.principal.kind == PrincipalKind::Account
            && self
                .is_retired(&bot_account_name(&caller.principal.player_id))
                .await
        {
            caller.principal.scopes = caller.principal.scopes.with(Scope::Bot);
        }
        // A bot with its own rate (`Auth.SetBotLimits`): all its credentials count together against it.
        if caller.principal.is_bot()
            && let Some(limits) = self
                .inner
                .bot_limits
                .get(&*self.inner.store, &caller.principal.player_id)
                .await
            && limits.calls_per_minute > 0
        {
            caller.rate_limit_per_minute = limits.calls_per_minute;
            caller.rate_bucket = format!("bot:{}", caller.principal.player_id);
        }
        // Known from now on as the verified credential names it (a failed write only delays that).
        // Accounts are recorded by the account calls themselves (a name changed by UpdateAccount must
        // not be written back by a call with an older token).
        if caller.principal.kind != PrincipalKind::Account
            && let Err(e) = self
                .inner
                .identities
                .seen(&caller.principal, self.guest_ttl())
                .await
        {
            tracing::warn!(
                error = &e as &(dyn std::error::Error + 'static),
                "identity registry unavailable; caller not recorded"
            );
        }
        Ok(Some(caller))
    }

    /// Whether the retirement mark `name` (a guest's link to an account, a session's end) exists: this
    /// replica's answer of the last [`RETIRED_RECHECK`], else the store's. A mark once seen is
    /// remembered. A store that cannot answer lets the call through (the credential is still a valid
    /// signature of ours, and lives minutes for an account session).
    pub(crate) async fn is_retired(&self, name: &str) -> bool {
        let cached = self
            .inner
            .retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .copied();
        match cached {
            Some((true, _)) => return true,
            Some((false, at)) if at.elapsed() < RETIRED_RECHECK => return false,
            _ => {}
        }
        match self.inner.store.get(name).await {
            Ok(found) => {
                let retired = found.is_some();
                self.remember_retired(name, retired);
                retired
            }
            Err(e) => {
                tracing::warn!(
                    error = &e as &(dyn std::error::Error + 'static),
                    "retirement marks unavailable; credential accepted unchecked"
                );
                false
            }
        }
    }

    /// Makes the account `principal` a BOT for good (`Auth.BecomeBot`; the caller checked the rule on
    /// its games): the mark `bot-account:{player_id}` (a mark like a retirement's: written once, never
    /// removed, read through the same cache) and the identity registry's bot mark.
    pub async fn become_bot(&self, principal: &Principal) -> Result<(), AuthError> {
        if principal.kind != PrincipalKind::Account {
            return Err(AuthError::NotAnAccount);
        }
        let name = bot_account_name(&principal.player_id);
        match self
            .inner
            .store
            .put(&name, Bytes::from_static(b"1"), None, None)
            .await
        {
            Ok(_) => {}
            // Already a bot.
            Err(e) if e.code() == ErrorCode::Conflict => {}
            Err(e) => return Err(AuthError::Store(e)),
        }
        self.remember_retired(&name, true);
        if let Ok(id) = PlayerId::parse(&principal.player_id) {
            self.inner
                .identities
                .mark_bot(&id)
                .await
                .map_err(AuthError::Store)?;
        }
        tracing::info!(player_id = %principal.player_id, "account became a bot");
        Ok(())
    }

    /// Sets a BOT's own limits (`Auth.SetBotLimits`; the caller checked the admin scope): refused
    /// (FAILED_PRECONDITION) for a player the identity registry does not know as a bot. They hold at
    /// once on this replica, within [`crate::bot_limits::RECHECK`] on the others.
    pub async fn set_bot_limits(
        &self,
        player_id: &PlayerId,
        max_games: u32,
        calls_per_minute: u32,
    ) -> Result<crate::BotLimits, AuthError> {
        let limits = crate::BotLimits {
            max_games,
            calls_per_minute,
            updated_at_ms: now_unix_ms(),
        };
        limits.check()?;
        let bot = self
            .inner
            .identities
            .lookup(player_id)
            .await
            .map_err(AuthError::Store)?
            .is_some_and(|identity| identity.bot);
        if !bot {
            return Err(AuthError::Refused(format!(
                "{player_id} is not a bot (an API key with the bot scope, or an account made a bot)"
            )));
        }
        crate::bot_limits::write(&*self.inner.store, player_id.as_str(), limits).await?;
        self.inner
            .bot_limits
            .remember(player_id.as_str(), Some(limits));
        Ok(limits)
    }

    /// A BOT's own limits as stored (zeros where the defaults apply).
    pub async fn bot_limits(&self, player_id: &PlayerId) -> Result<crate::BotLimits, AuthError> {
        Ok(
            crate::bot_limits::read(&*self.inner.store, player_id.as_str())
                .await
                .map_err(AuthError::Store)?
                .unwrap_or_default(),
        )
    }

    pub(crate) fn remember_retired(&self, name: &str, retired: bool) {
        let mut marks = self.inner.retired.lock().unwrap_or_else(|e| e.into_inner());
        if marks.len() >= RETIRED_CACHE_ENTRIES {
            marks.clear();
        }
        marks.insert(name.to_owned(), (retired, Instant::now()));
    }

    pub(crate) fn inner_accounts(&self) -> &std::sync::OnceLock<crate::accounts::AccountsBackend> {
        &self.inner.accounts
    }

    /// The keys that sign and verify this platform's tokens.
    pub(crate) fn keys(&self) -> &SigningKeys {
        &self.inner.keys
    }

    /// The live store.
    pub(crate) fn store(&self) -> &Arc<dyn LiveStore> {
        &self.inner.store
    }

    /// Counts one call of `bucket` in the current minute: where the bucket stands after it, or
    /// RESOURCE_EXHAUSTED past `limit` (with the bucket's state: no call left until the reset).
    ///
    /// If the live store cannot count, `kind` decides (see [`crate::limits`]): a write is refused
    /// with UNAVAILABLE (not counted: no state), a read is counted by this replica's fallback limiter,
    /// and the state is that limiter's (its limit a quarter of `limit`).
    pub(crate) async fn count_call(
        &self,
        bucket: &str,
        limit: u32,
        kind: CallKind,
    ) -> Result<RateState, Refused> {
        let window_ms = RATE_WINDOW.as_millis() as u64;
        let now_ms = now_unix_ms();
        let window = now_ms / window_ms;
        let window_end_ms = (window + 1) * window_ms;
        let retry_after_secs = (window_end_ms - now_ms).div_ceil(1000).max(1);
        let state = |limit: u32, remaining: u32| RateState {
            limit,
            remaining,
            reset_secs: retry_after_secs,
        };
        let count = match self
            .inner
            .store
            .hit(&rate_counter_name(bucket, window), RATE_WINDOW)
            .await
        {
            Ok(count) => count,
            Err(e) => {
                tracing::warn!(
                    error = &e as &(dyn std::error::Error + 'static),
                    ?kind,
                    "rate counter unavailable"
                );
                return match kind {
                    CallKind::Write => Err(Refused {
                        error: AuthError::LimiterUnavailable(e),
                        rate: None,
                    }),
                    CallKind::Read => {
                        let fallback = crate::limits::fallback_limit(limit);
                        match self
                            .inner
                            .fallback
                            .hit(bucket, limit, window, retry_after_secs)
                        {
                            Ok(left) => Ok(state(fallback, left)),
                            Err(error) => Err(Refused {
                                error,
                                rate: Some(state(fallback, 0)),
                            }),
                        }
                    }
                };
            }
        };
        if count > u64::from(limit) {
            return Err(Refused {
                error: AuthError::RateLimited { retry_after_secs },
                rate: Some(state(limit, 0)),
            });
        }
        Ok(state(limit, u64::from(limit).saturating_sub(count) as u32))
    }

    /// The rate limit of guests.
    pub(crate) fn guest_limit(&self) -> u32 {
        self.inner.config.rate_limit_guest_per_minute
    }

    /// The rate limit of players (accounts and identity-provider players).
    pub(crate) fn player_limit(&self) -> u32 {
        self.inner.config.rate_limit_player_per_minute
    }

    /// The rate limit of anonymous calls.
    pub(crate) fn anonymous_limit(&self) -> u32 {
        self.inner.config.rate_limit_anonymous_per_minute
    }

    /// Whether anonymous callers' addresses come from `x-forwarded-for`.
    pub(crate) fn trust_forwarded_for(&self) -> bool {
        self.inner.config.trust_forwarded_for
    }

    /// Links the guest of `guest_token` to `caller`'s account, once (see `Auth.LinkGuest`), and appends
    /// the link to [`linked::STREAM`] for games and ratings to carry the guest's records over. Returns
    /// the guest id and whether this call made the link. A repeat by the same account appends again
    /// (the consumers are idempotent), so a crash between the record and the append loses nothing.
    pub async fn link_guest(
        &self,
        caller: &Principal,
        guest_token: &str,
    ) -> Result<(String, bool), AuthError> {
        if !matches!(caller.kind, PrincipalKind::Player | PrincipalKind::Account) {
            return Err(AuthError::NotAnAccount);
        }
        let claims: GuestClaims = self
            .inner
            .keys
            .verify(guest_token.trim(), &self.inner.guest_validation)
            .map_err(jwt_error)?;
        let guest = PlayerId::parse(&claims.sub)
            .ok()
            .filter(PlayerId::is_guest)
            .ok_or(AuthError::InvalidToken("malformed subject"))?;
        let linked_now = self
            .link_guest_id(&guest, &caller.player_id, &caller.display_name)
            .await?;
        Ok((guest.into_string(), linked_now))
    }

    /// Links `guest` to the account `account` (see [`Authenticator::link_guest`]): records the link
    /// once and appends it to [`linked::STREAM`]. Returns whether this call made the link.
    pub(crate) async fn link_guest_id(
        &self,
        guest: &PlayerId,
        account: &str,
        account_name: &str,
    ) -> Result<bool, AuthError> {
        let account_id = PlayerId::parse(account)
            .map_err(|e| AuthError::InvalidArgument(format!("account: {e}")))?;
        let name = guest_link_name(guest.as_str());
        let record = serde_json::to_vec(&GuestLink {
            v: 1,
            player_id: account.to_owned(),
            at_ms: now_unix_ms(),
        })
        .unwrap_or_default();
        let linked_now = match self
            .inner
            .store
            .put(&name, Bytes::from(record), None, None)
            .await
        {
            Ok(_) => true,
            Err(draughts_store::StoreError::Conflict { .. }) => {
                let existing = self
                    .inner
                    .store
                    .get(&name)
                    .await
                    .map_err(AuthError::Store)?
                    .and_then(|(bytes, _)| serde_json::from_slice::<GuestLink>(&bytes).ok());
                match existing {
                    Some(link) if link.player_id == account => false,
                    _ => return Err(AuthError::AlreadyLinked),
                }
            }
            Err(e) => return Err(AuthError::Store(e)),
        };
        let event = linked::LinkedV1 {
            guest_id: guest.clone(),
            player_id: account_id,
            player_name: account_name.to_owned(),
            at_ms: now_unix_ms(),
        };
        self.inner
            .store
            .append(linked::STREAM, Bytes::from(linked::encode(&event)))
            .await
            .map_err(AuthError::Store)?;
        self.remember_retired(&guest_link_name(guest.as_str()), true);
        tracing::info!(guest_id = %guest, player_id = %account, linked_now, "guest linked");
        Ok(linked_now)
    }

    /// Issues a guest ([`Authenticator::issue_guest`]) and records it in the identity registry, so that
    /// others can name it as an opponent. Fails (and issues nothing) when the registry cannot be written.
    pub async fn create_guest(&self, display_name: &str) -> Result<IssuedGuest, AuthError> {
        let guest = self.issue_guest(display_name)?;
        let id = PlayerId::parse(&guest.principal.player_id)
            .map_err(|_| AuthError::InvalidToken("malformed subject"))?;
        self.inner
            .identities
            .record(&id, &guest.principal.display_name, Some(self.guest_ttl()))
            .await
            .map_err(AuthError::Store)?;
        Ok(guest)
    }

    /// Issues a guest identity: a fresh `guest:<random>` id with scope PLAY and a token for it.
    /// `display_name` is trimmed; empty gives "Guest xxxx".
    pub fn issue_guest(&self, display_name: &str) -> Result<IssuedGuest, AuthError> {
        let id = random_hex(16);
        let display_name = match display_name.trim() {
            "" => format!("Guest {}", &id[..4]),
            name => checked_display_name(name)?.to_owned(),
        };
        let now_secs = now_unix_ms() / 1000;
        let exp = now_secs + self.inner.config.guest_token_ttl_secs;
        let claims = GuestClaims {
            iss: GUEST_ISSUER.to_owned(),
            aud: GUEST_ISSUER.to_owned(),
            sub: format!("guest:{id}"),
            name: display_name.clone(),
            iat: now_secs,
            exp,
            sid: None,
        };
        let token = self.inner.keys.sign(&claims)?;
        Ok(IssuedGuest {
            token,
            principal: guest_principal(claims.sub, display_name),
            expires_at_ms: exp * 1000,
        })
    }

    /// Creates an API key for `owner` with `scopes` (and its own calls-per-minute limit, `None` or 0 =
    /// the configured default) and returns it: `dk_` + 64 hex digits. Only its hash is stored; its id
    /// is [`api_key_id`].
    pub async fn create_api_key(
        &self,
        owner: &str,
        scopes: Scopes,
        rate_limit_per_minute: Option<u32>,
        lifetime: Option<Duration>,
    ) -> Result<(String, u64), AuthError> {
        check_owner(owner)?;
        if scopes.is_empty() {
            return Err(AuthError::InvalidArgument(
                "an API key needs at least one scope".into(),
            ));
        }
        let bot = scopes.has(Scope::Bot);
        if bot
            && (!scopes.has(Scope::Play) || scopes.has(Scope::Admin) || scopes.has(Scope::Service))
        {
            return Err(AuthError::InvalidArgument(
                "the bot scope goes with play, never with admin or service".into(),
            ));
        }
        let owner_id = PlayerId::parse(&format!("key:{owner}")).ok();
        // A bot is a bot for good (every later key of its owner carries the mark), and a person
        // stays a person: an owner who already holds keys without the mark may have played and been
        // rated as a person, so it cannot turn bot (as an account that has played cannot).
        if let Some(id) = &owner_id {
            let known = self
                .inner
                .identities
                .lookup(id)
                .await
                .map_err(AuthError::Store)?;
            match known.map(|identity| identity.bot) {
                Some(true) if !bot => {
                    return Err(AuthError::Refused(format!(
                        "'{owner}' is a bot: its keys need the bot scope"
                    )));
                }
                Some(false) if bot => {
                    return Err(AuthError::Refused(format!(
                        "'{owner}' already holds keys as a person: a bot needs an owner name of its own"
                    )));
                }
                _ => {}
            }
        }
        if lifetime.is_some_and(|t| t.is_zero() || t > MAX_API_KEY_LIFETIME) {
            return Err(AuthError::InvalidArgument(format!(
                "expires_in_secs must be 0 (never) or at most {}",
                MAX_API_KEY_LIFETIME.as_secs()
            )));
        }
        let created_at_ms = now_unix_ms();
        let expires_at_ms = lifetime.map_or(0, |t| {
            created_at_ms.saturating_add(u64::try_from(t.as_millis()).unwrap_or(u64::MAX))
        });
        let mut attempts = 0;
        loop {
            let key = format!("{API_KEY_PREFIX}{}", random_hex(API_KEY_RANDOM_BYTES));
            let record = ApiKeyRecord {
                v: 1,
                key_hash: hex::encode(Sha256::digest(key.as_bytes())),
                owner: owner.to_owned(),
                scopes: scopes.iter().map(|s| s.name().to_owned()).collect(),
                rate_limit_per_minute: rate_limit_per_minute.unwrap_or(0),
                created_at_ms,
                expires_at_ms,
            };
            let value = serde_json::to_vec(&record).map_err(AuthError::CorruptRecord)?;
            let name = api_key_record_name(&api_key_id(&key));
            // An expiring key's record is removed a day after it (until then its use is answered
            // "expired", not "unknown").
            let record_ttl = lifetime.map(|t| t + Duration::from_secs(24 * 3600));
            match self
                .inner
                .store
                .put(&name, Bytes::from(value), None, record_ttl)
                .await
            {
                Ok(_) => {
                    tracing::info!(key_id = %api_key_id(&key), owner, %scopes, expires_at_ms, "API key created");
                    if let Some(id) = &owner_id {
                        let identities = &self.inner.identities;
                        let recorded = if bot {
                            identities.record_bot(id, owner).await
                        } else {
                            identities.record(id, owner, None).await
                        };
                        recorded.map_err(AuthError::Store)?;
                    }
                    return Ok((key, expires_at_ms));
                }
                // A 64-bit id collision: astronomically rare, but a new key costs nothing.
                Err(e) if e.code() == ErrorCode::Conflict && attempts < 3 => attempts += 1,
                Err(e) => return Err(AuthError::Store(e)),
            }
        }
    }

    /// Revokes the API key named by its id or by the key itself; returns whether one was revoked now.
    pub async fn revoke_api_key(&self, key_or_id: &str) -> Result<bool, AuthError> {
        let key_or_id = key_or_id.trim();
        let key_id = if key_or_id.starts_with(API_KEY_PREFIX) {
            if self.is_bootstrap_key(key_or_id) {
                return Err(AuthError::InvalidArgument(
                    "the bootstrap admin key is configuration: remove admin-api-key to revoke it"
                        .into(),
                ));
            }
            api_key_id(key_or_id)
        } else if key_or_id.len() == 16 && is_lower_hex(key_or_id) {
            key_or_id.to_owned()
        } else {
            return Err(AuthError::InvalidArgument(
                "key_id must be an API key id (16 hex digits) or an API key".into(),
            ));
        };
        let revoked = self
            .inner
            .store
            .delete(&api_key_record_name(&key_id))
            .await
            .map_err(AuthError::Store)?;
        if revoked {
            tracing::info!(key_id, "API key revoked");
        }
        Ok(revoked)
    }

    fn is_bootstrap_key(&self, key: &str) -> bool {
        self.inner.admin_key_hash.is_some_and(|expected| {
            let hash: [u8; 32] = Sha256::digest(key.as_bytes()).into();
            constant_time_eq(&hash, &expected)
        })
    }

    async fn api_key_caller(&self, key: &str) -> Result<Caller, AuthError> {
        if self.is_bootstrap_key(key) {
            return Ok(Caller {
                principal: Principal {
                    player_id: format!("key:{BOOTSTRAP_OWNER}"),
                    display_name: BOOTSTRAP_OWNER.to_owned(),
                    kind: PrincipalKind::ApiKey,
                    scopes: Scopes::ALL,
                },
                rate_bucket: format!("apikey:{BOOTSTRAP_OWNER}"),
                rate_limit_per_minute: self.inner.config.rate_limit_api_key_per_minute,
                session: None,
            });
        }
        let personal = key.starts_with(PERSONAL_TOKEN_PREFIX);
        let body = &key[API_KEY_PREFIX.len()..];
        if body.len() != 2 * API_KEY_RANDOM_BYTES || !is_lower_hex(body) {
            return Err(AuthError::InvalidToken(if personal {
                "malformed personal token"
            } else {
                "malformed API key"
            }));
        }
        let key_id = api_key_id(key);
        if personal {
            return self.personal_token_caller(key, &key_id).await;
        }
        let Some((value, _version)) = self
            .inner
            .store
            .get(&api_key_record_name(&key_id))
            .await
            .map_err(AuthError::Store)?
        else {
            return Err(AuthError::UnknownApiKey);
        };
        let record: ApiKeyRecord =
            serde_json::from_slice(&value).map_err(AuthError::CorruptRecord)?;
        let hash = Sha256::digest(key.as_bytes());
        let stored = hex::decode(&record.key_hash).unwrap_or_default();
        if !constant_time_eq(&hash, &stored) {
            // Same id, different key: a forged key built to collide with the id.
            return Err(AuthError::UnknownApiKey);
        }
        if record.expires_at_ms != 0 && now_unix_ms() >= record.expires_at_ms {
            return Err(AuthError::Expired);
        }
        let limit = match record.rate_limit_per_minute {
            0 => self.inner.config.rate_limit_api_key_per_minute,
            own => own,
        };
        Ok(Caller {
            principal: Principal {
                player_id: format!("key:{}", record.owner),
                display_name: record.owner,
                kind: PrincipalKind::ApiKey,
                scopes: record
                    .scopes
                    .iter()
                    .filter_map(|name| name.parse::<Scope>().ok())
                    .collect(),
            },
            rate_bucket: format!("apikey:{key_id}"),
            rate_limit_per_minute: limit,
            session: None,
        })
    }

    /// The account behind a personal token ("dp_..."): its record in the live store, checked against
    /// the whole token's hash; the call counts against the account's own limit.
    async fn personal_token_caller(
        &self,
        token: &str,
        token_id: &str,
    ) -> Result<Caller, AuthError> {
        let Some((value, _)) = self
            .inner
            .store
            .get(&personal_token_record_name(token_id))
            .await
            .map_err(AuthError::Store)?
        else {
            return Err(AuthError::UnknownPersonalToken);
        };
        let record: crate::accounts::PersonalTokenRecord =
            serde_json::from_slice(&value).map_err(AuthError::CorruptRecord)?;
        let hash = Sha256::digest(token.as_bytes());
        let stored = hex::decode(&record.token_hash).unwrap_or_default();
        if !constant_time_eq(&hash, &stored) {
            return Err(AuthError::UnknownPersonalToken);
        }
        let now = now_unix_ms();
        if record.expires_at_ms != 0 && now >= record.expires_at_ms {
            return Err(AuthError::Expired);
        }
        self.note_token_use(token_id, now).await;
        Ok(Caller {
            rate_bucket: record.player_id.clone(),
            principal: Principal {
                player_id: record.player_id,
                display_name: record.display_name,
                kind: PrincipalKind::Account,
                // Never more than an account has, whatever the record says.
                scopes: record
                    .scopes
                    .iter()
                    .filter_map(|name| name.parse::<Scope>().ok())
                    .filter(|scope| ACCOUNT_SCOPES.has(*scope))
                    .collect(),
            },
            rate_limit_per_minute: self.inner.config.rate_limit_player_per_minute,
            session: None,
        })
    }

    /// Records a personal token's use, at most once a minute per replica (best effort).
    async fn note_token_use(&self, token_id: &str, now_ms: u64) {
        {
            let mut uses = self
                .inner
                .token_uses
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if uses
                .get(token_id)
                .is_some_and(|at| at.elapsed() < Duration::from_secs(60))
            {
                return;
            }
            if uses.len() >= RETIRED_CACHE_ENTRIES {
                uses.clear();
            }
            uses.insert(token_id.to_owned(), Instant::now());
        }
        let name = personal_token_use_name(token_id);
        let written = match self.inner.store.get(&name).await {
            Ok(found) => {
                self.inner
                    .store
                    .put(
                        &name,
                        Bytes::from(now_ms.to_string()),
                        found.map(|(_, v)| v),
                        Some(Duration::from_secs(400 * 24 * 3600)),
                    )
                    .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = written
            && e.code() != ErrorCode::Conflict
        {
            tracing::debug!(error = %e, "personal token use not recorded");
        }
    }

    fn token_caller(&self, token: &str) -> Result<Caller, AuthError> {
        let peek: IssuerPeek = jsonwebtoken::dangerous::insecure_decode_claims(token)
            .map_err(|_| AuthError::InvalidToken("malformed token"))?;
        if peek.iss.as_deref() == Some(GUEST_ISSUER) {
            let claims: GuestClaims = self
                .inner
                .keys
                .verify(token, &self.inner.guest_validation)
                .map_err(jwt_error)?;
            if let Some(account) = claims.sub.strip_prefix("user:") {
                let session = claims
                    .sid
                    .filter(|sid| sid.len() == 32 && is_lower_hex(sid))
                    .ok_or(AuthError::InvalidToken("malformed session"))?;
                if account.len() != 20 || !is_lower_hex(account) {
                    return Err(AuthError::InvalidToken("malformed subject"));
                }
                return Ok(Caller {
                    rate_bucket: claims.sub.clone(),
                    principal: Principal {
                        player_id: claims.sub,
                        display_name: claims.name,
                        kind: PrincipalKind::Account,
                        scopes: ACCOUNT_SCOPES,
                    },
                    rate_limit_per_minute: self.inner.config.rate_limit_player_per_minute,
                    session: Some(session),
                });
            }
            let is_guest_id = claims
                .sub
                .strip_prefix("guest:")
                .is_some_and(|id| id.len() == 32 && is_lower_hex(id));
            if !is_guest_id || claims.sid.is_some() {
                return Err(AuthError::InvalidToken("malformed subject"));
            }
            return Ok(Caller {
                rate_bucket: claims.sub.clone(),
                principal: guest_principal(claims.sub, claims.name),
                rate_limit_per_minute: self.inner.config.rate_limit_guest_per_minute,
                session: None,
            });
        }
        let Some((key, validation)) = &self.inner.player_key else {
            return Err(AuthError::InvalidToken(
                "this server accepts no identity-provider tokens",
            ));
        };
        let claims: PlayerClaims = jsonwebtoken::decode(token, key, validation)
            .map_err(jwt_error)?
            .claims;
        let subject_ok = !claims.sub.is_empty()
            && claims.sub.len() <= MAX_SUBJECT_BYTES
            && !claims.sub.chars().any(char::is_control);
        if !subject_ok {
            return Err(AuthError::InvalidToken("malformed subject"));
        }
        let display_name = [claims.name, claims.preferred_username]
            .into_iter()
            .flatten()
            .find_map(|name| checked_display_name(&name).ok().map(str::to_owned))
            .unwrap_or_else(|| claims.sub.clone());
        let player_id = format!("player:{}", claims.sub);
        // The one definition of a well-formed player id (printable, bounded).
        PlayerId::parse(&player_id).map_err(|_| AuthError::InvalidToken("malformed subject"))?;
        Ok(Caller {
            rate_bucket: player_id.clone(),
            principal: Principal {
                player_id,
                display_name,
                kind: PrincipalKind::Player,
                scopes: Scopes::PLAY.with(Scope::Analysis),
            },
            rate_limit_per_minute: self.inner.config.rate_limit_player_per_minute,
            session: None,
        })
    }
}

/// The live-store name of the mark that makes an account a BOT.
fn bot_account_name(player_id: &str) -> String {
    format!("bot-account:{player_id}")
}

fn guest_principal(player_id: String, display_name: String) -> Principal {
    Principal {
        player_id,
        display_name,
        kind: PrincipalKind::Guest,
        scopes: Scopes::PLAY,
    }
}

/// The credential of `authorization: Bearer <credential>`, `None` without the header.
fn bearer_token(headers: &http::HeaderMap) -> Result<Option<&str>, AuthError> {
    let mut values = headers.get_all(http::header::AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(AuthError::MalformedHeader);
    }
    let value = value.to_str().map_err(|_| AuthError::MalformedHeader)?;
    let (scheme, credential) = value
        .trim()
        .split_once(' ')
        .ok_or(AuthError::MalformedHeader)?;
    let credential = credential.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || credential.is_empty() {
        return Err(AuthError::MalformedHeader);
    }
    Ok(Some(credential))
}

fn jwt_error(error: jsonwebtoken::errors::Error) -> AuthError {
    match error.kind() {
        JwtErrorKind::ExpiredSignature => AuthError::Expired,
        JwtErrorKind::InvalidSignature => AuthError::InvalidToken("bad signature"),
        JwtErrorKind::InvalidAlgorithm => AuthError::InvalidToken("signing algorithm not accepted"),
        JwtErrorKind::ImmatureSignature => AuthError::InvalidToken("token not valid yet"),
        JwtErrorKind::InvalidIssuer => AuthError::InvalidToken("wrong issuer"),
        JwtErrorKind::InvalidAudience => AuthError::InvalidToken("wrong audience"),
        JwtErrorKind::MissingRequiredClaim(_) => {
            AuthError::InvalidToken("missing a required claim")
        }
        _ => AuthError::InvalidToken("malformed token"),
    }
}

fn checked_display_name(name: &str) -> Result<&str, AuthError> {
    super::names::display_name(name)
}

fn check_owner(owner: &str) -> Result<(), AuthError> {
    let ok = !owner.is_empty()
        && owner.len() <= MAX_OWNER_BYTES
        && owner
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(AuthError::InvalidArgument(format!(
            "owner must be 1 to {MAX_OWNER_BYTES} ASCII letters, digits, '.', '_' or '-'"
        )))
    }
}

fn random_hex(n_bytes: usize) -> String {
    let mut bytes = vec![0u8; n_bytes];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

fn is_lower_hex(text: &str) -> bool {
    text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Compares without an early exit, so timing does not tell how much of a hash matched.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, value.parse().unwrap());
        headers
    }

    #[test]
    fn bearer_metadata() {
        assert_eq!(bearer_token(&http::HeaderMap::new()).unwrap(), None);
        assert_eq!(bearer_token(&headers("Bearer abc")).unwrap(), Some("abc"));
        assert_eq!(bearer_token(&headers("bearer  abc ")).unwrap(), Some("abc"));
        for bad in ["Basic abc", "Bearer", "Bearer ", "abc"] {
            assert!(
                matches!(bearer_token(&headers(bad)), Err(AuthError::MalformedHeader)),
                "{bad}"
            );
        }
        let mut twice = headers("Bearer a");
        twice.append(http::header::AUTHORIZATION, "Bearer b".parse().unwrap());
        assert!(bearer_token(&twice).is_err());
    }

    /// A guest's token stops working once the guest is linked to an account: at once on the replica
    /// that linked it, and on another replica that had not looked at that guest yet.
    #[tokio::test]
    async fn a_linked_guest_s_token_is_refused() {
        let store: Arc<dyn LiveStore> = Arc::new(draughts_store::MemoryStore::new());
        let linker = Authenticator::new(AuthConfig::for_tests(), store.clone()).unwrap();
        let other = Authenticator::new(AuthConfig::for_tests(), store).unwrap();
        let gus = linker.create_guest("Gus").await.unwrap();
        let bearer = headers(&format!("Bearer {}", gus.token));
        let seen = linker.authenticate(&bearer).await.unwrap().unwrap();
        assert_eq!(seen.player_id, gus.principal.player_id);
        let account = Principal {
            player_id: "player:gus-account".into(),
            display_name: "Gus".into(),
            kind: PrincipalKind::Player,
            scopes: gus.principal.scopes,
        };
        let (guest_id, linked_now) = linker.link_guest(&account, &gus.token).await.unwrap();
        assert!(linked_now && guest_id == gus.principal.player_id);
        for replica in [&linker, &other] {
            let refused = replica.authenticate(&bearer).await.unwrap_err();
            assert!(matches!(refused, AuthError::GuestLinked), "{refused:?}");
            assert_eq!(
                draughts_proto::ServiceError::kind(&refused),
                draughts_proto::ErrorKind::Unauthenticated
            );
        }
        // Linking again with the token still works (idempotent), and another guest is unaffected.
        assert!(!linker.link_guest(&account, &gus.token).await.unwrap().1);
        let ivy = linker.create_guest("Ivy").await.unwrap();
        let ivy_bearer = headers(&format!("Bearer {}", ivy.token));
        assert!(other.authenticate(&ivy_bearer).await.unwrap().is_some());
    }

    #[test]
    fn names_and_ids() {
        assert_eq!(api_key_id("dk_x").len(), 16);
        assert_eq!(
            rate_counter_name("addr:1.2.3.4", 7),
            "auth:rate:addr:1.2.3.4:7"
        );
        assert_eq!(
            api_key_record_name("0123456789abcdef"),
            "auth:apikey:0123456789abcdef"
        );
        assert!(check_owner("acme-bot.v2").is_ok());
        assert!(check_owner("").is_err() && check_owner("a b").is_err());
        assert!(checked_display_name("Ann").is_ok());
        assert!(checked_display_name("a\nb").is_err());
        assert!(checked_display_name(&"x".repeat(33)).is_err());
        assert!(constant_time_eq(b"ab", b"ab") && !constant_time_eq(b"ab", b"ac"));
        assert!(!constant_time_eq(b"ab", b"abc"));
    }
}
