//! The analysis service on a real `redis-server` that loses its data under it (`FLUSHALL`, as a Redis
//! restarted without its append-only file): the consumer groups of the queue and of the bulk feed are
//! gone, and the service must create them again by itself, without a restart.

use std::time::{Duration, Instant};

use draughts_analysis::Config;
use draughts_proto::pb;
use draughts_proto::pb::analysis_client::AnalysisClient;
use draughts_store::{Bytes, LiveStore, RedisStore};
use draughts_testkit::{RedisServer, ServiceUnderTest};

const PREFIX: &str = "loss:";

async fn guest_token() -> String {
    let live = draughts_store::open_live_store("memory://", "")
        .await
        .unwrap();
    let auth =
        draughts_auth::Authenticator::new(draughts_auth::AuthConfig::for_tests(), live).unwrap();
    auth.issue_guest("guest").unwrap().token
}

fn authed<T>(token: &str, msg: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    req
}

fn best_move() -> pb::BestMoveRequest {
    pb::BestMoveRequest {
        source: Some(pb::best_move_request::Source::Position(pb::PositionInput {
            rules: Some(pb::RuleSet {
                variant: pb::Variant::English as i32,
                options: None,
            }),
            fen: String::new(),
            moves: vec![pb::MoveInput {
                r#move: Some(pb::move_input::Move::Text("11-15".into())),
            }],
        })),
        strength: Some(pb::best_move_request::Strength::Level(1)),
        clock: None,
        seed: 1,
    }
}

fn flush_all(redis: &RedisServer) {
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &redis.port().to_string(), "FLUSHALL"])
        .output()
        .expect("redis-cli");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "OK");
}

/// Whether `group` exists on `stream` and has been given the entry `id`.
async fn delivered(
    live: &dyn LiveStore,
    stream: &str,
    group: &str,
    id: draughts_store::EntryId,
) -> bool {
    live.groups(stream)
        .await
        .unwrap()
        .iter()
        .any(|g| g.name == group && g.last_delivered >= id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_queue_and_the_bulk_feed_survive_a_flushed_redis() {
    let redis = RedisServer::start().expect("redis-server");
    let mut config = Config::for_tests();
    config.backends.redis_url = redis.url();
    config.backends.key_prefix = PREFIX.into();
    config.analysis.analysis_bulk_finished_games = true;
    let server = ServiceUnderTest::start(move |listener, shutdown| {
        draughts_analysis::run(config, listener, shutdown)
    })
    .await;
    let mut client = AnalysisClient::new(server.channel().await);
    let live = RedisStore::connect(&redis.url(), PREFIX).await.unwrap();
    let guest = guest_token().await;

    // Before: a computer move and the queue's status.
    let reply = client
        .best_move(authed(&guest, best_move()))
        .await
        .expect("BestMove before the flush")
        .into_inner();
    assert!(reply.r#move.is_some(), "{reply:?}");
    client
        .queue_status(pb::QueueStatusRequest {})
        .await
        .expect("QueueStatus before the flush");
    // The bulk feed has made its group on games.finished.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !live
        .groups(draughts_proto::contract::finished::STREAM)
        .await
        .unwrap()
        .iter()
        .any(|g| g.name == draughts_analysis::bulk::GROUP)
    {
        assert!(Instant::now() < deadline, "no bulk group within 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    flush_all(&redis);
    assert!(
        live.groups(draughts_analysis::contract::Class::ComputerMove.stream())
            .await
            .unwrap()
            .is_empty(),
        "the flush removed the groups"
    );

    // After: the very next calls answer (the first finds NOGROUP, creates the groups, retries).
    let reply = client
        .best_move(authed(&guest, best_move()))
        .await
        .expect("BestMove right after the flush")
        .into_inner();
    assert!(reply.r#move.is_some(), "{reply:?}");
    client
        .queue_status(pb::QueueStatusRequest {})
        .await
        .expect("QueueStatus right after the flush");
    // The workers' heartbeats went with the data: within a few beats they are counted again.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let status = client
            .queue_status(pb::QueueStatusRequest {})
            .await
            .expect("QueueStatus after the flush")
            .into_inner();
        if status.live_workers >= 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no live worker 5 s after the flush: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Many more in a row, so the worker side (its reads) has surely met the loss too.
    for n in 0..20 {
        client
            .best_move(authed(&guest, best_move()))
            .await
            .unwrap_or_else(|e| panic!("BestMove {n} after the flush: {e:?}"));
    }

    // The bulk feed reads games.finished again: an entry appended after the flush is delivered to
    // its group (created anew by the feed, not by this test).
    let id = live
        .append(
            draughts_proto::contract::finished::STREAM,
            Bytes::from_static(b"{\"v\":1}"),
        )
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !delivered(
        &live,
        draughts_proto::contract::finished::STREAM,
        draughts_analysis::bulk::GROUP,
        id,
    )
    .await
    {
        assert!(
            Instant::now() < deadline,
            "the bulk feed did not read games.finished within 10 s of the flush"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.stop().await;
}
