//! Rate limits at the edge through a real server on 127.0.0.1:0: `Rules` behind the one auth layer
//! (anonymous calls limited per client address, RESOURCE_EXHAUSTED with `retry-after`), and what the
//! limiter does when the live store cannot count (a real `redis-server`, stopped under the running
//! server): reads go on, bounded by the per-replica fallback limiter; calls that create state are
//! refused with UNAVAILABLE.

use draughts_proto::pb;
use draughts_proto::pb::auth_client::AuthClient;
use draughts_proto::pb::rules_client::RulesClient;
use draughts_testkit::{RedisServer, ServiceUnderTest};
use draughts_validation::Config;
use draughts_validation::auth::limits::FALLBACK_DIVISOR;
use tonic::{Code, Request};

fn start_position() -> pb::StartPositionRequest {
    pb::StartPositionRequest {
        rules: Some(pb::RuleSet {
            variant: pb::Variant::English as i32,
            options: None,
        }),
    }
}

fn bearer<T>(message: T, token: &str) -> Request<T> {
    let mut req = Request::new(message);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    req
}

async fn start(config: Config) -> ServiceUnderTest {
    ServiceUnderTest::start(move |listener, shutdown| {
        draughts_validation::run(config, listener, shutdown)
    })
    .await
}

/// A server whose anonymous calls are limited to 20 a minute per address, a `Rules` client, a guest
/// token (its creation is the address's first anonymous call) and the limit.
async fn limited_server() -> (
    ServiceUnderTest,
    RulesClient<tonic::transport::Channel>,
    String,
    u32,
) {
    let mut config = Config::for_tests();
    config.auth.rate_limit_anonymous_per_minute = 20;
    let limit = config.auth.rate_limit_anonymous_per_minute;
    let server = start(config).await;
    let channel = server.channel().await;
    let rules = RulesClient::new(channel.clone());
    let guest = AuthClient::new(channel)
        .create_guest(pb::CreateGuestRequest {
            display_name: "Ann".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .token;
    (server, rules, guest, limit)
}

/// `Rules` had no rate limit; now anonymous calls count against the caller's address like every other
/// anonymous call, and the refusal says when to retry. A caller with credentials has its own bucket.
#[tokio::test]
async fn rules_is_rate_limited_per_address() {
    // A guest token first (one anonymous call), then the address's remaining calls.
    let (server, mut rules, guest, limit) = limited_server().await;
    let mut refused = None;
    let mut passed = 1;
    // Enough calls to reach the limit even when a minute boundary resets the window mid-loop.
    for _ in 0..2 * limit + 5 {
        match rules.start_position(start_position()).await {
            Ok(_) => passed += 1,
            Err(status) => {
                refused = Some(status);
                break;
            }
        }
    }
    // A minute boundary during the loop may reset the window once.
    assert!(
        passed == limit || passed <= 2 * limit,
        "{passed} anonymous calls passed a limit of {limit}"
    );
    let status = refused.expect("the anonymous limit was never reached");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    let retry_after: u64 = status
        .metadata()
        .get("retry-after")
        .expect("retry-after metadata")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "retry-after {retry_after}");
    // The guest is not limited by the address's bucket.
    rules
        .start_position(bearer(start_position(), &guest))
        .await
        .expect("a guest has its own limit");
    server.stop().await;
}

/// Refused credentials count against the caller's address like anonymous calls: whoever sprays
/// tokens (forged, expired, revoked keys) is answered UNAUTHENTICATED until the address's calls of the
/// minute are used up, then RESOURCE_EXHAUSTED with when to retry; a valid token has its own bucket.
#[tokio::test]
async fn refused_credentials_count_against_the_address() {
    let (server, mut rules, guest, limit) = limited_server().await;
    let forgeries = [
        format!("{guest}x"),
        "dk_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".to_owned(),
        "not-a-token".to_owned(),
    ];
    let mut refused = None;
    let mut unauthenticated = 0;
    // Enough calls to reach the limit even when a minute boundary resets the window mid-loop.
    for n in 0..2 * limit + 5 {
        let forged = &forgeries[n as usize % forgeries.len()];
        match rules.start_position(bearer(start_position(), forged)).await {
            Ok(_) => panic!("a forged credential was accepted: {forged}"),
            Err(status) if status.code() == Code::Unauthenticated => unauthenticated += 1,
            Err(status) => {
                refused = Some(status);
                break;
            }
        }
    }
    assert!(
        unauthenticated + 1 >= limit && unauthenticated < 2 * limit,
        "{unauthenticated} refused credentials before the limit of {limit}"
    );
    let status = refused.expect("refused credentials were never rate limited");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.metadata().get("retry-after").is_some());
    rules
        .start_position(bearer(start_position(), &guest))
        .await
        .expect("a valid token has its own limit");
    server.stop().await;
}

/// Redis stops under a running server. Before this change every call passed unlimited (300 of 300
/// over a 60/min limit). Now: reads (`Rules`, `WhoAmI`) go on but at most a quarter of the limit per
/// minute on this replica; calls that create state (`CreateGuest`, `CreateApiKey`) are refused with
/// UNAVAILABLE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_down_reads_fail_open_bounded_writes_fail_closed() {
    let redis = RedisServer::start().expect("redis-server (install: redis-server)");
    let mut config = Config::for_tests();
    config.backends.redis_url = redis.url();
    config.backends.key_prefix = "limits:".into();
    let limit = config.auth.rate_limit_anonymous_per_minute;
    let admin_key = config.auth.admin_api_key.clone().unwrap();
    let server = start(config).await;
    let channel = server.channel().await;
    let mut rules = RulesClient::new(channel.clone());
    let mut auth = AuthClient::new(channel);
    let guest = auth
        .create_guest(pb::CreateGuestRequest {
            display_name: "Ann".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .token;
    rules.start_position(start_position()).await.unwrap();

    drop(redis);

    // Reads: bounded by the fallback limiter (a minute boundary may open one more window).
    let fallback = limit / FALLBACK_DIVISOR;
    // Concurrently: each call first waits for the store to fail, which takes a while.
    let started = std::time::Instant::now();
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let mut rules = rules.clone();
        calls.spawn(async move { rules.start_position(start_position()).await });
    }
    let mut passed = 0;
    let mut exhausted = 0;
    // Every answer, refusals included, carries the fallback limiter's standing: its limit.
    let fallback_limit = |metadata: &tonic::metadata::MetadataMap| -> u32 {
        assert!(metadata.get("x-ratelimit-reset").is_some(), "{metadata:?}");
        assert!(
            metadata.get("x-ratelimit-remaining").is_some(),
            "{metadata:?}"
        );
        metadata
            .get("x-ratelimit-limit")
            .expect("x-ratelimit-limit")
            .to_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    while let Some(result) = calls.join_next().await {
        match result.unwrap() {
            Ok(answer) => {
                assert_eq!(fallback_limit(answer.metadata()), fallback);
                passed += 1;
            }
            Err(status) => {
                assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                assert!(status.metadata().get("retry-after").is_some());
                assert_eq!(fallback_limit(status.metadata()), fallback);
                assert_eq!(status.metadata().get("x-ratelimit-remaining").unwrap(), "0");
                exhausted += 1;
            }
        }
    }
    eprintln!("100 reads with the store down in {:?}", started.elapsed());
    assert!(
        passed >= fallback && passed <= 2 * fallback,
        "{passed} of 100 reads passed while the store was down (fallback {fallback}/min)"
    );
    assert_eq!(passed + exhausted, 100);
    let me = auth
        .who_am_i(bearer(pb::WhoAmIRequest {}, &guest))
        .await
        .expect("WhoAmI is a read: it goes on");
    assert!(me.into_inner().player.unwrap().id.starts_with("guest:"));

    // Writes: refused, with a message that says why.
    let status = auth
        .create_guest(pb::CreateGuestRequest {
            display_name: "Bob".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(status.message().contains("rate limiter"), "{status:?}");
    let status = auth
        .create_api_key(bearer(
            pb::CreateApiKeyRequest {
                owner: "acme".into(),
                scopes: vec![pb::AuthScope::Play as i32],
                rate_limit_per_minute: 0,
                expires_in_secs: 0,
            },
            &admin_key,
        ))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    server.stop().await;
}
