//! A finished game whose `games.finished` entry is lost (trimmed off the stream before the ratings
//! consumer ran, as a Redis restart without persistence loses it) is rated by the ratings reconciler,
//! exactly once, from what the games service publishes (`Games.ListFinishedGames`, in process here);
//! that call is for the platform's services only; a game archived before the stored entry existed is
//! listed with an entry built from the stored game.

use std::time::{Duration, Instant};

use draughts_proto::pb;
use draughts_store::sqlx::{self, Row};
use draughtsd::{Config, Platform};

fn config(redis_url: &str, database_url: &str) -> Config {
    let mut config = Config::for_tests(redis_url, database_url);
    config.ratings.guest_games = draughts_ratings::config::Policy::Rate;
    config.ratings.reconcile_interval_ms = 50;
    config.ratings.reconcile_delay_ms = 0;
    config
}

fn authed<T>(token: &str, msg: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    req
}

async fn count(db: &draughts_store::Database, sql: &'static str) -> i64 {
    sqlx::query(sql)
        .fetch_one(db.pool())
        .await
        .unwrap()
        .try_get::<i64, _>(0)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_game_lost_from_the_stream_is_rated_from_what_games_publishes() {
    lost_game_is_rated(config("memory://", "sqlite::memory:")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_on_redis_and_postgres() {
    let redis =
        draughts_testkit::RedisServer::start().expect("redis-server (install: redis-server)");
    let pg = draughts_testkit::PostgresServer::start().expect("postgres (install: postgresql)");
    lost_game_is_rated(config(&redis.url(), &pg.url())).await;
}

async fn lost_game_is_rated(config: Config) {
    let backends = draughtsd::connect(&config).await.unwrap();
    let platform = Platform::new(&config, &backends).await.unwrap();
    let services = platform.services(&config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let server_config = config.server.clone();
    let serve_stop = stopped(stop_rx.clone());
    let server = tokio::spawn(async move {
        draughts_runtime::serve(&server_config, services, listener, serve_stop).await
    });
    // The games timers (which archive) run; the ratings consumer does not, yet.
    let timers = tokio::spawn(
        platform
            .validation
            .clone()
            .run_timers(stopped(stop_rx.clone())),
    );
    let channel = loop {
        match tonic::transport::Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
        {
            Ok(c) => break c,
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    let auth = pb::auth_client::AuthClient::new(channel.clone());
    let guest = |name: &str| {
        let request = pb::CreateGuestRequest {
            display_name: name.into(),
        };
        let mut auth = auth.clone();
        async move { auth.create_guest(request).await.unwrap().into_inner() }
    };
    let ann = guest("Ann").await;
    let bob = guest("Bob").await;
    let ann_id = ann.player.clone().unwrap().id;
    let game = draughts_testkit::agreed_game(
        &channel,
        &ann.token,
        &bob.token,
        pb::CreateGameRequest {
            rules: Some(pb::RuleSet {
                variant: pb::Variant::English as i32,
                options: None,
            }),
            time_control: Some(pb::TimeControl {
                kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                    base_ms: 300_000,
                    increment_ms: 0,
                })),
            }),
            white: Some(pb::Player {
                id: ann_id.clone(),
                ..Default::default()
            }),
            black: Some(pb::Player {
                id: bob.player.clone().unwrap().id,
                ..Default::default()
            }),
            rated: true,
            fen: String::new(),
            game_id: String::new(),
            berserk_allowed: false,
        },
    )
    .await
    .unwrap();
    let mut games = pb::games_client::GamesClient::new(channel.clone());
    for (token, mv) in [(&bob.token, "11-15"), (&ann.token, "23-19")] {
        games
            .play_move(authed(
                token,
                pb::PlayMoveRequest {
                    game_id: game.game_id.clone(),
                    r#move: Some(pb::MoveInput {
                        r#move: Some(pb::move_input::Move::Text(mv.into())),
                    }),
                    expected_ply: None,
                },
            ))
            .await
            .unwrap();
    }
    games
        .resign(authed(
            &bob.token,
            pb::GameActionRequest {
                game_id: game.game_id.clone(),
            },
        ))
        .await
        .unwrap();

    // Archived: the row is in the database and the entry on the stream; then the entry is lost.
    let deadline = Instant::now() + Duration::from_secs(20);
    while count(&backends.db, "SELECT COUNT(*) FROM finished_games").await == 0 {
        assert!(Instant::now() < deadline, "the game was never archived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stream = draughts_proto::contract::finished::STREAM;
    while backends.live.len(stream).await.unwrap() == 0 {
        assert!(Instant::now() < deadline, "the entry was never appended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    backends.live.trim(stream, 0).await.unwrap();
    assert_eq!(backends.live.len(stream).await.unwrap(), 0);

    // Games.ListFinishedGames: the service credential gets the game as its stream entry (without
    // its PDN); a player is refused.
    let admin = config.auth.admin_api_key.clone().unwrap();
    let list = |token: &str| {
        authed(
            token,
            pb::ListFinishedGamesRequest {
                rated_only: true,
                ..Default::default()
            },
        )
    };
    let denied = games
        .list_finished_games(list(&ann.token))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), tonic::Code::PermissionDenied, "{denied:?}");
    let listed = games
        .list_finished_games(list(&admin))
        .await
        .unwrap()
        .into_inner()
        .games;
    assert_eq!(listed.len(), 1);
    let entry = draughts_proto::contract::finished::decode(&listed[0].event).unwrap();
    assert_eq!(
        (entry.game_id.as_str(), entry.outcome, entry.pdn.as_str()),
        (
            game.game_id.as_str(),
            draughts_proto::contract::finished::Outcome::WhiteWins,
            ""
        )
    );
    assert_eq!(entry.finished_at_ms, listed[0].finished_at_ms);
    // A row archived before the entry was stored with it: the entry is built from the stored game.
    sqlx::query("UPDATE finished_games SET event = NULL")
        .execute(backends.db.pool())
        .await
        .unwrap();
    let legacy = games
        .list_finished_games(list(&admin))
        .await
        .unwrap()
        .into_inner()
        .games;
    assert_eq!(
        draughts_proto::contract::finished::decode(&legacy[0].event).unwrap(),
        draughts_proto::contract::finished::FinishedV1 {
            traceparent: None,
            ..entry
        }
    );

    // Now the ratings consumer (and its reconciler) run.
    let consumer = tokio::spawn(platform.ratings.clone().run_consumer(stopped(stop_rx)));
    let mut ratings = pb::ratings_client::RatingsClient::new(channel);
    loop {
        let rating = ratings
            .get_rating(authed(
                &ann.token,
                pb::GetRatingRequest {
                    player_id: ann_id.clone(),
                    category: Some(pb::RatingCategory {
                        variant: pb::Variant::English as i32,
                        speed: 0,
                    }),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        if rating.games == 1 {
            assert_eq!(rating.wins, 1);
            break;
        }
        assert!(Instant::now() < deadline, "the lost game was never rated");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Rated once, by the reconciler; more sweeps change nothing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        count(
            &backends.db,
            "SELECT COUNT(*) FROM rating_games WHERE source = 'reconcile'"
        )
        .await,
        1
    );
    assert_eq!(
        count(
            &backends.db,
            "SELECT CAST(SUM(games) AS BIGINT) FROM ratings"
        )
        .await,
        2
    );
    stop_tx.send(true).unwrap();
    let _ = consumer.await;
    let _ = timers.await;
    server.await.unwrap().unwrap();
}
