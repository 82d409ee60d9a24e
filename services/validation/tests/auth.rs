//! `draughts.v1.Auth` and the authentication layer through a real server on 127.0.0.1:0 (the shared
//! `serve`, an in-memory live store) with the generated client: guest tokens, identity-provider tokens
//! (HS256 and ES256), API keys and scopes, revocation, bad and expired tokens, rate limits.

use std::sync::Arc;

use draughts_proto::pb;
use draughts_proto::pb::auth_client::AuthClient;
use draughts_runtime::{ServerConfig, Services};
use draughts_store::{MemoryStore, now_unix_ms};
use draughts_testkit::ServiceUnderTest;
use draughts_validation::auth::{AuthConfig, Authenticator, register_auth};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

/// A P-256 key pair made for this test only (`openssl ecparam -name prime256v1 -genkey`).
const EC_PUBLIC_PEM: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEmlNVNnYoZqnszXhMZhTwoK9v9aC5
c/XqddVXG/0ej+QjyoXjzmJSKNK6MA/4TXsqu9qddVEX/LhZSOFTyOcojA==
-----END PUBLIC KEY-----";
const EC_PRIVATE_PEM: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg2uvj2N8Wpcoxwqf8
qING4pkv51DP1NWyC7HRWwFMHvuhRANCAASaU1U2dihmqezNeExmFPCgr2/1oLlz
9ep11Vcb/R6P5CPKhePOYlIo0rowD/hNeyq72p11URf8uFlI4VPI5yiM
-----END PRIVATE KEY-----";

/// The Auth service alone on 127.0.0.1:0 (the shared harness from testkit).
struct Server {
    inner: ServiceUnderTest,
    config: AuthConfig,
}

impl Server {
    async fn start(config: AuthConfig) -> Server {
        let auth = Authenticator::new(config.clone(), Arc::new(MemoryStore::new())).unwrap();
        let server_config = ServerConfig::for_tests();
        let mut services = Services::new();
        register_auth(&mut services, &auth, server_config.max_message_bytes, None);
        let inner = ServiceUnderTest::start(|listener, shutdown| async move {
            draughts_runtime::serve(&server_config, services, listener, shutdown).await
        })
        .await;
        Server { inner, config }
    }

    async fn client(&self) -> AuthClient<Channel> {
        AuthClient::new(self.inner.channel().await)
    }

    fn admin_key(&self) -> String {
        self.config.admin_api_key.clone().unwrap()
    }

    async fn stop(self) {
        self.inner.stop().await
    }
}

/// `message` with `authorization: <value>` metadata.
fn with_authorization<T>(message: T, value: &str) -> Request<T> {
    let mut req = Request::new(message);
    req.metadata_mut()
        .insert("authorization", value.parse().unwrap());
    req
}

/// `message` with `authorization: Bearer <credential>` metadata.
fn bearer<T>(message: T, credential: &str) -> Request<T> {
    with_authorization(message, &format!("Bearer {credential}"))
}

async fn who_am_i(
    client: &mut AuthClient<Channel>,
    credential: &str,
) -> Result<pb::WhoAmIResponse, Status> {
    client
        .who_am_i(bearer(pb::WhoAmIRequest {}, credential))
        .await
        .map(|r| r.into_inner())
}

/// Asserts a refusal: its code and a phrase of its message.
#[track_caller]
fn check<T: std::fmt::Debug>(result: Result<T, Status>, code: Code, phrase: &str) -> Status {
    let status = result.expect_err("the call should be refused");
    assert_eq!(status.code(), code, "{status:?}");
    assert!(
        status.message().contains(phrase),
        "message {:?} should contain {phrase:?}",
        status.message()
    );
    status
}

fn now_secs() -> u64 {
    now_unix_ms() / 1000
}

fn hs256(claims: &serde_json::Value, secret: &str) -> String {
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()).unwrap(),
    )
    .unwrap()
}

fn scopes(values: &[pb::AuthScope]) -> Vec<i32> {
    values.iter().map(|s| *s as i32).collect()
}

async fn create_key(
    client: &mut AuthClient<Channel>,
    admin_key: &str,
    owner: &str,
    key_scopes: &[pb::AuthScope],
    rate_limit_per_minute: u32,
) -> Result<pb::CreateApiKeyResponse, Status> {
    let req = pb::CreateApiKeyRequest {
        owner: owner.into(),
        scopes: scopes(key_scopes),
        rate_limit_per_minute,
        expires_in_secs: 0,
    };
    client
        .create_api_key(bearer(req, admin_key))
        .await
        .map(|r| r.into_inner())
}

async fn revoke(
    client: &mut AuthClient<Channel>,
    admin_key: &str,
    key_id: &str,
) -> Result<bool, Status> {
    let req = pb::RevokeApiKeyRequest {
        key_id: key_id.into(),
    };
    client
        .revoke_api_key(bearer(req, admin_key))
        .await
        .map(|r| r.into_inner().revoked)
}

/// Waits, if needed, so that the next few calls fall in one rate-limit minute.
async fn away_from_window_end() {
    let into_window_ms = now_unix_ms() % 60_000;
    if into_window_ms > 55_000 {
        tokio::time::sleep(std::time::Duration::from_millis(60_100 - into_window_ms)).await;
    }
}

#[tokio::test]
async fn guest_token_is_issued_and_accepted() {
    let server = Server::start(AuthConfig::for_tests()).await;
    let mut client = server.client().await;

    let guest = client
        .create_guest(pb::CreateGuestRequest {
            display_name: "  Ann  ".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let player = guest.player.unwrap();
    assert!(player.id.starts_with("guest:"), "{}", player.id);
    assert_eq!(player.display_name, "Ann");
    assert!(player.guest && !player.computer);
    let ttl_ms = guest.expires_at_ms.saturating_sub(now_unix_ms());
    assert!(ttl_ms > 29 * 24 * 3600 * 1000 && ttl_ms <= 30 * 24 * 3600 * 1000);

    let me = who_am_i(&mut client, &guest.token).await.unwrap();
    assert_eq!(me.player.unwrap(), player);
    assert_eq!(me.kind, pb::PrincipalKind::Guest as i32);
    assert_eq!(me.scopes, scopes(&[pb::AuthScope::Play]));

    // Two guests are two identities; an empty name is generated.
    let other = client
        .create_guest(pb::CreateGuestRequest::default())
        .await
        .unwrap()
        .into_inner()
        .player
        .unwrap();
    assert_ne!(other.id, player.id);
    assert!(
        other.display_name.starts_with("Guest "),
        "{}",
        other.display_name
    );

    let bad_name = client
        .create_guest(pb::CreateGuestRequest {
            display_name: "x".repeat(33),
        })
        .await;
    check(bad_name, Code::InvalidArgument, "display_name");

    // Anonymous calls reach CreateGuest but not WhoAmI.
    let anonymous = client.who_am_i(pb::WhoAmIRequest {}).await;
    check(anonymous, Code::Unauthenticated, "needs credentials");
    server.stop().await;
}

#[tokio::test]
async fn bad_tokens_are_unauthenticated() {
    let server = Server::start(AuthConfig::for_tests()).await;
    let mut client = server.client().await;
    let guest = client
        .create_guest(pb::CreateGuestRequest::default())
        .await
        .unwrap()
        .into_inner();
    let config = &server.config;
    let guest_claims = json!({
        "iss": "draughts", "aud": "draughts", "sub": format!("guest:{}", "ab".repeat(16)),
        "name": "Mallory", "iat": now_secs(), "exp": now_secs() + 3600,
    });
    // The last signature character carries spare bits: tamper in the middle of the signature.
    let mut tampered = guest.token.clone().into_bytes();
    let middle = tampered.len() - 10;
    tampered[middle] = if tampered[middle] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let cases: Vec<(String, &str)> = vec![
        ("hello".into(), "neither a JWT nor an API key"),
        ("a.b.c".into(), "malformed token"),
        (tampered, "bad signature"),
        // A guest token signed with another secret, or with the identity provider's key.
        (
            hs256(&guest_claims, "some-other-secret-0123456789abcdefghijkl"),
            "bad signature",
        ),
        (
            hs256(&guest_claims, config.jwt_key.as_deref().unwrap()),
            "bad signature",
        ),
        // An identity-provider token signed with the wrong key.
        (
            hs256(
                &json!({"sub": "u1", "exp": now_secs() + 60}),
                &config.token_secret,
            ),
            "bad signature",
        ),
        // Unsigned tokens are never accepted.
        (
            format!(
                "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.{}.",
                guest.token.split('.').nth(1).unwrap()
            ),
            "malformed token",
        ),
        ("dk_123".into(), "malformed API key"),
        (
            format!("dk_{}", "0".repeat(64)),
            "unknown or revoked API key",
        ),
    ];
    for (credential, phrase) in cases {
        let result = who_am_i(&mut client, &credential).await;
        check(result, Code::Unauthenticated, phrase);
    }
    for header in ["Basic dXNlcjpwYXNz", "Bearer", guest.token.as_str()] {
        let result = client
            .who_am_i(with_authorization(pb::WhoAmIRequest {}, header))
            .await;
        check(result, Code::Unauthenticated, "Bearer <token>");
    }
    // Even calls that allow anonymous callers refuse bad credentials.
    let result = client
        .create_guest(bearer(pb::CreateGuestRequest::default(), "hello"))
        .await;
    check(result, Code::Unauthenticated, "invalid token");
    server.stop().await;
}

#[tokio::test]
async fn expired_tokens_are_unauthenticated() {
    let server = Server::start(AuthConfig::for_tests()).await;
    let mut client = server.client().await;
    let config = &server.config;
    let an_hour_ago = now_secs() - 3600;
    let guest = json!({
        "iss": "draughts", "aud": "draughts", "sub": format!("guest:{}", "cd".repeat(16)),
        "name": "Old", "iat": an_hour_ago - 60, "exp": an_hour_ago,
    });
    let result = who_am_i(&mut client, &hs256(&guest, &config.token_secret)).await;
    check(result, Code::Unauthenticated, "expired");

    let player = json!({"sub": "u7", "exp": an_hour_ago});
    let result = who_am_i(
        &mut client,
        &hs256(&player, config.jwt_key.as_deref().unwrap()),
    )
    .await;
    check(result, Code::Unauthenticated, "expired");

    // A token without exp is refused too.
    let result = who_am_i(
        &mut client,
        &hs256(&json!({"sub": "u7"}), config.jwt_key.as_deref().unwrap()),
    )
    .await;
    check(result, Code::Unauthenticated, "missing a required claim");
    server.stop().await;
}

#[tokio::test]
async fn identity_provider_tokens_are_players() {
    // HS256 secret, issuer and audience checked.
    let mut config = AuthConfig::for_tests();
    config.jwt_issuer = Some("https://id.example.org".into());
    config.jwt_audience = Some("draughts-api".into());
    let server = Server::start(config).await;
    let mut client = server.client().await;
    let secret = server.config.jwt_key.clone().unwrap();
    let claims = json!({
        "iss": "https://id.example.org", "aud": "draughts-api", "sub": "u123",
        "name": "Bob", "exp": now_secs() + 600,
    });
    let me = who_am_i(&mut client, &hs256(&claims, &secret))
        .await
        .unwrap();
    let player = me.player.unwrap();
    assert_eq!(player.id, "player:u123");
    assert_eq!(player.display_name, "Bob");
    assert!(!player.guest);
    assert_eq!(me.kind, pb::PrincipalKind::Player as i32);
    assert_eq!(
        me.scopes,
        scopes(&[pb::AuthScope::Play, pb::AuthScope::Analysis])
    );

    let mut wrong_audience = claims.clone();
    wrong_audience["aud"] = json!("another-api");
    let result = who_am_i(&mut client, &hs256(&wrong_audience, &secret)).await;
    check(result, Code::Unauthenticated, "wrong audience");
    let mut wrong_issuer = claims.clone();
    wrong_issuer["iss"] = json!("https://evil.example.org");
    let result = who_am_i(&mut client, &hs256(&wrong_issuer, &secret)).await;
    check(result, Code::Unauthenticated, "wrong issuer");
    server.stop().await;

    // ES256 public key in PEM; no issuer or audience configured; the name falls back to the subject.
    let mut config = AuthConfig::for_tests();
    config.jwt_key = Some(EC_PUBLIC_PEM.into());
    let server = Server::start(config).await;
    let mut client = server.client().await;
    let token = jsonwebtoken::encode(
        &Header::new(Algorithm::ES256),
        &json!({"sub": "auth0|42", "exp": now_secs() + 600, "aud": "anything"}),
        &EncodingKey::from_ec_pem(EC_PRIVATE_PEM.as_bytes()).unwrap(),
    )
    .unwrap();
    let me = who_am_i(&mut client, &token).await.unwrap();
    assert_eq!(me.player.as_ref().unwrap().id, "player:auth0|42");
    assert_eq!(me.player.unwrap().display_name, "auth0|42");
    // With a public key configured, HS256 tokens are refused (no algorithm confusion).
    let hs = hs256(
        &json!({"sub": "u1", "exp": now_secs() + 600}),
        EC_PUBLIC_PEM,
    );
    let result = who_am_i(&mut client, &hs).await;
    check(
        result,
        Code::Unauthenticated,
        "signing algorithm not accepted",
    );
    server.stop().await;

    // Without a jwt-key, only guest tokens and API keys are accepted.
    let mut config = AuthConfig::for_tests();
    config.jwt_key = None;
    let server = Server::start(config).await;
    let mut client = server.client().await;
    let result = who_am_i(&mut client, &hs256(&claims, &secret)).await;
    check(result, Code::Unauthenticated, "no identity-provider tokens");
    server.stop().await;
}

#[tokio::test]
async fn api_keys_carry_scopes_and_can_be_revoked() {
    let server = Server::start(AuthConfig::for_tests()).await;
    let mut client = server.client().await;
    let admin = server.admin_key();

    let me = who_am_i(&mut client, &admin).await.unwrap();
    assert_eq!(me.player.unwrap().id, "key:admin");
    assert_eq!(
        me.scopes,
        scopes(&[
            pb::AuthScope::Play,
            pb::AuthScope::Analysis,
            pb::AuthScope::Admin,
            pb::AuthScope::Service,
        ])
    );

    let created = create_key(
        &mut client,
        &admin,
        "acme-bot",
        &[
            pb::AuthScope::Analysis,
            pb::AuthScope::Play,
            pb::AuthScope::Play,
        ],
        0,
    )
    .await
    .unwrap();
    assert!(
        created.key.starts_with("dk_") && created.key.len() == 67,
        "{}",
        created.key
    );
    assert_eq!(created.key_id.len(), 16);
    assert_eq!(created.owner, "acme-bot");
    assert_eq!(
        created.scopes,
        scopes(&[pb::AuthScope::Play, pb::AuthScope::Analysis])
    );

    let me = who_am_i(&mut client, &created.key).await.unwrap();
    let player = me.player.unwrap();
    assert_eq!(player.id, "key:acme-bot");
    assert_eq!(player.display_name, "acme-bot");
    assert_eq!(me.kind, pb::PrincipalKind::ApiKey as i32);
    assert_eq!(me.scopes, created.scopes);

    // Missing scope: a play/analysis key, or a guest, may not create keys.
    let result = create_key(&mut client, &created.key, "x", &[pb::AuthScope::Play], 0).await;
    check(result, Code::PermissionDenied, "needs the admin scope");
    let guest = client
        .create_guest(pb::CreateGuestRequest::default())
        .await
        .unwrap()
        .into_inner();
    let result = create_key(&mut client, &guest.token, "x", &[pb::AuthScope::Play], 0).await;
    check(result, Code::PermissionDenied, "needs the admin scope");
    let result = client
        .create_api_key(pb::CreateApiKeyRequest {
            owner: "x".into(),
            scopes: scopes(&[pb::AuthScope::Play]),
            rate_limit_per_minute: 0,
            expires_in_secs: 0,
        })
        .await;
    check(result, Code::Unauthenticated, "needs credentials");
    let result = client
        .revoke_api_key(bearer(
            pb::RevokeApiKeyRequest {
                key_id: created.key_id.clone(),
            },
            &created.key,
        ))
        .await;
    check(result, Code::PermissionDenied, "needs the admin scope");

    // Bad requests.
    let result = create_key(&mut client, &admin, "acme", &[], 0).await;
    check(result, Code::InvalidArgument, "at least one scope");
    let result = create_key(
        &mut client,
        &admin,
        "acme",
        &[pb::AuthScope::Unspecified],
        0,
    )
    .await;
    check(result, Code::InvalidArgument, "not a scope");
    let result = create_key(&mut client, &admin, "a b", &[pb::AuthScope::Play], 0).await;
    check(result, Code::InvalidArgument, "owner");

    // An admin key made by the bootstrap key can make keys in turn.
    let second_admin = create_key(&mut client, &admin, "ops", &[pb::AuthScope::Admin], 0)
        .await
        .unwrap();
    let by_second = create_key(
        &mut client,
        &second_admin.key,
        "acme",
        &[pb::AuthScope::Play],
        0,
    )
    .await
    .unwrap();

    // Revocation: by id, then by the key itself; idempotent.
    assert!(revoke(&mut client, &admin, &created.key_id).await.unwrap());
    let result = who_am_i(&mut client, &created.key).await;
    check(result, Code::Unauthenticated, "unknown or revoked API key");
    assert!(!revoke(&mut client, &admin, &created.key_id).await.unwrap());
    assert!(
        revoke(&mut client, &second_admin.key, &by_second.key)
            .await
            .unwrap()
    );
    check(
        who_am_i(&mut client, &by_second.key).await,
        Code::Unauthenticated,
        "revoked",
    );
    check(
        revoke(&mut client, &admin, "not-an-id").await,
        Code::InvalidArgument,
        "key_id",
    );
    // The other keys still work.
    assert!(who_am_i(&mut client, &second_admin.key).await.is_ok());
    server.stop().await;
}

/// An API key may be given a lifetime: it works until then and is UNAUTHENTICATED ("expired")
/// after; a lifetime past ten years is refused, and keys without one do not expire.
#[tokio::test]
async fn api_keys_may_expire() {
    let server = Server::start(AuthConfig::for_tests()).await;
    let mut client = server.client().await;
    let admin = server.admin_key();
    let request = |expires_in_secs| pb::CreateApiKeyRequest {
        owner: "short-lived".into(),
        scopes: scopes(&[pb::AuthScope::Play]),
        rate_limit_per_minute: 0,
        expires_in_secs,
    };
    let too_long = client
        .create_api_key(bearer(request(10 * 365 * 24 * 3600 + 1), &admin))
        .await;
    check(too_long, Code::InvalidArgument, "expires_in_secs");
    let before = now_unix_ms();
    let short = client
        .create_api_key(bearer(request(1), &admin))
        .await
        .unwrap()
        .into_inner();
    assert!(
        (before + 1000..=now_unix_ms() + 1000).contains(&short.expires_at_ms),
        "{}",
        short.expires_at_ms
    );
    let lasting = client
        .create_api_key(bearer(request(0), &admin))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(lasting.expires_at_ms, 0);
    let me = who_am_i(&mut client, &short.key).await.unwrap();
    assert_eq!(me.player.unwrap().id, "key:short-lived");
    let wait = short.expires_at_ms.saturating_sub(now_unix_ms()) + 50;
    tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
    let result = who_am_i(&mut client, &short.key).await;
    check(result, Code::Unauthenticated, "expired");
    who_am_i(&mut client, &lasting.key)
        .await
        .expect("a key without a lifetime keeps working");
}

#[tokio::test]
async fn rate_limits_answer_resource_exhausted_with_retry_after() {
    let mut config = AuthConfig::for_tests();
    config.rate_limit_guest_per_minute = 3;
    config.rate_limit_anonymous_per_minute = 2;
    let server = Server::start(config).await;
    let mut client = server.client().await;
    away_from_window_end().await;

    // Anonymous callers: per address.
    let guest = client
        .create_guest(pb::CreateGuestRequest::default())
        .await
        .unwrap()
        .into_inner();
    let other_guest = client
        .create_guest(pb::CreateGuestRequest::default())
        .await
        .unwrap()
        .into_inner();
    let result = client.create_guest(pb::CreateGuestRequest::default()).await;
    let status = check(result, Code::ResourceExhausted, "rate limit exceeded");
    let retry_after: u64 = status
        .metadata()
        .get("retry-after")
        .expect("retry-after metadata")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");

    // Guests: per guest, whatever the address.
    for _ in 0..3 {
        who_am_i(&mut client, &guest.token).await.unwrap();
    }
    let status = check(
        who_am_i(&mut client, &guest.token).await,
        Code::ResourceExhausted,
        "retry in",
    );
    assert!(status.metadata().get("retry-after").is_some());
    who_am_i(&mut client, &other_guest.token).await.unwrap();

    // API keys: per key, with the key's own limit.
    let admin = server.admin_key();
    let limited = create_key(&mut client, &admin, "bot", &[pb::AuthScope::Play], 2)
        .await
        .unwrap();
    for _ in 0..2 {
        who_am_i(&mut client, &limited.key).await.unwrap();
    }
    check(
        who_am_i(&mut client, &limited.key).await,
        Code::ResourceExhausted,
        "rate limit",
    );
    who_am_i(&mut client, &admin).await.unwrap();
    server.stop().await;
}

/// A service's key (scope `service`) naming a user in `x-on-behalf-of` spends that user's calls, not
/// its own; the same metadata from a key without the scope is ignored; a malformed one is refused.
#[tokio::test]
async fn services_call_on_behalf_of_users() {
    let mut config = AuthConfig::for_tests();
    config.rate_limit_guest_per_minute = 3;
    let server = Server::start(config).await;
    let mut client = server.client().await;
    let admin = server.admin_key();
    let service = create_key(
        &mut client,
        &admin,
        "matchmaking",
        &[pb::AuthScope::Play, pb::AuthScope::Service],
        1000,
    )
    .await
    .unwrap();
    let plain = create_key(&mut client, &admin, "plain", &[pb::AuthScope::Play], 1000)
        .await
        .unwrap();
    let new_guest = async |client: &mut AuthClient<Channel>| {
        client
            .create_guest(pb::CreateGuestRequest::default())
            .await
            .unwrap()
            .into_inner()
    };
    let gus = new_guest(&mut client).await;
    let ivy = new_guest(&mut client).await;
    let gus_id = gus.player.unwrap().id;
    let ivy_id = ivy.player.unwrap().id;
    let for_user = |key: &str, user: &str| {
        let mut req = bearer(pb::WhoAmIRequest {}, key);
        req.metadata_mut()
            .insert("x-on-behalf-of", user.parse().unwrap());
        req
    };
    away_from_window_end().await;
    // The service's calls for Gus use up Gus's three calls of the minute...
    for _ in 0..3 {
        let me = client
            .who_am_i(for_user(&service.key, &gus_id))
            .await
            .unwrap()
            .into_inner();
        // ...while the caller stays the service (the metadata names whom it acts for, nothing more).
        assert_eq!(me.player.unwrap().id, "key:matchmaking");
    }
    let refused = client
        .who_am_i(for_user(&service.key, &gus_id))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    // Gus himself is out of calls too: one bucket per user.
    assert_eq!(
        who_am_i(&mut client, &gus.token).await.unwrap_err().code(),
        Code::ResourceExhausted
    );
    // Ivy's calls, and the service's own, are untouched.
    client
        .who_am_i(for_user(&service.key, &ivy_id))
        .await
        .unwrap();
    who_am_i(&mut client, &service.key).await.unwrap();
    // A key without the service scope cannot spend (or spare) someone else's calls: ignored.
    for _ in 0..5 {
        client
            .who_am_i(for_user(&plain.key, &gus_id))
            .await
            .unwrap();
    }
    // A malformed user is refused.
    let bad = client
        .who_am_i(for_user(&service.key, "nobody"))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(
        bad.message().contains("x-on-behalf-of"),
        "{}",
        bad.message()
    );
    server.stop().await;
}
