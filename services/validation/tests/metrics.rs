//! The metrics an operator needs, scraped from the Prometheus endpoint: RPC latency histograms
//! (`_bucket` series, so replicas aggregate), moves played, open watchers, games in progress, and
//! the pending entries and lag of each consumer group of `games.finished`.

use std::time::Duration;

use draughts_engine::{RuleSet, Variant};
use draughts_proto::convert;
use draughts_proto::pb;
use draughts_proto::pb::auth_client::AuthClient;
use draughts_proto::pb::games_client::GamesClient;
use draughts_testkit::{ServiceUnderTest, agreed_game, authed};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn scrape(addr: std::net::SocketAddr) -> String {
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    socket
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    socket.read_to_string(&mut text).await.unwrap();
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_metrics_are_exported() {
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let metrics =
        draughts_runtime::telemetry::serve_metrics("127.0.0.1:0".parse().unwrap(), async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    let mut config = draughts_validation::Config::for_tests();
    config.auth.rate_limit_guest_per_minute = 1_000_000;
    config.auth.rate_limit_anonymous_per_minute = 1_000_000;
    let server = ServiceUnderTest::start(|listener, shutdown| {
        draughts_validation::run(config, listener, shutdown)
    })
    .await;
    let ch = server.channel().await;
    let mut guests = Vec::new();
    for name in ["W", "B"] {
        let r = AuthClient::new(ch.clone())
            .create_guest(pb::CreateGuestRequest {
                display_name: name.into(),
            })
            .await
            .unwrap()
            .into_inner();
        guests.push((r.player.unwrap().id, r.token));
    }
    let request = pb::CreateGameRequest {
        rules: Some(convert::rules_to_wire(RuleSet::new(Variant::International))),
        time_control: Some(pb::TimeControl {
            kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                base_ms: 600_000,
                increment_ms: 0,
            })),
        }),
        black: Some(pb::Player {
            id: guests[1].0.clone(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let id = agreed_game(&ch, &guests[0].1, &guests[1].1, request)
        .await
        .unwrap()
        .game_id;
    let mut games = GamesClient::new(ch.clone());
    let _watch = games
        .watch_game(pb::WatchGameRequest {
            game_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    games
        .play_move(authed(
            &guests[0].1,
            pb::PlayMoveRequest {
                game_id: id,
                r#move: Some(pb::MoveInput {
                    r#move: Some(pb::move_input::Move::Text("32-28".into())),
                }),
                expected_ply: None,
            },
        ))
        .await
        .unwrap();
    let wanted = [
        "draughts_rpc_duration_seconds_bucket{method=\"/draughts.v1.Games/PlayMove\",le=\"0.005\"}",
        "draughts_rpc_requests_total{",
        "draughts_games_moves_total 1",
        "draughts_watchers_open 1",
        "draughts_games_in_progress ",
        "draughts_stream_pending{stream=\"games.finished\",group=\"archive-check\"}",
        "draughts_stream_lag{stream=\"games.finished\",group=\"archive-check\"}",
        "draughts_stream_length{stream=\"games.finished\"}",
        "draughts_connections_open ",
    ];
    // The gauges of the timers are sampled every 10 s, the first time at start.
    let mut text = String::new();
    for _ in 0..100 {
        text = scrape(metrics).await;
        if wanted.iter().all(|w| text.contains(w)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for w in wanted {
        assert!(text.contains(w), "no {w} in\n{text}");
    }
    assert!(
        !text.contains("quantile="),
        "histograms, not summaries:\n{text}"
    );
    server.stop().await;
}
