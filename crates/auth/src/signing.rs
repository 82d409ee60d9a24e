//! The keys that sign this platform's own tokens (guest tokens, accounts' access tokens), and their
//! rotation.
//!
//! Tokens are HS256 JWTs whose header names the key that signed them (`kid`: the first 8 hex digits of
//! the key's SHA-256, not secret). The newest key signs; every key in the set verifies, so a rotated-out
//! key keeps working for tokens issued before the rotation until it is dropped from the set. A token
//! without `kid` (issued before keys were named) is tried against every key.
//!
//! Where the keys come from:
//! - a deployment gives them in configuration, from a Kubernetes Secret: `--token-secret` signs,
//!   `--token-secret-previous` (a comma-separated list) only verifies. To rotate: put the old secret in
//!   the previous list and a new one as the secret, roll the replicas, and remove the old one once the
//!   longest token lifetime (the guest tokens', 30 days by default) has passed;
//! - the one-process platform without `--token-secret` keeps them in its database
//!   ([`load_or_create`]): made on first start, a new one each [`ROTATE_AFTER`] at start, the old ones
//!   kept for verification as long as a token they signed can live.

use std::time::Duration;

use draughts_store::{Database, StoreError, now_unix_ms};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use super::AuthError;

/// How long a key of the database-kept set signs before a new one is made (at the next start).
pub const ROTATE_AFTER: Duration = Duration::from_secs(90 * 24 * 3600);

/// Durable schema of the database-kept keys (auth's migrations are numbered from 2001).
pub const KEY_TABLE: &str = "CREATE TABLE IF NOT EXISTS auth_signing_keys (
            kid TEXT PRIMARY KEY,
            secret TEXT NOT NULL,
            created_at_ms BIGINT NOT NULL
        )";

/// The signing key and every key that verifies. Built once at start.
pub struct SigningKeys {
    kid: String,
    signing: EncodingKey,
    /// (kid, key), the signing key first.
    verifying: Vec<(String, DecodingKey)>,
}

impl std::fmt::Debug for SigningKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKeys")
            .field("kid", &self.kid)
            .field("verifying", &self.verifying.len())
            .finish()
    }
}

/// The public name of a key: the first 8 hex digits of its SHA-256.
pub fn key_id(secret: &str) -> String {
    let mut id = hex::encode(Sha256::digest(secret.as_bytes()));
    id.truncate(8);
    id
}

impl SigningKeys {
    /// `current` signs; `current` and each of `previous` verify.
    pub fn new(
        current: &str,
        previous: &[String],
    ) -> Result<SigningKeys, jsonwebtoken::errors::Error> {
        let signing = EncodingKey::from_secret(current.as_bytes())?;
        let mut verifying = vec![(
            key_id(current),
            DecodingKey::from_secret(current.as_bytes())?,
        )];
        for secret in previous {
            if secret != current {
                verifying.push((key_id(secret), DecodingKey::from_secret(secret.as_bytes())?));
            }
        }
        Ok(SigningKeys {
            kid: key_id(current),
            signing,
            verifying,
        })
    }

    /// Signs `claims` (HS256, `kid` in the header).
    pub fn sign<T: Serialize>(&self, claims: &T) -> Result<String, AuthError> {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.signing).map_err(AuthError::Signing)
    }

    /// Verifies `token` with the key its `kid` names (or, without `kid`, with each key in turn).
    pub fn verify<T: DeserializeOwned>(
        &self,
        token: &str,
        validation: &Validation,
    ) -> Result<T, jsonwebtoken::errors::Error> {
        let kid = jsonwebtoken::decode_header(token)?.kid;
        let mut last = None;
        for (id, key) in &self.verifying {
            if kid.as_ref().is_some_and(|kid| kid != id) {
                continue;
            }
            match jsonwebtoken::decode::<T>(token, key, validation) {
                Ok(data) => return Ok(data.claims),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| jsonwebtoken::errors::ErrorKind::InvalidSignature.into()))
    }

    /// How many keys verify.
    pub fn verifying_keys(&self) -> usize {
        self.verifying.len()
    }
}

/// The database-kept keys: (the signing secret, the others that still verify). Makes the first key on
/// an empty table and a new one when the newest is older than `rotate_after`; drops keys that stopped
/// signing more than `keep_after` ago (the longest lifetime of a token they signed). Concurrent starts
/// of several processes on one database may each add a key: all are kept and all verify.
pub async fn load_or_create(
    db: &Database,
    rotate_after: Duration,
    keep_after: Duration,
) -> Result<(String, Vec<String>), StoreError> {
    db.migrate(&[draughts_store::Migration {
        version: 2000,
        name: "auth_signing_keys",
        sql: KEY_TABLE,
    }])
    .await?;
    let now = now_unix_ms();
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let now_i = i64::try_from(now).unwrap_or(i64::MAX);
    let newest: Option<(String, i64)> = draughts_store::sqlx::query_as(
        "SELECT secret, created_at_ms FROM auth_signing_keys ORDER BY created_at_ms DESC, kid LIMIT 1",
    )
    .fetch_optional(db.pool())
    .await?;
    if newest.is_none_or(|(_, created)| now_i.saturating_sub(created) >= ms(rotate_after)) {
        let secret = {
            use rand::RngCore;
            let mut bytes = [0u8; 32];
            rand::rng().fill_bytes(&mut bytes);
            hex::encode(bytes)
        };
        draughts_store::sqlx::query(
            "INSERT INTO auth_signing_keys (kid, secret, created_at_ms) VALUES ($1, $2, $3) ON CONFLICT (kid) DO NOTHING",
        )
        .bind(key_id(&secret))
        .bind(secret)
        .bind(now_i)
        .execute(db.pool())
        .await?;
        tracing::info!("signing key created");
    }
    // A key stops signing when the next one is made: keep it while its last tokens can live.
    let rows: Vec<(String, i64)> = draughts_store::sqlx::query_as(
        "SELECT secret, created_at_ms FROM auth_signing_keys ORDER BY created_at_ms DESC, kid",
    )
    .fetch_all(db.pool())
    .await?;
    let mut kept = Vec::new();
    let mut successor_created: Option<i64> = None;
    for (secret, created) in rows {
        let expired =
            successor_created.is_some_and(|next| now_i.saturating_sub(next) > ms(keep_after));
        if expired {
            draughts_store::sqlx::query("DELETE FROM auth_signing_keys WHERE kid = $1")
                .bind(key_id(&secret))
                .execute(db.pool())
                .await?;
            tracing::info!(kid = key_id(&secret), "retired signing key dropped");
        } else {
            kept.push(secret);
        }
        successor_created = Some(created);
    }
    let current = kept.remove(0);
    Ok((current, kept))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Serialize, serde::Deserialize, PartialEq)]
    struct Claims {
        sub: String,
        exp: u64,
    }

    fn validation() -> Validation {
        let mut v = Validation::new(Algorithm::HS256);
        v.validate_aud = false;
        v
    }

    #[test]
    fn previous_keys_verify_and_the_current_one_signs() {
        let old = "old-secret-0123456789abcdef0123456789";
        let new = "new-secret-0123456789abcdef0123456789";
        let claims = Claims {
            sub: "x".into(),
            exp: now_unix_ms() / 1000 + 60,
        };
        let before = SigningKeys::new(old, &[]).unwrap();
        let token = before.sign(&claims).unwrap();
        let after = SigningKeys::new(new, &[old.to_owned()]).unwrap();
        assert_eq!(
            after.verify::<Claims>(&token, &validation()).unwrap(),
            claims
        );
        let fresh = after.sign(&claims).unwrap();
        assert_eq!(
            jsonwebtoken::decode_header(&fresh).unwrap().kid,
            Some(key_id(new))
        );
        assert!(before.verify::<Claims>(&fresh, &validation()).is_err());
        let dropped = SigningKeys::new(new, &[]).unwrap();
        assert!(dropped.verify::<Claims>(&token, &validation()).is_err());
        // A token without kid is tried against every key.
        let bare = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(old.as_bytes()).unwrap(),
        )
        .unwrap();
        assert_eq!(
            after.verify::<Claims>(&bare, &validation()).unwrap(),
            claims
        );
    }

    #[tokio::test]
    async fn database_keys_survive_a_restart_and_rotate() {
        let db = Database::connect("sqlite::memory:").await.unwrap();
        let day = Duration::from_secs(24 * 3600);
        let (first, previous) = load_or_create(&db, ROTATE_AFTER, 31 * day).await.unwrap();
        assert!(previous.is_empty() && first.len() == 64);
        let (again, previous) = load_or_create(&db, ROTATE_AFTER, 31 * day).await.unwrap();
        assert_eq!((again.as_str(), previous.len()), (first.as_str(), 0));
        // Past the rotation age a new key signs and the old one still verifies.
        let (rotated, previous) = load_or_create(&db, Duration::ZERO, 31 * day).await.unwrap();
        assert_ne!(rotated, first);
        assert_eq!(previous, vec![first.clone()]);
        // Once its successor is older than the keep time, it is dropped.
        draughts_store::sqlx::query(
            "UPDATE auth_signing_keys SET created_at_ms = created_at_ms - $1",
        )
        .bind(40 * 24 * 3600 * 1000_i64)
        .execute(db.pool())
        .await
        .unwrap();
        let (current, previous) = load_or_create(&db, ROTATE_AFTER * 2, 31 * day)
            .await
            .unwrap();
        assert_eq!(current, rotated);
        assert!(previous.is_empty(), "{previous:?}");
    }
}
