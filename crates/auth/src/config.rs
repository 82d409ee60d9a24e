//! Authentication settings: flags with environment fallbacks, validated at start.

use std::fmt;

use draughts_runtime::ConfigError;
use jsonwebtoken::{Algorithm, DecodingKey};

/// The issuer and audience of the guest tokens this platform signs. An identity provider may not use it.
pub const GUEST_ISSUER: &str = "draughts";

/// Shortest accepted HS256 secret, in bytes (the hash output size: shorter secrets weaken HS256).
pub const MIN_SECRET_BYTES: usize = 32;

/// How callers are authenticated and how often they may call.
///
/// `Debug` shows whether each secret is set, never its value; `--help` hides the values of the secret
/// environment variables.
#[derive(Clone, clap::Args)]
pub struct AuthConfig {
    /// Secret that signs this platform's guest tokens (HS256), at least 32 bytes. Every replica must
    /// share it; changing it signs every guest out. Required by the services; the one-process platform
    /// makes a random one when it is not given (guest tokens then end with the process).
    #[arg(
        long,
        env = "DRAUGHTS_TOKEN_SECRET",
        hide_env_values = true,
        default_value = ""
    )]
    pub token_secret: String,
    /// Earlier token secrets, comma-separated: they no longer sign, but tokens they signed are still
    /// accepted (key rotation: move the old secret here, give a new `token-secret`, and drop the old
    /// one once the longest token lifetime has passed).
    #[arg(
        long,
        env = "DRAUGHTS_TOKEN_SECRET_PREVIOUS",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub token_secret_previous: Vec<String>,
    /// How long an account's access token is accepted, in seconds (60 to 3600).
    #[arg(long, env = "DRAUGHTS_ACCESS_TOKEN_TTL_SECS", default_value_t = 900)]
    pub access_token_ttl_secs: u64,
    /// How long an account's session lasts without being refreshed, in seconds (3600 to 31622400).
    #[arg(long, env = "DRAUGHTS_SESSION_TTL_SECS", default_value_t = 30 * 24 * 3600)]
    pub session_ttl_secs: u64,
    /// Passwords hashed at once (Argon2id, about 19 MiB and 20 ms of one core each), on threads that
    /// run only when nothing else wants a core (SCHED_IDLE on Linux), so that they use what the games
    /// leave idle; 0 = one per core. Sign-ins beyond that wait, and beyond 64 waiting are refused with
    /// UNAVAILABLE.
    #[arg(long, env = "DRAUGHTS_PASSWORD_HASH_THREADS", default_value_t = 0)]
    pub password_hash_threads: usize,
    /// Accounts created per client address per hour.
    #[arg(
        long,
        env = "DRAUGHTS_SIGNUPS_PER_ADDRESS_PER_HOUR",
        default_value_t = 10
    )]
    pub signups_per_address_per_hour: u32,
    /// The identity provider's key for player tokens: an HS256 secret (at least 32 bytes), or a PEM
    /// public key (text starting with -----BEGIN: RSA for RS256, P-256 for ES256). Unset: only guest
    /// tokens and API keys are accepted.
    #[arg(long, env = "DRAUGHTS_JWT_KEY", hide_env_values = true)]
    pub jwt_key: Option<String>,
    /// When set, player tokens must carry this `iss`.
    #[arg(long, env = "DRAUGHTS_JWT_ISSUER")]
    pub jwt_issuer: Option<String>,
    /// When set, player tokens must carry this `aud` (else tokens with any `aud` are accepted).
    #[arg(long, env = "DRAUGHTS_JWT_AUDIENCE")]
    pub jwt_audience: Option<String>,
    /// How long a guest token is accepted, in seconds (60 to 31622400).
    #[arg(long, env = "DRAUGHTS_GUEST_TOKEN_TTL_SECS", default_value_t = 30 * 24 * 3600)]
    pub guest_token_ttl_secs: u64,
    /// Calls per minute per guest.
    #[arg(
        long,
        env = "DRAUGHTS_RATE_LIMIT_GUEST_PER_MINUTE",
        default_value_t = 120
    )]
    pub rate_limit_guest_per_minute: u32,
    /// Calls per minute per player (identity-provider token).
    #[arg(
        long,
        env = "DRAUGHTS_RATE_LIMIT_PLAYER_PER_MINUTE",
        default_value_t = 600
    )]
    pub rate_limit_player_per_minute: u32,
    /// Calls per minute per API key (a key may carry its own limit instead).
    #[arg(
        long,
        env = "DRAUGHTS_RATE_LIMIT_API_KEY_PER_MINUTE",
        default_value_t = 1200
    )]
    pub rate_limit_api_key_per_minute: u32,
    /// Calls per minute per client address without credentials (e.g. CreateGuest).
    #[arg(
        long,
        env = "DRAUGHTS_RATE_LIMIT_ANONYMOUS_PER_MINUTE",
        default_value_t = 60
    )]
    pub rate_limit_anonymous_per_minute: u32,
    /// Bootstrap API key with every scope (player id `key:admin`), kept in configuration only: "dk_"
    /// followed by at least 32 letters, digits, '_' or '-'. Use it to create the real keys.
    #[arg(long, env = "DRAUGHTS_ADMIN_API_KEY", hide_env_values = true)]
    pub admin_api_key: Option<String>,
    /// Take an anonymous caller's address from the last `x-forwarded-for` entry (set this only behind
    /// a proxy that appends it, or clients choose their own rate-limit bucket).
    #[arg(long, env = "DRAUGHTS_TRUST_FORWARDED_FOR")]
    pub trust_forwarded_for: bool,
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |secret: &Option<String>| if secret.is_some() { "<set>" } else { "<unset>" };
        f.debug_struct("AuthConfig")
            .field("token_secret", &"<redacted>")
            .field("token_secret_previous", &self.token_secret_previous.len())
            .field("access_token_ttl_secs", &self.access_token_ttl_secs)
            .field("session_ttl_secs", &self.session_ttl_secs)
            .field("password_hash_threads", &self.password_hash_threads)
            .field(
                "signups_per_address_per_hour",
                &self.signups_per_address_per_hour,
            )
            .field("jwt_key", &set(&self.jwt_key))
            .field("jwt_issuer", &self.jwt_issuer)
            .field("jwt_audience", &self.jwt_audience)
            .field("guest_token_ttl_secs", &self.guest_token_ttl_secs)
            .field(
                "rate_limit_guest_per_minute",
                &self.rate_limit_guest_per_minute,
            )
            .field(
                "rate_limit_player_per_minute",
                &self.rate_limit_player_per_minute,
            )
            .field(
                "rate_limit_api_key_per_minute",
                &self.rate_limit_api_key_per_minute,
            )
            .field(
                "rate_limit_anonymous_per_minute",
                &self.rate_limit_anonymous_per_minute,
            )
            .field("admin_api_key", &set(&self.admin_api_key))
            .field("trust_forwarded_for", &self.trust_forwarded_for)
            .finish()
    }
}

impl AuthConfig {
    /// Fails on a setting that cannot work, naming it (never echoing a secret).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.token_secret.len() < MIN_SECRET_BYTES {
            return Err(ConfigError(format!(
                "token-secret (DRAUGHTS_TOKEN_SECRET) is required and must be at least {MIN_SECRET_BYTES} bytes, got {}",
                self.token_secret.len()
            )));
        }
        if let Some(short) = self
            .token_secret_previous
            .iter()
            .find(|secret| secret.len() < MIN_SECRET_BYTES)
        {
            return Err(ConfigError(format!(
                "token-secret-previous (DRAUGHTS_TOKEN_SECRET_PREVIOUS): every secret must be at least {MIN_SECRET_BYTES} bytes, one has {}",
                short.len()
            )));
        }
        if !(60..=3600).contains(&self.access_token_ttl_secs) {
            return Err(ConfigError(format!(
                "access-token-ttl-secs must be from 60 to 3600, got {}",
                self.access_token_ttl_secs
            )));
        }
        if !(3600..=366 * 24 * 3600).contains(&self.session_ttl_secs) {
            return Err(ConfigError(format!(
                "session-ttl-secs must be from 3600 to 31622400, got {}",
                self.session_ttl_secs
            )));
        }
        if self.password_hash_threads > 256 {
            return Err(ConfigError(format!(
                "password-hash-threads must be at most 256, got {}",
                self.password_hash_threads
            )));
        }
        if self.signups_per_address_per_hour == 0 {
            return Err(ConfigError(
                "signups-per-address-per-hour must be at least 1".into(),
            ));
        }
        self.idp_key()?;
        if self.jwt_issuer.as_deref() == Some(GUEST_ISSUER) {
            return Err(ConfigError(format!(
                "jwt-issuer may not be '{GUEST_ISSUER}': that issuer names this platform's own guest tokens"
            )));
        }
        for (name, value) in [
            ("jwt-issuer", &self.jwt_issuer),
            ("jwt-audience", &self.jwt_audience),
        ] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                return Err(ConfigError(format!("{name} may not be empty when set")));
            }
        }
        if !(60..=366 * 24 * 3600).contains(&self.guest_token_ttl_secs) {
            return Err(ConfigError(format!(
                "guest-token-ttl-secs must be from 60 to 31622400, got {}",
                self.guest_token_ttl_secs
            )));
        }
        for (name, limit) in [
            (
                "rate-limit-guest-per-minute",
                self.rate_limit_guest_per_minute,
            ),
            (
                "rate-limit-player-per-minute",
                self.rate_limit_player_per_minute,
            ),
            (
                "rate-limit-api-key-per-minute",
                self.rate_limit_api_key_per_minute,
            ),
            (
                "rate-limit-anonymous-per-minute",
                self.rate_limit_anonymous_per_minute,
            ),
        ] {
            if limit == 0 {
                return Err(ConfigError(format!("{name} must be at least 1")));
            }
        }
        if let Some(key) = &self.admin_api_key {
            let body = key.strip_prefix("dk_").unwrap_or("");
            let well_formed = body.len() >= 32
                && body
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !well_formed {
                return Err(ConfigError(
                    "admin-api-key (DRAUGHTS_ADMIN_API_KEY) must be \"dk_\" followed by at least 32 letters, digits, '_' or '-'"
                        .into(),
                ));
            }
        }
        Ok(())
    }

    /// The identity provider's verification key and its one accepted algorithm, if configured.
    pub(crate) fn idp_key(&self) -> Result<Option<(DecodingKey, Algorithm)>, ConfigError> {
        let Some(key) = &self.jwt_key else {
            return Ok(None);
        };
        let key = key.trim();
        if key.starts_with("-----BEGIN") {
            if let Ok(rsa) = DecodingKey::from_rsa_pem(key.as_bytes()) {
                return Ok(Some((rsa, Algorithm::RS256)));
            }
            if let Ok(ec) = DecodingKey::from_ec_pem(key.as_bytes()) {
                return Ok(Some((ec, Algorithm::ES256)));
            }
            return Err(ConfigError(
                "jwt-key (DRAUGHTS_JWT_KEY) looks like PEM but is not an RSA or EC public key"
                    .into(),
            ));
        }
        if key.len() < MIN_SECRET_BYTES {
            return Err(ConfigError(format!(
                "jwt-key (DRAUGHTS_JWT_KEY) must be a PEM public key or an HS256 secret of at least {MIN_SECRET_BYTES} bytes"
            )));
        }
        if key == self.token_secret {
            return Err(ConfigError(
                "jwt-key must differ from token-secret: the identity provider must not be able to sign guest tokens"
                    .into(),
            ));
        }
        let secret = DecodingKey::from_secret(key.as_bytes())
            .map_err(|_| ConfigError("jwt-key (DRAUGHTS_JWT_KEY) is not a usable secret".into()))?;
        Ok(Some((secret, Algorithm::HS256)))
    }

    /// A configuration for tests: fixed test secrets (never use them elsewhere), an HS256 identity
    /// provider key, a bootstrap admin key, the default TTL and limits.
    pub fn for_tests() -> AuthConfig {
        AuthConfig {
            token_secret: "test-only-token-secret-0123456789abcdef".into(),
            token_secret_previous: Vec::new(),
            access_token_ttl_secs: 900,
            session_ttl_secs: 30 * 24 * 3600,
            password_hash_threads: 1,
            signups_per_address_per_hour: 10,
            jwt_key: Some("test-only-identity-provider-secret-0123456789".into()),
            jwt_issuer: None,
            jwt_audience: None,
            guest_token_ttl_secs: 30 * 24 * 3600,
            rate_limit_guest_per_minute: 120,
            rate_limit_player_per_minute: 600,
            rate_limit_api_key_per_minute: 1200,
            rate_limit_anonymous_per_minute: 60,
            admin_api_key: Some("dk_test_only_admin_key_0123456789abcdef".into()),
            trust_forwarded_for: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_fails_fast_on_bad_settings() {
        assert!(AuthConfig::for_tests().validate().is_ok());
        let check = |edit: fn(&mut AuthConfig), expected: &str| {
            let mut config = AuthConfig::for_tests();
            edit(&mut config);
            let err = config.validate().unwrap_err().to_string();
            assert!(err.contains(expected), "{err}");
        };
        check(|c| c.token_secret = String::new(), "token-secret");
        check(|c| c.token_secret = "short".into(), "at least 32 bytes");
        check(|c| c.jwt_key = Some("short".into()), "jwt-key");
        check(|c| c.jwt_key = Some(c.token_secret.clone()), "must differ");
        check(
            |c| {
                c.jwt_key =
                    Some("-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----".into())
            },
            "not an RSA or EC public key",
        );
        check(|c| c.jwt_issuer = Some("draughts".into()), "jwt-issuer");
        check(|c| c.guest_token_ttl_secs = 1, "guest-token-ttl-secs");
        check(|c| c.rate_limit_guest_per_minute = 0, "rate-limit-guest");
        check(|c| c.admin_api_key = Some("secret".into()), "admin-api-key");
    }

    #[test]
    fn debug_hides_secrets() {
        let text = format!("{:?}", AuthConfig::for_tests());
        assert!(!text.contains("test-only"), "{text}");
    }
}
