//! `draughts.v1.Ratings` through a real server on port 0 (embedded backends): every RPC, the admin scope
//! on RecordResult, idempotent imports, bad requests with their status codes, health.

use std::sync::Arc;

use draughts_proto::pb;
use draughts_proto::pb::ratings_client::RatingsClient;
use draughts_ratings::Config;
use draughts_testkit::ServiceUnderTest;
use tonic::Code;
use tonic::transport::Channel;

const ADMIN_KEY: &str = "dk_test_only_admin_key_0123456789abcdef";

/// The ratings service on 127.0.0.1:0 (the shared harness from testkit).
struct Server(ServiceUnderTest);

async fn start() -> Server {
    let mut config = Config::for_tests();
    // One game makes a rating established, so that short tests fill leaderboards.
    config.ratings.provisional_deviation = 340.0;
    config.auth.rate_limit_anonymous_per_minute = 1_000_000;
    config.auth.rate_limit_api_key_per_minute = 1_000_000;
    Server(
        ServiceUnderTest::start(|listener, shutdown| {
            draughts_ratings::run(config, listener, shutdown)
        })
        .await,
    )
}

impl Server {
    async fn channel(&self) -> Channel {
        self.0.channel().await
    }

    async fn stop(self) {
        self.0.stop().await
    }
}

fn with_token<T>(token: &str, msg: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    req
}

fn category(variant: pb::Variant, speed: pb::SpeedClass) -> Option<pb::RatingCategory> {
    Some(pb::RatingCategory {
        variant: variant as i32,
        speed: speed as i32,
    })
}

fn english() -> Option<pb::RatingCategory> {
    category(pb::Variant::English, pb::SpeedClass::Unspecified)
}

fn player(id: &str) -> Option<pb::Player> {
    Some(pb::Player {
        id: id.into(),
        ..Default::default()
    })
}

fn result(
    game_id: &str,
    white: &str,
    black: &str,
    outcome: pb::Outcome,
) -> pb::RecordResultRequest {
    pb::RecordResultRequest {
        game_id: game_id.into(),
        variant: pb::Variant::English as i32,
        time_control: None,
        white: player(white),
        black: player(black),
        outcome: outcome as i32,
        finished_at_ms: 0,
    }
}

#[tokio::test]
async fn every_rpc_through_a_real_server() {
    let server = start().await;
    let channel = server.channel().await;
    let mut client = RatingsClient::new(channel.clone());

    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let status = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "draughts.v1.Ratings".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.status, 1, "SERVING");

    // A new player has the starting rating.
    let new = client
        .get_rating(pb::GetRatingRequest {
            player_id: "player:ann".into(),
            category: english(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((new.rating, new.deviation, new.games), (1500.0, 350.0, 0));
    assert!(new.provisional);

    // Imports: ann beats bob twice, draws carl; an international blitz game.
    for (id, white, black, outcome) in [
        ("imp1", "player:ann", "player:bob", pb::Outcome::WhiteWins),
        ("imp2", "player:bob", "player:ann", pb::Outcome::BlackWins),
        ("imp3", "player:carl", "player:ann", pb::Outcome::Draw),
    ] {
        let r = client
            .record_result(with_token(ADMIN_KEY, result(id, white, black, outcome)))
            .await
            .unwrap()
            .into_inner();
        assert!(r.recorded && !r.pending, "{r:?}");
    }
    let mut blitz = result("imp4", "player:ann", "player:dan", pb::Outcome::BlackWins);
    blitz.variant = pb::Variant::International as i32;
    blitz.time_control = Some(pb::TimeControl {
        kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
            base_ms: 180_000,
            increment_ms: 2_000,
        })),
    });
    let r = client
        .record_result(with_token(ADMIN_KEY, blitz.clone()))
        .await
        .unwrap()
        .into_inner();
    let blitz_category = category(pb::Variant::International, pb::SpeedClass::Blitz);
    assert_eq!(r.white.as_ref().unwrap().category, blitz_category);
    assert_eq!(r.black.as_ref().unwrap().wins, 1);

    // The same game id again changes nothing.
    let again = client
        .record_result(with_token(ADMIN_KEY, blitz))
        .await
        .unwrap()
        .into_inner();
    assert!(!again.recorded);
    let (before, after) = (r.white.unwrap(), again.white.unwrap());
    assert_eq!((after.rating, after.games), (before.rating, before.games));

    let ann = client
        .get_rating(pb::GetRatingRequest {
            player_id: "player:ann".into(),
            category: english(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((ann.games, ann.wins, ann.draws, ann.losses), (3, 2, 1, 0));
    assert!(ann.rating > 1500.0 && ann.deviation < 350.0 && ann.last_game_at_ms > 0);

    let all = client
        .get_ratings(pb::GetRatingsRequest {
            player_id: "player:ann".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let categories: Vec<_> = all.ratings.iter().map(|r| r.category).collect();
    assert_eq!(categories, vec![blitz_category, english()]);

    // Leaderboard, two pages.
    let first = client
        .leaderboard(pb::LeaderboardRequest {
            category: english(),
            page_size: 2,
            page_token: String::new(),
            bots: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.entries.len(), 2);
    assert_eq!(first.entries[0].rank, 1);
    assert_eq!(
        first.entries[0].rating.as_ref().unwrap().player_id,
        "player:ann"
    );
    assert!(!first.next_page_token.is_empty());
    let second = client
        .leaderboard(pb::LeaderboardRequest {
            category: english(),
            page_size: 2,
            page_token: first.next_page_token.clone(),
            bots: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(second.entries.len(), 1);
    assert_eq!(second.entries[0].rank, 3);
    assert!(second.next_page_token.is_empty());
    // The BOTs' leaderboard: none of these players is a bot (an import takes the mark from the
    // identity registry, never from the request's `Player.bot`); a people's page token is refused there.
    let mut bot_claim = result("imp4", "player:dan", "player:eve", pb::Outcome::Draw);
    bot_claim.white.as_mut().unwrap().bot = true;
    client
        .record_result(with_token(ADMIN_KEY, bot_claim))
        .await
        .unwrap();
    let bots = client
        .leaderboard(pb::LeaderboardRequest {
            category: english(),
            page_size: 2,
            page_token: String::new(),
            bots: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(bots.entries.is_empty(), "{bots:?}");
    let status = client
        .leaderboard(pb::LeaderboardRequest {
            category: english(),
            page_size: 2,
            page_token: first.next_page_token.clone(),
            bots: true,
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");

    let history = client
        .rating_history(pb::RatingHistoryRequest {
            player_id: "player:ann".into(),
            category: english(),
            page_size: 0,
            page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let totals: Vec<u32> = history.entries.iter().map(|e| e.games_total).collect();
    assert_eq!(totals, vec![3, 2, 1]);
    assert_eq!(history.entries[2].game_id, "imp1");
    assert!(history.entries[2].rating_change > 0.0);

    let prediction = client
        .predict_result(pb::PredictResultRequest {
            player_a: "player:ann".into(),
            player_b: "player:bob".into(),
            category: english(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(prediction.expected_score_a > 0.5);
    assert!((prediction.expected_score_a + prediction.expected_score_b - 1.0).abs() < 1e-12);
    assert_eq!(prediction.rating_a.unwrap().rating, ann.rating);

    server.stop().await;
}

#[tokio::test]
async fn record_result_needs_the_admin_scope() {
    let server = start().await;
    let mut client = RatingsClient::new(server.channel().await);
    let req = || result("g", "player:a", "player:b", pb::Outcome::Draw);

    let anonymous = client.record_result(req()).await.unwrap_err();
    assert_eq!(anonymous.code(), Code::Unauthenticated);

    let bad = client
        .record_result(with_token("not-a-token", req()))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::Unauthenticated);

    // A guest token signed with the server's secret: authenticated, but without the admin scope.
    let auth = draughts_auth::Authenticator::new(
        draughts_auth::AuthConfig::for_tests(),
        Arc::new(draughts_store::MemoryStore::new()),
    )
    .unwrap();
    let guest = auth.issue_guest("Gus").unwrap();
    let denied = client
        .record_result(with_token(&guest.token, req()))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
    assert_eq!(denied.message(), "this call needs the admin scope");

    // Reads are anonymous; nothing was recorded.
    let rating = client
        .get_rating(pb::GetRatingRequest {
            player_id: "player:a".into(),
            category: english(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(rating.games, 0);
    server.stop().await;
}

#[tokio::test]
async fn bad_requests_are_invalid_arguments() {
    let server = start().await;
    let mut client = RatingsClient::new(server.channel().await);
    let get = |player_id: &str, category: Option<pb::RatingCategory>| pb::GetRatingRequest {
        player_id: player_id.into(),
        category,
    };
    for req in [
        get("player:a", None),
        get("", english()),
        get(&"x".repeat(200), english()),
        get(
            "player:a",
            category(pb::Variant::Unspecified, pb::SpeedClass::Unspecified),
        ),
        get(
            "player:a",
            category(pb::Variant::English, pb::SpeedClass::Blitz),
        ),
        get(
            "player:a",
            Some(pb::RatingCategory {
                variant: 99,
                speed: 0,
            }),
        ),
    ] {
        let status = client.get_rating(req.clone()).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{req:?}: {status:?}");
    }
    for (page_size, page_token) in [(500, ""), (10, "zz"), (10, "4c317c")] {
        let status = client
            .leaderboard(pb::LeaderboardRequest {
                category: english(),
                page_size,
                page_token: page_token.into(),
                bots: false,
            })
            .await
            .unwrap_err();
        assert_eq!(
            status.code(),
            Code::InvalidArgument,
            "{page_size} {page_token}"
        );
    }
    let mut same = result("g", "player:a", "player:a", pb::Outcome::Draw);
    let status = client
        .record_result(with_token(ADMIN_KEY, same.clone()))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    same.black = player("player:b");
    same.outcome = pb::Outcome::Ongoing as i32;
    let status = client
        .record_result(with_token(ADMIN_KEY, same))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("outcome"), "{}", status.message());
    server.stop().await;
}
