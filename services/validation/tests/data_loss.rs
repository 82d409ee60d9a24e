//! The games service on a real `redis-server` that loses its data under it (`FLUSHALL`, as a Redis
//! restarted without its append-only file): what the service made at start is made again by itself
//! (the `archive-check` group on `games.finished`), and new games go on without a restart.

use std::time::{Duration, Instant};

use draughts_engine::{RuleSet, Variant};
use draughts_proto::convert;
use draughts_proto::pb;
use draughts_proto::pb::auth_client::AuthClient;
use draughts_proto::pb::games_client::GamesClient;
use draughts_store::{LiveStore, RedisStore};
use draughts_testkit::{RedisServer, ServiceUnderTest, authed};
use draughts_validation::Config;
use draughts_validation::games::service::ARCHIVE_CHECK_GROUP;

const PREFIX: &str = "loss:";

/// Whether the group is there; a stream not made yet (before the service's start, or after the
/// flush) has no groups: Redis answers "no such key", which is `false`, not a failure.
async fn archive_check_exists(live: &RedisStore) -> bool {
    live.groups(draughts_proto::contract::finished::STREAM)
        .await
        .is_ok_and(|groups| groups.iter().any(|g| g.name == ARCHIVE_CHECK_GROUP))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_games_service_made_at_start_is_made_again_after_a_flush() {
    let redis = RedisServer::start().expect("redis-server");
    let mut config = Config::for_tests();
    config.backends.redis_url = redis.url();
    config.backends.key_prefix = PREFIX.into();
    let server = ServiceUnderTest::start(|listener, shutdown| {
        draughts_validation::run(config, listener, shutdown)
    })
    .await;
    let channel = server.channel().await;
    let live = RedisStore::connect(&redis.url(), PREFIX).await.unwrap();
    // Made at start (the listener accepts before the service has started: wait for it).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !archive_check_exists(&live).await {
        assert!(Instant::now() < deadline, "archive-check not made at start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let mut admin = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let () = redis::cmd("FLUSHALL")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(!archive_check_exists(&live).await, "gone with the data");

    // The timers' next sample (at most SAMPLE_EVERY, 10 s) makes it again.
    let deadline = Instant::now() + Duration::from_secs(15);
    while !archive_check_exists(&live).await {
        assert!(
            Instant::now() < deadline,
            "archive-check not made again within 15 s of the flush"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A new guest plays a new game against the computer as before the flush.
    let guest = AuthClient::new(channel.clone())
        .create_guest(pb::CreateGuestRequest {
            display_name: "Ann".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut games = GamesClient::new(channel);
    let game = games
        .create_game(authed(
            &guest.token,
            pb::CreateGameRequest {
                rules: Some(convert::rules_to_wire(RuleSet::new(Variant::English))),
                time_control: Some(pb::TimeControl {
                    kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                        base_ms: 60_000,
                        increment_ms: 0,
                    })),
                }),
                white: Some(pb::Player::default()),
                black: Some(pb::Player {
                    id: "ai:1".into(),
                    ..Default::default()
                }),
                rated: false,
                fen: String::new(),
                game_id: String::new(),
                berserk_allowed: false,
            },
        ))
        .await
        .expect("a game after the flush")
        .into_inner();
    games
        .abort(authed(
            &guest.token,
            pb::GameActionRequest {
                game_id: game.game_id,
            },
        ))
        .await
        .expect("abort after the flush");
    server.stop().await;
}
