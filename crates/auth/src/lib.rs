//! The ONE authentication layer of the platform, and the `draughts.v1.Auth` service.
//!
//! Callers send `authorization: Bearer <credential>` metadata; [`AuthLayer`] (a tower layer put around a
//! generated tonic server) checks it on every request, counts the call against the caller's rate limit,
//! and hands the handler an `Option<Principal>` in the request extensions, read with [`principal`] and
//! checked with [`require`]. Credentials are:
//!
//! - guest tokens, issued by `Auth.CreateGuest`: HS256 JWTs signed with `--token-secret`
//!   (issuer and audience `draughts`), player id `guest:<32 hex>`, scope PLAY;
//! - player tokens from the outside identity provider: JWTs verified with `--jwt-key` (an HS256 secret,
//!   or a PEM RS256/ES256 public key), optional issuer/audience checks, player id `player:<sub>`, scopes
//!   PLAY and ANALYSIS;
//! - API keys, created by `Auth.CreateApiKey` (ADMIN scope): `dk_` + 64 hex digits, looked up in the
//!   [`LiveStore`](draughts_store::LiveStore) where only their SHA-256 hash is kept, player id
//!   `key:<owner>`, the scopes given at creation; plus the optional bootstrap `--admin-api-key` (all
//!   scopes, player id `key:admin`), which lives in configuration only.
//!
//! No `authorization` metadata means an anonymous call: the layer lets it through with `None` and each
//! handler decides ([`principal`] refuses it with UNAUTHENTICATED). Rate limits are fixed one-minute
//! windows aligned on the clock, counted with `LiveStore::hit` so that every replica shares them: per
//! guest, player and API key, and per client address for anonymous calls. A refused call gets
//! RESOURCE_EXHAUSTED with `retry-after` metadata: the seconds until the window ends.
//!
//! When the live store cannot count (Redis down), calls that create or change state fail closed
//! (UNAVAILABLE) and the methods a service registers as reads fail open, bounded by a small
//! in-process limiter per caller ([`limits`] has the whole rule and why).
//!
//! Layout: [`config`] (flags, validation), [`error`] (the error enum and its kinds), [`authenticator`]
//! (credentials, tokens, keys, rate limits; no tonic types), [`limits`] (fail open or closed when the
//! store is down, the fallback limiter), [`layer`] (the tower layer), [`grpc`] (the `Auth` service:
//! converts, calls the authenticator, converts back).
//!
//! ```
//! use draughts_auth::{Principal, PrincipalKind, Scope, Scopes, require};
//!
//! let p = Principal {
//!     player_id: "key:acme".into(),
//!     display_name: "acme".into(),
//!     kind: PrincipalKind::ApiKey,
//!     scopes: Scopes::PLAY.with(Scope::Analysis),
//! };
//! assert!(require(&p, Scope::Play).is_ok());
//! let denied = require(&p, Scope::Admin).unwrap_err();
//! assert_eq!(denied.code(), tonic::Code::PermissionDenied);
//! assert_eq!(denied.message(), "this call needs the admin scope");
//! ```

pub mod accounts;
pub mod authenticator;
pub mod bot_limits;
pub mod config;
pub mod error;
pub mod grpc;
pub mod identity;
pub mod layer;
pub mod limits;
pub mod names;
pub mod passwords;
pub mod signing;

use std::fmt;
use std::str::FromStr;

use draughts_proto::ServiceError;
use draughts_proto::pb::auth_server::AuthServer;
use draughts_runtime::Services;
use tower::Layer;

pub use accounts::{AccountInfo, IssuedSession, PersonalTokenInfo};
pub use authenticator::{Authenticator, IssuedGuest, api_key_id, constant_time_eq};
pub use bot_limits::BotLimits;
pub use config::AuthConfig;
pub use error::AuthError;
pub use identity::{Identities, Identity};
pub use layer::{
    AuthLayer, Authenticated, ClientAddress, OnBehalfOf, client_address, on_behalf_of,
};
pub use limits::{CallKind, CallPolicy};

/// Who is calling, once their credentials are checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// `guest:<random>`, `player:<sub>` or `key:<owner>`.
    pub player_id: String,
    /// The name shown to others: chosen by the guest, from the identity provider's `name` (or
    /// `preferred_username`, else the subject), or the API key's owner.
    pub display_name: String,
    pub kind: PrincipalKind,
    pub scopes: Scopes,
}

impl Principal {
    /// Whether the caller is a BOT: from its credential (an API key with the [`Scope::Bot`] mark),
    /// never from a request.
    pub fn is_bot(&self) -> bool {
        self.scopes.has(Scope::Bot)
    }
}

/// How a caller authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrincipalKind {
    /// A guest token issued by `Auth.CreateGuest`.
    Guest,
    /// A player token from the identity provider.
    Player,
    /// An API key.
    ApiKey,
    /// An account of this server: an access token of a session, or a personal token.
    Account,
}

/// One thing a caller may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// Play games.
    Play,
    /// Ask for analysis and computer moves.
    Analysis,
    /// Manage API keys; administrative calls.
    Admin,
    /// A platform service calling on users' behalf (`x-on-behalf-of`, see [`layer`]).
    Service,
    /// A mark, not a permission: the caller is a BOT (a program playing through the API; see
    /// [`Principal::is_bot`]). Only API keys carry it, given by an administrator; never in
    /// [`Scopes::ALL`], so the bootstrap admin key is not a bot.
    Bot,
}

impl Scope {
    /// Every scope, in order.
    pub const ALL: [Scope; 5] = [
        Scope::Play,
        Scope::Analysis,
        Scope::Admin,
        Scope::Service,
        Scope::Bot,
    ];

    /// The stable name (`play`, `analysis`, `admin`), used in messages and stored key records.
    pub const fn name(self) -> &'static str {
        match self {
            Scope::Play => "play",
            Scope::Analysis => "analysis",
            Scope::Admin => "admin",
            Scope::Service => "service",
            Scope::Bot => "bot",
        }
    }

    const fn bit(self) -> u8 {
        match self {
            Scope::Play => 1,
            Scope::Analysis => 2,
            Scope::Admin => 4,
            Scope::Service => 8,
            Scope::Bot => 16,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The text is not a scope name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown scope '{0}' (expected play, analysis, admin, service or bot)")]
pub struct UnknownScope(pub String);

impl FromStr for Scope {
    type Err = UnknownScope;

    fn from_str(text: &str) -> Result<Scope, UnknownScope> {
        Scope::ALL
            .into_iter()
            .find(|scope| scope.name() == text)
            .ok_or_else(|| UnknownScope(text.to_owned()))
    }
}

/// A set of [`Scope`]s (a bitset).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Scopes(u8);

impl Scopes {
    pub const NONE: Scopes = Scopes(0);
    pub const PLAY: Scopes = Scopes(Scope::Play.bit());
    pub const ANALYSIS: Scopes = Scopes(Scope::Analysis.bit());
    pub const ADMIN: Scopes = Scopes(Scope::Admin.bit());
    pub const BOT: Scopes = Scopes(Scope::Bot.bit());
    /// Every permission: all scopes but the [`Scope::Bot`] mark.
    pub const ALL: Scopes = Scopes(
        Scope::Play.bit() | Scope::Analysis.bit() | Scope::Admin.bit() | Scope::Service.bit(),
    );

    /// Whether `scope` is in the set.
    pub const fn has(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    /// The set with `scope` added.
    #[must_use]
    pub const fn with(self, scope: Scope) -> Scopes {
        Scopes(self.0 | scope.bit())
    }

    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The scopes in the set, in [`Scope::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL.into_iter().filter(move |scope| self.has(*scope))
    }
}

impl From<Scope> for Scopes {
    fn from(scope: Scope) -> Scopes {
        Scopes(scope.bit())
    }
}

impl FromIterator<Scope> for Scopes {
    fn from_iter<I: IntoIterator<Item = Scope>>(iter: I) -> Scopes {
        iter.into_iter().fold(Scopes::NONE, Scopes::with)
    }
}

/// `play,analysis` (empty for no scope).
impl fmt::Display for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, scope) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(scope.name())?;
        }
        Ok(())
    }
}

impl fmt::Debug for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Scopes({self})")
    }
}

/// The authenticated caller of a request served behind [`AuthLayer`]; UNAUTHENTICATED for an anonymous
/// call. For handlers of calls that need credentials.
pub fn principal<T>(req: &tonic::Request<T>) -> Result<Principal, tonic::Status> {
    match req.extensions().get::<Option<Principal>>() {
        Some(Some(principal)) => Ok(principal.clone()),
        Some(None) => Err(AuthError::Unauthenticated.to_status()),
        None => {
            // A wiring mistake, not the caller's: the server was registered without the layer.
            tracing::error!("request reached a handler without passing the authentication layer");
            Err(AuthError::NotBehindLayer.to_status())
        }
    }
}

/// The caller of a request served behind [`AuthLayer`], `None` when anonymous. For handlers of calls
/// that anonymous callers may make too.
pub fn optional_principal<T>(req: &tonic::Request<T>) -> Option<Principal> {
    req.extensions()
        .get::<Option<Principal>>()
        .cloned()
        .flatten()
}

/// PERMISSION_DENIED, naming the scope, unless `principal` has `scope`.
pub fn require(principal: &Principal, scope: Scope) -> Result<(), tonic::Status> {
    if principal.scopes.has(scope) {
        Ok(())
    } else {
        Err(AuthError::MissingScope(scope).to_status())
    }
}

/// The methods of `draughts.v1.Auth` that only read (see [`limits`]); the others create state.
pub const AUTH_READS: CallPolicy = CallPolicy::reads(&[
    "WhoAmI",
    "GetAccount",
    "ListPersonalTokens",
    "ExportAccountData",
]);

/// Adds `draughts.v1.Auth` to a host, behind the authentication layer; `games` serves the finished
/// games of `ExportAccountData`.
pub fn register_auth(
    services: &mut Services,
    auth: &Authenticator,
    max_message_bytes: usize,
    games: Option<std::sync::Arc<dyn grpc::FinishedGames>>,
) {
    let mut api = grpc::AuthApi::new(auth.clone());
    if let Some(games) = games {
        api = api.with_games(games);
    }
    let server = AuthServer::new(api)
        .max_decoding_message_size(max_message_bytes)
        .max_encoding_message_size(64 * 1024 * 1024);
    services.add(auth.layer().with_policy(AUTH_READS).layer(server));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_a_set() {
        let scopes: Scopes = [Scope::Admin, Scope::Play, Scope::Play]
            .into_iter()
            .collect();
        assert!(
            scopes.has(Scope::Play) && scopes.has(Scope::Admin) && !scopes.has(Scope::Analysis)
        );
        assert_eq!(scopes.to_string(), "play,admin");
        assert_eq!(Scopes::ALL.iter().collect::<Vec<_>>(), Scope::ALL[..4]);
        assert!(!Scopes::ALL.has(Scope::Bot), "the bootstrap key is no bot");
        assert_eq!("bot".parse::<Scope>(), Ok(Scope::Bot));
        assert!(Scopes::NONE.is_empty());
        assert_eq!("analysis".parse::<Scope>(), Ok(Scope::Analysis));
        assert!("root".parse::<Scope>().is_err());
    }
}
