//! Matchmaking through gRPC on the real platform: quick pairing across two replicas sharing one Redis
//! and PostgreSQL (both started by the test), the game created through Games, a closed stream
//! withdrawing its seek, lobby seeks, challenges and declines over Games' invitations, WatchLobby.

use std::time::Duration;

use draughts_proto::pb;
use draughts_testkit::ServiceUnderTest;
use draughts_testkit::games::authed;
use pb::matchmaking_client::MatchmakingClient;
use tonic::transport::Channel;

const POOL: &str = "english-3+2-casual";

async fn replica(redis: &str, pg: &str) -> ServiceUnderTest {
    let config = draughtsd::Config::for_tests(redis, pg);
    ServiceUnderTest::start(move |listener, shutdown| draughtsd::run(config, listener, shutdown))
        .await
}

async fn guest(channel: &Channel, name: &str) -> String {
    pb::auth_client::AuthClient::new(channel.clone())
        .create_guest(pb::CreateGuestRequest {
            display_name: name.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .token
}

async fn seek(channel: &Channel, token: &str, pool: &str) -> tonic::Streaming<pb::SeekEvent> {
    MatchmakingClient::new(channel.clone())
        .seek(authed(
            token,
            pb::SeekRequest {
                pool_ids: vec![pool.into()],
                rating_range: None,
            },
        ))
        .await
        .unwrap()
        .into_inner()
}

/// The first event that is not `waiting`.
async fn outcome(stream: &mut tonic::Streaming<pb::SeekEvent>) -> pb::seek_event::Kind {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("an answer within 10 s")
            .unwrap()
            .expect("the stream ends only after its outcome");
        match event.kind.unwrap() {
            pb::seek_event::Kind::Waiting(_) => continue,
            other => return other,
        }
    }
}

async fn seeking(channel: &Channel, pool: &str) -> u64 {
    let mut lobby = MatchmakingClient::new(channel.clone())
        .watch_lobby(pb::WatchLobbyRequest {})
        .await
        .unwrap()
        .into_inner();
    let stats = lobby.message().await.unwrap().unwrap();
    stats
        .pools
        .iter()
        .find(|p| p.pool_id == pool)
        .unwrap()
        .seeking
}

fn rules() -> Option<pb::RuleSet> {
    Some(pb::RuleSet {
        variant: pb::Variant::English as i32,
        options: None,
    })
}

fn blitz() -> Option<pb::TimeControl> {
    Some(pb::TimeControl {
        kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
            base_ms: 180_000,
            increment_ms: 2_000,
        })),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quick_pairing_across_replicas_and_the_lobby() {
    let redis = draughts_testkit::RedisServer::start().expect("redis-server");
    let pg = draughts_testkit::PostgresServer::start().expect("postgres");
    pairing_and_lobby(&redis.url(), &pg.url()).await;
}

/// The same on a 3-primary Redis Cluster, both replicas given its `redis+cluster://` URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quick_pairing_across_replicas_and_the_lobby_on_a_redis_cluster() {
    let cluster = draughts_testkit::RedisCluster::start().expect("redis cluster");
    let pg = draughts_testkit::PostgresServer::start().expect("postgres");
    pairing_and_lobby(&cluster.url(), &pg.url()).await;
}

async fn pairing_and_lobby(redis_url: &str, pg_url: &str) {
    let a = replica(redis_url, pg_url).await;
    let b = replica(redis_url, pg_url).await;
    let (ca, cb) = (a.channel().await, b.channel().await);

    // Quick pairing: Ann waits on replica a, Bob joins on replica b.
    let ann = guest(&ca, "Ann").await;
    let bob = guest(&cb, "Bob").await;
    let started = std::time::Instant::now();
    let mut s1 = seek(&ca, &ann, POOL).await;
    let mut s2 = seek(&cb, &bob, POOL).await;
    let (o1, o2) = (outcome(&mut s1).await, outcome(&mut s2).await);
    let (pb::seek_event::Kind::Paired(p1), pb::seek_event::Kind::Paired(p2)) = (o1, o2) else {
        panic!("both paired");
    };
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(p1.game_id, p2.game_id);
    assert_ne!(p1.color, p2.color);
    assert_eq!(p1.opponent.as_ref().unwrap().display_name, "Bob");
    let game = pb::games_client::GamesClient::new(cb.clone())
        .get_game(pb::GetGameRequest {
            game_id: p1.game_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    let names = [
        game.white.unwrap().display_name,
        game.black.unwrap().display_name,
    ];
    assert!(names.contains(&"Ann".to_owned()) && names.contains(&"Bob".to_owned()));
    assert!(!game.rated);
    // The same seek opened again (a stream that broke at the pairing) is told of its pairing.
    let mut reopened = seek(&ca, &ann, POOL).await;
    match outcome(&mut reopened).await {
        pb::seek_event::Kind::Paired(p) => assert_eq!(p.game_id, p1.game_id),
        other => panic!("the pairing again, not {other:?}"),
    }
    // In a game: seeking another pool is refused.
    let refused = MatchmakingClient::new(ca.clone())
        .seek(authed(
            &ann,
            pb::SeekRequest {
                pool_ids: vec!["english-5+3-casual".into()],
                rating_range: None,
            },
        ))
        .await;
    assert_eq!(
        refused.err().unwrap().code(),
        tonic::Code::FailedPrecondition
    );
    // Anonymous callers cannot seek; unknown pools are refused.
    let anonymous = MatchmakingClient::new(ca.clone())
        .seek(pb::SeekRequest {
            pool_ids: vec![POOL.into()],
            rating_range: None,
        })
        .await;
    assert_eq!(
        anonymous.err().unwrap().code(),
        tonic::Code::Unauthenticated
    );
    let cy = guest(&ca, "Cy").await;
    let unknown = MatchmakingClient::new(ca.clone())
        .seek(authed(
            &cy,
            pb::SeekRequest {
                pool_ids: vec!["chess-3+2-rated".into()],
                rating_range: None,
            },
        ))
        .await;
    assert_eq!(unknown.err().unwrap().code(), tonic::Code::InvalidArgument);

    // A closed stream withdraws its seek at once.
    let mut s3 = seek(&ca, &cy, POOL).await;
    assert!(matches!(
        s3.message().await.unwrap().unwrap().kind,
        Some(pb::seek_event::Kind::Waiting(_))
    ));
    assert_eq!(seeking(&cb, POOL).await, 1);
    drop(s3);
    let mut left = false;
    for _ in 0..50 {
        if seeking(&cb, POOL).await == 0 {
            left = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(left, "the seek left the pool");

    // A lobby seek: listed on the other replica, accepted there; the game starts.
    let di = guest(&ca, "Di").await;
    let mut mm_a = MatchmakingClient::new(ca.clone());
    let listed = mm_a
        .create_lobby_seek(authed(
            &cy,
            pb::CreateLobbySeekRequest {
                rules: rules(),
                time_control: blitz(),
                color: pb::Color::White as i32,
                rated: false,
                rating_range: None,
                expires_in_ms: 0,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let mut mm_b = MatchmakingClient::new(cb.clone());
    let seen = mm_b
        .list_lobby_seeks(pb::ListLobbySeeksRequest {
            variant: pb::Variant::English as i32,
            limit: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(seen.seeks.iter().any(|s| s.seek_id == listed.seek_id));
    let own = mm_a
        .accept(authed(
            &cy,
            pb::AcceptRequest {
                id: listed.seek_id.clone(),
            },
        ))
        .await;
    assert_eq!(own.err().unwrap().code(), tonic::Code::FailedPrecondition);
    // The seek is an open invitation in Games, and its id is public: accepting it there directly,
    // around Matchmaking's checks, is refused (the invitation carries a key only Matchmaking holds).
    let direct = pb::games_client::GamesClient::new(cb.clone())
        .accept_invitation(authed(
            &di,
            pb::InvitationRequest {
                invitation_id: listed.seek_id.clone(),
                accept_key: String::new(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(direct.code(), tonic::Code::FailedPrecondition);
    assert!(
        direct.message().contains("Matchmaking.Accept"),
        "{direct:?}"
    );
    // A seek with house rules (draw rules among them) and a rating range the accepter is outside of:
    // listed with its house rules (part of its terms); refused by Matchmaking, and still by Games when
    // asked directly.
    let house_rules = pb::RuleSet {
        variant: pb::Variant::English as i32,
        options: Some(pb::RuleOptions {
            no_mandatory_capture: true,
            promote_mid_capture: false,
            move_limit: 40,
            repetition: Some(true),
            endgame_counts: Some(false),
            ..Default::default()
        }),
    };
    let ranged = mm_a
        .create_lobby_seek(authed(
            &cy,
            pb::CreateLobbySeekRequest {
                rules: Some(house_rules),
                time_control: blitz(),
                color: pb::Color::White as i32,
                rated: false,
                rating_range: Some(pb::RatingRange {
                    min: 1700,
                    max: 2200,
                }),
                expires_in_ms: 0,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let shown = mm_b
        .list_lobby_seeks(pb::ListLobbySeeksRequest {
            variant: pb::Variant::English as i32,
            limit: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let shown = shown
        .seeks
        .iter()
        .find(|s| s.seek_id == ranged.seek_id)
        .expect("the ranged seek is listed");
    assert_eq!(shown.rules.as_ref(), Some(&house_rules));
    let outside = mm_b
        .accept(authed(
            &di,
            pb::AcceptRequest {
                id: ranged.seek_id.clone(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(outside.code(), tonic::Code::FailedPrecondition);
    assert!(outside.message().contains("1700 to 2200"), "{outside:?}");
    let around = pb::games_client::GamesClient::new(ca.clone())
        .accept_invitation(authed(
            &di,
            pb::InvitationRequest {
                invitation_id: ranged.seek_id.clone(),
                accept_key: "guessed".into(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(around.code(), tonic::Code::FailedPrecondition);
    let started = mm_b
        .accept(authed(
            &di,
            pb::AcceptRequest {
                id: listed.seek_id.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(started.game_id, listed.seek_id);
    assert_eq!(started.white.unwrap().display_name, "Cy");
    let after = mm_b
        .list_lobby_seeks(pb::ListLobbySeeksRequest {
            variant: 0,
            limit: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        after.seeks.iter().all(|s| s.seek_id != listed.seek_id),
        "unlisted once accepted"
    );

    // A challenge to a named player: declined with a reason; another accepted.
    let ed = guest(&ca, "Ed").await;
    let fy = guest(&ca, "Fy").await;
    let who = |token: &str| {
        let channel = ca.clone();
        let token = token.to_owned();
        async move {
            pb::auth_client::AuthClient::new(channel)
                .who_am_i(authed(&token, pb::WhoAmIRequest {}))
                .await
                .unwrap()
                .into_inner()
                .player
                .unwrap()
                .id
        }
    };
    let fy_id = who(&fy).await;
    let challenge = |token: String| {
        let mut mm = mm_a.clone();
        let fy_id = fy_id.clone();
        async move {
            mm.challenge(authed(
                &token,
                pb::ChallengeRequest {
                    invitee_id: fy_id,
                    rules: rules(),
                    time_control: blitz(),
                    color: 0,
                    rated: false,
                    fen: String::new(),
                    expires_in_ms: 0,
                },
            ))
            .await
            .unwrap()
            .into_inner()
        }
    };
    let first = challenge(ed.clone()).await;
    let declined = mm_b
        .decline(authed(
            &fy,
            pb::DeclineRequest {
                id: first.invitation_id.clone(),
                reason: pb::DeclineReason::TooFast as i32,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(declined.state, pb::InvitationState::Declined as i32);
    let second = challenge(ed.clone()).await;
    let not_mine = mm_b
        .accept(authed(
            &ed,
            pb::AcceptRequest {
                id: second.invitation_id.clone(),
            },
        ))
        .await;
    assert!(not_mine.is_err());
    let game = mm_b
        .accept(authed(
            &fy,
            pb::AcceptRequest {
                id: second.invitation_id.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(game.game_id, second.invitation_id);

    // The lobby's numbers.
    let mut lobby = MatchmakingClient::new(cb.clone())
        .watch_lobby(pb::WatchLobbyRequest {})
        .await
        .unwrap()
        .into_inner();
    // The numbers are counted in the background (games in progress from Games, at most every
    // `IN_PROGRESS_FRESH`): the first message may be an older count, the stream sends each change.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let stats = loop {
        let stats = tokio::time::timeout_at(deadline, lobby.message())
            .await
            .expect("the lobby's numbers did not reach the games and players in play")
            .unwrap()
            .unwrap();
        if stats.games_in_progress >= 3 && stats.players_online >= 5 {
            break stats;
        }
    };
    let pool = stats.pools.iter().find(|p| p.pool_id == POOL).unwrap();
    assert!(
        pool.typical_wait_ms > 0 && pool.typical_wait_ms < 3000,
        "{pool:?}"
    );
    assert_eq!(
        stats.pools.len(),
        draughts_engine::Variant::ALL.len() * 9 * 2
    );
    a.stop().await;
    b.stop().await;
}

/// Behind a proxy whose X-Forwarded-For is trusted, anonymous WatchLobby streams count per client
/// address (IPv6 by its /64), not per proxy: every connection here comes from 127.0.0.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_lobby_watchers_behind_a_proxy_count_per_client_address() {
    let mut config = draughtsd::Config::for_tests("memory://", "sqlite::memory:");
    config.auth.trust_forwarded_for = true;
    let server = ServiceUnderTest::start(move |listener, shutdown| {
        draughtsd::run(config, listener, shutdown)
    })
    .await;
    let channel = server.channel().await;
    let watch = |address: &'static str| {
        let mut client = MatchmakingClient::new(channel.clone());
        async move {
            let mut request = tonic::Request::new(pb::WatchLobbyRequest {});
            request
                .metadata_mut()
                .insert("x-forwarded-for", address.parse().unwrap());
            client.watch_lobby(request).await.map(|r| r.into_inner())
        }
    };
    let mut open = Vec::new();
    for _ in 0..matchmaking_max_streams() {
        open.push(
            watch("203.0.113.7")
                .await
                .expect("within the per-caller bound"),
        );
    }
    let refused = watch("203.0.113.7").await.unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    // Another client through the same proxy has places of its own; one IPv6 /64 is one client.
    open.push(watch("203.0.113.8").await.expect("another client"));
    for _ in 0..matchmaking_max_streams() {
        open.push(watch("2001:db8:1:2::1").await.expect("an IPv6 client"));
    }
    let refused = watch("2001:db8:1:2::77").await.unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    drop(open);
    server.stop().await;
}

fn matchmaking_max_streams() -> usize {
    draughts_matchmaking::grpc::MAX_STREAMS_PER_CALLER
}

/// Quick pairing never seats two players of whom one blocks the other: Games refuses the agreed
/// game, both wait on (neither is told why), and each is paired with someone else.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quick_pairing_never_seats_a_blocked_pair() {
    let redis = draughts_testkit::RedisServer::start().expect("redis-server");
    let pg = draughts_testkit::PostgresServer::start().expect("postgres");
    let a = replica(&redis.url(), &pg.url()).await;
    let ch = a.channel().await;
    let new_guest = |name: &'static str| {
        let ch = ch.clone();
        async move {
            let r = pb::auth_client::AuthClient::new(ch)
                .create_guest(pb::CreateGuestRequest {
                    display_name: name.into(),
                })
                .await
                .unwrap()
                .into_inner();
            (r.player.unwrap().id, r.token)
        }
    };
    let (ann_id, ann) = new_guest("Ann").await;
    let (bob_id, bob) = new_guest("Bob").await;
    pb::games_client::GamesClient::new(ch.clone())
        .block_player(authed(
            &bob,
            pb::BlockPlayerRequest {
                player_id: ann_id.clone(),
            },
        ))
        .await
        .unwrap();
    let mut s1 = seek(&ch, &ann, POOL).await;
    let mut s2 = seek(&ch, &bob, POOL).await;
    // Several waves pass (2 s apart in tests? whatever the setting: wait for 3 s of them).
    let nothing = tokio::time::timeout(Duration::from_secs(3), async {
        tokio::select! {
            o = outcome(&mut s1) => o,
            o = outcome(&mut s2) => o,
        }
    })
    .await;
    assert!(nothing.is_err(), "a blocked pair was paired: {nothing:?}");
    let (cy_id, cy) = new_guest("Cy").await;
    let mut s3 = seek(&ch, &cy, POOL).await;
    let pb::seek_event::Kind::Paired(paired) = outcome(&mut s3).await else {
        panic!("Cy is paired");
    };
    let opponent = paired.opponent.unwrap().id;
    assert!(opponent == ann_id || opponent == bob_id, "{opponent}");
    assert_ne!(opponent, cy_id);
}
