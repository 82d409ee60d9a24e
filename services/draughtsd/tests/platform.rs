//! The one-process platform serves every service on one port, on embedded backends by default and on
//! Redis (one server, or a 3-primary Redis Cluster) and PostgreSQL when their URLs are given (real
//! servers started by the test on free ports).

use draughts_proto::pb;
use draughtsd::Config;

fn config(redis_url: &str, database_url: &str) -> Config {
    let mut config = Config::for_tests(redis_url, database_url);
    // The test's players are guests.
    config.ratings.guest_games = draughts_ratings::config::Policy::Rate;
    config
}

async fn exercise(config: Config) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(draughtsd::run(config, listener, async {
        let _ = rx.await;
    }));
    let channel = loop {
        match tonic::transport::Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
        {
            Ok(c) => break c,
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    };
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    for service in ["", "draughts.v1.Rules", "draughts.v1.Ratings"] {
        let r = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.status, 1, "{service} should be SERVING");
    }
    let mut rules = pb::rules_client::RulesClient::new(channel.clone());
    let r = rules
        .list_moves(pb::ListMovesRequest {
            rules: Some(pb::RuleSet {
                variant: pb::Variant::International as i32,
                options: None,
            }),
            fen: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.moves.len(), 9);
    a_computer_move_is_answered(channel.clone()).await;
    a_finished_game_is_rated(channel.clone()).await;
    a_guest_who_signs_up_keeps_its_games_and_ratings(channel).await;
    let _ = tx.send(());
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn embedded_backends_by_default() {
    exercise(config("memory://", "sqlite::memory:")).await;
}

#[tokio::test]
async fn redis_and_postgres_when_given() {
    let redis =
        draughts_testkit::RedisServer::start().expect("redis-server (install: redis-server)");
    let pg = draughts_testkit::PostgresServer::start().expect("postgres (install: postgresql)");
    exercise(config(&redis.url(), &pg.url())).await;
}

/// The whole platform on a 3-primary Redis Cluster (`redis+cluster://` URL): games with their
/// clocks, the computer's moves through the analysis queue, ratings from `games.finished`.
#[tokio::test]
async fn a_redis_cluster_and_postgres_when_given() {
    let cluster = draughts_testkit::RedisCluster::start()
        .expect("redis cluster (install: redis-server, redis-tools)");
    let pg = draughts_testkit::PostgresServer::start().expect("postgres (install: postgresql)");
    exercise(config(&cluster.url(), &pg.url())).await;
}

/// Shutdown is prompt even when Redis has gone away: every background loop's round waits for its store
/// calls' errors, and shutdown cuts a round after `ROUND_GRACE` (the exit once took over ten minutes, a
/// matchmaking tick reading hundreds of pools one failed call after another).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_is_prompt_with_redis_gone() {
    let redis =
        draughts_testkit::RedisServer::start().expect("redis-server (install: redis-server)");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(draughtsd::run(
        config(&redis.url(), "sqlite::memory:"),
        listener,
        async {
            let _ = rx.await;
        },
    ));
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    drop(redis);
    // Let the loops meet the dead store.
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    let asked = std::time::Instant::now();
    let _ = tx.send(());
    let ended = tokio::time::timeout(std::time::Duration::from_secs(15), server).await;
    assert!(ended.is_ok(), "still running 15 s after shutdown was asked");
    assert!(
        asked.elapsed() < draughts_runtime::ROUND_GRACE + std::time::Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
}

#[tokio::test]
async fn a_wrong_backend_url_fails_fast() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let err = draughtsd::run(
        config("mysql://x", "sqlite::memory:"),
        listener,
        std::future::pending(),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("redis-url"), "{err}");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = draughts_testkit::free_port().unwrap();
    let err = draughtsd::run(
        config(&format!("redis://127.0.0.1:{port}"), "sqlite::memory:"),
        listener,
        std::future::pending(),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("backend"), "{err}");
}

fn authed<T>(token: &str, msg: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    req
}

/// Games -> `games.finished` stream -> the ratings consumer running in the background -> Ratings.
async fn a_finished_game_is_rated(channel: tonic::transport::Channel) {
    let auth = pb::auth_client::AuthClient::new(channel.clone());
    let guest = |name: &'static str| {
        let mut auth = auth.clone();
        async move {
            auth.create_guest(pb::CreateGuestRequest {
                display_name: name.into(),
            })
            .await
            .unwrap()
            .into_inner()
        }
    };
    let ann = guest("Ann").await;
    let bob = guest("Bob").await;
    let (ann_id, bob_id) = (ann.player.unwrap().id, bob.player.unwrap().id);
    let mut games = pb::games_client::GamesClient::new(channel.clone());
    // Ann invites Bob, Bob accepts; both sides move (a game that ends before that is aborted).
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
                id: bob_id.clone(),
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
                game_id: game.game_id,
            },
        ))
        .await
        .unwrap();
    let mut ratings = pb::ratings_client::RatingsClient::new(channel);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let rating = ratings
            .get_rating(pb::GetRatingRequest {
                player_id: ann_id.clone(),
                category: Some(pb::RatingCategory {
                    variant: pb::Variant::English as i32,
                    speed: 0,
                }),
            })
            .await
            .unwrap()
            .into_inner();
        if rating.games == 1 {
            assert_eq!(rating.wins, 1);
            assert!(rating.rating > 1500.0);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the finished game was not rated"
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

/// An identity-provider token for subject `sub`, signed with the test configuration's key.
fn player_token(sub: &str) -> String {
    let secret = draughts_validation::auth::AuthConfig::for_tests()
        .jwt_key
        .unwrap();
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &serde_json::json!({"sub": sub, "name": "Gus Signed", "exp": exp}),
        &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()).unwrap(),
    )
    .unwrap()
}

/// A guest plays and wins a rated game, then signs up and links the guest to its account
/// (`Auth.LinkGuest`): the game is listed under the account and the rating is the account's. Only
/// once, only by an account, only with the guest's own token.
async fn a_guest_who_signs_up_keeps_its_games_and_ratings(channel: tonic::transport::Channel) {
    let mut auth = pb::auth_client::AuthClient::new(channel.clone());
    let mut games = pb::games_client::GamesClient::new(channel.clone());
    let mut new_guest = async |name: &str| {
        auth.create_guest(pb::CreateGuestRequest {
            display_name: name.into(),
        })
        .await
        .unwrap()
        .into_inner()
    };
    let gus = new_guest("Gus").await;
    let hal = new_guest("Hal").await;
    let gus_id = gus.player.unwrap().id;
    let hal_id = hal.player.unwrap().id;
    let game = draughts_testkit::agreed_game(
        &channel,
        &gus.token,
        &hal.token,
        pb::CreateGameRequest {
            rules: Some(pb::RuleSet {
                variant: pb::Variant::Russian as i32,
                options: None,
            }),
            time_control: Some(pb::TimeControl {
                kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                    base_ms: 300_000,
                    increment_ms: 0,
                })),
            }),
            white: Some(pb::Player {
                id: gus_id.clone(),
                ..Default::default()
            }),
            black: Some(pb::Player {
                id: hal_id.clone(),
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
    for (token, mv) in [(&gus.token, "c3-d4"), (&hal.token, "f6-e5")] {
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
            &hal.token,
            pb::GameActionRequest {
                game_id: game.game_id.clone(),
            },
        ))
        .await
        .unwrap();
    let ratings = pb::ratings_client::RatingsClient::new(channel.clone());
    let category = Some(pb::RatingCategory {
        variant: pb::Variant::Russian as i32,
        speed: 0,
    });
    let rating_of = |id: String| {
        let mut ratings = ratings.clone();
        async move {
            ratings
                .get_rating(pb::GetRatingRequest {
                    player_id: id,
                    category,
                })
                .await
                .unwrap()
                .into_inner()
        }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while rating_of(gus_id.clone()).await.games != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the guest's game was not rated"
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let guest_rating = rating_of(gus_id.clone()).await.rating;
    // Only an account may take a guest over: a guest cannot.
    let e = auth
        .link_guest(authed(
            &hal.token,
            pb::LinkGuestRequest {
                guest_token: gus.token.clone(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied);
    // A forged guest token proves nothing.
    let e = auth
        .link_guest(authed(
            &player_token("gus-account"),
            pb::LinkGuestRequest {
                guest_token: format!("{}x", gus.token),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated);
    let account = player_token("gus-account");
    let linked = auth
        .link_guest(authed(
            &account,
            pb::LinkGuestRequest {
                guest_token: gus.token.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(linked.linked_now);
    assert_eq!(
        (linked.guest_id.as_str(), linked.player_id.as_str()),
        (gus_id.as_str(), "player:gus-account")
    );
    // Again: no change. By another account: refused.
    let again = auth
        .link_guest(authed(
            &account,
            pb::LinkGuestRequest {
                guest_token: gus.token.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(!again.linked_now);
    let e = auth
        .link_guest(authed(
            &player_token("someone-else"),
            pb::LinkGuestRequest {
                guest_token: gus.token.clone(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition);
    // The guest's own token no longer works (the account acts from now on): the layer refuses it
    // before the call could be judged on its merits.
    let e = auth
        .link_guest(authed(
            &gus.token,
            pb::LinkGuestRequest {
                guest_token: gus.token.clone(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated);
    assert!(e.message().contains("linked"), "{}", e.message());
    // The game and the rating are the account's now.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let listed = games
            .list_games(pb::ListGamesRequest {
                player_id: "player:gus-account".into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let rating = rating_of("player:gus-account".into()).await;
        if listed.recent.iter().any(|g| g.game_id == game.game_id) && rating.games == 1 {
            assert_eq!(rating.rating, guest_rating);
            assert_eq!(rating_of(gus_id.clone()).await.games, 0);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the linked guest's game and rating did not move"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Analysis on the platform's own workers (embedded: no Redis at all): a guest asks BestMove.
async fn a_computer_move_is_answered(channel: tonic::transport::Channel) {
    let mut auth = pb::auth_client::AuthClient::new(channel.clone());
    let guest = auth
        .create_guest(pb::CreateGuestRequest {
            display_name: "bot".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut analysis = pb::analysis_client::AnalysisClient::new(channel);
    let answer = analysis
        .best_move(authed(
            &guest.token,
            pb::BestMoveRequest {
                source: Some(pb::best_move_request::Source::Position(pb::PositionInput {
                    rules: Some(pb::RuleSet {
                        variant: pb::Variant::International as i32,
                        options: None,
                    }),
                    fen: String::new(),
                    moves: vec![],
                })),
                strength: Some(pb::best_move_request::Strength::Level(3)),
                clock: None,
                seed: 7,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(answer.r#move.is_some_and(|m| !m.notation.is_empty()));
    assert_eq!(answer.depth, 3);
}

/// Complete games against the computer through Games, on the embedded backends: the person plays the
/// first legal move each turn; the computer (`ai:1` to `ai:8`, in five variants) answers through the
/// analysis queue and the in-process workers until the rules end the game.
#[tokio::test]
async fn complete_games_against_the_computer() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    // The test polls (a client would hold WatchGame open): limits out of the way.
    let mut config = config("memory://", "sqlite::memory:");
    config.auth.rate_limit_guest_per_minute = 1_000_000;
    config.auth.rate_limit_anonymous_per_minute = 1_000_000;
    let server = tokio::spawn(draughtsd::run(config, listener, async {
        let _ = rx.await;
    }));
    let channel = loop {
        match tonic::transport::Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
        {
            Ok(c) => break c,
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    };
    let me = pb::auth_client::AuthClient::new(channel.clone())
        .create_guest(pb::CreateGuestRequest {
            display_name: "Me".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let my_id = me.player.unwrap().id;
    let mut games = pb::games_client::GamesClient::new(channel.clone());
    for (variant, level) in [
        (pb::Variant::English, 1),
        (pb::Variant::Russian, 3),
        (pb::Variant::Turkish, 2),
        (pb::Variant::Antidraughts, 2),
        (pb::Variant::International, 8),
    ] {
        let computer = format!("ai:{level}");
        let game = games
            .create_game(authed(
                &me.token,
                pb::CreateGameRequest {
                    rules: Some(pb::RuleSet {
                        variant: variant as i32,
                        options: None,
                    }),
                    time_control: Some(pb::TimeControl {
                        kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                            base_ms: 3_600_000,
                            increment_ms: 0,
                        })),
                    }),
                    white: Some(pb::Player {
                        id: my_id.clone(),
                        ..Default::default()
                    }),
                    black: Some(pb::Player {
                        id: computer.clone(),
                        ..Default::default()
                    }),
                    rated: false,
                    fen: String::new(),
                    game_id: String::new(),
                    berserk_allowed: false,
                },
            ))
            .await
            .unwrap()
            .into_inner();
        assert!(game.black.as_ref().unwrap().computer);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(240);
        let computer_moves;
        let status = loop {
            assert!(
                std::time::Instant::now() < deadline,
                "{variant:?} against {computer} did not end"
            );
            let view = games
                .get_game(pb::GetGameRequest {
                    game_id: game.game_id.clone(),
                })
                .await
                .unwrap()
                .into_inner();
            let status = view.status.clone().unwrap();
            if status.outcome != pb::Outcome::Ongoing as i32 {
                computer_moves = view
                    .moves
                    .iter()
                    .filter(|m| m.side == pb::Color::Black as i32)
                    .count();
                break status;
            }
            let position = view.position.unwrap();
            if position.side_to_move != pb::Color::White as i32 {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                continue;
            }
            let moves = pb::rules_client::RulesClient::new(channel.clone())
                .list_moves(authed(
                    &me.token,
                    pb::ListMovesRequest {
                        rules: view.rules,
                        fen: position.fen,
                    },
                ))
                .await
                .unwrap()
                .into_inner()
                .moves;
            games
                .play_move(authed(
                    &me.token,
                    pb::PlayMoveRequest {
                        game_id: game.game_id.clone(),
                        r#move: Some(pb::MoveInput {
                            r#move: Some(pb::move_input::Move::Text(moves[0].notation.clone())),
                        }),
                        expected_ply: Some(view.moves.len() as u32),
                    },
                ))
                .await
                .unwrap();
        };
        assert!(computer_moves > 0, "{variant:?}: the computer moved");
        assert_ne!(status.outcome, pb::Outcome::Aborted as i32, "{status:?}");
        assert_ne!(status.reason, pb::EndReason::Time as i32, "{status:?}");
        if level == 8 {
            assert_eq!(
                status.outcome,
                pb::Outcome::BlackWins as i32,
                "level 8 beats first-legal-move play: {status:?}"
            );
        }
    }
    let _ = tx.send(());
    server.await.unwrap().unwrap();
}

/// A separately run Games service (`draughts-validation` with `--analysis-url`) has its `ai:` players
/// moved by `Analysis.BestMove` over gRPC: here the analysis of a draughtsd process.
#[tokio::test]
async fn a_separate_games_service_asks_the_analysis_service_for_computer_moves() {
    let analysis_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let analysis_addr = analysis_listener.local_addr().unwrap();
    let (stop_analysis, analysis_stopped) = tokio::sync::oneshot::channel::<()>();
    let analysis = tokio::spawn(draughtsd::run(
        config("memory://", "sqlite::memory:"),
        analysis_listener,
        async {
            let _ = analysis_stopped.await;
        },
    ));
    let games_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let games_addr = games_listener.local_addr().unwrap();
    let mut games_config = draughts_validation::Config::for_tests();
    games_config.analysis_url = Some(format!("http://{analysis_addr}"));
    games_config.analysis_api_key =
        draughts_validation::auth::AuthConfig::for_tests().admin_api_key;
    let (stop_games, games_stopped) = tokio::sync::oneshot::channel::<()>();
    let games_server = tokio::spawn(draughts_validation::run(
        games_config,
        games_listener,
        async {
            let _ = games_stopped.await;
        },
    ));
    let channel = loop {
        match tonic::transport::Channel::from_shared(format!("http://{games_addr}"))
            .unwrap()
            .connect()
            .await
        {
            Ok(c) => break c,
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    };
    let me = pb::auth_client::AuthClient::new(channel.clone())
        .create_guest(pb::CreateGuestRequest {
            display_name: "Me".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let my_id = me.player.unwrap().id;
    let mut games = pb::games_client::GamesClient::new(channel);
    // International: White (the computer) moves first, at once.
    let game = games
        .create_game(authed(
            &me.token,
            pb::CreateGameRequest {
                rules: Some(pb::RuleSet {
                    variant: pb::Variant::International as i32,
                    options: None,
                }),
                time_control: Some(pb::TimeControl {
                    kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                        base_ms: 600_000,
                        increment_ms: 0,
                    })),
                }),
                white: Some(pb::Player {
                    id: "ai:2".into(),
                    ..Default::default()
                }),
                black: Some(pb::Player {
                    id: my_id,
                    ..Default::default()
                }),
                rated: false,
                fen: String::new(),
                game_id: String::new(),
                berserk_allowed: false,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let view = games
            .get_game(authed(
                &me.token,
                pb::GetGameRequest {
                    game_id: game.game_id.clone(),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        if let Some(first) = view.moves.first() {
            assert_eq!(first.side, pb::Color::White as i32);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the computer did not move"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let _ = stop_games.send(());
    games_server.await.unwrap().unwrap();
    let _ = stop_analysis.send(());
    analysis.await.unwrap().unwrap();
}
