//! Berserk through gRPC (Games.Berserk): an arena's game (created by a pairing service with the admin
//! scope and `berserk_allowed`) lets each player halve their own clock and give up the increment,
//! once, before their own first move; never the opponent's clock, never after a first move, never in a
//! game that does not allow it, and a player can never allow it themselves. The flag reaches the
//! watchers, the PDN and the `games.finished` entry.

use draughts_engine::{RuleSet, Variant};
use draughts_proto::contract::finished;
use draughts_proto::convert;
use draughts_proto::pb;
use draughts_proto::pb::games_client::GamesClient;
use draughts_testkit::{ServiceUnderTest, authed, guest};
use draughts_validation::Config;
use tonic::Code;
use tonic::transport::Channel;

async fn start() -> (ServiceUnderTest, Channel, String) {
    let mut config = Config::for_tests();
    config.auth.rate_limit_guest_per_minute = 1_000_000;
    config.auth.rate_limit_anonymous_per_minute = 1_000_000;
    let admin = config.auth.admin_api_key.clone().unwrap();
    let server = ServiceUnderTest::start(|listener, shutdown| {
        draughts_validation::run(config, listener, shutdown)
    })
    .await;
    let channel = server.channel().await;
    (server, channel, admin)
}

fn player(id: &str) -> Option<pb::Player> {
    Some(pb::Player {
        id: id.into(),
        ..Default::default()
    })
}

/// English (Black moves first), 60 s + 10 s.
fn arena_game(white: &str, black: &str, id: &str) -> pb::CreateGameRequest {
    pb::CreateGameRequest {
        rules: Some(convert::rules_to_wire(RuleSet::new(Variant::English))),
        time_control: Some(pb::TimeControl {
            kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                base_ms: 60_000,
                increment_ms: 10_000,
            })),
        }),
        white: player(white),
        black: player(black),
        rated: false,
        game_id: id.into(),
        berserk_allowed: true,
        ..Default::default()
    }
}

fn action(token: &str, id: &str) -> tonic::Request<pb::GameActionRequest> {
    authed(token, pb::GameActionRequest { game_id: id.into() })
}

async fn play(games: &mut GamesClient<Channel>, token: &str, id: &str, mv: &str) -> pb::GameView {
    games
        .play_move(authed(
            token,
            pb::PlayMoveRequest {
                game_id: id.into(),
                r#move: Some(pb::MoveInput {
                    r#move: Some(pb::move_input::Move::Text(mv.into())),
                }),
                expected_ply: None,
            },
        ))
        .await
        .unwrap()
        .into_inner()
}

fn clocks(view: &pb::GameView) -> (u64, u64) {
    let c = view.clocks.unwrap();
    (c.white_ms, c.black_ms)
}

#[tokio::test]
async fn each_player_of_an_arena_game_may_go_berserk_once_before_their_first_move() {
    let (server, ch, admin) = start().await;
    let mut games = GamesClient::new(ch.clone());
    let (ann, bob, eve) = (
        guest(&ch, "Ann").await,
        guest(&ch, "Bob").await,
        guest(&ch, "Eve").await,
    );
    let id = "t00000000000000a1-1";
    let created = games
        .create_game(authed(&admin, arena_game(&ann.id, &bob.id, id)))
        .await
        .unwrap()
        .into_inner();
    assert!(created.berserk_allowed);
    assert!(!created.white_berserk && !created.black_berserk);

    // Ann (White) goes berserk before any move: her clock only, halved.
    let view = games
        .berserk(action(&ann.token, id))
        .await
        .unwrap()
        .into_inner();
    assert!(view.white_berserk && !view.black_berserk);
    assert_eq!(clocks(&view), (30_000, 60_000));
    // Once: a repeat answers the game unchanged.
    let again = games
        .berserk(action(&ann.token, id))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (again.revision, clocks(&again)),
        (view.revision, (30_000, 60_000))
    );
    // Not a player: refused, and nothing changes.
    let e = games.berserk(action(&eve.token, id)).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    let e = games
        .berserk(tonic::Request::new(pb::GameActionRequest {
            game_id: id.into(),
        }))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");

    // Bob (Black) moves first: too late for him to go berserk.
    play(&mut games, &bob.token, id, "11-15").await;
    let e = games.berserk(action(&bob.token, id)).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("first move"), "{e:?}");
    play(&mut games, &ann.token, id, "23-19").await;
    // Both have moved: the clocks run. Bob earns his 10 s increment (the move takes far less than
    // 10 s), Ann never does.
    let view = play(&mut games, &bob.token, id, "8-11").await;
    assert!(clocks(&view).1 > 60_000, "{:?}", clocks(&view));
    let view = play(&mut games, &ann.token, id, "22-17").await;
    assert!(clocks(&view).0 <= 30_000, "{:?}", clocks(&view));
    assert!(view.white_berserk && !view.black_berserk);

    // Watchers: the berserk event follows the creation (whose clocks are the full base).
    let mut watch = games
        .watch_game(pb::WatchGameRequest { game_id: id.into() })
        .await
        .unwrap()
        .into_inner();
    let first = watch.message().await.unwrap().unwrap();
    match first.kind {
        Some(pb::game_event::Kind::Created(v)) => {
            assert_eq!(clocks(&v), (60_000, 60_000));
            assert!(v.berserk_allowed && !v.white_berserk);
        }
        other => panic!("{other:?}"),
    }
    let second = watch.message().await.unwrap().unwrap();
    assert_eq!(second.seq, 2);
    assert_eq!(
        second.kind,
        Some(pb::game_event::Kind::Berserk(pb::Color::White as i32))
    );
    drop(watch);

    // The PDN says so; the finished entry carries it.
    let pdn = games
        .export_pdn(pb::GetGameRequest { game_id: id.into() })
        .await
        .unwrap()
        .into_inner()
        .pdn;
    assert!(pdn.contains("[WhiteBerserk \"1\"]"), "{pdn}");
    assert!(!pdn.contains("BlackBerserk"), "{pdn}");
    games.resign(action(&bob.token, id)).await.unwrap();
    let mut entry = None;
    for _ in 0..100 {
        let listed = games
            .list_finished_games(authed(&admin, pb::ListFinishedGamesRequest::default()))
            .await
            .unwrap()
            .into_inner();
        if let Some(e) = listed.games.into_iter().find(|g| g.game_id == id) {
            entry = Some(e);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let event = finished::decode(&entry.expect("archived").event).unwrap();
    assert!(event.white.berserk && !event.black.berserk);
    assert_eq!(event.outcome, finished::Outcome::WhiteWins);
    server.stop().await;
}

#[tokio::test]
async fn berserk_is_refused_where_no_arena_allows_it() {
    let (server, ch, admin) = start().await;
    let mut games = GamesClient::new(ch.clone());
    let (ann, bob) = (guest(&ch, "Ann").await, guest(&ch, "Bob").await);
    // A player cannot allow it: not even for a game against the computer.
    let mut own = arena_game(&ann.id, "ai:1", "");
    let e = games
        .create_game(authed(&ann.token, own.clone()))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("berserk_allowed"), "{e:?}");
    own.berserk_allowed = false;
    let game = games
        .create_game(authed(&ann.token, own))
        .await
        .unwrap()
        .into_inner();
    assert!(!game.berserk_allowed);
    let e = games
        .berserk(action(&ann.token, &game.game_id))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    let view = games
        .get_game(pb::GetGameRequest {
            game_id: game.game_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(clocks(&view), (60_000, 60_000));
    assert!(!view.white_berserk);
    // A game between two people created without it (a pairing service's ordinary game).
    let mut plain = arena_game(&ann.id, &bob.id, "t00000000000000a2-1");
    plain.berserk_allowed = false;
    games.create_game(authed(&admin, plain)).await.unwrap();
    let e = games
        .berserk(action(&bob.token, "t00000000000000a2-1"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    // Correspondence games have no clock to halve.
    let mut slow = arena_game(&ann.id, &bob.id, "t00000000000000a3-1");
    slow.time_control = Some(pb::TimeControl {
        kind: Some(pb::time_control::Kind::Correspondence(pb::Correspondence {
            days_per_move: 3,
        })),
    });
    let e = games.create_game(authed(&admin, slow)).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    // An unknown game.
    let e = games
        .berserk(action(&ann.token, "t00000000000000a9-1"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    server.stop().await;
}
