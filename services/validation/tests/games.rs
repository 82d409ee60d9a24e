//! Live games through gRPC: complete games in every variant, turns and players enforced, a race for the
//! same move, a late spectator, PDN export, tokens and scopes, and two replicas sharing one Redis (and
//! PostgreSQL) with one of them stopped mid-game.

use draughts_engine::{Count, Position, RuleSet, Variant};
use draughts_proto::pb;
use draughts_proto::pb::games_client::GamesClient;
use draughts_proto::{convert, reason_of};
use draughts_validation::Config;

/// The test configuration with rate limits out of the way (they have their own tests in auth.rs).
fn config() -> Config {
    let mut c = Config::for_tests();
    c.auth.rate_limit_guest_per_minute = 1_000_000;
    c.auth.rate_limit_anonymous_per_minute = 1_000_000;
    c
}
use draughts_testkit::{Guest, ServiceUnderTest, authed, guest};
use tonic::Code;
use tonic::transport::Channel;

/// A validation replica on 127.0.0.1:0 (the shared harness from testkit).
struct Server(ServiceUnderTest);

impl Server {
    async fn start(config: Config) -> Server {
        Server(
            ServiceUnderTest::start(|listener, shutdown| {
                draughts_validation::run(config, listener, shutdown)
            })
            .await,
        )
    }

    async fn channel(&self) -> Channel {
        self.0.channel().await
    }

    /// Kills the replica: its task is aborted, nothing is drained or flushed.
    async fn kill(self) {
        self.0.kill().await
    }

    async fn stop(self) {
        self.0.stop().await
    }
}

fn create_req(v: Variant, white: &Guest, black: &Guest, fen: &str) -> pb::CreateGameRequest {
    pb::CreateGameRequest {
        rules: Some(convert::rules_to_wire(RuleSet::new(v))),
        time_control: Some(pb::TimeControl {
            kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                base_ms: 600_000,
                increment_ms: 1_000,
            })),
        }),
        white: Some(pb::Player {
            id: white.id.clone(),
            ..Default::default()
        }),
        black: Some(pb::Player {
            id: black.id.clone(),
            ..Default::default()
        }),
        rated: true,
        fen: fen.into(),
        game_id: String::new(),
        berserk_allowed: false,
    }
}

/// `t`'s PlayMove request for move text `m` in game `id`.
fn play_req(t: &Guest, id: &str, m: &str) -> tonic::Request<pb::PlayMoveRequest> {
    authed(
        &t.token,
        pb::PlayMoveRequest {
            game_id: id.to_string(),
            r#move: text(m),
            expected_ply: None,
        },
    )
}

fn text(t: &str) -> Option<pb::MoveInput> {
    Some(pb::MoveInput {
        r#move: Some(pb::move_input::Move::Text(t.into())),
    })
}

/// A deterministic pseudo-random choice (xorshift), so games differ per variant but not per run.
fn pick(seed: &mut u64, n: usize) -> usize {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    (*seed % n as u64) as usize
}

#[tokio::test]
async fn complete_games_in_every_variant() {
    let server = Server::start(config()).await;
    let ch = server.channel().await;
    let mut games = GamesClient::new(ch.clone());
    let white = guest(&ch, "White").await;
    let black = guest(&ch, "Black").await;
    for (i, v) in Variant::ALL.into_iter().enumerate() {
        let game = draughts_testkit::agreed_game(
            &ch,
            &white.token,
            &black.token,
            create_req(v, &white, &black, ""),
        )
        .await
        .unwrap();
        let id = game.game_id.clone();
        let mut pos = Position::start(v);
        let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ (i as u64 + 1);
        let mut view = game;
        let mut plies = 0u32;
        for _ in 0..600 {
            if view.status.as_ref().unwrap().outcome != pb::Outcome::Ongoing as i32 {
                break;
            }
            let mut moves = Vec::new();
            pos.legal_moves_into(&mut moves, Count::Unique);
            let mv = moves[pick(&mut seed, moves.len())];
            let mover = if pos.side_to_move() == draughts_engine::Color::White {
                &white
            } else {
                &black
            };
            view = games
                .play_move(authed(
                    &mover.token,
                    pb::PlayMoveRequest {
                        game_id: id.clone(),
                        r#move: text(&pos.move_to_text(&mv)),
                        expected_ply: Some(plies),
                    },
                ))
                .await
                .unwrap_or_else(|e| panic!("{v}: {e:?}"))
                .into_inner();
            plies += 1;
            // Actions answer with the last move only.
            assert_eq!(view.first_ply, plies);
            assert_eq!(view.moves.len(), 1);
            assert_eq!(view.moves[0].ply, plies);
            pos = pos.play_unchecked(&mv);
            assert_eq!(view.position.as_ref().unwrap().fen, pos.to_fen());
        }
        let status = view.status.clone().unwrap();
        if status.outcome == pb::Outcome::Ongoing as i32 {
            // Very long random game: end it by resignation to check that path too.
            view = games
                .resign(authed(
                    &white.token,
                    pb::GameActionRequest {
                        game_id: id.clone(),
                    },
                ))
                .await
                .unwrap()
                .into_inner();
        }
        let status = view.status.unwrap();
        assert_ne!(status.outcome, pb::Outcome::Ongoing as i32, "{v}");
        assert!(
            !status.result.is_empty() && status.result != "*",
            "{v}: {status:?}"
        );
        let pdn = games
            .export_pdn(pb::GetGameRequest {
                game_id: id.clone(),
            })
            .await
            .unwrap()
            .into_inner()
            .pdn;
        assert!(
            pdn.contains(&format!("[GameType \"{}\"]", v.pdn_game_type())),
            "{pdn}"
        );
        assert!(
            pdn.contains(&format!("[Result \"{}\"]", status.result)),
            "{pdn}"
        );
        assert!(pdn.contains("1. "), "{pdn}");
        // Moves after the end are refused.
        let e = games
            .resign(authed(
                &black.token,
                pb::GameActionRequest {
                    game_id: id.clone(),
                },
            ))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "{v}");
    }
    // Both players' recent games list them.
    let list = games
        .list_games(pb::ListGamesRequest {
            player_id: white.id.clone(),
            limit: 50,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.recent.len(), Variant::ALL.len());
    assert!(list.ongoing.is_empty());
    server.stop().await;
}

#[tokio::test]
async fn only_the_players_and_only_on_their_turn() {
    let server = Server::start(config()).await;
    let ch = server.channel().await;
    let mut games = GamesClient::new(ch.clone());
    let (w, b, other) = (
        guest(&ch, "W").await,
        guest(&ch, "B").await,
        guest(&ch, "X").await,
    );
    let g = draughts_testkit::agreed_game(
        &ch,
        &w.token,
        &b.token,
        create_req(Variant::International, &w, &b, ""),
    )
    .await
    .unwrap();
    let id = g.game_id.clone();
    let play = |t: &Guest, m: &str| play_req(t, &id, m);
    // Not a player.
    let e = games.play_move(play(&other, "32-28")).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert_eq!(reason_of(&e), Some(pb::ErrorReason::NotAPlayer));
    // Not your turn: the status, its English text and the reason a client words itself.
    let e = games.play_move(play(&b, "19-23")).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(e.message().contains("not your turn"), "{}", e.message());
    assert_eq!(reason_of(&e), Some(pb::ErrorReason::NotYourTurn));
    // A stale view (the expected ply is not the game's).
    let e = games
        .play_move(authed(
            &w.token,
            pb::PlayMoveRequest {
                game_id: id.clone(),
                r#move: text("32-28"),
                expected_ply: Some(5),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(
        e.message()
            .contains("expected ply 5 but the game is at ply 0"),
        "{e:?}"
    );
    assert_eq!(reason_of(&e), Some(pb::ErrorReason::StalePly));
    // Illegal and malformed moves.
    let e = games.play_move(play(&w, "32-26")).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    let e = games.play_move(play(&w, "32-")).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    // No token; bad token; a stranger creating a game for others.
    let e = games
        .play_move(pb::PlayMoveRequest {
            game_id: id.clone(),
            r#move: text("32-28"),
            expected_ply: None,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    let e = games
        .play_move(authed(
            "not-a-token",
            pb::PlayMoveRequest {
                game_id: id.clone(),
                r#move: text("32-28"),
                expected_ply: None,
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    let e = games
        .create_game(authed(
            &other.token,
            create_req(Variant::International, &w, &b, ""),
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    // Unknown game.
    let e = games
        .get_game(pb::GetGameRequest {
            game_id: "g0000".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(reason_of(&e), Some(pb::ErrorReason::NoSuchGame));
    // An illegal move has no reason of its own (its message names the move).
    let e = games.play_move(play(&w, "32-26")).await.unwrap_err();
    assert_eq!(reason_of(&e), None, "{e:?}");
    // Draw offer, decline; offer, accept.
    games.play_move(play(&w, "32-28")).await.unwrap();
    let v = games
        .offer_draw(authed(
            &b.token,
            pb::GameActionRequest {
                game_id: id.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(v.draw_offer, pb::Color::Black as i32);
    let e = games
        .accept_draw(authed(
            &b.token,
            pb::GameActionRequest {
                game_id: id.clone(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    games
        .decline_draw(authed(
            &w.token,
            pb::GameActionRequest {
                game_id: id.clone(),
            },
        ))
        .await
        .unwrap();
    // Both sides move before the draw is agreed (an agreement before that aborts: tests/consent.rs).
    games.play_move(play(&b, "19-23")).await.unwrap();
    games
        .offer_draw(authed(
            &w.token,
            pb::GameActionRequest {
                game_id: id.clone(),
            },
        ))
        .await
        .unwrap();
    // Too late to abort? Only one ply so far: abort is still allowed, but accept the draw instead.
    let v = games
        .accept_draw(authed(
            &b.token,
            pb::GameActionRequest {
                game_id: id.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let st = v.status.unwrap();
    assert_eq!(st.outcome, pb::Outcome::Draw as i32);
    assert_eq!(st.reason, pb::EndReason::Agreement as i32);
    assert_eq!(st.result, "1-1");
    server.stop().await;
}

#[tokio::test]
async fn a_raced_move_is_applied_once() {
    let server = Server::start(config()).await;
    let ch = server.channel().await;
    let (w, b) = (guest(&ch, "W").await, guest(&ch, "B").await);
    let mut games = GamesClient::new(ch.clone());
    let g = draughts_testkit::agreed_game(
        &ch,
        &w.token,
        &b.token,
        create_req(Variant::English, &w, &b, ""),
    )
    .await
    .unwrap();
    let mut handles = Vec::new();
    for _ in 0..8 {
        let mut c = GamesClient::new(server.channel().await);
        let req = authed(
            &b.token,
            pb::PlayMoveRequest {
                game_id: g.game_id.clone(),
                r#move: text("11-15"),
                expected_ply: None,
            },
        );
        handles.push(tokio::spawn(async move { c.play_move(req).await }));
    }
    let mut ok = 0;
    for h in handles {
        match h.await.unwrap() {
            Ok(_) => ok += 1,
            Err(e) => assert!(
                matches!(e.code(), Code::Aborted | Code::FailedPrecondition),
                "a clean error, got {e:?}"
            ),
        }
    }
    assert_eq!(ok, 1);
    let v = games
        .get_game(pb::GetGameRequest {
            game_id: g.game_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(v.moves.len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn a_late_spectator_gets_the_history_then_live_events() {
    use tokio_stream::StreamExt;
    let server = Server::start(config()).await;
    let ch = server.channel().await;
    let (w, b) = (guest(&ch, "W").await, guest(&ch, "B").await);
    let mut games = GamesClient::new(ch.clone());
    let g = draughts_testkit::agreed_game(
        &ch,
        &w.token,
        &b.token,
        create_req(Variant::Russian, &w, &b, ""),
    )
    .await
    .unwrap();
    let id = g.game_id.clone();
    let play = |t: &Guest, m: &str| play_req(t, &id, m);
    games.play_move(play(&w, "c3-d4")).await.unwrap();
    games.play_move(play(&b, "f6-e5")).await.unwrap();
    let mut watch = GamesClient::new(server.channel().await)
        .watch_game(pb::WatchGameRequest {
            game_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut kinds = Vec::new();
    for _ in 0..3 {
        let e = watch.next().await.unwrap().unwrap();
        kinds.push(e.kind.unwrap());
    }
    assert!(matches!(kinds[0], pb::game_event::Kind::Created(_)));
    assert!(
        matches!(&kinds[1], pb::game_event::Kind::MovePlayed(m) if m.r#move.as_ref().unwrap().notation == "c3-d4")
    );
    assert!(
        matches!(&kinds[2], pb::game_event::Kind::MovePlayed(m) if m.r#move.as_ref().unwrap().notation == "f6-e5")
    );
    // Live: a capture, a draw offer, then resignation ends the stream.
    games.play_move(play(&w, "d4xf6")).await.unwrap();
    let e = watch.next().await.unwrap().unwrap();
    match e.kind.unwrap() {
        pb::game_event::Kind::MovePlayed(m) => {
            assert_eq!(m.r#move.as_ref().unwrap().notation, "d4:f6");
            assert!(m.clocks.is_some());
        }
        other => panic!("{other:?}"),
    }
    games
        .offer_draw(authed(
            &w.token,
            pb::GameActionRequest {
                game_id: id.clone(),
            },
        ))
        .await
        .unwrap();
    assert!(
        matches!(watch.next().await.unwrap().unwrap().kind.unwrap(), pb::game_event::Kind::DrawOffered(c) if c == pb::Color::White as i32)
    );
    games
        .resign(authed(
            &b.token,
            pb::GameActionRequest {
                game_id: id.clone(),
            },
        ))
        .await
        .unwrap();
    match watch.next().await.unwrap().unwrap().kind.unwrap() {
        pb::game_event::Kind::Finished(s) => {
            assert_eq!(s.reason, pb::EndReason::Resignation as i32)
        }
        other => panic!("{other:?}"),
    }
    assert!(
        watch.next().await.is_none(),
        "the stream ends with the game"
    );
    server.stop().await;
}

#[tokio::test]
async fn abort_only_before_both_sides_moved() {
    let server = Server::start(config()).await;
    let ch = server.channel().await;
    let (w, b) = (guest(&ch, "W").await, guest(&ch, "B").await);
    let mut games = GamesClient::new(ch.clone());
    let g = draughts_testkit::agreed_game(
        &ch,
        &w.token,
        &b.token,
        create_req(Variant::Czech, &w, &b, ""),
    )
    .await
    .unwrap();
    let v = games
        .abort(authed(
            &b.token,
            pb::GameActionRequest {
                game_id: g.game_id.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(v.status.unwrap().outcome, pb::Outcome::Aborted as i32);
    let g = draughts_testkit::agreed_game(
        &ch,
        &w.token,
        &b.token,
        create_req(Variant::Czech, &w, &b, ""),
    )
    .await
    .unwrap();
    let id = g.game_id.clone();
    let play = |t: &Guest, m: &str| play_req(t, &id, m);
    games.play_move(play(&w, "c3-d4")).await.unwrap();
    games.play_move(play(&b, "f6-g5")).await.unwrap();
    let e = games
        .abort(authed(
            &w.token,
            pb::GameActionRequest {
                game_id: id.clone(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    server.stop().await;
}

/// Two replicas share one Redis and one PostgreSQL: moves alternate between them, a watcher on one sees
/// moves made on the other, a move raced across them is applied once, and after one replica is killed
/// the game goes on from the other.
#[tokio::test]
async fn two_replicas_share_redis_and_survive_a_stop() {
    use tokio_stream::StreamExt;
    let redis = draughts_testkit::RedisServer::start().expect("redis-server");
    let pg = draughts_testkit::PostgresServer::start().expect("postgresql");
    let config = || {
        let mut c = config();
        c.backends.redis_url = redis.url();
        c.backends.database_url = pg.url();
        c
    };
    let a = Server::start(config()).await;
    let b_server = Server::start(config()).await;
    let (ca, cb) = (a.channel().await, b_server.channel().await);
    let (w, b) = (guest(&ca, "W").await, guest(&cb, "B").await);
    let (mut ga, mut gb) = (GamesClient::new(ca.clone()), GamesClient::new(cb.clone()));
    let g = draughts_testkit::agreed_game(
        &ca,
        &w.token,
        &b.token,
        create_req(Variant::English, &w, &b, ""),
    )
    .await
    .unwrap();
    let id = g.game_id.clone();
    let play = |t: &Guest, m: &str| play_req(t, &id, m);
    let mut watch = gb
        .watch_game(pb::WatchGameRequest {
            game_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(matches!(
        watch.next().await.unwrap().unwrap().kind.unwrap(),
        pb::game_event::Kind::Created(_)
    ));
    ga.play_move(play(&b, "11-15")).await.unwrap();
    assert!(matches!(
        watch.next().await.unwrap().unwrap().kind.unwrap(),
        pb::game_event::Kind::MovePlayed(_)
    ));
    // The same move raced on both replicas: applied once.
    let (r1, r2) = tokio::join!(
        ga.play_move(play(&w, "23-19")),
        gb.play_move(play(&w, "23-19"))
    );
    assert_eq!(
        [r1.is_ok(), r2.is_ok()].iter().filter(|x| **x).count(),
        1,
        "{r1:?} {r2:?}"
    );
    // Replica A is killed mid-game; the game goes on on B.
    a.kill().await;
    gb.play_move(play(&b, "8-11")).await.unwrap();
    let v = gb
        .resign(authed(
            &w.token,
            pb::GameActionRequest {
                game_id: id.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(v.moves.len(), 3);
    assert_eq!(v.status.unwrap().outcome, pb::Outcome::BlackWins as i32);
    // The finished game is in PostgreSQL (listed) and on the finished stream in Redis.
    let list = gb
        .list_games(pb::ListGamesRequest {
            player_id: b.id.clone(),
            limit: 5,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.recent.len(), 1);
    let live = draughts_store::open_live_store(&redis.url(), "test:")
        .await
        .unwrap();
    // At least once (the finishing write and the archive schedule may both publish before the game is
    // marked archived; consumers deduplicate by game id), and only this game.
    let entries = live.range("games.finished", None, 10).await.unwrap();
    assert!(!entries.is_empty());
    for e in &entries {
        let event = draughts_proto::contract::finished::decode(&e.payload).unwrap();
        assert_eq!(event.game_id, id);
    }
    b_server.stop().await;
}

/// GetGame counts the game's spectators on every replica (two replicas on one Redis): open WatchGame
/// streams of anyone but its players; a closed stream stops counting.
#[tokio::test]
async fn get_game_counts_spectators_on_every_replica() {
    use tokio_stream::StreamExt;
    let redis = draughts_testkit::RedisServer::start().expect("redis-server");
    let config = || {
        let mut c = config();
        c.backends.redis_url = redis.url();
        c
    };
    let a = Server::start(config()).await;
    let b_server = Server::start(config()).await;
    let (ca, cb) = (a.channel().await, b_server.channel().await);
    let (w, b) = (guest(&ca, "W").await, guest(&cb, "B").await);
    let g = draughts_testkit::agreed_game(
        &ca,
        &w.token,
        &b.token,
        create_req(Variant::English, &w, &b, ""),
    )
    .await
    .unwrap();
    let id = g.game_id.clone();
    let count = |ch: Channel| {
        let id = id.clone();
        async move {
            GamesClient::new(ch)
                .get_game(pb::GetGameRequest { game_id: id })
                .await
                .unwrap()
                .into_inner()
                .spectators
        }
    };
    // Waits until GetGame (on replica a) says `n`.
    let expect = |n: u32| {
        let ca = ca.clone();
        async move {
            for _ in 0..100 {
                if count(ca.clone()).await == n {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            panic!("the spectator count never became {n}");
        }
    };
    let open = |ch: Channel, token: Option<String>| {
        let id = id.clone();
        async move {
            let req = pb::WatchGameRequest { game_id: id };
            let req = match &token {
                Some(t) => authed(t, req),
                None => tonic::Request::new(req),
            };
            let mut s = GamesClient::new(ch)
                .watch_game(req)
                .await
                .unwrap()
                .into_inner();
            s.next().await.unwrap().unwrap();
            s
        }
    };
    assert_eq!(count(ca.clone()).await, 0);
    // The players' own streams are not spectators.
    let _white = open(ca.clone(), Some(w.token.clone())).await;
    let _black = open(cb.clone(), Some(b.token.clone())).await;
    // Two spectators on replica a (one anonymous), one on replica b.
    let s1 = open(ca.clone(), None).await;
    let watcher = guest(&cb, "Watcher").await;
    let _s2 = open(ca.clone(), Some(watcher.token.clone())).await;
    let _s3 = open(cb.clone(), Some(watcher.token.clone())).await;
    expect(3).await;
    assert_eq!(count(cb.clone()).await, 3, "the same on the other replica");
    drop(s1);
    expect(2).await;
}
